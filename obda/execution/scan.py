"""One read of a micro-batch's files for one or several queries: the projected, cached DataFrame.

A micro-batch's files are read **once** (one DataFrame per table and format, united by
name), whatever number of queries read them: each query (a *reader*, named by a
namespace) adds one flag column per pipeline and one column per kept attribute.  A
small aggregation per file gives every reader its counts and the timestamps its marker
needs (:func:`scan_stats`).  The executor (:class:`~obda.execution.query.ContinuousQuery`)
uses it for one query; the service's shared loop (:class:`~obda.execution.shared.SharedScan`)
for all the queries running over the same streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from obda.analysis.forest import Pipeline
from obda.execution.spark_io import _projection, _read, collect_rows, sql_over
from obda.model.sources import Table


def flag_column(pid: int, ns: str = "") -> str:
    """Column of the projected batch: the row is valid and passes pipeline ``pid``'s local conditions."""
    return f"__f{ns}{pid}"


def key_column(pid: int, j: int, ns: str = "") -> str:
    """Column of the projected batch: pipeline ``pid``'s ``j``-th kept attribute."""
    return f"__p{ns}{pid}_{j}"


@dataclass(frozen=True)
class ScanRead:
    """Files of one table and format read in a micro-batch, and which readers use their rows.

    ``fresh``: first read (counted in the readers' metrics); otherwise a re-read of files
    that still hold rows of open timestamps, used by ``readers`` for those rows only.
    """

    table: Table
    fmt: str
    paths: tuple[str, ...]
    readers: tuple[str, ...]
    fresh: bool


def project_reads(spark, reads: list[ScanRead], pipelines: dict[str, dict[str, tuple[Pipeline, ...]]],
                  cache: dict | None = None, with_file: bool = True, dedupe: bool = True):
    """The projected rows of every read as **one** DataFrame (not collected), or None when nothing is read.

    ``pipelines``: reader namespace → table name → that reader's pipelines over the table.
    Columns: ``__g`` (read index), ``__n`` (fresh), ``__v`` (valid), ``__ts`` (µs), ``__file``
    (as Spark reports it; not with ``with_file=False``), and per reader ``flag_column`` / ``key_column`` of its pipelines
    (NULL in the rows of reads the reader does not use).  Rows of a table with a declared key also carry,
    with ``dedupe``, ``__kt`` (the table), ``__key0…`` (the key's values as text) and each row's place, for the
    caller's :func:`dedupe_keys`; else ``__kh`` (a hash of the table and its typed key): the caller checks that
    no key repeats (:func:`key_repeats`) and redoes the micro-batch with ``dedupe`` where one may.
    """
    from pyspark.sql import functions as F

    union = None
    for i, r in enumerate(reads):
        if not r.paths:
            continue
        frame = _read(spark, r.table, list(r.paths), r.fmt, with_file=with_file or (dedupe and bool(r.table.key)))
        key = (i, r.table.name, r.fmt, r.readers)
        cols = cache.get(key) if cache is not None else None
        if cols is None:
            cols = None
            for ns in r.readers:
                pipes = pipelines[ns].get(r.table.name, ())
                items, kept = _projection(r.table, frame, pipes, i)
                named = dict(_split_alias(x) for x in items)
                if cols is None:
                    cols = [named["__g"].alias("__g"), F.lit(r.fresh).alias("__n"), named["__v"].alias("__v"),
                            named["__ts"].alias("__ts")]
                by_ident = {ident: name for name, ident in kept}
                for p in pipes:
                    cols.append(named[f"__f{p.id}"].alias(flag_column(p.id, ns)))
                    exprs = dict(p.exprs)
                    for j, a in enumerate(p.attrs):
                        name = by_ident[(p.id, a[1]) if a in exprs else (None, a[1])]
                        cols.append(named[name].alias(key_column(p.id, j, ns)))
            if cache is not None:
                cache[key] = cols
        keyed = []
        if r.table.key and dedupe:  # the declared key as text, and each row's place, for dedupe_keys
            keyed = [F.col(_q(k)).cast("string").alias(f"__key{j}") for j, k in enumerate(r.table.key)]
            keyed += [F.col("__file").alias("__kf"), F.monotonically_increasing_id().alias("__kp")]
            keyed.append(F.lit(r.table.name).alias("__kt"))
        elif r.table.key:  # a hash of the table and its typed key, for key_repeats (no value formatted as text)
            keyed = [F.xxhash64(F.lit(r.table.name), *[F.col(_q(k)) for k in r.table.key]).alias("__kh")]
        df = frame.df.select(*cols, *keyed, *(["__file"] if with_file else []))
        union = df if union is None else union.unionByName(df, allowMissingColumns=True)
    if union is None:
        return None
    return _every_pipeline(union, pipelines)


