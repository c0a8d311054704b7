"""Rule 5 — extremes: with set semantics, one key attribute compared in one direction only is compressed.

Arasu §5.2 / §7.2: an attribute of a synopsis that later tuples only compare
with ``<`` (``>``) needs only its minimum (maximum) per rest of the key.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.analysis.forest.keys import uses_above


def compress_extremes(d: Draft) -> Draft:
    if not d.distinct:
        return d
    nodes = []
    for n in d.nodes:
        uses = uses_above(d, n.id)
        compress = None
        for i, a in enumerate(n.key):
            ops = set(uses[a])
            if ops and ops <= {"<", "<="}:
                compress = (i, "min")
                break
            if ops and ops <= {">", ">="}:
                compress = (i, "max")
                break
        nodes.append(replace(n, compress=compress))
    return replace(d, nodes=tuple(nodes))
