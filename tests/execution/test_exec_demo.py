"""The demo catalog's bounded queries: compiled SPARQL → executor (in-process) vs DuckDB on datagen data."""

from pathlib import Path

import pytest

from execution.exec_harness import Oracle, counter_of, drive, from_us, random_splits
from seeds import seed_sets

ROOT = Path(__file__).resolve().parents[2]


def _entries():
    try:
        from obda.catalog import load_catalog
    except ImportError:  # the catalog module belongs to another stage of the work
        return []
    path = ROOT / "catalogs" / "demo.yaml"
    return [e for e in load_catalog(path) if e.expected == "bounded"] if path.exists() else []




@pytest.fixture(scope="module")
def project():
    from obda.project import Project

    return Project.load(ROOT / "demo")


@seed_sets()  # the evidence: every bounded demo query equals the SQL on 50 seeds (-m slow; 10 by default)
@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e.name)
def test_demo_bounded_query_matches_duckdb(project, entry, seeds):
    from obda.datagen import generate_rows

    compilation = project.compile(entry.query)
    sql = compilation.to_sql("spark")
    src = project.sources
    for seed in seeds:
        data = generate_rows(src, seed=seed, timestamps=12, rows_per_timestamp=(0, 4))
        rows = {t.name: [dict(zip([c.name for c in t.columns], r)) for r in data.rows(t.name)] for t in src.tables}
        streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in src.streams}
        statics = {t.name: rows[t.name] for t in src.tables if not t.is_stream}
        oracle = Oracle(src, streams, statics)
        snapshots = {}

        def on_close(rt, out):
            if rt.closed_upto is not None:
                snapshots[from_us(rt.closed_upto)] = counter_of(out)

        _, out = drive(compilation, src, random_splits(streams, seed), static=statics, on_close=on_close)
        final = oracle.answers(sql)
        got = counter_of(out)
        if compilation.distinct:
            assert set(got) == set(final) and all(c == 1 for c in got.values()), entry.name
        else:
            assert got == final, entry.name
        expected_at = oracle.answers_at(sql, sorted(snapshots))
        for m, g in snapshots.items():
            assert (set(g) == set(expected_at[m])) if compilation.distinct else (g == expected_at[m]), (entry.name, m)
