"""The W3C SPARQL evaluation tests of whole manifests (vendored under ``suite/``), run like the others
(``runner.py``), printing passed / failed / refused per manifest:

* ``data-r2/basic`` and ``triple-match``: basic graph patterns, mostly with a variable predicate (``?s ?p ?o``).
  Before variable predicates (issue 27) 6 of these 31 tests passed; now all do (``bgp-no-match``: its class
  ``foaf:Womble`` has no triple in the data; the generated ontology declares what the query names too).
* ``sparql11/entailment``, with each test's schema triples as the project's ontology (``runner.SCHEMA_MANIFESTS``),
  so that obda's OWL 2 QL rewriting answers what it entails: 20 of the 70 pass, among them every RDFS inference
  test obda can state — ``rdfs:subPropertyOf`` (rdfs01, rdfs02, transitivity rdfs10), ``rdfs:subClassOf``
  (rdfs04, transitivity rdfs09), ``rdfs:domain`` (rdfs06, with subPropertyOf rdfs03), ``rdfs:range`` (rdfs07) —
  and SPARQL-DL's undistinguished variables (sparqldl-07..09), asked with ASK too (sparqldl-05, -06).
* ``data-r2/optional``, ``optional-filter``, ``sparql11/negation`` and ``exists``: OPTIONAL, MINUS and FILTER
  [NOT] EXISTS (a FILTER in OPTIONAL reading variables bound before it: the left join's condition); refused: a
  FILTER in a group nested inside OPTIONAL reading a variable of an enclosing group, NOT EXISTS inside an
  expression, GRAPH.
* ``sparql11/subquery``: nested SELECTs, inlined; an aggregate subquery with FILTERs only beside it (their HAVING,
  also under ASK, the GROUP_CONCAT and SAMPLE tests of ``sparql11/aggregates``); refused: an aggregate subquery
  joined with a pattern or aggregated again, LIMIT inside, CONSTRUCT.
* ``data-r2/algebra``, ``bnode-coreference``, ``bound``, ``i18n``, ``boolean-effective-value``, ``sparql11/bind``,
  ``grouping`` and ``project-expression``: the nested OPTIONALs and join scopes of the algebra, and constructs
  obda already accepted (a variable alone as a FILTER operand: its effective boolean value, dawg-bev-1 to -6);
  refused: a FILTER reading a variable its group does not bind (opt-filter-3), BIND of a variable bound after it.
* ``data-r2/sort`` (ORDER BY, also of an expression or of a variable not selected; an ordered result is compared
  in order on its keys, ties in any order, or as a sequence when its keys are not answer columns),
  ``solution-seq`` (LIMIT / OFFSET) and ``sparql11/aggregates``.

An ASK's expected boolean is compared with obda's one answer column ``boolean`` (its SQL over static data gives one
row, true or false). A failing test is a known difference (:data:`KNOWN`, with its reason); the refused ones name
their construct: subqueries with aggregates joined with a pattern, a query over the schema itself (``?c rdfs:subClassOf :d``), a blank node as a class,
a function obda does not compute (``xsd:dateTime()``), an aggregate
over terms it cannot take, a term the ontology does not declare.
"""

from __future__ import annotations

import pytest

from w3c.runner import SUITE, check_outcomes, manifest_tests, run_selected

MANIFESTS = ("triple-match", "basic", "entailment", "sort", "solution-seq", "aggregates", "optional", "optional-filter",
             "negation", "exists", "subquery", "algebra", "bnode-coreference", "bound", "i18n", "boolean-effective-value",
             "bind", "grouping", "project-expression")
SELECTED = {m: {t.name for t in manifest_tests(SUITE / m / "manifest.ttl")} for m in MANIFESTS}
BASIC = {"base-prefix-1", "base-prefix-2", "base-prefix-3", "base-prefix-4", "base-prefix-5", "bgp-no-match",
         "list-1", "list-2", "list-3", "list-4", "prefix-name-1", "quotes-1", "quotes-2", "quotes-3", "quotes-4",
         "spoo-1", "term-1", "term-2", "term-3", "term-4", "term-5", "term-6", "term-7", "term-8", "term-9",
         "var-1", "var-2"}
ENTAILMENT = {"lang", "owlds02", "plainLit", "rdf02", "rdf03", "rdf04", "rdfs01", "rdfs02", "rdfs03", "rdfs04",
              "rdfs06", "rdfs07", "rdfs09", "rdfs10", "rdfs12", "sparqldl-01", "sparqldl-04", "sparqldl-05", "sparqldl-06", "sparqldl-07",
              "sparqldl-08", "sparqldl-09"}
