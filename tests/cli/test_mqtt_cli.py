"""An MQTT stream in a project's sources file: `obda validate` refuses an unknown option at its line, and
`obda run` refuses a broker it cannot reach at the broker's line (exit 2), before any micro-batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from brokers import free_port
from obda.cli import app

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT / "tests" / "api"), str(ROOT)):  # the repository first: `import api` is the service
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)
from apikit import make_workspace  # noqa: E402

runner = CliRunner()
QUERY = ROOT / "demo" / "queries" / "hot_readings.rq"


def measurement_from_mqtt(ws: Path, options: list[str]) -> dict[str, int]:
    """Make the workspace's measurement stream an MQTT stream; returns the line of each option."""
    lines = (ws / "sources.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  measurement:"))
    at = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("format:"))
    lines[at:at + 1] = ["    format: mqtt", "    options:"] + [f"      {o}" for o in options]
    (ws / "sources.yaml").write_text("\n".join(lines) + "\n")
    return {o.split(":")[0]: at + 3 + k for k, o in enumerate(options)}


def test_validate_refuses_an_unknown_mqtt_option_at_its_line(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    at = measurement_from_mqtt(ws, ["broker: mqtt://127.0.0.1:1883", "topics: [plant/+/m]", "qos: 0"])
    r = runner.invoke(app, ["validate", "--project", str(ws), "--format", "json"])
    assert r.exit_code == 1, r.output
    bad = [p for p in json.loads(r.stdout)["problems"] if p["severity"] == "error"]
    assert "unknown MQTT option 'qos'" in bad[0]["message"] and bad[0]["location"]["line"] == at["qos"]


def test_run_refuses_an_unreachable_broker_at_its_line(tmp_path):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    port = free_port()
    at = measurement_from_mqtt(ws, [f"broker: mqtt://127.0.0.1:{port}", "topics: [plant/+/m]",
                                    "username: obda", "password: s3cret-Pw"])
    r = runner.invoke(app, ["run", str(QUERY), "--project", str(ws), "--until-exhausted", "--backend", "local"])
    assert r.exit_code == 2, r.output
    assert f"sources.yaml:{at['broker']}" in r.output and "cannot reach the MQTT broker" in r.output
    assert "s3cret-Pw" not in r.output
