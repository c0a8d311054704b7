"""A registered continuous query as the service holds it (:class:`RegisteredQuery`), the kinds of its failure,
and the names of the files in its checkpoint folder.

:class:`RegisteredQuery` derives what the API shows — status, error, whether a failed query can resume, its
metrics — from what the registry stored and from its executor handle; :mod:`api.registry` changes it (under its
lock).  The kinds of failure: :data:`ENVIRONMENT` (its environment or input failed; the last checkpoint is intact
and the query resumes from it), :data:`STATE` (its checkpoint or results cannot be used) and :data:`PROJECT` (it
no longer compiles against the project).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from api.problems import ApiProblem
from api.results import ResultLog
from api.store import LEGACY_OWNER
from obda.errors import failure_text
from obda.execution.checkpoint import is_state_fault
from obda.model.compilation import Compilation

#: the executor's checkpoint file inside a query's checkpoint folder (obda.execution.query)
CHECKPOINT_FILE = "state.pkl"
#: the query's committed answers inside its checkpoint folder (api.results, obda.execution.DirectorySink)
RESULTS_DIR = "results"
#: the executor's quarantine file inside a query's checkpoint folder (obda.execution.query)
QUARANTINE_FILE = "quarantine.jsonl"

#: kinds of failure (stored as ``failure``): the environment's or input's (resumable), the query's saved state's,
#: the project's (the query no longer compiles against it)
ENVIRONMENT, STATE, PROJECT = "environment", "state", "project"


def failure_kind(error: BaseException) -> str:
    """What kind of failure ``error`` is: :data:`STATE` (its checkpoint or results cannot be used) or
    :data:`ENVIRONMENT` (anything else: the last checkpoint is intact, the query resumes from it)."""
    return STATE if is_state_fault(error) else ENVIRONMENT


def query_not_found(query_id: str) -> ApiProblem:
    """The 404 of a query that does not exist — and of one the caller may not see (its existence is not revealed)."""
    return ApiProblem(404, "query_not_found", f"no registered query with id {query_id!r}")


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def verdict_of(report, constrained: bool = False) -> str:
    """The report's verdict; with ``constrained``, its verdict under the declared k-constraints (the same
    for a report without them)."""
    v = getattr(report, "verdict", None)
    if constrained:
        v = getattr(report, "constrained_verdict", v)
    return str(getattr(v, "value", v)).lower()


@dataclass
class RegisteredQuery:
    id: str
    name: str
    text: str
    compilation: Compilation | None  # None: it no longer compiles after a restart (see load_error)
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
    stop_requested: bool = False  # POST /stop while starting: the executor is built but not run
    load_error: str | None = None  # why it could not be reattached or started (failed)
    wanted: str = "registered"  # the status the user asked for, as stored
    failure: str | None = None  # ENVIRONMENT | STATE | PROJECT: the kind of its failure (None: not failed)
    failure_stored: bool = True  # its failure is in the store (False: writing it failed, e.g. a full disk; retried)
    durable: bool = False  # it has a checkpoint folder (the service keeps state): a failure can resume from it
    owner: str = LEGACY_OWNER  # the user who registered it (api.access: who may see and change it)
    shared_with: tuple[str, ...] = ()  # users who may read its status and answers
    shed: dict | None = None  # opt-in load shedding {max_lag, policy} (obda.execution.shedding); None: never drops
    output: str | None = None  # kafka://host:port/topic: its committed answers published there too (api.kafka_output)

    @property
    def incomplete_since(self) -> str | None:
        """The first application time whose answers may miss input (a shed row's, a constraint violation's)."""
        return (self.metrics() or {}).get("incomplete_since")

    @property
    def verdict(self) -> str:
        return verdict_of(self.report) if self.report is not None else "not_shown"

    @property
    def constrained_verdict(self) -> str:
        """The verdict under the declared k-constraints (the executor admits the query by it)."""
        return verdict_of(self.report, constrained=True) if self.report is not None else "not_shown"

    @property
    def constraints(self) -> list[str]:
        """The declared k-constraints that bound the query (its synopses drop state by them)."""
        return list(getattr(self.report, "constraints_used", ()) or ())

    @property
    def error(self) -> str | None:
        e = getattr(self.handle, "error", None)
        if e is None:
            return self.load_error
        return failure_text(e)

    @property
    def failure_kind(self) -> str | None:
        """The kind of its failure (None: it did not fail)."""
        e = getattr(self.handle, "error", None)
        if e is not None:
            return failure_kind(e)
        return (self.failure or ENVIRONMENT) if self.load_error is not None else None

    @property
    def resumable(self) -> bool | None:
        """For a failed query: whether ``POST /start`` resumes it from its checkpoint (once the cause is fixed)."""
        kind = self.failure_kind
        if kind is None:
            return None
        return kind == ENVIRONMENT and self.durable and self.compilation is not None

    @property
    def status(self) -> str:
        if self.starting:
            return "stopped" if self.stop_requested else "starting"
        if self.error is not None:
            return "failed"
        if self.handle is None:
            return "stopped" if self.wanted == "stopped" else "registered"
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
