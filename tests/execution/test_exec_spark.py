"""End to end through Spark: random files and micro-batches, against DuckDB and the local backend."""

import dataclasses
import json
from collections import Counter

import pytest

from execution.exec_harness import (
    CASE,
    CHECK_CASES,
    STATIC_R,
    WAITING_CASES,
    Oracle,
    random_splits,
    random_streams,
    released,
    sources,
    spark_jobs,
    write_csv_batches,
    write_static,
)
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.model.sources import Sources

pytestmark = pytest.mark.spark


def project(tmp_path, seed, max_chunk=6):
    rows = random_streams(seed)
    src = sources(s="data/s", t="data/t", u="data/u", r="data/r")
    write_csv_batches(tmp_path / "data", random_splits(rows, seed, max_chunk=max_chunk), src)
    write_static(tmp_path / "data", "r", STATIC_R)
    return src, rows


def run(spark, tmp_path, src, case, out, backend="spark", max_batches=None, **kw):
    kw.setdefault("allow_unbounded", case.verdict != "bounded")
    q = ContinuousQuery(
        plan_execution(case.sql, src, [case.verdict] * (1 + case.sql.count(" UNION "))), base_dir=tmp_path, sink=JsonLinesSink(tmp_path / out), spark=spark,
        backend=backend, **kw,
    )
    q.run_until_exhausted(max_batches=max_batches)
    q.close()
    return q, (tmp_path / out).read_text()


def bindings(text, columns):
    return Counter(tuple(json.loads(line)["binding"][c] for c in columns) for line in text.splitlines())


@pytest.mark.parametrize("seed", [1, *(pytest.param(s, marks=pytest.mark.slow) for s in (2, 3))])  # seeds 2, 3: -m slow
@pytest.mark.parametrize("name", ["tree_static_bag", "row9_set", "cross_or_bag", "static_union_unmatched_bag"])
def test_spark_matches_duckdb_and_local_backend(spark, tmp_path, seed, name):
    case = CASE[name]
    src, rows = project(tmp_path, seed)
    q, text = run(spark, tmp_path, src, case, "spark.jsonl", max_files_per_batch=2 + seed % 2)
    cols = q.columns
    expected = Oracle(src, rows, {"r": STATIC_R}).answers(case.sql)
    got = bindings(text, cols)
    if case.sql.startswith("SELECT DISTINCT"):
        assert set(got) == set(expected) and max(got.values(), default=1) == 1
    else:
        assert got == expected
    assert sum(expected.values()) > 0
    # the per-timestamp engine in Python gives the same lines (same emitted_at), in timestamp order
    _, local = run(spark, tmp_path, src, case, "local.jsonl", backend="local", max_files_per_batch=2 + seed % 2)
    assert Counter(local.splitlines()) == Counter(text.splitlines())
    stamps = [json.loads(line)["emitted_at"] for line in text.splitlines()]
    assert stamps == sorted(stamps)
    assert q.metrics.rows_in["s"] == len(rows["s"])


ON_SPARK = ("anti_join_same_ts", "anti_join_on_the_timestamp", "anti_join_past_window", "anti_join_past_window_on_time",
            "anti_join_whole_past_no_key", "anti_join_same_ts_compared")


@pytest.mark.parametrize("case", [c if c.name in ON_SPARK else pytest.param(c, marks=pytest.mark.slow)
                                  for c in CHECK_CASES], ids=lambda c: c.name)
def test_checks_in_the_answers_timestamp_on_spark(spark, tmp_path, case):
    """[NOT] IN over a stream in the answer's own timestamp (rule A2), planned as an anti-join (semi-join) inside
    the micro-batch's one job: DuckDB's answers, the local backend's lines, one job per micro-batch."""
    seed = 4
    src, rows = project(tmp_path, seed)
    j0 = spark_jobs(spark)
    q, text = run(spark, tmp_path, src, case, "spark.jsonl", max_files_per_batch=3)
    jobs = spark_jobs(spark) - j0
    expected = Oracle(src, rows, {"r": STATIC_R}).answers(case.sql)
    got = bindings(text, q.columns)
    assert (set(got) == set(expected)) if "DISTINCT" in case.sql else (got == expected)
    assert sum(expected.values()) > 0
    _, local = run(spark, tmp_path, src, case, "local.jsonl", backend="local", max_files_per_batch=3)
    assert Counter(local.splitlines()) == Counter(text.splitlines())
    assert jobs <= q.metrics.batches, (jobs, q.metrics.batches)  # at most one per micro-batch: the check adds none


