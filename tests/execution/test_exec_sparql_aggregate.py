"""SPARQL aggregate queries (catalogs/aggregates.yaml) run continuously: the changelog, replayed after
every closed timestamp, equals DuckDB running the query's SQL over the rows so far (issue 15, item 2).

The data is the demo project's generator with random rows per timestamp, split at random into
micro-batches.  The SQL is obda's own compilation of the query (GROUP BY over the unfolded pattern),
which ``tests/integration/test_aggregate_catalog.py`` checks against pyoxigraph (W3C SPARQL).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from execution.exec_harness import (Oracle, check_emitted_at, data_timestamps, demo_world, replay_changelog,
                                    with_gaps, write_seed)
from obda.catalog import load_catalog
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from seeds import seed_sets

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = load_catalog(ROOT / "catalogs" / "aggregates.yaml")
BOUNDED = [e for e in ENTRIES if e.expected == "bounded"]


def norm(v):
    if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
        return round(float(v), 6)
    if isinstance(v, dt.datetime):  # a grouped time (GROUP BY ?t): xsd:dateTime's canonical text, as obda writes it
        text = v.isoformat()
        return text.rstrip("0").rstrip(".") if "." in text else text
    return v


def seed_data(src, seed: int):
    """The demo's rows, 0 to 4 per stream and minute (timestamps where no row matches a pattern), with gaps of
    up to 12 minutes, longer than the windows (rows leave a window with no new rows coming)."""
    streams, statics = demo_world(src, seed, timestamps=random.Random(seed).randint(4, 12), rows_per_timestamp=(0, 4))
    return with_gaps(streams, seed, chance=0.3, longest=dt.timedelta(minutes=12)), statics


def sql_at(sql: str, now) -> str:
    """The query's SQL run at closed timestamp ``now``: a window's CURRENT_TIMESTAMP is ``now`` (NOW())."""
    if "CURRENT_TIMESTAMP" not in sql.upper():
        return sql
    import sqlglot
    from sqlglot import exp

    lit = exp.cast(exp.Literal.string(now.isoformat(sep=" ")), "TIMESTAMP")
    tree = sqlglot.parse_one(sql, read="spark")
    return tree.transform(lambda n: lit.copy() if isinstance(n, exp.CurrentTimestamp) else n).sql(dialect="spark")


def oracle_sql(comp) -> str:
    """The compiled SQL the oracle runs. A pattern that can never match compiles to ``SELECT CAST(NULL AS STRING)
    AS v … WHERE 1 = 0``, which Spark sums (casting) but DuckDB refuses (``sum(VARCHAR)``): its NULLs are typed
    as numbers here (the columns are never read: there is no row)."""
    sql = comp.to_sql("spark")
    return sql.replace("CAST(NULL AS STRING)", "CAST(NULL AS DOUBLE)") if "WHERE 1 = 0" in sql else sql


def run_and_check(demo, tmp_path, entry, seeds, spark=None) -> tuple[int, int]:
    """Run ``entry`` (``name``, ``query``) over every seed; check that every line is at a timestamp of the
    query's data, and the replayed changelog at every such timestamp (at every timestamp of the data when
    the query reads no stream: its lines, at null, hold at any time). Returns the timestamps checked and
    the delete lines seen."""
    comp = demo.compile(entry.query)
    sql = oracle_sql(comp)
    checked = deletes = 0
    for seed in seeds:
        streams, statics = seed_data(demo.sources, seed)
        base = tmp_path / f"{entry.name}-{seed}"
        located = write_seed(base, demo.sources, streams, statics, seed)
        out = base / "changelog.jsonl"
        q = ContinuousQuery(plan_execution(comp, located), base_dir=base, sink=JsonLinesSink(out),
                            backend="local" if spark is None else "spark", spark=spark,
                            max_files_per_batch=1 + seed % 3)
        q.run_until_exhausted()
        q.close()
        records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        assert q.metrics.rows_out == len(records)
        deletes += sum(r["op"] == "delete" for r in records)
        markers = data_timestamps(q, demo.sources, streams)
        oracle = Oracle(demo.sources, streams, statics)
        for m in markers or sorted({r[t.timestamp] for t in demo.sources.streams for r in streams[t.name]}):
            want = Counter(tuple(norm(v) for v in row) for row in oracle.answers(sql_at(sql, m), m).elements())
            assert replay_changelog(records, q, m, norm) == want, (entry.name, seed, m)
            checked += 1
        check_emitted_at(records, q, markers)
    return checked, deletes


@seed_sets()
@pytest.mark.parametrize("entry", BOUNDED, ids=lambda e: e.name)
def test_changelog_replayed_after_every_timestamp_equals_duckdb(demo, tmp_path, entry, seeds):
    checked, deletes = run_and_check(demo, tmp_path, entry, seeds)
    assert checked > len(seeds)
    if "HAVING" in entry.query or ("NOW()" in entry.query and "GROUP BY" in entry.query):
        assert deletes > 0  # a group leaves the answer when HAVING stops holding, or its window empties


# the Spark backend in the default run: one entry per kind of aggregate plan — C3's MAX over a join, a window AVG,
# HAVING, an aggregate of an expression, an aggregate subquery filtered in a window, a window grouped by its
# time (a holistic window: in
# test_exec_aggregate; an interval join: in test_exec_distributed); -m slow: every entry (an interval join, a join
# after maintenance, computed values, SAMPLE, a static join, the global group, GROUP_CONCAT too), and on more seeds
# below (the local backend runs every entry above)
SPARK_DEFAULT = {"max_reading_after_maintenance_c3", "mean_per_sensor_last_3_minutes", "busy_sensors_having",
                 "fahrenheit_per_sensor_aggregating_an_expression", "alarm_bursts_filtered_subquery",
                 "total_output_per_timestamp_last_5_minutes"}


@pytest.mark.spark
@pytest.mark.parametrize("entry", [pytest.param(e, marks=() if e.name in SPARK_DEFAULT else pytest.mark.slow)
                                   for e in BOUNDED], ids=lambda e: e.name)
def test_spark_backend_changelog_equals_duckdb(spark, demo, tmp_path, entry):
    assert run_and_check(demo, tmp_path, entry, range(1), spark)[0] > 0


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("entry", BOUNDED, ids=lambda e: e.name)
def test_spark_backend_changelog_equals_duckdb_on_more_seeds(spark, demo, tmp_path, entry):
    assert run_and_check(demo, tmp_path, entry, range(1, 5), spark)[0] > 0


def test_catalog_has_the_shapes_the_issue_lists():
    """Single stream, stream with static data, two streams in time order, HAVING, COUNT DISTINCT on a bounded
    attribute, MIN/MAX under C3, a global aggregate, expressions over aggregates, interval joins."""
    texts = {e.name: " ".join(e.query.split()) for e in BOUNDED}
    assert any("HAVING" in t for t in texts.values())
    assert any("COUNT(DISTINCT" in t for t in texts.values())
    assert any("GROUP_CONCAT(DISTINCT" in t for t in texts.values()) and any("GROUP_CONCAT(?" in t for t in texts.values())
    assert any("GROUP BY" not in t for t in texts.values())
    assert any("?t1 < ?t2" in t and "MAX(" in t for t in texts.values())
    assert any("SUM(?v) / COUNT(?v)" in t for t in texts.values())
    assert sum("NOW()" in t for t in texts.values()) >= 3  # sliding windows
    assert sum('?t1 + "PT' in t for t in texts.values()) >= 2  # interval joins (one symmetric: no order)
    assert len(BOUNDED) >= 15


def _state(demo, tmp_path, name: str, timestamps: int, allow_unbounded: bool = False) -> tuple[int, int]:
    """Run a catalog query over ``timestamps`` minutes of demo data at a fixed rate (3 rows per stream
    and timestamp, values spread widely); its largest state (entries) and the aggregate's final size."""
    entry = next(e for e in ENTRIES if e.name == name)
    src = demo.sources
    streams, statics = demo_world(src, 1, timestamps=timestamps, rows_per_timestamp=(3, 3), value_range=(0, 10**6))
    base = tmp_path / f"{name}-{timestamps}"
    located = write_seed(base, src, streams, statics, 1)
    q = ContinuousQuery(plan_execution(demo.compile(entry.query), located), base_dir=base, sink=JsonLinesSink(base / "o.jsonl"),
                        backend="local", allow_unbounded=allow_unbounded, max_files_per_batch=2)
    q.run_until_exhausted()
    q.close()
    return q.metrics.max_state_entries, q.aggregate.size


