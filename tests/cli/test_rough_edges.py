"""Rough edges of the command line, one test each: non-UTF-8 files, redirected SQL, --help examples that run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sqlglot
from typer.testing import CliRunner

from obda.cli import app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"
runner = CliRunner()


def test_non_utf8_query_file_is_a_located_error_exit_2(tmp_path):
    q = tmp_path / "latin1.rq"
    q.write_bytes("PREFIX : <http://example.org/turbine#>\n# café\nSELECT ?s WHERE { ?s a :Sensor }\n".encode("latin-1"))
    r = subprocess.run([sys.executable, "-m", "obda.cli", "compile", str(q), "--project", str(DEMO)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and f"{q}:2:6:" in r.stderr and "not UTF-8" in r.stderr


def test_non_utf8_sources_file_is_a_located_error(tmp_path):
    ws = tmp_path / "p"
    ws.mkdir()
    (ws / "project.yaml").write_text(
        "name: p\nontology: [%s]\nmappings: [%s]\nsources: sources.yaml\n"
        % (ROOT / "ontologies" / "turbine.ttl", ROOT / "mappings" / "turbine.r2rml.ttl"))
    (ws / "sources.yaml").write_bytes((DEMO / "sources.yaml").read_bytes() + "# ü\n".encode("latin-1"))
    r = subprocess.run([sys.executable, "-m", "obda.cli", "validate", "--project", str(ws)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr
    assert "sources.yaml:" in r.stderr and "not UTF-8" in r.stderr


def test_compile_redirected_to_a_file_is_valid_sql(tmp_path):
    """`obda compile q.rq > q.sql`: comment lines are not wrapped, however long (rich used to wrap at 80)."""
    out = tmp_path / "q.sql"
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-m", "obda.cli", "compile", "demo/queries/hot_readings.rq",
                            "--project", "demo", "--dialect", "duckdb"], stdout=f, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env={"COLUMNS": "60", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert any(len(line) > 60 for line in text.splitlines() if line.startswith("--"))
    assert all(line.startswith("--") or not line.strip() or not line.lstrip().startswith("←") for line in text.splitlines())
    statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    assert len(statements) == 1
    import duckdb  # the SQL runs: DuckDB plans it over empty tables of the demo schema
    con = duckdb.connect()
    con.execute("CREATE TABLE measurement (sensor_id BIGINT, value BIGINT, ts TIMESTAMP)")
    con.execute(text)


def _examples(cmd: str) -> list[str]:
    r = runner.invoke(app, [*cmd.split(), "--help"], env={"COLUMNS": "300"})
    return [line.strip().split("Example: ", 1)[-1] for line in r.stdout.splitlines()
            if re.match(r"^\s*│?\s*(Example: )?obda ", line.replace("│", " "))]


@pytest.mark.parametrize("cmd", ["compile", "analyze", "run", "validate", "generate", "catalog check",
                                 "users add", "users list", "users remove"])
def test_help_examples_name_files_that_exist_and_run(cmd, tmp_path):
    examples = [e.strip(" │") for e in _examples(cmd)]
    assert examples, f"no example in obda {cmd} --help"
    for ex in examples:
        args = shlex.split(ex)[1:]
        for a in args:
            if re.search(r"\.(rq|yaml|ttl)$", a) or a in ("demo",):
                assert (ROOT / a).exists(), f"{ex}: {a} does not exist"
        if cmd in ("compile", "analyze", "validate", "catalog check") or cmd.startswith("users"):
            # files the example writes (--output, --users-file) go to tmp_path, not into the repository
            args = [str(tmp_path / a) if prev in ("--output", "--users-file") else a
                    for prev, a in zip([None] + args, args)]
            if cmd in ("users list", "users remove"):  # the user the examples add
                add = ["users", "add", "alice", "--role", "reader", "--users-file", str(tmp_path / "state/users.json")]
                subprocess.run([sys.executable, "-m", "obda.cli", *add], capture_output=True, text=True, cwd=ROOT, check=True)
            r = subprocess.run([sys.executable, "-m", "obda.cli", *args], capture_output=True, text=True, cwd=ROOT)
            assert r.returncode == 0, f"{ex}\n{r.stderr}"


def _demo_copy(tmp_path: Path, extra_axiom: str = "") -> Path:
    """The demo project in ``tmp_path/p`` with its own copy of the ontology (plus ``extra_axiom``)."""
    ws = tmp_path / "p"
    ws.mkdir(parents=True)
    (ws / "turbine.ttl").write_text((ROOT / "ontologies" / "turbine.ttl").read_text() + extra_axiom)
    (ws / "sources.yaml").write_text((DEMO / "sources.yaml").read_text())
    (ws / "project.yaml").write_text(f"name: p\nontology: [turbine.ttl]\nmappings: [{ROOT / 'mappings' / 'turbine.r2rml.ttl'}]"
                                     "\nsources: sources.yaml\n")
    return ws


def test_validate_of_a_missing_project_folder_is_bad_input_exit_2(tmp_path):
    for fmt in ("text", "json"):
        r = runner.invoke(app, ["validate", "--project", str(tmp_path / "nope"), "--format", fmt])
        assert r.exit_code == 2 and "does not exist" in r.output, r.output


def test_validate_warns_of_an_undeclared_term_in_an_axiom_and_of_missing_locations(tmp_path):
    """A typo in an axiom's class (`rdfs:domain :WindSpeedReadin`) and a stream folder that does not exist are
    warnings with file and line (exit 0: the project runs, but not as meant)."""
    import json

    ws = _demo_copy(tmp_path, "\n:hasValue rdfs:domain :WindSpeedReadin .\n")
    line = (ws / "turbine.ttl").read_text().splitlines().index(":hasValue rdfs:domain :WindSpeedReadin .") + 1
    (ws / "data" / "measurement").mkdir(parents=True)  # the other tables' folders are missing
    r = runner.invoke(app, ["validate", "--project", str(ws), "--format", "json"])
    assert r.exit_code == 0, r.output
    problems = json.loads(r.stdout)["problems"]
    typo = [p for p in problems if p["code"] == "undeclared_term"]
    assert len(typo) == 1 and "WindSpeedReadin" in typo[0]["message"] and typo[0]["severity"] == "warning"
    assert typo[0]["location"]["file"].endswith("turbine.ttl") and typo[0]["location"]["line"] == line
    missing = {p["message"].split("'")[1] for p in problems if p["code"] == "location_missing"}
    assert "measurement" not in missing and {"power", "alarm", "sensor"} <= missing
    assert all(p["location"]["file"].endswith("sources.yaml") for p in problems if p["code"] == "location_missing")
    r = runner.invoke(app, ["validate", "--project", str(_demo_copy(tmp_path / "clean"))])
    assert r.exit_code == 0 and "undeclared" not in r.output


def test_output_to_dev_null_or_a_pipe_with_a_checkpoint_runs(tmp_path):
    """`--output /dev/null --checkpoint ck` (no fsync of a device), and a named pipe read by another process:
    the answers stream through; a second run resumes from the checkpoint without truncating the target."""
    import os
    import threading

    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from apikit import make_workspace

    ws, _ = make_workspace(tmp_path / "ws", blocks=2)
    q = tmp_path / "hot.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\n"
                 "SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 0) }\n")
    base = ["run", str(q), "--project", str(ws), "--until-exhausted", "--backend", "local"]
    for _ in range(2):  # the second run resumes from the checkpoint
        r = runner.invoke(app, base + ["--output", os.devnull, "--checkpoint", str(tmp_path / "ck")])
        assert r.exit_code == 0, r.output
    fifo = tmp_path / "answers.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(open(fifo, encoding="utf-8").read().splitlines()), daemon=True)
    reader.start()
    r = runner.invoke(app, base + ["--output", str(fifo), "--checkpoint", str(tmp_path / "ck2")])
    reader.join(timeout=60)
    assert r.exit_code == 0, r.output
    assert got and all('"emitted_at"' in line for line in got)
    r = runner.invoke(app, base + ["--output", str(tmp_path / "a.jsonl")])
    assert r.exit_code == 0 and len((tmp_path / "a.jsonl").read_text().splitlines()) == len(got)


def test_a_run_without_a_checkpoint_writes_its_answer_file_afresh(tmp_path):
    """`obda run … --output a.jsonl` twice: the file holds one run's answers, not two; with a checkpoint the second
    run continues the first (nothing new: the file as it was), and a checkpoint folder without state (a run that
    stopped before its first checkpoint) starts the file afresh too."""
    sys.path.insert(0, str(ROOT / "tests" / "api"))
    from apikit import make_workspace

    ws, _ = make_workspace(tmp_path / "ws", blocks=2)
    q = tmp_path / "hot.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\n"
                 "SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 0) }\n")
    out = tmp_path / "a.jsonl"
    base = ["run", str(q), "--project", str(ws), "--until-exhausted", "--backend", "local", "--output", str(out)]
    texts = []
    for extra in ([], [], ["--checkpoint", str(tmp_path / "ck")], ["--checkpoint", str(tmp_path / "ck")]):
        r = runner.invoke(app, base + extra)
        assert r.exit_code == 0, r.output
        texts.append(out.read_text())
    assert texts[0] and texts == [texts[0]] * 4
    (tmp_path / "empty").mkdir()
    out.write_text(texts[0] * 2)
    r = runner.invoke(app, base + ["--checkpoint", str(tmp_path / "empty")])
    assert r.exit_code == 0 and out.read_text() == texts[0], r.output
