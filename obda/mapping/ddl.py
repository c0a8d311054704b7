"""Build a sources catalog from SQL DDL (``CREATE TABLE`` statements).

Useful for databases that come with a schema script instead of a sources
file (e.g. the NPD benchmark's ``npd-schema.psql``): every table becomes a
*static* table, every column gets the nearest of the six catalog column types
(:func:`obda.mapping.sql.column_type_of`, strings for anything unknown), and a
``PRIMARY KEY`` becomes the table's key.  sqlglot parses the DDL; statements
other than ``CREATE TABLE`` (``SET``, ``START TRANSACTION``, indexes, ...) are
ignored.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from obda.errors import Location, SourcesError
from obda.mapping.sql import column_type_of
from obda.model.sources import Column, ColumnType, Sources, Table, TableKind

__all__ = ["sources_from_ddl"]


def _statements(sql_text: str) -> list[tuple[int, str]]:
    """(line, text) of each ``;``-terminated statement outside quotes and comments."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start_line = 1
    line = 1
    i, n = 0, len(sql_text)
    quote: str | None = None
    while i < n:
        ch = sql_text[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            buf.append(ch)
        elif sql_text.startswith("--", i):
            j = sql_text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif ch == ";":
            text = "".join(buf).strip()
            if text:
                out.append((start_line, text))
            buf = []
        else:
            if not "".join(buf).strip() and not ch.isspace():
                start_line = line
            buf.append(ch)
        if ch == "\n":
            line += 1
        i += 1
    text = "".join(buf).strip()
    if text:
        out.append((start_line, text))
    return out


def _primary_key(create: exp.Create) -> tuple[str, ...]:
    schema = create.this
    for e in schema.expressions:
        if isinstance(e, exp.PrimaryKey):
            return tuple(c.name for c in e.expressions)
    cols = []
    for cd in schema.find_all(exp.ColumnDef):
        if any(isinstance(c.kind, exp.PrimaryKeyColumnConstraint) for c in cd.constraints):
            cols.append(cd.name)
    return tuple(cols)


def sources_from_ddl(sql_text: str, dialect: str = "postgres", file: str | None = None) -> Sources:
    """A :class:`Sources` catalog with one static table per ``CREATE TABLE`` of ``sql_text``.

    Raises :class:`SourcesError` (with the statement's line) for a ``CREATE
    TABLE`` that does not parse or a table declared twice.
    """
    tables: list[Table] = []
    seen: set[str] = set()
    for line, stmt in _statements(sql_text):
        if not re.match(r"(?is)^\s*create\s+(?:(?:global|local)\s+)?(?:temp(?:orary)?\s+|unlogged\s+)?table\b", stmt):
            continue
        try:
            tree = sqlglot.parse_one(stmt, read=dialect)
        except SqlglotError as e:
            raise SourcesError(f"CREATE TABLE does not parse: {str(e).splitlines()[0]}", Location(file, line)) from e
        if not isinstance(tree, exp.Create) or not isinstance(tree.this, exp.Schema):
            continue  # CREATE TABLE ... AS SELECT: no declared columns
        name = tree.this.this.name
        if name.lower() in seen:
            raise SourcesError(f"table {name!r} is declared twice", Location(file, line))
        seen.add(name.lower())
        columns = []
        for cd in tree.this.expressions:
            if not isinstance(cd, exp.ColumnDef):
                continue
            ctype = column_type_of(cd.args.get("kind")) or ColumnType.STRING
            columns.append(Column(cd.name, ctype))
        if not columns:
            raise SourcesError(f"table {name!r} has no columns", Location(file, line))
        tables.append(
            Table(
                name=name,
                kind=TableKind.STATIC,
                columns=tuple(columns),
                key=_primary_key(tree),
                source_location=Location(file, line),
            )
        )
    return Sources(tuple(tables), file)
