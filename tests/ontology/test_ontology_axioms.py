"""Each OWL 2 QL axiom kind, from a small Turtle snippet, gives the expected DL-Lite_R axioms.

The expected axioms are written out by hand from the DL-Lite_R reading of OWL 2 QL
(the oracle is the specification, not the implementation).
"""

from __future__ import annotations

import pytest

from obda.model.ontology import (
    AtomicConcept,
    DisjointClasses,
    DisjointProperties,
    Exists,
    Role,
    SubClassOf,
    SubPropertyOf,
)
from obda.ontology import ProfileWarning, parse_ontology_text

EX = "http://ex.org/o#"
HEADER = """@prefix : <http://ex.org/o#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""


def load(body: str, mode: str = "strict"):
    return parse_ontology_text(HEADER + body, "turtle", file="snippet.ttl", mode=mode)


def axioms(body: str) -> set:
    return set(load(body).axioms)


def A(name: str) -> AtomicConcept:
    return AtomicConcept(EX + name)


def R(name: str, inverse: bool = False) -> Role:
    return Role(EX + name, inverse=inverse)


def U(name: str) -> Role:
    return Role(EX + name, data=True)


def E(role: Role, filler: str | None = None) -> Exists:
    return Exists(role, EX + filler if filler else None)


OBJ = ":p a owl:ObjectProperty . :q a owl:ObjectProperty .\n"
DATA = ":u a owl:DatatypeProperty . :v a owl:DatatypeProperty .\n"


CASES = {
    "subClassOf": (":A rdfs:subClassOf :B .", {SubClassOf(A("A"), A("B"))}),
    "equivalentClass gives two inclusions": (
        ":A owl:equivalentClass :B .",
        {SubClassOf(A("A"), A("B")), SubClassOf(A("B"), A("A"))},
    ),
    "subPropertyOf (object)": (OBJ + ":p rdfs:subPropertyOf :q .", {SubPropertyOf(R("p"), R("q"))}),
    "subPropertyOf (data)": (DATA + ":u rdfs:subPropertyOf :v .", {SubPropertyOf(U("u"), U("v"))}),
    "equivalentProperty": (
        OBJ + ":p owl:equivalentProperty :q .",
        {SubPropertyOf(R("p"), R("q")), SubPropertyOf(R("q"), R("p"))},
    ),
    "equivalentProperty (data)": (
        DATA + ":u owl:equivalentProperty :v .",
        {SubPropertyOf(U("u"), U("v")), SubPropertyOf(U("v"), U("u"))},
    ),
    "inverseOf": (
        OBJ + ":p owl:inverseOf :q .",
        {SubPropertyOf(R("p"), R("q", True)), SubPropertyOf(R("q"), R("p", True))},
    ),
    "domain (object)": (OBJ + ":p rdfs:domain :A .", {SubClassOf(E(R("p")), A("A"))}),
    "range (object)": (OBJ + ":p rdfs:range :A .", {SubClassOf(E(R("p", True)), A("A"))}),
    "domain (data)": (DATA + ":u rdfs:domain :A .", {SubClassOf(E(U("u")), A("A"))}),
    "range (data): a datatype is accepted, no axiom": (DATA + ":u rdfs:range xsd:integer .", set()),
    "range (data): intersection of datatypes is in QL": (
        DATA + ":u rdfs:range [ a rdfs:Datatype ; owl:intersectionOf ( xsd:integer xsd:decimal ) ] .",
        set(),
    ),
    "domain with an intersection splits": (
        OBJ + ":p rdfs:domain [ owl:intersectionOf ( :A :B ) ] .",
        {SubClassOf(E(R("p")), A("A")), SubClassOf(E(R("p")), A("B"))},
    ),
    "range with an existential": (
        OBJ + ":p rdfs:range [ a owl:Restriction ; owl:onProperty :q ; owl:someValuesFrom :B ] .",
        {SubClassOf(E(R("p", True)), E(R("q"), "B"))},
    ),
    "SymmetricProperty": (":p a owl:ObjectProperty, owl:SymmetricProperty .", {SubPropertyOf(R("p"), R("p", True))}),
    "AsymmetricProperty is a disjointness": (
        ":p a owl:ObjectProperty, owl:AsymmetricProperty .",
        {DisjointProperties(R("p"), R("p", True))},
    ),
    "qualified existential on the right": (
        OBJ + ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom :B ] .",
        {SubClassOf(A("A"), E(R("p"), "B"))},
    ),
    "existential with owl:Thing on the right is unqualified": (
        OBJ + ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] .",
        {SubClassOf(A("A"), E(R("p")))},
    ),
    "existential with owl:Thing on the left": (
        OBJ + "[ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] rdfs:subClassOf :A .",
        {SubClassOf(E(R("p")), A("A"))},
    ),
    "inverse property inside a restriction (left)": (
        OBJ
        + "[ a owl:Restriction ; owl:onProperty [ owl:inverseOf :p ] ; owl:someValuesFrom owl:Thing ]"
        " rdfs:subClassOf :A .",
        {SubClassOf(E(R("p", True)), A("A"))},
    ),
    "inverse property inside a restriction (right)": (
        OBJ + ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty [ owl:inverseOf :p ] ; owl:someValuesFrom :B ] .",
        {SubClassOf(A("A"), E(R("p", True), "B"))},
    ),
    "existential of a data property on the right": (
        DATA + ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :u ; owl:someValuesFrom xsd:string ] .",
        {SubClassOf(A("A"), E(U("u")))},
    ),
    "existential of a data property on the left (rdfs:Literal)": (
        DATA + "[ a owl:Restriction ; owl:onProperty :u ; owl:someValuesFrom rdfs:Literal ] rdfs:subClassOf :A .",
        {SubClassOf(E(U("u")), A("A"))},
    ),
    "existential on both sides": (
        OBJ
        + "[ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] rdfs:subClassOf"
        " [ a owl:Restriction ; owl:onProperty :q ; owl:someValuesFrom :B ] .",
        {SubClassOf(E(R("p")), E(R("q"), "B"))},
    ),
    "equivalentClass with an unqualified existential": (
        OBJ + ":A owl:equivalentClass [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] .",
        {SubClassOf(A("A"), E(R("p"))), SubClassOf(E(R("p")), A("A"))},
    ),
    "disjointWith": (":A owl:disjointWith :B .", {DisjointClasses(A("A"), A("B"))}),
    "disjointWith an existential": (
        OBJ + ":A owl:disjointWith [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] .",
        {DisjointClasses(A("A"), E(R("p")))},
    ),
    "AllDisjointClasses gives every pair": (
        "[ a owl:AllDisjointClasses ; owl:members ( :A :B :C ) ] .",
        {
            DisjointClasses(A("A"), A("B")),
            DisjointClasses(A("A"), A("C")),
            DisjointClasses(A("B"), A("C")),
        },
    ),
    "propertyDisjointWith": (OBJ + ":p owl:propertyDisjointWith :q .", {DisjointProperties(R("p"), R("q"))}),
    "propertyDisjointWith (data)": (DATA + ":u owl:propertyDisjointWith :v .", {DisjointProperties(U("u"), U("v"))}),
    "AllDisjointProperties": (
        OBJ + ":r a owl:ObjectProperty . [ a owl:AllDisjointProperties ; owl:members ( :p :q :r ) ] .",
        {
            DisjointProperties(R("p"), R("q")),
            DisjointProperties(R("p"), R("r")),
            DisjointProperties(R("q"), R("r")),
        },
    ),
    "intersectionOf on the right splits": (
        OBJ
        + ":A rdfs:subClassOf [ owl:intersectionOf ( :B :C"
        " [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom :D ] ) ] .",
        {SubClassOf(A("A"), A("B")), SubClassOf(A("A"), A("C")), SubClassOf(A("A"), E(R("p"), "D"))},
    ),
    "nested intersections on the right": (
        ":A rdfs:subClassOf [ owl:intersectionOf ( :B [ owl:intersectionOf ( :C :D ) ] ) ] .",
        {SubClassOf(A("A"), A("B")), SubClassOf(A("A"), A("C")), SubClassOf(A("A"), A("D"))},
    ),
    "complementOf on the right is a disjointness": (
        ":A rdfs:subClassOf [ owl:complementOf :B ] .",
        {DisjointClasses(A("A"), A("B"))},
    ),
    "complementOf of an existential on the right": (
        OBJ
        + ":A rdfs:subClassOf [ owl:complementOf"
        " [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom owl:Thing ] ] .",
        {DisjointClasses(A("A"), E(R("p")))},
    ),
    "owl:Thing on the right says nothing": (":A rdfs:subClassOf owl:Thing .", set()),
    "owl:Nothing on the right: the class is empty": (
        ":A rdfs:subClassOf owl:Nothing .",
        {DisjointClasses(A("A"), A("A"))},
    ),
    "owl:Nothing on the left says nothing": ("owl:Nothing rdfs:subClassOf :A .", set()),
    "X ⊑ X is dropped": (":A rdfs:subClassOf :A .", set()),
    "R ⊑ owl:topObjectProperty is dropped": (OBJ + ":p rdfs:subPropertyOf owl:topObjectProperty .", set()),
}


@pytest.mark.parametrize("body,expected", list(CASES.values()), ids=list(CASES))
def test_axiom_kind(body, expected):
    onto = load(body)
    assert set(onto.axioms) == expected
    assert onto.findings == ()


def test_axioms_carry_a_location_in_the_file():
    onto = load(":A rdfs:subClassOf :B .\n:C rdfs:subClassOf :D .\n")
    lines = {str(a): a.location.line for a in onto.axioms}
    assert lines == {"A ⊑ B": 6, "C ⊑ D": 7}  # HEADER has 5 lines
    assert all(a.location.file == "snippet.ttl" for a in onto.axioms)


# --------------------------------------------------------------------------
# vocabulary


def test_vocabulary_declared_and_used_terms():
    onto = load(
        """
