"""The driver's side of a Kafka stream: the offset ranges of each micro-batch, as *segments*.

A micro-batch reads, per topic partition, one range of offsets ``[start, end)``: a **segment**, named
``kafka:<topic>/<partition>/<start>-<end>`` (zero-padded: name order is offset order).  A segment is
immutable — Kafka never changes the records at an offset — so the executor treats it exactly as it treats
a stream file: listed once (:func:`pending_inputs`), read by the micro-batch that takes it, recorded as
consumed in the query's checkpoint when that micro-batch commits (the checkpoint's ``processed``), read
again while it holds rows of open timestamps, its bad rows quarantined with its name and the offset as
``line``.  A restart after ``kill -9`` starts every partition after the last committed segment, and the
sinks drop what the uncommitted micro-batch staged: every record's answers once.

**Where a range ends.**  The driver fixes ``end`` from the records it actually fetched (the last one's
offset + 1), never from the broker's high watermark alone: the Kafka-protocol broker the tests run
(Tansu 0.6) reports a high watermark that is wrong after a multi-record batch (measured: 1 with 4 records
in the partition, 5 with 14).  It fetches until a poll brings nothing for ``poll_timeout`` or the partition
gave ``max_records``; the records are kept for the local backend's read of the same segments (one
micro-batch's worth), the Spark backend's executors read the ranges again (:mod:`obda.execution.kafka_reader`).

**The marker.**  A timestamp closes when every partition of the topic has passed it
(:meth:`obda.execution.runtime.Runtime.expect_partitions`); a partition without new rows for
``idle_timeout`` seconds is left out, as an idle stream is.
"""

from __future__ import annotations

import logging
import threading
import time

from obda.errors import BrokerError
from obda.execution.kafka_fetch import _consumer, fetch_range, parse_segment, partition_of, segment_name
from obda.model.sources import Table

log = logging.getLogger("obda.execution")
CONNECT_WAIT = 5.0  # seconds the driver waits for every partition's first answer when it fixes ranges

CHECK_TIMEOUT = 5.0  # seconds the brokers have to answer the check at a query's start


def topic_partitions(table: Table, timeout: float | None = None) -> list[int]:
    """The partitions of the stream's topic; a broker that cannot be reached, or a topic that does not exist, is a
    :class:`~obda.errors.BrokerError` at the sources file's line (never with a password)."""
    src = table.kafka
    c = _consumer(src.conf())
    try:
        try:
            md = c.list_topics(src.topic, timeout=CHECK_TIMEOUT if timeout is None else timeout)
        except Exception as e:  # noqa: BLE001 - KafkaException: the brokers did not answer
            raise BrokerError(f"stream {table.name!r}: the Kafka brokers {src.bootstrap} cannot be reached "
                              f"({_reason(e)}); start them or fix the location", src.at("location")) from None
        t = md.topics.get(src.topic)
        if t is None or t.error is not None or not t.partitions:
            raise BrokerError(f"stream {table.name!r}: the Kafka topic {src.topic!r} does not exist on {src.bootstrap} "
                              "(obda does not create it: create it, or fix the option)", src.at("topic"))
        return sorted(t.partitions)
    finally:
        c.close()


def _reason(e: BaseException) -> str:
    err = e.args[0] if getattr(e, "args", None) else e
    text = err.str() if hasattr(err, "str") else str(err)
    return text.replace("\n", " ")[:200]