def test_state_flat_for_bounded_and_window_queries_and_growing_for_an_unbounded_one(demo, tmp_path):
    """Issue 15, item 3: from 1x to 10x input at a fixed rate, a bounded aggregate's state and a window's
    state stay flat; so does GROUP BY ?t's (Rule 9: its groups are dropped when their timestamp closes); the
    unbounded GROUP BY ?v (run with the opt-in) grows with the stream."""
    sizes = {}
    for name, unbounded in (("readings_per_sensor", False), ("mean_per_sensor_last_3_minutes", False),
                            ("reading_values_last_minute", False), ("total_output_per_timestamp", False),
                            ("readings_per_value_unbounded", True)):
        sizes[name] = [_state(demo, tmp_path, name, n, unbounded) for n in (20, 200)]
        print(f"{name}: (peak state, final aggregate entries) at 1x, 10x = {sizes[name]}")  # -s
    sensors = 8
    for name in ("readings_per_sensor", "mean_per_sensor_last_3_minutes", "reading_values_last_minute",
                 "total_output_per_timestamp"):
        (peak1, end1), (peak10, end10) = sizes[name]
        assert peak10 <= peak1 + 2 and end10 <= end1 + 2, (name, sizes[name])
    assert sizes["readings_per_sensor"][1][1] == sensors  # one entry per group
    assert sizes["total_output_per_timestamp"][1][1] == 0  # every group written and dropped
    assert sizes["mean_per_sensor_last_3_minutes"][1][1] <= sensors * 3  # panes: groups × timestamps in the window
    (_, end1), (_, end10) = sizes["readings_per_value_unbounded"]
    assert end10 >= 5 * end1, sizes["readings_per_value_unbounded"]
