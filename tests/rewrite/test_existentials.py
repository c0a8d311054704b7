"""Hand-checked existential reasoning: tree witnesses, bound variables, time labels, depth, cycles."""

from __future__ import annotations

import time

import pytest

from obda.errors import RewritingError
from obda.model.ontology import AtomicConcept, Exists, Ontology, Role, SubClassOf, SubPropertyOf
from obda.model.query import CQ, ClassAtom, Comparison, IRI, Literal, PropertyAtom, Query, Var
from obda.rewrite import rewrite

from .kb import KB, answers_by_rewriting

E = "http://ex.org/"
TURBINE, SENSOR, TEMP = E + "Turbine", E + "Sensor", E + "TemperatureSensor"
HAS, OF = E + "hasSensor", E + "sensorOf"
A, B, C = E + "A", E + "B", E + "C"
R, S, U = E + "R", E + "S", E + "U"
x, y, z, w, t, t2 = Var("x"), Var("y"), Var("z"), Var("w"), Var("t"), Var("t2")
a, b = IRI(E + "a"), IRI(E + "b")


def ont(*axioms, data=()) -> Ontology:
    classes, props = set(), set()
    for ax in axioms:
        for c in (ax.sub, ax.sup):
            if isinstance(c, AtomicConcept):
                classes.add(c.iri)
            elif isinstance(c, Exists):
                (props if not c.role.data else set()).add(c.role.prop)
                if c.filler:
                    classes.add(c.filler)
            elif isinstance(c, Role):
                props.add(c.prop)
    return Ontology(
        classes=frozenset(classes),
        object_properties=frozenset(props - set(data)),
        data_properties=frozenset(data),
        axioms=tuple(axioms),
    )


def sub(c1, c2) -> SubClassOf:
    return SubClassOf(c1 if not isinstance(c1, str) else AtomicConcept(c1), c2 if not isinstance(c2, str) else AtomicConcept(c2))


def some(role: str, filler: str | None = None, inverse: bool = False, data: bool = False) -> Exists:
    return Exists(Role(role, inverse, data), filler)


def q(projection, *atoms, filters=()) -> Query:
    return Query(tuple(projection), (CQ(tuple(atoms), tuple(filters)),))


def cqs(query: Query, ontology: Ontology) -> list[str]:
    return [str(r.cq) for r in rewrite(query, ontology)]


TURBINES = ont(sub(TURBINE, some(HAS, TEMP)), sub(TEMP, SENSOR))


def test_turbine_folds_when_sensor_is_not_projected():
    query = q([x], PropertyAtom(HAS, x, y), ClassAtom(TEMP, y))
    out = rewrite(query, TURBINES)
    assert [str(r.cq) for r in out] == ["hasSensor(?x, ?y) ∧ TemperatureSensor(?y)", "Turbine(?x)"]
    assert out[1].steps == ("Turbine ⊑ ∃hasSensor.TemperatureSensor",)
    assert out[0].steps == ()
    kb = KB([(TURBINE, (a,), None)])
    assert answers_by_rewriting(query, TURBINES, kb) == {(a,)}


def test_turbine_does_not_fold_projected_sensor():
    query = q([x, y], PropertyAtom(HAS, x, y), ClassAtom(TEMP, y))
    assert cqs(query, TURBINES) == ["hasSensor(?x, ?y) ∧ TemperatureSensor(?y)"]


def test_filler_superclass_and_blank_node_variable():
    bn = Var("b0", bnode=True)
    query = q([x], PropertyAtom(HAS, x, bn), ClassAtom(SENSOR, bn))
    out = rewrite(query, TURBINES)
    assert [str(r.cq) for r in out][1:] == ["Turbine(?x)"]
    assert out[1].steps == ("Turbine ⊑ ∃hasSensor.TemperatureSensor", "TemperatureSensor ⊑ Sensor")


def test_filler_mismatch_does_not_fold():
    other = E + "PressureSensor"
    query = q([x], PropertyAtom(HAS, x, y), ClassAtom(other, y))
    assert cqs(query, ont(sub(TURBINE, some(HAS, TEMP)), sub(other, SENSOR))) == [
        "hasSensor(?x, ?y) ∧ PressureSensor(?y)"
    ]


def test_inverse_generator_and_inverse_role_inclusion():
    # every sensor is attached to some turbine; sensorOf ≡ hasSensor⁻
    o = ont(
        sub(SENSOR, some(HAS, TURBINE, inverse=True)),
        SubPropertyOf(Role(OF), Role(HAS, True)),
        SubPropertyOf(Role(HAS, True), Role(OF)),
    )
    assert cqs(q([x], PropertyAtom(HAS, y, x), ClassAtom(TURBINE, y)), o)[1:] == ["Sensor(?x)"]
    assert cqs(q([x], PropertyAtom(OF, x, y), ClassAtom(TURBINE, y)), o)[1:] == ["Sensor(?x)"]
    # the other direction is not implied
    assert cqs(q([x], PropertyAtom(HAS, x, y)), o) == ["hasSensor(?x, ?y)"]


