"""OWL 2 QL profile check: every kind of violation is found, explained, located; strict vs lenient."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from rdflib import Graph

from obda.errors import OntologyError, ProfileViolation
from obda.model.ontology import AtomicConcept, DisjointClasses, Exists, Role, SubClassOf
from obda.ontology import ProfileWarning, check_profile, load_ontology, parse_ontology_text

EX = "http://ex.org/o#"
HEADER = """@prefix : <http://ex.org/o#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
:p a owl:ObjectProperty . :q a owl:ObjectProperty . :u a owl:DatatypeProperty .
"""

# name: (Turtle body with "#<" at the end of the offending line, reason fragment, rendered-axiom fragment)
VIOLATIONS = {
    "union": (
        ":A rdfs:subClassOf :Z .\n:A rdfs:subClassOf [ owl:unionOf ( :B :C ) ] . #<",
        "owl:unionOf",
        "SubClassOf(:A ObjectUnionOf(:B :C))",
    ),
    "union on the left": (
        "[ owl:unionOf ( :B :C ) ] rdfs:subClassOf :A . #<",
        "owl:unionOf",
        "SubClassOf(ObjectUnionOf(:B :C) :A)",
    ),
    "qualified existential on the left": (
        ":Z a owl:Class .\n[ a owl:Restriction ; owl:onProperty :p ;\n  owl:someValuesFrom :Engine ] #<\n"
        "  rdfs:subClassOf :Machine .",
        "qualified existential on the left-hand side",
        "SubClassOf(ObjectSomeValuesFrom(:p :Engine) :Machine)",
    ),
    "functional object property": (
        ":f a owl:ObjectProperty .\n:f a owl:FunctionalProperty . #<",
        "functional properties",
        "FunctionalObjectProperty(:f)",
    ),
    "functional data property": (
        ":u a owl:FunctionalProperty . #<",
        "functional properties",
        "FunctionalDataProperty(:u)",
    ),
    "inverse functional property": (
        ":p a owl:InverseFunctionalProperty . #<",
        "inverse-functional properties",
        "InverseFunctionalObjectProperty(:p)",
    ),
    "transitive property": (
        ":t a owl:ObjectProperty ;\n   a owl:TransitiveProperty . #<",
        "transitive properties",
        "TransitiveObjectProperty(:t)",
    ),
    "min cardinality": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n"
        '    owl:minCardinality "2"^^xsd:nonNegativeInteger ] . #<',
        "cardinality restrictions",
        "ObjectMinCardinality(2 :p)",
    ),
    "max cardinality": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n"
        '    owl:maxCardinality "1"^^xsd:nonNegativeInteger ] . #<',
        "cardinality restrictions",
        "ObjectMaxCardinality(1 :p)",
    ),
    "qualified exact cardinality": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ; owl:onClass :B ;\n"
        '    owl:qualifiedCardinality "4"^^xsd:nonNegativeInteger ] . #<',
        "cardinality restrictions",
        "ObjectExactCardinality(4 :p :B)",
    ),
    "data cardinality": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :u ;\n"
        '    owl:cardinality "1"^^xsd:nonNegativeInteger ] . #<',
        "cardinality restrictions",
        "DataExactCardinality(1 :u)",
    ),
    "allValuesFrom": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n    owl:allValuesFrom :B ] . #<",
        "owl:allValuesFrom",
        "ObjectAllValuesFrom(:p :B)",
    ),
    "hasValue": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n    owl:hasValue :b ] . #<",
        "owl:hasValue",
        "ObjectHasValue(:p :b)",
    ),
    "data hasValue": (
        ':A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :u ;\n    owl:hasValue "x" ] . #<',
        "owl:hasValue",
        'DataHasValue(:u "x")',
    ),
    "hasSelf": (
        ':A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n    owl:hasSelf "true"^^xsd:boolean ] . #<',
        "owl:hasSelf",
        "ObjectHasSelf(:p)",
    ),
    "oneOf": (
        ":A owl:equivalentClass [ owl:oneOf ( :a :b ) ] . #<",
        "owl:oneOf",
        "ObjectOneOf(:a :b)",
    ),
    "complementOf on the left": (
        "[ owl:complementOf :B ] rdfs:subClassOf :A . #<",
        "owl:complementOf on the left-hand side",
        "SubClassOf(ObjectComplementOf(:B) :A)",
    ),
    "complementOf of a qualified existential": (
        ":A rdfs:subClassOf [ owl:complementOf [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom :B ] ] . #<",
        "owl:complementOf is allowed in OWL 2 QL only around",
        "ObjectComplementOf(ObjectSomeValuesFrom(:p :B))",
    ),
    "intersection on the left": (
        "[ owl:intersectionOf ( :B :C ) ] rdfs:subClassOf :A . #<",
        "owl:intersectionOf on the left-hand side",
        "SubClassOf(ObjectIntersectionOf(:B :C) :A)",
    ),
    "owl:Thing on the left": (
        "owl:Thing rdfs:subClassOf :A . #<",
        "owl:Thing on the left-hand side",
        "SubClassOf(owl:Thing :A)",
    ),
    "nested existential filler": (
        ":A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ;\n"
        "    owl:someValuesFrom [ a owl:Restriction ; owl:onProperty :q ; owl:someValuesFrom :B ] ] . #<",
        "filler of an existential restriction must be a class name",
        "ObjectSomeValuesFrom(:p ObjectSomeValuesFrom(:q :B))",
    ),
    "property chain": (
        ":r a owl:ObjectProperty ;\n   owl:propertyChainAxiom ( :p :q ) . #<",
        "property chains",
        "SubObjectPropertyOf(ObjectPropertyChain(:p :q) :r)",
    ),
    "hasKey": (
        ":A a owl:Class .\n:A owl:hasKey ( :p ) . #<",
        "keys (owl:hasKey)",
        "HasKey(:A (:p))",
    ),
    "sameAs": (
        ":a owl:sameAs :b . #<",
        "individual equality",
        "SameIndividual(:a :b)",
    ),
    "disjointUnionOf": (
        ":A owl:disjointUnionOf ( :B :C ) . #<",
        "owl:disjointUnionOf",
        "DisjointUnion(:A :B :C)",
    ),
    "reflexive property": (
        ":p a owl:ReflexiveProperty . #<",
        "reflexive properties are in OWL 2 QL but not supported",
        "ReflexiveObjectProperty(:p)",
    ),
    "irreflexive property": (
        ":p a owl:IrreflexiveProperty . #<",
        "irreflexive properties",
        "IrreflexiveObjectProperty(:p)",
    ),
    "union in a property range": (
        ":p rdfs:range [ owl:unionOf ( :B :C ) ] . #<",
        "owl:unionOf",
        "ObjectPropertyRange(:p ObjectUnionOf(:B :C))",
    ),
    "data range enumeration": (
        ':u rdfs:range [ a rdfs:Datatype ; owl:oneOf ( "a" "b" ) ] . #<',
        "data ranges other than datatypes",
        "DataPropertyRange(:u DataOneOf(",
    ),
    "datatype restriction": (
        ":u rdfs:range [ a rdfs:Datatype ; owl:onDatatype xsd:integer ; #<\n"
        '    owl:withRestrictions ( [ xsd:minInclusive "0"^^xsd:integer ] ) ] .',
        "data ranges other than datatypes",
        "DatatypeRestriction(xsd:integer)",
    ),
    "datatype definition": (
        ":Age a rdfs:Datatype ; owl:equivalentClass xsd:nonNegativeInteger . #<",
        "datatype definitions",
        "DatatypeDefinition(:Age xsd:nonNegativeInteger)",
    ),
    "data existential with a datatype on the left": (
        "[ a owl:Restriction ; owl:onProperty :u ; owl:someValuesFrom xsd:integer ] rdfs:subClassOf :A . #<",
        "DataSomeValuesFrom with a datatype other than rdfs:Literal",
        "SubClassOf(DataSomeValuesFrom(:u xsd:integer) :A)",
    ),
}


def _expected_line(body: str) -> int:
    lines = (HEADER + body).splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.rstrip().endswith("#<"))


@pytest.mark.parametrize("body,reason,rendered", list(VIOLATIONS.values()), ids=list(VIOLATIONS))
def test_violation_is_found_explained_and_located(body, reason, rendered):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onto = parse_ontology_text(HEADER + body, "turtle", file="bad.ttl", mode="lenient")
    assert len(onto.findings) == 1, onto.findings
    finding = onto.findings[0]
    assert reason in finding.reason
    assert rendered in finding.axiom
    assert finding.location.file == "bad.ttl"
    assert finding.location.line == _expected_line(body), (finding, (HEADER + body).splitlines())
    assert [w.category for w in caught] == [ProfileWarning]
    assert rendered in str(caught[0].message)


@pytest.mark.parametrize("body,reason,rendered", list(VIOLATIONS.values()), ids=list(VIOLATIONS))
def test_strict_mode_rejects(body, reason, rendered):
    with pytest.raises(ProfileViolation) as exc:
        parse_ontology_text(HEADER + body, "turtle", file="bad.ttl")
    assert isinstance(exc.value, OntologyError)
    assert reason in exc.value.message and rendered in exc.value.message
    assert exc.value.location.line == _expected_line(body)
    assert exc.value.to_dict()["code"] == "owl2ql_profile_violation"


def test_strict_lists_all_findings_and_first_location():
    body = """
