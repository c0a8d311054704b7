"""End to end through Spark: random files and micro-batches, against DuckDB and the local backend."""

import dataclasses
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from execution.exec_harness import (
    CASE,
    STATIC_R,
    Oracle,
    random_splits,
    random_streams,
    sources,
    write_csv_batches,
    write_static,
)
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
    q = ContinuousQuery(
        case.sql, src, [case.verdict], base_dir=tmp_path, sink=JsonLinesSink(tmp_path / out), spark=spark,
        backend=backend, **kw,
    )
    q.run_until_exhausted(max_batches=max_batches)
    q.close()
    return q, (tmp_path / out).read_text()


def bindings(text, columns):
    return Counter(tuple(json.loads(line)["binding"][c] for c in columns) for line in text.splitlines())


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", ["tree_static_bag", "row9_set"])
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
    # the same pipelines in Python give the same lines (same emitted_at, same order)
    _, local = run(spark, tmp_path, src, case, "local.jsonl", backend="local", max_files_per_batch=2 + seed % 2)
    assert local == text
    assert q.metrics.rows_in["s"] == len(rows["s"])


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


@pytest.mark.parametrize("prefetch", [1, 2, 5])
def test_read_ahead_changes_nothing_in_the_output(spark, tmp_path, prefetch):
    """Micro-batches read ahead, several in one job, give the same lines, metrics and state as one job each."""
    case = CASE["tree_static_bag"]
    src, rows = project(tmp_path, 31, max_chunk=3)
    ref, ref_text = run(spark, tmp_path, src, case, "ref.jsonl", max_files_per_batch=1, prefetch=0)
    q, text = run(spark, tmp_path, src, case, f"p{prefetch}.jsonl", max_files_per_batch=1, prefetch=prefetch)
    assert text == ref_text and q.metrics.batches == ref.metrics.batches > 3
    assert q.metrics.rows_in == ref.metrics.rows_in and q.engine.state() == ref.engine.state()
    assert q._ahead == [] and q._pool is None  # closed: no job left running


@pytest.mark.parametrize("budget_files", [0, 3, 1000])
def test_one_job_reads_at_most_prefetch_bytes(spark, tmp_path, monkeypatch, budget_files):
    """Waiting micro-batches share one job up to ``prefetch_bytes`` of files; the output does not change.

    ``budget_files``: the budget in multiples of the largest file.  0: one micro-batch per job
    (a job takes one even when it alone is larger); 1000: every waiting micro-batch in one job.
    """
    import os

    from obda.execution import spark_io

    case = CASE["tree_static_bag"]
    src, rows = project(tmp_path, 33, max_chunk=3)
    ref, ref_text = run(spark, tmp_path, src, case, "ref.jsonl", max_files_per_batch=1, prefetch=0)
    largest = max(os.path.getsize(p) for p in (tmp_path / "data").rglob("*.csv"))
    budget = budget_files * largest
    jobs = []
    collect = spark_io.collect_batches

    def recording(spark_, batches, cache=None):
        jobs.append([sum(os.path.getsize(p) for r in rs for p in r.paths) for rs in batches])
        return collect(spark_, batches, cache)

    monkeypatch.setattr(spark_io, "collect_batches", recording)
    q, text = run(spark, tmp_path, src, case, f"b{budget_files}.jsonl", max_files_per_batch=1, prefetch_bytes=budget)
    assert text == ref_text and q.engine.state() == ref.engine.state()
    assert sum(len(j) for j in jobs) == ref.metrics.batches - 1  # every micro-batch read once (the last reads nothing)
    assert all(len(j) == 1 or sum(j) <= budget for j in jobs)
    if budget_files == 0:
        assert all(len(j) == 1 for j in jobs)
    elif budget_files == 1000:
        assert len(jobs) == 1
    else:
        assert 1 < len(jobs) < ref.metrics.batches - 1


