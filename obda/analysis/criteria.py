"""The criteria (spec §5) and the polynomial checker (spec §6, Arasu Fig. 2 adapted).

:func:`lto_violations` evaluates the conditions of the applicable theorem on
one closure — ``P_L⁺`` of an LTO query (naive checker) or ``P⁺`` of the
modified query.  :func:`check_polynomial` decides a modified query without
enumerating its LTO queries:

* Steps (1)–(3) of Fig. 2 and the conditions that do not depend on the LTO
  choice are evaluated on ``P⁺``: the trees (C1 of Theorem 1; timestamps are
  not part of the total order), join locality (C2; the join atoms of ``P``
  stay, a side fixed to a bounding element makes an atom a filter, and some
  LTO query fixes nothing that ``P⁺`` does not), the projection and the
  equality joins (an attribute unbounded in ``P⁺`` stays unbounded in some
  derived LTO query and conversely — Arasu §6).
* Step (4): a violation of the MaxRef/MinRef condition has a witness of at
  most two joins, i.e. at most four attributes ``X``.  Candidate joins are the
  non-redundant inequalities of ``P⁺`` between two infinite streams with an
  unbounded side (a bounded pair stays bounded, a redundant one stays
  redundant).  For each candidate (duplicate-preserving) or pair of
  candidates sharing a stream (duplicate-eliminating), the constant-size
  query ``IND(X ∪ K_X, P)`` is checked by enumerating its LTO queries, with
  ``K_X`` the bounding elements related to ``X`` plus ``k_min``, ``k_max``.
  That is ``O(|A(Q)|⁴)`` constant-size checks at worst, and in practice a
  handful.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from obda.analysis.closure import Closure
from obda.analysis.elements import Attr, Const, Element
from obda.analysis.lto import enumerate_ltos
from obda.analysis.preprocess import ModifiedQuery

BOUNDED, UNBOUNDED, NOT_SHOWN = "bounded", "unbounded", "not_shown"

CONDITIONS = {
    "theorem1": {"trees": "C1", "locality": "C2", "projection": "C3", "equality": "C4", "inequality": "C5"},
    "arasu_5_6": {"projection": "C1", "equality": "C2", "inequality": "C3"},
    "theorem2": {"projection": "C1", "equality": "C2", "inequality": "C3"},
    "arasu_5_10": {"projection": "C1", "equality": "C2", "inequality": "C3"},
    # duplicate elimination with answers keyed by the latest stream's timestamp (docs/analysis.md, "Projected
    # times"): Theorem 2's conditions with the latest stream exempt, as the root is in Theorem 1
    "time_keyed": {"projection": "C1", "equality": "C2", "inequality": "C3"},
}
ALL_KINDS = frozenset({"trees", "locality", "projection", "equality", "inequality"})
IFF = {"theorem1", "arasu_5_6", "arasu_5_10"}  # criteria whose violation proves unboundedness


@dataclass(frozen=True)
class Violation:
    """A failed condition: which, the streams and attributes involved, in words."""

    condition: str  # C1 … C5
    kind: str  # trees | locality | projection | equality | inequality
    streams: tuple[str, ...]
    attributes: tuple[str, ...]
    message: str
    detail: Mapping[str, object] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PartOutcome:
    """The verdict on one modified query."""

    verdict: str
    criterion: str
    violations: tuple[Violation, ...] = ()
    checker: str = "polynomial"


def criterion_for(mq: ModifiedQuery) -> str:
    """Which theorem applies (spec §5): unsatisfiable, single stream, Theorem 1/2, Arasu 5.6/5.10."""
    if not mq.satisfiable:
        return "unsatisfiable"
    if not mq.distinct:
        if len(mq.infinite) <= 1:
            return "single_stream"
        return "theorem1" if mq.graph.has_edges else "arasu_5_6"
    if mq.keyed_by_time:
        return "time_keyed"
    return "theorem2" if mq.graph.has_edges else "arasu_5_10"


def exempt_stream(mq: ModifiedQuery, criterion: str) -> str | None:
    """The stream whose tuples are never stored, so that its attributes may be unbounded: the root of a single
    tree under Theorem 1, the latest stream of a part keyed by its own timestamp."""
    if criterion == "theorem1":
        return mq.graph.single_root
    return mq.latest if criterion == "time_keyed" else None


def verdict_for(criterion: str, violations: Sequence[Violation]) -> str:
    if not violations:
        return BOUNDED
    return UNBOUNDED if criterion in IFF else NOT_SHOWN


def lto_violations(
    mq: ModifiedQuery,
    cl: Closure,
    criterion: str,
    kinds: Iterable[str] = ALL_KINDS,
    stop: bool = False,
    attrs_by_stream: Mapping[str, Sequence[Attr]] | None = None,
    projection: Sequence[Attr] | None = None,
    join_atoms: Sequence[tuple[Attr, str, Attr]] | None = None,
    only_stream: str | None = None,
) -> list[Violation]:
    """Conditions of ``criterion`` evaluated on the closure ``cl`` (spec §5)."""
    kinds = set(kinds)
    names = CONDITIONS[criterion]
    g = mq.graph
    t1 = criterion == "theorem1"
    root = exempt_stream(mq, criterion)
    sof = mq.stream_of_attr
    attrs_by_stream = mq.stream_attrs if attrs_by_stream is None else attrs_by_stream
    projection = mq.projection if projection is None else projection
    join_atoms = mq.join_atoms if join_atoms is None else join_atoms
    out: list[Violation] = []

    def add(kind: str, streams, attrs, msg: str, **detail) -> bool:
        out.append(Violation(names[kind], kind, tuple(streams), tuple(str(a) for a in attrs), msg, detail))
        return stop

    # C1 (Theorem 1): every G_S forms a tree
    if t1 and "trees" in kinds:
        for comp in g.components:
            if not g.forms_tree(comp):
                multi = [n for n in comp if len(g.parents(n)) > 1]
                roots = [n for n in comp if not g.parents(n)]
                if multi:
                    why = "; ".join(f"{n} has parents {', '.join(g.parents(n))}" for n in multi)
                else:
                    why = f"it has several latest streams ({', '.join(roots)})"
                if add("trees", comp, (), f"the timestamp order of {', '.join(comp)} is not a tree: {why}",
                       multi_parent=multi, roots=roots):
                    return out
    # C2 (Theorem 1): join locality
    if t1 and "locality" in kinds:
        for a, op, b in join_atoms:
            if cl.pinned(a) or cl.pinned(b):
                continue
            si, sj = sof(a), sof(b)
            ci, cj = g.component(si), g.component(sj)
            if ci == cj:
                if not g.forms_tree(ci):
                    continue
                pi, pj = g.parent(si), g.parent(sj)
                ok = pi == pj or pi == sj or pj == si
                why = (f"{si} and {sj} are in the same tree but neither siblings nor parent and child "
                       f"(depths {g.depth(si)} and {g.depth(sj)})")
            else:
                ok = g.depth(si) == 0 and g.depth(sj) == 0
                why = f"{si} and {sj} are in different trees and not both roots"
            if not ok and add("locality", (si, sj), (a, b), f"join {a} {op} {b}: {why}", atom=f"{a} {op} {b}"):
                return out
    # projection (Thm 1 C3, Thm 2 C1, Arasu C1)
    if "projection" in kinds:
        for x in projection:
            if not mq.is_infinite_attr(x):
                continue
            s = sof(x)
            if t1:
                d = g.depth(s)
                if d is not None and d > 1:
                    if add("projection", (s,), (x,), f"projected attribute {x} belongs to {s} at depth {d} (> 1) of its tree",
                           depth=d):
                        return out
                    continue
                if d == 0 and g.single_tree:
                    continue  # the root of a single tree: written out at once, never stored
                if not cl.bounded(x):
                    where = (f"at depth {d} of the single tree" if g.single_tree and d is not None
                             else "in one of several trees" if d is not None else "in a graph that is not a tree")
                    if add("projection", (s,), (x,), f"projected attribute {x} of {s} is unbounded ({where})", depth=d):
                        return out
            elif s == root:
                continue  # the latest stream of answers keyed by its timestamp: never stored, nothing remembered
            elif not cl.bounded(x):
                if add("projection", (s,), (x,), f"projected attribute {x} of {s} is unbounded"):
                    return out
        for x in mq.projected_times:
            # a stream's timestamp is a value of an unbounded discrete domain (an infinite stream's is never
            # bounded above): it costs nothing only where the stream is never stored
            if not mq.is_infinite_attr(x):
                continue
            s = sof(x)
            if s == root and (criterion == "time_keyed" or g.single_tree):
                continue
            d = g.depth(s) if s in g.nodes else None
            why = (f"{s} is not the latest stream" if root is not None or mq.latest not in (None, s)
                   else "the streams are in several trees" if not mq.distinct
                   else "duplicates are removed and the answers are not keyed by the latest stream's timestamp")
            if add("projection", (s,), (x,), f"projected timestamp {x} of {s} is unbounded ({why})", depth=d,
                   time=True):
                return out
    inf_attrs = [(s, a) for s, attrs in attrs_by_stream.items() for a in attrs]
    # equality joins (Thm 1 C4, Thm 2 C2, Arasu C2)
    if "equality" in kinds:
        done: set[int] = set()
        for i, (si, a) in enumerate(inf_attrs):
            for sj, b in inf_attrs[i + 1:]:
                if si == sj or not cl.eq(a, b):
                    continue
                key = cl.class_key(a)
                if key in done:
                    continue
                need = [b] if si == root else [a] if sj == root else [a, b]
                bad = [x for x in need if not cl.bounded(x)]
                if bad:
                    done.add(key)
                    members = sorted({x for s2, x in inf_attrs if cl.eq(x, a)}, key=str)
                    streams = sorted({sof(x) for x in members})
                    if add("equality", streams, members,
                           f"equality join {' = '.join(map(str, members))} between {', '.join(streams)} on unbounded attributes"):
                        return out
    # inequality joins (Thm 1 C5, Thm 2 C3, Arasu C3): MaxRef / MinRef
    if "inequality" in kinds:
        maxref: dict[str, dict[Attr, list]] = {}
        minref: dict[str, dict[Attr, list]] = {}
        for si, a in inf_attrs:
            for sj, b in inf_attrs:
                if si == sj:
                    continue
                r = cl.rel(a, b)
                if r not in ("<", "<=") or cl.redundant(a, b):
                    continue
                if not cl.bounded(b):
                    maxref.setdefault(sj, {}).setdefault(b, []).append(f"{a} {r} {b}")
                if not cl.bounded(a):
                    minref.setdefault(si, {}).setdefault(a, []).append(f"{a} {r} {b}")
        streams = [s for s in attrs_by_stream if only_stream is None or s == only_stream]
        for s in streams:
            mx, mn = maxref.get(s, {}), minref.get(s, {})
            if not mx and not mn:
                continue
            joins = sorted({j for d in (mx, mn) for js in d.values() for j in js})
            if s == root:
                continue
            if not mq.distinct:
                attrs = sorted(set(mx) | set(mn), key=str)
                msg = (f"{s} has unbounded attributes in non-redundant inequality joins "
                       f"(MaxRef = {{{', '.join(map(str, sorted(mx, key=str)))}}}, MinRef = {{{', '.join(map(str, sorted(mn, key=str)))}}}): "
                       + "; ".join(joins))
                if add("inequality", (s,), attrs, msg, maxref=[str(x) for x in mx], minref=[str(x) for x in mn], joins=joins):
                    return out
            else:
                n = len({cl.class_key(x) for x in mx}) + len({cl.class_key(x) for x in mn})
                if n > 1:
                    attrs = sorted(set(mx) | set(mn), key=str)
                    msg = (f"|MaxRef({s})|_eq + |MinRef({s})|_eq = {n} > 1 "
                           f"(MaxRef = {{{', '.join(map(str, sorted(mx, key=str)))}}}, MinRef = {{{', '.join(map(str, sorted(mn, key=str)))}}}): "
                           + "; ".join(joins))
                    if add("inequality", (s,), attrs, msg, maxref=[str(x) for x in mx], minref=[str(x) for x in mn], joins=joins):
                        return out
    return out


# ---- the polynomial checker ---------------------------------------------------------------


def _candidates(mq: ModifiedQuery, cl: Closure) -> list[tuple[Attr, str, Attr]]:
    """Inequalities of ``P⁺`` between two infinite streams that can be live in some LTO query."""
    out = []
    inf = [(s, a) for s, attrs in mq.stream_attrs.items() for a in attrs]
    for si, a in inf:
        for sj, b in inf:
            if si == sj:
                continue
            r = cl.rel(a, b)
            if r not in ("<", "<="):
                continue
            if cl.bounded(a) and cl.bounded(b):
                continue
            if cl.redundant(a, b):
                continue
            out.append((a, r, b))
    return out


def _witness_bounding(mq: ModifiedQuery, cl: Closure, xs: Sequence[Attr]) -> list[Element]:
    """``K_X``: bounding elements related to ``X`` in ``P⁺``, plus ``k_min``/``k_max`` per domain."""
    ks: list[Element] = []
    for e in cl.elements:
        if isinstance(e, Const) or (isinstance(e, Attr) and e in set(mq.bounding_attrs)):
            if any(cl.rel(e, x) or cl.rel(x, e) for x in xs):
                ks.append(e)
    by_dom: dict[str, list[Const]] = {}
    for e in cl.elements:
        if isinstance(e, Const):
            by_dom.setdefault(e.domain, []).append(e)
    for cs in by_dom.values():
        cs.sort(key=lambda c: c.value)
        ks.extend([cs[0], cs[-1]])
    return list(dict.fromkeys(ks))


def witness_violation(mq: ModifiedQuery, criterion: str, xs: Sequence[Attr], only_stream: str | None = None) -> Violation | None:
    """Fig. 2 step (4): is the constant-size query ``IND(X ∪ K_X, P)`` violating the MaxRef/MinRef condition?"""
    cl = mq.closure
    ks = _witness_bounding(mq, cl, xs)
    atoms = cl.relations(list(xs) + ks)
    by_stream: dict[str, list[Attr]] = {}
    for x in xs:
        by_stream.setdefault(mq.stream_of_attr(x), []).append(x)
    roles = mq.roles()
    roles["elements"] = tuple(xs) + tuple(ks)
    for lcl in enumerate_ltos(atoms, by_stream, ks, mq.member.types, roles):
        v = lto_violations(mq, lcl, criterion, {"inequality"}, stop=True, attrs_by_stream=by_stream,
                           projection=(), join_atoms=(), only_stream=only_stream)
        if v:
            return v[0]
    return None


def inequality_violations(mq: ModifiedQuery, criterion: str) -> list[Violation]:
    cl = mq.closure
    cands = _candidates(mq, cl)
    out: list[Violation] = []
    if not cands:
        return out
    sof = mq.stream_of_attr
    root = exempt_stream(mq, criterion)
    if not mq.distinct:
        seen: set[str] = set()
        for a, r, b in cands:
            if {sof(a), sof(b)} <= seen | {root}:
                continue
            v = witness_violation(mq, criterion, [a, b])
            if v is not None:
                out.append(v)
                seen.update(v.streams)
        return out
    # duplicate-eliminating: two joins sharing a stream
    for s in mq.infinite:
        if s == root:
            continue
        touching = [(a, r, b) for a, r, b in cands if s in (sof(a), sof(b))]
        found = None
        for i in range(len(touching)):
            for j in range(i + 1, len(touching)):
                (a1, _, b1), (a2, _, b2) = touching[i], touching[j]
                ends = {x for x in (a1, b1, a2, b2) if sof(x) == s}
                if len(ends) == 1 and ((a1 in ends) == (a2 in ends)):
                    continue  # same attribute on the same side: one class, one extreme
                found = witness_violation(mq, criterion, list(dict.fromkeys([a1, b1, a2, b2])), only_stream=s)
                if found:
                    break
            if found:
                break
        if found:
            out.append(found)
    return out


def check_polynomial(mq: ModifiedQuery) -> PartOutcome:
    """Decide one modified query in polynomial time (spec §6)."""
    crit = criterion_for(mq)
    if crit in ("unsatisfiable", "single_stream"):
        return PartOutcome(BOUNDED, crit)
    cl = mq.closure
    v = lto_violations(mq, cl, crit, {"trees", "locality", "projection", "equality"})
    v += inequality_violations(mq, crit)
    return PartOutcome(verdict_for(crit, v), crit, tuple(v))
