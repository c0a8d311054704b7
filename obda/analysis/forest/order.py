"""Rule 7 — order expiry: what ordered arrival lets synopses forget (docs/analysis.md, "k-constraints").

A declared OA(k) on a stream column ``S.c`` (:mod:`obda.model.constraints`) says that a row of ``S`` more
than ``k`` later than another has a value no smaller.  So once the stream has shown the value ``w`` more
than ``k`` ago — its *value watermark* — no later row of ``S`` has a value below ``w`` (Babu et al. 2004,
§6.1–6.2: ordered arrival of the parent stream).  An entry of a synopsis is read again only when a later
row of its parent unit arrives (of another root, for a root): when that unit reads ``S`` through an alias
whose ``c`` is equated with an attribute of the entry's key, and the entry's value there is below the
watermark, no later row can join it and the entry is dead.

The rule gives every node its ``value_expiry``: one group per unit whose later rows the entry waits for
(the parent unit; every other root, for a root), each a disjunction of ``(key position, constraint)``.
The executor drops an entry when every group has a position below its constraint's watermark
(:func:`obda.execution.relations.expire_by_order`), and quarantines a row of ``S`` below the watermark (it
could have joined a dropped entry).  Ordered arrival bounds values, not the distance between timestamps,
so it does not change a verdict: the two streams' values could drift apart; it drops the state that the
data lets go.  Not for SELECT DISTINCT (its extremes are kept per key, rule ``compress_extremes``).
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.constraints import equalities
from obda.analysis.forest.draft import Draft
from obda.model.constraints import ORDERED


def order_expiry(d: Draft) -> Draft:
    ordered = [c for c in d.constraints if c.kind == ORDERED]
    if not ordered or d.unsatisfiable or d.distinct:
        return d
    m = d.member
    eq = equalities((p.left, p.right) for p in m.cross if p.op == "=" and not p.offset)

    def group(node, unit) -> tuple[tuple[int, str], ...]:
        """The key positions of ``node`` equated with an ordered column read by ``unit``'s aliases."""
        out = []
        for t in unit.aliases:
            for c in ordered:
                if m.table(t).name.lower() != c.left.lower():
                    continue
                col = c.on[0][0]
                out += [(i, c.name) for i, k in enumerate(node.key) if k[0] != t and eq.same(k, (t, col))]
        return tuple(dict.fromkeys(out))

    nodes = []
    for n in d.nodes:
        gs = [group(n, unit) for unit in d.awaited(n.id)]  # every awaited unit must rule the entry out
        nodes.append(replace(n, value_expiry=tuple(gs) if gs and all(gs) else ()))
    return replace(d, nodes=tuple(nodes))