@pytest.mark.parametrize("case", [c if c.name == "anti_join_future_window_and_rows" else pytest.param(c, marks=pytest.mark.slow)
                                  for c in WAITING_CASES], ids=lambda c: c.name)
def test_checks_in_a_window_after_the_answer_on_spark(spark, tmp_path, case):
    """Rule A4 on Spark: the answers waiting for their check's window come back in the micro-batch's one job with
    the check's answers and the timestamps the query read, and the driver decides them as the local backend does:
    DuckDB's released answers, the local backend's lines (same emitted_at), one job per micro-batch."""
    seed = 4
    src, rows = project(tmp_path, seed)
    j0 = spark_jobs(spark)
    q, text = run(spark, tmp_path, src, case, "spark.jsonl", max_files_per_batch=3)
    jobs = spark_jobs(spark) - j0
    expected = released(Oracle(src, rows, {"r": STATIC_R}), case)
    got = bindings(text, q.columns)
    assert (set(got) == set(expected)) if "DISTINCT" in case.sql else (got == expected)
    assert sum(expected.values()) > 0
    _, local = run(spark, tmp_path, src, case, "local.jsonl", backend="local", max_files_per_batch=3)
    assert Counter(local.splitlines()) == Counter(text.splitlines())
    stamps = [json.loads(line)["emitted_at"] for line in text.splitlines()]
    assert stamps == sorted(stamps)  # the answers that waited, in timestamp order with the others
    assert jobs <= q.metrics.batches, (jobs, q.metrics.batches)


RESUMED = {c.name: c for c in CHECK_CASES + WAITING_CASES
           if c.name in ("anti_join_same_ts", "anti_join_past_window", "anti_join_future_window")}


@pytest.mark.parametrize("name, backend", [("anti_join_same_ts", "local"), ("anti_join_past_window", "local"),
                                           ("anti_join_past_window", "spark"), ("anti_join_future_window", "local"),
                                           pytest.param("anti_join_future_window", "spark", marks=pytest.mark.slow),
                                           pytest.param("anti_join_same_ts", "spark", marks=pytest.mark.slow)])
def test_a_check_over_a_stream_resumes_from_its_checkpoint(spark, tmp_path, backend, name):
    """Stopped after two micro-batches and resumed from its checkpoint, a query with a check over another stream
    writes the lines of one uninterrupted run: the rows of both streams' open timestamps come back (rule A2), and
    the other stream's answers its window still reads (A3: state in the checkpoint), and the answers still waiting
    for their window's end (A4: in the checkpoint too)."""
    case = RESUMED[name]
    src, rows = project(tmp_path, 23, max_chunk=3)
    kw = dict(backend=backend, max_files_per_batch=2)
    _, full = run(spark, tmp_path, src, case, "full.jsonl", **kw)
    _, part = run(spark, tmp_path, src, case, "part.jsonl", checkpoint_dir=tmp_path / "ck", max_batches=2, **kw)
    assert full.startswith(part) and part != full
    _, resumed = run(spark, tmp_path, src, case, "part.jsonl", checkpoint_dir=tmp_path / "ck", **kw)
    assert resumed == full
    oracle = Oracle(src, rows)
    assert bindings(full, ("a", "b")) == (released(oracle, case) if case.waits else oracle.answers(case.sql))


def test_spark_restart_from_checkpoint(spark, tmp_path):
    case = CASE["row5_bag"]
    src, rows = project(tmp_path, 21, max_chunk=3)
    _, full = run(spark, tmp_path, src, case, "full.jsonl", max_files_per_batch=2)
    _, part = run(spark, tmp_path, src, case, "part.jsonl", max_files_per_batch=2, checkpoint_dir=tmp_path / "ck",
                  max_batches=2)
    assert full.startswith(part) and part != full
    _, resumed = run(spark, tmp_path, src, case, "part.jsonl", max_files_per_batch=2, checkpoint_dir=tmp_path / "ck")
    assert resumed == full
    assert bindings(full, ("a",)) == Oracle(src, rows).answers(case.sql)


