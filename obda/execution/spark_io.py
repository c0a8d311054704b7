"""Spark side of the executor: session, file listing, per-batch DataFrame pipelines.

Per micro-batch and stream table, **one Spark job** reads the new files
(explicit schema; CSV/JSON in PERMISSIVE mode with a ``_corrupt_record``
column; Parquet cast-checked), classifies every row as ``ok`` / ``late`` /
``invalid``, evaluates the local conditions of every pipeline on that table as
boolean columns, projects the kept attributes and groups by
``(status, timestamp, flags, attributes)`` with a count.  Only these aggregated
rows — per timestamp and synopsis key — are collected to the driver.  A second
job, only when the first one counted late or invalid rows, collects those rows
with their file for the quarantine.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from obda.errors import ExecutionError
from obda.execution.plan import Pipeline
from obda.execution.rows import micros_to_iso
from obda.execution.runtime import TableBatch
from obda.model.sources import ColumnType, Table

CORRUPT = "_corrupt_record"


def get_spark(master: str | None = None, app_name: str = "obda", conf: dict | None = None):
    """A SparkSession: ``master`` (default ``local[*]``, or ``$OBDA_SPARK_MASTER``), UTC session time zone.

    Reuses the active session when no master is given.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        _session_defaults(active)
        return active
    b = SparkSession.builder.appName(app_name).master(master or os.environ.get("OBDA_SPARK_MASTER", "local[*]"))
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.csv.parser.columnPruning.enabled": "false",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    }
    for k, v in {**defaults, **(conf or {})}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _session_defaults(spark)
    return spark


