"""An aggregate subquery filtered by its query (issue 27; obda.query.aggregate_subquery):
``SELECT … WHERE { { SELECT ?d (AVG(?a) AS ?m) WHERE { … } GROUP BY ?d } FILTER(?m > 40) }`` and its ASK form.

Each query's bag — obda's SQL on DuckDB and the local executor — equals pyoxigraph's over the independently
materialised, closed dataset (``bag_oracle.py``): pyoxigraph evaluates the subquery on its own and joins its groups
with the FILTERs, as SPARQL 1.1 §18.2.1 does; obda runs one aggregate query with the FILTERs in its HAVING. The
stream forms are catalog entries (``catalogs/aggregates.yaml``: ``busy_sensors_filtered_subquery``,
``alarm_bursts_filtered_subquery``), whose changelogs ``tests/execution/test_exec_sparql_aggregate.py`` replays
against DuckDB after every closed timestamp on both backends. What the subquery cannot be joined with is refused,
located.
"""

from __future__ import annotations

import pytest

from obda.errors import UnsupportedConstructError
from obda.model.query import XSD

from integration.oracle_cases import PREFIX, Case, answer_records, case_tests

PEOPLE = "?x :worksIn ?d ; :age ?a"
PER_DEPT = f"{{ SELECT ?d (AVG(?a) AS ?m) (COUNT(*) AS ?n) (MIN(?a) AS ?lo) WHERE {{ {PEOPLE} }} GROUP BY ?d }}"

CASES = [
    Case("filtered_groups", f"SELECT ?d ?m WHERE {{ {PER_DEPT} FILTER(?m > 40) }}", "bounded", 1),
    # a FILTER before the subquery, one on a grouping variable, an || of both kinds: all in HAVING
    Case("select_star_and_two_filters", f"SELECT * WHERE {{ FILTER(?n >= 2) {PER_DEPT} "
         "FILTER(?lo < 30 || ?n > 2) }", "bounded", 2),
    Case("the_global_group", "SELECT ?c WHERE { { SELECT (COUNT(*) AS ?c) WHERE { ?x :age ?a } } FILTER(?c > 3) }",
         "bounded", 1),
    # the global group of no solution has COUNT 0: it passes
    Case("the_empty_global_group", "SELECT ?c WHERE { { SELECT (COUNT(*) AS ?c) WHERE { ?x :age ?a FILTER(?a > 500) "
         "} } FILTER(?c = 0) }", "bounded", 1),
    Case("a_filter_no_group_passes", f"SELECT ?d WHERE {{ {PER_DEPT} FILTER(?m > 500) }} ", "bounded", 0),
    Case("group_concat_compared_with_text", "SELECT ?d ?names WHERE { { SELECT ?d (GROUP_CONCAT(?nm; SEPARATOR=\",\") "
         "AS ?names) WHERE { ?x :worksIn ?d ; :name ?nm } GROUP BY ?d } FILTER(?names = \"Cid,Dee\" || "
         "?names = \"Dee,Cid\") }", "bounded", 1),
    Case("an_expression_of_aggregates", f"SELECT ?d ?spread WHERE {{ {{ SELECT ?d (MAX(?a) - MIN(?a) AS ?spread) WHERE "
         f"{{ {PEOPLE} }} GROUP BY ?d }} FILTER(?spread * 2 > 10) }}", "bounded", 2),
    Case("distinct_keeping_the_groups", f"SELECT DISTINCT ?d ?n WHERE {{ {PER_DEPT} FILTER(?n > 1) }}", "bounded", 3),
    Case("ordered_and_cut", f"SELECT ?d ?m WHERE {{ {PER_DEPT} FILTER(?n > 0) }} ORDER BY DESC(?m) LIMIT 2",
         "bounded", 2),
    Case("ask_true", f"ASK {{ {PER_DEPT} FILTER(?m > 40) }}", "bounded", 1),
    Case("ask_false", f"ASK {{ {PER_DEPT} FILTER(?m > 500) }}", "bounded", 1),
    Case("ask_of_the_global_group", "ASK { { SELECT (SAMPLE(?a) AS ?s) WHERE { ?x :age ?a } } FILTER(?s > 0) }",
         "bounded", 1),
    # over a stream: the oracle's bag is DuckDB's final table; the changelog is the catalog entries' to check
    Case("stream_groups_filtered", "SELECT ?r ?k WHERE { { SELECT ?r (COUNT(*) AS ?k) WHERE { GRAPH ?t { ?r :value ?v } "
         "} GROUP BY ?r } FILTER(?k >= 2) }", "bounded", 2),
]

