"""What a query remembers of its consumed inputs stays as large as the input on disk (issue 29: the soak's growing
checkpoint).  A consumed file that a retention job removed, whose timestamps are closed and that was read more than
``forget_after`` ago is forgotten — by the query alone, or by every query of a shared loop at once; a Kafka
partition keeps only its last segment.  Nothing is read twice: a forgotten file written back is read as new and its
rows, of closed timestamps, are quarantined as late."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from execution.exec_harness import sources
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink, checkpoint
from obda.execution.consumed import ahead, behind, compact
from obda.execution.kafka_fetch import segment_name
from obda.execution.shared import SharedScan

SQL = "SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.a > 0"
HEADER = "a,b,c,ts\n"


def _query(tmp_path, backend, forget_after=0.0, out="out.jsonl", ck="ck", **kw):
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    return ContinuousQuery(plan_execution(SQL, src, ["bounded"]), base_dir=tmp_path, backend=backend,
                           sink=JsonLinesSink(tmp_path / out), checkpoint_dir=tmp_path / ck,
                           quarantine=tmp_path / f"{ck}.q.jsonl", forget_after=forget_after, **kw)


def _write(d, i, second):
    (d / f"f{i:03d}.csv").write_text(HEADER + f"{i},{i * 10},0,2024-01-01 00:00:{second:02d}\n")


def _answers(path):
    return Counter(json.loads(x)["binding"]["a"] for x in path.read_text().splitlines()) if path.exists() else Counter()


def _remembered(ck):
    st = checkpoint.load(ck / "state.pkl")
    return ({f for fs in st["processed"].values() for f in fs},
            {f for fs in st["files"]["files"].values() for f in fs})


def test_kafka_segments_compact_to_the_last_of_each_partition_and_compare_as_ranges():
    a = {segment_name("t", 0, 0, 5), segment_name("t", 0, 5, 9), segment_name("t", 1, 0, 3), "/d/x.csv"}
    assert compact(a) == {segment_name("t", 0, 5, 9), segment_name("t", 1, 0, 3), "/d/x.csv"}
    loop = compact(a | {segment_name("t", 0, 9, 20), "/d/y.csv"})
    query = compact(a)
    # a query behind reads, per partition, the one range from where it stopped to where the loop is
    assert behind(loop, query) == ["/d/y.csv", segment_name("t", 0, 9, 20)]
    assert not ahead(loop, query)
    assert ahead(loop, compact(query | {segment_name("t", 1, 3, 4)}))
    assert behind(loop, loop) == [] and not ahead(loop, loop)


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_files_removed_by_retention_are_forgotten_once_closed_and_a_copy_written_back_is_late(tmp_path, backend, request):
    if backend == "spark":
        request.getfixturevalue("spark")
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    for i in range(1, 5):
        _write(d, i, i)
    q = _query(tmp_path, backend, idle_timeout=None)
    q.step()
    files = {str(d / f"f{i:03d}.csv") for i in range(1, 5)}
    assert _remembered(tmp_path / "ck") == (files, files)
    kept = (d / "f001.csv").read_text()
    for i in (1, 2):  # the retention job
        (d / f"f{i:03d}.csv").unlink()
    _write(d, 5, 5)
    q.step()
    q.step()
    processed, ledger = _remembered(tmp_path / "ck")
    gone = {str(d / "f001.csv"), str(d / "f002.csv")}
    assert not processed & gone and not ledger & gone  # forgotten: closed (f005 closed them), read long enough ago
    assert str(d / "f003.csv") in processed and str(d / "f005.csv") in processed
    assert q.metrics.remembered_inputs == len(processed) == 3
    (d / "f001.csv").write_text(kept)  # written back: a new file of closed timestamps
    q.run_until_exhausted()
    q.close()
    assert _answers(tmp_path / "out.jsonl") == Counter({1: 1, 2: 1, 3: 1, 4: 1, 5: 1})  # never answered twice
    late = [json.loads(x) for x in (tmp_path / "ck.q.jsonl").read_text().splitlines()]
    assert [r["file"] for r in late] == [str(d / "f001.csv")] and "late" in late[0]["reason"]


def test_gone_files_are_remembered_within_the_grace_and_while_their_timestamps_are_open(tmp_path):
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    for i in range(1, 3):
        _write(d, i, i)
    q = _query(tmp_path, "local", forget_after=3600)  # the default's hour
    q.step()
    (d / "f001.csv").unlink()
    _write(d, 3, 3)
    q.step()
    assert str(d / "f001.csv") in q.processed["s"]  # gone and closed, but read a moment ago
    q.forget_after = 0
    (d / "f002.csv").unlink()
    (d / "f003.csv").unlink()
    q.step()
    assert str(d / "f001.csv") not in q.processed["s"] and str(d / "f002.csv") not in q.processed["s"]
    assert str(d / "f003.csv") in q.processed["s"]  # its timestamp is still open (no later row closed it)
    q.close()


def test_a_checkpoint_of_an_earlier_release_is_read_and_its_files_bounded_by_the_streams_timestamp(tmp_path):
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    _write(d, 1, 1)
    _write(d, 2, 2)
    q = _query(tmp_path, "local")
    q.step()
    q.close()
    st = checkpoint.load(tmp_path / "ck" / "state.pkl")
    st["files"]["files"] = {s: {p: v[:2] for p, v in fs.items()} for s, fs in st["files"]["files"].items()}
    checkpoint.dump(st, tmp_path / "ck" / "state.pkl")
    q = _query(tmp_path, "local")
    q.open()
    bound = q.runtime.max_ts["s"]
    assert {e[2] for e in q.ledger.files["s"].values()} == {bound}
    (d / "f001.csv").unlink()
    q.run_until_exhausted()  # the stream's timestamps close: the old file goes
    assert str(d / "f001.csv") not in q.processed["s"]
    q.close()


@pytest.mark.spark
def test_a_shared_loop_forgets_with_all_its_queries_at_once_and_a_query_started_later_joins(spark, tmp_path):
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    for i in range(1, 4):
        _write(d, i, i)
    loop = SharedScan(spark)
    a, b = (_query(tmp_path, "spark", spark=spark, out=f"{n}.jsonl", ck=n) for n in "ab")
    c = _query(tmp_path, "spark", spark=spark, out="c.jsonl", ck="c")
    for name, q in (("a", a), ("b", b), ("c", c)):
        loop.add(name, q)
    loop.step()
    loop.remove("c")  # stopped: it does not see the files the loop forgets meanwhile
    c.close()
    for i in (1, 2):
        (d / f"f{i:03d}.csv").unlink()
    _write(d, 4, 4)
    loop.step()
    loop.step()
    gone = {str(d / "f001.csv"), str(d / "f002.csv")}
    assert not loop.cursor["s"] & gone
    assert a.processed["s"] == b.processed["s"] == loop.cursor["s"] and loop.in_step(a) and loop.in_step(b)
    assert a.metrics.remembered_inputs == len(loop.cursor["s"]) == 2
    c = _query(tmp_path, "spark", spark=spark, out="c.jsonl", ck="c")  # started again from its checkpoint
    loop.add("c", c)
    _write(d, 5, 5)
    loop.step()  # it forgets the files the loop forgot and catches up instead of waiting
    loop.step()
    assert loop.in_step(c), (c.processed, loop.cursor)
    loop.run_until_exhausted()
    for q in (a, b, c):
        q.close()
    for n in "abc":
        assert _answers(tmp_path / f"{n}.jsonl") == Counter({1: 1, 2: 1, 3: 1, 4: 1, 5: 1}), n
