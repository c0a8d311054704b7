"""The executor runs per-atom views: cumulative answers after every closed timestamp equal the SQL.

The multiplicity fixture (tests/integration/multiplicity) has streams without
keys, equal rows within one timestamp and triples produced by several triples
maps, so its queries read per-atom views (``SELECT DISTINCT`` / ``UNION``
derived tables).  The executor deduplicates view rows per timestamp in its
pipelines and runtime (``obda.analysis.forest.ViewDedupe``, ``obda.execution.views``); micro-batches cut
the streams at random, so one timestamp's equal rows often arrive in different
micro-batches.  The expected answers are DuckDB's over the rows up to each
closed timestamp (the harness's ``Oracle``), for every case of the W3C bag
suite, on 50 seeds; and Spark's pipelines give the same final answers.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter
from pathlib import Path

import pytest

from obda.analysis import plan_execution
from obda.execution import ContinuousQuery
from obda.execution.sinks import MemorySink
from obda.model.sources import ColumnType
from obda.project import Project

from execution.exec_harness import Oracle, counter_of, drive, from_us, random_splits
from integration.test_bag_oracle import CASES
from seeds import seed_sets

FIXTURE = Path(__file__).resolve().parents[1] / "integration" / "multiplicity"


def _typed(value: str, ctype: ColumnType):
    if value == "":
        return None
    if ctype is ColumnType.INTEGER:
        return int(value)
    if ctype is ColumnType.TIMESTAMP:
        return dt.datetime.fromisoformat(value.replace("Z", ""))
    return value


@pytest.fixture(scope="module")
def world():
    project = Project.load(FIXTURE)
    rows = {}
    for t in project.sources.tables:
        with open(FIXTURE / t.location, newline="") as f:
            rows[t.name] = [{c.name: _typed(r[c.name], c.type) for c in t.columns} for r in csv.DictReader(f)]
    streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in project.sources.streams}
    statics = {t.name: rows[t.name] for t in project.sources.tables if not t.is_stream}
    return project, streams, statics, Oracle(project.sources, streams, statics)


def test_fixture_queries_read_views(world):
    """The suite exercises views over streams and static tables (a test that cannot fail otherwise)."""
    project = world[0]
    comps = [project.compile(c.text) for c in CASES]
    kinds = {v.table.kind.value for c in comps for v in c.views}
    assert kinds == {"stream", "static"}
    assert any(len(v.parts) > 1 for c in comps for v in c.views)  # a union view


@seed_sets()
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_executor_equals_sql_on_views(world, case, seeds):
    project, streams, statics, oracle = world
    comp = project.compile(case.text)
    sql = comp.to_sql("spark")
    final = oracle.answers(sql)
    for seed in seeds:
        snapshots: dict[dt.datetime, Counter] = {}

        def on_close(rt, out):
            if rt.closed_upto is not None:
                snapshots[from_us(rt.closed_upto)] = counter_of(out)

        _, out = drive(comp, project.sources, random_splits(streams, seed, max_chunk=2), static=statics,
                       on_close=on_close)
        assert counter_of(out) == final, (case.id, seed)
        expected = oracle.answers_at(sql, sorted(snapshots))
        for m, got in snapshots.items():
            assert got == expected[m], (case.id, seed, m)


STREAM_CASES = [c for c in CASES if "GRAPH" in c.text]


@pytest.mark.spark
@pytest.mark.parametrize("case", STREAM_CASES[:4], ids=[c.id for c in STREAM_CASES[:4]])
def test_spark_pipelines_run_views(world, case, spark):
    project, _, _, oracle = world
    comp = project.compile(case.text)
    sink = MemorySink()
    q = ContinuousQuery(plan_execution(comp, project.sources, ["bounded"] * len(comp.members)), base_dir=FIXTURE, sink=sink,
                        spark=spark, allow_unbounded=True)
    q.run_until_exhausted()
    got = Counter(tuple(line["binding"][c] for c in comp.columns) for line in sink.drain())
    assert got == Counter(oracle.answers(comp.to_sql("spark"))), case.id


JOIN_SOURCES = """
tables:
  jturbine: {kind: static, columns: {id: integer, site_id: integer}}
  jsite: {kind: static, columns: {id: integer, region: string}}
  jreading: {kind: stream, timestamp: ts, columns: {turbine_id: integer, value: integer, ts: timestamp}}
"""
JOIN_MAPPING = """
@prefix rr: <http://www.w3.org/ns/r2rml#> .
@prefix ex: <http://ex.org/> .
ex:Site a rr:TriplesMap; rr:logicalTable [ rr:tableName "jsite" ];
  rr:subjectMap [ rr:template "http://ex.org/site/{id}" ];
  rr:predicateObjectMap [ rr:predicate ex:region; rr:objectMap [ rr:column "region" ] ].
ex:Turbine a rr:TriplesMap; rr:logicalTable [ rr:tableName "jturbine" ];
  rr:subjectMap [ rr:template "http://ex.org/turbine/{id}" ];
  rr:predicateObjectMap [ rr:predicate ex:locatedAt;
    rr:objectMap [ rr:parentTriplesMap ex:Site; rr:joinCondition [ rr:child "site_id"; rr:parent "id" ] ] ].