:A a owl:Class .
:B rdfs:subClassOf :C .
:p a owl:ObjectProperty .
:u a owl:DatatypeProperty .
:D rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :q ; owl:someValuesFrom :E ] .
"""
    )
    assert onto.classes == {EX + n for n in "ABCDE"}
    assert onto.object_properties == {EX + "p", EX + "q"}
    assert onto.data_properties == {EX + "u"}
    assert onto.is_class(EX + "E") and onto.is_object_property(EX + "q") and onto.is_data_property(EX + "u")


def test_undeclared_property_with_datatype_range_is_a_data_property():
    onto = load(":u rdfs:range xsd:string ; rdfs:domain :A .\n:w rdfs:subPropertyOf :u .\n")
    assert onto.data_properties == {EX + "u", EX + "w"}
    assert onto.object_properties == frozenset()
    assert set(onto.axioms) == {SubClassOf(E(U("u")), A("A")), SubPropertyOf(U("w"), U("u"))}


def test_undeclared_property_in_a_data_restriction_is_a_data_property():
    onto = load(":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :u ; owl:someValuesFrom xsd:int ] .")
    assert onto.data_properties == {EX + "u"}
    assert set(onto.axioms) == {SubClassOf(A("A"), E(U("u")))}


def test_builtins_are_not_vocabulary():
    onto = load(":A rdfs:subClassOf owl:Thing . :u a owl:DatatypeProperty ; rdfs:range xsd:string .")
    assert onto.classes == {EX + "A"}
    assert onto.is_class("http://www.w3.org/2002/07/owl#Thing")


def test_labels_prefer_english_then_no_language():
    onto = load(
        """
