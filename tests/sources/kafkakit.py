"""Shared by the Kafka source tests: a stream over a topic of a real broker (Tansu on 127.0.0.1), rows interleaved in
time across partitions, and the same rows as files."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, MemorySink
from obda.model.sources_file import load_sources

COLUMNS = "{a: integer, b: integer, ts: timestamp}"
#: a same-timestamp join across partitions: a timestamp closed before a partition's row of it arrived loses answers
SQL = "SELECT m.a AS a, n.a AS c FROM s AS m, s AS n WHERE m.ts = n.ts AND m.b = n.b AND m.a < n.a"


def kafka_sources(tmp: Path, bootstrap: str, topic: str, extra: str = "") -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "sources.yaml"
    path.write_text("tables:\n  s:\n    kind: stream\n    timestamp: ts\n"
                    f"    columns: {COLUMNS}\n    format: kafka\n    location: {bootstrap}\n"
                    f"    options:\n      topic: {topic}\n      poll_timeout: PT0.02S\n{extra}")
    return path


def file_sources(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "data" / "s").mkdir(parents=True, exist_ok=True)
    path = tmp / "sources.yaml"
    path.write_text(f"tables:\n  s:\n    kind: stream\n    timestamp: ts\n    columns: {COLUMNS}\n"
                    "    location: data/s\n    format: json\n")
    return path


def interleaved(seed: int, n: int, partitions: int = 3) -> list[tuple[int, dict]]:
    """``(partition, row)`` in time order: each partition's rows in time order, the partitions interleaved."""
    rnd = random.Random(seed)
    out, t = [], 0
    for i in range(n):
        t += rnd.choice((0, 0, 1, 1, 2))
        row = {"a": i, "b": rnd.randint(0, 3), "ts": f"2024-01-01T{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z"}
        out.append((rnd.randrange(partitions), row))
    return out


def produce(bootstrap: str, topic: str, items) -> None:
    """``(partition, row or raw bytes)`` to ``topic``, acknowledged by the broker."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": _quiet()})
    for part, row in items:
        p.produce(topic, row if isinstance(row, bytes) else json.dumps(row).encode(), partition=part)
    assert p.flush(30) == 0


def _quiet():
    import logging

    q = logging.getLogger("kafkakit.quiet")
    q.setLevel(logging.CRITICAL)
    return q


def query(sources: Path, base: Path, backend: str = "local", spark=None, **kw) -> ContinuousQuery:
    plan = plan_execution(SQL, load_sources(sources), None)
    return ContinuousQuery(plan, base_dir=base, backend=backend, spark=spark, sink=MemorySink(),
                           allow_unbounded=True, **kw)


def answers(lines) -> Counter:
    return Counter((x["emitted_at"], x["binding"]["a"], x["binding"]["c"]) for x in lines)


def file_answers(tmp: Path, rows: list[dict]) -> Counter:
    """The query over ``rows`` as one JSON-lines file, run to the end on the local backend."""
    src = file_sources(tmp)
    (tmp / "data" / "s" / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    q = query(src, tmp)
    q.run_until_exhausted()
    out = answers(q.sink.drain())
    q.close()
    return out


def upto(counter: Counter, closed: int | None) -> Counter:
    """The answers of ``counter`` at timestamps up to ``closed`` (µs since the epoch; None: none closed)."""
    import datetime as dt

    def us(text: str) -> int:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return int(t.timestamp()) * 1_000_000 + t.microsecond

    return Counter({k: v for k, v in counter.items() if closed is not None and us(k[0]) <= closed})
