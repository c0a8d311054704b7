"""Differential tests of the distributed path: answers computed by Spark == DuckDB, after every timestamp.

Each run writes random rows as files (random micro-batch splits), runs the Spark backend
(answers computed on the executors, :mod:`obda.execution.distributed`) until the input is
exhausted and checks, from the ``emitted_at`` of every answer line, the **cumulative**
output after every timestamp of the data against DuckDB over the rows up to it, and the
final output against DuckDB over all rows.  The §7 rows and the other harness cases, and
every bounded query of the demo catalog.

Default run: one seed for the queries that cover every shape of the forest, each run alone
(Spark's per-job cost makes a run take seconds); ``-m slow``: every query, and 50 seeds with,
per seed, every query in one shared loop
(:class:`~obda.execution.SharedScan`: one read and one collect job per micro-batch).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from execution.exec_harness import CASES, STATIC_R, Oracle, random_streams, sources, write_seed
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink, SharedScan
from obda.model.sources import Sources

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
# the 50 seeds in two halves: one test each, so that two processes can run them side by side (a seed's
# time is mostly Spark's planning, on one thread): pytest -m slow -k "50_seeds and seeds_0_24" / "seeds_25_49"
HALVES = [pytest.param(range(0, 25), id="seeds_0_24"), pytest.param(range(25, 50), id="seeds_25_49")]


def _parse_at(text: str | None) -> dt.datetime:
    """``emitted_at`` as a datetime; None (a query over static tables only) counts from the start."""
    return dt.datetime.min if text is None else dt.datetime.fromisoformat(text.rstrip("Z"))


@dataclasses.dataclass(frozen=True)
class Spec:
    """One query to check: what the executor runs, its SQL text for DuckDB, set or bag answers."""

    name: str
    query: object  # SQL text or a Compilation
    sql: str
    distinct: bool
    report: object = None


def check_output(out: Path, columns, spec: Spec, oracle: Oracle, src: Sources, streams: dict, seed: int) -> int:
    """The answer lines of ``out`` against DuckDB: after every timestamp of the data, and in the end."""
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    got = [(_parse_at(d["emitted_at"]), tuple(d["binding"][c] for c in columns)) for d in lines]
    markers = sorted({r[t.timestamp] for t in src.streams for r in streams.get(t.name, [])})
    if " FROM " in spec.sql.upper():
        expected_at = oracle.answers_at(spec.sql, markers)
    else:  # an unsatisfiable query compiles to a SELECT without FROM: no answers, ever
        expected_at = {m: oracle.answers(spec.sql) for m in markers}
    where = (spec.name, seed)
    for m in markers:
        upto = Counter(v for at, v in got if at <= m)
        if spec.distinct:
            assert set(upto) == set(expected_at[m]), (where, m, set(upto) ^ set(expected_at[m]))
        else:
            assert upto == expected_at[m], (where, m, upto - expected_at[m], expected_at[m] - upto)
    final = oracle.answers(spec.sql)
    every = Counter(v for _, v in got)
    if spec.distinct:
        assert set(every) == set(final) and max(every.values(), default=1) == 1, where
    else:
        assert every == final, where
    stamps = [at for at, _ in got]
    assert stamps == sorted(stamps), "a single-file sink gets the answers in timestamp order"
    return len(got)


def check_seed(spark, tmp_path: Path, specs: list[Spec], src: Sources, streams: dict, statics: dict, seed: int,
               shared: bool = False) -> int:
    """Run every spec over one seed's files (alone, or all in one shared loop); check each. Returns #answers."""
    base = tmp_path / f"seed{seed}"
    located = write_seed(base, src, streams, statics, seed)
    files = random.Random(seed).randint(1, 3)
    queries = {}
    for spec in specs:
        queries[spec.name] = ContinuousQuery(
            plan_execution(spec.query, located, spec.report), base_dir=base, sink=JsonLinesSink(base / f"{spec.name}.jsonl"),
            spark=spark, allow_unbounded=True, max_files_per_batch=files)
    if shared:
        loop = SharedScan(spark, max_files_per_batch=files)
        for name, q in queries.items():
            loop.add(name, q)
        loop.run_until_exhausted()
        assert all(q.error is None for q in queries.values()), {n: q.error for n, q in queries.items() if q.error}
    else:
        for q in queries.values():
            q.run_until_exhausted()
    oracle = Oracle(src, streams, statics)
    total = 0
    for spec in specs:
        q = queries[spec.name]
        q.close()
        total += check_output(base / f"{spec.name}.jsonl", q.columns, spec, oracle, src, streams, seed)
    print(f"seed {seed}: {len(specs)} queries, {total} answers checked after every timestamp", flush=True)  # -s
    return total


