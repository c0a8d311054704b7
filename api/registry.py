"""Registered continuous queries and their executor handles.

A query is registered once (compiled and analysed: obda's front half and the
bounded-memory analyser), then started and stopped any number of times.  The
executor (``obda.execution.ContinuousQuery``) is created on the first start
and kept: a stop pauses it after the current micro-batch, a later start
resumes with its state, and the answers keep their sequence numbers.

Thread safety: handlers run in a thread pool, so every change of the
registry happens under one lock; the cap on running queries is checked and
taken atomically with the start.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from api.problems import ApiProblem
from api.results import ResultLog
from api.settings import Settings
from obda.errors import ExecutionError
from obda.model.compilation import Compilation


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def verdict_of(report) -> str:
    v = getattr(report, "verdict", None)
    return str(getattr(v, "value", v)).lower()


@dataclass
class RegisteredQuery:
    id: str
    name: str
    text: str
    compilation: Compilation
    report: Any  # obda.analysis report
    allow_unbounded: bool
    idle_timeout: float | None
    results: ResultLog
    created_at: str = field(default_factory=now_iso)
    started_at: str | None = None
    stopped_at: str | None = None
    handle: Any = None  # obda.execution.ContinuousQuery once started
    stopping: bool = False
    starting: bool = False  # the executor is being built (a Spark session and static tables can take a while)

    @property
    def verdict(self) -> str:
        return verdict_of(self.report)

    @property
    def error(self) -> str | None:
        e = getattr(self.handle, "error", None)
        return None if e is None else (str(e) or type(e).__name__)

    @property
    def status(self) -> str:
        if self.starting:
            return "starting"
        if self.handle is None:
            return "registered"
        if self.error is not None:
            return "failed"
        if self.handle.running and not self.stopping:
            return "running"
        return "stopped"

    @property
    def running(self) -> bool:
        """Running or about to run: what the cap on running queries counts."""
        return self.status in ("running", "starting")

    def metrics(self) -> dict | None:
        if self.handle is None:
            return None
        for _ in range(5):  # the executor thread may update a counter dict while it is copied
            try:
                return self.handle.metrics.to_dict()
            except RuntimeError:
                continue
        return self.handle.metrics.to_dict()


class QueryRegistry:
    """Holds registered queries; starts and stops their executors within the configured limits."""

    def __init__(self, settings: Settings, project):
        self.settings = settings
        self.project = project
        self._queries: dict[str, RegisteredQuery] = {}
        self._lock = threading.RLock()

    # -- queries ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queries)

    def list(self) -> list[RegisteredQuery]:
        with self._lock:
            return sorted(self._queries.values(), key=lambda q: (q.created_at, q.id))

    def get(self, query_id: str) -> RegisteredQuery:
        q = self._queries.get(query_id)
        if q is None:
            raise ApiProblem(404, "query_not_found", f"no registered query with id {query_id!r}")
        return q

    @property
    def running(self) -> int:
        return sum(1 for q in list(self._queries.values()) if q.running)

    def register(self, name: str, compilation: Compilation, report, *, allow_unbounded: bool = False,
                 idle_timeout: float | None = None) -> RegisteredQuery:
        """Keep an analysed query under a fresh id; refuse an unbounded one without the opt-in."""
        verdict = verdict_of(report)
        if verdict != "bounded" and not allow_unbounded:
            raise ExecutionError(
                f"the query is {verdict.replace('_', ' ')}: it is not shown to run in bounded memory, its state may "
                "grow with the streams. Register it with allow_unbounded=true to run it anyway, or see the report "
                "(POST /v1/analyze) for why and how to bound it."
            )
        with self._lock:
            if len(self._queries) >= self.settings.max_registered:
                raise ApiProblem(429, "too_many_queries",
                                 f"{self.settings.max_registered} queries are registered; delete one first")
            if any(q.name == name for q in self._queries.values()):
                raise ApiProblem(409, "name_taken", f"a query named {name!r} is already registered")
            q = RegisteredQuery(
                id=uuid.uuid4().hex, name=name, text=compilation.query.text, compilation=compilation, report=report,
                allow_unbounded=allow_unbounded, idle_timeout=idle_timeout,
                results=ResultLog(self.settings.max_results),
            )
            self._queries[q.id] = q
            return q

    def start(self, query_id: str) -> RegisteredQuery:
        """Start (or resume) a query's executor; 429 when ``max_running`` queries already run.

        The slot is taken under the lock; the executor is built outside it, so
        a slow first start (a Spark session, static tables) blocks no other request.
        """
        with self._lock:
            q = self.get(query_id)
            if q.running:
                return q
            if self.running >= self.settings.max_running:
                raise ApiProblem(429, "too_many_running",
                                 f"{self.settings.max_running} queries are running (the configured cap); stop one first")
            if q.handle is not None and q.handle.error is not None:
                raise ApiProblem(409, "query_failed", f"the query failed and cannot be resumed: {q.error}; "
                                                      "delete it and register it again")
            q.starting = True
        try:
            if q.handle is None:
                q.handle = self._executor(q)
            q.stopping = False
            q.handle.start()
            q.started_at, q.stopped_at = now_iso(), None
        finally:
            q.starting = False
        return q

    def _executor(self, q: RegisteredQuery):
        from obda.execution import ContinuousQuery

        s = self.settings
        ckpt = s.state_dir / q.id if s.state_dir is not None else None
        return ContinuousQuery(
            q.compilation, self.project.sources, q.report,
            base_dir=self.project.directory, sink=q.results, checkpoint_dir=ckpt,
            allow_unbounded=q.allow_unbounded, idle_timeout=q.idle_timeout,
            master=s.master, backend=s.backend, trigger_interval=s.trigger_interval,
        )

    def stop(self, query_id: str) -> RegisteredQuery:
        """Stop after the current micro-batch (its answers are complete); a later start resumes."""
        q = self.get(query_id)
        if q.handle is not None and q.handle.running:
            q.stopping = True
            q.handle.stop()
            q.stopped_at = now_iso()
        return q

    def delete(self, query_id: str) -> None:
        with self._lock:
            q = self.get(query_id)
            if q.starting:
                raise ApiProblem(409, "query_starting", "the query is starting; stop or delete it once it runs")
            if q.handle is not None:
                q.handle.close()
            del self._queries[query_id]

    def shutdown(self) -> None:
        """Stop every executor (service shutdown)."""
        for q in self.list():
            if q.handle is not None:
                try:
                    q.handle.close()
                except Exception:  # shutting down: keep stopping the others
                    pass
