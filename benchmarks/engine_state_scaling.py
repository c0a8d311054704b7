"""Benchmark: the synopsis engine's work per closed timestamp against the size of a past synopsis.

A bounded query keeps its synopses bounded, but the bound can be large (one entry per
turbine, per sensor, ...).  At every closed timestamp the engine probes the past synopsis
with the timestamp's rows and merges new entries into it; this script measures that step
(:func:`obda.execution.relations.join_aggregate` + :func:`merge_into`, the Theorem 2 shape of the
demo's ``turbines_hot_after_maintenance_distinct``: existence, earliest timestamp kept) with
the same rows per timestamp and a past synopsis of ``--sizes`` entries.  It prints the time per
timestamp for each size and the ratio largest / smallest.  The past's hash index is kept up
to date, never rebuilt, so the time follows the rows of the timestamp, not the state: the
ratio stays far below the ratio of the sizes (what remains is the cost of probing larger hash
tables: cache misses).  Measured before the index was maintained (a rebuild per timestamp):
0.84 / 6.97 / 93.0 ms for 1K / 10K / 100K entries, 111x.

    .venv/bin/python benchmarks/engine_state_scaling.py
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from obda.execution.relations import Rel, join_aggregate, merge_into  # noqa: E402
from obda.analysis.forest import CrossPred  # noqa: E402


def per_timestamp_ms(size: int, timestamps: int, rows: int, new: int, seed: int) -> float:
    rnd = random.Random(seed)
    past = Rel((("m", "turbine"), ("m", "ts")), {(i, 0): 1 for i in range(size)})
    preds = (CrossPred(("c", "turbine"), "=", ("m", "turbine")), CrossPred(("m", "ts"), "<", ("c", "ts")))
    out = (("c", "turbine"),)
    t0 = time.perf_counter()
    for ts in range(1, timestamps + 1):
        cur = Rel((("c", "turbine"), ("c", "ts")), {(rnd.randrange(size), ts): 1 for _ in range(rows)})
        join_aggregate([cur, past], preds, out, True)
        merge_into(past, {(rnd.randrange(2 * size), ts): 1 for _ in range(new)}, True, (1, "min"))
    return (time.perf_counter() - t0) / timestamps * 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1_000, 10_000, 100_000],
                    help="entries of the past synopsis, comma-separated")
    ap.add_argument("--timestamps", type=int, default=200)
    ap.add_argument("--rows", type=int, default=100, help="current rows per timestamp probing the past")
    ap.add_argument("--new", type=int, default=20, help="entries merged into the past per timestamp")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"command: {' '.join(sys.argv)}")
    print(f"parameters: {vars(args)}")
    results = {n: per_timestamp_ms(n, args.timestamps, args.rows, args.new, args.seed) for n in args.sizes}
    for n, ms in results.items():
        print(f"  past synopsis {n:>9,} entries: {ms:7.3f} ms per closed timestamp")
    lo, hi = min(args.sizes), max(args.sizes)
    print(f"largest / smallest state: {hi / lo:.0f}x the entries, {results[hi] / results[lo]:.2f}x the time per timestamp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
