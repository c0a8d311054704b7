"""Issue 27, item 6: the analysis reads each SELECT once. Its reading (FROM entries, columns) gives the normal-form
members the verdict is computed on and the executor's members the forest is built from; the two agree on the
FROM entries and split a comparison of two stream timestamps by one rule."""

from __future__ import annotations

import pytest

from obda.analysis import analyze
from obda.analysis.sql_reading import SelectReading
from obda.model.sources import Sources

SOURCES = Sources.from_yaml("""
tables:
  s: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, ts: timestamp}}
  t: {kind: stream, timestamp: ts, columns: {a: integer, d: integer, ts: timestamp}}
  r: {kind: static, columns: {id: integer, name: string}}
""")


@pytest.fixture
def reads(monkeypatch):
    """How many times each SELECT's FROM entries are read, by SELECT."""
    counts: dict[int, int] = {}
    original = SelectReading._read_entries

    def counted(self):
        counts[id(self.sel)] = counts.get(id(self.sel), 0) + 1
        return original(self)

    monkeypatch.setattr(SelectReading, "_read_entries", counted)
    return counts


@pytest.mark.parametrize("sql", [
    "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m1.a = m2.a AND m1.ts <= m2.ts",
    "SELECT m1.a AS a, r.name AS n FROM s AS m1, r AS r WHERE m1.a = r.id UNION ALL "
    "SELECT m2.a AS a, r.name AS n FROM t AS m2, r AS r WHERE m2.d = r.id AND m2.ts <> m2.ts",
])
def test_each_select_is_read_once_for_the_verdict_and_the_forest(reads, sql):
    report = analyze(sql, SOURCES)
    assert report.forest is not None and reads and set(reads.values()) == {1}, reads


def test_a_compilation_is_read_once(reads, demo):
    comp = demo.compile("PREFIX : <http://example.org/turbine#>\nSELECT ?s ?v WHERE { GRAPH ?t1 { ?a :raisedBy ?s } "
                        "GRAPH ?t2 { ?m :measuredBy ?s ; :hasValue ?v } FILTER(?t1 <= ?t2) }")
    report = analyze(comp, demo.sources)
    assert len(reads) == len(comp.members) and set(reads.values()) == {1}, reads
    # the timestamps' ≤ is split by the one rule (elements.TIMESTAMP_SPLITS) into < and = on both sides
    parts = [p for m in report.members for p in m.parts]
    assert {"<", "="} <= {c.split()[1] for p in parts for c in p.choices}
    assert {p.op for mf in report.forest.members for p in mf.member.cross if p.op in ("<", "=", "<=")} == {"<", "="}


def test_an_aggregate_s_characteristic_query_is_read_once_for_its_verdict_and_its_plan(reads, demo):
    """The aggregate verdict (Arasu §8.2) reads Q''s members; the plan's analysis of Q' (its SPJ verdict and forest)
    reuses them (AggregateReport.members): before, Q' was read a second time."""
    from obda.analysis import plan_execution

    comp = demo.compile("PREFIX : <http://example.org/turbine#>\nSELECT ?s (MAX(?v) AS ?top) WHERE { GRAPH ?t { "
                        "?m :measuredBy ?s ; :hasValue ?v } FILTER(?v > 90) } GROUP BY ?s")
    plan = plan_execution(comp, demo.sources)
    assert plan.aggregate is not None and plan.report.forest is not None
    assert len(reads) == len(comp.members) and set(reads.values()) == {1}, reads
