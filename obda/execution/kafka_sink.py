"""The Kafka sink: a query's answer (or changelog) lines as records of a Kafka topic, keyed by query and position.

``KafkaSink("kafka://host:port[,host:port…]/topic[?option=value&…]", query_id)`` writes each line as one
record: the value is the line (the same JSON as every other sink's), the key ``<query id>:<n>`` with
``n`` the line's position (1-based) in the query's whole output, also in the headers ``obda-query`` and
``obda-seq``.  All lines of a query go to one partition (``partition=N``, default: a hash of the query id),
so they are in output order there.

**At least once, with a deterministic key.**  Per micro-batch (the executor's sink protocol): ``flush``
fixes the batch's lines and their positions in a staging file (``<checkpoint>/kafka-sink/``, written
atomically) and returns the last position, which the checkpoint records; ``commit`` — once that
checkpoint is on disk — sends the staged lines, waits until the broker has acknowledged every one
(``acks=all``, idempotent producer: no repeat from the client's own retries) and deletes the staging
file.  On restart ``recover`` deletes staged batches the checkpoint does not cover (they are computed
again) and sends again those it covers.  So a crash between the broker's acknowledgement and the
deletion of the staging file sends lines again — **with the same key and the same value**: a consumer
that keeps the first record of each key reads every line exactly once.  obda does not use Kafka
transactions: the only Kafka-protocol broker installable here (Tansu 0.6, from PyPI) accepts them but
shows aborted records to ``read_committed`` consumers, so an exactly-once claim could not be tested.

Options (the URL's query): ``partition``, ``timeout`` (seconds to wait for acknowledgements, default 30),
and librdkafka client settings passed through as they are (a name with a dot: ``security.protocol``,
``sasl.mechanisms``, ``sasl.username``, ``ssl.ca.location``, …); ``<setting>_env=VAR`` takes a value
(a password) from the environment.  Values of settings are never logged nor part of an error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import zlib
from pathlib import Path
from urllib.parse import parse_qsl

from obda.errors import BrokerError
from obda.execution.checkpoint import fsync_path
from obda.execution.sinks import Sink

_URL = re.compile(r"^kafka:/{1,2}(?P<servers>[^/?#]+)/(?P<topic>[A-Za-z0-9._-]{1,249})/?(?:\?(?P<query>.*))?$")
_HOST = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$")
_STAGED = re.compile(r"^([0-9]{12})-([0-9]{12})\.jsonl$")
OWN_OPTIONS = ("partition", "timeout")
log = logging.getLogger("obda.execution.kafka")


def is_kafka_url(target) -> bool:
    return str(target).startswith("kafka:/")


def parse_kafka_url(url: str) -> tuple[str, str, dict, dict]:
    """``(bootstrap servers, topic, obda's options, client settings)`` of a sink URL; BrokerError when malformed."""
    m = _URL.match(str(url))
    if m is None:
        raise BrokerError(f"{_safe(url)} is not a Kafka output: write kafka://host:port/topic "
                          "(host:port,host:port for several brokers)")
    servers = m.group("servers")
    for s in servers.split(","):
        if not _HOST.match(s):
            raise BrokerError(f"kafka output: {s!r} is not host:port")
    own, client = {}, {}
    for k, v in parse_qsl(m.group("query") or "", keep_blank_values=True, strict_parsing=False):
        if k in OWN_OPTIONS:
            if not re.fullmatch(r"[0-9]+", v) or (k == "timeout" and int(v) == 0):
                raise BrokerError(f"kafka output: {k} must be a whole number{' above 0' if k == 'timeout' else ''}")
            own[k] = int(v)
        elif k.endswith("_env") and "." in k:
            if v not in os.environ:
                raise BrokerError(f"kafka output: the environment variable {v!r} ({k}) is not set")
            client[k[:-4]] = os.environ[v]
        elif "." in k:
            client[k] = v
        else:
            raise BrokerError(f"kafka output: unknown option {k!r} (obda's: {', '.join(OWN_OPTIONS)}; a client "
                              "setting has a dot in its name, e.g. security.protocol)")
    return servers, m.group("topic"), own, client


def _safe(url) -> str:
    """A URL as an error shows it: without its query (which may hold credentials)."""
    return repr(str(url).split("?", 1)[0])


class KafkaSink(Sink):
    """Answer lines to a Kafka topic, at least once with a deterministic key (see the module)."""

    def __init__(self, url: str, query_id: str, stage_dir: str | os.PathLike | None = None):
        from confluent_kafka import Producer

        self.url = re.sub(r"^kafka:/+", "kafka://", str(url))  # a Path-typed CLI option keeps one slash
        self.servers, self.topic, own, client = parse_kafka_url(url)
        self.query_id = query_id
        self.timeout = own.get("timeout", 30)
        self.stage = Path(stage_dir) if stage_dir is not None else None
        self._memory: dict[str, list[str]] = {}  # staged batches without a staging folder (no checkpoint)
        self._pending: list[str] = []
        self._seq = 0  # position of the last line staged
        self._errors: list[str] = []
        self.sent = 0  # records the broker acknowledged (this process)
        conf = {**client, "bootstrap.servers": self.servers, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "allow.auto.create.topics": False, "error_cb": self._error, "logger": log}
        self._reachable()
        self._producer = Producer(conf)
        md = self._metadata()
        partitions = len(md.topics[self.topic].partitions)
        self.partition = own.get("partition", zlib.crc32(query_id.encode("utf-8")) % partitions)
        if self.partition >= partitions:
            raise BrokerError(f"kafka output {_safe(url)}: topic {self.topic!r} has {partitions} partition(s); "
                              f"partition {self.partition} does not exist")

    def _error(self, err) -> None:
        self._errors.append(str(err))

    def _reachable(self) -> None:
        """Fail fast (not after the metadata timeout) when no bootstrap server accepts a connection."""
        why = None
        for s in self.servers.split(","):
            host, port = s.rsplit(":", 1)
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
                return
            except OSError as e:
                why = e.strerror or str(e)
        raise BrokerError(f"kafka output {_safe(self.url)}: cannot reach the brokers {self.servers} ({why}); "
                          "start them or fix the URL")

    def _metadata(self):
        from confluent_kafka import KafkaException

        try:
            md = self._producer.list_topics(self.topic, timeout=min(self.timeout, 10))
        except KafkaException as e:
            raise BrokerError(f"kafka output {_safe(self.url)}: cannot reach the brokers {self.servers} "
                              f"({e.args[0].str() if e.args else e}); start them or fix the URL") from None
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            raise BrokerError(f"kafka output {_safe(self.url)}: topic {self.topic!r} does not exist on "
                              f"{self.servers}" + (f" ({t.error.str()})" if t is not None and t.error else "")
                              + "; create it (obda does not create topics)")
        return md

    # -- the sink protocol ----------------------------------------------------------------------
    def write_lines(self, lines: list[str]) -> None:
        self._pending.extend(lines)

    def flush(self):
        if self._pending:
            first, last = self._seq + 1, self._seq + len(self._pending)
            name = f"{first:012d}-{last:012d}.jsonl"
            if self.stage is None:
                self._memory[name] = self._pending
            else:
                self.stage.mkdir(parents=True, exist_ok=True)
                tmp = self.stage / f".{name}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write("".join(line + "\n" for line in self._pending))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.stage / name)
                fsync_path(self.stage)
            self._seq, self._pending = last, []
        return self._seq

    def commit(self, offset) -> None:
        self._send(offset or 0)

    def recover(self, offset) -> None:
        offset = offset or 0
        self._pending = []
        for name in self._staged():
            if int(_STAGED.match(name).group(1)) > offset:  # a batch the checkpoint does not have: computed again
                self._drop(name)
        self._seq = offset
        self._send(offset)  # batches the checkpoint has, not known to be sent: sent (again)

    def close(self) -> None:
        self._producer.flush(self.timeout)

    # -- staging and sending --------------------------------------------------------------------
    def _staged(self) -> list[str]:
        if self.stage is None:
            return sorted(self._memory)
        if not self.stage.is_dir():
            return []
        return sorted(p.name for p in self.stage.iterdir() if _STAGED.match(p.name))

    def _lines(self, name: str) -> list[str]:
        if self.stage is None:
            return self._memory[name]
        return (self.stage / name).read_text(encoding="utf-8").splitlines()

    def _drop(self, name: str) -> None:
        if self.stage is None:
            del self._memory[name]
        else:
            (self.stage / name).unlink()

    def _send(self, upto: int) -> None:
        for name in self._staged():
            first, last = (int(x) for x in _STAGED.match(name).groups())
            if last > upto:
                continue
            failed: list[str] = []

            def delivered(err, msg):
                if err is not None:
                    failed.append(err.str())
                else:
                    self.sent += 1

            for seq, line in enumerate(self._lines(name), first):
                key = f"{self.query_id}:{seq}"
                self._producer.produce(self.topic, value=line.encode("utf-8"), key=key.encode("utf-8"),
                                       partition=self.partition, on_delivery=delivered,
                                       headers=[("obda-query", self.query_id.encode("utf-8")),
                                                ("obda-seq", str(seq).encode())])
                self._producer.poll(0)
            left = self._producer.flush(self.timeout)
            if failed or left:
                why = failed[0] if failed else (f"{left} record(s) not acknowledged within {self.timeout} s"
                                                + (f": {self._errors[-1]}" if self._errors else ""))
                raise BrokerError(f"kafka output {_safe(self.url)}: lines {first}..{last} of query "
                                  f"{self.query_id!r} were not delivered ({why}); they are kept and sent again "
                                  "when the query resumes from its checkpoint")
            self._drop(name)


def read_topic(servers: str, topic: str, timeout: float = 10.0) -> list[tuple[str, str]]:
    """Every record of ``topic`` as (key, value) text, partition by partition (for tests and checks)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": servers, "group.id": f"obda-read-{os.getpid()}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        md = c.list_topics(topic, timeout=timeout)
        c.assign([TopicPartition(topic, p, 0) for p in sorted(md.topics[topic].partitions)])
        out: dict[int, list] = {}
        while True:  # to the end: a poll that brings nothing (never the end offsets alone)
            m = c.poll(1.0)
            if m is None:
                break
            if m.error() is None:
                out.setdefault(m.partition(), []).append((m.key().decode("utf-8"), m.value().decode("utf-8")))
        return [r for p in sorted(out) for r in out[p]]
    finally:
        c.close()


def first_of_each_key(records: list[tuple[str, str]]) -> list[str]:
    """What a consumer that drops repeats reads: the value of each key's first record, in record order."""
    seen, out = set(), []
    for k, v in records:
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def answer_records(records: list[tuple[str, str]], query_id: str) -> list[dict]:
    """A query's lines from ``read_topic``'s records, repeats dropped, as JSON."""
    mine = [(k, v) for k, v in records if k.rsplit(":", 1)[0] == query_id]
    return [json.loads(v) for v in first_of_each_key(mine)]
