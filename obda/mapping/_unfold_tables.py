"""Logical tables as FROM entries of an SPJ member.

Private helper of :mod:`obda.mapping.unfold`.  A logical table is analysed
once (:func:`table_shape`) and instantiated once per use with fresh aliases
(:meth:`TableShape.instantiate`):

* ``rr:tableName`` → one FROM entry ``table AS mK``;
* ``rr:sqlQuery`` that is a plain SPJ over source tables (a SELECT of columns
  and constants, FROM source tables joined by commas, ``[INNER|CROSS] JOIN …
  ON``, an optional WHERE; no DISTINCT, GROUP BY, HAVING, ORDER BY, LIMIT,
  set operations, subqueries, aggregates or window functions) → inlined: one
  FROM entry per source table, its WHERE / ON conditions merged into the
  member's WHERE, its output columns renamed to the inner columns;
* any other ``rr:sqlQuery`` → a derived table ``(SELECT …) AS mK``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from obda.errors import MappingError
from obda.mapping._unfold_ir import Col, Expr, fast_copy, identifier
from obda.mapping._unfold_read import const, flatten_conjuncts, from_sqlglot
from obda.mapping._unfold_terms import Val
from obda.mapping.sql import LogicalTableInfo, describe_logical_table, sqlglot_schema, unquote_identifier
from obda.model.mapping import LogicalTable, TermMap
from obda.model.sources import ColumnType, Sources



@dataclass
class FromEntry:
    """One FROM entry of a member: ``source AS alias``.

    ``table`` is the catalog table name (or the SQL text of a derived table);
    ``key`` the catalog key of a base table (empty for derived tables).
    ``source`` is shared between members (never modified; copied on output).
    """

    alias: str
    source: exp.Expression  # exp.Table or exp.Subquery, without alias
    table: str
    key: tuple[str, ...] = ()
    derived: bool = False
    stream: bool = False
    source_text: str | None = None  # cached ``source.sql()``

    def sql_source(self) -> str:
        if self.source_text is None:
            self.source_text = self.source.sql()
        return self.source_text

    def expression(self, alias: str | None = None) -> exp.Expression:
        """A fresh ``source AS alias`` tree."""
        src = self.source.copy() if self.derived else fast_copy(self.source)
        src.set("alias", exp.TableAlias(this=identifier(alias or self.alias)))
        return src


@dataclass
class TableInstance:
    """A logical table instantiated in one member: its FROM entries, columns and conditions."""

    entries: list[FromEntry]
    shape: "TableShape"
    aliases: tuple[str, ...]  # one per FROM entry
    conditions: list[Expr]
    timestamp: Val | None
    not_null_exempt: set[str] = field(default_factory=set)  # column keys assumed non-null (keys, timestamps)
    _columns: dict[str, Val] = field(default_factory=dict)

    def column(self, name: str, term_map: TermMap | None = None, what: str = "column") -> Val:
        """The value of a logical-table column in this instance (MappingError if there is none)."""
        key = unquote_identifier(name).lower()
        hit = self._columns.get(key)
        if hit is not None:
            return hit
        spec = self.shape.output_map.get(key)
        if spec is None:
            loc = term_map.location if term_map is not None else None
            known = ", ".join(sorted(self.shape.output_map))
            raise MappingError(f"{what} {name!r} is not a column of the logical table (columns: {known})", loc)
        if spec[0] == "col":
            val = Val(Col(self.aliases[spec[1]], spec[2]), spec[3])
        else:
            val = Val(spec[1], spec[2])
        self._columns[key] = val
        return val


@dataclass(frozen=True)
class _Inner:
    """A base table of an inlined logical table."""

    table: str  # catalog spelling
    stream: bool
    timestamp: str | None
    key: tuple[str, ...]


def _slot(i: int) -> str:
    """The placeholder alias of the ``i``-th FROM entry of a logical table (renamed on instantiation)."""
    return f"#{i}"


@dataclass(frozen=True)
class TableShape:
    """The analysis of one logical table, ready to be instantiated with fresh aliases."""

    info: LogicalTableInfo
    inner: tuple[_Inner, ...]  # inlined: one per FROM source
    # lower-cased output column → ("col", inner index, catalog column, type) or ("const", Const, type)
    outputs: tuple[tuple[str, tuple], ...]
    conditions: tuple[Expr, ...]  # over the placeholder aliases _slot(i)
    derived: exp.Expression | None = None  # derived-table SQL when not inlined
    text: str = ""
    output_map: dict = field(default_factory=dict, compare=False, hash=False)
    sources: tuple[tuple[exp.Expression, str], ...] = field(default=(), compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.derived is not None:
            outs = {c.name.lower(): ("col", 0, c.name, c.type) for c in self.info.columns}
            srcs = (exp.Subquery(this=self.derived.copy()),)
        else:
            outs = dict(self.outputs)
            srcs = tuple(_table_sql(i.table) for i in self.inner)
        self.output_map.update(outs)
        object.__setattr__(self, "sources", tuple((s, s.sql()) for s in srcs))

    @property
    def temporal(self) -> bool:
        return self.info.stream is not None

    def instantiate(self, fresh: Callable[[], str]) -> TableInstance:
        """FROM entries with fresh aliases, the columns as qualified SQL, the inlined conditions."""
        if self.derived is not None:
            alias = fresh()
            src, text = self.sources[0]
            entry = FromEntry(alias, src, self.text, derived=True, stream=self.temporal, source_text=text)
            inst = TableInstance([entry], self, (alias,), [], None)
            if self.info.stream is not None:
                inst.timestamp = inst.column(self.info.timestamp_column)  # checked in table_shape
                inst.not_null_exempt.add(inst.timestamp.key())
            return inst
        aliases = tuple(fresh() for _ in self.inner)
        entries = [
            FromEntry(a, src, i.table, i.key, stream=i.stream, source_text=text)
            for a, i, (src, text) in zip(aliases, self.inner, self.sources)
        ]
        ren = {_slot(k): a for k, a in enumerate(aliases)}
        conds = [c.rename(ren) for c in self.conditions]
        ts = None
        exempt: set[str] = set()
        for a, i in zip(aliases, self.inner):
            if i.stream and i.timestamp:
                ts = Val(Col(a, i.timestamp), ColumnType.TIMESTAMP)
                exempt.add(ts.key())
            exempt.update(Col(a, k).sql() for k in i.key)
        return TableInstance(entries, self, aliases, conds, ts, exempt)


def _table_sql(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name))


def table_shape(lt: LogicalTable, sources: Sources, schema: MappingSchema | None = None) -> TableShape:
    """Analyse a logical table for unfolding (raises MappingError for unknown tables / columns)."""
    info = describe_logical_table(lt, sources)
    if lt.table_name is not None:
        t = sources.table(info.tables[0])
        inner = (_Inner(t.name, t.is_stream, t.timestamp, t.key),)
        outputs = tuple((c.name.lower(), ("col", 0, c.name, c.type)) for c in t.columns)
        return TableShape(info, inner, outputs, (), text=t.name)
    inlined = _inline(info, sources, schema or sqlglot_schema(sources)) if info.select is not None else None
    if inlined is not None:
        inner, outputs, conds = inlined
        return TableShape(info, inner, outputs, conds, text=lt.sql_query or "")
    if info.stream is not None and info.timestamp_column is None:
        st = sources.table(info.stream)
        raise MappingError(
            f"rr:sqlQuery reads stream {st.name!r} but does not select its timestamp column {st.timestamp!r}; "
            "select it so that the assertions get their application time",
            lt.location,
        )
    import sqlglot

    tree = info.select if info.select is not None else sqlglot.parse_one((lt.sql_query or "").strip().rstrip(";"))
    return TableShape(info, (), (), (), derived=tree, text=lt.sql_query or "")


_BAD_NODES = (exp.Subquery, exp.AggFunc, exp.Window, exp.Union, exp.Intersect, exp.Except, exp.With, exp.Lateral)


def _inline(info: LogicalTableInfo, sources: Sources, schema: MappingSchema):
    """(inner tables, outputs, conditions) when the query is a plain SPJ over source tables; else None."""
    sel = info.select
    assert sel is not None
    for arg in ("distinct", "group", "having", "order", "limit", "offset", "with_", "with", "qualify", "windows",
                "laterals", "pivots", "sample", "prewhere", "connect", "match", "kind", "into", "locks"):
        if sel.args.get(arg):
            return None
    if any(isinstance(n, _BAD_NODES) for n in sel.walk() if n is not sel) or any(
        isinstance(n, exp.Select) for n in sel.walk() if n is not sel
    ):
        return None
    frm = sel.args.get("from_") or sel.args.get("from")
    if frm is None:
        return None
    sources_nodes = [frm.this]
    join_conds: list[exp.Expression] = []
    for j in sel.args.get("joins") or []:
        if j.args.get("using") or j.side or (j.kind and j.kind.upper() not in ("INNER", "CROSS")) or j.method:
            return None
        sources_nodes.append(j.this)
        if j.args.get("on"):
            join_conds.append(j.args["on"])
    if not all(isinstance(n, exp.Table) and not n.args.get("db") and n.name for n in sources_nodes):
        return None

    low = sel.copy()
    for ident in low.find_all(exp.Identifier):
        ident.set("this", ident.name.lower())
        ident.set("quoted", False)
    try:
        q = qualify(low, schema=schema, validate_qualify_columns=True, quote_identifiers=False,
                    expand_alias_refs=False)
    except Exception:
        return None
    frm = q.args.get("from_") or q.args.get("from")
    nodes = [frm.this] + [j.this for j in q.args.get("joins") or []]
    index: dict[str, int] = {}
    inner: list[_Inner] = []
    for i, n in enumerate(nodes):
        t = sources.table(n.name)
        if t is None:
            return None
        index[n.alias_or_name.lower()] = i
        inner.append(_Inner(t.name, t.is_stream, t.timestamp, t.key))

    def lookup(column: exp.Column):
        """(FROM position, source column) of a qualified column; _NotInlinable if it is not a source column."""
        idx = index.get(column.table.lower())
        col = sources.table(inner[idx].table).column(column.name) if idx is not None else None
        if col is None:
            raise _NotInlinable
        return idx, col

    def resolve(node: exp.Expression):
        if isinstance(node, exp.Column):
            idx, col = lookup(node)
            return exp.column(exp.to_identifier(col.name), table=exp.to_identifier(str(idx)))
        return node

    outputs: list[tuple[str, tuple]] = []
    try:
        for item, out_col in zip(q.selects, info.columns):
            inner_e = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner_e, exp.Column):
                idx, col = lookup(inner_e)
                outputs.append((out_col.name.lower(), ("col", idx, col.name, col.type)))
            elif isinstance(inner_e, (exp.Literal, exp.Boolean)):
                outputs.append((out_col.name.lower(), ("const", const(sel_const(item, sel)), out_col.type)))
            else:
                return None
        conds: list[exp.Expression] = []
        where = q.args.get("where")
        raw = [c for c in [j.args.get("on") for j in q.args.get("joins") or []] if c is not None]
        if where is not None:
            raw.append(where.this)
        for c in raw:
            for part in c.flatten() if isinstance(c, exp.And) else [c]:
                conds.append(part.copy().transform(resolve))
    except _NotInlinable:
        return None
    if len(outputs) != len(info.columns):
        return None
    light = [from_sqlglot(part, _slot) for c in conds for part in flatten_conjuncts(c)]
    return tuple(inner), tuple(outputs), tuple(light)


def sel_const(item: exp.Expression, original: exp.Select) -> exp.Expression:
    """The constant of a select item, with the original spelling (the qualifier lower-cases strings' identifiers only)."""
    name = item.alias_or_name
    for o in original.selects:
        if o.alias_or_name.lower() == name.lower():
            e = o.this if isinstance(o, exp.Alias) else o
            return e.copy()
    e = item.this if isinstance(item, exp.Alias) else item
    return e.copy()


class _NotInlinable(Exception):
    pass


def select_sql(entries: Sequence[FromEntry], conds: Sequence[Expr], items: Sequence[tuple[str, exp.Expression]],
               distinct: bool, ren: dict[str, str] | None = None) -> exp.Select:
    """``SELECT [DISTINCT] items FROM entries WHERE conds`` as a fresh sqlglot tree (FROM aliases renamed by ``ren``).

    Built node by node: the same tree as ``exp.select(...).from_(...).join(...)
    .where(...)``, without the builders' parsing and copying.
    """
    ren = ren or {}
    args: dict = {"expressions": [exp.Alias(this=e, alias=identifier(n)) for n, e in items]}
    first, *rest = entries or [None]
    if first is not None:  # no entry: a member of constants (a WHERE clause of VALUES, BIND and FILTER only)
        args["from_"] = exp.From(this=first.expression(ren.get(first.alias)))
    if rest:
        args["joins"] = [exp.Join(this=e.expression(ren.get(e.alias))) for e in rest]
    if conds:
        parts = [c.to_sqlglot(ren) for c in conds]
        if len(parts) > 1:  # as exp.and_: an AND / OR operand is parenthesised
            parts = [exp.Paren(this=c) if isinstance(c, exp.Connector) else c for c in parts]
        cond = parts[0]
        for c in parts[1:]:
            cond = exp.And(this=cond, expression=c)
        args["where"] = exp.Where(this=cond)
    if distinct:
        args["distinct"] = exp.Distinct()
    return exp.Select(**args)
