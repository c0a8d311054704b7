"""Run obda continuous queries as one Spark application on a given master (a driver in its own process).

    .venv/bin/python tests/cluster_run.py spark://127.0.0.1:7077 job.json

The test process already has a local SparkSession (one per process), so a run on a
standalone cluster (tests/cluster.py) needs its own driver process: this script.

``job.json``::

    {
      "result": "/abs/result.json",          # written at the end (also printed on stdout)
      "app_name": "obda-cluster-tests",      # optional
      "conf": {"spark.sql.shuffle.partitions": "2"},   # optional, added to the session's settings
      "executors": 2,                        # optional: wait (up to executor_timeout s) for that many executors
      "parallel": 1,                         # optional: runs at a time (threads sharing the session)
      "runs": [                              # one ContinuousQuery per entry, in order, in one session
        {
          "name": "row1_bag/seed1",
          "sql": "SELECT ...", "verdicts": ["bounded"],        # SQL text and its member verdicts, or
          "catalog": {"project": "/abs/demo", "file": "/abs/catalogs/demo.yaml", "entry": "hot_readings"},
          "sources": "/abs/sources.yaml",    # required with sql; with catalog: default the project's sources
          "base_dir": "/abs/run-dir",         # the sources' relative locations resolve against it
          "output": "/abs/run-dir/answers.jsonl",
          "metrics": "/abs/run-dir/metrics.json",
          "options": {"max_files_per_batch": 2}   # further ContinuousQuery keywords (backend defaults to spark)
        }
      ]
    }

A catalog entry is compiled here (``Project.load(project).compile(entry.query)``), since a
Compilation does not travel as JSON.  Every run's failure is caught and reported (its
traceback in the result) so that the other runs still go.  The result::

    {"master": "spark://...", "app_id": "...", "default_parallelism": 2,
     "executors_before": 3, "executors_after": 3,   # block managers: driver + executors
     "executor_hosts": [...], "seconds": 12.3,
     "runs": {"<name>": {"ok": true, "columns": [...], "metrics": {...}, "seconds": 0.8}
              | {"ok": false, "error": "traceback"}}}
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _session(master: str, job: dict):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the venv's interpreter (also the executors')
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName(job.get("app_name", "obda-cluster-tests"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "1g")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC -Dlog4j2.level=ERROR")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.sql.csv.parser.columnPruning.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        .config("spark.executorEnv.TZ", "UTC")
    )
    for k, v in (job.get("conf") or {}).items():
        b = b.config(k, str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _block_managers(sc) -> int:
    """Driver + registered executors."""
    return int(sc._jsc.sc().getExecutorMemoryStatus().size())


def _executor_hosts(sc) -> list[str]:
    status = sc._jsc.sc().getExecutorMemoryStatus()
    it = status.keysIterator()
    out = []
    while it.hasNext():
        out.append(str(it.next()))
    return sorted(out)


def _wait_for_executors(sc, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _block_managers(sc) < n + 1 and time.monotonic() < deadline:
        time.sleep(0.2)


_PROJECTS: dict = {}


def _query(run: dict):
    """(sql or compilation, sources, report) of a run."""
    from obda.model.sources import Sources

    if "catalog" in run:
        from obda.catalog import load_catalog
        from obda.project import Project

        c = run["catalog"]
        project = _PROJECTS.get(c["project"])
        if project is None:
            project = _PROJECTS[c["project"]] = Project.load(c["project"])
        entries = {e.name: e for e in load_catalog(c["file"])}
        query = project.compile(entries[c["entry"]].query)
        sources = Sources.load(run["sources"]) if run.get("sources") else project.sources
        return query, sources, run.get("verdicts")  # None: ContinuousQuery analyses the compilation
    return run["sql"], Sources.load(run["sources"]), run.get("verdicts")


def _one(spark, run: dict) -> dict:
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink

    query, sources, report = _query(run)
    out = Path(run["output"])
    if out.exists():
        out.unlink()
    options = {"backend": "spark", **(run.get("options") or {})}
    t0 = time.monotonic()
    group = f"obda-run-{run.get('name', id(run))}"
    spark.sparkContext.setJobGroup(group, group)
    q = ContinuousQuery(plan_execution(query, sources, report), base_dir=run["base_dir"], sink=JsonLinesSink(out), spark=spark, **options)
    try:
        q.run_until_exhausted()
    finally:
        q.close()
    metrics = q.metrics.to_dict()
    result = {"ok": True, "columns": list(q.columns), "metrics": metrics, "seconds": round(time.monotonic() - t0, 3),
              "spark_jobs": len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))}
    if run.get("metrics"):
        Path(run["metrics"]).write_text(json.dumps(metrics, indent=1, default=str))
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    master, job_path = argv
    job = json.loads(Path(job_path).read_text())
    runs = job["runs"] if "runs" in job else [job]
    t0 = time.monotonic()
    spark = _session(master, job)
    sc = spark.sparkContext
    try:
        _wait_for_executors(sc, int(job.get("executors", 2)), float(job.get("executor_timeout", 60)))
        result = {
            "master": sc.master,
            "app_id": sc.applicationId,
            "default_parallelism": sc.defaultParallelism,
            "executors_before": _block_managers(sc),
            "runs": {},
        }

        def attempt(run: dict) -> dict:
            try:
                return _one(spark, run)
            except Exception:
                return {"ok": False, "error": traceback.format_exc()}

        names = [run.get("name", str(i)) for i, run in enumerate(runs)]
        threads = max(1, int(job.get("parallel", 1)))
        if threads == 1:
            result["runs"] = dict(zip(names, map(attempt, runs)))
        else:  # independent queries, one SparkSession: their jobs share the executors
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                result["runs"] = dict(zip(names, pool.map(attempt, runs)))
        result["executors_after"] = _block_managers(sc)
        result["executor_hosts"] = _executor_hosts(sc)
        result["seconds"] = round(time.monotonic() - t0, 3)
    finally:
        spark.stop()
    text = json.dumps(result, indent=1, default=str)
    if job.get("result"):
        Path(job["result"]).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
