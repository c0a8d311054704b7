"""k-constraints at run time: watched, exploited, and nothing lost silently (docs/analysis.md, "k-constraints").

The synopses of a member bounded only by declared constraints (``Node.constrained``) drop a row once the
constraints say no later row can join it.  A row that arrives later anyway would have joined state that is
gone, so **before** the engine sees a closed timestamp, :class:`ConstraintWatch` checks every row of the
constrained streams against the rows seen earlier (Babu et al. 2004 §4.3, §5.3, in application time):

* a row whose key was seen on the reference side more than ``k`` earlier **violates** the constraint.  It is
  taken out of the query's input (every alias of its stream), counted, and written to the quarantine with
  the constraint named; the query's status says its answers may be incomplete since that timestamp.  So
  the answers are exactly the query over the rows that keep the constraints (tests/execution/
  test_constraints_exec.py checks it against DuckDB).
* Keys are kept exactly for ``margin · k`` (the paper's ``c``): distances up to there are measured; a
  share ``sample`` of the keys (``p``, chosen by hash) is kept for the window ``W`` to measure larger ones.
  Keys that leave go into Bloom filters (:class:`Departed`: no false negatives, a false-positive rate kept
  below about 4·10⁻⁹ and reported): a later row with such a key is a violation whose distance is only
  known to exceed ``margin · k``.  The filters are generations of a fixed size: once the oldest is dropped,
  the metrics say since when departed keys are remembered (``remembered_since``).
* The estimated ``k`` is the largest distance seen in the last ``W``; the violation rate is over the rows of
  the last ``W``.  Above ``max_violation_rate`` the constraint stops being used (the paper's ``k_u = ∞``):
  the synopses keep what the query's own conditions need from then on, and only rows that would join state
  dropped before are quarantined.

Memory (what a watch remembers of the keys: :mod:`obda.execution.constraint_memory`): the keys of the last
``margin · k`` (plus the sampled ones of the last ``W``), ``bloom_bits`` per reference stream and one entry per
timestamp of the last ``W`` — all independent of the streams' length.
OA(k) (:class:`_Ordered`): the value watermark of the stream — its largest value more than ``k`` ago —
says which synopsis entries no later row can join (forest rule ``order_expiry``); a row below it breaks
the constraint and is quarantined the same way, while the query drops entries by it.

Checkpoints: :meth:`ConstraintWatch.state` is what the watches observed as plain data (dicts, lists, tuples,
numbers, strings, bytes: deques as lists, Bloom bits as bytes), which :mod:`obda.execution.checkpoint` reads
back without resolving any class; :meth:`ConstraintWatch.restore` puts it into the watches built from the
plan.  The declared :class:`~obda.model.constraints.Constraint` objects are configuration and are not stored.
"""

from __future__ import annotations

from collections import deque

from obda.execution.constraint_memory import Departed, Reference, SideCheck, incompatible
from obda.execution.relations import Counted
from obda.model.constraints import KEY, ORDERED, Constraint, format_duration

MIN_ROWS_FOR_RATE = 20  # the violation rate decides nothing before this many rows in the window


