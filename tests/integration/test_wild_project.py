"""Mappings from the wild (issue 27): '_'-separated templates, a referencing object map over streams without
keys, IRIs and literals built from a timestamp column — every query of catalogs/wild.yaml over
tests/projects/wild gets its verdict, its SQL gives the W3C bag, and the executor gives DuckDB's answers after
every closed timestamp.

The oracle is the W3C one of ``bag_oracle.py``: the project's mapping materialised by **morph-kgc** (an
independent R2RML engine, over a SQLite copy of the tables), each snapshot closed with owlrl, the SPARQL text
run by pyoxigraph.  The data holds what makes such mappings hard on purpose: two sensor rows give one IRI
(``A`` + ``B_temp`` and ``A_B`` + ``temp``: ``Sensor_A_B_temp``), equal stream rows, several rows per
timestamp, an alert whose station is unknown.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pytest

from execution.exec_harness import Oracle, counter_of, drive, random_splits
from integration.bag_oracle import BagOracle, bag_diff, load_csv_tables, morph_kgc_dataset, quads_by_value, sql_bag
from obda.analysis import analyze
from obda.catalog import check_entry, load_catalog
from obda.mapping import materialise
from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
WILD = ROOT / "tests" / "projects" / "wild"
ENTRIES = load_catalog(ROOT / "catalogs" / "wild.yaml")
D = "http://example.org/wild/"


@pytest.fixture(scope="module")
def world():
    project = Project.load(WILD)
    con = load_csv_tables(WILD, project.sources)
    dataset = morph_kgc_dataset(project, con)
    rows = {}
    for t in project.sources.tables:
        cur = con.execute(f'SELECT * FROM "{t.name}"')
        names = [d[0] for d in cur.description]
        rows[t.name] = [dict(zip(names, r)) for r in cur.fetchall()]
    streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in project.sources.streams}
    statics = {t.name: rows[t.name] for t in project.sources.tables if not t.is_stream}
    return project, con, dataset, BagOracle(dataset, project.settings.ontology_files), streams, statics


def _iso(v):
    """A value as the executor writes it: a timestamp as its xsd:dateTime text."""
    return v.isoformat() if isinstance(v, dt.datetime) else v


def test_morph_kgc_gives_obda_materialisers_dataset(world):
    """The oracle's dataset (morph-kgc) is the one obda's materialiser gives, graph by graph; the run-into
    IRIs and the observation IRIs with their xsd:dateTime time are in it."""
    project, con, dataset, _, _, _ = world
    ours = quads_by_value(materialise(project.mapping, con, sources=project.sources, dialect="duckdb"))
    theirs = quads_by_value(dataset)
    assert ours == theirs
    default = theirs["default"]
    assert sum(1 for s, p, o in default if str(s) == D + "Sensor_A_B_temp" and str(p).endswith("#unit")) == 1
    t0 = theirs["urn:obda:time:2024-01-01T10:00:00"]
    assert any(str(s) == D + "Observation_A_B_temp_2024-01-01T10%3A00%3A00" for s, _, _ in t0)
    assert len(theirs) == 9  # the default graph and 8 timestamps


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_expected_verdict(world, entry):
    project = world[0]
    res = check_entry(project, entry)
    assert res.error is None, res.error
    assert res.verdict == entry.expected, f"{entry.name}: expected {entry.expected}, got {res.verdict} ({entry.why})"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_sql_bag_equals_w3c_bag(world, entry):
    project, con, _, oracle, _, _ = world
    comp = project.compile(entry.query)
    want = oracle.answers(entry.query, list(comp.columns))
    got = sql_bag(con, comp.to_sql("duckdb"))
    assert want, f"{entry.name}: the query must have answers"
    assert got == want, f"{entry.name}: obda's SQL bag differs from the W3C bag\n" + bag_diff(got, want)


# hand-computed from the CSV files: the oracle and obda must both say this
HAND = {
    # Sensor_A_B_temp :unit "C" from two sensor rows: one triple
    "wild_unit_of_an_ambiguous_sensor_iri": {("C",): 1},
    # Observation_A_B_temp at 10:00 comes from (A, B_temp, 21) and (A_B, temp, 22): one IRI, two values
    "wild_observations_of_one_ambiguous_sensor": {
        (dt.datetime(2024, 1, 1, 10, 0), 21.0): 1, (dt.datetime(2024, 1, 1, 10, 0), 22.0): 1,
        (dt.datetime(2024, 1, 1, 10, 4), 22.0): 1, (dt.datetime(2024, 1, 1, 10, 7), 27.0): 1},
    # alerts 1, 2 (two equal rows: one alert), 4, 5, 6, 7 have an observation at their time; 3 and 8 do not
    "wild_alerts_about_observations": {
        (dt.datetime(2024, 1, 1, 10, 0), D + "Alert_1_A", 20.0): 1, (dt.datetime(2024, 1, 1, 10, 1), D + "Alert_2_A", 20.0): 1,
        (dt.datetime(2024, 1, 1, 10, 2), D + "Alert_4_C_1", 25.0): 1, (dt.datetime(2024, 1, 1, 10, 4), D + "Alert_5_A_B", 22.0): 1,
        (dt.datetime(2024, 1, 1, 10, 5), D + "Alert_6_B", 19.0): 1, (dt.datetime(2024, 1, 1, 10, 7), D + "Alert_7_A", 27.0): 1},
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_computed_bags(world, name):
    project, con, _, oracle, _, _ = world
    entry = next(e for e in ENTRIES if e.name == name)
    comp = project.compile(entry.query)
    assert oracle.answers(entry.query, list(comp.columns)) == Counter(HAND[name])
    assert sql_bag(con, comp.to_sql("duckdb")) == Counter(HAND[name])


STREAM_ENTRIES = [e for e in ENTRIES if "GRAPH" in e.query]


@pytest.mark.parametrize("entry", STREAM_ENTRIES, ids=[e.name for e in STREAM_ENTRIES])
def test_local_executor_equals_duckdb_after_every_closed_timestamp(world, entry):
    """The local backend over random micro-batch splits: after every closed timestamp, the answers so far are
    DuckDB's over the rows up to it (a DISTINCT query: each answer once); a DISTINCT query keyed by its
    answers' time ends with nothing remembered."""
    project, _, _, _, streams, statics = world
    comp = project.compile(entry.query)
    report = analyze(comp, project.sources)
    db = Oracle(project.sources, streams, statics)
    times = sorted({r[t.timestamp] for t in project.sources.streams for r in streams[t.name]})
    want = {m: Counter({tuple(map(_iso, k)): c for k, c in ans.items()})
            for m, ans in db.answers_at(comp.to_sql("spark"), times).items()}
    assert want[times[-1]], f"{entry.name}: the query must have answers"
    for seed in range(3):
        seen: dict = {}

        def on_close(rt, out):
            if rt.closed_upto is not None:
                seen[rt.closed_upto] = counter_of(out)

        rt, out = drive(comp, project.sources, random_splits(streams, seed, max_chunk=3), static=statics,
                        on_close=on_close)
        for closed, got in seen.items():
            upto = max((t for t in times if _us(t) <= closed), default=None)
            expected = want[upto] if upto is not None else Counter()
            if comp.distinct:
                assert set(got) == set(expected) and max(got.values(), default=1) == 1, (entry.name, seed, closed)
            else:
                assert got == expected, (entry.name, seed, closed)
        if report.forest.keyed_by_time:
            assert not rt.engine.emitted


