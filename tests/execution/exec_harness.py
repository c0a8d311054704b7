"""Helpers of the execution tests: random streams, the DuckDB oracle, in-process micro-batch driving."""

from __future__ import annotations

import csv
import datetime as dt
import random
from collections import Counter
from decimal import Decimal
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import duckdb
import sqlglot

from obda.execution.constraints import ConstraintWatch
from obda.execution.checks import resolve_checks
from obda.execution.query_engine import QueryEngine
from obda.analysis.forest import build_forest
from obda.execution import views as view_rows
from obda.execution.reader import Record
from obda.execution.rows import process_rows, static_rows
from obda.execution.runtime import Runtime
from obda.model.sources import ColumnType, Sources

SOURCES_YAML = """
tables:
  s: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, c: integer, ts: timestamp}}
  t: {kind: stream, timestamp: ts, columns: {d: integer, e: integer, ts: timestamp}}
  u: {kind: stream, timestamp: ts, columns: {f: integer, ts: timestamp}}
  r: {kind: static, columns: {id: integer, name: string}}
"""

# 2024-01-01 00:00:00 is at step 10: the finite-stream rows (τ < '2024-01-01') end in the middle
BASE = dt.datetime(2023, 12, 31, 23, 59, 50)
CUTOFF = "CAST('2024-01-01 00:00:00' AS TIMESTAMP)"


def records(rows) -> list[Record]:
    """Generated rows (dicts of values) as the reader's records (their text), for ``process_rows``."""
    return [r if isinstance(r, Record) else Record.of(r) for r in rows]


def sources(**locations) -> Sources:
    src = Sources.from_yaml(SOURCES_YAML)
    if not locations:
        return src
    import dataclasses

    tables = tuple(
        dataclasses.replace(t, location=locations[t.name], format="csv") if t.name in locations else t for t in src.tables
    )
    return Sources(tables, src.file)


@dataclass(frozen=True)
class Case:
    """A query of the spec's worked examples (boundedness.md §7) as SQL, with its verdict."""

    name: str
    sql: str
    verdict: str  # what the analyser reports: bounded | unbounded | not_shown
    keys_bound: int | None = None  # an upper bound of synopsis entries for bounded cases
    # rule A4 (a check in a window reaching after the answer's time m1.ts): how long (s) an answer waits, and the
    # SQL of the timestamps at which the query reads a row (where a waiting answer is decided)
    waits: int = 0
    data: str = ""
    # rules A4, A6: the waiting checks are EXISTS only, so an answer is emitted at its first match
    at_first_match: bool = False


S_T = "FROM s AS m1, t AS m2"
S_T_U = "FROM s AS m1, t AS m2, u AS m3"
_AB = "AND 0 < m1.a AND m1.a < 5 AND 0 < m1.b AND m1.b < 5"

