"""Interval joins: difference constraints between stream timestamps (obda.analysis.windows, docs/analysis.md
"Interval joins") — the closure, the verdict and memory of the report, and the forest's expiry rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from obda.analysis import analyze
from obda.analysis.forest import RULES, build_forest
from obda.analysis.forest.draft import start
from obda.analysis.forest.expiry import interval_expiry
from obda.analysis.normal_form import from_sql
from obda.analysis.windows import INF, close, constraint, describe_micros
from obda.errors import AnalysisError, ExecutionError
from obda.model.sources_file import parse_sources

SOURCES = parse_sources(
    """tables:
  s: {kind: stream, timestamp: ts, columns: {a: integer, v: integer, ts: timestamp}}
  t: {kind: stream, timestamp: ts, columns: {a: integer, w: integer, ts: timestamp}}
  u: {kind: stream, timestamp: ts, columns: {a: integer, ts: timestamp}}
  r: {kind: static, columns: {id: integer}}
"""
)
MIN = 60_000_000


def test_constraints_of_each_operator():
    assert constraint("x", "<=", "y", 5) == [("x", "y", 5)]
    assert constraint("x", "<", "y", 5) == [("x", "y", 4)]  # microseconds are discrete
    assert constraint("x", ">=", "y", 5) == [("y", "x", -5)]
    assert constraint("x", ">", "y", 5) == [("y", "x", -6)]
    assert constraint("x", "=", "y", 5) == [("x", "y", 5), ("y", "x", -5)]
    assert constraint("x", "!=", "y") == []


def test_closure_window_lag_and_contradiction():
    # y < x <= y + 5 min, and z = x: every pair bounded
    b = close("xyz", constraint("y", "<", "x") + constraint("x", "<=", "y", 5 * MIN) + constraint("z", "=", "x"))
    assert b.windowed and b.width == 5 * MIN and not b.contradiction
    assert b.upper("z", "y") == 5 * MIN and b.upper("y", "z") == -1
    assert b.lag("y") == 5 * MIN and b.lag("x") == 0  # y's rows wait 5 min for x (and z); x's for nothing
    one_sided = close("xy", constraint("x", "<=", "y", 5 * MIN))
    assert not one_sided.windowed and one_sided.unbounded_pair() == ("y", "x") and one_sided.upper("y", "x") == INF
    assert close("xy", constraint("x", ">=", "y", MIN) + constraint("x", "<", "y", MIN)).contradiction
    assert describe_micros(4 * MIN - 1) == "4 min" and describe_micros(90_000_000) == "90 s"


def _sql(cond: str) -> str:
    return f"SELECT s.v, t.w FROM s, t WHERE s.a = t.a AND {cond}"


@pytest.mark.parametrize("cond,order", [
    ("t.ts <= s.ts + INTERVAL '5' MINUTE AND s.ts < t.ts", None),
    ("t.ts >= s.ts + INTERVAL '1' MINUTE AND t.ts < s.ts + INTERVAL '300' SECOND", "<"),  # implies s.ts < t.ts
    ("s.ts + INTERVAL '2' MINUTE >= t.ts AND s.ts <= t.ts + INTERVAL '1' MINUTE", None),  # a symmetric band
    ("t.ts - INTERVAL '90' SECOND <= s.ts AND s.ts <= t.ts", None),
])
def test_windowed_member_is_bounded_with_window_memory(cond, order):
    (m,) = from_sql(_sql(cond), SOURCES)
    assert m.differences
    if order:
        assert any(str(p) == f"s.ts {order} t.ts" for p in m.predicates)  # the implied order is an LTO atom
    report = analyze(_sql(cond), SOURCES)
    (mr,) = report.members
    assert report.verdict == "bounded" and mr.criterion == "interval_window", report.to_text()
    assert mr.memory.startswith("window, per solution") and "proportional to their rate" in mr.memory
    assert "memory: window, per solution" in report.to_text() and report.to_dict()["members"][0]["memory"]


def test_one_sided_interval_is_not_shown_with_a_hint():
    report = analyze(_sql("t.ts <= s.ts + INTERVAL '5' MINUTE"), SOURCES)
    (mr,) = report.members
    assert report.verdict == "not_shown" and not mr.violations
    assert any("bound s.ts from above relative to t.ts" in h for h in mr.hints), mr.hints
    assert any("interval join without a window" in n for n in mr.notes)


def test_three_streams_chained_by_intervals():
    sql = ("SELECT s.v FROM s, t, u WHERE s.a = t.a AND t.a = u.a AND s.ts < t.ts AND t.ts <= s.ts + INTERVAL '1' "
           "MINUTE AND t.ts < u.ts AND u.ts <= t.ts + INTERVAL '2' MINUTE")
    report = analyze(sql, SOURCES)
    assert report.verdict == "bounded" and "the rows of the last 3 min" in report.members[0].memory
    forest = build_forest(sql, SOURCES)
    lags = {n.aliases: sorted(lag for _, lag in n.expiry) for n in forest.members[0].nodes}
    assert lags[("s",)] and max(lags[("s",)]) == 3 * MIN  # s waits up to 3 min for u


def test_interval_refusals_are_located():
    with pytest.raises(AnalysisError, match="only the timestamps of two streams") as info:
        analyze("SELECT s.v FROM s, r WHERE s.ts <= r.id + INTERVAL '5' MINUTE", SOURCES)
    assert info.value.location.column is not None
    with pytest.raises(AnalysisError, match="DISTINCT with an interval join"):
        analyze("SELECT DISTINCT s.v FROM s, t WHERE t.ts <= s.ts + INTERVAL '5' MINUTE AND s.ts < t.ts", SOURCES)
    with pytest.raises(AnalysisError, match="MICROSECOND to DAY"):
        analyze("SELECT s.v FROM s, t WHERE t.ts <= s.ts + INTERVAL '1' MONTH AND s.ts < t.ts", SOURCES)


def test_expiry_rule_keys_a_timestamp_in_every_unit_and_is_pure():
    sql = _sql("t.ts <= s.ts + INTERVAL '5' MINUTE AND s.ts < t.ts")
    from obda.analysis.forest.members import members_of

    (member,), _, _ = members_of(sql, SOURCES)
    assert any(p.offset == 5 * MIN for p in member.cross)
    d = start(member, False)
    for rule in RULES[: RULES.index(interval_expiry)]:
        d = rule(d)
    after = interval_expiry(d)
    assert all(not n.expiry for n in d.nodes)  # the draft it was given is unchanged
    for n in after.nodes:
        assert n.expiry and all(n.key[i][1] == "ts" for i, _ in n.expiry)
    assert ("t", "ts") in after.kept  # the root t keeps its own timestamp for the expiry only
    with pytest.raises(ExecutionError, match="DISTINCT"):
        interval_expiry(replace(d, distinct=True))