def _us(t: dt.datetime) -> int:
    return int(t.replace(tzinfo=dt.timezone.utc).timestamp()) * 1_000_000 + t.microsecond


def test_the_keyed_distinct_queries_forget_and_the_others_remember(world):
    """The executor drops the written answers of a DISTINCT query keyed by their time (docs/analysis.md,
    "Projected times", Rule 2) and keeps them otherwise: the state of the same pattern without ?t grows."""
    project, _, _, _, streams, statics = world
    keyed = project.compile("PREFIX : <http://example.org/wild#>\n"
                            "SELECT DISTINCT ?t ?s WHERE { GRAPH ?t { ?o :observedBy ?s } }")
    plain = project.compile("PREFIX : <http://example.org/wild#>\n"
                            "SELECT DISTINCT ?s WHERE { GRAPH ?t { ?o :observedBy ?s } }")
    sizes = {}
    for name, comp in (("keyed", keyed), ("plain", plain)):
        peak = []
        drive(comp, project.sources, random_splits(streams, 1, max_chunk=3), static=statics,
              on_close=lambda rt, out: peak.append(len(rt.engine.emitted)))
        sizes[name] = max(peak)
    # the five sensor IRIs that observed (A_temp, A_B_temp from two sensor rows, B_hum, B_temp, C_1_temp)
    assert sizes["keyed"] == 0 and sizes["plain"] == 5


