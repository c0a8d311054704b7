"""Rule 1 — units: stream aliases with equal timestamps form one unit (spec §3 step 2).

Tuples with equal timestamps are all in the cache together when their
timestamp closes, so joining them needs no state: ``τ1 = τ2`` merges the two
streams into one node of the forest.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.model.unionfind import UnionFind
from obda.analysis.forest.model import Node


def merge_synchronous(d: Draft) -> Draft:
    streams = [a for a, t in d.member.aliases if t.is_stream]
    uf = UnionFind(streams)
    for p in d.ts_preds:
        if p.op == "=":
            uf.union(p.left[0], p.right[0])
    groups: dict[str, list[str]] = {}
    for a in streams:
        groups.setdefault(uf.find(a), []).append(a)
    nodes = tuple(Node(i, tuple(g)) for i, g in enumerate(groups.values()))
    return replace(d, nodes=nodes, unit_of={a: n.id for n in nodes for a in n.aliases})
