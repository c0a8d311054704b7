"""Shared scans: every running query over the same streams in one micro-batch loop.

Ten queries over one stream, each with its own loop, list the stream's folder ten times,
read every file ten times and run ten Spark jobs per micro-batch.  :class:`SharedScan`
runs them together: per micro-batch **one** listing per stream and, when the micro-batch's new
files reach ``share_scan_bytes``, per group of (by default) five queries, **one** read of the new
files (:class:`~obda.execution.scan.Scan`: every query adds its flag and key columns to the same
projection, under its own namespace) and **one** job for their markers, synopsis updates and
driver-bound answers; a smaller micro-batch runs each query's scan and job on its own.  Why:
Spark's analysis of a plan grows faster than linearly with its width, and at small micro-batches
that costs more than the parses a shared scan saves (:data:`SHARE_SCAN_BYTES`; docs/cluster.md)
(a :class:`~obda.execution.directory_sink.DirectorySink` still writes each query's
answers with its own Spark write).  Each query keeps its own state, marker, checkpoint and
sink, so it can stop, resume or fail alone.

Joining: the loop has a *cursor* — the files of every stream it consumed.  A query whose
consumed files equal the cursor (on its streams) is *in step* and runs in the shared
micro-batches.  A query started later (or resumed from an older checkpoint) first
catches up **on its own**, one micro-batch at a time, over the files the loop already
consumed, then joins.  The outputs are those of each query run alone (tested in
tests/execution/test_exec_shared.py).
"""

from __future__ import annotations

import logging
import threading
import time

from obda.errors import ExecutionError
from obda.execution import consumed
from obda.execution.scan import namespace

log = logging.getLogger("obda.execution")

# A shared micro-batch with fewer bytes of new files than this runs each query's scan and job on its own
# (the listing is still shared): there, planning one plan over a wider scan costs more than the parses it
# saves.  benchmarks/shared_queries.py (20 demo queries, 2,000 rows in 10 micro-batches, 2 cores): 20
# queries in one plan 37.6 s per micro-batch, in groups of five 12.8 s, each its own 9.5 s (one query
# 0.7 s).  The threshold is estimated from those figures and the validating parse's cost (1.65 s for
# 16.4 MB, about 0.1 s per MB, benchmarks/executor_vs_spark.py's floor): a group of five costs about
# 0.17 s more planning per query and saves four parses in five, which pays from about 2 MB; 4 MiB
# leaves a margin (docs/cluster.md, "Several queries: shared scans").
SHARE_SCAN_BYTES = 4 << 20


