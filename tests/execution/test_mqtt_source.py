"""MQTT streams against a real mosquitto on 127.0.0.1: a query over MQTT equals the same query over the same
rows from files, after every closed timestamp; bad messages are quarantined with their topic and message
id and the query goes on; a redelivery of a landed message is not landed twice; an unreachable broker, a
refused password and a refused subscription are located errors, and a password is never logged."""

from __future__ import annotations

import getpass
import json
import logging
import random
from collections import Counter
from pathlib import Path

import pytest

from brokers import Mosquitto, free_port, running_mosquitto
from waiting import wait_for
from obda.analysis import plan_execution
from obda.errors import BrokerError
from obda.execution import ContinuousQuery, MemorySink
from obda.model.sources import Sources


@pytest.fixture(scope="module")
def mosquitto(tmp_path_factory):
    yield from running_mosquitto(tmp_path_factory)


STREAMS = {"s": "{a: integer, b: integer, c: integer, ts: timestamp}", "t": "{d: integer, e: integer, ts: timestamp}"}
TOPICS = {"s": "plant/s/+", "t": "plant/t/#"}
QUERIES = [  # bounded queries of the spec's examples (tests/execution/exec_harness.py): a join, a set, one stream
    "SELECT m1.a AS a, m2.d AS d FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND m2.d < 2",
    "SELECT DISTINCT m2.d AS d FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND 0 < m2.d AND m2.d < 5",
    "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.c > 2",
]


def sources_yaml(broker: str | None, extra: str = "") -> str:
    """The streams s and t: from MQTT topics (``broker``) or from JSON-lines files (None)."""
    out = ["tables:"]
    for name, cols in STREAMS.items():
        out += [f"  {name}:", "    kind: stream", "    timestamp: ts", f"    columns: {cols}",
                f"    location: data/{name}"]
        if broker is None:
            out.append("    format: json")
        else:
            out += ["    format: mqtt", "    options:", f"      broker: {broker}", f"      topics: [{TOPICS[name]}]",
                    "      flush_interval: PT0.01S", "      batch: 50"] + ([extra] if extra else [])
    return "\n".join(out) + "\n"


def rows_of(seed: int) -> dict[str, list[dict]]:
    """Per stream, rows in timestamp order (several rows per timestamp, the streams' times interleaved)."""
    rnd = random.Random(seed)
    out = {}
    for name in STREAMS:
        sec, rows = 0, []
        for i in range(rnd.randint(30, 60)):
            sec += rnd.choice((0, 1, 1, 2))
            ts = f"2024-01-01T00:{sec // 60:02d}:{sec % 60:02d}Z"
            rows.append({"a": i, "b": rnd.randint(0, 3), "c": rnd.randint(0, 5), "ts": ts} if name == "s"
                        else {"d": rnd.randint(0, 5), "e": i, "ts": ts})
        out[name] = rows
    return out


def by_timestamp(lines: list[dict]) -> dict[str, Counter]:
    """Answers per closed timestamp (``emitted_at``): equal for every timestamp = equal after every one."""
    out: dict[str, Counter] = {}
    for x in lines:
        out.setdefault(x["emitted_at"], Counter())[json.dumps(x["binding"], sort_keys=True)] += 1
    return out


def in_order(lines: list[dict]) -> bool:
    times = [x["emitted_at"] for x in lines]
    return times == sorted(times)


def run_files(tmp: Path, sql: str, rows: dict, rnd: random.Random, backend: str = "local"):
    src = Sources.from_yaml(sources_yaml(None), str(tmp / "sources.yaml"))
    sink = MemorySink()
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp, backend=backend, sink=sink)
    pos = {n: 0 for n in rows}
    part = 0
    while any(pos[n] < len(rows[n]) for n in rows):
        for n in rows:
            k = rnd.randint(1, 12)
            chunk = rows[n][pos[n]:pos[n] + k]
            if chunk:
                (tmp / "data" / n).mkdir(parents=True, exist_ok=True)
                (tmp / "data" / n / f"p{part:05d}.json").write_text("".join(json.dumps(r) + "\n" for r in chunk))
                pos[n] += len(chunk)
        part += 1
        if rnd.random() < 0.6:
            q.step()
    q.run_until_exhausted()
    out, quarantine = sink.drain(), q.quarantine.read()
    q.close()
    return out, quarantine


