"""Parsing R2RML Turtle into the typed model: defaults, shortcuts, structural errors with lines."""

from __future__ import annotations

import textwrap

import pytest

from obda.errors import MappingError
from obda.mapping import load_mapping, parse_mapping_text
from obda.model.mapping import RefObjectMap, TermMapKind, TermType
from shared_data import TESTDATA

PREFIXES = """\
@prefix rr: <http://www.w3.org/ns/r2rml#> .
@prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@base <http://example.org/base/> .
"""
EX = "http://example.org/"


def _parse(body: str, file: str = "m.ttl"):
    return parse_mapping_text(PREFIXES + textwrap.dedent(body), file=file)


def _line(body: str, needle: str) -> int:
    lines = (PREFIXES + textwrap.dedent(body)).splitlines()
    return next(i + 1 for i, line in enumerate(lines) if needle in line)


FULL = """\
<TM1> a rr:TriplesMap ;
    rr:logicalTable [ rr:sqlQuery \"\"\"
        SELECT id, name, dept FROM emp
    \"\"\" ; rr:sqlVersion rr:SQL2008 ] ;
    rr:subjectMap [ rr:template "http://example.org/emp/{id}" ;
                    rr:class ex:Employee, ex:Person ;
                    rr:graph ex:G1 ] ;
    rr:predicateObjectMap [
        rr:predicate ex:name ;
        rr:objectMap [ rr:column "name" ; rr:language "en" ] ] ;
    rr:predicateObjectMap [
        rr:predicateMap [ rr:constant ex:id ] ;
        rr:objectMap [ rr:column "id" ; rr:datatype xsd:integer ] ;
        rr:graphMap [ rr:template "http://example.org/graph/{dept}" ] ] ;
    rr:predicateObjectMap [
        rr:predicate ex:label ;
        rr:object "Employee"@en ] ;
    rr:predicateObjectMap [
        rr:predicate ex:dept ;
        rr:objectMap [ rr:template "http://example.org/dept/{dept}" ; rr:inverseExpression "{dept} = 1" ] ] ;
    rr:predicateObjectMap [
        rr:predicate ex:code ;
        rr:objectMap [ rr:template "E-{id}" ; rr:termType rr:Literal ] ] ;
    rr:predicateObjectMap [
        rr:predicate ex:worksIn ;
        rr:objectMap [ rr:parentTriplesMap <TM2> ; rr:joinCondition [ rr:child "dept" ; rr:parent "id" ] ] ] .

<TM2>
    rr:logicalTable [ rr:tableName "DEPT" ] ;
    rr:subject ex:TheDept ;
    rr:predicateObjectMap [ rr:predicate ex:blank ; rr:objectMap [ rr:column "x" ; rr:termType rr:BlankNode ] ] .
"""


