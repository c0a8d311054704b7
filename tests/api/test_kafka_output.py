"""A registered query's answers published to Kafka too (``"output": "kafka://…"``), against a real
Kafka-protocol broker (Tansu) on 127.0.0.1: the topic holds exactly the result log's answers, keyed
``<query id>:<seq>``, across a restart of the service (at least once: a consumer keeping the first record of
each key reads each answer once); an unreachable broker or a missing topic refuses the registration (422,
nothing kept); a URL that is not Kafka is refused by validation."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api import create_app
from apikit import AUTH, BOUNDED, api_answers, make_workspace, pages, settings_for
from test_endpoints import problem, register
from test_failed_resume import info, oracle
from waiting import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from brokers import free_port, running_tansu  # noqa: E402
from obda.execution.kafka_sink import read_topic  # noqa: E402


@pytest.fixture(scope="module")
def tansu():
    yield from running_tansu()


def published(tansu, topic: str) -> dict[str, dict]:
    """The topic's records as a consumer that drops repeats reads them: key -> the first record's answer."""
    out: dict[str, dict] = {}
    for key, value in read_topic(tansu.bootstrap, topic):
        out.setdefault(key, json.loads(value))
    return out


def test_answers_are_published_keyed_by_seq_and_survive_a_restart(tmp_path, tansu):
    ws, feeder = make_workspace(tmp_path / "ws", blocks=1, seed=3)
    tansu.create_topic("svc-answers", partitions=3)
    url = f"kafka://{tansu.bootstrap}/svc-answers"
    state = tmp_path / "state"
    with TestClient(create_app(settings_for(ws, state_dir=state))) as c:
        q = register(c, "hot", BOUNDED, idle_timeout=0.3, output=url)
        qid = q["id"]
        assert q["output"] == url and info(c, qid)["output"] == url
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        first = oracle(ws, BOUNDED)
        wait_for(lambda: info(c, qid)["results"] >= sum(first.values()), timeout=30)
        c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
    feeder.feed_block()  # answers computed after the restart go on with the next seq
    with TestClient(create_app(settings_for(ws, state_dir=state))) as c:
        assert info(c, qid)["output"] == url  # kept in the registry
        c.post(f"/v1/queries/{qid}/start", headers=AUTH)
        expected = oracle(ws, BOUNDED)
        wait_for(lambda: info(c, qid)["results"] >= sum(expected.values()), timeout=30)
        c.post(f"/v1/queries/{qid}/stop", headers=AUTH)
        items = pages(c, qid, limit=50)
    assert api_answers(items, ["sensor", "v"]) == expected
    topic = published(tansu, "svc-answers")
    # every answer, under its own key, and nothing else (the API's page shows an absent op as null)
    assert topic == {f"{qid}:{a['seq']}": {k: v for k, v in a.items() if v is not None} for a in items}


def test_an_unreachable_broker_or_a_missing_topic_refuses_the_registration(tmp_path, tansu):
    ws, _ = make_workspace(tmp_path / "ws", blocks=1, seed=4)
    state = tmp_path / "state"
    with TestClient(create_app(settings_for(ws, state_dir=state))) as c:
        r = c.post("/v1/queries", json={"name": "q", "query": BOUNDED,
                                        "output": f"kafka://127.0.0.1:{free_port()}/answers"}, headers=AUTH)
        assert "cannot reach the brokers" in problem(r, 422, "broker_error")["detail"]
        r = c.post("/v1/queries", json={"name": "q", "query": BOUNDED,
                                        "output": f"kafka://{tansu.bootstrap}/no-such-topic"}, headers=AUTH)
        assert "topic 'no-such-topic' does not exist" in problem(r, 422, "broker_error")["detail"]
        r = c.post("/v1/queries", json={"name": "q", "query": BOUNDED, "output": "/tmp/answers.jsonl"}, headers=AUTH)
        assert r.status_code == 422 and "output" in r.text
        assert c.get("/v1/queries", headers=AUTH).json()["queries"] == []  # nothing kept
    assert [p.name for p in state.iterdir() if p.is_dir()] == []  # no folder left for a refused query
    shutil.rmtree(state)


def test_a_corrupt_hand_over_marker_is_a_located_checkpoint_error(tmp_path, tansu):
    from api.kafka_output import MARKER, KafkaOutput
    from obda.errors import CheckpointError

    tansu.create_topic("svc-marker")
    (tmp_path / MARKER).write_text("{not json")
    with pytest.raises(CheckpointError, match=f"{tmp_path / MARKER} cannot be read"):
        KafkaOutput(f"kafka://{tansu.bootstrap}/svc-marker", "q", tmp_path)
