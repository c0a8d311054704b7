"""Rule 8 — consumption: what a many-one join lets a synopsis forget at once (Babu et al. 2004, §1.3.1, §3).

A stream table whose declared ``key`` leaves its timestamp out has at most one row per key value in its
whole history.  An entry of a synopsis is read again only when a later row of its parent unit arrives (of
the other root, for one of two roots).  When that unit reads such a table through an alias whose key
columns are all equated with attributes of the entry's key, the one row with the entry's values is the
only one that can complete it: once that row has arrived, the entry is dead — the paper drops a tuple of
``S₁`` once it has joined its ``S₂`` tuple (the *Yes* component of a many-one join).  (A child row that
comes after its keyed row can never join either; it is not recognised, and waits for its own expiry: the
values seen are only known to a Bloom filter, whose false positives would drop live entries.)

The rule gives such a node ``consumed``: ``(alias, key positions, key constraint name)``; the alias's
pipeline keeps the key columns.  The executor drops the entries after the closed timestamp that brought
the row (:func:`obda.execution.relations.consume`) and watches the key (``obda.model.constraints.KEY``): a
row with a value seen at an earlier timestamp breaks it and is quarantined, since it could have joined
entries already dropped.  Not for SELECT DISTINCT.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.constraints import equalities
from obda.analysis.forest.draft import Draft
from obda.model.constraints import key_constraint


def keyed_consumption(d: Draft) -> Draft:
    if d.unsatisfiable or d.distinct:
        return d
    m = d.member
    eq = equalities((p.left, p.right) for p in m.cross if p.op == "=" and not p.offset)

    def spec(node, unit):
        for t in unit.aliases:
            table = m.table(t)
            ts = (table.timestamp or "").lower()
            if not table.is_stream or not table.key or any(k.lower() == ts for k in table.key) or dict(m.views).get(t):
                continue
            pos = []
            for kc in table.key:
                i = next((i for i, a in enumerate(node.key) if a[0] != t and eq.same(a, (t, kc))), None)
                if i is None:
                    break
                pos.append(i)
            else:
                return t, tuple(pos), key_constraint(table).name
        return None

    nodes, kept = [], list(d.kept)
    for n in d.nodes:
        awaited = d.awaited(n.id)
        s = spec(n, awaited[0]) if len(awaited) == 1 else None  # one unit: its keyed row completes the entry
        if s is not None:  # every alias of the keyed stream keeps its key: a row that breaks it leaves them all
            table = m.table(s[0])
            kept += [(a, kc) for a, t in m.aliases if t.name == table.name for kc in table.key]
        nodes.append(replace(n, consumed=(s,) if s else ()))
    return replace(d, nodes=tuple(nodes), kept=tuple(dict.fromkeys(kept)))
