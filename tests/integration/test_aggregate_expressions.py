"""Aggregates of an expression (issue 27): ``AVG(?v * 1.8 + 32)``, ``COUNT(DISTINCT STR(?x))``, the same expression
in SELECT, HAVING and ORDER BY (obda.query.aggregate_args); over static data, GROUP BY an expression without a name.

Each query's bag — obda's SQL on DuckDB and the local executor — equals pyoxigraph's over the independently
materialised, closed dataset (``bag_oracle.py``); an expression that is an error for some solutions is read as
SPARQL's aggregate reads it (COUNT skips it; SUM, AVG, MIN, MAX and GROUP_CONCAT of it are refused, located). The
stream forms are catalog entries (``catalogs/aggregates.yaml``: ``fahrenheit_per_sensor_aggregating_an_expression``,
``energy_per_site_last_5_minutes``), whose changelogs ``tests/execution/test_exec_sparql_aggregate.py`` replays
against DuckDB on both backends. Fixture data: ``oracle_cases.py``.
"""

from __future__ import annotations

import pytest

from obda.errors import UnsupportedConstructError

from integration.oracle_cases import PREFIX, Case, case_tests

AGE_OR_NAME = "{ ?x :age ?a } UNION { ?x :name ?n }"

CASES = [
    Case("avg_of_a_conversion", "SELECT ?x (AVG(?a * 1.8 + 32) AS ?f) (MAX(?a / 2) AS ?h) WHERE { ?x :age ?a } "
         "GROUP BY ?x", "bounded", 8),
    Case("global_sum_of_a_product", "SELECT (SUM(?a * ?a) AS ?s) (COUNT(*) AS ?n) WHERE { ?x :age ?a }", "bounded", 1),
    # Ann's age 34 makes the division an error, which COUNT skips: SPARQL 1.1 §18.5.1.2, "Count(S): L = Flatten(S),
    # remove error elements from L". pyoxigraph makes the whole COUNT an error instead, so the oracle is asked the
    # form the spec makes equal (the BIND leaves the variable unbound where the expression is an error)
    Case("count_of_an_erring_expression", "SELECT (COUNT(100 / (?a - 34)) AS ?c) WHERE { ?x :age ?a }", "bounded", 1,
         oracle_query="SELECT (COUNT(?r) AS ?c) WHERE { ?x :age ?a BIND(100 / (?a - 34) AS ?r) }"),
    Case("sum_of_a_coalesced_expression", f"SELECT ?x (SUM(COALESCE(?a, 0) * 2) AS ?s) WHERE {{ {AGE_OR_NAME} }} "
         "GROUP BY ?x", "bounded", 11),
    # LCASE of the unbound ?n of the age branch is an error, which COUNT skips (as above)
    Case("count_distinct_of_a_function", f"SELECT (COUNT(DISTINCT LCASE(?n)) AS ?c) (COUNT(DISTINCT ?n) AS ?d) "
         f"WHERE {{ {AGE_OR_NAME} }}", "bounded", 1,
         oracle_query=f"SELECT (COUNT(DISTINCT ?l) AS ?c) (COUNT(DISTINCT ?n) AS ?d) WHERE {{ {AGE_OR_NAME} "
                      "BIND(LCASE(?n) AS ?l) }"),
    Case("group_concat_of_text", "SELECT ?d (GROUP_CONCAT(STR(?a); SEPARATOR=\",\") AS ?ages) WHERE "
         "{ ?x :worksIn ?d ; :age ?a } GROUP BY ?d", "bounded", 3),
    # one expression in SELECT, HAVING and ORDER BY: one computed column
    Case("having_and_order_by_the_expression", "SELECT ?d (AVG(?a + 1) AS ?m) WHERE { ?x :worksIn ?d ; :age ?a } "
         "GROUP BY ?d HAVING (AVG(?a + 1) > 40) ORDER BY DESC(AVG(?a + 1))", "bounded", 2),
    # GROUP BY an expression without a name, over static data: a row per decade of age, the key not selected
    Case("group_by_an_unnamed_expression", "SELECT (COUNT(*) AS ?n) (AVG(?a) AS ?m) WHERE { ?x :age ?a } "
         "GROUP BY (FLOOR(?a / 10))", "bounded", 5),
    Case("constant_argument", "SELECT ?d (SUM(1) AS ?n) (COUNT(2) AS ?c) WHERE { ?x :worksIn ?d } GROUP BY ?d",
         "bounded", 3),
    # the name branch folds COALESCE(?a, 0) * 2 to the constant 0 * 2, which the executors compute (they refused it)
    Case("folded_constant_expression", f"SELECT ?x ?b WHERE {{ {AGE_OR_NAME} BIND(COALESCE(?a, 0) * 2 AS ?b) }}",
         "bounded", 21),
    Case("folded_constant_expression_of_a_stream", "SELECT ?r ?k WHERE { { GRAPH ?t { ?r :value ?v } } UNION "
         "{ GRAPH ?t { ?r :level ?l } } BIND(COALESCE(?v, 1) * 2 + 1 AS ?k) }", "bounded", 11),
]

test_sql_and_local_executor_equal_pyoxigraph, test_spark_executor_equals_pyoxigraph = case_tests(CASES)


def test_one_expression_is_one_column(world):
    project, _, _ = world
    comp = project.compile(PREFIX + CASES[6].query)
    calls = comp.query.aggregation.calls
    assert {c.argument for c in calls} == {calls[0].argument}  # AVG in SELECT and HAVING: the same variable
    assert str(calls[0]) == "AVG(?a + 1)" and calls[0].shown_argument == "?a + 1"
    assert comp.columns == ("d", "m")  # the computed column is no answer column


@pytest.mark.parametrize("query, construct, words, at", [
    ("SELECT (SUM(100 / (?a - 34)) AS ?s) WHERE { ?x :age ?a }", "aggregate of a sometimes unbound variable",
     "SUM(100 / (?a - 34)): 100 / (?a - 34) is an error for some of its values", (4, 9)),
    (f"SELECT ?x (AVG(?a * 2) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x",
     "aggregate of a sometimes unbound variable", "AVG(?a * 2): UNION branch 2 of 2 leaves ?a * 2 without a value",
     (4, 12)),
    ("SELECT (MAX(SUM(?a)) AS ?s) WHERE { ?x :age ?a }", "aggregate in an aggregate", "holds SUM(…)", (4, 9)),
    # STRLEN of a number is a type error for every solution: SPARQL's SUM is an error, SQL's would be 0
    ("SELECT (SUM(STRLEN(?a)) AS ?s) WHERE { ?x :age ?a }", "aggregate of an error",
     "SUM(STRLEN(?a)): STRLEN(?a) is an error for every solution", (4, 9)),
    ("SELECT (MIN(?t + 1) AS ?s) WHERE { GRAPH ?t { ?r :value ?v } }", "aggregate of time",
     "MIN(?t + 1) reads ?t, which is application time", (4, 13)),
])
def test_what_cannot_be_aggregated_is_refused_naming_the_expression(world, query, construct, words, at):
    project, _, _ = world
    with pytest.raises(UnsupportedConstructError) as e:
        project.compile(PREFIX + query)
    assert e.value.construct == construct and words in e.value.message, e.value.message
    assert "?agg" not in e.value.message  # the computed column's name is obda's, never shown
    if at is not None:
        assert (e.value.location.line, e.value.location.column) == at
