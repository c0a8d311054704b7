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

from typing import TYPE_CHECKING

import datetime as dt
from decimal import Decimal
import functools
import math
import re
from dataclasses import dataclass, field
from collections import defaultdict

from sqlglot import exp

from obda.errors import ExecutionError
from obda.analysis.forest import Pipeline
from obda.execution.relations import Counted
from obda.execution.reader import Rejected, row_text, typed

if TYPE_CHECKING:
    from obda.execution.keys import KeyCheck
from obda.model.query import OPS, replacement_parts
from obda.model.sources import Table

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass
class TableBatch:
    """What one micro-batch brought for one stream table."""

    table: str
    groups: dict[int, dict[int, Counted]] = field(default_factory=dict)  # ts -> pipeline id -> key -> count
    max_ts: int | None = None  # largest timestamp among valid, non-late rows (filtered or not)
    min_ts: int | None = None  # smallest of them: a timestamp of the data (when static members' answers are due)
    rows: int = 0  # all rows read
    valid: int = 0
    late: int = 0
    invalid: int = 0  # key violations included
    key_violations: int = 0
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


def timestamp_text(us: int) -> str:
    """Spark's ``CAST(timestamp AS STRING)`` of a µs timestamp: ``2024-01-01 10:00:00``, fractional seconds
    without trailing zeros."""
    t = EPOCH + dt.timedelta(microseconds=to_micros(us))
    return t.strftime("%Y-%m-%d %H:%M:%S") + ("." + f"{t.microsecond:06d}".rstrip("0") if t.microsecond else "")


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
        return _number(e.this)
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
            if isinstance(e.this, (exp.Cast, exp.TryCast)) and e.this.to.this.name in _TS_TYPES:
                return timestamp_text(v)  # a timestamp's text, as Spark casts it (forest.members marks these)
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
        return _and(evaluate(e.this, row), evaluate(e.expression, row))
    if isinstance(e, exp.Or):
        a, b = evaluate(e.this, row), evaluate(e.expression, row)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(e, exp.Not):
        a = evaluate(e.this, row)
        return None if a is None else not a
    if isinstance(e, exp.Is):  # IS NULL, IS TRUE, IS FALSE: never unknown
        a, what = evaluate(e.this, row), e.expression
        return a is None if isinstance(what, exp.Null) else a is bool(what.this)
    if isinstance(e, exp.Between):  # low <= x AND x <= high, unknown where a side is NULL
        return _and(_compare("<=", evaluate(e.args["low"], row), evaluate(e.this, row)),
                    _compare("<=", evaluate(e.this, row), evaluate(e.args["high"], row)))
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
        return _compare(op, evaluate(e.this, row), evaluate(e.expression, row))
    if isinstance(e, exp.Case):  # IF: the first branch whose condition is true (none: NULL); CASE x WHEN v: x = v
        operand = e.this
        value = evaluate(operand, row) if operand is not None else None
        for branch in e.args.get("ifs") or []:
            when = evaluate(branch.this, row)
            if (when is True) if operand is None else (_compare("=", value, when) is True):
                return evaluate(branch.args["true"], row)
        default = e.args.get("default")
        return None if default is None else evaluate(default, row)
    if isinstance(e, exp.Coalesce):
        for x in [e.this, *e.expressions]:
            v = evaluate(x, row)
            if v is not None:
                return v
        return None
    if isinstance(e, exp.Tuple):
        return tuple(evaluate(x, row) for x in e.expressions)
    if isinstance(e, exp.In) and e.args.get("query") is None:  # a check's answers (obda.execution.checks), a list
        v = evaluate(e.this, row)
        if v is None or (type(v) is tuple and None in v):
            return None
        reads_row, exact, doubles = _in_set(e)
        if reads_row:  # items read the row: SQL's x = a OR x = b OR …
            items = [evaluate(x, row) for x in e.expressions]
            return True if any(_compare("=", v, i) for i in items) else None if None in items else False
        return v in (doubles if isinstance(v, float) else exact)
    if isinstance(e, exp.Extract):
        v = evaluate(e.expression, row)
        return None if v is None else _extract(e.this, v)
    fn = _FUNCTIONS.get(type(e))
    if fn is not None:  # FILTER / BIND functions (obda.mapping.functions), as Spark SQL computes them
        args = [evaluate(e.args[k], row) for k in fn[0] if e.args.get(k) is not None]
        return None if any(a is None for a in args) else fn[1](*args)
    raise ExecutionError(f"the local backend does not compute {e.sql()!r} (written in a mapping's rr:sqlQuery, or "
                         "computed by the query); run it with the Spark backend (--backend spark, the default), "
                         "which computes any Spark SQL")