:A rdfs:subClassOf [ owl:unionOf ( :B :C ) ] .
:t a owl:TransitiveProperty .
:a owl:sameAs :b .
"""
    with pytest.raises(ProfileViolation) as exc:
        parse_ontology_text(HEADER + body, "turtle", file="bad.ttl")
    err = exc.value
    assert "3 axiom(s) outside OWL 2 QL" in err.message
    for fragment in ("ObjectUnionOf", "TransitiveObjectProperty", "SameIndividual"):
        assert fragment in err.message
    assert err.location.file == "bad.ttl" and err.location.line == 8
    assert [f.location.line for f in err.findings] == [8, 9, 10]


def test_lenient_ignores_only_the_violating_axioms():
    body = """
:A rdfs:subClassOf :B .
:A rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ; owl:allValuesFrom :C ] .
:p a owl:TransitiveProperty ; rdfs:domain :D .
"""
    with pytest.warns(ProfileWarning) as caught:
        onto = parse_ontology_text(HEADER + body, "turtle", mode="lenient")
    assert len(caught) == 2
    assert set(onto.axioms) == {
        SubClassOf(AtomicConcept(EX + "A"), AtomicConcept(EX + "B")),
        SubClassOf(Exists(Role(EX + "p")), AtomicConcept(EX + "D")),
    }
    assert sorted(f.reason.split(" ")[0] for f in onto.findings) == ["owl:allValuesFrom", "transitive"]


def test_lenient_keeps_the_qql_part_of_a_partly_violating_axiom():
    body = """