CASES = [
    Case("row1_bag", f"SELECT m1.a AS a {S_T} WHERE m2.ts < m1.ts", "bounded", 1),
    Case("row4_bag", f"SELECT m2.d AS d {S_T} WHERE m2.ts < m1.ts AND 0 < m2.d AND m2.d < 5", "bounded", 4),
    Case("row4_set", f"SELECT DISTINCT m2.d AS d {S_T} WHERE m2.ts < m1.ts AND 0 < m2.d AND m2.d < 5", "bounded", 8),
    Case("row5_bag", f"SELECT m1.a AS a {S_T} WHERE m2.ts < m1.ts AND m1.a > m2.d AND 0 < m2.d AND m2.d < 5", "bounded", 4),
    Case("row7_bag", f"SELECT m1.a AS a {S_T} WHERE m1.ts = m2.ts AND m1.b = m2.d", "bounded", 0),
    Case("row8_bag", f"SELECT m1.a AS a {S_T} WHERE m1.ts < {CUTOFF} AND m1.b = m2.d", "bounded", None),
    Case("row8_set", f"SELECT DISTINCT m1.a AS a {S_T} WHERE m1.ts < {CUTOFF} AND m1.b = m2.d", "bounded", None),
    Case("row9_set", f"SELECT DISTINCT m3.f AS f {S_T_U} WHERE m3.ts < m2.ts AND m2.ts < m1.ts AND 0 < m3.f AND m3.f < 5", "bounded", 12),
    Case("row10_set", f"SELECT DISTINCT m1.b AS b {S_T_U} WHERE m3.ts < m1.ts AND m3.ts < m2.ts AND 0 < m1.b AND m1.b < 5", "bounded", 10),
    # issue 27: a disjunction over two FROM entries (SQL input): one member per disjunct, as the analysis reads it
    # (forest.disjunctions), not a filter on the joined row; a bag's members disjoint (a = b = d in both)
    Case("cross_or_bag", f"SELECT m1.a AS a {S_T} WHERE m2.ts < m1.ts AND (m1.a = m2.d OR m1.b = m2.d) {_AB}",
         "bounded", 8),
    Case("cross_or_set", f"SELECT DISTINCT m1.a AS a {S_T} WHERE m2.ts < m1.ts AND (m1.a = m2.d OR m1.a = m2.e) AND "
         "0 < m1.a AND m1.a < 5", "bounded", 12),
    Case("cross_in_bag", f"SELECT m1.a AS a, m2.e AS e {S_T} WHERE m1.ts = m2.ts AND m2.d IN (m1.a, m1.b)", "bounded",
         0),
    Case("cross_not_and_bag", f"SELECT m1.a AS a {S_T} WHERE m2.ts < m1.ts AND NOT (m1.a <> m2.d AND m1.b <> m2.d) "
         f"{_AB}", "bounded", 8),
    Case("cross_or_times_bag", f"SELECT m1.a AS a {S_T} WHERE (m2.ts < m1.ts AND m1.a = m2.d OR m2.ts = m1.ts AND "
         f"m1.b = m2.d) {_AB}", "bounded", 4),
    # a member over static tables beside one whose filter no stream row passes: its answers at the first closed
    # timestamp (they were never emitted)
    Case("static_union_unmatched_bag", "SELECT r.id AS a FROM r AS r UNION ALL SELECT m1.a AS a FROM s AS m1 "
         "WHERE m1.a > 100", "bounded", 0),
    Case("single_stream_bag", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.c > 2", "bounded", 0),
    Case(
        "static_join_bag",
        "SELECT CONCAT('http://ex.org/s/', CAST(m1.a AS VARCHAR)) AS x, m2.name AS n FROM s AS m1, r AS m2 WHERE m1.b = m2.id",
        "bounded",
        0,
    ),
    Case(
        "tree_static_bag",
        f"SELECT m1.a AS a, m3.name AS n FROM s AS m1, t AS m2, r AS m3 WHERE m2.ts < m1.ts AND m2.d = m3.id AND m1.b = m2.d",
        "bounded",
        7,
    ),
    Case("arasu_set", f"SELECT DISTINCT m1.b AS b {S_T} WHERE m1.a > m2.d AND 0 < m1.b AND m1.b < 5", "bounded", 10),
    Case(
        "union_bag",
        f"SELECT m1.a AS v FROM s AS m1 WHERE m1.b = 1 UNION ALL SELECT m2.d AS v {S_T} WHERE m2.ts < m1.ts AND m2.d = 2",
        "bounded",
        1,
    ),
    Case(
        "union_set",
        f"SELECT DISTINCT m1.b AS v FROM s AS m1 WHERE 0 <= m1.b AND m1.b < 3 "
        f"UNION SELECT m2.d AS v {S_T} WHERE m2.ts < m1.ts AND 0 <= m2.d AND m2.d < 4",
        "bounded",
        12,
    ),
    Case("le_time_bag", f"SELECT m1.a AS a {S_T} WHERE m2.ts <= m1.ts AND m1.b = m2.d AND 0 < m2.d AND m2.d < 5", "bounded", 8),
    # unbounded / not shown (run with allow_unbounded)
    Case("row2_bag", f"SELECT m1.a AS a {S_T}", "unbounded"),
    Case("row3_bag", f"SELECT m2.d AS d {S_T} WHERE m2.ts < m1.ts", "unbounded"),
    Case("row6_bag", f"SELECT m1.a AS a {S_T} WHERE m1.a > m2.d AND 0 < m2.d AND m2.d < 5", "unbounded"),
    Case("row9_bag", f"SELECT m3.f AS f {S_T_U} WHERE m3.ts < m2.ts AND m2.ts < m1.ts AND 0 < m3.f AND m3.f < 5", "unbounded"),
    Case("row10_bag", f"SELECT m1.b AS b {S_T_U} WHERE m3.ts < m1.ts AND m3.ts < m2.ts AND 0 < m1.b AND m1.b < 5", "unbounded"),
]
# checks decided in the answer's own timestamp (docs/analysis.md, rule A2): [NOT] IN over another stream's rows of
# that timestamp; the seeds make timestamps where one stream has rows and the other none, and where no row matches
CHECK_CASES = [
    Case("anti_join_same_ts", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT (m1.b, m1.ts) IN "
         "(SELECT m2.d, m2.ts FROM t AS m2)", "bounded"),
    Case("semi_join_same_ts", "SELECT m1.a AS a FROM s AS m1 WHERE (m1.b, m1.ts) IN "
         "(SELECT m2.d, m2.ts FROM t AS m2 WHERE m2.e > 2)", "bounded"),
    Case("anti_join_on_the_timestamp", "SELECT m1.a AS a, m2.e AS e FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts AND "
         "m1.b = m2.d AND NOT m1.ts IN (SELECT m3.ts FROM u AS m3 WHERE m3.f < 2)", "bounded"),
    Case("anti_join_same_ts_set", "SELECT DISTINCT m1.b AS b FROM s AS m1 WHERE 0 < m1.b AND m1.b < 5 AND NOT "
         "(m1.b, m1.ts) IN (SELECT m3.f, m3.ts FROM u AS m3)", "bounded"),
    Case("anti_join_never_matches", "SELECT m1.a AS a FROM s AS m1 WHERE NOT (m1.b, m1.ts) IN "
         "(SELECT m2.d, m2.ts FROM t AS m2 WHERE m2.e > 99)", "bounded"),
    # in a window of the answer's past (rule A3, the SQL a FILTER [NOT] EXISTS with a window unfolds into): the
    # other stream's rows of the last seconds, kept across micro-batches; rows leaving the window with no new rows
    Case("anti_join_past_window", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts FROM t AS m2) AS __w WHERE __w.d = m1.b AND "
         "__w.ts >= m1.ts - INTERVAL '3' SECOND AND __w.ts < m1.ts)", "bounded"),
    Case("semi_join_window_to_now", "SELECT m1.a AS a FROM s AS m1 WHERE EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts FROM t AS m2 WHERE m2.e > 2) AS __w WHERE __w.d = m1.b AND "
         "__w.ts > m1.ts - INTERVAL '2' SECOND AND __w.ts <= m1.ts)", "bounded"),
    Case("anti_join_past_window_on_time", "SELECT m1.a AS a, m2.e AS e FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts "
         "AND m1.b = m2.d AND NOT EXISTS (SELECT 1 FROM (SELECT m3.ts AS ts FROM u AS m3 WHERE m3.f > 4) AS __w "
         "WHERE __w.ts >= m1.ts - INTERVAL '2' SECOND AND __w.ts < m1.ts)", "bounded"),
    # a FILTER of the pattern comparing its columns with the answer's (the correlated [NOT] EXISTS a FILTER reading
    # the answer's variables unfolds into): in the answer's timestamp (rule A2), and against static data (A1)
    Case("anti_join_same_ts_compared", "SELECT m1.a AS a, m1.c AS c FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT m2.ts AS ts, m2.e AS e FROM t AS m2) AS __c WHERE __c.ts = m1.ts AND __c.e > m1.c)", "bounded"),
    Case("semi_join_same_ts_compared_on_a_key", "SELECT m1.a AS a FROM s AS m1 WHERE EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts, m2.e AS e FROM t AS m2) AS __c WHERE __c.d = m1.b AND __c.ts = m1.ts AND "
         "__c.e <> m1.c)", "bounded"),
    Case("anti_join_static_compared", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT r.id AS id FROM r) AS __c WHERE __c.id < m1.b - 3)", "bounded"),
    Case("anti_join_past_window_compared", "SELECT m1.a AS a, m1.c AS c FROM s AS m1 WHERE NOT EXISTS (SELECT 1 "
         "FROM (SELECT m2.d AS d, m2.e AS e, m2.ts AS ts FROM t AS m2) AS __w WHERE __w.d = m1.b AND __w.e >= m1.c "
         "AND __w.ts >= m1.ts - INTERVAL '3' SECOND AND __w.ts < m1.ts)", "bounded"),
    # in the whole past (rule A5): each key's earliest answer kept forever; bounded when the keys' set is
    Case("anti_join_whole_past", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts FROM t AS m2 WHERE 0 < m2.d AND m2.d < 4) AS __w WHERE __w.d = m1.b AND "
         "__w.ts < m1.ts)", "bounded"),
    Case("semi_join_whole_past_unbounded_keys", "SELECT m1.a AS a FROM s AS m1 WHERE EXISTS (SELECT 1 FROM "
         "(SELECT m2.e AS e, m2.ts AS ts FROM t AS m2) AS __w WHERE __w.e = m1.c AND __w.ts <= m1.ts)", "unbounded"),
    Case("anti_join_whole_past_no_key", "SELECT m1.a AS a FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT m3.ts AS ts FROM u AS m3 WHERE m3.f > 5) AS __w WHERE __w.ts < m1.ts - INTERVAL '3' SECOND)",
         "bounded"),
]

