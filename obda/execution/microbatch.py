"""How a micro-batch is computed on Spark: one pass, for one query or a group of queries over the same streams.

A lone query (:meth:`ContinuousQuery.step <obda.execution.query.ContinuousQuery.step>`) is a group
of one; the service's shared loop (:class:`~obda.execution.shared.SharedScan`) hands every query
running over the same streams in one group.  :func:`spark_batch` is the whole micro-batch:

1. **Read.**  The micro-batch's files — the new ones, and the files that still hold rows of a
   query's open timestamps — become one projected DataFrame (:class:`~obda.execution.scan.Scan`),
   cached lazily: the stages of the one job below share its partitions, each parsed once.
2. **Plan every timestamp.**  Each query plans its answers, synopsis updates and aggregate partials
   for every timestamp after its last closed one, ``(lo, ∞)``, each row tagged with its timestamp
   (:meth:`SparkSteps.closing <obda.execution.spark_query.SparkSteps.closing>`,
   :mod:`obda.execution.distributed`).
3. **One job.**  Those parts and the per-file stats (counts, late and invalid rows, timestamps: the
   marker's input, :func:`~obda.execution.scan.stats_frame`) are collected by **one** Spark job
   (:func:`obda.execution.collect.collect_tagged`), the stats first.
4. **Close.**  From the stats each query's marker moves (``apply_stats``): ``(lo, hi]`` closes.  The
   driver keeps the rows of the job tagged at or before ``hi`` (answers emitted in timestamp order,
   updates merged into the synopses) and drops the rest; the timestamps after ``hi`` are answered
   by a later micro-batch, from the files that still hold their rows.
5. **Write.**  A sink that writes with Spark (a directory) writes the answers of ``(lo, hi]`` — a
   second job, over the cached rows.  The caller then commits (quarantine, sink, checkpoint).

The last micro-batch of a lone query with one stream pipeline runs uncached, its stats observed by
the job that computes its answers (:func:`_single_pass`).  A query with declared k-constraints runs in
two phases instead: its check of a closed timestamp's
keys must come before the answers that the violating keys would change (the stats job first, then
the check and the closing; docs/cluster.md).  Jobs per micro-batch are counted in
tests/execution/test_exec_jobs.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from obda.execution import collect
from obda.execution.scan import Scan, ScanRead, key_repeats, stats_frame, stats_of

if TYPE_CHECKING:
    from obda.execution.query import ContinuousQuery


@dataclass
class Member:
    """One query of a micro-batch: its new files, whether its input ends, and what the batch decided."""

    key: str
    query: "ContinuousQuery"
    new: dict[str, list[str]]
    final: bool
    batch: "Batch | None" = None  # the range that closed, the quarantine
    closing: "Closing | None" = None
    error: BaseException | None = None


def spark_batch(spark, members: list[Member], reads: list[ScanRead], cache: dict, new_bytes: int,
                fail: Callable[[Member, BaseException], None]) -> None:
    """Compute one micro-batch of ``members`` over ``reads`` (module docstring).  A member whose planning or
    closing raises is handed to ``fail`` (which may re-raise) and takes no further part."""
    if len(members) == 1 and members[0].final and _single_pass(spark, members[0], reads, cache, new_bytes):
        return
    keyed = any(r.paths and r.table.key for r in reads)
    if keyed and all(m.query.runtime.constraints is None for m in members):
        # optimistic: declared keys rarely repeat, so the job counts repeats instead of ordering every row
        # by key; a micro-batch where one does is computed again with the keys checked row by row
        if _one_pass(spark, members, reads, cache, new_bytes, fail, dedupe=False):
            return
    _one_pass(spark, members, reads, cache, new_bytes, fail, dedupe=True)


class _KeyRepeats(Exception):
    """The optimistic job found a declared key repeated after a reader's closed timestamp."""


def _one_pass(spark, members, reads, cache, new_bytes, fail, dedupe: bool) -> bool:
    """The micro-batch's read, plan, job and close; without ``dedupe``, returns False — before any member's
    marker, synopses or sink changed — where the job finds a declared key repeated (:func:`scan.key_repeats`)."""
    pipelines = {m.query.ns: m.query.pipelines_by_table() for m in members}
    readers = {m.query.ns: m.query.reader() for m in members}
    with Scan(spark, reads, pipelines, cache, new_bytes, dedupe=dedupe) as scan:
        projected = scan.projected
        if projected is None or any(m.query.runtime.constraints is not None for m in members):
            stats = scan.stats(readers)
            for m in members:
                _guard(m, fail, lambda m=m: _closed(m, reads, stats, projected, new_bytes))
            _collect(members, [], new_bytes, None)
        else:
            for m in members:
                _guard(m, fail, lambda m=m: _open(m, projected, new_bytes))
            head = [stats_frame(projected, readers)]
            repeats = None if dedupe else key_repeats(projected)
            if repeats is not None:
                head.append(repeats)
            oldest = min((lo for lo, _ in readers.values()), default=None, key=lambda lo: -1 if lo is None else lo)

            def close(rows):
                if len(rows) > 1 and any(ts is None or oldest is None or ts > oldest for (ts,) in rows[1]):
                    raise _KeyRepeats
                stats = stats_of(rows[0], readers)
                for m in members:
                    _guard(m, fail, lambda m=m: _range(m, reads, stats))

            try:
                _collect(members, head, new_bytes, close)
            except _KeyRepeats:
                for m in members:
                    m.closing = None
                    m.query.runtime.metrics.key_rechecks += 1
                return False
        for m in members:
            _guard(m, fail, lambda m=m: m.closing.finish())
    return True


