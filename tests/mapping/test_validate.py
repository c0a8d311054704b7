"""Validation of R2RML mappings against an ontology and a sources catalog.

Each problem code has a small mapping that triggers it; the test checks the
code, the message and the line the problem points at (the line of the term
map / triples map in the Turtle text).
"""

from __future__ import annotations

import textwrap

import pytest

from obda.errors import Problem, ValidationError
from obda.mapping import check_mapping, parse_mapping_text, validate_mapping
from obda.model.ontology import Ontology
from obda.model.sources import Column, ColumnType, Sources, Table, TableKind

EX = "http://example.org/"

ONTOLOGY = Ontology(
    classes=frozenset({EX + "Turbine", EX + "Sensor", EX + "Measurement"}),
    object_properties=frozenset({EX + "hasSensor", EX + "ofSensor"}),
    data_properties=frozenset({EX + "value", EX + "kind", EX + "name", EX + "at"}),
)

SOURCES = Sources.from_yaml(
    textwrap.dedent(
        """\
        tables:
          measurement:
            kind: stream
            timestamp: ts
            columns: {sensor_id: integer, value: double, ts: timestamp}
          sensor:
            kind: static
            columns: {id: integer, kind: string, turbine_id: integer, installed: timestamp}
          turbine:
            kind: static
            columns: {id: integer, name: string}
        """
    ),
    "sources.yaml",
)

PREFIXES = """\
@prefix rr: <http://www.w3.org/ns/r2rml#> .
@prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""


def _problems(body: str, ontology: Ontology | None = ONTOLOGY) -> list[Problem]:
    mapping = parse_mapping_text(PREFIXES + textwrap.dedent(body), file="m.ttl")
    return validate_mapping(mapping, ontology, SOURCES)


def _line(body: str, needle: str) -> int:
    """1-based line of ``needle`` in the mapping text (after the 3 prefix lines)."""
    lines = (PREFIXES + textwrap.dedent(body)).splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if needle in line]
    assert hits, needle
    return hits[0]


def _only(problems: list[Problem], code: str) -> Problem:
    found = [p for p in problems if p.code == code]
    assert len(found) == 1, problems
    return found[0]


GOOD = """\
ex:TurbineMap a rr:TriplesMap ;
    rr:logicalTable [ rr:tableName "turbine" ] ;
    rr:subjectMap [ rr:template "http://example.org/turbine/{id}" ; rr:class ex:Turbine ] ;
    rr:predicateObjectMap [ rr:predicate ex:name ; rr:objectMap [ rr:column "name" ] ] .

