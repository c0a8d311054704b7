"""SPARQL aggregates, windows and renames in the typed query model (obda.model.query)."""

from __future__ import annotations

import pytest

from obda.errors import UnsupportedConstructError
from obda.model.query import Aggregate, Arithmetic, Comparison, Connective, Literal, SelectItem, Var, XSD
from obda.query import parse_query

HEAD = "PREFIX : <http://e/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"


def test_aggregation_model_and_characteristic_projection():
    q = parse_query(HEAD + "SELECT ?g (COUNT(DISTINCT ?x) AS ?n) (SUM(?x) / COUNT(*) AS ?m) WHERE { ?g :p ?x . ?g :q ?y }"
                           " GROUP BY ?g HAVING (COUNT(*) > 2 || AVG(?y) < 1.5) ORDER BY DESC(?n) ?g")
    a = q.aggregation
    assert a.group_by == (Var("g"),)
    assert a.items[0] == SelectItem("g", Var("g"))
    assert a.items[1] == SelectItem("n", Aggregate("count_distinct", Var("x")))
    assert a.items[2] == SelectItem("m", Arithmetic("/", Aggregate("sum", Var("x")), Aggregate("count")))
    assert a.having == Connective("or", (Comparison(">", Aggregate("count"), Literal("2", XSD + "integer")),
                                         Comparison("<", Aggregate("avg", Var("y")), Literal("1.5", XSD + "decimal"))))
    assert q.order_by == (("n", True), ("g", False))
    assert a.calls == (Aggregate("count_distinct", Var("x")), Aggregate("sum", Var("x")), Aggregate("count"),
                       Aggregate("avg", Var("y")))
    assert q.projection == (Var("g"), Var("x"), Var("y"))  # Q': the groups, then the aggregated variables
    assert q.columns == ("g", "n", "m") and not q.distinct


def test_an_aggregate_query_orders_by_an_expression_its_select_names():
    base = HEAD + "SELECT ?g (COUNT(DISTINCT ?x) AS ?n) (SUM(?x) / COUNT(*) AS ?m) WHERE { ?g :p ?x } GROUP BY ?g "
    q = parse_query(base + "ORDER BY DESC(COUNT(DISTINCT ?x)) (SUM(?x) / COUNT(*)) ?g")
    assert q.order_by == (("n", True), ("m", False), ("g", False))

def test_an_aggregate_query_orders_by_an_expression_its_select_does_not_name():
    """``ORDER BY DESC(COUNT(?x))`` without ``(COUNT(?x) AS ?n)``: a value computed per group under a fresh name,
    ordering the answer table, never an answer column; over static data only, LIMIT and OFFSET cut that table."""
    base = HEAD + "SELECT ?g (COUNT(DISTINCT ?x) AS ?n) WHERE { ?g :p ?x } GROUP BY ?g "
    q = parse_query(base + "ORDER BY DESC(COUNT(?x)) (COUNT(DISTINCT ?x)) DESC(AVG(?x) + 1) ?g LIMIT 2 OFFSET 1")
    a = q.aggregation
    assert a.order_items == (SelectItem("order1", Aggregate("count", Var("x"))),
                             SelectItem("order2", Arithmetic("+", Aggregate("avg", Var("x")),
                                                             Literal("1", XSD + "integer"))))
    assert q.order_by == (("order1", True), ("n", False), ("order2", True), ("g", False))
    assert q.columns == ("g", "n") and (q.limit, q.offset) == (2, 1)
    assert a.calls == (Aggregate("count_distinct", Var("x")), Aggregate("count", Var("x")), Aggregate("avg", Var("x")))


