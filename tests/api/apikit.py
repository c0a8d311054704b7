"""Helpers of the API tests: the demo queries, a fresh copy of the demo project with fed data, settings,
and a full-history oracle (DuckDB evaluates the unfolded SQL over every fed file)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path

import duckdb

from api import Settings
from api.feeder import Feeder, prepare_workspace
from duckdb_tables import load_csv_tables
from obda.model.sources import Sources

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

PREFIX = "PREFIX : <http://example.org/turbine#>\n"
#: hot_readings of catalogs/demo.yaml: bounded (single stream, bag)
BOUNDED = PREFIX + "SELECT ?sensor ?v WHERE {\n  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n  FILTER(?v > 90)\n}\n"
#: hot_readings_after_maintenance: bounded (two streams and a static table)
BOUNDED_JOIN = PREFIX + (
    "SELECT ?turbine ?v WHERE {\n"
    "  GRAPH ?t1 { ?e :onTurbine ?turbine . }\n"
    "  GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }\n"
    "  ?turbine :hasSensor ?sensor .\n"
    "  FILTER(?t1 < ?t2 && ?v > 90)\n"
    "}\n"
)
#: hot_sensors_distinct: unbounded (every distinct sensor id must be remembered)
UNBOUNDED = PREFIX + "SELECT DISTINCT ?sensor WHERE {\n  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n  FILTER(?v > 90)\n}\n"


def make_workspace(dest: Path, blocks: int = 1, seed: int = 0, points: int = 5) -> tuple[Path, Feeder]:
    ws = prepare_workspace(DEMO, dest)
    feeder = Feeder(ws, seed=seed, points=points)
    feeder.write_static()
    for _ in range(blocks):
        feeder.feed_block()
    return ws, feeder


def settings_for(project: Path, **kw) -> Settings:
    base = dict(project_dir=project, token=TOKEN, backend="local", trigger_interval=0.05, sse_poll=0.02)
    base.update(kw)
    return Settings(**base)


def norm(v):
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def load(project: Path, sources: Sources) -> duckdb.DuckDBPyConnection:
    """Every table's CSV files (as the sources file types them) in an in-memory DuckDB."""
    return load_csv_tables(project, sources)


def answers(project: Path, sources: Sources, sql: str) -> Counter:
    con = load(project, sources)
    return Counter(tuple(norm(v) for v in row) for row in con.execute(sql).fetchall())


def api_answers(items, columns) -> Counter:
    return Counter(tuple(norm(a["binding"][c]) for c in columns) for a in items)


def pages(c, qid: str, limit: int = 100) -> list[dict]:
    """Every result item of a query, read page by page through ``GET …/results`` (a TestClient ``c``)."""
    items, after = [], 0
    while True:
        page = c.get(f"/v1/queries/{qid}/results", params={"after": after, "limit": limit}, headers=AUTH).json()
        if not page["items"]:
            return items
        items += page["items"]
        after = page["next_after"]
