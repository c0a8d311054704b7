"""A Kafka stream of the sources file: its brokers, topic, payload format, time and client settings, checked.

A stream with ``format: kafka`` is read from a Kafka topic (any broker speaking the Kafka protocol).  Per
micro-batch the driver fixes an offset range per topic partition and the executors read those ranges
(:mod:`obda.execution.kafka_offsets`, :mod:`obda.execution.kafka_reader`)::

    measurement:
      kind: stream
      timestamp: ts
      columns: {sensor_id: integer, value: integer, ts: timestamp}
      format: kafka
      location: broker1:9092,broker2:9092     # the bootstrap servers
      options:
        topic: plant.measurements
        payload: json                          # json (one object per record) or csv (the columns in declared order)
        time: payload                          # payload: the timestamp column is a payload field; record: the
                                               # record's own timestamp
        max_records: 100000                    # per partition and micro-batch
        poll_timeout: PT0.2S                   # how long the driver waits for more records when it fixes a range
        security.protocol: SASL_SSL            # client settings passed to librdkafka as they are (below)
        sasl.mechanism: PLAIN
        sasl.username: obda
        sasl.password_env: OBDA_KAFKA_PASSWORD # or sasl.password (never logged, never part of an error)
        ssl.ca.location: certs/ca.pem          # relative to the sources file

Every error is a :class:`~obda.errors.SourcesError` located at the option's line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from obda.errors import Location, SourcesError
from obda.model.constraints import parse_duration

#: settings handed to the Kafka client (librdkafka's names) as written
CLIENT_OPTIONS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.key.password",
                  "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "client.id")
SECRET_OPTIONS = ("sasl.password", "ssl.key.password")
FILE_OPTIONS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
OPTIONS = ("topic", "payload", "time", "max_records", "poll_timeout", "sasl.password_env", *CLIENT_OPTIONS)
PAYLOADS = ("json", "csv")
TIMES = ("payload", "record")
_SERVER = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class KafkaSource:
    """Where a Kafka stream's records come from (all checked), and where each option was written."""

    bootstrap: str
    topic: str
    payload: str = "json"
    time: str = "payload"
    max_records: int = 100_000
    poll_timeout: float = 0.2  # seconds
    client: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # librdkafka settings (secrets among them)
    password_env: str | None = None
    locations: dict = field(default_factory=dict, compare=False, repr=False)  # option -> Location

    def at(self, option: str) -> Location:
        """Where ``option`` is written in the sources file (the table's options when it is not)."""
        return self.locations.get(option) or self.locations.get("", Location())

    def conf(self) -> dict[str, str]:
        """The client's settings: the bootstrap servers and the passed-through options (a password from its
        environment variable, read now)."""
        out = {"bootstrap.servers": self.bootstrap, **dict(self.client)}
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise SourcesError(f"Kafka option sasl.password_env: the environment variable {self.password_env!r} "
                                   "is not set", self.at("sasl.password_env"))
            out["sasl.password"] = value
        return out


def _loc(file: str | None, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def parse_bootstrap(table: str, text: str, at: Location) -> str:
    """``host:port,host:port`` checked (the stream's ``location``)."""
    servers = [s.strip() for s in text.split(",")]
    for s in servers:
        m = _SERVER.match(s)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise SourcesError(f"stream {table!r}: location {text!r} is not a list of Kafka bootstrap servers "
                               f"host:port[,host:port…] ({s!r} is not host:port with a port 1–65535)", at)
    return ",".join(servers)


def parse_kafka_options(table: str, node: yaml.Node | None, file: str | None, at: Location, bootstrap: str,
                        bootstrap_at: Location) -> KafkaSource:
    """The ``options:`` of a Kafka stream ``table`` (``node``: its YAML mapping; ``at``: the format's location)."""
    if node is None:
        raise SourcesError(f"stream {table!r}: format 'kafka' needs options: topic (the topic to read)", at)
    if not isinstance(node, yaml.MappingNode):
        raise SourcesError(f"options of stream {table!r} must be a mapping (key: value)", _loc(file, node))
    fields: dict[str, yaml.Node] = {}
    for k, v in node.value:
        key = str(k.value)
        if key not in OPTIONS:
            raise SourcesError(f"stream {table!r}: unknown Kafka option {key!r} (allowed: {', '.join(OPTIONS)})",
                               _loc(file, k))
        fields[key] = v
    locations = {"": _loc(file, node), "location": bootstrap_at, **{k: _loc(file, v) for k, v in fields.items()}}

    def scalar(key: str) -> str | None:
        if key not in fields:
            return None
        v = fields[key]
        if not isinstance(v, yaml.ScalarNode) or v.value == "":
            raise SourcesError(f"stream {table!r}: Kafka option {key!r} takes one value", locations[key])
        return str(v.value)

    topic = scalar("topic")
    if topic is None:
        raise SourcesError(f"stream {table!r}: format 'kafka' needs the option 'topic'", locations[""])
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise SourcesError(f"stream {table!r}: topic {topic!r} is not a Kafka topic name (1–249 characters of "
                           "letters, digits, '.', '_' and '-')", locations["topic"])

    def choice(key: str, allowed: tuple[str, ...]) -> str:
        text = (scalar(key) or allowed[0]).lower()
        if text not in allowed:
            raise SourcesError(f"stream {table!r}: {key} {text!r} is not one of {', '.join(allowed)}", locations[key])
        return text

    max_records = scalar("max_records") or "100000"
    if not re.fullmatch(r"[0-9]+", max_records) or not 1 <= int(max_records) <= 10_000_000:
        raise SourcesError(f"stream {table!r}: max_records {max_records!r} is not a whole number between 1 and "
                           "10000000", locations.get("max_records", locations[""]))
    poll = 0.2
    if "poll_timeout" in fields:
        us = parse_duration(scalar("poll_timeout"))
        if us is None or not 0.001 <= us / 1e6 <= 60:
            raise SourcesError(f"stream {table!r}: poll_timeout {scalar('poll_timeout')!r} is not a duration between "
                               "0.001 s and 60 s (an xsd:dayTimeDuration such as PT0.2S)", locations["poll_timeout"])
        poll = us / 1e6
    client = []
    for key in CLIENT_OPTIONS:
        text = scalar(key)
        if text is None:
            continue
        if key in FILE_OPTIONS:
            p = Path(text)
            if not p.is_absolute() and file:
                p = Path(file).parent / p
            if not p.is_file():
                raise SourcesError(f"stream {table!r}: {key} {text!r} ({p}) is not a file", locations[key])
            text = str(p)
        client.append((key, text))
    password_env = scalar("sasl.password_env")
    if password_env is not None and "sasl.password" in fields:
        raise SourcesError(f"stream {table!r}: give sasl.password or sasl.password_env (the name of an environment "
                           "variable holding it), not both", locations["sasl.password_env"])
    if (password_env is not None or "sasl.password" in fields) and "sasl.username" not in fields:
        raise SourcesError(f"stream {table!r}: a password needs sasl.username",
                           locations["sasl.password" if "sasl.password" in fields else "sasl.password_env"])
    return KafkaSource(bootstrap=bootstrap, topic=topic, payload=choice("payload", PAYLOADS),
                       time=choice("time", TIMES), max_records=int(max_records), poll_timeout=poll,
                       client=tuple(client), password_env=password_env, locations=locations)
