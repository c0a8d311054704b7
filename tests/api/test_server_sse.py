"""A real server: `obda serve` (uvicorn) on 127.0.0.1, a bounded demo query, fed rows, answers over SSE."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx

from apikit import AUTH, BOUNDED, TOKEN, answers, api_answers, make_workspace
from obda.project import Project


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server not ready in time")


def read_sse(url: str, out: list, stop: threading.Event) -> None:
    """Collect `result` events of an SSE stream into ``out`` until ``stop`` is set or the stream ends."""
    with httpx.stream("GET", url, headers=AUTH, timeout=httpx.Timeout(30, read=None)) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        event = {}
        for line in r.iter_lines():
            if stop.is_set():
                return
            if not line:
                if event.get("event") == "result":
                    out.append({"seq": int(event["id"]), **json.loads(event["data"])})
                elif event.get("event") == "status":
                    return
                event = {}
            elif not line.startswith(":") and ":" in line:
                k, v = line.split(":", 1)
                event[k] = v.lstrip(" ")


def test_obda_serve_streams_answers_of_fed_rows(tmp_path):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=0, seed=11)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OBDA_TRIGGER_INTERVAL": "0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "obda.cli", "serve", "--project", str(ws), "--port", str(port), "--token", TOKEN,
         "--backend", "local"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    stop = threading.Event()
    try:
        wait_ready(base, proc)
        assert httpx.get(f"{base}/v1/queries").status_code == 401
        r = httpx.post(f"{base}/v1/queries", json={"name": "hot", "query": BOUNDED, "idle_timeout": 0.5}, headers=AUTH)
        assert r.status_code == 201 and r.json()["verdict"] == "bounded"
        qid = r.json()["id"]
        assert httpx.post(f"{base}/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"

        events: list = []
        reader = threading.Thread(target=read_sse, args=(f"{base}/v1/queries/{qid}/results/stream", events, stop))
        reader.start()
        for _ in range(3):  # rows arrive while the client listens
            feeder.feed_block()
            time.sleep(0.3)
        project = Project.load(ws)
        expected = answers(ws, project.sources, project.compile(BOUNDED).to_sql("duckdb"))
        n = sum(expected.values())
        assert n > 0
        end = time.monotonic() + 20
        while len(events) < n and time.monotonic() < end:
            time.sleep(0.1)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert api_answers(events, ["sensor", "v"]) == expected
        # stopping the query ends the stream with a status event
        assert httpx.post(f"{base}/v1/queries/{qid}/stop", headers=AUTH).json()["status"] == "stopped"
        reader.join(10)
        assert not reader.is_alive()
        metrics = httpx.get(f"{base}/v1/queries/{qid}", headers=AUTH).json()["metrics"]
        assert metrics["rows_out"] == n and metrics["late"] == 0 and metrics["invalid"] == 0
    finally:
        stop.set()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stdout.read()
