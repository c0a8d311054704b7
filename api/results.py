"""The result log of one continuous query: an executor sink that numbers answers and keeps them on disk.

The executor writes answer lines (``{"emitted_at", "binding"}``, one per
answer occurrence; an aggregate query's changelog lines also carry ``op``) — or, on Spark, answer frames its executors write — into a
:class:`~obda.execution.DirectorySink` in the query's results folder
(``<state dir>/<query id>/results``, next to its checkpoint; a temporary folder
when the service keeps no state).  The log reads what that sink *committed*:
an answer's sequence number ``seq`` (1, 2, ...) is its position in the
committed output (batch order, then part order, then line order), and each
commit file records its batch's first position, so a page is found by a
binary search over the batches and read from one or two part files, never by
rescanning the output.  Clients page (``after=seq``) and resume a live stream
(``Last-Event-ID``) without losing or repeating answers.

Exactly once across crashes comes from the sink's protocol: a micro-batch's
answers are staged, and committed (visible here) only once the executor's
checkpoint that records the batch is on disk; on restart the executor's
``recover(offset)`` commits what the checkpoint covers and deletes the rest,
which is computed again.  So a committed answer never changes its number.

Retention: only the last ``capacity`` answers are served; a committed batch
entirely older than that window is deleted from disk (the newest batch is
always kept).  A reader that asks for dropped answers learns the gap
(``Page.gap``: pages and SSE show it).  ``last_seq`` and ``first_seq`` are also
recorded in the service's store (:mod:`api.store`), for operators.
"""

from __future__ import annotations

import bisect
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from api.store import Store
from obda.execution import DirectorySink, Sink
from obda.execution.committed_output import DATA, CommittedBatch, committed_batches, read_part

#: part files whose answers a log keeps parsed (pages and SSE replays read them in order)
CACHED_FILES = 8


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

    ``directory``: the results folder (a :class:`~obda.execution.DirectorySink`); without one, a
    temporary folder removed with the log.  ``store`` and ``query_id``: where ``last_seq`` /
    ``first_seq`` are recorded (a row of ``queries``); without a store, a private in-memory one.
    """

    def __init__(self, capacity: int = 10_000, store: Store | None = None, query_id: str = "q",
                 directory: str | Path | None = None, output=None):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        if store is None:
            store = Store(None)
            store.insert_query(dict(id=query_id, name=query_id, text="", allow_unbounded=0, status="registered",
                                    created_at=""))
        self.store = store
        self.id = query_id
        if directory is None:
            directory = tempfile.mkdtemp(prefix="obda-results-")
            weakref.finalize(self, shutil.rmtree, directory, True)
        self.directory = Path(directory)
        self.sink = DirectorySink(self.directory, "json")
        self.output = output  # api.kafka_output.KafkaOutput: committed answers published to Kafka too (None: not)
        self._lock = threading.RLock()
        self._batches: list[CommittedBatch] = []  # committed and kept, in order
        self._firsts: list[int] = []  # their first seqs (for bisect)
        self._last = 0
        self._first = 1
        self._stored = (None, None)
        self._rows: OrderedDict[str, list[dict]] = OrderedDict()
        with self._lock:
            self._refresh()

    # -- sink protocol (called by the executor thread) ------------------------------------------
    writes_frames = True  # its DirectorySink writes Spark's answers on the executors

    def write_lines(self, lines: list[str]) -> None:
        self.sink.write_lines(lines)

    def write_frame(self, frame):
        return self.sink.write_frame(frame)

    def flush(self) -> int:
        """Close the micro-batch's staged answers; returns the sink's batch number (the checkpoint's offset)."""
        return self.sink.flush()

    def commit(self, offset) -> None:
        """The checkpoint recording ``offset`` is on disk: the staged answers up to it are published."""
        self.sink.commit(offset)
        self._publish()

    def recover(self, offset) -> None:
        """On restart: commit the staged batches the checkpoint covers, delete the newer ones."""
        self.sink.recover(offset)
        self._publish()

    def _publish(self) -> None:
        """Index what the sink committed; publish it to the Kafka output, if any; then apply retention."""
        with self._lock:
            self._refresh()
        if self.output is not None:
            self.output.publish(self)  # a BrokerError fails the query: the answers stay, sent on resume
            with self._lock:
                self._refresh()

    def close(self) -> None:
        self.sink.close()
        if self.output is not None:
            self.output.close()

    # -- the index of committed batches -----------------------------------------------------------
    def _refresh(self) -> None:
        """Index the batches committed since the last look, then apply the retention limit."""
        after = self._batches[-1].batch if self._batches else None
        for c in committed_batches(self.directory, after):
            self._batches.append(c)
            self._firsts.append(c.first)
        if self._batches:
            self._last = max(self._last, self._batches[-1].last)
        first = max(1, self._last - self.capacity + 1)
        if self.output is not None:  # never an answer the Kafka output has not staged yet
            first = min(first, self.output.handed + 1)
        old = [c for c in self._batches[:-1] if c.last < first]  # entirely outside the window
        if old:
            self.sink.drop_committed(old[-1].batch)
            del self._batches[: len(old)]
            del self._firsts[: len(old)]
            for c in old:
                for name, _ in c.files:
                    self._rows.pop(name, None)
        # after a restart with a larger capacity, what retention deleted before stays dropped
        kept_from = self._batches[0].first if self._batches else self._last + 1
        self._first = max(first, kept_from)
        if self._stored != (self._last, self._first):
            self.store.update_query(self.id, last_seq=self._last, first_seq=self._first)
            self._stored = (self._last, self._first)

    def _file_rows(self, name: str) -> list[dict]:
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = read_part(self.directory / DATA / name)
            while len(self._rows) > CACHED_FILES:
                self._rows.popitem(last=False)
        else:
            self._rows.move_to_end(name)
        return rows

    # -- readers (the HTTP handlers) --------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self._last

    def page(self, after: int = 0, limit: int = 100) -> Page:
        with self._lock:
            last, first = self._last, min(self._first, self._last + 1)
            seq = max(after, first - 1) + 1  # the next seq to return
            items: list[dict] = []
            i = max(0, bisect.bisect_right(self._firsts, seq) - 1)
            while i < len(self._batches) and len(items) < limit and seq <= last:
                c = self._batches[i]
                pos = c.first
                for name, n in c.files:
                    if len(items) >= limit:
                        break
                    if seq <= pos + n - 1:
                        k = seq - pos
                        for d in self._file_rows(name)[k : k + limit - len(items)]:
                            item = {"seq": seq, "emitted_at": d.get("emitted_at"), "binding": d.get("binding", {})}
                            if "op" in d:  # an aggregate query's changelog line
                                item["op"] = d["op"]
                            items.append(item)
                            seq += 1
                    pos += n
                i += 1
        return Page(tuple(items), first, last, after)