def _single_pass(spark, m: Member, reads: list[ScanRead], cache: dict, new_bytes: int) -> bool:
    """The last micro-batch of a lone query in one uncached job: the range ``(lo, ∞)`` closes, and the stats
    are observed by the job that computes the answers.  Returns whether it ran (``m.batch`` set).

    Only for a query with one stream pipeline: the job reads the rows once (with several, each would
    read every file, as the observed rows cannot be filtered before the observation), and its one
    synopsis node is a root, which keeps no past: no updates to collect beside the answers.  Not
    run when the answers are a bag for a sink that gets them through the driver from one partition
    (streamed, and Spark reports observed metrics to no streamed read; a micro-batch large enough to
    spill them has them written by the job, which reports them), nor while answers of static-only
    members are still to emit at the first timestamp (known after the job).  Decided before the
    observation is made: Spark keeps an observation until a job reports it."""
    from obda.execution.scan import observed_stats

    q = m.query
    if sum(1 for p in q.plan.pipelines if p.table.is_stream) != 1 or q.runtime.constraints is not None:
        return False  # (k-constraints: their check is a job of its own, before the answers')
    if not q.engine.static_done and any(
        not me.plan.unsatisfiable and not me.plan.nodes for me in q.engine.members  # over statics or constants
    ):
        return False
    if q.aggregate is None and not q.plan.distinct and not q.sink.writes_frames and new_bytes < q.spill_bytes:
        return False
    with Scan(spark, reads, {q.ns: q.pipelines_by_table()}, cache, new_bytes, single_pass=True) as scan:
        if scan.projected is None:
            return False
        projected, stats = observed_stats(scan.projected, len(reads), {q.ns: q.reader()})
        lo = q.runtime.closed_upto
        closing = q.closing(projected, Batch(lo=lo, final=True), open_ended=True, new_bytes=new_bytes, sole_job=True)
        if closing.parts and closing.frame is not None:
            raise AssertionError("one stream pipeline: one root node, no synopsis updates beside the answers")
        if closing.parts:  # distinct answers, an aggregate's partials, or a large batch's answers (spilled)
            for tag, at, vals in collect.collect_tagged(closing.parts, observed=True,
                                                        spill_dir=q.spill_dir(closing, new_bytes),
                                                        ordered=closing.answers_collected):
                closing.consume(tag, at, vals)
        elif closing.frame is not None:  # the range's end is known after the job only: the reads' files say
            closing.emitted += q.write_frame(closing.frame, closing.partitions, lo, reads=reads)
            closing.frame = None
        else:  # no member can answer: the job counts the rows only
            projected.count()
        m.batch = closing.batch = q.apply_stats(reads, stats(), m.new, True)
        closing.closes = m.batch.hi is not None and (lo is None or m.batch.hi > lo)
        closing.finish()
    return True


def _closed(m: Member, reads, stats, projected, new_bytes: int) -> None:
    """Two phases: the range from the stats, then the closing planned for it."""
    m.batch = m.query.apply_stats(reads, stats, m.new, m.final)
    m.closing = m.query.closing(projected, m.batch, new_bytes=new_bytes)


def _open(m: Member, projected, new_bytes: int) -> None:
    """One pass: the closing planned for ``(lo, ∞)``, its range set once the stats are in."""
    m.closing = m.query.closing(projected, Batch(lo=m.query.runtime.closed_upto, final=m.final), open_ended=True,
                                new_bytes=new_bytes)


def _range(m: Member, reads, stats) -> None:
    m.batch = m.query.apply_stats(reads, stats, m.new, m.final)
    m.closing.set_range(m.batch)


def _guard(m: Member, fail, fn) -> None:
    if m.error is not None:
        return
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - that query fails alone (``fail`` decides)
        m.error = e
        fail(m, e)


