"""``obda run --shed-max-lag``: the command line's opt-in to load shedding (README, "Load shedding"): the dropped
rows are in the metrics line it prints and in the quarantine, a second run from the checkpoint counts nothing
twice, and a wrong value is refused with the option named."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from obda.cli import app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "api"))
runner = CliRunner()


def _workspace(tmp_path: Path) -> tuple[Path, int]:
    from apikit import make_workspace

    ws, _ = make_workspace(tmp_path / "ws", blocks=2)
    files = sorted((ws / "data" / "measurement").iterdir())
    old = time.time() - 3600
    for f in files[:1]:  # the first block waited an hour, the second is fresh
        os.utime(f, (old, old))
    rows = sum(len(f.read_text().splitlines()) - 1 for f in files[:1])
    return ws, rows


def _run(ws: Path, *extra: str):
    return runner.invoke(app, ["run", str(ROOT / "demo" / "queries" / "hot_readings.rq"), "--project", str(ws),
                               "--until-exhausted", "--backend", "local", "--output", str(ws / "out.jsonl"), *extra])


def test_run_with_shed_max_lag_drops_the_old_input_and_counts_it_once(tmp_path):
    ws, rows = _workspace(tmp_path)
    assert rows > 0
    for _ in range(2):  # the second run resumes from the checkpoint: nothing new, nothing counted twice
        r = _run(ws, "--checkpoint", str(ws / "ckpt"), "--shed-max-lag", "PT5M")
        assert r.exit_code == 0, r.output
        metrics = json.loads(r.stderr.strip().splitlines()[-1])
        assert metrics["shed"]["rows"] == {"measurement": rows} and metrics["shed"]["files"] == {"measurement": 1}
        assert metrics["incomplete_since"] is not None and metrics["rows_read"]["measurement"] > 0
    shed = [json.loads(line) for line in (ws / "ckpt" / "quarantine.jsonl").read_text().splitlines()]
    assert [x["rows"] for x in shed if x.get("shed")] == [rows]


def test_without_the_option_nothing_is_dropped_and_a_wrong_value_is_refused(tmp_path):
    ws, rows = _workspace(tmp_path)
    r = _run(ws)
    assert r.exit_code == 0, r.output
    metrics = json.loads(r.stderr.strip().splitlines()[-1])
    assert "shed" not in metrics and metrics["rows_read"]["measurement"] > rows
    r = _run(ws, "--shed-max-lag", "5min")
    assert r.exit_code == 2 and "--shed-max-lag" in r.output and "write it as PT5M" in r.output and "Traceback" not in r.output