class TopicFeed:
    """The driver's reader of one stream's topic: fixes the next segments (thread-safe)."""

    def __init__(self, table: Table):
        self.table = table
        self.partitions = topic_partitions(table)
        self._lock = threading.Lock()
        self._consumer = None
        self._pos: dict[int, int | None] | None = {}  # per partition: where the last listing's segments ended
        self._held: dict[int, list] = {}  # per partition: records fetched past the last listing's max_records
        self._at_end: set[int] = set()
        self._paused: set[int] = set()
        self._keep = True  # whether the held records keep their values
        self.cache: dict[str, list[tuple[int, int | None, bytes | None]]] = {}  # the last listing's records

    def pending(self, done, keep: bool = True) -> list[str]:
        """The next segment of every partition with new records, after the consumed segments ``done``; ``keep``:
        hold their records for :meth:`take` (the local backend reads them; Spark's executors fetch them)."""
        nxt: dict[int, int] = {}
        src = self.table.kafka
        for name in done:
            s = parse_segment(name)
            if s is not None and s[0] == src.topic:
                nxt[s[1]] = max(nxt.get(s[1], 0), s[3])
        with self._lock:
            try:
                got = self._fetch(nxt, keep)
            except BaseException:
                self._pos = None  # where the consumer stands is not known: the next listing assigns anew
                raise
            out, cache = [], {}
            for p, msgs in sorted(got.items()):
                start = nxt.get(p, msgs[0][0])
                name = segment_name(src.topic, p, start, msgs[-1][0] + 1)
                if keep:
                    cache[name] = msgs
                _SIZES[name] = sum(m[2] if isinstance(m[2], int) else len(m[2] or b"") for m in msgs)
                while len(_SIZES) > 10_000:
                    del _SIZES[next(iter(_SIZES))]
                out.append(name)
            self.cache = cache
        return out

    def take(self, name: str):
        """The records of a segment this feed fetched when it fixed it (None: not any more)."""
        with self._lock:
            return self.cache.get(name)

    def _fetch(self, nxt: dict[int, int], keep: bool = True) -> dict[int, list]:
        """Per partition the records from ``nxt`` on (at most ``max_records``), fetched now.

        The consumer stays assigned between listings (a new assignment costs a fetch round trip, measured up
        to 1 s with Tansu): each partition's records fetched past ``max_records`` are held for the next
        listing, which starts where this one ended unless the consumed segments say otherwise (a micro-batch
        that failed): then the consumer is assigned anew at the consumed offsets.  Without ``keep`` a record's
        value is replaced by its length (Spark's executors read the values; the driver needs the offsets)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

        src = self.table.kafka
        tps = [TopicPartition(src.topic, p) for p in self.partitions]
        fresh = (self._consumer is None or self._pos is None or keep != self._keep
                 or any(self._pos.get(p) != nxt.get(p) for p in self.partitions))
        if fresh:
            if self._consumer is None:
                self._consumer = _consumer(src.conf(), eof=True)
            else:
                self._consumer.unassign()
            self._consumer.assign([TopicPartition(src.topic, p, nxt.get(p, OFFSET_BEGINNING)) for p in self.partitions])
            self._held = {}
        c = self._consumer
        c.resume(tps)  # the partitions the last listing paused (max_records)
        got: dict[int, list] = {p: rows for p, rows in self._held.items() if rows}
        held: dict[int, list] = {}
        full = {p for p, rows in got.items() if len(rows) >= src.max_records}
        for p in full:
            got[p], held[p] = got[p][:src.max_records], got[p][src.max_records:]
        if full:
            c.pause([TopicPartition(src.topic, p) for p in full])
        if fresh:
            self._at_end = set()
        self._at_end -= self._paused  # a paused partition's end is not known (records may have come meanwhile)
        eof = self._at_end  # partitions whose last event was their end (kept between listings: the consumer
        # long-polls, so a record the broker acknowledged before this listing arrives within a poll)
        # a fresh assignment connects and fetches first: until every partition answered, wait up to CONNECT_WAIT
        deadline = time.monotonic() + max(CONNECT_WAIT, src.poll_timeout)
        first = True
        while first or len(eof | full) < len(self.partitions):
            msgs = c.consume(1000, src.poll_timeout)
            first = False
            if not msgs:
                if len(eof | full) >= len(self.partitions) or time.monotonic() > deadline:
                    break
                continue
            for m in msgs:
                err = m.error()
                p = m.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(p)
                        continue
                    raise BrokerError(f"stream {self.table.name!r}: reading Kafka topic {src.topic!r} failed "
                                      f"({err.str()})", src.at("topic"))
                if m.offset() < nxt.get(p, 0):
                    continue
                eof.discard(p)
                ts = m.timestamp()
                value = m.value()
                rec = (m.offset(), ts[1] if ts[0] else None, value if keep else len(value or b""))
                if p in full:
                    held.setdefault(p, []).append(rec)
                    continue
                rows = got.setdefault(p, [])
                rows.append(rec)
                if len(rows) >= src.max_records:
                    full.add(p)
                    c.pause([TopicPartition(src.topic, p)])
        self._held, self._paused, self._keep = held, set(full), keep
        self._pos = {p: (got[p][-1][0] + 1 if got.get(p) else nxt.get(p)) for p in self.partitions}
        return got

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
            self.cache = {}


_FEEDS: dict[tuple, TopicFeed] = {}
_SIZES: dict[str, int] = {}  # bytes of the payloads of the recently fixed segments


def segment_bytes(name: str) -> int:
    """The payload bytes of a segment this process fixed recently (0 when it does not know): what a micro-batch
    reads, for the micro-batch's sizing (spill, partitions, shared scans) as a file's size is."""
    return _SIZES.get(name, 0)

_FEEDS_LOCK = threading.Lock()


def feed(table: Table) -> TopicFeed:
    """The driver's feed of ``table`` (one per stream, topic and brokers in this process)."""
    key = (table.name, table.kafka.bootstrap, table.kafka.topic, table.kafka.client)
    with _FEEDS_LOCK:
        f = _FEEDS.get(key)
        if f is None:
            f = _FEEDS[key] = TopicFeed(table)
        return f


