"""k-constraints and join state: memory against tuples processed, for several k (Babu et al. 2004, time-based).

Two streams, ``reading(rid, sensor, value, ts)`` and ``alarm(rid, severity, ts)``, joined on ``rid``::

    SELECT r.sensor AS sensor, r.value AS value, a.severity AS severity
    FROM reading AS r, alarm AS a WHERE r.rid = a.rid

On its own the query is unbounded (a reading may join an alarm of any later time). With the referential
k-constraint ``alarm_near_reading`` (RI(reading -> alarm on rid), ``after`` = ``before`` = k seconds) the
synopses drop a row once no later row can join it, and ``ConstraintWatch`` checks every row against the
constraint. The data keep it: every new rid (``--rate`` per second of application time) gets 1-2 readings and
0-2 alarms placed within k seconds of its first second.

For every k (``--k``) the query runs in-process with the constraint declared, then once with OA(k) on the
rid of both streams instead (rids are drawn in time order, so the data keep it too: the synopses drop the
rows below the other stream's rid watermark, the paper's Fig. 12 shape), then once without any constraint
(the data of the largest k). Rows are generated per micro-batch (``--batch-seconds`` of application time, timestamp
order) and fed through ``process_rows`` / ``Runtime.ingest`` / ``Runtime.close``. At 1x, 2x, ..., 10x of
``--base`` input rows it prints the tuples processed, the synopsis entries, the constraint monitor's keys,
the answers so far, the quarantined rows and the driver's peak RSS so far; then rows/s (obda's time only,
generation excluded) and a summary: the state at 1x and 10x and their ratio (flat with the constraint,
~10x without). Each configuration runs in a fresh process, so its peak RSS is its own. The run without the
constraint dominates the time: its rows/s falls as its state grows (the engine re-indexes the other
stream's whole past at every closed timestamp), so its time grows about quadratically with ``--base``.

    .venv/bin/python benchmarks/constraints_state.py                 # base 50,000 rows: 500,000 at 10x (~5 min)
    .venv/bin/python benchmarks/constraints_state.py --base 100000   # 1,000,000 rows at 10x (~15 min)
    .venv/bin/python benchmarks/constraints_state.py --quick         # 10,000 rows base, k = 1 and 5
    .venv/bin/python benchmarks/constraints_state.py --k 2 10 --base 50000 --rate 100
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from obda.analysis.forest import build_forest  # noqa: E402
from obda.execution import views as view_rows  # noqa: E402
from obda.execution.constraints import ConstraintWatch  # noqa: E402
from obda.execution.query_engine import QueryEngine  # noqa: E402
from obda.execution.reader import Record  # noqa: E402
from obda.execution.rows import process_rows  # noqa: E402
from obda.execution.runtime import Runtime, peak_rss_bytes  # noqa: E402
from obda.model.sources import Sources  # noqa: E402

SQL = ("SELECT r.sensor AS sensor, r.value AS value, a.severity AS severity FROM reading AS r, alarm AS a "
       "WHERE r.rid = a.rid")
NAME = "alarm_near_reading"
START = dt.datetime(2024, 3, 1)
TABLES = """
tables:
  reading: {kind: stream, timestamp: ts, columns: {rid: integer, sensor: integer, value: integer, ts: timestamp}}
  alarm: {kind: stream, timestamp: ts, columns: {rid: integer, severity: integer, ts: timestamp}}
"""


def make_sources(k: int | None, ordered: bool = False) -> Sources:
    """The two streams, with RI(reading -> alarm on rid) of k seconds both ways, or (``ordered``) OA(k) on
    the rid of both streams, or (k None) no constraint."""
    if k is None:
        return Sources.from_yaml(TABLES)
    if ordered:
        return Sources.from_yaml(TABLES + f"""constraints:
  - {{name: readings_in_rid_order, ordered: {{stream: reading, column: rid}}, within: PT{k}S}}
  - {{name: alarms_in_rid_order, ordered: {{stream: alarm, column: rid}}, within: PT{k}S}}
""")
    return Sources.from_yaml(TABLES + f"""constraints:
  - name: {NAME}
    referential: {{from: reading, to: alarm, on: [rid]}}
    after: PT{k}S
    before: PT{k}S
""")


class Feed:
    """Rows of both streams, produced second by second: every rid starting at second s has its rows in
    [s, s + k], so a second's rows are complete once the keys of all seconds up to it are drawn."""

    def __init__(self, seed: int, k: int, rate: int):
        self.rng, self.k, self.rate = random.Random(seed), k, rate
        self.rid = 0
        self.second = 0
        self.pending: dict[int, dict[str, list]] = {}

    def _draw(self, s: int) -> None:
        rng = self.rng
        for _ in range(self.rate):
            self.rid += 1
            for table, n in (("reading", rng.randint(1, 2)), ("alarm", rng.randint(0, 2))):
                for _ in range(n):
                    t = s + rng.randint(0, self.k)
                    row = ({"rid": self.rid, "sensor": rng.randint(1, 100), "value": rng.randint(0, 99)}
                           if table == "reading" else {"rid": self.rid, "severity": rng.randint(1, 3)})
                    self.pending.setdefault(t, {"reading": [], "alarm": []})[table].append(row)

    def batch(self, seconds: int) -> dict[str, list]:
        """The rows of the next ``seconds`` seconds, in timestamp order, ts as datetimes."""
        out = {"reading": [], "alarm": []}
        for s in range(self.second, self.second + seconds):
            self._draw(s)
            ts = START + dt.timedelta(seconds=s)
            for table, rows in self.pending.pop(s, {}).items():
                for row in rows:
                    row["ts"] = ts
                out[table].extend(rows)
        self.second += seconds
        return out