MODIFIERS = {
    "dawg-sort-1", "dawg-sort-2", "dawg-sort-4", "dawg-sort-5", "dawg-sort-9", "dawg-sort-10",
    # ORDER BY an expression, or a variable the SELECT does not project: hidden columns of the sorted table
    "dawg-sort-numbers", "dawg-sort-builtin", "sort-not-projected",
    "dawg-sort-7",  # integers and a float (xsd:float: a DOUBLE column) sorted by value
    # a column of several kinds of term (a blank node, IRIs, literals): its term type beside it in the compiled
    # SQL (obda.model.terms), sorted in SPARQL's order of terms, each value of its own kind
    "dawg-sort-6", "dawg-sort-8", "projexp05",
    "dawg-sort-function", "agg-group-fn",  # ORDER BY / GROUP BY a cast (xsd:integer(?o))
    "limit-1", "limit-2", "limit-3", "limit-4", "offset-1", "offset-2", "offset-3", "offset-4", "slice-1",
    "slice-2", "slice-3", "slice-4", "slice-5",
    "agg01", "agg02", "agg03", "agg04", "agg05", "agg06", "agg07", "agg-sum-01", "agg-sum-02", "agg-avg-01",
    "agg-avg-02", "agg-min-01", "agg-min-02", "agg-max-01", "agg-max-02", "agg-min-distinct", "agg-max-distinct",
    "agg-count-distinct", "agg-multiple-having", "agg-sum-distinct", "agg-avg-distinct", "agg08b",
    "agg-group-builtin",
}
NEGATION = {  # OPTIONAL, MINUS, FILTER [NOT] EXISTS (obda/query/negation.py)
    "dawg-optional-001", "dawg-optional-002", "dawg-union-001", "dawg-optional-complex-1",
    "dawg-optional-filter-001", "dawg-optional-filter-002", "dawg-optional-filter-003",
    "subset-by-exclusion-nex-1", "subset-by-exclusion-minus-1", "exists-01", "exists-02", "exists01", "exists02",
    "exists04", "exists05", "full-minuend", "set-equals-1", "subset-01", "subset-03", "nested-opt-2",
    # an xsd:date column (text in the runner's tables): its values read as dates, as the compilation types the
    # column (Compilation.column_terms)
    "temporal-proximity-by-exclusion-nex-1",
    # data-r2/algebra: nested OPTIONALs and the scope of a join (an OPTIONAL sharing nothing with its group)
    "join-scope-1", "nested-opt-1", "filter-nested-1", "filter-place-1", "filter-place-2", "filter-place-3",
    "join-combo-1",
    # a FILTER in OPTIONAL reading variables bound before it: the left join's condition
    "dawg-optional-filter-004", "opt-filter-1", "opt-filter-2",
}
OTHERS = {  # whole manifests of SPARQL 1.0 / 1.1 obda accepts
    "dawg-bnode-coref-001", "dawg-bound-query-001", "kanji-1", "kanji-2", "normalization-1", "normalization-2",
    "normalization-3", "dawg-boolean-literal", "dawg-bev-1", "dawg-bev-2", "dawg-bev-3",
    "dawg-bev-4", "dawg-bev-5", "dawg-bev-6", "bind01", "bind02", "bind03", "bind05", "bind06", "bind08", "bind11",
    "group01", "group03", "group05", "projexp03", "projexp04",
    "projexp01",  # a comparison as a SELECT value ((?y = ?z) AS ?eq)
}
SUBQUERIES = {"subquery06", "subquery09", "subquery10", "subquery13"}  # inlined (obda/query/subselect.py)
# an aggregate subquery and FILTERs: the FILTERs are its HAVING (obda/query/aggregate_subquery.py); an ASK of it
AGGREGATE_SUBQUERIES = {"agg-groupconcat-01", "agg-groupconcat-03", "agg-groupconcat-distinct", "agg-sample-01",
                        "agg-sample-distinct"}
# a property or class only the query names: declared, with no triple (runner.query_vocabulary)
UNUSED_VOCABULARY = {"agg-empty-group-max-1", "agg-empty-group-max-2", "agg-empty-group-count-2", "partial-minuend",
                     "agg-empty-group-count-1"}  # (this one also groups by a variable it does not select)
PASSING = (SELECTED["triple-match"] | BASIC | UNUSED_VOCABULARY | ENTAILMENT | MODIFIERS | NEGATION | SUBQUERIES
           | AGGREGATE_SUBQUERIES | OTHERS)
KNOWN = {
    # obda's answers are certain answers (docs/semantics.md, "Existential parts"): a variable the query does not
    # project may be an anonymous individual, so Alice — a Parent, hence with some child — answers
    # ?parent :hasChild ?child; the entailment regime binds every variable to a named individual
    "parent2": "a variable that is not projected may be an anonymous individual (certain answers)",
    # owl:sameAs is outside OWL 2 QL: obda reads it as a property of the data, without equality reasoning
    "sparqldl-13": "owl:sameAs is not reasoned with (outside OWL 2 QL)",
}


@pytest.fixture(scope="module")
def outcomes():
    return run_selected(SELECTED)


def test_whole_manifests_pass_but_the_known_differences(outcomes):
    check_outcomes(outcomes, PASSING, KNOWN)
    refused = {o.test.name: o.detail for o in outcomes if o.status == "refused"}
    # the runner loads a test's default graph (qt:data) into tables, not its named graphs (qt:graphData), from
    # which the expected answers come
    assert "named graphs (qt:graphData)" in refused["subquery04"] and "qt:graphData" in refused["join-combo-2"]
