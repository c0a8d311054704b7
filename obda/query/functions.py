"""Computed FILTER and BIND operands: ``+ - * /``, ``!`` and the SPARQL 1.1 functions obda evaluates.

A FILTER operand that is not a variable or a constant becomes a value expression of the typed plan:
:class:`~obda.model.values.Arithmetic` for ``+ - * /`` and unary minus, :class:`~obda.model.values.Call` for a
function of :data:`~obda.model.values.FUNCTIONS` (docs/semantics.md, "Functions and arithmetic in FILTER and
BIND").  A boolean function alone in a FILTER (``FILTER(CONTAINS(?n, "a"))``) is the comparison of its value
with ``true``; under ``!`` with ``false``.  Any other function stays refused with the
:class:`~obda.query.expressions.FilterProblem` that locates its name.

Types are not checked here: obda binds each variable to one typed column or term, so the unfolder
(``obda.mapping.functions``) knows each argument's type and turns a type error into a false condition, as
SPARQL's FILTER does with an error.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Callable

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Literal as RDFLiteral, URIRef, Variable

from obda.model.query import CASTS, XSD, Arithmetic, Call, Comparison, Literal, Term, is_computed, replacement_parts

# rdflib's name of a builtin -> (obda's function name, its argument keys; "arg" of CONCAT is a list)
_BUILTINS = {
    "Builtin_STR": ("STR", ("arg",)),
    "Builtin_STRLEN": ("STRLEN", ("arg",)),
    "Builtin_LCASE": ("LCASE", ("arg",)),
    "Builtin_UCASE": ("UCASE", ("arg",)),
    "Builtin_CONTAINS": ("CONTAINS", ("arg1", "arg2")),
    "Builtin_STRSTARTS": ("STRSTARTS", ("arg1", "arg2")),
    "Builtin_STRENDS": ("STRENDS", ("arg1", "arg2")),
    "Builtin_CONCAT": ("CONCAT", ("arg",)),
    "Builtin_SUBSTR": ("SUBSTR", ("arg", "start", "length")),
    "Builtin_STRBEFORE": ("STRBEFORE", ("arg1", "arg2")),
    "Builtin_STRAFTER": ("STRAFTER", ("arg1", "arg2")),
    "Builtin_ABS": ("ABS", ("arg",)),
    "Builtin_ROUND": ("ROUND", ("arg",)),
    "Builtin_CEIL": ("CEIL", ("arg",)),
    "Builtin_FLOOR": ("FLOOR", ("arg",)),
    "Builtin_REGEX": ("REGEX", ("text", "pattern", "flags")),
    "Builtin_REPLACE": ("REPLACE", ("arg", "pattern", "replacement", "flags")),
    "Builtin_YEAR": ("YEAR", ("arg",)),
    "Builtin_MONTH": ("MONTH", ("arg",)),
    "Builtin_DAY": ("DAY", ("arg",)),
    "Builtin_HOURS": ("HOURS", ("arg",)),
    "Builtin_MINUTES": ("MINUTES", ("arg",)),
    "Builtin_SECONDS": ("SECONDS", ("arg",)),
    "Builtin_IF": ("IF", ("arg1", "arg2", "arg3")),
    "Builtin_COALESCE": ("COALESCE", ("arg",)),
    "Builtin_BOUND": ("BOUND", ("arg",)),
    "Builtin_LANG": ("LANG", ("arg",)),
    "Builtin_LANGMATCHES": ("LANGMATCHES", ("arg1", "arg2")),
    "Builtin_isIRI": ("isIRI", ("arg",)),
    "Builtin_isURI": ("isIRI", ("arg",)),
    "Builtin_isLITERAL": ("isLITERAL", ("arg",)),
    "Builtin_isBLANK": ("isBLANK", ("arg",)),
    "Builtin_isNUMERIC": ("isNUMERIC", ("arg",)),
    "Builtin_DATATYPE": ("DATATYPE", ("arg",)),
    "Builtin_sameTerm": ("sameTerm", ("arg1", "arg2")),
}
#: functions of a term's kind: its type, language tag and datatype are static per term map (folded when unfolded)
TERM_TESTS = frozenset({"isIRI", "isLITERAL", "isBLANK", "isNUMERIC"})
TIME_FUNCTIONS = frozenset({"YEAR", "MONTH", "DAY", "HOURS", "MINUTES", "SECONDS"})
SUPPORTED = ", ".join(sorted({f for f, _ in _BUILTINS.values()})) + ", the casts " + ", ".join(CASTS.values())
TRUE = Literal("true", XSD + "boolean")
FALSE = Literal("false", XSD + "boolean")


def is_boolean_call(e) -> bool:
    """Whether rdflib expression ``e`` is a boolean function obda computes (a FILTER may be it alone)."""
    from obda.query.expressions import unwrap

    e = unwrap(e)
    return isinstance(e, CompValue) and e.name in _BUILTINS and _BUILTINS[e.name][0] in ("CONTAINS", "STRSTARTS",
                                                                                          "STRENDS", "REGEX", "BOUND",
                                                                                          "LANGMATCHES", "sameTerm",
                                                                                          *TERM_TESTS)


def boolean_leaf(e, term: Callable[[Identifier], Term], positive: bool) -> Comparison:
    """A boolean function alone in a FILTER: ``f(…) = true`` (``= false`` under ``!``)."""
    return Comparison("=", computed(e, term), TRUE if positive else FALSE)


def computed(e, term: Callable[[Identifier], Term]):
    """A value expression of a FILTER or BIND operand: a term, arithmetic, or a supported function call."""
    from obda.query.expressions import FilterProblem, Hint, _signed_constant, _unsupported, unwrap

    e = _signed_constant(unwrap(e))
    if isinstance(e, (Variable, URIRef, RDFLiteral)):
        return term(e)
    if isinstance(e, CompValue):
        name = e.name
        if name in ("AdditiveExpression", "MultiplicativeExpression"):
            out = computed(e["expr"], term)
            for op, other in zip(e["op"], e["other"]):
                out = Arithmetic(str(op), out, computed(other, term))
            return out
        if name == "UnaryMinus":
            return Arithmetic("-", Literal("0", XSD + "integer"), computed(e["expr"], term))
        if name == "UnaryPlus":
            return computed(e["expr"], term)
        if name in _BUILTINS:
            fn, keys = _BUILTINS[name]
            if fn == "CONCAT":
                args = tuple(computed(a, term) for a in (e.get("arg") or []))
                if not args:
                    return Literal("")
                return Call(fn, args)
            if fn == "REGEX":
                return _regex(e, term)
            if fn == "REPLACE":
                return _replace(e, term)
            if fn == "SUBSTR":
                return _substr(e, term)
            if fn == "COALESCE":
                return Call(fn, tuple(computed(a, term) for a in (e.get("arg") or [])))
            if fn == "IF":
                return Call(fn, (condition_value(e["arg1"], term), computed(e["arg2"], term),
                                 computed(e["arg3"], term)))
            return Call(fn, tuple(computed(e[k], term) for k in keys))
        if name == "Function" and str(e["iri"]) in CASTS:  # xsd:integer(?x) …: a cast (§17.5)
            args = list(e.get("expr") or [])
            if len(args) != 1 or e.get("distinct"):
                raise FilterProblem("function call", f"the cast <{e['iri']}> takes one argument", Hint("callee"))
            if str(e["iri"]) == XSD + "dateTime" and isinstance(unwrap(args[0]), RDFLiteral):
                return _datetime_constant(unwrap(args[0]), term)
            return Call(CASTS[str(e["iri"])], (computed(args[0], term),))
        if name in ("RelationalExpression", "ConditionalOrExpression", "ConditionalAndExpression", "UnaryNot"):
            # a boolean value (BIND(?v > 90 AS ?hot), SELECT ((?y = ?z) AS ?eq)): true, false, or an error
            # (unbound) where SPARQL's comparison is one, as IF's condition
            return condition_value(e, term)
    problem = _unsupported(e, operand=True)
    if isinstance(e, CompValue) and e.name.startswith("Builtin_"):
        fn = e.name[len("Builtin_"):]
        raise FilterProblem(fn, f"function {fn} is not supported (obda computes {SUPPORTED}, + - * / and !)",
                            problem.hint)
    raise problem


_DATETIME_TEXT = re.compile(r"^-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


def _datetime_constant(lit: RDFLiteral, term):
    """``xsd:dateTime("2024-01-01T10:00:00")``: the constant ``"2024-01-01T10:00:00"^^xsd:dateTime``, compared with
    a time like one written so.  Text that is not a dateTime's lexical form is refused where it is written (SPARQL
    makes the cast an error, which would make the FILTER false for every row: a typo to report, not an answer)."""
    from obda.query.expressions import FilterProblem, Hint

    text = str(lit)
    ok = lit.language is None and (lit.datatype is None or str(lit.datatype) in (XSD + "string", XSD + "dateTime"))
    if ok and _DATETIME_TEXT.match(text.strip()):
        try:
            datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            ok = False
    else:
        ok = False
    if not ok:
        raise FilterProblem("xsd:dateTime", f"xsd:dateTime({lit.n3()}): not an xsd:dateTime (write it as "
                            "2024-01-01T10:00:00, with a fraction of a second or a time zone if needed)",
                            Hint("callee"))
    return term(RDFLiteral(text.strip(), datatype=URIRef(XSD + "dateTime")))


def condition_value(e, term):
    """A boolean expression as a value (IF's condition): comparisons, ``&&``, ``||``, ``!`` and boolean
    functions, as :class:`Call` (an error inside stays an error: SQL's NULL, three-valued)."""
    from obda.query.expressions import FilterProblem, Hint, unwrap

    e = unwrap(e)
    if isinstance(e, CompValue):
        if e.name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            parts = tuple(condition_value(p, term) for p in [e["expr"], *e["other"]])
            return Call("OR" if e.name == "ConditionalOrExpression" else "AND", parts)
        if e.name == "UnaryNot":
            return Call("NOT", (condition_value(e["expr"], term),))
        if e.name == "RelationalExpression":
            op = str(e["op"])
            return Call(op, (computed(e["expr"], term), computed(e["other"], term)))
    return computed(e, term)


def _regex(e, term):
    """``REGEX(text, "pattern")`` or with the flag ``"i"``: the pattern (and flags) must be string constants."""
    pattern, flags = _constant_string(e, "pattern", "REGEX", 'REGEX(?x, "^ab")'), _flags(e, "REGEX")
    return Call("REGEX", (computed(e["text"], term), term(pattern)) + ((term(flags),) if flags is not None else ()))


def _replace(e, term):
    """``REPLACE(text, "pattern", "replacement")`` or with the flag ``"i"``: pattern, replacement and flags string
    constants.  The replacement is XPath's (``fn:replace``): ``$1`` … ``$9`` a group's text, ``\\$`` and ``\\\\`` a
    ``$`` and a ``\\``; a pattern that matches the empty string is an error for every row (XPath FORX0003), refused."""
    import re

    from obda.query.expressions import FilterProblem, Hint

    how = 'REPLACE(?x, "[^a-z]", "-")'
    pattern, flags = _constant_string(e, "pattern", "REPLACE", how), _flags(e, "REPLACE")
    replacement = _constant_string(e, "replacement", "REPLACE", how)
    try:
        compiled = re.compile(str(pattern), re.IGNORECASE if flags is not None and str(flags) == "i" else 0)
    except re.error as err:
        raise FilterProblem("REPLACE", f"REPLACE's pattern {str(pattern)!r} is not a regular expression: {err}",
                            Hint("word", "REPLACE")) from None
    if compiled.search("") is not None:
        raise FilterProblem("REPLACE", f"REPLACE's pattern {str(pattern)!r} matches the empty string, which XPath's "
                            "fn:replace makes an error for every row (FORX0003); make it match at least one character",
                            Hint("word", "REPLACE"))
    parts = replacement_parts(str(replacement))
    if parts is None:
        raise FilterProblem("REPLACE", f"REPLACE's replacement {str(replacement)!r}: a $ must be followed by one digit "
                            "1-9 (a group, $1 … $9) and a \\ by $ or \\ (XPath fn:replace)", Hint("word", "REPLACE"))
    if max((p for p in parts if isinstance(p, int)), default=0) > compiled.groups:
        raise FilterProblem("REPLACE", f"REPLACE's replacement {str(replacement)!r} refers to a group its pattern "
                            f"does not have (it has {compiled.groups})", Hint("word", "REPLACE"))
    args = (computed(e["arg"], term), term(pattern), term(replacement))
    return Call("REPLACE", args + ((term(flags),) if flags is not None else ()))


def _constant_string(e, key: str, fn: str, example: str):
    """Argument ``key`` of ``e``: a simple or xsd:string constant (the located error of ``fn`` otherwise)."""
    from obda.query.expressions import FilterProblem, Hint, unwrap

    v = unwrap(e[key])
    if not (isinstance(v, RDFLiteral) and v.datatype in (None, URIRef(XSD + "string")) and v.language is None):
        raise FilterProblem(fn, f"{fn} needs its {key} as a string constant ({example})", Hint("word", fn))
    return v


def _flags(e, fn: str):
    """The flags of REGEX / REPLACE, None or ``""`` / ``"i"`` (case-insensitive): the only ones obda supports."""
    from obda.query.expressions import FilterProblem, Hint, unwrap

    flags = unwrap(e["flags"]) if "flags" in e else None  # CompValue.get: the key
    if flags is not None and not (isinstance(flags, RDFLiteral) and str(flags) in ("", "i")):
        raise FilterProblem(f"{fn} flags", f"{fn} flags {flags!s:.20}: only \"i\" (case-insensitive) is supported",
                            Hint("word", fn))
    return flags


def _substr(e, term):
    """``SUBSTR(s, start)`` / ``SUBSTR(s, start, length)``: start and length integer constants, start at least 1
    and length at least 0 (where SQL engines agree with XPath's fn:substring; elsewhere they differ)."""
    from obda.query.expressions import FilterProblem, Hint, _signed_constant, unwrap

    args = [computed(e["arg"], term)]
    for key, least in (("start", 1), ("length", 0)):
        if key not in e:
            continue
        c = _signed_constant(unwrap(e[key]))
        ok = isinstance(c, RDFLiteral) and c.datatype == URIRef(XSD + "integer")
        if not ok or int(c) < least:
            raise FilterProblem("SUBSTR", f"SUBSTR needs its {key} as an integer constant of at least {least} "
                                f"(SUBSTR(?s, 2, 3)); SQL engines disagree with XPath's fn:substring elsewhere",
                                Hint("word", "SUBSTR"))
        args.append(term(c))
    return Call("SUBSTR", tuple(args))


def may_error(c: Comparison) -> bool:
    """Whether a comparison computes (a function or arithmetic: a type error or a division by zero is possible);
    a test of a term (``BOUND(?x)``, ``isIRI(?x)``, ``sameTerm(?x, ?y)``, …) alone is never an error."""
    if isinstance(c.left, Call) and c.left.name in _NEVER_ERROR and not any(is_computed(a) for a in c.left.args) \
            and c.right in (TRUE, FALSE):
        return False
    return is_computed(c.left) or is_computed(c.right)


_NEVER_ERROR = frozenset({"BOUND", "sameTerm", *TERM_TESTS})


def or_problem():
    """Why ``a || b`` with a computed ``a`` is refused in a SELECT without DISTINCT."""
    from obda.query.expressions import FilterProblem, Hint

    return FilterProblem(
        "|| over a computed condition",
        "in a SELECT without DISTINCT, an alternative of || (or a part of !(… && …)) that computes a function or "
        "arithmetic must come last: the later alternatives are made exclusive by negating it, and an error in it "
        "(SPARQL's FILTER treats it as false) would hide them; reorder the alternatives or use SELECT DISTINCT",
        Hint("punct", "||"),
    )


def time_readers(e, time_vars, inside_time_fn: bool = False):
    """The time variables value expression ``e`` reads outside a date function's or STR's direct argument
    (``HOURS(?t)`` reads ?t's hour, a number, ``STR(?t)`` its text; ``?t + 1`` or ``CONCAT(?t)`` the time
    itself)."""
    if isinstance(e, Call):
        for a in e.args:
            yield from time_readers(a, time_vars, e.name in TIME_FUNCTIONS or e.name in ("STR", "xsd:string"))
    elif isinstance(e, Arithmetic):
        yield from time_readers(e.left, time_vars)
        yield from time_readers(e.right, time_vars)
    elif e in time_vars and not inside_time_fn:
        yield e


def time_function_problem(c: Comparison, time_vars) -> object | None:
    """A computed side reading a time variable other than through YEAR … SECONDS."""
    from obda.query.expressions import FilterProblem, Hint

    for side in (c.left, c.right):
        if is_computed(side):
            for v in time_readers(side, time_vars):
                if v in time_vars:
                    return FilterProblem("function of a time variable",
                                         f"{side} computes with the time variable {v} (bound by GRAPH); only YEAR, "
                                         "MONTH, DAY, HOURS, MINUTES and SECONDS of it, and its text STR(…), can be "
                                         "computed, or compare "
                                         "it with another time variable or an xsd:dateTime constant",
                                         Hint("var", v.name))
    return None