def _every_pipeline(union, pipelines):
    """``union`` with the columns of every reader's pipelines, also of tables no read of this micro-batch
    reads (a join over two streams whose micro-batch brings files of one): no row passes such a flag."""
    from pyspark.sql import functions as F

    from obda.execution.spark_io import spark_type
    from obda.model.sources import ColumnType

    have = set(union.columns)
    extra = []
    for ns, per_table in pipelines.items():
        for pipes in per_table.values():
            for p in pipes:
                if flag_column(p.id, ns) not in have:
                    extra.append(F.lit(False).alias(flag_column(p.id, ns)))
                exprs = dict(p.exprs)
                for j, a in enumerate(p.attrs):
                    name = key_column(p.id, j, ns)
                    if name in have:
                        continue
                    col = None if a in exprs else p.table.column(a[1])
                    if col is None:  # a computed attribute: an untyped NULL takes the type it meets
                        extra.append(F.lit(None).alias(name))
                        continue
                    typ = "bigint" if col.type is ColumnType.TIMESTAMP else spark_type(col.type).simpleString()
                    extra.append(F.lit(None).cast(typ).alias(name))
    return union.select("*", *extra) if extra else union


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def dup_column(ns: str = "") -> str:
    """Column of the projected batch: the row repeats a declared key of an earlier row of its timestamp
    among the rows reader ``ns`` reads (:mod:`obda.execution.keys`)."""
    return f"__d{ns}"


def dedupe_keys(union, reads: list[ScanRead], pipelines):
    """Declared keys checked in the micro-batch's job: per reader, the first row (file, then place in the
    file) of each key value and timestamp keeps its flags; a later one is a duplicate (``dup_column``,
    counted by :func:`scan_stats`, quarantined by :func:`key_violations`) and no pipeline keeps it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    width = max((len(r.table.key) for r in reads if r.paths), default=0)
    if not width:
        return union
    out = []
    for ns in pipelines:
        mine = [i for i, r in enumerate(reads) if ns in r.readers and r.paths and r.table.key]
        if not mine:
            continue
        uses = F.col("__g").isin(mine)
        # an invalid row is in no key's group: it is quarantined as invalid, and the next valid row keeps its key
        w = Window.partitionBy(uses, "__v", "__kt", "__ts", *[f"__key{j}" for j in range(width)]).orderBy("__kf", "__kp")
        dup = F.coalesce(uses & F.col("__v") & (F.row_number().over(w) > 1), F.lit(False))
        out.append((ns, dup))
    names = [c for c in union.columns if c not in ("__kt", "__kf", "__kp") and not c.startswith("__key")]
    union = union.select(*names, *[d.alias(dup_column(ns)) for ns, d in out])
    cols = []
    for c in names:
        ns = _flag_owner(c, pipelines)
        cols.append(F.col(c) & ~F.col(dup_column(ns)) if ns is not None and ns in dict(out) else F.col(c))
    return union.select(*[c.alias(n) for c, n in zip(cols, names)], *[dup_column(ns) for ns, _ in out])


def key_repeats(projected):
    """The groups of valid rows of ``projected`` (read with ``dedupe=False``) that repeat a declared key within
    a timestamp, as a DataFrame (not run) of ``(__ts)``: a narrow aggregation, part of the micro-batch's
    one job.  Every reader's repeats (:func:`dedupe_keys`) are among them; None when no read table has a key.
    The timestamp is not filtered here (a literal in the plan would make Spark compile the job anew for every
    micro-batch): the caller keeps the groups after its readers' closed timestamps."""
    cols = set(projected.columns)
    if "__kh" not in cols:
        return None
    # per timestamp, the set of the hashes of the rows' table and typed key: Spark builds it in each partition
    # before the shuffle, which moves a set per timestamp, not every row, and no key is formatted as text (12M
    # rows, sparse join: 65.6 s with every row's key as text grouped, 47.9 s so, 45.5 s unchecked); a hash
    # collision is a false alarm: the micro-batch is checked again row by row
    return sql_over(projected.sparkSession, [projected], lambda views: (
        f"SELECT __ts FROM `{views[0]}` WHERE __v AND __kh IS NOT NULL "
        f"GROUP BY __ts HAVING size(collect_set(__kh)) < COUNT(*)"))