# in a window reaching after the answer's time (rule A4): an answer waits until a match (EXISTS: emitted then) or its
# window's end decides it, emitted at the first timestamp at or after that end at which the query reads a row
# (:func:`released`)
WAITING_CASES = [
    Case("anti_join_future_window", "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts FROM t AS m2) AS __w WHERE __w.d = m1.b AND "
         "__w.ts > m1.ts AND __w.ts <= m1.ts + INTERVAL '3' SECOND)", "bounded", waits=3,
         data="SELECT ts FROM s UNION SELECT ts FROM t"),
    Case("semi_join_around_the_answer", "SELECT m1.a AS a FROM s AS m1 WHERE m1.c < 5 AND EXISTS (SELECT 1 FROM "
         "(SELECT m2.d AS d, m2.ts AS ts FROM t AS m2 WHERE m2.e > 2) AS __w WHERE __w.d = m1.b AND "
         "__w.ts >= m1.ts - INTERVAL '1' SECOND AND __w.ts <= m1.ts + INTERVAL '2' SECOND)", "bounded", waits=2,
         data="SELECT ts FROM s WHERE c < 5 UNION SELECT ts FROM t WHERE e > 2", at_first_match=True),
    # with a FILTER comparing the pattern's columns with the answer's: a match must stand in the comparisons
    Case("anti_join_future_window_compared", "SELECT m1.a AS a, m1.c AS c FROM s AS m1 WHERE NOT EXISTS (SELECT 1 "
         "FROM (SELECT m2.d AS d, m2.e AS e, m2.ts AS ts FROM t AS m2) AS __w WHERE __w.d = m1.b AND __w.e < m1.c "
         "AND __w.ts > m1.ts AND __w.ts <= m1.ts + INTERVAL '3' SECOND)", "bounded", waits=3,
         data="SELECT ts FROM s UNION SELECT ts FROM t"),
    Case("semi_join_future_window_compared", "SELECT m1.a AS a FROM s AS m1 WHERE EXISTS (SELECT 1 FROM "
         "(SELECT m3.f AS f, m3.ts AS ts FROM u AS m3) AS __w WHERE __w.f > m1.b AND __w.ts > m1.ts AND "
         "__w.ts <= m1.ts + INTERVAL '2' SECOND)", "bounded", waits=2,
         data="SELECT ts FROM s UNION SELECT ts FROM u", at_first_match=True),
    # rule A6: no end; an answer waits for its first match, which may never come (unbounded: it runs opted in)
    Case("semi_join_any_time_after", "SELECT m1.a AS a, m1.c AS c FROM s AS m1 WHERE EXISTS (SELECT 1 FROM "
         "(SELECT m3.f AS f, m3.ts AS ts FROM u AS m3) AS __w WHERE __w.f = m1.b AND __w.ts > m1.ts)", "unbounded",
         waits=1 << 40, data="SELECT ts FROM s UNION SELECT ts FROM u", at_first_match=True),
    Case("anti_join_future_window_set", "SELECT DISTINCT m1.b AS b FROM s AS m1 WHERE 0 < m1.b AND m1.b < 5 AND NOT "
         "EXISTS (SELECT 1 FROM "
         "(SELECT m3.f AS f, m3.ts AS ts FROM u AS m3) AS __w WHERE __w.f = m1.b AND "
         "__w.ts > m1.ts AND __w.ts < m1.ts + INTERVAL '2' SECOND)", "bounded", waits=2,
         data="SELECT ts FROM s WHERE 0 < b AND b < 5 UNION SELECT ts FROM u"),
    # beside a member whose answers do not wait: both kinds of answers at one timestamp, in timestamp order
    Case("anti_join_future_window_and_rows", "SELECT m2.d AS a, m2.e AS b FROM t AS m2 WHERE m2.e > 3 UNION ALL "
         "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE NOT EXISTS (SELECT 1 FROM (SELECT m3.f AS f, m3.ts AS ts FROM "
         "u AS m3) AS __w WHERE __w.f = m1.b AND __w.ts >= m1.ts AND __w.ts <= m1.ts + INTERVAL '2' SECOND)", "bounded",
         waits=2, data="SELECT ts FROM s UNION SELECT ts FROM t WHERE e > 3 UNION SELECT ts FROM u"),
]


