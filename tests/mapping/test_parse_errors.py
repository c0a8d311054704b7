"""Mapping files that cannot be read or parsed: located MappingErrors that keep the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from obda.errors import MappingError
from obda.mapping import load_mapping
from obda.mapping.parse import parse_mapping_text

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "@prefix rr: <http://www.w3.org/ns/r2rml#> .\n"


def _error(text: str) -> MappingError:
    with pytest.raises(MappingError) as ei:
        parse_mapping_text(text, "m.ttl")
    return ei.value


def test_non_utf8_mapping_file_is_located_at_the_bad_byte(tmp_path):
    m = tmp_path / "m.ttl"
    m.write_bytes((ROOT / "mappings" / "turbine.r2rml.ttl").read_bytes() + "# café\n".encode("latin-1"))
    lines = m.read_bytes().count(b"\n")
    with pytest.raises(MappingError) as ei:
        load_mapping([m])
    e = ei.value
    assert "not UTF-8" in e.message and "0xe9" in e.message
    assert (e.location.file, e.location.line, e.location.column) == (str(m), lines, 6)


def test_missing_dot_keeps_rdflibs_reason_and_line():
    e = _error(PREFIX + '\n<#TM> a rr:TriplesMap ;\n  rr:logicalTable [ rr:tableName "t" ]\n'
                        '  rr:subjectMap [ rr:template "x{a}" ] .\n')
    assert "expected '.' or '}' or ']' at end of statement" in e.message
    assert "rr:subjectMap" in e.message  # where it went wrong
    assert e.location.line == 5 and str(e).startswith("m.ttl:5: ")


def test_unbound_prefix_is_named():
    e = _error(PREFIX + "<#TM> a foo:Bar .\n")
    assert 'Prefix "foo:" not bound' in e.message and e.location.line == 2


def test_unterminated_string_and_unfinished_statement():
    e = _error(PREFIX + '<#TM> rr:logicalTable [ rr:tableName "t ] .\n')
    assert "newline found in string literal" in e.message and e.location.line == 2
    e = _error(PREFIX + '<#TM> a rr:TriplesMap ;\n  rr:logicalTable [ rr:tableName "t" ]')
    assert "ends inside a statement" in e.message and e.location.line == 3
    assert "string index out of range" not in e.message


def test_position_counts_characters_after_non_ascii_text():
    e = _error(PREFIX + '# é comment\n<#TM> a rr:TriplesMap ; rr:x "é" ;; ) .\n')
    assert e.location.line == 3 and "near '; ) .'" in e.message
