"""Templates from the wild (issue 27): which parts of a template its text determines, how two instances of one
template compare (column equalities where the parts cannot run into each other, the whole terms elsewhere),
and a timestamp's text in a template (its canonical xsd:dateTime form, the same in SQL and in the
materialiser)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from obda.mapping._unfold_compare import equal_terms
from obda.mapping._unfold_ir import Col
from obda.mapping._unfold_terms import Slot, TermValue, Unsat, Val, projection_sql
from obda.mapping.rdf_terms import natural_form
from obda.mapping.template_text import determined_parts, iso_text
from obda.model.mapping import TermType
from obda.model.sources import ColumnType as T
from obda.project import Project

S, I, TS = (T.STRING, True), (T.INTEGER, True), (T.TIMESTAMP, True)
WILD = Path(__file__).resolve().parents[1] / "projects" / "wild"


@pytest.mark.parametrize("parts,determined", [
    (["Obs_", I, "_", S], {1, 3}),  # an integer ends at '_' (from the left), the string is the rest
    (["Obs_", S, "_", I], {1, 3}),  # the integer is the text after the last '_' (from the right)
    (["Obs_", S, "_", TS], {1, 3}),  # a timestamp holds no '_'
    (["Obs_", TS, "_", S], {1, 3}),
    (["Sensor_", S, "_", S], set()),  # A + B_temp and A_B + temp: one text
    (["Obs_", S, "_", S, "_", TS], {5}),  # the time only
    (["x", I, "_", S, "_", S, "_", I], {1, 7}),  # both ends, not the middle
    (["x/", S, "/", S], {1, 3}),  # '/' is encoded in a string: never in its text
    (["x", S, I], set()),  # nothing separates them: 'a1' + '23' and 'a' + '123'
    ([S], {0}),
])
def test_determined_parts(parts, determined):
    assert determined_parts(parts) == determined


def slot(col: str, t: T, alias: str = "m1", encoded: bool = True) -> Slot:
    return Slot(Val(Col(alias, col), t), encoded)


def iri(*parts) -> TermValue:
    return TermValue(TermType.IRI, tuple(parts))


def conds(a: TermValue, b: TermValue) -> list[str]:
    return [c.sql() for c in equal_terms(a, b)]


def test_parts_that_cannot_run_into_each_other_split_into_columns():
    # an integer before '_': from the left
    assert conds(iri("E_", slot("seq", T.INTEGER), "_", slot("st", T.STRING)),
                 iri("E_", slot("seq", T.INTEGER, "m2"), "_", slot("st", T.STRING, "m2"))) == \
        ["m1.seq = m2.seq", "m1.st = m2.st"]
    # a string before '_' and an integer: from the right
    assert conds(iri("E_", slot("st", T.STRING), "_", slot("seq", T.INTEGER)),
                 iri("E_", slot("st", T.STRING, "m2"), "_", slot("seq", T.INTEGER, "m2"))) == \
        ["m1.seq = m2.seq", "m1.st = m2.st"]
    # a timestamp before '_' (its text is 2024-01-01T10%3A00%3A00)
    assert conds(iri("O_", slot("t", T.TIMESTAMP), "_", slot("st", T.STRING)),
                 iri("O_", slot("t", T.TIMESTAMP, "m2"), "_", slot("st", T.STRING, "m2"))) == \
        ["m1.t = m2.t", "m1.st = m2.st"]


def test_parts_that_can_run_into_each_other_compare_the_rest_whole():
    got = conds(iri("O_", slot("st", T.STRING), "_", slot("k", T.STRING), "_", slot("t", T.TIMESTAMP)),
                iri("O_", slot("st", T.STRING, "m2"), "_", slot("k", T.STRING, "m2"), "_", slot("t", T.TIMESTAMP, "m2")))
    assert got[0] == "m1.t = m2.t"  # the time splits from the right
    assert len(got) == 2 and got[1].startswith("CONCAT(") and "'_'" in got[1] and "m2.k" in got[1]
    assert "m1.st = m2.st" not in got  # A + B_temp = A_B + temp


def test_a_timestamp_in_a_template_is_its_xsd_datetime_text():
    sql = projection_sql(iri("O_", slot("t", T.TIMESTAMP))).to_sqlglot().sql()
    assert "REPLACE(CAST(m1.t AS VARCHAR), ' ', 'T')" in sql
    # DuckDB (and Spark) cast a timestamp to text as the canonical form with a space; the materialiser agrees
    for d in (dt.datetime(2024, 1, 1, 10, 0), dt.datetime(2024, 1, 1, 10, 0, 0, 500000)):
        q = f"SELECT REPLACE(CAST(TIMESTAMP '{d.isoformat(sep=' ')}' AS VARCHAR), ' ', 'T')"
        text = duckdb.connect().execute(q).fetchone()[0]
        assert text == iso_text(d) == natural_form(d, "TIMESTAMP")[0]


def test_a_constant_iri_gives_a_timestamp_only_in_canonical_text():
    tpl = iri("O_", slot("t", T.TIMESTAMP))
    (c,) = conds(tpl, iri("O_2024-01-01T10%3A00%3A00"))
    assert c == "m1.t = CAST('2024-01-01 10:00:00' AS TIMESTAMP)"
    for text in ("O_2024-01-01T10%3A00%3A00.0", "O_2024-01-01 10%3A00%3A00", "O_2024-01-01T10%3A00"):
        with pytest.raises(Unsat):
            equal_terms(tpl, iri(text))


def test_a_join_on_a_template_that_runs_together_reads_the_whole_iri():
    """The sensor IRI of two sensor rows (A + B_temp, A_B + temp) is one term: its views keep the IRI as one
    column (a set of IRIs, not of slot tuples) and the join compares it."""
    project = Project.load(WILD)
    comp = project.compile("PREFIX : <http://example.org/wild#>\n"
                           "SELECT ?o ?u WHERE { ?s :unit ?u . GRAPH ?t { ?o :observedBy ?s } }")
    (m,) = comp.members
    where = m.select.args["where"].this.sql()
    assert where in ("m1.s = m2.o", "m2.o = m1.s", "m1.o = m2.s", "m2.s = m1.o"), where
    assert all("s_1" not in v.text and "o_1" not in v.text for v in comp.views)
