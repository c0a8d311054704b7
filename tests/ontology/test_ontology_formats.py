"""The same ontology in Turtle, RDF/XML, OWL/XML and N-Triples gives the same Ontology; format detection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rdflib import Graph

from obda.errors import OntologyError
from obda.model.ontology import (
    AtomicConcept,
    DisjointClasses,
    DisjointProperties,
    Exists,
    Role,
    SubClassOf,
    SubPropertyOf,
)
from obda.ontology import detect_format, load_ontology, parse_ontology_text, sniff_format

DATA = Path(__file__).parent / "data"
V = "http://example.org/vehicles#"
FIXTURES = ["vehicles.ttl", "vehicles.owl", "vehicles.owx"]


def A(n):
    return AtomicConcept(V + n)


def R(n, inverse=False):
    return Role(V + n, inverse=inverse)


def U(n):
    return Role(V + n, data=True)


# Written by hand from the ontology (vehicles.ttl comments) and the DL-Lite_R reading of OWL 2 QL.
EXPECTED = {
    SubClassOf(A("Vehicle"), A("Machine")),
    SubClassOf(A("Vehicle"), Exists(U("weight"))),
    SubClassOf(A("Car"), A("Vehicle")),
    SubClassOf(A("Car"), Exists(R("hasEngine"), V + "Engine")),
    DisjointClasses(A("Car"), A("Truck")),
    SubClassOf(A("Truck"), A("Vehicle")),
    SubClassOf(A("ElectricCar"), A("Car")),
    SubClassOf(A("ElectricCar"), Exists(R("hasPart"), V + "Battery")),
    SubClassOf(A("Part"), Exists(R("hasPart", True), V + "Machine")),
    DisjointClasses(A("Battery"), A("Wheel")),
    SubClassOf(A("Driver"), A("Person")),
    SubClassOf(A("Driver"), Exists(R("drives"))),
    SubClassOf(Exists(R("drives")), A("Driver")),
    SubClassOf(Exists(R("owns")), A("Person")),
    SubClassOf(Exists(U("serialNumber")), A("Vehicle")),
    DisjointClasses(A("Person"), A("Vehicle")),
    DisjointClasses(A("Person"), A("Engine")),
    DisjointClasses(A("Vehicle"), A("Engine")),
    SubClassOf(Exists(R("hasPart")), A("Machine")),
    SubClassOf(Exists(R("hasPart", True)), A("Part")),
    SubPropertyOf(R("hasPart"), R("partOf", True)),
    SubPropertyOf(R("partOf"), R("hasPart", True)),
    SubPropertyOf(R("hasEngine"), R("hasPart")),
    DisjointProperties(R("drives"), R("manufactures")),
    SubPropertyOf(R("neighbour"), R("neighbour", True)),
    SubPropertyOf(R("manufacturedBy"), R("madeBy")),
    SubPropertyOf(R("madeBy"), R("manufacturedBy")),
    SubClassOf(Exists(U("weight")), A("Machine")),
    SubPropertyOf(U("serialNumber"), U("identifier")),
}
CLASSES = {V + c for c in "Machine Vehicle Car Truck ElectricCar Engine Part Battery Wheel Person Driver".split()}
OBJECT_PROPERTIES = {
    V + p for p in "hasPart partOf hasEngine drives manufactures owns neighbour manufacturedBy madeBy".split()
}
DATA_PROPERTIES = {V + p for p in "weight identifier serialNumber".split()}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_fixture_matches_hand_written_expectation(fixture):
    onto = load_ontology([DATA / fixture])
    assert set(onto.axioms) == EXPECTED
    assert len(onto.axioms) == len(EXPECTED)  # no duplicates
    assert onto.classes == CLASSES
    assert onto.object_properties == OBJECT_PROPERTIES
    assert onto.data_properties == DATA_PROPERTIES
    assert dict(onto.labels) == {V + "Car": "car", V + "Vehicle": "vehicle"}
    assert onto.findings == ()
    assert onto.files == (str(DATA / fixture),)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_axiom_is_located_on_a_line_naming_its_construct(fixture):
    """Locations are best effort, but in these fixtures each axiom's line shows its construct."""
    path = DATA / fixture
    lines = path.read_text().splitlines()
    onto = load_ontology([path])
    for ax in onto.axioms:
        assert ax.location.file == str(path)
        line = lines[ax.location.line - 1].lower()
        assert any(
            kw in line
            for kw in (
                "subclassof", "equivalentclass", "disjoint", "domain", "range", "inverseof",
                "inverseobjectproperties", "subpropertyof", "subobjectpropertyof", "subdatapropertyof",
                "equivalentproperty", "equivalentobjectproperties", "symmetric", "members",
            )
        ), (ax, line)


def test_ntriples_gives_the_same_ontology(tmp_path: Path):
    g = Graph().parse(DATA / "vehicles.ttl", format="turtle")
    nt = tmp_path / "vehicles.nt"
    nt.write_text(g.serialize(format="nt"))
    onto = load_ontology([nt])
    assert set(onto.axioms) == EXPECTED
    assert all(a.location.line is not None for a in onto.axioms)