def _number(text: str):
    """A numeric literal as SQL reads it: an integer, an exact decimal (``2.33``: DECIMAL, as a decimal column's
    values are), or an approximate number (``1e3``: DOUBLE)."""
    try:
        return int(text)
    except ValueError:
        return float(text) if "e" in text.lower() or not _DECIMAL.fullmatch(text) else Decimal(text)


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


def _compare(op: str, a, b):
    """``a op b`` in three-valued logic: unknown (None) where a side is NULL; a decimal with a double is compared
    as doubles (as SQL engines do)."""
    if a is None or b is None:
        return None
    if isinstance(a, Decimal) and isinstance(b, float) or isinstance(a, float) and isinstance(b, Decimal):
        a, b = float(a), float(b)
    return OPS[op](a, b)


def _and(a, b):
    """SQL's AND of three truth values."""
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


_IN_SETS: dict[int, tuple[exp.In, tuple[bool, frozenset, frozenset]]] = {}


def _in_set(e: exp.In) -> tuple[bool, frozenset, frozenset]:
    """Whether an IN list's items read the row (columns: evaluated per row); else its values, and the same with
    decimals as doubles (what a double is compared with). Computed once per node (a check's list may hold many
    answers; the node is kept so its id is not reused)."""
    hit = _IN_SETS.get(id(e))
    if hit is None or hit[0] is not e:
        if len(_IN_SETS) > 256:
            _IN_SETS.clear()
        if any(x.find(exp.Column) for x in e.expressions):
            hit = (e, (True, frozenset(), frozenset()))
        else:
            exact = frozenset(evaluate(x, {}) for x in e.expressions)
            hit = (e, (False, exact, frozenset(float(x) if isinstance(x, Decimal) else x for x in exact)))
        _IN_SETS[id(e)] = hit
    return hit[1]


def _substring(s: str, pos: int, length: int | None = None) -> str:
    """Spark's ``SUBSTRING(s, pos[, len])``: 1-based, 0 read as 1, a negative ``pos`` counts from the end."""
    start = pos - 1 if pos > 0 else (max(len(s) + pos, 0) if pos < 0 else 0)
    return s[start:] if length is None else s[start:start + max(length, 0)]


def _extract(field: exp.Expression, us: int):
    """``EXTRACT(field FROM ts)`` of a µs timestamp (UTC), as Spark gives it (SECOND with its fraction)."""
    t = EPOCH + dt.timedelta(microseconds=to_micros(us))
    name = field.name.upper()
    if name == "SECOND":
        return t.second + t.microsecond / 1_000_000
    return {"YEAR": t.year, "MONTH": t.month, "DAY": t.day, "HOUR": t.hour, "MINUTE": t.minute}[name]


@functools.lru_cache(maxsize=256)
def _replacer(pattern: str, replacement: str):
    """REPLACE of every match of ``pattern`` by ``replacement`` (XPath's syntax, ``obda.model.values.replacement_parts``;
    a group that did not match gives "", as in Java, RE2 and XPath), compiled once per pair."""
    compiled, parts = re.compile(pattern), replacement_parts(replacement) or ()

    def text(m: re.Match) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)
    return lambda s: compiled.sub(text, s)


# sqlglot node -> (argument keys, function of the non-NULL arguments)
_FUNCTIONS = {
    exp.RegexpLike: (("this", "expression"), lambda s, p: re.search(p, s) is not None),
    exp.RegexpReplace: (("this", "expression", "replacement"), lambda s, p, r: _replacer(p, r)(s)),
    exp.StrPosition: (("this", "substr"), lambda s, sub: s.find(sub) + 1),
    exp.Length: (("this",), len),
    exp.Lower: (("this",), str.lower),
    exp.Upper: (("this",), str.upper),
    exp.Substring: (("this", "start", "length"), _substring),
    exp.Abs: (("this",), abs),
    exp.Ceil: (("this",), lambda x: math.ceil(x) if _finite(x) else x),  # NaN and ±INF are their own CEIL (XPath)
    exp.Floor: (("this",), lambda x: math.floor(x) if _finite(x) else x),
}


def _finite(x) -> bool:
    return not isinstance(x, float) or math.isfinite(x)


