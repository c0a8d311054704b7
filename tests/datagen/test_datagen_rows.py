"""In-memory generation (obda.datagen.generate_rows): determinism, sizes, ranges, time order, keys."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obda.datagen import Dataset, generate_rows
from obda.datagen.generator import DEFAULT_ROWS_PER_TIMESTAMP
from obda.model.sources import ColumnType
from obda.model.sources_file import load_sources, parse_sources

ROOT = Path(__file__).resolve().parents[2]
SOURCES = load_sources(ROOT / "demo" / "sources.yaml")

PY_TYPES = {
    ColumnType.INTEGER: int,
    ColumnType.DECIMAL: Decimal,
    ColumnType.DOUBLE: float,
    ColumnType.STRING: str,
    ColumnType.BOOLEAN: bool,
    ColumnType.TIMESTAMP: datetime,
}


def per_timestamp_counts(data: Dataset, stream: str) -> Counter:
    return Counter(data.table(stream).timestamps())


def check_invariants(data: Dataset, *, sites, tps, spt, rows_range=None) -> None:
    """Properties every generated dataset of the demo sources must have."""
    n_turbines, n_sensors = sites * tps, sites * tps * spt
    assert len(data.rows("site")) == sites
    assert len(data.rows("turbine")) == n_turbines
    assert len(data.rows("sensor")) == n_sensors
    site_ids = set(data.table("site").column_values("id"))
    turbine_ids = set(data.table("turbine").column_values("id"))
    sensor_ids = set(data.table("sensor").column_values("id"))
    assert len(site_ids) == sites and len(turbine_ids) == n_turbines and len(sensor_ids) == n_sensors
    # foreign keys of the static tables
    assert set(data.table("turbine").column_values("site_id")) <= site_ids
    assert set(data.table("sensor").column_values("turbine_id")) <= turbine_ids
    entity = {"measurement": ("sensor_id", sensor_ids), "alarm": ("sensor_id", sensor_ids),
              "power": ("turbine_id", turbine_ids), "maintenance": ("turbine_id", turbine_ids)}
    points = list(data.time_points)
    assert points == sorted(points) and len(set(points)) == len(points)
    for t in data.tables:
        # every value has the Python type of its declared column type
        for row in t.rows:
            assert len(row) == len(t.columns)
            for v, c in zip(row, t.columns):
                assert type(v) is PY_TYPES[c.type], (t.name, c.name, v)
        if not t.table.is_stream:
            continue
        ts = t.timestamps()
        assert ts == sorted(ts), f"{t.name}: timestamps must not decrease"
        assert set(ts) <= set(points)
        col, ids = entity[t.name]
        values = t.column_values(col)
        assert set(values) <= ids, f"{t.name}.{col} refers to unknown ids"
        # the declared stream key holds
        assert len(set(zip(values, ts))) == len(ts), f"{t.name}: key {t.table.key} violated"
        lo, hi = rows_range or DEFAULT_ROWS_PER_TIMESTAMP[t.name]
        counts = per_timestamp_counts(data, t.name)
        for p in points:
            assert min(lo, len(ids)) <= counts.get(p, 0) <= min(hi, len(ids)), (t.name, p, counts.get(p, 0))


def test_demo_sources_shape():
    assert {t.name for t in SOURCES.streams} == {"measurement", "power", "maintenance", "alarm"}
    assert {t.name for t in SOURCES.tables if not t.is_stream} == {"site", "turbine", "sensor"}
    dense = [c for t in SOURCES.streams for c in t.columns if c.type in (ColumnType.DOUBLE, ColumnType.DECIMAL, ColumnType.STRING)]
    assert dense, "a stream needs a dense column (double/decimal/string)"
    assert SOURCES.table("measurement").column("value").type is ColumnType.INTEGER
    for t in SOURCES.tables:
        assert t.key, f"{t.name} declares a key"
        assert t.location == f"data/{t.name}" and t.format == "csv"


def test_same_seed_same_rows_different_seed_different_rows():
    a = generate_rows(SOURCES, seed=5)
    b = generate_rows(SOURCES, seed=5)
    c = generate_rows(SOURCES, seed=6)
    assert a.as_dict() == b.as_dict()
    assert a.rows("measurement") != c.rows("measurement")
    assert a.time_points == c.time_points


def test_default_dataset_invariants():
    data = generate_rows(SOURCES, seed=1)
    check_invariants(data, sites=2, tps=3, spt=3)
    assert len(data.time_points) == 20
    assert data.time_points[0] == datetime(2024, 1, 1)
    assert data.time_points[1] - data.time_points[0] == timedelta(minutes=1)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    sites=st.integers(1, 3),
    tps=st.integers(1, 3),
    spt=st.integers(1, 4),
    timestamps=st.integers(0, 15),
    lo=st.integers(0, 3),
    width=st.integers(0, 4),
)
def test_invariants_hold_for_any_parameters(seed, sites, tps, spt, timestamps, lo, width):
    data = generate_rows(
        SOURCES, seed=seed, sites=sites, turbines_per_site=tps, sensors_per_turbine=spt,
        timestamps=timestamps, rows_per_timestamp=(lo, lo + width),
    )
    assert len(data.time_points) == timestamps
    check_invariants(data, sites=sites, tps=tps, spt=spt, rows_range=(lo, lo + width))


def test_per_stream_rows_per_timestamp():
    data = generate_rows(SOURCES, seed=2, timestamps=30, rows_per_timestamp={"measurement": (4, 4), "alarm": (0, 0)})
    assert all(n == 4 for n in per_timestamp_counts(data, "measurement").values())
    assert len(data.rows("measurement")) == 4 * 30
    assert data.rows("alarm") == ()
    # streams not named keep their defaults
    assert 0 < len(data.rows("power")) <= 3 * 30


def test_value_ranges_are_respected():
    data = generate_rows(
        SOURCES, seed=3, timestamps=60, value_range=(10, 12),
        value_ranges={"alarm.severity": (2, 3), "power.output": (1.25, 1.5), "turbine.capacity": (2, 3)},
    )
    values = data.table("measurement").column_values("value")
    assert set(values) == {10, 11, 12}  # 60 time points: every value of a 3-value range occurs
    assert set(data.table("alarm").column_values("severity")) <= {2, 3}
    assert all(1.25 <= o <= 1.5 for o in data.table("power").column_values("output"))
    assert all(Decimal(2) <= c <= Decimal(3) for c in data.table("turbine").column_values("capacity"))


def test_default_ranges_cover_the_catalog_filters():
    """The demo data makes the catalog's filters selective but not empty."""
    data = generate_rows(SOURCES, seed=0, timestamps=50)
    values = data.table("measurement").column_values("value")
    assert min(values) >= 0 and max(values) <= 120
    assert any(v > 100 for v in values) and any(v <= 90 for v in values)
    sev = data.table("alarm").column_values("severity")
    assert set(sev) == {1, 2, 3, 4, 5}
    assert {"temperature", "vibration", "pressure"} <= set(data.table("sensor").column_values("kind"))
    assert set(data.table("turbine").column_values("kind")) == {"wind", "gas"}


