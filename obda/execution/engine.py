"""The synopsis engine: per closed timestamp, update synopses and produce answers.

Input per closed timestamp ``t``: for every stream FROM alias, the rows of
``t`` that passed the alias' local conditions, already projected on the
plan's kept attributes and **counted** (``{key tuple: count}``, computed by
Spark).  Nothing else of the stream is ever seen here.

Per member (see :mod:`obda.analysis.forest` for the forest):

* a unit's **current** relation at ``t`` joins its aliases' rows of ``t``
  (merged synchronous streams join inside the closed timestamp), the static
  tables attached to it, and the **past** synopses of its children (tuples of
  strictly earlier timestamps: the predicate ``τ_child < τ_parent`` holds by
  construction), and aggregates the join on the unit's key (Theorem 1: counts
  of join combinations; Theorem 2 / DISTINCT: existence, one compressed
  attribute kept at its extreme);
* the answers of ``t`` are the combinations of the roots in which at least
  one root tuple is current: ``Σ_i past_1 … past_{i-1} ⋈ cur_i ⋈ all_{i+1} …``
  (each combination counted once, at the closing of its latest timestamp);
* at the end of ``t`` the current relations are merged into the past ones —
  only where some unit that can still receive tuples will read them (a child
  of an unfinished parent; a root when another unfinished root exists).

All joins are evaluated on synopsis entries (hash join on equalities), never
on stored stream tuples, and intermediate results are re-aggregated on the
attributes still needed, so the work per timestamp is bounded by the synopsis
sizes.  The union of the members, the checks tested on their answers and DISTINCT
are the query's (:mod:`obda.execution.query_engine`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable, Iterable

from obda.analysis.forest import Attr, CrossPred, MemberForest, OutItem
from obda.model.query import FLIP, sql_compare

Counted = dict  # {tuple: int}


class Rel:
    """A counted relation over a schema of attributes, with hash indexes kept up to date.

    An index is built on first use and then maintained by :meth:`put` and :meth:`remove`,
    so a past synopsis probed at every closed timestamp costs work in proportion to what
    changed, not a rebuild over all its entries.
    """

    __slots__ = ("schema", "data", "_idx", "_rest")

    def __init__(self, schema: tuple[Attr, ...], data: Counted | None = None):
        self.schema = tuple(schema)
        self.data = data if data is not None else {}
        self._idx: dict[tuple[int, ...], tuple[Callable[[tuple], tuple], dict]] = {}
        self._rest: tuple[int, dict] | None = None  # (compressed position, {rest of key: key})

    def index(self, positions: tuple[int, ...]) -> dict:
        """``{key: {tuple: count}}`` on ``positions`` (keys with a NULL are left out)."""
        entry = self._idx.get(positions)
        if entry is not None:
            return entry[1]
        idx: dict = {}
        key = tuple_getter(positions)
        for t, c in self.data.items():
            k = key(t)
            if None in k:
                continue
            bucket = idx.get(k)
            if bucket is None:
                idx[k] = {t: c}
            else:
                bucket[t] = c
        self._idx[positions] = (key, idx)
        return idx

    def put(self, t: tuple, c: int) -> None:
        """Set the count of ``t`` (a new or an existing tuple)."""
        self.data[t] = c
        for key, idx in self._idx.values():
            k = key(t)
            if None in k:
                continue
            bucket = idx.get(k)
            if bucket is None:
                idx[k] = {t: c}
            else:
                bucket[t] = c

    def remove(self, t: tuple) -> None:
        del self.data[t]
        for key, idx in self._idx.values():
            k = key(t)
            bucket = idx.get(k)
            if bucket is not None:
                bucket.pop(t, None)
                if not bucket:
                    del idx[k]

    def rest_index(self, pos: int) -> dict:
        """``{key without position pos: key}`` of a compressed relation (one entry per rest of key).

        Built on first use; :func:`merge_into`, the only writer of compressed relations, keeps it
        up to date.
        """
        if self._rest is None or self._rest[0] != pos:
            self._rest = (pos, {k[:pos] + k[pos + 1 :]: k for k in self.data})
        return self._rest[1]

    def __len__(self) -> int:
        return len(self.data)


def _test(op: str, a, b, offset: int = 0) -> bool:
    """SQL comparison ``a op b + offset``: NULL compares false; incomparable types compare false."""
    if offset and b is not None:
        try:
            b = b + offset
        except TypeError:
            return False
    return sql_compare(op, a, b)


def tuple_getter(positions: tuple[int, ...]) -> Callable[[tuple], tuple]:
    """A function picking ``positions`` of a tuple, always returning a tuple."""
    if not positions:
        return lambda t: ()
    if len(positions) == 1:
        (p,) = positions
        return lambda t: (t[p],)
    return itemgetter(*positions)


Check = tuple[str, int, int, int]  # (op, left position, right position, offset): left op right + offset


def _holds(checks: tuple[Check, ...], left: tuple, right: tuple) -> bool:
    return all(_test(op, left[i], right[j], off) for op, i, j, off in checks)


@dataclass(frozen=True)
class _Step:
    """Join the current tuples with ``rels[rel]``: hash probe on equalities, then the other checks."""

    rel: int
    eq_left: Callable[[tuple], tuple] | None  # key of a current tuple (None: nested loop)
    eq_right: tuple[int, ...]  # index positions in the picked relation
    other: tuple[Check, ...]  # (op, current position, picked position)
    keep: Callable[[tuple], tuple]  # of current + picked
    local: tuple[Check, ...]  # checks among the kept attributes


@dataclass(frozen=True)
class _Program:
    local: tuple[Check, ...]  # checks within rels[0]
    steps: tuple[_Step, ...]
    final: Callable[[tuple], tuple] | None  # projection on ``out`` (None: the schema already is ``out``)


_PROGRAMS: dict[tuple, _Program] = {}


def _compile(schemas: tuple[tuple[Attr, ...], ...], preds: tuple[CrossPred, ...], out: tuple[Attr, ...]) -> _Program:
    """The join order and positions for relations of these schemas (cached: they depend on nothing else).

    Greedy order: the first relation drives; next comes a relation sharing an equality with
    the attributes bound so far, else one sharing any predicate, else the next in order.  After
    every step the tuples are projected on the attributes still needed (``out`` and those of
    predicates not applied yet) and re-aggregated.
    """
    key = (schemas, preds, out)
    prog = _PROGRAMS.get(key)
    if prog is not None:
        return prog
    pending = list(preds)

    def take_local(schema) -> tuple[Check, ...]:
        pos = {a: i for i, a in enumerate(schema)}
        here = [p for p in pending if p.left in pos and p.right in pos]
        for p in here:
            pending.remove(p)
        return tuple((p.op, pos[p.left], pos[p.right], p.offset) for p in here)

    schema = list(schemas[0])
    first_local = take_local(schema)
    remaining = list(range(1, len(schemas)))
    steps = []
    while remaining:
        bound = set(schema)

        def links(i: int, eq_only: bool) -> bool:
            rs = set(schemas[i])
            return any(
                (not eq_only or p.op == "=") and ((p.left in bound and p.right in rs) or (p.right in bound and p.left in rs))
                for p in pending
            )

        pick = next((i for i in remaining if links(i, True)), None)
        if pick is None:
            pick = next((i for i in remaining if links(i, False)), remaining[0])
        remaining.remove(pick)
        rschema = schemas[pick]
        rpos = {a: i for i, a in enumerate(rschema)}
        lpos = {a: i for i, a in enumerate(schema)}
        eq_l, eq_r, other = [], [], []
        for p in list(pending):
            if p.left in lpos and p.right in rpos:
                l, r, op, off = p.left, p.right, p.op, p.offset
            elif p.right in lpos and p.left in rpos:  # r op l + off  ⟺  l flip(op) r - off
                l, r, op, off = p.right, p.left, FLIP.get(p.op, p.op), -p.offset
            else:
                continue
            pending.remove(p)
            if op == "=" and not off:
                eq_l.append(lpos[l])
                eq_r.append(rpos[r])
            else:
                other.append((op, lpos[l], rpos[r], off))
        new_schema = schema + list(rschema)
        needed = set(out) | {a for p in pending for a in p.attrs}
        keep = tuple(i for i, a in enumerate(new_schema) if a in needed)
        schema = [new_schema[i] for i in keep]
        eq_key = tuple_getter(tuple(eq_l)) if eq_l else None
        steps.append(_Step(pick, eq_key, tuple(eq_r), tuple(other), tuple_getter(keep), take_local(schema)))
    pos = {a: i for i, a in enumerate(schema)}
    final = None if tuple(schema) == tuple(out) else tuple_getter(tuple(pos[a] for a in out))
    prog = _Program(first_local, tuple(steps), final)
    if len(_PROGRAMS) > 4096:  # plans come from a handful of query shapes; never grow without bound
        _PROGRAMS.clear()
    _PROGRAMS[key] = prog
    return prog


def join_aggregate(rels: list[Rel], preds: Iterable[CrossPred], out: tuple[Attr, ...], setsem: bool) -> Counted:
    """Join counted relations under ``preds`` and aggregate on ``out``.

    The count of an output tuple is the sum over join combinations of the
    product of the entries' counts (bag semantics), or 1 (set semantics).
    ``rels[0]`` is the driving (usually smallest, current) relation.
    """
    for r in rels:
        if not r.data:
            return {}
    prog = _compile(tuple(r.schema for r in rels), tuple(preds), tuple(out))
    cur: Counted = rels[0].data
    if prog.local:
        cur = {t: c for t, c in cur.items() if _holds(prog.local, t, t)}
    for st in prog.steps:
        if not cur:
            return {}
        pick = rels[st.rel]
        keep, other = st.keep, st.other
        result: Counted = {}
        get = result.get
        key = st.eq_left
        probe = pick.index(st.eq_right).get if key is not None else None
        everything = pick.data if key is None else None  # nested loop: no equality
        for t, c in cur.items():
            matches = probe(key(t)) if key is not None else everything
            if not matches:
                continue
            for u, d in matches.items():
                if other and not _holds(other, t, u):
                    continue
                k = keep(t + u)
                result[k] = get(k, 0) + c * d
        cur = {t: c for t, c in result.items() if _holds(st.local, t, t)} if st.local else result
    if not cur:
        return {}
    if prog.final is None:
        final = dict(cur) if cur is rels[0].data else cur
    else:
        final = {}
        pick_out = prog.final
        for t, c in cur.items():
            k = pick_out(t)
            final[k] = final.get(k, 0) + c
    if setsem:
        return dict.fromkeys(final, 1)
    return final


def merge_into(target: Rel, delta: Counted, setsem: bool, compress: tuple[int, str] | None) -> None:
    """Add ``delta`` to ``target`` (counts add; set: existence; compress: keep the extreme)."""
    if not delta:
        return
    data = target.data
    if compress is None:
        for k, c in delta.items():
            if setsem:
                if k not in data:
                    target.put(k, 1)
            else:
                target.put(k, data.get(k, 0) + c)
        return
    pos, mode = compress
    # at most one entry per rest-of-key; keep the extreme value of the compressed attribute
    rest_index = target.rest_index(pos)
    for k in delta:
        rest = k[:pos] + k[pos + 1 :]
        old = rest_index.get(rest)
        if old is None:
            target.put(k, 1)
            rest_index[rest] = k
            continue
        v, w = k[pos], old[pos]
        if v is None:
            continue
        better = w is None or (v < w if mode == "min" else v > w)
        if better:
            target.remove(old)
            target.put(k, 1)
            rest_index[rest] = k


def expire(rel: Rel, expiry: tuple[tuple[int, int], ...], closed_upto: int) -> int:
    """Drop the entries of an interval join's synopsis that no later row can join (``Node.expiry``: an entry
    whose timestamp at a key position plus its lag is at most ``closed_upto`` is dead). Returns how many."""
    if not expiry or not rel.data:
        return 0
    dead = [k for k in rel.data if any(k[i] is not None and k[i] + lag <= closed_upto for i, lag in expiry)]
    for k in dead:
        rel.remove(k)
    return len(dead)


def expire_by_order(rel: Rel, groups: tuple[tuple[tuple[int, str], ...], ...], marks: dict) -> int:
    """Drop the entries that ordered arrival says no later row can join (``Node.value_expiry``): in every
    group, some key position holds a value below its OA constraint's watermark (``marks``: constraint →
    the largest value of its stream more than k ago, None while unknown or once the constraint is not
    used).  Returns how many."""
    if not groups or not rel.data:
        return 0
    live = [[(i, marks[name]) for i, name in g if marks.get(name) is not None] for g in groups]
    if not all(live):
        return 0
    dead = [k for k in rel.data if all(any(k[i] is not None and k[i] < w for i, w in g) for g in live)]
    for k in dead:
        rel.remove(k)
    return len(dead)


def consume(rel: Rel, positions: tuple[int, ...], values: set) -> int:
    """Drop the entries whose key positions hold one of ``values``: the one row of a keyed stream with them
    arrived, and no other can complete them (``Node.consumed``).  Returns how many."""
    if not values or not rel.data:
        return 0
    dead = [k for k in rel.data if tuple(k[i] for i in positions) in values]
    for k in dead:
        rel.remove(k)
    return len(dead)


def compress_counted(delta: Counted, compress: tuple[int, str] | None) -> Counted:
    if compress is None or not delta:
        return delta
    r = Rel((), {})
    merge_into(r, delta, True, compress)
    return r.data


class MemberEngine:
    """Synopsis state and per-timestamp evaluation of one member."""

    def set_statics(self, statics: dict[str, Counted]) -> None:
        """The rows of the member's static aliases (alias -> counted rows), as loaded when the query opens."""
        plan = self.plan
        self.statics = {a: Rel(plan.pipelines[a].attrs, dict(statics.get(a, {}))) for a in plan.static_aliases}

    def __init__(self, plan: MemberForest, statics: dict[str, Counted]):
        self.plan = plan
        self.setsem = plan.distinct
        self.set_statics(statics)
        self.past: dict[int, Rel] = {n.id: Rel(n.key) for n in plan.nodes}
        self.dropped: set[int] = set()  # nodes whose past is no longer needed
        self.relaxed = False  # a k-constraint stopped being used: constrained nodes expire by the query alone
        self.after_absorb = None  # called once a range is absorbed (QueryEngine: forget a time-keyed emitted set)
        self.marks: dict = {}  # OA constraint -> its value watermark, key -> True while used (ConstraintWatch)
        # node -> (alias, positions of the key columns in its pipeline's rows, positions in the node's key, key)
        self.consumers: dict[int, list] = {}
        for n in plan.nodes:
            for t, pos, name in n.consumed:
                attrs = plan.pipelines[t].attrs
                table = plan.member.table(t)
                self.consumers.setdefault(n.id, []).append(
                    (t, tuple(attrs.index((t, kc)) for kc in table.key), pos, name))

    # -- state ------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"past": {i: r.data for i, r in self.past.items()}, "dropped": sorted(self.dropped),
                "relaxed": self.relaxed}

    def restore(self, st: dict) -> None:
        for i, d in st["past"].items():
            self.past[int(i)] = Rel(self.plan.nodes[int(i)].key, d)
        self.dropped = set(st["dropped"])
        self.relaxed = st.get("relaxed", False)

    def _expiry(self, n) -> tuple[tuple[int, int], ...]:
        return n.plain_expiry if self.relaxed and n.constrained else n.expiry

    def _expire(self, n, closed_upto: int) -> None:
        expire(self.past[n.id], self._expiry(n), closed_upto)
        expire_by_order(self.past[n.id], n.value_expiry, self.marks)

    def keyed_values(self, node_id: int, rows: dict[str, Counted]) -> list[tuple[tuple[int, ...], set]]:
        """For a node that many-one joins consume: (positions in its key, the key values ``rows`` brought)."""
        out = []
        for t, idx, pos, name in self.consumers.get(node_id, ()):
            if self.marks.get(name) and rows.get(t):
                out.append((pos, {tuple(k[i] for i in idx) for k in rows[t]}))
        return out

    @property
    def entries(self) -> int:
        return sum(len(r) for r in self.past.values())

    @property
    def static_entries(self) -> int:
        return sum(len(r) for r in self.statics.values())

    # -- evaluation -------------------------------------------------------------------------
    def _complete(self, node_id: int, closed_upto: int) -> bool:
        c = self.plan.nodes[node_id].cutoff
        return c is not None and c <= closed_upto

    def _keeps_past(self, node_id: int, closed_upto: int) -> bool:
        n = self.plan.nodes[node_id]
        if n.parent is not None:
            return not self._complete(n.parent, closed_upto)
        return any(r != node_id and not self._complete(r, closed_upto) for r in self.plan.roots)

    def step(self, ts: int, cur_rows: dict[str, Counted]) -> Counted:
        """Process the closed timestamp ``ts``; return the new answers as ``{out tuple: count}``."""
        plan = self.plan
        if plan.unsatisfiable or not plan.nodes:
            return {}
        cur: dict[int, Counted] = {}
        for n in plan.nodes:
            rows = [cur_rows.get(a) for a in n.aliases]
            if not all(rows):
                cur[n.id] = {}
                continue
            rels = [Rel(plan.pipelines[a].attrs, r) for a, r in zip(n.aliases, rows)]
            rels += [self.past[c] for c in n.children]
            rels += [self.statics[s] for s in n.statics]
            res = join_aggregate(rels, n.preds, n.key, self.setsem)
            cur[n.id] = compress_counted(res, n.compress) if self.setsem else res
        answers: Counted = defaultdict(int)
        roots = plan.roots
        for i, r in enumerate(roots):
            if not cur[r]:
                continue
            rels = [Rel(plan.nodes[r].key, cur[r])]
            for j, q in enumerate(roots):
                if j < i:
                    rels.append(self.past[q])
                elif j > i:
                    if cur[q]:
                        allq = Rel(plan.nodes[q].key, dict(self.past[q].data))
                        merge_into(allq, cur[q], self.setsem, plan.nodes[q].compress if self.setsem else None)
                        rels.append(allq)
                    else:
                        rels.append(self.past[q])
            rels += [self.statics[s] for s in plan.forest_statics]
            for k, c in join_aggregate(rels, plan.forest_preds, plan.out_attrs, self.setsem).items():
                answers[k] += c
        for n in plan.nodes:
            if n.id in self.dropped:
                continue
            if self._keeps_past(n.id, ts):
                merge_into(self.past[n.id], cur[n.id], self.setsem, n.compress if self.setsem else None)
                self._expire(n, ts)
                for pos, values in self.keyed_values(n.id, cur_rows):
                    consume(self.past[n.id], pos, values)
            else:
                self.past[n.id] = Rel(n.key)
                if self._no_longer_needed(n.id, ts):
                    self.dropped.add(n.id)
        if self.setsem:
            return {k: 1 for k in answers}
        return dict(answers)

    def keeps_after(self, node_id: int, closed_upto: int) -> bool:
        """Whether the node's past is still kept once every timestamp up to ``closed_upto`` closed."""
        return node_id not in self.dropped and self._keeps_past(node_id, closed_upto)

    def absorb(self, closed_upto: int, deltas: dict[int, Counted], consumed: dict | None = None) -> None:
        """Merge what a micro-batch's closed range ``(…, closed_upto]`` added to each node (computed by Spark).

        Equal to :meth:`step` at every timestamp of the range, as far as the synopses go:
        merging is a union (counts add, existence, the extreme kept) and a node's past is
        kept or dropped by the same monotone rule, evaluated at the range's end.  ``consumed``: node →
        [(positions, key values)] of the keyed rows of the range (:meth:`keyed_values`).
        """
        for n in self.plan.nodes:
            if n.id in self.dropped:
                continue
            if self._keeps_past(n.id, closed_upto):
                merge_into(self.past[n.id], deltas.get(n.id, {}), self.setsem, n.compress if self.setsem else None)
                self._expire(n, closed_upto)
                for pos, values in (consumed or {}).get(n.id, ()):
                    consume(self.past[n.id], pos, values)
            else:
                self.past[n.id] = Rel(n.key)
                if self._no_longer_needed(n.id, closed_upto):
                    self.dropped.add(n.id)
        if self.after_absorb is not None:
            self.after_absorb()

    def _no_longer_needed(self, node_id: int, closed_upto: int) -> bool:
        # once the reader(s) of a past synopsis are complete, it never needs to be kept again
        return not self._keeps_past(node_id, closed_upto)

    def static_answers(self) -> Counted:
        """Answers of a member over static tables only (no streams): evaluated once."""
        plan = self.plan
        if plan.unsatisfiable or plan.nodes:
            return {}
        rels = [self.statics[s] for s in plan.forest_statics]
        if not rels:
            return {}
        return join_aggregate(rels, plan.forest_preds, plan.out_attrs, self.setsem)


def binder(items: tuple[OutItem, ...], out_attrs: tuple[Attr, ...]) -> Callable[[tuple], tuple]:
    """A function from an output tuple of the member to its answer tuple (one value per variable).

    Plain attributes are picked by position in one call; constants and CONCATs (NULL if a
    part is NULL) are filled in after.
    """
    pos = {a: i for i, a in enumerate(out_attrs)}
    if all(it.kind == "attr" for it in items):
        return tuple_getter(tuple(pos[it.attr] for it in items))

    def make(it: OutItem) -> Callable[[tuple], object]:
        if it.kind == "attr":
            i = pos[it.attr]
            return lambda values: values[i]
        if it.kind == "const":
            value = it.value
            return lambda values: value
        parts = tuple((k == "const", v if k == "const" else pos[v]) for k, v in it.parts)

        def concat(values):
            out = []
            for const, v in parts:
                s = v if const else values[v]
                if s is None:
                    return None
                out.append(str(s))
            return "".join(out)

        return concat

    fns = tuple(make(it) for it in items)
    return lambda values: tuple(f(values) for f in fns)