def _collect(members: list[Member], head: list, new_bytes: int, on_head) -> None:
    """One job: ``head`` (their rows, one list per head part, handed to ``on_head`` before any other row) and
    every member's parts, each row to its member's closing."""
    parts, owners = list(head), []
    for i, m in enumerate(members):
        if m.error is None:
            for t, df in enumerate(m.closing.parts):
                parts.append(df)
                owners.append((i, t))
    spill = next((d for m in members if m.error is None
                  for d in [m.query.spill_dir(m.closing, new_bytes)] if d is not None), None)
    got: list[list[tuple]] = [[] for _ in head]
    pending = on_head is not None
    ordered = any(m.closing.answers_collected for m in members if m.error is None)  # answers: in their order
    rows = collect.collect_tagged(parts, spill_dir=spill, ordered=ordered)
    try:
        for tag, at, vals in rows:
            if tag < len(head):
                got[tag].append(vals)
                continue
            if pending:
                on_head(got)
                pending = False
            i, local = owners[tag - len(head)]
            if members[i].error is None:
                members[i].closing.consume(local, at, vals)
        if pending:
            on_head(got)
    finally:
        rows.close()  # an abandoned job's iterator released now, not when garbage collected


@dataclass
class Batch:
    """What a micro-batch's stats decided for one query: the range ``(lo, hi]`` and its bookkeeping."""

    lo: int | None
    final: bool
    hi: int | None = None
    first_ts: int | None = None  # earliest timestamp after lo that some pipeline keeps
    file_max: dict[str, dict[str, int]] = field(default_factory=dict)  # stream -> file -> largest timestamp
    quarantine: list[dict] = field(default_factory=list)


def in_range(batch: "Batch"):
    """The Spark condition of a row of the range ``(lo, hi]`` that a micro-batch closes (``hi`` None: open)."""
    from pyspark.sql import functions as F

    from obda.execution.distributed import TS

    ts = F.col(TS)
    cond = ts.isNotNull() & ((ts > F.lit(batch.lo)) if batch.lo is not None else F.lit(True))
    return cond & (ts <= F.lit(batch.hi)) if batch.hi is not None else cond


