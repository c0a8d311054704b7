"""Shared by the fault tests (issue 29, item 4): a fed demo workspace, `obda run` in a subprocess, a small real
file system (tmpfs) that fills up, and the checks of a committed output folder."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from execution.test_checkpoint_kinds import QUERIES, workspace
from obda.execution.committed_output import committed_batches

ROOT = Path(__file__).resolve().parents[2]
#: two streams (maintenance, measurement) and a static table, bag semantics: a lost, late or repeated row of
#: either stream changes the answers
BAG_JOIN = QUERIES["bag_join"]


def fed(tmp: Path, blocks: int, seed: int) -> tuple[Path, Path, object]:
    """A copy of the demo project with ``blocks`` time-ordered files per stream, the query file, the feeder."""
    ws, feeder = workspace(tmp / "ws", blocks, seed)
    query = tmp / "q.rq"
    query.write_text(BAG_JOIN, encoding="utf-8")
    return ws, query, feeder


def command(ws: Path, query: Path, out: Path, ckpt: Path, *, exhausted: bool = True, backend: str = "local",
            extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "obda.cli", "run", str(query), "--project", str(ws),
            *(["--until-exhausted"] if exhausted else []), "--output-dir", str(out), "--checkpoint", str(ckpt),
            "--backend", backend, "--max-files-per-batch", "1", *extra]


def env() -> dict:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable)


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env())


def cli(cmd: list[str]):
    """`obda run` of ``cmd`` in this process (no interpreter start-up): the click Result (exit_code, output: stdout
    and stderr)."""
    from typer.testing import CliRunner

    from obda.cli import app

    assert cmd[1:3] == ["-m", "obda.cli"], cmd
    return CliRunner().invoke(app, cmd[3:])


def metrics_of(text: str) -> dict:
    """The metrics `obda run` prints last (one JSON line)."""
    return json.loads(text.strip().splitlines()[-1])


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env())


def commits(out: Path) -> int:
    try:
        return sum(1 for n in os.listdir(out / "_commits") if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return 0


def checkpoint_mark(ckpt: Path):
    """Changes each time a micro-batch ends (its checkpoint file is replaced: a new inode)."""
    try:
        st = os.stat(ckpt / "state.pkl")
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def check_log(out: Path, staged: bool = False) -> None:
    """Committed batches 1..n, each starting where the previous one ended; nothing left staged (unless
    ``staged``: a run that stopped may leave a batch its checkpoint covers, committed when it continues)."""
    batches = committed_batches(out)
    assert [c.batch for c in batches] == list(range(1, len(batches) + 1))
    position = 1
    for c in batches:
        assert c.first == position, (c.batch, c.first, position)
        position += c.lines
    staging = out / "_staging"
    assert staged or not staging.exists() or not any(staging.iterdir())


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (a real file system that fills up: writes fail with ENOSPC),
    unmounted afterwards; the test is skipped, with the reason, where mounting is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up ({(r.stderr or r.stdout).strip() or r.returncode}): "
                    "needs root (or CAP_SYS_ADMIN) and a kernel that allows it")
    try:
        yield path
    finally:
        for _ in range(3):  # a file may still be open for a moment (a connection the garbage collector closes)
            if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                break
            gc.collect()
            time.sleep(0.05)
        else:  # detached now, freed once the last file is closed
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until its file system refuses with ENOSPC (down to single bytes: the last
    page is full too); returns the file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 8, 1):
            block = b"\0" * chunk
            while True:
                try:
                    f.write(block)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return filler
