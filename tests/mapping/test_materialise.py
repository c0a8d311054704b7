"""The materialiser beyond the W3C suite: time graphs, duckdb, joins, canonical forms, IRI-safe encoding."""

from __future__ import annotations

import datetime as dt
import sqlite3
import textwrap
from decimal import Decimal
from urllib.parse import unquote

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef
from rdflib.namespace import RDF, XSD

from obda.errors import MappingError
from obda.mapping import graph_time, materialise, parse_mapping_text, time_graph_iri
from obda.mapping.rdf_terms import canonical_decimal, canonical_double, iri_safe, natural_form
from obda.model.sources import Sources

EX = "http://example.org/"
PREFIXES = """\
@prefix rr: <http://www.w3.org/ns/r2rml#> .
@prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""

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
            columns: {id: integer, kind: string}
        """
    )
)

MAPPING = PREFIXES + textwrap.dedent(
    """\
    ex:SensorMap rr:logicalTable [ rr:tableName "sensor" ] ;
        rr:subjectMap [ rr:template "http://example.org/sensor/{id}" ; rr:class ex:Sensor ] ;
        rr:predicateObjectMap [ rr:predicate ex:kind ; rr:objectMap [ rr:column "kind" ] ] .

    ex:MeasMap rr:logicalTable [ rr:sqlQuery "SELECT sensor_id, value, ts FROM measurement WHERE value > 10" ] ;
        rr:subjectMap [ rr:template "http://example.org/sensor/{sensor_id}" ; rr:class ex:Hot ] ;
        rr:predicateObjectMap [ rr:predicate ex:value ; rr:objectMap [ rr:column "value" ] ] ;
        rr:predicateObjectMap [ rr:predicate ex:of ;
            rr:objectMap [ rr:parentTriplesMap ex:SensorMap ; rr:joinCondition [ rr:child "sensor_id" ; rr:parent "id" ] ] ] .
    """
)


def _fill(con) -> None:
    con.execute("CREATE TABLE sensor (id INTEGER, kind VARCHAR)")
    con.execute("CREATE TABLE measurement (sensor_id INTEGER, value DOUBLE, ts TIMESTAMP)")
    con.execute("INSERT INTO sensor VALUES (1, 'temp'), (2, NULL)")
    con.execute(
        "INSERT INTO measurement VALUES (1, 12.5, '2024-01-01 10:00:00'), (2, 5.0, '2024-01-01 10:00:00'), "
        "(2, 30.0, '2024-01-01 10:00:05'), (3, 11.0, NULL)"
    )


def _check_time_graphs(ds) -> None:
    s1, s2 = URIRef(EX + "sensor/1"), URIRef(EX + "sensor/2")
    default = set(ds.default_graph)
    assert default == {
        (s1, RDF.type, URIRef(EX + "Sensor")),
        (s2, RDF.type, URIRef(EX + "Sensor")),
        (s1, URIRef(EX + "kind"), Literal("temp")),  # sensor 2: NULL kind gives no triple
    }
    t0 = time_graph_iri("2024-01-01 10:00:00")
    t5 = time_graph_iri(dt.datetime(2024, 1, 1, 10, 0, 5))
    assert str(t0) == "urn:obda:time:2024-01-01T10:00:00"
    g0, g5 = set(ds.graph(t0)), set(ds.graph(t5))
    assert g0 == {
        (s1, RDF.type, URIRef(EX + "Hot")),
        (s1, URIRef(EX + "value"), Literal("1.25E1", datatype=XSD.double, normalize=False)),
        (s1, URIRef(EX + "of"), s1),
    }
    assert g5 == {
        (s2, RDF.type, URIRef(EX + "Hot")),
        (s2, URIRef(EX + "value"), Literal("3.0E1", datatype=XSD.double, normalize=False)),
        (s2, URIRef(EX + "of"), s2),
    }
    names = {str(g.identifier) for g in ds.graphs() if len(g)}
    assert names == {str(ds.default_graph.identifier), str(t0), str(t5)}  # NULL timestamp: no graph
    assert graph_time(t5) == dt.datetime(2024, 1, 1, 10, 0, 5)


def test_time_graphs_sqlite() -> None:
    con = sqlite3.connect(":memory:")
    _fill(con)
    ds = materialise(parse_mapping_text(MAPPING), con, sources=SOURCES)
    _check_time_graphs(ds)


