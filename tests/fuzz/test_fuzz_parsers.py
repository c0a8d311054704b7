"""Property-based fuzzing of obda's front ends: the SPARQL parser, the R2RML parser, the sources file parser.

The property: whatever the text, a parser returns its result or raises one of obda's typed errors
(:class:`obda.errors.ObdaError`), which renders as the CLI and the service render it (``str``, ``to_dict`` as
JSON) and says where (a line) for every error of the text itself.  Never a ``RecursionError``, a
``KeyError`` or any other traceback.  A sources file that parses names its tables and columns by the text
written in it (never the repr of a YAML node).

Inputs are the repository's own queries, mappings and sources files with a few token edits
(:mod:`fuzzkit`): 500 per parser in the default run, 10,000 per parser in the slow run (``-m slow``),
with a fixed seed so a run is repeatable.  Each crash found is a regression test in ``test_fuzz_findings.py``.
"""

from __future__ import annotations

import json
import logging
import warnings

import pytest
from hypothesis import HealthCheck, given, seed, settings

from fuzzkit import mapping_seeds, mutated, sources_seeds, sparql_seeds
from obda.errors import ObdaError
from obda.mapping.parse import parse_mapping_text
from obda.model.sources import Sources
from obda.model.sources_file import parse_sources
from obda.query.parser import parse_query

RUNS = [pytest.param(500, id="500"), pytest.param(10_000, id="10000", marks=pytest.mark.slow)]


def rendered(e: ObdaError, located: bool = True) -> None:
    """The error renders as the CLI and the service render it, and (``located``) says on which line."""
    assert e.message and str(e)
    json.dumps(e.to_dict())
    if located:
        assert e.location.line is not None and e.location.line >= 1, f"not located: {e}"


def fuzz(parse, seeds, n: int, check=None, located=lambda e: True) -> None:
    @seed(29)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutated(seeds))
    def run(text: str) -> None:
        try:
            result = parse(text)
        except ObdaError as e:
            rendered(e, located(e))
            return
        if check is not None:
            check(result)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("rdflib").disabled = True  # rdflib logs a warning per odd IRI it meets
        try:
            run()
        finally:
            logging.getLogger("rdflib").disabled = False


@pytest.mark.parametrize("n", RUNS)
def test_sparql_parser(n):
    fuzz(parse_query, sparql_seeds(), n)


@pytest.mark.parametrize("n", RUNS)
def test_r2rml_parser(n):
    fuzz(parse_mapping_text, mapping_seeds(), n)


def _names_are_text(sources: Sources) -> None:
    for t in sources.tables:
        texts = [t.name, t.timestamp or "", t.location or "", t.format or "", *(c.name for c in t.columns),
                 *t.key, *(f"{k}={v}" for k, v in t.options.items())]
        assert not any("Node(" in x for x in texts), texts


@pytest.mark.parametrize("n", RUNS)
def test_sources_parser(n):
    fuzz(parse_sources, sources_seeds(), n, check=_names_are_text)
