"""Bounded-memory analysis of unfolded SQL (spec/boundedness.md).

    report = analyze(sql_text_or_ast_or_compilation, sources)
    report.verdict            # bounded | unbounded | not_shown
    report.to_dict()          # JSON
    print(report.to_text())

Pipeline (one module per concept): ``normal_form`` (sqlglot AST → SPJ
members) → ``preprocess`` (the four steps, dependency graph) → ``criteria``
(Theorem 1/2, Arasu 5.6/5.10 with the polynomial check; ``naive`` enumerates
LTO queries as an oracle) → ``plan`` (synopses) → ``explain`` / ``report``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Union

from sqlglot import exp

from obda.analysis.constraints import constrained_verdict, ordered_note, suggestion
from obda.analysis.criteria import BOUNDED, NOT_SHOWN, UNBOUNDED, PartOutcome, check_polynomial
from obda.analysis.explain import hint, plain, provenance, witness
from obda.analysis.naive import check_naive
from obda.analysis.forest import Forest, build_forest
from obda.analysis.normal_form import SpjMember, _Ctx, extract, extract_select, from_sql, parse_sql
from obda.analysis.plan import SynopsisPlan, build_plan
from obda.analysis.preprocess import ModifiedQuery, preprocess
from obda.analysis.terms import view_timestamp_keys
from obda.analysis.report import AnalysisReport, MemberReport, PartReport, ViolationReport, combine
from obda.analysis.windows import describe_micros, member_bounds
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
        for i, m in enumerate(source.members):
            used = {a: source.view(s.view) for s in m.origin.atom_sources if s.view for a in s.table_aliases}
            ctx = _Ctx(None, sources, file, {a: v.table for a, v in used.items()},
                       {a: view_timestamp_keys(v, sources) for a, v in used.items()})
            out.extend(extract_select(m.select, i, source.distinct, ctx, m.origin))
        return out
    if isinstance(source, exp.Expression):
        return extract(source, sources, None, file)
    if isinstance(source, str):
        return from_sql(source, sources, file)
    raise AnalysisError(f"cannot analyse a {type(source).__name__}: expected SQL text, a sqlglot expression or a Compilation")


def analyze(source: Source, sources: Sources | None = None, *, checker: str = "polynomial",
            file: str | None = None) -> AnalysisReport:
    """Bounded-memory verdict, explanation and synopsis plan of a query (spec §5–§6).

    ``source``: SQL text (a UNION [ALL] of SPJ SELECTs), a sqlglot expression
    or a :class:`~obda.model.compilation.Compilation`.  ``sources``: the
    catalog saying which tables are streams.  ``checker``: ``polynomial``
    (default) or ``naive`` (enumerates LTO queries; exponential, for tests).
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
    members = members_of(source, sources, file) if text is None else extract(source, sources, text, file)
    notes: list[str] = []
    if isinstance(source, Compilation) and not source.members:
        notes.append("every member of the unfolded query was removed (unsatisfiable or duplicate): the answer is empty")
        for r in source.removed:
            notes.append(f"removed: {r}")
    report = analyze_members(members, checker, notes, sources.constraints)
    try:
        forest, error = build_forest(source, sources), None
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


def analyze_members(members: list[SpjMember], checker: str = "polynomial", notes: list[str] | None = None,
                    constraints=()) -> AnalysisReport:
    """``constraints``: the declared k-constraints (:mod:`obda.analysis.constraints`): each member not bounded
    by itself also gets its verdict under the ones that apply to it."""
    members = _time_keys(members)
    reports = tuple(_with_constraints(m, _member(m, checker), constraints) for m in members)
    parts = [p.criterion for r in reports for p in r.parts if p.criterion != "unsatisfiable"]
    if "time_keyed" in parts and any(c != "time_keyed" for c in parts):  # keyed apart: remembered together
        members = [replace(m, time_columns=frozenset()) for m in members]
        reports = tuple(_with_constraints(m, _member(m, checker), constraints) for m in members)
    verdict = combine(m.verdict for m in reports) if reports else BOUNDED
    return AnalysisReport(verdict, reports, tuple(notes or ()))


