"""Execution plan: from unfolded SQL (a UNION [ALL] of SPJ members) to synopsis trees.

The executor needs, per SPJ member (docs/semantics.md), four things:

* the **local** conditions of every FROM alias (conditions on one alias only:
  column-constant comparisons, timestamp windows) — they run in Spark, per row;
* the **cross** conditions (``a.c op b.d`` between two aliases) — they run on
  the driver over aggregated synopsis entries;
* the **units**: stream aliases merged by timestamp equality (``τ1 = τ2``,
  boundedness.md §3 step 2) and the **forest** of units given by strict
  timestamp predicates (``τ_child < τ_parent``, §4): a parent tuple only joins
  child tuples of strictly earlier closed timestamps, so the predicate is
  guaranteed by the order of evaluation and the timestamp need not be stored;
* per unit the **synopsis key**: the attributes of its subtree that
  conditions or the projection above the subtree still need (the "bounded
  attributes kept" of the analyser's plan).  Counts (bag) or existence (set)
  are kept per key; for set semantics one attribute compared only in one
  direction is compressed to its extreme (MaxRef/MinRef, Arasu §5.2).

The plan is correct for *every* SPJ member: timestamp predicates that the
forest does not guarantee (``≤`` and ``≠`` are first split into disjoint
members, §3 step 1; a unit with two parents keeps one) are evaluated as value
predicates on timestamps kept in the keys.  Whether the state then stays
bounded is what the analyser decides; the executor only reports it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterable

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from obda.errors import ExecutionError, Location
from obda.model.sources import ColumnType, Sources, Table

FOREST = -1  # evaluation site "above every tree": roots are joined here, outputs projected here

Attr = tuple[str, str]  # (FROM alias, column name or '#pK' for a computed projection expression)

_CMP = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class CrossPred:
    """``left op right`` between attributes of two different FROM aliases."""

    left: Attr
    op: str
    right: Attr

    @property
    def attrs(self) -> tuple[Attr, Attr]:
        return (self.left, self.right)

    def oriented(self, attr: Attr) -> str:
        """The operator seen from ``attr`` put on the left."""
        return self.op if self.left == attr else _FLIP[self.op]

    def __str__(self) -> str:
        return f"{self.left[0]}.{self.left[1]} {self.op} {self.right[0]}.{self.right[1]}"


@dataclass(frozen=True)
class OutItem:
    """One projected answer variable: an attribute, a constant, or a CONCAT of both."""

    name: str
    kind: str  # attr | const | concat
    attr: Attr | None = None
    value: object = None
    parts: tuple[tuple[str, object], ...] = ()  # concat: ('const', str) | ('attr', Attr)

    @property
    def attrs(self) -> tuple[Attr, ...]:
        if self.kind == "attr":
            return (self.attr,)
        if self.kind == "concat":
            return tuple(v for k, v in self.parts if k == "attr")
        return ()


@dataclass(frozen=True)
class Member:
    """One parsed SPJ member (before planning)."""

    index: int
    aliases: tuple[tuple[str, Table], ...]
    local: tuple[tuple[str, tuple[exp.Expression, ...]], ...]  # alias -> conditions (unqualified columns)
    cross: tuple[CrossPred, ...]
    items: tuple[OutItem, ...]
    exprs: tuple[tuple[Attr, exp.Expression], ...] = ()  # computed single-alias projection parts
    unsatisfiable: bool = False
    sql: str = ""
    origin: int = 0  # index of the SELECT this member came from (before splitting ≤ / ≠ on timestamps)
    views: tuple[tuple[str, object], ...] = ()  # alias -> per-atom view (obda.mapping AtomView) it reads

    def table(self, alias: str) -> Table:
        return dict(self.aliases)[alias]

    def local_of(self, alias: str) -> tuple[exp.Expression, ...]:
        return dict(self.local).get(alias, ())


@dataclass(frozen=True)
class ParsedQuery:
    members: tuple[Member, ...]
    distinct: bool
    columns: tuple[str, ...]
    sources: Sources | None = None


# ----------------------------------------------------------------------------------------------
# SQL parsing


def parse_query(sql, sources: Sources, dialect: str = "spark") -> ParsedQuery:
    """Parse SQL text, a sqlglot expression or a ``Compilation`` into members.

    Members are expanded so that no member has a ``≤``/``≥``/``≠`` between two
    stream timestamps (split into disjoint ``<``/``=`` members, spec §3 step 1).
    """
    views: list[dict] = []
    if hasattr(sql, "members") and hasattr(sql, "sql") and hasattr(sql, "query"):  # a Compilation
        selects = [m.select for m in sql.members]
        distinct = bool(sql.distinct)
        columns = tuple(sql.columns)
        views = [{a: sql.view(s.view) for s in m.origin.atom_sources if s.view for a in s.table_aliases}
                 for m in sql.members]
    else:
        tree = sql if isinstance(sql, exp.Expression) else _parse_text(sql, dialect)
        selects, distinct = _flatten_union(tree)
        columns = tuple(_item_name(e) for e in selects[0].expressions) if selects else ()
    members: list[Member] = []
    for origin, sel in enumerate(selects):
        for m in _expand_members(_parse_member(sel, sources, origin, views[origin] if views else {})):
            members.append(Member(**{**m.__dict__, "index": len(members)}))
    return ParsedQuery(tuple(members), distinct, columns, sources)


def _parse_text(text: str, dialect: str) -> exp.Expression:
    try:
        return sqlglot.parse_one(text, read=dialect)
    except sqlglot.errors.ParseError as e:
        err = e.errors[0] if e.errors else {}
        raise ExecutionError(
            f"cannot parse the SQL to execute: {err.get('description', e)}",
            Location(None, err.get("line"), err.get("col")),
        ) from e


def _flatten_union(tree: exp.Expression) -> tuple[list[exp.Select], bool]:
    if isinstance(tree, exp.Subquery):
        return _flatten_union(tree.this)
    if isinstance(tree, exp.Union):
        left, dl = _flatten_union(tree.this)
        right, dr = _flatten_union(tree.expression)
        return left + right, bool(tree.args.get("distinct")) or dl or dr
    if isinstance(tree, exp.Select):
        return [tree], bool(tree.args.get("distinct"))
    raise ExecutionError(f"expected a UNION [ALL] of SELECTs, got {type(tree).__name__}: {tree.sql()[:80]}")


def _item_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name
    raise ExecutionError(f"projected item {e.sql()!r} has no name (use AS)")


def _conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _unparen(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def _parse_member(sel: exp.Select, sources: Sources, index: int, views: dict | None = None) -> Member:
    aliases: dict[str, Table] = {}
    views = views or {}
    used_views: dict[str, object] = {}
    conds: list[exp.Expression] = []
    froms = []
    if sel.args.get("from_") is not None:
        froms.append(sel.args["from_"].this)
    for j in sel.args.get("joins") or []:
        froms.append(j.this)
        conds.extend(_conjuncts(j.args.get("on")))
    for t in froms:
        if isinstance(t, exp.Subquery) and t.alias in views:
            view = views[t.alias]
            if t.alias in aliases:
                raise ExecutionError(f"FROM alias {t.alias!r} is used twice in one member")
            aliases[t.alias] = view.table
            used_views[t.alias] = view
            continue
        if not isinstance(t, exp.Table):
            raise ExecutionError(
                f"FROM entry {t.sql()[:80]!r} is not a source table (derived tables are outside the executable class)"
            )
        table = sources.table(t.name)
        if table is None:
            raise ExecutionError(f"table {t.name!r} is not declared in the sources file")
        alias = t.alias_or_name
        if alias in aliases:
            raise ExecutionError(f"FROM alias {alias!r} is used twice in one member")
        aliases[alias] = table
    conds.extend(_conjuncts(sel.args.get("where").this if sel.args.get("where") else None))

    def resolve(col: exp.Column) -> Attr:
        if col.table:
            if col.table not in aliases:
                raise ExecutionError(f"column {col.sql()!r} refers to unknown alias {col.table!r}")
            alias = col.table
        else:
            owners = [a for a, t in aliases.items() if t.column(col.name) is not None]
            if len(owners) != 1:
                raise ExecutionError(f"column {col.name!r} is {'ambiguous' if owners else 'unknown'}")
            alias = owners[0]
        c = aliases[alias].column(col.name)
        if c is None:
            raise ExecutionError(f"table {aliases[alias].name!r} has no column {col.name!r}")
        return (alias, c.name)

    local: dict[str, list[exp.Expression]] = {a: [] for a in aliases}
    cross: list[CrossPred] = []
    exprs: list[tuple[Attr, exp.Expression]] = []
    unsat = False

    def side(e: exp.Expression) -> Attr | None:
        """A comparison operand as an attribute: a column, or an expression over one alias (computed per row)."""
        if isinstance(e, exp.Column):
            return resolve(e)
        owners = {resolve(col)[0] for col in e.find_all(exp.Column)}
        if len(owners) != 1:
            return None
        attr = (owners.pop(), f"#p{len(exprs)}")
        exprs.append((attr, _unqualify(e, resolve)))
        return attr

    for c in conds:
        cols = list(c.find_all(exp.Column))
        owners = {resolve(col)[0] for col in cols}
        if not owners:
            s = simplify(c.copy())
            if isinstance(s, exp.Boolean) and not s.this:
                unsat = True
            elif not (isinstance(s, exp.Boolean) and s.this):
                raise ExecutionError(f"cannot decide the constant condition {c.sql()!r}")
            continue
        if len(owners) == 1:
            local[owners.pop()].append(_unqualify(c, resolve))
            continue
        u = _unparen(c)
        op = _CMP.get(type(u))
        lhs, rhs = (side(_unparen(u.this)), side(_unparen(u.expression))) if op else (None, None)
        if lhs is None or rhs is None:
            raise ExecutionError(
                f"condition {c.sql()!r} relates several FROM entries but is not a comparison of expressions over "
                "one FROM entry each (the executable class allows f(a.c, ...) op g(b.d, ...) only)"
            )
        cross.append(CrossPred(lhs, op, rhs))

    items: list[OutItem] = []
    for e in sel.expressions:
        name = _item_name(e)
        body = _unparen(e.this if isinstance(e, exp.Alias) else e)
        items.append(_out_item(name, body, resolve, exprs))
    return Member(
        index=index,
        aliases=tuple(aliases.items()),
        local=tuple((a, tuple(cs)) for a, cs in local.items()),
        cross=tuple(cross),
        items=tuple(items),
        exprs=tuple(exprs),
        unsatisfiable=unsat,
        sql=sel.sql(dialect="spark"),
        origin=index,
        views=tuple(used_views.items()),
    )


def _unqualify(e: exp.Expression, resolve) -> exp.Expression:
    """Copy of ``e`` with columns renamed to the source column (no alias): ready for one table."""

    def tr(node):
        if isinstance(node, exp.Column):
            return exp.column(resolve(node)[1], quoted=True)
        return node

    return e.copy().transform(tr)


def _constant(e: exp.Expression):
    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.this
        txt = e.this
        try:
            return int(txt)
        except ValueError:
            return float(txt)
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Null):
        return None
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal):
        return -_constant(e.this)
    if isinstance(e, (exp.Cast, exp.TryCast)):
        v = _constant(_unparen(e.this))
        to = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if v is None:
            return None
        if to in ("TEXT", "VARCHAR", "CHAR", "STRING", "NVARCHAR"):
            return str(v)
        if to in ("INT", "BIGINT", "SMALLINT", "TINYINT"):
            return int(v)
        if to in ("DOUBLE", "FLOAT"):
            return float(v)
    raise ExecutionError(f"unsupported constant expression {e.sql()!r} in the projection")


def _out_item(name: str, body: exp.Expression, resolve, exprs: list) -> OutItem:
    cols = list(body.find_all(exp.Column))
    owners = {resolve(c)[0] for c in cols}
    if isinstance(body, exp.Column):
        return OutItem(name, "attr", attr=resolve(body))
    if not owners:
        if isinstance(body, exp.Concat):
            return OutItem(name, "const", value="".join(str(_constant(_unparen(a))) for a in body.expressions))
        return OutItem(name, "const", value=_constant(body))
    if len(owners) == 1:
        alias = owners.pop()
        attr = (alias, f"#p{len(exprs)}")
        exprs.append((attr, _unqualify(body, resolve)))
        return OutItem(name, "attr", attr=attr)
    if isinstance(body, exp.Concat):
        parts: list[tuple[str, object]] = []
        for a in body.expressions:
            a = _unparen(a)
            a_owners = {resolve(c)[0] for c in a.find_all(exp.Column)}
            if not a_owners:
                parts.append(("const", str(_constant(a))))
            elif len(a_owners) == 1:
                attr = (a_owners.pop(), f"#p{len(exprs)}")
                exprs.append((attr, exp.cast(_unqualify(a, resolve), "STRING")))
                parts.append(("attr", attr))
            else:
                raise ExecutionError(f"projection part {a.sql()!r} mixes several FROM entries")
        return OutItem(name, "concat", parts=tuple(parts))
    raise ExecutionError(f"projection {body.sql()!r} mixes several FROM entries and is not a CONCAT")


def _is_stream_ts(m: Member, attr: Attr) -> bool:
    t = m.table(attr[0])
    return t.is_stream and t.timestamp is not None and t.timestamp.lower() == attr[1].lower()


def _expand_members(m: Member) -> list[Member]:
    """Split ``τi ≤ τj`` into ``<`` / ``=`` and ``τi ≠ τj`` into ``<`` / ``>`` (disjoint members)."""
    for i, p in enumerate(m.cross):
        if p.op in ("<=", ">=", "!=") and _is_stream_ts(m, p.left) and _is_stream_ts(m, p.right):
            alts = {"<=": ("<", "="), ">=": (">", "="), "!=": ("<", ">")}[p.op]
            out = []
            for op in alts:
                cross = m.cross[:i] + (CrossPred(p.left, op, p.right),) + m.cross[i + 1 :]
                out.extend(_expand_members(Member(**{**m.__dict__, "cross": cross})))
            return out
    return [m]


# ----------------------------------------------------------------------------------------------
# Planning


@dataclass
class Node:
    """A unit: stream aliases with equal timestamps; one node of the synopsis forest."""

    id: int
    aliases: tuple[str, ...]
    parent: int | None = None
    children: list[int] = field(default_factory=list)
    statics: list[str] = field(default_factory=list)  # static aliases joined at this node
    preds: list[CrossPred] = field(default_factory=list)  # evaluated when a tuple of this unit arrives
    key: tuple[Attr, ...] = ()  # synopsis key: attributes needed above the subtree
    compress: tuple[int, str] | None = None  # (position in key, 'min'|'max') for set semantics
    cutoff: int | None = None  # last possible timestamp (µs) from constant upper bounds; None: infinite
    depth: int = 0

    def describe(self, plan: "MemberPlan") -> dict:
        return {
            "unit": list(self.aliases),
            "tables": [plan.member.table(a).name for a in self.aliases],
            "kind": "finite" if self.cutoff is not None else "infinite",
            "parent": None if self.parent is None else list(plan.nodes[self.parent].aliases),
            "depth": self.depth,
            "key": [f"{a}.{c}" for a, c in self.key],
            "statics": list(self.statics),
            "synopsis": ("existence" if plan.distinct else "count")
            + (f", {self.compress[1]} of {self.key[self.compress[0]][0]}.{self.key[self.compress[0]][1]}" if self.compress else ""),
            "conditions": [str(p) for p in self.preds],
        }


@dataclass(frozen=True)
class Pipeline:
    """Per-row work on one FROM alias, run in Spark (or the local backend): filter, project, count."""

    id: int
    member: int
    alias: str
    table: Table
    filters: tuple[exp.Expression, ...]
    attrs: tuple[Attr, ...]  # kept attributes, in key order
    exprs: tuple[tuple[Attr, exp.Expression], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(a[1] for a in self.attrs)


@dataclass
class MemberPlan:
    member: Member
    distinct: bool
    nodes: list[Node]
    roots: list[int]
    forest_statics: list[str]
    forest_preds: list[CrossPred]
    out_attrs: tuple[Attr, ...]
    pipelines: dict[str, Pipeline]  # alias -> pipeline (streams and statics)
    unsatisfiable: bool = False
    absorbed: tuple[CrossPred, ...] = ()

    @property
    def stream_aliases(self) -> tuple[str, ...]:
        return tuple(a for a, t in self.member.aliases if t.is_stream)

    @property
    def static_aliases(self) -> tuple[str, ...]:
        return tuple(a for a, t in self.member.aliases if not t.is_stream)

    def node_of(self, alias: str) -> Node | None:
        for n in self.nodes:
            if alias in n.aliases:
                return n
        return None

    def describe(self) -> dict:
        return {
            "member": self.member.index,
            "sql": self.member.sql,
            "unsatisfiable": self.unsatisfiable,
            "units": [n.describe(self) for n in self.nodes],
            "roots": [list(self.nodes[r].aliases) for r in self.roots],
            "absorbed_time_predicates": [str(p) for p in self.absorbed],
            "forest_conditions": [str(p) for p in self.forest_preds],
        }


@dataclass(frozen=True)
class ViewDedupe:
    """How the rows of per-atom views are deduplicated per timestamp (docs/semantics.md).

    A view's alias has one pipeline per view branch (``branch_of``: branch
    pipeline id → the alias's pipeline id), each keeping the *whole* view row,
    so that rows are a set per timestamp however many branches, source rows or
    micro-batches produce them.  At the close of a timestamp each distinct row
    is projected (``positions``, -1 for the timestamp itself) onto the alias's
    synopsis attributes and counted once.
    """

    branch_of: dict[int, int] = field(default_factory=dict)
    positions: dict[int, tuple[int, ...]] = field(default_factory=dict)
    joins: list["JoinBranch"] = field(default_factory=list)  # static branches joining several tables

    def statics(self, counted: dict) -> dict:
        """Counted static rows per pipeline → per alias pipeline, each static view's distinct rows projected."""
        out: dict = {}
        joined = {pid for j in self.joins for _, pid, _ in j.entries}
        for pid, rows in counted.items():
            target = self.branch_of.get(pid)
            if target is not None:
                out.setdefault(target, {}).update(dict.fromkeys(rows, 1))
            elif pid not in joined:
                out[pid] = rows
        for j in self.joins:
            out.setdefault(j.target, {}).update(dict.fromkeys(j.rows(counted), 1))
        return self.project(None, out)

    def project(self, ts: int | None, groups: dict) -> dict:
        """``groups`` (pipeline id → key → count) with every view's distinct rows projected and counted."""
        if not self.positions:
            return groups
        out = {}
        for pid, rows in groups.items():
            pos = self.positions.get(pid)
            if pos is None:
                out[pid] = rows
                continue
            counted: dict = {}
            for row in rows:
                k = tuple(ts if i < 0 else row[i] for i in pos)
                counted[k] = counted.get(k, 0) + 1
            out[pid] = counted
        return out


