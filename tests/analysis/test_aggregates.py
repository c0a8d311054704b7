"""Aggregate queries: Arasu et al. 2004 §8.2, a test per theorem and condition, with the paper's examples.

Streams of ``SPEC_SOURCES`` (conftest): S(A, B, C, D, t1), T(D, E, F, t2), R static, M with a
decimal ``value`` and a string ``label``.
"""

from __future__ import annotations

import pytest

from obda.analysis.aggregates import FUNCTIONS, HOLISTIC, analyze_aggregate
from obda.errors import AnalysisError

BOUNDED_A = "0 < S.A AND S.A < 5"  # S.A takes finitely many values


def verdict(sources, sql):
    return analyze_aggregate(sql, sources)


def failing(report):
    return [c.name for c in report.conditions if not c.holds]


def test_functions_are_classified_as_the_paper_does():
    kinds = {n: (f.kind, f.duplicate_sensitive) for n, f in FUNCTIONS.items()}
    assert kinds["sum"] == kinds["count"] == ("distributive", True)
    assert kinds["min"] == kinds["max"] == ("distributive", False)
    assert kinds["avg"] == ("algebraic", True)
    assert kinds["count_distinct"] == (HOLISTIC, False) and kinds["median"] == (HOLISTIC, True)


# -- Theorems 8.3 / 8.5: one stream --------------------------------------------------------------

def test_single_stream_bounded_grouping_attribute(sources):
    r = verdict(sources, f"SELECT S.A, COUNT(*), SUM(S.B), AVG(S.B) FROM S WHERE {BOUNDED_A} GROUP BY S.A")
    assert r.verdict == "bounded" and r.theorem.endswith("8.5")


def test_single_stream_unbounded_grouping_attribute_is_unbounded(sources):
    """Condition (1): the answer has one row per group, so the groups must be finitely many."""
    r = verdict(sources, "SELECT S.A, COUNT(*) FROM S GROUP BY S.A")
    assert r.verdict == "unbounded" and failing(r) == ["grouping attribute bounded"]
    assert "S.A" in r.conditions[0].detail


def test_single_stream_distributive_and_algebraic_over_unbounded_attributes(sources):
    """Condition (2) only restricts holistic functions: SUM, COUNT, AVG, MIN, MAX of anything."""
    r = verdict(sources, "SELECT COUNT(S.B), SUM(S.B), AVG(S.C), MIN(S.B), MAX(S.C) FROM S")
    assert r.verdict == "bounded" and not failing(r)


@pytest.mark.parametrize("holistic", ["COUNT(DISTINCT S.B)", "MEDIAN(S.B)"])
def test_single_stream_holistic_needs_a_bounded_attribute(sources, holistic):
    """Condition (2): a count per distinct value of an unbounded attribute grows."""
    assert failing(verdict(sources, f"SELECT {holistic} FROM S")) == ["C2: holistic aggregate over a bounded attribute"]
    bounded = holistic.replace("S.B", "S.A")
    assert verdict(sources, f"SELECT {bounded} FROM S WHERE {BOUNDED_A}").verdict == "bounded"


def test_example_of_several_aggregates_grouped_by_a_constant(sources):
    """The paper's ``_A𝒢_{SUM(B), MAX(C)}(σ_{A=10}(S))``."""
    r = verdict(sources, "SELECT S.A, SUM(S.B), MAX(S.C) FROM S WHERE S.A = 10 GROUP BY S.A")
    assert r.verdict == "bounded"


# -- characteristic queries (Theorem 8.4's Q', 8.6's Q'_R) ----------------------------------------

def test_characteristic_queries_and_duplicate_sensitivity(sources):
    """Π = π iff every function is duplicate-insensitive; Q' projects G ∪ A(F), Q'_R only G."""
    sens = verdict(sources, f"SELECT S.A, SUM(S.B) FROM S WHERE {BOUNDED_A} GROUP BY S.A")
    assert "DISTINCT" not in sens.characteristic_sql and "DISTINCT" not in sens.reduced_sql
    assert "S.B" in sens.characteristic_sql and "S.B" not in sens.reduced_sql
    insens = verdict(sources, f"SELECT S.A, MAX(S.B), COUNT(DISTINCT S.C) FROM S WHERE {BOUNDED_A} GROUP BY S.A")
    assert insens.characteristic_sql.startswith("SELECT DISTINCT") and insens.reduced_sql.startswith("SELECT DISTINCT")
    mixed = verdict(sources, f"SELECT S.A, MAX(S.B), COUNT(*) FROM S WHERE {BOUNDED_A} GROUP BY S.A")
    assert "DISTINCT" not in mixed.characteristic_sql


# -- Theorem 8.6: several streams ----------------------------------------------------------------

