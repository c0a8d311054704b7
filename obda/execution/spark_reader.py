"""The reader contract on Spark: CSV and JSON files read as text, typed by SQL, rejects with reasons.

The contract is :mod:`obda.execution.reader`'s (its docstring); this is its Spark implementation,
tested against the local one by one table of cases.  Spark reads every field as a string (CSV
with ``multiLine``, so that a quoted field may span lines; each CSV file by its own header, read
on the driver — files with one header order are read together), and the types are SQL
(``try_cast``, a pattern for timestamps) that :mod:`~obda.execution.reader` mirrors in Python.
A file whose header is refused is not read: :func:`rejected_files` tells it, once per file.
The reason of a rejected row (``__why``) and its text (``__raw``) are SQL too, computed only by
the quarantine's job (:func:`_quarantine_rows`); the driver adds the line (:func:`locate_lines`) for
files of at most :data:`LOCATE_BYTES`.
"""

from __future__ import annotations

import os
import re
import weakref
from collections import defaultdict, deque
from dataclasses import dataclass

from obda.execution.reader import (
    MALFORMED_CSV, MALFORMED_JSON, NOT_A, NOT_UTF8, REPLACEMENT, SHOWN, TS_PATTERN, Record, Rejected, file_header,
    header_names, read_records, row_text,
)
from obda.errors import ExecutionError
from obda.model.sources import ColumnType, Table

CORRUPT = "_corrupt_record"
LOCATE_BYTES = 64 << 20  # files up to this size get their rejected rows' lines in the quarantine


@dataclass(frozen=True)
class _Frame:
    """A read request as a DataFrame plus the SQL text of its per-row classification."""

    df: object  # pyspark DataFrame with the table's columns (typed) and whatever ``bad``/``raw``/``why`` read
    bad: str  # SQL: the row is rejected (malformed, not UTF-8, a value not of its column's type)
    raw: str  # SQL: the row's text for the quarantine, else NULL
    why: str = "'invalid: a value does not fit its column type'"  # SQL: the reason of a rejected row


def _literal(path: str) -> str:
    """``path`` for Spark's readers, which expand glob patterns: ``\\ { } [ ] * ?`` escaped.

    Without this a file named ``x[1].csv`` or ``y*.csv`` fails the read (path not found) or
    reads other files; the executor hands Spark the exact files it listed.
    """
    return _GLOB_CHARS.sub(r"\\\1", path)


_GLOB_CHARS = re.compile(r"([\\{}\[\]*?])")


def _file_column():
    """Each row's file, as Spark reports it (``file:/dir/x.csv``; mapped back by ``spark_io._owner``)."""
    from pyspark.sql import functions as F

    return F.col("_metadata.file_path").alias("__file")


def rejected_files(table: Table, fmt: str, paths) -> list[tuple[str, Rejected]]:
    """The files of a CSV read refused whole (their header), with the reject: not read by Spark."""
    if fmt != "csv":
        return []
    opts = dict(table.options)
    out = []
    for p in paths:
        _, rej = file_header(p, table, opts)
        if rej is not None:
            out.append((p, rej))
    return out


def _groups(table: Table, paths, fmt: str) -> dict[tuple | None, list[str]]:
    """The files to read, by the header they are read with (JSON: one group, ``None``)."""
    if fmt != "csv":
        return {None: list(paths)}
    opts = dict(table.options)
    out: dict[tuple | None, list[str]] = {}
    for p in paths:
        header, rej = file_header(p, table, opts)
        if rej is None and header is not None:  # an empty file has no rows
            out.setdefault(header, []).append(p)
    return out


def _typed(name: str, ctype: ColumnType):
    """The SQL value of raw column ``name`` in its column's type (NULL when it is not one): the contract's rules."""
    from pyspark.sql import functions as F

    if ctype is ColumnType.STRING:
        return F.col(name)
    if ctype is ColumnType.TIMESTAMP:
        return F.when(F.col(name).rlike(TS_PATTERN), F.expr(f"try_cast(`{name}` AS TIMESTAMP)"))
    target = {ColumnType.INTEGER: "BIGINT", ColumnType.DOUBLE: "DOUBLE", ColumnType.DECIMAL: "DECIMAL(38,10)",
              ColumnType.BOOLEAN: "BOOLEAN"}[ctype]
    return F.expr(f"try_cast(`{name}` AS {target})")