def released(oracle: "Oracle", case: Case, upto: dt.datetime | None = None) -> Counter:
    """Rules A4, A6: the answers over the rows up to ``upto`` whose window ended by the last timestamp at which the
    query read a row (``case.data``): those the executor emitted by then.  An EXISTS answer is emitted at its first
    match: all of them (the rows up to ``upto`` hold their match)."""
    if case.at_first_match:
        return oracle.answers(case.sql, upto)
    oracle.con.execute(f"SET VARIABLE upto = {_lit(upto or _FAR)}")
    last = oracle.con.execute(f"SELECT max(ts) FROM ({case.data})").fetchone()[0]
    if last is None:
        return Counter()
    return oracle.answers(f"{case.sql} AND m1.ts <= {_lit(last - dt.timedelta(seconds=case.waits))}", upto)


CASE = {c.name: c for c in CASES}


def random_streams(seed: int, steps: int = 14, max_per_ts: int = 3, value_range: int = 6, tables=("s", "t", "u"),
                   gaps: float = 0.0, quiet: float = 0.0):
    """Rows per stream table (timestamps as datetimes, sorted), random values and rows per timestamp.

    The awkward cases of an aggregate's changelog, off by default (the rows are then those of every
    seed so far): ``gaps`` — the chance that the time before a step is 2 to 8 seconds instead of 1 (no
    row in between, so rows leave a window with no new rows coming); ``quiet`` — the chance that a
    table's rows at a step all hold only the extreme values 0 and ``value_range``, which the tests'
    bounded filters (``0 < x < 5``) reject (timestamps with rows where no row matches the pattern)."""
    rng = random.Random(seed)
    cols = {"s": ("a", "b", "c"), "t": ("d", "e"), "u": ("f",)}
    seconds, k = [], 0
    for _ in range(steps):
        seconds.append(k)
        k += rng.randint(2, 8) if gaps and rng.random() < gaps else 1
    out = {}
    for t in tables:
        rows = []
        for k in seconds:
            extreme = quiet and rng.random() < quiet
            for _ in range(rng.randint(0, max_per_ts)):
                row = {c: (rng.choice((0, value_range)) if extreme else rng.randint(0, value_range)) for c in cols[t]}
                row["ts"] = BASE + dt.timedelta(seconds=k)
                rows.append(row)
        out[t] = rows
    return out


