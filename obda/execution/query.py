"""``ContinuousQuery``: run unfolded SQL continuously over the sources (see the package docstring)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from obda.errors import ExecutionError, ObdaError
from obda.execution.constraints import ConstraintWatch
from obda.execution.checks import resolve_checks
from obda.execution.query_engine import Answer, QueryEngine, cut
from obda.analysis import Forest
from obda.analysis.execution_plan import ExecutionPlan
from obda.execution.consumed import FORGET_AFTER, compact, forget, forgettable
from obda.execution.keys import KeyCheck
from obda.execution.ledger import FileLedger
from obda.execution.runtime import Metrics, Runtime, peak_rss_bytes
from obda.execution.shedding import Shed, Shedder
from obda.execution.sinks import MemorySink, QuarantineSink, Sink, answer_lines
from obda.execution.query_inputs import QueryInputs
from obda.execution.query_state import QueryState
from obda.execution.spark_query import DEFAULT_SPILL_BYTES, DRIVER_ANSWERS, SparkSteps, spark_failure
from obda.model.terms import decoded

log = logging.getLogger("obda.execution")

DEFAULT_MAX_BYTES_PER_BATCH = 256 << 20  # bytes of files one micro-batch reads (at least one file per stream)


class ContinuousQuery(QueryState, QueryInputs, SparkSteps):
    """A continuous query over the stream and static tables of a sources catalog.

    See :mod:`obda.execution` for the guarantees.  As Spark's ``DataStreamWriter``: constructing a query
    plans it and does no I/O; :meth:`open` (called by :meth:`step` and :meth:`start` if not before) loads
    the static tables and restores the checkpoint, and Spark starts on first use.  Typical use::

        q = ContinuousQuery(plan_execution(sql, sources, report), base_dir="demo",
                            sink=JsonLinesSink("out.jsonl"), checkpoint_dir="ckpt")
        q.run_until_exhausted()        # or q.start(); ...; q.stop()
        print(q.metrics.to_dict())
    """

    def __init__(
        self,
        plan: ExecutionPlan,
        *,
        base_dir: str | os.PathLike = ".",
        sink: Sink | None = None,
        quarantine: QuarantineSink | str | os.PathLike | None = None,
        checkpoint_dir: str | os.PathLike | None = None,
        allow_unbounded: bool = False,
        idle_timeout: float | None = None,
        spark=None,
        master: str | None = None,
        spark_conf: dict | None = None,
        backend: str = "spark",
        max_files_per_batch: int | None = None,
        max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH,
        trigger_interval: float = 1.0,
        shared=None,
        clock: Callable[[], float] = time.monotonic,
        shed=None,
        forget_after: float | None = None,
    ):
        if backend not in ("spark", "local"):
            raise ExecutionError(f"unknown backend {backend!r} (spark or local)")
        if not isinstance(plan, ExecutionPlan):
            raise ExecutionError(f"a ContinuousQuery runs an ExecutionPlan (obda.analysis.plan_execution), "
                                 f"not a {type(plan).__name__}")
        self.base_dir = Path(base_dir)
        self.backend = backend
        self.sink = sink if sink is not None else MemorySink()
        if quarantine is None:
            quarantine = Path(checkpoint_dir) / "quarantine.jsonl" if checkpoint_dir else None
        self.quarantine = quarantine if isinstance(quarantine, QuarantineSink) else QuarantineSink(quarantine)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.max_files_per_batch = max_files_per_batch
        if int(max_bytes_per_batch) < 1:
            raise ExecutionError(f"max_bytes_per_batch must be at least 1 byte, not {max_bytes_per_batch}")
        self.max_bytes_per_batch = int(max_bytes_per_batch)
        self.trigger_interval = trigger_interval
        self._spark = spark
        if spark is not None:  # a session the caller gave: the executor's settings too
            from obda.execution.spark_io import configure_session

            configure_session(spark)
        self._master = master
        self._spark_conf = dict(spark_conf or {})  # settings of the session this query starts (--conf)
        self.order_by = plan.order_by  # ORDER BY of a query over static data only (answers emitted as one table)
        self.cut = (plan.limit, plan.offset)  # its LIMIT and OFFSET
        self.ask = plan.ask  # an ASK: over static data only, one answer, false when the pattern has no solution
        self.answer_columns = plan.columns  # the forest's columns but ORDER BY's hidden ones (never written)
        self.plan: Forest = plan.forest
        self.report = plan.report
        self.verdicts = list(plan.verdicts)
        self.aggregate = self._start_aggregate(plan.aggregate, allow_unbounded) if plan.aggregate is not None else None
        risky = plan.risky
        if risky and not allow_unbounded:
            detail = ", ".join(f"member {self.plan.members[i].member.origin + 1}: {self.verdicts[i]}" for i in risky)
            if self.aggregate is not None:
                raise ExecutionError(
                    f"the aggregate query is bounded, but the executor runs it as its characteristic query "
                    f"{plan.aggregate.characteristic!r} (Arasu Theorem 8.4), which is not shown bounded ({detail}); "
                    "partial aggregates below the join (Theorem 8.6) are not implemented yet. Run it anyway with "
                    "allow_unbounded=True."
                )
            raise ExecutionError(
                f"the query is not shown to run in bounded memory ({detail}); its state may grow with the "
                "stream. Run it anyway with allow_unbounded=True (CLI: --allow-unbounded)."
            )
        self.streams = [t.name for t in self.plan.stream_tables()]
        self._static_quarantine: list[dict] = []
        # the answer's columns of several kinds of term: held encoded, written each value as its kind (emit)
        self.typed = plan.typed
        self.engine = QueryEngine(self.plan, {}, self.typed)  # the static tables' rows: open() loads them
        watch = ConstraintWatch(self.plan) if self.plan.constraints else None
        self.runtime = Runtime(self.engine, self.streams, idle_timeout, clock, self.plan.views, watch)
        self.runtime.metrics.unbounded_members = risky
        # opt-in shedding: input that waited longer than shed's max_lag is dropped, every row counted
        self.shedder = Shedder(Shed.parse(shed), self.plan.stream_tables()) if shed is not None else None
        self.processed: dict[str, set[str]] = {s: set() for s in self.streams}
        # a consumed file gone from its listing, settled and recorded this long ago is forgotten (consumed.py)
        self.forget_after = FORGET_AFTER if forget_after is None else float(forget_after)
        if self.forget_after < 0:
            raise ExecutionError(f"forget_after must be 0 seconds or more, not {forget_after}")
        self._gone: dict[str, set[str]] = {}  # per stream: consumed files the last own listing no longer showed
        self.keys = KeyCheck(self.plan.stream_tables())  # declared keys of open timestamps (local backend)
        self.ledger = FileLedger(self.streams)  # each read file's size and time: a later change is reported
        self.batch_id = 0
        self.finished = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # stream -> {file: largest valid timestamp}: files read before that still hold rows of open
        # timestamps; the next micro-batch reads them again for those rows only (Spark backend)
        self.open_files: dict[str, dict[str, int]] = {s: {} for s in self.streams}
        self._parsed: dict = {}  # projection columns per (table, format, request), parsed once
        self._distributed = None  # obda.execution.distributed.SparkForest, built on first use
        self.spill_bytes = DEFAULT_SPILL_BYTES
        self.driver_answers = DRIVER_ANSWERS
        self.last_answers = 0  # answers the last micro-batch that closed a range emitted (driver_answers)
        self.last_span: int | None = None  # the length (µs) of the last range whose answers Spark wrote
        self._spill_root: str | None = None  # folder of the closing jobs' spilled rows (made on first use)
        self.shared = shared  # obda.execution.shared.SharedScan: run in that loop when started
        self._shared_key = f"q{id(self):x}"
        self.error: BaseException | None = None
        self._opened = False  # open(): static tables loaded, checkpoint restored
        self.ingesters = None  # obda.execution.mqtt_ingest.Ingesters of the MQTT streams, from open() to close()

    def open(self) -> "ContinuousQuery":
        """Load the static tables and restore the checkpoint (the constructor does no I/O). Called by
        :meth:`step`, :meth:`start` and :meth:`run_until_exhausted` when not called before; call it
        first to have its errors (a missing static table, another query's checkpoint) before running."""
        with self._lock:
            if not self._opened:
                if self.ingesters is None and any(t.ingest is not None for t in self.plan.stream_tables()):
                    from obda.execution.mqtt_ingest import start_ingesters

                    self.ingesters = start_ingesters(self.plan.stream_tables(), self.base_dir)
                    self.quarantine.annotators.append(self.ingesters.annotate)
                if any(t.kafka is not None for t in self.plan.stream_tables()):
                    from obda.execution.kafka_offsets import attach

                    attach(self)  # brokers and topics checked (located), the marker per partition
                if self.plan.checks:  # answered once, before any row is read (obda.execution.checks)
                    self.plan = resolve_checks(self.plan, self._check_answers)
                    self.engine.bind_checks(self.plan)
                self.engine.set_statics(*self._load_statics())
                self._restore()
                self._opened = True
        return self

    def _start_aggregate(self, plan, allow_unbounded: bool):
        from obda.execution.aggregate import Aggregator

        report = plan.report
        if report.verdict != "bounded" and not allow_unbounded:
            why = "; ".join(c.detail for c in report.conditions if not c.holds) or f"Q'_R is {report.reduced_verdict}"
            raise ExecutionError(
                f"the aggregate query is not shown to run in bounded memory ({report.theorem}: {why}); "
                "its state may grow with the stream. Run it anyway with allow_unbounded=True."
            )
        return Aggregator(plan)

    def emit(self, answers: list) -> None:
        """Answers of the executed (SPJ) query: to the sink, or to the aggregates of an aggregate query."""
        if self.typed:  # values held with their kind of term (obda.model.terms), written each as its kind
            answers = [Answer(a.emitted_at, decoded(a.values, self.typed), a.count) for a in answers]
        if self.aggregate is not None:
            self.aggregate.add(answers)
        else:
            self.sink.write_lines(answer_lines(answers, self.answer_columns))

    # -- resources ------------------------------------------------------------------------------
    @property
    def spark(self):
        if self._spark is None:
            from obda.execution.spark_io import get_spark

            self._spark = get_spark(self._master, conf=self._spark_conf)
        return self._spark

    @property
    def metrics(self) -> Metrics:
        return self.runtime.metrics

    @property
    def columns(self) -> tuple[str, ...]:
        return self.aggregate.plan.columns if self.aggregate is not None else self.answer_columns

    def answer(self) -> list[dict]:
        """An aggregate query's answer at the last closed timestamp: one row per group (HAVING kept),
        in ORDER BY order. The changelog replayed gives the same rows."""
        if self.aggregate is None:
            raise ExecutionError("answer() is the answer table of an aggregate query; this query's answers are "
                                 "its output stream")
        with self._lock:
            return self.aggregate.answer()

    def step(self, exhausted: bool = False, pending: dict[str, list[str]] | None = None) -> int:
        """Run one micro-batch: read new files, close timestamps, emit, checkpoint.

        With ``exhausted=True``, the timestamps still open when no file is left after this
        micro-batch close too (end of input).  ``pending``: the files to take the micro-batch
        from (default: every unprocessed file listed now).  Returns the number of new files read.
        """
        self.open()
        if self.decided:  # an ASK answered true: final, nothing left to read
            return 0
        with self._lock:
            t0 = time.perf_counter()
            if self.backend == "spark":
                try:
                    new, quarantine = self._step_spark(exhausted, pending)
                except Exception as e:
                    raise spark_failure(e, self.batch_id + 1) from e
            else:
                new, quarantine = self._step_local(exhausted, pending)
            return self.commit_batch(new, quarantine, t0)

    def commit_batch(self, new: dict[str, list[str]], quarantine: list[dict], t0: float) -> int:
        """End a micro-batch: quarantine, consumed files, sink flush, checkpoint, sink commit, metrics."""
        quarantine = list(quarantine) + self.ledger.check()  # files read earlier that changed since
        if self.shedder is not None:  # dropped files: counted, consumed, quarantined (README "Load shedding")
            quarantine += self.shedder.commit(self.processed, self.runtime.metrics)
        if quarantine:
            self.quarantine.write(quarantine)
        for name, files in new.items():
            self.processed[name] = compact(self.processed[name] | set(files))  # (Kafka: the last segment only)
        self.ledger.record(new, self.runtime.max_ts)
        now = self.ledger.clock()
        for name, files in self._gone.items():  # gone from this query's own listing (the shared loop: _forget)
            forget(self, name, forgettable(self, name, files, now))
        self._gone = {}
        self.runtime.metrics.remembered_inputs = sum(len(fs) for fs in self.processed.values())
        self.keys.forget(self.runtime.closed_upto)
        self.runtime.metrics.changed_files = self.ledger.changed
        self.batch_id += 1
        m = self.runtime.metrics
        m.batches += 1
        if self.aggregate is not None:  # the changelog of the groups the micro-batch changed
            from obda.execution.sinks import changelog_lines

            records = self.aggregate.finish_batch(self.runtime.closed_upto, static=not self.streams)
            if self.aggregate.plan.ask:  # an ASK's one answer, written as every ASK's (no changelog op)
                self.sink.write_lines(answer_lines([Answer(None, tuple(r["binding"][c] for c in self.columns), 1)
                                                    for r in records], self.columns))
            else:
                self.sink.write_lines(changelog_lines(records, self.columns))
            m.rows_out = self.aggregate.lines  # the changelog's lines, not the characteristic query's answers
        self.runtime.first_closed = None
        newest = max((t for t in self.runtime.max_ts.values() if t is not None), default=None)
        closed = self.runtime.closed_upto
        if newest is not None and closed is not None:  # (0 until a timestamp closes)
            m.app_lag_seconds = max(0, newest - closed) / 1e6
        if self.ask and self.streams and m.rows_out:  # its one line, true, is out: the answer is final
            m.decided = True
        sink_offset = self.sink.flush()
        q_offset = self.quarantine.flush()
        self.runtime.update_state_metrics(aggregate_entries=self.aggregate.size if self.aggregate is not None else 0)
        m.driver_peak_rss_bytes = peak_rss_bytes()
        nbytes = self._checkpoint(sink_offset, q_offset)
        self.sink.commit(sink_offset)
        m.state_bytes = nbytes
        m.last_batch_seconds = time.perf_counter() - t0
        m.total_batch_seconds += m.last_batch_seconds
        if m.unbounded_members and m.batches % 10 == 0:
            log.info("unbounded query state: %s", m.state_growth())
        if self.backend == "spark":  # the micro-batch's plans, held in the JVM by Python's cycles, released
            from obda.execution.spark_io import release_java_proxies

            release_java_proxies()
        return sum(len(f) for f in new.values())

    @property
    def decided(self) -> bool:
        """An ASK over streams that answered ``true``: its answer is final, so it reads no more files (its
        checkpoint says so after a restart)."""
        return self.runtime.metrics.decided

    def static_only(self) -> None:
        if not self.streams and not self.engine.static_done:
            answers = self.engine.static_only()
            if self.order_by:
                from obda.execution.aggregate import sorted_by

                at = {c: i for i, c in enumerate(self.plan.columns)}
                typed = frozenset(self.plan.columns[k] for k in self.typed)
                answers = sorted_by(answers, self.order_by, lambda a, name: a.values[at[name]], typed)
            if self.cut != (None, 0):
                answers = cut(answers, *self.cut)
            if self.ask and not answers:  # the ASK's one row: its pattern has no solution
                answers = [Answer(None, (False,), 1)]
            self.runtime.metrics.rows_out += sum(a.count for a in answers)
            self.emit(answers)

    def _step_local(self, exhausted: bool, pending: dict[str, list[str]] | None = None):
        """The local backend: rows grouped in Python, the engine steps one closed timestamp at a time."""
        new = self._cut(self._pending() if pending is None else pending)
        batches = self._read_local(new, self.runtime.closed_upto)
        self.runtime.ingest(batches)
        answers = self.runtime.close(exhausted=exhausted and not new)
        if exhausted and not new:
            self.finished = True
        self.emit(answers)
        self.static_only()
        return new, [r for b in batches for r in b.quarantine] + self.runtime.take_quarantine()

    def run_until_exhausted(self, max_batches: int | None = None) -> Metrics:
        """Process all files present, then close every timestamp (end of input).

        ``max_batches`` stops early *without* ending the input (the query can be
        resumed from its checkpoint).
        """
        n = 0
        while True:
            if max_batches is not None and n >= max_batches:
                return self.metrics
            read = self.step(exhausted=True)
            n += 1
            if read == 0:
                return self.metrics

    def start(self) -> "ContinuousQuery":
        """Run in the background, polling for new files every ``trigger_interval`` seconds.

        With ``shared`` (a :class:`~obda.execution.shared.SharedScan`), the query runs in that
        loop with the other queries over the same streams instead of a thread of its own.
        """
        self.open()
        if self.shared is not None:
            self.shared.add(self._shared_key, self)
            self.shared.start()
            return self
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()

        def loop():
            try:
                while not self._stop.is_set():
                    if self.step() == 0:
                        self._stop.wait(self.trigger_interval)
            except BaseException as e:  # reported through .error and the log
                self.error = e
                if isinstance(e, ObdaError):  # located and worded for a user: no traceback
                    log.error("continuous query failed: %s", e)
                else:
                    log.exception("continuous query failed")

        self._thread = threading.Thread(target=loop, name="obda-query", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 60) -> None:
        """Stop after the current micro-batch (its output and checkpoint are complete)."""
        if self.shared is not None:  # returns once the loop's micro-batch that includes it, if any, ended
            self.shared.remove(self._shared_key)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.sink.flush() if hasattr(self.sink, "flush") else None

    @property
    def running(self) -> bool:
        if self.shared is not None:
            return self._shared_key in self.shared and self.shared.running and self.error is None
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        self.stop()
        if self.ingesters is not None:
            self.ingesters.stop()
            self.ingesters = None
        if self._distributed is not None:
            self._distributed.release()
            self._distributed = None
        if self._spill_root is not None:
            import shutil

            shutil.rmtree(self._spill_root, ignore_errors=True)
            self._spill_root = None
        self.sink.close()
        self.quarantine.close()
        if self.backend == "spark":
            from obda.execution.spark_io import release_java_proxies

            release_java_proxies()

    def describe(self) -> dict:
        """The executed plan: per member its verdict and the synopsis of every unit."""
        d = self.plan.describe()
        for m, v in zip(d["members"], self.verdicts):
            m["verdict"] = v
        return d
