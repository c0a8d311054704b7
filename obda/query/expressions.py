"""FILTER expressions: from rdflib's parse tree to disjunctive normal form.

The supported fragment is monotone: comparisons ``< <= = != > >=`` between
variables and constants, combined with ``&&`` and ``||`` (any nesting,
parentheses).  :func:`to_dnf` returns the alternatives of the expression, each
a conjunction of :class:`~obda.model.query.Comparison`; SPARQL's three-valued
logic (an error is neither true nor false) distributes like Kleene logic, so
the DNF keeps exactly the solutions for which the FILTER is true.

Anything else (functions, arithmetic, ``!``, ``IN``, ``EXISTS``, aggregates)
raises :class:`FilterProblem`, which says what to look for in the FILTER's
tokens so the caller can report a line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Literal as RDFLiteral, URIRef, Variable

from obda.model.query import Comparison, Term, Var

# rdflib's single-child wrappers of the expression grammar.
_WRAPPERS = (
    "ConditionalOrExpression",
    "ConditionalAndExpression",
    "RelationalExpression",
    "AdditiveExpression",
    "MultiplicativeExpression",
)

_AGGREGATES = {
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
    """Strip rdflib's chain of single-child expression nodes (``expr`` only, no operator)."""
    while isinstance(e, CompValue) and e.name in _WRAPPERS and e.op is None and not e.other:
        e = e["expr"]
    return e


def aggregate_name(e) -> str | None:
    """SPARQL name of the first aggregate inside expression ``e`` (depth-first), if any."""
    e = unwrap(e)
    if isinstance(e, CompValue):
        if e.name in _AGGREGATES:
            return _AGGREGATES[e.name]
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


def expression_variables(e) -> list[str]:
    """Names of the variables in expression ``e``, in order of first occurrence."""
    out: list[str] = []

    def walk(x) -> None:
        if isinstance(x, Variable):
            if str(x) not in out:
                out.append(str(x))
        elif isinstance(x, CompValue):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(e)
    return out


def to_dnf(e, term: Callable[[Identifier], Term], limit: int = 10_000) -> list[tuple[Comparison, ...]]:
    """Disjunctive normal form of a FILTER expression.

    ``term`` converts rdflib constants and variables to model terms.  Returns
    a list of alternatives, each a tuple of comparisons (a conjunction); more
    than ``limit`` alternatives is a FilterProblem (``&&`` over ``||``
    multiplies out exponentially).
    """
    e = unwrap(e)
    if isinstance(e, CompValue):
        name = e.name
        if name == "ConditionalOrExpression":
            out: list[tuple[Comparison, ...]] = []
            for part in [e["expr"], *e["other"]]:
                out.extend(to_dnf(part, term, limit))
            _check_size(out, limit)
            return out
        if name == "ConditionalAndExpression":
            acc: list[tuple[Comparison, ...]] = [()]
            for part in [e["expr"], *e["other"]]:
                alts = to_dnf(part, term, limit)
                _check_size(range(len(acc) * len(alts)), limit)
                acc = [a + b for a in acc for b in alts]
            return acc
        if name == "RelationalExpression":
            return [(_comparison(e, term),)]
    raise _unsupported(e)


NEGATE = {"<": ">=", "<=": ">", "=": "!=", "!=": "=", ">": "<=", ">=": "<"}


