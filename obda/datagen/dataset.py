"""Generated rows in memory: a :class:`Dataset` of :class:`TableRows`, loaded into DuckDB or SQLite with
:meth:`Dataset.load_into` (the tests' SQL oracles), timestamps written as the files write them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from obda.model.sources import Column, ColumnType, Table

if TYPE_CHECKING:  # the generator builds datasets: no import at run time
    from obda.datagen.generator import GeneratorConfig


@dataclass(frozen=True)
class TableRows:
    """The generated rows of one table, as Python values in the sources' column order.

    Values: ``int`` (integer), ``Decimal`` (decimal), ``float`` (double),
    ``str`` (string), ``bool`` (boolean), naive ``datetime`` (timestamp).
    """

    table: Table
    rows: tuple[tuple[Any, ...], ...]

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.table.columns

    def column_values(self, column: str) -> list[Any]:
        idx = column_index(self.table, column)
        return [r[idx] for r in self.rows]

    def timestamps(self) -> list[datetime]:
        if not self.table.is_stream:
            raise ValueError(f"table {self.name!r} is static and has no timestamp column")
        return self.column_values(self.table.timestamp)


@dataclass(frozen=True)
class Dataset:
    """Generated rows of every table, plus the time points the streams share."""

    tables: tuple[TableRows, ...]
    time_points: tuple[datetime, ...]
    config: GeneratorConfig

    def table(self, name: str) -> TableRows:
        for t in self.tables:
            if t.name.lower() == name.lower():
                return t
        raise KeyError(name)

    def rows(self, name: str) -> tuple[tuple[Any, ...], ...]:
        return self.table(name).rows

    def as_dict(self) -> dict[str, list[tuple[Any, ...]]]:
        return {t.name: list(t.rows) for t in self.tables}

    @property
    def row_counts(self) -> dict[str, int]:
        return {t.name: len(t.rows) for t in self.tables}

    def load_into(self, con: Any, dialect: str = "duckdb") -> None:
        """Create every table in a DB-API connection (``sqlite3`` or ``duckdb``) and insert its rows.

        Tests use this to evaluate unfolded SQL over exactly the rows that
        :func:`obda.datagen.generate` writes to files.  SQLite has no
        timestamp or decimal type: timestamps are stored as
        ``YYYY-MM-DD HH:MM:SS`` text (which orders correctly), decimals as floats.
        """
        if dialect not in ("duckdb", "sqlite"):
            raise ValueError(f"dialect must be 'duckdb' or 'sqlite', got {dialect!r}")
        for t in self.tables:
            cols = ", ".join(f'"{c.name}" {_sql_type(c.type, dialect)}' for c in t.columns)
            con.execute(f'DROP TABLE IF EXISTS "{t.name}"')
            con.execute(f'CREATE TABLE "{t.name}" ({cols})')
            if t.rows:
                marks = ", ".join("?" for _ in t.columns)
                data = [tuple(_sql_value(v, dialect) for v in r) for r in t.rows]
                con.executemany(f'INSERT INTO "{t.name}" VALUES ({marks})', data)


_SQL_TYPES = {
    ColumnType.INTEGER: ("BIGINT", "INTEGER"),
    ColumnType.DECIMAL: ("DECIMAL(18, 2)", "REAL"),
    ColumnType.DOUBLE: ("DOUBLE", "REAL"),
    ColumnType.STRING: ("VARCHAR", "TEXT"),
    ColumnType.BOOLEAN: ("BOOLEAN", "INTEGER"),
    ColumnType.TIMESTAMP: ("TIMESTAMP", "TEXT"),
}


def _sql_type(t: ColumnType, dialect: str) -> str:
    duck, lite = _SQL_TYPES[t]
    return duck if dialect == "duckdb" else lite


def _sql_value(v: Any, dialect: str) -> Any:
    if dialect == "sqlite":
        if isinstance(v, datetime):
            return format_timestamp(v)
        if isinstance(v, Decimal):
            return float(v)
        if isinstance(v, bool):
            return int(v)
    return v


def format_timestamp(ts: datetime) -> str:
    """The file format of timestamps: ``YYYY-MM-DD HH:MM:SS``."""
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def column_index(table: Table, column: str) -> int:
    for i, c in enumerate(table.columns):
        if c.name.lower() == column.lower():
            return i
    raise KeyError(f"{table.name}.{column}")