def test_unqualified_existential_through_role_inclusion():
    o = ont(sub(A, some(R)), SubPropertyOf(Role(R), Role(S, True)))
    out = rewrite(q([x], PropertyAtom(S, y, x)), o)
    assert [str(r.cq) for r in out] == ["S(?y, ?x)", "A(?x)"]
    assert out[1].steps == ("A ⊑ ∃R", "R ⊑ S⁻")


def test_depth_two_chain():
    o = ont(sub(A, some(R, B)), sub(B, some(S, C)))
    query = q([x], PropertyAtom(R, x, y), PropertyAtom(S, y, z))
    out = rewrite(query, o)
    assert [str(r.cq) for r in out] == ["R(?x, ?y) ∧ S(?y, ?z)", "R(?x, ?y) ∧ B(?y)", "A(?x)"]
    assert out[2].steps == ("A ⊑ ∃R.B", "B ⊑ ∃S.C")
    kb = KB([(A, (a,), None), (R, (b, IRI(E + "c")), None), (B, (IRI(E + "c"),), None)])
    assert answers_by_rewriting(query, o, kb) == {(a,), (b,)}


def test_depth_two_with_z_projected_only_folds_nothing_below_z():
    o = ont(sub(A, some(R, B)), sub(B, some(S, C)))
    query = q([x, z], PropertyAtom(R, x, y), PropertyAtom(S, y, z))
    assert cqs(query, o) == ["R(?x, ?y) ∧ S(?y, ?z)"]


def test_cyclic_tbox_terminates_and_is_complete():
    o = ont(sub(A, some(R, A)))
    query = q([x], PropertyAtom(R, x, y), PropertyAtom(R, y, z), PropertyAtom(R, z, w), ClassAtom(A, w))
    start = time.perf_counter()
    out = cqs(query, o)
    assert time.perf_counter() - start < 1.0
    assert "A(?x)" in out
    assert len(out) == 4  # the query, then folding w, z..w, y..w
    kb = KB([(A, (a,), None), (R, (b, a), None)])
    assert answers_by_rewriting(query, o, kb) == {(a,), (b,)}


def test_cyclic_inverse_tbox():
    o = ont(sub(A, some(R, B)), sub(B, some(R, A, inverse=True)))
    query = q([x], PropertyAtom(R, x, y), PropertyAtom(R, z, y), PropertyAtom(R, z, w), ClassAtom(B, w))
    assert "A(?x)" in cqs(query, o)


def test_folding_back_to_a_parent_node():
    # y ↦ R-child of x, z ↦ S-child of y, w ↦ back to y (the parent of z's node)
    o = ont(sub(A, some(R, B)), sub(B, some(S)))
    query = q([x], PropertyAtom(R, x, y), PropertyAtom(S, y, z), PropertyAtom(S, w, z))
    assert cqs(query, o)[1:] == ["R(?x, ?w) ∧ B(?w)", "A(?x)"]
    assert answers_by_rewriting(query, o, KB([(A, (a,), None)])) == {(a,)}


def test_boolean_component_under_a_deep_generator():
    # C(z) with z free: some individual is an A, which has an R-child B, which has an S-child C
    o = ont(sub(A, some(R, B)), sub(B, some(S, C)))
    query = q([], ClassAtom(C, z))
    out = cqs(query, o)
    assert out[0] == "C(?z)"
    assert sorted(out[1:]) == ["A(_:_w1)", "B(_:_w2)"]
    assert answers_by_rewriting(query, o, KB([(A, (a,), None)])) == {()}
    assert answers_by_rewriting(query, o, KB([(R, (a, b), None)])) == set()


def test_cover_needs_a_class_below_an_existential_generator():
    # ∃P ⊑ ∃Q: an individual with a P-edge has a Q-child; A ⊑ ∃P reaches it through ∃P,
    # but the expansion of P(x, _) does not contain A(x): A needs its own CQ
    o = ont(sub(A, some(R)), sub(some(R), some(S)))
    query = q([x], PropertyAtom(S, x, y))
    assert cqs(query, o)[1:] == ["R(?x, _:_w1)", "A(?x)"]
    assert answers_by_rewriting(query, o, KB([(A, (a,), None)])) == {(a,)}
    assert answers_by_rewriting(query, o, KB([(R, (b, a), None)])) == {(b,)}


