"""The aggregate catalog (catalogs/aggregates.yaml, issue 15): every query gets its expected Arasu §8.2
verdict, and its SQL answers, on the materialised demo data, exactly what pyoxigraph (a W3C-conformant
SPARQL engine sharing nothing with obda) answers for the SPARQL text — group values and multiplicities
(COUNT counts solutions), SPARQL's AVG, SUM of the empty group, HAVING."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.bag_oracle import BagOracle, bag_diff, concatenations_sorted, sql_bag
from obda.catalog import check_entry, load_catalog
from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = load_catalog(ROOT / "catalogs" / "aggregates.yaml")
SEEDS = (11, 12, 13)


@pytest.fixture(scope="module")
def project():
    return Project.load(ROOT / "demo")


@pytest.fixture(scope="module")
def worlds(project):
    """Per seed: the generated demo tables in DuckDB and the W3C oracle over their materialisation."""
    import duckdb

    from obda.datagen import generate_rows

    out = []
    for seed in SEEDS:
        data = generate_rows(project.sources, seed=seed, sites=2, turbines_per_site=2, sensors_per_turbine=3,
                             timestamps=6)
        con = duckdb.connect()
        data.load_into(con, "duckdb")
        out.append((seed, con, BagOracle.of_project(project, con)))
    return out


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_expected_verdict(project, entry):
    res = check_entry(project, entry)
    assert res.error is None, res.error
    assert res.verdict == entry.expected, f"{entry.name}: expected {entry.expected}, got {res.verdict} ({entry.why})"


def at_now(query: str, sql: str, now) -> tuple[str, str]:
    """A window query read at time ``now``: SPARQL's NOW() and the SQL's CURRENT_TIMESTAMP both become it (a
    SPARQL engine's NOW() is the wall clock; obda's is the timestamp being closed)."""
    import sqlglot
    from sqlglot import exp

    text = query.replace("NOW()", f'"{now.isoformat()}"^^<http://www.w3.org/2001/XMLSchema#dateTime>')
    lit = exp.cast(exp.Literal.string(now.isoformat(sep=" ")), "TIMESTAMP")
    tree = sqlglot.parse_one(sql, read="duckdb")
    return text, tree.transform(lambda n: lit.copy() if isinstance(n, exp.CurrentTimestamp) else n).sql("duckdb")


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_sql_answers_equal_pyoxigraph(project, worlds, entry):
    """At the last timestamp of the data (a window's NOW())."""
    comp = project.compile(entry.query)
    answered = 0
    for seed, con, oracle in worlds:
        now = con.execute("SELECT max(ts) FROM measurement").fetchone()[0]
        text, sql = at_now(entry.query, comp.to_sql("duckdb"), now)
        # SAMPLE may return any value of the group; obda's is the smallest, a valid choice the oracle is asked for
        want = concatenations_sorted(oracle.answers(text.replace("SAMPLE(", "MIN("), list(comp.columns)), comp.query)
        got = sql_bag(con, sql)  # GROUP_CONCAT: obda's parts in the strings' order, the oracle's sorted so
        assert got == want, f"{entry.name}, seed {seed}\n" + bag_diff(got, want)
        answered += sum(want.values())
    assert answered > 0, entry.name  # some seed has answers


def test_global_aggregate_of_no_solutions_is_one_row_of_zeros(project, worlds):
    """SPARQL: SUM and AVG of the empty group are 0, COUNT 0 (SQL's SUM / AVG would be NULL)."""
    text = ("PREFIX : <http://example.org/turbine#>\nSELECT (COUNT(?v) AS ?n) (SUM(?v) AS ?total) (AVG(?v) AS ?mean) "
            "WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 1000000) }")
    comp = project.compile(text)
    seed, con, oracle = worlds[0]
    want = oracle.answers(text, list(comp.columns))
    assert want == {(0, 0, 0): 1}
    assert sql_bag(con, comp.to_sql("duckdb")) == want