def test_example_8_7_sum_of_an_unbounded_attribute_over_a_join(sources):
    """Example 8.7: ``_{A,C}𝒢_{SUM(B)}`` over S(A, B) × T(C) with 10 < A, C < 20: bounded although B is not
    (the sum is pushed below the join, one partial sum per value of A)."""
    r = verdict(sources, "SELECT S.A, T.E, SUM(S.B) FROM S, T WHERE 10 < S.A AND S.A < 20 AND 10 < T.E AND T.E < 20 "
                         "GROUP BY S.A, T.E")
    assert r.verdict == "bounded" and r.theorem.endswith("8.6") and r.reduced_verdict == "bounded"


def test_c1_reduced_characteristic_query_unbounded(sources):
    """C1: an equality join on unbounded attributes needs every past value: unbounded, whatever F."""
    r = verdict(sources, "SELECT COUNT(*) FROM S, T WHERE S.D = T.D")
    assert r.verdict == "unbounded" and failing(r) == ["C1: reduced characteristic query bounded"]


def test_c1_holds_for_a_count_over_a_time_ordered_join(sources):
    """A count of pairs in time order: Q'_R projects nothing, counts per timestamp suffice."""
    assert verdict(sources, "SELECT COUNT(*) FROM S, T WHERE T.t2 < S.t1").verdict == "bounded"


def test_grouping_attribute_of_a_join_must_be_bounded(sources):
    r = verdict(sources, "SELECT S.B, COUNT(*) FROM S, T WHERE T.t2 < S.t1 GROUP BY S.B")
    assert r.verdict == "unbounded" and "grouping attribute bounded" in failing(r)


def test_c2_holistic_over_a_join(sources):
    base = "FROM S, T WHERE T.t2 < S.t1 AND 0 < S.A AND S.A < 5"
    assert failing(verdict(sources, f"SELECT COUNT(DISTINCT S.B) {base}")) == [
        "C2: holistic aggregate over a bounded attribute"]
    assert verdict(sources, f"SELECT COUNT(DISTINCT S.A) {base}").verdict == "bounded"


def test_c3_max_of_the_only_maxref_attribute(sources):
    """``T.D < S.A``: MaxRef(S) = {S.A}. MAX(S.A) is the extreme the join keeps anyway."""
    r = verdict(sources, "SELECT MAX(S.A) FROM S, T WHERE T.D < S.A AND 0 < T.D AND T.D < 5")
    assert r.verdict == "bounded" and [c.name for c in r.conditions if c.name.startswith("C3")] == [
        "C3: MAX of an unbounded attribute"]


def test_c3_max_of_another_attribute_than_maxref(sources):
    """MaxRef(S) = {S.A} but MAX(S.B): the bucket would need two different maxima."""
    r = verdict(sources, "SELECT MAX(S.B) FROM S, T WHERE T.D < S.A AND 0 < T.D AND T.D < 5")
    assert r.verdict == "unbounded" and failing(r) == ["C3: MAX of an unbounded attribute"]
    assert "MaxRef(S) = {S.A}" in r.conditions[-1].detail


def test_c3_with_an_empty_maxref_and_the_min_side(sources):
    """``S.A < T.D``: MinRef(S) = {S.A}, MaxRef(S) empty: MAX(S.B) bounded, MIN(S.B) not."""
    base = "FROM S, T WHERE S.A < T.D AND 0 < T.D AND T.D < 5"
    assert verdict(sources, f"SELECT MAX(S.B) {base}").verdict == "bounded"
    r = verdict(sources, f"SELECT MIN(S.B) {base}")
    assert r.verdict == "unbounded" and failing(r) == ["C3: MIN of an unbounded attribute"]


def test_report_explains_itself(sources):
    r = verdict(sources, "SELECT MAX(S.B) FROM S, T WHERE T.D < S.A AND 0 < T.D AND T.D < 5")
    text = r.to_text()
    assert "UNBOUNDED" in text and "FAILS" in text and "Q'R" in text
    assert r.to_dict()["conditions"][0]["name"].startswith("C1")


# -- what the analysis refuses ---------------------------------------------------------------------

@pytest.mark.parametrize("sql, words", [
    ("SELECT S.A FROM S", "not an aggregate query"),
    ("SELECT SUM(S.A + S.B) FROM S", "aggregate over an expression"),
    ("SELECT STDDEV(S.A) FROM S", "not one the analysis knows"),
    ("SELECT S.A + 1, COUNT(*) FROM S GROUP BY S.A + 1", "group by columns"),
    ("SELECT S.t1, COUNT(*) FROM S GROUP BY S.t1", "application time of S"),
])
def test_refused_with_a_message(sources, sql, words):
    with pytest.raises(AnalysisError, match=words) as info:
        analyze_aggregate(sql, sources, file="q.sql")
    loc = info.value.location  # where in the query: the construct refused
    assert loc.file == "q.sql" and loc.line == 1 and loc.column >= 1