def with_gaps(streams: dict[str, list], seed: int, chance: float = 0.3, longest: dt.timedelta = dt.timedelta(minutes=8),
              timestamp: str = "ts") -> dict[str, list]:
    """The rows with time stretched: before each distinct timestamp, with probability ``chance``, every later
    row moves by a random whole number of seconds up to ``longest`` (gaps longer than a window: its rows
    leave it with no new rows coming). The order of the rows and of their timestamps is kept."""
    rng = random.Random(seed * 7907 + 3)
    shift, moved = dt.timedelta(0), {}
    for t in sorted({r[timestamp] for rows in streams.values() for r in rows}):
        if rng.random() < chance:
            shift += dt.timedelta(seconds=rng.randint(1, int(longest.total_seconds())))
        moved[t] = t + shift
    return {name: [dict(r, **{timestamp: moved[r[timestamp]]}) for r in rows] for name, rows in streams.items()}


def data_timestamps(q, src: Sources, rows: dict[str, list]) -> list[dt.datetime]:
    """The closed timestamps of an aggregate query's data, at which the differential checks its changelog:
    every timestamp at which one of the stream tables the query reads (``q.streams``) has a row, whether
    or not the row matches the pattern (obda.execution.aggregate: every line's ``emitted_at`` is one)."""
    tables = {t.name: t for t in src.streams}
    return sorted({r[tables[s].timestamp] for s in q.streams for r in rows.get(s, [])})


