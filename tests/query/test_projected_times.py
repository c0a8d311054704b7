"""Projected times (docs/semantics.md, "Projected times"): a time variable is an answer variable like any other."""

from __future__ import annotations

import pytest

from obda.errors import UnsupportedConstructError
from obda.model.query import XSD, Var
from obda.query import parse_query

P = f"PREFIX : <http://e/>\nPREFIX xsd: <{XSD}>\n"


def test_a_time_variable_is_projected():
    q = parse_query(P + "SELECT ?t ?x WHERE { GRAPH ?t { ?x :p ?v } }")
    assert q.projection == (Var("t"), Var("x")) and q.columns == ("t", "x")
    assert [a.time for a in q.branches[0].atoms] == [Var("t")]


def test_two_graphs_and_distinct():
    q = parse_query(P + "SELECT DISTINCT ?t2 ?t1 WHERE { GRAPH ?t1 { ?x :p ?v } GRAPH ?t2 { ?x :q ?w } "
                        "FILTER(?t1 < ?t2) }")
    assert q.distinct and q.projection == (Var("t2"), Var("t1"))


def test_a_projected_time_a_union_branch_does_not_bind_is_unbound_there():
    q = parse_query(P + "SELECT ?t ?x WHERE { { GRAPH ?t { ?x :p ?v } } UNION { GRAPH ?t { ?x :q ?v } } }")
    assert len(q.branches) == 2
    q = parse_query(P + "SELECT ?t ?x WHERE { { GRAPH ?t { ?x :p ?v } } UNION { ?x :q ?v } }")
    assert q.projection == (Var("t"), Var("x")) and [b.time_variables for b in q.branches] == [{Var("t")}, set()]


def test_select_star_still_leaves_time_variables_out():
    assert parse_query(P + "SELECT * WHERE { GRAPH ?t { ?x :p ?v } }").projection == (Var("x"), Var("v"))
