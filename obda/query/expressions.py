"""FILTER expressions: from rdflib's parse tree to disjunctive normal form.

The supported fragment: comparisons ``< <= = != > >=`` between variables,
constants and computed values (``+ - * /`` and the functions of
:mod:`obda.query.functions`), boolean functions, combined with ``&&``, ``||``
and ``!`` (any nesting, parentheses).  :func:`to_dnf` returns the alternatives of the expression, each
a conjunction of :class:`~obda.model.query.Comparison`; SPARQL's three-valued
logic (an error is neither true nor false) distributes like Kleene logic, so
the DNF keeps exactly the solutions for which the FILTER is true.

Anything else (other functions, ``IN``, ``EXISTS``, aggregates)
raises :class:`FilterProblem`, which says what to look for in the FILTER's
tokens so the caller can report a line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Literal as RDFLiteral, URIRef, Variable

from obda.model.query import XSD, Aggregate, Arithmetic, Comparison, Connective, Literal, Shifted, Term, Var
from obda.query import functions

# rdflib's single-child wrappers of the expression grammar.
_WRAPPERS = (
    "ConditionalOrExpression",
    "ConditionalAndExpression",
    "RelationalExpression",
    "AdditiveExpression",
    "MultiplicativeExpression",
)

AGGREGATE_WORDS = {  # rdflib's aggregate node → its SPARQL name
    "Aggregate_Count": "COUNT",
    "Aggregate_Sum": "SUM",
    "Aggregate_Avg": "AVG",
    "Aggregate_Min": "MIN",
    "Aggregate_Max": "MAX",
    "Aggregate_Sample": "SAMPLE",
    "Aggregate_GroupConcat": "GROUP_CONCAT",
}


@dataclass(frozen=True)
class Hint:
    """What to search for in a FILTER's tokens to locate a construct.

    kind: ``word`` (keyword / function name), ``words`` (keyword sequence),
    ``punct`` (operator), ``var`` (variable name), ``callee`` (IRI or prefixed
    name followed by ``(``).
    """

    kind: str
    text: str = ""


class FilterProblem(Exception):
    """An unsupported or ill-typed part of a FILTER, not yet located in the text."""

    def __init__(self, construct: str, message: str, hint: Hint):
        self.construct = construct
        self.message = message
        self.hint = hint
        super().__init__(message)


def unwrap(e):
    """Strip rdflib's chain of single-child expression nodes (``expr`` only, no operator); ``x IN (a, b)`` is read
    as ``x = a || x = b`` and ``x NOT IN (a, b)`` as ``x != a && x != b`` (SPARQL 1.1 §17.4.1.9-10: the same
    value, and the same error where a comparison is one)."""
    while isinstance(e, CompValue) and e.name in _WRAPPERS and e.op is None and not e.other:
        e = e["expr"]
    if isinstance(e, CompValue) and e.name == "RelationalExpression" and str(e.get("op")) in ("IN", "NOT IN"):
        return _membership(e)
    return e


_RDF_NIL = "http://www.w3.org/1999/02/22-rdf-syntax-ns#nil"


def _membership(e: CompValue) -> CompValue:
    op = str(e["op"])
    other = e["other"]
    items = [] if isinstance(other, URIRef) and str(other) == _RDF_NIL else list(other or [])  # rdflib: () is rdf:nil
    if not items:  # IN () is false, NOT IN () true (§17.4.1.9-10): 1 = 0 / 1 = 1, folded when unfolded
        one = RDFLiteral(1)
        return CompValue("RelationalExpression", expr=one, op="=", other=RDFLiteral(0 if op == "IN" else 1))
    cmp = "=" if op == "IN" else "!="
    parts = [CompValue("RelationalExpression", expr=e["expr"], op=cmp, other=x) for x in items]
    if len(parts) == 1:
        return parts[0]
    out = CompValue("ConditionalOrExpression" if op == "IN" else "ConditionalAndExpression", expr=parts[0],
                    other=parts[1:])
    if op == "IN" and _distinct_constants(items):  # a value equals at most one: the alternatives are exclusive
        out["exclusive"] = True
    return out


def _distinct_constants(items) -> bool:
    """Whether ``items`` are constants of pairwise different values (so that no value equals two of them)."""
    values = []
    for x in items:
        x = unwrap(x)
        if not isinstance(x, (RDFLiteral, URIRef)):
            return False
        values.append(x.toPython() if isinstance(x, RDFLiteral) else ("iri", str(x)))
    try:
        return len(set(values)) == len(values)
    except TypeError:  # a value Python cannot hash: not known distinct
        return False


def aggregate_name(e) -> str | None:
    """SPARQL name of the first aggregate inside expression ``e`` (depth-first), if any."""
    e = unwrap(e)
    if isinstance(e, CompValue):
        if e.name in AGGREGATE_WORDS:
            return AGGREGATE_WORDS[e.name]
        for v in e.values():
            for x in v if isinstance(v, list) else [v]:
                found = aggregate_name(x)
                if found:
                    return found
    elif isinstance(e, list):
        for x in e:
            found = aggregate_name(x)
            if found:
                return found
    return None


def tree_nodes(x):
    """Every node of an rdflib parse tree ``x`` (its CompValues, lists and terms), depth first, each before its
    children."""
    yield x
    if isinstance(x, CompValue):
        for v in x.values():
            yield from tree_nodes(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from tree_nodes(v)


def expression_variables(e) -> list[str]:
    """Names of the variables in expression ``e``, in order of first occurrence."""
    return list(dict.fromkeys(str(x) for x in tree_nodes(e) if isinstance(x, Variable)))


def _comparison(e: CompValue, term: Callable[[Identifier], Term]) -> Comparison:
    op = str(e["op"])
    left, right = unwrap(e["expr"]), unwrap(e["other"])
    sides = []
    for side in (left, right):
        shifted = _shifted(side, term)
        if shifted is not None:
            sides.append(shifted)
            continue
        sides.append(functions.computed(side, term))
    return Comparison(op, sides[0], sides[1])


def _shifted(e, term: Callable[[Identifier], Term]) -> Shifted | None:
    """``?t + duration`` / ``?t - duration`` (an interval join's side) as a :class:`Shifted`, else None."""
    if not (isinstance(e, CompValue) and e.name == "AdditiveExpression" and len(e["op"]) == 1):
        return None
    base, other = unwrap(e["expr"]), unwrap(e["other"][0])
    if not (isinstance(base, Variable) and isinstance(other, RDFLiteral) and str(other.datatype) in DURATION_TYPES):
        return None
    d = duration_micros(other)
    return Shifted(term(base), d if str(e["op"][0]) == "+" else -d)


def _signed_constant(e):
    """A sign before a numeric constant (``?v > -10``), which rdflib parses as unary arithmetic, as the signed
    literal (same datatype); any other expression unchanged."""
    if isinstance(e, CompValue) and e.name in ("UnaryMinus", "UnaryPlus"):
        inner = _signed_constant(unwrap(e["expr"]))
        if isinstance(inner, RDFLiteral) and str(inner.datatype) in _NUMERIC:
            lex = str(inner).lstrip("+")
            if e.name == "UnaryMinus":
                lex = lex[1:] if lex.startswith("-") else "-" + lex
            return RDFLiteral(lex, datatype=inner.datatype)
    return e


def _unsupported(e, operand: bool = False) -> FilterProblem:
    """The FilterProblem describing why ``e`` is outside the supported fragment."""
    if isinstance(e, CompValue):
        name = e.name
        if name in AGGREGATE_WORDS:
            agg = AGGREGATE_WORDS[name]
            return FilterProblem(agg, f"aggregate {agg} is not supported (continuous queries have no grouping)", Hint("word", agg))
        if name == "Builtin_NOTEXISTS":
            return FilterProblem(
                "NOT EXISTS", "NOT EXISTS inside an expression is not supported; write FILTER NOT EXISTS { … } on its "
                "own (a group's FILTERs all hold)", Hint("words", "NOT EXISTS")
            )
        if name == "Builtin_EXISTS":
            return FilterProblem("EXISTS", "EXISTS inside an expression is not supported; write FILTER EXISTS { … } on "
                                 "its own (a group's FILTERs all hold)", Hint("word", "EXISTS"))
        if name in functions._BUILTINS or (name == "Function" and str(e.get("iri")) in functions.CASTS):
            fn = functions._BUILTINS[name][0] if name in functions._BUILTINS else functions.CASTS[str(e["iri"])]
            return FilterProblem(fn, f"the truth value of {fn}(…) (SPARQL's effective boolean value of its result) "
                                 f"is not computed; compare the result instead (FILTER({fn}(…) != 0), or = \"\" for a "
                                 "string)",
                                 Hint("word", fn.split(":")[-1]) if name != "Function" else Hint("callee"))
        if name.startswith("Builtin_"):
            fn = name[len("Builtin_"):]
            return FilterProblem(
                fn, f"function {fn} is not supported in FILTER (obda computes {functions.SUPPORTED}, + - * / and !)",
                Hint("word", fn)
            )
        if name == "Function":
            return FilterProblem(
                "function call",
                f"function <{e['iri']}> is not supported in FILTER (obda computes {functions.SUPPORTED}, + - * / and "
                "!)",
                Hint("callee"),
            )
        if name == "UnaryNot":
            return FilterProblem("!", "negation (!) is not supported in FILTER; use the opposite comparison", Hint("punct", "!"))
        if name in ("UnaryMinus", "UnaryPlus", "AdditiveExpression", "MultiplicativeExpression") and not operand:
            op = {"UnaryMinus": "-", "UnaryPlus": "+"}.get(name) or str(e["op"][0])
            return FilterProblem(
                "arithmetic", f"FILTER on the truth value of arithmetic ({op}) is not supported; compare it "
                "(FILTER(?a - ?b > 0))", Hint("punct", op)
            )
        if name == "RelationalExpression" and operand:
            return FilterProblem(
                "nested comparison", "a comparison cannot be an operand of another comparison", Hint("punct", str(e["op"]))
            )
        if name in ("ConditionalOrExpression", "ConditionalAndExpression") and operand:
            op = "||" if name == "ConditionalOrExpression" else "&&"
            return FilterProblem("nested comparison", "a boolean expression cannot be an operand of a comparison", Hint("punct", op))
    what = f"variable ?{e}" if isinstance(e, Variable) else f"constant {e}"
    return FilterProblem(
        "effective boolean value",
        f"FILTER on the truth value of {what} is not supported; write a comparison such as ?x = true",
        Hint("var", str(e)) if isinstance(e, Variable) else Hint("none"),
    )


def time_comparison_problem(c: Comparison, time_vars: frozenset[Var]) -> FilterProblem | None:
    """Why comparison ``c`` breaks the application-time rules, or None.

    A time variable may be compared only with another time variable or an
    ``xsd:dateTime`` / ``xsd:date`` constant; ``?t ± duration`` only with another time variable.
    """
    for mine, other in ((c.left, c.right), (c.right, c.left)):
        if isinstance(mine, Shifted):
            if mine.var not in time_vars:
                return FilterProblem("duration arithmetic", f"{mine.var} ± a duration: only a time variable (bound by "
                                     "GRAPH ?t) can be moved by a duration", Hint("var", mine.var.name))
            if not (isinstance(other, Var) and other in time_vars):
                return FilterProblem("interval join", f"{mine.var} ± a duration is compared with {other}: compare it "
                                     "with another time variable (?t2 <= ?t1 + \"PT5M\"^^xsd:dayTimeDuration)",
                                     Hint("var", mine.var.name))
            if other == mine.var:
                return FilterProblem("interval join", f"{other} is compared with itself moved by a duration: the "
                                     "condition is constant; compare two different time variables",
                                     Hint("var", other.name))
            continue
        if not (isinstance(mine, Var) and mine in time_vars) or isinstance(other, Shifted):
            continue  # a shifted side is checked from its own side
        if isinstance(other, Var):
            if other in time_vars:
                continue
            kind = f"the non-time variable {other}"
        elif hasattr(other, "is_datetime") and other.is_datetime and not other.datatype.endswith("#date"):
            continue  # a dateTime literal
        elif hasattr(other, "datatype") and other.datatype.endswith("#date"):
            return FilterProblem(
                "time comparison",
                f"time variable {mine} is compared with the date {other}: SPARQL compares a dateTime only with a "
                f"dateTime, so no answer would pass; write it as \"{other.lexical}T00:00:00\"^^xsd:dateTime",
                Hint("var", mine.name))
        elif hasattr(other, "datatype"):
            kind = f"{_literal_kind(other.datatype)} {other}"
        else:
            kind = f"the IRI {other}"
        return FilterProblem(
            "time comparison",
            f"time variable {mine} is compared with {kind}; a time variable (bound by GRAPH) can only be "
            "compared with another time variable or an xsd:dateTime constant",
            Hint("var", mine.name),
        )
    return None


def _literal_kind(datatype: str) -> str:
    local = datatype.rsplit("#", 1)[-1]
    if local in ("integer", "decimal", "double", "float", "int", "long", "short", "byte",
                 "nonNegativeInteger", "positiveInteger", "negativeInteger", "nonPositiveInteger",
                 "unsignedInt", "unsignedLong", "unsignedShort", "unsignedByte"):
        return "the number"
    if local == "string":
        return "the string"
    if local == "boolean":
        return "the boolean"
    return "the literal"


# ----------------------------------------------------------------------------- aggregate queries

_AGGREGATE_FUNCTION = {
    "Aggregate_Count": "count",
    "Aggregate_Sum": "sum",
    "Aggregate_Avg": "avg",
    "Aggregate_Min": "min",
    "Aggregate_Max": "max",
    "Aggregate_Sample": "sample",
    "Aggregate_GroupConcat": "group_concat",
}
_NUMERIC = {XSD + t for t in ("integer", "decimal", "double", "float", "int", "long", "short", "byte")}


def value_expression(e, term: Callable[[Identifier], Term], aggregates: bool = True):
    """A SELECT item or HAVING operand: variables, numeric constants, aggregates of a variable,
    and ``+ - * /`` over them (``obda.model.values.ValueExpression``); FilterProblem for anything else."""
    e = unwrap(e)
    if isinstance(e, Variable):
        return term(e)
    if isinstance(e, RDFLiteral):
        lit = term(e)
        if lit.datatype not in _NUMERIC:
            raise FilterProblem("non-numeric constant", f"only numeric constants can be computed with, not {lit}",
                                Hint("none"))
        return lit
    if isinstance(e, CompValue):
        name = e.name
        if name in _AGGREGATE_FUNCTION:
            what = AGGREGATE_WORDS[name]
            if not aggregates:
                raise FilterProblem(what, f"an aggregate inside an aggregate ({what}) is not allowed", Hint("word", what))
            function = _AGGREGATE_FUNCTION[name]
            distinct = bool(e.get("distinct"))
            arg = e.get("vars")
            if arg == "*":
                if distinct:
                    raise FilterProblem("COUNT(DISTINCT *)", "COUNT(DISTINCT *) is not supported; count a variable",
                                        Hint("word", what))
                return Aggregate("count")
            arg = unwrap(arg)
            if not isinstance(arg, Variable):
                raise FilterProblem(f"{what} of an expression",
                                    f"{what} of an expression is not supported; aggregate a variable (bind it in the pattern)",
                                    Hint("word", what))
            if distinct and function in ("min", "max", "sample"):
                distinct = False  # the same value over the distinct values: an extreme, some value of the group
            if function == "group_concat":
                separator = dict.get(e, "separator")  # CompValue.get answers a missing key with its name
                return Aggregate(function + "_distinct" if distinct else function, term(arg),
                                 " " if separator is None else str(separator))
            return Aggregate(function + "_distinct" if distinct else function, term(arg))
        if name in ("AdditiveExpression", "MultiplicativeExpression"):
            out = value_expression(e["expr"], term, aggregates)
            for op, other in zip(e["op"], e["other"]):
                out = Arithmetic(str(op), out, value_expression(other, term, aggregates))
            return out
        if name == "UnaryMinus":
            return Arithmetic("-", Literal("0", XSD + "integer"), value_expression(e["expr"], term, aggregates))
        if name == "UnaryPlus":
            return value_expression(e["expr"], term, aggregates)
    problem = _unsupported(e, operand=True)
    message = problem.message.replace("in FILTER (only comparisons with && and ||)", "here").replace("in FILTER", "here")
    raise FilterProblem(problem.construct, message + " (an aggregate query computes with variables, numbers, "
                        "aggregates and + - * /)", problem.hint)


def condition(e, term: Callable[[Identifier], Term]):
    """A HAVING condition: comparisons of value expressions under ``&&`` / ``||``."""
    e = unwrap(e)
    if isinstance(e, CompValue):
        if e.name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            parts = tuple(condition(p, term) for p in [e["expr"], *e["other"]])
            return Connective("or" if e.name == "ConditionalOrExpression" else "and", parts)
        if e.name == "RelationalExpression" and e.get("op") is not None:
            op = str(e["op"])
            left, right = _compared(e["expr"], term), _compared(e["other"], term)
            for a, b in ((left, right), (right, left)):
                if isinstance(a, Literal) and a.datatype == XSD + "string" and not (
                        isinstance(b, Aggregate) and b.function.startswith("group_concat")):
                    raise FilterProblem("non-numeric constant", f"only numeric constants can be computed with, not "
                                        f"{a}; a text is compared with a GROUP_CONCAT only", Hint("none"))
            return Comparison(op, left, right)
    problem = _unsupported(e)
    raise FilterProblem(problem.construct, problem.message.replace("FILTER", "HAVING"), problem.hint)


def _compared(e, term: Callable[[Identifier], Term]):
    """A HAVING comparison's operand: a value expression, or a string constant (``GROUP_CONCAT(?o) = "1 22"``:
    :func:`condition` lets it be compared with a GROUP_CONCAT only, always a simple literal, where another value could
    be an IRI, held as its text)."""
    inner = unwrap(e)
    if isinstance(inner, RDFLiteral) and inner.language is None and (
            inner.datatype is None or str(inner.datatype) == XSD + "string"):
        return term(inner)
    return value_expression(e, term)


# ----------------------------------------------------------------------------- durations (NOW() windows: obda.query.now_windows)

_DURATION = re.compile(r"^(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,6})?)S)?)?$")
DURATION_TYPES = (XSD + "dayTimeDuration", XSD + "duration")


def duration_micros(lit: RDFLiteral) -> int:
    """An ``xsd:dayTimeDuration`` (or an ``xsd:duration`` without years and months) in microseconds."""
    text = str(lit)
    m = _DURATION.match(text)
    if str(lit.datatype) not in DURATION_TYPES or m is None or text in ("P", "-P") or text.endswith("T"):
        raise FilterProblem("duration", f"{text!r} is not a duration obda can use: write an xsd:dayTimeDuration such "
                            "as \"PT10M\"^^xsd:dayTimeDuration (days, hours, minutes, seconds; no years or months)",
                            Hint("none"))
    sign, d, h, mi, s = m.groups()
    seconds = Decimal(s or 0) + 60 * int(mi or 0) + 3600 * int(h or 0) + 86400 * int(d or 0)
    micros = int(seconds * 1_000_000)
    return -micros if sign else micros
