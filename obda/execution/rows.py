"""Row-level work without Spark: typing, validation, local conditions, projection, counting.

This is the in-process backend of the executor (``backend="local"``): the same
per-alias pipelines that :mod:`obda.execution.spark_io` runs as DataFrame
operations, evaluated in Python on small inputs.  It exists so that the whole
ordering + synopsis path can be driven over many random micro-batch splits
quickly (differential tests), and for small deployments without a cluster.
Semantics follow Spark SQL for the supported constructs: comparisons with
NULL are unknown (the row is filtered out), ``CAST(x AS STRING)``, ``CONCAT``
(NULL if any part is NULL), timestamp literals read as UTC.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass, field
from collections import defaultdict
from decimal import Decimal, InvalidOperation
from pathlib import Path

from sqlglot import exp

from obda.errors import ExecutionError
from obda.analysis.forest import Pipeline
from obda.execution.engine import Counted
from obda.model.query import OPS
from obda.model.sources import ColumnType, Table

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
csv.field_size_limit(1 << 30)  # a field as large as Spark's CSV reader takes (its default has no limit)


@dataclass
class TableBatch:
    """What one micro-batch brought for one stream table."""

    table: str
    groups: dict[int, dict[int, Counted]] = field(default_factory=dict)  # ts -> pipeline id -> key -> count
    max_ts: int | None = None  # largest timestamp among valid, non-late rows (filtered or not)
    rows: int = 0  # all rows read
    valid: int = 0
    late: int = 0
    invalid: int = 0
    quarantine: list[dict] = field(default_factory=list)
    files: tuple[str, ...] = ()


def to_micros(v) -> int:
    """A timestamp value (datetime, ISO text, or µs integer) as µs since the epoch (naive = UTC)."""
    if isinstance(v, bool):
        raise ValueError("boolean is not a timestamp")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip()
        if not s:
            raise ValueError("empty timestamp")
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        v = dt.datetime.fromisoformat(s)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - EPOCH
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise ValueError(f"not a timestamp: {v!r}")


def micros_to_iso(us: int | None) -> str | None:
    """ISO-8601 UTC text of a µs timestamp (the ``emitted_at`` of outputs)."""
    if us is None:
        return None
    t = EPOCH + dt.timedelta(microseconds=us)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}" if t.microsecond else "") + "Z"


def convert(value, ctype: ColumnType):
    """Typed value of a raw field, or ValueError. Empty text and None are NULL."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if ctype is ColumnType.INTEGER:
        if isinstance(value, bool):
            raise ValueError("boolean in an integer column")
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            if value != int(value):
                raise ValueError(f"{value!r} is not an integer")
            return int(value)
        return int(str(value).strip())
    if ctype is ColumnType.DOUBLE:
        if isinstance(value, bool):
            raise ValueError("boolean in a double column")
        return float(value)
    if ctype is ColumnType.DECIMAL:
        try:
            return Decimal(str(value))
        except InvalidOperation as e:
            raise ValueError(f"{value!r} is not a decimal") from e
    if ctype is ColumnType.BOOLEAN:
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in ("true", "false"):
            return s == "true"
        raise ValueError(f"{value!r} is not a boolean")
    if ctype is ColumnType.TIMESTAMP:
        return to_micros(value)
    return value if isinstance(value, str) else str(value)


_TS_TYPES = {"TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPNTZ", "TIMESTAMPLTZ", "DATETIME"}
_STR_TYPES = {"TEXT", "VARCHAR", "CHAR", "NVARCHAR", "STRING"}
_INT_TYPES = {"INT", "BIGINT", "SMALLINT", "TINYINT"}


_ARITH = {exp.Add: lambda a, b: a + b, exp.Sub: lambda a, b: a - b, exp.Mul: lambda a, b: a * b, exp.Div: None}