@pytest.mark.parametrize("tail, construct, at", [
    ("ORDER BY (?x + 1)", "ungrouped variable", (3, 70)),  # ?x is neither grouped nor aggregated
    ("ORDER BY ?x", "ORDER BY variable", (3, 69)),
    ("ORDER BY ?n LIMIT 1", "LIMIT", None),  # over streams: a changelog, not a table to cut
])
def test_what_an_aggregate_query_cannot_order_by_is_refused_located(tail, construct, at):
    base = HEAD + "SELECT ?g (COUNT(?x) AS ?n) WHERE { ?g :p ?x } GROUP BY ?g "
    if construct == "LIMIT":
        base = base.replace("{ ?g :p ?x }", "{ GRAPH ?t { ?g :p ?x } }")
    with pytest.raises(UnsupportedConstructError) as e:
        parse_query(base + tail)
    assert e.value.construct == construct
    if at is not None:
        assert (e.value.location.line, e.value.location.column) == at


def test_global_aggregate_and_distinct_is_a_no_op():
    q = parse_query(HEAD + "SELECT DISTINCT (COUNT(?x) AS ?n) WHERE { ?g :p ?x }")
    assert q.aggregation.group_by == () and q.projection == (Var("x"),) and not q.distinct


def test_window_width_and_inclusiveness():
    q = parse_query(HEAD + "SELECT ?g (AVG(?x) AS ?a) WHERE { GRAPH ?t { ?g :p ?x } "
                           "FILTER(?t >= NOW() - \"PT1H30M\"^^xsd:dayTimeDuration && ?x > 0) FILTER(?t <= NOW()) } GROUP BY ?g")
    w = q.window
    assert w.variable == Var("t") and w.width == 90 * 60 * 1_000_000 and w.inclusive
    assert w.contains(100, 100 + w.width) and not w.contains(99, 100 + w.width) and w.leaves_at(0) == w.width + 1
    assert [c for b in q.branches for c in b.filters] == [Comparison(">", Var("x"), Literal("0", XSD + "integer"))]


def test_rename_of_a_variable_in_a_query_without_aggregates():
    q = parse_query(HEAD + "SELECT ?g (?x AS ?y) WHERE { ?g :p ?x FILTER(?x > 1) }")
    assert q.projection == (Var("g"), Var("y")) and q.aggregation is None
    assert q.branches[0].filters == (Comparison(">", Var("y"), Literal("1", XSD + "integer")),)


def test_rename_of_a_time_variable_is_a_time_variable():
    q = parse_query(HEAD + "SELECT (?t AS ?when) ?x WHERE { GRAPH ?t { ?g :p ?x } FILTER(?t > \"2024-01-01T00:00:00\"^^xsd:dateTime) }")
    assert q.projection == (Var("when"), Var("x"))
    assert [a.time for a in q.branches[0].atoms] == [Var("when")]
    assert q.branches[0].filters[0].left == Var("when")


@pytest.mark.parametrize("text,construct", [
    ("SELECT ?g (?x AS ?g) WHERE { ?g :p ?x }", "SELECT expression"),
    ("SELECT ?x (?x AS ?y) WHERE { ?g :p ?x }", "SELECT expression"),
])
def test_refused_renames(text, construct):
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(HEAD + text)
    assert info.value.construct == construct and info.value.location.line == 3


def test_a_select_expression_over_an_unbound_variable_is_unbound():
    """SPARQL: ``(?z + 1 AS ?y)`` with ?z bound nowhere is an error, so ?y is unbound in every answer (it was
    refused before; W3C coalesce01 projects such a column); ``COALESCE`` skips the unbound argument."""
    q = parse_query(HEAD + "SELECT ?x (?z + 1 AS ?y) (COALESCE(?z, 7) AS ?c) WHERE { ?g :p ?x }")
    assert q.projection == (Var("x"), Var("y"), Var("c"))
    assert [v for v, _ in q.branches[0].binds] == [Var("c")]


