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


def test_a_two_partition_micro_batch_is_written_in_time_order_without_sampling(spark, tmp_path, monkeypatch):
    """A high-output query into a directory, each micro-batch's answers written by Spark in two partitions (the
    last micro-batch's before its range is known: sliced by the last range's length): the committed lines are
    the one-partition run's, in time order, and the slices save the job that range partitioning spends
    sampling (measured: 11 jobs in 5 micro-batches with it, 7 without)."""
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
        q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=ws, sink=DirectorySink(out, "json"),
                            spark=spark, max_files_per_batch=1)
        q.driver_answers = 0  # every micro-batch's answers written by Spark
        q.open()
        j0 = spark_jobs(spark)
        m = q.run_until_exhausted()
        jobs = spark_jobs(spark) - j0
        q.close()
        return [(r["emitted_at"], r["binding"]) for r in q.sink.read()], jobs, m.batches

    one, _, _ = run(tmp_path / "one", 1)
    two, jobs, batches = run(tmp_path / "two", 2)
    print(f"{jobs} Spark jobs in {batches} micro-batches, {len(two)} answers")  # pytest -s
    assert len(two) > 50 and two == one
    assert [at for at, _ in two] == sorted(at for at, _ in two)
    assert jobs <= 1.5 * batches, f"{jobs} Spark jobs in {batches} micro-batches"
