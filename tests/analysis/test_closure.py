"""P⁺, redundancy (Arasu Def. 4.1 examples), boundedness (Def. 4.5 / Schiff–Özçep Def. 5), satisfiability."""

from __future__ import annotations

from fractions import Fraction

from obda.analysis.closure import Closure, integer_satisfiable
from obda.analysis.elements import Attr, Const

A, B, C, D = (Attr("S", x) for x in "ABCD")


def k(v) -> Const:
    return Const("numeric", Fraction(v), str(v))


def test_transitive_closure_example():
    # {A < 5, 8 < B} ⊢ A < 8, 5 < B, A < B
    cl = Closure([(A, "<", k(5)), (k(8), "<", B)])
    assert cl.rel(A, k(8)) == "<" and cl.rel(k(5), B) == "<" and cl.rel(A, B) == "<"
    assert cl.satisfiable


def test_unsatisfiable_cycle_and_constants():
    assert not Closure([(A, "<", B), (B, "<", C), (C, "<", A)]).satisfiable
    assert not Closure([(A, "=", k(3)), (A, "=", k(4))]).satisfiable
    assert Closure([(A, "<=", B), (B, "<=", A)]).eq(A, B)


def test_redundancy_def_4_1():
    cl = Closure([(A, "<", B), (B, "<", C), (A, "<", C)])
    assert cl.redundant(A, C) and not cl.redundant(A, B)
    cl = Closure([(A, "<", C), (A, "=", k(5)), (k(5), "<", C)])
    assert cl.redundant(A, C)
    # none of {A = B, A < C, B < C} is redundant
    cl = Closure([(A, "=", B), (A, "<", C), (B, "<", C)])
    assert not cl.redundant(A, C) and not cl.redundant(B, C)


def test_bounded_discrete_dense_and_bounding_attributes():
    R = Attr("R", "x")
    cl = Closure([(k(0), "<", A), (A, "<", k(5)), (B, "=", R), (k(0), "<", C), (D, "<", k(5))],
                 bounding=[R], discrete=[A, B, D])
    assert cl.bounded(A)  # discrete, between constants
    assert not cl.bounded(C)  # dense, only lower-bounded
    assert cl.bounded(B) and cl.pinned(B)  # equal to a static attribute
    assert cl.upper_bounded(D) and not cl.lower_bounded(D) and not cl.bounded(D)
    dense = Closure([(k(0), "<", C), (C, "<", k(5))])
    assert not dense.bounded(C)  # decimals / strings between constants: infinitely many values


def test_integer_satisfiability():
    assert not integer_satisfiable([(k(3), "<", A), (A, "<", k(4))], [A])
    assert integer_satisfiable([(k(3), "<", A), (A, "<", k(4))], [])  # dense: (3, 4) is not empty
    assert not integer_satisfiable([(k(3), "<", A), (A, "<", B), (B, "<", k(5))], [A, B])
    assert integer_satisfiable([(k(3), "<", A), (A, "<", B), (B, "<", k(6))], [A, B])


def test_induced_predicates():
    cl = Closure([(A, "<", B), (B, "<", C)])
    assert set(cl.relations([A, C])) == {(A, "<", C)}
