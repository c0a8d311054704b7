"""Project files the command line cannot read, and lenient-profile warnings: located messages, no Python noise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"
QUERY = DEMO / "queries" / "hot_readings.rq"


def _project(tmp_path: Path, *, ontology: Path | None = None, mapping: Path | None = None, profile: str = "strict") -> Path:
    ws = tmp_path / "p"
    ws.mkdir(exist_ok=True)
    (ws / "project.yaml").write_text(
        f"name: p\nontology: [{ontology or ROOT / 'ontologies' / 'turbine.ttl'}]\n"
        f"mappings: [{mapping or ROOT / 'mappings' / 'turbine.r2rml.ttl'}]\n"
        f"sources: {DEMO / 'sources.yaml'}\nprofile: {profile}\n")
    return ws


def _obda(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "obda.cli", *args], capture_output=True, text=True, cwd=ROOT)


def _latin1_copy(src: Path, dst: Path) -> tuple[int, int]:
    """``src`` with a Latin-1 comment line appended; returns the line and column of the bad byte."""
    data = src.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    dst.write_bytes(data + "# café\n".encode("latin-1"))
    return data.count(b"\n") + 1, 6


@pytest.mark.parametrize("kind", ["mapping", "ontology"])
def test_non_utf8_mapping_or_ontology_file_is_a_located_error_exit_2(tmp_path, kind):
    src = ROOT / ("mappings/turbine.r2rml.ttl" if kind == "mapping" else "ontologies/turbine.ttl")
    bad = tmp_path / f"{kind}.ttl"
    line, column = _latin1_copy(src, bad)
    ws = _project(tmp_path, **{kind: bad})
    r = _obda("compile", str(QUERY), "--project", str(ws))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"error: {bad}:{line}:{column}: {kind} file is not UTF-8 text: byte 0xe9" in r.stderr
    r = _obda("compile", str(QUERY), "--project", str(ws), "--format", "json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    error = json.loads(r.stdout)["error"]
    assert error["location"] == {"file": str(bad), "line": line, "column": column}
    assert "not UTF-8" in error["message"] and error["code"] in ("mapping_error", "ontology_error")
    r = _obda("validate", "--project", str(ws))  # validate reports it as a problem (exit 1), no traceback either
    assert r.returncode == 1 and "Traceback" not in r.stderr and f"{bad}:{line}:{column}:" in r.stderr


def test_mapping_turtle_error_keeps_rdflibs_reason(tmp_path):
    bad = tmp_path / "m.ttl"
    text = (ROOT / "mappings" / "turbine.r2rml.ttl").read_text()
    bad.write_text(text + '\n<#Broken> a rr:TriplesMap ;\n  rr:logicalTable [ rr:tableName "x" ]\n'
                          '  rr:subjectMap [ rr:template "x{a}" ] .\n')
    line = text.count("\n") + 4
    r = _obda("compile", str(QUERY), "--project", str(_project(tmp_path, mapping=bad)))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:{line}: R2RML file is not valid Turtle: expected '.' or '}}' or ']' at end of statement" in r.stderr


LENIENT_AXIOM = ("\n:Site rdfs:subClassOf [ a owl:Class ; owl:unionOf ( :Asset :Turbine ) ] .\n")


@pytest.mark.parametrize("cmd", ["compile", "analyze", "validate"])
def test_lenient_profile_warning_is_printed_once_as_an_obda_message(tmp_path, cmd):
    onto = tmp_path / "onto.ttl"
    onto.write_text((ROOT / "ontologies" / "turbine.ttl").read_text() + LENIENT_AXIOM)
    ws = _project(tmp_path, ontology=onto, profile="lenient")
    args = ["validate", "--project", str(ws)] if cmd == "validate" else [cmd, str(QUERY), "--project", str(ws)]
    r = _obda(*args)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    mentions = [ln for ln in lines if "ObjectUnionOf" in ln]
    assert len(mentions) == 1, r.stderr
    assert mentions[0].startswith(f"{onto}:"), mentions[0]
    assert ": warning: [owl2ql_profile] ignored axiom SubClassOf(:Site ObjectUnionOf(:Asset :Turbine))" in mentions[0]
    assert "ProfileWarning" not in r.stderr and "warnings.warn" not in r.stderr
    assert not any(ln.startswith("  ontology = ") for ln in lines)  # no source line echoed by the warnings module


def test_lenient_profile_warning_with_json_output_keeps_stdout_json(tmp_path):
    onto = tmp_path / "onto.ttl"
    onto.write_text((ROOT / "ontologies" / "turbine.ttl").read_text() + LENIENT_AXIOM)
    ws = _project(tmp_path, ontology=onto, profile="lenient")
    r = _obda("compile", str(QUERY), "--project", str(ws), "--format", "json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)
    assert r.stderr.count("ignored axiom SubClassOf(:Site ObjectUnionOf") == 1 and "ProfileWarning" not in r.stderr