def test_time_graphs_duckdb() -> None:
    con = duckdb.connect()
    _fill(con)
    ds = materialise(parse_mapping_text(MAPPING), con, sources=SOURCES, dialect="duckdb")
    _check_time_graphs(ds)


def test_without_sources_everything_is_static() -> None:
    con = sqlite3.connect(":memory:")
    _fill(con)
    ds = materialise(parse_mapping_text(MAPPING), con)
    assert len([g for g in ds.graphs() if len(g)]) == 1
    assert len(ds.default_graph) == 3 + 8  # incl. sensor 3 (NULL timestamp is just a value here)


def test_stream_query_without_timestamp_fails() -> None:
    con = sqlite3.connect(":memory:")
    _fill(con)
    text = MAPPING.replace("SELECT sensor_id, value, ts FROM", "SELECT sensor_id, value FROM")
    with pytest.raises(MappingError, match="does not return the timestamp column 'ts'") as ei:
        materialise(parse_mapping_text(text, file="m.ttl"), con, sources=SOURCES)
    assert ei.value.location.line == 8


def test_time_graph_iri_roundtrip_and_forms() -> None:
    assert str(time_graph_iri(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))) == "urn:obda:time:2024-01-01T00:00:00Z"
    assert str(time_graph_iri(dt.date(2024, 3, 1))) == "urn:obda:time:2024-03-01T00:00:00"
    assert str(time_graph_iri("2024-01-01T10:00:00.250000")) == "urn:obda:time:2024-01-01T10:00:00.250000"
    with pytest.raises(ValueError):
        graph_time("http://example.org/g")


@given(st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)))
def test_time_graph_roundtrip(ts: dt.datetime) -> None:
    assert graph_time(time_graph_iri(ts)) == ts


def test_ref_object_map_without_join_condition() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE a (x INTEGER, y INTEGER)")
    con.execute("INSERT INTO a VALUES (1, 10), (2, 20)")
    text = PREFIXES + textwrap.dedent(
        """\
        ex:A rr:logicalTable [ rr:tableName "a" ] ; rr:subjectMap [ rr:template "http://e/a/{x}" ] ;
            rr:predicateObjectMap [ rr:predicate ex:same ; rr:objectMap [ rr:parentTriplesMap ex:A2 ] ] .
        ex:A2 rr:logicalTable [ rr:tableName "a" ] ; rr:subjectMap [ rr:template "http://e/y/{y}" ] .
        """
    )
    ds = materialise(parse_mapping_text(text), con)
    same = {(str(s), str(o)) for s, o in ds.default_graph.subject_objects(URIRef(EX + "same"))}
    assert same == {("http://e/a/1", "http://e/y/10"), ("http://e/a/2", "http://e/y/20")}
    # different logical tables need a join condition (R2RML §8)
    other = text.replace('ex:A2 rr:logicalTable [ rr:tableName "a" ]', 'ex:A2 rr:logicalTable [ rr:tableName "b" ]')
    with pytest.raises(MappingError, match="no rr:joinCondition") as ei:
        parse_mapping_text(other, file="m.ttl")
    assert ei.value.location.line == 5


def test_blank_nodes_are_shared_per_value_and_graph_maps() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE p (name VARCHAR, city VARCHAR)")
    con.execute("INSERT INTO p VALUES ('ann', 'Oslo'), ('bob', 'Oslo')")
    text = PREFIXES + textwrap.dedent(
        """\
        ex:P rr:logicalTable [ rr:tableName "p" ] ;
            rr:subjectMap [ rr:template "http://e/{name}" ; rr:graphMap [ rr:template "http://e/g/{city}" ] ] ;
            rr:predicateObjectMap [ rr:predicate ex:city ; rr:graph rr:defaultGraph ;
                rr:objectMap [ rr:template "city_{city}" ; rr:termType rr:BlankNode ] ] ;
            rr:predicateObjectMap [ rr:predicate ex:label ;
                rr:objectMap [ rr:template "{name} in {city}" ; rr:termType rr:Literal ; rr:language "en" ] ] .
        """
    )
    ds = materialise(parse_mapping_text(text), con)
    oslo = ds.graph(URIRef("http://e/g/Oslo"))
    cities = set(ds.default_graph.objects(None, URIRef(EX + "city")))
    assert len(cities) == 1 and isinstance(next(iter(cities)), BNode)
    assert set(oslo.objects(None, URIRef(EX + "city"))) == cities
    assert Literal("ann in Oslo", lang="en") in set(oslo.objects(None, URIRef(EX + "label")))
    # ex:label has no rr:defaultGraph: only in the subject's graph
    assert not set(ds.default_graph.objects(None, URIRef(EX + "label")))


