"""Files written by obda.datagen.generate: bytes, read-back (csv, pyarrow, DuckDB), splitting, CLI hook."""

from __future__ import annotations

import csv
import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from obda.datagen import generate, generate_rows, main_generate
from obda.datagen.writer import split_points
from obda.errors import ObdaError
from obda.model.sources import ColumnType
from obda.model.sources_file import load_sources

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"
SOURCES = load_sources(DEMO / "sources.yaml")

PARSE = {
    ColumnType.INTEGER: int,
    ColumnType.DECIMAL: Decimal,
    ColumnType.DOUBLE: float,
    ColumnType.STRING: str,
    ColumnType.BOOLEAN: lambda s: {"true": True, "false": False}[s],
    ColumnType.TIMESTAMP: lambda s: datetime.strptime(s, "%Y-%m-%d %H:%M:%S"),
}
ARROW = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.DECIMAL: pa.decimal128(18, 2),
    ColumnType.DOUBLE: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.TIMESTAMP: pa.timestamp("us"),
}


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def read_csv_rows(path: Path, table) -> list[tuple]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        assert header == [c.name for c in table.columns]
        return [tuple(PARSE[c.type](v) for v, c in zip(row, table.columns)) for row in reader]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_same_seed_gives_byte_identical_files(tmp_path, fmt):
    a = generate(DEMO, tmp_path / "a", seed=7, format=fmt, files=3)
    b = generate(DEMO, tmp_path / "b", seed=7, format=fmt, files=3)
    c = generate(DEMO, tmp_path / "c", seed=8, format=fmt, files=3)
    ta, tb, tc = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b"), tree_bytes(tmp_path / "c")
    assert ta == tb
    assert len(ta) == 3 + 4 * 3  # one file per static table, three per stream
    assert ta.keys() == tc.keys() and ta != tc
    assert ta[f"measurement/part-00000.{fmt}"] != tc[f"measurement/part-00000.{fmt}"]
    assert a.row_counts == b.row_counts


def test_csv_reads_back_with_declared_columns_and_types(tmp_path):
    gen = generate(DEMO, tmp_path, seed=3, files=2)
    for t in gen.tables:
        table = SOURCES.table(t.name)
        rows = [r for p in t.paths for r in read_csv_rows(p, table)]
        assert rows == list(gen.dataset.rows(t.name)), t.name
        assert len(rows) == t.rows == sum(t.rows_per_file)
    text = (tmp_path / "measurement" / "part-00000.csv").read_text()
    assert text.startswith("sensor_id,value,ts\n") and "\r" not in text
    assert "2024-01-01 00:00:00" in text


def test_parquet_reads_back_with_declared_columns_and_types(tmp_path):
    gen = generate(DEMO, tmp_path, seed=3, format="parquet", files=2)
    for t in gen.tables:
        table = SOURCES.table(t.name)
        parts = [pq.read_table(p) for p in t.paths]
        for part in parts:
            assert part.schema.names == [c.name for c in table.columns]
            assert [f.type for f in part.schema] == [ARROW[c.type] for c in table.columns]
        rows = [tuple(r.values()) for part in parts for r in part.to_pylist()]
        assert rows == list(gen.dataset.rows(t.name)), t.name


def test_duckdb_reads_the_files_as_the_in_memory_rows(tmp_path):
    """Differential: an independent CSV reader (DuckDB) sees exactly the rows load_into inserts."""
    gen = generate(DEMO, tmp_path, seed=12, files=4)
    con = duckdb.connect()
    gen.dataset.load_into(con, "duckdb")
    for t in SOURCES.tables:
        types = {c.name: {"integer": "BIGINT", "decimal": "DECIMAL(18,2)", "double": "DOUBLE", "string": "VARCHAR",
                          "timestamp": "TIMESTAMP"}[c.type.value] for c in t.columns}
        cols = ", ".join(f'"{c.name}"' for c in t.columns)
        from_files = con.execute(
            f"SELECT {cols} FROM read_csv(?, header=true, columns=?) ORDER BY ALL", [str(tmp_path / t.name / "*.csv"), types]
        ).fetchall()
        loaded = con.execute(f'SELECT {cols} FROM "{t.name}" ORDER BY ALL').fetchall()
        assert from_files == loaded, t.name
        assert len(loaded) == gen.row_counts[t.name]
    # referential integrity and stream keys, checked in SQL
    assert con.execute("SELECT count(*) FROM measurement m LEFT JOIN sensor s ON m.sensor_id = s.id WHERE s.id IS NULL").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM (SELECT sensor_id, ts FROM alarm GROUP BY ALL HAVING count(*) > 1)").fetchone() == (0,)


