"""``ContinuousQuery``: run unfolded SQL continuously over the sources (see the package docstring)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable


from obda.errors import ExecutionError
from obda.execution import checkpoint
from obda.execution.engine import QueryEngine
from obda.analysis import AnalysisReport, Forest, analyze, build_forest
from obda.execution import views as view_rows
from obda.execution.rows import process_rows, read_file_rows, static_rows
from obda.execution.runtime import Metrics, Runtime, TableBatch
from obda.execution.sinks import MemorySink, QuarantineSink, Sink, answer_lines
from obda.execution.spark_io import list_files, resolve_location, table_format
from obda.model.sources import Sources

log = logging.getLogger("obda.execution")

CHECKPOINT_VERSION = 1


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


def _fingerprint(plan: Forest) -> str:
    h = hashlib.sha256()
    h.update(repr(plan.distinct).encode())
    for m in plan.members:
        h.update(m.member.sql.encode())
        for a, t in m.member.aliases:
            h.update(f"{a}:{t.name}:{t.location}".encode())
    return h.hexdigest()


class ContinuousQuery:
    """A continuous query over the stream and static tables of a sources catalog.

    See :mod:`obda.execution` for the guarantees.  Typical use::

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
        backend: str = "spark",
        max_files_per_batch: int | None = None,
        trigger_interval: float = 1.0,
        prefetch: int = 32,
        prefetch_bytes: int = 128 << 20,
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
        self.trigger_interval = trigger_interval
        self._spark = spark
        if spark is not None:  # a session the caller gave: the executor's settings too
            from obda.execution.spark_io import configure_session

            configure_session(spark)
        self._master = master
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
            raise ExecutionError(
                f"the query is not shown to run in bounded memory ({detail}); its state may grow with the "
                "stream. Run it anyway with allow_unbounded=True (CLI: --allow-unbounded)."
            )
        self.streams = [t.name for t in self.plan.stream_tables()]
        self._static_quarantine: list[dict] = []
        self.engine = QueryEngine(self.plan, self._load_statics())
        self.runtime = Runtime(self.engine, self.streams, idle_timeout, clock, self.plan.views)
        self.runtime.metrics.unbounded_members = risky
        self.processed: dict[str, set[str]] = {s: set() for s in self.streams}
        self.batch_id = 0
        self.finished = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.prefetch = int(prefetch)
        self.prefetch_bytes = int(prefetch_bytes)
        # next micro-batches: files, job result (future), bytes of the files
        self._ahead: list[tuple[dict[str, list[str]], object, int]] = []
        self._pool = None
        self._parsed: dict = {}  # projection columns of the micro-batch job, parsed once (spark_io.collect_batch)
        self.error: BaseException | None = None
        self._restore()

    # -- resources ------------------------------------------------------------------------------
    @property
    def spark(self):
        if self._spark is None:
            from obda.execution.spark_io import get_spark

            self._spark = get_spark(self._master)
        return self._spark

    @property
    def metrics(self) -> Metrics:
        return self.runtime.metrics

    @property
    def columns(self) -> tuple[str, ...]:
        return self.plan.columns

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
        if st.get("version") != CHECKPOINT_VERSION or st.get("fingerprint") != _fingerprint(self.plan):
            raise ExecutionError(
                f"checkpoint {self.checkpoint_dir} belongs to a different query or version; "
                "use a fresh checkpoint directory"
            )
        self.runtime.restore(st["runtime"])
        self.processed = {s: set(st["processed"].get(s, ())) for s in self.streams}
        self.batch_id = st["batch_id"]
        self.finished = st.get("finished", False)
        self.sink.recover(st["sink_offset"])
        self.quarantine.recover(st["quarantine_offset"])

    def _checkpoint(self, sink_offset, quarantine_offset) -> int:
        st = {
            "version": CHECKPOINT_VERSION,
            "fingerprint": _fingerprint(self.plan),
            "runtime": self.runtime.state(),
            "processed": self.processed,
            "batch_id": self.batch_id,
            "finished": self.finished,
            "sink_offset": sink_offset,
            "quarantine_offset": quarantine_offset,
        }
        return checkpoint.dump(st, self._ckpt_file())

    # -- micro-batches --------------------------------------------------------------------------
    def _pending(self, exclude: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Per stream table all its unprocessed files (name order), one listing.

        ``exclude``: files already taken by micro-batches in progress.
        """
        tables = self._tables_by_name()
        out: dict[str, list[str]] = {}
        for name in self.streams:
            taken = set(exclude.get(name, ())) if exclude else set()
            out[name] = [
                f
                for f in list_files(resolve_location(tables[name], self.base_dir))
                if f not in self.processed[name] and f not in taken
            ]
        return out

    def _cut(self, pending: dict[str, list[str]]) -> dict[str, list[str]]:
        """The next micro-batch of ``pending``: per stream at most ``max_files_per_batch`` files."""
        k = self.max_files_per_batch
        return {name: fs[:k] if k is not None else list(fs) for name, fs in pending.items() if fs}

    def _new_files(self) -> dict[str, list[str]]:
        """Per stream table its unprocessed files (name order, at most ``max_files_per_batch``)."""
        return self._cut(self._pending())

    def _requests(self, new: dict[str, list[str]]):
        from obda.execution.spark_io import ReadRequest

        tables = self._tables_by_name()
        requests = []
        for name, files in new.items():
            table, pipes = tables[name], tuple(self._pipelines_of(name))
            by_fmt: dict[str, list[str]] = {}
            for f in files:
                by_fmt.setdefault(table_format(table, f), []).append(f)
            requests.extend(ReadRequest(table, pipes, tuple(fs), fmt) for fmt, fs in by_fmt.items())
        return requests

    def _collect(self, group: list[dict[str, list[str]]]):
        """The one Spark job of one or more micro-batches (independent of the marker, so it may run ahead)."""
        from obda.execution.spark_io import collect_batches

        return collect_batches(self.spark, [self._requests(new) for new in group], self._parsed)

    def _following(
        self, before: list[dict[str, list[str]]], n: int, budget: int, take_first: bool
    ) -> list[tuple[dict[str, list[str]], int]]:
        """Up to ``n`` micro-batches after the micro-batches ``before`` (their files): files and bytes.

        ``budget``: bytes of files the micro-batches may have together; with ``take_first`` the
        first one is taken even when it alone exceeds the budget (a job must make progress).
        The stream locations are listed once for all of them.
        """
        taken: dict[str, list[str]] = {}
        for files in before:
            for name, fs in files.items():
                taken.setdefault(name, []).extend(fs)
        pending = self._pending(taken)
        group: list[tuple[dict[str, list[str]], int]] = []
        while len(group) < n:
            files = self._cut(pending)
            if not files:
                break
            size = _file_bytes(files)
            if (group or not take_first) and size > budget:
                break
            budget -= size
            group.append((files, size))
            pending = {name: fs[len(files.get(name, ())):] for name, fs in pending.items()}
        return group

    def _take_batch(self) -> tuple[dict[str, list[str]], object]:
        """The files of this micro-batch and, on Spark, their collected job result.

        When files are waiting, one Spark job reads this micro-batch and up to ``prefetch``
        following ones, as many as fit with it in ``prefetch_bytes`` of files
        (:func:`~obda.execution.spark_io.collect_batches`: one job instead of one each saves the
        per-job cost).  The following micro-batches' results are kept, and the next job starts
        in a helper thread (:meth:`_read_ahead`), so that Spark plans, reads and aggregates while
        the driver updates synopses, writes answers and checkpoints.  A job
        result is only a cache: files count as processed when the micro-batch that read them is
        checkpointed, so a crash loses nothing and repeats nothing.
        """
        if self.backend != "spark":
            return self._new_files(), None
        if self._ahead:
            new, result, _ = self._ahead.pop(0)
            collected = result.result()
        else:
            new = self._new_files()
            if not new:
                return new, None
            following = self._following([new], self.prefetch, self.prefetch_bytes - _file_bytes(new), False)
            results = self._collect([new] + [files for files, _ in following])
            collected = results[0]
            self._ahead = [(files, _done(r), size) for (files, size), r in zip(following, results[1:])]
        if new:
            self._read_ahead(new)
        return new, collected

    def _read_ahead(self, current: dict[str, list[str]]) -> None:
        """Start the job of the next micro-batches in a helper thread, while the driver works.

        It starts when no job runs ahead and the micro-batches already read ahead have at most
        ``prefetch_bytes`` of files, so their groups and the new job's take the memory of at most
        twice that.  At most ``prefetch`` micro-batches are read ahead of the current one, and
        one job reads at most ``prefetch_bytes`` of files (or one micro-batch, when that alone is
        larger).
        """
        if self.prefetch <= len(self._ahead) or any(not r.done() for _, r, _ in self._ahead):
            return
        if sum(size for _, _, size in self._ahead) > self.prefetch_bytes:
            return
        group = self._following(
            [current] + [files for files, _, _ in self._ahead], self.prefetch - len(self._ahead), self.prefetch_bytes, True
        )
        if not group:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="obda-read-ahead")
        job = self._pool.submit(self._collect, [files for files, _ in group])
        self._ahead.extend((files, _Part(job, i), size) for i, (files, size) in enumerate(group))

    def _drop_ahead(self) -> None:
        """Forget the jobs started ahead (waits for them: no Spark job outlives its query)."""
        ahead, self._ahead = self._ahead, []
        for _, result, _ in ahead:
            result.cancel()
            try:
                result.result()
            except BaseException:  # its files were not processed; they are read again
                pass
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _read_all(self, new: dict[str, list[str]], closed_upto: int | None, collected) -> list[TableBatch]:
        """One aggregated batch per stream table with new files.

        Spark: ``collected`` is the micro-batch's one job result (:meth:`_take_batch`); local: None.
        """
        tables = self._tables_by_name()
        if self.backend == "spark":
            from obda.execution.spark_io import decode_batch

            if not new:
                return []
            parts = decode_batch(self.spark, collected, closed_upto)
            return [
                _merge_batches(name, [b for r, b in zip(collected.requests, parts) if r.table.name == name])
                for name in new
            ]
        out = []
        for name, files in new.items():
            table, pipes = tables[name], self._pipelines_of(name)
            parts = [
                process_rows(table, pipes, read_file_rows(f, table_format(table, f), dict(table.options)), closed_upto, f)
                for f in files
            ]
            out.append(_merge_batches(name, parts))
        return out

    def step(self, exhausted: bool = False) -> int:
        """Run one micro-batch: read new files, close timestamps, emit, checkpoint.

        With ``exhausted=True`` and no new files, every buffered timestamp closes
        (end of input).  Returns the number of files read.
        """
        with self._lock:
            t0 = time.perf_counter()
            new, collected = self._take_batch()
            batches = self._read_all(new, self.runtime.closed_upto, collected)
            self.runtime.ingest(batches)
            answers = self.runtime.close(exhausted=exhausted and not new)
            if exhausted and not new:
                self.finished = True
            if not self.streams and not self.engine.static_done:
                answers = self.engine.static_only()
                self.runtime.metrics.rows_out += sum(a.count for a in answers)
            self.sink.write_lines(answer_lines(answers, self.plan.columns))
            q = [r for b in batches for r in b.quarantine]
            if q:
                self.quarantine.write(q)
            for name, files in new.items():
                self.processed[name].update(files)
            self.batch_id += 1
            m = self.runtime.metrics
            m.batches += 1
            sink_offset = self.sink.flush()
            q_offset = self.quarantine.flush()
            self.runtime.update_state_metrics()
            nbytes = self._checkpoint(sink_offset, q_offset)
            m.state_bytes = nbytes
            m.last_batch_seconds = time.perf_counter() - t0
            m.total_batch_seconds += m.last_batch_seconds
            if m.unbounded_members and m.batches % 10 == 0:
                log.info("unbounded query state: %s", m.state_growth())
            return sum(len(f) for f in new.values())

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
        """Run in a background thread, polling for new files every ``trigger_interval`` seconds."""
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            self._drop_ahead()
        self.sink.flush() if hasattr(self.sink, "flush") else None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        self.stop()
        self.sink.close()
        self.quarantine.close()

    def describe(self) -> dict:
        """The executed plan: per member its verdict and the synopsis of every unit."""
        d = self.plan.describe()
        for m, v in zip(d["members"], self.verdicts):
            m["verdict"] = v
        return d


def _done(value):
    """A finished future holding ``value`` (a micro-batch read by the current job)."""
    f = Future()
    f.set_result(value)
    return f


class _Part:
    """Micro-batch ``index`` of a read-ahead job that reads several micro-batches."""

    def __init__(self, job: Future, index: int):
        self.job, self.index = job, index

    def done(self) -> bool:
        return self.job.done()

    def result(self):
        return self.job.result()[self.index]

    def cancel(self) -> bool:
        return self.job.cancel()


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
