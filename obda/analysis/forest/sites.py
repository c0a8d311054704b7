"""Rule 3 — sites: where static relations are joined and where each cross comparison is evaluated.

Static aliases connected by comparisons form components; a component is
joined at the lowest common ancestor of the units it is compared with (or
above every tree, ``FOREST``, when it touches several trees or none).  A
comparison is evaluated at the lowest common ancestor of its two sides'
sites: when a tuple of that unit arrives, both sides are available.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.model.unionfind import UnionFind
from obda.analysis.forest.model import FOREST, Attr


def lca(d: Draft, x: int, y: int) -> int:
    if x == FOREST or y == FOREST:
        return FOREST
    ax = [x] + d.ancestors(x)
    ay = set([y] + d.ancestors(y))
    for k in ax:
        if k in ay:
            return k
    return FOREST


def place_statics(d: Draft) -> Draft:
    statics = [a for a, t in d.member.aliases if not t.is_stream]
    suf = UnionFind(statics)
    for p in d.value_preds:
        if p.left[0] in suf and p.right[0] in suf:
            suf.union(p.left[0], p.right[0])
    site: dict[str, int] = dict(d.unit_of)
    comps: dict[str, list[str]] = {}
    for a in statics:
        comps.setdefault(suf.find(a), []).append(a)
    nodes = list(d.nodes)
    forest_statics: list[str] = []
    for comp in comps.values():
        touched = {site[x[0]] for p in d.value_preds for x, y in (p.attrs, p.attrs[::-1]) if y[0] in comp and x[0] in site}
        where = FOREST
        if touched:
            ts = sorted(touched)
            where = ts[0]
            for t in ts[1:]:
                where = lca(d, where, t)
        for a in comp:
            site[a] = where
            if where == FOREST:
                forest_statics.append(a)
            else:
                nodes[where] = replace(nodes[where], statics=nodes[where].statics + (a,))
    return replace(d, nodes=tuple(nodes), site=site, forest_statics=tuple(forest_statics))


def place_conditions(d: Draft) -> Draft:
    nodes = list(d.nodes)
    forest_preds = []
    pred_site = []
    for p in d.value_preds:
        s = lca(d, d.site[p.left[0]], d.site[p.right[0]])
        pred_site.append((p, s))
        if s == FOREST:
            forest_preds.append(p)
        else:
            nodes[s] = replace(nodes[s], preds=nodes[s].preds + (p,))
    out_attrs: list[Attr] = []
    for it in d.member.items:
        for a in it.attrs:
            if a not in out_attrs:
                out_attrs.append(a)
    return replace(d, nodes=tuple(nodes), pred_site=tuple(pred_site), forest_preds=tuple(forest_preds),
                   out_attrs=tuple(out_attrs))