_COMPARISONS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def evaluate(e: exp.Expression, row: dict):
    """Value of a (single-table) SQL expression over a typed row (three-valued logic)."""
    if isinstance(e, exp.Paren):
        return evaluate(e.this, row)
    if isinstance(e, exp.Column):
        return row.get(e.name)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.this
        try:
            return int(e.this)
        except ValueError:
            return float(e.this)
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Null):
        return None
    if isinstance(e, exp.Neg):
        v = evaluate(e.this, row)
        return None if v is None else -v
    if isinstance(e, (exp.Cast, exp.TryCast)):
        v = evaluate(e.this, row)
        to = e.to.this.name if hasattr(e.to.this, "name") else str(e.to.this)
        if v is None:
            return None
        if to in _TS_TYPES:
            return to_micros(v)
        if to in _STR_TYPES:
            if isinstance(v, bool):
                return "true" if v else "false"
            return str(v)
        if to in _INT_TYPES:
            return int(v)
        if to in ("DOUBLE", "FLOAT"):
            return float(v)
        raise ExecutionError(f"local backend: unsupported CAST to {to} in {e.sql()!r}")
    if isinstance(e, exp.Concat):
        parts = [evaluate(a, row) for a in e.expressions]
        if any(p is None for p in parts):
            return None
        return "".join(str(p) for p in parts)
    if isinstance(e, exp.Replace):  # IRI-safe percent-encoding of template values (a REPLACE chain)
        parts = [evaluate(a, row) for a in (e.this, e.expression, e.args.get("replacement"))]
        return None if any(p is None for p in parts) else str(parts[0]).replace(str(parts[1]), str(parts[2]))
    if isinstance(e, exp.DPipe):
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        return None if a is None or b is None else f"{a}{b}"
    if isinstance(e, exp.And):
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(e, exp.Or):
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(e, exp.Not):
        a = evaluate(e.this, row)
        return None if a is None else not a
    if isinstance(e, exp.Is):
        return evaluate(e.this, row) is None
    if isinstance(e, exp.Nullif):
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        return None if a is None or a == b else a
    if type(e) in _ARITH:
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        if a is None or b is None:
            return None
        if isinstance(a, float) != isinstance(b, float):  # a DECIMAL column with a double: as doubles
            a, b = float(a), float(b)
        if type(e) is exp.Div:
            return None if b == 0 else a / b
        return _ARITH[type(e)](a, b)
    op = _COMPARISONS.get(type(e))
    if op is not None:
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        if a is None or b is None:
            return None
        return OPS[op](a, b)
    raise ExecutionError(f"local backend: unsupported expression {e.sql()!r}")


def pipeline_key(p: Pipeline, row: dict) -> tuple:
    exprs = dict(p.exprs)
    return tuple(evaluate(exprs[a], row) if a in exprs else row.get(a[1]) for a in p.attrs)


def type_row(table: Table, raw: dict) -> tuple[dict | None, str | None]:
    """Typed row, or (None, reason) for an invalid row."""
    typed = {}
    lower = {str(k).lower(): v for k, v in raw.items()}
    for c in table.columns:
        try:
            typed[c.name] = convert(lower.get(c.name.lower()), c.type)
        except (ValueError, TypeError) as e:
            return None, f"invalid: column {c.name!r} ({c.type.value}): {e}"
    if table.timestamp and typed.get(table.timestamp) is None:
        return None, f"invalid: missing timestamp {table.timestamp!r}"
    return typed, None


def process_rows(
    table: Table, pipelines: list[Pipeline], raw_rows, closed_upto: int | None, file: str | None = None
) -> TableBatch:
    """Validate, classify (late / invalid), filter, project and count the rows of one table."""
    b = TableBatch(table.name, files=(file,) if file else ())
    groups: dict[int, dict[int, dict]] = {}
    for raw in raw_rows:
        b.rows += 1
        if isinstance(raw, Rejected):  # a line or a whole file the reader refused
            b.invalid += 1
            b.quarantine.append({"stream": table.name, "reason": raw.reason, "row": raw.text, "file": file})
            continue
        if isinstance(raw, str):  # an unparseable line
            b.invalid += 1
            b.quarantine.append({"stream": table.name, "reason": "invalid: malformed record", "row": raw, "file": file})
            continue
        row, why = type_row(table, raw)
        if row is None:
            b.invalid += 1
            b.quarantine.append({"stream": table.name, "reason": why, "row": _jsonable(raw), "file": file})
            continue
        ts = row.get(table.timestamp) if table.timestamp else None
        if ts is not None and closed_upto is not None and ts <= closed_upto:
            b.late += 1
            b.quarantine.append(
                {
                    "stream": table.name,
                    "reason": f"late: timestamp {micros_to_iso(ts)} is at or before the closed timestamp {micros_to_iso(closed_upto)}",
                    "row": _jsonable(raw),
                    "file": file,
                }
            )
            continue
        b.valid += 1
        if ts is not None:
            b.max_ts = ts if b.max_ts is None else max(b.max_ts, ts)
        for p in pipelines:
            if all(evaluate(f, row) is True for f in p.filters):
                slot = groups.setdefault(ts, {}).setdefault(p.id, defaultdict(int))
                slot[pipeline_key(p, row)] += 1
    b.groups = {ts: {pid: dict(d) for pid, d in per.items()} for ts, per in groups.items()}
    return b