def test_data_satisfies_the_ontology_axioms():
    """Every turbine has a temperature sensor, every site hosts a turbine, every sensor belongs to a turbine."""
    data = generate_rows(SOURCES, seed=9, sites=3, turbines_per_site=2, sensors_per_turbine=2)
    temp = defaultdict(set)
    for sid, tid, kind in data.rows("sensor"):
        temp[tid].add(kind)
    assert all("temperature" in temp[t] for t in data.table("turbine").column_values("id"))
    assert set(data.table("turbine").column_values("site_id")) == set(data.table("site").column_values("id"))


def test_rows_mode_fills_the_busiest_stream_exactly():
    data = generate_rows(SOURCES, seed=4, rows=250)
    counts = data.row_counts
    assert max(counts[t.name] for t in SOURCES.streams) == 250
    assert counts["measurement"] == 250
    # all streams cover the same time points
    last = data.time_points[-1]
    assert max(data.table("measurement").timestamps()) == last
    assert all(max(data.table(s).timestamps()) <= last for s in ("power", "alarm", "maintenance"))
    assert generate_rows(SOURCES, seed=4, rows=0).row_counts["measurement"] == 0


def test_start_and_step():
    start = datetime(2023, 12, 31, 23, 59, 0)
    data = generate_rows(SOURCES, seed=1, timestamps=3, start=start, step=timedelta(seconds=30))
    assert data.time_points == (start, start + timedelta(seconds=30), start + timedelta(seconds=60))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"step": timedelta(0)},
        {"step": timedelta(milliseconds=500)},
        {"start": datetime(2024, 1, 1, 0, 0, 0, 5)},
        {"rows_per_timestamp": (3, 1)},
        {"rows_per_timestamp": (-1, 1)},
        {"value_range": (5, 1)},
        {"value_ranges": {"measurement": (0, 1)}},
        {"sites": 0},
        {"timestamps": -1},
        {"rows": -5},
    ],
)
def test_invalid_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        generate_rows(SOURCES, **kwargs)


