"""kill -9 at random points of `obda run --output-dir D --checkpoint C`, restarted until it finishes.

Evidence of exactly once: the committed output of the interrupted runs equals, as a multiset of
``(emitted_at, binding)``, the output of one uninterrupted run; the commit log numbers its batches
1..n without a hole, each batch starting where the previous one ended, and nothing stays staged.

Input: a copy of the demo project fed with many small time-ordered files (``api.feeder``: one file per
stream and block), read one file per stream and micro-batch (``--max-files-per-batch 1``), so a run has
dozens of micro-batches; the query joins two streams and a static table (state carried across batches).
Most kills wait for a new commit file and then a random fraction of a micro-batch (so they fall between
write, flush, checkpoint and commit); some fall anywhere, start-up and recovery included.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from api.feeder import Feeder, prepare_workspace
from obda.execution.directory_sink import committed_batches, read_committed

ROOT = Path(__file__).resolve().parents[2]

#: hot readings after a maintenance of the turbine (two streams, a static table): bounded
QUERY = """PREFIX : <http://example.org/turbine#>
SELECT ?turbine ?v WHERE {
  GRAPH ?t1 { ?e :onTurbine ?turbine . }
  GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?t1 < ?t2 && ?v > 80)
}
"""


def workspace(tmp: Path, blocks: int, seed: int) -> tuple[Path, Path]:
    ws = prepare_workspace(ROOT / "demo", tmp / "ws")
    feeder = Feeder(ws, seed=seed, points=3)
    feeder.write_static()
    for _ in range(blocks):
        feeder.feed_block()
    query = tmp / "q.rq"
    query.write_text(QUERY, encoding="utf-8")
    return ws, query


def command(ws: Path, query: Path, out: Path, ckpt: Path, backend: str) -> list[str]:
    return [sys.executable, "-m", "obda.cli", "run", str(query), "--project", str(ws), "--until-exhausted",
            "--output-dir", str(out), "--checkpoint", str(ckpt), "--backend", backend, "--max-files-per-batch", "1"]


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)


def commits(out: Path) -> int:
    try:
        return sum(1 for n in os.listdir(out / "_commits") if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return 0


def multiset(rows: list[dict]) -> Counter:
    return Counter((r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in rows)


def check_log(out: Path) -> None:
    """Batches 1..n, each starting where the previous one ended; no staged leftover."""
    batches = committed_batches(out)
    assert [c.batch for c in batches] == list(range(1, len(batches) + 1))
    position = 1
    for c in batches:
        assert c.first == position, (c.batch, c.first, position)
        position += c.lines
    assert not any((out / "_staging").iterdir())


def run_with_kills(tmp: Path, kills: int, seed: int, blocks: int, backend: str = "local", timeout: float = 120) -> dict:
    rng = random.Random(seed)
    ws, query = workspace(tmp, blocks, seed)
    log = tmp / "runs.log"

    ref = tmp / "reference"
    t0 = time.monotonic()
    r = subprocess.run(command(ws, query, ref / "out", ref / "ckpt", backend), cwd=ROOT, capture_output=True,
                       text=True, timeout=timeout, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    duration = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    expected = read_committed(ref / "out")
    assert len(expected) > 20 and len(committed_batches(ref / "out")) > 2 * kills

    out, ckpt = tmp / "out", tmp / "ckpt"
    cmd = command(ws, query, out, ckpt, backend)
    killed, runs = 0, 0
    deadline = time.monotonic() + timeout
    while True:
        runs += 1
        assert time.monotonic() < deadline, f"no finished run after {runs} starts, {killed} kills"
        proc = start(cmd, log)
        if killed < kills:
            if rng.random() < 0.25:  # anywhere: start-up, recovery, a micro-batch
                time.sleep(rng.uniform(0, duration))
            else:  # after a new commit file, within a micro-batch or two
                seen = commits(out)
                while proc.poll() is None and commits(out) <= seen and time.monotonic() < deadline:
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, 0.08))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed += 1
                continue
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        assert rc == 0, log.read_text(errors="replace")[-3000:]
        break

    got = read_committed(out)
    check_log(out)
    want, have = multiset(expected), multiset(got)
    assert have == want, (f"missing: {sum((want - have).values())}, repeated or foreign: {sum((have - want).values())}")
    return {"answers": len(got), "kills": killed, "runs": runs, "batches": len(committed_batches(out))}


def test_three_kills_lose_and_repeat_nothing(tmp_path):
    figures = run_with_kills(tmp_path, kills=3, seed=11, blocks=40)
    assert figures["kills"] == 3 and figures["runs"] == 4


@pytest.mark.slow
def test_twenty_kills_lose_and_repeat_nothing(tmp_path):
    figures = run_with_kills(tmp_path, kills=20, seed=23, blocks=120, timeout=600)
    assert figures["kills"] == 20


@pytest.mark.slow
@pytest.mark.spark
def test_kills_with_the_spark_backend_lose_and_repeat_nothing(tmp_path):
    """The answers written by Spark's writers into the staging folder (write_frame), killed and restarted."""
    figures = run_with_kills(tmp_path, kills=3, seed=5, blocks=16, backend="spark", timeout=900)
    assert figures["kills"] == 3