def static_rows(table: Table, pipelines: list[Pipeline], raw_rows) -> tuple[dict[int, dict], list[dict]]:
    """Counted rows per static pipeline, and quarantined rows."""
    b = process_rows(table, pipelines, raw_rows, None)
    out: dict[int, dict] = defaultdict(lambda: defaultdict(int))
    for per in b.groups.values():
        for pid, rows in per.items():
            for k, c in rows.items():
                out[pid][k] += c
    return {pid: dict(d) for pid, d in out.items()}, b.quarantine


def _jsonable(raw):
    if isinstance(raw, dict):
        return {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in raw.items()}
    return str(raw)


@dataclass(frozen=True)
class Rejected:
    """A row (or a whole file) the reader refuses, with its reason: quarantined, never fatal to the query."""

    text: str
    reason: str


_BOM = b"\xef\xbb\xbf"


def read_file_rows(path: str, fmt: str, options: dict | None = None, columns: tuple[str, ...] | None = None):
    """Rows of a CSV (header) or JSON-lines file (UTF-8, with or without a byte-order mark).

    Unparseable JSON lines are returned as text (malformed records).  A file that cannot be read as a whole —
    not UTF-8, or a CSV whose first line does not name ``columns`` (a missing header would otherwise lose
    the first row) — is one :class:`Rejected` with the reason, located at the line; the query goes on.
    """
    options = options or {}
    p = Path(path)
    if fmt not in ("csv", "json"):
        raise ExecutionError(f"local backend cannot read format {fmt!r} ({path}); use the Spark backend")
    try:
        data = p.read_bytes()
    except OSError as e:
        return [Rejected("", f"invalid: the file cannot be read ({e.strerror})")]
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        return [Rejected("", f"invalid: the file is not UTF-8 (byte 0x{data[e.start]:02x} at line {line}); "
                             "no row of it was read")]
    if fmt == "json":
        out = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                v = json.loads(line)
                out.append(v if isinstance(v, dict) else line)
            except json.JSONDecodeError:
                out.append(line)
        return out
    sep = options.get("sep", options.get("delimiter", ","))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    header = next(reader, None)
    if header is None:
        return []
    if columns is not None and not set(columns) <= set(header):
        missing = ", ".join(c for c in columns if c not in header)
        return [Rejected(sep.join(header), f"invalid: the header (line 1) does not name the column(s) {missing}; "
                                           "the first line of a CSV file must name the columns (in any order); "
                                           "no row of it was read")]
    out = []
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return out
        except csv.Error as e:  # the csv module's own refusal of a line: that line is quarantined
            out.append(Rejected("", f"invalid: line {reader.line_num}: {e}"))
            continue
        if not rec:
            continue
        if len(rec) != len(header):
            out.append(sep.join(rec))
        else:
            out.append(dict(zip(header, rec)))


def merge_batches(name: str, parts: list[TableBatch]) -> TableBatch:
    if len(parts) == 1 and parts[0].table == name:
        return parts[0]
    b = TableBatch(name)
    for p in parts:
        b.rows += p.rows
        b.valid += p.valid
        b.late += p.late
        b.invalid += p.invalid
        b.quarantine.extend(p.quarantine)
        b.files += p.files
        if p.max_ts is not None:
            b.max_ts = p.max_ts if b.max_ts is None else max(b.max_ts, p.max_ts)
        for ts, per in p.groups.items():
            slot = b.groups.setdefault(ts, {})
            for pid, rows in per.items():
                dst = slot.setdefault(pid, {})
                for k, c in rows.items():
                    dst[k] = dst.get(k, 0) + c
    return b
