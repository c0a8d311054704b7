"""Rule 6 — cut-offs: a unit whose timestamp a constant bounds is finite (spec §3 step 3).

A stream alias with ``ts < c`` / ``ts <= c`` / ``ts = c`` among its own
conditions has a last timestamp; a child of a finite unit ends strictly
before its parent's end (its tuples must be earlier than some parent tuple).
The executor stops adding to a unit after its cut-off.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from sqlglot import exp

from obda.analysis.forest.draft import Draft
from obda.analysis.forest.constants import unparen
from obda.analysis.forest.member_conditions import CMP
from obda.analysis.forest.model import FLIP, Member


def timestamp_micros(e: exp.Expression) -> int | None:
    """A constant timestamp expression (``CAST('…' AS TIMESTAMP)``, a string) in µs since the epoch (UTC)."""
    e = unparen(e)
    if isinstance(e, (exp.Cast, exp.TryCast)):
        e = unparen(e.this)
    if not isinstance(e, exp.Literal) or not e.is_string:
        return None
    try:
        d = dt.datetime.fromisoformat(e.this.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is not None:
        d = d.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = d - dt.datetime(1970, 1, 1)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def ts_upper_bound(m: Member, alias: str) -> int | None:
    """Largest timestamp (µs) a row of ``alias`` can have under its local conditions, if bounded."""
    table = m.table(alias)
    best = None
    for c in m.local_of(alias):
        u = unparen(c)
        op = CMP.get(type(u))
        if op is None:
            continue
        lhs, rhs = unparen(u.this), unparen(u.expression)
        if isinstance(rhs, exp.Column) and not isinstance(lhs, exp.Column):
            lhs, rhs, op = rhs, lhs, FLIP[op]
        if not isinstance(lhs, exp.Column) or lhs.name.lower() != (table.timestamp or "").lower():
            continue
        if rhs.find(exp.Column) is not None or op not in ("<", "<=", "="):
            continue
        v = timestamp_micros(rhs)
        if v is None:
            continue
        ub = v - 1 if op == "<" else v
        best = ub if best is None else min(best, ub)
    return best


def finite_cutoffs(d: Draft) -> Draft:
    nodes = list(d.nodes)
    for i, n in enumerate(nodes):
        for a in n.aliases:
            ub = ts_upper_bound(d.member, a)
            if ub is not None:
                nodes[i] = n = replace(n, cutoff=ub if n.cutoff is None else min(n.cutoff, ub))
    for n in sorted(nodes, key=lambda n: n.depth):
        n = nodes[n.id]
        if n.parent is not None and nodes[n.parent].cutoff is not None:
            pc = nodes[n.parent].cutoff - 1  # type: ignore[operator]
            nodes[n.id] = replace(n, cutoff=pc if n.cutoff is None else min(n.cutoff, pc))
    return replace(d, nodes=tuple(nodes))
