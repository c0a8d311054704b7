"""Differential tests of the distributed path: answers computed by Spark == DuckDB, after every timestamp.

Each run writes random rows as files (random micro-batch splits), runs the Spark backend
(answers computed on the executors, :mod:`obda.execution.distributed`) until the input is
exhausted and checks, from the ``emitted_at`` of every answer line, the **cumulative**
output after every timestamp of the data against DuckDB over the rows up to it, and the
final output against DuckDB over all rows.  The §7 rows and the other harness cases, and
every bounded query of the demo catalog.

Default run: one seed per query (Spark's per-job cost makes a run take about a second per
micro-batch); ``-m slow``: 50 seeds per query.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from execution.exec_harness import CASES, STATIC_R, Oracle, random_splits, random_streams, sources, write_csv_batches, write_static
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.model.sources import Sources

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SLOW_SEEDS = range(50)


def _parse_at(text: str | None) -> dt.datetime:
    """``emitted_at`` as a datetime; None (a query over static tables only) counts from the start."""
    return dt.datetime.min if text is None else dt.datetime.fromisoformat(text.rstrip("Z"))


def check_run(spark, tmp_path: Path, sql, src: Sources, streams: dict, statics: dict, report, seed: int,
              distinct: bool, sql_text: str) -> int:
    """Run ``sql`` on files of ``streams`` split at random; compare every prefix with DuckDB. Returns #answers."""
    rng = random.Random(seed)
    base = tmp_path / f"seed{seed}"
    located = Sources(tuple(dataclasses.replace(t, location=f"data/{t.name}") for t in src.tables))
    write_csv_batches(base / "data", random_splits(streams, seed, max_chunk=rng.randint(2, 8)), located)
    for name, rows in statics.items():
        if rows:
            write_static(base / "data", name, rows)
    out = base / "out.jsonl"
    q = ContinuousQuery(sql, located, report, base_dir=base, sink=JsonLinesSink(out), spark=spark,
                        allow_unbounded=True, max_files_per_batch=rng.randint(1, 3))
    q.run_until_exhausted()
    q.close()
    columns = q.columns
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    got = [(_parse_at(d["emitted_at"]), tuple(d["binding"][c] for c in columns)) for d in lines]
    oracle = Oracle(src, streams, statics)
    markers = sorted({r[t.timestamp] for t in src.streams for r in streams.get(t.name, [])})
    if " FROM " in sql_text.upper():
        expected_at = oracle.answers_at(sql_text, markers)
    else:  # an unsatisfiable query compiles to a SELECT without FROM: no answers, ever
        expected_at = {m: oracle.answers(sql_text) for m in markers}
    for m in markers:
        upto = Counter(v for at, v in got if at <= m)
        if distinct:
            assert set(upto) == set(expected_at[m]), (seed, m, set(upto) ^ set(expected_at[m]))
        else:
            assert upto == expected_at[m], (seed, m, upto - expected_at[m], expected_at[m] - upto)
    final = oracle.answers(sql_text)
    every = Counter(v for _, v in got)
    if distinct:
        assert set(every) == set(final) and max(every.values(), default=1) == 1, seed
    else:
        assert every == final, seed
    stamps = [at for at, _ in got]
    assert stamps == sorted(stamps), "a single-file sink gets the answers in timestamp order"
    return len(got)


def _harness(spark, tmp_path, case, seeds):
    src = sources()
    total = 0
    for seed in seeds:
        rows = random_streams(seed)
        distinct = "DISTINCT" in case.sql or " UNION SELECT" in case.sql
        total += check_run(spark, tmp_path, case.sql, src, rows, {"r": STATIC_R}, None, seed, distinct, case.sql)
    return total


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_harness_case_matches_duckdb_after_every_timestamp(spark, tmp_path, case):
    _harness(spark, tmp_path, case, [3])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_harness_case_matches_duckdb_on_50_seeds(spark, tmp_path, case):
    assert _harness(spark, tmp_path, case, SLOW_SEEDS) > 0


def _demo_entries():
    from obda.catalog import load_catalog

    return [e for e in load_catalog(ROOT / "catalogs" / "demo.yaml") if e.expected == "bounded"]


@pytest.fixture(scope="module")
def demo():
    from obda.project import Project

    return Project.load(ROOT / "demo")


def _demo(spark, tmp_path, demo, entry, seeds):
    from obda.datagen import generate_rows

    compilation = demo.compile(entry.query)
    sql = compilation.to_sql("spark")
    src = demo.sources
    report = demo.analyze(compilation) if hasattr(demo, "analyze") else None
    for seed in seeds:
        data = generate_rows(src, seed=seed, timestamps=12, rows_per_timestamp=(0, 4))
        rows = {t.name: [dict(zip([c.name for c in t.columns], r)) for r in data.rows(t.name)] for t in src.tables}
        streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in src.streams}
        statics = {t.name: rows[t.name] for t in src.tables if not t.is_stream}
        check_run(spark, tmp_path, compilation, src, streams, statics, report, seed, compilation.distinct, sql)


@pytest.mark.parametrize("entry", _demo_entries(), ids=lambda e: e.name)
def test_demo_query_matches_duckdb_after_every_timestamp(spark, tmp_path, demo, entry):
    _demo(spark, tmp_path, demo, entry, [5])


@pytest.mark.slow
@pytest.mark.parametrize("entry", _demo_entries(), ids=lambda e: e.name)
def test_demo_query_matches_duckdb_on_50_seeds(spark, tmp_path, demo, entry):
    _demo(spark, tmp_path, demo, entry, SLOW_SEEDS)
