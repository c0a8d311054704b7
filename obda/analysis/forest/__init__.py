"""The synopsis forest of every member: the one plan the executor runs (spec §3–§5).

Built once, by the analysis, for every member (bounded or not), from the
members the unfolder emitted (:mod:`obda.analysis.forest.members`).  As in
sqlglot's optimizer, each step is one pure rule in its own module, applied in
the order of :data:`RULES` to an immutable :class:`~obda.analysis.forest.draft.Draft`:

1. :func:`~obda.analysis.forest.units.merge_synchronous` — units (``τ1 = τ2``);
2. :func:`~obda.analysis.forest.edges.order_units` — parent/child edges (``τ_child < τ_parent``);
3. :func:`~obda.analysis.forest.sites.place_statics` — where static relations are joined;
4. :func:`~obda.analysis.forest.sites.place_conditions` — where comparisons are evaluated;
5. :func:`~obda.analysis.forest.keys.synopsis_keys` — what each synopsis keeps;
6. :func:`~obda.analysis.forest.expiry.interval_expiry` — what an interval join lets synopses forget;
7. :func:`~obda.analysis.forest.order.order_expiry` — what ordered arrival (OA(k)) lets synopses forget;
8. :func:`~obda.analysis.forest.consumed.keyed_consumption` — what a many-one join (a stream key) lets them forget;
9. :func:`~obda.analysis.forest.extremes.compress_extremes` — MaxRef/MinRef extremes (set semantics);
10. :func:`~obda.analysis.forest.cutoffs.finite_cutoffs` — last timestamps of finite units;
11. :func:`~obda.analysis.forest.pipelines.row_pipelines` — the per-row work on every alias.

Then per-atom views get their branch pipelines (:mod:`obda.analysis.forest.views`).
The executor (:mod:`obda.execution`) consumes the :class:`Forest` as is.
"""

from __future__ import annotations

from dataclasses import replace

from obda.analysis.forest.consumed import keyed_consumption
from obda.analysis.forest.cutoffs import finite_cutoffs
from obda.analysis.forest.draft import Draft, start
from obda.analysis.forest.edges import order_units
from obda.analysis.forest.expiry import interval_expiry
from obda.analysis.forest.extremes import compress_extremes
from obda.analysis.forest.keys import synopsis_keys
from obda.analysis.forest.members import members_of
from obda.analysis.forest.order import order_expiry
from obda.analysis.forest.model import (
    FOREST,
    Attr,
    CrossPred,
    Forest,
    JoinBranch,
    Member,
    MemberForest,
    Node,
    OutItem,
    Pipeline,
    ViewDedupe,
)
from obda.analysis.forest.pipelines import row_pipelines
from obda.analysis.forest.sites import place_conditions, place_statics
from obda.analysis.forest.units import merge_synchronous
from obda.analysis.forest import timed as timed_checks
from obda.analysis.forest.views import view_pipelines
from obda.analysis.sql_reading import check_query, key_check
from obda.model.constraints import key_constraint
from obda.model.sources import Sources

RULES = (
    merge_synchronous,
    order_units,
    place_statics,
    place_conditions,
    synopsis_keys,
    interval_expiry,
    order_expiry,
    keyed_consumption,
    compress_extremes,
    finite_cutoffs,
    row_pipelines,
)


def member_forest(member: Member, distinct: bool, first_pipeline_id: int = 0, rules=RULES,
                  constraints: tuple = ()) -> MemberForest:
    """The forest of one member: every rule of ``rules`` in order (``constraints``: the declared k-constraints)."""
    d: Draft = start(member, distinct, first_pipeline_id, constraints)
    for rule in rules:
        d = rule(d)
    keyed: tuple[int, ...] = ()
    if len(d.roots) == 1 and not d.unsatisfiable:
        root = set(d.nodes[d.roots[0]].aliases)
        keyed = tuple(i for i, it in enumerate(member.items[:member.visible]) if any(a[0] in root for a in it.times))
    return MemberForest(
        member=member, distinct=distinct, nodes=d.nodes, roots=d.roots, forest_statics=d.forest_statics,
        forest_preds=d.forest_preds, out_attrs=d.out_attrs, pipelines=d.pipelines,
        unsatisfiable=d.unsatisfiable, absorbed=d.absorbed, constraints=d.constraints_used, keyed=keyed,
    )