def test_data_property_existential():
    o = ont(sub(A, some(U, data=True)), data=(U,))
    assert cqs(q([x], PropertyAtom(U, x, y)), o) == ["U(?x, ?y)", "A(?x)"]
    # the value is projected: nothing to fold
    assert cqs(q([x, y], PropertyAtom(U, x, y)), o) == ["U(?x, ?y)"]
    # an anonymous value is never a given literal
    assert cqs(q([x], PropertyAtom(U, x, Literal("5"))), o) == ['U(?x, "5")']


def test_constant_root():
    o = ont(sub(A, some(R, B)))
    assert cqs(q([], PropertyAtom(R, a, y), ClassAtom(B, y)), o)[1:] == ["A(<http://ex.org/a>)"]


def test_merged_answer_roots_keep_an_equality():
    o = ont(sub(A, some(R)))
    x2 = Var("x2")
    query = q([x, x2], PropertyAtom(R, x, y), PropertyAtom(R, x2, y))
    out = cqs(query, o)
    assert "A(?x) ∧ A(?x2) ∧ ?x2 = ?x" in out
    assert answers_by_rewriting(query, o, KB([(A, (a,), None)])) == {(a, a)}


def test_filter_variable_blocks_folding():
    o = ont(sub(A, some(R, B)))
    query = q([x], PropertyAtom(R, x, y), ClassAtom(B, y), filters=[Comparison("!=", y, b)])
    assert cqs(query, o) == ["R(?x, ?y) ∧ B(?y) ∧ ?y != <http://ex.org/b>"]


def test_same_time_label_folds():
    o = ont(sub(A, some(R, B)))
    out = cqs(q([x], PropertyAtom(R, x, y, t), ClassAtom(B, y, t)), o)
    assert out == ["R(?x, ?y)@?t ∧ B(?y)@?t", "A(?x)@?t"]


def test_different_time_labels_do_not_fold():
    o = ont(sub(A, some(R, B)))
    assert cqs(q([x], PropertyAtom(R, x, y, t), ClassAtom(B, y)), o) == ["R(?x, ?y)@?t ∧ B(?y)"]
    assert cqs(q([x], PropertyAtom(R, x, y, t), ClassAtom(B, y, t2)), o) == ["R(?x, ?y)@?t ∧ B(?y)@?t2"]
    # each snapshot folds on its own
    out = cqs(q([x], PropertyAtom(R, x, y, t), PropertyAtom(R, x, z, t2)), o)
    assert "A(?x)@?t ∧ A(?x)@?t2" in out


def test_time_semantics_over_snapshots():
    o = ont(sub(A, some(R, B)))
    query = q([x], PropertyAtom(R, x, y, t), ClassAtom(B, y, t))
    kb = KB([(A, (a,), "τ1"), (A, (b,), None)])  # a is an A at τ1; b only statically
    assert answers_by_rewriting(query, o, kb) == {(a,)}


def test_union_branches_are_rewritten_separately():
    o = ont(sub(A, some(R)))
    query = Query((x,), (CQ((PropertyAtom(R, x, y),)), CQ((ClassAtom(B, x),))))
    out = rewrite(query, o)
    assert [(r.branch, str(r.cq)) for r in out] == [(0, "R(?x, ?y)"), (0, "A(?x)"), (1, "B(?x)")]


def test_fresh_variables_avoid_query_names():
    o = ont(sub(A, some(R, B)), sub(B, some(S, C)))
    query = q([], ClassAtom(C, Var("_w1")))
    names = {v.name for r in rewrite(query, o) for v in r.cq.variables}
    assert "_w1" in names and len(names) == 3


def test_size_limit_is_a_clear_error(monkeypatch):
    import obda.rewrite as rw

    o = ont(*(sub(E + f"G{i}", some(R, B)) for i in range(3)), sub(E + "H", some(R)))
    query = q([x], *(PropertyAtom(R, x, Var(f"y{i}")) for i in range(6)))
    monkeypatch.setattr(rw, "MAX_CQS_PER_BRANCH", 10)
    with pytest.raises(RewritingError, match="more than 10 conjunctive queries"):
        rewrite(query, o)


def test_with_the_ontology_loader():
    loader = pytest.importorskip("obda.ontology")
    ttl = """
    @prefix : <http://ex.org/> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
    @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
    :Turbine a owl:Class ; rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :hasSensor ;
                                             owl:someValuesFrom :TemperatureSensor ] .
    :TemperatureSensor a owl:Class ; rdfs:subClassOf :Sensor .
    :Sensor a owl:Class .
    :hasSensor a owl:ObjectProperty ; owl:inverseOf :sensorOf .
    :sensorOf a owl:ObjectProperty .
    """
    o = loader.parse_ontology_text(ttl, "turtle")
    out = cqs(q([x], PropertyAtom(OF, y, x), ClassAtom(SENSOR, y)), o)
    assert out == ["sensorOf(?y, ?x) ∧ Sensor(?y)", "Turbine(?x)"]
