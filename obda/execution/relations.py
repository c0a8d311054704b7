"""The synopsis engine's relations and join: counted tuples, their indexes, a compiled hash join.

A relation (:class:`Rel`) is counted tuples (``{tuple: count}``) over a schema of attributes, with hash
indexes built on demand.  :func:`join_aggregate` joins several relations under the conditions between them
and aggregates the combinations on the attributes still needed (counts multiplied: bags; existence: sets),
with a join order and a program compiled once per shape (:func:`_compile`).  :func:`merge_into`,
:func:`expire`, :func:`expire_by_order`, :func:`consume` and :func:`compress_counted` maintain a synopsis.
The per-timestamp evaluation of a member over them is :mod:`obda.execution.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Callable, Iterable

from obda.analysis.forest import Attr, CrossPred
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
            _file(idx, key(t), t, c)
        self._idx[positions] = (key, idx)
        return idx

    def put(self, t: tuple, c: int) -> None:
        """Set the count of ``t`` (a new or an existing tuple)."""
        self.data[t] = c
        for key, idx in self._idx.values():
            _file(idx, key(t), t, c)

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


def _file(idx: dict, k: tuple, t: tuple, c: int) -> None:
    """Enter tuple ``t`` (count ``c``) in an index under its key ``k`` (a key with a NULL is in no bucket)."""
    if None in k:
        return
    bucket = idx.get(k)
    if bucket is None:
        idx[k] = {t: c}
    else:
        bucket[t] = c


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
