"""Sliding-window average per sensor: obda against Spark Structured Streaming (issue 15, item 5).

The question: per sensor of a turbine, the average reading over the last 10 minutes, at every
closed timestamp. obda runs the SPARQL query ::

    SELECT ?sensor (AVG(?v) AS ?mean) (COUNT(*) AS ?n)
    WHERE { GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }
            ?turbine :hasSensor ?sensor .
            FILTER(?t > NOW() - "PT10M"^^xsd:dayTimeDuration) }
    GROUP BY ?sensor

(pane synopses: one partial per sensor and timestamp in the window). Spark runs what a user
would write: the same CSV files as a ``readStream`` source, joined with the static sensor table,
``withWatermark("ts", "10 minutes")`` and ``groupBy(window(ts, "10 minutes", "<step>"), sensor)``
— a sliding event-time window whose slide is the data's timestamp step, so that the window ending
just after the last timestamp T holds exactly the readings with ``ts > T - 10 min``, obda's
window at ``NOW() = T``.

Both read the same files, ``--batch-files`` per micro-batch, in one process and one Spark session
(local[2]), after an unmeasured warm-up of each side over the first ``--warmup-files`` files (the
side measured first would otherwise pay the JVM's warm-up). **Both write their answers**: obda its
changelog (a JSON line per sensor whose answer changed, at every closed timestamp), Spark its rows in
append mode (a JSON row per sensor and window, written when the watermark passes the window's end —
what a user writes to get each window's answer once). Printed: the parameters, seconds and rows per
second of each side and their ratio, the state over time (obda: its state entries after each
micro-batch; Spark: ``numRowsTotal`` of its state operators), the lines each side wrote, the driver's
peak RSS, and whether the answers are equal: for **every** window Spark wrote (ending at ``T + 1 min``),
obda's answer at ``T`` (its changelog replayed up to ``T``), per sensor, averages to 1e-9. Spark's
append mode writes no window the watermark has not passed: its last ten minutes are not written.

    .venv/bin/python benchmarks/windowed_aggregate.py                      # 2,000,000 readings
    .venv/bin/python benchmarks/windowed_aggregate.py --rows 200000 --files 20
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from streaming_bench import generate, peak_rss_mib, print_sides, scenario_args, spark_session  # noqa: E402

QUERY = """PREFIX : <http://example.org/turbine#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
SELECT ?sensor (AVG(?v) AS ?mean) (COUNT(*) AS ?n)
WHERE {
  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?t > NOW() - "PT%dM"^^xsd:dayTimeDuration)
}
GROUP BY ?sensor
"""
SENSOR_IRI = "http://example.org/turbine/data/sensor/"


def run_obda(spark, project, args, base: Path, out: Path) -> dict:
    """obda over ``base/data``, its changelog into ``out``."""
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink

    comp = project.compile(QUERY % args.window)
    out.unlink(missing_ok=True)
    q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=base, sink=JsonLinesSink(out),
                        spark=spark, max_files_per_batch=args.batch_files)
    t0 = time.perf_counter()
    metrics = q.run_until_exhausted()
    secs = time.perf_counter() - t0
    q.close()
    return {"seconds": secs, "batches": metrics.batches, "rows_in": sum(metrics.rows_in.values()),
            "state_over_time": [e for _, e in metrics.state_history], "changelog_lines": metrics.rows_out}


def run_spark(spark, args, work: Path, data: Path, out: Path) -> dict:
    """The same question as a user writes it in Spark Structured Streaming, writing its answers: append mode
    (each window's row once, when the watermark passes its end) into JSON files, as obda writes its changelog."""
    from pyspark.sql import functions as F

    schema = "sensor_id BIGINT, value BIGINT, ts TIMESTAMP"
    readings = (spark.readStream.schema(schema).option("header", "true")
                .option("maxFilesPerTrigger", args.batch_files).csv(str(data / "measurement")))
    sensor = spark.read.schema("id BIGINT, turbine_id BIGINT, kind STRING").option("header", "true") \
        .csv(str(data / "sensor"))
    windowed = (readings.withWatermark("ts", f"{args.window} minutes")
                .join(sensor, readings.sensor_id == sensor.id)
                .groupBy(F.window("ts", f"{args.window} minutes", "1 minute"), F.col("sensor_id"))
                .agg(F.avg("value").alias("mean"), F.count(F.lit(1)).alias("n")))
    ckpt = out.parent / (out.name + "_ckpt")
    for d in (ckpt, out):
        shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    q = (windowed.select(F.col("window.end").alias("end"), "sensor_id", "mean", "n").writeStream
         .outputMode("append").format("json").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.perf_counter() - t0
    progress = [p for p in q.recentProgress if p.get("numInputRows", 0) > 0]
    state = [sum(o.get("numRowsTotal", 0) for o in (p.get("stateOperators") or [])) for p in progress]
    return {"seconds": secs, "batches": len(progress), "rows_in": sum(p["numInputRows"] for p in progress),
            "state_over_time": state}


def spark_rows(out: Path) -> dict:
    """Spark's written rows: window end -> {sensor IRI: (mean, n)}."""
    import json

    rows: dict = {}
    for f in sorted(out.glob("part-*.json")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            end = r["end"].replace("Z", "").split("+")[0].split(".")[0]
            rows.setdefault(end, {})[SENSOR_IRI + str(r["sensor_id"])] = (r["mean"], r["n"])
    return rows


def compare(changelog: Path, spark_written: dict) -> tuple[int, list[str]]:
    """obda's answer at every closed timestamp T (its changelog replayed up to T) against Spark's row of the window
    ending one step after T, for every window Spark wrote: the number of windows compared and the differences."""
    import datetime as dt
    import json

    by_end = {dt.datetime.fromisoformat(k): v for k, v in spark_written.items()}
    state: dict = {}
    compared, diffs = 0, []
    lines = [json.loads(x) for x in changelog.read_text().splitlines()]
    stamps = sorted({x["emitted_at"] for x in lines})
    i = 0
    for stamp in stamps:
        while i < len(lines) and lines[i]["emitted_at"] == stamp:
            b = lines[i]["binding"]
            if lines[i]["op"] == "delete":
                state.pop(b["sensor"], None)
            else:
                state[b["sensor"]] = (b["mean"], b["n"])
            i += 1
        end = dt.datetime.fromisoformat(stamp.rstrip("Z")) + timedelta(minutes=1)
        if end not in by_end:
            continue
        compared += 1
        theirs = by_end[end]
        for k in sorted(set(state) | set(theirs)):
            a, b = state.get(k), theirs.get(k)
            if a is None or b is None or abs(float(a[0]) - float(b[0])) > 1e-9 or a[1] != b[1]:
                diffs.append(f"window ending {end}: {k}: obda {a} spark {b}")
    return compared, diffs


def warm_data(work: Path, files: int) -> Path:
    """The first ``files`` files of every stream (and the static tables) under ``work/warm``: the unmeasured
    warm-up runs of both sides read them, so that neither side is measured on a cold JVM."""
    warm = work / "warm"
    shutil.rmtree(warm, ignore_errors=True)
    for d in (work / "data").iterdir():
        if d.is_dir():
            (warm / "data" / d.name).mkdir(parents=True)
            for f in sorted(p for p in d.iterdir() if p.is_file())[:files]:
                (warm / "data" / d.name / f.name).symlink_to(f)
    return warm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scenario_args(ap, window=10, window_help="window, minutes")
    ap.add_argument("--warmup-files", type=int, default=4,
                    help="files per stream of the unmeasured warm-up run of each side (0: none)")
    args = ap.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="obda-window-bench-"))
    shutil.rmtree(work / "data", ignore_errors=True)
    project, g, gen_secs = generate(args, work, {})
    rows = {t.name: t.rows for t in g.tables}
    times = g.dataset.time_points
    print(f"parameters: {args.rows:,} readings, {args.per_timestamp} per timestamp, {len(times):,} timestamps 1 min "
          f"apart, {args.sites * args.turbines * args.sensors} sensors, {args.files} files, {args.batch_files} files per "
          f"micro-batch, window {args.window} min, master {args.master}, seed {args.seed} (generated in "
          f"{gen_secs:.1f} s: {rows})")
    spark = spark_session(args.master)
    if args.warmup_files:  # unmeasured: both sides once over the first files, the JVM warm for either
        warm = warm_data(work, args.warmup_files)
        t0 = time.perf_counter()
        run_obda(spark, project, args, warm, warm / "obda_changelog.jsonl")
        run_spark(spark, args, warm, warm / "data", warm / "spark_out")
        print(f"warm-up: both sides over the first {args.warmup_files} files, {time.perf_counter() - t0:.1f} s "
              "(not measured)")
    obda = run_obda(spark, project, args, work, work / "obda_changelog.jsonl")
    spark_side = run_spark(spark, args, work, work / "data", work / "spark_out")
    rss = peak_rss_mib()
    print_sides(obda, spark_side)
    written = spark_rows(work / "spark_out")
    spark_lines = sum(len(v) for v in written.values())
    print(f"output: obda {obda['changelog_lines']:,} changelog lines (a line per sensor whose answer changed, at every "
          f"closed timestamp); spark {spark_lines:,} rows in {len(written):,} windows (append mode: a row per sensor "
          f"and window, when the watermark passes its end); driver peak RSS (this process): {rss:.0f} MiB")
    compared, diffs = compare(work / "obda_changelog.jsonl", written)
    equal = compared > 0 and not diffs
    print(f"answers: obda's answer at each closed timestamp T against spark's window ending at T + 1 min, "
          f"{compared:,} windows compared: {'EQUAL' if equal else f'{len(diffs)} DIFFERENCES'}")
    for d in diffs[:20]:
        print("  " + d)
    spark.stop()
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
