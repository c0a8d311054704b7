"""expand_atom (T-mappings) and the saturated hierarchy."""

from __future__ import annotations

from obda.model.ontology import OWL_THING, AtomicConcept, Exists, Ontology, Role, SubClassOf, SubPropertyOf
from obda.model.query import ClassAtom, PropertyAtom, Var
from obda.rewrite import expand_atom, saturate

from .test_existentials import A, B, C, E, R, S, U, ont, some, sub, t, x, y

D = E + "D"


def alts(atom, o) -> dict[str, tuple[str, ...]]:
    """Alternatives as text (fresh variables shown as _) with their steps."""
    out = {}
    for alt in expand_atom(atom, o):
        text = str(alt.atom)
        for v in sorted((v for v in _vars(alt.atom) if v.bnode), key=lambda v: v.name):
            text = text.replace(str(v), "_")
        out[text] = alt.steps
    return out


def _vars(atom):
    return [v for v in atom.terms if isinstance(v, Var)]


def test_class_atom_subclasses_domain_range_and_data_domain():
    o = ont(
        sub(B, A),
        sub(C, B),
        sub(some(R), A),
        sub(some(S, inverse=True), A),
        sub(some(U, data=True), A),
        data=(U,),
    )
    assert alts(ClassAtom(A, x), o) == {
        "A(?x)": (),
        "B(?x)": ("B ⊑ A",),
        "C(?x)": ("C ⊑ B", "B ⊑ A"),
        "R(?x, _)": ("∃R ⊑ A",),
        "S(_, ?x)": ("∃S⁻ ⊑ A",),
        "U(?x, _)": ("∃U ⊑ A",),
    }
    assert next(iter(expand_atom(ClassAtom(A, x), o))).atom == ClassAtom(A, x)  # the atom itself first


def test_derived_inclusions_through_existentials_and_role_inclusions():
    # C ⊑ ∃S.D and ∃S ⊑ A give C ⊑ A; R ⊑ S gives ∃R ⊑ ∃S ⊑ A; R⁻ appears for S⁻ ⊑ ...
    o = ont(sub(C, some(S, D)), sub(some(S), A), SubPropertyOf(Role(R), Role(S)))
    got = alts(ClassAtom(A, x), o)
    assert got["C(?x)"] == ("C ⊑ ∃S.D", "∃S ⊑ A")
    assert got["R(?x, _)"] == ("R ⊑ S", "∃S ⊑ A")
    assert got["S(?x, _)"] == ("∃S ⊑ A",)
    assert "D(?x)" not in got
    sat = saturate(o)
    assert sat.is_subconcept(AtomicConcept(C), AtomicConcept(A))
    assert sat.is_subconcept(Exists(Role(R, True)), Exists(Role(S, True)))
    assert not sat.is_subconcept(AtomicConcept(A), AtomicConcept(C))


def test_property_atom_subroles_and_inverses():
    # P ⊑ R, Q ≡ R⁻ (inverse properties), T ⊑ Q
    P, Q, T = E + "P", E + "Q", E + "T"
    o = ont(
        SubPropertyOf(Role(P), Role(R)),
        SubPropertyOf(Role(Q), Role(R, True)),
        SubPropertyOf(Role(R, True), Role(Q)),
        SubPropertyOf(Role(T), Role(Q)),
    )
    got = alts(PropertyAtom(R, x, y), o)
    assert got == {
        "R(?x, ?y)": (),
        "P(?x, ?y)": ("P ⊑ R",),
        "Q(?y, ?x)": ("Q ⊑ R⁻",),
        "T(?y, ?x)": ("T ⊑ Q", "Q ⊑ R⁻"),
    }
    # and from the other side
    assert alts(PropertyAtom(Q, x, y), o) == {
        "Q(?x, ?y)": (),
        "R(?y, ?x)": ("R⁻ ⊑ Q",),
        "P(?y, ?x)": ("P ⊑ R", "R⁻ ⊑ Q"),
        "T(?x, ?y)": ("T ⊑ Q",),
    }


def test_symmetric_property_expands_to_both_directions():
    o = ont(SubPropertyOf(Role(R), Role(R, True)))
    assert set(alts(PropertyAtom(R, x, y), o)) == {"R(?x, ?y)", "R(?y, ?x)"}


def test_data_property_hierarchy():
    o = ont(SubPropertyOf(Role(U, data=True), Role(E + "V", data=True)), data=(U, E + "V"))
    assert alts(PropertyAtom(E + "V", x, y), o) == {"V(?x, ?y)": (), "U(?x, ?y)": ("U ⊑ V",)}


def test_time_label_is_kept_and_fresh_variables_are_unique_blank_nodes():
    o = ont(sub(some(R), A), sub(some(S), A), sub(B, A))
    out = expand_atom(ClassAtom(A, x, t), o)
    assert all(alt.atom.time == t for alt in out)
    fresh = [v for alt in out for v in _vars(alt.atom) if v != x]
    assert fresh and all(v.bnode for v in fresh)
    again = [v for alt in expand_atom(ClassAtom(A, x, t), o) for v in _vars(alt.atom) if v != x]
    assert len(set(fresh + again)) == len(fresh) + len(again)


def test_equivalent_classes_expand_to_each_other():
    o = ont(sub(A, B), sub(B, A))
    assert set(alts(ClassAtom(A, x), o)) == {"A(?x)", "B(?x)"}
    assert set(alts(ClassAtom(B, x), o)) == {"A(?x)", "B(?x)"}


def test_owl_thing_expands_to_everything_and_thing_subclass_to_everything():
    o = ont(sub(B, A), SubPropertyOf(Role(R), Role(S)))
    got = alts(ClassAtom(OWL_THING, x), o)
    assert {"A(?x)", "B(?x)", "R(?x, _)", "R(_, ?x)", "S(?x, _)", "S(_, ?x)"} <= set(got)
    everything_is_c = Ontology(classes=frozenset({A, C}), axioms=(SubClassOf(AtomicConcept(OWL_THING), AtomicConcept(C)),))
    assert "A(?x)" in alts(ClassAtom(C, x), everything_is_c)


def test_unknown_predicate_expands_to_itself():
    o = ont(sub(B, A))
    assert alts(ClassAtom(E + "Nope", x), o) == {"Nope(?x)": ()}
    assert alts(PropertyAtom(E + "nope", x, y), o) == {"nope(?x, ?y)": ()}


def test_saturation_is_memoised_per_ontology_object():
    o = ont(sub(B, A))
    assert saturate(o) is saturate(o)
    o2 = ont(sub(B, A))
    assert saturate(o2) is not saturate(o)