def key_violations(spark, reads: list[ScanRead], lo: int | None) -> list[dict]:
    """Quarantine records of the rows of fresh ``reads`` (one table's reads of one reader, carried ones
    included) after ``lo`` that repeat a declared key, as :func:`dedupe_keys` decides (its own job)."""
    import json

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from obda.execution.keys import key_reason
    from obda.execution.spark_io import _owner, _read, _valid_sql, listed_names
    from obda.execution.spark_reader import locate_lines

    table = reads[0].table
    union = None
    for r in reads:
        if not r.paths:
            continue
        frame = _read(spark, table, list(r.paths), r.fmt, with_file=True)
        valid, tsm = _valid_sql(table, frame)
        df = frame.df.select(F.expr(valid).alias("__v"), F.expr(tsm).alias("__ts"), F.lit(r.fresh).alias("__n"),
                             *[F.col(_q(k)).cast("string").alias(f"__key{j}") for j, k in enumerate(table.key)],
                             F.col("__file").alias("__kf"), F.monotonically_increasing_id().alias("__kp"),
                             F.expr(frame.raw).alias("__raw"))
        union = df if union is None else union.unionByName(df)
    if union is None:
        return []
    w = Window.partitionBy("__ts", *[f"__key{j}" for j in range(len(table.key))]).orderBy("__kf", "__kp")
    after = F.col("__ts") > F.lit(lo) if lo is not None else F.lit(True)
    dups = union.where("__v").withColumn("__rn", F.row_number().over(w)).where((F.col("__rn") > 1) & F.col("__n") & after)
    owner = listed_names(p for r in reads for p in r.paths)
    out = []
    for row in dups.select("__raw", "__kf").collect():
        fields = json.loads(row["__raw"])
        out.append({"stream": table.name, "reason": key_reason(table, [fields.get(k) for k in table.key]),
                    "row": row["__raw"], "file": _owner(row["__kf"], owner)})
    fmt = reads[0].fmt
    return locate_lines(out, table, fmt) if fmt in ("csv", "json") else out


def _flag_owner(column: str, pipelines) -> str | None:
    """The reader whose pipeline flag ``column`` is (None: not a flag)."""
    for ns, per_table in pipelines.items():
        for pipes in per_table.values():
            if any(column == flag_column(p.id, ns) for p in pipes):
                return ns
    return None


def _split_alias(item: str):
    """``"<sql> AS name"`` → ``(name, Column of <sql>)``."""
    from pyspark.sql import functions as F

    sql, name = item.rsplit(" AS ", 1)
    return name, F.expr(sql)


def scan_stats(projected, readers: dict[str, tuple[int | None, tuple[int, ...]]]) -> list[tuple]:
    """Per (read, file): counts and timestamps for every reader, in **one** small aggregation.

    ``readers``: namespace → (its last closed timestamp ``lo``, its pipeline ids).  Rows:
    ``(g, file, rows, invalid, {ns: (valid, late, max_ts, min_ts, dups, first_ts)})`` — late: valid with a
    timestamp at or before the reader's ``lo``; ``max_ts`` over the valid rows after ``lo``
    (the marker, and whether the file must be read again); ``min_ts`` the earliest of those
    the reader's pipelines keep (the first timestamp the range closes with rows); ``dups``: rows after
    ``lo`` that repeat a declared key (:func:`dedupe_keys`; counted in ``valid`` too); ``first_ts`` the earliest
    timestamp of the valid rows after ``lo``, kept or not (a timestamp of the data).
    """
    return stats_of(collect_rows(stats_frame(projected, readers)), readers)


