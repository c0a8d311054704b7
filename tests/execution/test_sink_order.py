"""Every sink of the Spark backend gets the answers in application-time order, with one stable tie-break.

Issue 26, item 4: answers reach every sink ordered by ``emitted_at`` and, within one ``emitted_at``, by a
total order that does not depend on how Spark partitioned, shuffled or wrote them — the binding's values as
text (Spark's ``CAST(… AS STRING)``), variable by variable in the query's column order, unbound first.  This
module reads the JSON-lines file sink (the answers through the driver: streamed from one partition, and
spilled to Parquet parts the driver merges) and the directory sink (many part files per micro-batch, read in
commit order, as ``iter_committed`` lists them); tests/api/test_results_order.py reads the service's pages and
its SSE stream.  The same run twice gives the same lines in the same order.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from execution.exec_harness import STATIC_R, Oracle, write_csv_batches, write_static
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, DirectorySink, JsonLinesSink
from obda.execution.committed_output import iter_committed, read_part
from obda.model.sources import Sources

SOURCES = """
tables:
  s: {kind: stream, timestamp: ts, location: data/s, format: csv, columns: {a: integer, b: integer, c: integer, ts: timestamp}}
  r: {kind: static, location: data/r, format: csv, columns: {id: integer, name: string}}
"""
# a bag (r has id 2 twice: answers repeat), a string and an integer column; many answers per timestamp, with
# values of one, two and three digits (their text order is not their numeric order: 100 < 11 < 9)
SQL = "SELECT m2.name AS n, m1.a AS a FROM s AS m1, r AS m2 WHERE m1.b = m2.id AND m1.c > 0"
COLUMNS = ("n", "a")
BASE = dt.datetime(2024, 1, 1)
FILES = 4  # stream files: with max_files_per_batch=2, two micro-batches read them, a third ends the input


def write_project(root: Path, seed: int = 7, steps: int = 16, per_ts: int = 16) -> dict[str, list]:
    rng = random.Random(seed)
    rows = [{"a": rng.choice((rng.randint(0, 9), rng.randint(10, 99), rng.randint(100, 120))), "b": rng.randint(0, 6),
             "c": rng.randint(0, 3), "ts": BASE + dt.timedelta(seconds=k)}
            for k in range(steps) for _ in range(per_ts)]
    src = Sources.from_yaml(SOURCES)
    size = -(-len(rows) // FILES)
    write_csv_batches(root / "data", [{"s": rows[i:i + size]} for i in range(0, len(rows), size)], src)
    write_static(root / "data", "r", STATIC_R)
    return {"s": rows}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("order")
    rows = write_project(root)
    src = Sources.from_yaml(SOURCES)
    expected = Oracle(src, rows, {"r": STATIC_R}).answers(SQL)
    assert sum(expected.values()) > 150
    return root, src, expected


@pytest.fixture()
def many_parts(spark):
    """Spark writes at most 7 answers per part file: a micro-batch's answers are many part files."""
    key = "spark.sql.files.maxRecordsPerFile"
    before = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        yield
    finally:
        spark.conf.set(key, before)


# ------------------------------------------------------------------------------------------ the check


def spark_text(v) -> str:
    """A binding value as Spark's ``CAST(… AS STRING)`` spells it (the tie-break compares these texts)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int)):
        return str(v)
    raise AssertionError(f"the check knows the text of strings, integers and booleans, not {v!r}")


def tie_key(binding: dict, columns) -> tuple:
    return tuple((0, "") if binding[c] is None else (1, spark_text(binding[c])) for c in columns)


def instant(emitted_at):
    """``emitted_at`` as a comparable instant (its text does not compare: ``…05.5Z`` < ``…05Z``); None first."""
    if emitted_at is None:
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromisoformat(emitted_at.replace("Z", "+00:00"))


def assert_in_order(records: list[dict], columns, sink: str) -> None:
    """``emitted_at`` never decreases; within one ``emitted_at`` the bindings are in the tie-break's order."""
    for i, (a, b) in enumerate(zip(records, records[1:]), start=1):
        ta, tb = instant(a["emitted_at"]), instant(b["emitted_at"])
        assert ta <= tb, (f"{sink}: emitted_at goes backwards at answer {i + 1}: {a['emitted_at']} then "
                          f"{b['emitted_at']}")
        if ta == tb:
            assert tie_key(a["binding"], columns) <= tie_key(b["binding"], columns), (
                f"{sink}: within emitted_at {a['emitted_at']} the tie-break is not kept at answer {i + 1}: "
                f"{a['binding']} before {b['binding']} (the order is the values' text, column by column)")


def multiset(records, columns) -> Counter:
    return Counter(tuple(r["binding"][c] for c in columns) for r in records)


# ------------------------------------------------------------------------------------------ the runs


