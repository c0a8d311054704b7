"""Disjunctive normal forms of a FILTER: the alternatives that become branches of the query.

:func:`to_dnf` (``SELECT DISTINCT``: a solution may satisfy several alternatives) and :func:`to_exclusive_dnf`
(``SELECT``: pairwise exclusive alternatives, so a solution satisfying several is still answered once), both
over rdflib's parse tree of the FILTER, their leaves :class:`~obda.model.query.Comparison` objects; a branch
that leaves some variables unbound reads them as :mod:`obda.query.unbound` says.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Literal as RDFLiteral, Variable

from obda.model.query import NEGATE, Call, Comparison, Term
from obda.query import functions, unbound
from obda.query.expressions import FilterProblem, Hint, _comparison, _unsupported, unwrap


def to_dnf(e, term: Callable[[Identifier], Term], limit: int = 10_000, positive: bool = True
           ) -> list[tuple[Comparison, ...]]:
    """Disjunctive normal form of a FILTER expression.

    ``term`` converts rdflib constants and variables to model terms.  Returns
    a list of alternatives, each a tuple of comparisons (a conjunction); more
    than ``limit`` alternatives is a FilterProblem (``&&`` over ``||``
    multiplies out exponentially).  ``!`` is pushed to the comparisons (De Morgan; ``!(a < b)`` is
    ``a >= b``, ``!CONTAINS(…)`` is ``CONTAINS(…) = false``: an error stays an error, i.e. false).
    """
    e = unwrap(e)
    if isinstance(e, CompValue):
        name = e.name
        if name == "UnaryNot":
            return to_dnf(e["expr"], term, limit, not positive)
        if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            if (name == "ConditionalOrExpression") == positive:
                out: list[tuple[Comparison, ...]] = []
                for part in [e["expr"], *e["other"]]:
                    out.extend(to_dnf(part, term, limit, positive))
                _check_size(out, limit)
                return out
            acc: list[tuple[Comparison, ...]] = [()]
            for part in [e["expr"], *e["other"]]:
                alts = to_dnf(part, term, limit, positive)
                _check_size(range(len(acc) * len(alts)), limit)
                acc = [a + b for a in acc for b in alts]
            return acc
        if name == "RelationalExpression":
            c = _comparison(e, term)
            return [(c if positive else Comparison(NEGATE[c.op], c.left, c.right),)]
        if functions.is_boolean_call(e):
            return [(functions.boolean_leaf(e, term, positive),)]
    if isinstance(e, Variable):
        return [(_truth(e, term, positive),)]
    raise _unsupported(e)


def _truth(v: Variable, term, positive: bool) -> Comparison:
    """``FILTER(?v)``: the effective boolean value of ``?v`` (SPARQL §17.2.2: a boolean's value, a number other than
    0, a string other than ""; an error for any other term) is true (``positive``) or false."""
    return Comparison("=", Call("EBV", (term(v),)), functions.TRUE if positive else functions.FALSE)


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

    ``bound`` (a set of variables): the variables of the UNION branch the FILTER is applied to; an expression
    reading another is folded (:mod:`obda.query.unbound`: ``BOUND`` false, ``COALESCE`` skips it) or an error.
    SPARQL's three values are kept apart: an error is not true, nor is its negation (``!(?unbound > 1)`` is
    false), but ``?unbound > 1 || ?b > 2`` holds where ``?b > 2`` does.
    """
    return _exclusive(e, term, limit, "true" if positive else "false", bound)


def exclusive_dnf(e, term: Callable[[Identifier], Term], mode: str, bound, limit: int = 10_000
                  ) -> list[tuple[Comparison, ...]]:
    """Pairwise exclusive alternatives of the solutions where ``e`` is ``mode``: ``"true"``, ``"false"``,
    ``"not_true"`` (false or an error) or ``"not_false"``, in a branch binding ``bound``."""
    return _exclusive(e, term, limit, mode, bound)


