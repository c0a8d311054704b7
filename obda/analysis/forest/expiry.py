"""Rule 6 — expiry: what an interval join lets each synopsis forget (docs/analysis.md, "Interval joins").

A member whose stream timestamps are related by interval constraints (``m2.ts <= m1.ts + 5 min``,
CrossPreds with an offset) that bound every pair both ways is *windowed*
(:mod:`obda.analysis.windows`): an entry carrying the timestamp ``τ`` of alias ``a`` can only be
completed by rows up to ``τ + lag(a)``, so once that timestamp has closed the entry is dead.  Every
unit's key gets a stream timestamp (its own, when no comparison above needs one), and ``expiry`` says
which key positions expire after which lag; the executor drops dead entries after every closed
timestamp.  A member that is not windowed keeps everything (the analysis does not show it bounded).

Declared k-constraints (RI, CA: :mod:`obda.analysis.constraints`) that apply to the member add their
difference constraints: when only they make the member windowed, its nodes are ``constrained`` (the
executor watches the constraints and quarantines the rows that break them) and ``plain_expiry`` says what
the query's own conditions allow once a constraint stops being used.  The columns of every declared
constraint are kept by the pipelines of its streams, so that a violating row can be taken out of every
alias it feeds.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.constraints import equalities, uses
from obda.analysis.forest.draft import Draft
from obda.analysis.windows import close, constraint
from obda.errors import ExecutionError


def interval_expiry(d: Draft) -> Draft:
    m = d.member
    d = _keep_constraint_columns(d)
    used = _constraint_uses(d)
    if d.unsatisfiable or not (any(p.offset for p in m.cross) or used):
        return d
    if d.distinct and any(p.offset for p in m.cross):
        raise ExecutionError("SELECT DISTINCT with an interval join (a timestamp compared with another one moved by "
                             "a duration) is not executable; use SELECT (a bag) or an aggregate")
    stream_ts = {alias: (alias, t.timestamp) for alias, t in m.aliases if t.is_stream and t.timestamp}
    cons = [c for p in m.cross if d.is_stream_ts(p.left) and d.is_stream_ts(p.right)
            for c in constraint(p.left[0], p.op, p.right[0], p.offset)]
    plain = close(stream_ts, cons)
    bounds = plain
    if not plain.windowed and used and not d.distinct:  # a DISTINCT answer set is not bounded by constraints
        bounds = close(stream_ts, cons + [c for u in used for c in u.differences()])
        if bounds.windowed or bounds.contradiction:
            d = replace(d, constraints_used=tuple(dict.fromkeys(u.constraint.name for u in used)))
    constrained = bounds is not plain
    # the constraints contradict the query's time conditions: no rows that keep them join, so nothing is
    # kept (lag 0); a row that breaks them is quarantined (the analysis: bounded, "no answer")
    if (bounds.contradiction and not constrained) or not (bounds.windowed or bounds.contradiction):
        return d
    nodes, kept = [], list(d.kept)
    for n in d.nodes:
        key = list(n.key)
        if not any(d.is_stream_ts(a) for a in key):
            own = stream_ts[n.aliases[0]]
            key = sorted(key + [own])
            kept.append(own)
        expiry = tuple((i, 0 if bounds.contradiction else int(bounds.lag(a[0])))
                       for i, a in enumerate(key) if d.is_stream_ts(a))
        fallback = tuple((i, int(plain.lag(a[0]))) for i, a in enumerate(key)
                         if d.is_stream_ts(a) and plain.lag(a[0]) < float("inf")) if constrained else ()
        nodes.append(replace(n, key=tuple(key), expiry=expiry, plain_expiry=fallback, constrained=constrained))
    return replace(d, nodes=tuple(nodes), kept=tuple(kept))


def _constraint_uses(d: Draft):
    m = d.member
    streams = [(a, t.name) for a, t in m.aliases if t.is_stream]
    eq = equalities((p.left, p.right) for p in m.cross if p.op == "=" and not p.offset)
    return uses(streams, eq, d.constraints, attr=lambda alias, col: (alias, col))


def _keep_constraint_columns(d: Draft) -> Draft:
    if not d.constraints:
        return d
    extra = []
    for alias, t in d.member.aliases:
        for c in d.constraints:
            if t.name.lower() == c.left.lower():
                extra += [(alias, a) for a, _ in c.on]
            if t.name.lower() == c.right.lower():
                extra += [(alias, b) for _, b in c.on]
    return replace(d, kept=tuple(dict.fromkeys(d.kept + tuple(extra))))
