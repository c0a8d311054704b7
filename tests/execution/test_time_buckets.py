"""Answers partitioned by time without a sampling job (obda/execution/time_buckets.py): Spark's hash as Spark
computes it, a key per partition that Spark places there, slices of time in partition order, and a directory
sink's micro-batch of two partitions written in time order by one job fewer per micro-batch than range partitioning takes."""

from __future__ import annotations

import random

import pytest

from execution.exec_harness import spark_jobs
from obda.execution.time_buckets import by_time_slices, partition_keys, spark_hash_int

pytestmark = pytest.mark.spark


def test_the_hash_is_sparks(spark):
    values = [0, 1, -1, 7, 42, 2**31 - 1, -(2**31)] + random.Random(3).sample(range(-(2**31), 2**31), 200)
    rows = spark.createDataFrame([(v,) for v in values], "v INT").selectExpr("v", "hash(v) AS h").collect()
    assert {r.v: r.h for r in rows} == {v: spark_hash_int(v) for v in values}


@pytest.mark.parametrize("n", [2, 3, 8])
def test_each_partition_key_lands_in_its_partition(spark, n):
    from pyspark.sql import functions as F

    keys = partition_keys(n)
    df = spark.createDataFrame([(k,) for k in keys], "k INT").repartition(n, F.col("k"))
    placed = {r.k: r.p for r in df.select("k", F.spark_partition_id().alias("p")).collect()}
    assert [placed[k] for k in keys] == list(range(n))


def test_slices_of_time_are_partitions_in_time_order(spark):
    """Timestamps in the range, before and after it (an estimate that missed) and none: partition ids never
    go down as time goes up, the timeless rows first; and the slices share the range's rows out."""
    from pyspark.sql import functions as F

    lo, hi, n = 1_000_000, 9_000_000, 4
    rng = random.Random(5)
    ats = [rng.randint(lo + 1, hi) for _ in range(400)] + [lo - 50, lo, hi + 1, hi + 10**9] + [None] * 3
    df = spark.createDataFrame([(a,) for a in ats], "at BIGINT")
    rows = by_time_slices(df, F.col("at"), lo, hi, n).select("at", F.spark_partition_id().alias("p")).collect()
    assert len(rows) == len(ats)
    ordered = sorted(rows, key=lambda r: (r.at is not None, r.at or 0))
    assert [r.p for r in ordered] == sorted(r.p for r in ordered)
    assert {r.p for r in rows if r.at is None} == {0}
    per = [sum(1 for r in rows if r.p == k) for k in range(n)]
    assert all(per) and max(per) < 2 * min(per), per


def _high_output_runs(spark, tmp_path, monkeypatch, max_files):
    """The high-output query into a directory over four blocks of demo files, ``max_files`` per micro-batch
    (None: the backlog in one), written by Spark in one partition and then in two: (lines, jobs, batches) of each."""
    from execution.test_exec_jobs import HIGH, ROOT
    from api.feeder import Feeder, prepare_workspace
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, DirectorySink
    from obda.execution import spark_query
    from obda.project import Project

    ws = prepare_workspace(ROOT / "demo", tmp_path / "ws")
    feeder = Feeder(ws, seed=6, points=6)
    feeder.write_static()
    for _ in range(4):
        feeder.feed_block()
    project = Project.load(ws)
    comp = project.compile(HIGH)

    def run(out, parts):
        monkeypatch.setattr(spark_query, "partitions", lambda spark, n: parts)
        kw = {} if max_files is None else {"max_files_per_batch": max_files}
        q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=ws, sink=DirectorySink(out, "json"),
                            spark=spark, **kw)
        q.driver_answers = 0  # every micro-batch's answers written by Spark
        q.open()
        j0 = spark_jobs(spark)
        m = q.run_until_exhausted()
        jobs = spark_jobs(spark) - j0
        q.close()
        return [(r["emitted_at"], r["binding"]) for r in q.sink.read()], jobs, m.batches

    return run(tmp_path / "one", 1), run(tmp_path / "two", 2)


def test_a_two_partition_micro_batch_is_written_in_time_order_without_sampling(spark, tmp_path, monkeypatch):
    """A high-output query into a directory, each micro-batch's answers written by Spark in two partitions (the
    last micro-batch's before its range is known: sliced by the last range's length): the committed lines are
    the one-partition run's, in time order, and the slices save the job that range partitioning spends
    sampling (measured: 11 jobs in 5 micro-batches with it, 7 without)."""
    (one, _, _), (two, jobs, batches) = _high_output_runs(spark, tmp_path, monkeypatch, 1)
    print(f"{jobs} Spark jobs in {batches} micro-batches, {len(two)} answers")  # pytest -s
    assert len(two) > 50 and two == one
    assert [at for at, _ in two] == sorted(at for at, _ in two)
    assert jobs <= 1.5 * batches, f"{jobs} Spark jobs in {batches} micro-batches"


def test_a_backlog_read_in_one_pass_is_sliced_by_its_files_times(spark, tmp_path, monkeypatch):
    """The backlog in one micro-batch, its one job (the single pass) writing the answers before the range is
    known: the files' first and last rows give the slices (:func:`csv_time_span`), so Spark samples no bounds
    (measured: 2 jobs with the sampling, 1 without; the micro-batch after it only closes the input)."""
    (one, _, _), (two, jobs, batches) = _high_output_runs(spark, tmp_path, monkeypatch, None)
    assert len(two) > 50 and two == one
    assert [at for at, _ in two] == sorted(at for at, _ in two)
    assert jobs == 1, f"{jobs} Spark jobs in {batches} micro-batches (the last closes the input: no job)"


def _csv(path, rows, header="sensor_id,value,ts"):
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return str(path)


def test_the_time_span_of_csv_files_from_their_first_and_last_rows(tmp_path):
    from obda.execution.scan import ScanRead
    from obda.execution.time_buckets import csv_time_span
    from obda.model.sources import Column, ColumnType, Table, TableKind

    table = Table("measurement", TableKind.STREAM, (Column("sensor_id", ColumnType.INTEGER),
                                                     Column("value", ColumnType.INTEGER),
                                                     Column("ts", ColumnType.TIMESTAMP)), "ts")
    us = lambda minute: (1704067200 + 60 * minute) * 1_000_000  # 2024-01-01 00:<minute>:00Z
    a = _csv(tmp_path / "a.csv", ["1,5,2024-01-01 00:03:00", "2,6,2024-01-01 00:01:00", "3,7,2024-01-01 00:04:00"])
    b = _csv(tmp_path / "b.csv", ["1,5,2024-01-01 00:07:00"] + ["2,6,2024-01-01 00:08:00"] * 3000
             + ["3,7,2024-01-01T00:09:00+00:00"])  # a tail beyond the bytes read at the start
    c = _csv(tmp_path / "c.csv", ["9,9,2024-01-01 00:02:00", "garbage, not a row"], header="ts,value,sensor_id")
    read = lambda *paths, fmt="csv", fresh=True: ScanRead(table, fmt, paths, ("",), fresh)
    assert csv_time_span([read(a, b)]) == (us(3), us(9))  # first rows and last rows, not every row
    assert csv_time_span([read(a), read(b, fresh=False)]) == (us(3), us(4))  # a carried read is not new
    assert csv_time_span([read(c)]) is None  # the header's order: sensor_id is first; the tail row fails
    assert csv_time_span([read(a, fmt="json")]) is None
