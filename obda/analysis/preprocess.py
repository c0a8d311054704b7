"""The four preprocessing steps of Schiff–Özçep (spec §3) → modified queries.

1. **Split disequalities**: every ``A ≠ B`` becomes ``A < B`` | ``A > B``;
   a timestamp ``τ_i ≤ τ_j`` between two streams becomes ``τ_i < τ_j`` |
   ``τ_i = τ_j``.  Each combination of choices is one *part*.
2. **Merge synchronous streams**: streams whose timestamps are equal in
   ``P⁺`` become one stream ``S_ij`` (name ``m1+m2``).
3. **Finite streams**: a stream whose timestamp is upper-bounded in ``P⁺``
   by a timestamp constant (or a timestamp attribute of a static relation)
   is finite: its tuples are stored whole and its attributes are bounding.
4. **LTO derivation** is *not* materialised: the polynomial checker
   (``criteria``) reasons over all derived LTO queries at once, the naive
   checker (``naive``) enumerates them.

For duplicate-eliminating members, redundant self-join occurrences (Arasu
Def. 8.2) are removed first (§8.1): the rewritten query is equivalent.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Mapping

from obda.analysis import terms
from obda.analysis.closure import Closure, integer_satisfiable
from obda.analysis.elements import TIMESTAMP_SPLITS, Attr, Const, Element, Predicate
from obda.analysis.graph import DependencyGraph
from obda.analysis.normal_form import SpjMember
from obda.errors import AnalysisError
from obda.model.sources import ColumnType

MAX_PARTS = 4096

INFINITE, FINITE, STATIC = "infinite", "finite", "static"


@dataclass(frozen=True)
class Stream:
    """A relation of a modified query: an (possibly merged) infinite stream, a finite stream or a static relation."""

    name: str
    aliases: tuple[str, ...]
    tables: tuple[str, ...]
    kind: str  # infinite | finite | static
    timestamps: tuple[str, ...] = ()
    reason: str | None = None  # why finite
    last: int | None = None  # a finite stream's last timestamp (µs since the epoch) when a constant bounds it

    def to_dict(self) -> dict:
        return {"kind": self.kind, "aliases": list(self.aliases), "tables": list(self.tables),
                "timestamps": list(self.timestamps), **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True)
class ModifiedQuery:
    """One preprocessed part of an SPJ member (spec §3), ready for the criteria."""

    member: SpjMember
    part: int
    choices: tuple[str, ...]
    satisfiable: bool
    reason: str | None
    streams: tuple[Stream, ...] = ()
    stream_of: Mapping[str, str] = field(default_factory=dict)  # alias -> stream name
    value_atoms: tuple[tuple[Element, str, Element], ...] = ()
    time_atoms: tuple[tuple[Element, str, Element], ...] = ()
    projection: tuple[Attr, ...] = ()
    graph: DependencyGraph = field(default_factory=lambda: DependencyGraph((), ()))
    removed: tuple[tuple[str, str], ...] = ()  # (removed alias, covering alias) — Arasu §8.1
    # projected stream timestamps (``?t``, or a column of a term built from one), kept out of ``projection``:
    # they are not LTO attributes (timestamps are not part of the total order)
    projected_times: tuple[Attr, ...] = ()
    # the infinite stream later than every other stream of the part (or the only one), if there is one
    latest: str | None = None
    whole_terms: tuple[int, ...] = ()  # template equalities read as two opaque terms (obda.analysis.terms)

    @property
    def distinct(self) -> bool:
        return self.member.distinct

    @property
    def keyed_by_time(self) -> bool:
        """A duplicate-eliminating part with an output column whose value determines the timestamp of the latest
        stream (``?t``, or an IRI its time can be read from): two answers of different timestamps differ, so
        no answer needs remembering once its timestamp has closed."""
        if not self.distinct:
            return False
        allowed = self.member.time_columns
        return any(self.determines_latest_time(p) for p in self.member.projection
                   if allowed is None or p.name in allowed)

    def determines_latest_time(self, p) -> bool:
        """Whether the projected item ``p`` determines the timestamp of the latest stream (its ``times``, through
        the occurrences §8.1 removed): answers (or groups, Rule 9) of different timestamps differ in it."""
        if self.latest is None:
            return False
        moved = dict(self.removed)
        for a in p.times:
            while a.alias in moved:
                a = Attr(moved[a.alias], a.column)
            if self.stream_of_attr(a) == self.latest:
                return True
        return False

    @cached_property
    def kinds(self) -> dict[str, str]:
        return {s.name: s.kind for s in self.streams}

    @property
    def infinite(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.streams if s.kind == INFINITE)

    def stream(self, name: str) -> Stream:
        return next(s for s in self.streams if s.name == name)

    def stream_of_attr(self, a: Element) -> str | None:
        return self.stream_of.get(a.alias) if isinstance(a, Attr) else None

    def is_infinite_attr(self, a: Element) -> bool:
        return isinstance(a, Attr) and self.kinds.get(self.stream_of.get(a.alias, ""), "") == INFINITE

    @cached_property
    def bounding_attrs(self) -> tuple[Attr, ...]:
        """Value attributes of static relations and finite streams (finite sets of values)."""
        out = []
        for a, _, b in self.value_atoms:
            for e in (a, b):
                if isinstance(e, Attr) and not self.is_infinite_attr(e):
                    out.append(e)
        for e in self.projection:
            if not self.is_infinite_attr(e):
                out.append(e)
        return tuple(dict.fromkeys(out))

    @cached_property
    def stream_attrs(self) -> dict[str, tuple[Attr, ...]]:
        """Relevant value attributes (in ``P`` or ``L``) of every infinite stream."""
        out: dict[str, list[Attr]] = {n: [] for n in self.infinite}
        seen = set()
        for a in [e for t in self.value_atoms for e in (t[0], t[2])] + list(self.projection):
            if isinstance(a, Attr) and self.is_infinite_attr(a) and a not in seen:
                seen.add(a)
                out[self.stream_of[a.alias]].append(a)
        return {k: tuple(v) for k, v in out.items()}

    def roles(self) -> dict:
        """Keyword arguments for :class:`Closure`: bounding, discrete and finite elements."""
        types = self.member.types
        attrs = {e for t in self.value_atoms for e in (t[0], t[2]) if isinstance(e, Attr)} | set(self.projection)
        discrete = [a for a in attrs if types[a] in (ColumnType.INTEGER, ColumnType.BOOLEAN)]
        finite = [a for a in attrs if types[a] is ColumnType.BOOLEAN] + list(self.bounding_attrs)
        finite += [a for a in self.member.finite_parts if a in attrs]  # HOURS(?t): 24 values (Rule 7)
        derived = tuple(self.member.derived)
        inputs = [x for _, xs in derived for x in xs]
        discrete += [x for x in inputs if types[x] in (ColumnType.INTEGER, ColumnType.BOOLEAN)]
        finite += [x for x in inputs if types[x] is ColumnType.BOOLEAN or not self.is_infinite_attr(x)]
        roles = {"bounding": self.bounding_attrs, "discrete": discrete, "finite": finite,
                 "elements": tuple(self.projection), "derived": derived}
        if derived:  # Rule 7: a derived attribute whose columns P⁺ bounds has finitely many values, like a boolean
            base = Closure(self.value_atoms, **roles)
            roles["finite"] = finite + [d for d, xs in derived if all(base.bounded(x) for x in xs)]
        return roles

    @cached_property
    def closure(self) -> Closure:
        """``P⁺`` over the value attributes and constants."""
        return Closure(self.value_atoms, **self.roles())

    def with_atoms(self, extra) -> Closure:
        """``(P ∪ F)⁺`` for a set of added filter atoms ``F``."""
        return Closure(list(self.value_atoms) + list(extra), **self.roles())

    @cached_property
    def join_atoms(self) -> tuple[tuple[Attr, str, Attr], ...]:
        """Atoms of ``P`` between attributes of two different infinite streams (C2 of Theorem 1)."""
        return tuple(
            (a, op, b) for a, op, b in self.value_atoms
            if self.is_infinite_attr(a) and self.is_infinite_attr(b) and self.stream_of[a.alias] != self.stream_of[b.alias]
        )

    def describe_choices(self) -> str:
        return " ∧ ".join(self.choices) if self.choices else ""


# ---------------------------------------------------------------------------------------------


def _is_stream_ts(m: SpjMember, e: Element) -> bool:
    if not isinstance(e, Attr):
        return False
    r = m.relation(e.alias)
    return r.is_stream and r.table.timestamp == e.column


def _split_options(m: SpjMember, p: Predicate) -> list[tuple[str, list[Predicate]]] | None:
    """Step 1: the alternatives replacing one atom, or None when it stays."""
    if p.op == "!=" or (p.op in TIMESTAMP_SPLITS and _is_stream_ts(m, p.left) and _is_stream_ts(m, p.right)):
        return [(f"{p.left} {op} {p.right}", [Predicate.make(p.left, op, p.right, p.location)])
                for op in TIMESTAMP_SPLITS[p.op]]
    return None


def split_disequalities(m: SpjMember) -> list[tuple[tuple[str, ...], list[Predicate]]]:
    """All combinations of step-1 choices: (choice texts, atoms)."""
    fixed: list[Predicate] = []
    options = []
    for p in m.predicates:
        o = _split_options(m, p)
        if o is None:
            fixed.append(p)
        else:
            options.append(o)
    n = 1
    for o in options:
        n *= len(o)
    if n > MAX_PARTS:
        raise AnalysisError(
            f"member {m.index + 1}: {len(options)} disequalities / timestamp ≤ comparisons split into {n} parts "
            f"(limit {MAX_PARTS}); rewrite some of them as < or >")
    out = []
    for combo in itertools.product(*options) if options else [()]:
        atoms = list(fixed)
        texts = []
        for text, ps in combo:
            texts.append(text)
            atoms.extend(ps)
        out.append((tuple(texts), atoms))
    return out


def _discrete(m: SpjMember) -> list[Attr]:
    return [a for a, t in m.types.items() if t.is_discrete]


# ---- Arasu §8.1: redundant self-join occurrences (duplicate-eliminating queries) -------------


def _implies(have: str | None, need: str) -> bool:
    if have is None:
        return False
    return have == need or (need == "<=" and have in ("<", "="))


def _covers(m: SpjMember, cl: Closure, atoms: list[Predicate], proj: list[Attr], j: str, k: str) -> bool:
    """Does occurrence ``k`` cover occurrence ``j`` of the same stream (Def. 8.2)?"""
    def mp(e: Element) -> Element:
        return Attr(k, e.column) if isinstance(e, Attr) and e.alias == j else e

    elems = [e for e in cl.elements]
    js = [e for e in elems if isinstance(e, Attr) and e.alias == j]
    others = [e for e in elems if not (isinstance(e, Attr) and e.alias == j)]
    # (1) filters of j are filters of k; (2) joins of j with any other relation hold for k
    for x in js:
        for y in js + others:
            if x == y:
                continue
            for a, b in ((x, y), (y, x)):
                r = cl.rel(a, b)
                if r is None or (isinstance(a, Const) and isinstance(b, Const)):
                    continue
                if not _implies(cl.rel(mp(a), mp(b)), r):
                    return False
    # (3) projected attributes of j equal those of k
    for a in proj:
        if a.alias == j and not cl.eq(a, Attr(k, a.column)):
            return False
    return True


def remove_redundant_streams(m: SpjMember, atoms: list[Predicate], proj: list[Attr]):
    """Repeatedly drop a self-join occurrence covered by another one; returns (atoms, proj, removed)."""
    removed: list[tuple[str, str]] = []
    while True:
        aliases = [r.alias for r in m.relations if r.is_stream and r.alias not in {x for x, _ in removed}]
        cl = Closure([(p.left, p.op, p.right) for p in atoms])
        found = None
        for j, k in itertools.permutations(aliases, 2):
            if m.relation(j).table.name.lower() != m.relation(k).table.name.lower():
                continue
            if _covers(m, cl, atoms, proj, j, k):
                found = (j, k)
                break
        if found is None:
            return atoms, proj, removed
        j, k = found

        def sub(e: Element) -> Element:
            return Attr(k, e.column) if isinstance(e, Attr) and e.alias == j else e

        new_atoms = []
        for p in atoms:
            q = Predicate(sub(p.left), p.op, sub(p.right), p.location)
            if q.left == q.right and q.op in ("=", "<="):
                continue
            new_atoms.append(q)
        atoms = list(dict.fromkeys(new_atoms))
        proj = [sub(a) for a in proj]
        removed.append((j, k))


# ---- the modified query ---------------------------------------------------------------------


def _modified(m: SpjMember, part: int, choices: tuple[str, ...], atoms: list[Predicate]) -> ModifiedQuery:
    all_atoms = [(p.left, p.op, p.right) for p in atoms]
    if not integer_satisfiable(all_atoms, _discrete(m)):
        return ModifiedQuery(m, part, choices, False, "the selection is unsatisfiable" + (f" when {' ∧ '.join(choices)}" if choices else ""))
    proj = list(m.projected_attrs)
    removed: list[tuple[str, str]] = []
    if m.distinct:
        atoms, proj, removed = remove_redundant_streams(m, atoms, proj)
    # a stream's timestamp (or any timestamp value of a stream) in the output: Rule 1 of "Projected times";
    # static timestamps are finite values
    times = terms.projected_times(proj, lambda a: m.types.get(a) is ColumnType.TIMESTAMP and m.relation(a.alias).is_stream)
    proj = [a for a in proj if m.types.get(a) is not ColumnType.TIMESTAMP]
    gone = {j for j, _ in removed}
    rels = [r for r in m.relations if r.alias not in gone]
    time_atoms = [(p.left, p.op, p.right) for p in atoms if m.is_timestamp(p.left) or m.is_timestamp(p.right)
                  or (isinstance(p.left, Const) and p.left.domain == "timestamp")]
    value_atoms = [(p.left, p.op, p.right) for p in atoms if (p.left, p.op, p.right) not in set(time_atoms)]
    ts_static = [Attr(r.alias, c.name) for r in rels if not r.is_stream for c in r.table.columns if c.type is ColumnType.TIMESTAMP]
    tcl = Closure(time_atoms, elements=[r.timestamp for r in rels if r.is_stream], bounding=ts_static)
    # step 2: merge streams with equal timestamps
    stream_rels = [r for r in rels if r.is_stream]
    groups: list[list] = []
    for r in stream_rels:
        for g in groups:
            if tcl.eq(g[0].timestamp, r.timestamp):
                g.append(r)
                break
        else:
            groups.append([r])
    streams: list[Stream] = []
    stream_of: dict[str, str] = {}
    for g in groups:
        name = "+".join(r.alias for r in g)
        ts = g[0].timestamp
        finite = tcl.upper_bounded(ts)
        reason = None
        last = None
        if finite:
            _, above = tcl.bounds_of(ts)
            same = tcl.bounding_in_class(ts)
            b = (same or above)[0]
            reason = f"its timestamp {ts} is upper-bounded by {b}"
            consts = [x.value for x in (same or above) if isinstance(x, Const) and isinstance(x.value, int)]
            last = min(consts) if consts else None
        streams.append(Stream(name, tuple(r.alias for r in g), tuple(r.table.name for r in g),
                              FINITE if finite else INFINITE, tuple(str(r.timestamp) for r in g), reason, last))
        for r in g:
            stream_of[r.alias] = name
    for r in rels:
        if not r.is_stream:
            streams.append(Stream(r.alias, (r.alias,), (r.table.name,), STATIC))
            stream_of[r.alias] = r.alias
    # step 4 preparation: the dependency graph over infinite streams
    inf = [s for s in streams if s.kind == INFINITE]
    tsof = {s.name: next(r.timestamp for r in stream_rels if r.alias == s.aliases[0]) for s in inf}
    edges = []
    for si in inf:
        for sj in inf:
            if si is sj or tcl.rel(tsof[sj.name], tsof[si.name]) != "<":
                continue
            if any(tcl.rel(tsof[sj.name], tsof[sk.name]) == "<" and tcl.rel(tsof[sk.name], tsof[si.name]) == "<"
                   for sk in inf if sk is not si and sk is not sj):
                continue
            edges.append((si.name, sj.name))
    graph = DependencyGraph(tuple(s.name for s in inf), tuple(edges))
    ts_of = {s.name: next(r.timestamp for r in stream_rels if r.alias == s.aliases[0])
             for s in streams if s.kind != STATIC}
    latest = [s.name for s in inf if all(o == s.name or tcl.rel(t, ts_of[s.name]) == "<" for o, t in ts_of.items())]
    mq = ModifiedQuery(
        member=m, part=part, choices=choices, satisfiable=True, reason=None, streams=tuple(streams),
        stream_of=stream_of, value_atoms=tuple(value_atoms), time_atoms=tuple(time_atoms),
        projection=tuple(dict.fromkeys(proj)), graph=graph, removed=tuple(removed),
        projected_times=tuple(dict.fromkeys(a for a in times if a.alias not in gone)),
        latest=latest[0] if latest else None,
    )
    return _whole_terms(mq) if m.templates else mq


def _whole_terms(mq: ModifiedQuery) -> ModifiedQuery:
    """The column reading of whole-term template equalities, or for the ones whose columns it bounds only in
    part, the reading as two opaque terms, until no group is mixed (obda.analysis.terms.mixed_groups)."""
    m = mq.member
    moved = dict(mq.removed)  # Arasu §8.1: a removed occurrence's attributes are its cover's

    def sub(a: Attr) -> Attr:
        while a.alias in moved:
            a = Attr(moved[a.alias], a.column)
        return a

    groups = [tuple((sub(a), sub(b)) for a, b in pairs if sub(a) != sub(b)) for pairs in m.templates]
    explicit = frozenset((sub(a), sub(b)) for a, b in m.explicit)
    base = mq
    done: set[int] = set()
    while True:
        cl = mq.closure
        mixed = [i for i in terms.mixed_groups(groups, lambda x: not mq.is_infinite_attr(x) or cl.bounded(x))
                 if i not in done and groups[i]]
        if not mixed:
            return mq
        done.update(mixed)
        atoms, added = terms.virtual_reading(groups, sorted(done), base.value_atoms, explicit, m.types)
        mq = replace(base, member=replace(m, types={**m.types, **added}), value_atoms=tuple(atoms),
                     whole_terms=tuple(sorted(done)))


def preprocess(m: SpjMember) -> tuple[ModifiedQuery, ...]:
    """Steps 1–3 for one SPJ member: its modified parts (unsatisfiable parts included, flagged)."""
    if m.contradiction:
        return (ModifiedQuery(m, 0, (), False, m.contradiction),)
    return tuple(_modified(m, i, ch, atoms) for i, (ch, atoms) in enumerate(split_disequalities(m)))