def _shown(raw):
    from pyspark.sql import functions as F

    text = F.when(F.length(raw) > SHOWN, F.concat(F.substring(raw, 1, SHOWN), F.lit("…"))).otherwise(raw)
    return F.concat(F.lit('"'), text, F.lit('"'))


def _read_text(spark, table: Table, paths, fmt: str, with_file: bool) -> _Frame:
    """CSV or JSON files under the reader contract: the declared columns typed, ``__bad``, ``__raw``, ``__why``."""
    from pyspark.sql import types as T

    exprs = _expressions(spark, table, fmt, with_file)
    parts = []
    for header, group in _groups(table, paths, fmt).items():
        schema, picked = exprs.group(header)
        r = spark.read.format(fmt).schema(schema).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        if fmt == "csv":  # RFC 4180 quoting (a quote doubled inside a quoted field) unless the options say otherwise
            r = r.option("header", "true").option("multiLine", "true").option("escape", '"')
        for k, v in table.options.items():
            if k != "header":
                r = r.option(k, v)
        parts.append(r.load([_literal(p) for p in group]).select(*picked))
    if parts:
        df = parts[0]
        for other in parts[1:]:
            df = df.unionByName(other)
    else:  # nothing to read (every file empty or refused)
        from obda.execution.spark_io import local_frame

        fields = [T.StructField(n, T.StringType()) for n in exprs.raws + [CORRUPT] + (["__file"] if with_file else [])]
        df = local_frame(spark, [], T.StructType(fields))
    return _Frame(df.select(*exprs.out), "__bad", "__raw", "__why")


class _Expressions:
    """The Column expressions of a table's read under the contract, built once per session, table, format and
    header (each is a round trip to the JVM per call: hundreds per read) and reused by every micro-batch."""

    def __init__(self, table: Table, fmt: str, with_file: bool):
        from pyspark.sql import functions as F

        self.table, self.with_file = table, with_file
        self.raws = [f"__r{j}" for j in range(len(table.columns))]
        self._groups: dict = {}
        raws = self.raws
        corrupt = F.col(CORRUPT)
        typed = [_typed(raws[j], c.type) for j, c in enumerate(table.columns)]
        not_utf8 = [F.coalesce(F.col(raws[j]).contains(REPLACEMENT), F.lit(False)) for j in range(len(raws))]
        failed = [(F.col(raws[j]).isNotNull() & t.isNull()) if c.type is not ColumnType.STRING else F.lit(False)
                  for j, (c, t) in enumerate(zip(table.columns, typed))]
        string_bad = [u for u, c in zip(not_utf8, table.columns) if c.type is ColumnType.STRING]
        bad = corrupt.isNotNull()
        for b in failed + string_bad:  # a non-string field that is not UTF-8 fails its type
            bad = bad | b
        # a malformed record's raw text may hold the bytes that are not UTF-8 as they are (JSON)
        any_not_utf8 = F.coalesce(corrupt.contains(REPLACEMENT) | ~F.expr(f"is_valid_utf8({CORRUPT})"), F.lit(False))
        for u in not_utf8:
            any_not_utf8 = any_not_utf8 | u
        why = F.when(any_not_utf8, F.lit(NOT_UTF8)).when(corrupt.isNotNull(),
                                                         F.lit(MALFORMED_CSV if fmt == "csv" else MALFORMED_JSON))
        for j, (c, f) in enumerate(zip(table.columns, failed)):
            if c.type is not ColumnType.STRING:
                why = why.when(f, F.concat(F.lit(f"invalid: column {c.name!r} ({c.type.value}): "),
                                           _shown(F.col(raws[j])), F.lit(f" {NOT_A[c.type]}")))
        if table.timestamp:
            ts = [t for c, t in zip(table.columns, typed) if c.name == table.timestamp][0]
            why = why.when(ts.isNull(), F.lit(f"invalid: missing timestamp {table.timestamp!r}"))
        text = F.when(corrupt.isNotNull(), corrupt).otherwise(
            F.to_json(F.struct(*[F.col(raws[j]).alias(c.name) for j, c in enumerate(table.columns)])))
        self.out = [*[t.alias(c.name) for c, t in zip(table.columns, typed)], bad.alias("__bad"), text.alias("__raw"),
                    why.alias("__why"), *(["__file"] if with_file else [])]

    def group(self, header: tuple | None):
        """The string schema of files read with ``header`` (None: JSON) and the columns picked from them."""
        got = self._groups.get(header)
        if got is None:
            from pyspark.sql import functions as F
            from pyspark.sql import types as T

            table = self.table
            if header is None:  # JSON: fields by exact name
                physical = [c.name for c in table.columns]
                pick = {c.name: c.name for c in table.columns}
            else:  # CSV: by position, each declared column where its header names it
                physical = [f"__c{i}" for i in range(len(header))]
                names, _ = header_names(table, list(header))
                pick = {n: f"__c{i}" for i, n in enumerate(names) if n is not None}
            schema = T.StructType([T.StructField(n, T.StringType()) for n in physical]
                                  + [T.StructField(CORRUPT, T.StringType())])
            cols = [F.nullif(F.col(f"`{pick[c.name]}`"), F.lit("")).alias(self.raws[j])
                    for j, c in enumerate(table.columns)]
            got = self._groups[header] = (schema, [*cols, F.col(CORRUPT), *([_file_column()] if self.with_file else [])])
        return got


_EXPRESSIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _expressions(spark, table: Table, fmt: str, with_file: bool) -> _Expressions:
    """:class:`_Expressions` of ``table`` read as ``fmt`` in ``spark``'s session (cached with the session)."""
    per = _EXPRESSIONS.setdefault(spark, {})
    key = (repr(table), fmt, with_file)  # (a Table holds a dict: not hashable)
    got = per.get(key)
    if got is None:
        if len(per) >= 256:  # the JVM keeps what a cached Column refers to: the oldest entry goes
            per.pop(next(iter(per)))
        got = per[key] = _Expressions(table, fmt, with_file)
    return got


def locate_lines(records: list[dict], table: Table, fmt: str) -> list[dict]:
    """The quarantine ``records`` of one read with each row's ``line``, found by reading its file under the
    contract on the driver (files of at most :data:`LOCATE_BYTES`; beyond, ``line`` stays None)."""
    by_file: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        r.setdefault("line", None)
        if r.get("file"):
            by_file[r["file"]].append(r)
    for path, recs in by_file.items():
        try:
            if os.path.getsize(path) > LOCATE_BYTES:
                continue
        except OSError:
            continue
        lines: dict[str, deque] = defaultdict(deque)
        for rec in read_records(path, table, fmt, dict(table.options)):
            text = rec.text if isinstance(rec, Rejected) else row_text(table, rec.fields) if isinstance(rec, Record) else None
            lines[text].append(rec.line)
        for r in recs:
            got = lines.get(r["row"])
            if got:
                r["line"] = got.popleft()
    return records


def _quarantine_rows(frame: _Frame, table: Table, closed_upto: int | None, fmt: str | None = None,
                     paths=()) -> list[dict]:
    """The late and invalid rows of a read with their reason, file (as listed in ``paths``) and line
    (:func:`locate_lines`, for CSV and JSON): a job of its own, only for a read that has some."""
    from obda.execution.rows import late_reason
    from obda.execution.spark_io import _owner, _quoted, _valid_sql, listed_names

    valid, tsm = _valid_sql(table, frame)
    late = f" OR __tsus <= {int(closed_upto)}" if closed_upto is not None and table.timestamp else ""
    all_cols = ", ".join(_quoted(c.name) for c in table.columns)
    q = frame.df.selectExpr(
        f"{valid} AS __v", f"{frame.raw} AS __raw", f"to_json(struct({all_cols})) AS __json", f"{frame.why} AS __why",
        "__file" if "__file" in frame.df.columns else "input_file_name() AS __file", f"{tsm} AS __tsus",
    ).where(f"NOT __v{late}")
    owner = listed_names(paths)
    out = []
    for r in q.collect():
        reason = late_reason(r["__tsus"], closed_upto) if r["__v"] else r["__why"]
        file = r["__file"]
        try:
            file = _owner(file, owner) if owner else file
        except ExecutionError:
            pass
        out.append({"stream": table.name, "reason": reason, "row": r["__raw"] or r["__json"], "file": file})
    if fmt in ("csv", "json"):
        locate_lines(out, table, fmt)
    return out


def whole_file_rejects(table: Table, fmt: str, paths) -> list[dict]:
    """Quarantine records of the files of a read refused whole (:func:`rejected_files`)."""
    return [{"stream": table.name, "reason": rej.reason, "row": rej.text, "file": p, "line": rej.line}
            for p, rej in rejected_files(table, fmt, paths)]