def check_emitted_at(records: list[dict], q, markers: list[dt.datetime]) -> None:
    """Every changelog line is at a data timestamp (``markers``), in order; a query that reads no stream
    writes its lines once, at null."""
    if not q.streams:
        assert all(r["emitted_at"] is None for r in records), records
        return
    at = [dt.datetime.fromisoformat(r["emitted_at"].rstrip("Z")) for r in records]
    assert at == sorted(at), "the changelog is in timestamp order"
    outside = sorted({r["emitted_at"] for r, t in zip(records, at) if t not in set(markers)})
    assert not outside, f"lines stamped at times that are not timestamps of the data: {outside}"


STATIC_R = [{"id": i, "name": f"n{i}"} for i in range(0, 6)] + [{"id": 2, "name": "dup2"}]


def random_splits(rows: dict[str, list], seed: int, max_chunk: int = 4) -> list[dict[str, list]]:
    """Cut every stream into consecutive chunks; batch i takes chunk i of every stream (maybe empty)."""
    rng = random.Random(seed * 7919 + 1)
    chunks = {}
    for t, rs in rows.items():
        cs, i = [], 0
        while i < len(rs):
            n = rng.randint(0, max_chunk)
            cs.append(rs[i : i + n])
            i += n
        chunks[t] = cs
    n = max((len(c) for c in chunks.values()), default=0)
    return [{t: (cs[i] if i < len(cs) else []) for t, cs in chunks.items()} for i in range(n)]


def to_us(d: dt.datetime) -> int:
    return int((d.replace(tzinfo=dt.timezone.utc)).timestamp()) * 1_000_000 + d.microsecond


_TRANSPILED: dict[str, str] = {}
_FAR = dt.datetime(9999, 1, 1)


def _lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, Decimal):
        return f"CAST('{v}' AS DECIMAL(38, 10))"
    return repr(v)


_CON = []


def _connection():
    if not _CON:
        con = duckdb.connect()
        con.execute("SET threads = 1")
        _CON.append(con)
    return _CON[0]