def test_next_job_runs_while_the_driver_works_through_the_batches_read_ahead(spark, tmp_path, monkeypatch):
    """When what waits ahead is within ``prefetch_bytes``, the next job starts at once, not at the last batch."""
    import os

    from obda.execution import spark_io

    case = CASE["row5_bag"]
    rows = random_streams(36, steps=30)
    src = sources(s="data/s", t="data/t")
    write_csv_batches(tmp_path / "data", random_splits(rows, 36, max_chunk=1), src)
    ref, ref_text = run(spark, tmp_path, src, case, "ref.jsonl", max_files_per_batch=1, prefetch=0)
    largest = max(os.path.getsize(p) for p in (tmp_path / "data").rglob("*.csv"))
    jobs = []
    collect = spark_io.collect_batches
    monkeypatch.setattr(spark_io, "collect_batches", lambda s_, b, c=None: jobs.append(len(b)) or collect(s_, b, c))
    q = ContinuousQuery(case.sql, src, [case.verdict], base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "o.jsonl"),
                        spark=spark, max_files_per_batch=1, prefetch_bytes=8 * largest)
    q.step()
    # micro-batches 2..jobs[0] of the first job wait, and the job of the ones after them was started
    assert jobs[0] >= 3 and len(q._ahead) > jobs[0] - 1
    q.run_until_exhausted()
    q.close()
    assert (tmp_path / "o.jsonl").read_text() == ref_text


