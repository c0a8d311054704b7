"""The state of the checks in a window of the answer's time (docs/analysis.md, rules A3–A5).

``FILTER NOT EXISTS { GRAPH ?t2 { Q } FILTER(?t2 >= ?t - d && ?t2 < ?t) }`` (A3): an answer closed at ``T`` is
tested against the timestamps at which Q answered its key in ``[T - d, T]``.  Q's answers are stepped (local
backend) or collected (Spark) one closed timestamp at a time, in order, so they are kept in arrival order and
dropped once no window can read them (:class:`CheckWindows`): the memory is a window, per key.  Without a lower
bound (``?t2 < ?t``, A5) each key is kept forever, with its earliest timestamp only: the memory is the set of keys.

``… FILTER(?t2 > ?t && ?t2 <= ?t + d)`` (A4): the window reaches after the answer's time, so the answer waits
(:class:`Waiting`) until ``τ + d`` has closed.  At the first closed timestamp ``T ≥ τ + d`` at which the query read
a row it is tested against Q's answers of its window, and emitted at ``T`` if the check keeps it.  Both backends
run one closed timestamp at a time through :meth:`QueryEngine.close_waiting
<obda.execution.engine.QueryEngine.close_waiting>`, so they stamp every answer alike.

Both are part of the query's state and of its checkpoint, as plain data.
"""

from __future__ import annotations

import heapq
from collections import deque

from obda.analysis.forest import Forest


class CheckWindows:
    """The answers of the checks in a window of time (rules A3, A4): per check query, the timestamps at which it
    answered each key (its answer without its time), kept as long as the longest window reading it needs."""

    def __init__(self, plan: Forest):
        # check query -> how far back (µs) from the last closed timestamp; None: forever (rule A5, no lower bound)
        self.keep: dict[str, int | None] = {}
        earliest: dict[str, bool] = {}
        for mf in plan.members:
            for c in mf.member.checks:
                if c.window is None:
                    continue
                # A3: the window's length back from the answer's close; A4: from the end of its window
                back = None if c.window[0] is None else max(c.window[2], 0) - c.window[0]
                old = self.keep.get(c.query, 0)
                self.keep[c.query] = None if back is None or old is None else max(old, back)
                earliest[c.query] = earliest.get(c.query, True) and back is None
        # rule A5: every window reading the query is unbounded below, so a key's earliest timestamp decides them all
        self.earliest = {q for q, only in earliest.items() if only}
        self.times: dict[str, dict[tuple, set[int]]] = {q: {} for q in self.keep}
        self._order: dict[str, deque] = {q: deque() for q in self.keep}  # (timestamp, key) as they came: expiry
        self.now = 0

    def add(self, query: str, ts: int, answers: list) -> None:
        """The check query's answers at closed timestamp ``ts`` (kept until :meth:`expire`)."""
        self.put(query, [(ts, a.values[:-1]) for a in answers], ts, expire=False)

    def put(self, query: str, rows: list[tuple[int, tuple]], closed: int, expire: bool = True) -> None:
        """The check query's ``(timestamp, key)`` answers up to ``closed``, the last closed timestamp (after every
        earlier one put); then (``expire``) what no window can read any more is dropped."""
        times, order, self.now = self.times[query], self._order[query], closed
        for ts, key in sorted(rows, key=lambda r: r[0]):
            kept = times.setdefault(key, set())
            if query in self.earliest:  # rule A5: the key's earliest timestamp only, never dropped
                if not kept:
                    kept.add(ts)
            elif ts not in kept:
                kept.add(ts)
                order.append((ts, key))
        if expire:
            self._expire(query, closed)

    def expire(self, closed: int) -> None:
        """Drop what no window can read once ``closed`` has closed."""
        self.now = closed
        for query in self.times:
            self._expire(query, closed)

    def _expire(self, query: str, closed: int) -> None:
        times, order = self.times[query], self._order[query]
        if self.keep[query] is None:
            return
        oldest = closed - self.keep[query]
        while order and order[0][0] < oldest:
            ts, key = order.popleft()
            kept = times[key]
            kept.discard(ts)
            if not kept:
                del times[key]

    @property
    def entries(self) -> int:
        return sum(len(ts) for times in self.times.values() for ts in times.values())

    def state(self) -> dict:
        return {q: {k: sorted(ts) for k, ts in times.items()} for q, times in self.times.items()}

    def restore(self, st: dict) -> None:
        for q in self.times:
            self.times[q] = {tuple(k): set(ts) for k, ts in st.get(q, {}).items()}
            self._order[q] = deque(sorted(((t, k) for k, ts in self.times[q].items() for t in ts), key=lambda r: r[0]))


class Waiting:
    """The answers waiting for the end of a check's window (rule A4), by deadline: ``(deadline, seq, member,
    timestamp, answer with its hidden terms, count)``.  ``wait``: per member with such a check, the latest end
    of its windows (µs after the answer's time)."""

    def __init__(self, plan: Forest):
        self.wait = {mi: max(c.waits for c in mf.member.checks)
                     for mi, mf in enumerate(plan.members) if any(c.waits for c in mf.member.checks)}
        self._heap: list[tuple] = []
        self._seq = 0

    def hold(self, mi: int, ts: int, full: tuple, count: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (ts + self.wait[mi], self._seq, mi, ts, full, count))

    def due(self, closed: int) -> list[tuple[int, int, tuple, int]]:
        """``(member, timestamp, answer, count)`` of the answers whose window ended by ``closed``, in the order
        they came (deadline, then arrival); they leave the store."""
        out = []
        while self._heap and self._heap[0][0] <= closed:
            _, _, mi, ts, full, count = heapq.heappop(self._heap)
            out.append((mi, ts, full, count))
        return out

    @property
    def entries(self) -> int:
        return len(self._heap)

    def state(self) -> list:
        return sorted(self._heap)

    def restore(self, st: list) -> None:
        self._heap = [tuple(e) for e in st]
        heapq.heapify(self._heap)
        self._seq = max((e[1] for e in self._heap), default=0)