def test_sqlite_load(tmp_path):
    import sqlite3

    data = generate_rows(SOURCES, seed=2)
    con = sqlite3.connect(":memory:")
    data.load_into(con, "sqlite")
    n = con.execute("SELECT count(*) FROM measurement WHERE ts >= '2024-01-01 00:10:00'").fetchone()[0]
    assert n == sum(1 for r in data.rows("measurement") if r[2] >= datetime(2024, 1, 1, 0, 10))
    with pytest.raises(ValueError):
        data.load_into(con, "postgres")


@pytest.mark.parametrize("files", [1, 2, 3, 7, 25])
def test_streams_split_in_timestamp_order(tmp_path, files):
    gen = generate(DEMO, tmp_path, seed=4, timestamps=20, files=files)
    points = gen.dataset.time_points
    for t in gen.tables:
        if t.kind.value == "static":
            assert len(t.paths) == 1
            continue
        assert len(t.paths) == files
        table = SOURCES.table(t.name)
        per_file = [[r[-1] for r in read_csv_rows(p, table)] for p in t.paths]
        flat = [ts for chunk in per_file for ts in chunk]
        assert flat == sorted(flat), f"{t.name}: timestamps must not decrease across files"
        assert [len(c) for c in per_file] == list(t.rows_per_file)
        # file k holds exactly the time points of chunk k (shared by all streams)
        for (lo, hi), chunk in zip(split_points(len(points), files), per_file):
            assert set(chunk) <= set(points[lo:hi])


def test_split_points():
    assert split_points(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_points(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    with pytest.raises(ValueError):
        split_points(5, 0)


def test_regenerating_removes_stale_parts(tmp_path):
    generate(DEMO, tmp_path, seed=1, files=5)
    gen = generate(DEMO, tmp_path, seed=1, files=2)
    assert sorted(p.name for p in (tmp_path / "alarm").iterdir()) == ["part-00000.csv", "part-00001.csv"]
    assert gen.table("alarm").paths == tuple(sorted((tmp_path / "alarm").iterdir()))


def test_generate_accepts_a_sources_file_or_object(tmp_path):
    a = generate(DEMO / "sources.yaml", tmp_path / "a", seed=1)
    b = generate(SOURCES, tmp_path / "b", seed=1)
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    with pytest.raises(ValueError, match="out_dir"):
        generate(SOURCES, None)
    assert a.format == "csv" and b.out_dir == tmp_path / "b"


def test_main_generate_writes_into_the_project_data_folder(tmp_path):
    project = tmp_path / "demo"
    project.mkdir()
    for name in ("project.yaml", "sources.yaml"):
        shutil.copy(DEMO / name, project / name)
    gen = main_generate(project, rows=300, seed=5)
    assert gen.out_dir == project / "data"
    assert gen.row_counts["measurement"] == 300
    # every table's location (relative to the project folder) is where its files are
    for t in SOURCES.tables:
        assert sorted((project / t.location).glob("*.csv")) == list(gen.table(t.name).paths)
    assert "measurement" in str(gen) and "300 rows" in str(gen)
    with pytest.raises(ObdaError, match="rows must not be negative"):
        main_generate(project, rows=-1, seed=0)
    with pytest.raises(ObdaError):
        main_generate(tmp_path / "missing", rows=1, seed=0)