@pytest.mark.parametrize("query, keyed", [
    # one stream (and a static table), grouped by its time: every group final when its timestamp closes (Rule 9)
    ("SELECT ?t (SUM(?out) AS ?s) (COUNT(DISTINCT ?tu) AS ?k) WHERE { GRAPH ?t { ?p :ofTurbine ?tu ; :hasOutput ?out } "
     "?tu :hasModel ?model } GROUP BY ?t", True),
    ("SELECT ?when (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v } } "
     "GROUP BY (STR(?t) AS ?when)", True),
    # two streams: the later one's group reads the join's past rows (Theorem 8.6 judges it)
    ("SELECT ?t2 (COUNT(*) AS ?n) WHERE { GRAPH ?t1 { ?e a :MaintenanceEvent ; :ofTurbine ?tu } GRAPH ?t2 { ?p "
     ":ofTurbine ?tu ; :hasOutput ?out } FILTER(?t1 < ?t2) } GROUP BY ?t2", False),
    # grouped by something else than the time
    ("SELECT ?tu (SUM(?out) AS ?s) WHERE { GRAPH ?t { ?p :ofTurbine ?tu ; :hasOutput ?out } } GROUP BY ?tu", False),
    # a check in a window after the solution's time (rule A4): a solution comes when that window decides it, after
    # its own timestamp closed, so its group is not final then
    ("SELECT ?t (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?a :raisedBy ?s } FILTER NOT EXISTS { GRAPH ?t2 { ?m :measuredBy "
     "?s } FILTER(?t < ?t2 && ?t2 <= ?t + \"PT3M\"^^xsd:dayTimeDuration) } } GROUP BY ?t", False),
    # one in a window of its past (rule A3) is decided when the solution's timestamp closes: still keyed
    ("SELECT ?t (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?a :raisedBy ?s } FILTER NOT EXISTS { GRAPH ?t2 { ?m :measuredBy "
     "?s } FILTER(?t2 < ?t && ?t2 >= ?t - \"PT3M\"^^xsd:dayTimeDuration) } } GROUP BY ?t", True),
])
def test_rule_9_groups_keyed_by_their_own_timestamp(demo, query, keyed):
    report = analyze_aggregate(demo.compile("PREFIX : <http://example.org/turbine#>\nPREFIX xsd: "
                                            "<http://www.w3.org/2001/XMLSchema#>\n" + query), demo.sources)
    assert report.time_keyed is keyed and (report.verdict == "bounded" if keyed else True), report.to_text()
    assert ("time-keyed groups" in report.to_text()) is keyed


def test_rule_9_query_with_order_by_is_refused_naming_the_changelog(demo):
    """ORDER BY orders the answer table, which a query grouped by its timestamps does not keep: refused, located,
    by the verdict itself (`obda analyze` said bounded, and only the run refused it)."""
    from obda.analysis import analyze_query
    from obda.analysis.aggregates import aggregate_plan

    comp = demo.compile("PREFIX : <http://example.org/turbine#>\nSELECT ?t (SUM(?out) AS ?s) WHERE { GRAPH ?t { ?p "
                        ":ofTurbine ?tu ; :hasOutput ?out } } GROUP BY ?t ORDER BY DESC(?s)")
    for refuse in (lambda: analyze_query(comp, demo.sources), lambda: aggregate_plan(comp, demo.sources)):
        with pytest.raises(AnalysisError, match=r"GROUP BY \?t.*changelog.*drop ORDER BY") as info:
            refuse()
        assert (info.value.location.line, info.value.location.column) == (2, 100)  # at ORDER BY


@pytest.mark.parametrize("sql, words", [
    ("SELECT m.sensor_id, MAX(m.value) OVER (PARTITION BY m.sensor_id) AS mx FROM measurement m", "window function"),
    ("SELECT m.sensor_id, SUM(m.value) FILTER (WHERE m.value > 3) AS s FROM measurement m GROUP BY m.sensor_id",
     "aggregate with FILTER (WHERE …)"),
])
def test_a_window_function_or_an_aggregate_of_some_rows_is_refused_located(demo, sql, words):
    """Both were analysed as a plain aggregate (Theorem 8.5 said bounded; the FILTER was dropped), then refused
    by the executor."""
    from obda.analysis import analyze_query

    with pytest.raises(AnalysisError, match="outside the analysable class") as info:
        analyze_query(sql, demo.sources)
    assert words in info.value.message and info.value.location.column == 21, info.value

