"""describe_logical_table: tables read, typed output columns, stream and timestamp column."""

from __future__ import annotations

import textwrap

import pytest
from sqlglot import exp

from obda.errors import Location, MappingError
from obda.mapping.sql import LogicalTableError, describe_logical_table, find_column
from obda.model.mapping import LogicalTable
from obda.model.sources import Column, ColumnType as T, Sources

SOURCES = Sources.from_yaml(
    textwrap.dedent(
        """\
        tables:
          Measurement:
            kind: stream
            timestamp: TS
            columns: {sensor_id: integer, value: double, TS: timestamp, note: string}
          Sensor:
            kind: static
            columns: {Id: integer, kind: string, price: decimal, active: boolean}
          Other_Stream:
            kind: stream
            timestamp: t
            columns: {k: integer, t: timestamp}
        """
    )
)


def _q(sql: str) -> LogicalTable:
    return LogicalTable(sql_query=sql, location=Location("m.ttl", 10))


def test_table_name() -> None:
    info = describe_logical_table(LogicalTable(table_name='"measurement"'), SOURCES)
    assert info.tables == ("Measurement",)
    assert info.stream == "Measurement" and info.timestamp_column == "TS"
    assert info.select is None
    assert [c.name for c in info.columns] == ["sensor_id", "value", "TS", "note"]
    info = describe_logical_table(LogicalTable(table_name="SENSOR"), SOURCES)
    assert info.stream is None and info.timestamp_column is None


def test_query_columns_types_and_spelling() -> None:
    info = describe_logical_table(
        _q(
            'SELECT m.sensor_id, m."value" * 2 AS doubled, s.kind, s.PRICE, s.active, m.ts, '
            "COUNT(*) OVER () AS n, 'x' || s.kind AS label, CAST(m.value AS INT) AS iv "
            "FROM measurement m JOIN sensor s ON m.sensor_id = s.id WHERE s.active"
        ),
        SOURCES,
    )
    assert info.tables == ("Measurement", "Sensor")
    assert info.columns == (
        Column("sensor_id", T.INTEGER),
        Column("doubled", T.DOUBLE),
        Column("kind", T.STRING),
        Column("price", T.DECIMAL),
        Column("active", T.BOOLEAN),
        Column("TS", T.TIMESTAMP),
        Column("n", T.INTEGER),
        Column("label", T.STRING),
        Column("iv", T.INTEGER),
    )
    assert info.stream == "Measurement" and info.timestamp_column == "TS"
    assert isinstance(info.select, exp.Select)
    assert info.column('"KIND"') == Column("kind", T.STRING)


def test_star_expansion_and_derived_table_timestamp() -> None:
    info = describe_logical_table(_q("SELECT * FROM sensor"), SOURCES)
    assert [c.name for c in info.columns] == ["Id", "kind", "price", "active"]
    info = describe_logical_table(_q("SELECT x.*, 1 AS one FROM (SELECT ts AS at, sensor_id FROM measurement) x"), SOURCES)
    assert [c.name for c in info.columns] == ["at", "sensor_id", "one"]
    assert info.stream == "Measurement" and info.timestamp_column == "at"
    assert info.select is not None


def test_stream_without_selected_timestamp() -> None:
    info = describe_logical_table(_q("SELECT sensor_id, MAX(ts) AS last FROM measurement GROUP BY sensor_id"), SOURCES)
    assert info.stream == "Measurement" and info.timestamp_column is None  # an aggregate is not the timestamp


@pytest.mark.parametrize(
    ("sql", "code", "text"),
    [
        ("SELECT sensor_id FROM nowhere", "unknown_table", "'nowhere'"),
        ("SELECT nope FROM measurement", "unknown_column", "nope"),
        ("SELECT m.nope FROM measurement m", "unknown_column", "nope"),
        ("SELECT FROM WHERE", "sql_syntax", "does not parse"),
        ("SELECT k, sensor_id FROM other_stream, measurement", "multiple_streams", "Measurement"),
        ("SELECT id, id FROM sensor", "duplicate_column", "'Id'"),
        ("DELETE FROM sensor", "sql_syntax", "must be a SELECT"),
    ],
)
def test_errors(sql: str, code: str, text: str) -> None:
    with pytest.raises(LogicalTableError) as ei:
        describe_logical_table(_q(sql), SOURCES)
    assert ei.value.code == code and text in ei.value.message
    assert isinstance(ei.value, MappingError)
    assert ei.value.location.file == "m.ttl"


def test_syntax_error_line_inside_multiline_query() -> None:
    with pytest.raises(LogicalTableError) as ei:
        describe_logical_table(_q("\n  SELECT id\n  FROM sensor WHERE (id = 1\n"), SOURCES)
    assert ei.value.location.line == 10 + 2


def test_find_column_prefers_exact_spelling() -> None:
    cols = (Column("Name", T.STRING), Column("name", T.INTEGER))
    assert find_column(cols, "name").type is T.INTEGER
    assert find_column(cols, '"Name"').type is T.STRING
    assert find_column(cols, "NAME").name == "Name"
    assert find_column(cols, "x") is None
