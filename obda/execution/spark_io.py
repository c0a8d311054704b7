"""Spark side of the executor: session, file listing, typed reads, per-row projection.

:func:`_read` reads a table's files with an explicit schema (CSV/JSON under the reader contract,
:mod:`obda.execution.spark_reader`; Parquet cast-checked; JDBC) and tells rejected rows;
:func:`_projection` gives the per-row columns of a read: the tag, the row's validity, its
timestamp, one flag per pipeline (that alias' local conditions) and the kept attributes.
The micro-batch scan (:mod:`obda.execution.scan`) is built from these, static tables by
:mod:`obda.execution.spark_static`.
"""

from __future__ import annotations

import gc
import itertools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from obda.errors import ExecutionError
from obda.analysis.forest import Pipeline
from obda.execution.spark_reader import _file_column, _Frame, _literal, _read_text
from obda.model.sources import ColumnType, Table



def user_spark_defaults(env=None) -> dict[str, str]:
    """The settings of ``$SPARK_CONF_DIR/spark-defaults.conf`` (else ``$SPARK_HOME/conf/``), as Spark reads
    them (``key value``, ``key=value`` or ``key: value`` per line, ``#`` comments).  Spark applies the file
    itself when it starts; :func:`get_spark` only needs its keys, so that obda's defaults leave them alone."""
    env = os.environ if env is None else env
    folder = env.get("SPARK_CONF_DIR") or (os.path.join(env["SPARK_HOME"], "conf") if env.get("SPARK_HOME") else None)
    path = Path(folder) / "spark-defaults.conf" if folder else None
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"([^\s=:]+)\s*[\s=:]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def parse_conf(items) -> dict[str, str]:
    """``key=value`` Spark settings (the CLI's ``--conf``) as a dict; a malformed one is an
    :class:`~obda.errors.ExecutionError` naming it."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark.") or not value.strip():
            raise ExecutionError(f"--conf {item!r}: give a Spark setting as key=value with a key that starts with "
                                 "'spark.', e.g. --conf spark.driver.memory=2g")
        out[key] = value.strip()
    return out


def get_spark(master: str | None = None, app_name: str = "obda", conf: dict | None = None):
    """A SparkSession: ``master`` (default ``local[*]``, or ``$OBDA_SPARK_MASTER``), UTC session time zone.

    Settings, strongest first: ``conf`` (the CLI's ``--conf key=value``), the keys of
    ``$SPARK_CONF_DIR/spark-defaults.conf`` (:func:`user_spark_defaults`: Spark applies them),
    obda's defaults below.  Reuses the active session when no master is given.
    """
    import sys

    from pyspark.sql import SparkSession

    # the executors' Python workers (a Kafka stream's reader) run this interpreter, with obda's dependencies
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        configure_session(active)
        return active
    b = SparkSession.builder.appName(app_name).master(master or os.environ.get("OBDA_SPARK_MASTER", "local[*]"))
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # obda reports its own progress
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.csv.parser.columnPruning.enabled": "false",
        # a micro-batch's projected rows are cached for its one job only (obda.execution.scan.Scan), so
        # compressing them costs more than it saves (12M-row join benchmark: 40.6-43.5 s vs 46.1-49.5 s)
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        # a long-running service runs many micro-batches with large plans: bound what the status
        # store keeps of finished executions, jobs and stages (driver memory)
        "spark.sql.ui.retainedExecutions": "50",
        "spark.ui.retainedJobs": "100",
        "spark.ui.retainedStages": "100",
    }
    if os.environ.get("OBDA_SPARK_JARS"):  # e.g. a JDBC driver for jdbc static tables
        defaults["spark.jars"] = os.environ["OBDA_SPARK_JARS"]
    for k in user_spark_defaults():  # the user's spark-defaults.conf wins over obda's defaults
        defaults.pop(k, None)
    for k, v in {**defaults, **(conf or {})}.items():
        b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # the JVM did not start: a setting it refuses, no Java, too little memory
        raise ExecutionError(f"Spark could not start ({first_line(e)}); check the Spark settings (--conf, "
                             "$SPARK_CONF_DIR/spark-defaults.conf) and that Java 17+ is installed") from None
    spark.sparkContext.setLogLevel("ERROR")
    configure_session(spark)
    return spark


def local_frame(spark, tuples: list[tuple], schema):
    """A DataFrame of the driver's rows as a ``LocalRelation`` in the plan (built through Arrow).

    ``spark.createDataFrame(list)`` makes a Python RDD: every task that reads it starts Python
    workers to unpickle the rows, and a join that re-reads it (a cartesian product) does so per
    partition pair.  A local relation is read in the JVM, and Spark's optimizer sees its rows
    (an empty one prunes its joins).  ``schema``: a ``StructType``.  Values Arrow cannot hold in
    the schema's type (a decimal of more digits) take the Python path.
    """
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema)
    columns = list(zip(*tuples)) if tuples else [()] * len(schema.fields)
    try:
        table = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, arrow)], schema=arrow)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return spark.createDataFrame(tuples, schema)
    return spark.createDataFrame(table, schema)


def sql_over(spark, frames: list, statement):
    """``spark.sql(statement(names))`` over temporary views of ``frames`` (their ``names``, in order).

    One statement is one round trip from Python and one analysis by Spark, where DataFrame
    operations on a large plan cost one of each per operation.  The views are dropped once the
    statement is analysed: the DataFrame keeps its analysed plan.
    """
    names = [f"__obda_view{next(_VIEWS)}" for _ in frames]
    for name, df in zip(names, frames):
        df.createOrReplaceTempView(name)
    try:
        return spark.sql(statement(names))
    finally:
        for name in names:
            drop_view(spark, name)


def drop_view(spark, name: str) -> None:
    """Drop obda's temporary view ``name`` and nothing else.  ``spark.catalog.dropTempView`` also uncaches every
    cached plan with the view's result: a view of a micro-batch's cached rows (the stats over the scan) dropped
    that way uncached them before the job ran, and every part of the job parsed the files again (4 times per
    micro-batch in ``benchmarks/windowed_aggregate.py``).  The session catalog's own drop removes the name only."""
    spark._jsparkSession.sessionState().catalog().dropTempView(name)


_VIEWS = itertools.count()


def release_java_proxies(force: bool = False, every: float = 10.0) -> bool:
    """Collect Python's reference cycles, which hold the JVM's plans: py4j's ``JavaObject`` caches the
    ``JavaMember`` of each method called on it, and each member refers back to its object, so every Java object
    a method was called on (a DataFrame's plan, a Column) stays in py4j's table — and with it its plans,
    alive in the JVM — until Python's *full* collection, which a process allocating little rarely runs
    (measured: the JVM's heap after a full GC grew about 1 MiB per query run in one session, 0.06 MiB with this
    collection).  At most once per ``every`` seconds unless ``force``; returns whether it collected."""
    global _last_collect
    now = time.monotonic()
    if not force and now - _last_collect < every:
        return False
    _last_collect = now
    gc.collect()
    return True


_last_collect = 0.0


def first_line(e: BaseException) -> str:
    """The part of a (Java) error message a user can act on: its first line that says something."""
    for line in str(e).splitlines():
        line = line.strip().lstrip(": ").strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "An error occurred while calling")):
            return line[:400]
    return type(e).__name__


