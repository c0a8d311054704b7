"""A real `obda serve` (uvicorn) in a subprocess, and a browser-like SSE client (EventSource semantics)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from apikit import AUTH, TOKEN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`python -m obda.cli serve` on 127.0.0.1; ``start`` / ``sigterm`` / ``kill9`` / ``start`` again."""

    def __init__(self, project: Path, state_dir: Path | None, backend: str = "local", env: dict | None = None,
                 log: Path | None = None):
        self.project, self.state_dir, self.backend = project, state_dir, backend
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "OBDA_TRIGGER_INTERVAL": "0.05", **(env or {})}
        self.log = log or (project.parent / f"server-{self.port}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "Server":
        cmd = [sys.executable, "-m", "obda.cli", "serve", "--project", str(self.project), "--port", str(self.port),
               "--token", TOKEN, "--backend", self.backend]
        if self.state_dir is not None:
            cmd += ["--state-dir", str(self.state_dir)]
        out = open(self.log, "a", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=self.env)
        out.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited early ({self.proc.returncode}): {self.output()[-3000:]}")
            try:
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("server not ready in time")

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def sigterm(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"SIGTERM did not stop the server in {timeout} s: {self.output()[-3000:]}")

    def kill9(self) -> int:
        self.proc.kill()
        return self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # -- requests ---------------------------------------------------------------------------------
    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.base + path, headers=AUTH, timeout=30, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.base + path, headers=AUTH, timeout=60, **kw)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(self.base + path, headers=AUTH, timeout=30)

    def page_all(self, qid: str, after: int = 0) -> list[dict]:
        """Every published answer after ``after``, by paging with ``?after=``."""
        out = []
        while True:
            r = self.get(f"/v1/queries/{qid}/results", params={"after": after, "limit": 1000})
            assert r.status_code == 200, r.text
            page = r.json()
            out += page["items"]
            if page["next_after"] is None:
                return out
            after = page["next_after"]


class EventSource:
    """What a browser's EventSource does: one URL, reconnect after a drop with ``Last-Event-ID``.

    Events are kept in ``events`` as (event type, id, data); ``connections`` counts (re)connections.
    """

    def __init__(self, url: str, retry: float = 0.1):
        self.url, self.retry = url, retry
        self.events: list[tuple[str, int | None, dict]] = []
        self.last_id: str | None = None
        self.connections = 0
        self.ended = threading.Event()  # a `status` event: the query stopped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "EventSource":
        self._thread.start()
        return self

    def close(self, timeout: float = 10) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def results(self) -> list[dict]:
        return [{"seq": i, **d} for e, i, d in self.events if e == "result"]

    def _run(self) -> None:
        while not self._stop.is_set() and not self.ended.is_set():
            headers = dict(AUTH)
            if self.last_id is not None:
                headers["Last-Event-ID"] = self.last_id
            try:
                with httpx.stream("GET", self.url, headers=headers, timeout=httpx.Timeout(5, read=None)) as r:
                    if r.status_code != 200:
                        time.sleep(self.retry)
                        continue
                    self.connections += 1
                    self._read(r)
            except (httpx.TransportError, httpx.StreamError):
                pass
            if not self.ended.is_set():
                time.sleep(self.retry)

    def _read(self, r: httpx.Response) -> None:
        event: dict = {}
        for line in r.iter_lines():
            if self._stop.is_set():
                return
            if line:
                if not line.startswith(":") and ":" in line:
                    k, v = line.split(":", 1)
                    event[k] = v[1:] if v.startswith(" ") else v
                continue
            if "id" in event:
                self.last_id = event["id"]
            kind = event.get("event", "message")
            if "data" in event:
                self.events.append((kind, int(event["id"]) if "id" in event else None, json.loads(event["data"])))
            if kind == "status":
                self.ended.set()
                return
            event = {}
