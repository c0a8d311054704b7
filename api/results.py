"""The result log of one continuous query: an executor sink that numbers answers and keeps them in the store.

The executor writes answer lines (``{"emitted_at", "binding"}``, one per
answer occurrence); the log gives each a sequence number ``seq`` (1, 2, ...)
so that clients can page (``after=seq``) and resume a live stream
(``Last-Event-ID``) without losing or repeating answers.  Answers live in the
service's SQLite store (:mod:`api.store`), so they and their numbers survive
a restart.  Only the last ``capacity`` answers are kept (retention): older
ones are dropped by policy, and a reader that asks for them learns the gap
(``Page.gap``: pages and SSE show it).

Exactly once across crashes: :meth:`flush` commits the answers of a
micro-batch as *staged* (``seq > last_seq``, invisible); they are *published*
when the executor's checkpoint that records this offset is on disk
(:func:`obda.execution.checkpoint.on_dump` calls :meth:`publish`), or at the
latest when the next micro-batch flushes.  On restart the executor calls
:meth:`recover` with its checkpointed offset: staged answers after it are
deleted and computed again, under the same numbers, from the same state.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from api.store import Store
from obda.execution import Sink


@dataclass(frozen=True)
class Page:
    """Answers with ``seq > after``, at most ``limit`` of them."""

    items: tuple[dict, ...]
    first_seq: int  # oldest seq still kept (last_seq + 1 when empty)
    last_seq: int  # newest seq published so far (0 when none)
    after: int = 0

    @property
    def next_after(self) -> int | None:
        return self.items[-1]["seq"] if self.items else None

    @property
    def gap(self) -> tuple[int, int] | None:
        """``(from, to)``: answers after ``after`` that were dropped by the retention limit (None: none)."""
        lo, hi = self.after + 1, min(self.first_seq - 1, self.last_seq)
        return (lo, hi) if lo <= hi else None


class ResultLog(Sink):
    """A thread-safe, bounded, numbered, durable log of answers (an ``obda.execution`` sink).

    ``store`` and ``query_id``: where the answers live (a row of ``queries`` must exist); without a store
    the log has a private in-memory one.  ``checkpoint``: the executor's checkpoint file; without one,
    answers are published at every flush.
    """

    def __init__(self, capacity: int = 10_000, store: Store | None = None, query_id: str = "q",
                 checkpoint: Path | None = None):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        if store is None:
            store = Store(None)
            store.insert_query(dict(id=query_id, name=query_id, text="", allow_unbounded=0, status="registered",
                                    created_at=""))
        self.store = store
        self.id = query_id
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self._pending: list[str] = []
        self._lock = threading.Lock()
        last, first = store.read("SELECT last_seq, first_seq FROM queries WHERE id = ?", (query_id,))[0]
        self._published, self._first = last, first
        staged = store.read("SELECT max(seq) FROM answers WHERE query_id = ?", (query_id,))[0][0]
        self._staged = max(last, staged or 0)
        if self._staged > last and (self.checkpoint is None or not self.checkpoint.exists()):
            # staged by a run whose checkpoint never got written: nobody saw them, they are computed again
            self._truncate(last)

    # -- sink protocol (called by the executor thread) ------------------------------------------
    def write_lines(self, lines: list[str]) -> None:
        with self._lock:
            self._pending.extend(lines)

    def flush(self) -> int:
        """Commit the pending answers (staged) and return the newest seq: the offset the checkpoint records."""
        with self._lock:
            if not self._pending:
                return self._staged
            lines, self._pending = self._pending, []
            # the previous micro-batch's checkpoint was written before this one started: publish it
            publish = self._staged
            start = self._staged + 1
            newest = self._staged + len(lines)
            first = max(self._first, newest - self.capacity + 1)
            if self.checkpoint is None:
                publish = newest
            with self.store.transaction() as c:
                if first > self._first:
                    c.execute("DELETE FROM answers WHERE query_id = ? AND seq < ?", (self.id, first))
                skip = max(0, first - start)  # more new answers than the log keeps: the oldest never go in
                c.executemany("INSERT INTO answers (query_id, seq, line) VALUES (?, ?, ?)",
                              [(self.id, start + i, line) for i, line in enumerate(lines) if i >= skip])
                c.execute("UPDATE queries SET last_seq = ?, first_seq = ? WHERE id = ?", (publish, first, self.id))
            self._staged, self._first, self._published = newest, first, publish
            return newest

    def publish(self) -> None:
        """The executor's checkpoint covering the staged answers is on disk: make them visible."""
        with self._lock:
            if self._published == self._staged:
                return
            with self.store.transaction() as c:
                c.execute("UPDATE queries SET last_seq = ? WHERE id = ?", (self._staged, self.id))
            self._published = self._staged

    def recover(self, offset) -> None:
        """Forget answers written after ``offset`` (a batch that did not commit before a restart)."""
        with self._lock:
            self._pending = []
            self._truncate(offset or 0)

    def _truncate(self, offset: int) -> None:
        offset = min(offset, self._staged)
        first = min(self._first, offset + 1)
        with self.store.transaction() as c:
            c.execute("DELETE FROM answers WHERE query_id = ? AND seq > ?", (self.id, offset))
            c.execute("UPDATE queries SET last_seq = ?, first_seq = ? WHERE id = ?", (offset, first, self.id))
        self._staged = self._published = offset
        self._first = first

    # -- readers (the HTTP handlers) --------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self._published

    def page(self, after: int = 0, limit: int = 100) -> Page:
        with self._lock:
            last, first = self._published, min(self._first, self._published + 1)
        rows = self.store.read(
            "SELECT seq, line FROM answers WHERE query_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (self.id, max(after, first - 1), last, limit),
        )
        items = []
        for seq, line in rows:
            d = json.loads(line)
            items.append({"seq": seq, "emitted_at": d.get("emitted_at"), "binding": d.get("binding", {})})
        return Page(tuple(items), first, last, after)
