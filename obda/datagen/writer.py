"""Write generated rows to CSV or Parquet files, one directory per table.

Layout: ``<out_dir>/<table>/part-00000.<ext>``, ``part-00001.<ext>``, ...
Static tables get one file; every stream is split into ``files`` files in
timestamp order.  The split follows the time points shared by all streams,
so file ``i`` of every stream covers the same time range and a time point
never straddles two files (handy for micro-batch tests: feed file 0 of every
stream, then file 1, ...).

CSV: stdlib ``csv``, a header row, ``\\n`` line ends, timestamps as
``YYYY-MM-DD HH:MM:SS``, decimals as written by ``Decimal``, doubles as
Python's shortest round-trip repr, booleans as ``true``/``false``.
Parquet (pyarrow): int64, decimal128(18, 2), float64, string, bool and
timestamp[us] columns.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from obda.datagen.dataset import Dataset, TableRows, format_timestamp
from obda.datagen.generator import DEFAULT_START, DEFAULT_STEP, generate_rows
from obda.errors import Location, ObdaError, SourcesError
from obda.model.sources import Column, ColumnType, Sources, TableKind
from obda.model.sources_file import load_sources

FORMATS = ("csv", "parquet")
_EXT = {"csv": "csv", "parquet": "parquet"}


@dataclass(frozen=True)
class GeneratedTable:
    """What was written for one table."""

    name: str
    kind: TableKind
    columns: tuple[Column, ...]
    directory: Path
    paths: tuple[Path, ...]
    rows: int
    rows_per_file: tuple[int, ...]


@dataclass(frozen=True)
class GeneratedData:
    """The result of :func:`generate`: files written and row counts per table."""

    out_dir: Path
    format: str
    seed: int
    tables: tuple[GeneratedTable, ...]
    dataset: Dataset = field(repr=False)

    def table(self, name: str) -> GeneratedTable:
        for t in self.tables:
            if t.name.lower() == name.lower():
                return t
        raise KeyError(name)

    @property
    def row_counts(self) -> dict[str, int]:
        return {t.name: t.rows for t in self.tables}

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p for t in self.tables for p in t.paths)

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """One line per table, for the CLI."""
        lines = [f"wrote {self.format} to {self.out_dir} (seed {self.seed})"]
        for t in self.tables:
            lines.append(f"  {t.name:<12} {t.kind.value:<6} {t.rows:>8} rows in {len(t.paths)} file(s)")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProjectPaths:
    """What the generator needs from a project file: the sources file and the data folder."""

    project_dir: Path
    sources: Path
    data_dir: Path


def read_project_paths(project_dir: str | Path) -> ProjectPaths:
    """Read ``project.yaml`` of ``project_dir`` (keys ``sources`` and ``data``, relative to the folder)."""
    d = Path(project_dir)
    pfile = d / "project.yaml"
    try:
        doc = yaml.safe_load(pfile.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise SourcesError(f"cannot read project file: {e.strerror}", Location(str(pfile))) from e
    except yaml.YAMLError as e:
        raise SourcesError(f"project file is not valid YAML: {e}", Location(str(pfile))) from e
    if not isinstance(doc, dict) or "sources" not in doc:
        raise SourcesError("project file has no 'sources:' entry (the sources file)", Location(str(pfile)))
    return ProjectPaths(d, d / str(doc["sources"]), d / str(doc.get("data", "data")))


def _resolve(project_dir_or_sources: str | Path | Sources) -> tuple[Sources, Path | None]:
    """Sources and, for a project folder, its data folder."""
    if isinstance(project_dir_or_sources, Sources):
        return project_dir_or_sources, None
    p = Path(project_dir_or_sources)
    if p.is_dir():
        paths = read_project_paths(p)
        return load_sources(paths.sources), paths.data_dir
    return load_sources(p), None


def split_points(n: int, files: int) -> list[tuple[int, int]]:
    """Split ``range(n)`` into ``files`` contiguous chunks (the first ``n % files`` one longer)."""
    if files < 1:
        raise ValueError(f"files must be at least 1, got {files}")
    base, extra = divmod(n, files)
    out, lo = [], 0
    for i in range(files):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def _chunks(t: TableRows, points: Sequence[datetime], files: int) -> list[list[tuple]]:
    """The rows of each file: static tables in one file, streams by time-point chunks."""
    if not t.table.is_stream:
        return [list(t.rows)]
    idx = [i for i, c in enumerate(t.columns) if c.name == t.table.timestamp][0]
    bounds = split_points(len(points), files)
    out: list[list[tuple]] = [[] for _ in bounds]
    chunk_of = {}
    for k, (lo, hi) in enumerate(bounds):
        for j in range(lo, hi):
            chunk_of[points[j]] = k
    for row in t.rows:
        out[chunk_of[row[idx]]].append(row)
    return out


def csv_text(value: Any) -> str:
    """How one value is written to CSV."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _write_csv(path: Path, columns: Sequence[Column], rows: Sequence[tuple]) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([c.name for c in columns])
        for r in rows:
            w.writerow([csv_text(v) for v in r])


