"""A project's CSV data in DuckDB, typed as its sources file says (shared by the API and oracle test kits)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from obda.model.sources import ColumnType, Sources

DUCK_TYPES = {
    ColumnType.INTEGER: "BIGINT",
    ColumnType.DECIMAL: "DECIMAL(18, 4)",
    ColumnType.DOUBLE: "DOUBLE",
    ColumnType.STRING: "VARCHAR",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.TIMESTAMP: "TIMESTAMP",
}


def load_csv_tables(project_dir: Path, sources: Sources, con=None):
    """Every table's CSV data (a file or a folder of ``*.csv``), typed as the sources file says, in DuckDB.

    Empty fields are NULL.  Returns the (new, in-memory unless given) connection.
    """
    con = con if con is not None else duckdb.connect()
    for t in sources.tables:
        if t.location is None:
            raise ValueError(f"table {t.name!r} has no location")
        loc = Path(project_dir) / t.location
        files = sorted(str(f) for f in loc.glob("*.csv")) if loc.is_dir() else [str(loc)]
        cols = ", ".join(f"'{c.name}': '{DUCK_TYPES[c.type]}'" for c in t.columns)
        con.execute(
            f'CREATE TABLE "{t.name}" AS SELECT * FROM read_csv({files!r}, header = true, columns = {{{cols}}})'
        )
    return con
