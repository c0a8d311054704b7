"""The reader contract: how a stream or static file becomes rows, the same on both backends.

One specification, implemented twice — here for the local backend (and the driver's checks), in
:func:`obda.execution.spark_io._read` for Spark — and tested by one shared table of cases run on
both (``tests/execution/test_reader_contract.py``): same accepted rows, same rejects, same reasons.

**Files.**  CSV (a header row required) or JSON Lines (one object per line), UTF-8 with or without
a byte-order mark.  An empty file, or a CSV with only its header, has no rows.  The last line
needs no newline.  Blank lines are skipped.

**CSV header.**  The first record names the columns; it is matched to the sources file's columns by
name (case and surrounding white space ignored, in any order; extra columns are ignored).  A file
whose header does not name every declared column, names one twice, or is not UTF-8 is rejected
whole — one quarantine record at line 1 with the reason — and the query goes on.

**CSV records.**  RFC 4180 quoting with ``"``; a quoted field may span lines (a CR LF inside it
reads as LF); a quote inside a quoted field is doubled, and a
stray one makes the record malformed.  A record with more or fewer fields
than the header is malformed.  Unquoted empty fields and ``""`` are NULL.

**JSON records.**  A line that is not a JSON object is malformed.  Fields are matched to the
columns by exact name; a missing field or ``null`` is NULL.  A number's or boolean's text is its
value's text (``1.50`` stays ``1.50``); a nested value's text is its JSON (compact is the form
both backends give alike).

**Encoding.**  A record holding bytes that are not UTF-8 (read as U+FFFD) is rejected whole.

**Fields** (surrounding characters up to U+0020 are ignored except in strings; empty is NULL):

- ``string``: the text as it is.
- ``integer``: digits with an optional sign, in the 64-bit range.
- ``double``: a Java floating-point literal (``1``, ``-1.5e3``, ``.5``, ``1.``, ``0x1p3``, an
  optional ``d``/``f`` suffix, ``NaN``, ``Infinity``) or ``inf``/``infinity``/``nan`` in any case.
- ``decimal``: digits with an optional sign, point and exponent; rounded half-up to 10 places; at
  most 28 digits before the point.
- ``boolean``: ``true t yes y 1`` / ``false f no n 0`` in any case.
- ``timestamp``: ISO 8601 ``YYYY-MM-DD``, optionally ``[T ]hh:mm:ss[.fraction]`` and an offset
  ``Z``, ``±hh``, ``±hhmm`` or ``±hh:mm`` (at most 18 hours); no offset is UTC; digits of the
  fraction past the sixth are dropped.

A rejected row is quarantined with its file, line, the reason (``invalid: …``; the first column
that fails is named) and its text: a malformed record's raw text, else a compact JSON object of its
non-NULL fields as read.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

from obda.errors import ExecutionError
from obda.model.sources import ColumnType, Table

csv.field_size_limit(1 << 30)  # a field as large as Spark's CSV reader takes (it has no limit)

WS = "".join(chr(i) for i in range(33))  # what a number, boolean or timestamp may be surrounded by
REPLACEMENT = "\ufffd"  # what a byte that is not UTF-8 decodes to (both backends)
TS_PATTERN = (r"^[\x00-\x20]*(?!0000)([0-9]{4})-([0-9]{2})-([0-9]{2})"
              r"([T ]([0-9]{2}):([0-9]{2}):([0-9]{2})([.]([0-9]{1,9}))?(Z|([+-])([0-9]{2})(:?([0-9]{2}))?)?)?"
              r"[\x00-\x20]*$")
SHOWN = 40  # characters of a value a reason shows
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_BOM = b"\xef\xbb\xbf"
MALFORMED_CSV = "invalid: malformed record (a number of fields other than the header's, or a quoting error)"
MALFORMED_JSON = "invalid: malformed record (not a JSON object)"
NOT_UTF8 = "invalid: the record is not UTF-8 text (it holds bytes that are not UTF-8, read as U+FFFD)"
NOT_A = {  # why a field's text is not a value of its column's type
    ColumnType.INTEGER: "is not a 64-bit integer",
    ColumnType.DOUBLE: "is not a number",
    ColumnType.DECIMAL: "is not a decimal of at most 28 digits before the point",
    ColumnType.BOOLEAN: "is not a boolean (true or false)",
    ColumnType.TIMESTAMP: "is not an ISO 8601 timestamp (e.g. 2024-01-31T12:00:00Z)",
}


@dataclass(frozen=True)
class Rejected:
    """A record (or a whole file, ``line`` 1) the reader refuses, with its reason: quarantined, never fatal."""

    text: str
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class Record:
    """A record as read: its line and each declared column's text (None: NULL)."""

    line: int
    fields: dict[str, str | None]

    @classmethod
    def of(cls, values: dict, line: int = 0) -> "Record":
        """A record of in-memory values (a generator's rows) as the reader would give their text."""
        return cls(line, {k: _value_text(v) for k, v in values.items()})