def test_window_on_a_query_without_aggregates_removes_nothing():
    """An SPJ answer enters at its own timestamp ?t = NOW(), inside any window: each answer is emitted once, when
    it enters, exactly as without the window (issue 15: "a window SPJ query emits each answer when it enters")."""
    body = "SELECT ?g ?x WHERE { GRAPH ?t { ?g :p ?x } FILTER(?t > NOW() - \"PT10M\"^^xsd:dayTimeDuration && ?x > 1) }"
    windowed = parse_query(HEAD + body)
    plain = parse_query(HEAD + body.replace("?t > NOW() - \"PT10M\"^^xsd:dayTimeDuration && ", ""))
    assert windowed.window is None and windowed.aggregation is None
    assert windowed.branches == plain.branches and windowed.projection == plain.projection


def test_interval_join_is_a_shifted_time_variable():
    from obda.model.query import Shifted

    q = parse_query(HEAD + "SELECT ?g ?x WHERE { GRAPH ?t1 { ?g :p ?x } GRAPH ?t2 { ?g :q ?y } "
                           "FILTER(?t1 < ?t2 && ?t2 <= ?t1 + \"PT5M\"^^xsd:dayTimeDuration "
                           "&& ?t1 >= ?t2 - \"P1DT1H\"^^xsd:duration) }")
    (b,) = q.branches
    assert Comparison("<=", Var("t2"), Shifted(Var("t1"), 5 * 60 * 1_000_000)) in b.filters
    assert Comparison(">=", Var("t1"), Shifted(Var("t2"), -25 * 3600 * 1_000_000)) in b.filters
    assert Var("t1") in b.variables and str(Shifted(Var("t1"), 1_500_000)) == '?t1 + "PT1.5S"'
    renamed = b.substitute({Var("t1"): Var("u")})
    assert Comparison("<=", Var("t2"), Shifted(Var("u"), 300_000_000)) in renamed.filters


@pytest.mark.parametrize("text,construct,snippet", [
    ("SELECT ?x WHERE { GRAPH ?t1 { ?g :p ?x } GRAPH ?t2 { ?g :q ?y } FILTER(?t2 <= ?x + \"PT5M\"^^xsd:dayTimeDuration) }",
     "duration arithmetic", "?x"),
    ("SELECT ?x WHERE { GRAPH ?t1 { ?g :p ?x } FILTER(?x <= ?t1 + \"PT5M\"^^xsd:dayTimeDuration) }",
     "interval join", "?t1"),
    ("SELECT ?x WHERE { GRAPH ?t1 { ?g :p ?x } GRAPH ?t2 { ?g :q ?y } FILTER(?t2 <= ?t1 + \"P1M\"^^xsd:duration) }",
     "duration", "FILTER"),
    ("SELECT DISTINCT ?x WHERE { GRAPH ?t1 { ?g :p ?x } GRAPH ?t2 { ?g :q ?y } "
     "FILTER(?t1 < ?t2 && ?t2 <= ?t1 + \"PT5M\"^^xsd:dayTimeDuration) }", "interval join", "FILTER"),
])
def test_interval_join_refusals_are_located(text, construct, snippet):
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(HEAD + text)
    e = info.value
    assert e.construct == construct, e.message
    line = (HEAD + text).splitlines()[e.location.line - 1]
    assert line[e.location.column - 1:].startswith(snippet), (line, e.location)


def test_bind_computes_a_value_per_branch():
    q = parse_query(HEAD + "SELECT ?g ?len WHERE { ?g :p ?w . { ?g :q ?l BIND(?l AS ?len) } UNION "
                           "{ ?g :r ?l BIND(?l * 0.3048 AS ?len) } FILTER(?len > 50) }")
    first, second = q.branches
    assert first.binds == ((Var("len"), Var("l")),)
    assert second.binds == ((Var("len"), Arithmetic("*", Var("l"), Literal("0.3048", XSD + "decimal"))),)
    assert all(Comparison(">", Var("len"), Literal("50", XSD + "integer")) in b.filters for b in q.branches)
    assert q.projection == (Var("g"), Var("len")) and Var("len") in first.variables
    assert first.bind_inputs == {Var("l")}
    renamed = second.substitute({Var("l"): Var("m")})
    assert renamed.binds == ((Var("len"), Arithmetic("*", Var("m"), Literal("0.3048", XSD + "decimal"))),)
