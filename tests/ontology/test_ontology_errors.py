"""Unreadable files, unknown formats and syntax errors give an OntologyError with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from obda.errors import OntologyError, ProfileViolation
from obda.ontology import load_ontology, parse_ontology_text


def _load_text(tmp_path: Path, name: str, text: str | bytes):
    f = tmp_path / name
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text)
    with pytest.raises(OntologyError) as exc:
        load_ontology([f])
    assert not isinstance(exc.value, ProfileViolation)
    assert exc.value.location.file == str(f)
    assert exc.value.to_dict()["code"] == "ontology_error"
    return exc.value


def test_missing_file(tmp_path: Path):
    missing = tmp_path / "nope.ttl"
    with pytest.raises(OntologyError, match="not found") as exc:
        load_ontology([missing])
    assert exc.value.location.file == str(missing)
    assert str(missing) in str(exc.value)


def test_directory_instead_of_file(tmp_path: Path):
    with pytest.raises(OntologyError, match="directory"):
        load_ontology([tmp_path])


def test_turtle_syntax_error_has_line_and_column(tmp_path: Path):
    err = _load_text(
        tmp_path,
        "bad.ttl",
        "@prefix : <http://ex.org/o#> .\n:A a :B .\n:C :d \n  :e :f :g .\n",
    )
    assert "Turtle syntax error" in err.message
    assert err.location.line == 4
    assert err.location.column == 6


def test_rdfxml_syntax_error_has_line(tmp_path: Path):
    err = _load_text(
        tmp_path,
        "bad.owl",
        '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
        '  <rdf:Description rdf:about="http://ex.org/a">\n</rdf:RDF>\n',
    )
    assert "RDF/XML syntax error" in err.message and "mismatched tag" in err.message
    assert err.location.line == 4


def test_owlxml_syntax_error_has_line(tmp_path: Path):
    err = _load_text(
        tmp_path,
        "bad.owx",
        '<?xml version="1.0"?>\n<Ontology xmlns="http://www.w3.org/2002/07/owl#" ontologyIRI="http://ex.org/o">\n'
        '  <Declaration><Class IRI="#A"/></Declaration>\n  <SubClassOf>\n    <Class IRI="#A">\n'
        "  </SubClassOf>\n</Ontology>\n",
    )
    assert "OWL/XML syntax error" in err.message
    assert err.location.line == 6


def test_owlxml_undeclared_prefix_is_reported_with_line(tmp_path: Path):
    err = _load_text(
        tmp_path,
        "bad.owx",
        '<?xml version="1.0"?>\n<Ontology xmlns="http://www.w3.org/2002/07/owl#" ontologyIRI="http://ex.org/o">\n'
        '  <Declaration><Class abbreviatedIRI="ex:A"/></Declaration>\n</Ontology>\n',
    )
    assert "undeclared prefix 'ex'" in err.message and '<Prefix name="ex"' in err.message
    assert err.location.line == 3


def test_ntriples_syntax_error_has_line(tmp_path: Path):
    err = _load_text(
        tmp_path,
        "bad.nt",
        "<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> .\n\n"
        "<http://ex.org/a> <http://ex.org/b> c .\n",
    )
    assert "N-Triples syntax error" in err.message
    assert err.location.line == 3


def test_rdfxml_extension_with_owlxml_root_mismatch_is_sniffed_not_an_error(tmp_path: Path):
    # an .owl file whose root is owl:Ontology is OWL/XML, not a broken RDF/XML file
    f = tmp_path / "o.owl"
    f.write_text('<?xml version="1.0"?>\n<Ontology xmlns="http://www.w3.org/2002/07/owl#" ontologyIRI="http://ex.org/o"/>\n')
    assert load_ontology([f]).axioms == ()


def test_not_utf8(tmp_path: Path):
    err = _load_text(tmp_path, "latin1.ttl", "@prefix : <http://ex.org/o#> .\n:A :label \"caf\xe9\" .\n".encode("latin-1"))
    assert "not UTF-8" in err.message
    assert err.location.line == 2


def test_unknown_format_cannot_be_sniffed(tmp_path: Path):
    err = _load_text(tmp_path, "onto.dat", "just some words\n")
    assert "cannot tell the format" in err.message


def test_unknown_format_name():
    with pytest.raises(OntologyError, match="unknown ontology format 'json-ld'"):
        parse_ontology_text("{}", "json-ld", file="x.jsonld")


def test_parse_text_syntax_error_uses_given_file_name():
    with pytest.raises(OntologyError) as exc:
        parse_ontology_text("@prefix : <http://ex.org/o#> .\n:A :b .\n", "turtle", file="inline.ttl")
    assert exc.value.location.file == "inline.ttl" and exc.value.location.line == 2


def test_wrong_format_given_explicitly():
    with pytest.raises(OntologyError, match="RDF/XML syntax error"):
        parse_ontology_text("@prefix : <http://ex.org/o#> .\n", "xml")
    with pytest.raises(OntologyError, match="not an OWL/XML document"):
        parse_ontology_text('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>', "owlxml")
