"""Reading Kafka offset ranges: what the executors run (:class:`KafkaSegments`, a Python data source) and the
driver's clients (:mod:`obda.execution.kafka_offsets`, :mod:`obda.execution.kafka_reader`).

Self-contained on purpose: no obda module is imported at module level, and the module is pickled *by value*
into the executors' Python workers (:func:`source_class`), so a worker that reads a range imports
``confluent_kafka`` and ``pyarrow`` only — not ``obda.execution``, whose import costs about a second per
worker (measured: 1.6 s vs 0.3 s).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time

FORMAT = "obda_kafka_segments"  # the Python data source's name
EMPTY = b'""'  # an empty payload reads as this text (as an MQTT stream's ingest log lands one): a malformed row
_EPOCH = dt.datetime(1970, 1, 1)


def record_time(ms: int | None) -> str | None:
    """A record timestamp (ms since the epoch) as the ISO text the reader types."""
    if ms is None or ms < 0:
        return None
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds") + "Z"


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", errors="replace")


_SEGMENT = re.compile(r"^kafka:([A-Za-z0-9._-]+)/([0-9]+)/([0-9]+)-([0-9]+)$")
READ_TIMEOUT = 60.0  # seconds a read of a fixed range may wait for its records before it fails


def segment_name(topic: str, partition: int, start: int, end: int) -> str:
    return f"kafka:{topic}/{partition:05d}/{start:020d}-{end:020d}"


def parse_segment(name: str) -> tuple[str, int, int, int] | None:
    """``(topic, partition, start, end)`` of a segment name (None: not a segment)."""
    m = _SEGMENT.match(name)
    return None if m is None else (m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))


def is_segment(name: str) -> bool:
    return name.startswith("kafka:") and _SEGMENT.match(name) is not None


def partition_of(name: str) -> str | None:
    """The topic partition a segment reads (``topic/partition``), None for a file."""
    s = parse_segment(name)
    return None if s is None else f"{s[0]}/{s[1]}"


def _consumer(conf: dict, eof: bool = False):
    from confluent_kafka import Consumer

    return Consumer({**conf, "group.id": "obda-reader", "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "auto.offset.reset": "earliest", "enable.partition.eof": eof, "logger": _quiet(),
                     # a range is fixed or read now: the broker answers a fetch at once, not after 500 ms of waiting
                     # for more bytes (librdkafka's default; measured 0.25 s per listing with it)
                     "fetch.wait.max.ms": 10, "fetch.error.backoff.ms": 10, "fetch.queue.backoff.ms": 10,
                     # what the client prefetches per partition (librdkafka's default: 64 MiB) bounds its memory
                     "queued.max.messages.kbytes": 8192})


def _quiet() -> logging.Logger:
    """librdkafka's log lines (connection refused, retries) are not the user's: obda reports its own errors."""
    q = logging.getLogger("obda.kafka.client")
    q.setLevel(logging.CRITICAL)
    q.propagate = False
    return q


def fetch_range(conf: dict, topic: str, partition: int, start: int, end: int, timeout: float = READ_TIMEOUT):
    """The records ``(offset, timestamp ms or None, value)`` of a fixed range ``[start, end)``, in offset order."""
    from confluent_kafka import TopicPartition

    c = _consumer(conf)
    out = []
    try:
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        last = start - 1
        while last < end - 1:
            if time.monotonic() > deadline:
                from obda.errors import BrokerError

                raise BrokerError(f"Kafka topic {topic!r}, partition {partition}: offsets {last + 1}..{end - 1} could "
                                  f"not be read within {timeout:g} s (deleted by the topic's retention, or the brokers "
                                  "are down); the micro-batch is not committed")
            for m in c.consume(1000, 0.01):  # (consume waits its timeout unless all 1000 came)
                if m.error() is not None or m.offset() < start:
                    continue
                if m.offset() >= end:
                    last = end
                    break
                ts = m.timestamp()
                out.append((m.offset(), ts[1] if ts[0] else None, m.value()))
                last = m.offset()
    finally:
        c.close()
    return out


def source_class():
    """The Python data source of Kafka ranges (its module pickled by value: see the module docstring)."""
    import sys

    from pyspark import cloudpickle
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    class _Reader(DataSourceReader):
        def __init__(self, options):
            self.segments = json.loads(options["segments"])
            self.conf = json.loads(options["kafka.password.conf"])  # (Spark redacts options named *password*)

        def partitions(self):
            return [InputPartition(s) for s in self.segments]

        def read(self, partition):
            import pyarrow as pa

            name = partition.value
            topic, p, start, end = parse_segment(name)
            rows = fetch_range(self.conf, topic, p, start, end)
            for i in range(0, len(rows), 10_000):
                chunk = rows[i:i + 10_000]
                yield pa.RecordBatch.from_pydict({
                    "__file": [name] * len(chunk), "__offset": [r[0] for r in chunk],
                    "__rts": [record_time(r[1]) for r in chunk], "value": [_text(r[2] or EMPTY) for r in chunk]},
                    schema=pa.schema([("__file", pa.string()), ("__offset", pa.int64()), ("__rts", pa.string()),
                                      ("value", pa.string())]))

    class KafkaSegments(DataSource):
        """Kafka offset ranges as rows ``(__file, __offset, __rts, value)``: one input partition per segment."""

        @classmethod
        def name(cls):
            return FORMAT

        def schema(self):
            return "__file string, __offset bigint, __rts string, value string"

        def reader(self, schema):
            return _Reader(self.options)

    return KafkaSegments
