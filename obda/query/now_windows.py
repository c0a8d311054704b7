"""Windows of an aggregate query over NOW(): ``FILTER(?t > NOW() - "PT10M"^^xsd:dayTimeDuration)``.

A FILTER's top-level ``&&`` operands that mention ``NOW()`` are taken out of it (:mod:`obda.query.normal_forms`)
and read as ``(op, time variable, offset)``: the time variable compared with ``NOW()`` moved by a duration
constant.  Anything else with ``NOW()`` is a :class:`~obda.query.expressions.FilterProblem`.
"""

from __future__ import annotations

from typing import Callable

from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.term import Identifier, Literal as RDFLiteral, Variable

from obda.model.query import FLIP, Term
from obda.query.expressions import FilterProblem, Hint, duration_micros, unwrap


def has_now(e) -> bool:
    """Whether ``NOW()`` occurs in expression ``e``."""
    if isinstance(e, CompValue):
        if e.name == "Builtin_NOW":
            return True
        return any(has_now(x) for v in e.values() for x in (v if isinstance(v, list) else [v]))
    if isinstance(e, list):
        return any(has_now(x) for x in e)
    return False


def conjuncts(e) -> list:
    """The top-level ``&&`` operands of a FILTER expression (the expression itself if it is no ``&&``)."""
    e = unwrap(e)
    if isinstance(e, CompValue) and e.name == "ConditionalAndExpression":
        return [e["expr"], *e["other"]]
    return [e]


def conjunction(parts: list):
    """The FILTER expression ``p1 && p2 && …`` of ``parts`` (None for none)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return CompValue("ConditionalAndExpression", expr=parts[0], other=list(parts[1:]))


def _now_offset(e) -> int | None:
    """``NOW()`` → 0, ``NOW() ± duration`` → ± its microseconds; None when ``e`` is not of that form."""
    e = unwrap(e)
    if isinstance(e, CompValue) and e.name == "Builtin_NOW":
        return 0
    if isinstance(e, CompValue) and e.name == "AdditiveExpression" and len(e["op"]) == 1:
        base, other = unwrap(e["expr"]), unwrap(e["other"][0])
        if isinstance(base, CompValue) and base.name == "Builtin_NOW":
            if not isinstance(other, RDFLiteral):
                raise FilterProblem("NOW() arithmetic", "only a duration constant can be added to or subtracted from "
                                    "NOW()", Hint("word", "NOW"))
            d = duration_micros(other)
            return d if str(e["op"][0]) == "+" else -d
    return None


def window_condition(e, term: Callable[[Identifier], Term]):
    """A ``&&`` operand with NOW(): ``?t > NOW() - d`` and the like, as ``(op, Var, offset)`` with the time
    variable on the left (``?t op NOW() + offset``); FilterProblem for anything else."""
    e = unwrap(e)
    if not (isinstance(e, CompValue) and e.name == "RelationalExpression" and e.get("op") is not None):
        raise FilterProblem("NOW()", "NOW() is supported in a comparison of a time variable with NOW() minus a "
                            "duration, as a top-level && operand of FILTER: FILTER(?t > NOW() - \"PT10M\"^^xsd:dayTimeDuration)",
                            Hint("word", "NOW"))
    op, left, right = str(e["op"]), unwrap(e["expr"]), unwrap(e["other"])
    offset = _now_offset(right)
    if offset is None:
        offset = _now_offset(left)
        if offset is None or not isinstance(right, Variable):
            raise FilterProblem("NOW()", "compare a time variable with NOW() or NOW() - a duration "
                                "(?t > NOW() - \"PT10M\"^^xsd:dayTimeDuration)", Hint("word", "NOW"))
        op, left = FLIP[op], right
    if not isinstance(left, Variable):
        raise FilterProblem("NOW()", "compare a time variable with NOW() or NOW() - a duration", Hint("word", "NOW"))
    return op, term(left), offset