def _time_keys(members: list[SpjMember]) -> list[SpjMember]:
    """A DISTINCT union's answers are keyed by their timestamp only in a column every SELECT keys
    (docs/analysis.md, "Projected times", Rule 2): the members' ``time_columns``."""
    if not members or not members[0].distinct or len({m.index for m in members}) < 2:
        return members
    common = set.intersection(*({p.name for p in m.projection if p.times} for m in members))
    return [replace(m, time_columns=frozenset(common)) for m in members]


def _check(mq: ModifiedQuery, checker: str) -> PartOutcome:
    return check_naive(mq) if checker == "naive" else check_polynomial(mq)


def _streams(mq: ModifiedQuery) -> dict:
    g = mq.graph
    out = {}
    for s in mq.streams:
        d = {"kind": s.kind, "parent": None, "depth": None, "tables": list(s.tables), "aliases": list(s.aliases)}
        if s.kind == "infinite":
            d["parent"] = g.parent(s.name)
            d["parents"] = list(g.parents(s.name))
            d["depth"] = g.depth(s.name)
        if s.reason:
            d["reason"] = s.reason
        out[s.name] = d
    return out


def _part(mq: ModifiedQuery, checker: str) -> PartReport:
    if not mq.satisfiable:
        return PartReport(mq.part, mq.choices, BOUNDED, "unsatisfiable", (), {}, None, reason=mq.reason)
    out = _check(mq, checker)
    vs = tuple(
        ViolationReport(v.condition, v.kind, v.streams, v.attributes, v.message, plain(mq, v), witness(mq, v),
                        hint(mq, v), tuple(provenance(mq, v.streams)), mq.part if mq.choices else None)
        for v in out.violations
    )
    plan = build_plan(mq) if out.verdict == BOUNDED else None
    return PartReport(mq.part, mq.choices, out.verdict, out.criterion, vs, _streams(mq), plan, mq.removed,
                      mq.graph.to_dict())


def _alternative(m: SpjMember, checker: str) -> str | None:
    """Verdict with the other projection (bag ↔ set): a hint when it would be bounded."""
    try:
        alt = replace(m, distinct=not m.distinct)
        parts = preprocess(alt)
        return combine(_check(p, checker).verdict if p.satisfiable else BOUNDED for p in parts)
    except AnalysisError:
        return None


def _member(m: SpjMember, checker: str) -> MemberReport:
    mqs = preprocess(m)
    parts = tuple(_part(mq, checker) for mq in mqs)
    verdict = combine(p.verdict for p in parts)
    sat = [p for p in parts if p.criterion != "unsatisfiable"]
    decisive = next((p for p in sat if p.verdict != BOUNDED), sat[0] if sat else parts[0])
    many = len(sat) > 1
    violations = tuple(v for p in parts for v in p.violations)
    if many:
        plan = {f"part{p.index}:{k}": v for p in sat if p.plan for k, v in p.plan.to_dict().items()}
    else:
        plan = decisive.plan.to_dict() if decisive.plan else {}
    hints: list[str] = []
    notes: list[str] = []
    wit = next((v.witness for v in violations if v.witness), "")
    for v in violations:
        if v.hint and v.hint not in hints:
            hints.append(v.hint)
    if verdict != BOUNDED:
        alt = _alternative(m, checker)
        if alt == BOUNDED:
            hints.append("drop DISTINCT (keep duplicates): the bag version of this member is bounded"
                         if m.distinct else
                         "use SELECT DISTINCT: the duplicate-eliminating version of this member is bounded")
    if verdict == NOT_SHOWN:
        notes.append("Theorem 2 is a sufficient condition only: the member may still be computable in bounded memory")
    for mq, p in zip(mqs, parts):
        if mq.removed:
            notes.append("redundant self-join occurrences removed (Arasu §8.1): "
                         + ", ".join(f"{a} (covered by {b})" for a, b in mq.removed))
        if p.criterion == "theorem1" and p.verdict == UNBOUNDED and _beyond_paper(mq, p):
            notes.append("spec §8: the paper's Theorem 1 reports this member unbounded; counters per down-closed set of "
                         "the timestamp order could still evaluate it in bounded memory (the verdict is the paper's)")
            break
    if many:
        notes.append(f"split into {len(parts)} parts by ≠ / timestamp ≤ (spec §3 step 1); the member is bounded iff every part is")
    for mq in mqs:
        for s in mq.streams:
            if s.kind == "finite" and s.reason:
                note = f"{s.name} is a finite stream: {s.reason}"
                if note not in notes:
                    notes.append(note)
    report = MemberReport(
        index=m.index, disjunct=m.disjunct, sql=m.sql, condition=m.condition_text(), projection=m.projection_kind,
        verdict=verdict, criterion=decisive.criterion, violations=violations, streams=decisive.streams, plan=plan,
        origin=m.origin.to_dict() if m.origin else {}, parts=parts, witness=wit, hints=tuple(hints),
        notes=tuple(notes), checker=checker,
    )
    return _interval_window(m, report) if m.differences else report