def run(spark, root: Path, src: Sources, sink, **attrs) -> ContinuousQuery:
    q = ContinuousQuery(plan_execution(SQL, src, ["bounded"]), base_dir=root, spark=spark, sink=sink,
                        max_files_per_batch=2)
    for k, v in attrs.items():
        setattr(q, k, v)
    q.run_until_exhausted()
    q.close()
    assert q.metrics.batches >= 3
    return q


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def committed_in_order(out: Path) -> list[dict]:
    """A directory sink's answers as a reader gets them: the commits in order, each commit's files in its order."""
    batches = list(iter_committed(out))
    assert len(batches) >= 2 and max(len(b.files) for b in batches) >= 5, \
        [len(b.files) for b in batches]  # several micro-batches, many part files each
    assert [b.first for b in batches] == [1 + sum(b.lines for b in batches[:i]) for i in range(len(batches))]
    return [r for b in batches for p in b.paths() for r in read_part(p)]


@pytest.fixture(scope="module")
def reference(spark, project, tmp_path_factory) -> list[dict]:
    """The answers of ``--output FILE`` (through the driver, streamed from one sorted partition)."""
    root, src, expected = project
    out = tmp_path_factory.mktemp("reference") / "out.jsonl"
    run(spark, root, src, JsonLinesSink(out))
    records = lines_of(out)
    assert multiset(records, COLUMNS) == expected
    return records


@pytest.mark.spark
def test_the_file_sink_gets_the_answers_in_order(spark, project, reference, tmp_path):
    """``--output FILE``: in order, and the same run again writes the same lines in the same order."""
    root, src, _ = project
    assert_in_order(reference, COLUMNS, "JSON-lines file")
    run(spark, root, src, JsonLinesSink(tmp_path / "again.jsonl"))
    assert lines_of(tmp_path / "again.jsonl") == reference, "two identical runs wrote the answers in different orders"


@pytest.mark.spark
def test_the_file_sink_gets_spilled_answers_in_order(spark, project, reference, tmp_path):
    """A large micro-batch's answers (here forced with ``spill_bytes = 0``) are spilled to sorted Parquet parts
    that the driver merges: the same lines in the same order."""
    root, src, _ = project
    run(spark, root, src, JsonLinesSink(tmp_path / "out.jsonl"), spill_bytes=0)
    records = lines_of(tmp_path / "out.jsonl")
    assert_in_order(records, COLUMNS, "JSON-lines file (spilled)")
    assert records == reference


@pytest.mark.spark
def test_the_directory_sink_gets_the_answers_in_order_over_many_parts(spark, many_parts, project, reference, tmp_path):
    """``--output-dir DIR``: Spark's writers write each micro-batch's answers (``driver_answers = 0`` forces
    them for every micro-batch) as many part files; read in commit order, the answers are in order — the
    file sink's very order — and a second run commits the same answers in the same order."""
    root, src, _ = project
    runs = []
    for n in (1, 2):
        run(spark, root, src, DirectorySink(tmp_path / f"dir{n}", "json"), driver_answers=0)
        runs.append(committed_in_order(tmp_path / f"dir{n}"))
    assert_in_order(runs[0], COLUMNS, "directory sink (json parts in commit order)")
    assert runs[0] == reference, "the directory's order is not the file sink's"
    assert runs[1] == runs[0], "two identical runs committed the answers in different orders"


@pytest.mark.spark
def test_the_directory_sink_gets_the_answers_in_order_over_many_parquet_parts(spark, many_parts, project, reference,
                                                                              tmp_path):
    root, src, _ = project
    run(spark, root, src, DirectorySink(tmp_path / "dir", "parquet"), driver_answers=0)
    records = committed_in_order(tmp_path / "dir")
    assert_in_order(records, COLUMNS, "directory sink (parquet parts in commit order)")
    assert records == reference


def test_a_commit_lists_a_tasks_thousandth_part_after_its_999th(tmp_path):
    """Spark names the files of one task ``…-c000`` … ``…-c999``, ``…-c1000`` (``spark.sql.files.maxRecordsPerFile``):
    the commit lists them in the order Spark wrote them, not in text order (``c1000`` before ``c101``)."""
    from obda.execution.rows import micros_to_iso

    sink = DirectorySink(tmp_path / "out", "json")
    sub = sink._next_write_dir()  # what write_frame hands Spark's writer
    sub.mkdir(parents=True)
    at = 1_704_067_200_000_000
    job = "part-00000-8e372d03-d820-4ee5-b2af-60069e44807f"
    for i in range(1003):  # answer i at second i, one per file, as Spark wrote them
        line = json.dumps({"emitted_at": micros_to_iso(at + i * 1_000_000), "binding": {"i": i}})
        (sub / f"{job}-c{i:03d}.txt").write_text(line + "\n")
    (sub / "_SUCCESS").write_text("")
    sink.commit(sink.flush())
    records = committed_in_order_any(tmp_path / "out")
    assert_in_order(records, ("i",), "directory sink (a task's 1,003 part files)")
    assert [r["binding"]["i"] for r in records] == list(range(1003))


def committed_in_order_any(out: Path) -> list[dict]:
    return [r for b in iter_committed(out) for p in b.paths() for r in read_part(p)]
