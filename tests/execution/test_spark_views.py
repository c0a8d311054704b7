"""obda's temporary views never uncache what they show (issue 25: one read per micro-batch).

``spark.catalog.dropTempView`` uncaches every cached plan with the view's result.  The stats of a micro-batch
are SQL over a view of its cached scan, dropped once analysed: that drop uncached the scan before the job ran,
and each part of the job parsed the micro-batch's files again (4 times per micro-batch on the windowed
aggregate benchmark).  :func:`obda.execution.spark_io.drop_view` removes the name only."""

from __future__ import annotations

import pytest

from obda.execution.spark_io import sql_over

pytestmark = pytest.mark.spark


def test_a_view_over_cached_rows_dropped_after_analysis_keeps_them_cached(spark, tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("a,b\n" + "".join(f"{i},{i % 7}\n" for i in range(100)))
    scan = spark.read.option("header", True).schema("a INT, b INT").csv(str(f)).coalesce(1).persist()
    try:
        stats = sql_over(spark, [scan], lambda v: f"SELECT b, COUNT(*) AS n FROM {v[0]} GROUP BY b")
        parts = sql_over(spark, [stats, scan.where("a > 50")],
                         lambda v: f"SELECT CAST(b AS STRING) AS x FROM {v[0]} UNION ALL SELECT CAST(a AS STRING) FROM {v[1]}")
        assert scan.storageLevel.useMemory, "dropping the view uncached the scan"
        plan = parts._jdf.queryExecution().executedPlan().toString()
        assert plan.count("InMemoryTableScan") == 2, plan  # both parts read the cached rows, not the file
        assert parts.count() == 7 + 49
        assert not [t for t in spark.catalog.listTables() if t.name.startswith("__obda_view")]  # the names go
    finally:
        scan.unpersist()
