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
from typing import Callable

from obda.analysis.forest import Attr, MemberForest, OutItem
from obda.execution.rows import evaluate
from obda.execution.relations import (
    Counted,
    Rel,
    compress_counted,
    consume,
    expire,
    expire_by_order,
    join_aggregate,
    merge_into,
    tuple_getter,
)

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
        if not rels:  # a member of constants: the one empty solution (its conditions folded by the unfolding)
            return {(): 1}
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
        if it.kind == "expr":  # computed on the joined row, by the evaluator of the per-row conditions
            expr, at = it.value, {f"__a{j}": pos[a] for j, (_, a) in enumerate(it.parts)}
            return lambda values: evaluate(expr, {c: values[i] for c, i in at.items()})
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
