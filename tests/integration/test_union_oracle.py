"""UNION branches that bind different variables (issue 27): an answer leaves unbound what its branch does not bind.

Each query runs as obda's SQL on DuckDB, on the local executor and (stream queries) on Spark; each bag must
equal pyoxigraph's over the independently materialised, closed dataset (``bag_oracle.py``). FILTERs and BINDs
read a variable a branch leaves unbound as SPARQL does: ``BOUND`` false, ``COALESCE`` skips it, any other use an
error (docs/semantics.md, "Unbound variables"). Fixture data: ``oracle_cases.py``.
"""

from __future__ import annotations

import pytest

from obda.catalog import load_catalog
from obda.errors import UnsupportedConstructError

from integration.conftest import ROOT
from integration.oracle_cases import PREFIX, Case, case_tests, check_catalog_entry

AGE_OR_NAME = "{ ?x :age ?a } UNION { ?x :name ?n }"


CASES = [
    # --- static
    Case("sides", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} }}", "bounded", 21),
    Case("distinct_sides", f"SELECT DISTINCT ?a ?n WHERE {{ {AGE_OR_NAME} }}", "bounded", 21),
    Case("star", f"SELECT * WHERE {{ {AGE_OR_NAME} }}", "bounded", 21),
    Case("joined_union", "SELECT ?x ?d ?a ?n WHERE { ?x :worksIn ?d { ?x :age ?a } UNION { ?d :name ?n } }",
         "bounded", 16),
    Case("filter_on_one_side", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(?a > 40 || ?n = \"Bob\") }}",
         "bounded", 5),
    # an error is not true, and neither is its negation (before: the name branch passed !(?a > 40) whole)
    Case("negated_error", f"SELECT ?x WHERE {{ {AGE_OR_NAME} FILTER(!(?a > 40)) }}", "bounded", 4),
    Case("negated_error_or", f"SELECT ?x WHERE {{ {AGE_OR_NAME} FILTER(!(?a > 40) || ?n = \"Bob\") }}", "bounded", 5),
    Case("not_bound", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(!BOUND(?a)) }}", "bounded", 13),
    Case("bound_or_computed", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(BOUND(?a) || STRLEN(?n) > 4) }}",
         "bounded", 12),
    Case("bound_and_or", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(!BOUND(?a) && ?n != \"Ann\" || ?a > 50) }}",
         "bounded", 14),
    Case("bound_and_or_distinct", f"SELECT DISTINCT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(!BOUND(?a) && "
         f"?n != \"Ann\" || ?a > 50) }}", "bounded", 14),
    Case("coalesce_filter", f"SELECT ?x ?a ?n WHERE {{ {AGE_OR_NAME} FILTER(COALESCE(?a, 0) < 30) }}", "bounded", 15),
    Case("bind_of_unbound", f"SELECT ?x ?b WHERE {{ {AGE_OR_NAME} BIND(?a + 1 AS ?b) }}", "bounded", 21),
    Case("bind_coalesce", f"SELECT ?x ?b WHERE {{ {AGE_OR_NAME} BIND(COALESCE(?a, STRLEN(?n)) AS ?b) }}",
         "bounded", 21),
    Case("bind_if_bound", f"SELECT ?x ?k WHERE {{ {AGE_OR_NAME} BIND(IF(BOUND(?a), \"age\", \"name\") AS ?k) }}",
         "bounded", 21),
    Case("count_of_unbound", f"SELECT ?x (COUNT(?a) AS ?c) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x", "bounded", 11),
    Case("group_by_unbound", f"SELECT ?a (COUNT(*) AS ?c) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?a", "bounded", 9),
    Case("sample_and_count_distinct", f"SELECT ?x (SAMPLE(?a) AS ?s) (COUNT(DISTINCT ?a) AS ?c) WHERE "
         f"{{ {AGE_OR_NAME} }} GROUP BY ?x", "bounded", 11),
    # GROUP_CONCAT over branches that both bind its variable; Bob's two names in one string
    Case("group_concat_of_branches", "SELECT ?x (GROUP_CONCAT(?n; SEPARATOR=\",\") AS ?names) (COUNT(*) AS ?c) WHERE "
         "{ { ?x :name ?n } UNION { ?x :worksIn ?d . ?d :name ?n } } GROUP BY ?x", "bounded", 11),
    Case("sum_of_coalesce", f"SELECT ?x (SUM(?b) AS ?s) WHERE {{ {AGE_OR_NAME} BIND(COALESCE(?a, 0) AS ?b) }} "
         "GROUP BY ?x", "bounded", 11),
    # a BIND that is an error for some values (Ann's age 34: a division by zero): COUNT skips it, COALESCE gives it
    # a value, a division by a constant other than 0 is never an error
    # over static data only, GROUP BY a variable the SELECT does not name: a row per group all the same
    Case("group_by_unselected", "SELECT (COUNT(*) AS ?n) WHERE { ?x :worksIn ?d } GROUP BY ?d",
         "bounded", 3),
    Case("count_of_a_division", "SELECT (COUNT(?r) AS ?c) WHERE { ?x :age ?a BIND(100 / (?a - 34) AS ?r) }",
         "bounded", 1),
    Case("sum_of_a_coalesced_division", "SELECT (SUM(?r) AS ?s) WHERE { ?x :age ?a "
         "BIND(COALESCE(100 / (?a - 34), 0) AS ?r) }", "bounded", 1),
    Case("avg_of_a_division_by_a_constant", "SELECT ?x (AVG(?r) AS ?s) WHERE { ?x :age ?a BIND(?a / 2 AS ?r) } "
         "GROUP BY ?x", "bounded", 8),
    # --- streams
    Case("stream_or_static", "SELECT ?r ?v ?n WHERE { { GRAPH ?t { ?r :value ?v } } UNION { ?r :name ?n } }",
         "bounded", 19),
    Case("two_streams", "SELECT ?r ?v ?l WHERE { { GRAPH ?t { ?r :value ?v } } UNION { GRAPH ?t { ?r :level ?l } } }",
         "bounded", 11),
    Case("time_of_one_side", "SELECT ?t ?r WHERE { { GRAPH ?t { ?r :value ?v } } UNION { ?r :name ?n } }",
         "bounded", 19),
    Case("stream_not_bound", "SELECT ?r ?v ?l WHERE { { GRAPH ?t { ?r :value ?v } } UNION { GRAPH ?t { ?r :level ?l } } "
         "FILTER(!BOUND(?v) || ?v > 25) }", "bounded", 8),
    Case("distinct_two_graphs", "SELECT DISTINCT ?n ?l WHERE { { GRAPH ?t { ?a :raisedBy ?p ; :level ?l } } UNION "
         "{ GRAPH ?t { ?a :raisedBy ?p } ?p :name ?n } }", "unbounded", 6),
    Case("stream_group_by_unbound", "SELECT ?v (COUNT(*) AS ?c) WHERE { { GRAPH ?t { ?r :value ?v } } UNION "
         "{ GRAPH ?t { ?a :level ?l } } } GROUP BY ?v", "bounded", 5),
]


