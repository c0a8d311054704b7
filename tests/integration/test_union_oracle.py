"""UNION branches that bind different variables (issue 27): an answer leaves unbound what its branch does not bind.

Each query runs as obda's SQL on DuckDB, on the local executor and (stream queries) on Spark; each bag must
equal pyoxigraph's over the independently materialised, closed dataset (``bag_oracle.py``). FILTERs and BINDs
read a variable a branch leaves unbound as SPARQL does: ``BOUND`` false, ``COALESCE`` skips it, any other use an
error (docs/semantics.md, "Unbound variables"). Fixture data: see ``test_functions_oracle.py``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

import pytest

import obda
from obda.catalog import check_entry, load_catalog
from obda.errors import UnsupportedConstructError

from integration.bag_oracle import bag_diff, sql_bag
from integration.conftest import ROOT
from integration.test_functions_oracle import PREFIX, executed

AGE_OR_NAME = "{ ?x :age ?a } UNION { ?x :name ?n }"


@dataclass(frozen=True)
class Case:
    id: str
    query: str
    verdict: str
    size: int  # answers (with multiplicity) the oracle gives: the case must not be vacuous

    @property
    def text(self) -> str:
        return PREFIX + self.query

    @property
    def stream(self) -> bool:
        return "GRAPH" in self.query

    @property
    def changelog(self) -> bool:  # a stream aggregate writes a changelog, not a bag: checked in SQL only
        return self.stream and "GROUP BY" in self.query


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
    Case("sum_of_coalesce", f"SELECT ?x (SUM(?b) AS ?s) WHERE {{ {AGE_OR_NAME} BIND(COALESCE(?a, 0) AS ?b) }} "
         "GROUP BY ?x", "bounded", 11),
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


def _value(v):
    """A projected time comes back as ISO text from the executor, as a datetime from the oracle."""
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] == "T":
        try:
            return dt.datetime.fromisoformat(v.rstrip("Z")).replace(tzinfo=None)
        except ValueError:
            return v
    return v


def _bag(got: Counter) -> Counter:
    return Counter({tuple(_value(v) for v in k): n for k, n in got.items()})


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_sql_and_local_executor_equal_pyoxigraph(world, case, tmp_path):
    project, con, oracle = world
    comp = project.compile(case.text)
    want = oracle.answers(case.text, list(comp.columns))
    assert sum(want.values()) == case.size, f"{case.id}: the oracle gives {sorted(want.items(), key=str)}"
    got = sql_bag(con, comp.to_sql("duckdb"))
    assert got == want, f"{case.id}: SQL (DuckDB)\n" + bag_diff(got, want)
    assert obda.analyze(comp, project.sources).verdict == case.verdict
    if case.changelog:
        return
    got = _bag(executed(project, comp, tmp_path, "local"))
    assert got == want, f"{case.id}: local executor\n" + bag_diff(got, want)


@pytest.mark.spark
@pytest.mark.parametrize("case", [c for c in CASES if c.stream and not c.changelog],
                         ids=[c.id for c in CASES if c.stream and not c.changelog])
def test_spark_executor_equals_pyoxigraph(world, case, tmp_path, spark):
    project, _, oracle = world
    comp = project.compile(case.text)
    want = oracle.answers(case.text, list(comp.columns))
    got = _bag(executed(project, comp, tmp_path, "spark", spark))
    assert got == want, f"{case.id}: Spark executor\n" + bag_diff(got, want)


@pytest.mark.parametrize("query, construct, words", [
    (f"SELECT ?x (SUM(?a) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x", "aggregate of a sometimes unbound variable",
     "UNION branch 2 of 2 leaves ?a unbound"),
    (f"SELECT ?x (AVG(?a) AS ?s) WHERE {{ {AGE_OR_NAME} }} GROUP BY ?x", "aggregate of a sometimes unbound variable",
     "COALESCE"),
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
    project, con, oracle = demo_world
    res = check_entry(project, entry)
    assert res.error is None, res.error
    assert res.verdict == entry.expected, f"{entry.name}: expected {entry.expected}, got {res.verdict} ({entry.why})"
    comp = project.compile(entry.query)
    want = oracle.answers(entry.query, list(comp.columns))
    assert want, f"{entry.name}: vacuous on the demo data"
    got = sql_bag(con, comp.to_sql("duckdb"))
    assert got == want, f"{entry.name}\n" + bag_diff(got, want)
