"""Application-time ordering: buffering of open timestamps, markers, late rows.

Every micro-batch brings, per stream table, the valid rows already filtered,
projected and **counted per (timestamp, pipeline, key)** (by Spark or by the
local backend), plus per-table counters and the quarantined rows.

* A timestamp ``t`` **closes** (the marker of boundedness.md §1) when every
  active input stream has seen a row with a larger timestamp, when the input
  is exhausted (:meth:`Runtime.finish`), or when the streams that have not
  passed ``t`` have been idle (no new rows) for ``idle_timeout`` seconds.
* Closed timestamps are handed to the engine in increasing order; only the
  open timestamps are buffered (aggregated), so the buffer is bounded by the
  rows of the open timestamps.
* A row whose timestamp is at or before the last closed timestamp is **late**:
  the readers classify it (they receive ``closed_upto``), count it and write it
  to the quarantine sink with the reason; it never reaches the engine.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from obda.execution import views as view_rows
from obda.execution.rows import TableBatch, micros_to_iso
from obda.execution.relations import Counted
from obda.execution.query_engine import Answer, QueryEngine


@dataclass
class Metrics:
    """Counters of one running query (also in the checkpoint)."""

    rows_in: dict[str, int] = field(default_factory=dict)  # valid rows per stream table
    rows_read: dict[str, int] = field(default_factory=dict)  # all rows per stream table
    rows_out: int = 0
    late: int = 0
    invalid: int = 0
    late_by_stream: dict[str, int] = field(default_factory=dict)
    invalid_by_stream: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    closed_timestamps: int = 0
    closed_upto: int | None = None
    state_entries: int = 0  # synopsis entries + emitted set (DISTINCT) + buffered groups
    synopsis_entries: int = 0
    buffered_entries: int = 0
    static_entries: int = 0
    state_bytes: int = 0
    max_state_entries: int = 0
    last_batch_seconds: float = 0.0
    total_batch_seconds: float = 0.0
    state_history: list[tuple[int, int]] = field(default_factory=list)  # (batch, state entries), last 1000
    unbounded_members: list[int] = field(default_factory=list)
    driver_peak_rss_bytes: int = 0  # the driver process's peak resident memory so far
    constraints: dict = field(default_factory=dict)  # k-constraint name -> what its watch observed (obda.execution.constraints)
    constraint_violations: int = 0  # rows quarantined because they broke a used k-constraint
    incomplete_since: str | None = None  # the first timestamp whose answers may miss a quarantined row's
    key_violations: int = 0  # rows quarantined because they repeated a declared key (obda.execution.keys)
    changed_files: int = 0  # read files that changed afterwards (obda.execution.ledger); their change is not read
    remembered_inputs: int = 0  # consumed files and Kafka ranges the query remembers (obda.execution.consumed)
    key_rechecks: int = 0  # Spark micro-batches computed again, row by row, because a declared key repeated
    # input waiting (observe_input): listed files no micro-batch has read yet, per stream; how long the oldest has
    # waited (wall seconds since its modification); how far closing trails the newest row read (application seconds)
    backlog_files: dict[str, int] = field(default_factory=dict)
    backlog_bytes: dict[str, int] = field(default_factory=dict)
    lag_seconds: float = 0.0
    app_lag_seconds: float = 0.0
    # opt-in shedding (obda.execution.shedding): rows and files dropped per stream, recent ranges; None: none
    shed: dict | None = None
    # an ASK over streams that answered true: its answer is final, and the query reads nothing more
    decided: bool = False

    @property
    def avg_batch_seconds(self) -> float:
        return self.total_batch_seconds / self.batches if self.batches else 0.0

    def to_dict(self) -> dict:
        return {
            "rows_in": dict(self.rows_in),
            "rows_read": dict(self.rows_read),
            "rows_out": self.rows_out,
            "late": self.late,
            "invalid": self.invalid,
            "late_by_stream": dict(self.late_by_stream),
            "invalid_by_stream": dict(self.invalid_by_stream),
            "changed_files": self.changed_files,
            "remembered_inputs": self.remembered_inputs,
            "key_violations": self.key_violations,
            "key_rechecks": self.key_rechecks,
            "backlog_files": dict(self.backlog_files),
            "backlog_bytes": dict(self.backlog_bytes),
            "lag_seconds": round(self.lag_seconds, 3),
            "app_lag_seconds": round(self.app_lag_seconds, 6),
            "batches": self.batches,
            "closed_timestamps": self.closed_timestamps,
            "closed_upto": self.closed_upto,
            "state_entries": self.state_entries,
            "synopsis_entries": self.synopsis_entries,
            "buffered_entries": self.buffered_entries,
            "static_entries": self.static_entries,
            "state_bytes": self.state_bytes,
            "max_state_entries": self.max_state_entries,
            "last_batch_seconds": round(self.last_batch_seconds, 6),
            "avg_batch_seconds": round(self.avg_batch_seconds, 6),
            "unbounded_members": list(self.unbounded_members),
            "driver_peak_rss_bytes": self.driver_peak_rss_bytes,
            "state_growth": self.state_growth(),
            **({"constraints": self.constraints, "constraint_violations": self.constraint_violations,
                "incomplete_since": self.incomplete_since} if self.constraints else {}),
            **({"shed": self.shed, "incomplete_since": self.incomplete_since} if self.shed is not None else {}),
            **({"decided": True} if self.decided else {}),
        }

    def observe_input(self, pending: dict[str, list[str]], taken: dict[str, list[str]], now: float | None = None) -> None:
        """The backlog once a micro-batch took ``taken`` of the ``pending`` files (per stream): files, bytes and
        the wall seconds the oldest of them has waited since it was written.  A file gone meanwhile counts 0."""
        now = time.time() if now is None else now
        files, sizes, oldest = {}, {}, None
        for stream, fs in pending.items():
            took = set(taken.get(stream, ()))
            left = [f for f in fs if f not in took]
            files[stream], sizes[stream] = len(left), 0
            for f in left:
                try:
                    st = os.stat(f)
                except OSError:
                    continue
                sizes[stream] += st.st_size
                oldest = st.st_mtime if oldest is None else min(oldest, st.st_mtime)
        self.backlog_files, self.backlog_bytes = files, sizes
        self.lag_seconds = max(0.0, now - oldest) if oldest is not None else 0.0

    def state_growth(self) -> dict | None:
        """Entries at the first and last recorded batch (reported for opted-in unbounded queries)."""
        if not self.state_history:
            return None
        (b0, e0), (b1, e1) = self.state_history[0], self.state_history[-1]
        return {"first_batch": b0, "first_entries": e0, "last_batch": b1, "last_entries": e1}


def peak_rss_bytes() -> int:
    """Peak resident set size of this (the driver's) process, in bytes (Linux: ``ru_maxrss`` is in KiB)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


class Runtime:
    """Buffers open timestamps, decides markers, drives the engine."""

    def __init__(
        self,
        engine: QueryEngine,
        streams: list[str],
        idle_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        views=None,
        constraints=None,
    ):
        self.engine = engine
        self.constraints = constraints  # obda.execution.constraints.ConstraintWatch, or None
        self.quarantined: list[dict] = []  # constraint violations of the closed timestamps, for the quarantine sink
        self.views = views  # obda.analysis.forest.ViewDedupe: view rows are sets per timestamp
        self.streams = list(streams)
        self.idle_timeout = idle_timeout
        self.clock = clock
        self.listed_at: float | None = None  # the clock when the micro-batch's files were listed (listed())
        self.buffer: dict[int, dict[int, Counted]] = {}
        self.max_ts: dict[str, int | None] = {s: None for s in streams}
        # the earliest timestamp of the data read: the answers of the static members are emitted there when no
        # stream row passed the query's filters by the time it closed (static_time)
        self.first_data_ts: int | None = None
        self.closed_upto: int | None = None
        self.first_closed: int | None = None  # the first timestamp the current micro-batch closed
        now = clock()
        self.last_progress: dict[str, float] = {s: now for s in streams}
        self.part_max: dict[str, dict[str, int | None]] = {}  # partitioned stream -> partition -> largest timestamp
        self.part_seen: dict[str, dict[str, float]] = {}  # ... -> when it last brought a row (idle partitions)
        self.partition_of: Callable[[str], str | None] = lambda f: None
        self.metrics = Metrics(rows_in={s: 0 for s in streams}, rows_read={s: 0 for s in streams})

    # -- checkpointed state -------------------------------------------------------------------
    def state(self) -> dict:
        return {
            "buffer": self.buffer,
            "max_ts": self.max_ts,
            "closed_upto": self.closed_upto,
            "engine": self.engine.state(),
            "metrics": self.metrics,
            # what the k-constraint watches observed, as plain data (the declared constraints come from the plan)
            "constraints": self.constraints.state() if self.constraints is not None else None,
            "partitions": self.part_max,
        }

    def restore(self, st: dict) -> None:
        self.buffer = st["buffer"]
        self.max_ts = st["max_ts"]
        self.closed_upto = st["closed_upto"]
        self.engine.restore(st["engine"])
        self.metrics = st["metrics"]
        if st.get("constraints") is not None and self.constraints is not None:
            self.constraints.restore(st["constraints"])  # into the watch of this query's declared constraints
        now = self.clock()
        self.last_progress = {s: now for s in self.streams}
        for s, parts in (st.get("partitions") or {}).items():
            if s in self.part_max:
                self.part_max[s].update(parts)
        self.part_seen = {s: dict.fromkeys(parts, now) for s, parts in self.part_max.items()}

    # -- ingestion ------------------------------------------------------------------------------
    def listed(self) -> None:
        """The micro-batch's files were listed now: its idle decisions are taken as of this time.  (Read when
        the timestamps close instead, a process stopped in between — SIGSTOP, a long GC pause — would take
        the pause for silence of a stream whose file arrived meanwhile, and quarantine that file as late.)"""
        self.listed_at = self.clock()

    def _now(self) -> float:
        return self.listed_at if self.listed_at is not None else self.clock()

    def ingest(self, batches: list[TableBatch]) -> None:
        """Buffer the rows of a micro-batch (nothing closes here)."""
        m = self.metrics
        now = self._now()
        for b in batches:
            m.rows_in[b.table] = m.rows_in.get(b.table, 0) + b.valid
            m.rows_read[b.table] = m.rows_read.get(b.table, 0) + b.rows
            m.late += b.late
            m.invalid += b.invalid
            m.key_violations += b.key_violations
            if b.late:
                m.late_by_stream[b.table] = m.late_by_stream.get(b.table, 0) + b.late
            if b.invalid:
                m.invalid_by_stream[b.table] = m.invalid_by_stream.get(b.table, 0) + b.invalid
            if b.valid:
                self.last_progress[b.table] = now
            if b.max_ts is not None:
                old = self.max_ts.get(b.table)
                self.max_ts[b.table] = b.max_ts if old is None else max(old, b.max_ts)
            if b.min_ts is not None:
                self.first_data_ts = b.min_ts if self.first_data_ts is None else min(self.first_data_ts, b.min_ts)
            branch_of = self.views.branch_of if self.views is not None else {}
            for ts, per_pipe in b.groups.items():
                slot = self.buffer.setdefault(ts, {})
                for pid, rows in per_pipe.items():
                    target = branch_of.get(pid)
                    if target is not None:  # a view branch: the distinct view rows of the timestamp
                        slot.setdefault(target, defaultdict(int)).update(dict.fromkeys(rows, 1))
                        continue
                    dst = slot.setdefault(pid, defaultdict(int))
                    for k, c in rows.items():
                        dst[k] += c

    def watermark(self, exhausted: bool = False) -> int | None:
        """Largest timestamp that is closed now (all timestamps ≤ it are closed)."""
        candidates = []
        now = self._now()
        active = [
            s
            for s in self.streams
            if self.idle_timeout is None or now - self.last_progress.get(s, now) < self.idle_timeout
        ]
        if exhausted or not active:
            seen = [v for v in self.max_ts.values() if v is not None] + list(self.buffer)
            if seen:
                candidates.append(max(seen))
        else:
            progress = [self._progress(s, now) for s in active]
            if all(p is not None for p in progress):
                candidates.append(min(progress) - 1)  # every active stream has passed min-1
        if self.closed_upto is not None:
            candidates.append(self.closed_upto)
        if not candidates:
            return None
        return max(candidates)

    # -- partitioned streams (Kafka): a timestamp closes when every partition has passed it ---------
    def expect_partitions(self, stream: str, partitions: list[str], partition_of: Callable[[str], str | None]) -> None:
        """``stream`` is read by partitions (``partition_of``: an input's partition): its progress is its slowest
        partition's that is not idle (``idle_timeout``), a partition without rows yet holding every timestamp."""
        now = self.clock()
        self.partition_of = partition_of
        have = self.part_max.setdefault(stream, {})
        for p in partitions:
            have.setdefault(p, None)
            self.part_seen.setdefault(stream, {}).setdefault(p, now)

    def observe_files(self, stream: str, file_max: dict[str, int | None]) -> None:
        """The largest valid timestamp (after the closed one) of each input a micro-batch read of ``stream``."""
        parts = self.part_max.get(stream)
        if parts is None:
            return
        now = self._now()
        for f, ts in file_max.items():
            p = self.partition_of(f)
            if p is None or ts is None:
                continue
            parts[p] = ts if parts.get(p) is None else max(parts[p], ts)
            self.part_seen[stream][p] = now

    def _progress(self, stream: str, now: float) -> int | None:
        parts = self.part_max.get(stream)
        if not parts:
            return self.max_ts.get(stream)
        seen = self.part_seen.get(stream, {})
        live = [ts for p, ts in parts.items()
                if self.idle_timeout is None or now - seen.get(p, now) < self.idle_timeout]
        if not live:
            return self.max_ts.get(stream)
        return None if any(ts is None for ts in live) else min(live)

    def close(self, exhausted: bool = False) -> list[Answer]:
        """Close every timestamp up to the watermark; return the answers in timestamp order."""
        w = self.watermark(exhausted)
        if w is None:
            return []
        answers: list[Answer] = []
        closing = sorted(t for t in self.buffer if t <= w)
        if closing and self.first_closed is None:
            self.first_closed = closing[0]
        for ts in closing:
            groups = self.buffer.pop(ts)
            if self.constraints is not None:
                groups = self._admit(ts, groups)
            if self.views is not None:
                groups = view_rows.project(self.views, ts, groups, self.engine.joined_statics)
            answers.extend(self.engine.step(ts, groups))
            self.metrics.closed_timestamps += 1
        at = self.static_time(w) if not closing else None
        if at is not None:  # no stream row passed the filters yet: the static members' answers are due
            answers.extend(self.engine.emit_static(at))
        self.closed_upto = w
        self.metrics.closed_upto = w
        self.metrics.rows_out += sum(a.count for a in answers)
        return answers

    def static_time(self, closed: int | None) -> int | None:
        """When the answers of the static members are due though no stream row passed the query's filters: a
        timestamp of the data closed by ``closed``; None while there is none (or they were emitted)."""
        t = self.first_data_ts
        if self.engine.static_done or t is None or closed is None or t > closed:
            return None
        return t

    def _admit(self, ts: int, groups: dict) -> dict:
        """The closed timestamp's rows without those that break a used k-constraint (quarantined)."""
        groups, quarantine = self.constraints.admit(ts, groups)
        self._watched(ts, quarantine)
        return groups

    def check_constraints(self, ts: int, groups: dict) -> dict:
        """The Spark backend's check of closed timestamp ``ts`` (``groups``: the monitors' rows): the keys to
        take out of the range's rows, ``(constraint, stream) → keys`` (:meth:`ConstraintWatch.check`)."""
        bad, quarantine = self.constraints.check(ts, groups)
        self._watched(ts, quarantine)
        return bad

    def _watched(self, ts: int, quarantine: list[dict]) -> None:
        m = self.metrics
        if quarantine:
            self.quarantined.extend(quarantine)
            m.constraint_violations += sum(q["rows"] for q in quarantine)
        if self.constraints.relaxed:
            self.engine.relax()
        self.engine.set_marks(self.constraints.watermarks(ts))
        m.constraints = self.constraints.report(ts)
        since = self.constraints.incomplete_since
        if since is not None and m.incomplete_since is None:

            m.incomplete_since = micros_to_iso(since)

    def take_quarantine(self) -> list[dict]:
        out, self.quarantined = self.quarantined, []
        return out

    def buffered_entries(self) -> int:
        return sum(len(rows) for slot in self.buffer.values() for rows in slot.values())

    def update_state_metrics(self, state_bytes: int | None = None, aggregate_entries: int = 0) -> None:
        """``aggregate_entries``: the groups (and counted values) of an aggregate query's answer."""
        m = self.metrics
        m.synopsis_entries = self.engine.entries
        m.buffered_entries = self.buffered_entries()
        m.static_entries = self.engine.static_entries
        m.state_entries = m.synopsis_entries + m.buffered_entries + aggregate_entries
        m.max_state_entries = max(m.max_state_entries, m.state_entries)
        if state_bytes is not None:
            m.state_bytes = state_bytes
        m.state_history.append((m.batches, m.state_entries))
        if len(m.state_history) > 1000:
            # keep the first point (growth is reported against it) and the recent ones
            del m.state_history[1:2]
