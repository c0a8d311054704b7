"""The driver's share of a windowed aggregate: CPU seconds to turn partial aggregates into changelog lines.

On the Spark backend the micro-batch's job brings one partial per closed timestamp and group
(``Aggregator.partial_frames``); the driver merges them in timestamp order, expires the panes that leave the
window and writes a line per group whose row changed (``Aggregator.finish_batch``). This measures that work
alone — no Spark — on the shape of ``benchmarks/windowed_aggregate.py`` (its SPARQL query: AVG and COUNT per
sensor over the last ``--window`` minutes): ``--sensors`` groups, a partial per sensor at each of
``--timestamps`` timestamps, ``--batches`` micro-batches. ``--baseline REV`` also runs
``obda/execution/aggregate.py`` as of a git revision, alternately with the current one, and checks that both
end with the same rows.

    .venv/bin/python benchmarks/aggregate_driver.py
    .venv/bin/python benchmarks/aggregate_driver.py --baseline ac7172c --repeat 3
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MINUTE = 60_000_000  # µs


def plan(window: int):
    from obda.analysis import plan_execution
    from obda.project import Project
    from windowed_aggregate import QUERY

    project = Project.load(ROOT / "demo")
    return plan_execution(project.compile(QUERY % window), project.sources).aggregate


def module_at(rev: str):
    """``obda/execution/aggregate.py`` as of ``rev``, imported under another name."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:obda/execution/aggregate.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="obda-agg-")) / "aggregate_baseline.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("aggregate_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def drive(mod, aplan, args) -> tuple[float, int, dict]:
    """CPU seconds, changelog lines, final rows of ``mod.Aggregator`` over the synthetic partials."""
    agg = mod.Aggregator(aplan)
    per_batch = args.timestamps // args.batches
    lines = 0
    t0 = time.process_time()
    for b in range(args.batches):
        for t in range(b * per_batch, (b + 1) * per_batch):
            for s in range(args.sensors):
                value = (s * 7 + t) % 100
                agg.add_partial("partial", t * MINUTE, (f"http://example.org/turbine/data/sensor/{s}", value, 1, 1))
        lines += len(agg.finish_batch(closed_upto=(b + 1) * per_batch * MINUTE))
    return time.process_time() - t0, lines, agg.shown


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sensors", type=int, default=100)
    ap.add_argument("--timestamps", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--window", type=int, default=10, help="minutes")
    ap.add_argument("--baseline", help="a git revision whose aggregate.py runs too")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)

    import obda.execution.aggregate as current

    aplan = plan(args.window)
    sides = [("current", current)] + ([(f"baseline {args.baseline}", module_at(args.baseline))] if args.baseline else [])
    print(f"{args.sensors} groups x {args.timestamps} timestamps in {args.batches} micro-batches, window "
          f"{args.window} min, aggregates {[c.function.name for c in aplan.calls]}")
    best: dict[str, float] = {}
    shown = {}
    for _ in range(args.repeat):
        for name, mod in sides:
            secs, lines, rows = drive(mod, aplan, args)
            best[name] = min(best.get(name, secs), secs)
            shown[name] = rows
            print(f"  {name:24s} {secs:6.2f} s CPU  {lines:,} changelog lines  {lines / secs:,.0f} lines/s")
    for name, secs in best.items():
        print(f"best {name:24s} {secs:6.2f} s CPU")
    if args.baseline:
        same = shown["current"] == shown[f"baseline {args.baseline}"]
        print(f"ratio baseline / current: {best[f'baseline {args.baseline}'] / best['current']:.2f}x; final rows "
              f"{'equal' if same else 'DIFFERENT'}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
