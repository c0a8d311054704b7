"""Interval join: obda against Spark Structured Streaming's stream-stream join with watermarks (issue 15).

The question: readings above 90 of a turbine's sensors in the five minutes after a maintenance of that
turbine. obda runs the SPARQL query ::

    SELECT ?turbine ?v WHERE {
      GRAPH ?t1 { ?e :onTurbine ?turbine . }
      GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }
      ?turbine :hasSensor ?sensor .
      FILTER(?t1 < ?t2 && ?t2 <= ?t1 + "PT5M"^^xsd:dayTimeDuration && ?v > 90) }

(a windowed member: the maintenance synopsis keeps, per turbine, the events of the last five minutes;
docs/analysis.md, "Interval joins"). Spark runs what a user would write: both CSV folders as
``readStream`` sources, the readings joined with the static sensor table, both sides
``withWatermark("ts", "5 minutes")``, and the stream-stream join with the time-range condition
``m.ts > e.ts AND m.ts <= e.ts + INTERVAL 5 MINUTES`` (Spark's documented way to bound join state).

Both read the same files, ``--batch-files`` per stream and micro-batch, in one process and one Spark
session (local[2]), and write their answers as JSON lines. Printed: the parameters, seconds and input rows
per second of each side and their ratio, the state over time (obda: synopsis entries after each
micro-batch; Spark: ``numRowsTotal`` of its state operators), the driver's peak RSS, and whether the
answers are equal (count and an order-independent hash of the (turbine, value) multiset).

    .venv/bin/python benchmarks/interval_join.py                       # 2,000,000 readings
    .venv/bin/python benchmarks/interval_join.py --rows 200000 --files 20
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from streaming_bench import generate, peak_rss_mib, print_sides, scenario_args, spark_session  # noqa: E402

QUERY = """PREFIX : <http://example.org/turbine#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
SELECT ?turbine ?v WHERE {
  GRAPH ?t1 { ?e :onTurbine ?turbine . }
  GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?t1 < ?t2 && ?t2 <= ?t1 + "PT%dM"^^xsd:dayTimeDuration && ?v > 90)
}
"""
TURBINE_IRI = "http://example.org/turbine/data/turbine/"


def digest(pairs) -> tuple[int, str]:
    """Count and an order-independent hash of a multiset of (turbine, value) answers."""
    counts = Counter(pairs)
    h = hashlib.sha256()
    for k in sorted(counts):
        h.update(f"{k[0]}|{k[1]}|{counts[k]}\n".encode())
    return sum(counts.values()), h.hexdigest()[:16]


def run_obda(spark, project, args, work: Path) -> dict:
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, JsonLinesSink

    comp = project.compile(QUERY % args.window)
    out = work / "obda_answers.jsonl"
    q = ContinuousQuery(plan_execution(comp, project.sources), base_dir=work, sink=JsonLinesSink(out), spark=spark,
                        max_files_per_batch=args.batch_files)
    t0 = time.perf_counter()
    metrics = q.run_until_exhausted()
    secs = time.perf_counter() - t0
    q.close()
    with open(out) as f:
        answers = digest((b["turbine"], int(b["v"])) for b in (json.loads(line)["binding"] for line in f))
    return {"seconds": secs, "batches": metrics.batches, "rows_in": sum(metrics.rows_in.values()),
            "state_over_time": [e for _, e in metrics.state_history], "answers": answers,
            "synopsis_entries": metrics.synopsis_entries}


def run_spark(spark, args, work: Path) -> dict:
    """The same question as a user writes it in Spark Structured Streaming."""
    from pyspark.sql import functions as F

    def stream(name: str, schema: str):
        return (spark.readStream.schema(schema).option("header", "true")
                .option("maxFilesPerTrigger", args.batch_files).csv(str(work / "data" / name)))

    readings = stream("measurement", "sensor_id BIGINT, value BIGINT, ts TIMESTAMP")
    maint = stream("maintenance", "turbine_id BIGINT, kind STRING, ts TIMESTAMP")
    sensor = spark.read.schema("id BIGINT, turbine_id BIGINT, kind STRING").option("header", "true") \
        .csv(str(work / "data" / "sensor"))
    delay = f"{args.window} minutes"
    hot = (readings.where(F.col("value") > 90).join(sensor, readings.sensor_id == sensor.id)
           .select(F.col("turbine_id").alias("m_turbine"), "value", F.col("ts").alias("m_ts"))
           .withWatermark("m_ts", delay))
    events = maint.select(F.col("turbine_id").alias("e_turbine"), F.col("ts").alias("e_ts")).withWatermark("e_ts", delay)
    joined = hot.join(events, F.expr(f"m_turbine = e_turbine AND m_ts > e_ts AND m_ts <= e_ts + INTERVAL {delay}"))
    out = work / "spark_answers"
    ckpt = work / "spark_ckpt"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(ckpt, ignore_errors=True)
    t0 = time.perf_counter()
    q = (joined.select(F.concat(F.lit(TURBINE_IRI), F.col("m_turbine").cast("string")).alias("turbine"),
                       F.col("value").alias("v"))
         .writeStream.format("json").option("path", str(out)).option("checkpointLocation", str(ckpt))
         .outputMode("append").trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.perf_counter() - t0
    progress = [p for p in q.recentProgress if p.get("numInputRows", 0) > 0]
    state = [sum(o.get("numRowsTotal", 0) for o in (p.get("stateOperators") or [])) for p in progress]
    rows = spark.read.json(str(out)).select("turbine", "v").collect() if any(out.glob("*.json")) else []
    return {"seconds": secs, "batches": len(progress), "rows_in": sum(p["numInputRows"] for p in progress),
            "state_over_time": state, "answers": digest((r["turbine"], int(r["v"])) for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scenario_args(ap, window=5, window_help="the interval, minutes")
    ap.add_argument("--maintenance", type=int, default=2, help="maintenance events per timestamp")
    args = ap.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="obda-interval-bench-"))
    shutil.rmtree(work / "data", ignore_errors=True)
    project, g, gen_secs = generate(args, work, {"maintenance": (args.maintenance, args.maintenance)})
    rows = {t.name: t.rows for t in g.tables}
    print(f"parameters: {args.rows:,} rows, {args.per_timestamp} readings and {args.maintenance} maintenance "
          f"events per timestamp, {len(g.dataset.time_points):,} timestamps 1 min apart, "
          f"{args.sites * args.turbines} turbines, {args.sites * args.turbines * args.sensors} sensors, {args.files} "
          f"files per stream, {args.batch_files} files per stream and micro-batch, interval {args.window} min, master "
          f"{args.master}, seed {args.seed} (generated in {gen_secs:.1f} s: {rows})")
    spark = spark_session(args.master)
    obda = run_obda(spark, project, args, work)
    spark_side = run_spark(spark, args, work)
    rss = peak_rss_mib()
    print_sides(obda, spark_side)
    print(f"obda synopsis entries at the end: {obda['synopsis_entries']}; driver peak RSS (this process): {rss:.0f} MiB")
    equal = obda["answers"] == spark_side["answers"]
    print(f"answers: obda {obda['answers'][0]:,} ({obda['answers'][1]}), spark {spark_side['answers'][0]:,} "
          f"({spark_side['answers'][1]}): {'EQUAL' if equal else 'DIFFERENT'}")
    spark.stop()
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