class Watch:
    """One declared constraint at run time (see the module docstring)."""

    def __init__(self, c: Constraint, lags: dict[str, int], used: bool):
        self.c, self.used, self.lags = c, used, lags
        mon = c.monitoring
        self.window = c.window
        self.checks = [SideCheck(s, c.right if s == "after" else c.left, c.left if s == "after" else c.right, v,
                              self.window) for s, v in c.bounds()]
        if c.left == c.right:
            self.checks = self.checks[:1]
        self.refs: dict[str, Reference] = {}
        for ch in self.checks:
            r = self.refs.get(ch.reference)
            horizon = int(mon.margin * ch.bound)
            if r is None:
                self.refs[ch.reference] = Reference(horizon, max(self.window, horizon), mon.sample, Departed(mon.bloom_bits))
            else:
                r.horizon = max(r.horizon, horizon)
        self.in_use = used
        self.disabled_at: int | None = None  # last timestamp closed while the constraint was used
        self.violations = 0  # rows quarantined (they would have joined dropped state)
        self.breaches = 0  # rows beyond the declared bound
        self.rows = 0
        self.first_violation: int | None = None  # the first breach
        self.first_quarantined: int | None = None
        self.recent: deque = deque()  # (ts, rows, violations)
        self.ordered = _Ordered(c) if c.kind == ORDERED else None
        self.unique = Departed(mon.bloom_bits) if c.kind == KEY else None  # a key: every value seen while used
        self.disabled_mark = None  # OA: the value watermark when the constraint stopped being used

    # -- checkpointed state ----------------------------------------------------------------------------
    def state(self) -> dict:
        """What this watch observed, as plain data (the constraint itself comes from the plan)."""
        return {
            "constraint": self.c.describe(),
            "in_use": self.in_use, "disabled_at": self.disabled_at, "violations": self.violations,
            "breaches": self.breaches, "rows": self.rows, "first_violation": self.first_violation,
            "first_quarantined": self.first_quarantined, "recent": list(self.recent),
            "checks": [ch.state() for ch in self.checks],
            "refs": {table: r.state() for table, r in self.refs.items()},
            "ordered": self.ordered.state() if self.ordered is not None else None,
            "unique": self.unique.state() if self.unique is not None else None,
            "disabled_mark": self.disabled_mark,
        }

    def restore(self, st: dict) -> None:
        """Back to what :meth:`state` recorded (refused when it was recorded for another constraint)."""
        if st["constraint"] != self.c.describe():
            raise incompatible(f"constraint {self.c.name!r} was {st['constraint']}, and is now declared as "
                                f"{self.c.describe()}")
        if (len(st["checks"]) != len(self.checks) or set(st["refs"]) != set(self.refs)
                or (st["ordered"] is None) != (self.ordered is None) or (st["unique"] is None) != (self.unique is None)):
            raise incompatible(f"constraint {self.c.name!r} is watched differently now")
        self.in_use, self.disabled_at = st["in_use"], st["disabled_at"]
        self.violations, self.breaches, self.rows = st["violations"], st["breaches"], st["rows"]
        self.first_violation, self.first_quarantined = st["first_violation"], st["first_quarantined"]
        self.recent = deque(tuple(x) for x in st["recent"])
        for ch, s in zip(self.checks, st["checks"]):
            ch.restore(s)
        for table, r in self.refs.items():
            r.restore(st["refs"][table])
        if self.ordered is not None:
            self.ordered.restore(st["ordered"])
        if self.unique is not None:
            self.unique.restore(st["unique"])
        self.disabled_mark = st["disabled_mark"]

    # -- the check of one closed timestamp --------------------------------------------------------
    def check(self, ts: int, rows: dict[str, Counted]) -> dict[str, set]:
        """``rows``: table -> {key: count} of the closed timestamp ``ts`` (raw rows on the constraint's columns).
        Returns table -> the keys whose rows violate (to quarantine when the constraint drops state)."""
        if not any(rows.get(t) for t in (self.c.left, self.c.right)):
            return {}  # nothing to check: what follows depends only on the timestamps that bring rows
        if self.ordered is not None:
            bad, n, breaches = self._check_order(ts, rows.get(self.c.left, {}))
        elif self.unique is not None:
            bad, n, breaches = self._check_unique(ts, rows.get(self.c.left, {}))
        else:
            bad, n, breaches = self._check_keys(ts, rows)
        v = sum(rows[t][k] for t, keys in bad.items() for k in keys)
        self.violations += v
        if v and self.used and self.first_quarantined is None:
            self.first_quarantined = ts
        self._count(ts, n, breaches)
        if self.in_use and self._rate() > self.c.monitoring.max_violation_rate:
            self.in_use = False
            self.disabled_at = ts
            if self.ordered is not None:  # entries below it may be gone: later rows below it are quarantined
                self.disabled_mark = self.ordered.watermark(ts)
        return bad

    def _check_keys(self, ts: int, rows: dict[str, Counted]) -> tuple[dict[str, set], int, int]:
        """RI, CA: each row against the first row of its key on the reference side."""
        for table, ref in self.refs.items():  # keys more than margin · k old leave the exact map
            lag = self.lags.get(table, 0)
            ref.evict(ts, (lambda t: True) if self.in_use else
                      (lambda t, lag=lag: self.disabled_at is not None and t + lag <= self.disabled_at))
        bad: dict[str, set] = {}
        breaches = 0
        for ch in self.checks:
            ref = self.refs[ch.reference]
            for key, count in rows.get(ch.table, {}).items():
                first, known = ref.seen(key)
                if first is not None:
                    d = ts - first
                    ch.observe(ts, d)
                    beyond = d > ch.bound
                    dropped = first + self.lags.get(ch.reference, 0) <= (self.disabled_at or 0)
                elif known:  # a Bloom hit: seen more than margin · k ago
                    beyond = dropped = True
                    ch.beyond_margin += count
                    ch.observe(ts, ref.horizon + 1)
                else:
                    beyond = dropped = False
                breaches += count if beyond else 0
                if beyond if self.in_use else dropped:
                    bad.setdefault(ch.table, set()).add(key)
        n = sum(sum(rows.get(t, {}).values()) for t in {ch.table for ch in self.checks})
        for table, ref in self.refs.items():
            for key in rows.get(table, {}):
                if key not in bad.get(table, ()):
                    ref.add(ts, key)
        return bad, n, breaches

    def _check_unique(self, ts: int, rows: Counted) -> tuple[dict[str, set], int, int]:
        """A key: a row whose value came at an earlier timestamp breaks it.  The values seen while the query
        drops entries by the key are remembered (:class:`Departed`): such a row could have joined entries
        already dropped, so it is quarantined (also once the key is no longer used).  Several rows with one
        value at one timestamp break it too, but lose nothing (they all join before anything is dropped)."""
        d = self.unique
        again = {k for k in rows if None not in k and d.n and k in d}
        breaches = sum(c if k in again else c - 1 for k, c in rows.items())
        if self.in_use:
            for k in rows:
                if k not in again and None not in k:
                    d.add(ts, k)
        return ({self.c.left: again} if again and self.used else {}), sum(rows.values()), breaches

    def _check_order(self, ts: int, rows: Counted) -> tuple[dict[str, set], int, int]:
        """OA: a row below the stream's value watermark breaks it; while the constraint is used, synopsis
        entries below the watermark are dropped, so such a row is quarantined (after: below the watermark
        of the timestamp the constraint stopped being used)."""
        n, below = self.ordered.check(ts, rows)
        if self.in_use:
            keys = below
        elif self.disabled_mark is not None:
            keys = {k for k in rows if k[0] is not None and k[0] < self.disabled_mark}
        else:
            keys = set()
        return ({self.c.left: keys} if keys and self.used else {}), n, sum(rows[k] for k in below)

    def _count(self, ts: int, n: int, v: int) -> None:
        """``v`` of the ``n`` rows of ``ts`` arrived beyond the declared bound (breaches: the observed adherence)."""
        self.rows += n
        self.breaches += v
        if v and self.first_violation is None and self.used:
            self.first_violation = ts
        self.recent.append((ts, n, v))
        while self.recent and self.recent[0][0] < ts - self.window:
            self.recent.popleft()

    def _rate(self) -> float:
        n = sum(r[1] for r in self.recent)
        return sum(r[2] for r in self.recent) / n if n >= MIN_ROWS_FOR_RATE else 0.0

    # -- what is reported ----------------------------------------------------------------------------
    def _departed(self) -> list[Departed]:
        return [r.departed for r in self.refs.values()] + ([self.unique] if self.unique is not None else [])

    def _estimate_text(self, side: str, us: int) -> str:
        """An estimated k as a duration; ``more than …`` when it is only known to exceed the margin."""
        ch = next((c for c in self.checks if c.side == side), self.checks[0] if self.checks else None)
        horizon = self.refs[ch.reference].horizon if ch is not None and self.ordered is None else None
        # a Bloom hit is observed as horizon + 1 µs (sampled keys measure larger distances exactly)
        return f"more than {format_duration(horizon)}" if horizon is not None and us == horizon + 1 else format_duration(us)

    def estimates(self, now: int) -> dict[str, int]:
        if self.ordered is not None:
            return {"within": self.ordered.estimate(now)}
        return {ch.side if self.c.kind != "clustered" else "within": ch.estimate(now) for ch in self.checks}

    def report(self, now: int | None) -> dict:
        from obda.execution.rows import micros_to_iso as ts_text

        now = now if now is not None else 0
        return {
            "constraint": self.c.describe(), "kind": self.c.kind,
            "declared": {s: format_duration(v) for s, v in self.c.bounds()} if self.c.kind == "referential"
            else {"key": [a for a, _ in self.c.on]} if self.unique is not None
            else {"within": format_duration(self.c.within)},
            "estimated": {s: self._estimate_text(s, v) for s, v in self.estimates(now).items()},
            "estimated_us": self.estimates(now),
            "beyond_margin": sum(ch.beyond_margin for ch in self.checks),
            "rows": self.rows, "breaches": self.breaches, "violations": self.violations,
            "breach_rate": round(self.breaches / self.rows, 6) if self.rows else 0.0,
            "recent_breach_rate": round(self._rate(), 6),
            "used_by_query": self.used, "in_use": self.in_use,
            "disabled_at": ts_text(self.disabled_at) if self.disabled_at is not None else None,
            "first_breach": ts_text(self.first_violation) if self.first_violation is not None else None,
            "incomplete_since": ts_text(self.first_quarantined) if self.first_quarantined is not None else None,
            "monitor_keys": sum(r.size for r in self.refs.values()) + (self.ordered.size if self.ordered else 0),
            "bloom_keys": sum(d.n for d in self._departed()),
            "bloom_false_positive_rate": max((d.fp_rate for d in self._departed()), default=0.0),
            # keys that left the margin before this are forgotten (constant memory): a row with one is not caught
            "remembered_since": _since(d.remembered_since for d in self._departed()),
            "forgotten_keys": sum(d.forgotten for d in self._departed()),
        }


