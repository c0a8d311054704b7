"""Shared scans: queries run together in one loop give exactly the outputs they give alone."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from execution.exec_harness import CASE, STATIC_R, Oracle, random_splits, random_streams, sources, spark_jobs, write_csv_batches, write_static
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.execution.shared import SharedScan

pytestmark = pytest.mark.spark

NAMES = ["row5_bag", "row9_set", "tree_static_bag", "single_stream_bag", "row7_bag"]


def _lines(path):
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()


def _query(spark, tmp_path, src, name, out, **kw):
    case = CASE[name]
    return ContinuousQuery(plan_execution(case.sql, src), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / out), spark=spark,
                           max_files_per_batch=2, **kw)


@pytest.mark.slow  # ~40 s; one read and one job per shared micro-batch stays in the default run
def test_shared_loop_gives_each_query_its_own_output(spark, tmp_path):
    rows = random_streams(41)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    splits = random_splits(rows, 41, max_chunk=4)
    half = len(splits) // 2
    write_csv_batches(tmp_path / "data", splits[:half], src)
    write_static(tmp_path / "data", "r", STATIC_R)

    loop = SharedScan(spark, max_files_per_batch=2)
    shared = {n: _query(spark, tmp_path, src, n, f"shared-{n}.jsonl") for n in NAMES}
    for n in NAMES[:3]:
        loop.add(n, shared[n])
    loop.step()
    loop.step()
    assert loop.batches == 2  # the first three read together
    for n in NAMES[3:]:  # started later: they catch up on their own, then join
        loop.add(n, shared[n])
    loop.step()
    assert not all(loop.in_step(q) for q in shared.values()) or loop.batches >= 3
    write_csv_batches(tmp_path / "data", splits[half:], src, start=half)
    loop.run_until_exhausted()
    assert all(loop.in_step(q) for q in shared.values())
    assert all(q.error is None for q in shared.values())
    for q in shared.values():
        q.close()

    for n in NAMES:
        alone = _query(spark, tmp_path, src, n, f"alone-{n}.jsonl")
        alone.run_until_exhausted()
        alone.close()
        got, want = _lines(tmp_path / f"shared-{n}.jsonl"), _lines(tmp_path / f"alone-{n}.jsonl")
        assert got == want, n
        expected = Oracle(src, rows, {"r": STATIC_R}).answers(CASE[n].sql)
        bindings = Counter(tuple(json.loads(line)["binding"][c] for c in alone.columns) for line in got.elements())
        if CASE[n].sql.startswith("SELECT DISTINCT"):
            assert set(bindings) == set(expected)
        else:
            assert bindings == expected, n
        assert shared[n].metrics.rows_in == alone.metrics.rows_in


def test_one_read_and_one_job_per_shared_micro_batch(spark, tmp_path, monkeypatch):
    """Per shared micro-batch: one projection (one scan of the files) and one Spark job for every query."""
    from obda.execution import scan

    rows = random_streams(42)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(rows, 42, max_chunk=4), src)
    write_static(tmp_path / "data", "r", STATIC_R)
    loop = SharedScan(spark, max_files_per_batch=2, share_scan_bytes=0)  # every micro-batch shares its scan
    for n in NAMES:
        loop.add(n, _query(spark, tmp_path, src, n, f"o-{n}.jsonl"))
    calls = Counter()
    real_project = scan.project_reads
    monkeypatch.setattr(scan, "project_reads", lambda *a, **k: calls.update(["read"]) or real_project(*a, **k))
    jobs = spark_jobs(spark)
    loop.step()
    loop.step()
    assert loop.batches == 2
    calls["jobs"] = spark_jobs(spark) - jobs
    assert calls == Counter({"read": 2, "jobs": 2})


def test_a_small_shared_micro_batch_runs_each_query_on_its_own(spark, tmp_path, monkeypatch):
    """Below ``share_scan_bytes`` of new files the listing is shared and each query has its own scan and job
    (planning one wide plan costs more than the parses it saves; docs/cluster.md)."""
    from obda.execution import scan

    rows = random_streams(42)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(rows, 42, max_chunk=4), src)
    write_static(tmp_path / "data", "r", STATIC_R)
    loop = SharedScan(spark, max_files_per_batch=2)  # the default threshold: these files are far below it
    for n in NAMES:
        loop.add(n, _query(spark, tmp_path, src, n, f"o-{n}.jsonl"))
    reads = Counter()
    real_project = scan.project_reads
    monkeypatch.setattr(scan, "project_reads", lambda spark_, reads_, pipelines, *a, **k:
                        reads.update([tuple(sorted(pipelines))]) or real_project(spark_, reads_, pipelines, *a, **k))
    loop.step()
    assert loop.batches == 1
    assert sorted(reads.values()) == [1] * len(NAMES) and all(len(k) == 1 for k in reads)  # one reader per scan


@pytest.mark.slow  # ~30 s
def test_checks_over_streams_run_in_the_shared_loop_as_alone(spark, tmp_path):
    """Queries with a check over another stream — in the answer's timestamp (rule A2) and in a window of its past
    (A3: kept answers) — share the loop's reads and jobs with a plain query, and each writes what it writes alone."""
    from execution.exec_harness import CHECK_CASES

    cases = {c.name: c for c in CHECK_CASES if c.name in ("anti_join_same_ts", "anti_join_past_window")}
    cases["row5_bag"] = CASE["row5_bag"]
    rows = random_streams(43)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(rows, 43, max_chunk=4), src)
    write_static(tmp_path / "data", "r", STATIC_R)

    def query(name, out):
        return ContinuousQuery(plan_execution(cases[name].sql, src), base_dir=tmp_path, spark=spark,
                               sink=JsonLinesSink(tmp_path / out), max_files_per_batch=2)

    loop = SharedScan(spark, max_files_per_batch=2)
    shared = {n: query(n, f"shared-{n}.jsonl") for n in cases}
    for n, q in shared.items():
        loop.add(n, q)
    loop.run_until_exhausted()
    assert all(q.error is None for q in shared.values())
    for q in shared.values():
        q.close()
    for n in cases:
        alone = query(n, f"alone-{n}.jsonl")
        alone.run_until_exhausted()
        alone.close()
        assert _lines(tmp_path / f"shared-{n}.jsonl") == _lines(tmp_path / f"alone-{n}.jsonl") != Counter(), n