@dataclass
class QueryPlan:
    members: list[MemberPlan]
    distinct: bool
    columns: tuple[str, ...]
    pipelines: list[Pipeline]  # what runs per row: source-table pipelines and per-branch view pipelines
    views: ViewDedupe = field(default_factory=ViewDedupe)

    def stream_tables(self) -> list[Table]:
        seen: dict[str, Table] = {}
        for p in self.pipelines:
            if p.table.is_stream:
                seen.setdefault(p.table.name, p.table)
        return list(seen.values())

    def static_pipelines(self) -> list[Pipeline]:
        return [p for p in self.pipelines if not p.table.is_stream]

    def describe(self) -> dict:
        return {"distinct": self.distinct, "columns": list(self.columns), "members": [m.describe() for m in self.members]}


def plan_query(parsed: ParsedQuery, const_micros: Callable[[exp.Expression], int | None]) -> QueryPlan:
    """Plan every member; ``const_micros`` evaluates a timestamp constant to epoch microseconds."""
    plans: list[MemberPlan] = []
    planned: list[Pipeline] = []
    for m in parsed.members:
        mp = plan_member(m, parsed.distinct, const_micros, first_pipeline_id=len(planned))
        plans.append(mp)
        planned.extend(mp.pipelines.values())
    views = ViewDedupe()
    pipelines: list[Pipeline] = []
    next_id = len(planned)
    for p in planned:
        view = dict(plans[_plan_index(plans, p)].member.views).get(p.alias)
        if view is None:
            pipelines.append(p)
            continue
        branches, rows_of, positions, joins = _view_pipelines(p, view, parsed.sources, next_id)
        next_id += len(branches)
        pipelines.extend(branches)
        views.positions[p.id] = positions
        views.branch_of.update((i, p.id) for i in rows_of)
        views.joins.extend(joins)
    return QueryPlan(plans, parsed.distinct, parsed.columns, pipelines, views)