def pending_inputs(table: Table, base_dir, done, keep: bool = False) -> tuple[list[str], set[str]]:
    """A stream's inputs not consumed yet (``done``: the consumed ones): its new files in name order, or for a
    Kafka stream the next segment of each partition (``keep``: their records held for the local backend); and
    the consumed files the listing no longer shows (:func:`obda.execution.consumed.gone`)."""
    if table.kafka is not None:
        return feed(table).pending(done, keep), set()
    from obda.execution.consumed import gone
    from obda.execution.spark_io import list_files, resolve_location

    listed = list_files(resolve_location(table, base_dir))
    return [f for f in listed if f not in done], gone(done, listed)


def segment_messages(table: Table, name: str):
    """The records of segment ``name`` of ``table``: from the driver's fetch when it still has them, else read."""
    got = feed(table).take(name) if table.kafka is not None else None
    if got is not None:
        return got
    topic, p, start, end = parse_segment(name)
    return fetch_range(table.kafka.conf(), topic, p, start, end)


def annotate(record: dict) -> dict:
    """A quarantine record of a segment's row with its topic, partition and offset (the reader's ``line``)."""
    s = parse_segment(record.get("file") or "")
    if s is None:
        return record
    offset = record.get("line")
    where = f"Kafka topic {s[0]!r}, partition {s[1]}" + (f", offset {offset}" if offset is not None else "")
    return {**record, "reason": f"{record['reason']} [{where}]",
            "kafka": {"topic": s[0], "partition": s[1], "offset": offset}}


def attach(query) -> None:
    """At a query's start: every Kafka stream checked (brokers reachable, topic present: located errors), its
    partitions handed to the marker, its quarantine records annotated and located."""
    tables = [t for t in query.plan.stream_tables() if t.kafka is not None]
    if not tables:
        return
    for t in tables:
        f = feed(t)
        query.runtime.expect_partitions(t.name, [f"{t.kafka.topic}/{p}" for p in f.partitions], partition_of)
    from obda.execution.kafka_reader import locate_offsets

    by_name = {t.name: t for t in tables}
    query.quarantine.annotators.append(lambda r: annotate(locate_offsets(r, by_name)))