def test_owlready2_rdfxml_round_trip_gives_the_same_ontology(tmp_path: Path):
    """Differential: owlready2's own RDF/XML parser (an independent implementation) re-serialises the file."""
    import io

    import owlready2

    world = owlready2.World()
    onto = world.get_ontology("http://example.org/vehicles").load(
        fileobj=io.BytesIO((DATA / "vehicles.owl").read_bytes()), format="rdfxml"
    )
    buf = io.BytesIO()
    onto.save(file=buf, format="ntriples")
    world.close()
    assert set(parse_ontology_text(buf.getvalue().decode(), "nt").axioms) == EXPECTED


@pytest.mark.parametrize("fixture,fmt", [("vehicles.ttl", "turtle"), ("vehicles.owl", "xml"), ("vehicles.owx", "owlxml")])
def test_parse_ontology_text(fixture, fmt):
    onto = parse_ontology_text((DATA / fixture).read_text(), fmt, file=fixture)
    assert set(onto.axioms) == EXPECTED
    assert onto.files == (fixture,)
    assert {a.location.file for a in onto.axioms} == {fixture}


@pytest.mark.parametrize("alias", ["ttl", "Turtle", "text/turtle"])
def test_format_aliases(alias):
    assert set(parse_ontology_text((DATA / "vehicles.ttl").read_text(), alias).axioms) == EXPECTED


# --------------------------------------------------------------------------
# detection


@pytest.mark.parametrize(
    "fixture,copy_as,expected",
    [
        ("vehicles.owx", "onto.owl", "owlxml"),  # .owl holding OWL/XML: sniffed from the root element
        ("vehicles.owl", "onto.owl", "xml"),
        ("vehicles.owl", "onto.rdf", "xml"),
        ("vehicles.owx", "onto.xml", "owlxml"),
        ("vehicles.ttl", "onto.owl", "turtle"),  # some .owl files are Turtle
        ("vehicles.ttl", "onto.txt", "turtle"),  # unknown extension: sniffed
        ("vehicles.owl", "onto", "xml"),
    ],
)
def test_format_detection(tmp_path: Path, fixture, copy_as, expected):
    target = tmp_path / copy_as
    shutil.copy(DATA / fixture, target)
    assert detect_format(target, target.read_text()) == expected
    assert set(load_ontology([target]).axioms) == EXPECTED


def test_extension_wins_over_content_for_unambiguous_extensions():
    assert detect_format("x.ttl", "<?xml version='1.0'?><rdf:RDF/>") == "turtle"
    assert detect_format("x.owx", "") == "owlxml"
    assert detect_format("x.nt", "") == "nt"


def test_sniffing():
    assert sniff_format("<http://a> <http://b> <http://c> .\n_:x <http://b> \"v\" .\n") == "nt"
    assert sniff_format("# comment\n@prefix : <http://a#> .\n") == "turtle"
    assert sniff_format("PREFIX : <http://a#>\n:a :b :c .") == "turtle"
    assert sniff_format("Prefix(:=<http://a#>)\nOntology(<http://a>)") == "functional"
    assert sniff_format("hello world") is None


def test_functional_syntax_is_rejected_with_advice(tmp_path: Path):
    f = tmp_path / "onto.ofn"
    f.write_text("Prefix(:=<http://a#>)\nOntology(<http://a>\n SubClassOf(:A :B)\n)\n")
    with pytest.raises(OntologyError, match="functional syntax is not supported") as exc:
        load_ontology([f])
    assert exc.value.location.file == str(f)


# --------------------------------------------------------------------------
# several files


def test_several_files_are_merged_and_located_per_file(tmp_path: Path):
    prefixes = (
        "@prefix : <http://ex.org/o#> .\n@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n"
    )
    vocab = tmp_path / "vocab.ttl"
    vocab.write_text(prefixes + ":u a owl:DatatypeProperty .\n:A a owl:Class ; rdfs:label \"a\"@en .\n")
    axioms = tmp_path / "axioms.ttl"
    axioms.write_text(
        prefixes
        + ":A rdfs:subClassOf :B .\n"
        + ":B rdfs:subClassOf [ a owl:Restriction ; owl:onProperty :u ; owl:someValuesFrom xsd:string ] .\n"
    )
    onto = load_ontology([vocab, axioms])
    ex = "http://ex.org/o#"
    # :u is declared a data property in the first file, used in the second
    assert set(onto.axioms) == {
        SubClassOf(AtomicConcept(ex + "A"), AtomicConcept(ex + "B")),
        SubClassOf(AtomicConcept(ex + "B"), Exists(Role(ex + "u", data=True))),
    }
    assert {(a.location.file, a.location.line) for a in onto.axioms} == {(str(axioms), 5), (str(axioms), 6)}
    assert onto.files == (str(vocab), str(axioms))
    assert onto.label(ex + "A") == "a"
    assert onto.data_properties == {ex + "u"}


def test_load_single_path_and_empty_list():
    assert set(load_ontology(DATA / "vehicles.ttl").axioms) == EXPECTED
    with pytest.raises(OntologyError):
        load_ontology([])