def test_read_ahead_picks_up_files_that_arrive_later(spark, tmp_path):
    case = CASE["row5_bag"]
    rows = random_streams(32)
    src = sources(s="data/s", t="data/t")
    splits = random_splits(rows, 32, max_chunk=2)
    first, later = splits[: len(splits) // 2], splits[len(splits) // 2:]
    write_csv_batches(tmp_path / "data", first, src)
    q = ContinuousQuery(case.sql, src, [case.verdict], base_dir=tmp_path, sink=JsonLinesSink(tmp_path / "o.jsonl"),
                        spark=spark, max_files_per_batch=1, prefetch=2)
    q.step()
    assert q._ahead  # the next batches' jobs are running
    write_csv_batches(tmp_path / "data", later, src, start=len(first))
    q.run_until_exhausted()
    q.close()
    assert bindings((tmp_path / "o.jsonl").read_text(), ("a",)) == Oracle(src, rows).answers(case.sql)


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


@pytest.mark.parametrize("prefetch", [0, 4])
def test_file_names_with_glob_characters_are_read_as_named(spark, tmp_path, prefetch):
    """Spark's readers expand ``[ ] { } * ? \\`` in paths; the executor's files are read as listed.

    Before: a file named ``x[1].csv`` failed the micro-batch (path not found).  With read-ahead
    the files of several micro-batches are also told apart by the names Spark reports.
    """
    case = CASE["row5_bag"]
    rows = random_streams(35, steps=14)
    src = sources(s="data/s", t="data/t")
    write_csv_batches(tmp_path / "data", random_splits(rows, 35, max_chunk=2), src)
    odd = ["x[1]", "y{2,3}", "z*", "q?", "b\\s", "[ab]", "p%41 ä"]
    for name in ("s", "t"):
        for f, new in zip(sorted((tmp_path / "data" / name).iterdir()), odd):
            f.rename(f.with_name(f"{f.stem}-{new}.csv"))  # keeps the name order
    q, text = run(spark, tmp_path, src, case, "o.jsonl", max_files_per_batch=1, prefetch=prefetch)
    assert q.metrics.invalid == 0 and q.metrics.late == 0
    assert q.metrics.rows_read == {n: len(rows[n]) for n in ("s", "t")}
    assert bindings(text, ("a",)) == Oracle(src, rows).answers(case.sql)


@pytest.mark.parametrize("ids", ["foreseen", "unforeseen", "shared"])
def test_one_job_reads_several_micro_batches(spark, tmp_path, monkeypatch, ids):
    """``collect_batches``: one Spark job; per micro-batch the groups its files give alone.

    CSV, JSON and Parquet files of one stream and CSV files of another, under a directory
    whose name Spark reports URL-encoded (space, %, #, quotes, non-ASCII, a no-break space).
    ``ids``: the rows' file ids are those foreseen from the listed names (one job); none is
    (the ids Spark gives are not foreseen: the job runs again grouped by path); two files of
    different micro-batches share one (grouped by path from the start).
    """
    from obda.analysis.forest import build_forest
    from obda.execution.spark_io import ReadRequest, collect_batch, collect_batches

    case = CASE["row5_bag"]
    rows = random_streams(34, steps=12)
    base = tmp_path / "dä ta %41 x#&=+~'(),;@!$^`|<>\"\u00a0z"
    src = sources(s="s", t="t")
    write_csv_batches(base, random_splits(rows, 34, max_chunk=2), src)
    extra = sorted((base / "s").iterdir())[-2:]  # the last two s files again as JSON and Parquet
    import csv as _csv

    recs = [r for f in extra for r in _csv.DictReader(open(f))]
    with open(base / "s" / "part-90000.json", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs[: len(recs) // 2])
    spark.createDataFrame(
        [(int(r["a"]), int(r["b"]), int(r["c"]), r["ts"]) for r in recs[len(recs) // 2 :]],
        "a LONG, b LONG, c LONG, ts STRING",
    ).selectExpr("a", "b", "c", "CAST(ts AS TIMESTAMP) AS ts").coalesce(1).write.parquet(str(base / "s" / "p"))
    plan = build_forest(case.sql, src, "spark")
    pipes = {t.name: tuple(p for p in plan.pipelines if p.table.name == t.name) for t in plan.stream_tables()}
    tables = {t.name: t for t in plan.stream_tables()}

    def files(name, pattern):
        return sorted(str(f) for f in (base / name).rglob(pattern) if not f.name.startswith(("_", ".")))

    s_csv, t_csv = files("s", "*.csv"), files("t", "*.csv")
    batches = [
        [ReadRequest(tables["s"], pipes["s"], tuple(s_csv[:2]), "csv"), ReadRequest(tables["t"], pipes["t"], tuple(t_csv[:3]), "csv")],
        [ReadRequest(tables["t"], pipes["t"], tuple(t_csv[3:]), "csv")],
        [ReadRequest(tables["s"], pipes["s"], tuple(s_csv[2:]), "csv"),
         ReadRequest(tables["s"], pipes["s"], tuple(files("s", "*.json")), "json"),
         ReadRequest(tables["s"], pipes["s"], tuple(files("s", "*.parquet")), "parquet")],
    ]
    from obda.execution import spark_io

    actions = []
    real = spark_io.collect_rows
    monkeypatch.setattr(spark_io, "collect_rows", lambda df: actions.append(df) or real(df))
    if ids == "unforeseen":
        monkeypatch.setattr(spark_io, "_file_ids", lambda batch_of_path: {})
    elif ids == "shared":
        monkeypatch.setattr(spark_io, "_file_ids", lambda batch_of_path: None)
    together = collect_batches(spark, batches, {})
    # one DataFrame action for the three micro-batches (two when the first one's file ids were not foreseen)
    assert len(actions) == (2 if ids == "unforeseen" else 1) and len(together) == 3
    monkeypatch.undo()
    for reqs, got in zip(batches, together):
        alone = collect_batch(spark, reqs, {})
        assert decoded(spark, got) == decoded(spark, alone) != {}
        assert sorted(p for r in got.requests for p in r.paths) == sorted(p for r in reqs for p in r.paths)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=80), st.binary(min_size=0, max_size=70).map(lambda b: b.hex())), min_size=1,
                max_size=20))
def test_xxhash64_is_sparks(spark, strings):
    """The driver's XXH64 (file ids of a job over several micro-batches) gives Spark's ``xxhash64`` of a string."""
    from obda.execution.spark_io import xxhash64

    got = spark.createDataFrame([(x,) for x in strings], "s STRING").selectExpr("s", "xxhash64(s) AS h").collect()
    assert [(r.s, r.h) for r in got] == [(x, xxhash64(x.encode("utf-8"))) for x in strings]


def decoded(spark, collected):
    """Per stream table of a collected micro-batch: (rows, valid, late, invalid, max_ts, groups)."""
    from obda.execution.query import _merge_batches
    from obda.execution.spark_io import decode_batch

    parts = decode_batch(spark, collected, None)
    out = {}
    for name in {r.table.name for r in collected.requests if r.paths}:
        b = _merge_batches(name, [p for r, p in zip(collected.requests, parts) if r.table.name == name])
        out[name] = (b.rows, b.valid, b.late, b.invalid, b.max_ts, b.groups)
    return out
