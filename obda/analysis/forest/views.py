"""Per-atom views in the forest: one pipeline per view branch, each keeping the whole view row.

A view (docs/semantics.md, "Per-atom views") is a set per timestamp.  The
forest gives its alias one pipeline per branch over the branch's source table
(the view-level filters and computed attributes rewritten over that table),
each keeping the whole view row; :class:`~obda.analysis.forest.model.ViewDedupe`
says which pipelines feed which alias and how a distinct row is projected
onto the alias's synopsis key when its timestamp closes.  A branch joining
several tables (a referencing object map) reads them whole (:class:`JoinBranch`):
once for static tables, per closed timestamp when it reads a stream.
"""

from __future__ import annotations

from sqlglot import exp

from obda.analysis.forest.member_conditions import mark_timestamps
from obda.analysis.forest.model import JoinBranch, Pipeline
from obda.analysis.sql_reading import transform_outside_checks
from obda.errors import ExecutionError, Location
from obda.model.sources import ColumnType, Sources, Table


def view_pipelines(p: Pipeline, view, sources: Sources, first_id: int):
    """The pipelines that compute the view read by ``p``'s alias, each keeping the whole view row.

    A branch over one table is one pipeline: the view-level filters and
    computed attributes (over the view's columns) are rewritten over the
    table by substituting the branch's expression for every view column.  A
    branch that joins several static tables reads each of them whole (one
    pipeline per table, all columns) and is joined on the driver when the
    static tables are loaded (:class:`JoinBranch`).  Returns the pipelines, the
    ids of those that produce view rows, the projection positions and the
    join branches.
    """
    ts = view.table.timestamp
    cols = [c.name for c in view.table.columns if c.name != ts]
    full = [(p.alias, c) for c in cols] + [a for a, _ in p.exprs]
    positions = tuple(-1 if (ts is not None and a == (p.alias, ts)) else full.index(a) for a in p.attrs)
    out: list[Pipeline] = []
    rows_of: list[int] = []
    joins: list[JoinBranch] = []
    next_id = first_id

    def table_of(name: str) -> Table:
        table = sources.table(name)
        if table is None:
            raise ExecutionError(f"view {view.name}: table {name!r} is not declared in the sources file")
        return table

    for br in view.parts:
        if br.single:  # timestamps whose text is taken are marked for the local backend (forest.members)
            table = table_of(br.table)

            def is_ts(col: exp.Column, table=table) -> bool:
                c = table.column(col.name)
                return c is not None and c.type is ColumnType.TIMESTAMP

            items = {k: mark_timestamps(v, is_ts) for k, v in br.items}
        else:
            items = dict(br.items)

        def sub(e: exp.Expression) -> exp.Expression:
            def tr(node):
                if isinstance(node, exp.Column) and node.name in items:
                    return items[node.name].copy()
                return node

            return transform_outside_checks(e, tr)

        if br.single:
            filters = tuple(c.copy() for c in br.conds) + tuple(sub(f) for f in p.filters)
            exprs = tuple(((p.alias, c), items[c].copy()) for c in cols) + tuple((a, sub(e)) for a, e in p.exprs)
            out.append(Pipeline(next_id, p.member, p.alias, table_of(br.table), filters, tuple(full), exprs))
            rows_of.append(next_id)
            next_id += 1
            continue
        if not all(br.tables):
            tm, file, line = br.origin
            raise ExecutionError(
                f"view {view.name}: its branch from triples map {tm} joins "
                f"{', '.join(t or 'a derived table' for t in br.tables)}; the executor reads the tables of such a "
                "branch, not derived tables (write the logical table as an SPJ over source tables)",
                Location(file, line),
            )
        entries, streams, tables = [], [], {}
        for alias, name in zip(br.aliases, br.tables):
            table = tables[alias] = table_of(name)
            sub_alias = f"{p.alias}/{alias}"
            out.append(Pipeline(next_id, p.member, sub_alias, table, (),
                                tuple((sub_alias, c.name) for c in table.columns)))
            entries.append((alias, next_id, tuple(c.name for c in table.columns)))
            if table.is_stream:
                streams.append(next_id)
            next_id += 1

        def joined_ts(col: exp.Column, tables=tables) -> bool:
            c = tables[col.table].column(col.name) if col.table in tables else None
            return c is not None and c.type is ColumnType.TIMESTAMP

        # the member's conditions on the view alias hold on every view row: they join the branch's conditions
        conds = tuple(c.copy() for c in br.conds) + tuple(sub(f) for f in p.filters)
        row = tuple(items[c].copy() for c in cols) + tuple(sub(e) for _, e in p.exprs)
        joins.append(JoinBranch(p.id, tuple(entries), tuple(mark_timestamps(c, joined_ts) for c in conds),
                                tuple(mark_timestamps(e, joined_ts) for e in row), view.temporal, tuple(streams)))
    return out, rows_of, positions, joins
