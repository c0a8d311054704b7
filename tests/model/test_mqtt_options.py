"""The options of an MQTT stream (`format: mqtt`): checked when the sources file is read, each refusal
located at the option's line; the stream is read as the JSON-lines ingest log in its location."""

from __future__ import annotations

import pytest

from obda.errors import SourcesError
from obda.model.sources import Sources, missing_stream_locations

HEAD = """tables:
  m:
    kind: stream
    timestamp: ts
    columns: {a: integer, ts: timestamp}
    location: data/m
    format: mqtt
    options:
"""


def parse(*options: str) -> Sources:
    return Sources.from_yaml(HEAD + "".join(f"      {o}\n" for o in options), "sources.yaml")


def test_an_mqtt_stream_is_read_as_json_from_its_ingest_log(tmp_path):
    t = parse("broker: mqtts://broker.example:8884", "topics: [plant/+/m, plant/#]", "username: u",
              "password: pw", "session_expiry: P1D", "flush_interval: PT0.5S", "batch: 100").tables[0]
    assert t.format == "json" and t.options == {}
    src = t.ingest
    assert (src.broker, src.topics, src.session_expiry, src.flush_interval, src.batch, src.tls) == (
        "mqtts://broker.example:8884", ("plant/+/m", "plant/#"), 86400, 0.5, 100, True)
    assert "pw" not in repr(t)  # the password is never shown
    assert parse("broker: mqtt://h", "topics: t").tables[0].ingest.port == 1883
    assert missing_stream_locations([t], tmp_path) == []  # the ingester makes the folder


@pytest.mark.parametrize("options, line, fragment", [
    (["broker: mqtt://h", "topics: [t]", "qos: 2"], 11, "unknown MQTT option 'qos'"),
    (["topics: [t]"], 9, "needs the option 'broker'"),
    (["broker: mqtt://h"], 9, "needs the option 'topics'"),
    (["broker: tcp://h:1883", "topics: [t]"], 9, "is not mqtt://host[:port]"),
    (["broker: mqtt://user:pw@h", "topics: [t]"], 9, "give username and password as options"),
    (["broker: mqtt://h:70000", "topics: [t]"], 9, "not between 1 and 65535"),
    (["broker: mqtt://h", "topics: [a/#/b]"], 10, "'#' stands alone as the last level"),
    (["broker: mqtt://h", "topics: [a/b+]"], 10, "'+' stands alone as a whole level"),
    (["broker: mqtt://h", "topics: [t]", "session_expiry: forever"], 11, "is not a duration"),
    (["broker: mqtt://h", "topics: [t]", "batch: 0"], 11, "between 1 and 65535"),
    (["broker: mqtt://h", "topics: [t]", "password: x"], 11, "a password needs a username"),
    (["broker: mqtt://h", "topics: [t]", "username: u", "password: x", "password_env: V"], 13, "not both"),
    (["broker: mqtt://h", "topics: [t]", "ca_file: nowhere.pem"], 11, "is not a file"),
])
def test_bad_options_are_refused_at_their_line(options, line, fragment):
    with pytest.raises(SourcesError) as e:
        parse(*options)
    assert fragment in e.value.message and e.value.location.line == line
    assert "pw@" not in e.value.message or "give username" in e.value.message


def test_a_static_table_or_a_stream_without_location_cannot_be_mqtt():
    with pytest.raises(SourcesError, match="for streams"):
        Sources.from_yaml("tables:\n  r:\n    kind: static\n    columns: {a: integer}\n    format: mqtt\n")
    with pytest.raises(SourcesError, match="needs a 'location'"):
        Sources.from_yaml(HEAD.replace("    location: data/m\n", "") + "      broker: mqtt://h\n      topics: t\n")