def _value_text(v) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        return (v.astimezone(dt.timezone.utc).replace(tzinfo=None) if v.tzinfo else v).isoformat() + "Z"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def shown(value: str) -> str:
    """A field's text as a reason shows it (quoted, at most :data:`SHOWN` characters)."""
    return '"' + (value[:SHOWN] + "…" if len(value) > SHOWN else value) + '"'


def column_reason(name: str, ctype: ColumnType, value: str) -> str:
    return f"invalid: column {name!r} ({ctype.value}): {shown(value)} {NOT_A[ctype]}"


# -- fields ------------------------------------------------------------------------------------------
_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"([+-]?)(?:(NaN)|(Infinity)|([0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
                          r"|(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+))[fFdD]?")
_SPECIAL = {"inf": float("inf"), "+inf": float("inf"), "infinity": float("inf"), "+infinity": float("inf"),
            "-inf": float("-inf"), "-infinity": float("-inf"), "nan": float("nan")}
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TRUE, _FALSE = {"t", "true", "y", "yes", "1"}, {"f", "false", "n", "no", "0"}
_TS = re.compile(TS_PATTERN)
_STEP = Decimal(1).scaleb(-10)
_DECIMAL_LIMIT = Decimal(10) ** 28


def parse_field(text: str, ctype: ColumnType):
    """The value of a field's text (not NULL) in its column's type; ValueError when it is not one."""
    if ctype is ColumnType.STRING:
        return text
    t = text.strip(WS)
    if ctype is ColumnType.INTEGER:
        if _INT.fullmatch(t):
            v = int(t)
            if -(1 << 63) <= v < (1 << 63):
                return v
    elif ctype is ColumnType.DOUBLE:
        m = _JAVA_DOUBLE.fullmatch(t)
        if m:
            sign, nan, inf, dec, hexa = m.groups()
            if nan:
                return float("nan")
            if inf:
                return float(sign + "inf")
            return float.fromhex(sign + hexa) if hexa else float(sign + dec)
        if t.lower() in _SPECIAL:
            return _SPECIAL[t.lower()]
    elif ctype is ColumnType.DECIMAL:
        if _DECIMAL.fullmatch(t):
            with localcontext() as ctx:
                ctx.prec = 80
                try:
                    q = Decimal(t).quantize(_STEP, rounding=ROUND_HALF_UP)
                except InvalidOperation:
                    q = None
                if q is not None and abs(q) < _DECIMAL_LIMIT:
                    return q
    elif ctype is ColumnType.BOOLEAN:
        if t.lower() in _TRUE or t.lower() in _FALSE:
            return t.lower() in _TRUE
    elif ctype is ColumnType.TIMESTAMP:
        m = _TS.fullmatch(text)
        if m:
            us = _timestamp(m)
            if us is not None:
                return us
    raise ValueError(NOT_A[ctype])


def _timestamp(m) -> int | None:
    y, mo, d, time, hh, mi, ss, _, frac, zone, sign, zh, _, zm = m.groups()
    try:
        t = dt.datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0),
                        int((frac or "")[:6].ljust(6, "0")), tzinfo=dt.timezone.utc)
    except ValueError:
        return None
    if sign:
        h, mins = int(zh), int(zm or 0)
        if mins >= 60 or h * 60 + mins > 18 * 60:
            return None
        off = dt.timedelta(hours=h, minutes=mins)
        t = t - off if sign == "+" else t + off
    delta = t - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def typed(table: Table, fields: dict[str, str | None]) -> tuple[dict | None, str | None]:
    """A record's typed row, or ``(None, reason)``: not UTF-8, then the first column that fails, then a
    missing timestamp."""
    if any(v is not None and REPLACEMENT in v for v in fields.values()):
        return None, NOT_UTF8
    row = {}
    for c in table.columns:
        v = fields.get(c.name)
        if v is None or v == "":
            row[c.name] = None
            continue
        try:
            row[c.name] = parse_field(v, c.type)
        except ValueError:
            return None, column_reason(c.name, c.type, v)
    if table.timestamp and row.get(table.timestamp) is None:
        return None, f"invalid: missing timestamp {table.timestamp!r}"
    return row, None


