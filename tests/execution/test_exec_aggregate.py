"""Aggregate queries: the changelog, replayed after every timestamp, equals DuckDB (both backends).

The executor runs the characteristic query Q' (Arasu Theorem 8.4) and aggregates its answers
per group; the oracle runs the aggregate SQL itself over the rows up to each timestamp.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter

import pytest

from execution.exec_harness import (
    STATIC_R,
    Oracle,
    check_emitted_at,
    data_timestamps,
    random_splits,
    random_streams,
    replay_changelog,
    sources,
    write_csv_batches,
    write_static,
)
from obda.errors import AnalysisError, ExecutionError
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from seeds import ALL, seed_sets

BOUNDED_A = "0 < m1.a AND m1.a < 5"
QUERIES = {
    "one stream": f"SELECT m1.a AS a, COUNT(*) AS n, COUNT(m1.b) AS nb, SUM(m1.b) AS sb, MIN(m1.c) AS mn, "
                  f"MAX(m1.c) AS mx, AVG(m1.b) AS av FROM s AS m1 WHERE {BOUNDED_A} GROUP BY m1.a",
    "holistic over a bounded attribute": f"SELECT m1.a AS a, COUNT(DISTINCT m1.b) AS cd, MEDIAN(m1.b) AS md "
                                         f"FROM s AS m1 WHERE {BOUNDED_A} AND 0 < m1.b AND m1.b < 5 GROUP BY m1.a",
    "duplicate-insensitive only": f"SELECT m1.a AS a, MAX(m1.b) AS mb, MIN(m1.c) AS mc FROM s AS m1 "
                                             f"WHERE {BOUNDED_A} GROUP BY m1.a",
    "two streams in time order": "SELECT m2.d AS d, COUNT(*) AS n, SUM(m1.a) AS sa, MAX(m1.c) AS mc "
                                 "FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND 0 < m2.d AND m2.d < 5 GROUP BY m2.d",
    "stream and static table": "SELECT r.name AS name, COUNT(*) AS n, SUM(m1.b) AS sb FROM s AS m1, r AS r "
                               "WHERE m1.a = r.id GROUP BY r.name",
}


def _norm(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    return round(float(v), 9)


def _streams(seed: int) -> dict:
    """The differential's rows: random, with gaps in time and timestamps whose rows match no pattern."""
    return random_streams(seed, gaps=0.2, quiet=0.25)


def _run(tmp_path, sql, seed, spark=None, **kw):
    rows = _streams(seed)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    base = tmp_path / f"seed{seed}"
    if not (base / "data").exists():
        write_csv_batches(base / "data", random_splits(rows, seed, max_chunk=random.Random(seed).randint(2, 6)), src)
        write_static(base / "data", "r", STATIC_R)
    backend = "local" if spark is None else "spark"
    out = base / f"out{abs(hash((sql, backend, tuple(sorted(kw)))))}.jsonl"
    q = ContinuousQuery(plan_execution(sql, src), base_dir=base, sink=JsonLinesSink(out), backend=backend, spark=spark,
                        max_files_per_batch=1 + seed % 3, **kw)
    q.run_until_exhausted()
    q.close()
    return q, rows, src, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _replay(records, q, upto):
    return replay_changelog(records, q, upto, _norm)


def _check_seeds(tmp_path, name, seeds, spark=None):
    sql = QUERIES[name]
    checked = 0
    for seed in seeds:
        q, rows, src, records = _run(tmp_path, sql, seed, spark)
        oracle = Oracle(src, rows, {"r": STATIC_R})
        # replayed, equal to the SQL at every timestamp of every stream (the query's own, and the others',
        # where nothing it reads changes); every line at a timestamp of the query's data
        markers = sorted({r[t.timestamp] for t in src.streams for r in rows.get(t.name, [])})
        assert q.metrics.rows_out == len(records)
        for m in markers:
            want = Counter(tuple(_norm(v) for v in row) for row in oracle.answers(sql, m).elements())
            assert _replay(records, q, m) == want, (name, seed, m)
            checked += 1
        check_emitted_at(records, q, data_timestamps(q, src, rows))
    assert checked > len(seeds)


@seed_sets()
@pytest.mark.parametrize("name", list(QUERIES))
def test_changelog_replayed_after_every_timestamp_equals_duckdb(tmp_path, name, seeds):
    _check_seeds(tmp_path, name, seeds)


# the default run: a distributive and a holistic aggregate; -m slow: every query (a join and a static table too:
# on Spark by default in test_exec_sparql_aggregate)
SPARK_DEFAULT = ("one stream", "holistic over a bounded attribute")


@pytest.mark.spark
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in SPARK_DEFAULT else pytest.mark.slow)
                                  for n in QUERIES])
def test_spark_partial_aggregates_equal_duckdb(spark, tmp_path, name):
    """The Spark backend: partial aggregates per timestamp and group, merged on the driver (one seed here; 50 under
    ``-m slow``, below)."""
    _check_seeds(tmp_path, name, range(1), spark)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", list(QUERIES))
def test_spark_partial_aggregates_equal_duckdb_on_50_seeds(spark, tmp_path, name):
    _check_seeds(tmp_path, name, ALL, spark)


