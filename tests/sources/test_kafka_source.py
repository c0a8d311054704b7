"""The Kafka source (issue 28, item 1) against a real Kafka-protocol broker (Tansu) on 127.0.0.1.

Differential: a query over a topic of 3 partitions, rows interleaved in time across partitions, produced in random
chunks between micro-batches (random cuts, random ``max_records``), answers after every closed timestamp what the
same query answers over the same rows from a file — 3 seeds by default (local backend), 20 slow-marked on each
backend (on Spark by default: the bad records, compared with the local backend's, and the shared scan).
Bad records are quarantined with topic, partition and offset and the query goes on; a broker that cannot be
reached and a topic that does not exist are located errors at start."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from brokers import free_port, running_tansu
from sources.kafkakit import answers, file_answers, interleaved, kafka_sources, produce, query, upto
from obda.errors import BrokerError
from obda.execution.rows import micros_to_iso


@pytest.fixture(scope="module")
def tansu():
    yield from running_tansu()


def differential(tmp, tansu, seed: int, backend: str = "local", spark=None, n: int = 240, chunk: int = 60) -> None:
    rnd = random.Random(seed)
    topic = f"diff-{backend}-{seed}"
    tansu.create_topic(topic, partitions=3)
    items = interleaved(seed, n)
    expected = file_answers(tmp / "files", [r for _, r in items])
    assert sum(expected.values()) >= 10  # the join answers across partitions
    src = kafka_sources(tmp / "kafka", tansu.bootstrap, topic, f"      max_records: {rnd.choice((3, 10, 50, 1000))}\n")
    q = query(src, tmp / "kafka", backend, spark)
    got: Counter = Counter()
    sent = 0
    while sent < len(items):
        size = rnd.randint(1, chunk)
        produce(tansu.bootstrap, topic, items[sent:sent + size])
        sent += size
        q.step()
        got += answers(q.sink.drain())
        closed = q.runtime.closed_upto
        assert got == upto(expected, closed), f"after closing {micros_to_iso(closed)}"
    q.run_until_exhausted()
    got += answers(q.sink.drain())
    m = q.metrics
    q.close()
    assert m.late == 0 and m.invalid == 0
    assert m.rows_in["s"] == len(items)
    assert got == expected


@pytest.mark.parametrize("seed", [0, 1, 2] + [pytest.param(s, marks=pytest.mark.slow) for s in range(3, 20)])
def test_kafka_stream_over_three_partitions_answers_as_the_same_rows_from_files(tmp_path, tansu, seed):
    differential(tmp_path, tansu, seed)


@pytest.mark.spark
@pytest.mark.slow  # about 25 s a seed here; the default run reads Kafka on Spark in the two tests below
@pytest.mark.parametrize("seed", range(20))
def test_kafka_stream_on_spark_answers_as_the_same_rows_from_files(tmp_path, tansu, spark, seed):
    # a Spark micro-batch costs seconds here (Python workers read the ranges): fewer, larger cuts
    differential(tmp_path, tansu, 100 + seed, "spark", spark, n=60, chunk=60)


BAD = [b"not json", b'{"a": 1, "b": 1}', b'{"a": "x", "b": 1, "ts": "2024-01-01T00:00:09Z"}',
       b'{"a": 7, "b": 1, "ts": "2023-12-31T00:00:00Z"}', b"", b"[1, 2]"]


def bad_records(tmp, tansu, backend: str, spark=None, topic: str = "bad"):
    topic = f"{topic}-{backend}"
    tansu.create_topic(topic, partitions=2)
    good = [(0, {"a": i, "b": 1, "ts": f"2024-01-01T00:00:{i:02d}Z"}) for i in range(10)]
    good += [(1, {"a": 100 + i, "b": 1, "ts": f"2024-01-01T00:00:{i:02d}Z"}) for i in range(10)]
    produce(tansu.bootstrap, topic, good)
    q = query(kafka_sources(tmp, tansu.bootstrap, topic), tmp, backend, spark)
    q.step()
    assert q.runtime.closed_upto is not None  # 00:00:08 closed: the past row below is late
    produce(tansu.bootstrap, topic, [(1, b) for b in BAD] + [(0, {"a": 50, "b": 1, "ts": "2024-01-01T00:00:20Z"}),
                                                         (1, {"a": 150, "b": 1, "ts": "2024-01-01T00:00:20Z"})])
    q.run_until_exhausted()
    lines = q.sink.drain()
    quarantine = q.quarantine.read()
    m = q.metrics
    q.close()
    assert {(x["binding"]["a"], x["binding"]["c"]) for x in lines if x["emitted_at"].endswith("00:20Z")} == {(50, 150)}
    assert m.rows_in["s"] == 22 and m.invalid + m.late == len(BAD)
    assert len(quarantine) == len(BAD)
    by_offset = {r["kafka"]["offset"]: r for r in quarantine}
    assert sorted(by_offset) == list(range(10, 10 + len(BAD)))  # partition 1's offsets 10..15
    for r in quarantine:
        assert r["kafka"]["topic"] == topic and r["kafka"]["partition"] == 1
        assert r["line"] == r["kafka"]["offset"] and f"partition 1, offset {r['line']}]" in r["reason"]
    assert by_offset[10]["reason"].startswith("invalid: malformed record (not a JSON object)")
    assert by_offset[11]["reason"].startswith("invalid: missing timestamp 'ts'")
    assert by_offset[12]["reason"].startswith("invalid: column 'a' (integer)")
    assert by_offset[13]["reason"].startswith("late: timestamp 2023-12-31")
    assert by_offset[14]["reason"].startswith("invalid: malformed record")
    assert by_offset[15]["reason"].startswith("invalid: malformed record")
    return [(r["reason"].replace(topic, "<topic>"), r["row"], r["line"])
            for r in sorted(quarantine, key=lambda r: r["line"])]


def test_bad_records_are_quarantined_with_topic_partition_and_offset(tmp_path, tansu):
    bad_records(tmp_path, tansu, "local")


@pytest.mark.spark
@pytest.mark.slow  # ~30 s (the session's first Python data source read); Spark reads Kafka in the default run
# in test_shared_queries_fetch_a_topic_once_per_micro_batch, the quarantine on the local backend
def test_bad_records_on_spark_are_quarantined_as_on_the_local_backend(tmp_path, tansu, spark):
    got = bad_records(tmp_path / "spark", tansu, "spark", spark, "bad-both")
    assert got == bad_records(tmp_path / "local", tansu, "local", None, "bad-both")


def test_record_time_and_csv_payload(tmp_path, tansu):
    tansu.create_topic("csv-rt", partitions=1)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": tansu.bootstrap})
    for i, ms in enumerate((1704067200000, 1704067200000, 1704067201500)):
        p.produce("csv-rt", f"{i},{i % 2},ignored".encode(), partition=0, timestamp=ms)
    p.produce("csv-rt", b"1,2", partition=0, timestamp=1704067202000)  # too few fields
    p.flush(10)
    src = kafka_sources(tmp_path, tansu.bootstrap, "csv-rt", "      payload: csv\n      time: record\n")
    q = query(src, tmp_path)
    q.run_until_exhausted()
    rows = q.metrics.rows_in["s"]
    quarantine = q.quarantine.read()
    q.close()
    assert rows == 3
    assert [r["reason"].split(" [")[0] for r in quarantine] == [
        "invalid: malformed record (a number of fields other than the header's, or a quoting error)"]
    from obda.execution.kafka_reader import payload_records
    from obda.model.sources_file import load_sources

    recs = payload_records(load_sources(src).table("s"), [(5, 1704067201500, b"4,1,x")])
    assert recs[0].line == 5 and recs[0].fields == {"a": "4", "b": "1", "ts": "2024-01-01T00:00:01.500Z"}


def test_unreachable_brokers_and_a_missing_topic_are_located_errors_at_start(tmp_path, tansu, monkeypatch):
    from obda.execution import kafka_offsets

    monkeypatch.setattr(kafka_offsets, "CHECK_TIMEOUT", 1.0)
    src = kafka_sources(tmp_path / "a", f"127.0.0.1:{free_port()}", "t")
    q = query(src, tmp_path / "a")
    with pytest.raises(BrokerError) as e:
        q.open()
    assert e.value.location.line == 7 and "cannot be reached" in e.value.message  # the location line
    src = kafka_sources(tmp_path / "b", tansu.bootstrap, "no-such-topic")
    with pytest.raises(BrokerError) as e:
        query(src, tmp_path / "b").open()
    assert e.value.location.line == 9 and "'no-such-topic' does not exist" in e.value.message


def test_a_password_is_never_part_of_an_error(tmp_path, monkeypatch):
    from obda.execution import kafka_offsets

    monkeypatch.setattr(kafka_offsets, "CHECK_TIMEOUT", 1.0)
    src = kafka_sources(tmp_path, f"127.0.0.1:{free_port()}", "t",
                        "      security.protocol: SASL_PLAINTEXT\n      sasl.mechanism: PLAIN\n"
                        "      sasl.username: u\n      sasl.password: hunter2secret\n")
    q = query(src, tmp_path)
    assert "hunter2secret" not in repr(q.plan.stream_tables()[0])
    with pytest.raises(BrokerError) as e:
        q.open()
    assert "hunter2secret" not in str(e.value)


@pytest.mark.spark
def test_shared_queries_fetch_a_topic_once_per_micro_batch(tmp_path, tansu, spark, monkeypatch):
    from obda.execution import kafka_offsets
    from obda.execution.shared import SharedScan

    tansu.create_topic("shared", partitions=3)
    items = interleaved(7, 60)
    produce(tansu.bootstrap, "shared", items)
    src = kafka_sources(tmp_path, tansu.bootstrap, "shared", "      max_records: 30\n")
    fetches = []
    real = kafka_offsets.TopicFeed.pending
    monkeypatch.setattr(kafka_offsets.TopicFeed, "pending",
                        lambda self, done, keep=True: fetches.append(1) or real(self, done, keep))
    scan = SharedScan(spark, share_scan_bytes=1)  # one scan (one read of the ranges) for both queries
    qs = [query(src, tmp_path, "spark", spark) for _ in range(2)]
    for i, q in enumerate(qs):
        scan.add(f"q{i}", q)
    steps = 0
    while scan.step() and steps < 20:
        steps += 1
    scan.run_until_exhausted()
    expected = file_answers(tmp_path / "files", [r for _, r in items])
    for q in qs:
        assert answers(q.sink.drain()) == expected
        q.close()
    assert len(fetches) == scan.batches  # one fetch per shared micro-batch, not one per query