def configure_session(spark) -> None:
    """The executor's settings on a session: obda's own and any a caller hands the executor."""
    # Malformed values in unused columns must still make the row invalid.  With Spark 4.3 this
    # alone does not do it (a bad value in a column the plan does not read left the row valid),
    # so _read also makes the plan read every column of the table.
    spark.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")
    # The executor lists its files itself and hands Spark explicit paths.  Above this many paths
    # (default 32) Spark checks and lists them with a distributed job of its own: about half a
    # second per read, more than scanning a 40-file micro-batch (benchmarks/executor_vs_spark.py).
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
    # A micro-batch's plan is planned whole: adaptive execution would run each of its query stages as a
    # job of its own (tests/execution/test_exec_jobs.py counts them) and re-plan between them, which costs
    # more than it saves on a micro-batch (about 10%, benchmarks/executor_vs_spark.py).
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    # A broadcast join is a Spark job of its own (the broadcast is collected first); a micro-batch is
    # one job, its joins shuffle (docs/cluster.md).
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")


def spark_type(t: ColumnType):
    from pyspark.sql import types as T

    return {
        ColumnType.INTEGER: T.LongType(),
        ColumnType.DECIMAL: T.DecimalType(38, 10),
        ColumnType.DOUBLE: T.DoubleType(),
        ColumnType.STRING: T.StringType(),
        ColumnType.BOOLEAN: T.BooleanType(),
        ColumnType.TIMESTAMP: T.TimestampType(),
    }[t]


