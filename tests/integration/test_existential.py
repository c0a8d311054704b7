"""Evidence: existential reasoning, hand-checked (issue 2, item 3).

Materialisation (owlrl) cannot produce these answers: they rest on anonymous
individuals the axioms guarantee (``Turbine ⊑ ∃hasSensor.TemperatureSensor``,
``Site ⊑ ∃hosts.Turbine``). The data is written by hand below, small enough
to check every expected answer by reading it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
D = "http://example.org/turbine/data/"
P = "PREFIX : <http://example.org/turbine#>\n"

# site 3 hosts no turbine; turbines 11 and 12 have no sensor row at all.
ROWS = {
    "site": [(1, "north-1", "north"), (2, "south-1", "south"), (3, "north-2", "north")],
    "turbine": [(10, 1, "wind", "V1", 2.5), (11, 1, "wind", "V1", 2.5), (12, 2, "gas", "G7", 9.0)],
    "sensor": [(100, 10, "temperature"), (101, 10, "vibration")],
}


@pytest.fixture(scope="module")
def env():
    project = Project.load(ROOT / "demo")
    con = duckdb.connect()
    types = {"integer": "BIGINT", "string": "VARCHAR", "decimal": "DECIMAL(18,2)", "double": "DOUBLE",
             "timestamp": "TIMESTAMP", "boolean": "BOOLEAN"}
    for t in project.sources.tables:
        cols = ", ".join(f'"{c.name}" {types[c.type.value]}' for c in t.columns)
        con.execute(f'CREATE TABLE "{t.name}" ({cols})')
        for row in ROWS.get(t.name, []):
            con.execute(f'INSERT INTO "{t.name}" VALUES ({", ".join("?" for _ in row)})', list(row))
    return project, con


def answers(env, query: str) -> list[tuple]:
    project, con = env
    comp = project.compile(P + query)
    return sorted(con.execute(comp.to_sql("duckdb")).fetchall())


def test_every_turbine_has_some_temperature_sensor(env):
    got = answers(env, "SELECT DISTINCT ?t WHERE { ?t :hasSensor ?s . ?s a :TemperatureSensor . }")
    assert got == [(D + "turbine/10",), (D + "turbine/11",), (D + "turbine/12",)]


def test_projecting_the_sensor_needs_a_real_one(env):
    got = answers(env, "SELECT ?t ?s WHERE { ?t :hasSensor ?s . ?s a :TemperatureSensor . }")
    assert got == [(D + "turbine/10", D + "sensor/100")]


def test_inverse_property_direction(env):
    got = answers(env, "SELECT DISTINCT ?t WHERE { ?s :isSensorOf ?t . ?s a :TemperatureSensor . }")
    assert got == [(D + "turbine/10",), (D + "turbine/11",), (D + "turbine/12",)]


def test_depth_two_anonymous_tree(env):
    # Site ⊑ ∃hosts.Turbine and Turbine ⊑ ∃hasSensor.TemperatureSensor: every site qualifies,
    # including site 3, which hosts no turbine in the data.
    got = answers(env, "SELECT DISTINCT ?site WHERE { ?site :hosts ?t . ?t :hasSensor ?s . ?s a :TemperatureSensor . }")
    assert got == [(D + "site/1",), (D + "site/2",), (D + "site/3",)]


def test_filter_on_the_existential_variable_blocks_folding(env):
    # ?s is constrained, so it cannot be an anonymous individual: only real sensors count.
    got = answers(env, f"SELECT DISTINCT ?t WHERE {{ ?t :hasSensor ?s . ?s a :TemperatureSensor . FILTER(?s != <{D}sensor/100>) }}")
    assert got == []


def test_bag_semantics_counts_each_solution_of_the_minimal_rewriting(env):
    """Without DISTINCT, existential parts count once (docs/semantics.md, "Existential parts").

    The rewriting reduces the query to Turbine(?t) (the CQ with the real sensor is
    contained in it: hasSensor has domain Turbine).  Turbine(?t) is one per-atom
    view, the set of turbines that the seven ways to be a Turbine produce (turbine
    rows; wind; gas; with a capacity; with a model; sensor rows through isSensorOf's
    range; turbines joined to their site): each turbine is one solution, whatever
    the number of its derivations (7 for turbine 10, 5 for 11 and 12 before views).
    """
    got = answers(env, "SELECT ?t WHERE { ?t :hasSensor ?s . ?s a :TemperatureSensor . }")
    counts = {t[0].rsplit("/", 1)[1]: got.count(t) for t in set(got)}
    assert counts == {"10": 1, "11": 1, "12": 1}
