"""A real Spark standalone cluster on 127.0.0.1: master + one worker, a bounded demo query through the API.

The cluster is started with ``spark-class`` from the pip-installed PySpark;
the same query runs (in a fresh driver process each) against
``spark://127.0.0.1:PORT`` and against ``local[2]``: the answers must be equal,
and equal to DuckDB's full-history evaluation of the unfolded SQL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import timezone
from pathlib import Path

import httpx
import pytest

from apikit import BOUNDED_JOIN, answers, api_answers, make_workspace
from obda.datagen import DEFAULT_START, DEFAULT_STEP
from obda.project import Project

# a standalone cluster and two drivers: about 50 s on 2 cores, in the slow run (-m slow) to keep the default
# run within its 15 minutes
pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = Path(__file__).resolve().parent


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` with one worker (2 cores, 2 GiB); both stopped afterwards."""
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    home = spark_home()
    logs = tmp_path_factory.mktemp("spark-logs")
    env = {
        **os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(logs),
        "SPARK_WORKER_DIR": str(logs / "work"), "PYSPARK_PYTHON": sys.executable,
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port, ui, wui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)],
            env=env, stdout=open(logs / "master.out", "w"), stderr=subprocess.STDOUT, start_new_session=True))
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port", str(wui),
             "--cores", "2", "--memory", "2g", url],
            env=env, stdout=open(logs / "worker.out", "w"), stderr=subprocess.STDOUT, start_new_session=True))
        end = time.monotonic() + 90
        while True:  # the master's JSON status lists the worker once it registered
            try:
                status = httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=2).json()
                if any(w.get("state") == "ALIVE" for w in status.get("workers", [])):
                    break
            except (httpx.TransportError, ValueError):
                pass
            if time.monotonic() > end or any(p.poll() is not None for p in procs):
                raise AssertionError("the Spark cluster did not come up:\n"
                                     + (logs / "master.out").read_text()[-2000:] + (logs / "worker.out").read_text()[-2000:])
            time.sleep(0.5)
        yield url, ui
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def run_driver(workspace: Path, master: str, query_file: Path, last_ts: int) -> dict:
    r = subprocess.run(
        [sys.executable, str(HERE / "spark_driver.py"), str(workspace), master, str(query_file), str(last_ts)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cluster_answers_equal_local_mode(cluster, tmp_path):
    url, ui = cluster
    blocks, points = 2, 5
    ws, _ = make_workspace(tmp_path / "ws", blocks=blocks, seed=21, points=points)
    qf = tmp_path / "q.rq"
    qf.write_text(BOUNDED_JOIN)
    last = DEFAULT_START.replace(tzinfo=timezone.utc) + (blocks * points - 1) * DEFAULT_STEP
    last_ts = int(last.timestamp()) * 1_000_000

    on_cluster = run_driver(ws, url, qf, last_ts)
    assert on_cluster["master"] == url
    apps = httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json()
    assert apps["completedapps"] or apps["activeapps"]  # the driver really ran on this master
    local = run_driver(ws, "local[2]", qf, last_ts)
    assert local["master"] == "local[2]"

    assert Counter(map(json.dumps, on_cluster["answers"])) == Counter(map(json.dumps, local["answers"]))
    project = Project.load(ws)
    expected = answers(ws, project.sources, project.compile(BOUNDED_JOIN).to_sql("duckdb"))
    got = api_answers([{"binding": b} for _, b in on_cluster["answers"]], ["turbine", "v"])
    assert got == expected and sum(expected.values()) > 0