:A a owl:Class ; rdfs:label "Auto"@de, "car"@en, "plain" .
:B a owl:Class ; rdfs:label "Bateau"@fr, "boat" .
:C a owl:Class ; rdfs:label "Cheval"@fr .
:p a owl:ObjectProperty ; rdfs:label "has part"@en-GB .
:x a :A ; rdfs:label "an individual" .
"""
    )
    assert onto.label(EX + "A") == "car"
    assert onto.label(EX + "B") == "boat"
    assert onto.label(EX + "C") == "Cheval"
    assert onto.label(EX + "p") == "has part"
    assert onto.label(EX + "x") is None  # individuals are not vocabulary


def test_individuals_and_assertions_are_ignored():
    onto = load(
        """
:A a owl:Class . :p a owl:ObjectProperty .
:x a owl:NamedIndividual, :A ; :p :y ; owl:differentFrom :y .
[ a owl:AllDifferent ; owl:distinctMembers ( :x :y ) ] .
[ a owl:NegativePropertyAssertion ; owl:sourceIndividual :x ; owl:assertionProperty :p ; owl:targetIndividual :y ] .
"""
    )
    assert onto.axioms == ()
    assert onto.findings == ()
    assert onto.classes == {EX + "A"}


def test_annotation_property_axioms_are_ignored():
    onto = load(
        """
:note a owl:AnnotationProperty . :comment2 a owl:AnnotationProperty .
:note rdfs:subPropertyOf :comment2 ; rdfs:domain :A ; rdfs:range xsd:string .
rdfs:label rdfs:subPropertyOf :comment2 .
"""
    )
    assert onto.axioms == ()
    assert onto.object_properties == frozenset() and onto.data_properties == frozenset()


def test_owl1_style_intersection_definition_on_a_named_class():
    with pytest.warns(ProfileWarning):
        onto = load(":A owl:intersectionOf ( :B :C ) .", mode="lenient")
    # A ≡ B ⊓ C: the direction A ⊑ B ⊓ C is in QL and kept; B ⊓ C ⊑ A is not
    assert set(onto.axioms) == {SubClassOf(A("A"), A("B")), SubClassOf(A("A"), A("C"))}
    assert len(onto.findings) == 1 and "intersectionOf on the left" in onto.findings[0].reason