def row_text(table: Table, fields: dict[str, str | None]) -> str:
    """A record's text in the quarantine: its non-NULL fields as a compact JSON object, in column order."""
    return json.dumps({c.name: fields[c.name] for c in table.columns if fields.get(c.name) is not None},
                      separators=(",", ":"), ensure_ascii=False)


# -- files -------------------------------------------------------------------------------------------
def _text(data: bytes) -> str:
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    return data.decode("utf-8", errors="replace")


def csv_dialect(options: dict) -> dict:
    """The csv module's settings for a table's Spark CSV options (``sep``, ``quote``, ``escape``; RFC 4180
    doubled quotes unless ``escape`` names another character)."""
    quote = options.get("quote", '"')
    escape = options.get("escape", quote)
    return {"delimiter": options.get("sep", options.get("delimiter", ",")), "quotechar": quote,
            "escapechar": None if escape == quote else escape, "doublequote": True, "strict": True}


def header_names(table: Table, header: list[str]) -> tuple[tuple[str | None, ...], str | None]:
    """Each header position's declared column (None: not declared), or the reason the header is refused."""
    if any(REPLACEMENT in h for h in header):
        return (), "invalid: the file is not UTF-8 (its header, line 1, holds bytes that are not UTF-8); no row of it was read"
    by_name = {c.name.lower(): c.name for c in table.columns}
    names = [by_name.get(h.strip(WS).lower()) for h in header]
    twice = sorted({n for n in names if n is not None and names.count(n) > 1})
    missing = [c.name for c in table.columns if c.name not in names]
    if twice or missing:
        what = (f"names the column(s) {', '.join(twice)} twice" if twice
                else f"does not name the column(s) {', '.join(missing)}")
        return (), (f"invalid: the header (line 1) {what}; the first line of a CSV file must name each column once "
                    "(in any order); no row of it was read")
    return tuple(names), None


_HEADERS: dict[tuple, tuple] = {}


def file_header(path: str, table: Table, options: dict) -> tuple[tuple[str, ...] | None, Rejected | None]:
    """A CSV file's header (its names as written, to read it by) and, when refused, the whole file's reject.

    Read from the file's first records on the driver (cached per size and modification time);
    ``(None, None)``: the file is empty.
    """
    try:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns, table.name, table.columns, tuple(sorted(options.items())))
        if key in _HEADERS:
            return _HEADERS[key]
        with open(path, "rb") as f:
            head = f.read(1 << 20)
            while b"\n" not in head.lstrip(_BOM) and len(head) < st.st_size:
                more = f.read(1 << 20)
                if not more:
                    break
                head += more
    except OSError as e:
        return None, Rejected("", f"invalid: the file cannot be read ({e.strerror})", 1)
    reader = csv.reader(io.StringIO(_text(head), newline=""), **csv_dialect(options))
    header = _first_record(reader)
    if isinstance(header, Rejected):
        got = ((), header)
    elif header is None:
        got = (None, None)
    else:
        _, why = header_names(table, header)
        got = (tuple(header), Rejected(",".join(header), why, 1) if why else None)
    if len(_HEADERS) > 4096:
        _HEADERS.clear()
    _HEADERS[key] = got
    return got


def _first_record(reader) -> list[str] | Rejected | None:
    """A CSV file's header record (None: an empty file), or the whole file's reject when it is not one."""
    try:
        return next(reader, None)
    except csv.Error:
        return Rejected("", "invalid: the header (line 1) is not a CSV record (a quote in it is never closed or "
                            "stray); no row of it was read", 1)


def read_records(path: str, table: Table, fmt: str, options: dict | None = None) -> list[Record | Rejected]:
    """The records of a CSV or JSON-lines file under the contract (see the module), each with its line."""
    options = dict(options or {})
    if fmt == "kafka":  # a Kafka stream's segment (obda.execution.kafka_offsets): its records' payloads
        from obda.execution.kafka_reader import segment_records

        return segment_records(path, table)
    if fmt not in ("csv", "json"):
        raise ExecutionError(f"local backend cannot read format {fmt!r} ({path}); use the Spark backend")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return [Rejected("", f"invalid: the file cannot be read ({e.strerror})", 1)]
    return _json_records(data, table) if fmt == "json" else _csv_records(_text(data), table, options)


