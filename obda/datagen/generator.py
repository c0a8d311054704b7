"""Deterministic, seeded rows for the tables of a sources catalog.

The generator knows the turbine demo scenario (``demo/sources.yaml``): sites
host turbines, turbines carry sensors (the first sensor of every turbine is a
temperature sensor, so the data satisfies ``Turbine ⊑ ∃hasSensor.TemperatureSensor``),
and the streams ``measurement``, ``power``, ``maintenance`` and ``alarm``
report on those sensors and turbines.  Column names, order and types always
come from the sources catalog; a table or column the scenario does not know
gets values drawn from its declared type, and an integer column ``<t>_id``
refers to the ids of a static table ``<t>`` (a foreign key by convention).

Streams share one sequence of time points ``start, start + step, ...``; at
each time point every stream gets a random number of rows within its
``rows_per_timestamp`` range.  A stream whose rows report on an entity
(a sensor or turbine id) gets at most one row per entity and time point, so
the stream keys of the demo (``[sensor_id, ts]``, ``[turbine_id, ts]``) hold.
Within one time point rows come in random order (the arrival model allows any
order inside a timestamp); across time points timestamps increase.

Every table draws from its own ``random.Random`` seeded with ``(seed, table)``,
so the same seed always gives the same rows, independently of the order or
presence of other tables.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

from obda.datagen.dataset import Dataset, TableRows
from obda.model.sources import Column, ColumnType, Sources, Table

DEFAULT_START = datetime(2024, 1, 1, 0, 0, 0)
DEFAULT_STEP = timedelta(minutes=1)

#: Rows per time point of the demo streams (inclusive ranges).
DEFAULT_ROWS_PER_TIMESTAMP: Mapping[str, tuple[int, int]] = {
    "measurement": (1, 6),
    "power": (0, 3),
    "maintenance": (0, 1),
    "alarm": (0, 2),
}
#: Fallback for streams the scenario does not know.
GENERIC_ROWS_PER_TIMESTAMP = (1, 3)

#: Value ranges (inclusive) of the demo's value columns, keyed ``table.column``.
DEFAULT_VALUE_RANGES: Mapping[str, tuple[float, float]] = {
    "measurement.value": (0, 120),
    "power.output": (0.0, 5.0),
    "alarm.severity": (1, 5),
    "turbine.capacity": (1.5, 8.0),
}
#: Range of integer / numeric columns that neither the scenario nor the caller constrain.
GENERIC_VALUE_RANGE = (0, 100)

REGIONS = ("north", "south", "east", "west")
SITE_NAMES = ("Aurora", "Boreas", "Cirrus", "Delta", "Ember", "Fjord", "Granite", "Harbor")
TURBINE_KINDS = ("wind", "gas")
TURBINE_MODELS = {"wind": ("WT-3000", "WT-4500"), "gas": ("GT-900", "GT-1200")}
SENSOR_KINDS = ("temperature", "vibration", "pressure")
MAINTENANCE_KINDS = ("inspection", "repair", "replacement")

#: Which static table's ids a demo stream reports on (one row per entity and time point).
STREAM_ENTITIES = {"measurement": "sensor", "alarm": "sensor", "power": "turbine", "maintenance": "turbine"}


@dataclass(frozen=True)
class GeneratorConfig:
    """All knobs of the generator (see :func:`generate_rows`)."""

    seed: int = 0
    sites: int = 2
    turbines_per_site: int = 3
    sensors_per_turbine: int = 3
    timestamps: int = 20
    rows: int | None = None
    rows_per_timestamp: tuple[int, int] | Mapping[str, tuple[int, int]] | None = None
    value_range: tuple[float, float] | None = None
    value_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    start: datetime = DEFAULT_START
    step: timedelta = DEFAULT_STEP
    static_rows: int = 10

    def __post_init__(self) -> None:
        for name in ("sites", "turbines_per_site", "sensors_per_turbine", "static_rows"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.timestamps < 0:
            raise ValueError(f"timestamps must not be negative, got {self.timestamps}")
        if self.rows is not None and self.rows < 0:
            raise ValueError(f"rows must not be negative, got {self.rows}")
        if self.step <= timedelta(0) or self.step % timedelta(seconds=1):
            raise ValueError(f"step must be a positive whole number of seconds, got {self.step}")
        if self.start.microsecond or self.start.tzinfo is not None:
            raise ValueError("start must be a naive datetime with whole seconds")
        for lo, hi in [self.value_range] if self.value_range else []:
            _check_range("value_range", lo, hi)
        for key, (lo, hi) in self.value_ranges.items():
            if key.count(".") != 1:
                raise ValueError(f"value_ranges key {key!r} must be 'table.column'")
            _check_range(f"value_ranges[{key!r}]", lo, hi)

    def rows_range(self, table: str) -> tuple[int, int]:
        """Rows per time point of stream ``table``."""
        rpt = self.rows_per_timestamp
        per_table = {str(k).lower(): v for k, v in rpt.items()} if isinstance(rpt, Mapping) else {}
        if isinstance(rpt, (tuple, list)):
            rng = tuple(rpt)
        elif table.lower() in per_table:
            rng = tuple(per_table[table.lower()])
        else:
            rng = DEFAULT_ROWS_PER_TIMESTAMP.get(table, GENERIC_ROWS_PER_TIMESTAMP)
        if len(rng) != 2:
            raise ValueError(f"rows_per_timestamp of {table!r} must be a pair (lo, hi), got {rng}")
        lo, hi = rng
        if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 0 or hi < lo:
            raise ValueError(f"rows_per_timestamp of {table!r} must be integers 0 <= lo <= hi, got {rng}")
        return lo, hi

    def range_of(self, table: str, column: str) -> tuple[float, float]:
        """Value range of ``table.column``.

        In order: ``value_ranges["table.column"]``; ``value_range`` for
        ``measurement.value``; the scenario default; ``value_range``;
        :data:`GENERIC_VALUE_RANGE`.
        """
        key = f"{table}.{column}".lower()
        explicit = {k.lower(): v for k, v in self.value_ranges.items()}
        if key in explicit:
            return tuple(explicit[key])
        if key == "measurement.value" and self.value_range is not None:
            return tuple(self.value_range)
        if key in DEFAULT_VALUE_RANGES:
            return DEFAULT_VALUE_RANGES[key]
        if self.value_range is not None:
            return tuple(self.value_range)
        return GENERIC_VALUE_RANGE


def _check_range(what: str, lo: float, hi: float) -> None:
    if hi < lo:
        raise ValueError(f"{what}: lower bound {lo} is above upper bound {hi}")


# ----------------------------------------------------------------- static


def _rng(seed: int, table: str) -> random.Random:
    """One independent generator per table (string seeds hash with SHA-512: stable across runs)."""
    return random.Random(f"obda-datagen/{seed}/{table.lower()}")


def _decimal(x: float) -> Decimal:
    return Decimal(f"{x:.2f}")


def _generic_value(table: Table, col: Column, rng: random.Random, cfg: GeneratorConfig, ids: Mapping[str, list[int]]) -> Any:
    """A value of the column's declared type (foreign keys ``<t>_id`` draw from table ``t``'s ids)."""
    name = col.name.lower()
    if col.type is ColumnType.INTEGER and name.endswith("_id") and name[:-3] in ids and ids[name[:-3]]:
        return rng.choice(ids[name[:-3]])
    lo, hi = cfg.range_of(table.name, col.name)
    if col.type is ColumnType.INTEGER:
        return rng.randint(int(lo), int(hi))
    if col.type is ColumnType.DECIMAL:
        return _decimal(rng.uniform(lo, hi))
    if col.type is ColumnType.DOUBLE:
        return round(rng.uniform(lo, hi), 3)
    if col.type is ColumnType.BOOLEAN:
        return rng.random() < 0.5
    if col.type is ColumnType.STRING:
        return f"{col.name}-{rng.randint(1, 5)}"
    return cfg.start  # a timestamp column of a static table


def _site_row(i: int, rng: random.Random) -> dict[str, Any]:
    return {"id": i, "name": f"{rng.choice(SITE_NAMES)} {i}", "region": rng.choice(REGIONS)}


def _turbine_row(i: int, site: int, rng: random.Random, cfg: GeneratorConfig) -> dict[str, Any]:
    kind = rng.choice(TURBINE_KINDS)
    lo, hi = cfg.range_of("turbine", "capacity")
    return {
        "id": i,
        "site_id": site,
        "kind": kind,
        "model": rng.choice(TURBINE_MODELS[kind]),
        "capacity": _decimal(rng.uniform(lo, hi)),
    }


def _sensor_row(i: int, turbine: int, position: int, rng: random.Random) -> dict[str, Any]:
    kind = "temperature" if position == 0 else rng.choice(SENSOR_KINDS)
    return {"id": i, "turbine_id": turbine, "kind": kind}


def _fill(table: Table, known: Mapping[str, Any], rng: random.Random, cfg: GeneratorConfig, ids) -> tuple[Any, ...]:
    """Order the scenario's values by the sources' columns; generate the columns it does not know."""
    low = {k.lower(): v for k, v in known.items()}
    return tuple(
        low[c.name.lower()] if c.name.lower() in low else _generic_value(table, c, rng, cfg, ids) for c in table.columns
    )


def _static_rows(sources: Sources, cfg: GeneratorConfig) -> tuple[dict[str, list[tuple]], dict[str, list[int]]]:
    """Rows of the static tables and the ids of each (demo tables first, so streams can refer to them)."""
    site_ids = list(range(1, cfg.sites + 1))
    turbine_ids = list(range(1, cfg.sites * cfg.turbines_per_site + 1))
    sensor_ids = list(range(1, len(turbine_ids) * cfg.sensors_per_turbine + 1))
    ids: dict[str, list[int]] = {"site": site_ids, "turbine": turbine_ids, "sensor": sensor_ids}
    for table in sources.tables:  # ids of other static tables, known before any row refers to them
        col = table.column("id")
        if not table.is_stream and table.name.lower() not in ids and col is not None and col.type is ColumnType.INTEGER:
            ids[table.name.lower()] = list(range(1, cfg.static_rows + 1))
    out: dict[str, list[tuple]] = {}
    for table in sources.tables:
        if table.is_stream:
            continue
        rng = _rng(cfg.seed, table.name)
        name = table.name.lower()
        rows: list[tuple] = []
        if name == "site":
            rows = [_fill(table, _site_row(i, rng), rng, cfg, ids) for i in site_ids]
        elif name == "turbine":
            for i in turbine_ids:
                site = site_ids[(i - 1) // cfg.turbines_per_site]
                rows.append(_fill(table, _turbine_row(i, site, rng, cfg), rng, cfg, ids))
        elif name == "sensor":
            for i in sensor_ids:
                turbine = turbine_ids[(i - 1) // cfg.sensors_per_turbine]
                position = (i - 1) % cfg.sensors_per_turbine
                rows.append(_fill(table, _sensor_row(i, turbine, position, rng), rng, cfg, ids))
        else:
            for i in range(1, cfg.static_rows + 1):
                rows.append(_fill(table, {"id": i} if name in ids else {}, rng, cfg, ids))
        out[table.name] = rows
    return out, ids


# ----------------------------------------------------------------- streams


def _entity_column(table: Table, ids: Mapping[str, list[int]]) -> tuple[str, list[int]] | None:
    """The column whose value identifies what a stream row reports on, and the possible values.

    The demo streams report on sensors or turbines (``STREAM_ENTITIES``); other
    streams on the first integer foreign-key column ``<t>_id`` of their key,
    if any.  At most one row per entity and time point is generated.
    """
    name = table.name.lower()
    if name in STREAM_ENTITIES:
        target = STREAM_ENTITIES[name]
        col = table.column(f"{target}_id")
        if col is not None:
            return col.name, ids[target]
    for cname in table.key:
        col = table.column(cname)
        low = cname.lower()
        if col.type is ColumnType.INTEGER and low.endswith("_id") and low[:-3] in ids:
            return col.name, ids[low[:-3]]
    return None


def _stream_value(table: Table, col: Column, rng: random.Random, cfg: GeneratorConfig, ids) -> Any:
    key = f"{table.name.lower()}.{col.name.lower()}"
    if key == "maintenance.kind":
        return rng.choice(MAINTENANCE_KINDS)
    return _generic_value(table, col, rng, cfg, ids)


def _stream_batch(
    table: Table, ts: datetime, rng: random.Random, cfg: GeneratorConfig, ids: Mapping[str, list[int]]
) -> list[tuple]:
    """The rows of one stream at one time point."""
    lo, hi = cfg.rows_range(table.name)
    entity = _entity_column(table, ids)
    if entity is not None:
        col, values = entity
        n = min(rng.randint(lo, hi), len(values))
        chosen = rng.sample(values, n)
    else:
        col, chosen = None, [None] * rng.randint(lo, hi)
    rows = []
    for ent in chosen:
        row = []
        for c in table.columns:
            if c.name == table.timestamp:
                row.append(ts)
            elif col is not None and c.name == col:
                row.append(ent)
            else:
                row.append(_stream_value(table, c, rng, cfg, ids))
        rows.append(tuple(row))
    return rows


def _stream_rows(
    sources: Sources, cfg: GeneratorConfig, ids: Mapping[str, list[int]]
) -> tuple[dict[str, list[tuple]], list[datetime]]:
    """All stream rows, time point by time point.

    With ``cfg.rows`` set, time points are added until the busiest stream
    holds exactly ``cfg.rows`` rows (its last time point may be cut; the other
    streams cover the same time points); otherwise ``cfg.timestamps`` time
    points are generated.
    """
    streams = list(sources.streams)
    out: dict[str, list[tuple]] = {t.name: [] for t in streams}
    rngs = {t.name: _rng(cfg.seed, t.name) for t in streams}
    points: list[datetime] = []
    if cfg.rows and not any(cfg.rows_range(t.name)[1] > 0 for t in streams):
        raise ValueError("rows > 0 requested but no stream can produce rows (no streams, or every range is (0, 0))")
    i = 0
    while _more_points(cfg, i):
        ts = cfg.start + i * cfg.step
        points.append(ts)
        full = False
        for t in streams:
            batch = _stream_batch(t, ts, rngs[t.name], cfg, ids)
            if cfg.rows is not None and len(out[t.name]) + len(batch) >= cfg.rows:
                batch = batch[: cfg.rows - len(out[t.name])]
                full = True
            out[t.name].extend(batch)
        i += 1
        if full:
            break
    return out, points


def _more_points(cfg: GeneratorConfig, generated: int) -> bool:
    """Whether to add another time point (with ``rows`` set, the caller stops once a stream is full)."""
    return generated < cfg.timestamps if cfg.rows is None else cfg.rows > 0


def _as_sources(obj: Sources | Table | Iterable[Table]) -> Sources:
    if isinstance(obj, Sources):
        return obj
    if isinstance(obj, Table):
        return Sources((obj,))
    return Sources(tuple(obj))


def generate_rows(
    sources: Sources,
    *,
    seed: int = 0,
    sites: int = 2,
    turbines_per_site: int = 3,
    sensors_per_turbine: int = 3,
    timestamps: int = 20,
    rows: int | None = None,
    rows_per_timestamp: tuple[int, int] | Mapping[str, tuple[int, int]] | None = None,
    value_range: tuple[float, float] | None = None,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    start: datetime = DEFAULT_START,
    step: timedelta = DEFAULT_STEP,
    static_rows: int = 10,
) -> Dataset:
    """Generate the rows of every table of ``sources`` in memory.

    * ``sites``, ``turbines_per_site``, ``sensors_per_turbine``: size of the
      static demo tables (``static_rows`` rows for other static tables).
    * ``timestamps``: number of time points ``start + i*step``; or ``rows``:
      add time points until the busiest stream holds exactly ``rows`` rows
      (the other streams cover the same time points).
    * ``rows_per_timestamp``: ``(lo, hi)`` for every stream, or a mapping
      ``{stream: (lo, hi)}`` (defaults: :data:`DEFAULT_ROWS_PER_TIMESTAMP`).
      A demo stream gets at most one row per sensor/turbine and time point.
    * ``value_range``: range of ``measurement.value`` and of integer/numeric
      columns the scenario does not constrain; ``value_ranges``:
      ``{"table.column": (lo, hi)}`` for any column (wins over both).
    """
    cfg = GeneratorConfig(
        seed=seed,
        sites=sites,
        turbines_per_site=turbines_per_site,
        sensors_per_turbine=sensors_per_turbine,
        timestamps=timestamps,
        rows=rows,
        rows_per_timestamp=rows_per_timestamp,
        value_range=value_range,
        value_ranges=dict(value_ranges or {}),
        start=start,
        step=step,
        static_rows=static_rows,
    )
    return generate_dataset(sources, cfg)


def generate_dataset(sources: Sources, cfg: GeneratorConfig) -> Dataset:
    """:func:`generate_rows` with a ready :class:`GeneratorConfig`."""
    sources = _as_sources(sources)
    for t in sources.streams:
        cfg.rows_range(t.name)  # validate early, with the table name in the message
    static, ids = _static_rows(sources, cfg)
    streams, points = _stream_rows(sources, cfg, ids)
    tables = tuple(TableRows(t, tuple(streams[t.name] if t.is_stream else static[t.name])) for t in sources.tables)
    return Dataset(tables, tuple(points), cfg)


__all__: Sequence[str] = (
    "DEFAULT_START",
    "DEFAULT_STEP",
    "GeneratorConfig",
    "generate_rows",
    "generate_dataset",
)