def to_exclusive_dnf(
    e, term: Callable[[Identifier], Term], limit: int = 10_000, positive: bool = True, bound=None
) -> list[tuple[Comparison, ...]]:
    """A DNF whose alternatives are pairwise exclusive (for ``SELECT`` without DISTINCT).

    With the plain DNF a solution that satisfies k alternatives of ``a || b``
    would be answered k times once each alternative becomes a UNION branch;
    SPARQL answers it once.  Here ``a || b`` becomes ``a`` and ``b && !a``
    (and ``!(a && b)`` becomes ``!a`` and ``a && !b``), negating comparisons
    (``<`` ↔ ``>=``, ``=`` ↔ ``!=``), so every solution satisfies exactly one
    alternative.  Exact when the compared values are comparable (in obda a
    variable is bound to one column, so its comparisons with constants of
    its type never raise a SPARQL type error).

    ``bound`` (a set of variables): a comparison using any other variable is an
    error in SPARQL, which a FILTER treats like false; it is replaced by false
    in the expression *before* the exclusive alternatives are built (so
    ``?unbound > 1 || ?b > 2`` keeps the solutions with ``?b > 2``).
    """
    e = unwrap(e)
    if isinstance(e, CompValue):
        name = e.name
        parts = [e["expr"], *e["other"]] if name in ("ConditionalOrExpression", "ConditionalAndExpression") else []
        # an OR when positive, or an AND when negated, is a choice among the parts
        choice = (name == "ConditionalOrExpression") == positive
        if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            if not choice:  # AND of the parts (or NOT of an OR): product
                acc: list[tuple[Comparison, ...]] = [()]
                for part in parts:
                    alts = to_exclusive_dnf(part, term, limit, positive, bound)
                    _check_size(range(len(acc) * len(alts)), limit)
                    acc = [a + b for a in acc for b in alts]
                return acc
            out: list[tuple[Comparison, ...]] = []
            prefix: list[tuple[Comparison, ...]] = [()]  # the earlier parts, failed (OR) / held (NOT AND)
            for part in parts:
                here = to_exclusive_dnf(part, term, limit, positive, bound)
                out.extend(a + b for a in prefix for b in here)
                _check_size(out, limit)
                other = to_exclusive_dnf(part, term, limit, not positive, bound)
                prefix = [a + b for a in prefix for b in other]
                _check_size(prefix, limit)
            return out
        if name == "RelationalExpression":
            c = _comparison(e, term)
            if bound is not None and not {t for t in (c.left, c.right) if isinstance(t, Var)} <= bound:
                return [] if positive else [()]  # an error: false, and its negation in our construction true
            return [(c if positive else Comparison(NEGATE[c.op], c.left, c.right),)]
    raise _unsupported(e)


def _check_size(alternatives, limit: int) -> None:
    if len(alternatives) > limit:
        raise FilterProblem(
            "too many UNION / || alternatives",
            f"the FILTER expands to more than {limit} alternatives (|| inside && multiplies out); simplify it",
            Hint("word", "FILTER"),
        )


def _comparison(e: CompValue, term: Callable[[Identifier], Term]) -> Comparison:
    op = str(e["op"])
    if op in ("IN", "NOT IN"):
        raise FilterProblem(op, f"{op} is not supported in FILTER; use comparisons combined with || and &&", Hint("words", op))
    left, right = unwrap(e["expr"]), unwrap(e["other"])
    for side in (left, right):
        if not isinstance(side, (Variable, URIRef, RDFLiteral)):
            raise _unsupported(side, operand=True)
    return Comparison(op, term(left), term(right))


def _unsupported(e, operand: bool = False) -> FilterProblem:
    """The FilterProblem describing why ``e`` is outside the supported fragment."""
    if isinstance(e, CompValue):
        name = e.name
        if name in _AGGREGATES:
            agg = _AGGREGATES[name]
            return FilterProblem(agg, f"aggregate {agg} is not supported (continuous queries have no grouping)", Hint("word", agg))
        if name == "Builtin_NOTEXISTS":
            return FilterProblem(
                "NOT EXISTS", "FILTER NOT EXISTS is non-monotonic and not supported", Hint("words", "NOT EXISTS")
            )
        if name == "Builtin_EXISTS":
            return FilterProblem("EXISTS", "FILTER EXISTS is not supported; write the pattern in the query body", Hint("word", "EXISTS"))
        if name.startswith("Builtin_"):
            fn = name[len("Builtin_"):]
            return FilterProblem(
                fn, f"function {fn} is not supported in FILTER (only comparisons with && and ||)", Hint("word", fn)
            )
        if name == "Function":
            return FilterProblem(
                "function call",
                f"function call <{e['iri']}> is not supported in FILTER (only comparisons with && and ||)",
                Hint("callee"),
            )
        if name == "UnaryNot":
            return FilterProblem("!", "negation (!) is not supported in FILTER; use the opposite comparison", Hint("punct", "!"))
        if name in ("UnaryMinus", "UnaryPlus", "AdditiveExpression", "MultiplicativeExpression"):
            op = {"UnaryMinus": "-", "UnaryPlus": "+"}.get(name) or str(e["op"][0])
            return FilterProblem(
                "arithmetic", f"arithmetic ({op}) is not supported in FILTER; compare variables and constants only", Hint("punct", op)
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
    ``xsd:dateTime`` / ``xsd:date`` constant.
    """
    for mine, other in ((c.left, c.right), (c.right, c.left)):
        if not (isinstance(mine, Var) and mine in time_vars):
            continue
        if isinstance(other, Var):
            if other in time_vars:
                continue
            kind = f"the non-time variable {other}"
        elif hasattr(other, "is_datetime") and other.is_datetime:  # a dateTime / date literal
            continue
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