def pipeline_key(p: Pipeline, row: dict) -> tuple:
    exprs = dict(p.exprs)
    return tuple(evaluate(exprs[a], row) if a in exprs else row.get(a[1]) for a in p.attrs)


def process_rows(
    table: Table, pipelines: list[Pipeline], records, closed_upto: int | None, file: str | None = None,
    keys: "KeyCheck | None" = None,
) -> TableBatch:
    """Validate, classify (late / invalid / a repeated key), filter, project and count the records of one
    table (:func:`obda.execution.reader.read_records`'s).  ``keys``: the declared keys seen so far."""
    b = TableBatch(table.name, files=(file,) if file else ())
    groups: dict[int, dict[int, dict]] = {}
    for rec in records:
        b.rows += 1
        if isinstance(rec, Rejected):  # a record or a whole file the reader refused
            b.invalid += 1
            b.quarantine.append(_quarantined(table, rec.reason, rec.text, file, rec.line))
            continue
        row, why = typed(table, rec.fields)
        if row is None:
            b.invalid += 1
            b.quarantine.append(_quarantined(table, why, row_text(table, rec.fields), file, rec.line))
            continue
        ts = row.get(table.timestamp) if table.timestamp else None
        if ts is not None and closed_upto is not None and ts <= closed_upto:
            b.late += 1
            b.quarantine.append(_quarantined(table, late_reason(ts, closed_upto), row_text(table, rec.fields),
                                             file, rec.line))
            continue
        why = keys.repeats(table, ts, row, rec.fields) if keys is not None else None
        if why is not None:  # a declared key repeated: the first row with it is kept
            b.invalid += 1
            b.key_violations += 1
            b.quarantine.append(_quarantined(table, why, row_text(table, rec.fields), file, rec.line))
            continue
        b.valid += 1
        if ts is not None:
            b.max_ts = ts if b.max_ts is None else max(b.max_ts, ts)
            b.min_ts = ts if b.min_ts is None else min(b.min_ts, ts)
        for p in pipelines:
            if all(evaluate(f, row) is True for f in p.filters):
                slot = groups.setdefault(ts, {}).setdefault(p.id, defaultdict(int))
                slot[pipeline_key(p, row)] += 1
    b.groups = {ts: {pid: dict(d) for pid, d in per.items()} for ts, per in groups.items()}
    return b


def late_reason(ts: int, closed_upto: int) -> str:
    return f"late: timestamp {micros_to_iso(ts)} is at or before the closed timestamp {micros_to_iso(closed_upto)}"


def _quarantined(table: Table, reason: str, text: str, file: str | None, line: int | None) -> dict:
    """A quarantine record (both backends write these fields)."""
    return {"stream": table.name, "reason": reason, "row": text, "file": file, "line": line}


def static_rows(table: Table, pipelines: list[Pipeline], raw_rows, files=None) -> tuple[dict[int, dict], list[dict]]:
    """Counted rows per static pipeline, and quarantined rows (a repeated key among them).  ``files``: instead
    of ``raw_rows``, ``(file, records)`` pairs in file order (the quarantine names the file)."""
    from obda.execution.keys import KeyCheck

    keys = KeyCheck([table])
    parts = [process_rows(table, pipelines, recs, None, f, keys=keys) for f, recs in (files or [(None, raw_rows)])]
    b = merge_batches(table.name, parts)
    out: dict[int, dict] = defaultdict(lambda: defaultdict(int))
    for per in b.groups.values():
        for pid, rows in per.items():
            for k, c in rows.items():
                out[pid][k] += c
    return {pid: dict(d) for pid, d in out.items()}, b.quarantine


def merge_batches(name: str, parts: list[TableBatch]) -> TableBatch:
    if len(parts) == 1 and parts[0].table == name:
        return parts[0]
    b = TableBatch(name)
    for p in parts:
        b.rows += p.rows
        b.valid += p.valid
        b.late += p.late
        b.invalid += p.invalid
        b.key_violations += p.key_violations
        b.quarantine.extend(p.quarantine)
        b.files += p.files
        if p.max_ts is not None:
            b.max_ts = p.max_ts if b.max_ts is None else max(b.max_ts, p.max_ts)
        if p.min_ts is not None:
            b.min_ts = p.min_ts if b.min_ts is None else min(b.min_ts, p.min_ts)
        for ts, per in p.groups.items():
            slot = b.groups.setdefault(ts, {})
            for pid, rows in per.items():
                dst = slot.setdefault(pid, {})
                for k, c in rows.items():
                    dst[k] = dst.get(k, 0) + c
    return b