def _plan_index(plans: list[MemberPlan], p: Pipeline) -> int:
    return next(i for i, mp in enumerate(plans) if mp.member.index == p.member)


def _view_pipelines(p: Pipeline, view, sources: Sources, first_id: int):
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
        items = dict(br.items)

        def sub(e: exp.Expression) -> exp.Expression:
            def tr(node):
                if isinstance(node, exp.Column) and node.name in items:
                    return items[node.name].copy()
                return node

            return e.copy().transform(tr)

        if br.single:
            filters = tuple(c.copy() for c in br.conds) + tuple(sub(f) for f in p.filters)
            exprs = tuple(((p.alias, c), items[c].copy()) for c in cols) + tuple((a, sub(e)) for a, e in p.exprs)
            out.append(Pipeline(next_id, p.member, p.alias, table_of(br.table), filters, tuple(full), exprs))
            rows_of.append(next_id)
            next_id += 1
            continue
        if view.temporal or not all(br.tables):
            raise ExecutionError(
                f"view {view.name} (the triples maps {', '.join(t[0] for t in view.triples_maps)}) has a branch that "
                f"joins {', '.join(t or 'a derived table' for t in br.tables)}"
                + (" over a stream" if view.temporal else "")
                + "; the executor deduplicates such a branch only over static source tables (declare keys so that "
                "the view is proven duplicate-free and inlined, or map the class or property from one table)"
            )
        entries = []
        for alias, name in zip(br.aliases, br.tables):
            table = table_of(name)
            sub_alias = f"{p.alias}/{alias}"
            out.append(Pipeline(next_id, p.member, sub_alias, table, (),
                                tuple((sub_alias, c.name) for c in table.columns)))
            entries.append((alias, next_id, tuple(c.name for c in table.columns)))
            next_id += 1
        joins.append(JoinBranch(p.id, tuple(entries), tuple(c.copy() for c in br.conds),
                                tuple(items[c].copy() for c in cols) + tuple(sub(e) for _, e in p.exprs)))
    return out, rows_of, positions, joins