test_sql_and_local_executor_equal_pyoxigraph, test_spark_executor_equals_pyoxigraph = case_tests(CASES)


@pytest.mark.parametrize("query, construct, words", [
    (f"SELECT ?x (SUM(?a) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x", "aggregate of a sometimes unbound variable",
     "UNION branch 2 of 2 leaves ?a unbound"),
    (f"SELECT ?x (AVG(?a) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x", "aggregate of a sometimes unbound variable",
     "COALESCE"),
    # an unbound value makes GROUP_CONCAT an error, as pyoxigraph answers (it does not skip it, as COUNT does)
    (f"SELECT ?x (GROUP_CONCAT(?n) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x",
     "aggregate of a sometimes unbound variable", "GROUP_CONCAT of a group an error"),
    # SPARQL's SUM of Ann's error is an error (pyoxigraph: unbound); SQL's SUM would skip it
    ("SELECT (SUM(?r) AS ?s) WHERE { ?x :age ?a BIND(100 / (?a - 34) AS ?r) }",
     "aggregate of a sometimes unbound variable", "a division by zero leaves ?r unbound"),
    ("SELECT (MAX(?t) AS ?s) WHERE { ?x :age ?a BIND(100 / (?a - 34) AS ?r) BIND(?r * 2 AS ?t) }",
     "aggregate of a sometimes unbound variable", "MAX of a group an error"),
    (f"SELECT ?x ?nope WHERE {{ {AGE_OR_NAME} }}", "unbound answer variable", "does not occur"),
    (f"SELECT ?x ?b WHERE {{ {AGE_OR_NAME} BIND(?z + 1 AS ?b) }}", "BIND", "no pattern before it"),
])
def test_what_a_union_cannot_leave_unbound_is_refused_and_located(world, query, construct, words):
    project, _, _ = world
    with pytest.raises(UnsupportedConstructError) as e:
        project.compile(PREFIX + query)
    assert e.value.construct == construct and words in e.value.message
    assert e.value.location is not None and e.value.location.line is not None


CATALOG = load_catalog(ROOT / "catalogs" / "patterns.yaml")


@pytest.mark.parametrize("entry", CATALOG, ids=[e.name for e in CATALOG])
def test_patterns_catalog_verdict_and_bag(demo_world, entry):
    """Each catalog entry: its expected verdict, and its SQL's bag on the demo's generated data equals
    pyoxigraph's."""
    check_catalog_entry(demo_world, entry)