test_sql_and_local_executor_equal_pyoxigraph, test_spark_executor_equals_pyoxigraph = case_tests(CASES)


def test_the_filters_are_the_subquerys_having(world):
    project, _, _ = world
    comp = project.compile(PREFIX + CASES[1].query)
    agg = comp.query.aggregation
    assert str(agg.having).replace(f'"^^<{XSD}integer>', "").replace('"', "") == (
        "(COUNT(*) >= 2 && (MIN(?a) < 30 || COUNT(*) > 2))")
    assert comp.columns == ("d", "m", "n", "lo")
    assert project.compile(PREFIX + CASES[0].query).columns == ("d", "m")
    assert project.compile(PREFIX + CASES[9].query).columns == ("boolean",)


@pytest.mark.parametrize("case, boolean", [(CASES[9], True), (CASES[10], False)], ids=["true", "false"])
def test_an_ask_of_an_aggregate_writes_the_line_of_every_ask(world, tmp_path, case, boolean):
    """One answer line, as an ASK over a pattern writes it (no changelog ``op``)."""
    project, _, _ = world
    assert answer_records(project, project.compile(case.text), tmp_path) == [
        {"emitted_at": None, "binding": {"boolean": boolean}}]


@pytest.mark.parametrize("query, construct, words, at", [
    # joined with a pattern: the groups would be a table of their own
    (f"SELECT ?x ?m WHERE {{ {PER_DEPT} ?x :worksIn ?d }}", "subquery with aggregates",
     "joined with other patterns it is not", (4, 24)),
    # an aggregate over the groups
    (f"SELECT (COUNT(*) AS ?k) WHERE {{ {PER_DEPT} FILTER(?m > 40) }}", "subquery with aggregates",
     "an aggregate over an aggregate subquery's groups", (4, 35)),
    (f"SELECT ?d ?z WHERE {{ {PER_DEPT} }}", "variable the subquery does not select",
     "?z is not selected by the aggregate subquery", (4, 11)),
    (f"SELECT ?d WHERE {{ {PER_DEPT} FILTER(?z > 1) }}", "FILTER on a variable the subquery does not select",
     "FILTER reads ?z", (4, 137)),
    (f"SELECT ((?m * 2) AS ?h) WHERE {{ {PER_DEPT} }}", "SELECT expression over an aggregate subquery",
     "compute the value inside the aggregate subquery", (4, 21)),
    # a text constant is compared with a GROUP_CONCAT only (a grouping variable may hold an IRI, held as its text)
    (f"SELECT ?d WHERE {{ {PER_DEPT} FILTER(?d = \"x\") }}", "non-numeric constant",
     "only numeric constants can be computed with", (4, 130)),
    (f"SELECT DISTINCT ?n WHERE {{ {PER_DEPT} }}", "DISTINCT over an aggregate subquery",
     "must select every grouping variable", (4, 8)),
    ("SELECT ?n WHERE { { SELECT DISTINCT (COUNT(*) AS ?n) WHERE { ?x :worksIn ?d } GROUP BY ?d } }",
     "DISTINCT over an aggregate subquery", "must select every grouping variable", (4, 28)),
    ("SELECT ?d WHERE { { SELECT ?d (COUNT(*) AS ?n) WHERE { ?x :worksIn ?d } GROUP BY ?d LIMIT 1 } }",
     "LIMIT in a subquery", "keeps an arbitrary part of its groups", (4, 85)),
    (f"SELECT ?d WHERE {{ {PER_DEPT} }} VALUES ?d {{ <http://example.org/mult/data/dept/1> }}", "VALUES",
     "put it inside the subquery's WHERE", (4, 132)),
    ("ASK { { SELECT ?r (COUNT(*) AS ?k) WHERE { GRAPH ?t { ?r :value ?v } } GROUP BY ?r } FILTER(?k > 1) }",
     "ASK of an aggregate over streams", "a group passing now may fail later", (4, 1)),
])
def test_what_an_aggregate_subquery_cannot_do_is_refused_located(world, query, construct, words, at):
    project, _, _ = world
    with pytest.raises(UnsupportedConstructError) as e:
        project.compile(PREFIX + query)
    assert e.value.construct == construct and words in e.value.message, e.value.message
    assert (e.value.location.line, e.value.location.column) == at