def table_format(table: Table, path: str | None = None) -> str:
    if table.format:
        return table.format
    p = (path or table.location or "").lower()
    for ext, fmt in ((".csv", "csv"), (".json", "json"), (".jsonl", "json"), (".parquet", "parquet")):
        if p.endswith(ext):
            return fmt
    return "csv"


def resolve_location(table: Table, base_dir: str | os.PathLike) -> Path:
    if not table.location:
        raise ExecutionError(
            f"table {table.name!r} has no 'location' in the sources file; the executor needs its files",
            table.source_location,
        )
    p = Path(table.location)
    return p if p.is_absolute() else Path(base_dir) / p


def list_files(location: Path) -> list[str]:
    """Data files under ``location`` (a file or a directory, recursively), in name order.

    Hidden and bookkeeping files (``.x``, ``_x``, ``*.crc``, ``*.tmp``) are skipped, so a
    writer can create a file under a temporary name and rename it when complete.
    """
    if location.is_file():
        return [str(location)]
    if not location.is_dir():
        return []
    out = []

    def refuse(e: OSError):  # an unreadable folder would otherwise read as empty, without a record
        raise ExecutionError(f"cannot list {e.filename}: {e.strerror}; the query cannot see its files")

    for root, dirs, files in os.walk(location, onerror=refuse):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in files:
            if f.startswith((".", "_")) or f.endswith((".crc", ".tmp")):
                continue
            out.append(os.path.join(root, f))
    return sorted(out)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class ReadRequest:
    """Files of one table and format to read in a micro-batch, with the pipelines over that table."""

    table: Table
    pipelines: tuple[Pipeline, ...]
    paths: tuple[str, ...]
    fmt: str


def _read(spark, table: Table, paths: list[str], fmt: str, with_file: bool = False) -> _Frame:
    """The files as a DataFrame with an explicit schema, and how to tell malformed rows.

    ``with_file``: the DataFrame also has each row's file as ``__file`` (:func:`_file_column`).
    CSV and JSON follow the reader contract (:mod:`obda.execution.reader`, :func:`_read_text`).
    """
    from pyspark.sql import functions as F

    opts = dict(table.options)
    if fmt in ("csv", "json"):
        return _read_text(spark, table, paths, fmt, with_file)
    if fmt == "kafka":  # offset ranges of a topic (obda.execution.kafka_reader), read on the executors
        from obda.execution.kafka_reader import read_frame

        return read_frame(spark, table, paths, with_file)
    if fmt == "parquet":
        raw = spark.read.options(**opts).parquet(*[_literal(p) for p in paths])
        present = {n.lower(): n for n in raw.columns}
        bad = F.lit(False)
        cols = []
        for c in table.columns:
            src = present.get(c.name.lower())
            if src is None:
                cols.append(F.lit(None).cast(spark_type(c.type)).alias(c.name))
                continue
            casted = F.col(_quoted(src)).cast(spark_type(c.type))
            bad = bad | (F.col(_quoted(src)).isNotNull() & casted.isNull())
            cols.append(casted.alias(c.name))
        rawjson = F.to_json(F.struct(*[F.col(_quoted(n)) for n in raw.columns]))
        extra = [_file_column()] if with_file else []
        return _Frame(
            raw.select(*cols, bad.alias("__bad"), F.when(bad, rawjson).alias("__raw"), *extra), "__bad", "__raw"
        )
    if fmt == "jdbc":
        r = spark.read.format("jdbc")
        opts.setdefault("dbtable", table.name)
        if table.location and "url" not in opts:
            opts["url"] = table.location
        df = r.options(**opts).load()
        df = df.select(*[F.col(_quoted(c.name)).cast(spark_type(c.type)).alias(c.name) for c in table.columns])
        return _Frame(df, "false", "CAST(NULL AS STRING)")
    raise ExecutionError(f"table {table.name!r}: format {fmt!r} is not readable by the executor", table.source_location)


