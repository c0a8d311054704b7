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
(local[2]). Printed: the parameters, seconds and rows per second of each side and their ratio, the
state over time (obda: its state entries after each micro-batch; Spark: ``numRowsTotal`` of its
state operators), the driver's peak RSS, and whether the final answers are equal (obda's answer
at T against Spark's window ending at T + step, per sensor, averages to 1e-9).

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


def run_obda(spark, project, args, work: Path) -> dict:
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink

    comp = project.compile(QUERY % args.window)
    q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=work, sink=JsonLinesSink(work / "obda_changelog.jsonl"),
                        spark=spark, max_files_per_batch=args.batch_files)
    t0 = time.perf_counter()
    metrics = q.run_until_exhausted()
    secs = time.perf_counter() - t0
    answer = {r["sensor"]: (r["mean"], r["n"]) for r in q.answer()}
    closed = metrics.closed_upto
    q.close()
    return {"seconds": secs, "batches": metrics.batches, "rows_in": sum(metrics.rows_in.values()),
            "state_over_time": [e for _, e in metrics.state_history], "changelog_lines": metrics.rows_out,
            "answer": answer, "closed_upto": closed}


def run_spark(spark, args, work: Path, final_end) -> dict:
    """The same question as a user writes it in Spark Structured Streaming."""
    from pyspark.sql import functions as F

    schema = "sensor_id BIGINT, value BIGINT, ts TIMESTAMP"
    readings = (spark.readStream.schema(schema).option("header", "true")
                .option("maxFilesPerTrigger", args.batch_files).csv(str(work / "data" / "measurement")))
    sensor = spark.read.schema("id BIGINT, turbine_id BIGINT, kind STRING").option("header", "true") \
        .csv(str(work / "data" / "sensor"))
    windowed = (readings.withWatermark("ts", f"{args.window} minutes")
                .join(sensor, readings.sensor_id == sensor.id)
                .groupBy(F.window("ts", f"{args.window} minutes", "1 minute"), F.col("sensor_id"))
                .agg(F.avg("value").alias("mean"), F.count(F.lit(1)).alias("n")))
    final: dict = {}

    def keep_final(df, _batch_id):  # update mode: the latest row of each window; keep the final window's
        for r in df.where(F.col("window.end") == F.lit(final_end)).collect():
            final[SENSOR_IRI + str(r["sensor_id"])] = (r["mean"], r["n"])

    ckpt = work / "spark_ckpt"
    shutil.rmtree(ckpt, ignore_errors=True)
    t0 = time.perf_counter()
    q = (windowed.writeStream.outputMode("update").foreachBatch(keep_final)
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.perf_counter() - t0
    progress = [p for p in q.recentProgress if p.get("numInputRows", 0) > 0]
    state = [sum(o.get("numRowsTotal", 0) for o in (p.get("stateOperators") or [])) for p in progress]
    return {"seconds": secs, "batches": len(progress), "rows_in": sum(p["numInputRows"] for p in progress),
            "state_over_time": state, "answer": final}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scenario_args(ap, window=10, window_help="window, minutes")
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
    obda = run_obda(spark, project, args, work)
    from obda.execution.sinks import micros_to_iso
    import datetime as dt

    last = dt.datetime.fromisoformat(micros_to_iso(obda["closed_upto"]).rstrip("Z"))
    spark_side = run_spark(spark, args, work, last + timedelta(minutes=1))
    rss = peak_rss_mib()
    print_sides(obda, spark_side)
    print(f"obda changelog lines: {obda['changelog_lines']:,}; driver peak RSS (this process): {rss:.0f} MiB")
    a, b = obda["answer"], spark_side["answer"]
    equal = a.keys() == b.keys() and all(abs(float(a[k][0]) - float(b[k][0])) < 1e-9 and a[k][1] == b[k][1] for k in a)
    print(f"final answers (window ending {last}): obda {len(a)} sensors, spark {len(b)} sensors, "
          f"{'EQUAL' if equal else 'DIFFERENT'}")
    if not equal:
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                print(f"  {k}: obda {a.get(k)} spark {b.get(k)}")
    spark.stop()
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
