"""Static tables on Spark: parsed once per session (cached while their files do not change), their declared
keys checked, their rows read in one job and grouped on the driver when a query opens.

:func:`spark_table_batch` loads a static table for a query (:meth:`~obda.execution.query.ContinuousQuery.open`):
:func:`collect_batch` projects the table's rows (:func:`~obda.execution.spark_io._projection`) and brings
them grouped with a count, :func:`decode_batch` turns them into a :class:`~obda.execution.rows.TableBatch`
(and collects the rejected rows for the quarantine in a second job, only when there are some).
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from dataclasses import dataclass, field

from obda.analysis.forest import Pipeline
from obda.errors import ExecutionError
from obda.execution.rows import TableBatch
from obda.execution.spark_io import ReadRequest, _projection, _quoted, _read, collect_rows
from obda.execution.spark_reader import _Frame, _quarantine_rows, whole_file_rejects
from obda.model.sources import Table


_STATIC_FRAMES: dict[int, tuple] = {}  # id(session) -> (session, OrderedDict of its parsed static tables)
STATIC_FRAMES_PER_SESSION = 8  # the least recently used is unpersisted beyond this


def _static_frame(spark, table: Table, paths: list[str], fmt: str) -> _Frame:
    """A static table's files parsed once per session: cached, shared by every query that opens.

    Kept per table declaration and file list with each file's size and modification time: a
    changed file is read again (a query opening later sees the files as they are then), and the
    stale cache is dropped first (Spark would otherwise answer the same read from it).  A JDBC
    table is read each time: a database table changes without a file to tell.
    """
    if fmt == "jdbc":
        return _read(spark, table, paths, fmt)
    stats = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as e:  # removed or unreadable since it was listed
            raise ExecutionError(f"static table {table.name!r}: cannot read {path}: {e.strerror}",
                                 table.source_location) from e
        stats.append((st.st_size, st.st_mtime_ns))
    key = (table.name, table.columns, table.timestamp, tuple(sorted(table.options.items())), fmt, tuple(paths))
    owner, frames = _STATIC_FRAMES.get(id(spark), (None, None))
    if owner is not spark:  # a new session (maybe at a stopped one's address)
        owner, frames = _STATIC_FRAMES[id(spark)] = (spark, OrderedDict())
    got = frames.pop(key, None)
    if got is not None and got[0] == stats:
        frames[key] = got  # the most recently used last
        return got[1]
    if got is not None:
        got[1].df.unpersist()
    frame = _checked_keys(_read(spark, table, paths, fmt, with_file=bool(table.key)), table)
    frame = dataclasses.replace(frame, df=frame.df.persist())
    frames[key] = (stats, frame)
    while len(frames) > STATIC_FRAMES_PER_SESSION:
        frames.popitem(last=False)[1][1].df.unpersist()
    return frame


def _checked_keys(frame: _Frame, table: Table) -> _Frame:
    """A static table's rows with its declared key checked (:mod:`obda.execution.keys`): a row repeating
    the key of an earlier one (file, then place in it) is invalid, with the key's reason."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not table.key:
        return frame
    place = F.col("__file") if "__file" in frame.df.columns else F.lit("")  # a JDBC table: its order as read
    w = Window.partitionBy(*[F.col(_quoted(k)) for k in table.key]).orderBy(place, "__pos")
    df = frame.df.withColumn("__pos", F.monotonically_increasing_id())
    df = df.withColumn("__dup", F.coalesce(F.expr(f"NOT {frame.bad}") & (F.row_number().over(w) > 1), F.lit(False)))
    shown = ", ".join(f"coalesce(get_json_object({frame.raw}, '$.{k}'), 'NULL')" for k in table.key)
    reason = (f"concat('invalid: key ({', '.join(table.key)}) = (', concat_ws(', ', {shown}), "
              "') repeats an earlier row of its timestamp; the first is kept')")
    return _Frame(df, f"({frame.bad} OR __dup)", frame.raw, f"(CASE WHEN __dup THEN {reason} ELSE {frame.why} END)")


@dataclass
class _Layout:
    """Where the classification, flags and kept attributes of one request are in a collected row."""

    flags: list[tuple[Pipeline, int]] = field(default_factory=list)
    keys: dict[int, tuple[int, ...]] = field(default_factory=dict)  # pipeline id -> key positions


@dataclass
class CollectedBatch:
    """The aggregated rows of one micro-batch job, not yet classified against the marker."""

    requests: list[ReadRequest]
    rows: list[tuple] = field(default_factory=list)  # (tag, valid, ts, flags..., keys..., [file], count)
    layouts: dict[int, _Layout] = field(default_factory=dict)


