"""Rule A5 (docs/analysis.md): a check in a window of the answer's past without a lower bound.

``FILTER NOT EXISTS { GRAPH ?t2 { ?e :onTurbine ?k } FILTER(?t2 < ?t) }`` ("readings of turbines never
maintained before"): any earlier answer of the check's query may decide an answer, so each of its keys is kept
forever — with its earliest timestamp only, the best witness of ``?t2 <= ?t + d``.  The memory is the set of those
keys: bounded iff ``SELECT DISTINCT`` of the keys over the check's pattern is (Arasu et al.'s DISTINCT rules,
through this same analysis), and one entry when the check shares no variable but the time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from sqlglot import exp

from obda.analysis.criteria import BOUNDED
from obda.analysis.report import AnalysisReport, MemberReport, combine
from obda.model.compilation import Compilation


def keys_query(query: exp.Expression) -> exp.Expression | None:
    """The check's query (its keys, then its time) without the time: ``SELECT DISTINCT`` of its keys; None when
    it has no key (the check shares only the time)."""
    out = query.copy()
    for sel in _branches(out):
        if len(sel.expressions) < 2:
            return None
        sel.set("expressions", sel.expressions[:-1])
        sel.set("distinct", exp.Distinct())  # a set of keys, whether or not the check's SQL says DISTINCT
    return out


def _branches(e: exp.Expression) -> list[exp.Select]:
    if isinstance(e, exp.Union):
        return _branches(e.left) + _branches(e.right)
    return [e] if isinstance(e, exp.Select) else []


def keys_analysis(source, analyse: Callable) -> Callable[[exp.Expression], AnalysisReport | None]:
    """How the set of a check's keys is judged: ``analyse(source)`` of its keys query — the check's own
    compilation with the time dropped when ``source`` is a :class:`Compilation` (its per-atom views are declared
    there), else the keys query as SQL.  The judge returns None for a check without keys."""
    def judge(query: exp.Expression) -> AnalysisReport | None:
        keys = keys_query(query)
        if keys is None:
            return None
        if isinstance(source, Compilation):
            for chk in source.checks:
                if chk.sql == query:
                    members = tuple(replace(m, select=keys_query(m.select)) for m in chk.members)
                    return analyse(replace(chk, members=members, checks=()))
        return analyse(keys)
    return judge


def with_kept_keys(report: MemberReport, kept: list[AnalysisReport | None]) -> MemberReport:
    """The member's report with what its checks without a lower bound keep: their key sets' verdicts, in the plan,
    the memory and the notes."""
    sets = [r for r in kept if r is not None]
    verdict = combine([report.verdict] + [r.verdict for r in sets])
    why = [f"rule A5: the check's keys are kept forever; their set is {r.verdict}"
           + (f" ({r.members[0].violations[0].explanation})" if r.verdict != BOUNDED and r.members
              and r.members[0].violations else "") for r in sets]
    keeps = "its query's keys, each with its earliest timestamp, forever" if sets else \
        "its query's earliest answer, forever (one entry: the check shares only the time)"
    plan = {**report.plan, "check keys": {"strategy": "keys", "keeps": [keeps],
                                          "bound": "the set of the check's keys" if sets else "one entry"}}
    memory = report.memory
    if verdict == BOUNDED:
        keys = "the check's keys: a finite set" if sets else "one entry for the check"
        memory = f"{memory}; {keys}" if memory else keys
    hints = report.hints
    if verdict != BOUNDED and any(r.verdict != BOUNDED for r in sets):
        hints += ("bound the check's window below (?t2 >= ?t - \"PT1H\"^^xsd:dayTimeDuration): its answers are then "
                  "kept for that long only (rule A3)",)
    return replace(report, verdict=verdict, plan=plan, memory=memory, notes=report.notes + tuple(why), hints=hints)
