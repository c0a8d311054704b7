"""k-constraints on streams (Babu et al. 2004), in application time: what a sources file may declare.

Declared under ``constraints:`` in the sources file (parsed by :mod:`obda.model.sources_file`)::

    constraints:
      - name: alarm_near_reading
        referential: {from: alarm, to: measurement, on: [sensor_id]}   # RI(k): a many-one join
        after: PT5M        # the joining `to` row arrives at most 5 min after the `from` row …
        before: PT5M       # … and at most 5 min before it (omit a side: unbounded that way)
      - name: readings_clustered
        clustered: {stream: measurement, column: sensor_id}             # CA(k)
        within: PT2M       # rows with one value arrive within 2 min of each other
      - name: alarms_ordered
        ordered: {stream: alarm, column: severity}                      # OA(k)
        within: PT1M       # a row at least 1 min later has a value no smaller

Durations are ``xsd:dayTimeDuration`` literals (``PT5M``, ``P1DT2H``, ``PT0.5S``).  Monitoring settings
(the paper's §4.3): ``margin`` (``c ≥ 1``: violations up to ``c·k`` are measured exactly), ``sample``
(``p``: the share of keys kept beyond the margin, to measure larger increases), ``window`` (``W``: the
estimated ``k`` is the largest distance seen in the last ``W``), ``max_violation_rate`` (above it, over the
last ``W``, the constraint stops being used: the paper's ``k_u = ∞``), ``bloom_bits`` (the index of keys
that left the margin).

A time-based RI(k) relates **every** joining pair: for rows ``f`` of ``from`` and ``t`` of ``to`` with equal
``on`` columns, ``−before ≤ τ_t − τ_f ≤ after``.  CA(k) is RI(k) of a stream with itself on its column.  So
both are difference constraints between stream timestamps (:mod:`obda.analysis.windows`), which the
analysis adds to the ones a query states itself (docs/analysis.md, "k-constraints").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from obda.errors import Location

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,6})?)S)?)?$")

REFERENTIAL, CLUSTERED, ORDERED = "referential", "clustered", "ordered"
KINDS = (REFERENTIAL, CLUSTERED, ORDERED)  # what ``constraints:`` declares
KEY = "key"  # a stream's declared key (``key:`` of the table, no timestamp): one row per value, ever
PAPER_NAMES = {REFERENTIAL: "RI", CLUSTERED: "CA", ORDERED: "OA"}


def parse_duration(text: str) -> int | None:
    """A non-negative ``xsd:dayTimeDuration`` (``PT5M``) in microseconds; None when ``text`` is not one."""
    text = str(text).strip()
    m = _DURATION.match(text)
    if m is None or text == "P" or text.endswith("T"):
        return None
    d, h, mi, s = m.groups()
    seconds = Decimal(s or 0) + 60 * int(mi or 0) + 3600 * int(h or 0) + 86400 * int(d or 0)
    return int(seconds * 1_000_000)


def format_duration(us: int) -> str:
    """Microseconds as the shortest ``xsd:dayTimeDuration``: ``PT5M``, ``PT1.5S``, ``P1DT2H``."""
    days, rest = divmod(int(us), 86_400_000_000)
    h, rest = divmod(rest, 3_600_000_000)
    mi, rest = divmod(rest, 60_000_000)
    s = Decimal(rest) / 1_000_000
    t = (f"{h}H" if h else "") + (f"{mi}M" if mi else "") + (f"{s.normalize():f}S" if rest else "")
    out = "P" + (f"{days}D" if days else "") + (f"T{t}" if t else "")
    return out if out != "P" else "PT0S"


def key_constraint(table) -> Constraint:
    """A stream table's declared key as a constraint the executor watches when a many-one join drops synopsis
    entries by it (forest rule ``keyed_consumption``): a second row with a key value breaks it."""
    return Constraint(f"{table.name}:key", KEY, table.name, table.name, tuple((k, k) for k in table.key), None, None,
                      Monitoring(window=60_000_000), location=table.source_location)  # rate over the last minute


@dataclass(frozen=True)
class Monitoring:
    """How the executor watches a constraint (Babu et al. §4.3): ``c``, ``p``, ``W`` and the disabling rate."""

    margin: float = 2.0
    sample: float = 0.01
    window: int | None = None  # µs; None: 10 × the constraint's largest k, at least 1 s
    max_violation_rate: float = 0.05
    bloom_bits: int = 1 << 23


@dataclass(frozen=True)
class Constraint:
    """One declared k-constraint (see the module docstring).

    ``kind``: referential (RI), clustered (CA) or ordered (OA).  ``left``/``right``: the two streams
    (``from``/``to`` of RI; the one stream, twice, for CA and OA); ``on``: pairs of equated columns (CA, OA:
    ``((column, column),)``).  ``after``/``before``: the bounds in µs of ``τ_right − τ_left`` and
    ``τ_left − τ_right`` (None: unbounded that way); CA and OA have ``after = before = within``."""

    name: str
    kind: str
    left: str
    right: str
    on: tuple[tuple[str, str], ...]
    after: int | None
    before: int | None
    monitoring: Monitoring = field(default_factory=Monitoring)
    location: Location = field(default_factory=Location, compare=False)

    @property
    def within(self) -> int:
        """The largest declared k (µs); 0 for a key."""
        return max((v for v in (self.after, self.before) if v is not None), default=0)

    @property
    def exploitable(self) -> bool:
        """RI and CA bound the distance between joining timestamps; OA bounds values (it drops state by a
        value watermark, obda.analysis.forest.order, but bounds no verdict)."""
        return self.kind in (REFERENTIAL, CLUSTERED)

    @property
    def window(self) -> int:
        return self.monitoring.window if self.monitoring.window is not None else max(10 * self.within, 1_000_000)

    def bounds(self) -> list[tuple[str, int]]:
        """The declared bounds as ``(side, µs)``: ``after`` bounds ``τ_right − τ_left``, ``before`` the reverse."""
        return [(s, v) for s, v in (("after", self.after), ("before", self.before)) if v is not None]

    def describe(self) -> str:
        """The paper's notation with obda's sides: ``RI(alarm → measurement on sensor_id, after PT5M, before PT5M)``."""
        cols = ", ".join(a if a == b else f"{a} = {b}" for a, b in self.on)
        if self.kind == KEY:
            return f"key({self.left}: {cols})"
        if self.kind == REFERENTIAL:
            sides = ", ".join(f"{s} {format_duration(v)}" for s, v in self.bounds())
            return f"RI({self.left} → {self.right} on {cols}, {sides})"
        return f"{PAPER_NAMES[self.kind]}({self.left}.{cols}, {format_duration(self.within)})"

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "constraint": self.describe(), "left": self.left,
                "right": self.right, "on": [list(p) for p in self.on],
                "after": format_duration(self.after) if self.after is not None else None,
                "before": format_duration(self.before) if self.before is not None else None}