class Closing:
    """Closing one query's range: the parts of the collect job, their consumer, the end of the batch."""

    def __init__(self, query: "ContinuousQuery", batch: Batch):
        self.query, self.batch = query, batch
        self.parts: list = []  # DataFrames to collect: synopsis updates, then (maybe) answers
        self.slots: list[tuple[int, int]] = []  # (member, node) of each update part
        self.frame = None  # answers written by the sink with Spark
        self.partitions: int | None = None  # range-partitioned into (the micro-batch's scan's partitions)
        self.partials: dict[int, object] = {}  # part index -> kind, for an aggregate query
        self.keyed: dict[int, tuple] = {}  # part index -> (member, node, key positions, key): keyed rows' values
        self.windows: dict[int, str] = {}  # part index -> a check query in a window of time (rules A3, A4)
        self.window_rows: dict[str, list] = {}  # its (timestamp, key) answers of the range
        # rule A4: part index -> member whose answers wait for their check's window; the part of the timestamps at
        # which the query reads a row (where waiting answers are decided); those collected, per timestamp
        self.waiting: dict[int, int] = {}
        self.data_part: int | None = None
        self._data: dict[int, list] = {}  # timestamp -> the answers that start waiting there
        self._times: list[int] | None = None  # those timestamps in order, once all are in; the next one to step
        self._next = 0
        self._rows_at: dict[int, dict[str, list]] = {}  # timestamp -> check query -> its answers there
        self.consumed: dict[int, dict[int, dict]] = {}  # member -> node -> (positions, key) -> values
        self.closes = False
        self.deltas: dict[int, dict[int, dict]] = {}
        self.pending: list = []
        self.emitted = 0
        self.answers_collected = False  # the last part holds answers that go through the driver
        self.filtering = False  # parts planned open-ended: only rows tagged in the range that closed count

    def set_range(self, batch: Batch) -> None:
        """The range a micro-batch planned open-ended closes, known from its stats once its job ran: of
        the job's rows, the ones tagged in ``(lo, hi]`` are consumed, the others dropped."""
        self.batch, self.filtering = batch, True
        self.closes = batch.hi is not None and (batch.lo is None or batch.hi > batch.lo)

    def consume(self, tag: int, at, vals: tuple) -> None:
        """One collected row of part ``tag``: an update of a node's synopsis, or an answer."""
        q = self.query
        if self.filtering and (not self.closes or at is None or at > self.batch.hi):
            return
        if tag < len(self.slots):
            mi, nid = self.slots[tag]
            d = self.deltas.setdefault(mi, {}).setdefault(nid, {})
            if q.engine.members[mi].setsem:
                d[vals] = 1
            else:
                d[vals[:-1]] = d.get(vals[:-1], 0) + vals[-1]
            return
        if tag in self.partials:
            q.aggregate.add_partial(self.partials[tag], at, vals)
            return
        if tag in self.windows:
            self.window_rows.setdefault(self.windows[tag], []).append((at, vals))
            return
        if tag == self.data_part:
            self._data.setdefault(at, [])
            return
        if tag in self.waiting:
            self._data.setdefault(at, []).append((self.waiting[tag], vals[:-1], vals[-1]))
            return
        if tag in self.keyed:
            mi, nid, pos, name = self.keyed[tag]
            self.consumed.setdefault(mi, {}).setdefault(nid, {}).setdefault((pos, name), set()).add(vals)
            return
        from obda.execution.query_engine import Answer

        if self._data:  # the waiting answers decided up to this answer's timestamp, first (as the local backend)
            self._decide(at)
        if q.plan.distinct:
            if vals in q.engine.emitted:
                return
            q.engine.emitted.add(vals)
        self.pending.append(Answer(at, vals, 1))
        if len(self.pending) >= 10_000:
            self._flush_answers()

    def _decide(self, upto: int) -> None:
        """Rules A4, A6, at each timestamp of the range up to ``upto`` at which the query read a row, in order: the
        check queries' answers of that timestamp decide the waiting answers they match and join the kept ones, the
        checks whose window ended are decided (:meth:`QueryEngine.close_waiting <obda.execution.query_engine.QueryEngine.
        close_waiting>`), and that timestamp's answers meet the kept ones and start waiting (:meth:`QueryEngine.hold
        <obda.execution.query_engine.QueryEngine.hold>`) — the local backend's steps, so both stamp every answer alike."""
        engine = self.query.engine
        if self._times is None:  # the parts before the answers' are all in
            self._times = sorted(self._data)
            for text, rows in self.window_rows.items():
                for at, key in rows:
                    self._rows_at.setdefault(at, {}).setdefault(text, []).append((at, key))
        while self._next < len(self._times) and self._times[self._next] <= upto:
            ts = self._times[self._next]
            self._next += 1
            for text in engine.windows.times:
                engine.windows.put(text, self._rows_at.get(ts, {}).get(text, []), ts, expire=False)
            engine.close_waiting(ts, self.pending)
            for mi, full, count in self._data[ts]:
                engine.hold(mi, ts, full, count, self.pending)

    def _flush_answers(self) -> None:
        q, b = self.query, self.batch
        first = b.first_ts if b.first_ts is not None and b.first_ts <= b.hi else q.runtime.static_time(b.hi)
        if first is not None:
            q.emit_static_first(first)
        if self.pending:
            q.emit(self.pending)
            self.emitted += len(self.pending)
            self.pending = []

    def finish(self) -> None:
        """Merge the updates, write the answers, move the marker, keep the files with open rows."""
        q, b = self.query, self.batch
        rt = q.runtime
        if self.closes:
            for mi, me in enumerate(q.engine.members):
                consumed = {nid: [(pos, values) for (pos, name), values in per.items() if me.marks.get(name)]
                            for nid, per in self.consumed.get(mi, {}).items()}
                me.absorb(b.hi, self.deltas.get(mi, {}), consumed)
            if self.data_part is not None:  # rule A4: decided one timestamp at a time, up to the range's end
                self._decide(b.hi)
            else:
                for text in q.engine.windows.times:
                    q.engine.windows.put(text, self.window_rows.get(text, []), b.hi)
            if (b.first_ts is not None and b.first_ts <= b.hi) or self.pending or rt.static_time(b.hi) is not None:
                self._flush_answers()  # (static members' answers: at the first closed timestamp, rows or not)
            if self.frame is not None:
                frame = self.frame
                if self.filtering:
                    from pyspark.sql import functions as F

                    from obda.execution.answers import AT

                    frame = frame.where(F.col(AT) <= F.lit(b.hi))
                lo = b.lo if b.lo is not None else b.first_ts - 1 if b.first_ts is not None else None
                self.emitted += q.write_frame(frame, self.partitions, lo, b.hi)
            rt.metrics.rows_out += self.emitted
            q.last_answers = self.emitted
            if rt.first_closed is None:
                rt.first_closed = b.first_ts if b.first_ts is not None and b.first_ts <= b.hi else b.hi
            rt.closed_upto = b.hi
            rt.metrics.closed_upto = b.hi
            rt.metrics.closed_timestamps += 1
        if b.final:
            q.finished = True
        q.static_only()
        closed = rt.closed_upto
        still_open: dict[str, dict[str, int]] = {s: {} for s in q.streams}
        for source in (q.open_files, b.file_max):
            for s, fs in source.items():
                for f, m in fs.items():
                    if closed is None or m > closed:
                        still_open[s][f] = m
        q.open_files = still_open
