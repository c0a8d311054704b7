"""The Kafka sink against a real Kafka-protocol broker (Tansu) on 127.0.0.1: `obda run --output kafka://…`
writes the same lines as the file sink, keyed ``<query>:<position>`` in one partition; after ``kill -9`` at
random points and resumes from the checkpoint, every line is in the topic at least once, each repeat with
the same key and value, so a consumer that drops repeated keys reads each line exactly once; an unreachable
broker, a missing topic and a bad URL are typed errors that never show credentials."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brokers import free_port, running_tansu
from obda.cli import app
from obda.errors import BrokerError
from obda.execution.kafka_sink import KafkaSink, answer_records, parse_kafka_url, read_topic


@pytest.fixture(scope="module")
def tansu():
    yield from running_tansu()


ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT / "tests" / "api"), str(ROOT)):  # the repository first: `import api` is the service
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)
from apikit import make_workspace  # noqa: E402

QUERY = ROOT / "demo" / "queries" / "hot_readings.rq"
runner = CliRunner()


def file_answers(ws: Path, tmp: Path) -> list[dict]:
    out = tmp / "answers.jsonl"
    r = runner.invoke(app, ["run", str(QUERY), "--project", str(ws), "--until-exhausted", "--backend", "local",
                            "--output", str(out)])
    assert r.exit_code == 0, r.output
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_run_to_kafka_writes_the_file_sinks_lines_keyed_by_query_and_position(tmp_path, tansu):
    ws, _ = make_workspace(tmp_path / "ws", blocks=3)
    tansu.create_topic("answers-a", partitions=3)
    url = f"kafka://{tansu.bootstrap}/answers-a"
    r = runner.invoke(app, ["run", str(QUERY), "--project", str(ws), "--until-exhausted", "--backend", "local",
                            "--output", url, "--max-files-per-batch", "1"])
    assert r.exit_code == 0, r.output
    records = read_topic(tansu.bootstrap, "answers-a")
    expected = file_answers(ws, tmp_path)
    assert expected and [json.loads(v) for _, v in records] == expected  # one partition: in output order
    assert [k for k, _ in records] == [f"hot_readings:{i}" for i in range(1, len(expected) + 1)]


def kill_and_resume(ws: Path, tmp: Path, url: str, seed: int) -> int:
    """`obda run` to Kafka with a checkpoint, killed (SIGKILL) at random points and resumed until it ends;
    returns how many kills hit a running query."""
    rnd = random.Random(seed)
    ckpt = tmp / "ckpt"
    cmd = [sys.executable, "-m", "obda.cli", "run", str(QUERY), "--project", str(ws), "--until-exhausted",
           "--backend", "local", "--output", url, "--checkpoint", str(ckpt), "--max-files-per-batch", "1"]
    hits = 0
    for attempt in range(3):
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        end = time.monotonic() + 60
        while not (ckpt / "state.pkl").exists() and p.poll() is None and time.monotonic() < end:
            time.sleep(0.005)  # killed once it runs: its first micro-batch is checkpointed
        time.sleep(rnd.uniform(0, 0.25))
        if p.poll() is None:
            hits += 1
            p.send_signal(signal.SIGKILL)
        p.wait()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return hits


@pytest.mark.parametrize("seed", [0] + [pytest.param(s, marks=pytest.mark.slow) for s in range(1, 6)])
def test_kill_9_and_resume_every_line_at_least_once_with_its_key_exactly_once_after_dropping_repeats(
        tmp_path, tansu, seed):
    ws, _ = make_workspace(tmp_path / "ws", blocks=30, seed=seed)
    topic = f"answers-kill-{seed}"
    tansu.create_topic(topic)
    hits = kill_and_resume(ws, tmp_path, f"kafka://{tansu.bootstrap}/{topic}", seed)
    records = read_topic(tansu.bootstrap, topic)
    values = defaultdict(set)
    for k, v in records:
        values[k].add(v)
    assert all(len(v) == 1 for v in values.values()), "a repeated key with another line"
    expected = file_answers(ws, tmp_path)
    assert sorted(values, key=lambda k: int(k.rsplit(":", 1)[1])) == [f"hot_readings:{i}"
                                                                      for i in range(1, len(expected) + 1)]
    assert answer_records(records, "hot_readings") == expected
    assert hits >= 1, "no kill hit the running query: the seed tested nothing"


def test_lines_sent_before_a_crash_and_still_staged_are_sent_again_with_the_same_keys(tmp_path, tansu):
    """The crash the kills above rarely hit: after the broker acknowledged a batch, before its staging file was
    deleted (the folder is put back as that crash leaves it). The restarted sink sends it again."""
    import shutil

    tansu.create_topic("answers-r")
    url, stage = f"kafka://{tansu.bootstrap}/answers-r", tmp_path / "stage"
    first = KafkaSink(url, "q", stage)
    first.write_lines(['{"n": 1}', '{"n": 2}'])
    first.commit(first.flush())
    first.write_lines(['{"n": 3}', '{"n": 4}'])
    offset = first.flush()  # the checkpoint records 4
    shutil.copytree(stage, tmp_path / "as-staged")
    first.commit(offset)  # sent and acknowledged ...
    first.close()
    shutil.rmtree(stage)
    shutil.copytree(tmp_path / "as-staged", stage)  # ... but the process died before deleting the staging file
    second = KafkaSink(url, "q", stage)
    second.recover(offset)
    second.write_lines(['{"n": 5}'])
    second.commit(second.flush())
    second.close()
    records = read_topic(tansu.bootstrap, "answers-r")
    assert [k for k, _ in records] == ["q:1", "q:2", "q:3", "q:4", "q:3", "q:4", "q:5"]
    assert answer_records(records, "q") == [{"n": n} for n in range(1, 6)]
    assert not any(stage.iterdir())


def test_unreachable_broker_missing_topic_and_bad_urls_are_typed_errors(tmp_path, tansu, monkeypatch):
    with pytest.raises(BrokerError, match="cannot reach the brokers"):
        KafkaSink(f"kafka://127.0.0.1:{free_port()}/answers", "q")
    with pytest.raises(BrokerError, match="topic 'absent' does not exist"):
        KafkaSink(f"kafka://{tansu.bootstrap}/absent", "q")
    for bad, why in [("kafka://host/t", "not host:port"), ("kafka://h:1", "is not a Kafka output"),
                     ("kafka://h:1/t?colour=red", "unknown option 'colour'"),
                     ("kafka://h:1/t?partition=x&sasl.password=hunter2", "partition must be a whole number"),
                     ("kafka://h:1/t?sasl.password_env=OBDA_TEST_NO_SUCH_VAR", "is not set")]:
        with pytest.raises(BrokerError, match=why) as e:
            parse_kafka_url(bad)
        assert "hunter2" not in str(e.value)
    monkeypatch.setenv("OBDA_TEST_KAFKA_PW", "hunter2")
    _, _, _, client = parse_kafka_url("kafka://h:1/t?sasl.username=u&sasl.password_env=OBDA_TEST_KAFKA_PW")
    assert client == {"sasl.username": "u", "sasl.password": "hunter2"}
    tansu.create_topic("answers-p")
    with pytest.raises(BrokerError, match="partition 3 does not exist") as e:
        KafkaSink(f"kafka://{tansu.bootstrap}/answers-p?partition=3&sasl.password=hunter2", "q")
    assert "hunter2" not in str(e.value)
    ws, _ = make_workspace(tmp_path / "ws", blocks=1)
    r = runner.invoke(app, ["run", str(QUERY), "--project", str(ws), "--until-exhausted", "--backend", "local",
                            "--output", f"kafka://{tansu.bootstrap}/absent"])
    assert r.exit_code == 2 and "topic 'absent' does not exist" in r.output