def publish(pub, name: str, row: dict, rnd: random.Random):
    topic = TOPICS[name].replace("+", str(rnd.randint(0, 2))).replace("#", f"turbine/{rnd.randint(0, 2)}")
    return pub.publish(topic, json.dumps(row), qos=1)


def run_mqtt(tmp: Path, broker: Mosquitto, sql: str, rows: dict, rnd: random.Random, backend: str = "local"):
    src = Sources.from_yaml(sources_yaml(broker.url), str(tmp / "sources.yaml"))
    sink = MemorySink()
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp, backend=backend, sink=sink)
    q.open()  # starts the ingesters: subscribed before the first message is published
    pub = broker.publisher(f"pub-{tmp.name}")
    pos = {n: 0 for n in rows}
    total = sum(len(rows[i.table.name]) for i in q.ingesters.ingesters)  # the streams the query reads
    while any(pos[n] < len(rows[n]) for n in rows):
        for n in rows:
            for r in rows[n][pos[n]:pos[n] + rnd.randint(1, 12)]:
                info = publish(pub, n, r, rnd)
                pos[n] += 1
        info.wait_for_publish()
        if rnd.random() < 0.6:
            q.step()  # a micro-batch of whatever the ingesters landed by now: random cuts
    wait_for(lambda: sum(i.log.landed for i in q.ingesters.ingesters) >= total, timeout=20)
    q.run_until_exhausted()
    out, quarantine, batches = sink.drain(), q.quarantine.read(), q.metrics.batches
    landed = sum(i.log.landed for i in q.ingesters.ingesters)
    q.close()
    pub.disconnect()
    pub.loop_stop()
    return out, quarantine, batches, landed, total


def differential(tmp_path, broker, seed: int, backend: str = "local"):
    rows, sql = rows_of(seed), QUERIES[seed % len(QUERIES)]
    files, fq = run_files(tmp_path / "files", sql, rows, random.Random(seed), backend)
    mqtt, mq, batches, landed, total = run_mqtt(tmp_path / "mqtt", broker, sql, rows, random.Random(seed + 1000),
                                                backend)
    assert fq == [] and mq == [], (fq, mq)
    assert landed == total  # every message landed once
    assert by_timestamp(mqtt) == by_timestamp(files)
    assert in_order(mqtt) and in_order(files)
    assert files, "the seed's query answers nothing: the comparison would say nothing"
    assert batches > 2  # the MQTT run was cut into several micro-batches


@pytest.mark.parametrize("seed", [0, 1, 2] + [pytest.param(s, marks=pytest.mark.slow) for s in range(3, 20)])
def test_a_query_over_mqtt_equals_the_query_over_the_same_rows_from_files(tmp_path, mosquitto, seed):
    differential(tmp_path, mosquitto, seed)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_same_on_spark(tmp_path, mosquitto, spark, seed):
    differential(tmp_path, mosquitto, seed, backend="spark")