def test_datatype_override_and_natural_forms_in_templates() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (id INTEGER, f FLOAT, d DATE, b BOOLEAN, s VARCHAR)")
    con.execute("INSERT INTO t VALUES (1, 30, '2020-02-01', 1, 'a b/c')")
    text = PREFIXES + textwrap.dedent(
        """\
        ex:T rr:logicalTable [ rr:tableName "t" ] ; rr:subjectMap [ rr:template "http://e/{f}/{s}" ] ;
            rr:predicateObjectMap [ rr:predicate ex:id ; rr:objectMap [ rr:column "id" ; rr:datatype xsd:string ] ] ;
            rr:predicateObjectMap [ rr:predicate ex:d ; rr:objectMap [ rr:column "d" ] ] ;
            rr:predicateObjectMap [ rr:predicate ex:b ; rr:objectMap [ rr:column "b" ] ] .
        """
    )
    ds = materialise(parse_mapping_text(text), con)
    s = URIRef("http://e/3.0E1/a%20b%2Fc")
    g = ds.default_graph
    assert set(g.objects(s, URIRef(EX + "id"))) == {Literal("1", datatype=XSD.string)}
    assert set(g.objects(s, URIRef(EX + "d"))) == {Literal("2020-02-01", datatype=XSD.date, normalize=False)}
    assert set(g.objects(s, URIRef(EX + "b"))) == {Literal("true", datatype=XSD.boolean, normalize=False)}


def test_missing_column_is_an_error_with_line() -> None:
    con = sqlite3.connect(":memory:")
    _fill(con)
    text = MAPPING.replace('rr:column "kind"', 'rr:column "kinds"')
    with pytest.raises(MappingError, match="'kinds' is not a column") as ei:
        materialise(parse_mapping_text(text, file="m.ttl"), con)
    assert ei.value.location.line == 6


@pytest.mark.parametrize(
    ("value", "lex"),
    [(80.25, "8.025E1"), (30.0, "3.0E1"), (1.7, "1.7E0"), (0.0, "0.0E0"), (-0.00125, "-1.25E-3"), (1e300, "1.0E300")],
)
def test_canonical_double(value: float, lex: str) -> None:
    assert canonical_double(value) == lex


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_canonical_double_is_exact(v: float) -> None:
    assert float(canonical_double(v)) == v


@pytest.mark.parametrize(("value", "lex"), [(Decimal("3"), "3.0"), (Decimal("0.50"), "0.5"), (Decimal("-12.340"), "-12.34")])
def test_canonical_decimal(value: Decimal, lex: str) -> None:
    assert canonical_decimal(value) == lex


def test_natural_forms() -> None:
    assert natural_form(5, "INTEGER") == ("5", str(XSD.integer))
    assert natural_form(0, "BOOLEAN") == ("false", str(XSD.boolean))
    assert natural_form("2009-10-10 12:12:22", "TIMESTAMP") == ("2009-10-10T12:12:22", str(XSD.dateTime))
    assert natural_form(b"\x89P", "VARBINARY(200)") == ("8950", str(XSD.hexBinary))
    assert natural_form("abc", "VARCHAR(5)") == ("abc", None)
    assert natural_form("x", "INTEGER") == ("x", None)  # SQLite's loose typing: not an integer
    assert natural_form(Decimal("1.50"), None) == ("1.5", str(XSD.decimal))


@given(st.text())
def test_iri_safe_roundtrip_and_alphabet(s: str) -> None:
    enc = iri_safe(s)
    assert unquote(enc, errors="surrogatepass") == s or any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    assert not any(c in enc for c in " /?#[]@!$&'()*+,;=:<>\"{}|\\^`")


def test_iri_safe_examples() -> None:
    assert iri_safe("Venus Williams") == "Venus%20Williams"
    assert iri_safe("path/../Danny") == "path%2F..%2FDanny"
    assert iri_safe("ü~-._") == "ü~-._"
