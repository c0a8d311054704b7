"""Feed a project's stream folders with demo rows over time (what a streaming file source picks up).

The executor polls every stream table's folder for new files; the feeder
appends a new part file per stream every ``interval`` seconds, each holding
the next ``points`` time points of seeded demo rows (``obda.datagen``).
Files are written under a hidden temporary name and renamed when complete,
so a reader never sees half a file.  Static tables are written once (when
their folder holds no data yet), from the same seed, so stream rows refer
to existing sensors and turbines.

Deterministic: block ``b`` covers time points ``start + (b·points + i)·step``
and its rows are ``generate_rows(seed=seed·1000003 + b)``; a restarted feeder
continues after the last ``feed-NNNNNN`` file it finds.

Command line (``--workspace`` first copies the project so its data folder is fresh)::

    python -m api.feeder --project demo --workspace /tmp/obda-demo --interval 2 --points 5 --parts 0
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from obda.datagen import DEFAULT_START, DEFAULT_STEP, generate_rows
from obda.datagen.writer import arrow_schema, csv_text
from obda.model.sources import Sources, Table
from obda.project import ProjectSettings

FEED_FILE = re.compile(r"^feed-(\d{6})\.(csv|parquet)$")


def prepare_workspace(project_dir: str | Path, dest: str | Path) -> Path:
    """Copy a project's definition into ``dest`` so that its data lives there (not in the original folder).

    ``dest/project.yaml`` names the original ontology and mapping files by
    absolute path; the sources file is copied, so relative table locations
    resolve below ``dest``.  Returns ``dest``.
    """
    s = ProjectSettings.read(project_dir)
    d = Path(dest).resolve()
    d.mkdir(parents=True, exist_ok=True)
    sources_copy = d / "sources.yaml"
    if s.sources_file.resolve() != sources_copy:
        sources_copy.write_text(s.sources_file.read_text(encoding="utf-8"), encoding="utf-8")
    project = {
        "name": s.name,
        "ontology": [str(p) for p in s.ontology_files],
        "mappings": [str(p) for p in s.mapping_files],
        "sources": "sources.yaml",
        "profile": s.profile,
        "data": "data",
    }
    (d / "project.yaml").write_text(yaml.safe_dump(project, sort_keys=False), encoding="utf-8")
    return d


@dataclass
class Feeder:
    """Writes static tables once, then one part file per stream and call of :meth:`feed_block`."""

    project_dir: Path
    seed: int = 0
    points: int = 5  # time points per part file
    start: datetime = DEFAULT_START
    step: timedelta = DEFAULT_STEP
    sites: int = 2
    turbines_per_site: int = 3
    sensors_per_turbine: int = 3

    def __post_init__(self) -> None:
        settings = ProjectSettings.read(self.project_dir)
        self.project_dir = settings.directory
        self.sources: Sources = Sources.load(settings.sources_file)
        if self.points < 1:
            raise ValueError("points must be at least 1")
        for t in self.sources.tables:
            if not t.location:
                raise ValueError(f"table {t.name!r} has no location in the sources file; the feeder cannot write it")
        self.block = self._next_block()

    def folder(self, table: Table) -> Path:
        p = Path(table.location)
        return p if p.is_absolute() else self.project_dir / p

    def _next_block(self) -> int:
        done = [
            int(mt.group(1))
            for t in self.sources.streams
            if self.folder(t).is_dir()
            for f in self.folder(t).iterdir()
            if (mt := FEED_FILE.match(f.name))
        ]
        return max(done) + 1 if done else 0

    def _generate(self, seed: int, start: datetime, timestamps: int):
        return generate_rows(
            self.sources, seed=seed, sites=self.sites, turbines_per_site=self.turbines_per_site,
            sensors_per_turbine=self.sensors_per_turbine, timestamps=timestamps, start=start, step=self.step,
        )

    def write_static(self) -> list[Path]:
        """Write every static table whose folder holds no data file yet, and create the (empty) stream folders
        (a query over a stream folder that does not exist is refused at start); returns the files written."""
        data = self._generate(self.seed, self.start, 0)
        written = []
        for t in self.sources.tables:
            folder = self.folder(t)
            if t.is_stream:
                folder.mkdir(parents=True, exist_ok=True)
                continue
            if (folder.is_dir() and any(not f.name.startswith((".", "_")) for f in folder.iterdir())):
                continue
            written.append(_write(folder / f"part-00000.{_ext(t)}", t, data.rows(t.name)))
        return written

    def feed_block(self) -> dict[str, Path]:
        """Write the next block of time points: one file per stream table. Returns table → file."""
        b = self.block
        start = self.start + b * self.points * self.step
        data = self._generate(self.seed * 1_000_003 + b, start, self.points)
        out = {t.name: _write(self.folder(t) / f"feed-{b:06d}.{_ext(t)}", t, data.rows(t.name)) for t in self.sources.streams}
        self.block += 1
        return out

    def run(self, parts: int = 0, interval: float = 2.0, log=None) -> int:
        """Write static tables, then ``parts`` blocks (0: forever), one every ``interval`` seconds."""
        self.write_static()
        n = 0
        while parts == 0 or n < parts:
            if n:
                time.sleep(interval)
            files = self.feed_block()
            n += 1
            if log:
                log(f"feeder: block {self.block - 1} ({self.points} time points) -> "
                    + ", ".join(f"{k}: {v.name}" for k, v in files.items()))
        return n


def _ext(table: Table) -> str:
    return "parquet" if (table.format or "csv") == "parquet" else "csv"


def _write(path: Path, table: Table, rows) -> Path:
    """Write rows under a hidden temporary name, then rename: readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema(table.columns)
        arrays = [pa.array([r[i] for r in rows], type=schema.field(i).type) for i in range(len(table.columns))]
        pq.write_table(pa.Table.from_arrays(arrays, schema=schema), tmp)
    else:
        with tmp.open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow([c.name for c in table.columns])
            w.writerows([csv_text(v) for v in r] for r in rows)
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m api.feeder", description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", required=True, help="project folder (its sources file says where data goes)")
    ap.add_argument("--workspace", help="copy the project here first and feed the copy (keeps the original clean)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between part files")
    ap.add_argument("--points", type=int, default=5, help="time points per part file")
    ap.add_argument("--parts", type=int, default=0, help="number of part files per stream (0: forever)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--static-only", action="store_true", help="only write the static tables, then exit")
    a = ap.parse_args(argv)
    project = prepare_workspace(a.project, a.workspace) if a.workspace else Path(a.project)
    feeder = Feeder(project, seed=a.seed, points=a.points)
    if a.static_only:
        for p in feeder.write_static():
            print(f"feeder: wrote {p}", flush=True)
        return 0
    try:
        feeder.run(a.parts, a.interval, log=lambda s: print(s, flush=True))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
