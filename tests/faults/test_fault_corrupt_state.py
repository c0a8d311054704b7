"""Fault: a corrupted or truncated checkpoint, part file or commit file (issue 29, item 4).

A run of `obda run --output-dir D --checkpoint C` committed some micro-batches; new files arrived.  One file of
its saved state is then damaged — truncated, emptied, or one byte changed so that it still parses (the case
that would silently give wrong answers: a changed file name in the checkpoint's consumed files makes a run read
that file again, repeating its answers; a changed digit in a part file is a wrong answer served).  Every case is
a located refusal — a :class:`~obda.errors.CheckpointError` (`obda run`: exit code 2, the message names the
file, no traceback, no resume hint: starting again from that state cannot succeed) — and nothing is written or
served from the damaged state.  The checkpoint carries a SHA-256 of its pickle; each commit file the size,
CRC-32 and line count of its parts and a CRC-32 of itself (obda/execution/checkpoint.py, committed_output.py).
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from faults.faultkit import command, fed
from obda.cli import app
from obda.errors import CheckpointError
from obda.execution.checkpoint import TRAILER_MAGIC
from obda.execution.committed_output import committed_batches, read_committed
from obda.execution.directory_sink import DirectorySink

runner = CliRunner()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(workspace, query, output folder, checkpoint folder) of a run over 8 blocks; 4 more blocks arrived since."""
    tmp = tmp_path_factory.mktemp("saved")
    ws, query, feeder = fed(tmp, blocks=8, seed=5)
    r = runner.invoke(app, command(ws, query, tmp / "out", tmp / "ck")[3:])
    assert r.exit_code == 0, r.output
    assert len(committed_batches(tmp / "out")) >= 4
    for _ in range(4):
        feeder.feed_block()
    return ws, query, tmp / "out", tmp / "ck"


def copy_of(saved, dest: Path) -> tuple[Path, Path]:
    _, _, out, ck = saved
    shutil.copytree(out, dest / "out")
    shutil.copytree(ck, dest / "ck")
    return dest / "out", dest / "ck"


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused_run(saved, out: Path, ck: Path, names: Path) -> str:
    """`obda run` over the damaged state: exit 2, a one-line error naming ``names``, no traceback, nothing written."""
    ws, query, _, _ = saved
    before = listing(out), listing(ck)
    r = runner.invoke(app, command(ws, query, out, ck)[3:])
    text = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit) and "Traceback" not in r.output
    assert "error:" in text and str(names) in text, text
    assert "it resumes" not in text  # a state fault: no resume hint
    assert (listing(out), listing(ck)) == before  # nothing committed, no checkpoint written
    return text


def changed_file_name(data: bytes) -> bytes:
    """The checkpoint with one digit of a consumed file's name changed: still a valid pickle of a state."""
    body = data[: data.index(TRAILER_MAGIC)]
    at = body.index(b"feed-000003.csv")
    altered = body[:at] + b"feed-000093.csv" + body[at + 15:]
    state = pickle.loads(altered)  # it still loads: without a checksum it would be taken for the run's state
    assert any(f.endswith("feed-000093.csv") for fs in state["processed"].values() for f in fs)
    return altered + data[len(body):]


CHECKPOINT_DAMAGE = {
    "truncated_half": lambda d: d[: len(d) // 2],
    "truncated_in_trailer": lambda d: d[:-5],
    "emptied": lambda d: b"",
    "file_name_changed": changed_file_name,  # the run would read feed-000003.csv again: its answers twice
    "checksum_changed": lambda d: d[:-10] + bytes([d[-10] ^ 0x01]) + d[-9:],
}


@pytest.mark.parametrize("damage", CHECKPOINT_DAMAGE)
def test_a_damaged_checkpoint_is_refused_naming_it(saved, tmp_path, damage):
    out, ck = copy_of(saved, tmp_path)
    state = ck / "state.pkl"
    state.write_bytes(CHECKPOINT_DAMAGE[damage](state.read_bytes()))
    text = refused_run(saved, out, ck, state)
    assert "use a fresh checkpoint directory" in text


# -- the committed output ---------------------------------------------------------------------------------------

def _last_line_cut(d: bytes, mid: bool) -> bytes:
    body = d.rstrip(b"\n")
    start = body.rindex(b"\n") + 1
    return body[: start + (len(body) - start) // 2] if mid else body[:start]


def _digit_changed(d: bytes) -> bytes:
    at = d.index(b'"v": ') + 5  # a value of the answer: the line stays JSON, the answer is wrong
    return d[:at] + bytes([ord("0") + (d[at] - ord("0") + 1) % 10]) + d[at + 1:]


PART_DAMAGE = {
    "truncated_at_a_line": lambda d: _last_line_cut(d, mid=False),
    "truncated_in_a_line": lambda d: _last_line_cut(d, mid=True),
    "value_changed": _digit_changed,
}


def a_part(out: Path):
    """A committed batch with at least two answers, and its first part."""
    c = next(c for c in committed_batches(out) if c.lines >= 2)
    return c, c.paths()[0]


@pytest.mark.parametrize("damage", [*PART_DAMAGE, "removed"])
def test_a_damaged_part_file_is_refused_by_every_reader_naming_it(saved, tmp_path, damage):
    from api.results import ResultLog

    out, _ = copy_of(saved, tmp_path)
    good = read_committed(out)
    batch, part = a_part(out)
    if damage == "removed":
        part.unlink()
    else:
        part.write_bytes(PART_DAMAGE[damage](part.read_bytes()))
    readers = {
        "read_committed": lambda: read_committed(out),
        "the batch": batch.rows,
        "the sink": lambda: DirectorySink(out).read(),
        "the service's result log": lambda: ResultLog(directory=out).page(0, len(good) + 1),
    }
    for who, read in readers.items():
        with pytest.raises(CheckpointError) as err:
            read()
        e = err.value
        assert e.location.file == str(part) and str(batch.commit_file()) in str(e), (who, str(e))
        assert "altered" in str(e) or "corrupt" in str(e), (who, str(e))


@pytest.mark.parametrize("damage", ["truncated", "lines_changed", "first_changed"])
def test_a_damaged_commit_file_is_refused_naming_it(saved, tmp_path, damage):
    out, ck = copy_of(saved, tmp_path)
    last = committed_batches(out)[-1]
    commit = last.commit_file()
    data = commit.read_bytes()
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:  # still JSON, still plausible: the batch's position or size in the output changed
        rec = json.loads(data)
        rec["lines" if damage == "lines_changed" else "first"] += 1
        data = json.dumps(rec).encode()
    commit.write_bytes(data)
    with pytest.raises(CheckpointError) as err:
        read_committed(out)
    assert err.value.location.file == str(commit) and "corrupt or altered" in str(err.value)
    # the run that would continue numbering the output after it refuses to start
    refused_run(saved, out, ck, commit)