@dataclass(frozen=True)
class JoinBranch:
    """A static view branch that joins several tables: computed once, on the driver, from their rows.

    ``entries``: (FROM alias of the branch, pipeline id reading that table whole,
    its column names); ``conds`` and ``items`` (the view row) are over
    ``alias.column``.
    """

    target: int  # the view alias's pipeline id
    entries: tuple[tuple[str, int, tuple[str, ...]], ...]
    conds: tuple[exp.Expression, ...]
    items: tuple[exp.Expression, ...]

    def rows(self, counted: dict) -> set[tuple]:
        """The distinct view rows of the branch over the counted rows of its tables."""
        from obda.execution.rows import evaluate

        def flat(e: exp.Expression) -> exp.Expression:
            def tr(node):
                if isinstance(node, exp.Column) and node.table:
                    return exp.column(f"{node.table}.{node.name}", quoted=True)
                return node

            return e.copy().transform(tr)

        conds = [(flat(c), {f"{x.table}.{x.name}" for x in c.find_all(exp.Column)}) for c in self.conds]
        items = [flat(e) for e in self.items]
        partial: list[dict] = [{}]
        known: set[str] = set()
        pending = list(conds)
        for alias, pid, columns in self.entries:
            table_rows = [{f"{alias}.{c}": v for c, v in zip(columns, key)} for key in counted.get(pid, {})]
            known |= {f"{alias}.{c}" for c in columns}
            ready = [c for c in pending if c[1] <= known]
            pending = [c for c in pending if not c[1] <= known]
            partial = [{**left, **right} for left in partial for right in table_rows
                       if all(evaluate(c, {**left, **right}) is True for c, _ in ready)]
        return {tuple(evaluate(e, row) for e in items) for row in partial
                if all(evaluate(c, row) is True for c, _ in pending)}


