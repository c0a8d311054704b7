"""Checks decided per timestamp (docs/analysis.md, rules A2, A3): OPTIONAL, MINUS and [NOT] EXISTS over streams.

A member's check whose query reads a stream (:attr:`OutputCheck.timed <obda.analysis.forest.checks.OutputCheck>`)
compares the member's answer with the answers of that query **in the answer's own timestamp** (A2) or, with an
:attr:`~obda.analysis.forest.checks.OutputCheck.window`, in a window of its past (A3: the query's answers of the
window are kept).  The check is decided when the answer's timestamp closes:

* the member is one unit (every stream row of an answer has the same timestamp ``T``: one node of its forest),
  and one of the check's terms is determined by that timestamp (a window's: its last term, the window's origin);
* every member of the check's query is one unit too, and its answer's column at the same position is
  determined by its unit's timestamp — so only answers of ``T`` (of the window) can agree with an answer of ``T``;
* a window is bounded above: in the past (A3; A5 without a lower bound), or reaching into the future (A4: the
  answer waits until a match or the window's end decides it); an EXISTS window may have no end (A6: the answer
  waits for its first match).

The check's forest reads its own rows: its pipelines get ids after the query's own (``first_id``) and join the
query's pipelines and per-atom view deduplication, so the executor reads, projects and closes them with the
query's (:func:`merge`).  Anything else (a check across timestamps without a window, a NOT EXISTS window without an
upper bound: never final, rule A6) is refused with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.checks import OutputCheck
from obda.analysis.forest.model import Forest, MemberForest, Pipeline, ViewDedupe
from obda.errors import AnalysisError, Location

ACROSS = ("is decided in one timestamp (rule A2, docs/analysis.md) or a window of its time (A3, A4): {why}; a "
          "check across timestamps otherwise is not executed")


def time_position(mf: MemberForest, positions: tuple[int, ...]) -> int | None:
    """The position among ``positions`` (items of ``mf``'s member) of a term its single unit's timestamp
    determines; None when ``mf`` is not one unit or no such term is compared."""
    if len(mf.nodes) != 1:
        return None
    unit = set(mf.nodes[0].aliases)
    for j, p in enumerate(positions):
        if any(alias in unit for alias, _ in mf.member.items[p].times):
            return j
    return None


def check_shape(mf: MemberForest, c: OutputCheck, forest: Forest, text: str | None, file: str | None) -> None:
    """Refuse a timed check of ``mf`` (its check query's ``forest``) outside rule A2, with the reason, located in
    the SQL ``text`` (of ``file``) the member was read from, when it was given as text."""
    streams = sorted({p.table.name for p in forest.pipelines if p.table.is_stream})
    what = f"a [NOT] IN / [NOT] EXISTS subquery over the stream {streams[0]!r} " if streams else "a check "

    def refuse(message: str) -> AnalysisError:
        return AnalysisError(what + message, _location(c.tree, text, file))

    if c.window is not None and c.window[2] is None and c.negated:
        raise refuse("is executed in a window of the answer's time bounded above (rules A3–A5), or as an EXISTS "
                     "without an end (A6: final at its first match); a NOT EXISTS without an upper bound is never "
                     "final")
    j = time_position(mf, c.positions)
    if c.window is not None and j != len(c.positions) - 1:
        j = None  # a window is relative to the answer's own timestamp, its last term
    if j is None:
        raise refuse(ACROSS.format(why="the answer joins rows of several timestamps" if len(mf.nodes) > 1 else
                                   "no term compared with it is the answer's own timestamp"))
    if forest.checks or forest.timed_checks:
        raise refuse("holds a check of its own; a check inside a check over stream data is not executed yet")
    for cm in forest.members:
        if not cm.unsatisfiable and time_position(cm, (j,)) != 0:
            raise refuse(ACROSS.format(why="its query joins rows of several timestamps" if len(cm.nodes) > 1 else
                                       "a branch of its query reads static data only" if not cm.nodes else
                                       "its answer there is not its own timestamp"))


def _location(tree, text: str | None, file: str | None) -> Location | None:
    """Where the subquery ``tree`` starts in ``text`` (its leftmost token), when known."""
    starts = [m["start"] for n in tree.walk() for m in [getattr(n, "_meta", None) or {}] if "start" in m]
    if text is None or not starts:
        return None
    start = min(starts)
    return Location(file, text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1)


def merge(pipelines: list[Pipeline], views: ViewDedupe, forest: Forest) -> ViewDedupe:
    """Add the check query's ``forest`` pipelines (ids already after the query's) to the query's ``pipelines``,
    and its per-atom view deduplication to ``views``; returns the merged deduplication."""
    pipelines.extend(p for p in forest.pipelines if p.member >= 0)  # its k-constraint monitors stay its own
    return replace(views, branch_of={**views.branch_of, **forest.views.branch_of},
                   positions={**views.positions, **forest.views.positions}, joins=views.joins + forest.views.joins)


def next_pipeline_id(forest: Forest, first_id: int) -> int:
    """The first pipeline id after ``forest``'s (which start at ``first_id``)."""
    return max((p.id + 1 for p in forest.pipelines), default=first_id)
