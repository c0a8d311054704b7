"""An MQTT stream of the sources file: its broker, topic filters, session and credentials, checked with locations.

A stream with ``format: mqtt`` is read from a durable ingest log that obda keeps under the stream's
``location`` (:mod:`obda.execution.mqtt_ingest`): JSON-lines part files, so the executor reads it as a
``json`` stream.  The sources file says where the messages come from::

    measurement:
      kind: stream
      timestamp: ts
      columns: {sensor_id: integer, value: integer, ts: timestamp}
      location: data/measurement          # the ingest log (created when missing)
      format: mqtt
      options:
        broker: mqtt://127.0.0.1:1883      # mqtts://host:8883 for TLS
        topics: [plant/+/measurement]      # topic filters (+ one level, # the rest)
        username: obda                     # optional; password or password_env (an environment variable)
        password_env: OBDA_MQTT_PASSWORD
        ca_file: certs/ca.pem              # optional TLS files, relative to the sources file
        session_expiry: P7D                # how long the broker keeps the session while obda is down
        client_id: obda-measurement        # default: derived from the log folder
        flush_interval: PT0.1S             # how long a received message may wait to be landed
        batch: 500                         # at most this many messages per part file (and unacknowledged)

Every error is a :class:`~obda.errors.SourcesError` located at the option's line; a password is never
part of a message (nor of ``repr``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from obda.errors import Location, SourcesError
from obda.model.constraints import parse_duration

#: every option an MQTT stream takes (anything else is refused, with this list)
OPTIONS = ("broker", "topics", "client_id", "session_expiry", "username", "password", "password_env",
           "ca_file", "cert_file", "key_file", "flush_interval", "batch", "keepalive")
DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}
_BROKER = re.compile(r"^(mqtts?)://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?/?$")
MAX_EXPIRY_SECONDS = 0xFFFFFFFE  # MQTT 5's largest session expiry short of "never"


@dataclass(frozen=True)
class MqttSource:
    """Where an MQTT stream's messages come from (all checked), and where each option was written."""

    scheme: str
    host: str
    port: int
    topics: tuple[str, ...]
    client_id: str | None = None
    session_expiry: int = 7 * 86400  # seconds
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_env: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    flush_interval: float = 0.1  # seconds
    batch: int = 500
    keepalive: int = 30  # seconds
    locations: dict = field(default_factory=dict, compare=False, repr=False)  # option -> Location

    @property
    def broker(self) -> str:
        """The broker as the sources file names it (no credentials: they are options of their own)."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def tls(self) -> bool:
        return self.scheme == "mqtts" or any((self.ca_file, self.cert_file, self.key_file))

    def at(self, option: str) -> Location:
        """Where ``option`` is written in the sources file (the table's options when it is not)."""
        return self.locations.get(option) or self.locations.get("", Location())


def _loc(file: str | None, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def check_topic_filter(text: str) -> str | None:
    """Why ``text`` is not an MQTT topic filter (None: it is one)."""
    if not text:
        return "a topic filter is not empty"
    if "\x00" in text:
        return "a topic filter holds no NUL character"
    if len(text.encode("utf-8")) > 65535:
        return "a topic filter is at most 65535 bytes"
    levels = text.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return "'#' stands alone as the last level (sensors/#)"
        if "+" in level and level != "+":
            return "'+' stands alone as a whole level (sensors/+/value)"
    return None


def parse_mqtt_options(table: str, node: yaml.Node | None, file: str | None, at: Location) -> MqttSource:
    """The ``options:`` of an MQTT stream ``table`` (``node``: its YAML mapping; ``at``: the table's location)."""
    if node is None:
        raise SourcesError(f"stream {table!r}: format 'mqtt' needs options: broker (mqtt://host:1883) and topics "
                           "(a list of topic filters)", at)
    if not isinstance(node, yaml.MappingNode):
        raise SourcesError(f"options of stream {table!r} must be a mapping (key: value)", _loc(file, node))
    fields: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for k, v in node.value:
        key = str(k.value)
        if key not in OPTIONS:
            raise SourcesError(f"stream {table!r}: unknown MQTT option {key!r} (allowed: {', '.join(OPTIONS)})",
                               _loc(file, k))
        fields[key] = (k, v)
    locations = {"": _loc(file, node), **{key: _loc(file, v) for key, (_, v) in fields.items()}}

    def scalar(key: str) -> str | None:
        if key not in fields:
            return None
        v = fields[key][1]
        if not isinstance(v, yaml.ScalarNode) or v.value == "":
            raise SourcesError(f"stream {table!r}: MQTT option {key!r} takes one value", locations[key])
        return str(v.value)

    for key in ("broker", "topics"):
        if key not in fields:
            raise SourcesError(f"stream {table!r}: format 'mqtt' needs the option {key!r} "
                               f"({'mqtt://host:1883' if key == 'broker' else 'a list of topic filters'})",
                               locations[""])
    broker = scalar("broker")
    m = _BROKER.match(broker)
    if m is None:
        raise SourcesError(f"stream {table!r}: broker {broker!r} is not mqtt://host[:port] or mqtts://host[:port] "
                           "(give username and password as options of their own)", locations["broker"])
    scheme, host, port = m.group(1), m.group(2).strip("[]"), int(m.group(3) or DEFAULT_PORTS[m.group(1)])
    if not 0 < port < 65536:
        raise SourcesError(f"stream {table!r}: broker port {port} is not between 1 and 65535", locations["broker"])
    tnode = fields["topics"][1]
    items = tnode.value if isinstance(tnode, yaml.SequenceNode) else [tnode]
    topics: list[str] = []
    for item in items:
        if not isinstance(item, yaml.ScalarNode):
            raise SourcesError(f"stream {table!r}: topics is a list of topic filters", _loc(file, item))
        why = check_topic_filter(str(item.value))
        if why:
            raise SourcesError(f"stream {table!r}: topic filter {item.value!r}: {why}", _loc(file, item))
        if str(item.value) not in topics:
            topics.append(str(item.value))
    if not topics:
        raise SourcesError(f"stream {table!r}: topics names no topic filter", locations["topics"])

    def duration(key: str, default: float, low: float, high: float) -> float:
        text = scalar(key)
        if text is None:
            return default
        us = parse_duration(text)
        if us is None or not low <= us / 1e6 <= high:
            raise SourcesError(f"stream {table!r}: {key} {text!r} is not a duration between {low:g} s and {high:g} s "
                               "(an xsd:dayTimeDuration such as PT0.1S, PT1H or P7D)", locations[key])
        return us / 1e6

    def integer(key: str, default: int, low: int, high: int) -> int:
        text = scalar(key)
        if text is None:
            return default
        if not re.fullmatch(r"[0-9]+", text) or not low <= int(text) <= high:
            raise SourcesError(f"stream {table!r}: {key} {text!r} is not a whole number between {low} and {high}",
                               locations[key])
        return int(text)

    def path(key: str) -> str | None:
        text = scalar(key)
        if text is None:
            return None
        p = Path(text)
        if not p.is_absolute() and file:
            p = Path(file).parent / p
        if not p.is_file():
            raise SourcesError(f"stream {table!r}: {key} {text!r} ({p}) is not a file", locations[key])
        return str(p)

    password, password_env = scalar("password"), scalar("password_env")
    if password is not None and password_env is not None:
        raise SourcesError(f"stream {table!r}: give password or password_env (the name of an environment variable "
                           "holding it), not both", locations["password_env"])
    if (password is not None or password_env is not None) and "username" not in fields:
        raise SourcesError(f"stream {table!r}: a password needs a username",
                           locations["password" if password is not None else "password_env"])
    if "key_file" in fields and "cert_file" not in fields:
        raise SourcesError(f"stream {table!r}: key_file is the key of a client certificate: give cert_file too",
                           locations["key_file"])
    client_id = scalar("client_id")
    if client_id is not None and (len(client_id.encode("utf-8")) > 65535 or "\x00" in client_id):
        raise SourcesError(f"stream {table!r}: client_id is at most 65535 bytes, without NUL", locations["client_id"])
    return MqttSource(
        scheme=scheme, host=host, port=port, topics=tuple(topics), client_id=client_id,
        session_expiry=int(duration("session_expiry", 7 * 86400, 1, MAX_EXPIRY_SECONDS)),
        username=scalar("username"), password=password, password_env=password_env,
        ca_file=path("ca_file"), cert_file=path("cert_file"), key_file=path("key_file"),
        flush_interval=duration("flush_interval", 0.1, 0.001, 60),
        batch=integer("batch", 500, 1, 65535), keepalive=integer("keepalive", 30, 5, 65535),
        locations=locations,
    )
