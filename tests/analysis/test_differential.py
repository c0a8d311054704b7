"""The polynomial checker agrees with the naive LTO-enumerating checker (spec §6).

Random SPJ queries over up to 3 streams with up to 3 integer attributes each
(and their projected timestamps),
up to 2 constants, random value predicates (``< <= = <> > >=``), random
timestamp predicates (between streams, or with a timestamp constant, which
makes a stream finite), both projections.  The naive checker is the
definition (Arasu Thm 5.3: bounded iff every derived LTO query is) executed
literally; the polynomial checker never enumerates LTO queries of the whole
query.
"""

from __future__ import annotations

import collections

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obda.analysis.criteria import check_polynomial
from obda.analysis.naive import check_naive
from obda.analysis.normal_form import from_sql
from obda.analysis.preprocess import preprocess
from obda.model.sources_file import parse_sources

SOURCES = parse_sources("""
tables:
  P: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, c: integer, ts: timestamp}}
  Q: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, c: integer, ts: timestamp}}
  R: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, c: integer, ts: timestamp}}
""")
VALUE_OPS = ["<", "<=", "=", "<>", ">", ">="]
STATS: collections.Counter = collections.Counter()


@st.composite
def queries(draw) -> str:
    n = draw(st.integers(1, 3))
    streams = ["P", "Q", "R"][:n]
    attrs = [f"{s}.{c}" for s in streams for c in ["a", "b", "c"][: draw(st.integers(1, 3))]]
    consts = draw(st.lists(st.sampled_from([0, 5, 10, 20]), max_size=2, unique=True))
    preds = []
    for _ in range(draw(st.integers(0, 5))):
        x = draw(st.sampled_from(attrs))
        op = draw(st.sampled_from(VALUE_OPS))
        if consts and draw(st.booleans()):
            y = str(draw(st.sampled_from(consts)))
        else:
            y = draw(st.sampled_from(attrs))
        if x != y:
            preds.append(f"{x} {op} {y}")
    for _ in range(draw(st.integers(0, 3))):
        a = draw(st.sampled_from(streams))
        if draw(st.integers(0, 9)) == 0:
            preds.append(f"{a}.ts {draw(st.sampled_from(['<', '<=']))} TIMESTAMP '2024-01-01 00:00:00'")
            continue
        b = draw(st.sampled_from(streams))
        if a != b:
            preds.append(f"{a}.ts {draw(st.sampled_from(['<', '<', '=', '<=']))} {b}.ts")
    mode = draw(st.integers(0, 3))
    if mode <= 1:
        proj = ["'k'"]  # constants only: the join conditions decide
    else:  # mode 3 may project timestamps (docs/analysis.md, "Projected times")
        pool = attrs + [f"{s}.ts" for s in streams] if mode == 3 else attrs
        proj = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True))
        if mode == 2 and len(consts) == 2:
            lo, hi = sorted(consts)
            preds += [f"{p} > {lo}" for p in proj] + [f"{p} < {hi}" for p in proj]
    distinct = "DISTINCT " if draw(st.booleans()) else ""
    where = f" WHERE {' AND '.join(preds)}" if preds else ""
    return f"SELECT {distinct}{', '.join(proj)} FROM {', '.join(streams)}{where}"


@settings(max_examples=1000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(queries())
def test_polynomial_agrees_with_naive(sql):
    for m in from_sql(sql, SOURCES):
        for mq in preprocess(m):
            if not mq.satisfiable:
                STATS["unsatisfiable"] += 1
                continue
            p, n = check_polynomial(mq), check_naive(mq)
            assert p.criterion == n.criterion
            assert p.verdict == n.verdict, (sql, mq.choices, [v.message for v in p.violations], [v.message for v in n.violations])
            STATS[(p.criterion, p.verdict, tuple(sorted({v.kind for v in p.violations})))] += 1
