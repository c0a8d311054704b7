"""The sources file: accepted shapes and every error with its line."""

import pytest

from obda.errors import SourcesError
from obda.model.sources import ColumnType, TableKind
from obda.model.sources_file import parse_sources

GOOD = """\
tables:
  measurement:
    kind: stream
    timestamp: ts
    columns: {sensor_id: integer, value: integer, ts: timestamp}
    location: data/measurement
    format: csv
  sensor:
    kind: static
    columns: {id: integer, kind: string, turbine_id: integer}
    key: [id]
"""


def test_good_file_is_typed():
    s = parse_sources(GOOD, "s.yaml")
    m = s.table("MEASUREMENT")
    assert m.kind is TableKind.STREAM and m.timestamp == "ts"
    assert m.column("VALUE").type is ColumnType.INTEGER
    assert m.location == "data/measurement" and m.format == "csv"
    assert s.table("sensor").key == ("id",)
    assert [t.name for t in s.streams] == ["measurement"]
    assert m.source_location.line == 2


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("tables:\n  m:\n    kind: stream\n    columns: {a: integer}\n", 2, "has no 'timestamp'"),
        ("tables:\n  m:\n    kind: river\n    columns: {a: integer}\n", 3, "is not 'stream' or 'static'"),
        ("tables:\n  m:\n    kind: static\n    columns: {a: int64}\n", 4, "unknown type 'int64'"),
        ("tables:\n  m:\n    kind: stream\n    timestamp: t\n    columns: {a: integer}\n", 4, "not among its columns"),
        ("tables:\n  m:\n    kind: stream\n    timestamp: a\n    columns: {a: integer}\n", 4, "expected timestamp"),
        ("tables:\n  m:\n    kind: static\n    timestamp: a\n    columns: {a: timestamp}\n", 4, "static but declares"),
        ("tables:\n  m:\n    kind: static\n    colums: {a: integer}\n", 4, "unknown key 'colums'"),
        ("tables:\n  m:\n    kind: static\n    columns: {a: integer}\n    key: [b]\n", 5, "key column 'b'"),
        ("tables:\n  m: {kind: static, columns: {a: integer}}\n  M: {kind: static, columns: {a: integer}}\n", 3, "declared twice"),
        ("tables:\n  m:\n    kind: static\n    columns: {a: integer\n", 5, "not valid YAML"),
        ("tablez: {}\n", 1, "unknown top-level key"),
        ("tables:\n  m:\n    kind: static\n    columns:\n      a: integer\n      __v: integer\n", 6, "'__v' is reserved"),
        ("tables:\n  m:\n    kind: static\n    columns: {_Corrupt_Record: string}\n", 4, "is reserved"),
        (
            "tables:\n  m:\n    kind: stream\n    timestamp: ts\n    columns: {ts: timestamp, t2: timestamp}\n",
            5,
            "exactly one timestamp",
        ),
    ],
)
def test_errors_carry_line_and_reason(text, line, fragment):
    with pytest.raises(SourcesError) as exc:
        parse_sources(text, "s.yaml")
    assert exc.value.location.file == "s.yaml"
    assert exc.value.location.line == line, str(exc.value)
    assert fragment in exc.value.message


@pytest.mark.parametrize(
    "fmt, kind, fragment",
    [("kafka", "static", "format 'kafka' is for streams"), ("jdbc", "stream", "static tables only")],
)
def test_formats_that_cannot_run_are_refused_with_their_line(fmt, kind, fragment):
    ts = "    timestamp: ts\n" if kind == "stream" else ""
    text = f"tables:\n  m:\n    kind: {kind}\n{ts}    columns: {{a: integer, ts: timestamp}}\n    format: {fmt}\n"
    if kind == "static":
        text = text.replace(", ts: timestamp", "")
    with pytest.raises(SourcesError, match=fragment) as e:
        parse_sources(text, "s.yaml")
    assert e.value.location.line == text.count("\n")  # the format line (the last one)


def test_jdbc_static_table_is_accepted():
    s = parse_sources("tables:\n  t:\n    kind: static\n    columns: {a: integer}\n    format: jdbc\n"
                      "    location: jdbc:postgresql://h/db\n    options: {dbtable: t}\n", "s.yaml")
    assert s.table("t").format == "jdbc"
