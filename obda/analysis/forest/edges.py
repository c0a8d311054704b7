"""Rule 2 — edges: ``τ_child < τ_parent`` orders units into trees (spec §4).

A tuple of a parent only joins child tuples of strictly earlier closed
timestamps, so the comparison is guaranteed by the order of evaluation
(``absorbed``) and the timestamp need not be kept.  Edges are transitively
reduced; a unit with several parents keeps the first one (its other
comparisons stay value comparisons on timestamps kept in the keys); a cycle,
or ``τ < τ`` within a unit, makes the member unsatisfiable.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from obda.analysis.forest.draft import Draft


def order_units(d: Draft) -> Draft:
    nodes = list(d.nodes)
    unit_of = d.unit_of
    unsat = d.unsatisfiable
    edges: set[tuple[int, int]] = set()
    for p in d.ts_preds:
        if p.op in ("<", ">"):
            lo, hi = (p.left[0], p.right[0]) if p.op == "<" else (p.right[0], p.left[0])
            if unit_of[lo] == unit_of[hi]:
                unsat = True
            edges.add((unit_of[lo], unit_of[hi]))
    reach = transitive_closure(len(nodes), edges)
    if any((i, i) in reach for i in range(len(nodes))):
        unsat = True
    for c, pa in sorted(edges):
        redundant = any((c, k) in reach and (k, pa) in reach for k in range(len(nodes)) if k not in (c, pa))
        if not redundant and nodes[c].parent is None and not unsat:
            nodes[c] = replace(nodes[c], parent=pa)
    children: dict[int, list[int]] = {}
    for n in nodes:
        if n.parent is not None:
            children.setdefault(n.parent, []).append(n.id)
    nodes = [replace(n, children=tuple(children.get(n.id, ()))) for n in nodes]
    d = replace(d, nodes=tuple(nodes), unsatisfiable=unsat)
    d = replace(d, nodes=tuple(replace(n, depth=len(d.ancestors(n.id))) for n in d.nodes),
                roots=tuple(n.id for n in nodes if n.parent is None))
    absorbed = []
    value_preds = list(d.value_preds)
    for p in d.ts_preds:
        if p.op == "=":
            absorbed.append(p)
        elif p.op in ("<", ">"):
            lo, hi = (p.left[0], p.right[0]) if p.op == "<" else (p.right[0], p.left[0])
            if unit_of[hi] in d.ancestors(unit_of[lo]):
                absorbed.append(p)
            else:
                value_preds.append(p)
    return replace(d, absorbed=tuple(absorbed), value_preds=tuple(value_preds))


def transitive_closure(n: int, edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    reach = set(edges)
    for k, i, j in itertools.product(range(n), repeat=3):  # k outermost: Floyd–Warshall, one pass
        if (i, k) in reach and (k, j) in reach:
            reach.add((i, j))
    return reach
