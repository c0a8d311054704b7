"""``kill -9`` of the MQTT ingester at random points while messages stream in (mosquitto on 127.0.0.1): after
restarts, every message is in the ingest log exactly once, in publishing order, and a query running
meanwhile answers each row exactly once (3 seeds by default, 20 slow-marked)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from brokers import running_mosquitto
from waiting import wait_for
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, MemorySink
from obda.execution.mqtt_ingest import Ingesters
from obda.model.sources_file import load_sources


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory):
    yield from running_mosquitto(tmp_path_factory)


ROOT = Path(__file__).resolve().parents[2]
SQL = "SELECT m.a AS a, m.b AS b FROM s AS m WHERE m.b > 0"


def ingester(tmp: Path) -> subprocess.Popen:
    """The ingester in a process of its own, once it is connected and subscribed."""
    p = subprocess.Popen([sys.executable, "-m", "obda.execution.mqtt_ingest", str(tmp / "sources.yaml"), "s"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = p.stdout.readline()
    assert line.startswith('{"started"'), line
    return p


def landed_rows(folder: Path) -> list[dict]:
    return [json.loads(x) for p in sorted(folder.glob("*.json")) for x in p.read_text().splitlines()]


def kill_run(tmp: Path, broker, seed: int, kills: int):
    rnd = random.Random(seed)
    (tmp / "sources.yaml").write_text(
        "tables:\n  s:\n    kind: stream\n    timestamp: ts\n    columns: {a: integer, b: integer, ts: timestamp}\n"
        f"    location: data/s\n    format: mqtt\n    options:\n      broker: {broker.url}\n      topics: [k{seed}/+]\n"
        f"      flush_interval: PT0.00{rnd.randint(1, 9)}S\n      batch: {rnd.choice((5, 20, 100))}\n")
    rows = [{"a": i, "b": rnd.randint(0, 2), "ts": f"2024-01-01T00:{i // 180:02d}:{i // 3 % 60:02d}Z"}
            for i in range(rnd.randint(300, 500))]
    proc = ingester(tmp)
    q = ContinuousQuery(plan_execution(SQL, load_sources(tmp / "sources.yaml"), ["bounded"]), base_dir=tmp,
                        backend="local", sink=MemorySink())
    q.ingesters = Ingesters([])  # this query only reads the log: the process above lands it
    pub = broker.publisher(f"pub-kill-{seed}")

    pace = random.Random(seed)

    def publish():
        for i, r in enumerate(rows):
            info = pub.publish(f"k{seed}/{i % 4}", json.dumps(r), qos=1)
            if i % 25 == 0:  # spread over the ingesters' lives (about 2 s)
                info.wait_for_publish()
                time.sleep(pace.uniform(0.05, 0.15))
        info.wait_for_publish()

    t = threading.Thread(target=publish)
    t.start()
    for _ in range(kills):
        time.sleep(rnd.uniform(0.01, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        q.step()  # the query reads whatever was landed before the kill
        proc = ingester(tmp)
    t.join()
    wait_for(lambda: len(landed_rows(tmp / "data" / "s")) >= len(rows), timeout=30)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    stopped = json.loads(out.strip().splitlines()[-1])["stopped"]
    pub.disconnect()
    pub.loop_stop()
    q.run_until_exhausted()
    answers, quarantine = sink_lines(q), q.quarantine.read()
    q.close()
    return rows, landed_rows(tmp / "data" / "s"), answers, quarantine, stopped


def sink_lines(q) -> list[dict]:
    return q.sink.drain()


@pytest.mark.parametrize("seed", [0, 1, 2] + [pytest.param(s, marks=pytest.mark.slow) for s in range(3, 20)])
def test_kill_9_of_the_ingester_loses_and_repeats_no_message(tmp_path, mosquitto, seed):
    rows, landed, answers, quarantine, _ = kill_run(tmp_path, mosquitto, seed, kills=3)
    assert landed == rows  # each message once, in publishing order
    assert quarantine == []
    expected = Counter((r["a"], r["b"]) for r in rows if r["b"] > 0)
    assert Counter((x["binding"]["a"], x["binding"]["b"]) for x in answers) == expected
