"""Per-atom views at run time: the distinct view rows of a timestamp, projected onto the synopsis keys.

The forest (:class:`obda.analysis.forest.ViewDedupe`) says which pipelines
produce the rows of which view alias and how a row is projected; this module
does it on the driver: rows are a set per timestamp (however many branches,
source rows or micro-batches bring them), counted once each after projection.
"""

from __future__ import annotations

from sqlglot import exp

from obda.analysis.forest import JoinBranch, ViewDedupe
from obda.execution.rows import evaluate


def project(views: ViewDedupe, ts: int | None, groups: dict, joined: dict | None = None) -> dict:
    """``groups`` (pipeline id → key → count) with every view's distinct rows projected and counted; a view
    branch that joins a stream with other tables is joined here, on the rows of the timestamp and the rows of
    its static tables (``joined``, the second part of :func:`statics`)."""
    if not views.positions:
        return groups
    for j in views.joins:
        if j.temporal and all(groups.get(pid) for pid in j.streams):
            rows = join_rows(j, {**(joined or {}), **groups})
            if rows:
                target = groups[j.target] = dict(groups.get(j.target) or {})
                target.update(dict.fromkeys(rows, 1))
    out = {}
    for pid, rows in groups.items():
        pos = views.positions.get(pid)
        if pos is None:
            out[pid] = rows
            continue
        counted: dict = {}
        for row in rows:
            k = tuple(ts if i < 0 else row[i] for i in pos)
            counted[k] = counted.get(k, 0) + 1
        out[pid] = counted
    return out


def statics(views: ViewDedupe, counted: dict) -> tuple[dict, dict]:
    """Counted static rows per pipeline → per alias pipeline, each static view's distinct rows projected; and
    the counted rows of the static tables of the view branches joined at every closed timestamp (pipeline id
    → rows), for :func:`project` and the Spark backend (the engine keeps both; the plan is never changed)."""
    out: dict = {}
    per_ts: dict = {}  # the static tables' rows of the branches joined per timestamp
    joined = {pid for j in views.joins for _, pid, _ in j.entries}
    for pid, rows in counted.items():
        target = views.branch_of.get(pid)
        if target is not None:
            out.setdefault(target, {}).update(dict.fromkeys(rows, 1))
        elif pid not in joined:
            out[pid] = rows
    for j in views.joins:
        if j.temporal:  # joined at every closed timestamp, with these rows of its static tables
            per_ts.update({pid: counted.get(pid, {}) for _, pid, _ in j.entries if pid not in j.streams})
            continue
        out.setdefault(j.target, {}).update(dict.fromkeys(join_rows(j, counted), 1))
    return project(views, None, out), per_ts


def join_rows(j: JoinBranch, counted: dict) -> set[tuple]:
    """The distinct view rows of a static branch over several tables, from the counted rows of its tables."""

    def flat(e: exp.Expression) -> exp.Expression:
        def tr(node):
            if isinstance(node, exp.Column) and node.table:
                return exp.column(f"{node.table}.{node.name}", quoted=True)
            return node

        return e.copy().transform(tr)

    conds = [(flat(c), {f"{x.table}.{x.name}" for x in c.find_all(exp.Column)}) for c in j.conds]
    items = [flat(e) for e in j.items]
    partial: list[dict] = [{}]
    known: set[str] = set()
    pending = list(conds)
    for alias, pid, columns in j.entries:
        table_rows = [{f"{alias}.{c}": v for c, v in zip(columns, key)} for key in counted.get(pid, {})]
        known |= {f"{alias}.{c}" for c in columns}
        ready = [c for c in pending if c[1] <= known]
        pending = [c for c in pending if not c[1] <= known]
        partial = [{**left, **right} for left in partial for right in table_rows
                   if all(evaluate(c, {**left, **right}) is True for c, _ in ready)]
    return {tuple(evaluate(e, row) for e in items) for row in partial
            if all(evaluate(c, row) is True for c, _ in pending)}
