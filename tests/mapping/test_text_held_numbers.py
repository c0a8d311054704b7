"""A number a string column holds (``rr:datatype xsd:integer`` over a ``string`` column) is not compared or computed
with as text (issue 27's bug hunt): as text, ``9 > 50`` held, ``SUM`` concatenated ("10920060") and ``?v + 1``
failed when run. Refused where the query does so, located, naming the way out; its text and the value itself are
answered. The demo project with its measurement values declared ``string``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from obda.errors import UnsupportedConstructError
from obda.project import Project

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "PREFIX : <http://example.org/turbine#>\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    base = tmp_path_factory.mktemp("text_held")
    for part in ("ontologies", "mappings"):
        shutil.copytree(ROOT / part, base / part)
    (base / "demo").mkdir()
    shutil.copy(ROOT / "demo" / "project.yaml", base / "demo" / "project.yaml")
    sources = (ROOT / "demo" / "sources.yaml").read_text()
    assert "columns: {sensor_id: integer, value: integer, ts: timestamp}" in sources
    (base / "demo" / "sources.yaml").write_text(
        sources.replace("columns: {sensor_id: integer, value: integer, ts: timestamp}",
                        "columns: {sensor_id: integer, value: string, ts: timestamp}"))
    return Project.load(base / "demo")


@pytest.mark.parametrize("query, at", [
    ("SELECT ?m WHERE { GRAPH ?t { ?m :hasValue ?v } FILTER(?v > 90) }", (2, 48)),
    ("SELECT (SUM(?v) AS ?s) WHERE { GRAPH ?t { ?m :hasValue ?v } }", (2, 9)),
    ("SELECT ?m ?w WHERE { GRAPH ?t { ?m :hasValue ?v } BIND(?v + 1 AS ?w) }", (2, 66)),
    ("SELECT ?m ?w WHERE { GRAPH ?t { ?m :hasValue ?v } BIND(ABS(?v) AS ?w) }", (2, 67)),
])
def test_a_number_held_as_text_is_not_compared_or_computed_with(project, query, at):
    with pytest.raises(UnsupportedConstructError, match=r"xsd:integer literal held as text.*declare the column") \
            as info:
        project.compile(PREFIX + query)
    assert (info.value.location.line, info.value.location.column) == at, info.value


def test_its_text_and_the_value_itself_are_answered(project):
    assert project.compile(PREFIX + "SELECT ?m ?v (STR(?v) AS ?s) WHERE { GRAPH ?t { ?m :hasValue ?v } }").members
