"""kill -9 at random points of `obda run --output-dir D --checkpoint C`, restarted until it finishes.

Evidence of exactly once: the committed output of the interrupted runs equals one uninterrupted run's;
the commit log numbers its batches 1..n without a hole, each batch starting where the previous one ended,
and nothing stays staged.  Per kind of query (tests/execution/test_checkpoint_kinds.py):

* ``bag_join`` — two streams and a static table: the same multiset of ``(emitted_at, binding)``;
* ``distinct`` — the same set of answers, each once, at the same timestamp;
* ``window_aggregate`` — a NOW() window: the changelog replayed gives the same answer at every timestamp;
* ``constrained`` — bounded only under a declared RI k-constraint: the same answers, the same quarantine
  records and the same constraint metrics (the watch's state is in the checkpoint).

Input: a copy of the demo project fed with many small time-ordered files (``api.feeder``: one file per
stream and block), read one file per stream and micro-batch (``--max-files-per-batch 1``), so a run has
dozens of micro-batches, with state carried across them.  Most kills wait for the end of a micro-batch (a
new checkpoint file: every micro-batch writes one, with output or without) and then a random fraction of one
or two micro-batches (so they fall between write, flush, checkpoint and commit); some fall anywhere in
start-up, recovery or the first micro-batches.  The delays are measured on the uninterrupted run, so every
kill lands before the run ends, however fast the micro-batches are.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults.faultkit import check_log
from execution.test_checkpoint_kinds import KINDS, QUERIES, assert_same_output, constraint_records, workspace
from obda.execution.committed_output import committed_batches, read_committed

ROOT = Path(__file__).resolve().parents[2]


def fed(tmp: Path, kind: str, blocks: int, seed: int) -> tuple[Path, Path]:
    ws, _ = workspace(tmp / "ws", blocks, seed, kind)
    query = tmp / "q.rq"
    query.write_text(QUERIES[kind], encoding="utf-8")
    return ws, query


def command(ws: Path, query: Path, out: Path, ckpt: Path, backend: str) -> list[str]:
    return [sys.executable, "-m", "obda.cli", "run", str(query), "--project", str(ws), "--until-exhausted",
            "--output-dir", str(out), "--checkpoint", str(ckpt), "--backend", backend, "--max-files-per-batch", "1"]


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)


def batch_ended(out: Path, ckpt: Path) -> tuple:
    """Changes when a micro-batch ends: its checkpoint file replaced (a new file), a commit file written."""
    try:
        st = os.stat(ckpt / "state.pkl")
        mark = (st.st_ino, st.st_mtime_ns)
    except FileNotFoundError:
        mark = None
    return mark, commits(out)


def commits(out: Path) -> int:
    try:
        return sum(1 for n in os.listdir(out / "_commits") if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return 0


def final_metrics(text: str) -> dict:
    """The metrics `obda run --until-exhausted` prints last (one JSON line)."""
    return json.loads(text.strip().splitlines()[-1])


def run_with_kills(tmp: Path, kills: int, seed: int, blocks: int, kind: str = "bag_join", backend: str = "local",
                   timeout: float = 120) -> dict:
    rng = random.Random(seed)
    ws, query = fed(tmp, kind, blocks, seed)
    log = tmp / "runs.log"

    ref = tmp / "reference"
    t0 = time.monotonic()
    proc = subprocess.Popen(command(ws, query, ref / "out", ref / "ckpt", backend), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    while proc.poll() is None and not (ref / "ckpt" / "state.pkl").exists():
        time.sleep(0.002)
    startup = time.monotonic() - t0  # to the end of the first micro-batch
    _, stderr = proc.communicate(timeout=timeout)
    duration = time.monotonic() - t0
    assert proc.returncode == 0, stderr[-3000:]
    ref_metrics = final_metrics(stderr)
    expected = read_committed(ref / "out")
    assert len(expected) > 20 and len(committed_batches(ref / "out")) > 2 * kills
    per_batch = max((duration - startup) / max(ref_metrics["batches"] - 1, 1), 0.001)

    out, ckpt = tmp / "out", tmp / "ckpt"
    cmd = command(ws, query, out, ckpt, backend)
    killed, runs = 0, 0
    deadline = time.monotonic() + timeout
    while True:
        runs += 1
        assert time.monotonic() < deadline, f"no finished run after {runs} starts, {killed} kills"
        mark = log.stat().st_size if log.exists() else 0
        proc = start(cmd, log)
        if killed < kills:
            if rng.random() < 0.25:  # anywhere: start-up, recovery, the first micro-batches
                time.sleep(rng.uniform(0, startup + 3 * per_batch))
            else:  # after the end of a micro-batch, within the next one or two
                seen = batch_ended(out, ckpt)
                while proc.poll() is None and batch_ended(out, ckpt) == seen and time.monotonic() < deadline:
                    time.sleep(0.001)
                time.sleep(rng.uniform(0, 2 * per_batch))
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
    assert_same_output(kind, got, expected)
    if kind == "constrained":
        want = constraint_records(ref / "ckpt" / "quarantine.jsonl")
        assert want and constraint_records(ckpt / "quarantine.jsonl") == want
        with open(log, "rb") as f:  # the finished run's own output
            f.seek(mark)
            metrics = final_metrics(f.read().decode(errors="replace"))
        for field in ("constraints", "constraint_violations", "incomplete_since"):
            assert metrics[field] == ref_metrics[field], field
    return {"answers": len(got), "kills": killed, "runs": runs, "batches": len(committed_batches(out))}


@pytest.mark.parametrize("kind", KINDS)
def test_three_kills_lose_and_repeat_nothing(tmp_path, kind):
    figures = run_with_kills(tmp_path, kills=3, seed=11, blocks=40, kind=kind)
    assert figures["kills"] == 3 and figures["runs"] == 4


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_twenty_kills_lose_and_repeat_nothing(tmp_path, kind):
    figures = run_with_kills(tmp_path, kills=20, seed=23, blocks=120, kind=kind, timeout=600)
    assert figures["kills"] == 20


@pytest.mark.slow
@pytest.mark.spark
def test_kills_with_the_spark_backend_lose_and_repeat_nothing(tmp_path):
    """The answers written by Spark's writers into the staging folder (write_frame), killed and restarted."""
    figures = run_with_kills(tmp_path, kills=3, seed=5, blocks=16, backend="spark", timeout=900)
    assert figures["kills"] == 3
