"""The Spark side of a :class:`~obda.execution.query.ContinuousQuery`: its micro-batch as a group of one.

:class:`SparkSteps` is mixed into ``ContinuousQuery``.  It holds what a query contributes to a
micro-batch computed by :func:`obda.execution.microbatch.spark_batch` (alone, or as one reader of
the service's shared scan): which files it reads (new ones, and those still holding rows of its open
timestamps), its marker from the stats (:meth:`~SparkSteps.apply_stats`), and its part of the one
job (:meth:`~SparkSteps.closing`: synopsis updates, answers, aggregate partials, keyed values, the
k-constraint check).  The lifecycle (open, step, start, checkpoint) stays in ``query.py``.
"""

from __future__ import annotations

import os

from obda.errors import ExecutionError
from obda.execution.microbatch import Batch, Closing, in_range
from obda.execution.rows import TableBatch
from obda.execution.scan import flag_column, key_column, partitions
from obda.execution.spark_io import local_frame

# a micro-batch with at least this many bytes of new files brings its answers to the driver through
# Parquet part files merged in order, not one partition (collect_tagged's spill_dir)
DEFAULT_SPILL_BYTES = 16 << 20
# a sink that writes with Spark (a directory) gets a micro-batch's answers through the driver, in the
# micro-batch's one job, while the previous micro-batch closed fewer answers than this; else Spark's
# writer writes them (a job of its own, but no Python on the path of many rows)
DRIVER_ANSWERS = 50_000
_NO_TIME = -(1 << 62)  # before every timestamp (µs)


