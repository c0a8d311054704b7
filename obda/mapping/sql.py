"""What a logical table reads and produces: tables, typed output columns, stream and timestamp.

:func:`describe_logical_table` is shared by validation and unfolding.  For an
``rr:sqlQuery`` it parses the SQL with sqlglot, checks every table against the
sources catalog, resolves columns (including ``*``, ``t.*``, aliases and derived
tables) with sqlglot's qualifier and infers output types with sqlglot's type
annotator.

Identifier matching follows the sources catalog: table and column names are
case-insensitive, quoted or not (the catalog's spelling is kept in the output).
R2RML column references (``rr:column "Name"`` or ``"\\"Name\\""``) are matched
the same way by :func:`find_column`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from obda.errors import Location, MappingError
from obda.model.mapping import LogicalTable
from obda.model.sources import Column, ColumnType, Sources

__all__ = [
    "LogicalTableInfo",
    "LogicalTableError",
    "describe_logical_table",
    "find_column",
    "unquote_identifier",
    "column_type_of",
]


class LogicalTableError(MappingError):
    """A logical table that cannot be analysed; ``code`` names the problem.

    Codes: ``sql_syntax``, ``unknown_table``, ``unknown_column``,
    ``duplicate_column``, ``multiple_streams``, ``unsupported_sql``.
    """

    def __init__(self, code: str, message: str, location: Location | None = None):
        self.code = code
        super().__init__(message, location)


@dataclass(frozen=True)
class LogicalTableInfo:
    """The analysis of one logical table.

    ``tables``: source tables read (catalog spelling, in order of appearance);
    ``columns``: output columns with types; ``stream``: the stream table read,
    if any; ``timestamp_column``: the output column carrying that stream's
    timestamp (None if the query does not select it); ``select``: the parsed
    ``rr:sqlQuery`` (None for ``rr:tableName`` or a set operation);
    ``untyped``: output columns whose type could not be inferred (typed
    ``string`` in ``columns``).
    """

    tables: tuple[str, ...]
    columns: tuple[Column, ...]
    stream: str | None = None
    timestamp_column: str | None = None
    select: exp.Select | None = None
    untyped: frozenset[str] = field(default_factory=frozenset)

    def column(self, name: str) -> Column | None:
        return find_column(self.columns, name)


def unquote_identifier(name: str) -> str:
    """``"Name"`` → ``Name``: an R2RML column / table name written as a delimited SQL identifier."""
    n = name.strip()
    if len(n) >= 2 and n[0] == n[-1] == '"':
        return n[1:-1].replace('""', '"')
    return n


def find_column(columns: tuple[Column, ...] | list[Column], name: str) -> Column | None:
    """The column named ``name`` (R2RML spelling, possibly quoted), matched case-insensitively."""
    want = unquote_identifier(name)
    for c in columns:
        if c.name == want:
            return c
    low = want.lower()
    for c in columns:
        if c.name.lower() == low:
            return c
    return None




def column_type_of(dt: exp.DataType | None) -> ColumnType | None:
    """Map a sqlglot data type to one of the six catalog column types (None: unknown)."""
    if dt is None:
        return None
    T = exp.DataType.Type
    t = dt.this
    if t in exp.DataType.INTEGER_TYPES:
        return ColumnType.INTEGER
    if t in (T.DECIMAL, T.BIGDECIMAL, T.MONEY, T.SMALLMONEY) or t.name.startswith("DECIMAL") or t.name.startswith("UDECIMAL"):
        return ColumnType.DECIMAL
    if t in exp.DataType.REAL_TYPES:
        return ColumnType.DOUBLE
    if t is T.BOOLEAN:
        return ColumnType.BOOLEAN
    if t in exp.DataType.TEMPORAL_TYPES:
        return ColumnType.TIMESTAMP
    if t in exp.DataType.TEXT_TYPES or t in (T.UUID,):
        return ColumnType.STRING
    return None


def _lowered(tree: exp.Expression) -> exp.Expression:
    """A copy with every identifier lower-cased and unquoted (the catalog is case-insensitive)."""
    low = tree.copy()
    for ident in low.find_all(exp.Identifier):
        ident.set("this", ident.name.lower())
        ident.set("quoted", False)
    return low


def _sql_location(lt: LogicalTable, err: ParseError | None = None) -> Location:
    """The file line of a SQL parse error: the ``rr:sqlQuery`` line plus the error's line in the query."""
    loc = lt.location
    if err is None or not err.errors or loc.line is None:
        return loc
    line = err.errors[0].get("line")
    if not line:
        return loc
    sql = lt.sql_query or ""
    lead = sql[: len(sql) - len(sql.lstrip())].count("\n")
    return Location(loc.file, loc.line + lead + int(line) - 1, None)


def _parse(lt: LogicalTable, dialect: str | None) -> exp.Expression:
    sql = (lt.sql_query or "").strip().rstrip(";").strip()
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        desc = first.get("description") or str(e).splitlines()[0]
        near = first.get("highlight")
        msg = f"rr:sqlQuery does not parse: {desc}" + (f" (near {near!r})" if near else "")
        raise LogicalTableError("sql_syntax", msg, _sql_location(lt, e)) from e
    except SqlglotError as e:
        raise LogicalTableError("sql_syntax", f"rr:sqlQuery does not parse: {e}", lt.location) from e
    if len(trees) != 1:
        raise LogicalTableError("sql_syntax", f"rr:sqlQuery must be one SQL query, found {len(trees)} statements", lt.location)
    tree = trees[0]
    if not isinstance(tree, exp.Query):
        raise LogicalTableError(
            "sql_syntax", f"rr:sqlQuery must be a SELECT query, found {tree.key.upper()}", lt.location
        )
    return tree