class _UF:
    def __init__(self, items: Iterable[str]):
        self.p = {i: i for i in items}

    def find(self, x: str) -> str:
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.p[rb] = ra


def plan_member(
    m: Member, distinct: bool, const_micros: Callable[[exp.Expression], int | None], first_pipeline_id: int = 0
) -> MemberPlan:
    streams = [a for a, t in m.aliases if t.is_stream]
    statics = [a for a, t in m.aliases if not t.is_stream]
    ts_preds = [p for p in m.cross if _is_stream_ts(m, p.left) and _is_stream_ts(m, p.right)]
    value_preds = [p for p in m.cross if p not in ts_preds]

    # 1. units: merge synchronous streams
    uf = _UF(streams)
    for p in ts_preds:
        if p.op == "=":
            uf.union(p.left[0], p.right[0])
    groups: dict[str, list[str]] = {}
    for a in streams:
        groups.setdefault(uf.find(a), []).append(a)
    nodes = [Node(i, tuple(g)) for i, g in enumerate(groups.values())]
    unit_of = {a: n.id for n in nodes for a in n.aliases}

    # 2. strict edges child -> parent (τ_child < τ_parent)
    unsat = m.unsatisfiable
    edges: set[tuple[int, int]] = set()
    for p in ts_preds:
        if p.op in ("<", ">"):
            lo, hi = (p.left[0], p.right[0]) if p.op == "<" else (p.right[0], p.left[0])
            if unit_of[lo] == unit_of[hi]:
                unsat = True
            edges.add((unit_of[lo], unit_of[hi]))
    reach = _transitive_closure(len(nodes), edges)
    if any((i, i) in reach for i in range(len(nodes))):
        unsat = True
    # transitive reduction; a unit with several parents keeps the first one
    for c, pa in sorted(edges):
        redundant = any((c, k) in reach and (k, pa) in reach for k in range(len(nodes)) if k not in (c, pa))
        if not redundant and nodes[c].parent is None and not unsat:
            nodes[c].parent = pa
    for n in nodes:
        if n.parent is not None:
            nodes[n.parent].children.append(n.id)
    roots = [n.id for n in nodes if n.parent is None]

    def ancestors(i: int) -> list[int]:
        out = []
        while nodes[i].parent is not None:
            i = nodes[i].parent
            out.append(i)
        return out

    def root_of(i: int) -> int:
        anc = ancestors(i)
        return anc[-1] if anc else i

    for n in nodes:
        n.depth = len(ancestors(n.id))

    absorbed: list[CrossPred] = []
    for p in ts_preds:
        if p.op == "=":
            absorbed.append(p)
        elif p.op in ("<", ">"):
            lo, hi = (p.left[0], p.right[0]) if p.op == "<" else (p.right[0], p.left[0])
            if unit_of[hi] in ancestors(unit_of[lo]):
                absorbed.append(p)
            else:
                value_preds.append(p)

    # 3. static components and where they are joined
    suf = _UF(statics)
    for p in value_preds:
        if p.left[0] in suf.p and p.right[0] in suf.p:
            suf.union(p.left[0], p.right[0])
    site: dict[str, int] = {a: unit_of[a] for a in streams}

    def lca(x: int, y: int) -> int:
        if x == FOREST or y == FOREST:
            return FOREST
        ax = [x] + ancestors(x)
        ay = set([y] + ancestors(y))
        for k in ax:
            if k in ay:
                return k
        return FOREST

    comps: dict[str, list[str]] = {}
    for a in statics:
        comps.setdefault(suf.find(a), []).append(a)
    forest_statics: list[str] = []
    for comp in comps.values():
        touched = {site[x[0]] for p in value_preds for x, y in (p.attrs, p.attrs[::-1]) if y[0] in comp and x[0] in site}
        where = FOREST
        if touched:
            ts = sorted(touched)
            where = ts[0]
            for t in ts[1:]:
                where = lca(where, t)
        for a in comp:
            site[a] = where
            if where == FOREST:
                forest_statics.append(a)
            else:
                nodes[where].statics.append(a)

    # 4. evaluation sites of conditions
    forest_preds: list[CrossPred] = []
    pred_site: list[tuple[CrossPred, int]] = []
    for p in value_preds:
        s = lca(site[p.left[0]], site[p.right[0]])
        pred_site.append((p, s))
        (forest_preds if s == FOREST else nodes[s].preds).append(p)
    out_attrs: list[Attr] = []
    for it in m.items:
        for a in it.attrs:
            if a not in out_attrs:
                out_attrs.append(a)

    # 5. keys: attributes of the subtree needed above it
    def subtree(i: int) -> set[int]:
        out = {i}
        for c in nodes[i].children:
            out |= subtree(c)
        return out

    for n in nodes:
        sub = subtree(n.id)
        sub_aliases = {a for k in sub for a in nodes[k].aliases + tuple(nodes[k].statics)}
        uses: dict[Attr, list[str]] = {}
        for p, s in pred_site:
            if s in sub:
                continue
            for a in p.attrs:
                if a[0] in sub_aliases:
                    uses.setdefault(a, []).append(p.oriented(a))
        for a in out_attrs:
            if a[0] in sub_aliases:
                uses.setdefault(a, []).append("out")
        n.key = tuple(sorted(uses))
        if distinct:
            for i, a in enumerate(n.key):
                ops = set(uses[a])
                if ops and ops <= {"<", "<="}:
                    n.compress = (i, "min")
                    break
                if ops and ops <= {">", ">="}:
                    n.compress = (i, "max")
                    break

    # 6. cutoffs (finite streams): constant upper bounds on timestamps, pushed down the tree
    for n in nodes:
        for a in n.aliases:
            ub = _ts_upper_bound(m, a, const_micros)
            if ub is not None:
                n.cutoff = ub if n.cutoff is None else min(n.cutoff, ub)
    for n in sorted(nodes, key=lambda n: n.depth):
        if n.parent is not None and nodes[n.parent].cutoff is not None:
            pc = nodes[n.parent].cutoff - 1
            n.cutoff = pc if n.cutoff is None else min(n.cutoff, pc)

    # 7. per-alias pipelines: attributes of the alias needed by any condition or the projection
    inferred = infer_local_conditions(m)
    pipelines: dict[str, Pipeline] = {}
    pid = first_pipeline_id
    for alias, table in m.aliases:
        needed: set[Attr] = set()
        for p in value_preds:
            needed |= {a for a in p.attrs if a[0] == alias}
        needed |= {a for a in out_attrs if a[0] == alias}
        attrs = tuple(sorted(needed))
        exprs = tuple((a, e) for a, e in m.exprs if a in needed)
        filters = m.local_of(alias) + inferred.get(alias, ())
        pipelines[alias] = Pipeline(pid, m.index, alias, table, filters, attrs, exprs)
        pid += 1
    return MemberPlan(
        member=m,
        distinct=distinct,
        nodes=nodes,
        roots=roots,
        forest_statics=forest_statics,
        forest_preds=forest_preds,
        out_attrs=tuple(out_attrs),
        pipelines=pipelines,
        unsatisfiable=unsat,
        absorbed=tuple(absorbed),
    )