def _harness_spec(case) -> Spec:
    return Spec(case.name, case.sql, case.sql, "DISTINCT" in case.sql or " UNION SELECT" in case.sql)


def _harness(spark, tmp_path, cases, seeds, shared=False):
    total = 0
    for seed in seeds:
        total += check_seed(spark, tmp_path, [_harness_spec(c) for c in cases], sources(), random_streams(seed),
                            {"r": STATIC_R}, seed, shared)
    return total


# the default run: cases that cover the shapes of the forest on Spark (a child, a per-alias cutoff, a union, sets
# and bags; three units and statics: row9_set and tree_static_bag in test_exec_spark); -m slow: every case (≤ on
# timestamps is split into members before a backend sees it: the local backend runs it by default)
DEFAULT_CASES = {"row5_bag", "union_set", "single_stream_bag"}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=() if c.name in DEFAULT_CASES else pytest.mark.slow) for c in CASES],
    ids=lambda c: c.name)
def test_harness_case_matches_duckdb_after_every_timestamp(spark, tmp_path, case):
    _harness(spark, tmp_path, [case], [3])


@pytest.mark.slow
@pytest.mark.parametrize("seeds", HALVES)
def test_harness_cases_match_duckdb_on_50_seeds(spark, tmp_path, seeds):
    """Every §7 row and harness case, 50 seeds; per seed all queries in one shared loop (one listing per batch)."""
    assert _harness(spark, tmp_path, CASES, seeds, shared=True) > 0


def _demo_entries():
    from obda.catalog import load_catalog

    return [e for e in load_catalog(ROOT / "catalogs" / "demo.yaml") if e.expected == "bounded"]  # SPJ queries


def _demo(spark, tmp_path, demo, entries, seeds, shared=False):
    from obda.datagen import generate_rows

    specs = []
    for entry in entries:
        compilation = demo.compile(entry.query)
        specs.append(Spec(entry.name, compilation, compilation.to_sql("spark"), compilation.distinct))
    src = demo.sources
    for seed in seeds:
        data = generate_rows(src, seed=seed, timestamps=12, rows_per_timestamp=(0, 4))
        rows = {t.name: [dict(zip([c.name for c in t.columns], r)) for r in data.rows(t.name)] for t in src.tables}
        streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in src.streams}
        statics = {t.name: rows[t.name] for t in src.tables if not t.is_stream}
        check_seed(spark, tmp_path, specs, src, streams, statics, seed, shared)


# the default run: a static-only query, per-atom views, a stream-static join, a two-stream bag join,
# a DISTINCT join, a three-stream query, a union, an interval join and a BIND; -m slow: every bounded demo query
DEFAULT_ENTRIES = {"static_turbines_in_region", "hot_temperature_sensors_distinct", "high_temperature_readings",
                   "hot_readings_after_maintenance", "turbines_hot_after_maintenance_distinct",
                   "severity_two_steps_before_hot_reading_distinct", "critical_or_very_hot",
                   "hot_readings_within_5_minutes_of_maintenance", "readings_in_fahrenheit_above_200"}


@pytest.mark.parametrize(
    "entry", [pytest.param(e, marks=() if e.name in DEFAULT_ENTRIES else pytest.mark.slow) for e in _demo_entries()],
    ids=lambda e: e.name)
def test_demo_query_matches_duckdb_after_every_timestamp(spark, tmp_path, demo, entry):
    _demo(spark, tmp_path, demo, [entry], [5])


@pytest.mark.slow
@pytest.mark.parametrize("seeds", HALVES)
def test_demo_queries_match_duckdb_on_50_seeds(spark, tmp_path, demo, seeds):
    """Every bounded demo query, 50 seeds; per seed all queries in one shared loop."""
    _demo(spark, tmp_path, demo, _demo_entries(), seeds, shared=True)
