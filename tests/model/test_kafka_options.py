"""The options of a Kafka stream in the sources file (issue 28, item 4): each error located at its line, secrets
never shown."""

from __future__ import annotations

import pytest

from obda.errors import SourcesError
from obda.model.sources_file import parse_sources

HEAD = ("tables:\n  m:\n    kind: stream\n    timestamp: ts\n    columns: {a: integer, ts: timestamp}\n"
        "    format: kafka\n")


def sources(location: str = "127.0.0.1:9092", options: str = "      topic: t\n"):
    text = HEAD + (f"    location: {location}\n" if location else "") + ("    options:\n" + options if options else "")
    return parse_sources(text, "s.yaml")


def test_a_kafka_stream_is_accepted_with_its_defaults():
    t = sources("h1:9092, h2:9093").table("m")
    assert t.format == "kafka" and t.location == "h1:9092,h2:9093"
    k = t.kafka
    assert (k.topic, k.payload, k.time, k.max_records, k.poll_timeout) == ("t", "json", "payload", 100000, 0.2)
    assert k.conf() == {"bootstrap.servers": "h1:9092,h2:9093"}


@pytest.mark.parametrize("location, options, line, fragment", [
    (None, "      topic: t\n", 2, "needs a 'location'"),
    ("nohost", "      topic: t\n", 7, "is not a list of Kafka bootstrap servers"),
    ("h:99999", "      topic: t\n", 7, "port 1–65535"),
    ("h:9092", None, 6, "needs options: topic"),
    ("h:9092", "      payload: json\n", 9, "needs the option 'topic'"),
    ("h:9092", "      topic: t\n      group: g\n", 10, "unknown Kafka option 'group'"),
    ("h:9092", "      topic: a/b\n", 9, "is not a Kafka topic name"),
    ("h:9092", "      topic: t\n      payload: avro\n", 10, "payload 'avro' is not one of json, csv"),
    ("h:9092", "      topic: t\n      time: wall\n", 10, "time 'wall' is not one of payload, record"),
    ("h:9092", "      topic: t\n      max_records: 0\n", 10, "max_records '0'"),
    ("h:9092", "      topic: t\n      poll_timeout: 5\n", 10, "poll_timeout '5' is not a duration"),
    ("h:9092", "      topic: t\n      sasl.password: x\n", 10, "a password needs sasl.username"),
    ("h:9092", "      topic: t\n      ssl.ca.location: /no/such.pem\n", 10, "is not a file"),
])
def test_kafka_option_errors_are_located(location, options, line, fragment):
    with pytest.raises(SourcesError) as e:
        sources(location, options)
    assert e.value.location.file == "s.yaml" and e.value.location.line == line, str(e.value)
    assert fragment in e.value.message


def test_client_settings_pass_through_and_a_password_is_never_shown(monkeypatch):
    k = sources(options="      topic: t\n      security.protocol: SASL_SSL\n      sasl.mechanism: PLAIN\n"
                        "      sasl.username: u\n      sasl.password_env: OBDA_TEST_KAFKA_PW\n").table("m").kafka
    monkeypatch.setenv("OBDA_TEST_KAFKA_PW", "s3cret-pw")
    assert k.conf()["sasl.password"] == "s3cret-pw" and k.conf()["security.protocol"] == "SASL_SSL"
    assert "s3cret-pw" not in repr(k)
    monkeypatch.delenv("OBDA_TEST_KAFKA_PW")
    with pytest.raises(SourcesError, match="OBDA_TEST_KAFKA_PW") as e:
        k.conf()
    assert e.value.location.line == 13
    inline = sources(options="      topic: t\n      sasl.username: u\n      sasl.password: hunter2\n").table("m")
    assert "hunter2" not in repr(inline) and "hunter2" not in repr(inline.kafka)
