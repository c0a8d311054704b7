"""What the streaming benchmarks (``interval_join.py``, ``windowed_aggregate.py``) share: the generated demo
scenario, one local Spark session for both sides, and how a side's time, rate and state are printed."""

from __future__ import annotations

import argparse
import resource
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scenario_args(ap: argparse.ArgumentParser, window: int, window_help: str) -> None:
    """The options of the generated scenario (rows, rate, files, micro-batches, window) and of the run."""
    ap.add_argument("--rows", type=int, default=2_000_000, help="stream rows in total")
    ap.add_argument("--per-timestamp", type=int, default=100,
                    help="readings per timestamp (1 minute apart); at most one per sensor (the key is sensor, ts)")
    ap.add_argument("--files", type=int, default=40, help="files each stream is split into, in time order")
    ap.add_argument("--batch-files", type=int, default=4, help="files per stream and micro-batch, both sides")
    ap.add_argument("--window", type=int, default=window, help=window_help)
    ap.add_argument("--sites", type=int, default=2)
    ap.add_argument("--turbines", type=int, default=5, help="turbines per site")
    ap.add_argument("--sensors", type=int, default=10, help="sensors per turbine")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", type=Path, default=None)


def generate(args, work: Path, per_timestamp: dict):
    """The demo project and its generated data under ``work/data`` (``per_timestamp``: rows per timestamp of the
    streams other than the readings; the ones left out get none); also the seconds it took."""
    from obda.datagen import generate as gen
    from obda.project import Project

    project = Project.load(ROOT / "demo")
    rates = {"measurement": (args.per_timestamp, args.per_timestamp), "maintenance": (0, 0), "power": (0, 0),
             "alarm": (0, 0), **per_timestamp}
    t0 = time.perf_counter()
    g = gen(project.sources, work / "data", seed=args.seed, sites=args.sites, turbines_per_site=args.turbines,
            sensors_per_turbine=args.sensors, rows=args.rows, rows_per_timestamp=rates, step=timedelta(minutes=1),
            files=args.files)
    return project, g, time.perf_counter() - t0


def spark_session(master: str):
    """One session for both sides (obda's own settings, then Spark's defaults a user keeps), quiet."""
    from obda.execution import get_spark

    spark = get_spark(master, conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                                    "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def series(xs: list[int], n: int = 8) -> str:
    """``n`` values of ``xs`` spread over it, for a state-over-time line."""
    if not xs:
        return "-"
    idx = sorted({round(i * (len(xs) - 1) / max(1, n - 1)) for i in range(n)})
    return ", ".join(str(xs[i]) for i in idx)


def print_sides(obda: dict, spark_side: dict) -> None:
    """Seconds, rows per second, micro-batches and state over time of each side, and their ratio. The rate of
    both is the rows of the input files over the seconds (Spark's ``numInputRows`` counts the rows left by the
    filters it pushes into its CSV scan)."""
    rows = obda["rows_in"]
    for name, r in (("obda", obda), ("spark structured streaming", spark_side)):
        print(f"{name:28s} {r['seconds']:8.2f} s  {rows / r['seconds']:12,.0f} rows/s  "
              f"{r['batches']} micro-batches  state over time: {series(r['state_over_time'])} "
              f"(max {max(r['state_over_time'], default=0)})")
    print(f"throughput ratio obda / spark: {spark_side['seconds'] / obda['seconds']:.2f}x")