def test_rows_without_producing_streams_is_an_error():
    with pytest.raises(ValueError, match="no stream can produce rows"):
        generate_rows(SOURCES, rows=10, rows_per_timestamp=(0, 0))


GENERIC = """
tables:
  device:
    kind: static
    columns: {id: integer, label: string, active: boolean, installed: timestamp, price: decimal}
    key: [id]
  reading:
    kind: stream
    timestamp: at
    columns: {device_id: integer, x: double, n: integer, note: string, at: timestamp}
    key: [device_id, at]
"""


def test_generic_tables_follow_their_declared_types():
    sources = parse_sources(GENERIC)
    data = generate_rows(sources, seed=1, timestamps=10, static_rows=4, rows_per_timestamp=(2, 4), value_range=(0, 9))
    assert len(data.rows("device")) == 4
    for row in data.rows("device"):
        assert [type(v) for v in row] == [int, str, bool, datetime, Decimal]
    reading = data.table("reading")
    assert set(reading.column_values("device_id")) <= {1, 2, 3, 4}
    assert all(0 <= n <= 9 for n in reading.column_values("n"))
    assert len(set(zip(reading.column_values("device_id"), reading.timestamps()))) == len(reading.rows)
    assert generate_rows(sources, seed=1, timestamps=10).as_dict() == generate_rows(sources, seed=1, timestamps=10).as_dict()


def test_a_table_does_not_depend_on_other_tables():
    """Each table has its own random stream: dropping a table leaves the others unchanged."""
    only = parse_sources(
        "tables:\n"
        "  measurement: {kind: stream, timestamp: ts, columns: {sensor_id: integer, value: integer, ts: timestamp}}\n"
        "  sensor: {kind: static, columns: {id: integer, turbine_id: integer, kind: string}}\n"
    )
    full = generate_rows(SOURCES, seed=8)
    part = generate_rows(only, seed=8)
    assert part.rows("measurement") == full.rows("measurement")
    assert part.rows("sensor") == full.rows("sensor")


def test_foreign_keys_to_a_static_table_declared_later():
    sources = parse_sources(
        "tables:\n"
        "  part: {kind: static, columns: {id: integer, machine_id: integer}}\n"
        "  machine: {kind: static, columns: {id: integer, name: string}}\n"
    )
    data = generate_rows(sources, seed=1, static_rows=3)
    assert set(data.table("part").column_values("machine_id")) <= {1, 2, 3}
    assert data.table("machine").column_values("id") == [1, 2, 3]
