"""GROUP_CONCAT (issue 27): what it is refused for, located, and its verdicts. Its answers are checked where the
other aggregates' are: the catalog entries (``catalogs/aggregates.yaml``: pyoxigraph in
``test_aggregate_catalog.py``, the executors' changelogs in ``test_exec_sparql_aggregate.py``) and a UNION case
(``test_union_oracle.py``). The W3C's GROUP_CONCAT tests (``aggregates/agg-groupconcat-*``) are ASK queries over
a subquery, or VALUES alone: obda refuses all of them, for those constructs."""

from __future__ import annotations


import pytest

from obda.analysis.aggregates import analyze_aggregate
from obda.errors import AnalysisError, UnsupportedConstructError

PREFIX = "PREFIX : <http://example.org/turbine#>\n"
READINGS = "GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . } ?turbine :hasSensor ?sensor . ?sensor :hasKind ?kind ."


def test_the_call_keeps_distinct_and_separator(demo):
    comp = demo.compile(PREFIX + f'SELECT ?turbine (GROUP_CONCAT(DISTINCT ?kind; SEPARATOR="; ") AS ?k) '
                                 f"(GROUP_CONCAT(?kind) AS ?all) WHERE {{ {READINGS} }} GROUP BY ?turbine")
    first, second = comp.query.aggregation.calls
    assert (first.function, first.separator) == ("group_concat_distinct", "; ")
    assert (second.function, second.separator) == ("group_concat", " ")  # SPARQL's default separator: one space
    assert str(first) == 'GROUP_CONCAT(DISTINCT ?kind; SEPARATOR="; ")' and str(second) == "GROUP_CONCAT(?kind)"
    sql = comp.to_sql("duckdb")
    assert "LISTAGG(DISTINCT q.kind, '; ' ORDER BY q.kind)" in sql and "COALESCE(LISTAGG(q.kind, ' '" in sql


def test_a_term_that_is_no_string_is_refused_at_the_call(demo):
    query = PREFIX + "SELECT ?sensor\n  (GROUP_CONCAT(?v) AS ?vs)\nWHERE { GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v } } GROUP BY ?sensor"
    with pytest.raises(UnsupportedConstructError) as e:
        demo.compile(query)
    assert e.value.construct == "GROUP_CONCAT of a non-string"
    assert "xsd:integer" in e.value.message and "GROUP_CONCAT(STR(?v))" in e.value.message
    assert (e.value.location.line, e.value.location.column) == (3, 4)
    # the fix the message names compiles: the text of each value, computed per solution
    call = demo.compile(query.replace("GROUP_CONCAT(?v)", "GROUP_CONCAT(STR(?v))")).query.aggregation.calls[0]
    assert str(call) == "GROUP_CONCAT(STR(?v))" and call.shown_argument == "STR(?v)"


def test_an_iri_is_refused(demo):
    with pytest.raises(UnsupportedConstructError, match="is an IRI in some solutions"):
        demo.compile(PREFIX + f"SELECT ?kind (GROUP_CONCAT(?turbine) AS ?ts) WHERE {{ {READINGS} }} GROUP BY ?kind")


def test_sql_group_concat_is_refused_with_its_location(demo):
    sql = "SELECT m.sensor_id, GROUP_CONCAT(m.kind) AS k FROM sensor AS m GROUP BY m.sensor_id"
    with pytest.raises(AnalysisError, match="not one the analysis knows"):
        analyze_aggregate(sql, demo.sources)


@pytest.mark.parametrize("select, verdict, failing", [
    ("(GROUP_CONCAT(DISTINCT ?kind) AS ?k)", "bounded", None),
    ("(GROUP_CONCAT(?kind) AS ?k)", "unbounded", "GROUP_CONCAT of every solution over a stream"),
])
def test_a_concatenation_of_every_solution_of_a_stream_grows(demo, select, verdict, failing):
    comp = demo.compile(PREFIX + f"SELECT ?turbine {select} WHERE {{ {READINGS} }} GROUP BY ?turbine")
    report = analyze_aggregate(comp, demo.sources)
    assert report.verdict == verdict
    assert [c.name for c in report.conditions if not c.holds] == ([failing] if failing else [])


def test_over_static_data_every_solution_may_be_concatenated(demo):
    comp = demo.compile(PREFIX + "SELECT ?turbine (GROUP_CONCAT(?kind) AS ?k) WHERE { ?turbine :hasSensor ?s . "
                                 "?s :hasKind ?kind } GROUP BY ?turbine")
    assert analyze_aggregate(comp, demo.sources).verdict == "bounded"


def test_every_dialect_prints_the_ordered_concatenation_but_sqlite_which_refuses_it(demo):
    comp = demo.compile(PREFIX + 'SELECT (GROUP_CONCAT(DISTINCT ?name; SEPARATOR=" / ") AS ?names) '
                                 "WHERE { ?site a :Site ; :hasName ?name . }")
    assert "STRING_AGG(DISTINCT q.name, ' / ' ORDER BY q.name)" in comp.to_sql("postgres")
    assert "LISTAGG(DISTINCT q.name, ' / ') WITHIN GROUP (ORDER BY q.name" in comp.to_sql("spark")
    with pytest.raises(UnsupportedConstructError, match="SQLite has no ordered aggregate") as e:
        comp.to_sql("sqlite")
    assert e.value.location == comp.query.location and e.value.location.line is not None
