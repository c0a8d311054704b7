"""Spark jobs per micro-batch, counted with Spark's status tracker: a plan that issues more jobs than it
should fails here.

The plan of a micro-batch (obda/execution/microbatch.py, docs/cluster.md): **one** job reads the new files,
computes the answers of every timestamp they hold, the synopsis updates and the per-file stats; the driver
keeps what the marker closes.  A directory sink gets few answers through the driver in that job (many: a
write job of Spark's).  Static tables are loaded once per query (not per micro-batch), joined without a
broadcast (a broadcast is a job).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from api.feeder import Feeder, prepare_workspace
from execution.exec_harness import spark_jobs
from obda.analysis import analyze_query
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, DirectorySink, JsonLinesSink
from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark


def _catalog_query(name: str) -> str:
    entries = yaml.safe_load((ROOT / "catalogs" / "demo.yaml").read_text(encoding="utf-8"))
    entries = entries["queries"] if isinstance(entries, dict) else entries
    return next(e["query"] for e in entries if e["name"] == name)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    ws = prepare_workspace(ROOT / "demo", tmp_path_factory.mktemp("jobs") / "ws")
    feeder = Feeder(ws, seed=4, points=6)
    feeder.write_static()
    for _ in range(5):
        feeder.feed_block()
    return ws


#: case -> query, sink, answers a micro-batch brings to the driver at most (None: obda's default), Spark jobs per
#: micro-batch at most (measured: 5 jobs in 6 micro-batches, the last one, with no file left, runs none; before
#: the one-pass plan 2.9 and 3.9).  "many answers": every micro-batch's answers written by Spark's writer, a job
#: of its own beside the one pass, range-partitioned by time into the scan's one partition (no sampling job)
BUDGET = {
    "turbines_hot_after_maintenance_distinct": ("turbines_hot_after_maintenance_distinct", "file", None, 1.0),
    "hot_readings_within_5_minutes_of_maintenance": ("hot_readings_within_5_minutes_of_maintenance", "dir", None, 1.0),
    "many answers": ("hot_readings_within_5_minutes_of_maintenance", "dir", 0, 2.0),
}


@pytest.mark.parametrize("case", list(BUDGET))
def test_spark_jobs_per_micro_batch_stay_within_the_plan(spark, workspace, tmp_path, case):
    name, sink_kind, driver_answers, budget = BUDGET[case]
    project = Project.load(workspace)
    comp = project.compile(_catalog_query(name))
    report = analyze_query(comp, project.sources)
    sink = DirectorySink(tmp_path / "out", "json") if sink_kind == "dir" else JsonLinesSink(tmp_path / "out.jsonl")
    q = ContinuousQuery(plan_execution(comp, project.sources, report), base_dir=workspace, sink=sink, spark=spark,
                        max_files_per_batch=1)
    if driver_answers is not None:
        q.driver_answers = driver_answers
    q.open()  # the static tables' load
    j1 = spark_jobs(spark)
    metrics = q.run_until_exhausted()
    jobs = spark_jobs(spark) - j1
    q.close()
    print(f"{case} into a {sink_kind}: {jobs} Spark jobs in {metrics.batches} micro-batches "
          f"({jobs / metrics.batches:.2f} per micro-batch)")  # pytest -s
    assert metrics.batches >= 5 and metrics.rows_out > 0
    assert jobs / metrics.batches <= budget, f"{jobs} Spark jobs in {metrics.batches} micro-batches"


HIGH = ("PREFIX : <http://example.org/turbine#> SELECT ?sensor ?v WHERE { GRAPH ?t { ?m :measuredBy ?sensor ; "
        ":hasValue ?v } FILTER(?v > 5) }")


def test_a_micro_batch_read_as_one_partition_checks_its_declared_keys_without_a_shuffle(spark, workspace, tmp_path,
                                                                                       monkeypatch):
    """The window that keeps the first row of each declared key and timestamp (``scan.dedupe_keys``) runs over the
    rows already coalesced into the micro-batch's partitions: one partition needs a sort, no exchange (before, a
    hash partitioning of every row on the key, then the coalescing)."""
    from obda.execution import scan

    checked = []
    real = scan.dedupe_keys

    def capture(df, reads, pipelines):
        checked.append(real(df, reads, pipelines))
        return checked[-1]

    monkeypatch.setattr(scan, "dedupe_keys", capture)
    project = Project.load(workspace)
    comp = project.compile(HIGH)
    q = ContinuousQuery(plan_execution(comp, project.sources, analyze_query(comp, project.sources)),
                        base_dir=workspace, sink=DirectorySink(tmp_path / "out", "json"), spark=spark)
    metrics = q.run_until_exhausted()  # one micro-batch reads every file (under 32 MiB: one partition)
    q.close()
    assert metrics.rows_out > 0 and checked
    plans = [df._jdf.queryExecution().executedPlan().toString() for df in checked]
    assert not any("Exchange" in p for p in plans), plans[0]