def infer_local_conditions(m: Member) -> dict[str, tuple[exp.Expression, ...]]:
    """Constant conditions implied through equality joins (``a.x = b.y ∧ 0 < b.y`` ⊢ ``0 < a.x``).

    Pure constraint propagation (same result), so Spark drops rows that can never join before
    they are counted.  Only between columns of the same declared type.
    """
    local: dict[str, list[exp.Expression]] = {a: list(m.local_of(a)) for a, _ in m.aliases}
    seen = {a: {c.sql() for c in cs} for a, cs in local.items()}
    added: dict[str, list[exp.Expression]] = {}
    for _ in range(len(m.aliases)):
        changed = False
        for p in m.cross:
            if p.op != "=":
                continue
            for src, dst in ((p.right, p.left), (p.left, p.right)):
                if column_type(m.table(src[0]), src[1]) != column_type(m.table(dst[0]), dst[1]):
                    continue
                for c in list(local[src[0]]):
                    cols = list(c.find_all(exp.Column))
                    if not cols or any(col.name != src[1] for col in cols) or _CMP.get(type(_unparen(c))) is None:
                        continue
                    new = c.copy().transform(
                        lambda n: exp.column(dst[1], quoted=True) if isinstance(n, exp.Column) else n
                    )
                    if new.sql() not in seen[dst[0]]:
                        seen[dst[0]].add(new.sql())
                        local[dst[0]].append(new)
                        added.setdefault(dst[0], []).append(new)
                        changed = True
        if not changed:
            break
    return {a: tuple(cs) for a, cs in added.items()}


