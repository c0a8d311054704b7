"""STR of a literal of a custom datatype (issue 27): its lexical form, as a W3C engine gives it.

The W3C's own tests of STR (``dawg-str-1`` … ``-4``) read a column that also holds doubles, whose lexical form obda
refuses (it differs between SQL engines), so they stay refused. These tests take their shape — literals of a
custom datatype — without the doubles: the data goes through the runner (``runner.py``: tables, a generated
R2RML mapping with ``rr:datatype``, obda's SQL on DuckDB) and the expected results are pyoxigraph's over the same
Turtle, written as a SPARQL JSON result set.
"""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from w3c.runner import W3CTest, run

DATA = """@prefix : <http://example.org/things#> .
:a :p "1"^^:myType . :b :p "01"^^:myType . :c :p "zzz"^^:myType . :d :p ""^^:myType . :e :p "1"^^:other .
"""
PREFIX = "PREFIX : <http://example.org/things#>\n"


@pytest.mark.parametrize("query", [
    'SELECT ?x WHERE { ?x :p ?v FILTER(STR(?v) = "01") }',
    'SELECT ?x WHERE { ?x :p ?v FILTER(STR(?v) = "1") }',
    'SELECT ?x WHERE { ?x :p ?v FILTER(STR(?v) = "") }',
    "SELECT ?x ?s WHERE { ?x :p ?v BIND(STR(?v) AS ?s) }",
    'SELECT ?x WHERE { ?x :p ?v FILTER(STRSTARTS(STR(?v), "z")) }',
], ids=["str_01", "str_1_two_datatypes", "str_empty", "str_bound", "strstarts_of_str"])
def test_str_of_a_custom_datatype_is_its_lexical_form(tmp_path: Path, query):
    data, rq, srj = tmp_path / "data.ttl", tmp_path / "query.rq", tmp_path / "result.srj"
    data.write_text(DATA)
    rq.write_text(PREFIX + query)
    store = ox.Store()
    store.load(DATA.encode(), format=ox.RdfFormat.TURTLE)
    srj.write_bytes(store.query(PREFIX + query).serialize(format=ox.QueryResultsFormat.JSON))
    outcome = run(W3CTest("custom-datatypes", query, rq, (data,), srj))
    assert outcome.status == "passed", outcome.detail
