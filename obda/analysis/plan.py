"""Synopsis plans for bounded members (spec §5 evaluation strategies, Arasu §7).

For every relation of a bounded modified query the plan says what is kept:

* ``filter_only`` — the only infinite stream of a duplicate-preserving query:
  tuples are filtered (and joined with stored finite relations) and written
  out; nothing is kept.
* ``pass_through`` — the root of a single tree (Theorem 1): a root tuple joins
  only past tuples and is written out at once, never stored.
* ``counts`` — Theorem 1 / Arasu 5.6: distinct projections of the filtered
  tuples on the bounded key attributes, each with a count, split into
  ``current`` (this timestamp) and ``past``.
* ``existence`` — Theorem 2 / Arasu 5.10: distinct key projections with the
  timestamp at which each was first stored, plus the extreme value of the
  MaxRef/MinRef attributes (Arasu §7.2); outputs already written are
  remembered to suppress duplicates.
* ``store_all`` — finite streams and static relations are stored whole.
* ``prefix`` — a stream that would be ``filter_only`` / ``pass_through`` in a
  member with finite streams: the finite streams' later tuples still join its
  earlier ones, so its tuples are kept up to their last timestamp (a bounded
  prefix: finitely many timestamps, boundedly many tuples each), then none.

The size bound is the product of the key domains: a number when every key is
bounded by constants, else an expression in ``|dom(X.b)|`` of the static /
finite attributes that bound it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from obda.analysis.closure import Closure
from obda.analysis.criteria import criterion_for, exempt_stream
from obda.analysis.elements import Attr, Const
from obda.analysis.preprocess import FINITE, INFINITE, ModifiedQuery
from obda.model.sources import ColumnType


@dataclass(frozen=True)
class KeyDomain:
    """How many values a kept attribute can take."""

    attribute: str
    size: int | None  # None: bounded by a static / finite attribute, size unknown before run time
    expression: str  # e.g. "4" or "|dom(m3.kind)|"
    range: str  # e.g. "0 < T.D < 5" or "T.D = 'x'"

    def to_dict(self) -> dict:
        return {"attribute": self.attribute, "size": self.size, "expression": self.expression, "range": self.range}


@dataclass(frozen=True)
class Extreme:
    """Arasu §7.2 representative: keep the tuple maximising min(attrs) (MaxRef) or minimising max(attrs) (MinRef)."""

    attributes: tuple[str, ...]
    keep: str  # max | min

    def to_dict(self) -> dict:
        agg = "min" if self.keep == "max" else "max"
        return {"attributes": list(self.attributes), "keep": self.keep,
                "rule": f"keep the tuple with the {self.keep}imum of {agg}({', '.join(self.attributes)})"}


@dataclass(frozen=True)
class StreamPlan:
    """What one relation keeps (machine-readable for the executor)."""

    stream: str
    aliases: tuple[str, ...]
    tables: tuple[str, ...]
    kind: str  # infinite | finite | static
    parent: str | None
    depth: int | None
    strategy: str  # filter_only | pass_through | counts | existence | store_all
    keys: tuple[KeyDomain, ...] = ()
    counts: bool = False
    first_timestamp: bool = False
    current_past_split: bool = False
    extreme: Extreme | None = None
    filters: tuple[str, ...] = ()
    bound: str = ""
    bound_value: int | None = None
    until: int | None = None  # ``prefix``: the last timestamp (µs) up to which tuples are kept

    @property
    def keeps(self) -> list[str]:
        out = [k.attribute for k in self.keys]
        if self.counts:
            out.append("count")
        if self.first_timestamp:
            out.append("first timestamp")
        if self.extreme:
            out.append(f"{self.extreme.keep}({', '.join(self.extreme.attributes)})")
        if self.strategy == "store_all":
            out = ["all tuples"]
        return out

    def to_dict(self) -> dict:
        return {
            "keeps": self.keeps, "bound": self.bound, "bound_value": self.bound_value,
            "kind": self.kind, "parent": self.parent, "depth": self.depth, "strategy": self.strategy,
            "aliases": list(self.aliases), "tables": list(self.tables),
            "keys": [k.to_dict() for k in self.keys], "counts": self.counts,
            "first_timestamp": self.first_timestamp, "current_past_split": self.current_past_split,
            "extreme": self.extreme.to_dict() if self.extreme else None, "filters": list(self.filters),
            **({"until": self.until} if self.until is not None else {}),
        }


@dataclass(frozen=True)
class SynopsisPlan:
    criterion: str
    streams: tuple[StreamPlan, ...]
    output_cache: bool = False  # duplicate elimination: remember written outputs (bounded by C1)
    total: str = ""
    total_value: int | None = None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {s.stream: s.to_dict() for s in self.streams}

    def summary(self) -> dict:
        return {"criterion": self.criterion, "output_cache": self.output_cache, "total": self.total,
                "total_value": self.total_value, "notes": list(self.notes)}


def _fmt(c: Const) -> str:
    return str(c)


def key_domain(mq: ModifiedQuery, cl: Closure, a: Attr) -> KeyDomain:
    """The size of the set of values ``a`` can take under ``P⁺``."""
    t = mq.member.types[a]
    pins = cl.bounding_in_class(a)
    consts = [p for p in pins if isinstance(p, Const)]
    if consts:
        return KeyDomain(str(a), 1, "1", f"{a} = {consts[0]}")
    if pins:
        return KeyDomain(str(a), None, f"|dom({pins[0]})|", f"{a} = {pins[0]}")
    if t is ColumnType.BOOLEAN:
        return KeyDomain(str(a), 2, "2", f"{a} boolean")
    lo, lo_s, hi, hi_s = cl.constant_range(a)
    if lo is not None and hi is not None and isinstance(lo.value, (Fraction, int)) and isinstance(hi.value, (Fraction, int)):
        low = int(lo.value) + (1 if lo_s else 0) if Fraction(lo.value).denominator == 1 else int(Fraction(lo.value).__ceil__())
        high = int(hi.value) - (1 if hi_s else 0) if Fraction(hi.value).denominator == 1 else int(Fraction(hi.value).__floor__())
        size = max(0, high - low + 1)
        rng = f"{lo} {'<' if lo_s else '<='} {a} {'<' if hi_s else '<='} {hi}"
        return KeyDomain(str(a), size, str(size), rng)
    below, above = cl.bounds_of(a)
    lo_e = str(lo) if lo is not None else (f"min(dom({below[0]}))" if below else "?")
    hi_e = str(hi) if hi is not None else (f"max(dom({above[0]}))" if above else "?")
    names = [str(x) for x in (below[:1] + above[:1]) if isinstance(x, Attr)]
    expr = " + ".join(f"|dom({n})|" for n in names) if names else "?"
    return KeyDomain(str(a), None, f"range({lo_e} .. {hi_e})" if not names else expr, f"{lo_e} ≤ {a} ≤ {hi_e}")


def _filters(mq: ModifiedQuery, cl: Closure, stream: str) -> tuple[str, ...]:
    """Filter predicates of one stream in ``P⁺`` (its attributes among themselves and with constants)."""
    mine = [e for e in cl.elements if isinstance(e, Attr) and mq.stream_of_attr(e) == stream]
    consts = [e for e in cl.elements if isinstance(e, Const)]
    atoms = cl.relations(mine + consts)
    return tuple(f"{a} {op} {b}" for a, op, b in atoms if not (isinstance(a, Const) and isinstance(b, Const))
                 and not _implied_by_chain(cl, a, op, b, consts))


def _implied_by_chain(cl: Closure, a, op, b, consts) -> bool:
    """Hide ``A < 10`` when ``A < 5`` is there (keep the tightest constant bounds)."""
    if isinstance(b, Const):
        return any(c != b and cl.rel(a, c) in ("<", "=", "<=") and cl.rel(c, b) == "<" for c in consts)
    if isinstance(a, Const):
        return any(c != a and cl.rel(c, b) in ("<", "=", "<=") and cl.rel(a, c) == "<" for c in consts)
    return False


def _subtree(mq: ModifiedQuery, stream: str) -> set[str]:
    """The stream and its descendants in the dependency graph (children are earlier streams)."""
    g = mq.graph
    if stream not in g.nodes:
        return {stream}
    out, todo = set(), [stream]
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(g.children(n))
    return out


def _needed(mq: ModifiedQuery, cl: Closure, stream: str) -> list[Attr]:
    """Attributes the synopsis of ``stream`` must be keyed by.

    Its own attributes, and those of its descendants (whose join results it
    summarises: a parent's count or first-join timestamp is per combination
    with its children's past synopses), that the projection needs or that
    join a relation outside this subtree. Without the descendants' keys a
    parent could not tell which projected child values it joined.
    """
    sub = _subtree(mq, stream)
    out: list[Attr] = []
    for a, _, b in mq.value_atoms:
        if isinstance(a, Attr) and isinstance(b, Attr) and mq.stream_of_attr(a) != mq.stream_of_attr(b):
            inside = [x for x in (a, b) if mq.stream_of_attr(x) in sub]
            if len(inside) == 1:
                out.extend(inside)
    out.extend(x for x in mq.projection if mq.stream_of_attr(x) in sub)
    reps: dict[int, Attr] = {}
    for x in out:
        reps.setdefault(cl.class_key(x), x)
    return list(reps.values())


def build_plan(mq: ModifiedQuery) -> SynopsisPlan:
    """The synopsis plan of a bounded modified query."""
    crit = criterion_for(mq)
    cl = mq.closure
    g = mq.graph
    root = exempt_stream(mq, crit)
    plans: list[StreamPlan] = []
    total_vals: list[int | None] = []
    total_expr: list[str] = []
    notes: list[str] = []
    for s in mq.streams:
        if s.kind != INFINITE:
            plans.append(StreamPlan(s.name, s.aliases, s.tables, s.kind, None, None, "store_all",
                                    bound=("finite: " + (s.reason or "")) if s.kind == FINITE else "static relation, stored whole"))
            continue
        parent = g.parent(s.name) if s.name in g.nodes else None
        depth = g.depth(s.name) if s.name in g.nodes else 0
        filters = _filters(mq, cl, s.name)
        if crit == "single_stream" or (root is not None and s.name == root):
            finite = [f for f in mq.streams if f.kind == FINITE]
            if finite:  # later tuples of the finite streams still join this stream's earlier tuples
                lasts = [f.last for f in finite]
                until = max(lasts) if all(v is not None for v in lasts) else None
                names = ", ".join(f.name for f in finite)
                plans.append(StreamPlan(
                    s.name, s.aliases, s.tables, s.kind, parent, depth, "prefix", filters=filters,
                    bound=f"≤ its tuples up to the last timestamp of the finite stream(s) {names}, then 0 entries",
                    until=until))
                total_vals.append(None)
                total_expr.append(f"|{s.name} up to the end of {names}|")
                continue
            strat = "filter_only" if crit == "single_stream" else "pass_through"
            plans.append(StreamPlan(s.name, s.aliases, s.tables, s.kind, parent, depth, strat, filters=filters,
                                    bound="0 entries (tuples are written out, never stored)", bound_value=0))
            total_vals.append(0)
            continue
        needed = [a for a in _needed(mq, cl, s.name) if cl.bounded(a)]
        keys = tuple(key_domain(mq, cl, a) for a in needed if not any(isinstance(p, Const) for p in cl.bounding_in_class(a)))
        extreme = None
        if mq.distinct:
            mx, mn = max_min_refs(mq, cl, s.name)
            if mx:
                extreme = Extreme(tuple(sorted(map(str, mx))), "max")
            elif mn:
                extreme = Extreme(tuple(sorted(map(str, mn))), "min")
        counts = not mq.distinct
        factor = 2 if counts else 1
        sizes = [k.size for k in keys]
        value = None if any(v is None for v in sizes) else factor * _prod(sizes)
        parts = ([str(factor)] if factor != 1 else []) + [k.expression for k in keys]
        expr = " × ".join(parts) if parts else "1"
        bound = f"≤ {value} entries" if value is not None else f"≤ {expr} entries"
        if counts:
            bound += " (current and past, one count each)"
        else:
            bound += " (each with its first timestamp" + (f" and the {extreme.keep} of {', '.join(extreme.attributes)}" if extreme else "") + ")"
        plans.append(StreamPlan(
            s.name, s.aliases, s.tables, s.kind, parent, depth, "counts" if counts else "existence", keys,
            counts=counts, first_timestamp=not counts, current_past_split=counts, extreme=extreme,
            filters=filters, bound=bound, bound_value=value))
        total_vals.append(value)
        total_expr.append(str(value) if value is not None else f"({expr})")
    if crit == "time_keyed":
        times = ", ".join(str(a) for a in mq.projected_times if mq.stream_of_attr(a) == mq.latest)
        notes.append(f"duplicate elimination remembers the answers of the open timestamp only: every answer carries "
                     f"the latest stream's timestamp ({times}), so answers of different timestamps differ")
    elif mq.distinct:
        out_keys = [key_domain(mq, cl, a) for a in mq.projection if not any(isinstance(p, Const) for p in cl.bounding_in_class(a))]
        sizes = [k.size for k in out_keys]
        v = None if any(x is None for x in sizes) else _prod(sizes)
        notes.append("duplicate elimination remembers written outputs: ≤ "
                     + (str(v) if v is not None else " × ".join(k.expression for k in out_keys) or "1") + " tuples")
    value = None if any(v is None for v in total_vals) else sum(v for v in total_vals if v is not None)
    total = (f"≤ {value} synopsis entries" if value is not None
             else "≤ " + " + ".join(e for e in total_expr if e != "0") + " synopsis entries")
    return SynopsisPlan(crit, tuple(plans), output_cache=mq.distinct and crit != "time_keyed", total=total, total_value=value, notes=tuple(notes))


def max_min_refs(mq: ModifiedQuery, cl: Closure, stream: str) -> tuple[list[Attr], list[Attr]]:
    """MaxRef / MinRef of a stream in ``P⁺`` (Def. 5.4)."""
    mine = mq.stream_attrs.get(stream, ())
    others = [a for s, attrs in mq.stream_attrs.items() if s != stream for a in attrs]
    mx, mn = [], []
    for a in mine:
        if cl.bounded(a):
            continue
        for b in others:
            if cl.rel(b, a) in ("<", "<=") and not cl.redundant(b, a):
                mx.append(a)
                break
        for b in others:
            if cl.rel(a, b) in ("<", "<=") and not cl.redundant(a, b):
                mn.append(a)
                break
    return mx, mn


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


__all__ = ["SynopsisPlan", "StreamPlan", "KeyDomain", "Extreme", "build_plan", "max_min_refs"]