class Oracle:
    """DuckDB over all rows, or over the rows up to a closed timestamp (independent of the executor)."""

    def __init__(self, src: Sources, rows: dict[str, list], static: dict[str, list] | None = None):
        self.con = _connection()
        self.src = src
        types = {
            ColumnType.INTEGER: "BIGINT",
            ColumnType.TIMESTAMP: "TIMESTAMP",
            ColumnType.STRING: "VARCHAR",
            ColumnType.DECIMAL: "DECIMAL(38, 10)",
            ColumnType.BOOLEAN: "BOOLEAN",
        }
        self.con.execute(f"SET VARIABLE upto = {_lit(_FAR)}")
        for t in src.tables:
            data = rows.get(t.name) if t.is_stream else (static or {}).get(t.name, [])
            cols = ", ".join(f"{c.name} {types.get(c.type, 'DOUBLE')}" for c in t.columns)
            self.con.execute(f"CREATE OR REPLACE TABLE full_{t.name} ({cols})")
            names = [c.name for c in t.columns]
            if data:
                values = ", ".join("(" + ", ".join(_lit(r.get(n)) for n in names) + ")" for r in data)
                self.con.execute(f"INSERT INTO full_{t.name} VALUES {values}")
            cond = f" WHERE {t.timestamp} <= getvariable('upto')" if t.is_stream else ""
            self.con.execute(f"CREATE OR REPLACE VIEW {t.name} AS SELECT * FROM full_{t.name}{cond}")

    def answers_at(self, sql: str, markers: list[dt.datetime]) -> dict[dt.datetime, Counter]:
        """Answers over the rows with timestamps ≤ m, for every marker m, in one DuckDB query."""
        if not markers:
            return {}
        if "(SELECT" in sql.upper().replace("( SELECT", "(SELECT"):  # derived tables (per-atom views): one query per marker
            return {m: self.answers(sql, m) for m in markers}
        self.con.execute("CREATE OR REPLACE TABLE __mk (t TIMESTAMP)")
        self.con.execute("INSERT INTO __mk VALUES " + ", ".join(f"({_lit(m)})" for m in markers))
        self.con.execute(f"SET VARIABLE upto = {_lit(_FAR)}")
        key = "@markers " + sql
        q = _TRANSPILED.get(key)
        if q is None:
            tree = sqlglot.parse_one(sql, read="spark")
            for sel in tree.find_all(sqlglot.exp.Select):
                tables = {t.alias_or_name: self.src.table(t.name) for t in sel.find_all(sqlglot.exp.Table)}
                sel.join("__mk AS __mk", join_type="cross", copy=False)
                for alias, table in tables.items():
                    if table.is_stream:
                        sel.where(f"{alias}.{table.timestamp} <= __mk.t", copy=False)
                sel.set("expressions", [sqlglot.exp.alias_(sqlglot.exp.column("t", "__mk"), "__t")] + sel.expressions)
            q = _TRANSPILED[key] = tree.sql(dialect="duckdb")
        out: dict[dt.datetime, Counter] = {m: Counter() for m in markers}
        for r in self.con.execute(q).fetchall():
            out[r[0]][tuple(r[1:])] += 1
        return out

    def answers(self, sql: str, upto: dt.datetime | None = None) -> Counter:
        self.con.execute(f"SET VARIABLE upto = {_lit(upto or _FAR)}")
        q = _TRANSPILED.get(sql)
        if q is None:
            q = _TRANSPILED[sql] = sqlglot.transpile(sql, read="spark", write="duckdb")[0]
        return Counter(tuple(r) for r in self.con.execute(q).fetchall())


def engine_for(sql, src: Sources, static: dict[str, list] | None = None):
    """Plan ``sql`` (SQL text or a Compilation, whose per-atom views the executor runs) and start its engine; the
    checks against static answers answered first (as the executor does when a query opens)."""
    def started(plan):
        statics: dict[int, dict] = {}
        for p in plan.static_pipelines():
            counted, _ = static_rows(p.table, [p], records((static or {}).get(p.table.name, [])))
            statics.update(counted)
        engine = QueryEngine(plan, {})
        engine.set_statics(*view_rows.statics(plan.views, statics))
        return engine

    plan = resolve_checks(build_forest(sql, src, "spark"), lambda f: [a.values for a in started(f).static_only()])
    return plan, started(plan)


