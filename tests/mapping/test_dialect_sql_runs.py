"""The SQL `obda compile --dialect D` prints runs on D's own engine (SQLite, DuckDB), intervals and NOW() included,
with the same answers on both: an interval join's bound and a window's `NOW() - d` (SQLite has no INTERVAL)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from obda.catalog import load_catalog
from obda.datagen import generate_rows

ROOT = Path(__file__).resolve().parents[2]


def _load(demo, con, iso: str):
    """The demo tables with generated rows into ``con`` (timestamps as text in the form ``iso``)."""
    data = generate_rows(demo.sources, seed=4, timestamps=30, rows_per_timestamp=(0, 6))
    for t in demo.sources.tables:
        cols = [c.name for c in t.columns]
        types = ["TEXT" if c.type.value in ("string", "timestamp") else "DOUBLE" if c.type.value in ("double", "decimal")
                 else "BIGINT" for c in t.columns]
        con.execute(f"CREATE TABLE {t.name} ({', '.join(f'{c} {ty}' for c, ty in zip(cols, types))})")
        rows = [tuple(v.strftime(iso) if hasattr(v, "strftime") else float(v) if isinstance(v, Decimal) else v
                      for v in r) for r in data.rows(t.name)]
        if rows:
            con.executemany(f"INSERT INTO {t.name} VALUES ({', '.join('?' * len(cols))})", rows)


def _bag(rows) -> Counter:
    return Counter(tuple(f"{float(v):.6f}" if isinstance(v, (int, float)) else str(v) for v in r) for r in rows)


def test_an_interval_join_and_a_window_run_on_sqlite_and_duckdb(demo):
    entry = next(e for e in load_catalog(ROOT / "catalogs" / "demo.yaml")
                 if e.name == "hot_readings_within_5_minutes_of_maintenance")
    interval = demo.compile(entry.query)
    window = demo.compile((ROOT / "demo" / "queries" / "mean_last_10_minutes.rq").read_text())
    lite, duck = sqlite3.connect(":memory:"), duckdb.connect()
    _load(demo, lite, "%Y-%m-%dT%H:%M:%SZ")  # ISO text with T and Z: julianday() compares it with datetime()'s form
    _load(demo, duck, "%Y-%m-%d %H:%M:%S")
    duck.execute("ALTER TABLE maintenance ALTER ts TYPE TIMESTAMP; ALTER TABLE measurement ALTER ts TYPE TIMESTAMP")
    text = interval.to_sql("sqlite")
    assert "INTERVAL" not in text and "JULIANDAY(" in text.upper()
    got, want = _bag(lite.execute(text).fetchall()), _bag(duck.execute(interval.to_sql("duckdb")).fetchall())
    assert want and got == want
    for comp in (window.characteristic,):  # NOW() is CURRENT_TIMESTAMP: the statement runs on each engine
        lite.execute(_sqlite_of(comp)).fetchall()
        duck.execute(comp.sql(dialect="duckdb")).fetchall()


def _sqlite_of(tree) -> str:
    from obda.model.dialects import sql_text

    text = sql_text(tree, "sqlite")
    assert "INTERVAL" not in text, text
    return text


def test_answer_variables_named_like_sqlite_keywords_run_on_sqlite(demo):
    """``?when``, ``?order``, ``?group``: SQLite reads them as keywords unless quoted (a syntax error before)."""
    comp = demo.compile("PREFIX : <http://example.org/turbine#>\nSELECT ?order ?group ?when WHERE { ?order a "
                        ":Turbine ; :hasModel ?group ; :hasCapacity ?when }")
    lite, duck = sqlite3.connect(":memory:"), duckdb.connect()
    _load(demo, lite, "%Y-%m-%d %H:%M:%S")
    _load(demo, duck, "%Y-%m-%d %H:%M:%S")
    got, want = _bag(lite.execute(comp.to_sql("sqlite")).fetchall()), _bag(duck.execute(comp.to_sql("duckdb")).fetchall())
    assert want and got == want
