"""scripts/serve_demo.sh watches the answers for DURATION seconds (the README's `DURATION=60 bash scripts/demo.sh`
runs a minute), not until the first few answers; then it stops everything and exits 0."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DURATION = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("curl") is None, reason="scripts/serve_demo.sh needs curl")
def test_serve_demo_watches_for_duration_seconds_and_exits_0(tmp_path):
    port = _free_port()
    env = {**os.environ, "BACKEND": "local", "PORT": str(port), "DURATION": str(DURATION), "INTERVAL": "0.5",
           "WORKSPACE": str(tmp_path / "ws"), "LOGDIR": str(tmp_path / "logs"), "OBDA_TOKEN": "t" * 24}
    proc = subprocess.Popen(["bash", "scripts/serve_demo.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    stamps: dict[str, float] = {}
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            for mark in ("== live answers for", "== metrics", "== stopped"):
                if line.startswith(mark):
                    stamps[mark] = time.monotonic()
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    out = "".join(lines)
    assert rc == 0, out
    assert "== stopped" in stamps, out
    watched = stamps["== metrics"] - stamps["== live answers for"]
    assert DURATION - 0.5 <= watched <= DURATION + 10, (watched, out)
    answers = [ln for ln in lines if ln.startswith("data:")]
    assert len(answers) > 8, out  # more than the 8 answers the watch used to stop after, still watched to the end
    with socket.socket() as s:  # the server was stopped with the script
        assert s.connect_ex(("127.0.0.1", port)) != 0
