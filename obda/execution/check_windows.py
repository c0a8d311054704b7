"""The state of the checks in a window of the answer's time (docs/analysis.md, rules A3–A6).

``FILTER NOT EXISTS { GRAPH ?t2 { Q } FILTER(?t2 >= ?t - d && ?t2 < ?t) }`` (A3): an answer closed at ``T`` is
tested against the timestamps at which Q answered its key in ``[T - d, T]``.  Q's answers are stepped (local
backend) or collected (Spark) one closed timestamp at a time, in order, so they are kept in arrival order and
dropped once no window can read them (:class:`CheckWindows`): the memory is a window, per key.  Without a lower
bound (``?t2 < ?t``, A5) each key is kept forever, with its earliest timestamp only: the memory is the set of keys.

``… FILTER(?t2 > ?t && ?t2 <= ?t + d)`` (A4): the window reaches after the answer's time, so the answer waits
(:class:`Waiting`).  It is matched against Q's kept answers of its window's past part when it starts waiting, and
against each answer of Q as it comes: the first match decides the check (EXISTS keeps the answer, NOT EXISTS drops
it), at the closed timestamp of that match.  A check with no match is decided at the first closed timestamp
``T ≥ τ + d`` at which the query read a row.  The answer is emitted once every check of its member is decided and
keeps it.  Without an end (``FILTER EXISTS { … FILTER(?t2 > ?t) }``, A6) an EXISTS answer waits until its first
match, which may never come.  Both backends run one closed timestamp at a time through :meth:`QueryEngine.
close_waiting <obda.execution.query_engine.QueryEngine.close_waiting>`, so they stamp every answer alike.  Since every
Q answer is matched as it comes, Q's answers are kept only for the windows' past part.

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
        # check query -> how far back (µs) from the last closed timestamp; None: forever (rule A5, no lower bound).
        # An answer is tested when it closes (A3) or starts waiting (A4, A6) against the window's part up to its
        # own timestamp; a waiting answer meets the later ones as they come
        self.keep: dict[str, int | None] = {}
        earliest: dict[str, bool] = {}
        watched: set[str] = set()
        for mf in plan.members:
            for c in mf.member.checks:
                if c.window is None:
                    continue
                back = None if c.window[0] is None else max(0, -c.window[0])
                old = self.keep.get(c.query, 0)
                self.keep[c.query] = None if back is None or old is None else max(old, back)
                earliest[c.query] = earliest.get(c.query, True) and back is None
                if c.waits:
                    watched.add(c.query)
        # rule A5: every window reading the query is unbounded below, so a key's earliest timestamp decides them all
        self.earliest = {q for q, only in earliest.items() if only}
        self._watched = watched
        self.arrived: list[tuple[str, int, tuple]] = []  # (query, timestamp, key) put since the last take, if watched
        # a check whose FILTER compares the query's columns after its keys: (query, keys' length) -> its keys -> the
        # answers (keys and compared values) kept with them
        self._prefixes: dict[tuple[str, int], dict[tuple, set[tuple]]] = {}
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
                if kept:
                    continue
                kept.add(ts)
            elif ts not in kept:
                kept.add(ts)
                order.append((ts, key))
            else:
                continue
            if len(kept) == 1:
                for (q, n), index in self._prefixes.items():
                    if q == query:
                        index.setdefault(key[:n], set()).add(key)
            if query in self._watched:
                self.arrived.append((query, ts, key))
        if expire:
            self._expire(query, closed)

    def found(self, c, keys: tuple, compared: tuple, now: int) -> bool:
        """Whether check ``c``'s query answered ``keys`` at a time in ``c``'s window of ``now`` (µs), its compared
        values standing in ``c``'s comparisons to ``compared`` (the answer's terms)."""
        times = self.times[c.query]
        if not c.compares:
            return any(c.in_window(t - now) for t in times.get(keys, ()))
        index = self._prefixes.get((c.query, len(keys)))
        if index is None:  # built once, then kept with the answers
            index = self._prefixes[(c.query, len(keys))] = {}
            for key in times:
                index.setdefault(key[:len(keys)], set()).add(key)
        return any(c.agrees(key[len(keys):], compared) and any(c.in_window(t - now) for t in times[key])
                   for key in index.get(keys, ()))

    def take_arrived(self) -> list[tuple[str, int, tuple]]:
        """The ``(query, timestamp, key)`` answers put since the last call, of the queries a waiting check reads."""
        out, self.arrived = self.arrived, []
        return out

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
                for (q, n), index in self._prefixes.items():
                    if q == query:
                        same = index[key[:n]]
                        same.discard(key)
                        if not same:
                            del index[key[:n]]

    @property
    def entries(self) -> int:
        return sum(len(ts) for times in self.times.values() for ts in times.values())

    def state(self) -> dict:
        return {q: {k: sorted(ts) for k, ts in times.items()} for q, times in self.times.items()}

    def restore(self, st: dict) -> None:
        self._prefixes = {}
        for q in self.times:
            self.times[q] = {tuple(k): set(ts) for k, ts in st.get(q, {}).items()}
            self._order[q] = deque(sorted(((t, k) for k, ts in self.times[q].items() for t in ts), key=lambda r: r[0]))


class Waiting:
    """The answers waiting for a check decided after their timestamp (rules A4, A6), each with the checks not yet
    decided: ``seq -> [member, timestamp, answer with its hidden terms, count, undecided checks]``, indexed by
    each undecided check's (query, keys) and, for a window with an end, by that end (a heap).  ``wait``: per member
    with such checks, their checks by position among the member's.  A check whose FILTER compares its query's columns after
    the keys with the answer's terms matches an answer of its query agreeing on the keys whose values stand in
    those comparisons."""

    def __init__(self, plan: Forest):
        self.wait = {mi: {j: c for j, c in enumerate(mf.member.checks) if c.waits}
                     for mi, mf in enumerate(plan.members) if any(c.waits for c in mf.member.checks)}
        self._entries: dict[int, list] = {}
        self._index: dict[tuple[str, tuple], set[tuple[int, int]]] = {}  # (query, keys) -> (seq, check position)
        self._lengths: dict[str, set[int]] = {}  # query -> how many keys its waiting checks compare
        for checks in self.wait.values():
            for c in checks.values():
                self._lengths.setdefault(c.query, set()).add(len(c.positions) - 1 - len(c.compares))
        self._heap: list[tuple[int, int, int]] = []  # (end of the window, seq, check position); stale ones skipped
        self._seq = 0
        self.ready: list[tuple] = []  # (seq, entry) kept already, emitted at the next closed timestamp (restore)

    def hold(self, mi: int, ts: int, full: tuple, count: int, windows: CheckWindows) -> bool | None:
        """An answer of closed timestamp ``ts`` starts waiting, after its checks met the query's answers kept in
        ``windows`` (its window's part up to ``ts``): True when they decided to keep it at once, False when they
        drop it, None when it waits."""
        undecided: set[int] = set()
        for j, c in self.wait[mi].items():
            keys, compared = c.split(full)
            if None in keys:
                return False  # NULL never agrees (as the checks decided at once)
            if windows.found(c, keys, compared, ts):
                if c.negated:
                    return False
            else:
                undecided.add(j)
        if not undecided:
            return True
        self._seq += 1
        self._add(self._seq, [mi, ts, full, count, undecided])
        return None

    def _add(self, seq: int, entry: list) -> None:
        self._entries[seq] = entry
        mi, ts, full = entry[0], entry[1], entry[2]
        for j in entry[4]:
            c = self.wait[mi][j]
            self._index.setdefault((c.query, c.split(full)[0]), set()).add((seq, j))
            if c.window[2] is not None:
                heapq.heappush(self._heap, (ts + c.window[2], seq, j))

    def settle(self, closed: int, arrived: list[tuple[str, int, tuple]]) -> list[tuple[int, int, tuple, int]]:
        """At closed timestamp ``closed``: the query answers ``arrived`` (of ``closed``) decide the checks whose
        window they fall in (a match), then the checks whose window ended by ``closed`` are decided without one.
        Returns ``(member, timestamp, answer, count)`` of the answers every check now keeps, in the order they
        started waiting; those and the answers a check drops leave the store."""
        kept: dict[int, list] = dict(self.ready)
        self.ready = []

        def decide(seq: int, j: int, matched: bool) -> None:
            entry = self._entries[seq]
            c = self.wait[entry[0]][j]
            self._unindex(seq, j, c, entry[2])
            if matched == c.negated:  # NOT EXISTS matched, EXISTS did not: dropped
                self._drop(seq)
                return
            entry[4].discard(j)
            if not entry[4]:
                kept[seq] = self._entries.pop(seq)

        for query, ts, key in arrived:
            for n in self._lengths.get(query, ()):
                for seq, j in sorted(self._index.get((query, key[:n]), ())):
                    entry = self._entries.get(seq)
                    if entry is None or j not in entry[4]:
                        continue
                    c = self.wait[entry[0]][j]
                    if (len(c.positions) - 1 - len(c.compares) == n and c.in_window(ts - entry[1])
                            and c.agrees(key[n:], c.split(entry[2])[1])):
                        decide(seq, j, True)
        while self._heap and self._heap[0][0] <= closed:
            _, seq, j = heapq.heappop(self._heap)
            entry = self._entries.get(seq)
            if entry is not None and j in entry[4]:
                decide(seq, j, False)
        return [tuple(kept[s][:4]) for s in sorted(kept)]

    def _unindex(self, seq: int, j: int, c, full: tuple) -> None:
        k = (c.query, c.split(full)[0])
        waiting = self._index.get(k)
        if waiting is not None:
            waiting.discard((seq, j))
            if not waiting:
                del self._index[k]

    def _drop(self, seq: int) -> None:
        entry = self._entries.pop(seq)
        for j in entry[4]:
            self._unindex(seq, j, self.wait[entry[0]][j], entry[2])

    @property
    def entries(self) -> int:
        return len(self._entries) + len(self.ready)

    def state(self) -> list:
        return [[seq, *entry[:4], sorted(entry[4]) if len(entry) > 4 else []]
                for seq, entry in sorted([*self._entries.items(), *self.ready])]

    def restore(self, st: list, windows: CheckWindows) -> None:
        """``st``: :meth:`state`; or, from a checkpoint written before answers were decided at a match,
        ``(deadline, seq, member, timestamp, answer, count)`` entries: those meet the kept answers of their whole
        window (kept then for its length), the matches since they started waiting included."""
        self._entries, self._index, self._heap = {}, {}, []
        self.ready = []
        for e in st:
            if isinstance(e[5], (list, tuple)):
                seq, mi, ts, full, count, undecided = e
                if undecided:
                    self._add(seq, [mi, ts, tuple(full), count, set(undecided)])
                else:
                    self.ready.append((seq, [mi, ts, tuple(full), count]))
                continue
            _, seq, mi, ts, full, count = e
            undecided = set()
            for j, c in self.wait[mi].items():
                keys, compared = c.split(full)
                found = None not in keys and windows.found(c, keys, compared, ts)
                if found and c.negated or None in keys:
                    break
                if not found:
                    undecided.add(j)
            else:
                if undecided:
                    self._add(seq, [mi, ts, tuple(full), count, undecided])
                else:
                    self.ready.append((seq, [mi, ts, tuple(full), count]))
        self._seq = max([*self._entries, *(r[0] for r in self.ready)], default=0)