def _source_tables(tree: exp.Expression) -> list[exp.Table]:
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return [t for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes]


def _origin(select: exp.Query, col_name: str) -> tuple[str, str] | None:
    """(table, column) a qualified output column copies directly, following derived tables."""
    if not isinstance(select, exp.Select):
        return None
    for item in select.selects:
        if item.alias_or_name != col_name:
            continue
        inner = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(inner, exp.Column) or not inner.table:
            return None
        for src in [select.args.get("from_") or select.args.get("from")] + list(select.args.get("joins") or []):
            if src is None:
                continue
            node = src.this
            if node.alias_or_name != inner.table:
                continue
            if isinstance(node, exp.Table):
                return node.name, inner.name
            if isinstance(node, exp.Subquery):
                return _origin(node.this, inner.name)
        return None
    return None


_SCHEMAS: dict[int, tuple[weakref.ref, MappingSchema]] = {}


def sqlglot_schema(sources: Sources) -> MappingSchema:
    """The sqlglot schema of a catalog (lower-cased names), built once per Sources object."""
    hit = _SCHEMAS.get(id(sources))
    if hit is not None and hit[0]() is sources:
        return hit[1]
    schema = MappingSchema(
        {t.name.lower(): {c.name.lower(): c.type.sql_type for c in t.columns} for t in sources.tables}
    )
    _SCHEMAS[id(sources)] = (weakref.ref(sources, lambda _r, k=id(sources): _SCHEMAS.pop(k, None)), schema)
    return schema


def _unknown_table(what: str, sources: Sources, lt: LogicalTable) -> "LogicalTableError":
    """The unknown_table error, naming the sources file and the tables it does declare."""
    return LogicalTableError(
        "unknown_table",
        what + (f" {sources.file}" if sources.file else "")
        + f" (known: {', '.join(t.name for t in sources.tables) or 'none'})",
        lt.location,
    )


def describe_logical_table(lt: LogicalTable, sources: Sources, dialect: str | None = None) -> LogicalTableInfo:
    """Analyse a logical table against the sources catalog.

    Raises :class:`LogicalTableError` (a :class:`MappingError`; ``code`` says
    which problem) for SQL that does not parse, unknown tables or columns,
    duplicate output columns, or a query that reads more than one stream.
    ``dialect`` is the sqlglot dialect of ``rr:sqlQuery`` texts (default: generic).
    """
    if lt.table_name is not None:
        table = sources.table(unquote_identifier(lt.table_name))
        if table is None:
            raise _unknown_table(f"rr:tableName {lt.table_name!r} is not a table of the sources file", sources, lt)
        return LogicalTableInfo(
            tables=(table.name,),
            columns=table.columns,
            stream=table.name if table.is_stream else None,
            timestamp_column=table.timestamp if table.is_stream else None,
            select=None,
        )

    tree = _parse(lt, dialect)
    tables: list[str] = []
    for t in _source_tables(tree):
        st = sources.table(t.name)
        if st is None:
            raise _unknown_table(f"rr:sqlQuery reads table {t.name!r}, which is not in the sources file", sources, lt)
        if st.name not in tables:
            tables.append(st.name)
    streams = [n for n in tables if sources.table(n).is_stream]
    if len(streams) > 1:
        raise LogicalTableError(
            "multiple_streams",
            f"rr:sqlQuery reads several streams ({', '.join(streams)}); a logical table may read at most one "
            "stream (write one triples map per stream and join them in the query)",
            lt.location,
        )

    schema = sqlglot_schema(sources)
    spelling = {c.name.lower(): c.name for t in sources.tables for c in t.columns}
    if isinstance(tree, exp.Query):  # aliases as written; plain column references keep the catalog spelling
        for s in tree.selects:
            if isinstance(s, exp.Alias) and s.alias:
                spelling[s.alias.lower()] = s.alias
    try:
        qualified = qualify(_lowered(tree), schema=schema, validate_qualify_columns=True, quote_identifiers=False)
        annotated = annotate_types(qualified, schema=schema)
    except OptimizeError as e:
        msg = str(e).split(". Line:")[0]
        raise LogicalTableError("unknown_column", f"rr:sqlQuery: {msg} (tables read: {', '.join(tables)})", lt.location) from e
    except SqlglotError as e:
        raise LogicalTableError("unsupported_sql", f"rr:sqlQuery cannot be analysed: {e}", lt.location) from e

    columns: list[Column] = []
    untyped: set[str] = set()
    seen: dict[str, str] = {}
    for item in annotated.selects:
        low = item.alias_or_name
        name = spelling.get(low.lower(), low)
        if low.lower() in seen:
            raise LogicalTableError(
                "duplicate_column",
                f"rr:sqlQuery returns two columns named {name!r}; give them distinct aliases (R2RML §5.2)",
                lt.location,
            )
        seen[low.lower()] = name
        ctype = column_type_of(item.type)
        if ctype is None:
            untyped.add(name)
            ctype = ColumnType.STRING
        columns.append(Column(name, ctype))

    stream = streams[0] if streams else None
    ts_col = None
    if stream is not None:
        st = sources.table(stream)
        for c in columns:
            org = _origin(annotated, c.name.lower())
            if org and org[0].lower() == st.name.lower() and org[1].lower() == (st.timestamp or "").lower():
                ts_col = c.name
                break
    return LogicalTableInfo(
        tables=tuple(tables),
        columns=tuple(columns),
        stream=stream,
        timestamp_column=ts_col,
        select=tree if isinstance(tree, exp.Select) else None,
        untyped=frozenset(untyped),
    )