def build_forest(source, sources: Sources, dialect: str | None = None, first_id: int = 0,
                 text: str | None = None, file: str | None = None, readings: dict | None = None) -> Forest:
    """The forest of a Compilation, a sqlglot tree or SQL text (read by the analyser's front end); its pipeline
    ids start at ``first_id`` (a check's query read with the query's rows: :mod:`obda.analysis.forest.timed`).
    ``text`` (and its ``file``): the SQL a tree was parsed from, to locate errors; ``readings``: the analysis's
    reading of each SELECT (by position), reused rather than read again."""
    if isinstance(source, str):
        text = source
    members, distinct, columns = members_of(source, sources, dialect, readings)
    forests: list[MemberForest] = []
    planned = []
    for m in members:
        mf = member_forest(m, distinct, first_pipeline_id=first_id + len(planned), constraints=sources.constraints)
        forests.append(mf)
        planned.extend(mf.pipelines.values())
    branch_of: dict[int, int] = {}
    positions: dict[int, tuple[int, ...]] = {}
    joins: list[JoinBranch] = []
    pipelines: list[Pipeline] = []
    next_id = first_id + len(planned)
    views_of = {m.index: dict(m.views) for m in members}
    for p in planned:
        view = views_of[p.member].get(p.alias)
        if view is None:
            pipelines.append(p)
            continue
        branches, rows_of, pos, js = view_pipelines(p, view, sources, next_id)
        next_id += len(branches)
        pipelines.extend(branches)
        positions[p.id] = pos
        branch_of.update((i, p.id) for i in rows_of)
        joins.extend(js)
    read = {p.table.name.lower() for p in pipelines if p.table.is_stream}
    watched = [c for c in sources.constraints if c.left.lower() in read and c.right.lower() in read]
    keyed = {name: mf.member.table(t) for mf in forests for n in mf.nodes for t, _, name in n.consumed}
    for name, table in list(keyed.items()):  # a row that breaks the key must leave every alias of its stream
        if any(p.table.name == table.name and p.member >= 0 and any((p.alias, k) not in p.attrs for k in table.key)
               for p in pipelines):
            del keyed[name]
            forests = [replace(mf, nodes=tuple(replace(n, consumed=tuple(c for c in n.consumed if c[2] != name))
                                               for n in mf.nodes)) for mf in forests]
    watched += [key_constraint(table) for table in keyed.values()]  # the keys some synopsis drops entries by
    monitors = []
    for c in watched:  # the raw rows of each side, projected on the constraint's columns (no filter)
        sides = ((c.left, tuple(a for a, _ in c.on)), (c.right, tuple(b for _, b in c.on)))
        for side, cols in sides[:1 if c.left == c.right else 2]:
            table = sources.table(side)
            alias = f"~{c.name}:{table.name}"
            pipelines.append(Pipeline(next_id, -1, alias, table, (), tuple((alias, col) for col in cols)))
            monitors.append((c.name, table.name, next_id))
            next_id += 1
    used = tuple(c.name for c in watched if any(c.name in mf.constraints + mf.orders + mf.consumes for mf in forests))
    views = ViewDedupe(branch_of, positions, tuple(joins))
    compiled = {c.sql.sql(): c for c in getattr(source, "checks", ())}
    timed: dict[str, Forest] = {}
    for mf in forests:
        for c in mf.member.checks:
            if not c.timed:
                continue
            f = timed.get(c.tree.sql())
            if f is None:
                f = timed[c.tree.sql()] = build_forest(compiled.get(c.tree.sql(), c.tree), sources, dialect, next_id)
                next_id = timed_checks.next_pipeline_id(f, next_id)
                views = timed_checks.merge(pipelines, views, f)
            timed_checks.check_shape(mf, c, f, text, file)
    static = _check_forests(compiled, pipelines, forests, sources, dialect)
    return Forest(tuple(forests), distinct, columns, tuple(pipelines), views, tuple(watched), tuple(monitors), used,
                  static, tuple(timed.items()))


def _check_forests(compiled: dict, pipelines, forests, sources: Sources, dialect) -> tuple[tuple[str, Forest], ...]:
    """The forest of every static check's query — those the pipelines' filters read, and those tested on
    members' answers — from the Compilation's checks (``compiled``), else from the subquery itself, by the
    subquery's SQL text."""
    trees = [check_query(c) for p in pipelines for c in map(key_check, p.filters) if c is not None]
    trees += [c.tree for mf in forests for c in mf.member.checks if not c.timed]
    out: dict[str, Forest] = {}
    for tree in trees:
        text = tree.sql()
        if text not in out:
            out[text] = build_forest(compiled.get(text, tree), sources, dialect)
    return tuple(out.items())


__all__ = [
    "RULES", "build_forest", "member_forest", "members_of", "Forest", "MemberForest", "Member", "Node", "Pipeline",
    "CrossPred", "OutItem", "ViewDedupe", "JoinBranch", "Attr", "FOREST",
]