class SharedScan:
    """Runs :class:`~obda.execution.query.ContinuousQuery` objects over shared reads (configure, then start).

    ``spark``: the session every query uses.  ``max_files_per_batch`` / ``max_bytes_per_batch``:
    the limits of a shared micro-batch (as for a query alone).  ``queries_per_job``: how many
    queries share one scan and one collect job (the queries are grouped) in a micro-batch of at least
    ``share_scan_bytes`` of new files; a smaller one runs each query's scan and job on its own.  Queries are added with
    :meth:`add` (a query of the local backend runs its own micro-batches in the same loop).
    """

    def __init__(self, spark=None, *, trigger_interval: float = 1.0, max_files_per_batch: int | None = None,
                 max_bytes_per_batch: int | None = None, queries_per_job: int = 5,
                 share_scan_bytes: int = SHARE_SCAN_BYTES):
        from obda.execution.query import DEFAULT_MAX_BYTES_PER_BATCH

        self._spark = spark
        self.trigger_interval = trigger_interval
        self.max_files_per_batch = max_files_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch or DEFAULT_MAX_BYTES_PER_BATCH
        self.queries_per_job = max(1, queries_per_job)  # queries that share one scan and one collect job
        self.share_scan_bytes = share_scan_bytes  # below: each query its own scan and job
        self.queries: dict[str, object] = {}  # key -> ContinuousQuery
        self.cursor: dict[str, set[str]] = {}  # stream -> files consumed by the shared micro-batches
        self._gone: dict[str, set[str]] = {}  # stream -> files of the cursor the last listing no longer showed
        self.batches = 0  # shared micro-batches run
        self._next_ns = 0
        self._cache: dict = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- membership -------------------------------------------------------------------------------
    def add(self, key: str, query) -> None:
        """Run ``query`` in the loop (it catches up first when it is behind)."""
        query.open()
        with self._lock:
            query.set_namespace(namespace(self._next_ns))
            self._next_ns += 1
            self.queries[key] = query

    def remove(self, key: str) -> None:
        """Stop running the query: returns after the current micro-batch (the loop holds the lock for it)."""
        with self._lock:
            self.queries.pop(key, None)
            if not self.queries:
                self.cursor = {}

    def __contains__(self, key: str) -> bool:
        return key in self.queries

    def in_step(self, query) -> bool:
        """Whether the query consumed exactly the loop's files on each of its streams."""
        return all(query.processed[s] == self.cursor.get(s, query.processed[s]) for s in query.streams)

    # -- one micro-batch ------------------------------------------------------------------------
    def step(self, exhausted: bool = False) -> int:
        """One shared micro-batch (and one catch-up micro-batch of each query behind).  Returns new files read."""
        with self._lock:
            queries = list(self.queries.items())
            # a query that sheds drops files the others read: it lists, cuts and reads on its own, in this loop
            alone = {k for k, q in queries if q.backend != "spark" or getattr(q, "shedder", None) is not None}
            # an ASK answered true reads nothing more (ContinuousQuery.decided)
            spark_queries = [(k, q) for k, q in queries if k not in alone and not q.error and not q.decided]
            read = 0
            for key, q in queries:  # the local backend, shedding and failed queries do not share
                if key in alone and q.error is None:
                    read += self._guarded(key, q, lambda q=q: q.step(exhausted))
            behind = [(k, q) for k, q in spark_queries if not self.in_step(q)]
            joined = [(k, q) for k, q in spark_queries if self.in_step(q)]
            for key, q in behind:
                read += self._catch_up(key, q)
            if joined:
                read += self._shared_step(joined, exhausted)
            return read

    def _guarded(self, key: str, q, fn) -> int:
        """Run ``fn``; a failure stops that query only (recorded in ``q.error``)."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the other queries go on; the query shows as failed
            q.error = e
            log.exception("continuous query %s failed", key)
            return 0

    def _catch_up(self, key: str, q) -> int:
        """One micro-batch of a query behind the loop, over files the loop already consumed."""
        for s in q.streams:  # files it read that the loop forgot since (it was stopped): forgotten by it too
            consumed.forget(q, s, consumed.stale(q, s, self.cursor.get(s, set())))
        behind = {s: consumed.behind(self.cursor.get(s, set()), q.processed[s]) for s in q.streams}
        if any(consumed.ahead(self.cursor.get(s, set()), q.processed[s]) for s in q.streams):
            # resumed from a later checkpoint than the loop's: it waits for the loop
            return 0
        return self._guarded(key, q, lambda: q.step(False, pending=behind))

    def _pending(self, joined) -> dict[str, list[str]]:
        """Per stream of the joined queries its files not consumed yet: one listing per stream."""
        for _, q in joined:
            q.runtime.listed()

        tables = {}
        for _, q in joined:
            for t in q.plan.stream_tables():
                tables.setdefault(t.name, (t, q.base_dir))
        from obda.execution.kafka_offsets import pending_inputs  # a Kafka topic: fetched once for every query

        out = {}
        for name, (table, base) in tables.items():
            out[name], self._gone[name] = pending_inputs(table, base, self.cursor.get(name, set()))
        return out

    def _shared_step(self, joined, exhausted: bool) -> int:
        from obda.execution.spark_query import cut_files

        for _, q in joined:  # a query joining now brings its consumed files
            for s in q.streams:
                self.cursor.setdefault(s, set(q.processed[s]))
        t0 = time.perf_counter()
        pending = self._pending(joined)
        new = cut_files(pending, self.max_files_per_batch, self.max_bytes_per_batch)
        # the same files for every query; one scan per group of queries_per_job queries: a scan's
        # projection is as wide as its queries together, and Spark's analysis of plans over a very
        # wide cached relation costs more than the reads it saves (benchmarks/shared_queries.py); a
        # micro-batch below share_scan_bytes is planned per query (its parse costs less than that)
        from obda.execution.spark_query import file_bytes

        nbytes = file_bytes(new)
        size = self.queries_per_job if nbytes >= self.share_scan_bytes else 1
        for _, q in joined:
            q.runtime.metrics.observe_input({s: fs for s, fs in pending.items() if s in q.streams}, new)
        for first in range(0, len(joined), size):
            self._group_step(joined[first:first + size], pending, new, nbytes, exhausted, t0)
        for s, fs in new.items():
            self.cursor[s] = consumed.compact(self.cursor.get(s, set()) | set(fs))  # as each query's (commit_batch)
        self._forget()
        self.batches += 1
        return sum(len(fs) for fs in new.values())

    def _forget(self) -> None:
        """Forget the consumed files gone from the last listing that every Spark query of the loop on their stream
        may forget (:func:`obda.execution.consumed.forgettable`): the cursor and each query's consumed files stay
        equal, so the queries in step stay in step."""
        gone, self._gone = self._gone, {}
        spark = [q for q in self.queries.values() if q.backend == "spark" and getattr(q, "shedder", None) is None]
        for s, files in gone.items():
            on = [q for q in spark if s in q.streams]
            if not files or not on:
                continue
            now = on[0].ledger.clock()
            for q in on:
                files = consumed.forgettable(q, s, files, now)
            if files:
                for q in on:
                    consumed.forget(q, s, files)
                    q.runtime.metrics.remembered_inputs = sum(len(fs) for fs in q.processed.values())
                self.cursor[s] = self.cursor[s] - files

    def _group_step(self, joined, pending, new, nbytes: int, exhausted: bool, t0: float) -> None:
        """One micro-batch of ``new`` for a group of queries (:func:`~obda.execution.microbatch.spark_batch`:
        one scan, one job), then each query's commit."""
        from obda.execution.microbatch import Member, spark_batch
        from obda.execution.scan import ScanRead

        locks = [q._lock for _, q in joined]
        for lock in locks:
            lock.acquire()
        try:
            carried_of = {}
            for key, q in list(joined):
                try:  # a query whose open rows' files are gone stops alone (located)
                    carried_of[key] = q.carried()
                except ExecutionError as e:
                    q.error = e
                    log.error("continuous query %s failed: %s", key, e)
            joined = [(key, q) for key, q in joined if key in carried_of]
            if not joined:
                return
            readers_of: dict[str, list[str]] = {}
            for _, q in joined:
                for s in q.streams:
                    readers_of.setdefault(s, []).append(q.ns)
            shared_reads: dict[tuple, ScanRead] = {}
            members, carried_reads = [], []
            for key, q in joined:
                mine = {s: fs for s, fs in new.items() if s in q.streams}
                last = all(len(mine.get(s, ())) == len(pending.get(s, ())) for s in q.streams)
                carried = carried_of[key]
                for r in q.requests(mine):
                    k = (r.table.name, r.fmt)
                    if k not in shared_reads:
                        shared_reads[k] = ScanRead(r.table, r.fmt, r.paths, tuple(readers_of[r.table.name]), True)
                carried_reads += [ScanRead(r.table, r.fmt, r.paths, (q.ns,), False) for r in q.requests(carried)]
                members.append(Member(key, q, mine, exhausted and last))
            reads = list(shared_reads.values()) + carried_reads

            def fail(m, e):
                from obda.execution.spark_query import spark_failure

                m.query.error = spark_failure(e, m.query.batch_id + 1)  # a message, not Spark's plan
                log.error("continuous query %s failed: %s", m.key, e, exc_info=e)

            spark_batch(joined[0][1].spark, members, reads, self._cache, nbytes, fail)
            for m in members:
                if m.error is None:
                    self._guarded(m.key, m.query, lambda m=m: m.query.commit_batch(m.new, m.batch.quarantine, t0))
        finally:
            for lock in locks:
                lock.release()

    def run_until_exhausted(self, max_batches: int | None = None) -> None:
        """Step until every query consumed every file present and closed its timestamps."""
        n = 0
        while max_batches is None or n < max_batches:
            n += 1
            if self.step(exhausted=True) == 0 and all(self.in_step(q) or q.decided for q in self.queries.values()):
                self.step(exhausted=True)
                return

    # -- background loop -------------------------------------------------------------------------
    def start(self) -> "SharedScan":
        """Poll for new files every ``trigger_interval`` seconds in a background thread."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()

        def loop():
            while not self._stop.is_set():
                try:
                    if self.step() == 0:
                        self._stop.wait(self.trigger_interval)
                except Exception:  # noqa: BLE001 - a loop-level failure (listing): retried next tick
                    log.exception("shared scan failed; retrying")
                    self._stop.wait(self.trigger_interval)

        self._thread = threading.Thread(target=loop, name="obda-shared-scan", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float | None = 60) -> None:
        """Stop after the current micro-batch."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