class SparkSteps:
    """The Spark backend's part of :class:`~obda.execution.query.ContinuousQuery` (a mixin: the attributes
    it reads are the query's own, set by its constructor)."""

    # -- the Spark backend, in phases (a query alone, or one reader of a shared scan) -------------
    def _step_spark(self, exhausted: bool, pending: dict[str, list[str]] | None = None):
        """The Spark backend: one micro-batch of this query alone, a group of one
        (:func:`obda.execution.microbatch.spark_batch` says how it is computed).

        """
        from obda.execution.microbatch import Member, spark_batch

        new, carried, final = self._next_files(exhausted, pending)
        reads = self._reads(new, carried, (self.ns,))
        nbytes = file_bytes(new)
        member = Member("", self, new, final)
        spark_batch(self.spark, [member], reads, self._parsed, nbytes, _reraise)
        return new, member.batch.quarantine

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
        return new, self.carried(), exhausted and last

    def carried(self) -> dict[str, list[str]]:
        """The files read earlier that still hold rows of open timestamps, read again by this micro-batch (the
        Spark backend keeps no rows between micro-batches).  One of them gone would silently lose its rows'
        answers: the query fails instead, located, and resumes from its checkpoint once it is back."""
        import os

        from obda.errors import ExecutionError, Location

        carried = {s: sorted(fs) for s, fs in self.open_files.items() if fs}
        from obda.execution.kafka_fetch import is_segment  # (a Kafka offset range is read again from the topic)

        gone = [f for fs in carried.values() for f in fs if not is_segment(f) and not os.path.exists(f)]
        if gone:
            raise ExecutionError(
                f"{len(gone)} file(s) read earlier still hold rows of timestamps not closed yet and are gone (first: "
                f"{gone[0]}); restore them, then start the query again (it resumes from its last checkpoint)",
                Location(file=gone[0]))
        return carried

    def _reads(self, new: dict[str, list[str]], carried: dict[str, list[str]], readers: tuple[str, ...]):
        """The scan reads of ``new`` files (read by ``readers``) and of this query's ``carried`` ones."""
        from obda.execution.scan import ScanRead

        reads = [ScanRead(r.table, r.fmt, r.paths, readers, True) for r in self.requests(new)]
        reads += [ScanRead(r.table, r.fmt, r.paths, (self.ns,), False) for r in self.requests(carried)]
        return reads

    def apply_stats(self, reads, stats, new: dict[str, list[str]], final: bool) -> "Batch":
        """Counts, late/invalid rows, the marker: ``(lo, hi]`` and the files still holding open rows."""
        from obda.execution.scan import key_violations
        from obda.execution.spark_io import _owner, _read, listed_names
        from obda.execution.spark_reader import _quarantine_rows, whole_file_rejects

        lo = self.runtime.closed_upto
        batch = Batch(lo=lo, final=final)
        tables = {s: TableBatch(s, files=tuple(new.get(s, ()))) for s in new}
        owner = listed_names(p for r in reads for p in r.paths)
        for g, reported, rows, invalid, per in stats:
            read = reads[g]
            if self.ns not in read.readers:
                continue
            valid, late, max_ts, min_ts, dups, first = per[self.ns]
            if min_ts is not None:
                batch.first_ts = min_ts if batch.first_ts is None else min(batch.first_ts, min_ts)
            if not read.fresh:
                continue
            b = tables[read.table.name]
            b.rows += rows
            b.valid += valid - dups  # a repeated key is invalid (dedupe_keys)
            b.late += late
            b.invalid += invalid + dups
            b.key_violations += dups
            if first is not None:
                b.min_ts = first if b.min_ts is None else min(b.min_ts, first)
            if max_ts is not None:
                b.max_ts = max_ts if b.max_ts is None else max(b.max_ts, max_ts)
                if reported:
                    batch.file_max.setdefault(read.table.name, {})[_owner(reported, owner)] = max_ts
        bad = {name for name, b in tables.items() if b.late or b.invalid > b.key_violations}
        for name, b in tables.items():  # the rows that repeated a declared key (dedupe_keys), with their place
            if b.key_violations:
                mine = [r for r in reads if self.ns in r.readers and r.table.name == name]
                batch.quarantine.extend(key_violations(self.spark, mine, lo))
        for r in reads:
            if r.fresh and r.table.name in bad:
                batch.quarantine.extend(_quarantine_rows(_read(self.spark, r.table, list(r.paths), r.fmt), r.table, lo,
                                                         r.fmt, r.paths))
            if r.fresh and self.ns in r.readers:  # files refused whole (their header): not read, one invalid row each
                rejects = whole_file_rejects(r.table, r.fmt, r.paths)
                b = tables[r.table.name]
                b.rows, b.invalid = b.rows + len(rejects), b.invalid + len(rejects)
                batch.quarantine.extend(rejects)
        self.runtime.ingest(list(tables.values()))
        for name in tables:  # a Kafka stream's marker is per partition (its segments' largest timestamps)
            self.runtime.observe_files(name, batch.file_max.get(name, {}))
        batch.hi = self.runtime.watermark(exhausted=final)
        return batch

    def closing(self, projected, batch: "Batch", open_ended: bool = False, new_bytes: int = 0,
                sole_job: bool = False) -> "Closing":
        """The work of closing ``(lo, hi]``: the frames to collect in the micro-batch's one job, and what
        to do with what comes back (``consume``), then ``finish`` (synopses, answers, the marker).

        ``open_ended``: the range is ``(lo, ∞)`` (the last micro-batch, whose ``hi`` its own job
        tells); updates are collected for every node kept after ``lo`` (``absorb`` drops those
        the real ``hi`` does not keep).  ``new_bytes``: of the micro-batch's new files (a large one's
        answers are written by Spark into a sink that writes with Spark).  ``sole_job``: the answers' job is the
        micro-batch's only one (:func:`~obda.execution.microbatch._single_pass`), so a sink that writes with Spark
        writes them in it, however few.
        """
        from pyspark.sql import functions as F

        from obda.execution.answers import AT, value_column
        from obda.execution.distributed import SparkForest

        closing = Closing(self, batch)
        closing.partitions = partitions(self.spark, new_bytes)
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
        for text, df in self._distributed.window_frames.items():  # a check's answers the driver keeps (A3, A4)
            closing.windows[len(closing.parts)] = text
            closing.parts.append(df)
        if self.engine.waiting.wait:  # answers waiting for their check's window (A4), and when to decide them
            for mi, df in self._distributed.waiting_frames.items():
                closing.waiting[len(closing.parts)] = mi
                closing.parts.append(df)
            closing.data_part = len(closing.parts)
            closing.parts.append(self._data_times(projected, lo, None if open_ended else hi))
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
        # writes with Spark too while they are few (the last micro-batch's count): Spark's write is a job, unless
        # it is the micro-batch's only one
        few = not sole_job and self.last_answers < self.driver_answers and new_bytes < self.spill_bytes
        if answers is not None and (self.plan.distinct or not self.sink.writes_frames or self.engine.waiting.wait
                                    or few):
            if self.plan.distinct:  # each distinct answer at its first timestamp
                answers = answers.groupBy(*values).agg(F.min(AT).alias(AT))
            closing.parts.append(answers.select(AT, *values))
            closing.answers_collected = True
        elif answers is not None:
            closing.frame = answers
        return closing

    def _data_times(self, projected, lo: int | None, hi: int | None):
        """The timestamps of ``(lo, hi]`` at which the query reads a row (one of its stream pipelines keeps it): the
        local backend's closed timestamps, at which a waiting answer is decided (rule A4)."""
        from functools import reduce

        from pyspark.sql import functions as F

        from obda.execution.answers import AT
        from obda.execution.distributed import TS

        flags = [flag_column(p.id, self.ns) for p in self.plan.pipelines if p.table.is_stream]
        ts = F.col(TS)
        mine = ts.isNotNull() & reduce(lambda a, b: a | b, [F.coalesce(F.col(f), F.lit(False)) for f in flags
                                                            if f in projected.columns] or [F.lit(False)])
        if lo is not None:
            mine = mine & (ts > F.lit(lo))
        if hi is not None:
            mine = mine & (ts <= F.lit(hi))
        return projected.where(mine).select(ts.alias(AT)).distinct()

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
        from obda.execution.collect import collect_tagged
        from obda.execution.distributed import TS

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
        """Answers of members over static tables only: once, at the first closed timestamp."""
        static = self.engine.emit_static(first_ts)
        if static:
            self.emit(static)
            self.runtime.metrics.rows_out += sum(a.count for a in static)

    def write_frame(self, answers, partitions: int | None = None, lo: int | None = None, hi: int | None = None,
                    reads: list = ()) -> int:
        """Hand the range's answers (a DataFrame) to a sink that writes with Spark, partitioned by time into
        ``partitions`` (:meth:`~obda.execution.answers.AnswerFrame.in_time_order`); returns how many it wrote.
        ``(lo, hi]``: the range the answers are in, cut into the partitions' slices of time (``hi`` None: not known
        before the write — estimated from ``reads``, a backlog's files, by their first and last rows
        (:func:`~obda.execution.time_buckets.csv_time_span`), else from the last range's length; no ``lo``: Spark
        samples the bounds, in a job of its own)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from obda.execution.answers import AnswerFrame
        from obda.execution.time_buckets import csv_time_span

        if hi is None and reads and partitions and partitions > 1:
            est = csv_time_span(reads)
            if est is not None:
                lo, hi = (est[0] - 1 if lo is None else max(lo, est[0] - 1)), est[1]
        span = None
        if lo is not None and hi is not None and hi > lo:
            span, self.last_span = (lo, hi), hi - lo
        elif lo is not None and self.last_span:
            span = (lo, lo + self.last_span)
        obs = Observation("obda_answers")  # the write job counts them
        written = self.sink.write_frame(AnswerFrame(answers.observe(obs, F.count(F.lit(1)).alias("n")), self.plan.columns,
                                                   partitions, frozenset(self.engine.typed), span))
        if isinstance(written, int):
            return written
        return int(obs.get.get("n", 0))


def _reraise(member, e: BaseException) -> None:
    """A lone query's micro-batch fails as a whole (:func:`~obda.execution.microbatch.spark_batch`)."""
    raise e


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
        budget -= file_bytes({name: out[name]})
    while budget > 0 and any(queues.values()):
        for name, fs in queues.items():
            if not fs or budget <= 0:
                continue
            size = file_bytes({name: fs[:1]})
            if size > budget:
                fs.clear()
                continue
            out[name].append(fs.pop(0))
            budget -= size
    return out


def file_bytes(files: dict[str, list[str]]) -> int:
    """Bytes of the files of a micro-batch (a file gone meanwhile counts 0: its read reports it)."""
    total = 0
    for fs in files.values():
        for f in fs:
            try:
                total += os.path.getsize(f)
            except OSError:
                from obda.execution.kafka_offsets import segment_bytes  # a Kafka offset range: its payloads

                total += segment_bytes(f)
    return total


def spark_failure(e: Exception, batch: int) -> Exception:
    """A failure of Spark (a job, the JVM) during micro-batch ``batch`` as an :class:`ExecutionError` a user
    can act on; any other exception unchanged."""
    if not type(e).__module__.startswith(("pyspark", "py4j")):
        return e
    from obda.execution.spark_io import first_line

    return ExecutionError(f"micro-batch {batch} failed in Spark ({first_line(e)}); nothing of it was committed: "
                          "with --checkpoint a new run resumes it. If the JVM ran out of memory, give it more "
                          "(--conf spark.driver.memory=4g) or read less per micro-batch (--max-bytes-per-batch)")
