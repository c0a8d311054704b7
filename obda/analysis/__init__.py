"""Bounded-memory analysis of unfolded SQL (spec/boundedness.md).

    report = analyze(sql_text_or_ast_or_compilation, sources)
    report.verdict            # bounded | unbounded | not_shown
    report.to_dict()          # JSON
    print(report.to_text())

Pipeline (one module per concept): ``normal_form`` (sqlglot AST → SPJ
members) → ``preprocess`` (the four steps, dependency graph) → ``criteria``
(Theorem 1/2, Arasu 5.6/5.10 with the polynomial check; ``naive`` enumerates
LTO queries as an oracle) → ``plan`` (synopses) → ``explain`` / ``report``;
``verdicts`` gathers them into each member's verdict.  This package module is
the front door: the members of a source, :func:`analyze`, :func:`analyze_query`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence, Union

from sqlglot import exp

from obda.analysis.criteria import BOUNDED, NOT_SHOWN, UNBOUNDED
from obda.analysis.forest import Forest, build_forest
from obda.analysis.kept_keys import keys_analysis
from obda.analysis.normal_form import SpjMember, extract, extract_select, from_sql
from obda.analysis.plan import SynopsisPlan
from obda.analysis.report import AnalysisReport, MemberReport, PartReport, ViolationReport
from obda.analysis.sql_reading import member_views, parse_sql, select_context
from obda.analysis.verdicts import analyze_members
from obda.errors import AnalysisError, ExecutionError
from obda.model.compilation import Compilation
from obda.model.sources import Sources

__all__ = [
    "analyze", "analyze_query", "analyze_members", "members_of", "AnalysisReport", "MemberReport", "PartReport", "ViolationReport",
    "SynopsisPlan", "BOUNDED", "UNBOUNDED", "NOT_SHOWN", "Forest", "build_forest", "ExecutionPlan", "plan_execution",
]

Source = Union[str, exp.Expression, Compilation]


def members_of(source: Source, sources: Sources, file: str | None = None) -> list[SpjMember]:
    """Normal-form members of SQL text, a sqlglot expression or a Compilation."""
    if isinstance(source, Compilation):
        out: list[SpjMember] = []
        for i, (m, views) in enumerate(zip(source.members, member_views(source))):
            ctx = select_context(sources, views, None, file)
            out.extend(extract_select(m.select, i, source.distinct, ctx, m.origin))
        return out
    if isinstance(source, exp.Expression):
        return extract(source, sources, None, file)
    if isinstance(source, str):
        return from_sql(source, sources, file)
    raise AnalysisError(f"cannot analyse a {type(source).__name__}: expected SQL text, a sqlglot expression or a Compilation")


def analyze(source: Source, sources: Sources | None = None, *, checker: str = "polynomial",
            file: str | None = None, members: Sequence[SpjMember] = ()) -> AnalysisReport:
    """Bounded-memory verdict, explanation and synopsis plan of a query (spec §5–§6).

    ``source``: SQL text (a UNION [ALL] of SPJ SELECTs), a sqlglot expression
    or a :class:`~obda.model.compilation.Compilation`.  ``sources``: the
    catalog saying which tables are streams.  ``checker``: ``polynomial``
    (default) or ``naive`` (enumerates LTO queries; exponential, for tests).
    ``members``: the normal-form members of ``source`` when the caller read them already (an aggregate's
    characteristic query, :attr:`AggregateReport.members`): not read again.
    Raises :class:`~obda.errors.AnalysisError` for malformed SQL or SQL outside
    the analysable class.
    """
    if sources is None:
        raise AnalysisError("analyze needs the sources catalog (which tables are streams, their timestamp columns)")
    if checker not in ("polynomial", "naive"):
        raise AnalysisError(f"unknown checker {checker!r}: use 'polynomial' or 'naive'")
    text = None
    if isinstance(source, str):  # the --sql front end: parsed once, for the criteria and the forest
        text, source = source, parse_sql(source, file)
    if not members:
        members = members_of(source, sources, file) if text is None else extract(source, sources, text, file)
    notes: list[str] = []
    if isinstance(source, Compilation) and not source.members:
        notes.append("every member of the unfolded query was removed (unsatisfiable or duplicate): the answer is empty")
        for r in source.removed:
            notes.append(f"removed: {r}")
    kept = keys_analysis(source, lambda src: analyze_members(members_of(src, sources, file), checker, None,
                                                             sources.constraints))
    report = analyze_members(members, checker, notes, sources.constraints, kept)
    try:
        readings = {m.index: m.reading for m in members if m.reading is not None}  # each SELECT read once
        forest, error = build_forest(source, sources, text=text, file=file, readings=readings), None
    except ExecutionError as e:  # analysable, but the executor cannot run it: said when it is run
        forest, error = None, e
    return replace(report, forest=forest, forest_error=error)


def analyze_query(source: Source, sources: Sources, *, file: str | None = None, dialect: str | None = None):
    """The verdict report of any query: :func:`analyze` for an SPJ query, and for an aggregate query
    (a SPARQL Compilation with an aggregation, or SQL with GROUP BY / aggregates) the
    :class:`~obda.analysis.aggregates.AggregateReport` of Arasu §8.2."""
    from obda.analysis.aggregates import analyze_aggregate, is_aggregate

    if isinstance(source, Compilation) and source.aggregation is not None:
        return analyze_aggregate(source, sources, file)
    if isinstance(source, str) and is_aggregate(parse_sql(source, file, dialect)):
        return analyze_aggregate(source, sources, file, dialect)
    return analyze(source, sources, file=file)


from obda.analysis.execution_plan import ExecutionPlan, plan_execution  # noqa: E402 - uses analyze above
