"""The answers a check in a window of the answer's past keeps (docs/analysis.md, rule A3).

``FILTER NOT EXISTS { GRAPH ?t2 { Q } FILTER(?t2 >= ?t - d && ?t2 < ?t) }``: an answer closed at ``T`` is tested
against the timestamps at which Q answered its key in ``[T - d, T]``.  Q's answers are stepped (local backend) or
collected (Spark) one closed timestamp at a time, in order, so they are kept in arrival order and dropped once no
later answer's window reaches them: the memory is a window, per key.  They are part of the query's state and of
its checkpoint (plain data: per check query, each key's sorted timestamps).
"""

from __future__ import annotations

from collections import deque

from obda.analysis.forest import Forest


class CheckWindows:
    """The answers of the checks in a window of the answer's past (rule A3): per check query, the timestamps at
    which it answered each key (its answer without its time), kept for the longest window that reads it."""

    def __init__(self, plan: Forest):
        self.keep: dict[str, int] = {}  # check query -> how far back (µs) a window reads it
        for mf in plan.members:
            for c in mf.member.checks:
                if c.window is not None:
                    self.keep[c.query] = max(self.keep.get(c.query, 0), -c.window[0])
        self.times: dict[str, dict[tuple, set[int]]] = {q: {} for q in self.keep}
        self._order: dict[str, deque] = {q: deque() for q in self.keep}  # (timestamp, key) as they came: expiry
        self.now = 0

    def add(self, query: str, ts: int, answers: list) -> None:
        """The check query's answers at closed timestamp ``ts``; what no window can read any more is dropped."""
        self.put(query, [(ts, a.values[:-1]) for a in answers], ts)

    def put(self, query: str, rows: list[tuple[int, tuple]], closed: int) -> None:
        """The check query's ``(timestamp, key)`` answers up to ``closed``, the last closed timestamp (after every
        earlier one put); what no window can read any more is dropped."""
        times, order, self.now = self.times[query], self._order[query], closed
        for ts, key in sorted(rows, key=lambda r: r[0]):
            kept = times.setdefault(key, set())
            if ts not in kept:
                kept.add(ts)
                order.append((ts, key))
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