def test_spark_quarantines_invalid_and_late_rows(spark, tmp_path):
    case = CASE["row5_bag"]
    src, rows = project(tmp_path, 22)
    (tmp_path / "data" / "s" / "part-99998.csv").write_text(
        "a,b,c,ts\n1,x,3,2024-01-01 00:00:01\n1,2,3,\n1,2\n1,2,3,not-a-time\n7,0,0,2023-12-31 23:59:50\n"
    )
    q, text = run(spark, tmp_path, src, case, "o.jsonl", max_files_per_batch=3, checkpoint_dir=tmp_path / "ck")
    m = q.metrics
    assert (m.invalid, m.late) == (4, 1) and m.invalid_by_stream == {"s": 4}
    recs = [json.loads(line) for line in (tmp_path / "ck" / "quarantine.jsonl").read_text().splitlines()]
    reasons = sorted(r["reason"].split(":")[0] for r in recs)
    assert reasons == ["invalid"] * 4 + ["late"]
    assert all(r["file"].endswith("part-99998.csv") and r["row"] for r in recs)
    assert bindings(text, ("a",)) == Oracle(src, rows).answers(case.sql)


def test_spark_reads_json_and_parquet(spark, tmp_path):
    case = CASE["static_join_bag"]
    rows = random_streams(23)
    src0 = sources()
    d = tmp_path / "data"
    (d / "s").mkdir(parents=True)
    with open(d / "s" / "part-0.json", "w") as f:
        for r in rows["s"]:
            f.write(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n")
        f.write("{not json\n")
    spark.createDataFrame(STATIC_R).write.parquet(str(d / "r"))
    tables = tuple(
        dataclasses.replace(t, location="data/s", format="json") if t.name == "s"
        else dataclasses.replace(t, location="data/r", format="parquet") if t.name == "r" else t
        for t in src0.tables
    )
    src = Sources(tables)
    q, text = run(spark, tmp_path, src, case, "o.jsonl")
    assert q.metrics.invalid == 1
    assert bindings(text, ("x", "n")) == Oracle(src0, rows, {"r": STATIC_R}).answers(case.sql)


def test_spark_one_job_reads_several_tables_and_formats(spark, tmp_path):
    """One micro-batch job unites CSV and JSON files of one stream with another stream's files."""
    case = CASE["row5_bag"]
    rows = random_streams(24)
    base = sources(t="data/t")
    src = Sources(tuple(dataclasses.replace(t, location="data/s", format=None) if t.name == "s" else t
                        for t in base.tables))
    write_csv_batches(tmp_path / "data", [{"t": rows["t"]}], base)
    d = tmp_path / "data" / "s"
    d.mkdir(parents=True)
    half = len(rows["s"]) // 2
    with open(d / "part-0.csv", "w") as f:
        f.write("a,b,c,ts\n" + "".join(f"{r['a']},{r['b']},{r['c']},{r['ts'].isoformat(sep=' ')}\n"
                                        for r in rows["s"][:half]))
    with open(d / "part-1.json", "w") as f:
        f.writelines(json.dumps({**r, "ts": r["ts"].isoformat()}) + "\n" for r in rows["s"][half:])
    q, text = run(spark, tmp_path, src, case, "o.jsonl")
    assert q.metrics.batches == 2 and q.metrics.rows_in == {"s": len(rows["s"]), "t": len(rows["t"])}
    expected = Oracle(base, rows).answers(case.sql)
    assert sum(expected.values()) > 0 and bindings(text, ("a",)) == expected


def test_arrow_collection_keeps_every_type(spark):
    """Micro-batch groups leave Spark through Arrow: the same Python values as ``collect``."""
    from obda.execution.spark_io import collect_rows

    df = spark.sql(
        "SELECT * FROM VALUES "
        "(1L, CAST(2.50 AS DECIMAL(38,10)), 0.1D, 'é\"x', true, TIMESTAMP'2024-01-01 00:00:05', 7), "
        "(NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS v(a, b, c, d, e, f, g)"
    )
    assert sorted(collect_rows(df), key=repr) == sorted((tuple(r) for r in df.collect()), key=repr)
    assert collect_rows(df.limit(0)) == []


def test_many_files_in_one_micro_batch(spark, tmp_path):
    """More than Spark's parallel-listing threshold (32) of explicit paths in one read."""
    case = CASE["row5_bag"]
    rows = random_streams(33, steps=40)
    src = sources(s="data/s", t="data/t")
    write_csv_batches(tmp_path / "data", random_splits(rows, 33, max_chunk=1), src)
    assert sum(1 for _ in (tmp_path / "data" / "s").iterdir()) > 32
    q, text = run(spark, tmp_path, src, case, "o.jsonl")
    assert q.metrics.batches == 2  # everything in one micro-batch, then the end of input
    assert bindings(text, ("a",)) == Oracle(src, rows).answers(case.sql)


@pytest.mark.slow  # 14 s (the default run keeps under 15 minutes)
def test_file_names_with_glob_characters_are_read_as_named(spark, tmp_path):
    """Spark's readers expand ``[ ] { } * ? \\`` in paths; the executor's files are read as listed.

    Before: a file named ``x[1].csv`` failed the micro-batch (path not found).  With read-ahead
    the files of a micro-batch are also told apart by the names Spark reports (per-file counts).
    """
    case = CASE["row5_bag"]
    rows = random_streams(35, steps=14)
    src = sources(s="data/s", t="data/t")
    write_csv_batches(tmp_path / "data", random_splits(rows, 35, max_chunk=2), src)
    odd = ["x[1]", "y{2,3}", "z*", "q?", "b\\s", "[ab]", "p%41 ä"]
    for name in ("s", "t"):
        for f, new in zip(sorted((tmp_path / "data" / name).iterdir()), odd):
            f.rename(f.with_name(f"{f.stem}-{new}.csv"))  # keeps the name order
    q, text = run(spark, tmp_path, src, case, "o.jsonl", max_files_per_batch=1)
    assert q.metrics.invalid == 0 and q.metrics.late == 0
    assert q.metrics.rows_read == {n: len(rows[n]) for n in ("s", "t")}
    assert bindings(text, ("a",)) == Oracle(src, rows).answers(case.sql)




@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_directory_sink_gets_the_answers_from_the_executors(spark, tmp_path, fmt):
    """The Spark backend hands a directory sink a DataFrame (when answers are many: here forced with
    ``driver_answers = 0``): the same answers, counted in rows_out."""
    from obda.execution import DirectorySink
    from obda.execution.committed_output import read_committed

    case = CASE["tree_static_bag"]
    src, rows = project(tmp_path, 5)
    q = ContinuousQuery(plan_execution(case.sql, src, [case.verdict]), base_dir=tmp_path, spark=spark, max_files_per_batch=3,
                        sink=DirectorySink(tmp_path / "out", fmt), checkpoint_dir=tmp_path / "ck")
    q.driver_answers = 0
    written = []
    real = q.sink.write_frame
    q.sink.write_frame = lambda frame: written.append(frame) or real(frame)
    q.run_until_exhausted()
    q.close()
    got = read_committed(tmp_path / "out")
    assert written and q.metrics.rows_out == len(got) > 0
    expected = Oracle(src, rows, {"r": STATIC_R}).answers(case.sql)
    assert Counter(tuple(d["binding"][c] for c in q.columns) for d in got) == expected
    stamps = [d["emitted_at"] for d in got]  # the part files, in commit and name order
    assert stamps == sorted(stamps), "answers reach the directory in application-time order"


def _answers(q, tmp_path, out):
    """(emitted_at, binding) of each line a query wrote, as a multiset."""
    from obda.execution.committed_output import read_committed

    recs = read_committed(out) if out.is_dir() else [json.loads(line) for line in out.read_text().splitlines()]
    return Counter((r["emitted_at"], tuple(r["binding"][c] for c in q.columns)) for r in recs)


ONE_STREAM = {
    "bag, directory sink": ("SELECT m1.a AS a, m1.b AS b FROM s AS m1 WHERE m1.c > 2", "dir"),
    "distinct, lines sink": ("SELECT DISTINCT m1.a AS a FROM s AS m1 WHERE m1.c > 2", "lines"),
}


def _one_stream_query(spark, tmp_path, sql, sink, backend="spark", **kw):
    from obda.execution import DirectorySink

    src = sources(s="data/s")
    out = tmp_path / f"{backend}-out" if sink == "dir" else tmp_path / f"{backend}.jsonl"
    s = DirectorySink(out, "json") if sink == "dir" and backend == "spark" else JsonLinesSink(tmp_path / f"{backend}.jsonl")
    q = ContinuousQuery(plan_execution(sql, src, ["bounded"]), base_dir=tmp_path, spark=spark, backend=backend, sink=s,
                        checkpoint_dir=tmp_path / f"ck-{backend}", **kw)
    return q, out if backend == "spark" else tmp_path / f"{backend}.jsonl"


@pytest.mark.parametrize("which", list(ONE_STREAM))
def test_last_micro_batch_of_one_stream_is_one_job(spark, tmp_path, monkeypatch, which):
    """A backlog's last micro-batch closes every timestamp it reads: with one stream pipeline, one
    job computes its answers and observes its stats (no stats job, nothing cached)."""
    from obda.execution import scan

    sql, sink = ONE_STREAM[which]
    rows = random_streams(31, tables=("s",))
    write_csv_batches(tmp_path / "data", random_splits(rows, 31, max_chunk=4), sources(s="data/s"))
    calls = Counter()
    real_stats = scan.scan_stats
    monkeypatch.setattr(scan, "scan_stats", lambda *a, **k: calls.update(["stats"]) or real_stats(*a, **k))
    q, out = _one_stream_query(spark, tmp_path, sql, sink)
    j0 = spark_jobs(spark)
    assert q.step(exhausted=True) > 0 and q.finished
    assert spark_jobs(spark) - j0 == 1 and not calls
    assert q.step(exhausted=True) == 0
    q.close()
    local, lout = _one_stream_query(spark, tmp_path, sql, sink, backend="local")
    local.run_until_exhausted()
    local.close()
    assert _answers(q, tmp_path, out) == _answers(local, tmp_path, lout) != Counter()
    assert (q.metrics.rows_in, q.metrics.rows_out, q.metrics.closed_upto) == (
        local.metrics.rows_in, local.metrics.rows_out, local.metrics.closed_upto)


@pytest.mark.parametrize("which", list(ONE_STREAM))
def test_one_job_last_micro_batch_counts_late_and_invalid_rows(spark, tmp_path, monkeypatch, which):
    """Late and invalid rows in the last micro-batch: the same answers, counts and quarantine
    reasons as the local backend (which spells quarantined rows its own way)."""
    from obda.execution import scan

    sql, sink = ONE_STREAM[which]
    rows = random_streams(32, tables=("s",))
    splits = random_splits(rows, 32, max_chunk=4)
    write_csv_batches(tmp_path / "data", splits, sources(s="data/s"))
    (tmp_path / "data" / "s" / "part-99999.csv").write_text(
        "a,b,c,ts\n1,x,3,2024-01-01 00:00:01\n1,2\n7,1,5,2023-12-31 23:59:50\n"
    )
    calls = Counter()
    real_stats = scan.scan_stats
    monkeypatch.setattr(scan, "scan_stats", lambda *a, **k: calls.update(["stats"]) or real_stats(*a, **k))
    results = []
    for backend in ("spark", "local"):
        q, out = _one_stream_query(spark, tmp_path, sql, sink, backend=backend, max_files_per_batch=3)
        assert q.step() > 0  # not the last: its range is known after its stats
        q.run_until_exhausted()
        q.close()
        quarantined = sorted(r["reason"].split(":")[0] for r in
                             map(json.loads, (tmp_path / f"ck-{backend}" / "quarantine.jsonl").read_text().splitlines()))
        m = q.metrics
        results.append((_answers(q, tmp_path, out), m.rows_in, m.rows_out, m.late, m.invalid, quarantined))
        if backend == "spark":
            assert calls["stats"] == 0  # the stats travel in each micro-batch's one job
    assert results[0] == results[1]
    assert results[0][3:5] == (1, 2)
