"""The naive checker: enumerate every derived LTO query and apply the theorem to each.

This is the definition (Arasu Thm 5.3: a query is bm-computable iff all its
derived LTO queries are) executed literally.  It is exponential in the number
of attributes and kept as the oracle the polynomial checker is tested
against (spec §6); the product uses :func:`obda.analysis.criteria.check_polynomial`.
"""

from __future__ import annotations

from obda.analysis.closure import Const
from obda.analysis.criteria import BOUNDED, PartOutcome, criterion_for, lto_violations, verdict_for
from obda.analysis.lto import enumerate_ltos
from obda.analysis.preprocess import ModifiedQuery


def count_ltos(mq: ModifiedQuery, limit: int | None = None) -> int:
    """Number of derived LTO queries (stops counting at ``limit``)."""
    n = 0
    for _ in _ltos(mq):
        n += 1
        if limit is not None and n >= limit:
            break
    return n


def _ltos(mq: ModifiedQuery):
    cl = mq.closure
    ks = [e for e in cl.elements if isinstance(e, Const)] + list(mq.bounding_attrs)
    return enumerate_ltos(mq.value_atoms, mq.stream_attrs, ks, mq.member.types, mq.roles())


def check_naive(mq: ModifiedQuery) -> PartOutcome:
    """Verdict of one modified query by enumerating all its LTO queries."""
    crit = criterion_for(mq)
    if crit in ("unsatisfiable", "single_stream"):
        return PartOutcome(BOUNDED, crit, checker="naive")
    for lcl in _ltos(mq):
        v = lto_violations(mq, lcl, crit, stop=True)
        if v:
            return PartOutcome(verdict_for(crit, v), crit, tuple(v), checker="naive")
    return PartOutcome(BOUNDED, crit, checker="naive")