# the solutions where a part is true / false / not true (false or an error) / not false
_NEGATED_MODE = {"true": "false", "false": "true", "not_true": "not_false", "not_false": "not_true"}
# (connective, mode) -> None (every part in that mode: a product), or (mode of the earlier parts, mode of the
# part that decides): exclusive alternatives, the first deciding part in order
_COMBINE = {
    ("ConditionalOrExpression", "true"): ("not_true", "true"),
    ("ConditionalOrExpression", "false"): None,
    ("ConditionalOrExpression", "not_true"): None,
    ("ConditionalOrExpression", "not_false"): ("false", "not_false"),
    ("ConditionalAndExpression", "true"): None,
    ("ConditionalAndExpression", "false"): ("not_false", "false"),
    ("ConditionalAndExpression", "not_true"): ("true", "not_true"),
    ("ConditionalAndExpression", "not_false"): None,
}


def _exclusive(e, term, limit: int, mode: str, bound) -> list[tuple[Comparison, ...]]:
    e = unwrap(e)
    if isinstance(e, CompValue):
        name = e.name
        if name == "UnaryNot":
            return _exclusive(e["expr"], term, limit, _NEGATED_MODE[mode], bound)
        if functions.is_boolean_call(e):
            return _leaf(functions.boolean_leaf(e, term, True), functions.boolean_leaf(e, term, False), mode, bound)
        if name == "RelationalExpression":
            c = _comparison(e, term)
            return _leaf(c, Comparison(NEGATE[c.op], c.left, c.right), mode, bound)
        if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            parts = [e["expr"], *e["other"]]
            how = _COMBINE[(name, mode)]
            if how is None or (mode == "true" and "exclusive" in e):
                # a product, or x IN (distinct constants): no solution satisfies two parts
                if how is not None:
                    out = [a for part in parts for a in _exclusive(part, term, limit, mode, bound)]
                    _check_size(out, limit)
                    return out
                acc: list[tuple[Comparison, ...]] = [()]
                for part in parts:
                    alts = _exclusive(part, term, limit, mode, bound)
                    _check_size(range(len(acc) * len(alts)), limit)
                    acc = [a + b for a in acc for b in alts]
                return acc
            before, deciding = how
            out = []
            prefix: list[tuple[Comparison, ...]] = [()]  # the earlier parts, none deciding
            for i, part in enumerate(parts):
                out.extend(a + b for a in prefix for b in _exclusive(part, term, limit, deciding, bound))
                _check_size(out, limit)
                if i == len(parts) - 1:
                    break
                prefix = [a + b for a in prefix for b in _exclusive(part, term, limit, before, bound)]
                _check_size(prefix, limit)
            return out
    if isinstance(e, RDFLiteral) and isinstance(e.toPython(), bool):
        return [()] if e.toPython() == (mode in ("true", "not_false")) else []
    if isinstance(e, Variable):
        return _leaf(_truth(e, term, True), _truth(e, term, False), mode, bound)
    raise _unsupported(e)


def _leaf(c: Comparison, negated: Comparison, mode: str, bound) -> list[tuple[Comparison, ...]]:
    """Comparison ``c`` (``negated``: where it is false) in ``mode``; where the branch leaves its variables
    unbound, folded (or an error).  *Not true* is ``c`` marked ``not_true``, *not false* ``negated`` so marked:
    the unfolder keeps the member where the comparison is a type error for every row (an IRI ordered against
    a number), where a plain negated comparison would have removed it."""
    if mode in ("true", "false"):
        c = unbound.leaf(c if mode == "true" else negated, bound)
        if c == unbound.ERROR:
            return []
        return ([()] if c else []) if isinstance(c, bool) else [(c,)]
    c = unbound.leaf(c if mode == "not_true" else negated, bound)
    if c == unbound.ERROR:
        return [()]
    if isinstance(c, bool):
        return [] if c else [()]
    if functions.may_error(c):
        raise functions.or_problem()  # no comparison holds exactly where a computed one is an error
    return [(replace(c, not_true=True),)]


def _check_size(alternatives, limit: int) -> None:
    if len(alternatives) > limit:
        raise FilterProblem(
            "too many UNION / || alternatives",
            f"the FILTER expands to more than {limit} alternatives (|| inside && multiplies out); simplify it",
            Hint("word", "FILTER"),
        )