@pytest.mark.spark
def test_spark_brings_partials_not_answers(spark, tmp_path, monkeypatch):
    """What the collect job brings: one row per timestamp and group (and per counted value), not per answer."""
    from obda.execution import collect

    rows_collected = []
    real = collect.collect_tagged

    def counting(parts, *a, **k):
        for x in real(parts, *a, **k):
            rows_collected.append(x)
            yield x

    monkeypatch.setattr(collect, "collect_tagged", counting)
    # a seed where some group has several rows at one timestamp
    seed = next(s for s in range(100) if len({(r["ts"], r["a"]) for r in _streams(s)["s"] if 0 < r["a"] < 5})
                < sum(1 for r in _streams(s)["s"] if 0 < r["a"] < 5))
    q, rows, _, records = _run(tmp_path, QUERIES["one stream"], seed, spark)
    assert records == _run(tmp_path, QUERIES["one stream"], seed)[3]  # as the local backend
    passing = [r for r in rows["s"] if 0 < r["a"] < 5]
    # the partials (rows with a timestamp; the stats have none), per timestamp and group (``a``); a
    # micro-batch computes its open timestamps' partials too, and drops them: the next one brings them again
    partials = [(at, vals[0]) for _, at, vals in rows_collected if at is not None]
    groups = {(r["ts"], r["a"]) for r in passing}
    assert len(set(partials)) == len(groups) < len(passing)
    assert len(partials) < 2 * len(groups)


def test_changelog_lines_only_for_groups_that_changed(tmp_path):
    q, rows, _, records = _run(tmp_path, QUERIES["one stream"], 7)
    per_ts = Counter((r["emitted_at"], r["binding"]["a"]) for r in records)
    assert max(per_ts.values()) == 1  # one line per group and timestamp
    changed = Counter()
    for r in rows["s"]:
        if 0 < r["a"] < 5:
            changed[(r["ts"], r["a"])] += 1
    assert len(per_ts) == len(changed)


@pytest.mark.parametrize("name", ["one stream", "two streams in time order"])
def test_restart_from_checkpoint_continues_the_changelog(tmp_path, name):
    sql = QUERIES[name]
    rows = random_streams(11)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(rows, 11, max_chunk=3), src)

    full = ContinuousQuery(plan_execution(sql, src), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "full.jsonl"),
                           backend="local", max_files_per_batch=2)
    full.run_until_exhausted()
    full.close()
    part = ContinuousQuery(plan_execution(sql, src), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "part.jsonl"),
                           backend="local", max_files_per_batch=2, checkpoint_dir=tmp_path / "ck")
    part.run_until_exhausted(max_batches=4)
    part.close()
    assert 0 < len((tmp_path / "part.jsonl").read_text()) < len((tmp_path / "full.jsonl").read_text())
    resumed = ContinuousQuery(plan_execution(sql, src), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "part.jsonl"),
                              backend="local", max_files_per_batch=2, checkpoint_dir=tmp_path / "ck")
    assert resumed.open().aggregate.panes  # the groups came back from the checkpoint (open() restores it)
    resumed.run_until_exhausted()
    resumed.close()
    assert (tmp_path / "part.jsonl").read_text() == (tmp_path / "full.jsonl").read_text()


def test_state_is_the_groups_not_the_rows(tmp_path):
    small = _run(tmp_path / "s", QUERIES["one stream"], 3)[0]
    rows = random_streams(3, steps=140)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "big" / "data", random_splits(rows, 3, max_chunk=6), src)
    big = ContinuousQuery(plan_execution(QUERIES["one stream"], src), base_dir=tmp_path / "big", sink=JsonLinesSink(tmp_path / "big.jsonl"),
                          backend="local", max_files_per_batch=4)
    big.run_until_exhausted()
    assert big.metrics.rows_in["s"] > 5 * small.metrics.rows_in["s"]
    # one group per value of a (1..4), plus the rows of the one open timestamp (at most 3 per timestamp)
    assert big.aggregate.size <= 4 and small.aggregate.size <= 4
    assert big.metrics.max_state_entries <= 4 + 3 and small.metrics.max_state_entries <= 4 + 3


def test_unbounded_aggregate_needs_the_opt_in(tmp_path):
    sql = "SELECT m1.b AS b, COUNT(*) AS n FROM s AS m1 GROUP BY m1.b"
    src = sources(s="data/s")
    with pytest.raises(ExecutionError, match="GROUP BY m1.b.*unbounded.*allow_unbounded"):
        ContinuousQuery(plan_execution(sql, src), base_dir=tmp_path, backend="local")
    q, rows, src2, records = _run(tmp_path, sql, 5, allow_unbounded=True)
    assert records and q.metrics.state_entries >= len({r["b"] for r in rows["s"]})


@pytest.mark.parametrize("sql, error, words", [
    ("SELECT m1.a AS a, COUNT(*) AS n FROM s AS m1 WHERE 0 < m1.a AND m1.a < 5 GROUP BY m1.a HAVING COUNT(*) > 1",
     AnalysisError, "HAVING"),
    ("SELECT COUNT(*) AS n FROM s AS m1", AnalysisError, "without GROUP BY"),
    ("SELECT m1.a AS a, COUNT(*) + 1 AS n FROM s AS m1 WHERE 0 < m1.a AND m1.a < 5 GROUP BY m1.a", AnalysisError,
     "expressions"),
    ("SELECT m1.a AS a, COUNT(*) FROM s AS m1 WHERE 0 < m1.a AND m1.a < 5 GROUP BY m1.a", AnalysisError,
     "name the aggregate"),
])
def test_refused_with_a_message(tmp_path, sql, error, words):
    with pytest.raises(error, match=words):
        ContinuousQuery(plan_execution(sql, sources(s="data/s")), base_dir=tmp_path, backend="local")