def stats_frame(projected, readers: dict[str, tuple[int | None, tuple[int, ...]]]):
    """The aggregation of :func:`scan_stats` as a DataFrame (not run): one row per (read, file), for a
    job that computes it with other parts (:func:`~obda.execution.collect.collect_tagged`).  Built
    as one SQL statement over a temporary view (one round trip from Python, one analysis)."""
    aggs = ", ".join(_stats_aggregates(projected, readers))
    return sql_over(projected.sparkSession, [projected],
                    lambda views: f"SELECT __g, __file, {aggs} FROM `{views[0]}` GROUP BY __g, __file")


STATS = 6  # per reader: valid, late, max_ts, min_ts, key duplicates, first_ts


def stats_of(rows, readers: dict) -> list[tuple]:
    """:func:`scan_stats`'s tuples from the rows of :func:`stats_frame`."""
    names = list(readers)
    out = []
    for row in rows:
        g, file, rows_, invalid = row[:4]
        per = {ns: tuple(row[4 + STATS * k: 4 + STATS * (k + 1)]) for k, ns in enumerate(names)}
        out.append((g, file, rows_, invalid, per))
    return out


def _stats_aggregates(projected, readers: dict, only: str | None = None, suffix: str = "") -> list[str]:
    """The aggregates of :func:`scan_stats` as SQL (rows, invalid, then per reader valid, late, max_ts,
    min_ts), over the rows where ``only`` holds (SQL; default all)."""
    row = "true" if only is None else f"({only})"
    aggs = [f"SUM(CASE WHEN {row} THEN 1 ELSE 0 END) AS `rows{suffix}`",
            f"SUM(CASE WHEN {row} AND NOT __v THEN 1 ELSE 0 END) AS `invalid{suffix}`"]
    columns = set(projected.columns)
    for k, ns in enumerate(readers):
        lo, pids = readers[ns]
        valid = f"{row} AND __v AND __ts IS NOT NULL"
        late = f"({valid} AND __ts <= {int(lo)})" if lo is not None else "false"
        after = f"({valid} AND __ts > {int(lo)})" if lo is not None else f"({valid})"
        kept = " OR ".join(f"coalesce(`{flag_column(pid, ns)}`, false)" for pid in pids
                           if flag_column(pid, ns) in columns) or "false"
        dup = f"`{dup_column(ns)}`" if dup_column(ns) in columns else "false"
        aggs += [
            f"SUM(CASE WHEN {row} AND __v AND NOT {late} THEN 1 ELSE 0 END) AS `v{k}{suffix}`",
            f"SUM(CASE WHEN {late} THEN 1 ELSE 0 END) AS `l{k}{suffix}`",
            f"MAX(CASE WHEN {after} THEN __ts END) AS `x{k}{suffix}`",
            f"MIN(CASE WHEN {after} AND ({kept}) THEN __ts END) AS `m{k}{suffix}`",
            f"SUM(CASE WHEN {after} AND {dup} THEN 1 ELSE 0 END) AS `d{k}{suffix}`",
            f"MIN(CASE WHEN {after} THEN __ts END) AS `n{k}{suffix}`",
        ]
    return aggs