BAD = [  # payload, what the reason says
    (b"not json", "malformed record (not a JSON object)"),
    (b"[1, 2]", "malformed record (not a JSON object)"),
    (b"", "malformed record (not a JSON object)"),
    (b'{"a": 1, "b": 1, "c": 3}', "missing timestamp 'ts'"),
    (b'{"a": "one", "b": 1, "c": 3, "ts": "2024-01-01T00:00:03Z"}', "column 'a' (integer)"),
    (b'{"a": 7, "b": 1, "c": 3, "ts": "2024-01-01T00:00:03\xff"}', "not UTF-8"),
    (b'{"a": 8, "b": 1,\n "c": 9, "ts": "2023-12-31T00:00:00Z"}', "late"),  # a past timestamp, over two lines
]


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=[pytest.mark.slow, pytest.mark.spark])])
def test_bad_messages_are_quarantined_with_topic_and_message_id_and_the_query_goes_on(tmp_path, mosquitto, backend,
                                                                                        request):
    spark = request.getfixturevalue("spark") if backend == "spark" else None
    src = Sources.from_yaml(sources_yaml(mosquitto.url), str(tmp_path / "sources.yaml"))
    sink = MemorySink()
    sql = "SELECT m1.a AS a FROM s AS m1 WHERE m1.c > 2"
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp_path, backend=backend, sink=sink,
                        spark=spark, quarantine=tmp_path / "quarantine.jsonl", idle_timeout=0.2,
                        trigger_interval=0.02).start()
    pub = mosquitto.publisher("pub-bad")
    good = [{"a": i, "b": 0, "c": 3, "ts": f"2024-01-01T00:00:{i:02d}Z"} for i in range(1, 11)]
    sent = []  # (message id in the log, topic, expected reason) of each bad message, in publishing order
    for i, row in enumerate(good[:5]):
        pub.publish(f"plant/s/{i % 3}", json.dumps(row), qos=1).wait_for_publish()
    limit = 20 if backend == "local" else 300  # seconds: Spark's first jobs are slow on a busy machine
    wait_for(lambda: len(sink.queue.queue) >= 4 or q.error, timeout=limit)  # the query answered up to 00:00:04
    for k, (payload, why) in enumerate(BAD):
        topic = f"plant/s/bad{k}"
        pub.publish(topic, payload, qos=1).wait_for_publish()
        sent.append((topic, why))
    for i, row in enumerate(good[5:]):
        pub.publish(f"plant/s/{i % 3}", json.dumps(row), qos=1).wait_for_publish()
    wait_for(lambda: len(q.quarantine.read()) >= len(BAD) and len(sink.queue.queue) >= 10 or q.error, timeout=limit)
    assert q.running and q.error is None
    records = q.quarantine.read()
    q.close()
    pub.disconnect()
    pub.loop_stop()
    assert sorted(x["binding"]["a"] for x in sink.drain()) == list(range(1, 11))  # every good row answered
    assert len(records) == len(BAD)
    by_topic = {r["mqtt"]["topic"]: r for r in records}
    for k, (topic, why) in enumerate(sent):
        r = by_topic[topic]
        assert why in r["reason"], r
        assert f"[MQTT topic {topic!r}, message {5 + k + 1}]" in r["reason"], r
        assert r["mqtt"]["message"] == 5 + k + 1 and r["file"].endswith(".json") and r["line"] >= 1
    saved = [json.loads(x) for x in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    assert [x["reason"] for x in saved] == [x["reason"] for x in records]  # the file has the topic and id too


def test_a_redelivery_of_a_landed_message_is_acknowledged_not_landed_again(tmp_path, mosquitto):
    """A crash after landing and before the acknowledgement: the broker sends the messages again (DUP)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    from obda.execution.ingest_log import IngestLog, Message
    from obda.execution.mqtt_ingest import MqttIngester

    src = Sources.from_yaml(sources_yaml(mosquitto.url), str(tmp_path / "sources.yaml"))
    table = src.table("s")
    ing = MqttIngester(table, tmp_path)
    landing = IngestLog(ing.folder)
    ing.folder.mkdir(parents=True)
    assert landing.acquire()
    received = []
    # the first life: the ingester's session, messages landed, never acknowledged, the connection cut
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=ing.client_id, protocol=mqtt.MQTTv5, manual_ack=True)
    c.on_message = lambda cl, ud, m: received.append(Message(m.topic, m.mid, m.payload, bool(m.dup), m.qos))
    subscribed = []
    c.on_subscribe = lambda *args: subscribed.append(True)
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 600
    c.connect("127.0.0.1", mosquitto.port, clean_start=False, properties=props)
    c.loop_start()
    c.subscribe(TOPICS["s"], qos=1)
    wait_for(lambda: subscribed)  # the broker drops what is published before the subscription holds
    pub = mosquitto.publisher("pub-dup")
    rows = [{"a": i, "b": 0, "c": 3, "ts": f"2024-01-01T00:00:{i:02d}Z"} for i in range(12)]
    for i, r in enumerate(rows[:8]):
        pub.publish(f"plant/s/{i % 2}", json.dumps(r), qos=1).wait_for_publish()
    wait_for(lambda: len(received) == 8)
    landed, _ = landing.land(received[:6])  # 6 landed, 2 received only; none acknowledged
    assert len(landed) == 6
    c.loop_stop()
    c.socket().close()  # the process dies: no DISCONNECT, no acknowledgement
    landing.release()
    for i, r in enumerate(rows[8:]):
        pub.publish(f"plant/s/{i % 2}", json.dumps(r), qos=1).wait_for_publish()
    ing.start()  # the second life: the broker sends the 8 unacknowledged messages again, then the 4 new ones
    wait_for(lambda: ing.log.landed + ing.log.repeats >= 12)
    ing.stop()
    pub.disconnect()
    pub.loop_stop()
    assert (ing.log.landed, ing.log.repeats) == (6, 6)
    lines = [json.loads(x) for p in ing.log.parts() for x in p.read_text().splitlines()]
    assert [x["a"] for x in lines] == list(range(12))  # each once, in publishing order


def test_an_unreachable_broker_is_an_error_at_the_broker_line(tmp_path):
    port = free_port()  # nothing listens there
    text = sources_yaml(f"mqtt://127.0.0.1:{port}")
    src = Sources.from_yaml(text, str(tmp_path / "sources.yaml"))
    q = ContinuousQuery(plan_execution(QUERIES[2], src, ["bounded"]), base_dir=tmp_path, backend="local")
    with pytest.raises(BrokerError) as e:
        q.open()
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "broker:" in x)
    assert e.value.location.line == line and e.value.location.file.endswith("sources.yaml")
    assert f"cannot reach the MQTT broker mqtt://127.0.0.1:{port}" in e.value.message
    q.close()


def _auth_broker(tmp_path: Path) -> tuple[int, object]:
    """A second mosquitto that wants user obda with password s3cret-Pw."""
    import shutil
    import subprocess

    from brokers import _wait_port

    tool = shutil.which("mosquitto_passwd")
    if tool is None:
        pytest.skip("mosquitto_passwd is not installed (apt-get install mosquitto)")
    pw, conf = tmp_path / "pw", tmp_path / "auth.conf"
    subprocess.run([tool, "-b", "-c", str(pw), "obda", "s3cret-Pw"], check=True, capture_output=True)
    port = free_port()
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {pw}\n"
                    f"persistence false\nuser {getpass.getuser()}\n")  # as root it would read them as 'mosquitto'

    proc = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", str(conf)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _wait_port(port, proc, "mosquitto")
    return port, proc


def test_credentials_are_passed_to_the_broker_and_never_logged(tmp_path, mosquitto, caplog, monkeypatch):
    port, proc = _auth_broker(tmp_path)
    caplog.set_level(logging.DEBUG)
    try:
        def query(extra: str):
            text = sources_yaml(f"mqtt://127.0.0.1:{port}", extra)
            src = Sources.from_yaml(text, str(tmp_path / "sources.yaml"))
            return text, ContinuousQuery(plan_execution(QUERIES[2], src, ["bounded"]), base_dir=tmp_path,
                                         backend="local", sink=MemorySink())

        monkeypatch.setenv("OBDA_TEST_MQTT_PW", "s3cret-Pw")
        _, q = query("      username: obda\n      password_env: OBDA_TEST_MQTT_PW")
        q.open()  # connected with the password from the environment
        assert all(i.status()["landing"] for i in q.ingesters.ingesters)
        q.close()
        text, q = query("      username: obda\n      password: wr0ng-Pw")
        with pytest.raises(BrokerError) as e:
            q.open()
        assert "Not authorized" in e.value.message or "Bad user name or password" in e.value.message
        assert e.value.location.line == next(i for i, x in enumerate(text.splitlines(), 1) if "username:" in x)
        q.close()
        assert "wr0ng-Pw" not in str(e.value) and "s3cret-Pw" not in repr(Sources.from_yaml(text).tables)
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert "s3cret-Pw" not in logged and "wr0ng-Pw" not in logged
    finally:
        proc.terminate()
        proc.wait()