def _since(values) -> str | None:
    from obda.execution.rows import micros_to_iso

    known = [v for v in values if v is not None]
    return micros_to_iso(max(known)) if known else None


class _Ordered:
    """OA(k) on one column (§6.2–6.3, in application time): the value watermark at ``C`` is the largest value
    of the rows at or before ``C − k``; a row at ``ts`` below the watermark at ``ts − 1`` breaks the constraint
    (a row more than ``k`` earlier has a larger value).  Its scrambling distance — how much later it comes
    than the latest larger value — is measured over the last ``W``."""

    def __init__(self, c: Constraint):
        self.k = c.within
        self.window = c.window
        self.pending: deque = deque()  # (ts, max value at ts) of the last k
        self.floor = None  # the largest value of the rows before the last k
        self.maxima: deque = deque()  # (ts, scrambling distance) sliding max over W
        self.history: deque = deque()  # (ts, max value at ts) of the last W: to measure distances beyond k

    def watermark(self, closed: int):
        """The largest value of the rows at or before ``closed − k`` (None: none yet): no row after ``closed``
        has a smaller one while the constraint holds.  ``closed`` never decreases between calls."""
        while self.pending and self.pending[0][0] <= closed - self.k:
            _, v = self.pending.popleft()
            self.floor = v if self.floor is None else max(self.floor, v)
        return self.floor

    def check(self, ts: int, rows: Counted) -> tuple[int, set]:
        """The rows of ``ts``: how many, and the keys (values) below the watermark."""
        floor = self.watermark(ts - 1)
        while self.history and self.history[0][0] < ts - self.window:
            self.history.popleft()
        n, below = 0, set()
        for key, count in rows.items():
            value = key[0]
            n += count
            if value is None:
                continue
            if floor is not None and value < floor:
                below.add(key)
            d = max((ts - t for t, v in self.history if v > value), default=0)
            if d:
                while self.maxima and self.maxima[-1][1] <= d:
                    self.maxima.pop()
                self.maxima.append((ts, d))
        values = [k[0] for k in rows if k[0] is not None]
        if values:
            self.pending.append((ts, max(values)))
            self.history.append((ts, max(values)))
        return n, below

    def estimate(self, now: int) -> int:
        while self.maxima and self.maxima[0][0] < now - self.window:
            self.maxima.popleft()
        return self.maxima[0][1] if self.maxima else 0

    @property
    def size(self) -> int:
        return len(self.pending) + len(self.history)

    def state(self) -> dict:
        return {"pending": list(self.pending), "floor": self.floor, "maxima": list(self.maxima),
                "history": list(self.history)}

    def restore(self, st: dict) -> None:
        self.pending = deque(tuple(x) for x in st["pending"])
        self.floor = st["floor"]
        self.maxima = deque(tuple(x) for x in st["maxima"])
        self.history = deque(tuple(x) for x in st["history"])


