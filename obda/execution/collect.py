"""One Spark job brings a micro-batch's tagged parts to the driver: :func:`collect_tagged`.

The parts (the stats, every synopsis update, the answers that go through the driver, an aggregate's
partials) are DataFrames of different schemas, computed by :mod:`obda.execution.distributed` and
:mod:`obda.execution.scan`; here they are united as ``(tag, __at, values as text)``, ordered where a
consumer needs it, collected through Arrow (or spilled to Parquet part files and merged in order,
for a large micro-batch) and decoded with each column's type.
"""

from __future__ import annotations

from decimal import Decimal

from obda.execution.answers import AT
from obda.execution.spark_io import _quoted as _q
from obda.execution.spark_io import sql_over


def _decoder(dtype):
    """The Python value of a column of ``dtype`` from its Spark string cast (NULL stays None)."""
    from pyspark.sql import types as T

    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return lambda s: None if s is None else int(s)
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return lambda s: None if s is None else float(s)
    if isinstance(dtype, T.DecimalType):
        return lambda s: None if s is None else Decimal(s)
    if isinstance(dtype, T.BooleanType):
        return lambda s: None if s is None else s == "true"
    return lambda s: s


def _column_decoder(dtype):
    """The Python values of a column of ``dtype`` from an Arrow array of its Spark string casts (NULL stays
    None): :func:`_decoder` a column at a time (numbers and booleans parsed by Arrow, the same values)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import types as T

    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return lambda a: pc.cast(a, pa.int64()).to_pylist()
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return lambda a: pc.cast(a, pa.float64()).to_pylist()
    if isinstance(dtype, T.BooleanType):
        return lambda a: pc.cast(a, pa.bool_()).to_pylist()
    if isinstance(dtype, T.DecimalType):
        return lambda a: [None if s is None else Decimal(s) for s in a.to_pylist()]
    return lambda a: a.to_pylist()


def collect_tagged(parts: list, by_time: bool = False, spill_dir: str | None = None, observed: bool = False,
                   ordered: bool = True):
    """Collect several DataFrames of different schemas in **one** Spark job.

    ``parts``: DataFrames, each with value columns and optionally ``__at``.  They are united
    as ``(tag, __at, array of the values as strings)``, sorted by tag, then ``__at`` (``by_time``:
    by ``__at`` first, then by tag, so that a consumer can work one timestamp at a time), then by
    the values' texts (the answers' tie-break, :data:`~obda.execution.answers.TIE_BREAK`: one
    total order, whatever the partitioning), and read back in that order; each value is decoded
    with its column's type.  Yields
    ``(tag, at, values)``.  Why one job: a micro-batch's cost on a small cluster is mostly per
    job (planning, scheduling), not per row.

    How the rows reach the driver:

    * ``spill_dir`` (a folder the executors and the driver both see): the union keeps its
      partitions, each sorted on the executors, and Spark's writer stores them as Parquet part
      files there; the driver then merges the part files in order, one Arrow record batch per
      file at a time (:func:`_merge_spilled`), and deletes them.  Neither the JVM nor Python ever
      holds a whole micro-batch's rows: for answers that go through the driver.
    * not ``ordered`` (no consumer needs an order within a tag: synopsis updates, partial aggregates, key
      sets): the union keeps its partitions, unsorted, collected through Arrow; the rows come grouped by tag,
      in tag order (the stats first), read from memory.  No partition needs one task to sort the whole batch.
    * else the union in one sorted partition, collected through Arrow (:func:`_arrow_rows`: the driver
      holds that partition, as Arrow record batches: for parts bounded by the state, or a small batch).
      Spark reports the job's observed metrics (:func:`obda.execution.scan.observed_stats`) as for a
      ``collect``.  (Through ``toLocalIterator``, each row came as a pickled Row, decoded one value at a
      time: 404,419 rows of partials took 6 s of the driver in ``benchmarks/windowed_aggregate.py``.)
    """
    if not parts:
        return
    spark = parts[0].sparkSession
    frames, types = [], []
    for tag, df in enumerate(parts):
        fields = [f for f in df.schema.fields if f.name != AT]
        types.append([f.dataType for f in fields])
        at = _q(AT) if len(fields) < len(df.schema.fields) else "CAST(NULL AS BIGINT)"
        values = ", ".join(f"CAST({_q(f.name)} AS STRING)" for f in fields)
        frames.append(df.selectExpr(f"{tag} AS __k", f"{at} AS {_q(AT)}",
                                    f"array({values}) AS __v" if fields else "CAST(array() AS ARRAY<STRING>) AS __v"))
    # the union, its partitioning and order in one statement: Spark analyses the micro-batch's whole plan
    # once (each DataFrame operation on it — a union of two, a sort — would analyse all of it again).  An
    # observed part (``observed``) stays a DataFrame: Spark finds its observation in the job's unanalysed plan
    order = (AT, "__k", "__v") if by_time else ("__k", AT, "__v")
    ordered = ordered or spill_dir is not None or by_time
    if observed:
        frame = frames[0]
        for f in frames[1:]:
            frame = frame.union(f)
        if ordered:
            frame = (frame.coalesce(1) if spill_dir is None else frame).sortWithinPartitions(*order)
    else:
        def statement(views):
            union = " UNION ALL ".join(f"SELECT * FROM {_q(v)}" for v in views)
            by = ", ".join(_q(c) for c in order)
            if not ordered:
                return union
            if spill_dir is not None:
                return f"SELECT * FROM ({union}) SORT BY {by}"
            return f"SELECT * FROM (SELECT /*+ COALESCE(1) */ * FROM ({union})) SORT BY {by}"

        frame = sql_over(spark, frames, statement)
    if spill_dir is None:
        yield from _arrow_rows(frame, [tuple(map(_column_decoder, ts)) for ts in types], ordered)
        return
    decoders = [tuple(map(_decoder, ts)) for ts in types]
    for k, at, vals in _spilled(frame, spill_dir, by_time):
        dec = decoders[k]
        yield k, at, tuple(d(v) for d, v in zip(dec, vals))


def _arrow_rows(frame, decoders: list[tuple], ordered: bool):
    """The rows of the united frame as ``(tag, at, values)``: collected by one job through Arrow (Spark sends
    the record batches of its partitions, no pickled Row per row), each run of one tag's rows decoded a column
    at a time (``decoders``: per tag, one :func:`_column_decoder` per value).  ``ordered``: in the frame's
    order (one sorted partition); else the runs in tag order (a stable sort of the runs, in memory)."""
    import pyarrow.compute as pc

    runs = []
    for b in frame._collect_as_arrow():
        n = b.num_rows
        if not n:
            continue
        tags = b.column(0)
        changes = pc.indices_nonzero(pc.not_equal(tags.slice(1), tags.slice(0, n - 1))).to_pylist()
        cuts = [0, *(i + 1 for i in changes), n]
        runs += [(tags[lo].as_py(), b.slice(lo, hi - lo)) for lo, hi in zip(cuts, cuts[1:])]
    if not ordered:
        runs.sort(key=lambda r: r[0])
    for tag, run in runs:
        values = run.column(2)
        cols = [d(pc.list_element(values, c)) for c, d in enumerate(decoders[tag])]
        yield from zip([tag] * run.num_rows, run.column(1).to_pylist(), zip(*cols) if cols else [()] * run.num_rows)


def _spilled(ordered, spill_dir: str, by_time: bool):
    """Write ``ordered`` (each partition sorted) as Parquet under a fresh folder of ``spill_dir``; yield its
    rows merged in order, then delete the folder."""
    import os
    import shutil
    import uuid

    folder = os.path.join(spill_dir, f"spill-{uuid.uuid4().hex}")
    try:
        ordered.write.mode("errorifexists").parquet(folder)
        yield from _merge_spilled(folder, by_time)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _merge_spilled(folder: str, by_time: bool, batch_rows: int = 8192):
    """The rows of the sorted Parquet part files of ``folder`` as ``(tag, at, values)``, merged in order
    (tag, then ``__at`` with NULL first; ``by_time``: ``__at`` first; then the values' texts, NULL first, as
    Spark sorted them: Python compares ``str`` by code point, which is the order of their UTF-8 bytes), one
    record batch per file in memory."""
    import heapq
    import os

    import pyarrow.parquet as pq

    def rows(path: str):
        f = pq.ParquetFile(path)
        try:
            for b in f.iter_batches(batch_size=batch_rows, columns=["__k", AT, "__v"]):
                yield from zip(*(c.to_pylist() for c in b.columns))
        finally:
            f.close()

    def at_key(at):
        return (at is not None, at if at is not None else 0)

    def values_key(vals):
        return [(v is not None, v or "") for v in vals]

    if by_time:
        def key(r):
            return at_key(r[1]), r[0], values_key(r[2])
    else:
        def key(r):
            return r[0], at_key(r[1]), values_key(r[2])
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".parquet"))
    yield from heapq.merge(*(rows(p) for p in files), key=key)
