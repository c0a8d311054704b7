"""Every crash the fuzzing found, with its exact input (``findings.json``): now a typed, located error.

Each entry: the parser, how it was found (the fuzz run, or probing next to it), the exact input, a piece of
the message the error must carry and the line it must point at.  Before the fixes these raised a
``RecursionError`` (PyYAML's composer, rdflib's Turtle parser: nesting thousands deep), or an obda error that
said nowhere where (a character YAML refuses, an N3 variable or a lone surrogate in a mapping, a prefix of
astral-plane letters in SPARQL), or accepted a YAML node's repr as a table's name or location.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from obda.errors import MappingError, QuerySyntaxError, SourcesError
from obda.mapping.parse import parse_mapping_text
from obda.model.sources_file import parse_sources
from obda.query.parser import parse_query

FINDINGS = json.loads((Path(__file__).parent / "findings.json").read_text(encoding="utf-8"))
PARSERS = {"sources": (parse_sources, SourcesError), "r2rml": (parse_mapping_text, MappingError),
           "sparql": (parse_query, QuerySyntaxError)}


@pytest.mark.parametrize("finding", FINDINGS, ids=[f["name"] for f in FINDINGS])
def test_a_finding_is_a_located_typed_error(finding):
    parse, error = PARSERS[finding["parser"]]
    logging.getLogger("rdflib").disabled = True
    try:
        with pytest.raises(error) as caught:
            parse(finding["input"], file="input")
    finally:
        logging.getLogger("rdflib").disabled = False
    e = caught.value
    assert finding["message"] in e.message
    assert (e.location.file, e.location.line) == ("input", finding["line"])
    json.dumps(e.to_dict())


def test_nesting_within_the_limits_still_parses():
    """The limits refuse only what the parsers cannot read: a sources file and a mapping nested as deep as the
    limit allows (64 and 32 levels) parse."""
    deep = "{a: " * 61 + "1" + "}" * 61
    with pytest.raises(SourcesError) as caught:  # 63 levels: read, then refused for what it says, not its depth
        parse_sources(f"tables: {{t: {{kind: static, columns: {{a: integer}}, options: {deep}}}}}")
    assert "nested" not in caught.value.message
    mapping = ("@prefix rr: <http://www.w3.org/ns/r2rml#> .\n<#m> rr:logicalTable [ rr:tableName \"t\" ] ;\n"
               "  rr:subjectMap [ rr:template \"x/{a}\" ] ;\n  rr:predicateObjectMap [ rr:predicate <p> ; "
               "rr:objectMap [ rr:column \"a\" ] ; <q> " + "( " * 28 + ")" * 28 + " ] .\n")
    assert len(parse_mapping_text(mapping).triples_maps) == 1
