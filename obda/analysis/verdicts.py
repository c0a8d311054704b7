"""Verdicts: the bounded-memory verdict of each normal-form member, and of their union (spec §5–§6).

Each member is preprocessed into parts (:mod:`obda.analysis.preprocess`), every part checked by the criteria
(:mod:`obda.analysis.criteria`, or the naive oracle) and planned when bounded; the member's report gathers the
parts' verdicts, violations with their explanations, hints and notes, then adjusts for interval joins
(:mod:`obda.analysis.windows`), computed conditions (:mod:`obda.analysis.computed`) and the declared
k-constraints (:mod:`obda.analysis.constraints`).  A DISTINCT union's answers are keyed by a timestamp only in a
column every SELECT keys.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis import computed
from obda.analysis.constraints import constrained_verdict, ordered_note, suggestion
from obda.analysis.criteria import BOUNDED, NOT_SHOWN, UNBOUNDED, PartOutcome, check_polynomial
from obda.analysis.explain import hint, plain, provenance, witness
from obda.analysis.kept_keys import with_kept_keys
from obda.analysis.naive import check_naive
from obda.analysis.normal_form import SpjMember
from obda.analysis.plan import build_plan
from obda.analysis.preprocess import ModifiedQuery, preprocess
from obda.analysis.report import AnalysisReport, MemberReport, PartReport, ViolationReport, combine
from obda.analysis.windows import describe_micros, member_bounds
from obda.errors import AnalysisError


def analyze_members(members: list[SpjMember], checker: str = "polynomial", notes: list[str] | None = None,
                    constraints=(), kept=None) -> AnalysisReport:
    """``constraints``: the declared k-constraints (:mod:`obda.analysis.constraints`): each member not bounded
    by itself also gets its verdict under the ones that apply to it.  ``kept``: how the key set of a check without
    a lower bound is judged (rule A5, :func:`obda.analysis.kept_keys.keys_analysis`)."""
    def report(m: SpjMember) -> MemberReport:
        r = _with_constraints(m, _member(m, checker), constraints)
        return with_kept_keys(r, [kept(q) for q in m.kept_keys]) if m.kept_keys and kept is not None else r

    members = _time_keys(members)
    reports = tuple(report(m) for m in members)
    parts = [p.criterion for r in reports for p in r.parts if p.criterion != "unsatisfiable"]
    if "time_keyed" in parts and any(c != "time_keyed" for c in parts):  # keyed apart: remembered together
        members = [replace(m, time_columns=frozenset()) for m in members]
        reports = tuple(report(m) for m in members)
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
    notes: list[str] = list(m.notes)
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
    report = _interval_window(m, report) if m.differences else report
    if m.check_windows:
        report = _check_windows(m, report)
    return computed.adjust(m, report)


def _check_windows(m: SpjMember, report: MemberReport) -> MemberReport:
    """Rules A3, A4, A6: what the checks in a window of time keep, in the plan and memory.  A check's query's
    answers are kept for the windows' part before the answer (an answer meets the later ones as they come); an
    answer waits until a match decides it or its window's end closes.  A window without an end (A6) leaves
    answers waiting for a first match that may never come: unbounded."""
    if any(hi is None for _, hi in m.check_windows):
        why = ("rule A6: an answer of an EXISTS in a window without an end waits for its first match, which may "
               "never come: the answers waiting grow with the stream")
        report = replace(report, verdict=combine([report.verdict, UNBOUNDED]), notes=report.notes + (why,),
                         hints=report.hints + ("bound the window above (?t2 <= ?t + \"PT1H\"^^xsd:dayTimeDuration): an "
                                               "answer then waits that long at most (rule A4)",))
    if report.verdict != BOUNDED:
        return report
    keeps, bounds = [], []
    if any(lo is not None for lo, _ in m.check_windows):  # without one (A5) the kept keys are the plan's "check keys"
        back = max((-lo for lo, _ in m.check_windows if lo is not None and lo < 0), default=0)
        past = f"of the last {describe_micros(back)}" if back else "of the last closed timestamp"
        keeps.append(f"its query's answers {past}, per key")
        bounds.append(f"the check's query's answers (key, timestamp) {past}")
    wait = max(hi for _, hi in m.check_windows)
    if wait > 0:  # rule A4: the answers wait for a match or their window's end
        keeps.append(f"the answers of the last {describe_micros(wait)}, until a match or their window's end "
                     "decides them")
        bounds.append(f"the answers of the last {describe_micros(wait)}")
    bound = ", and ".join(bounds)
    plan = {**report.plan, "check window": {"strategy": "window", "keeps": keeps, "bound": bound}}
    memory = report.memory or (f"window, per solution: {bound} — independent of the streams' length, "
                               "proportional to their rate")
    return replace(report, plan=plan, memory=memory)


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
