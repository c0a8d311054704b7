"""What the executor runs, decided once: the forest, each member's verdict, the aggregate plan.

    plan = plan_execution(query, sources, report)      # SQL text, a sqlglot tree or a Compilation
    q = ContinuousQuery(plan, base_dir=..., sink=...)  # the executor neither parses nor analyses

The CLI and the service analyse a query to show its verdict; they hand that report here so it is
not computed again.  An aggregate query (Arasu §8.2) runs as its characteristic query ``Q'``: its
:class:`~obda.analysis.aggregates.AggregatePlan` (from the report given, when it is the aggregate's)
and ``Q'``'s own report and forest are computed here, each once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from obda.analysis.forest import Forest, build_forest
from obda.analysis.report import AnalysisReport
from obda.errors import ExecutionError, ObdaError
from obda.model.compilation import Compilation
from obda.model.sources import Sources

log = logging.getLogger("obda.analysis")


@dataclass(frozen=True)
class ExecutionPlan:
    """The one plan the executor consumes (immutable; built by :func:`plan_execution`).

    ``forest``: the synopsis forest of the query run (``Q'`` for an aggregate).  ``report``: that
    query's :class:`~obda.analysis.AnalysisReport`, verdict strings per SELECT as given, or None (the
    analyser rejected it).  ``verdicts``: per forest member.  ``aggregate``: the aggregate plan, or
    None.  ``order_by``, ``limit``, ``offset``: of a query over static data only (its answers are emitted once,
    as a table); ``ask``: that query is an ASK, whose table is one row, ``false`` when it has no answer;
    ``order_keys``: the forest's last columns that only order that table (ORDER BY an expression, or a variable
    not selected: :attr:`~obda.model.query.Query.order_keys`), never written.
    """

    forest: Forest
    report: object
    verdicts: tuple[str, ...]
    aggregate: object = None  # obda.analysis.aggregates.AggregatePlan
    order_by: tuple = ()
    limit: int | None = None
    offset: int = 0
    ask: bool = False
    order_keys: int = 0

    @property
    def columns(self) -> tuple[str, ...]:
        """The answer's columns (the forest's, without the ordering's hidden ones)."""
        return self.forest.columns[:len(self.forest.columns) - self.order_keys]

    @property
    def typed(self) -> dict[int, tuple[str | None, ...]]:
        """The answer's columns of several kinds of term, with each member's class (:attr:`Forest.typed_columns
        <obda.analysis.forest.model.Forest.typed_columns>`); none for an aggregate query, whose characteristic
        query's values the aggregates read as they are."""
        return {} if self.aggregate is not None else self.forest.typed_columns

    @property
    def risky(self) -> list[int]:
        """Members not shown bounded (an unsatisfiable member keeps nothing, whatever its verdict)."""
        return [i for i, v in enumerate(self.verdicts) if v != "bounded" and not self.forest.members[i].unsatisfiable]


def plan_execution(query, sources: Sources, report=None, dialect: str = "spark") -> ExecutionPlan:
    """The :class:`ExecutionPlan` of ``query`` (returned as is when it already is one).

    ``report``: what the caller's analysis said — an :class:`~obda.analysis.AnalysisReport`, the
    :class:`~obda.analysis.aggregates.AggregateReport` of an aggregate query, verdict strings per
    SELECT (tests), or None (analysed here; a query the analyser rejects runs only when the caller
    allows unbounded queries).
    """
    if isinstance(query, ExecutionPlan):
        return query
    aggregate = _aggregate_plan(query, sources, dialect, report)
    table = isinstance(query, Compilation) and query.aggregation is None  # the answers of static data: a table
    order_by = query.query.order_by if table else ()
    cut = (query.query.limit, query.query.offset) if table else (None, 0)
    read = ()
    if aggregate is not None:  # the executor runs Q' and aggregates its answers; Q' as the aggregate's verdict read it
        query, report, read = aggregate.characteristic, None, aggregate.report.members
    if report is None:
        report = _analyse(query, sources, read)
    if isinstance(report, AnalysisReport) and report.forest is not None:
        forest = report.forest  # the analysis's forest: the one plan, run as it is
    elif isinstance(report, AnalysisReport) and report.forest_error is not None:
        raise report.forest_error
    else:  # verdicts only (or none): the forest is still planned
        forest = build_forest(query, sources, dialect)
    return ExecutionPlan(forest, report, tuple(member_verdicts(report, forest)), aggregate, order_by, *cut,
                         ask=table and query.query.ask, order_keys=query.query.order_keys if table else 0)


def member_verdicts(report, forest: Forest) -> list[str]:
    """Verdict (``bounded`` | ``unbounded`` | ``not_shown`` | ``unknown``) of each member of the forest.

    ``report``: the :class:`~obda.analysis.AnalysisReport` of the query (a
    SELECT's verdict is the worst of its disjuncts), a list of verdict strings
    (one per SELECT of the query), or None (every member ``unknown``).
    """
    n = max((m.member.origin for m in forest.members), default=-1) + 1
    if report is None:
        return ["unknown"] * len(forest.members)
    if isinstance(report, AnalysisReport):
        per_select = report.select_verdicts(n)
        under = report.select_verdicts(n, constrained=True)
        # a member bounded by the declared k-constraints runs bounded when its synopses drop state by them
        per_select = [u if v != "bounded" and u == "bounded" and any(
            m.constraints for m in forest.members if m.member.origin == i) else v
            for i, (v, u) in enumerate(zip(per_select, under))]
    elif isinstance(report, (list, tuple)) and all(isinstance(v, str) for v in report):
        per_select = [v.lower() for v in report]
    else:
        raise ExecutionError(f"report must be an AnalysisReport or a list of verdicts, not {type(report).__name__}")
    if len(per_select) < n:
        raise ExecutionError(f"the analysis report has {len(per_select)} member verdict(s) but the SQL has {n} member(s)")
    return [per_select[m.member.origin] for m in forest.members]


def _analyse(query, sources: Sources, members=()):
    """The bounded-memory report of ``query`` (``members``: its normal form, when read already), or None when the
    analyser rejects it."""
    from obda.analysis import analyze

    try:
        return analyze(query, sources, members=members)
    except ObdaError as e:
        log.warning("bounded-memory analysis failed: %s", e)
        return None


def _aggregate_plan(query, sources: Sources, dialect: str, report):
    """The :class:`~obda.analysis.aggregates.AggregatePlan` of an aggregate query, else None; ``report``
    is reused when it is the aggregate's own."""
    from obda.analysis.aggregates import AggregateReport, aggregate_plan, is_aggregate

    given = report if isinstance(report, AggregateReport) else None
    if isinstance(query, Compilation):
        return aggregate_plan(query, sources, report=given) if query.aggregation is not None else None
    if not isinstance(query, str):
        return None
    from obda.analysis.sql_reading import parse_sql

    try:
        node = parse_sql(query, dialect=dialect)
    except ObdaError:  # reported by the planner, as for any query
        return None
    return aggregate_plan(query, sources, dialect=dialect, report=given) if is_aggregate(node) else None