def drive(sql, src: Sources, batches: list[dict[str, list]], static=None, on_close=None, idle_timeout=None, clock=None):
    """Run the ordering runtime + synopsis engine in-process over the micro-batches (local pipelines)."""
    plan, engine = engine_for(sql, src, static)
    streams = [t.name for t in plan.stream_tables()]
    kw = {"clock": clock} if clock else {}
    watch = ConstraintWatch(plan) if plan.constraints else None
    rt = Runtime(engine, streams, idle_timeout, views=plan.views, constraints=watch, **kw)
    out: list = []
    for i, batch in enumerate(batches):
        closed = rt.closed_upto
        tbs = []
        for name in streams:
            table = src.table(name)
            pipes = [p for p in plan.pipelines if p.table.name == name]
            tbs.append(process_rows(table, pipes, records(batch.get(name, [])), closed, f"batch{i}"))
        rt.ingest(tbs)
        out.extend(rt.close())
        rt.update_state_metrics()
        if on_close:
            on_close(rt, out)
    out.extend(rt.close(exhausted=True))
    if not streams:  # a query over static tables only: answered once (as ContinuousQuery.step does)
        out.extend(engine.static_only())
    rt.update_state_metrics()
    if on_close:
        on_close(rt, out)
    return rt, out


def counter_of(answers) -> Counter:
    c = Counter()
    for a in answers:
        c[a.values] += a.count
    return c


def from_us(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)


def write_csv_batches(root: Path, batches: list[dict[str, list]], src: Sources, start: int = 0) -> None:
    """Write batch i of table x as root/x/part-{start+i:05d}.csv (empty chunks are skipped)."""
    for i, batch in enumerate(batches, start):
        for name, rows in batch.items():
            if not rows:
                continue
            d = root / name
            d.mkdir(parents=True, exist_ok=True)
            cols = [c.name for c in src.table(name).columns]
            with open(d / f"part-{i:05d}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(cols)
                for r in rows:
                    w.writerow([r[c].isoformat(sep=" ") if isinstance(r[c], dt.datetime) else r[c] for c in cols])


def write_static(root: Path, name: str, rows: list[dict]) -> None:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "part-00000.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_seed(base: Path, src: Sources, streams: dict, statics: dict, seed: int) -> Sources:
    """Write the streams as CSV files split at random into micro-batches; the sources with their locations."""
    rng = random.Random(seed)
    located = Sources(tuple(dataclasses.replace(t, location=f"data/{t.name}") for t in src.tables))
    write_csv_batches(base / "data", random_splits(streams, seed, max_chunk=rng.randint(2, 8)), located)
    for name, rows in statics.items():
        if rows:
            write_static(base / "data", name, rows)
    return located


def replay_changelog(records: list[dict], q, upto: dt.datetime, norm) -> Counter:
    """The answer of an aggregate query at ``upto`` from its changelog: the last line of every group
    (its grouping columns) emitted at or before it (or at null), a delete removing the group; rows normalised
    by ``norm``."""
    plan = q.aggregate.plan
    groups = [it.name for it in plan.items if it.expression in plan.group_by]
    state = {}
    for r in records:  # a line at null (a query that reads no stream) holds at every time
        if r["emitted_at"] is None or dt.datetime.fromisoformat(r["emitted_at"].rstrip("Z")) <= upto:
            b = r["binding"]
            key = tuple(b[c] for c in groups)
            if r["op"] == "delete":
                assert key in state, ("a delete of a group not in the answer", r)
                del state[key]
            else:
                assert r["op"] == "upsert", r
                state[key] = tuple(norm(b[c]) for c in q.columns)
    return Counter(state.values())


def demo_world(src: Sources, seed: int, **generate) -> tuple[dict, dict]:
    """The demo scenario's generated rows (2 sites, 2 turbines each, 2 sensors per turbine; ``generate``: more
    options of ``obda.datagen.generate_rows``) as (stream rows in timestamp order, static rows) per table."""
    from obda.datagen import generate_rows

    data = generate_rows(src, seed=seed, sites=2, turbines_per_site=2, sensors_per_turbine=2, **generate)
    rows = {t.name: [dict(zip([c.name for c in t.columns], r)) for r in data.rows(t.name)] for t in src.tables}
    streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in src.streams}
    statics = {t.name: rows[t.name] for t in src.tables if not t.is_stream}
    return streams, statics


def spark_jobs(spark) -> int:
    """Spark jobs started in ``spark`` so far (job ids are sequential)."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup()
    return max(ids) + 1 if ids else 0
