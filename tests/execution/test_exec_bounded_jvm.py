"""A micro-batch's answers never sit in one partition: a backlog larger than the driver JVM's heap is
written in full and in order (``collect_tagged``'s spill), and users set Spark's memory the usual way
(``--conf``, ``$SPARK_CONF_DIR/spark-defaults.conf``) with a clear error when Spark refuses it."""

from __future__ import annotations

import csv
import os
import random
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from obda.errors import ExecutionError
from obda.execution.spark_io import parse_conf, user_spark_defaults

ROOT = Path(__file__).resolve().parents[2]
FILTER = """PREFIX : <http://example.org/turbine#>
SELECT ?sensor ?v WHERE { GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . } FILTER(?v > 5) }
"""


def _backlog(tmp: Path, rows: int, files: int) -> tuple[Path, Path, int]:
    """A copy of the demo project with ``rows`` readings in ``files`` time-ordered CSV files, the filter query,
    and how many readings pass it (counted from the files, not by obda)."""
    from api.feeder import prepare_workspace
    from obda.datagen import generate
    from obda.project import Project

    ws = prepare_workspace(ROOT / "demo", tmp / "ws")
    generate(Project.load(ws).sources, ws / "data", seed=3, sites=2, turbines_per_site=5, sensors_per_turbine=10,
             rows=rows, rows_per_timestamp={"measurement": (100, 100), "maintenance": (0, 0), "power": (0, 0),
                                            "alarm": (0, 0)}, step=timedelta(minutes=1), files=files)
    query = tmp / "filter.rq"
    query.write_text(FILTER, encoding="utf-8")
    passing = 0
    for f in sorted((ws / "data" / "measurement").iterdir()):
        with open(f, newline="", encoding="utf-8") as fh:
            passing += sum(1 for r in csv.DictReader(fh) if int(r["value"]) > 5)
    return ws, query, passing


def _obda(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obda.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})})


def _check_output(out: Path, expected: int) -> None:
    n, last = 0, ""
    with open(out, encoding="utf-8") as fh:
        for line in fh:
            at = line[len('{"emitted_at": "'):line.index('"', len('{"emitted_at": "'))]
            assert at >= last, f"line {n + 1}: emitted_at {at} after {last}"
            last = at
            n += 1
    assert n == expected


def _run_backlog(tmp_path: Path, rows: int, files: int, heap: str) -> None:
    ws, query, passing = _backlog(tmp_path, rows, files)
    out = tmp_path / "answers.jsonl"
    r = _obda("run", str(query), "--project", str(ws), "--until-exhausted", "--output", str(out),
              "--conf", f"spark.driver.memory={heap}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    _check_output(out, passing)


@pytest.mark.slow  # 40 s; the default run spills and merges smaller batches (test_spilled_rows_come_back_merged_in_order)
def test_a_backlog_whose_answers_exceed_the_driver_heap_is_written_in_full_and_in_order(tmp_path):
    """1M readings in one micro-batch (~950k answers) with a 512 MiB driver: the answers in one partition
    (the old collect) lose the task result; spilled and merged, every answer is written, in order."""
    _run_backlog(tmp_path, 1_000_000, 10, "512m")


@pytest.mark.slow
def test_a_three_million_row_backlog_with_a_small_heap(tmp_path):
    _run_backlog(tmp_path, 3_000_000, 30, "512m")


def test_conf_reaches_spark_and_a_setting_it_refuses_is_a_clear_error(tmp_path):
    """``--conf`` is handed to the JVM at start: a heap below Spark's minimum is refused by Spark itself,
    reported in one line with what to check (no traceback)."""
    ws, query, _ = _backlog(tmp_path, 2_000, 2)
    r = _obda("run", str(query), "--project", str(ws), "--until-exhausted", "--output", str(tmp_path / "a.jsonl"),
              "--conf", "spark.driver.memory=100m")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Spark could not start" in r.stderr and "driver memory" in r.stderr.lower()
    assert "Traceback" not in r.stderr
    r = _obda("run", str(query), "--project", str(ws), "--until-exhausted", "--conf", "driver.memory")
    assert r.returncode == 2 and "--conf 'driver.memory'" in r.stderr and "Traceback" not in r.stderr


def test_spark_defaults_conf_of_the_user_wins_over_obdas_defaults(tmp_path):
    """A key in ``$SPARK_CONF_DIR/spark-defaults.conf`` is left to Spark (obda does not override it)."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\nspark.sql.shuffle.partitions   7\nspark.driver.memory=3g\nspark.executor.cores: 2\n\n",
        encoding="utf-8")
    got = user_spark_defaults({"SPARK_CONF_DIR": str(tmp_path)})
    assert got == {"spark.sql.shuffle.partitions": "7", "spark.driver.memory": "3g", "spark.executor.cores": "2"}
    assert user_spark_defaults({"SPARK_CONF_DIR": str(tmp_path / "none")}) == {}
    code = ("from obda.execution.spark_io import get_spark; s = get_spark('local[1]'); "
            "print(s.conf.get('spark.sql.shuffle.partitions'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "SPARK_CONF_DIR": str(tmp_path), "PYSPARK_PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "7"


@pytest.mark.parametrize("bad", ["foo", "spark.x", "=1", "other.key=1", "spark.driver.memory= "])
def test_parse_conf_refuses_what_is_not_a_spark_setting(bad):
    with pytest.raises(ExecutionError, match="key=value"):
        parse_conf([bad])
    assert parse_conf(["spark.a=1", "spark.b = x=y"]) == {"spark.a": "1", "spark.b": "x=y"}


@pytest.mark.spark
@pytest.mark.parametrize("by_time", [False, True])
def test_spilled_rows_come_back_merged_in_order(spark, tmp_path, by_time):
    """``collect_tagged`` through Parquet part files (several partitions, each sorted on the executors)
    gives exactly the rows, in the order, of the one-partition collect."""
    from pyspark.sql import functions as F

    from obda.execution.collect import collect_tagged

    rng = random.Random(5)
    answers = spark.createDataFrame([(rng.randint(0, 50), rng.choice("abc"), rng.random()) for _ in range(3000)],
                                    "__at long, x string, y double").repartition(5)
    updates = spark.createDataFrame([(i, f"k{i}") for i in range(40)], "a long, b string").repartition(3)
    timed = answers.select(F.col("__at"), F.col("x").alias("z"))
    parts = [updates, answers, timed] if not by_time else [answers, timed]
    want = list(collect_tagged(parts, by_time=by_time))
    got = list(collect_tagged(parts, by_time=by_time, spill_dir=str(tmp_path)))
    assert len(got) == len(want) == (40 if not by_time else 0) + 6000

    def key(r):
        return ((r[1] is not None, r[1] or 0), r[0]) if by_time else (r[0], (r[1] is not None, r[1] or 0))

    assert [key(r) for r in got] == sorted(key(r) for r in got)
    assert sorted(got, key=repr) == sorted(want, key=repr)
    assert not list(tmp_path.iterdir()), "the spilled part files are deleted once read"
