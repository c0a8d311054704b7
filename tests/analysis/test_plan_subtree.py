"""Synopsis plans: a parent's synopsis is keyed by what its subtree passes up (spec §5)."""

from obda.analysis import analyze
from obda.model.sources_file import parse_sources

SOURCES = parse_sources(
    """tables:
  S: {kind: stream, timestamp: ts, columns: {A: integer, B: integer, C: integer, ts: timestamp}}
  T: {kind: stream, timestamp: ts, columns: {D: integer, E: integer, ts: timestamp}}
  U: {kind: stream, timestamp: ts, columns: {F: integer, ts: timestamp}}
"""
)


def _plan(sql):
    (member,) = analyze(sql, SOURCES).to_dict()["members"]
    return member["verdict"], member["plan"]


def test_row9_distinct_middle_stream_keeps_the_child_key():
    # T must remember, per F of the U tuples it joined, when it first joined: a later S tuple
    # outputs exactly those F values. One entry per F value in 1..4.
    verdict, plan = _plan("SELECT DISTINCT U.F FROM S, T, U WHERE U.ts < T.ts AND T.ts < S.ts AND U.F > 0 AND U.F < 5")
    assert verdict == "bounded"
    assert plan["T"]["bound_value"] == 4 and plan["U"]["bound_value"] == 4
    assert any("U.F" in k for k in plan["T"]["keeps"])


def test_row4_child_keeps_only_its_own_bounded_key():
    verdict, plan = _plan("SELECT T.D FROM S, T WHERE T.ts < S.ts AND T.D > 0 AND T.D < 5")
    assert verdict == "bounded"
    assert plan["T"]["bound_value"] == 8  # 4 values × (current, past)
    assert plan["S"]["bound_value"] == 0  # the root's tuples are written out, never stored
