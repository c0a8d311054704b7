"""The in-memory result log of one continuous query: an executor sink that numbers answers.

The executor writes answer lines (``{"emitted_at", "binding"}``, one per
answer occurrence); the log gives each a sequence number ``seq`` (1, 2, ...)
so that clients can page (``after=seq``) and resume a live stream
(``Last-Event-ID``) without losing or repeating answers.  Only the last
``capacity`` answers are kept: memory stays bounded however long the query
runs; a client that falls behind learns from ``first_seq`` what was dropped.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass

from obda.execution import Sink


@dataclass(frozen=True)
class Page:
    """Answers with ``seq > after``, at most ``limit`` of them."""

    items: tuple[dict, ...]
    first_seq: int  # oldest seq still kept (last_seq + 1 when empty)
    last_seq: int  # newest seq written so far (0 when none)

    @property
    def next_after(self) -> int | None:
        return self.items[-1]["seq"] if self.items else None


class ResultLog(Sink):
    """A thread-safe, bounded, numbered log of answers (an ``obda.execution`` sink)."""

    def __init__(self, capacity: int = 10_000):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._items: deque[dict] = deque(maxlen=capacity)
        self._last = 0
        self._lock = threading.Lock()

    # -- sink protocol (called by the executor thread) ------------------------------------------
    def write_lines(self, lines: list[str]) -> None:
        with self._lock:
            for line in lines:
                self._last += 1
                d = json.loads(line)
                self._items.append({"seq": self._last, "emitted_at": d.get("emitted_at"), "binding": d.get("binding", {})})

    def flush(self):
        with self._lock:
            return self._last

    def recover(self, offset) -> None:
        """Forget answers written after ``offset`` (a batch that did not commit before a restart)."""
        offset = offset or 0
        with self._lock:
            while self._items and self._items[-1]["seq"] > offset:
                self._items.pop()
            self._last = min(self._last, offset)

    # -- readers (the HTTP handlers) --------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._last

    def page(self, after: int = 0, limit: int = 100) -> Page:
        with self._lock:
            first = self._items[0]["seq"] if self._items else self._last + 1
            start = max(after + 1, first)
            # seqs are consecutive inside the deque: index arithmetic instead of a scan
            idx = start - first
            items = tuple(self._items[i] for i in range(idx, min(idx + limit, len(self._items)))) if idx < len(self._items) else ()
            return Page(items, first, self._last)
