"""``ContinuousQuery``: run unfolded SQL continuously over the sources (see the package docstring)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable


from obda.errors import ExecutionError
from obda.execution import checkpoint
from obda.execution.constraints import ConstraintWatch
from obda.execution.engine import QueryEngine
from obda.analysis import AnalysisReport, Forest, analyze, build_forest
from obda.execution import views as view_rows
from obda.execution.rows import TableBatch, process_rows, read_file_rows, static_rows
from obda.execution.runtime import Metrics, Runtime, peak_rss_bytes
from obda.execution.microbatch import Batch, Closing, in_range
from obda.execution.scan import Scan, flag_column, key_column
from obda.execution.sinks import MemorySink, QuarantineSink, Sink, answer_lines
from obda.execution.spark_io import list_files, local_frame, resolve_location, table_format
from obda.model.compilation import Compilation
from obda.model.sources import Sources

log = logging.getLogger("obda.execution")

CHECKPOINT_VERSION = 2
DEFAULT_MAX_BYTES_PER_BATCH = 256 << 20  # bytes of files one micro-batch reads (at least one file per stream)
# a micro-batch with at least this many bytes of new files brings its answers to the driver through
# Parquet part files merged in order, not one partition (collect_tagged's spill_dir)
DEFAULT_SPILL_BYTES = 16 << 20
# a sink that writes with Spark (a directory) gets a micro-batch's answers through the driver, in the
# micro-batch's one job, while the previous micro-batch closed fewer answers than this; else Spark's
# writer writes them (a job of its own, but no Python on the path of many rows)
DRIVER_ANSWERS = 50_000
_NO_TIME = -(1 << 62)  # before every timestamp (µs)


_SEVERITY = {"bounded": 0, "unknown": 1, "not_shown": 2, "unbounded": 3}


def member_verdicts(report, forest: Forest) -> list[str]:
    """Verdict (``bounded`` | ``unbounded`` | ``not_shown`` | ``unknown``) of each member of the forest.

    ``report``: the :class:`~obda.analysis.AnalysisReport` of the query (a
    SELECT's verdict is the worst of its disjuncts), a list of verdict strings
    (one per SELECT of the query), or None (every member ``unknown``).
    """
    n = max((m.member.origin for m in forest.members), default=-1) + 1
    if report is None:
        return ["unknown"] * len(forest.members)
    if isinstance(report, AnalysisReport):
        per_select = report.select_verdicts(n)
        under = report.select_verdicts(n, constrained=True)
        # a member bounded by the declared k-constraints runs bounded when its synopses drop state by them
        per_select = [u if v != "bounded" and u == "bounded" and any(
            m.constraints for m in forest.members if m.member.origin == i) else v
            for i, (v, u) in enumerate(zip(per_select, under))]
    elif isinstance(report, (list, tuple)) and all(isinstance(v, str) for v in report):
        per_select = [v.lower() for v in report]
    else:
        raise ExecutionError(f"report must be an AnalysisReport or a list of verdicts, not {type(report).__name__}")
    if len(per_select) < n:
        raise ExecutionError(f"the analysis report has {len(per_select)} member verdict(s) but the SQL has {n} member(s)")
    return [per_select[m.member.origin] for m in forest.members]


def analyse(sql, sources: Sources):
    """The bounded-memory report of ``sql`` (``obda.analysis``), or None when the analyser rejects it."""
    from obda.errors import ObdaError

    try:
        return analyze(sql, sources)
    except ObdaError as e:
        log.warning("bounded-memory analysis failed: %s", e)
        return None


def _fingerprint(plan: Forest, extra: str = "") -> str:
    h = hashlib.sha256()
    h.update(extra.encode())
    h.update(repr(plan.distinct).encode())
    if plan.constraints:  # a declared bound, kind or key changed: the watches' state means something else
        h.update(repr(sorted(map(repr, plan.constraints))).encode())
    for m in plan.members:
        h.update(m.member.sql.encode())
        for a, t in m.member.aliases:
            h.update(f"{a}:{t.name}:{t.location}".encode())
    return h.hexdigest()


class ContinuousQuery:
    """A continuous query over the stream and static tables of a sources catalog.

    See :mod:`obda.execution` for the guarantees.  As Spark's ``DataStreamWriter``: constructing a query
    plans it and does no I/O; :meth:`open` (called by :meth:`step` and :meth:`start` if not before) loads
    the static tables and restores the checkpoint, and Spark starts on first use.  Typical use::

        q = ContinuousQuery(sql, sources, report, base_dir="demo", sink=JsonLinesSink("out.jsonl"),
                            checkpoint_dir="ckpt")
        q.run_until_exhausted()        # or q.start(); ...; q.stop()
        print(q.metrics.to_dict())
    """

    def __init__(
        self,
        sql,
        sources: Sources,
        report=None,
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
        dialect: str = "spark",
        clock: Callable[[], float] = time.monotonic,
    ):
        if backend not in ("spark", "local"):
            raise ExecutionError(f"unknown backend {backend!r} (spark or local)")
        self.sources = sources
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
        self.aggregate = None  # obda.execution.aggregate.Aggregator of an aggregate query
        # ORDER BY of a query over static data only (its answers are emitted once, as one table)
        self.order_by = sql.query.order_by if isinstance(sql, Compilation) and sql.aggregation is None else ()
        plan = _aggregate_plan(sql, sources, dialect)
        if plan is not None:
            self.aggregate = self._start_aggregate(plan, allow_unbounded)
            sql, report = plan.characteristic, None  # the executor runs Q' and aggregates its answers
        if report is None:  # not given: analyse here (a query the analyser rejects runs only with the opt-in)
            report = analyse(sql, sources)
        if isinstance(report, AnalysisReport) and report.forest is not None:
            forest = report.forest  # the analysis's forest: the one plan, run as it is
        elif isinstance(report, AnalysisReport) and report.forest_error is not None:
            raise report.forest_error
        else:  # no report (or verdicts only): the analysis still plans
            forest = build_forest(sql, sources, dialect)
        self.plan: Forest = forest
        self.report = report
        self.verdicts = member_verdicts(report, self.plan)
        risky = [i for i, v in enumerate(self.verdicts) if v != "bounded" and not self.plan.members[i].unsatisfiable]
        if risky and not allow_unbounded:
            detail = ", ".join(f"member {self.plan.members[i].member.origin}: {self.verdicts[i]}" for i in risky)
            if self.aggregate is not None:
                raise ExecutionError(
                    f"the aggregate query is bounded, but the executor runs it as its characteristic query "
                    f"{sql!r} (Arasu Theorem 8.4), which is not shown bounded ({detail}); partial aggregates "
                    "below the join (Theorem 8.6) are not implemented yet. Run it anyway with "
                    "allow_unbounded=True."
                )
            raise ExecutionError(
                f"the query is not shown to run in bounded memory ({detail}); its state may grow with the "
                "stream. Run it anyway with allow_unbounded=True (CLI: --allow-unbounded)."
            )
        self.streams = [t.name for t in self.plan.stream_tables()]
        self._static_quarantine: list[dict] = []
        self.engine = QueryEngine(self.plan, {})  # the static tables' rows: open() loads them
        watch = ConstraintWatch(self.plan) if self.plan.constraints else None
        self.runtime = Runtime(self.engine, self.streams, idle_timeout, clock, self.plan.views, watch)
        self.runtime.metrics.unbounded_members = risky
        self.processed: dict[str, set[str]] = {s: set() for s in self.streams}
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
        self._spill_root: str | None = None  # folder of the closing jobs' spilled rows (made on first use)
        self.shared = shared  # obda.execution.shared.SharedScan: run in that loop when started
        self._shared_key = f"q{id(self):x}"
        self.error: BaseException | None = None
        self._opened = False  # open(): static tables loaded, checkpoint restored

    def open(self) -> "ContinuousQuery":
        """Load the static tables and restore the checkpoint (the constructor does no I/O). Called by
        :meth:`step`, :meth:`start` and :meth:`run_until_exhausted` when not called before; call it
        first to have its errors (a missing static table, another query's checkpoint) before running."""
        with self._lock:
            if not self._opened:
                self.engine.set_statics(self._load_statics())
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
        if self.aggregate is not None:
            self.aggregate.add(answers)
        else:
            self.sink.write_lines(answer_lines(answers, self.plan.columns))

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
        return self.aggregate.plan.columns if self.aggregate is not None else self.plan.columns

    def answer(self) -> list[dict]:
        """An aggregate query's answer at the last closed timestamp: one row per group (HAVING kept),
        in ORDER BY order. The changelog replayed gives the same rows."""
        if self.aggregate is None:
            raise ExecutionError("answer() is the answer table of an aggregate query; this query's answers are "
                                 "its output stream")
        with self._lock:
            return self.aggregate.answer()

    def _fingerprint(self) -> str:
        p = self.aggregate.plan if self.aggregate is not None else None
        extra = "" if p is None else repr((p.items, p.calls, p.having, p.group_by, p.window))
        return _fingerprint(self.plan, extra)

    def _tables_by_name(self):
        return {t.name: t for t in self.plan.stream_tables()}

    def _pipelines_of(self, table_name: str):
        return [p for p in self.plan.pipelines if p.table.name == table_name]

    def _load_statics(self) -> dict[int, dict]:
        out: dict[int, dict] = {}
        by_table: dict[str, list] = {}
        for p in self.plan.static_pipelines():
            by_table.setdefault(p.table.name, []).append(p)
        for name, pipes in by_table.items():
            table = pipes[0].table
            fmt = table_format(table)
            if self.backend == "spark":
                from obda.execution.spark_io import spark_table_batch

                paths = [] if fmt == "jdbc" else list_files(resolve_location(table, self.base_dir))
                if not paths and fmt != "jdbc":
                    raise ExecutionError(f"static table {name!r}: no data files at {resolve_location(table, self.base_dir)}")
                b = spark_table_batch(self.spark, table, pipes, paths, None, fmt)
                counted: dict[int, dict] = {}
                for per in b.groups.values():
                    for pid, rows in per.items():
                        dst = counted.setdefault(pid, {})
                        for k, c in rows.items():
                            dst[k] = dst.get(k, 0) + c
                quarantine = b.quarantine
            else:
                rows = []
                for f in list_files(resolve_location(table, self.base_dir)):
                    rows.extend(read_file_rows(f, table_format(table, f), dict(table.options)))
                counted, quarantine = static_rows(table, pipes, rows)
            if quarantine:
                log.warning("static table %s: %d invalid row(s) quarantined", name, len(quarantine))
                self._static_quarantine.extend(quarantine)
            out.update(counted)
        return view_rows.statics(self.plan.views, out)

    # -- checkpoint -------------------------------------------------------------------------------
    def _ckpt_file(self) -> Path | None:
        return self.checkpoint_dir / "state.pkl" if self.checkpoint_dir else None

    def _restore(self) -> None:
        path = self._ckpt_file()
        if path is None or not path.exists():
            if self._static_quarantine:  # a restarted query wrote them on its first run
                self.quarantine.write(self._static_quarantine)
            return
        st = checkpoint.load(path)
        if st.get("version") != CHECKPOINT_VERSION or st.get("fingerprint") != self._fingerprint():
            raise ExecutionError(
                f"checkpoint {self.checkpoint_dir} belongs to a different query or version; "
                "use a fresh checkpoint directory"
            )
        self.runtime.restore(st["runtime"])
        self.processed = {s: set(st["processed"].get(s, ())) for s in self.streams}
        self.open_files = {s: dict(st["open_files"].get(s, {})) for s in self.streams}
        self.batch_id = st["batch_id"]
        self.finished = st.get("finished", False)
        if self.aggregate is not None:
            self.aggregate.restore(st["aggregate"])
        self.sink.recover(st["sink_offset"])
        self.quarantine.recover(st["quarantine_offset"])

    def _checkpoint(self, sink_offset, quarantine_offset) -> int:
        st = {
            "version": CHECKPOINT_VERSION,
            "fingerprint": self._fingerprint(),
            "aggregate": self.aggregate.state() if self.aggregate is not None else None,
            "runtime": self.runtime.state(),
            "processed": self.processed,
            "open_files": self.open_files,
            "batch_id": self.batch_id,
            "finished": self.finished,
            "sink_offset": sink_offset,
            "quarantine_offset": quarantine_offset,
        }
        return checkpoint.dump(st, self._ckpt_file())

    # -- micro-batches --------------------------------------------------------------------------
    def _pending(self) -> dict[str, list[str]]:
        """Per stream table all its unprocessed files (name order), one listing."""
        tables = self._tables_by_name()
        return {
            name: [f for f in list_files(resolve_location(tables[name], self.base_dir)) if f not in self.processed[name]]
            for name in self.streams
        }

    def _cut(self, pending: dict[str, list[str]]) -> dict[str, list[str]]:
        """The next micro-batch of ``pending`` (:func:`cut_files` with this query's limits)."""
        return cut_files(pending, self.max_files_per_batch, self.max_bytes_per_batch)

    def requests(self, files: dict[str, list[str]]):
        from obda.execution.spark_io import ReadRequest

        tables = self._tables_by_name()
        requests = []
        for name, fs in files.items():
            table, pipes = tables[name], tuple(self._pipelines_of(name))
            by_fmt: dict[str, list[str]] = {}
            for f in fs:
                by_fmt.setdefault(table_format(table, f), []).append(f)
            requests.extend(ReadRequest(table, pipes, tuple(ps), fmt) for fmt, ps in by_fmt.items())
        return requests

    def _read_local(self, new: dict[str, list[str]], closed_upto: int | None) -> list[TableBatch]:
        """Local backend: one aggregated batch per stream table with new files."""
        tables = self._tables_by_name()
        out = []
        probes = self.aggregate.probes() if self.aggregate is not None else []  # an aggregate's data timestamps
        for name, files in new.items():
            table, pipes = tables[name], self._pipelines_of(name) + probes
            parts = [
                process_rows(table, pipes, read_file_rows(f, table_format(table, f), dict(table.options)), closed_upto, f)
                for f in files
            ]
            out.append(_merge_batches(name, parts))
        if probes:
            self.aggregate.observe(out)
        return out

    def step(self, exhausted: bool = False, pending: dict[str, list[str]] | None = None) -> int:
        """Run one micro-batch: read new files, close timestamps, emit, checkpoint.

        With ``exhausted=True``, the timestamps still open when no file is left after this
        micro-batch close too (end of input).  ``pending``: the files to take the micro-batch
        from (default: every unprocessed file listed now).  Returns the number of new files read.
        """
        self.open()
        with self._lock:
            t0 = time.perf_counter()
            if self.backend == "spark":
                try:
                    new, quarantine = self._step_spark(exhausted, pending)
                except Exception as e:
                    raise _spark_failure(e, self.batch_id + 1) from e
            else:
                new, quarantine = self._step_local(exhausted, pending)
            return self.commit_batch(new, quarantine, t0)

    def commit_batch(self, new: dict[str, list[str]], quarantine: list[dict], t0: float) -> int:
        """End a micro-batch: quarantine, consumed files, sink flush, checkpoint, sink commit, metrics."""
        if quarantine:
            self.quarantine.write(quarantine)
        for name, files in new.items():
            self.processed[name].update(files)
        self.batch_id += 1
        m = self.runtime.metrics
        m.batches += 1
        if self.aggregate is not None:  # the changelog of the groups the micro-batch changed
            from obda.execution.aggregate import changelog_lines

            records = self.aggregate.finish_batch(self.runtime.closed_upto, static=not self.streams)
            self.sink.write_lines(changelog_lines(records, self.columns))
            m.rows_out = self.aggregate.lines  # the changelog's lines, not the characteristic query's answers
        self.runtime.first_closed = None
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
        return sum(len(f) for f in new.values())

    def static_only(self) -> None:
        if not self.streams and not self.engine.static_done:
            answers = self.engine.static_only()
            if self.order_by:
                from obda.execution.aggregate import sorted_by

                at = {c: i for i, c in enumerate(self.plan.columns)}
                answers = sorted_by(answers, self.order_by, lambda a, name: a.values[at[name]])
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

    # -- the Spark backend, in phases (a query alone, or one reader of a shared scan) -------------
    def _step_spark(self, exhausted: bool, pending: dict[str, list[str]] | None = None):
        """The Spark backend: one micro-batch of this query alone, a group of one
        (:func:`obda.execution.microbatch.spark_batch` says how it is computed).

        The last micro-batch of an input that ends (``exhausted`` and every file taken) closes
        every timestamp it reads: for a query with one stream pipeline it runs uncached
        (:meth:`_single_pass`).
        """
        from obda.execution.microbatch import Member, spark_batch

        new, carried, final = self._next_files(exhausted, pending)
        reads = self._reads(new, carried, (self.ns,))
        nbytes = _file_bytes(new)
        if final:
            with Scan(self.spark, reads, {self.ns: self.pipelines_by_table()}, self._parsed, nbytes,
                      single_pass=True) as scan:
                batch = self._single_pass(scan, reads, new) if scan.projected is not None else None
            if batch is not None:
                return new, batch.quarantine
        member = Member("", self, new, final)
        spark_batch(self.spark, [member], reads, self._parsed, nbytes, _reraise)
        return new, member.batch.quarantine

    def _single_pass(self, scan: Scan, reads, new: dict[str, list[str]]) -> "Batch | None":
        """The last micro-batch in one job: the range ``(lo, ∞)`` closes, the stats are observed by
        the job that computes the answers, nothing is cached.

        Only for a query with one stream pipeline: the job reads the rows once (with several,
        each would read every file, as the observed rows cannot be filtered before the
        observation), and its one synopsis node is a root, which keeps no past: no updates to
        collect beside the answers.  None (nothing run, nothing observed) when the answers are a
        bag for a sink that gets them through the driver from one partition (streamed, and Spark
        reports observed metrics to no streamed read; a micro-batch large enough to spill them,
        :meth:`spill_dir`, has them written by the job, which reports them), or when answers of static-only members are still to emit
        at the first timestamp (known after the job).  Decided before the observation is made:
        Spark keeps an observation until a job reports it."""
        from obda.execution.distributed import collect_tagged
        from obda.execution.scan import observed_stats

        engine = self.engine
        if sum(1 for p in self.plan.pipelines if p.table.is_stream) != 1 or self.runtime.constraints is not None:
            return None  # (k-constraints: their check is a job of its own, before the answers')
        if not engine.static_done and any(
            not m.plan.unsatisfiable and not m.plan.nodes and m.plan.forest_statics for m in engine.members
        ):
            return None
        nbytes = _file_bytes(new)
        if (self.aggregate is None and not self.plan.distinct and not self.sink.writes_frames
                and nbytes < self.spill_bytes):
            return None
        projected, stats = observed_stats(scan.projected, len(reads), {self.ns: self.reader()})
        lo = self.runtime.closed_upto
        closing = self.closing(projected, Batch(lo=lo, final=True), open_ended=True, new_bytes=nbytes)
        if closing.parts and closing.frame is not None:
            raise AssertionError("one stream pipeline: one root node, no synopsis updates beside the answers")
        if closing.parts:  # distinct answers, an aggregate's partials, or a large batch's answers (spilled)
            for tag, at, vals in collect_tagged(closing.parts, stream=False, spill_dir=self.spill_dir(closing, nbytes),
                                                    observed=True):
                closing.consume(tag, at, vals)
        elif closing.frame is not None:
            closing.emitted += self.write_frame(closing.frame)
            closing.frame = None
        else:  # no member can answer: the job counts the rows only
            projected.count()
        batch = self.apply_stats(reads, stats(), new, True)
        closing.batch = batch
        closing.closes = batch.hi is not None and (lo is None or batch.hi > lo)
        closing.finish()
        return batch

    def set_namespace(self, ns: str) -> None:
        """The query's namespace in the columns of a shared scan (:class:`~obda.execution.shared.SharedScan`)."""
        self._ns = ns
        self._distributed = None  # its Spark plan names its columns after its namespace

    @property
    def ns(self) -> str:
        """The query's namespace in the columns of a scan (empty when it reads alone)."""
        return getattr(self, "_ns", "")

    def reader(self) -> tuple[int | None, tuple[int, ...]]:
        return self.runtime.closed_upto, tuple(p.id for p in self.plan.pipelines if p.table.is_stream)

    def pipelines_by_table(self) -> dict[str, tuple]:
        return {name: tuple(self._pipelines_of(name)) for name in self.streams}

    def _next_files(self, exhausted: bool, pending: dict[str, list[str]] | None = None):
        """This micro-batch's new files, the files read again for their open rows, and whether the input ends."""
        pending = self._pending() if pending is None else pending
        new = self._cut(pending)
        last = all(len(new.get(s, ())) == len(pending.get(s, ())) for s in self.streams)
        carried = {s: sorted(fs) for s, fs in self.open_files.items() if fs}
        return new, carried, exhausted and last

    def _reads(self, new: dict[str, list[str]], carried: dict[str, list[str]], readers: tuple[str, ...]):
        """The scan reads of ``new`` files (read by ``readers``) and of this query's ``carried`` ones."""
        from obda.execution.scan import ScanRead

        reads = [ScanRead(r.table, r.fmt, r.paths, readers, True) for r in self.requests(new)]
        reads += [ScanRead(r.table, r.fmt, r.paths, (self.ns,), False) for r in self.requests(carried)]
        return reads

    def apply_stats(self, reads, stats, new: dict[str, list[str]], final: bool) -> "Batch":
        """Counts, late/invalid rows, the marker: ``(lo, hi]`` and the files still holding open rows."""
        from obda.execution.spark_io import _owner, _quarantine_rows, _read

        lo = self.runtime.closed_upto
        batch = Batch(lo=lo, final=final)
        tables = {s: TableBatch(s, files=tuple(new.get(s, ()))) for s in new}
        owner: dict[str, str] = {}  # a listed file under the names Spark may report it by
        for r in reads:
            for p in r.paths:
                owner[os.path.abspath(p)] = owner[os.path.realpath(p)] = p
        for g, reported, rows, invalid, per in stats:
            read = reads[g]
            if self.ns not in read.readers:
                continue
            valid, late, max_ts, min_ts = per[self.ns]
            if min_ts is not None:
                batch.first_ts = min_ts if batch.first_ts is None else min(batch.first_ts, min_ts)
            if not read.fresh:
                continue
            b = tables[read.table.name]
            b.rows += rows
            b.valid += valid
            b.late += late
            b.invalid += invalid
            if max_ts is not None:
                b.max_ts = max_ts if b.max_ts is None else max(b.max_ts, max_ts)
                if reported:
                    batch.file_max.setdefault(read.table.name, {})[_owner(reported, owner)] = max_ts
        bad = {name for name, b in tables.items() if b.late or b.invalid}
        for r in reads:
            if r.fresh and r.table.name in bad:
                batch.quarantine.extend(_quarantine_rows(_read(self.spark, r.table, list(r.paths), r.fmt), r.table, lo))
        self.runtime.ingest(list(tables.values()))
        batch.hi = self.runtime.watermark(exhausted=final)
        return batch

    def closing(self, projected, batch: "Batch", open_ended: bool = False, new_bytes: int = 0) -> "Closing":
        """The work of closing ``(lo, hi]``: the frames to collect in the micro-batch's one job, and what
        to do with what comes back (``consume``), then ``finish`` (synopses, answers, the marker).

        ``open_ended``: the range is ``(lo, ∞)`` (the last micro-batch, whose ``hi`` its own job
        tells); updates are collected for every node kept after ``lo`` (``absorb`` drops those
        the real ``hi`` does not keep).  ``new_bytes``: of the micro-batch's new files (a large one's
        answers are written by Spark into a sink that writes with Spark).
        """
        from pyspark.sql import functions as F

        from obda.execution.answers import AT, value_column
        from obda.execution.distributed import SparkForest

        closing = Closing(self, batch)
        lo, hi = batch.lo, batch.hi
        if not open_ended:
            if hi is None or (lo is not None and hi <= lo):
                return closing
            closing.closes = True
            if projected is None or batch.first_ts is None or batch.first_ts > hi:
                if projected is not None and self.aggregate is not None:  # no row kept: a window's rows may leave
                    self._aggregate_data(projected, batch, closing, new_panes=False)
                return closing
            projected = self._check_constraints(projected, batch)
        elif projected is None or not any(flag_column(p.id, self.ns) in projected.columns
                                          for p in self.plan.pipelines if p.table.is_stream):
            return closing  # the micro-batch reads nothing this query uses
        if self._distributed is None:
            self._distributed = SparkForest(self.spark, self.plan, self.engine, self.ns)
        keep_upto = (lo if lo is not None else _NO_TIME) if open_ended else hi
        answers, updates = self._distributed.evaluate(projected, lo, None if open_ended else hi, keep_upto)
        values = [value_column(i) for i in range(len(self.plan.columns))]
        for mi, per_node in updates.items():
            for nid, df in per_node.items():
                closing.parts.append(df)
                closing.slots.append((mi, nid))
        self._keyed_parts(projected, batch, closing)
        if answers is not None and self.aggregate is not None:  # partial aggregates, not the answers
            for kind, df in self.aggregate.partial_frames(answers):
                closing.partials[len(closing.parts)] = kind
                closing.parts.append(df)
            self._aggregate_data(projected, batch, closing)
            return closing
        if self.aggregate is not None and open_ended:  # no answer yet: a window's rows may still leave
            self._aggregate_data(projected, batch, closing, new_panes=False)
            return closing
        # answers that go through the driver travel in the same job as the synopsis updates; for a sink that
        # writes with Spark too while they are few (the last micro-batch's count): Spark's write is a job
        if answers is not None and (self.plan.distinct or not self.sink.writes_frames
                                    or (self.last_answers < self.driver_answers and new_bytes < self.spill_bytes)):
            if self.plan.distinct:  # each distinct answer at its first timestamp
                answers = answers.groupBy(*values).agg(F.min(AT).alias(AT))
            closing.parts.append(answers.select(AT, *values))
            closing.answers_collected = True
        elif answers is not None:
            closing.frame = answers
        return closing

    def _aggregate_data(self, projected, batch: "Batch", closing: "Closing", new_panes: bool = True) -> None:
        """An aggregate's part of the collect job: the data timestamps its changelog lines fall on
        (:meth:`~obda.execution.aggregate.Aggregator.data_frame`), if it needs any."""
        flags = [flag_column(p.id, self.ns) for p in self.plan.pipelines if p.table.is_stream]
        df = self.aggregate.data_frame(projected, batch.lo, batch.hi, flags, new_panes)
        if df is not None:
            closing.partials[len(closing.parts)] = "data"
            closing.parts.append(df)

    def _check_constraints(self, projected, batch: "Batch"):
        """The Spark backend's k-constraint check of the closing range ``(lo, hi]``, before its answers.

        One job brings the rows the monitors read (the constrained streams on the constraints' columns),
        counted per timestamp and key and sorted by timestamp; the driver checks them one closed timestamp
        at a time with the same :class:`~obda.execution.constraints.ConstraintWatch` as the local backend
        (what it holds at once: one timestamp's keys, and the keys that violate).  The rows of a violating
        key are then taken out of every pipeline of their stream, by a join with those keys, so
        the range's answers and synopsis updates are the local backend's (tests/execution/
        test_constraints_exec.py runs both)."""
        rt = self.runtime
        watch = rt.constraints
        if watch is None:
            return projected
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from obda.execution.answers import AT
        from obda.execution.distributed import TS, collect_tagged

        ns, hi = self.ns, batch.hi
        ts = F.col(TS)
        closes = in_range(batch)
        width = {p.id: len(p.attrs) for p in self.plan.pipelines}
        keys = {pid: [key_column(pid, j, ns) for j in range(width[pid])] for _, _, pid in watch.monitors}
        pids = [pid for _, _, pid in watch.monitors]
        parts = [projected.where(closes & F.coalesce(F.col(flag_column(pid, ns)), F.lit(False)))
                 .groupBy(ts.alias(AT), *keys[pid]).count() for pid in pids]
        bad: dict[tuple[str, str], set] = {}
        at_ts, groups = None, {}
        for tag, at, vals in [*collect_tagged(parts, by_time=True), (None, None, None)]:
            if at != at_ts and at_ts is not None:  # one closed timestamp, checked
                for slot, ks in rt.check_constraints(at_ts, groups).items():
                    bad.setdefault(slot, set()).update((at_ts,) + k for k in ks)
                groups = {}
            if tag is not None:
                at_ts = at
                groups.setdefault(pids[tag], {})[vals[:-1]] = vals[-1]
        batch.quarantine.extend(rt.take_quarantine())
        self.engine.set_marks(watch.watermarks(hi))  # for the synopses' expiry at hi (OA)
        monitor = {(name, table): pid for name, table, pid in watch.monitors}
        for i, ((name, table), rows) in enumerate(bad.items()):
            pid = monitor[(name, table)]
            fields = [projected.schema[TS]] + [projected.schema[k] for k in keys[pid]]
            names = [f"__b{i}_{j}" for j in range(len(fields))]
            frame = local_frame(self.spark, sorted(rows, key=repr), T.StructType(
                [T.StructField(n, f.dataType, True) for n, f in zip(names, fields)])).withColumn(f"__b{i}", F.lit(True))
            cond = ts == F.col(names[0])
            for k, n in zip(keys[pid], names[1:]):
                cond = cond & F.col(k).eqNullSafe(F.col(n))
            masked = {flag_column(p, ns) for p, _ in watch.removal.get((name, table), ())}
            joined = projected.join(frame, cond, "left")
            projected = joined.select(*[(F.col(c) & F.col(f"__b{i}").isNull()).alias(c) if c in masked else F.col(c)
                                        for c in projected.columns])
        return projected

    def spill_dir(self, closing: "Closing", nbytes: int) -> str | None:
        """Where the closing job writes its rows for the driver to merge (:func:`~obda.execution.distributed.
        collect_tagged`), or None to stream them from one partition: spilled when answers go through the
        driver and the micro-batch's new files reach ``spill_bytes`` (a large batch's answers in one
        partition would have to fit in the driver JVM's heap)."""
        if not closing.answers_collected or nbytes < self.spill_bytes:
            return None
        if self._spill_root is None:
            import tempfile

            root = self.checkpoint_dir / "spill" if self.checkpoint_dir else None
            if root is not None:  # what a run killed mid-batch left there (one query per checkpoint)
                import shutil

                shutil.rmtree(root, ignore_errors=True)
                root.mkdir(parents=True, exist_ok=True)
            self._spill_root = tempfile.mkdtemp(prefix="obda-spill-", dir=root)
        return self._spill_root

    def _keyed_parts(self, projected, batch: "Batch", closing: "Closing") -> None:
        """Many-one joins (``Node.consumed``): the key values the range's keyed rows bring, per node that
        they consume, collected in the closing job (the local backend reads them off each timestamp's rows)."""
        from pyspark.sql import functions as F

        from obda.execution.answers import AT
        from obda.execution.distributed import TS

        closes = in_range(batch)
        for mi, me in enumerate(self.engine.members):
            for nid, specs in me.consumers.items():
                for t, idx, pos, name in specs:
                    if not me.marks.get(name):  # the key is not (or no longer) used
                        continue
                    pid = me.plan.pipelines[t].id
                    flag = F.coalesce(F.col(flag_column(pid, self.ns)), F.lit(False))
                    closing.keyed[len(closing.parts)] = (mi, nid, pos, name)
                    closing.parts.append(projected.where(closes & flag).select(
                        F.col(TS).alias(AT), *[key_column(pid, j, self.ns) for j in idx]).distinct())

    def emit_static_first(self, first_ts: int | None) -> None:
        """Answers of members over static tables only: once, at the first closed timestamp with rows."""
        engine = self.engine
        if engine.static_done:
            return
        from obda.execution.engine import Answer

        engine.static_done = True
        static: list[Answer] = []
        for me in engine.members:
            engine._collect(me.plan, me.static_answers(), first_ts, static)
        if static:
            self.emit(static)
            self.runtime.metrics.rows_out += sum(a.count for a in static)

    def write_frame(self, answers) -> int:
        """Hand the range's answers (a DataFrame) to a sink that writes with Spark; returns how many it wrote."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from obda.execution.answers import AnswerFrame

        obs = Observation("obda_answers")  # the write job counts them
        written = self.sink.write_frame(AnswerFrame(answers.observe(obs, F.count(F.lit(1)).alias("n")), self.plan.columns))
        if isinstance(written, int):
            return written
        return int(obs.get.get("n", 0))

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
        if self._distributed is not None:
            self._distributed.release()
            self._distributed = None
        if self._spill_root is not None:
            import shutil

            shutil.rmtree(self._spill_root, ignore_errors=True)
            self._spill_root = None
        self.sink.close()
        self.quarantine.close()

    def describe(self) -> dict:
        """The executed plan: per member its verdict and the synopsis of every unit."""
        d = self.plan.describe()
        for m, v in zip(d["members"], self.verdicts):
            m["verdict"] = v
        return d


def _reraise(member, e: BaseException) -> None:
    """A lone query's micro-batch fails as a whole (:func:`~obda.execution.microbatch.spark_batch`)."""
    raise e


def _spark_failure(e: Exception, batch: int) -> Exception:
    """A failure of Spark (a job, the JVM) during micro-batch ``batch`` as an :class:`ExecutionError` a user
    can act on; any other exception unchanged."""
    if not type(e).__module__.startswith(("pyspark", "py4j")):
        return e
    from obda.execution.spark_io import first_line

    return ExecutionError(f"micro-batch {batch} failed in Spark ({first_line(e)}); nothing of it was committed: "
                          "with --checkpoint a new run resumes it. If the JVM ran out of memory, give it more "
                          "(--conf spark.driver.memory=4g) or read less per micro-batch (--max-bytes-per-batch)")


def cut_files(pending: dict[str, list[str]], max_files: int | None, max_bytes: int) -> dict[str, list[str]]:
    """The next micro-batch of ``pending`` (per stream, name order): per stream at most ``max_files``
    files and together at most ``max_bytes`` bytes — but at least one file of every stream that has
    one, so that every micro-batch makes progress and the marker can move.  Files are taken in
    rounds, one per stream, so that the streams advance together."""
    budget = max_bytes
    out: dict[str, list[str]] = {}
    queues = {name: list(fs[:max_files] if max_files is not None else fs) for name, fs in pending.items() if fs}
    for name, fs in queues.items():
        out[name] = [fs.pop(0)]
        budget -= _file_bytes({name: out[name]})
    while budget > 0 and any(queues.values()):
        for name, fs in queues.items():
            if not fs or budget <= 0:
                continue
            size = _file_bytes({name: fs[:1]})
            if size > budget:
                fs.clear()
                continue
            out[name].append(fs.pop(0))
            budget -= size
    return out


def _aggregate_plan(sql, sources: Sources, dialect: str):
    """The :class:`~obda.analysis.aggregates.AggregatePlan` of an aggregate query (SQL text, or the
    Compilation of a SPARQL one), else None."""
    from obda.analysis.aggregates import aggregate_plan, is_aggregate

    if isinstance(sql, Compilation):
        return aggregate_plan(sql, sources) if sql.aggregation is not None else None
    if not isinstance(sql, str):
        return None
    from obda.analysis.normal_form import parse_sql
    from obda.errors import ObdaError

    try:
        node = parse_sql(sql, dialect=dialect)
    except ObdaError:  # reported by the planner, as for any query
        return None
    return aggregate_plan(sql, sources, dialect=dialect) if is_aggregate(node) else None


def _file_bytes(files: dict[str, list[str]]) -> int:
    """Bytes of the files of a micro-batch (a file gone meanwhile counts 0: its read reports it)."""
    total = 0
    for fs in files.values():
        for f in fs:
            try:
                total += os.path.getsize(f)
            except OSError:
                pass
    return total


def _merge_batches(name: str, parts: list[TableBatch]) -> TableBatch:
    if len(parts) == 1 and parts[0].table == name:
        return parts[0]
    b = TableBatch(name)
    for p in parts:
        b.rows += p.rows
        b.valid += p.valid
        b.late += p.late
        b.invalid += p.invalid
        b.quarantine.extend(p.quarantine)
        b.files += p.files
        if p.max_ts is not None:
            b.max_ts = p.max_ts if b.max_ts is None else max(b.max_ts, p.max_ts)
        for ts, per in p.groups.items():
            slot = b.groups.setdefault(ts, {})
            for pid, rows in per.items():
                dst = slot.setdefault(pid, {})
                for k, c in rows.items():
                    dst[k] = dst.get(k, 0) + c
    return b