def _transitive_closure(n: int, edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    reach = set(edges)
    for k, i, j in itertools.product(range(n), repeat=3):
        if (i, k) in reach and (k, j) in reach:
            reach.add((i, j))
    # product order above is k-outer (Floyd–Warshall), so one pass suffices
    return reach


def _ts_upper_bound(m: Member, alias: str, const_micros) -> int | None:
    """Largest timestamp (µs) a row of ``alias`` can have under its local conditions, if bounded."""
    table = m.table(alias)
    best = None
    for c in m.local_of(alias):
        u = _unparen(c)
        op = _CMP.get(type(u))
        if op is None:
            continue
        lhs, rhs = _unparen(u.this), _unparen(u.expression)
        if isinstance(rhs, exp.Column) and not isinstance(lhs, exp.Column):
            lhs, rhs, op = rhs, lhs, _FLIP[op]
        if not isinstance(lhs, exp.Column) or lhs.name.lower() != (table.timestamp or "").lower():
            continue
        if rhs.find(exp.Column) is not None or op not in ("<", "<=", "="):
            continue
        v = const_micros(rhs)
        if v is None:
            continue
        ub = v - 1 if op == "<" else v
        best = ub if best is None else min(best, ub)
    return best


def column_type(table: Table, name: str) -> ColumnType | None:
    c = table.column(name)
    return c.type if c else None