def test_full_mapping_model() -> None:
    m = _parse(FULL)
    assert [t.name for t in m.triples_maps] == ["TM1", "TM2"]
    assert m.files == ("m.ttl",)
    tm1 = m.get("http://example.org/base/TM1")
    assert tm1.location.line == _line(FULL, "<TM1> a rr:TriplesMap")
    assert tm1.base_iri == "http://example.org/base/"
    lt = tm1.logical_table
    assert lt.is_query and "SELECT id, name, dept FROM emp" in lt.sql_query
    assert lt.sql_versions == ("http://www.w3.org/ns/r2rml#SQL2008",)
    assert lt.location.line == _line(FULL, "rr:sqlQuery")
    s = tm1.subject
    assert (s.kind, s.term_type) == (TermMapKind.TEMPLATE, TermType.IRI)
    assert s.columns == ("id",)
    assert s.location.line == _line(FULL, 'rr:template "http://example.org/emp/{id}"')
    assert set(tm1.classes) == {EX + "Employee", EX + "Person"}
    assert [g.value for g in tm1.subject_graphs] == [EX + "G1"]
    by_pred = {p.predicates[0].value: p for p in tm1.predicate_object_maps}
    name = by_pred[EX + "name"].objects[0]
    assert (name.kind, name.term_type, name.language) == (TermMapKind.COLUMN, TermType.LITERAL, "en")
    assert name.location.line == _line(FULL, 'rr:column "name"')
    idp = by_pred[EX + "id"]
    assert idp.predicates[0].kind is TermMapKind.CONSTANT
    assert idp.objects[0].datatype == "http://www.w3.org/2001/XMLSchema#integer"
    assert idp.graphs[0].kind is TermMapKind.TEMPLATE and idp.graphs[0].term_type is TermType.IRI
    label = by_pred[EX + "label"].objects[0]
    assert (label.kind, label.term_type, label.value, label.language) == (
        TermMapKind.CONSTANT, TermType.LITERAL, "Employee", "en")
    dept = by_pred[EX + "dept"].objects[0]
    # a template object map defaults to IRI (R2RML §7.4)
    assert dept.term_type is TermType.IRI and dept.inverse_expression == "{dept} = 1"
    assert by_pred[EX + "code"].objects[0].term_type is TermType.LITERAL
    ref = by_pred[EX + "worksIn"].objects[0]
    assert isinstance(ref, RefObjectMap)
    assert ref.parent_triples_map == "http://example.org/base/TM2"
    assert [(j.child, j.parent) for j in ref.join_conditions] == [("dept", "id")]
    assert ref.location.line == _line(FULL, "rr:parentTriplesMap <TM2>")
    assert by_pred[EX + "worksIn"].location.line == _line(FULL, "rr:predicate ex:worksIn")
    tm2 = m.get("http://example.org/base/TM2")
    lines = (PREFIXES + FULL).splitlines()
    assert lines[tm2.location.line - 1].strip() == "<TM2>"
    assert tm2.logical_table.table_name == "DEPT"
    assert (tm2.subject.kind, tm2.subject.value) == (TermMapKind.CONSTANT, EX + "TheDept")
    assert tm2.predicate_object_maps[0].objects[0].term_type is TermType.BLANK_NODE


BAD = [
    ("no subject map", "<T> rr:logicalTable [ rr:tableName \"t\" ] .", "no subject map", "<T>"),
    (
        "two subject maps",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:subjectMap [ rr:template "b{x}" ] .',
        "2 subject maps",
        "<T>",
    ),
    (
        "two logical tables",
        '<T> rr:logicalTable [ rr:tableName "t" ], [ rr:tableName "u" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] .',
        "2 rr:logicalTable",
        "<T>",
    ),
    (
        "table and query",
        '<T> a rr:TriplesMap ;\n  rr:logicalTable [ rr:tableName "t" ; rr:sqlQuery "SELECT 1" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] .',
        "both rr:tableName and rr:sqlQuery",
        "rr:logicalTable",
    ),
    (
        "no logical table",
        '<T> a rr:TriplesMap ;\n  rr:subjectMap [ rr:template "a{x}" ] .',
        "no rr:logicalTable",
        "<T>",
    ),
    (
        "missing predicate",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [\n    rr:objectMap [ rr:column "c" ] ] .',
        "no rr:predicate",
        "<T>",
    ),
    (
        "missing object",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [\n    rr:predicate ex:p ] .',
        "no rr:object",
        "rr:predicate ex:p",
    ),
    (
        "column and template",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate ex:p ;\n    rr:objectMap [ rr:column "c" ; rr:template "{c}" ] ] .',
        "exactly one of rr:constant, rr:column, rr:template",
        'rr:column "c"',
    ),
    (
        "bad braces",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "http://e/{x" ] .',
        "without matching",
        'rr:template "http://e/{x"',
    ),
    (
        "unknown parent",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate ex:p ;\n    rr:objectMap [ rr:parentTriplesMap <Nope> ] ] .',
        "is not a triples map",
        "rr:parentTriplesMap <Nope>",
    ),
    (
        "literal subject",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:column "x" ; rr:termType rr:Literal ] .',
        "not allowed for a subject map",
        'rr:column "x"',
    ),
    (
        "datatype and language",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate ex:p ;\n    rr:objectMap [ rr:column "c" ; rr:datatype xsd:string ; rr:language "en" ] ] .',
        "both rr:datatype and rr:language",
        'rr:column "c"',
    ),
    (
        "datatype on IRI",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate ex:p ;\n    rr:objectMap [ rr:template "{c}" ; rr:termType rr:IRI ; rr:datatype xsd:string ] ] .',
        "require term type literal",
        'rr:template "{c}"',
    ),
    (
        "bad language tag",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate ex:p ;\n    rr:objectMap [ rr:column "c" ; rr:language "english" ] ] .',
        "not a valid BCP 47",
        'rr:column "c"',
    ),
    (
        "unknown sql version",
        '<T> rr:logicalTable [ rr:sqlQuery "SELECT 1" ; rr:sqlVersion rr:SQL1979 ] ;\n  rr:subjectMap [ rr:template "a{x}" ] .',
        "unknown rr:sqlVersion",
        "<T>",
    ),
    (
        "literal predicate",
        '<T> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] ;\n  rr:predicateObjectMap [ rr:predicate "p" ; rr:object ex:o ] .',
        "must be an IRI",
        'rr:predicate "p"',
    ),
    (
        "bad turtle",
        '<T> rr:logicalTable [ rr:tableName "t" \n  rr:subjectMap .',
        "not valid Turtle",
        None,
    ),
]