def observed_stats(projected, reads: int, readers: dict):
    """``projected`` with its stats observed by the job that consumes it (no job of their own),
    and a function that returns them once that job ran: :func:`scan_stats`'s rows per read
    (``file`` None), for a micro-batch that needs no per-file timestamps (the last one: every
    timestamp closes, no file is read again).  The job must be a write or a ``collect``
    (through Arrow too): Spark reports no observed metrics to ``toLocalIterator``."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    obs = Observation(f"obda_scan_{id(projected)}")
    aggs = []
    for g in range(reads):
        aggs += [F.expr(a) for a in _stats_aggregates(projected, readers, f"__g = {g}", f"_{g}")]
    observed = projected.observe(obs, *aggs)
    names = list(readers)

    def stats() -> list[tuple]:
        try:
            got = obs.get
        except Exception as e:  # noqa: BLE001 — Py4J's error: the consuming job never ran the observed scan
            if "AssertionError" not in str(e):
                raise
            # Spark's optimizer pruned the scan out of that job (a join with a static table that has no matching
            # row is empty, whatever the stream holds), so nothing observed it: the rows are counted by a job of
            # their own, in this micro-batch only
            got = projected.agg(*aggs).first().asDict()
        out = []
        for g in range(reads):
            rows = got.get(f"rows_{g}") or 0
            if not rows:
                continue
            per = {ns: (got.get(f"v{k}_{g}") or 0, got.get(f"l{k}_{g}") or 0, got.get(f"x{k}_{g}"), got.get(f"m{k}_{g}"),
                        got.get(f"d{k}_{g}") or 0, got.get(f"n{k}_{g}"))
                   for k, ns in enumerate(names)}
            out.append((g, None, rows, got.get(f"invalid_{g}") or 0, per))
        return out

    return observed, stats


def partitions(spark, new_bytes: int) -> int:
    """The partitions of a micro-batch with ``new_bytes`` of new files: one per 32 MB, at most the default
    parallelism.  Its rows are coalesced to them (:class:`Scan`), and the answers a sink writes with Spark are
    range-partitioned into as many (:meth:`~obda.execution.answers.AnswerFrame.in_time_order`)."""
    return max(1, min(spark.sparkContext.defaultParallelism, new_bytes // (32 << 20) + 1))


def namespace(index: int) -> str:
    """A reader's namespace in column names (``""`` for a query read alone)."""
    return f"q{index}_"




class Scan:
    """A micro-batch's projected rows, cached on the executors while the batch is processed.

    ``with Scan(spark, reads, pipelines, cache, new_bytes) as scan:`` — ``scan.projected``
    (None when nothing is read) and ``scan.stats(readers)`` (:func:`scan_stats`, one job,
    which also fills the cache).  Partitioned as Spark's file scans pack the files (by size).
    """

    def __init__(self, spark, reads: list[ScanRead], pipelines, cache: dict | None, new_bytes: int,
                 single_pass: bool = False, dedupe: bool = True):
        self.spark, self.reads, self.pipelines, self.cache, self.new_bytes = spark, reads, pipelines, cache, new_bytes
        self.single_pass = single_pass  # one job reads the rows: not cached, no ``__file`` column
        self.dedupe = dedupe  # declared keys checked by a window (else: project_reads's ``dedupe``)
        self.projected = None

    def __enter__(self) -> "Scan":
        df = None
        if self.reads:
            df = project_reads(self.spark, self.reads, self.pipelines, self.cache, with_file=not self.single_pass,
                               dedupe=self.dedupe)
        if df is not None:
            # Spark's file scan already packs each read's files into partitions of balanced size (about the new
            # bytes over the default parallelism, small files together); coalescing the union again would join
            # adjacent partitions, whatever their size: a micro-batch's large files in one task, its small ones
            # in the other (12M-row join benchmark: the scan stage 2x slower)
            if self.dedupe:
                # the keys checked after coalescing: a micro-batch read as one partition checks them with a sort
                # of that partition, where the window over a hash partitioning of the key adds an exchange
                parts = partitions(self.spark, self.new_bytes)
                df = dedupe_keys(df.coalesce(parts), self.reads, self.pipelines).coalesce(parts)
            if not self.single_pass:
                df = df.persist()
        self.projected = df
        return self

    def stats(self, readers: dict[str, tuple[int | None, tuple[int, ...]]]) -> list[tuple]:
        return scan_stats(self.projected, readers) if self.projected is not None else []

    def __exit__(self, *exc) -> None:
        if self.projected is not None and not self.single_pass:
            self.projected.unpersist()
            self.projected = None