def _session_defaults(spark) -> None:
    # malformed values in unused columns must still make the row invalid
    spark.conf.set("spark.sql.csv.parser.columnPruning.enabled", "false")


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
    for root, dirs, files in os.walk(location):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for f in files:
            if f.startswith((".", "_")) or f.endswith((".crc", ".tmp")):
                continue
            out.append(os.path.join(root, f))
    return sorted(out)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _read(spark, table: Table, paths: list[str], fmt: str):
    """DataFrame of the files plus a boolean column ``__bad`` for malformed rows and ``__raw`` text."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [T.StructField(c.name, spark_type(c.type)) for c in table.columns]
    opts = dict(table.options)
    if fmt in ("csv", "json"):
        schema = T.StructType(fields + [T.StructField(CORRUPT, T.StringType())])
        r = spark.read.format(fmt).schema(schema).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        if fmt == "csv":
            r = r.option("header", opts.pop("header", "true"))
        for k, v in opts.items():
            r = r.option(k, v)
        df = r.load(paths)
        # The reader only parses (and so only validates) the columns a query needs; this never-true
        # term makes every declared column needed, so a bad value in any column marks the row.
        nulls = ", ".join(f"{_quoted(c.name)} IS NULL" for c in table.columns)
        return df.selectExpr("*", f"({CORRUPT} IS NOT NULL OR size(array({nulls})) < 0) AS __bad", f"{CORRUPT} AS __raw")
    if fmt == "parquet":
        raw = spark.read.options(**opts).parquet(*paths)
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
        return raw.select(*cols, bad.alias("__bad"), F.when(bad, rawjson).alias("__raw"))
    if fmt == "jdbc":
        r = spark.read.format("jdbc")
        opts.setdefault("dbtable", table.name)
        if table.location and "url" not in opts:
            opts["url"] = table.location
        df = r.options(**opts).load()
        df = df.select(*[F.col(_quoted(c.name)).cast(spark_type(c.type)).alias(c.name) for c in table.columns])
        return df.withColumn("__bad", F.lit(False)).withColumn("__raw", F.lit(None).cast("string"))
    raise ExecutionError(f"table {table.name!r}: format {fmt!r} is not readable by the executor", table.source_location)


def spark_table_batch(
    spark, table: Table, pipelines: list[Pipeline], paths: list[str], closed_upto: int | None, fmt: str
) -> TableBatch:
    """Read ``paths`` of ``table`` and return its aggregated micro-batch (see module docstring)."""
    from pyspark.sql import functions as F

    b = TableBatch(table.name, files=tuple(paths))
    if not paths and fmt != "jdbc":
        return b
    df = _read(spark, table, paths, fmt)
    # Built as SQL text: a few Py4J calls per batch instead of hundreds of Column objects.
    q = _quoted
    tsm = f"unix_micros({q(table.timestamp)})" if table.timestamp else "CAST(NULL AS BIGINT)"
    missing = f"{q(table.timestamp)} IS NULL" if table.timestamp else "false"
    late = f" WHEN {tsm} <= {int(closed_upto)} THEN 'late'" if closed_upto is not None else ""
    status = f"CASE WHEN __bad OR {missing} THEN 'invalid'{late} ELSE 'ok' END"
    flags: list[tuple[Pipeline, str]] = [(p, f"__f{p.id}") for p in pipelines]
    conds = {p.id: " AND ".join(f"({f.sql(dialect='spark')})" for f in p.filters) or "true" for p in pipelines}
    kept: dict[tuple, str] = {}  # (pipeline id or None, attr name) -> output column
    cols: list[tuple[str, str]] = []
    for p in pipelines:
        exprs = dict(p.exprs)
        for a in p.attrs:
            if a in exprs:
                name = f"__e{p.id}_{a[1][2:]}"
                kept[(p.id, a[1])] = name
                cols.append((name, exprs[a].sql(dialect="spark")))
            elif (None, a[1]) not in kept:
                name = f"__c{len(kept)}"
                kept[(None, a[1])] = name
                col = table.column(a[1])
                c = q(a[1])
                if col is not None and col.type is ColumnType.TIMESTAMP:
                    c = f"unix_micros({c})"
                cols.append((name, c))
    all_cols = ", ".join(q(c.name) for c in table.columns)
    stage1 = df.selectExpr(
        f"{status} AS __st",
        f"{tsm} AS __tsus",
        *[f"({conds[p.id]}) AS __cond{p.id}" for p, _ in flags],
        *[f"{c} AS {n}" for n, c in cols],
        "__raw",
        f"to_json(struct({all_cols})) AS __json",
    )
    any_flag = " OR ".join(name for _, name in flags) or "false"
    base = stage1.selectExpr(
        "__st",
        "CASE WHEN __st = 'ok' THEN __tsus END AS __ts",
        *[f"coalesce(__st = 'ok' AND __cond{p.id}, false) AS {name}" for p, name in flags],
        *[n for n, _ in cols],
        "__raw",
        "CASE WHEN __st <> 'ok' THEN __json END AS __json",
        "__tsus AS __tsus",
    )
    agg_cols = ["__st", "__ts"] + [name for _, name in flags] + [
        f"CASE WHEN __st = 'ok' AND ({any_flag}) THEN {n} END AS {n}" for n, _ in cols
    ]
    rows = base.selectExpr(*agg_cols).groupBy(*[c.rsplit(' AS ', 1)[-1] for c in agg_cols]).count().collect()
    groups: dict[int, dict[int, dict]] = {}
    for r in rows:
        st, n = r["__st"], r["count"]
        b.rows += n
        if st == "invalid":
            b.invalid += n
            continue
        if st == "late":
            b.late += n
            continue
        b.valid += n
        t = r["__ts"]
        if t is not None:
            b.max_ts = t if b.max_ts is None else max(b.max_ts, t)
        for p, _ in flags:
            if not r[f"__f{p.id}"]:
                continue
            exprs = dict(p.exprs)
            key = tuple(
                (r[kept[(p.id, a[1])]] if a in exprs else r[kept[(None, a[1])]]) for a in p.attrs
            )
            slot = groups.setdefault(t, {}).setdefault(p.id, defaultdict(int))
            slot[key] += n
    b.groups = {t: {pid: dict(d) for pid, d in per.items()} for t, per in groups.items()}
    if b.late or b.invalid:
        b.quarantine = _quarantine_rows(base, table, closed_upto)
    return b


def _quarantine_rows(base, table: Table, closed_upto: int | None) -> list[dict]:
    q = base.where("__st <> 'ok'").selectExpr("__st", "__raw", "__json", "input_file_name() AS __file", "__tsus")
    out = []
    for r in q.collect():
        if r["__st"] == "late":
            reason = (
                f"late: timestamp {micros_to_iso(r['__tsus'])} is at or before the closed timestamp {micros_to_iso(closed_upto)}"
            )
        elif r["__raw"] is not None:
            reason = "invalid: malformed record (unparseable, wrong number of fields or a value of the wrong type)"
        else:
            reason = f"invalid: missing timestamp {table.timestamp!r}"
        out.append({"stream": table.name, "reason": reason, "row": r["__raw"] or r["__json"], "file": r["__file"]})
    return out


def const_micros_spark(spark):
    """Evaluate a constant timestamp expression in Spark (session time zone) to µs since the epoch."""
    cache: dict[str, int | None] = {}

    def f(e) -> int | None:
        sql = e.sql(dialect="spark")
        if sql not in cache:
            try:
                cache[sql] = spark.sql(f"SELECT unix_micros(CAST({sql} AS TIMESTAMP)) AS v").first()["v"]
            except Exception:  # not a timestamp constant: no cutoff (cutoffs are an optimisation only)
                cache[sql] = None
        return cache[sql]

    return f
