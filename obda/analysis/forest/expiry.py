"""Rule 6 — expiry: what an interval join lets each synopsis forget (docs/analysis.md, "Interval joins").

A member whose stream timestamps are related by interval constraints (``m2.ts <= m1.ts + 5 min``,
CrossPreds with an offset) that bound every pair both ways is *windowed*
(:mod:`obda.analysis.windows`): an entry carrying the timestamp ``τ`` of alias ``a`` can only be
completed by rows up to ``τ + lag(a)``, so once that timestamp has closed the entry is dead.  Every
unit's key gets a stream timestamp (its own, when no comparison above needs one), and ``expiry`` says
which key positions expire after which lag; the executor drops dead entries after every closed
timestamp.  A member that is not windowed keeps everything (the analysis does not show it bounded).
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.draft import Draft
from obda.analysis.windows import close, constraint
from obda.errors import ExecutionError


def interval_expiry(d: Draft) -> Draft:
    m = d.member
    if d.unsatisfiable or not any(p.offset for p in m.cross):
        return d
    if d.distinct:
        raise ExecutionError("SELECT DISTINCT with an interval join (a timestamp compared with another one moved by "
                             "a duration) is not executable; use SELECT (a bag) or an aggregate")
    stream_ts = {alias: (alias, t.timestamp) for alias, t in m.aliases if t.is_stream and t.timestamp}
    cons = [c for p in m.cross if d.is_stream_ts(p.left) and d.is_stream_ts(p.right)
            for c in constraint(p.left[0], p.op, p.right[0], p.offset)]
    bounds = close(stream_ts, cons)
    if bounds.contradiction or not bounds.windowed:
        return d
    nodes, kept = [], list(d.kept)
    for n in d.nodes:
        key = list(n.key)
        if not any(d.is_stream_ts(a) for a in key):
            own = stream_ts[n.aliases[0]]
            key = sorted(key + [own])
            kept.append(own)
        expiry = tuple((i, int(bounds.lag(a[0]))) for i, a in enumerate(key) if d.is_stream_ts(a))
        nodes.append(replace(n, key=tuple(key), expiry=expiry))
    return replace(d, nodes=tuple(nodes), kept=tuple(kept))