:A rdfs:subClassOf [ owl:intersectionOf ( :B [ owl:unionOf ( :C :D ) ] ) ] .
:E owl:equivalentClass [ a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom :F ] .
:G owl:disjointUnionOf ( :H :I ) .
"""
    with pytest.warns(ProfileWarning, match="the rest is ignored"):
        onto = parse_ontology_text(HEADER + body, "turtle", mode="lenient")
    a = lambda n: AtomicConcept(EX + n)  # noqa: E731
    assert set(onto.axioms) == {
        SubClassOf(a("A"), a("B")),  # A ⊑ B ⊓ (C ⊔ D) keeps A ⊑ B
        SubClassOf(a("E"), Exists(Role(EX + "p"), EX + "F")),  # E ≡ ∃p.F keeps E ⊑ ∃p.F
        SubClassOf(a("H"), a("G")),  # DisjointUnion(G H I) keeps H ⊑ G, I ⊑ G, H ⊓ I ⊑ ⊥
        SubClassOf(a("I"), a("G")),
        DisjointClasses(a("H"), a("I")),
    }
    assert len(onto.findings) == 3
    assert all("kept the part inside OWL 2 QL" in f.reason for f in onto.findings)


def test_several_reasons_in_one_axiom_are_all_reported():
    body = "[ owl:unionOf ( :B :C ) ] rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :p ; owl:hasValue :x ] ."
    with pytest.warns(ProfileWarning):
        onto = parse_ontology_text(HEADER + body, "turtle", mode="lenient")
    (finding,) = onto.findings
    assert "owl:unionOf" in finding.reason and "owl:hasValue" in finding.reason


def test_invalid_mode():
    with pytest.raises(ValueError):
        parse_ontology_text(HEADER, "turtle", mode="sloppy")


def test_check_profile_on_a_graph():
    g = Graph().parse(data=HEADER + ":t a owl:TransitiveProperty .\n:A rdfs:subClassOf :B .", format="turtle")
    findings = check_profile(g)
    assert [f.axiom for f in findings] == ["TransitiveObjectProperty(:t)"]
    assert check_profile(Graph().parse(data=HEADER + ":A rdfs:subClassOf :B .", format="turtle")) == []


# --------------------------------------------------------------------------
# RDF/XML and OWL/XML violations are located too

RDFXML_BAD = """<?xml version="1.0"?>
<rdf:RDF xmlns="http://ex.org/o#" xml:base="http://ex.org/o"
     xmlns:owl="http://www.w3.org/2002/07/owl#"
     xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
     xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">
    <owl:Class rdf:about="#Car">
        <rdfs:subClassOf rdf:resource="#Vehicle"/>
        <rdfs:subClassOf>
            <owl:Class>
                <owl:unionOf rdf:parseType="Collection">
                    <rdf:Description rdf:about="#Sedan"/>
                    <rdf:Description rdf:about="#Coupe"/>
                </owl:unionOf>
            </owl:Class>
        </rdfs:subClassOf>
    </owl:Class>
    <owl:ObjectProperty rdf:about="#hasPart">
        <rdf:type rdf:resource="http://www.w3.org/2002/07/owl#TransitiveProperty"/>
    </owl:ObjectProperty>
