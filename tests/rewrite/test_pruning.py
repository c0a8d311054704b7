"""Pruning: containment modulo the hierarchy, duplicates, filters, time labels, disjointness."""

from __future__ import annotations

from obda.model.ontology import AtomicConcept, DisjointClasses, Ontology
from obda.model.query import CQ, ClassAtom, Comparison, Literal, PropertyAtom
from obda.rewrite import contained_in, rewrite, saturate
from obda.rewrite.containment import prune

from .test_existentials import A, B, C, R, ont, q, some, sub, t, t2, w, x, y, z

O = ont(sub(B, A), sub(some(R), C))
SAT = saturate(O)
X = frozenset({x})
FIVE = Literal("5", "http://www.w3.org/2001/XMLSchema#integer")


def kept(cqs, answer=X, sat=SAT) -> list[str]:
    return [str(c) for c, _ in prune([(c, ()) for c in cqs], answer, sat)]


def test_duplicates_up_to_renaming_are_removed():
    assert kept([CQ((ClassAtom(A, x), PropertyAtom(R, x, y))), CQ((PropertyAtom(R, x, z), ClassAtom(A, x)))]) == [
        "A(?x) ∧ R(?x, ?y)"
    ]


def test_contained_cq_is_removed_keeping_order():
    out = kept([CQ((ClassAtom(A, x), ClassAtom(C, x))), CQ((ClassAtom(A, x),)), CQ((ClassAtom(C, x),))])
    assert out == ["A(?x)", "C(?x)"]


def test_containment_modulo_hierarchy():
    # B ⊑ A: every B is an A; R(x, _) entails C(x) through the domain ∃R ⊑ C
    assert kept([CQ((ClassAtom(B, x),)), CQ((ClassAtom(A, x),))]) == ["A(?x)"]
    assert kept([CQ((PropertyAtom(R, x, y),)), CQ((ClassAtom(C, x),))]) == ["C(?x)"]
    assert kept([CQ((ClassAtom(A, x),)), CQ((ClassAtom(B, x),))]) == ["A(?x)"]


def test_answer_variables_are_fixed():
    sub_ = CQ((ClassAtom(A, x), PropertyAtom(R, y, x)))
    sup = CQ((PropertyAtom(R, x, y),))
    assert not contained_in(sub_, sup, X, SAT)  # would hold if x could map to y
    assert contained_in(sub_, sup, frozenset(), SAT)
    assert contained_in(CQ((PropertyAtom(R, x, x),)), sup, X, SAT)


def test_filters_must_map_to_filters():
    with_f = CQ((PropertyAtom(R, x, y),), (Comparison(">", y, FIVE),))
    without = CQ((PropertyAtom(R, x, z),))
    assert contained_in(with_f, without, X, SAT)
    assert not contained_in(without, with_f, X, SAT)
    flipped = CQ((PropertyAtom(R, x, z),), (Comparison("<", FIVE, z),))
    assert contained_in(flipped, with_f, X, SAT) and contained_in(with_f, flipped, X, SAT)
    assert kept([with_f, flipped]) == ["R(?x, ?y) ∧ ?y > \"5\"^^<http://www.w3.org/2001/XMLSchema#integer>"]


def test_time_labels_are_respected():
    static = CQ((ClassAtom(A, x),))
    temporal = CQ((ClassAtom(A, x, t),))
    assert not contained_in(static, temporal, X, SAT)
    assert not contained_in(temporal, static, X, SAT)
    assert contained_in(CQ((ClassAtom(A, x, t2),)), temporal, X, SAT)
    # one snapshot for both atoms is a special case of two independent snapshots
    same = CQ((ClassAtom(A, x, t), PropertyAtom(R, x, y, t)))
    two = CQ((ClassAtom(A, x, t), PropertyAtom(R, x, y, t2)))
    assert contained_in(same, two, X, SAT)
    assert not contained_in(two, same, X, SAT)


def test_rewrite_prunes_the_query_subsumed_by_its_folding():
    # A ⊑ ∃R: R(x, y) ∧ A(x) folds to A(x), which contains the query itself
    o = ont(sub(A, some(R)))
    out = rewrite(q([x], PropertyAtom(R, x, y), ClassAtom(A, x)), o)
    assert [str(r.cq) for r in out] == ["A(?x)"]
    assert out[0].steps == ("A ⊑ ∃R",)


def test_rewrite_removes_duplicate_foldings():
    # two different witnesses give the same CQ up to renaming
    o = ont(sub(A, some(R, B)))
    out = rewrite(q([x], PropertyAtom(R, x, y), PropertyAtom(R, x, z), ClassAtom(B, z)), o)
    texts = [str(r.cq) for r in out]
    assert texts.count("A(?x)") == 1
    assert len(texts) == len(set(texts))


def test_disjointness_drops_unsatisfiable_cqs_per_snapshot():
    o = Ontology(
        classes=frozenset({A, B, C}),
        axioms=(sub(C, A), DisjointClasses(AtomicConcept(A), AtomicConcept(B))),
    )
    assert rewrite(q([x], ClassAtom(C, x), ClassAtom(B, x)), o) == ()
    # different snapshots: an individual may be C at one time and B statically
    assert len(rewrite(q([x], ClassAtom(C, x, t), ClassAtom(B, x)), o)) == 1
    assert len(rewrite(q([x], ClassAtom(C, x), ClassAtom(B, w)), o)) == 1
