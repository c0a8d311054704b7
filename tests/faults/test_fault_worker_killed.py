"""Fault: a Spark worker killed mid-run on a standalone cluster (issue 29, item 4).

A master and two workers (tests/cluster.py, 127.0.0.1, one core each); `obda run --master spark://… --backend
spark --output-dir D --checkpoint C --until-exhausted` over many small files (one micro-batch per file: several
Spark jobs each).  Once it has committed a few micro-batches, one worker is killed with SIGKILL together with its
executor (its JVM and the executor JVM it forked).  Spark retries the lost tasks on the other executor; the run
finishes, and the committed output holds every answer of a local-backend run exactly once, in a gapless commit
log with nothing staged.  Slow (a cluster and its JVMs): in the slow run only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cluster import own_group_dying_with_parent, standalone_cluster
from faults.faultkit import ROOT, check_log, cli, command, commits, fed
from obda.execution.committed_output import read_committed
from waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def processes(marker: str, under: Path) -> list[int]:
    """Pids of the JVMs whose command line holds ``marker`` and (their cwd or command line) ``under``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if marker in cmd and (str(under) in cmd or cwd.startswith(str(under))):
            out.append(int(pid))
    return out


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy(pid: int, timeout: float = 60) -> None:
    """Return once the process used 0.2 s of CPU within half a second (it runs a task), or after ``timeout``."""
    samples = [(time.monotonic(), cpu_seconds(pid))]
    end = samples[0][0] + timeout
    while time.monotonic() < end:
        time.sleep(0.05)
        now = (time.monotonic(), cpu_seconds(pid))
        samples = [x for x in samples if now[0] - x[0] <= 0.5] + [now]
        if now[1] - samples[0][1] >= 0.2:
            return


def multiset(rows: list[dict]) -> Counter:
    return Counter((r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in rows)


def test_a_worker_killed_mid_run_loses_and_repeats_no_answer(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    ws, query, _ = fed(tmp_path, blocks=24, seed=12)
    ref = cli(command(ws, query, tmp_path / "ref" / "out", tmp_path / "ref" / "ck"))  # the local backend
    assert ref.exit_code == 0, ref.output[-3000:]
    expected = read_committed(tmp_path / "ref" / "out")
    assert len(expected) > 30

    out, ck, log = tmp_path / "out", tmp_path / "ck", tmp_path / "driver.log"
    root = tmp_path / "cluster"
    with standalone_cluster(workers=2, cores_per_worker=1, memory="1g", root=root) as url:
        conf = ["spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1", "spark.executor.memory=768m",
                "spark.executor.cores=1", "spark.cores.max=2", "spark.sql.shuffle.partitions=2",
                f"spark.executorEnv.PYTHONPATH={ROOT}"]
        cmd = command(ws, query, out, ck, backend="spark",
                      extra=("--master", url, *(x for c in conf for x in ("--conf", c))))
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TZ="UTC")
        with open(log, "wb") as f:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env,
                                    preexec_fn=own_group_dying_with_parent)
        try:
            wait_for(lambda: len(processes("CoarseGrainedExecutorBackend", root)) >= 2 or proc.poll() is not None,
                     timeout=180, every=0.2)
            wait_for(lambda: commits(out) >= 3 or proc.poll() is not None, timeout=300, every=0.05)
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            worker = processes("org.apache.spark.deploy.worker.Worker", root / "worker-0")
            executor = processes("CoarseGrainedExecutorBackend", root / "worker-0")
            assert worker and executor, (worker, executor)
            busy(executor[0])  # while it runs tasks: they are lost with it
            killed_at = commits(out)
            for pid in worker + executor:
                os.kill(pid, signal.SIGKILL)
            rc = proc.wait(600)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        text = log.read_text(errors="replace")
        assert rc == 0, text[-4000:]
        assert commits(out) > killed_at  # it went on after the kill
    got = read_committed(out)
    check_log(out)
    assert multiset(got) == multiset(expected)  # every answer exactly once
    assert [r["emitted_at"] for r in got] == sorted(r["emitted_at"] for r in got)