ex:SensorMap a rr:TriplesMap ;
    rr:logicalTable [ rr:sqlQuery \"\"\"SELECT s.id, s.kind, s.turbine_id FROM sensor s\"\"\" ] ;
    rr:subjectMap [ rr:template "http://example.org/sensor/{id}" ; rr:class ex:Sensor ] ;
    rr:predicateObjectMap [ rr:predicate ex:kind ; rr:objectMap [ rr:column "KIND" ] ] ;
    rr:predicateObjectMap [ rr:predicate ex:hasSensor ;
        rr:objectMap [ rr:parentTriplesMap ex:TurbineMap ;
                       rr:joinCondition [ rr:child "turbine_id" ; rr:parent "id" ] ] ] .

ex:MeasurementMap a rr:TriplesMap ;
    rr:logicalTable [ rr:tableName "measurement" ] ;
    rr:subjectMap [ rr:template "http://example.org/m/{sensor_id}/{ts}" ; rr:class ex:Measurement ] ;
    rr:predicateObjectMap [ rr:predicate ex:value ; rr:objectMap [ rr:column "value" ; rr:datatype xsd:double ] ] ;
    rr:predicateObjectMap [ rr:predicate ex:ofSensor ; rr:objectMap [ rr:template "http://example.org/sensor/{sensor_id}" ] ] .
"""


def test_good_mapping_has_no_problems_and_check_returns_it() -> None:
    assert _problems(GOOD) == []
    mapping = parse_mapping_text(PREFIXES + GOOD, file="m.ttl")
    assert check_mapping(mapping, ONTOLOGY, SOURCES) is mapping


def test_unknown_class_and_property() -> None:
    body = GOOD.replace("rr:class ex:Turbine", "rr:class ex:Turbin").replace(
        "rr:predicate ex:name", "rr:predicate ex:nam"
    )
    ps = _problems(body)
    codes = sorted(p.code for p in ps)
    assert codes == ["unknown_term", "unknown_term"]
    cls = next(p for p in ps if "Turbin " in p.message or p.message.endswith("ontology") and "class" in p.message)
    assert "http://example.org/Turbin" in cls.message
    assert cls.location.file == "m.ttl"
    assert cls.location.line == _line(body, 'rr:template "http://example.org/turbine/{id}"')
    prop = next(p for p in ps if "predicate" in p.message)
    assert "http://example.org/nam" in prop.message
    assert prop.location.line == _line(body, "rr:predicate ex:nam ")


def test_class_as_property_both_ways() -> None:
    body = GOOD.replace("rr:predicate ex:kind", "rr:predicate ex:Sensor").replace(
        "rr:class ex:Measurement", "rr:class ex:value"
    )
    ps = [p for p in _problems(body) if p.code == "class_as_property"]
    assert len(ps) == 2
    pred = next(p for p in ps if "predicate" in p.message)
    assert "is a class" in pred.message and pred.location.line == _line(body, "rr:predicate ex:Sensor")
    cls = next(p for p in ps if "rr:class" in p.message)
    assert "is a property" in cls.message and cls.location.line == _line(body, "http://example.org/m/{sensor_id}")


def test_rdf_type_with_constant_object_is_checked_as_class() -> None:
    body = GOOD.replace(
        "rr:predicateObjectMap [ rr:predicate ex:name ;",
        "rr:predicateObjectMap [ rr:predicate a ; rr:object ex:Nope ] ;\n    rr:predicateObjectMap [ rr:predicate ex:name ;",
    ).replace("rr:predicate a ;", "rr:predicate <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> ;")
    p = _only(_problems(body), "unknown_term")
    assert "http://example.org/Nope" in p.message


def test_property_kind_mismatch_warnings() -> None:
    body = GOOD.replace('rr:predicate ex:name ; rr:objectMap [ rr:column "name" ]', 'rr:predicate ex:hasSensor ; rr:objectMap [ rr:column "name" ]')
    p = _only(_problems(body), "object_property_with_literal")
    assert p.severity == "warning"
    assert p.location.line == _line(body, 'rr:column "name"')
    body = GOOD.replace("rr:predicate ex:ofSensor", "rr:predicate ex:value")
    p = _only(_problems(body), "data_property_with_iri")
    assert p.severity == "warning"
    # warnings do not block
    check_mapping(parse_mapping_text(PREFIXES + body, file="m.ttl"), ONTOLOGY, SOURCES)


def test_sql_syntax_reports_sqlglot_message_and_line() -> None:
    body = GOOD.replace(
        'rr:sqlQuery """SELECT s.id, s.kind, s.turbine_id FROM sensor s"""',
        'rr:sqlQuery """SELECT s.id, s.kind,\n        s.turbine_id FROM sensor s WHERE (s.id = 1"""',
    )
    p = _only(_problems(body), "sql_syntax")
    assert "does not parse" in p.message and "Expecting )" in p.message
    assert p.location.line == _line(body, "s.turbine_id FROM sensor s WHERE")


def test_unknown_table_by_name_and_in_query() -> None:
    body = GOOD.replace('rr:tableName "turbine"', 'rr:tableName "turbines"')
    p = _only(_problems(body), "unknown_table")
    assert "'turbines'" in p.message and "TurbineMap" in p.message
    assert p.location.line == _line(body, 'rr:tableName "turbines"')
    body = GOOD.replace("FROM sensor s", "FROM sensors s")
    p = _only(_problems(body), "unknown_table")
    assert "'sensors'" in p.message
    assert p.location.line == _line(body, "rr:sqlQuery")


def test_unknown_column_in_query_and_in_term_maps() -> None:
    body = GOOD.replace("SELECT s.id, s.kind", "SELECT s.id, s.kindd")
    p = _only(_problems(body), "unknown_column")
    assert "kindd" in p.message
    body = GOOD.replace('rr:column "name"', 'rr:column "nme"')
    p = _only(_problems(body), "unknown_column")
    assert "'nme'" in p.message and "columns: id, name" in p.message
    assert p.location.line == _line(body, 'rr:column "nme"')
    # a column the query reads but does not select
    body = GOOD.replace("SELECT s.id, s.kind, s.turbine_id", "SELECT s.id, s.turbine_id")
    p = _only(_problems(body), "unknown_column")
    assert "'KIND'" in p.message and p.location.line == _line(body, 'rr:column "KIND"')


def test_template_placeholder() -> None:
    body = GOOD.replace("http://example.org/turbine/{id}", "http://example.org/turbine/{ident}")
    p = _only(_problems(body), "template_placeholder")
    assert "{ident}" in p.message and "columns: id, name" in p.message
    assert p.location.line == _line(body, "{ident}")


@pytest.mark.parametrize(
    ("column", "datatype", "ok"),
    [
        ("value", "xsd:double", True),
        ("value", "xsd:integer", False),  # double column is not an integer
        ("sensor_id", "xsd:decimal", True),  # every integer is a decimal
        ("sensor_id", "xsd:dateTime", False),
        ("ts", "xsd:dateTime", True),
        ("ts", "xsd:integer", False),
        ("value", "xsd:string", True),
        ("value", "xsd:boolean", False),
    ],
)
def test_datatype_compatibility(column: str, datatype: str, ok: bool) -> None:
    body = GOOD.replace('rr:column "value" ; rr:datatype xsd:double', f'rr:column "{column}" ; rr:datatype {datatype}')
    ps = [p for p in _problems(body) if p.code == "datatype_mismatch"]
    if ok:
        assert ps == []
    else:
        assert len(ps) == 1
        assert datatype in ps[0].message and repr(column) in ps[0].message
        assert ps[0].location.line == _line(body, f'rr:column "{column}" ; rr:datatype')


def test_datatype_mismatch_on_string_column_for_integer() -> None:
    """A string column fits xsd:integer?  No: strings fit any datatype only for string-ish types."""
    body = GOOD.replace('rr:column "name" ]', 'rr:column "name" ; rr:datatype xsd:integer ]')
    # strings may hold valid integer lexical forms: allowed (documented in DATATYPE_COMPATIBILITY)
    assert [p for p in _problems(body) if p.code == "datatype_mismatch"] == []


def test_join_condition_columns() -> None:
    body = GOOD.replace('rr:child "turbine_id"', 'rr:child "turbine"').replace('rr:parent "id"', 'rr:parent "tid"')
    ps = [p for p in _problems(body) if p.code == "join_condition_column"]
    assert len(ps) == 2
    assert any("rr:child 'turbine'" in p.message for p in ps)
    assert any("rr:parent 'tid'" in p.message and "TurbineMap" in p.message for p in ps)
    assert all(p.location.line == _line(body, 'rr:child "turbine"') for p in ps)


def test_unknown_parent_in_validation() -> None:
    """The parser rejects unknown parents; validation reports them for programmatic mappings too."""
    from dataclasses import replace

    from obda.model.mapping import Mapping, RefObjectMap

    m = parse_mapping_text(PREFIXES + GOOD, file="m.ttl")
    sensor = m.get(EX + "SensorMap")
    pom = sensor.predicate_object_maps[1]
    ref = pom.objects[0]
    assert isinstance(ref, RefObjectMap)
    bad = replace(sensor, predicate_object_maps=(sensor.predicate_object_maps[0], replace(pom, objects=(replace(ref, parent_triples_map=EX + "Nope"),))))
    m2 = Mapping(tuple(bad if t.id == sensor.id else t for t in m.triples_maps), m.files)
    p = _only(validate_mapping(m2, ONTOLOGY, SOURCES), "unknown_parent")
    assert "http://example.org/Nope" in p.message
    assert p.location.line == _line(GOOD, "rr:parentTriplesMap ex:TurbineMap")


def test_stream_without_timestamp_in_query() -> None:
    body = GOOD.replace(
        'rr:tableName "measurement"', 'rr:sqlQuery "SELECT sensor_id, value FROM measurement WHERE value > 10"'
    ).replace("/{ts}", "")
    p = _only(_problems(body), "stream_without_timestamp")
    assert "'measurement'" in p.message and "'ts'" in p.message
    assert p.location.line == _line(body, "rr:sqlQuery \"SELECT sensor_id")


def test_stream_timestamp_selected_through_alias_is_fine() -> None:
    body = GOOD.replace(
        'rr:tableName "measurement"', 'rr:sqlQuery "SELECT m.sensor_id, m.value, m.ts AS t FROM measurement m"'
    ).replace("/{ts}", "/{t}")
    assert _problems(body) == []


def test_stream_without_timestamp_in_programmatic_sources() -> None:
    sources = Sources(
        (Table("s", TableKind.STREAM, (Column("a", ColumnType.INTEGER),), timestamp=None),), file="prog"
    )
    mapping = parse_mapping_text(
        PREFIXES
        + 'ex:M rr:logicalTable [ rr:tableName "s" ] ; rr:subjectMap [ rr:template "http://e/{a}" ] .\n',
        file="m.ttl",
    )
    ps = validate_mapping(mapping, None, sources)
    assert [p.code for p in ps].count("stream_without_timestamp") == 2  # the table, and the triples map
    with pytest.raises(ValidationError) as ei:
        check_mapping(mapping, None, sources)
    assert len(ei.value.problems) == 2


def test_duplicate_and_multiple_streams() -> None:
    body = GOOD.replace("SELECT s.id, s.kind, s.turbine_id", "SELECT s.id, s.kind, s.turbine_id, s.id")
    p = _only(_problems(body), "duplicate_column")
    assert "'id'" in p.message


def test_check_mapping_raises_with_all_problems() -> None:
    body = GOOD.replace('rr:column "name"', 'rr:column "nme"').replace("rr:class ex:Turbine", "rr:class ex:X")
    mapping = parse_mapping_text(PREFIXES + body, file="m.ttl")
    with pytest.raises(ValidationError) as ei:
        check_mapping(mapping, ONTOLOGY, SOURCES)
    assert sorted(p.code for p in ei.value.problems) == ["unknown_column", "unknown_term"]
    assert ei.value.location.file == "m.ttl"


def test_without_ontology_only_sources_are_checked() -> None:
    body = GOOD.replace("rr:class ex:Turbine", "rr:class ex:Unknown")
    assert _problems(body, ontology=None) == []


def test_load_validated_mapping_returns_only_valid_mappings(tmp_path) -> None:
    from obda.mapping import load_validated_mapping

    good = tmp_path / "good.ttl"
    good.write_text(PREFIXES + GOOD)
    m = load_validated_mapping([good], ONTOLOGY, SOURCES)
    assert len(m.triples_maps) == 3
    bad = tmp_path / "bad.ttl"
    bad.write_text(PREFIXES + GOOD.replace('rr:column "name"', 'rr:column "nme"'))
    with pytest.raises(ValidationError) as ei:
        load_validated_mapping([bad], ONTOLOGY, SOURCES)
    assert ei.value.problems[0].location == type(ei.value.problems[0].location)(str(bad), _line(GOOD, 'rr:column "name"'))


def test_datatype_mismatch_says_what_the_column_takes() -> None:
    """``rr:datatype xsd:integer`` on a double column: the message names the datatypes a double column takes
    (not the column types xsd:integer takes, as if they were the fix)."""
    body = GOOD.replace('rr:column "value" ; rr:datatype xsd:double', 'rr:column "value" ; rr:datatype xsd:integer')
    (p,) = [p for p in _problems(body) if p.code == "datatype_mismatch"]
    takes = p.message.split("a double column takes rr:datatype ")[1].split(" (")[0].split(", ")
    assert "xsd:double" in takes and "xsd:integer" not in takes, p.message


def test_a_graph_map_is_reported_as_not_used() -> None:
    """obda's named graphs are the streams' timestamps: a graph map was accepted and silently ignored."""
    body = GOOD.replace('rr:subjectMap [ rr:template "http://example.org/sensor/{id}" ;',
                        'rr:subjectMap [ rr:graphMap [ rr:constant <http://example.org/g> ] ;\n'
                        '        rr:template "http://example.org/sensor/{id}" ;')
    p = _only(_problems(body), "graph_map_ignored")
    assert p.severity == "warning" and "GRAPH ?t" in p.message and p.location.line is not None
    default = body.replace("<http://example.org/g>", "rr:defaultGraph")
    assert not [p for p in _problems(default) if p.code == "graph_map_ignored"]
