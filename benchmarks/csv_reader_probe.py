"""Probe: what the executor's micro-batch job would cost with another CSV reader.

Not used by the executor: this measures a design option for its next step.  Spark's CSV
reader tokenizes every line with univocity and converts field by field; a Java Flight
Recorder profile of the executor's job (``jcmd <pid> JFR.start``) puts about 40% of its
executor time in univocity's tokenizer.  A plain filter + count pays less because the
filter pushed into the parser converts only ``value`` for the rows it drops, while the
executor must parse and check every field of every row (malformed rows are quarantined).

The probe runs, over the measurement files of the demo scenario at scale (the same data
as ``benchmarks/executor_vs_spark.py``), in one process and one SparkSession:

1. **spark_csv_group**: the shape of the executor's job — ``spark.read.csv`` (explicit
   schema, PERMISSIVE + ``_corrupt_record``, every field parsed), per row its validity,
   timestamp, filter flag and key, grouped with a count, collected through Arrow;
2. **arrow_source_group**: the same projection and grouping in Spark, but the files read by
   a PySpark Python data source (``pyspark.sql.datasource``) with ``pyarrow.csv`` in the
   executors, one partition per core, yielding Arrow record batches;
3. **text_lines_group**: the same projection and grouping over ``spark.read.text`` lines, each
   checked against a strict grammar (a regular expression: integers without sign or leading
   zero, no quote, backslash or control character), its fields cut at the commas with
   ``substring_index``, the header line found by its text and the timestamp grouped as text,
   converted with ``try_cast`` once per group; checked equal to (1) before it is timed;
4. **plain_scan**: ``spark.read.csv`` filter + count (the executor benchmark's speed limit).

The Arrow source here parses typed columns directly and treats no row as malformed, so it
is an optimistic bound: a real reader must reproduce Spark's PERMISSIVE semantics (wrong
field counts, values of the wrong type, the raw line of a malformed row).

Tried end to end (2026-11-23, not kept): a complete reader of that kind as the executor's
CSV path — lines converted with Arrow only where they match a strict per-type grammar on
which Arrow and Spark agree, every other line parsed by Spark's ``from_csv`` with
PERMISSIVE semantics, the row's file passed as an index.  Its job over the measurement
files alone was no faster than Spark's CSV reader with the executor's full projection
(0.53 vs 0.55 s), and in ``benchmarks/executor_vs_spark.py`` (two runs each, interleaved)
obda took 0.95/0.96 s with it vs 0.91/0.98 s without in one micro-batch, and 1.36/1.47 s vs
1.19/1.27 s in 8 (two Python-source scans per job, one per stream table, each with its
fixed cost).  The 1.3x seen here does not survive the executor's job shape.

Tried end to end (2026-11-24, not kept): (3) as the executor's CSV path, exact by
construction — a job used the lines only when every line was canonical and the lines equal to
a file's first line (read by the driver) occurred exactly once per such file, else it ran
again with Spark's CSV reader; the timestamp text converted after grouping.  Here, best
of three probe runs (5, 3 and 7 repeats), (3) reached 0.77x, 0.56x and 0.72x of the plain
scan and (1) 0.68x, 0.59x and 0.69x in the same runs: at most about 10% ahead, within this
machine's noise.  Inside the executor's job the Spark job
got 10-20% faster (0.60-0.70 vs 0.76 s over the benchmark's 80 files), but building it took
longer (two more projections to analyse, a 40-path text read), and
``benchmarks/executor_vs_spark.py``'s obda time did not move: interleaved in one process,
10 runs each, 0.76 s best / 0.85 s median with it vs 0.75 / 0.84 s without.

    .venv/bin/python benchmarks/csv_reader_probe.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import executor_vs_spark as bench  # noqa: E402
from obda.execution import get_spark  # noqa: E402
from obda.project import Project  # noqa: E402

SCHEMA = "sensor_id LONG, value LONG, ts TIMESTAMP"


def arrow_source():
    """A Python data source reading CSV files with pyarrow (option ``paths``: a JSON list)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def __init__(self, options):
            self.paths = json.loads(options["paths"])
            self.parts = int(options.get("partitions", "2"))

        def partitions(self):
            return [InputPartition(self.paths[i :: self.parts]) for i in range(self.parts)]

        def read(self, partition):
            import pyarrow as pa
            import pyarrow.csv as pacsv

            types = {"sensor_id": pa.int64(), "value": pa.int64(), "ts": pa.timestamp("us")}
            for path in partition.value:
                t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(use_threads=False),
                                   convert_options=pacsv.ConvertOptions(column_types=types))
                t = t.set_column(2, "ts", t["ts"].cast(pa.timestamp("us", tz="UTC")))
                yield from t.to_batches()

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "obda_probe_arrow_csv"

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return Reader(self.options)

    return Source


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timestamps", type=int, default=400)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors' Python workers need pyarrow

    root = Path(args.workdir or tempfile.mkdtemp(prefix="obda-probe-"))
    data_args = argparse.Namespace(
        seed=1, sites=4, turbines_per_site=50, sensors_per_turbine=10, timestamps=args.timestamps,
        readings=(1500, 2500), maintenances=(0, 4), value_max=100, files=args.files,
    )
    project = Project.load(ROOT / "demo")
    rows = bench.generate_data(project, root, data_args)
    paths = sorted(str(p) for p in (root / "data" / "measurement").glob("*.csv"))
    spark = get_spark(args.master, conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})
    spark.dataSource.register(arrow_source())
    cores = spark.sparkContext.defaultParallelism
    group = ["unix_micros(ts) AS t", "coalesce(value > 90, false) AS f", "CASE WHEN value > 90 THEN sensor_id END AS k"]

    def spark_csv_grouped():
        df = (spark.read.option("header", "true").option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", "_corrupt_record").schema(SCHEMA + ", _corrupt_record STRING").csv(paths))
        valid = "_corrupt_record IS NULL AND size(array(sensor_id IS NULL, value IS NULL, ts IS NULL)) >= 0 AS v"
        return df.selectExpr(*group, valid).groupBy("t", "f", "k", "v").count()

    def arrow_source_group():
        df = (spark.read.format("obda_probe_arrow_csv").option("paths", json.dumps(paths))
              .option("partitions", str(cores)).load())
        return df.selectExpr(*group, "ts IS NOT NULL AS v").groupBy("t", "f", "k", "v").count().toArrow().num_rows

    with open(paths[0], "rb") as fh:  # the generator writes one header line per file, the same in all
        header = fh.readline().rstrip(b"\r\n").hex()

    def text_lines_grouped():
        """Spark's text reader, a strict grammar per line (regex), the fields cut at their commas."""
        integer = "(?:0|-?[1-9][0-9]{0,17})?"
        df = spark.read.text(paths).selectExpr(
            "value AS line", f"value = CAST(X'{header}' AS STRING) AS h",
            f"value RLIKE '^{integer},{integer},[^,\"\\\\\\\\\\\\x00-\\\\x1f]*\\\\z' AS ok")
        df = df.selectExpr(
            "CASE WHEN ok AND NOT h THEN try_cast(substring_index(line, ',', 1) AS BIGINT) END AS sensor_id",
            "CASE WHEN ok AND NOT h THEN try_cast(substring_index(substring_index(line, ',', 2), ',', -1) AS BIGINT)"
            " END AS value",
            "CASE WHEN ok AND NOT h THEN nullif(substring_index(line, ',', -1), '') END AS tss",
            "CASE WHEN h THEN 0 WHEN NOT ok THEN -1 END AS x")
        grouped = df.selectExpr("tss", "coalesce(value > 90, false) AS f", "CASE WHEN value > 90 THEN sensor_id END AS k",
                                "tss IS NOT NULL AS v", "x").groupBy("tss", "f", "k", "v", "x").count()
        # the timestamps' texts converted once per group (the CSV reader's first attempt)
        return grouped.selectExpr("unix_micros(try_cast(tss AS TIMESTAMP_LTZ)) AS t", "f", "k", "v", "x", "count")

    def plain_scan():
        return spark.read.option("header", "true").schema(SCHEMA).csv(paths).where("value > 90").count()

    contenders = {"spark_csv_group": lambda: spark_csv_grouped().toArrow().num_rows,
                  "arrow_source_group": arrow_source_group,
                  "text_lines_group": lambda: text_lines_grouped().toArrow().num_rows, "plain_scan": plain_scan}
    groups = {k: fn() for k, fn in contenders.items()}  # warm-up (and Python workers started)
    if groups["spark_csv_group"] != groups["arrow_source_group"]:
        print(f"the two readers give different groups: {groups}", file=sys.stderr)
        return 1
    lines = text_lines_grouped().collect()
    csv_groups = Counter({(r.t, r.f, r.k, r.v): r["count"] for r in spark_csv_grouped().collect()})
    line_groups: Counter = Counter()
    for r in lines:
        if r.x is None:
            line_groups[(r.t, r.f, r.k, r.v)] += r["count"]
    headers = sum(r["count"] for r in lines if r.x == 0)
    if line_groups != csv_groups or headers != len(paths) or any(r.x == -1 for r in lines):
        print("the text-lines job differs from the CSV reader's (or a line is not canonical)", file=sys.stderr)
        return 1
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(args.repeat):
        for k, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    if not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
    print(f"command: benchmarks/csv_reader_probe.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"parameters: {vars(args)} rows: {rows['measurement']} in {len(paths)} files; groups: {groups['spark_csv_group']}")
    print(f"{'':20s} {'best s':>7s} {'median s':>9s}")
    for k, v in times.items():
        print(f"  {k:18s} {min(v):7.3f} {statistics.median(v):9.3f}")
    b = {k: min(v) for k, v in times.items()}
    m = {k: statistics.median(v) for k, v in times.items()}
    for k in ("spark_csv_group", "arrow_source_group", "text_lines_group"):
        print(f"{k} / plain scan: best {b['plain_scan'] / b[k]:.2f}x, median {m['plain_scan'] / m[k]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