</rdf:RDF>
"""

OWLXML_BAD = """<?xml version="1.0"?>
<Ontology xmlns="http://www.w3.org/2002/07/owl#" xml:base="http://ex.org/o"
     ontologyIRI="http://ex.org/o">
    <Prefix name="" IRI="http://ex.org/o#"/>
    <Declaration><Class IRI="#Car"/></Declaration>
    <Declaration><ObjectProperty IRI="#hasPart"/></Declaration>
    <SubClassOf>
        <Class IRI="#Car"/>
        <Class IRI="#Vehicle"/>
    </SubClassOf>
    <SubClassOf>
        <Class IRI="#Car"/>
        <ObjectUnionOf>
            <Class IRI="#Sedan"/>
            <Class IRI="#Coupe"/>
        </ObjectUnionOf>
    </SubClassOf>
    <HasKey>
        <Class IRI="#Car"/>
        <ObjectProperty IRI="#hasPart"/>
    </HasKey>
    <TransitiveObjectProperty>
        <ObjectProperty IRI="#hasPart"/>
    </TransitiveObjectProperty>
</Ontology>
"""


def test_rdfxml_violations_are_located(tmp_path: Path):
    f = tmp_path / "bad.owl"
    f.write_text(RDFXML_BAD)
    with pytest.warns(ProfileWarning):
        onto = load_ontology([f], mode="lenient")
    by_reason = {fd.reason.split(" ")[0]: fd for fd in onto.findings}
    assert by_reason["owl:unionOf"].location.line == 10
    assert by_reason["owl:unionOf"].axiom == "SubClassOf(:Car ObjectUnionOf(:Sedan :Coupe))"
    assert by_reason["transitive"].location.line == 18
    assert [a.location.line for a in onto.axioms] == [7]


def test_owlxml_violations_are_located_including_those_owlready2_drops(tmp_path: Path):
    f = tmp_path / "bad.owx"
    f.write_text(OWLXML_BAD)
    with pytest.raises(ProfileViolation) as exc:
        load_ontology([f])
    lines = {fd.reason.split(" ")[0]: fd.location.line for fd in exc.value.findings}
    # owlready2 silently drops HasKey; obda still reports it, with its line
    assert lines == {"owl:unionOf": 13, "keys": 18, "transitive": 22}
    assert exc.value.location.line == 13
    with pytest.warns(ProfileWarning):
        onto = load_ontology([f], mode="lenient")
    assert [str(a) for a in onto.axioms] == ["Car ⊑ Vehicle"]
    assert onto.axioms[0].location.line == 7
    haskey = next(fd for fd in onto.findings if fd.location.line == 18)
    assert haskey.axiom == "HasKey(:Car :hasPart)"