@pytest.mark.spark
def test_spark_joins_a_referencing_object_map_over_streams_per_timestamp(spark, world, tmp_path):
    """The default run's Spark case: alert :about observation (two streams, no keys) with the projected time,
    in one micro-batch; the slow test below runs more queries over several micro-batches."""
    _spark_cases(spark, world, tmp_path, ["wild_alerts_about_observations"], max_chunk=30, files_per_batch=None)


@pytest.mark.spark
@pytest.mark.slow  # about 35 s on a busy 2-core machine
def test_spark_backend_equals_the_local_one_and_duckdb_after_every_closed_timestamp(spark, world, tmp_path):
    """Projected times, an IRI with its time under DISTINCT, referencing object maps to a stream and to a static
    table (joined within each timestamp on Spark): Spark writes the local backend's lines over micro-batches of
    files, and the answers up to every emitted_at are DuckDB's."""
    _spark_cases(spark, world, tmp_path, ["wild_distinct_observations", "wild_alerts_about_observations",
                                          "wild_alerts_at_stations"], max_chunk=12, files_per_batch=2)


def _spark_cases(spark, world, tmp_path, names, max_chunk, files_per_batch):
    import dataclasses
    import json

    from execution.exec_harness import write_csv_batches, write_static
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink
    from obda.model.sources import Sources

    project, _, _, _, streams, statics = world
    src = Sources(tuple(dataclasses.replace(t, location=f"data/{t.name}") for t in project.sources.tables))
    write_csv_batches(tmp_path / "data", random_splits(streams, 4, max_chunk=max_chunk), src)
    for name, rows in statics.items():
        write_static(tmp_path / "data", name, rows)
    times = sorted({r[t.timestamp] for t in src.streams for r in streams[t.name]})
    for name in names:
        comp = project.compile(next(e for e in ENTRIES if e.name == name).query)
        text = {}
        for backend in ("spark", "local"):
            out = tmp_path / f"{name}.{backend}.jsonl"
            q = ContinuousQuery(plan_execution(comp, src), base_dir=tmp_path, sink=JsonLinesSink(out), spark=spark,
                                backend=backend, max_files_per_batch=files_per_batch)
            q.run_until_exhausted()
            q.close()
            text[backend] = out.read_text()
        assert Counter(text["spark"].splitlines()) == Counter(text["local"].splitlines()), name
        lines = [json.loads(line) for line in text["spark"].splitlines()]
        want = Oracle(src, streams, statics).answers_at(comp.to_sql("spark"), times)
        for t in times:
            stamp = t.isoformat() + "Z"
            got = Counter(tuple(r["binding"][c] for c in comp.columns) for r in lines if r["emitted_at"] <= stamp)
            expected = Counter({tuple(map(_iso, k)): c for k, c in want[t].items()})
            if comp.distinct:
                expected = Counter(set(expected))
            assert got == expected, (name, t)
        assert lines, name
