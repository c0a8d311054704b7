"""The JVM's heap does not grow with the queries a session runs (issue 29, item 1: the per-query growth).

py4j's Java proxies are in Python reference cycles (a ``JavaObject`` caches its methods' ``JavaMember``\\ s,
which refer back to it), so the plans they hold stay alive in the JVM until Python's full collection; obda
collects after micro-batches and at ``close`` (``spark_io.release_java_proxies``, at most every 10 s).
Measured: about 1 MiB of heap (after a full GC) kept per query run without it, none with it."""

from __future__ import annotations

import time

import pytest

from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.model.sources import Sources

YAML = """
tables:
  s: {kind: stream, timestamp: ts, key: [a, ts], location: data/s, format: csv,
      columns: {a: integer, b: integer, ts: timestamp}}
  t: {kind: stream, timestamp: ts, location: data/t, format: csv, columns: {d: integer, e: integer, ts: timestamp}}
"""
SQL = "SELECT DISTINCT m1.a AS a, m2.e AS e FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts AND m1.b = m2.d"


def _heap_after_gc(spark) -> float:
    rt = spark._jvm.java.lang.Runtime.getRuntime()
    for _ in range(2):
        spark._jvm.java.lang.System.gc()
        time.sleep(0.3)
    return (rt.totalMemory() - rt.freeMemory()) / 2**20


@pytest.mark.slow  # about 60 s
@pytest.mark.spark
def test_the_jvm_heap_after_gc_does_not_grow_with_the_queries_run(spark, tmp_path):
    for st, cols in (("s", "a,b,ts"), ("t", "d,e,ts")):
        (tmp_path / "data" / st).mkdir(parents=True)
        for i in range(4):
            rows = "".join(f"{k % 7},{k % 5},2024-01-01T00:{i:02d}:{k % 60:02d}Z\n" for k in range(200))
            (tmp_path / "data" / st / f"p{i}.csv").write_text(cols + "\n" + rows)

    def run(k: int) -> None:
        q = ContinuousQuery(plan_execution(SQL, Sources.from_yaml(YAML), ["bounded"]), base_dir=tmp_path,
                            backend="spark", sink=JsonLinesSink(tmp_path / f"out{k}.jsonl"), spark=spark,
                            max_files_per_batch=1)
        q.run_until_exhausted()
        q.close()

    for k in range(3):
        run(k)
    time.sleep(10.5)  # obda collects at most every 10 s: the next close collects
    run(3)
    before = _heap_after_gc(spark)
    n = 25
    for k in range(n):
        run(10 + k)
    time.sleep(10.5)
    run(99)
    after = _heap_after_gc(spark)
    print(f"JVM heap after GC: {before:.1f} -> {after:.1f} MiB over {n} queries ({(after - before) / n:+.2f} MiB/query)")
    assert (after - before) / n < 0.3, f"heap after GC {before:.1f} -> {after:.1f} MiB over {n} queries"
