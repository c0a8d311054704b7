"""k-constraints in the analysis (docs/analysis.md, "k-constraints"; Babu et al. 2004 §4–6, 8).

A declared RI(k) on ``from → to`` (columns ``on``) says that rows of the two streams with equal ``on``
values arrive within ``[−before, after]`` of each other; CA(k) says the same of two rows of one stream with
equal values of its column.  In a member where an alias ``x`` of ``from`` and an alias ``y`` of ``to`` are
equated on every ``on`` column (directly or through other equalities), the constraint is a pair of
difference constraints ``τ_y − τ_x ≤ after`` and ``τ_x − τ_y ≤ before``, added to the ones the query states
(:mod:`obda.analysis.windows`).  When the closure then bounds every pair of timestamps, the member keeps the
rows of a window — **bounded under the constraints**, proportional to what arrives within k.  The plain
verdict stays the member's verdict: the constrained one holds only while the data keeps the constraints,
which the executor monitors (:mod:`obda.execution.constraints`).  OA(k) bounds values, not timestamps: it
lets the executor drop state (:mod:`obda.analysis.forest.order`) but changes no verdict (``ordered_note``).
"""

from __future__ import annotations

from dataclasses import dataclass

from obda.analysis.elements import Attr
from obda.analysis.report import BOUNDED
from obda.analysis.windows import Bounds, close, describe_micros, member_differences
from obda.model.constraints import ORDERED, Constraint


@dataclass(frozen=True)
class Use:
    """A constraint applied to two aliases of a member: ``x`` reads its ``left`` stream, ``y`` its ``right``."""

    constraint: Constraint
    x: str
    y: str

    def differences(self) -> list[tuple[str, str, int]]:
        """``(a, b, c)``: ``τ_a − τ_b ≤ c``."""
        c = self.constraint
        out = []
        if c.after is not None:
            out.append((self.y, self.x, c.after))
        if c.before is not None:
            out.append((self.x, self.y, c.before))
        return out


@dataclass(frozen=True)
class ConstrainedVerdict:
    """A member's verdict under the declared constraints that apply to it (its plain verdict is kept)."""

    verdict: str
    constraints: tuple[str, ...]
    memory: str = ""
    lags: tuple[tuple[str, str], ...] = ()  # alias -> how long its rows are kept
    note: str = ""

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "constraints": list(self.constraints),
                **({"memory": self.memory} if self.memory else {}),
                "keeps": {a: lag for a, lag in self.lags}, **({"note": self.note} if self.note else {})}


class _Classes:
    """Union-find over a member's equality predicates between attributes."""

    def __init__(self, pairs):
        self.parent: dict = {}
        for a, b in pairs:
            self.parent[self.find(a)] = self.find(b)

    def find(self, a):
        p = self.parent.setdefault(a, a)
        if p != a:
            p = self.parent[a] = self.find(p)
        return p

    def same(self, a, b) -> bool:
        return a == b or self.find(a) == self.find(b)


def equalities(pairs) -> _Classes:
    """Equality classes of ``pairs`` (any hashable attributes)."""
    return _Classes(pairs)


def uses(aliases: list[tuple[str, str]], classes: _Classes, constraints, attr=Attr) -> list[Use]:
    """The constraints that apply to a member: ``aliases`` are its stream ``(alias, table)`` pairs;
    ``classes`` its equality classes of ``attr(alias, column)`` (the analysis' and the forest's attributes)."""
    out = []
    low = [(a, t.lower()) for a, t in aliases]
    for c in constraints:
        if not c.exploitable:
            continue
        for x, tx in low:
            if tx != c.left.lower():
                continue
            for y, ty in low:
                if x == y or ty != c.right.lower():
                    continue
                if c.left.lower() == c.right.lower() and (y, x) in [(u.x, u.y) for u in out if u.constraint is c]:
                    continue  # CA: one use per pair of aliases (it bounds both ways)
                if all(classes.same(attr(x, a), attr(y, b)) for a, b in c.on):
                    out.append(Use(c, x, y))
    return out


def constrained_bounds(names, own: list[tuple[str, str, int]], used: list[Use]) -> Bounds:
    return close(names, own + [d for u in used for d in u.differences()])


def _member_parts(m):
    streams = [(r.alias, r.table.name) for r in m.relations if r.is_stream]
    own = member_differences(m)
    eq = equalities((p.left, p.right) for p in m.predicates
                    if p.op == "=" and isinstance(p.left, Attr) and isinstance(p.right, Attr))
    return streams, own, eq


