"""The sources catalog's model: tables (streams and static), their columns and types, the constraints declared.

The file that declares them (YAML) is read by :mod:`obda.model.sources_file`, which documents its format.
Table and column names are matched case-insensitively (SQL semantics); the spelling of the file is kept for output.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Mapping

from obda.errors import ExecutionError, Location, SourcesError
from obda.model.constraints import Constraint
from obda.model.kafka_source import KafkaSource
from obda.model.mqtt_source import MqttSource


class ColumnType(str, Enum):
    INTEGER = "integer"
    DECIMAL = "decimal"
    DOUBLE = "double"
    STRING = "string"
    BOOLEAN = "boolean"
    TIMESTAMP = "timestamp"

    @property
    def is_discrete(self) -> bool:
        """Integer-like domains: bounded by a lower and an upper constant (spec §1)."""
        return self in (ColumnType.INTEGER, ColumnType.BOOLEAN, ColumnType.TIMESTAMP)

    @property
    def is_numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.DECIMAL, ColumnType.DOUBLE)

    @property
    def sql_type(self) -> str:
        """The generic SQL type name (as sqlglot spells it) for this column type."""
        return _SQL_TYPES[self]


_SQL_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.DECIMAL: "DECIMAL",
    ColumnType.DOUBLE: "DOUBLE",
    ColumnType.STRING: "VARCHAR",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.TIMESTAMP: "TIMESTAMP",
}


class TableKind(str, Enum):
    STREAM = "stream"
    STATIC = "static"


FORMATS = ("csv", "json", "parquet", "jdbc", "mqtt", "kafka")
#: formats a stream can have: the executor reads a stream as new files in its location (an MQTT stream as the
#: JSON-lines ingest log obda keeps there: its table's ``format`` is ``json``, its ``ingest`` the broker)
STREAM_FORMATS = ("csv", "json", "parquet", "mqtt", "kafka")
#: formats obda knows of but cannot read: refused (with the reason) instead of silently reading nothing
UNSUPPORTED_FORMATS: dict[str, str] = {}


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType


@dataclass(frozen=True)
class Table:
    name: str
    kind: TableKind
    columns: tuple[Column, ...]
    timestamp: str | None = None
    location: str | None = None
    format: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    key: tuple[str, ...] = ()
    source_location: Location = field(default_factory=Location, compare=False)
    #: ``format: mqtt``: where the messages come from (an ingester lands them in ``location``, read as json)
    ingest: MqttSource | None = None
    #: ``format: kafka``: the topic and client settings (``location``: the bootstrap servers)
    kafka: KafkaSource | None = None

    @property
    def is_stream(self) -> bool:
        return self.kind is TableKind.STREAM

    def column(self, name: str) -> Column | None:
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class Sources:
    tables: tuple[Table, ...]
    file: str | None = None
    constraints: tuple[Constraint, ...] = ()

    def constraint(self, name: str) -> Constraint | None:
        return next((c for c in self.constraints if c.name == name), None)

    def with_constraints(self, extra: tuple[Constraint, ...]) -> "Sources":
        """These sources with ``extra`` constraints added (a catalog entry's own); names stay unique."""
        for c in extra:
            if self.constraint(c.name) is not None:
                raise SourcesError(f"constraint {c.name!r} is already declared in the sources file", c.location)
        return replace(self, constraints=self.constraints + tuple(extra))

    def table(self, name: str) -> Table | None:
        low = name.strip('"').lower()
        for t in self.tables:
            if t.name.lower() == low:
                return t
        return None

    @property
    def streams(self) -> tuple[Table, ...]:
        return tuple(t for t in self.tables if t.is_stream)

    @staticmethod
    def load(path: str | Path) -> "Sources":
        from obda.model.sources_file import load_sources  # the reader builds Sources: imported when called

        return load_sources(path)

    @staticmethod
    def from_yaml(text: str, file: str | None = None) -> "Sources":
        from obda.model.sources_file import parse_sources

        return parse_sources(text, file)


def missing_stream_locations(tables, base_dir: str | Path) -> list[tuple[Table, Path]]:
    """The stream tables among ``tables`` whose location does not exist (resolved against ``base_dir``).

    Such a stream would read nothing, forever: callers refuse it at start (``obda run``, the service) unless
    they were told to wait for the data (``--wait-for-data``).  A stream without a location is reported too.
    """
    return [(t, p) for t, p in missing_locations(tables, base_dir) if t.is_stream]


def missing_locations(tables, base_dir: str | Path) -> list[tuple[Table, Path | None]]:
    """The tables among ``tables`` read from files whose location does not exist (resolved against
    ``base_dir``), with that path; a stream without a location with None (a JDBC table has no files)."""
    out = []
    for t in tables:
        if t.format in ("jdbc", "kafka") or (not t.location and not t.is_stream) or t.ingest is not None:
            continue  # an MQTT stream's ingester creates its folder
        p = Path(t.location) if t.location else None
        if p is not None and not p.is_absolute():
            p = Path(base_dir) / p
        if p is None or not p.exists():
            out.append((t, p))
    return out


def missing_locations_error(missing: list[tuple[Table, Path | None]], hint: str) -> ExecutionError:
    """One located error for the first missing stream location (the others named in the message)."""
    t, p = missing[0]
    where = f"its location {t.location!r} ({p}) does not exist" if p is not None else "it has no 'location'"
    more = f" (also: {', '.join(repr(o.name) for o, _ in missing[1:])})" if len(missing) > 1 else ""
    return ExecutionError(f"stream {t.name!r}: {where}, so nothing would be read{more}; {hint}", t.source_location)
