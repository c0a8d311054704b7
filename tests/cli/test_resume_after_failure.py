"""`obda run --checkpoint` after a failure (issue 26, item 5): the run stops with a typed, actionable message and no
traceback; the same command again resumes from the last committed micro-batch, and the output is an
uninterrupted run's, line for line.  A checkpoint that cannot be used is refused, without the resume hint."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obda.cli import app
from obda.datagen.writer import generate
from obda.execution import checkpoint

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

HOT = """PREFIX : <http://example.org/turbine#>
SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 60) }
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "demo"
    shutil.copytree(ROOT / "demo", proj, ignore=shutil.ignore_patterns("data"))
    for sub in ("ontologies", "mappings"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    generate(proj, seed=9, rows=200, files=5)  # one file per micro-batch (--max-files-per-batch 1)
    return proj


def command(project: Path, tmp_path: Path, out: str, ck: str | None) -> list[str]:
    q = tmp_path / "hot.rq"
    q.write_text(HOT)
    args = ["run", str(q), "--project", str(project), "--until-exhausted", "--backend", "local",
            "--max-files-per-batch", "1", "--output", str(tmp_path / out)]
    return args + (["--checkpoint", str(tmp_path / ck)] if ck else [])


def test_a_run_that_failed_resumes_from_its_checkpoint(project, tmp_path, monkeypatch):
    full = runner.invoke(app, command(project, tmp_path, "full.jsonl", None))
    assert full.exit_code == 0, full.output
    expected = (tmp_path / "full.jsonl").read_text()
    assert expected.count("\n") > 10

    # the disk fills up while the third micro-batch's checkpoint is written: its answers are in the output
    # file already (flushed), the checkpoint still records the second one
    real, calls = checkpoint.dump, []

    def full_disk(state, path):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(state, path)

    monkeypatch.setattr(checkpoint, "dump", full_disk)
    failed = runner.invoke(app, command(project, tmp_path, "out.jsonl", "ck"))
    assert failed.exit_code == 2, failed.output
    message = " ".join(failed.output.split())
    assert "Traceback" not in failed.output and isinstance(failed.exception, (SystemExit, type(None)))  # typed
    assert "error: the query failed:" in message and "No space left on device" in message
    assert "state.pkl" in message and "run the same command again (same --checkpoint): it resumes" in message
    written = (tmp_path / "out.jsonl").read_text()
    assert written != expected and expected.startswith(written)  # stopped half-way, answers of batch 3 included

    monkeypatch.setattr(checkpoint, "dump", real)  # the cause is fixed
    resumed = runner.invoke(app, command(project, tmp_path, "out.jsonl", "ck"))
    assert resumed.exit_code == 0, resumed.output
    assert (tmp_path / "out.jsonl").read_text() == expected  # every answer once, in the same order


def test_a_run_without_checkpoint_that_failed_says_it_starts_again(project, tmp_path, monkeypatch):
    def broken(state, path):
        raise RuntimeError("a bug")

    monkeypatch.setattr(checkpoint, "dump", broken)
    r = runner.invoke(app, command(project, tmp_path, "out.jsonl", None))
    assert r.exit_code == 2 and "Traceback" not in r.output, r.exception
    message = " ".join(r.output.split())
    assert "internal error (RuntimeError: a bug)" in message
    assert "a new run starts from the first file again (with --checkpoint it would resume" in message


def test_a_checkpoint_that_cannot_be_used_is_refused_without_the_resume_hint(project, tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "state.pkl").write_bytes(b"not a checkpoint")
    r = runner.invoke(app, command(project, tmp_path, "out.jsonl", "ck"))
    assert r.exit_code == 2 and "Traceback" not in r.output
    message = " ".join(r.output.split())
    assert "cannot be read" in message and "use a fresh checkpoint directory" in message
    assert "resumes" not in message
