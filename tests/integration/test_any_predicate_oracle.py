"""A variable predicate (``?s ?p ?o``) and a variable class (``?s a ?c``), issue 27: obda's answers equal pyoxigraph's.

``?p`` ranges over the ontology's properties and ``rdf:type`` with its classes (``obda/query/predicates.py``), each
read modulo the ontology like any atom. The oracle's closed dataset also has ``owl:sameAs`` triples (OWL RL's
reflexive equality), ``owl:Thing`` types and the oracle's own time annotations (``urn:obda:at``), outside any
ontology's vocabulary: the queries leave them out with a FILTER both sides evaluate. Fixture: ``oracle_cases.py``.
"""

from __future__ import annotations

import pytest

from obda.errors import UnsupportedConstructError
from obda.query import parse_query

from integration.oracle_cases import PREFIX, Case, check_spark, check_sql_and_local, spark_cases

P1 = "<http://example.org/mult/data/person/1>"
D1 = "<http://example.org/mult/data/dept/1>"
OWL = "http://www.w3.org/2002/07/owl#"
VOCABULARY = f"FILTER(?p != <{OWL}sameAs> && ?p != <urn:obda:at>)"

CASES = [
    Case("of_a_subject", f"SELECT ?p ?o WHERE {{ {P1} ?p ?o {VOCABULARY} }}", "bounded", 9, as_text=True),
    Case("to_an_object", f"SELECT ?s ?p WHERE {{ ?s ?p {D1} {VOCABULARY} }}", "bounded", 7),
    Case("every_predicate", f"SELECT DISTINCT ?p WHERE {{ ?s ?p ?o {VOCABULARY} }}", "bounded", 11),
    # a global COUNT(*) projects nothing from its pattern: its SQL members select a constant (SQL has no empty
    # select list; before, obda printed SELECT FROM …)
    Case("count_of_triples", f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s ?p ?o {VOCABULARY} }}", "bounded", 1),
    Case("count_of_solutions", "SELECT (COUNT(*) AS ?n) WHERE { ?x :age ?a }", "bounded", 1),
    Case("count_per_predicate", f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?s ?p ?o {VOCABULARY} }} GROUP BY ?p",
         "bounded", 11),
    Case("joined_on_its_object", f"SELECT ?x ?p ?n WHERE {{ ?x ?p ?d . ?d :name ?n {VOCABULARY} }}", "bounded", 36),
    Case("filtered_on_the_predicate", "SELECT ?x ?o WHERE { ?x ?p ?o FILTER(?p = :worksIn) }", "bounded", 7),
    Case("literal_object", 'SELECT ?s ?p WHERE { ?s ?p "Research" }', "bounded", 1),
    Case("classes_of", f"SELECT ?x ?c WHERE {{ ?x a ?c FILTER(?c != <{OWL}Thing>) }}", "bounded", 29),
    Case("in_graph", f"SELECT ?r ?p ?v WHERE {{ GRAPH ?t {{ ?r ?p ?v }} {VOCABULARY} }}", "bounded", 31,
         as_text=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sql_and_local_executor_equal_pyoxigraph(world, case, tmp_path):
    check_sql_and_local(world, case, tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize("case", **spark_cases(CASES))
def test_spark_executor_equals_pyoxigraph(world, case, tmp_path, spark):
    check_spark(world, case, tmp_path, spark)


@pytest.mark.parametrize("query, construct, at", [
    ("SELECT ?x WHERE { ?x ?p ?y }", "variable predicate", (4, 22)),
    ("SELECT ?x WHERE { ?x a ?c }", "variable class", (4, 24)),
])
def test_without_an_ontology_it_is_refused_at_the_variable(query, construct, at):
    with pytest.raises(UnsupportedConstructError) as e:
        parse_query(PREFIX + query)
    assert e.value.construct == construct and "compile the query in a project" in e.value.message
    assert (e.value.location.line, e.value.location.column) == at


def test_a_time_variable_is_no_predicate(world):
    project, _, _ = world
    with pytest.raises(UnsupportedConstructError, match="names a GRAPH"):
        project.compile(PREFIX + "SELECT ?x WHERE { GRAPH ?t { ?x :value ?v } ?x ?t ?y }")
