"""Bounded-memory checking time against the number of streams and attributes.

    python benchmarks/analyze_scaling.py            # full table
    python benchmarks/analyze_scaling.py --quick    # smaller table, fewer catalog queries

Prints, for synthetic queries over ``n`` streams with ``a`` attributes each
(every attribute occurs in the selection): the polynomial checker's time
(median of several runs) and the naive LTO-enumerating checker's time where
it finishes within a budget of LTO queries.  Then the time to analyse 1,000
catalog-like queries (unions of 1–3 SPJ members over 2–4 streams and a
static table, bag and set).  Targets (issue 3): 8 streams × 6 attributes
under 0.2 s; 1,000 catalog-like queries under 60 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from obda.analysis import analyze  # noqa: E402
from obda.analysis.criteria import check_polynomial  # noqa: E402
from obda.analysis.naive import check_naive, count_ltos  # noqa: E402
from obda.analysis.normal_form import from_sql  # noqa: E402
from obda.analysis.preprocess import preprocess  # noqa: E402
from obda.model.sources_file import parse_sources  # noqa: E402

NAIVE_LTO_BUDGET = 3_000


def catalog(n_streams: int, n_attrs: int):
    lines = ["tables:"]
    for i in range(1, n_streams + 1):
        cols = ", ".join(f"a{j}: integer" for j in range(1, n_attrs + 1))
        lines.append(f"  X{i}: {{kind: stream, timestamp: ts, columns: {{{cols}, ts: timestamp}}}}")
    lines.append("  R: {kind: static, columns: {id: integer, kind: string, lo: integer}}")
    return parse_sources("\n".join(lines))


def synthetic_query(n: int, a: int, distinct: bool) -> str:
    """A tree of streams (X1 the latest), local joins, bounded keys, filters on every attribute."""
    preds = []
    for i in range(2, n + 1):
        parent = 1 if i <= 3 else (i // 2)
        preds.append(f"X{i}.ts < X{parent}.ts")
        preds.append(f"X{i}.a1 = X{parent}.a1")  # equality join parent/child on a bounded key
        if a >= 3:
            preds.append(f"X{i}.a3 < X{parent}.a3")  # inequality join on bounded attributes
    for i in range(1, n + 1):
        preds.append(f"X{i}.a1 BETWEEN 0 AND 9")
        if a >= 2:
            preds.append(f"X{i}.a2 > 100")
        if a >= 3:
            preds.append(f"X{i}.a3 BETWEEN 0 AND 50")
        for j in range(4, a + 1):
            preds.append(f"X{i}.a{j} {'<' if j % 2 else '>'} X{i}.a{j - 1}")  # filters inside the stream
    proj = "X1.a2, X2.a1" if n > 1 else "X1.a1"
    return (f"SELECT {'DISTINCT ' if distinct else ''}{proj} FROM "
            + ", ".join(f"X{i}" for i in range(1, n + 1)) + " WHERE " + " AND ".join(preds))


def time_it(fn, repeat: int = 5) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def scaling_table(quick: bool) -> list[tuple]:
    sizes = [(2, 2), (2, 3), (3, 3), (4, 3), (4, 6), (6, 6), (8, 6)] if not quick else [(2, 3), (4, 3), (8, 6)]
    rows = []
    for n, a in sizes:
        src = catalog(n, a)
        for distinct in (False, True):
            sql = synthetic_query(n, a, distinct)
            poly = time_it(lambda: analyze(sql, src), repeat=3 if n * a > 20 else 5)
            verdict = analyze(sql, src).verdict
            mqs = [mq for m in from_sql(sql, src) for mq in preprocess(m) if mq.satisfiable]
            n_lto = sum(count_ltos(mq, NAIVE_LTO_BUDGET) for mq in mqs)
            if n_lto < NAIVE_LTO_BUDGET:
                t0 = time.perf_counter()
                nv = [check_naive(mq).verdict for mq in mqs]
                naive = time.perf_counter() - t0
                agree = all(check_polynomial(mq).verdict == v for mq, v in zip(mqs, nv))
                naive_s = f"{naive * 1000:9.1f}"
            else:
                naive_s, agree = f"  >{NAIVE_LTO_BUDGET} LTO", None
            rows.append((n, a, n * a, "set" if distinct else "bag", verdict, poly * 1000, n_lto, naive_s, agree))
    return rows


def catalog_like(count: int, seed: int = 1) -> tuple[float, dict]:
    """Unions of 1–3 members over 2–4 streams and a static table, random local conditions."""
    rnd = random.Random(seed)
    src = catalog(4, 4)
    queries = []
    for _ in range(count):
        distinct = rnd.random() < 0.5
        members = []
        for _ in range(rnd.randint(1, 3)):
            n = rnd.randint(2, 4)
            streams = [f"X{i}" for i in range(1, n + 1)]
            preds = [f"m{i}.ts < m1.ts" for i in range(2, n + 1) if rnd.random() < 0.8]
            for i in range(2, n + 1):
                if rnd.random() < 0.7:
                    preds.append(f"m{i}.a1 = m{rnd.randint(1, i - 1)}.a1")
                if rnd.random() < 0.5:
                    preds.append(f"m{i}.a1 BETWEEN 0 AND {rnd.randint(1, 30)}")
                if rnd.random() < 0.3:
                    preds.append(f"m{i}.a2 > m{rnd.randint(1, i - 1)}.a2")
            if rnd.random() < 0.5:
                preds.append("m1.a3 = r.id AND r.kind = 'turbine'")
                frm = ", ".join(f"{s} AS m{i + 1}" for i, s in enumerate(streams)) + ", R AS r"
            else:
                frm = ", ".join(f"{s} AS m{i + 1}" for i, s in enumerate(streams))
            if rnd.random() < 0.2:
                preds.append("m1.ts < CAST('2024-01-01 00:00:00' AS TIMESTAMP)")
            if rnd.random() < 0.2:
                preds.append("m1.a4 <> 3")
            proj = f"CONCAT('http://ex.org/t/', CAST(m1.a1 AS VARCHAR)) AS t, m{rnd.randint(1, n)}.a2 AS v"
            members.append(f"SELECT {'DISTINCT ' if distinct else ''}{proj} FROM {frm}" + (f" WHERE {' AND '.join(preds)}" if preds else ""))
        queries.append((" UNION " if distinct else " UNION ALL ").join(members))
    verdicts: dict[str, int] = {}
    t0 = time.perf_counter()
    for q in queries:
        v = analyze(q, src).verdict
        verdicts[v] = verdicts.get(v, 0) + 1
    return time.perf_counter() - t0, verdicts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--catalog", type=int, default=None, help="number of catalog-like queries (default 1000, quick 200)")
    args = ap.parse_args(argv)
    print("Bounded-memory analysis: checking time (ms) vs streams × attributes")
    print(f"{'streams':>7} {'attrs':>5} {'total':>5} {'proj':>4} {'verdict':>10} {'poly ms':>9} {'#LTO':>7} {'naive ms':>12} {'agree':>6}")
    ok = True
    for n, a, tot, proj, verdict, poly, n_lto, naive_s, agree in scaling_table(args.quick):
        n_lto_s = f"{n_lto}" if n_lto < NAIVE_LTO_BUDGET else f">{NAIVE_LTO_BUDGET}"
        print(f"{n:>7} {a:>5} {tot:>5} {proj:>4} {verdict:>10} {poly:>9.1f} {n_lto_s:>7} {naive_s:>12} {'' if agree is None else agree!s:>6}")
        if n == 8 and a == 6 and poly > 200:
            ok = False
        if agree is False:
            ok = False
    count = args.catalog or (200 if args.quick else 1000)
    elapsed, verdicts = catalog_like(count)
    print(f"\n{count} catalog-like queries: {elapsed:.2f} s total, {elapsed / count * 1000:.1f} ms/query; verdicts {verdicts}")
    target = 60.0 * count / 1000
    print(f"targets: 8×6 query < 200 ms: {'met' if ok else 'MISSED'}; {count} catalog queries < {target:.0f} s: "
          f"{'met' if elapsed < target else 'MISSED'}")
    return 0 if ok and elapsed < target else 1


if __name__ == "__main__":
    sys.exit(main())
