"""The synopsis engine: per closed timestamp, update synopses and produce answers.

Input per closed timestamp ``t``: for every stream FROM alias, the rows of
``t`` that passed the alias' local conditions, already projected on the
plan's kept attributes and **counted** (``{key tuple: count}``, computed by
Spark).  Nothing else of the stream is ever seen here.

Per member (see :mod:`obda.execution.plan` for the forest):

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
sizes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from obda.execution.plan import Attr, CrossPred, MemberPlan, OutItem, QueryPlan

Counted = dict  # {tuple: int}


class Rel:
    """A counted relation over a schema of attributes, with cached hash indexes."""

    __slots__ = ("schema", "data", "_idx")

    def __init__(self, schema: tuple[Attr, ...], data: Counted | None = None):
        self.schema = tuple(schema)
        self.data = data if data is not None else {}
        self._idx: dict[tuple[int, ...], dict] = {}

    def index(self, positions: tuple[int, ...]) -> dict:
        idx = self._idx.get(positions)
        if idx is None:
            idx = defaultdict(list)
            for t, c in self.data.items():
                k = tuple(t[p] for p in positions)
                if None not in k:
                    idx[k].append((t, c))
            self._idx[positions] = idx
        return idx

    def changed(self) -> None:
        self._idx.clear()

    def __len__(self) -> int:
        return len(self.data)


_OPS = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _test(op: str, a, b) -> bool:
    """SQL comparison: NULL compares false; incomparable types compare false."""
    if a is None or b is None:
        return False
    try:
        return _OPS[op](a, b)
    except TypeError:
        return False


def join_aggregate(rels: list[Rel], preds: Iterable[CrossPred], out: tuple[Attr, ...], setsem: bool) -> Counted:
    """Join counted relations under ``preds`` and aggregate on ``out``.

    The count of an output tuple is the sum over join combinations of the
    product of the entries' counts (bag semantics), or 1 (set semantics).
    ``rels[0]`` is the driving (usually smallest, current) relation.
    """
    if any(len(r) == 0 for r in rels):
        return {}
    pending = list(preds)
    schema = list(rels[0].schema)
    cur: Counted = dict(rels[0].data)
    remaining = list(rels[1:])

    def apply_local(schema, cur):
        pos = {a: i for i, a in enumerate(schema)}
        here = [p for p in pending if p.left in pos and p.right in pos]
        if not here:
            return cur
        for p in here:
            pending.remove(p)
        checks = [(p.op, pos[p.left], pos[p.right]) for p in here]
        return {t: c for t, c in cur.items() if all(_test(op, t[i], t[j]) for op, i, j in checks)}

    cur = apply_local(schema, cur)
    while remaining and cur:
        bound = set(schema)
        pick = None
        for r in remaining:
            rs = set(r.schema)
            if any(p.op == "=" and ((p.left in bound and p.right in rs) or (p.right in bound and p.left in rs)) for p in pending):
                pick = r
                break
        if pick is None:
            for r in remaining:
                rs = set(r.schema)
                if any((p.left in bound and p.right in rs) or (p.right in bound and p.left in rs) for p in pending):
                    pick = r
                    break
        if pick is None:
            pick = remaining[0]
        remaining.remove(pick)
        rpos = {a: i for i, a in enumerate(pick.schema)}
        lpos = {a: i for i, a in enumerate(schema)}
        eq_l, eq_r, other = [], [], []
        for p in list(pending):
            if p.left in lpos and p.right in rpos:
                l, r = p.left, p.right
                op = p.op
            elif p.right in lpos and p.left in rpos:
                l, r = p.right, p.left
                op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(p.op, p.op)
            else:
                continue
            pending.remove(p)
            if op == "=":
                eq_l.append(lpos[l])
                eq_r.append(rpos[r])
            else:
                other.append((op, lpos[l], rpos[r]))
        new_schema = schema + list(pick.schema)
        needed = set(out) | {a for p in pending for a in p.attrs}
        keep = [i for i, a in enumerate(new_schema) if a in needed]
        result: Counted = defaultdict(int)
        if eq_l:
            idx = pick.index(tuple(eq_r))
            for t, c in cur.items():
                k = tuple(t[p] for p in eq_l)
                for u, d in idx.get(k, ()):
                    if other and not all(_test(op, t[i], u[j]) for op, i, j in other):
                        continue
                    row = t + u
                    result[tuple(row[i] for i in keep)] += c * d
        else:
            items = list(pick.data.items())
            for t, c in cur.items():
                for u, d in items:
                    if other and not all(_test(op, t[i], u[j]) for op, i, j in other):
                        continue
                    row = t + u
                    result[tuple(row[i] for i in keep)] += c * d
        schema = [new_schema[i] for i in keep]
        cur = apply_local(schema, dict(result))
    if remaining or not cur:
        return {}
    pos = {a: i for i, a in enumerate(schema)}
    final: Counted = defaultdict(int)
    sel = [pos[a] for a in out]
    for t, c in cur.items():
        final[tuple(t[i] for i in sel)] += c
    if setsem:
        return {k: 1 for k in final}
    return dict(final)


def merge_into(target: Rel, delta: Counted, setsem: bool, compress: tuple[int, str] | None) -> None:
    """Add ``delta`` to ``target`` (counts add; set: existence; compress: keep the extreme)."""
    if not delta:
        return
    data = target.data
    if compress is None:
        for k, c in delta.items():
            data[k] = 1 if setsem else data.get(k, 0) + c
    else:
        pos, mode = compress
        # at most one entry per rest-of-key; keep the extreme value of the compressed attribute
        rest_index = {k[:pos] + k[pos + 1 :]: k for k in data}
        for k in delta:
            rest = k[:pos] + k[pos + 1 :]
            old = rest_index.get(rest)
            if old is None:
                data[k] = 1
                rest_index[rest] = k
                continue
            better = (k[pos] < old[pos]) if mode == "min" else (k[pos] > old[pos])
            if better and k[pos] is not None:
                del data[old]
                data[k] = 1
                rest_index[rest] = k
    target.changed()


def compress_counted(delta: Counted, compress: tuple[int, str] | None) -> Counted:
    if compress is None or not delta:
        return delta
    r = Rel((), {})
    merge_into(r, delta, True, compress)
    return r.data


class MemberEngine:
    """Synopsis state and per-timestamp evaluation of one member."""

    def __init__(self, plan: MemberPlan, statics: dict[str, Counted]):
        self.plan = plan
        self.setsem = plan.distinct
        self.statics = {a: Rel(plan.pipelines[a].attrs, dict(statics.get(a, {}))) for a in plan.static_aliases}
        self.past: dict[int, Rel] = {n.id: Rel(n.key) for n in plan.nodes}
        self.dropped: set[int] = set()  # nodes whose past is no longer needed

    # -- state ------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"past": {i: r.data for i, r in self.past.items()}, "dropped": sorted(self.dropped)}

    def restore(self, st: dict) -> None:
        for i, d in st["past"].items():
            self.past[int(i)] = Rel(self.plan.nodes[int(i)].key, d)
        self.dropped = set(st["dropped"])

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
            else:
                self.past[n.id] = Rel(n.key)
                if self._no_longer_needed(n.id, ts):
                    self.dropped.add(n.id)
        if self.setsem:
            return {k: 1 for k in answers}
        return dict(answers)

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


def binding(items: tuple[OutItem, ...], out_attrs: tuple[Attr, ...], values: tuple) -> tuple:
    """Answer tuple (one value per projected variable) from an output tuple of the member."""
    pos = {a: i for i, a in enumerate(out_attrs)}
    res = []
    for it in items:
        if it.kind == "attr":
            res.append(values[pos[it.attr]])
        elif it.kind == "const":
            res.append(it.value)
        else:
            parts = []
            for k, v in it.parts:
                s = v if k == "const" else values[pos[v]]
                if s is None:
                    parts = None
                    break
                parts.append(str(s))
            res.append(None if parts is None else "".join(parts))
    return tuple(res)


@dataclass
class Answer:
    """One answer tuple occurrence (bags stay bags: a count > 1 is emitted as several lines)."""

    emitted_at: int | None  # closed timestamp, µs since epoch
    values: tuple
    count: int = 1


class QueryEngine:
    """All members of a query; union of their answers (DISTINCT: duplicates suppressed)."""

    def __init__(self, plan: QueryPlan, statics: dict[int, Counted]):
        """``statics``: pipeline id -> counted rows of the static table alias."""
        self.plan = plan
        self.members = [
            MemberEngine(mp, {a: statics.get(p.id, {}) for a, p in mp.pipelines.items() if not p.table.is_stream})
            for mp in plan.members
        ]
        self.emitted: set[tuple] = set()
        self.static_done = False

    def state(self) -> dict:
        return {"members": [m.state() for m in self.members], "emitted": self.emitted, "static_done": self.static_done}

    def restore(self, st: dict) -> None:
        for m, s in zip(self.members, st["members"]):
            m.restore(s)
        self.emitted = set(st["emitted"])
        self.static_done = st["static_done"]

    @property
    def entries(self) -> int:
        return sum(m.entries for m in self.members) + len(self.emitted)

    @property
    def static_entries(self) -> int:
        return sum(m.static_entries for m in self.members)

    def _collect(self, mp: MemberPlan, out: Counted, emitted_at, answers: list[Answer]) -> None:
        for vals in sorted(out, key=repr):
            b = binding(mp.member.items, mp.out_attrs, vals)
            if self.plan.distinct:
                if b in self.emitted:
                    continue
                self.emitted.add(b)
                answers.append(Answer(emitted_at, b, 1))
            else:
                answers.append(Answer(emitted_at, b, out[vals]))

    def step(self, ts: int, cur: dict[int, Counted]) -> list[Answer]:
        """``cur``: pipeline id -> counted rows of closed timestamp ``ts``."""
        answers: list[Answer] = []
        if not self.static_done:
            self.static_done = True
            for m in self.members:
                self._collect(m.plan, m.static_answers(), ts, answers)
        for m in self.members:
            rows = {a: cur.get(p.id) for a, p in m.plan.pipelines.items() if p.table.is_stream}
            if not any(rows.values()):
                continue
            self._collect(m.plan, m.step(ts, rows), ts, answers)
        return answers

    def static_only(self) -> list[Answer]:
        """For a query without any stream table: all answers, once."""
        answers: list[Answer] = []
        if not self.static_done:
            self.static_done = True
            for m in self.members:
                self._collect(m.plan, m.static_answers(), None, answers)
        return answers