def arrow_schema(columns: Sequence[Column]):
    """The pyarrow schema of a table (see the module docstring for the type mapping)."""
    import pyarrow as pa

    types = {
        ColumnType.INTEGER: pa.int64(),
        ColumnType.DECIMAL: pa.decimal128(18, 2),
        ColumnType.DOUBLE: pa.float64(),
        ColumnType.STRING: pa.string(),
        ColumnType.BOOLEAN: pa.bool_(),
        ColumnType.TIMESTAMP: pa.timestamp("us"),
    }
    return pa.schema([pa.field(c.name, types[c.type], nullable=False) for c in columns])


def _write_parquet(path: Path, columns: Sequence[Column], rows: Sequence[tuple]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(columns)
    arrays = [pa.array([r[i] for r in rows], type=schema.field(i).type) for i in range(len(columns))]
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)


def _clear_old_parts(directory: Path) -> None:
    """Remove part files of an earlier run (only files this writer names ``part-NNNNN.*``)."""
    for old in directory.glob("part-*"):
        if old.is_file() and old.suffix.lstrip(".") in _EXT.values():
            old.unlink()


def write_dataset(dataset: Dataset, out_dir: str | Path, *, format: str = "csv", files: int = 1) -> tuple[GeneratedTable, ...]:
    """Write every table of ``dataset`` below ``out_dir`` (see the module docstring)."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    split_points(0, files)  # validates files
    out = Path(out_dir)
    written = []
    for t in dataset.tables:
        directory = out / t.name
        directory.mkdir(parents=True, exist_ok=True)
        _clear_old_parts(directory)
        paths, counts = [], []
        for k, rows in enumerate(_chunks(t, dataset.time_points, files)):
            path = directory / f"part-{k:05d}.{_EXT[format]}"
            if format == "csv":
                _write_csv(path, t.columns, rows)
            else:
                _write_parquet(path, t.columns, rows)
            paths.append(path)
            counts.append(len(rows))
        written.append(
            GeneratedTable(t.name, t.table.kind, t.columns, directory, tuple(paths), len(t.rows), tuple(counts))
        )
    return tuple(written)


def generate(
    project_dir_or_sources: str | Path | Sources,
    out_dir: str | Path | None = None,
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
    format: str = "csv",
    files: int = 1,
) -> GeneratedData:
    """Generate data for a project folder, a sources file or a :class:`Sources` and write it.

    ``out_dir`` defaults to the project's data folder (``data:`` of
    ``project.yaml``).  Same arguments and seed → byte-identical files.
    The generation knobs are those of :func:`obda.datagen.generate_rows`;
    ``format`` is ``csv`` or ``parquet``; ``files`` splits every stream into
    that many files in timestamp order.
    """
    sources, data_dir = _resolve(project_dir_or_sources)
    if out_dir is None:
        if data_dir is None:
            raise ValueError("out_dir is required unless a project folder (with a data: entry) is given")
        out_dir = data_dir
    dataset = generate_rows(
        sources,
        seed=seed,
        sites=sites,
        turbines_per_site=turbines_per_site,
        sensors_per_turbine=sensors_per_turbine,
        timestamps=timestamps,
        rows=rows,
        rows_per_timestamp=rows_per_timestamp,
        value_range=value_range,
        value_ranges=value_ranges,
        start=start,
        step=step,
    )
    tables = write_dataset(dataset, out_dir, format=format, files=files)
    return GeneratedData(Path(out_dir), format, seed, tables, dataset)


def main_generate(
    project_dir: str | Path,
    rows: int,
    seed: int = 0,
    *,
    format: str | None = None,
    files: int = 1,
    out_dir: str | Path | None = None,
) -> GeneratedData:
    """The ``obda generate --project DIR --rows N --seed S`` command.

    Writes the demo tables into the project's data folder (or ``out_dir``):
    the busiest stream gets exactly ``rows`` rows, the others the rows of the
    same time points.  Invalid arguments raise :class:`ObdaError`.  ``format`` defaults to the format the sources
    declare when all tables agree (csv or parquet), else csv.
    """
    try:
        sources, _ = _resolve(Path(project_dir))
        if format is None:
            declared = sorted({t.format for t in sources.tables} - {None})
            format = declared[0] if len(declared) == 1 and declared[0] in FORMATS else "csv"
        return generate(project_dir, out_dir, seed=seed, rows=rows, format=format, files=files)
    except ValueError as e:  # bad arguments: report them like every other user error
        raise ObdaError(f"cannot generate data: {e}", Location(str(project_dir))) from e
