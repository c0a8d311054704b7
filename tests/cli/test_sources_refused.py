"""Sources that are real or refused: Kafka and JDBC streams fail `obda validate` with file:line; a stream
location that does not exist is an error at start (`obda run`, the service), a warning with --wait-for-data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obda.cli import app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "api"))
from apikit import make_workspace  # noqa: E402

runner = CliRunner()
HOT = """PREFIX : <http://example.org/turbine#>
SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 90) }
"""


def with_format(ws: Path, table: str, fmt: str) -> int:
    """Give ``table`` the format ``fmt`` in the workspace's sources file; returns the line of the format key."""
    lines = (ws / "sources.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {table}:"))
    at = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("format:"))
    lines[at] = f"    format: {fmt}"
    (ws / "sources.yaml").write_text("\n".join(lines) + "\n")
    return at + 1


@pytest.mark.parametrize("fmt, fragment", [("jdbc", "static tables only")])
def test_jdbc_streams_fail_validate_with_file_and_line(tmp_path, fmt, fragment):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    line = with_format(ws, "measurement", fmt)
    r = runner.invoke(app, ["validate", "--project", str(ws), "--format", "json"])
    assert r.exit_code == 1, r.output
    problems = json.loads(r.stdout)["problems"]
    bad = [p for p in problems if p["severity"] == "error"]
    assert bad and fragment in bad[0]["message"]
    assert bad[0]["location"]["file"].endswith("sources.yaml") and bad[0]["location"]["line"] == line
    # and `obda run` refuses it too (exit 2, located), instead of reading nothing and exiting 0
    q = tmp_path / "hot.rq"
    q.write_text(HOT)
    r = runner.invoke(app, ["run", str(q), "--project", str(ws), "--until-exhausted", "--backend", "local"])
    assert r.exit_code == 2 and f"sources.yaml:{line}" in r.output and fragment in r.output


def test_kafka_static_table_is_refused_too(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    line = with_format(ws, "sensor", "kafka")
    r = runner.invoke(app, ["validate", "--project", str(ws), "--format", "json"])
    assert r.exit_code == 1
    bad = [p for p in json.loads(r.stdout)["problems"] if p["severity"] == "error"]
    assert "format 'kafka' is for streams" in bad[0]["message"] and bad[0]["location"]["line"] == line


def test_missing_stream_folder_is_an_error_at_start(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    (ws / "data" / "measurement").rmdir()  # a fresh clone: no stream folder yet
    q = tmp_path / "hot.rq"
    q.write_text(HOT)
    out = tmp_path / "a.jsonl"
    r = runner.invoke(app, ["run", str(q), "--project", str(ws), "--until-exhausted", "--backend", "local", "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert "sources.yaml:" in r.output and "'measurement'" in r.output and "does not exist" in r.output
    assert "--wait-for-data" in r.output and "Traceback" not in r.output


def test_wait_for_data_makes_it_a_warning(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    (ws / "data" / "measurement").rmdir()
    q = tmp_path / "hot.rq"
    q.write_text(HOT)
    out = tmp_path / "a.jsonl"
    r = runner.invoke(app, ["run", str(q), "--project", str(ws), "--until-exhausted", "--backend", "local",
                            "--wait-for-data", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "warning" in r.output and "'measurement'" in r.output and "does not exist" in r.output


def test_service_refuses_to_start_a_query_over_a_missing_stream_folder(tmp_path):
    from fastapi.testclient import TestClient

    from api import create_app
    from apikit import AUTH, BOUNDED, settings_for

    ws, _ = make_workspace(tmp_path / "ws", blocks=0)
    (ws / "data" / "measurement").rmdir()
    with TestClient(create_app(settings_for(ws))) as c:
        qid = c.post("/v1/queries", json={"name": "h", "query": BOUNDED}, headers=AUTH).json()["id"]
        r = c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        assert r.status_code == 422 and r.json()["code"] == "execution_error"
        assert "'measurement'" in r.json()["detail"] and r.json()["location"]["line"] > 0
        assert c.get(f"/v1/queries/{qid}", headers=AUTH).json()["status"] == "registered"
        (ws / "data" / "measurement").mkdir(parents=True)
        assert c.post(f"/v1/queries/{qid}/start", headers=AUTH).json()["status"] == "running"