def collect_batch(
    spark, requests: list[ReadRequest], cache: dict | None = None
) -> CollectedBatch:
    """Read the requests in **one** Spark job and bring their rows to the driver, grouped with a count.

    Used to load static tables (when a query opens; they are kept on the driver).  The requests'
    DataFrames are projected to a tag, the row's validity, its timestamp, one flag per pipeline
    (its local conditions hold) and the kept attributes, united by name (missing columns are
    NULL) and grouped with a count (see :func:`decode_batch`).

    ``cache``: a dict kept by the caller across micro-batches of one query, holding the parsed
    projection columns per (table, format, tag) — parsing them is a good part of planning a
    small micro-batch.
    """
    out = CollectedBatch(list(requests))
    live = [i for i, r in enumerate(requests) if r.paths or r.fmt == "jdbc"]
    if not live:
        return out
    cols_of: dict[int, list[tuple[str, tuple]]] = {}
    union = None
    for i in live:
        r = requests[i]
        frame = _static_frame(spark, r.table, list(r.paths), r.fmt)
        key = (r.table.name, r.fmt, i)
        parsed = cache.get(key) if cache is not None else None
        if parsed is None:
            from pyspark.sql import functions as F

            items, kept = _projection(r.table, frame, r.pipelines, i)
            parsed = ([F.expr(x) for x in items], kept)
            if cache is not None:
                cache[key] = parsed
        columns, cols_of[i] = parsed
        df = frame.df.select(*columns)
        union = df if union is None else union.unionByName(df, allowMissingColumns=True)
    names = list(union.columns)
    pos = {n: k for k, n in enumerate(names)}
    for i in live:
        lay = _Layout()
        by_ident = {ident: pos[name] for name, ident in cols_of[i]}
        for p in requests[i].pipelines:
            lay.flags.append((p, pos[f"__f{p.id}"]))
            exprs = dict(p.exprs)
            lay.keys[p.id] = tuple(by_ident[(p.id, a[1]) if a in exprs else (None, a[1])] for a in p.attrs)
        out.layouts[i] = lay
    out.rows = collect_rows(union.groupBy(*names).count())
    return out


def decode_batch(spark, collected: CollectedBatch, closed_upto: int | None) -> list[TableBatch]:
    """One :class:`TableBatch` per request: counts, groups per (timestamp, pipeline, key), quarantine.

    A row whose timestamp is at or before ``closed_upto`` is late; lateness is decided here,
    from the grouped timestamps.  A second job, only when some row was late or invalid,
    collects those rows with their file for the quarantine.
    """
    from obda.execution.relations import tuple_getter

    requests = collected.requests
    batches = [TableBatch(r.table.name, files=tuple(r.paths)) for r in requests]
    groups: dict[int, dict[int, dict[int, dict]]] = {i: {} for i in collected.layouts}
    n_req = len(requests)
    rows, valid, late, invalid = [0] * n_req, [0] * n_req, [0] * n_req, [0] * n_req
    max_ts: list[int | None] = [None] * n_req
    min_ts: list[int | None] = [None] * n_req
    # per request: (flag position, pipeline id, key getter) of each pipeline
    keyed = {
        g: [(fpos, p.id, tuple_getter(lay.keys[p.id])) for p, fpos in lay.flags]
        for g, lay in collected.layouts.items()
    }
    for r in collected.rows:
        g, n = r[0], r[-1]
        rows[g] += n
        if not r[1]:
            invalid[g] += n
            continue
        ts = r[2]
        if ts is not None:
            if closed_upto is not None and ts <= closed_upto:
                late[g] += n
                continue
            m = max_ts[g]
            if m is None or ts > m:
                max_ts[g] = ts
            if min_ts[g] is None or ts < min_ts[g]:
                min_ts[g] = ts
        valid[g] += n
        per_ts = None
        for fpos, pid, key in keyed[g]:
            if not r[fpos]:
                continue
            if per_ts is None:
                by_ts = groups[g]
                per_ts = by_ts.get(ts)
                if per_ts is None:
                    per_ts = by_ts[ts] = {}
            slot = per_ts.get(pid)
            if slot is None:
                slot = per_ts[pid] = {}
            k = key(r)
            slot[k] = slot.get(k, 0) + n
    for i, b in enumerate(batches):
        b.rows, b.valid, b.late, b.invalid, b.max_ts = rows[i], valid[i], late[i], invalid[i], max_ts[i]
        b.min_ts = min_ts[i]
    for i in collected.layouts:
        b = batches[i]
        b.groups = groups[i]
        if b.late or b.invalid:
            r = requests[i]
            frame = _checked_keys(_read(spark, r.table, list(r.paths), r.fmt, with_file=bool(r.table.key)), r.table)
            b.quarantine = _quarantine_rows(frame, r.table, closed_upto, r.fmt, r.paths)
    for r, b in zip(requests, batches):  # files refused whole were not read: one invalid row each
        rejects = whole_file_rejects(r.table, r.fmt, r.paths)
        b.rows, b.invalid = b.rows + len(rejects), b.invalid + len(rejects)
        b.quarantine.extend(rejects)
    return batches


def spark_read_batches(spark, requests: list[ReadRequest], closed_upto: int | None) -> list[TableBatch]:
    """Read every request in one Spark job; one aggregated :class:`TableBatch` per request."""
    return decode_batch(spark, collect_batch(spark, requests), closed_upto)


def spark_table_batch(
    spark, table: Table, pipelines: list[Pipeline], paths: list[str], closed_upto: int | None, fmt: str
) -> TableBatch:
    """Read ``paths`` of ``table`` and return its aggregated micro-batch (see :func:`spark_read_batches`)."""
    return spark_read_batches(spark, [ReadRequest(table, tuple(pipelines), tuple(paths), fmt)], closed_upto)[0]