def constrained_verdict(m, plain: str, constraints) -> ConstrainedVerdict | None:
    """The verdict of SPJ member ``m`` (:class:`~obda.analysis.normal_form.SpjMember`, plain verdict ``plain``)
    under the declared ``constraints`` that apply to it; None when none applies."""
    streams, own, eq = _member_parts(m)
    used = uses(streams, eq, constraints)
    if not used:
        return None
    names = tuple(dict.fromkeys(u.constraint.name for u in used))
    b = constrained_bounds([a for a, _ in streams], own, used)
    if b.contradiction:
        return ConstrainedVerdict(BOUNDED, names, note="the constraints and the query's time conditions contradict "
                                                       "each other: no answer")
    if not b.windowed:
        x, y = b.unbounded_pair()
        return ConstrainedVerdict(plain, names, note=(
            f"the constraints {', '.join(names)} do not bound {m.relation(x).table.name} ({x}) relative to "
            f"{m.relation(y).table.name} ({y}): {_missing(x, y, used)}"))
    if m.distinct:
        return ConstrainedVerdict(plain, names, note=(
            "SELECT DISTINCT keeps every answer it has emitted, which the constraints do not bound: drop DISTINCT "
            "(the bag version keeps the rows of a window)"))
    lags = tuple((a, f"rows of the last {describe_micros(b.lag(a))}" if b.lag(a) > 0 else "nothing (joined on arrival)")
                 for a, _ in streams)
    memory = (f"window, per solution: the rows of the last {describe_micros(b.width)} and their partial joins, "
              "while the data keeps the constraints (monitored) — independent of the streams' length, "
              "proportional to what arrives within k")
    return ConstrainedVerdict(BOUNDED, names, memory, lags)


def _missing(x: str, y: str, used: list[Use]) -> str:
    for u in used:
        c = u.constraint
        if {u.x, u.y} == {x, y}:
            side = "after" if c.after is None else "before"
            return f"{c.name} has no '{side}' bound (declare how much {'later' if side == 'after' else 'earlier'} " \
                   f"the joining {c.right} row can arrive)"
    return "no declared constraint relates them"


def suggestion(m) -> str | None:
    """A hint for a member that is not bounded: the RI constraints whose declaration would bound it."""
    streams, own, eq = _member_parts(m)
    if len(streams) < 2 or m.distinct:
        return None
    names = [a for a, _ in streams]
    added: list[tuple[str, str, int]] = []
    wanted = []
    for i, (x, tx) in enumerate(streams):
        for y, ty in streams[i + 1:]:
            cols = [(a.column, b.column) for a in _attrs_of(eq, x) for b in _attrs_of(eq, y)
                    if eq.same(a, b) and a.column != m.relation(x).table.timestamp]
            if not cols:
                continue
            b = close(names, own + added)
            if b.upper(y, x) < float("inf") and b.upper(x, y) < float("inf"):
                continue
            added += [(y, x, 1), (x, y, 1)]
            wanted.append((tx, ty, cols[0]))
            if close(names, own + added).windowed:
                break
    if not wanted or not close(names, own + added).windowed:
        return None
    decl = "; ".join(f"RI({a} → {b} on {ca if ca == cb else f'{ca} = {cb}'}, after PT5M, before PT5M)"
                     for a, b, (ca, cb) in wanted)
    return (f"declaring {decl} in the sources file (constraints:) would bound this: the rows of "
            f"{' and '.join(dict.fromkeys(t for w in wanted for t in w[:2]))} with equal keys arrive within minutes "
            "of each other, so each row is kept only that long (the executor checks the data keeps it)")


def ordered_note(m, constraints) -> str | None:
    """A note for member ``m`` when a declared OA(k) is on a column it joins on: the executor drops state by
    it (forest rule ``order_expiry``), though it bounds no verdict."""
    streams, _, eq = _member_parts(m)
    names = []
    for c in constraints:
        if c.kind != ORDERED:
            continue
        col = c.on[0][0]
        for x, table in streams:
            if table.lower() == c.left.lower() and any(
                    a.alias != x and eq.same(a, Attr(x, col)) for a in list(eq.parent) if isinstance(a, Attr)):
                names.append(c.describe())
                break
    if not names:
        return None
    return (f"{', '.join(names)}: at run time the synopses drop the rows whose join value is below the stream's "
            "value watermark (its largest value more than k ago), and rows that break it are quarantined; it "
            "bounds no verdict (the joined streams' values could drift apart)")


def _attrs_of(eq: _Classes, alias: str) -> list[Attr]:
    return [a for a in list(eq.parent) if isinstance(a, Attr) and a.alias == alias]


__all__ = ["ConstrainedVerdict", "Use", "constrained_verdict", "ordered_note", "suggestion", "uses", "equalities"]
