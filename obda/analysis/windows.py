"""Interval joins: difference constraints between stream timestamps (docs/analysis.md, "Interval joins").

A member whose condition relates stream timestamps by ``τ_a op τ_b + d`` (``d`` a duration, ``0`` for
Schiff and Özçep's order constraints) has a system of *difference constraints* ``τ_x − τ_y ≤ c``.
Time is discrete (microseconds), so ``τ_x < τ_y + d`` is ``τ_x − τ_y ≤ d − 1``.  Shortest paths in
the constraint graph (Floyd–Warshall, the standard closure of a difference-bound matrix) give for
every ordered pair the tightest bound ``dist[x][y] ≥ τ_x − τ_y``; a negative cycle is a contradiction.

The member is *windowed* when every pair is bounded both ways: then all the timestamps of one
answer lie within ``width = max dist`` of each other.  When a timestamp ``T`` closes, a row (or a
partial join) that carries the timestamp ``τ_y`` of alias ``y`` can only be completed by rows of a
later timestamp ``τ_x ≤ τ_y + lag(y)``, where ``lag(y) = max_x dist[x][y]``: once
``τ_y + lag(y) ≤ T`` it is dead and is dropped.  The state is the rows of the last ``width`` —
independent of the stream's length, proportional to its rate (the "window, per solution" promise).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from obda.analysis.elements import FLIP

INF = float("inf")

_UNIT_MICROS = {"MICROSECOND": 1, "MILLISECOND": 1_000, "SECOND": 1_000_000, "MINUTE": 60_000_000,
                "HOUR": 3_600_000_000, "DAY": 86_400_000_000}
ORDER_OPS = {exp.LT: "<", exp.LTE: "<=", exp.EQ: "=", exp.GTE: ">=", exp.GT: ">"}  # comparison class → op


def interval_micros(node: exp.Interval) -> int:
    """``INTERVAL 'n' unit`` in microseconds; ValueError for months, years or a non-number."""
    unit = (node.unit.name if node.unit is not None else "").upper().rstrip("S")
    amount = node.this.name if isinstance(node.this, exp.Literal) else None
    if unit not in _UNIT_MICROS or amount is None:
        raise ValueError(f"write INTERVAL 'n' with a unit from MICROSECOND to DAY, not {node.sql()}")
    return int(Fraction(amount) * _UNIT_MICROS[unit])


def implied_order(op: str, micros: int) -> str | None:
    """The order between ``a`` and ``b`` that ``a op b + micros`` implies (``<``, ``<=``, ``>``, ``>=``), if any."""
    if op in ("<", "<=") and (micros < 0 or (micros == 0 and op == "<")):
        return "<"
    if op in ("<", "<=") and micros == 0:
        return "<="
    if op in (">", ">=") and (micros > 0 or (micros == 0 and op == ">")):
        return ">"
    if op in (">", ">=") and micros == 0:
        return ">="
    return None


def interval_comparison(c: exp.Expression) -> tuple[exp.Column, str, exp.Column, int] | None:
    """``a op b ± INTERVAL …`` (either side moved) as ``(a, op, b, micros)`` meaning ``a op b + micros``;
    None when ``c`` is not a comparison of a column with a column moved by an interval."""
    op = ORDER_OPS.get(type(c))
    if op is None:
        return None

    def shifted(e):
        e = e.unnest()
        if isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval):
            base = e.this.unnest()
            if isinstance(base, exp.Column):
                micros = interval_micros(e.expression)
                return base, micros if isinstance(e, exp.Add) else -micros
        return None

    left, right = c.this.unnest(), c.expression.unnest()
    sl, sr = shifted(left), shifted(right)
    if (sl is None) == (sr is None):
        return None
    if sl is not None:  # b + d op a  ⟺  a flip(op) b + d
        (col, micros), other, op = sl, right, FLIP[op]
    else:
        (col, micros), other = sr, left
    if not isinstance(other, exp.Column):
        return None
    return other, op, col, micros


def constraint(left: str, op: str, right: str, micros: int = 0) -> list[tuple[str, str, int]]:
    """``left op right + micros`` as difference constraints ``(x, y, c)``: ``τ_x − τ_y ≤ c``."""
    if op == "<=":
        return [(left, right, micros)]
    if op == "<":
        return [(left, right, micros - 1)]
    if op == ">=":
        return [(right, left, -micros)]
    if op == ">":
        return [(right, left, -micros - 1)]
    if op == "=":
        return [(left, right, micros), (right, left, -micros)]
    return []  # != bounds nothing


@dataclass(frozen=True)
class Bounds:
    """The closure of a system of difference constraints over named timestamps."""

    names: tuple[str, ...]
    dist: tuple[tuple[float, ...], ...]  # dist[i][j] ≥ τ_i − τ_j (INF: unbounded)
    contradiction: bool = False

    def upper(self, x: str, y: str) -> float:
        """The tightest upper bound of ``τ_x − τ_y``."""
        return self.dist[self.names.index(x)][self.names.index(y)]

    @property
    def windowed(self) -> bool:
        """Whether every pair of timestamps is bounded both ways."""
        return all(d < INF for row in self.dist for d in row)

    @property
    def width(self) -> int:
        """The largest distance between two timestamps of one solution (windowed members)."""
        return int(max((d for row in self.dist for d in row), default=0))

    def lag(self, y: str) -> float:
        """How much later than ``τ_y`` another timestamp of the same solution can be."""
        i = self.names.index(y)
        return max((row[i] for row in self.dist), default=0)

    def unbounded_pair(self) -> tuple[str, str] | None:
        """Some ``(x, y)`` with ``τ_x − τ_y`` unbounded, or None."""
        for i, x in enumerate(self.names):
            for j, y in enumerate(self.names):
                if self.dist[i][j] == INF:
                    return x, y
        return None


def close(names, constraints) -> Bounds:
    """Floyd–Warshall over ``constraints`` (``(x, y, c)``: ``τ_x − τ_y ≤ c``) on the timestamps ``names``."""
    names = tuple(dict.fromkeys(names))
    idx = {n: i for i, n in enumerate(names)}
    n = len(names)
    dist = [[0 if i == j else INF for j in range(n)] for i in range(n)]
    for x, y, c in constraints:
        i, j = idx[x], idx[y]
        dist[i][j] = min(dist[i][j], c)
    for k in range(n):
        dk = dist[k]
        for i in range(n):
            dik = dist[i][k]
            if dik == INF:
                continue
            di = dist[i]
            for j in range(n):
                v = dik + dk[j]
                if v < di[j]:
                    di[j] = v
    contradiction = any(dist[i][i] < 0 for i in range(n))
    return Bounds(names, tuple(tuple(r) for r in dist), contradiction)


def member_differences(m) -> list[tuple[str, str, int]]:
    """An SPJ member's own timestamp constraints (``obda.analysis.normal_form.SpjMember``) as differences
    ``(a, b, c)``: its order predicates between stream timestamps and its interval-join differences."""
    streams = {r.timestamp: r.alias for r in m.relations if r.is_stream}
    cons = [c for p in m.predicates if p.left in streams and p.right in streams
            for c in constraint(streams[p.left], p.op, streams[p.right])]
    return cons + [c for d in m.differences for c in constraint(d.left.alias, d.op, d.right.alias, d.micros)]


def member_bounds(m) -> Bounds:
    """The closure of an SPJ member's timestamp constraints over its stream aliases."""
    return close([r.alias for r in m.relations if r.is_stream], member_differences(m))


def describe_micros(us: float) -> str:
    """A duration for people: ``5 min``, ``90 s``, ``1.5 ms``."""
    if us == INF:
        return "unbounded"
    us = int(us)
    for unit, size in (("h", 3_600_000_000), ("min", 60_000_000), ("s", 1_000_000), ("ms", 1_000)):
        for v in (us, us + 1):  # a strict bound (< 4 min) is 4 min less one microsecond
            if abs(v) >= size and v % size == 0:
                return f"{v // size} {unit}"
    if abs(us) >= 1_000_000:
        return f"{us / 1_000_000:g} s"
    return f"{us} µs"