def _valid_sql(table: Table, frame: _Frame) -> tuple[str, str]:
    """SQL of (row is valid, its timestamp in µs since the epoch)."""
    q = _quoted
    if table.timestamp:
        return f"(NOT {frame.bad} AND {q(table.timestamp)} IS NOT NULL)", f"unix_micros({q(table.timestamp)})"
    return f"(NOT {frame.bad})", "CAST(NULL AS BIGINT)"


def _projection(table: Table, frame: _Frame, pipelines, tag: int) -> tuple[list[str], list[tuple[str, tuple]]]:
    """Per-row SQL columns of a request: tag, validity, timestamp, one flag per pipeline, kept attributes.

    Returns the select items and, per kept attribute, ``(output column, (pipeline id or None, name))``
    (plain columns are shared by the table's pipelines, computed expressions are per pipeline).
    Kept attributes are NULL unless some pipeline keeps the row, so that rows no pipeline needs
    collapse into one group per timestamp.
    """
    valid, tsm = _valid_sql(table, frame)
    items = [f"{tag} AS __g", f"{valid} AS __v", f"CASE WHEN {valid} THEN {tsm} END AS __ts"]
    conds = {p.id: " AND ".join(f"({f.sql(dialect='spark')})" for f in p.filters) or "true" for p in pipelines}
    for p in pipelines:
        items.append(f"coalesce({valid} AND {conds[p.id]}, false) AS __f{p.id}")
    any_cond = " OR ".join(f"({conds[p.id]})" for p in pipelines) or "false"
    cols: list[tuple[str, tuple]] = []
    kept: dict[tuple, str] = {}
    for p in pipelines:
        exprs = dict(p.exprs)
        for a in p.attrs:
            ident = (p.id, a[1]) if a in exprs else (None, a[1])
            if ident in kept:
                continue
            name = f"__k{tag}_{len(kept)}"
            kept[ident] = name
            if a in exprs:
                e = exprs[a]
                c = e.sql(dialect="spark")
                col = table.column(e.name) if isinstance(e, exp.Column) else None
                if col is not None and col.type is ColumnType.TIMESTAMP:  # a view column over a timestamp
                    c = f"unix_micros({c})"
            else:
                col = table.column(a[1])
                c = _quoted(a[1])
                if col is not None and col.type is ColumnType.TIMESTAMP:
                    c = f"unix_micros({c})"
            items.append(f"CASE WHEN {valid} AND ({any_cond}) THEN {c} END AS {name}")
            cols.append((name, ident))
    return items, cols


def collect_rows(df) -> list[tuple]:
    """The rows of a (small, aggregated) DataFrame as plain tuples, through Arrow.

    ``DataFrame.toArrow`` ships column batches instead of pickled ``Row`` objects:
    about twice as fast for the tens of thousands of groups a busy micro-batch
    brings.  Timestamps come back as naive UTC datetimes (the session time zone
    is UTC), as ``collect`` gives them.
    """
    import pyarrow as pa

    table = df.toArrow()
    cols = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us"))
        cols.append(col.to_pylist())
    if not cols:
        return [()] * table.num_rows
    return list(zip(*cols))


def listed_names(paths) -> dict[str, str]:
    """Each listed file under the names Spark may report it by (absolute, real path) → the listed name;
    :func:`_owner` maps Spark's reports back with it."""
    out: dict[str, str] = {}
    for p in paths:
        out[p] = out[os.path.abspath(p)] = out[os.path.realpath(p)] = p  # (p itself: a Kafka segment's name)
    return out


def _owner(reported: str, owner: dict[str, int]) -> int:
    """The micro-batch of a file as Spark reports it (``file:/dir/x.csv``, maybe URL-encoded)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(reported)
    path = parts.path if parts.scheme == "file" else reported
    for candidate in (path, unquote(path), os.path.realpath(unquote(path))):
        if candidate in owner:
            return owner[candidate]
    raise ExecutionError(f"Spark read a file that no micro-batch of the job lists: {reported}")