@pytest.mark.parametrize(("what", "body", "message", "line_of"), BAD, ids=[b[0] for b in BAD])
def test_structural_errors(what: str, body: str, message: str, line_of: str | None) -> None:
    with pytest.raises(MappingError) as ei:
        _parse(body)
    err = ei.value
    assert message in err.message
    assert err.location.file == "m.ttl"
    if line_of is not None:
        assert err.location.line == _line(body, line_of), str(err)
    else:
        assert err.location.line is not None
    assert str(err).startswith(f"m.ttl:{err.location.line}: ")


def test_load_mapping_across_files(tmp_path) -> None:
    a = tmp_path / "a.ttl"
    b = tmp_path / "b.ttl"
    a.write_text(PREFIXES + '<A> rr:logicalTable [ rr:tableName "t" ] ;\n  rr:subjectMap [ rr:template "a{x}" ] .\n')
    b.write_text(
        PREFIXES
        + '\n\n<B> rr:logicalTable [ rr:tableName "u" ] ;\n  rr:subjectMap [ rr:template "b{x}" ] ;\n'
        + "  rr:predicateObjectMap [ rr:predicate ex:p ; rr:objectMap [ rr:parentTriplesMap <A> ;\n"
        + '    rr:joinCondition [ rr:child "x" ; rr:parent "x" ] ] ] .\n'
    )
    m = load_mapping([a, b])
    assert m.files == (str(a), str(b))
    tb = m.get("http://example.org/base/B")
    assert tb.location == type(tb.location)(str(b), 7)
    # alone, b.ttl references an unknown parent
    with pytest.raises(MappingError, match="is not a triples map"):
        load_mapping([b])
    # the same triples map twice
    with pytest.raises(MappingError, match="defined twice"):
        load_mapping([a, a])
    with pytest.raises(MappingError, match="cannot read"):
        load_mapping([tmp_path / "missing.ttl"])


def test_escaped_template_and_quoted_columns() -> None:
    m = _parse('<T> rr:logicalTable [ rr:tableName "\\"Student\\"" ] ;\n  rr:subjectMap [ rr:template "http://e/\\\\{x\\\\}/{\\"ID\\"}" ] .')
    tm = m.triples_maps[0]
    assert tm.logical_table.table_name == '"Student"'
    assert tm.subject.columns == ('"ID"',)
    assert tm.subject.template[0].text == "http://e/{x}/"


def test_npd_parses_quickly() -> None:
    import time
    from pathlib import Path

    path = TESTDATA / "npd" / "npd-v2-ql.r2rml.ttl"
    if not path.exists():
        pytest.skip("NPD data not available")
    t0 = time.perf_counter()
    m = load_mapping([path])
    elapsed = time.perf_counter() - t0
    print(f"\nNPD: {len(m.triples_maps)} triples maps parsed in {elapsed:.2f}s")
    assert len(m.triples_maps) == 1177
    assert elapsed < 10
    assert all(t.location.line is not None for t in m.triples_maps)
    assert all(t.subject.location.line is not None for t in m.triples_maps)
    first = m.triples_maps[0]
    assert first.location.line == 8 and first.subject.location.line == 21
