"""Rule 4 — keys: a unit's synopsis keeps the attributes of its subtree still needed above it.

An attribute of the subtree (its units and the static relations joined in
it) is needed when a comparison evaluated outside the subtree, or the
projection, reads it.  Counts (bag) or existence (set) are kept per key.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.analysis.forest.model import Attr


def uses_above(d: Draft, node_id: int) -> dict[Attr, list[str]]:
    """Attributes of the subtree of ``node_id`` read above it, with how (operator seen from it, or 'out')."""
    sub = d.subtree(node_id)
    sub_aliases = {a for k in sub for a in d.nodes[k].aliases + d.nodes[k].statics}
    uses: dict[Attr, list[str]] = {}
    for p, s in d.pred_site:
        if s in sub:
            continue
        for a in p.attrs:
            if a[0] in sub_aliases:
                uses.setdefault(a, []).append(p.oriented(a))
    for a in d.out_attrs:
        if a[0] in sub_aliases:
            uses.setdefault(a, []).append("out")
    return uses


def synopsis_keys(d: Draft) -> Draft:
    return replace(d, nodes=tuple(replace(n, key=tuple(sorted(uses_above(d, n.id)))) for n in d.nodes))