def run(label: str, k: int | None, data_k: int, args, ordered: bool = False) -> dict:
    """One configuration in this process; prints its table; returns its figures."""
    src = make_sources(k, ordered)
    plan = build_forest(SQL, src, "spark")
    engine = QueryEngine(plan, view_rows.statics(plan.views, {})[0])
    streams = [t.name for t in plan.stream_tables()]
    pipes = {n: [p for p in plan.pipelines if p.table.name == n] for n in streams}
    rt = Runtime(engine, streams, views=plan.views, constraints=ConstraintWatch(plan) if plan.constraints else None)
    feed = Feed(args.seed, data_k, args.rate)
    print(f"\n== {label}: data within {data_k} s per rid, {args.rate} rids/s, "
          f"{args.batch_seconds} s per micro-batch", flush=True)
    print(f"{'x':>3} {'tuples':>11} {'synopsis':>10} {'monitor keys':>13} {'answers':>11} {'quarantined':>11} "
          f"{'peak RSS MiB':>12} {'rows/s':>9}", flush=True)
    rows = answers = batch = 0
    busy = 0.0
    marks, points = [args.base * i for i in range(1, args.steps + 1)], []
    while marks:
        data = feed.batch(args.batch_seconds)
        t0 = time.perf_counter()
        closed = rt.closed_upto
        rt.ingest([process_rows(src.table(n), pipes[n], [Record.of(r) for r in data[n]], closed, f"batch{batch}")
                   for n in streams])
        answers += sum(a.count for a in rt.close())
        busy += time.perf_counter() - t0
        rows += sum(len(r) for r in data.values())
        batch += 1
        if rows >= marks[0]:
            while marks and rows >= marks[0]:
                marks.pop(0)
            rt.update_state_metrics()
            m = rt.metrics
            mon = sum(w.get("monitor_keys", 0) for w in m.constraints.values()) if m.constraints else None
            points.append((rows, m.synopsis_entries, mon))
            print(f"{len(points):>3} {rows:>11,} {m.synopsis_entries:>10,} {'-' if mon is None else f'{mon:,}':>13} "
                  f"{answers:>11,} {m.constraint_violations:>11,} {peak_rss_bytes() / 2**20:>12,.0f} "
                  f"{rows / busy:>9,.0f}", flush=True)
    rss = peak_rss_bytes()
    report = rt.metrics.constraints.get(NAME, {})
    if ordered:
        report = {}
        extra_oa = "; " + ", ".join(f"{n} in use: {w['in_use']}, estimated k {w['estimated']['within']}"
                                    for n, w in rt.metrics.constraints.items())
    extra = (f"; constraint in use: {report.get('in_use')}, Bloom false-positive rate "
             f"{report.get('bloom_false_positive_rate', 0):.1e}, departed keys remembered since "
             f"{report.get('remembered_since') or 'the start'} ({report.get('forgotten_keys', 0):,} forgotten)"
             if report else extra_oa if ordered else "")
    print(f"{label}: {rows:,} rows in {busy:.1f} s of obda time ({rows / busy:,.0f} rows/s, {batch} micro-batches), "
          f"driver peak RSS {rss / 2**20:,.0f} MiB{extra}", flush=True)
    return {"label": label, "rows": rows, "points": points, "rate": rows / busy, "rss": rss, "answers": answers,
            "quarantined": rt.metrics.constraint_violations}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[1, 5, 20], help="constraint bounds to run, seconds")
    ap.add_argument("--base", type=int, default=50_000, help="input rows (both streams) of the 1x point")
    ap.add_argument("--steps", type=int, default=10, help="points at 1x .. steps x base")
    ap.add_argument("--rate", type=int, default=50, help="new rids per second of application time")
    ap.add_argument("--batch-seconds", type=int, default=10, help="application seconds per micro-batch")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-unconstrained", action="store_true", help="skip the run without the constraint")
    ap.add_argument("--no-ordered", action="store_true",
                    help="skip the run with OA(k) on rid instead of the RI (the data keep both)")
    ap.add_argument("--quick", action="store_true", help="a small run: base 10,000 and k = 1, 5")
    args = ap.parse_args(argv)
    if args.quick:
        args.base, args.k = 10_000, [1, 5]
    configs = [(f"k={k} s", k, k) for k in args.k]
    if not args.no_ordered:  # rids are drawn in time order and a rid's rows lie within k: OA(k) holds too
        configs.append((f"OA k={max(args.k)} s", max(args.k), max(args.k), args, True))
    if not args.no_unconstrained:
        configs.append(("no constraint", None, max(args.k)))
    print(f"parameters: k {args.k} s, base {args.base:,} rows (points up to {args.base * args.steps:,}), "
          f"{args.rate} rids/s, {args.batch_seconds} s per micro-batch, seed {args.seed}")
    results = []
    spawn = multiprocessing.get_context("spawn")
    for cfg in configs:  # a fresh process per configuration: its peak RSS is its own
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            results.append(pool.submit(run, *cfg[:3], args, *cfg[4:]).result())
    print("\nsummary (synopsis entries):")
    for r in results:
        first, last = r["points"][0][1], r["points"][-1][1]
        ratio = f"{last / first:.2f}x" if first else "-"
        print(f"  {r['label']:<14} 1x {first:>10,}   {len(r['points'])}x {last:>10,}   ratio {ratio:>7}   "
              f"{r['rate']:>9,.0f} rows/s   peak RSS {r['rss'] / 2**20:,.0f} MiB   answers {r['answers']:,}   "
              f"quarantined {r['quarantined']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