_REASONS = {
    KEY: "a row with this key value came at an earlier timestamp, so this one may miss answers with rows dropped "
         "once the first joined",
    ORDERED: "its value is below the stream's value watermark (a row more than k earlier has a larger one), so it "
             "may miss answers with rows already dropped",
    None: "a row with this key arrived beyond the declared bound of an earlier one, so it may miss answers with rows "
          "already dropped",
}


class ConstraintWatch:
    """Every declared constraint on a query's streams (:attr:`Forest.constraints`), checked per closed timestamp."""

    def __init__(self, forest):
        from obda.errors import ExecutionError

        lags: dict[str, int] = {}
        for mf in forest.members:
            for n in mf.nodes:
                if n.constrained:
                    for pos, lag in n.expiry:
                        t = mf.member.table(n.key[pos][0]).name
                        lags[t] = min(lags.get(t, lag), lag)
        used = set(forest.constraints_used)
        self.watches = {c.name: Watch(c, lags, c.name in used) for c in forest.constraints}
        self.monitors = forest.monitors
        self.removal: dict[tuple[str, str], list[tuple[int, tuple[int, ...]]]] = {}
        for c in forest.constraints:
            if c.name not in used:
                continue
            for table, cols in ((c.left, [a for a, _ in c.on]), (c.right, [b for _, b in c.on])):
                spots = []
                for p in forest.pipelines:
                    if p.table.name != table or p.member < 0:
                        continue
                    at = [p.attrs.index((p.alias, col)) if (p.alias, col) in p.attrs else None for col in cols]
                    if None in at:
                        raise ExecutionError(f"constraint {c.name!r}: stream {table!r} is read through a view "
                                             "(rr:sqlQuery) by this query; k-constraints apply to streams read directly",
                                             c.location)
                    spots.append((p.id, tuple(at)))
                self.removal[(c.name, table)] = spots
        self.relaxed = False

    def admit(self, ts: int, groups: dict[int, Counted]) -> tuple[dict[int, Counted], list[dict]]:
        """The groups of closed timestamp ``ts`` without the rows that violate a used constraint, and their
        quarantine records (the local backend: the groups of every pipeline of the timestamp)."""
        bad, quarantine = self.check(ts, groups)
        for (name, table), keys in bad.items():
            for pid, at in self.removal.get((name, table), ()):
                g = groups.get(pid)
                if g:
                    for k in [k for k in g if tuple(k[i] for i in at) in keys]:
                        del g[k]
        return groups, quarantine

    def check(self, ts: int, groups: dict[int, Counted]) -> tuple[dict[tuple[str, str], set], list[dict]]:
        """Check the rows of closed timestamp ``ts`` (``groups``: pipeline id → counted rows; the monitors'
        are consumed here).  Returns ``(constraint, stream) → keys`` of the rows to take out of the query's
        input (their key columns are the constraint's, in its order) and the quarantine records.  Both
        backends call it once per closed timestamp with rows, in timestamp order."""
        from obda.execution.rows import micros_to_iso

        rows: dict[str, dict[str, Counted]] = {}
        for name, table, pid in self.monitors:
            rows.setdefault(name, {})[table] = groups.pop(pid, None) or {}
        out: dict[tuple[str, str], set] = {}
        quarantine = []
        for name, w in self.watches.items():
            was = w.in_use
            bad = w.check(ts, rows.get(name, {}))
            if was and not w.in_use:
                self.relaxed = True
            if not w.used:
                continue
            for table, keys in bad.items():
                c = w.c
                cols = [a for a, _ in c.on] if table == c.left else [b for _, b in c.on]
                for key in keys:
                    quarantine.append({
                        "stream": table, "constraint": name, "ts": micros_to_iso(ts),
                        "key": dict(zip(cols, key)), "rows": rows[name][table][key],
                        "reason": f"constraint violation: {name} ({c.describe()}): "
                                  + _REASONS.get(c.kind, _REASONS[None])
                                  + "; quarantined, with its answers",
                    })
                out[(name, table)] = set(keys)
        return out, quarantine

    def report(self, now: int | None) -> dict:
        return {name: w.report(now) for name, w in self.watches.items()}

    # -- checkpointed state ----------------------------------------------------------------------------
    def state(self) -> dict:
        """What the watches observed, as plain data for the checkpoint (no class of obda's): constraint name →
        :meth:`Watch.state`, and whether a constraint stopped being used."""
        return {"watches": {name: w.state() for name, w in self.watches.items()}, "relaxed": self.relaxed}

    def restore(self, st: dict) -> None:
        """Back to what :meth:`state` recorded, into the watches of the declared constraints (a constraint
        declared since starts unobserved; one no longer declared is not watched)."""
        for name, w in self.watches.items():
            if name in st["watches"]:
                w.restore(st["watches"][name])
        self.relaxed = st["relaxed"]

    def watermarks(self, closed: int) -> dict:
        """What the synopses drop entries by at ``closed``: OA constraint → its value watermark, key → True,
        while the query drops state by it (else None)."""
        out = {name: w.ordered.watermark(closed) if w.used and w.in_use else None
               for name, w in self.watches.items() if w.ordered is not None}
        out.update({name: True if w.used and w.in_use else None for name, w in self.watches.items()
                    if w.unique is not None})
        return out

    @property
    def incomplete_since(self) -> int | None:
        ts = [w.first_quarantined for w in self.watches.values() if w.first_quarantined is not None]
        return min(ts) if ts else None
