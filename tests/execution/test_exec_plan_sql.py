"""How the Spark backend builds a micro-batch's plan: SQL text over temporary views, the driver's rows as
local relations (through Arrow), a static table's files parsed once per session."""

from __future__ import annotations

import os
from decimal import Decimal

from execution.exec_harness import CASE, STATIC_R, random_splits, random_streams, sources, write_csv_batches, write_static
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.execution import spark_io, spark_static


def _files(tmp_path, seed=3):
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(random_streams(seed), seed, max_chunk=6), src)
    write_static(tmp_path / "data", "r", STATIC_R)
    return src


def _query(spark, tmp_path, src, out="out.jsonl"):
    case = CASE["tree_static_bag"]
    return ContinuousQuery(plan_execution(case.sql, src, [case.verdict]), base_dir=tmp_path, backend="spark", spark=spark,
                           sink=JsonLinesSink(tmp_path / out))


def _obda_views(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.name.startswith("__obda")}


def test_driver_rows_reach_the_plan_as_a_local_relation(spark):
    """Not a Python RDD (whose every read starts Python workers); values Arrow cannot hold take the Python path."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType()),
                           T.StructField("n", T.LongType(), False)])
    df = spark_io.local_frame(spark, [(1, "x", 2), (None, None, 1)], schema)
    assert df._jdf.queryExecution().analyzed().getClass().getSimpleName() == "LocalRelation"
    assert sorted(map(tuple, df.collect()), key=repr) == [(1, "x", 2), (None, None, 1)]
    empty = spark_io.local_frame(spark, [], schema)
    assert empty.count() == 0 and empty.schema == schema
    dec = T.StructType([T.StructField("d", T.DecimalType(38, 10))])
    wide = Decimal("1.000000000001")  # 12 decimal places: not a decimal(38, 10) for Arrow
    assert spark_io.local_frame(spark, [(wide,)], dec).collect()[0][0] == Decimal("1.0000000000")


def test_a_static_tables_files_are_parsed_once_per_session_until_they_change(spark, tmp_path):
    src = _files(tmp_path)
    spark_static._STATIC_FRAMES.pop(id(spark), None)
    first = _query(spark, tmp_path, src, "a.jsonl").open()
    frames = spark_static._STATIC_FRAMES[id(spark)][1]
    (cached,) = [f for _, f in frames.values()]
    second = _query(spark, tmp_path, src, "b.jsonl").open()
    assert [f for _, f in frames.values()] == [cached]  # the second query projected the cached rows
    def data(q):
        return {a: r.data for a, r in q.engine.members[0].statics.items()}

    assert data(first) == data(second) and data(first)
    static = tmp_path / "data" / "r" / "part-00000.csv"
    static.write_text(static.read_text() + "9,n9\n")
    os.utime(static, ns=(1, 1))  # a different modification time, whatever the clock's resolution
    third = _query(spark, tmp_path, src, "c.jsonl").open()
    (fresh,) = [f for _, f in frames.values()]
    assert fresh is not cached  # read again, the stale rows dropped
    rows = {k for rel in third.engine.members[0].statics.values() for k in rel.data}
    assert any(9 in k for k in rows), rows
    for q in (first, second, third):
        q.close()


def test_a_micro_batchs_views_go_with_it_and_the_statics_with_the_query(spark, tmp_path):
    src = _files(tmp_path)
    before = _obda_views(spark)
    q = _query(spark, tmp_path, src)
    q.step()
    left = _obda_views(spark) - before
    assert left and all("_static" in v for v in left), left  # no micro-batch's view stays
    q.run_until_exhausted()
    q.close()
    assert _obda_views(spark) - before == set()


def test_a_micro_batchs_jobs_leave_no_record_in_the_dag_scheduler(spark, tmp_path):
    """Spark 4.3 keeps the jobs ``toLocalIterator`` runs (and their plans) under their ended SQL execution, so
    the JVM grew with every micro-batch (162 -> 621 -> 785 MB live after three seeds of the differential
    harness); the executor collects through Arrow (``collect_tagged``), whose job ends with its execution."""
    dag = spark.sparkContext._jsc.sc().dagScheduler()
    before = dag.activeQueryToJobs().size()
    q = _query(spark, tmp_path, _files(tmp_path))
    q.run_until_exhausted()
    q.close()
    assert q.metrics.batches > 1
    assert dag.activeQueryToJobs().size() <= before


def test_a_static_file_gone_since_it_was_listed_is_a_located_error(spark, tmp_path):
    import pytest

    from obda.errors import ExecutionError

    src = _files(tmp_path)
    table = next(t for t in src.tables if t.name == "r")
    gone = str(tmp_path / "data" / "r" / "gone.csv")
    with pytest.raises(ExecutionError, match=r"static table 'r': cannot read .*gone\.csv"):
        spark_static._static_frame(spark, table, [gone], "csv")


def test_a_job_failing_inside_the_arrow_collect_becomes_the_executors_located_error(spark):
    """A micro-batch's rows come through Arrow (``collect_tagged``): a job that fails there raises PySpark's error,
    which the executor turns into its ExecutionError naming the micro-batch (no Python traceback for the user),
    whether the job's parts are sorted (answers) or not."""
    import pytest

    from obda.errors import ExecutionError
    from obda.execution.collect import collect_tagged
    from obda.execution.spark_query import spark_failure

    df = spark.range(0, 1000).selectExpr("IF(id = 999, raise_error('boom in a task'), id) AS v")
    for ordered in (True, False):
        with pytest.raises(Exception) as info:
            list(collect_tagged([df], ordered=ordered))
        err = spark_failure(info.value, 3)
        assert isinstance(err, ExecutionError), type(info.value)
        assert "micro-batch 3 failed in Spark (" in str(err) and "boom in a task" in str(err)
