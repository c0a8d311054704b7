"""Registered continuous queries and their executor handles, kept in the service's durable store.

A query is registered once (compiled and analysed: obda's front half and the bounded-memory analyser),
then started and stopped any number of times.  The executor (``obda.execution.ContinuousQuery``) is created
on the first start and kept: a stop pauses it after the current micro-batch, a later start resumes with its
state, and the answers keep their sequence numbers.

Durability (:mod:`api.store`): registrations, the status the user asked for
and each query's checkpoint folder live in a SQLite database in the state
directory; a query's answers are the committed part files of a directory sink
in its checkpoint folder (:mod:`api.results`).  A restarted service reattaches every
query under its id (compiled again from its text) and resumes the ones that
were running from their checkpoints: same ids, same sequence numbers, no
answer lost or repeated, whether it was stopped by SIGTERM or killed.
``DELETE`` removes the query's row, answers and checkpoint folder.

Failures: a query whose executor fails (or cannot be built when the service resumes it) is ``failed``, and
the failure is classified and stored (``failure``): a failure of its environment or input — a stream folder
or file, a static table, Spark, a JDBC database, a disk — leaves its last checkpoint as it was, so once the
cause is fixed ``POST /start`` resumes it from that checkpoint under its id, numbering continuing (a fresh
executor: the failed micro-batch's staged answers and quarantine are dropped and computed again).  A failure
of its own saved state (:func:`obda.execution.checkpoint.is_state_fault`: a checkpoint that is corrupt, of
another query or version, or results that do not match it), a query that no longer compiles against the
project, and any failure of a service that keeps no checkpoints (no state folder) cannot be resumed: the
409 says why and what to do.

Thread safety: handlers run in a thread pool, so every change of the registry happens under one lock; the
cap on running queries is checked and taken atomically with the start.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Callable

from api.kafka_output import KafkaOutput, check_output
from api.problems import ApiProblem
from api.registered import (  # noqa: F401 - RegisteredQuery, query_not_found: imported from here by api.app
    CHECKPOINT_FILE, ENVIRONMENT, PROJECT, QUARANTINE_FILE, RESULTS_DIR, STATE, RegisteredQuery, failure_kind,
    now_iso, query_not_found, verdict_of,
)
from api.results import ResultLog
from api.settings import Settings
from api.store import DB_NAME, LEGACY_OWNER, Store
from obda.errors import ExecutionError, ObdaError, failure_text
from obda.execution import checkpoint as checkpoint_files
from obda.execution.shared import SharedScan
from obda.execution.shedding import Shed
from obda.model.compilation import Compilation

log = logging.getLogger("obda.api")


class QueryRegistry:
    """Holds registered queries; starts and stops their executors within the configured limits."""

    def __init__(self, settings: Settings, project):
        self.settings = settings
        self.project = project
        self._queries: dict[str, RegisteredQuery] = {}
        self._lock = threading.RLock()
        self.store = Store(settings.state_dir / DB_NAME if settings.state_dir is not None else None)
        self._resumer: threading.Thread | None = None
        self._closing = False
        # every running query in one micro-batch loop: one listing, read and collect job per batch
        self.shared = SharedScan(trigger_interval=settings.trigger_interval,
                                 max_bytes_per_batch=settings.max_bytes_per_batch)

    # -- durability -------------------------------------------------------------------------------
    def _checkpoint_dir(self, query_id: str) -> Path | None:
        return self.settings.state_dir / query_id if self.settings.state_dir is not None else None

    def _results(self, query_id: str, output: str | None = None) -> ResultLog:
        """The query's answers: a directory sink in its checkpoint folder (a temporary one without a state dir),
        published to ``output`` too (a Kafka topic: its brokers and topic are checked now, a BrokerError)."""
        ckpt = self._checkpoint_dir(query_id)
        return ResultLog(self.settings.max_results, self.store, query_id, ckpt / RESULTS_DIR if ckpt is not None else
                         None, output=KafkaOutput(output, query_id, ckpt) if output is not None else None)

    def reattach(self, compile_: Callable[[str], tuple]) -> list[str]:
        """Load every stored query (compiled again with ``compile_``); returns the ids to resume."""
        resume = []
        for row in self.store.queries():
            comp = report = None
            failed = row["status"] == "failed"
            error = row["error"] if failed else None
            # an older registry did not classify failures: resuming tells (a state fault fails again, as such)
            failure = (row["failure"] or ENVIRONMENT) if failed else None
            if failure in (None, ENVIRONMENT):  # it may run again: compiled (a failed one resumes on POST /start)
                try:
                    comp, report = compile_(row["text"])
                except ObdaError as e:
                    error, failure = f"the query no longer compiles against the project: {e}", PROJECT
                except ApiProblem as e:
                    error, failure = e.detail, PROJECT
            q = RegisteredQuery(
                id=row["id"], name=row["name"], text=row["text"], compilation=comp, report=report,
                allow_unbounded=bool(row["allow_unbounded"]), idle_timeout=row["idle_timeout"],
                results=self._results(row["id"], row.get("output")), created_at=row["created_at"],
                started_at=row["started_at"], output=row.get("output"),
                stopped_at=row["stopped_at"], load_error=error, wanted=row["status"], failure=failure,
                durable=self.settings.state_dir is not None, owner=row["owner"], shared_with=row["shared_with"],
                shed=json.loads(row["shed"]) if row.get("shed") else None,
            )
            self._queries[q.id] = q
            if row["status"] == "running" and error is None:
                q.starting = True  # until the resumer built its executor
                resume.append(q.id)
        return resume

    def resume(self, ids: list[str]) -> None:
        """Start the given queries again from their checkpoints, in a helper thread (the service answers meanwhile)."""
        self._closing = False
        if not ids:
            return

        def run():
            for qid in ids:
                q = self._queries.get(qid)
                if q is None or self._closing:
                    continue
                q.starting = False
                try:
                    self.start(qid, resuming=True)
                except ApiProblem as e:
                    log.error("query %s not resumed: %s", qid, e.detail)
                except Exception as e:  # recorded on the query: it shows as failed
                    log.error("query %s not resumed: %s", qid, e)

        self._resumer = threading.Thread(target=run, name="obda-resume", daemon=True)
        self._resumer.start()

    def _observe(self, q: RegisteredQuery) -> RegisteredQuery:
        """Record an executor failure and its kind in the store (a restart does not resume a failed query; a
        ``POST /start`` does, when its kind allows)."""
        if q.wanted != "failed" and q.handle is not None and getattr(q.handle, "error", None) is not None:
            q.wanted = "failed"
            q.failure = q.failure_kind
            q.failure_stored = False
        if not q.failure_stored:  # the status answers from memory; the store catches up once it can be written
            try:
                self.store.update_query(q.id, status="failed", error=q.error, failure=q.failure)
                q.failure_stored = True
            except sqlite3.Error as e:
                log.warning("query %s: its failure is not stored yet (%s); retried on the next look", q.id, e)
        return q

    def _refuse_while_behind(self) -> None:
        """429 while the input of a running query waits longer than ``max_lag_seconds`` (metric ``lag_seconds``):
        a new query would slow the queries that are behind already.  Which query is not said (it may be another
        user's)."""
        bound = self.settings.max_lag_seconds
        if not bound:
            return
        lags = [(q.metrics() or {}).get("lag_seconds", 0.0) for q in list(self._queries.values()) if q.running]
        worst = max(lags, default=0.0)
        if worst > bound:
            raise ApiProblem(429, "service_behind",
                             f"the service is behind its input: a running query's oldest unread file has waited "
                             f"{worst:.0f} s, more than the bound of {bound:g} s (max_lag_seconds); new queries are "
                             "refused until it catches up", headers={"Retry-After": "30"})

    def _not_resumable(self, q: RegisteredQuery) -> str | None:
        """Why the failed query ``q`` cannot resume (the 409's message), or None when it can."""
        kind = q.failure_kind
        if kind == PROJECT or q.compilation is None:
            return (f"the query failed and cannot be resumed: {q.error}. Fix the project (ontology, mappings, "
                    "sources file) and restart the service, which compiles it again; or delete the query and "
                    "register it again")
        if kind == STATE:
            return (f"the query failed and cannot be resumed: its saved state cannot be used ({q.error}). A query "
                    "resumes from its checkpoint after a failure of its environment or input (a stream folder or "
                    "file, a static table, Spark, a JDBC database, a disk) once the cause is fixed; a checkpoint "
                    "or results folder that is corrupt, altered, or written for another query or version cannot "
                    "be resumed from: delete the query and register it again (it starts from the first file)")
        if not q.durable:
            return (f"the query failed ({q.error}) and cannot be resumed: the service keeps no checkpoints (it "
                    "runs without --state-dir / OBDA_STATE_DIR), so there is nothing to resume from. Delete the "
                    "query and register it again; with a state folder a failed query resumes from its checkpoint "
                    "once the cause is fixed")
        return None

    def _fresh_start(self, q: RegisteredQuery, failed_handle) -> None:
        """Before a failed query resumes: close its failed executor; without a checkpoint on disk (it failed before
        its first one) nothing was committed, so what its micro-batch staged and quarantined is dropped too.  With
        one, the new executor's restore does that (``recover`` of the results and the quarantine)."""
        if failed_handle is not None:
            try:
                failed_handle.close()
            except Exception as e:  # noqa: BLE001 - it failed already; a new executor replaces it
                log.warning("query %s: closing the failed executor: %s", q.id, failure_text(e))
        ckpt = self._checkpoint_dir(q.id)
        if ckpt is not None and not (ckpt / CHECKPOINT_FILE).exists():
            q.results.recover(None)
            (ckpt / QUARANTINE_FILE).unlink(missing_ok=True)

    # -- queries ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._queries)

    def list(self) -> list[RegisteredQuery]:
        with self._lock:
            qs = sorted(self._queries.values(), key=lambda q: (q.created_at, q.id))
        return [self._observe(q) for q in qs]

    def get(self, query_id: str) -> RegisteredQuery:
        q = self._queries.get(query_id)
        if q is None:
            raise query_not_found(query_id)
        return self._observe(q)

    @property
    def running(self) -> int:
        return sum(1 for q in list(self._queries.values()) if q.running)

    def register(self, name: str, compilation: Compilation, report, *, allow_unbounded: bool = False,
                 idle_timeout: float | None = None, owner: str = LEGACY_OWNER,
                 shared_with: tuple[str, ...] = (), shed: dict | None = None,
                 output: str | None = None) -> RegisteredQuery:
        """Keep an analysed query of ``owner`` under a fresh id; refuse an unbounded one without the opt-in.

        Names are unique per owner (another user's query of the same name is not revealed)."""
        verdict = verdict_of(report, constrained=True)  # a query bounded by declared k-constraints runs bounded
        if verdict != "bounded" and not allow_unbounded:
            raise ExecutionError(
                f"the query is {verdict.replace('_', ' ')}: it is not shown to run in bounded memory, its state may "
                "grow with the streams. Register it with allow_unbounded=true to run it anyway, or see the report "
                "(POST /v1/analyze) for why and how to bound it (a hint may name a k-constraint to declare)."
            )
        if shed is not None:  # checked now (422 with what to write), kept as given: {max_lag, policy}
            shed = Shed.parse(shed).to_dict()
        check_output(output)
        self._refuse_while_behind()
        qid = uuid.uuid4().hex
        ckpt = self._checkpoint_dir(qid)
        # a Kafka output's brokers and topic are checked before anything is kept (outside the lock: it connects)
        results = self._results(qid, output) if output is not None else None
        try:
            with self._lock:
                if len(self._queries) >= self.settings.max_registered:
                    raise ApiProblem(429, "too_many_queries",
                                     f"{self.settings.max_registered} queries are registered; delete one first")
                if any(q.name == name and q.owner == owner for q in self._queries.values()):
                    raise ApiProblem(409, "name_taken", f"you have registered a query named {name!r} already")
                shared_with = tuple(sorted(set(shared_with)))
                created = now_iso()
                self.store.insert_query(dict(
                    id=qid, name=name, text=compilation.query.text, allow_unbounded=int(allow_unbounded),
                    idle_timeout=idle_timeout, status="registered", created_at=created,
                    checkpoint=str(ckpt) if ckpt is not None else None, owner=owner,
                    shared_with=json.dumps(list(shared_with)), shed=json.dumps(shed) if shed is not None else None,
                    output=output,
                ))
                q = RegisteredQuery(
                    id=qid, name=name, text=compilation.query.text, compilation=compilation, report=report,
                    allow_unbounded=allow_unbounded, idle_timeout=idle_timeout, results=results or self._results(qid),
                    created_at=created, durable=ckpt is not None, owner=owner, shared_with=shared_with, shed=shed,
                    output=output,
                )
                self._queries[q.id] = q
                return q
        except BaseException:  # not kept: the Kafka output's folder goes too
            if results is not None:
                results.close()
                if ckpt is not None:
                    shutil.rmtree(ckpt, ignore_errors=True)
            raise

    def share(self, query_id: str, users) -> RegisteredQuery:
        """Let exactly ``users`` read the query (its status and answers); replaces the previous list."""
        with self._lock:
            q = self.get(query_id)
            users = tuple(sorted(set(users)))
            self.store.share(q.id, list(users))
            q.shared_with = users
            return q

    def start(self, query_id: str, resuming: bool = False) -> RegisteredQuery:
        """Start (or resume) a query's executor; 429 when ``max_running`` queries already run.

        The slot is taken under the lock; the executor is built and started outside it, so a slow
        first start (a Spark session, static tables, the shared loop's micro-batch) blocks no other request.
        A ``POST /stop`` that arrives meanwhile wins: the executor is built but does not run.
        A failed query resumes from its checkpoint with a fresh executor when its failure allows
        (:meth:`_not_resumable`: else 409); if the cause is still there, the start fails with it and the
        query stays failed.
        """
        with self._lock:
            q = self.get(query_id)
            if q.running:
                return q
            failed = q.error is not None
            if failed:
                why = self._not_resumable(q)
                if why is not None:
                    raise ApiProblem(409, "query_failed", why, resumable=False)
            if self.running >= self.settings.max_running:
                raise ApiProblem(429, "too_many_running",
                                 f"{self.settings.max_running} queries are running (the configured cap); stop one first")
            failed_handle = None
            if failed:  # resumed by a fresh executor, from the checkpoint
                failed_handle, q.handle, q.load_error = q.handle, None, None
            q.starting = True
            q.stop_requested = False
            before = q.wanted
            if not resuming:
                q.wanted = "running"
                self.store.update_query(q.id, status="running")
        try:
            if failed:
                self._fresh_start(q, failed_handle)
            if q.handle is None:
                try:
                    try:
                        q.handle = self._executor(q)
                    except ObdaError:
                        raise
                    except Exception as e:  # noqa: BLE001 - a file system or Spark error: typed, never a 500
                        raise ExecutionError(f"the query cannot start: {failure_text(e)}; fix it, then start the "
                                             "query again") from e
                except ObdaError as e:
                    if resuming or failed:  # shown as failed; a later start by the user may try again
                        q.load_error, q.failure = str(e), failure_kind(e)
                        if failed:
                            q.wanted = "failed"
                            self.store.update_query(q.id, status="failed", error=q.load_error, failure=q.failure)
                    else:  # refused (422): the query stays as it was, e.g. until its data folder exists
                        q.wanted = before
                        self.store.update_query(q.id, status=before)
                    raise
            with self._lock:
                if q.stop_requested or self._closing or q.id not in self._queries:
                    return q
                q.stopping = False
            q.handle.start()  # not under the lock: joining the shared loop waits for its micro-batch in flight
            with self._lock:
                called_off = q.stop_requested or self._closing  # a stop (or the service's close) came meanwhile
                if not called_off:
                    q.started_at, q.stopped_at = now_iso(), None
                    if failed:  # resumed: its failure is over
                        q.failure = None
                        self.store.update_query(q.id, error=None, failure=None)
                    self.store.update_query(q.id, started_at=q.started_at, stopped_at=None)
            if called_off:
                q.handle.stop()
        finally:
            q.starting = False
        return q

    def _executor(self, q: RegisteredQuery):
        from obda.analysis import plan_execution
        from obda.execution import ContinuousQuery

        from obda.model.sources import missing_locations_error, missing_stream_locations

        s = self.settings
        handle = ContinuousQuery(
            plan_execution(q.compilation, self.project.sources, q.report),
            base_dir=self.project.directory, sink=q.results, checkpoint_dir=self._checkpoint_dir(q.id),
            allow_unbounded=q.allow_unbounded, idle_timeout=q.idle_timeout,
            master=s.master, backend=s.backend, trigger_interval=s.trigger_interval, shared=self.shared, shed=q.shed,
            max_bytes_per_batch=s.max_bytes_per_batch, forget_after=s.forget_after_seconds,
        )
        missing = missing_stream_locations(handle.plan.stream_tables(), self.project.directory)
        if missing:  # it would read nothing, silently: refused until the folder exists
            handle.close()
            raise missing_locations_error(missing, "create it (or fix 'location' in the sources file), then start again")
        empty = self._static_without_files(handle)
        if empty is not None:  # both backends refuse it (the local one would join with an empty table)
            handle.close()
            raise empty
        try:  # static tables, checkpoint: their errors refuse the start
            return handle.open()
        except BaseException:
            handle.close()
            raise

    def _static_without_files(self, handle) -> ExecutionError | None:
        """The error for the first static table read from files (not JDBC) that has no data file, if any."""
        from obda.execution.spark_io import list_files, resolve_location, table_format

        seen = set()
        for p in handle.plan.static_pipelines():
            t = p.table
            if t.name in seen or table_format(t) == "jdbc" or not t.location:
                continue
            seen.add(t.name)
            where = resolve_location(t, self.project.directory)
            if not list_files(where):
                return ExecutionError(f"static table {t.name!r}: no data files at {where}; restore them (or fix "
                                      "'location' in the sources file), then start the query again",
                                      t.source_location)
        return None

    def stop(self, query_id: str) -> RegisteredQuery:
        """Stop after the current micro-batch (its answers are complete); a later start resumes.

        During a start, the start is called off: the query does not run.
        """
        with self._lock:
            q = self.get(query_id)
            if q.error is not None:
                return q
            if q.starting:
                q.stop_requested = True
            if q.wanted == "running":
                q.wanted = "stopped"
                q.stopped_at = now_iso()
                self.store.update_query(q.id, status="stopped", stopped_at=q.stopped_at)
            handle = q.handle
            if handle is not None and handle.running:
                q.stopping = True
        if handle is not None and handle.running:
            handle.stop()
        return q

    def delete(self, query_id: str) -> None:
        """Stop the query and remove everything of it: its row, its answers, its checkpoint folder."""
        with self._lock:
            q = self.get(query_id)
            if q.starting:
                raise ApiProblem(409, "query_starting", "the query is starting; stop or delete it once it runs")
            del self._queries[query_id]
        if q.handle is not None:
            q.handle.close()
        ckpt = self._checkpoint_dir(query_id)
        if ckpt is not None:
            checkpoint_files.on_dump(ckpt / CHECKPOINT_FILE, None)
        self.store.delete_query(query_id)
        if ckpt is not None and ckpt.exists():
            shutil.rmtree(ckpt)

    def shutdown(self) -> None:
        """Stop every executor (service shutdown); their stored status stays, so a restart resumes them."""
        self._closing = True
        if self._resumer is not None:
            self._resumer.join(120)
        for q in self.list():
            if q.handle is not None:
                try:
                    q.handle.close()
                except Exception:  # shutting down: keep stopping the others
                    pass
        self.shared.stop()