ex:Reading a rr:TriplesMap; rr:logicalTable [ rr:tableName "jreading" ];
  rr:subjectMap [ rr:template "http://ex.org/reading/{turbine_id}" ];
  rr:predicateObjectMap [ rr:predicate ex:of; rr:objectMap [ rr:template "http://ex.org/turbine/{turbine_id}" ] ];
  rr:predicateObjectMap [ rr:predicate ex:value; rr:objectMap [ rr:column "value" ] ].
"""


def _compile(text: str, mapping: str, sources):
    from obda.mapping import parse_mapping_text, unfold
    from obda.model.compilation import Compilation
    from obda.query import parse_query
    from obda.rewrite import RewrittenCQ

    q = parse_query(text)
    rewritten = [RewrittenCQ(i, b) for i, b in enumerate(q.branches)]
    u = unfold(q, rewritten, parse_mapping_text(mapping), sources)
    return Compilation(q, tuple(r.cq for r in rewritten), u.members, u.sql, u.removed, u.views)


@pytest.mark.parametrize("text", [
    # locatedAt joins turbine with site (a referencing object map); without keys it is a static view whose
    # branch joins two tables: equal turbine rows give one triple
    "SELECT ?t ?s WHERE { ?t ex:locatedAt ?s }",
    "SELECT ?r ?v WHERE { ?t ex:locatedAt ?s . ?s ex:region \"north\" . GRAPH ?g { ?r ex:of ?t ; ex:value ?v } }",
])
def test_static_view_joining_two_tables_runs(text):
    # (table names of their own: the harness's DuckDB connection is shared by the module's oracles)
    from obda.model.sources_file import parse_sources

    src = parse_sources(JOIN_SOURCES)
    comp = _compile("PREFIX ex: <http://ex.org/>\n" + text, JOIN_MAPPING, src)
    assert any(not part.single for v in comp.views for part in v.parts)  # the case under test
    base = dt.datetime(2024, 1, 1)
    statics = {"jturbine": [{"id": 1, "site_id": 10}, {"id": 1, "site_id": 10}, {"id": 2, "site_id": 20},
                           {"id": 3, "site_id": 99}],
               "jsite": [{"id": 10, "region": "north"}, {"id": 20, "region": "south"}, {"id": 10, "region": "north"}]}
    streams = {"jreading": [{"turbine_id": t, "value": v, "ts": base + dt.timedelta(seconds=k)}
                           for k, (t, v) in enumerate([(1, 5), (1, 5), (2, 6), (1, 7), (3, 8)])]}
    oracle = Oracle(src, streams, statics)
    final = oracle.answers(comp.to_sql("spark"))
    assert final, "the case must have answers"
    for seed in range(10):
        _, out = drive(comp, src, random_splits(streams, seed, max_chunk=2), static=statics)
        assert counter_of(out) == final, seed


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_view_queries_are_analysed_and_run_when_bounded(world, case, tmp_path):
    """The analyser reads every view query (polynomial = naive checker); bounded ones run without the opt-in."""
    from obda.analysis import analyze

    project, _, _, oracle = world
    comp = project.compile(case.text)
    report = analyze(comp, project.sources)
    assert report.verdict == analyze(comp, project.sources, checker="naive").verdict, case.id
    if report.verdict != "bounded":
        return
    sink = MemorySink()
    ContinuousQuery(plan_execution(comp, project.sources, report), base_dir=FIXTURE, sink=sink, backend="local").run_until_exhausted()
    got = Counter(tuple(line["binding"][c] for c in comp.columns) for line in sink.drain())
    assert got == Counter(oracle.answers(comp.to_sql("spark"))), case.id


def test_stream_view_branch_joining_tables_runs_per_timestamp():
    """A stream view whose branch joins a stream with a static table (an rr:sqlQuery join, no keys) is joined at
    every closed timestamp (issue 27: no keys needed); equal rows give one view row."""
    from obda.analysis import analyze
    from obda.model.sources_file import parse_sources

    src = parse_sources(JOIN_SOURCES)
    mapping = JOIN_MAPPING + """
ex:Hot a rr:TriplesMap;
  rr:logicalTable [ rr:sqlQuery "SELECT r.turbine_id, r.ts FROM jreading r JOIN jturbine t ON r.turbine_id = t.id" ];
  rr:subjectMap [ rr:template "http://ex.org/reading/{turbine_id}"; rr:class ex:Hot ].
"""
    comp = _compile("PREFIX ex: <http://ex.org/>\nSELECT ?r WHERE { GRAPH ?t { ?r a ex:Hot } }", mapping, src)
    report = analyze(comp, src)
    assert report.forest is not None and any(j.temporal for j in report.forest.views.joins)
    base = dt.datetime(2024, 1, 1)
    statics = {"jturbine": [{"id": 1, "site_id": 10}, {"id": 1, "site_id": 10}, {"id": 2, "site_id": 20}],
               "jsite": [{"id": 10, "region": "north"}]}
    streams = {"jreading": [{"turbine_id": t, "value": v, "ts": base + dt.timedelta(seconds=k // 2)}
                           for k, (t, v) in enumerate([(1, 5), (1, 5), (2, 6), (1, 7), (3, 8), (1, 1)])]}
    final = Oracle(src, streams, statics).answers(comp.to_sql("spark"))
    # per timestamp, reading/1 once however many equal readings and turbine rows; turbine 3 does not exist
    assert final == Counter({("http://ex.org/reading/1",): 3, ("http://ex.org/reading/2",): 1})
    for seed in range(10):
        _, out = drive(comp, src, random_splits(streams, seed, max_chunk=2), static=statics)
        assert counter_of(out) == final, seed