def _json_records(data: bytes, table: Table) -> list[Record | Rejected]:
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    out: list[Record | Rejected] = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        raw = raw.rstrip(b"\r")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:  # a line with bytes that are not UTF-8 is not parsed at all
            out.append(Rejected(raw.decode("utf-8", errors="replace"), NOT_UTF8, n))
            continue
        if not line.strip():
            continue
        try:
            v = json.loads(line, parse_int=str, parse_float=str, parse_constant=str)
        except json.JSONDecodeError:
            v = None
        if not isinstance(v, dict):
            out.append(Rejected(line, MALFORMED_JSON, n))
            continue
        fields = {c.name: _json_text(v.get(c.name)) for c in table.columns}
        if any(isinstance(v.get(c.name), (dict, list)) for c in table.columns):  # nested: its JSON text
            plain = json.loads(line)
            fields.update({c.name: json.dumps(plain[c.name], separators=(",", ":"), ensure_ascii=False)
                           for c in table.columns if isinstance(plain.get(c.name), (dict, list))})
        out.append(Record(n, fields))
    return out


def _json_text(v) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return None  # nested: see _json_records


def _csv_records(text: str, table: Table, options: dict) -> list[Record | Rejected]:
    lines = re.split(r"\r\n|\r|\n", text)  # as the csv module counts lines
    brk = re.search(r"\r\n|\r|\n", text)
    brk = brk.group(0) if brk else "\n"  # the file's line break: inside a quoted field it reads as LF
    reader = csv.reader(io.StringIO(text, newline=""), **csv_dialect(options))
    header = _first_record(reader)
    if header is None:
        return []
    if isinstance(header, Rejected):
        return [header]
    names, why = header_names(table, header)
    if why:
        return [Rejected(",".join(header), why, 1)]
    out: list[Record | Rejected] = []
    start = reader.line_num
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return out
        except csv.Error:  # a stray quote in a quoted field, or a quote never closed
            rec = _stray_quotes(_raw(lines, start, reader.line_num), options)
        first, start = start + 1, reader.line_num
        if not rec:
            if rec is None:  # a quote never closed
                text = _raw(lines, first - 1, start)
                out.append(Rejected(text, NOT_UTF8 if REPLACEMENT in text else MALFORMED_CSV, first))
            continue
        if len(rec) != len(header):
            text = _raw(lines, first - 1, start)
            out.append(Rejected(text, NOT_UTF8 if REPLACEMENT in text else MALFORMED_CSV, first))
            continue
        fields = {c.name: None for c in table.columns}
        for name, value in zip(names, rec):
            if name is not None:
                fields[name] = value.replace(brk, "\n") if value != "" else None
        out.append(Record(first, fields))


def _raw(lines: list[str], start: int, end: int) -> str:
    """The text of a record on lines ``start+1 .. end`` (as Spark reports a malformed one)."""
    return "\n".join(lines[start:end])


def _stray_quotes(text: str, options: dict) -> list[str] | None:
    """The fields of a record with a stray quote, as Spark's CSV reader takes them: a quoted field whose
    closing quote is not followed by the delimiter is its raw text up to the next delimiter; None when a
    quote is never closed."""
    d = csv_dialect(options)
    sep, quote = d["delimiter"], d["quotechar"]
    fields, i, n = [], 0, len(text)
    while True:
        if i < n and text[i] == quote:
            j, value = i + 1, []
            while True:
                k = text.find(quote, j)
                if k < 0:
                    return None
                if text.startswith(quote, k + 1):  # a doubled quote
                    value.append(text[j:k + 1])
                    j = k + 2
                    continue
                break
            if k + 1 == n or text.startswith(sep, k + 1):
                fields.append("".join(value) + text[j:k])
                i = k + 1
            else:  # stray: the raw text up to the next delimiter
                end = text.find(sep, k + 1)
                end = n if end < 0 else end
                fields.append(text[i:end])
                i = end
        else:
            end = text.find(sep, i)
            end = n if end < 0 else end
            fields.append(text[i:end])
            i = end
        if i >= n:
            return fields
        i += len(sep)
        if i == n:
            fields.append("")
            return fields