def _with_constraints(m: SpjMember, report: MemberReport, constraints) -> MemberReport:
    """The member's verdict under the declared k-constraints (the plain verdict stays), or a hint naming the
    constraints whose declaration would bound it."""
    if report.verdict == BOUNDED:
        return report
    note = ordered_note(m, constraints)
    if note:
        report = replace(report, notes=report.notes + (note,))
    cv = constrained_verdict(m, report.verdict, constraints)
    if cv is not None and cv.verdict == BOUNDED:
        return replace(report, constrained=cv)
    hint = suggestion(m)
    hints = report.hints + ((hint,) if hint and hint not in report.hints else ())
    return replace(report, constrained=cv, hints=hints)


def _interval_window(m: SpjMember, report: MemberReport) -> MemberReport:
    """The verdict of a member with interval-join constraints (docs/analysis.md, "Interval joins").

    The order criteria above judged the member with the order its constraints imply; the difference
    constraints decide: when they bound every pair of stream timestamps, the member keeps the rows of a
    window (bounded, memory proportional to the rows in it); otherwise the past timestamps it must keep
    grow with the stream."""
    b = member_bounds(m)
    relaxed = f"{report.verdict} [{report.criterion}]"
    if b.contradiction:
        return replace(report, verdict=BOUNDED, criterion="unsatisfiable", violations=(), plan={},
                       notes=report.notes + ("the interval constraints contradict each other: no answer",))
    if b.windowed:
        width = describe_micros(b.width)
        plan = {a: p for a, p in report.plan.items() if a not in b.names}  # static relations: as planned
        for a in b.names:
            lag = b.lag(a)
            plan[a] = ({"strategy": "window", "keeps": [f"rows of the last {describe_micros(lag)}"],
                        "bound": f"the rows of {a} (with their timestamp) of the last {describe_micros(lag)}"}
                       if lag > 0 else
                       {"strategy": "pass_through", "keeps": [], "bound": "0 entries (its rows join earlier ones "
                        "when they arrive and are never stored)"})
        note = (f"interval join: the timestamps of one answer lie within {width} of each other; a row is dropped "
                f"once no later row can join it (without the durations, the order alone gives: {relaxed})")
        return replace(report, verdict=BOUNDED, criterion="interval_window", violations=(), plan=plan,
                       hints=(), witness="", notes=report.notes + (note,),
                       memory=f"window, per solution: the rows of the last {width} and their partial joins — "
                              "independent of the streams' length, proportional to their rate")
    x, y = b.unbounded_pair()
    tx, ty = m.relation(x).timestamp, m.relation(y).timestamp
    hint = (f"bound {tx} from above relative to {ty} (in SPARQL, on their time variables: "
            f"FILTER(?t2 <= ?t1 + \"PT10M\"^^xsd:dayTimeDuration)): a window needs a bound both ways between "
            "every two timestamps")
    note = (f"interval join without a window: {tx} can be arbitrarily later than {ty}, so the timestamps the "
            f"interval constraints compare are kept forever (without the durations, the order alone gives: {relaxed})")
    # neither the order criteria's proof of growth nor their bound carries over to the constrained member
    return replace(report, verdict=NOT_SHOWN, violations=(), witness="", plan={}, hints=(hint,),
                   notes=report.notes + (note,))


def _beyond_paper(mq: ModifiedQuery, p: PartReport) -> bool:
    """Spec §8 situations: only tree-shape / depth conditions fail, on bounded attributes."""
    cl = mq.closure
    for v in p.violations:
        if v.kind == "trees":
            continue
        if v.kind == "projection" and not any(str(t) in v.attributes for t in mq.projected_times) and all(
                cl.bounded(a) for a in mq.projection if str(a) in v.attributes):
            continue
        return False
    return bool(p.violations)


from obda.analysis.execution_plan import ExecutionPlan, plan_execution  # noqa: E402 - uses analyze above
