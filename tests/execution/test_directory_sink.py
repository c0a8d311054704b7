"""DirectorySink: staged parts, an atomic commit log, recovery after a crash at every point of the protocol."""

from __future__ import annotations

import json
import os
import zlib

import pytest

from obda.errors import ExecutionError
from obda.execution import DirectorySink, answer_lines
from obda.execution import directory_sink as ds
from obda.execution.answers import AnswerFrame
from obda.execution.query_engine import Answer
from obda.execution.rows import micros_to_iso
from obda.execution.committed_output import committed_batches, iter_committed, read_committed

AT0 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in µs


def lines_of(*values, at=AT0):
    return [json.dumps({"emitted_at": micros_to_iso(at), "binding": {"x": v, "n": i}}) for i, v in enumerate(values)]


def dicts(lines):
    return [json.loads(x) for x in lines]


def step(sink, lines, *, commit=True):
    """One executor micro-batch: write, flush (→ offset), [checkpoint], commit."""
    sink.write_lines(lines)
    offset = sink.flush()
    if commit:
        sink.commit(offset)
    return offset


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------------- local lines


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_committed_batches_in_order_with_their_layout(tmp_path, fmt):
    sink = DirectorySink(tmp_path / "out", fmt)
    a, b = lines_of("a", "b", None), lines_of("c")
    assert step(sink, a) == 1
    assert step(sink, []) == 1  # a micro-batch without answers opens no batch
    assert step(sink, b) == 2
    assert sink.read() == dicts(a + b)
    ext = "json" if fmt == "json" else "parquet"
    assert [p.name for p in sink.committed_files()] == [f"batch-00000001-part-00000.{ext}", f"batch-00000002-part-00000.{ext}"]
    rec = json.loads((tmp_path / "out" / "_commits" / "00000002.json").read_text())
    part = tmp_path / "out" / "data" / f"batch-00000002-part-00000.{ext}"
    assert rec == {"batch": 2, "format": fmt, "first": 4, "lines": 1, "check": rec["check"],
                   "files": [{"name": part.name, "lines": 1, "bytes": part.stat().st_size,
                              "crc32": zlib.crc32(part.read_bytes())}]}  # checked by readers (tests/faults)
    assert [(c.batch, c.first, c.lines) for c in iter_committed(tmp_path / "out")] == [(1, 1, 3), (2, 4, 1)]
    assert [c.batch for c in iter_committed(tmp_path / "out", after_batch=1)] == [2]
    assert read_committed(tmp_path / "out", after_batch=1) == dicts(b)
    assert not any((tmp_path / "out" / "_staging").iterdir())


def test_several_writes_in_one_batch_are_its_parts_in_write_order(tmp_path):
    sink = DirectorySink(tmp_path)
    sink.write_lines(lines_of("a"))
    sink.write_lines(lines_of("b", "c"))
    assert sink.flush() == 1
    sink.commit(1)
    assert [c.files for c in sink.committed()] == [(("batch-00000001-part-00000.json", 1),
                                                    ("batch-00000001-part-00001.json", 2))]
    assert [r["binding"]["x"] for r in sink.read()] == ["a", "b", "c"]


def test_parquet_parts_have_the_records_schema(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = DirectorySink(tmp_path, "parquet")
    step(sink, [json.dumps({"emitted_at": "2024-01-01T00:00:05Z", "binding": {"t": "http://x/1", "v": 3, "w": None}})])
    schema = pq.read_schema(sink.committed_files()[0])
    assert schema.field("emitted_at").type == pa.string()
    assert schema.field("binding").type == pa.struct([("t", pa.string()), ("v", pa.int64()), ("w", pa.string())])
    assert sink.read() == [{"emitted_at": "2024-01-01T00:00:05Z", "binding": {"t": "http://x/1", "v": 3, "w": None}}]


def test_readers_never_see_staged_parts(tmp_path):
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    sink.write_lines(lines_of("b"))
    assert sink.read() == dicts(lines_of("a"))  # written, not flushed
    offset = sink.flush()
    assert sink.read() == dicts(lines_of("a"))  # flushed, checkpoint not yet on disk
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["batch-00000001-part-00000.json"]
    other = DirectorySink(tmp_path)  # a reader in another process sees the same
    assert other.read() == dicts(lines_of("a"))
    sink.commit(offset)
    assert read_committed(tmp_path) == dicts(lines_of("a") + lines_of("b"))


def test_commit_is_idempotent(tmp_path):
    sink = DirectorySink(tmp_path)
    offset = step(sink, lines_of("a", "b"))
    before = listing(tmp_path)
    sink.commit(offset)
    sink.commit(offset)
    sink.commit(0)
    sink.commit(None)
    assert listing(tmp_path) == before
    assert sink.read() == dicts(lines_of("a", "b"))
    with pytest.raises(ExecutionError, match="newest batch flushed is 1"):
        sink.commit(2)  # never flushed


def test_a_commit_interrupted_half_way_is_finished_once(tmp_path, monkeypatch):
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    sink.write_lines(lines_of("b"))
    sink.write_lines(lines_of("c"))
    offset = sink.flush()
    real = ds.write_atomic

    def crash_at_commit_file(path, data):
        if path.parent.name == "_commits":
            raise KeyboardInterrupt("killed")  # the parts are in data/, the commit file is not written
        real(path, data)

    monkeypatch.setattr(ds, "write_atomic", crash_at_commit_file)
    with pytest.raises(KeyboardInterrupt):
        sink.commit(offset)
    monkeypatch.setattr(ds, "write_atomic", real)
    assert len(list((tmp_path / "data").iterdir())) == 3  # moved, but no reader lists them
    assert read_committed(tmp_path) == dicts(lines_of("a"))
    restarted = DirectorySink(tmp_path)
    restarted.recover(offset)  # the checkpoint recorded batch 2: finished, not repeated
    assert restarted.read() == dicts(lines_of("a") + lines_of("b") + lines_of("c"))
    assert len(restarted.committed_files()) == 3
    assert not any((tmp_path / "_staging").iterdir())
    assert step(restarted, lines_of("d")) == 3


def test_a_commit_interrupted_between_two_moves(tmp_path, monkeypatch):
    sink = DirectorySink(tmp_path)
    sink.write_lines(lines_of("a"))
    sink.write_lines(lines_of("b"))
    offset = sink.flush()
    real, moves = os.replace, []

    def crash_on_second_move(src, dst):
        if str(dst).startswith(str(tmp_path / "data")):
            moves.append(dst)
            if len(moves) == 2:
                raise KeyboardInterrupt("killed")
        real(src, dst)

    monkeypatch.setattr(ds.os, "replace", crash_on_second_move)
    with pytest.raises(KeyboardInterrupt):
        sink.commit(offset)
    monkeypatch.setattr(ds.os, "replace", real)
    assert read_committed(tmp_path) == []
    DirectorySink(tmp_path).commit(offset)  # a second call finishes the job
    assert read_committed(tmp_path) == dicts(lines_of("a") + lines_of("b"))


# ---------------------------------------------------------------------------------------------- recovery


def test_recover_commits_what_the_checkpoint_covers(tmp_path):
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    offset = step(sink, lines_of("b"), commit=False)  # checkpoint written, then killed before the commit
    restarted = DirectorySink(tmp_path)
    assert restarted.read() == dicts(lines_of("a"))
    restarted.recover(offset)
    assert restarted.read() == dicts(lines_of("a") + lines_of("b"))
    assert step(restarted, lines_of("c")) == 3
    assert restarted.read() == dicts(lines_of("a") + lines_of("b") + lines_of("c"))


def test_recover_deletes_what_the_checkpoint_does_not_cover(tmp_path):
    sink = DirectorySink(tmp_path)
    checkpointed = step(sink, lines_of("a"))
    step(sink, lines_of("b"), commit=False)  # flushed, killed before the checkpoint
    sink.write_lines(lines_of("c"))  # and a write of the batch after it, never flushed
    restarted = DirectorySink(tmp_path)
    restarted.recover(checkpointed)
    assert not any((tmp_path / "_staging").iterdir())
    assert step(restarted, lines_of("b2")) == 2  # the replayed batch gets the same number
    assert restarted.read() == dicts(lines_of("a") + lines_of("b2"))


def test_recover_none_drops_all_staging_and_numbering_goes_on(tmp_path):
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    step(sink, lines_of("b"), commit=False)
    restarted = DirectorySink(tmp_path)
    restarted.recover(None)
    assert not any((tmp_path / "_staging").iterdir())
    assert step(restarted, lines_of("c")) == 2
    assert restarted.read() == dicts(lines_of("a") + lines_of("c"))


def test_without_recover_a_leftover_is_never_committed(tmp_path):
    """The executor without a checkpoint folder never calls recover: a crashed run's staged batch stays out."""
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    step(sink, lines_of("lost"), commit=False)
    again = DirectorySink(tmp_path)
    assert step(again, lines_of("b")) == 2
    again.recover(2)  # even a later recover with that number finds nothing else staged
    assert again.read() == dicts(lines_of("a") + lines_of("b"))


def test_committed_batches_after_the_checkpoint_are_refused(tmp_path):
    sink = DirectorySink(tmp_path)
    step(sink, lines_of("a"))
    step(sink, lines_of("b"))
    with pytest.raises(ExecutionError, match="batch 2 is committed but the checkpoint records batch 1"):
        DirectorySink(tmp_path).recover(1)
    DirectorySink(tmp_path).recover(2)  # the matching checkpoint is fine
    assert read_committed(tmp_path) == dicts(lines_of("a") + lines_of("b"))


def test_a_checkpointed_batch_the_folder_never_had_is_refused(tmp_path):
    sink = DirectorySink(tmp_path / "a")
    step(sink, lines_of("a"))
    offset = step(sink, lines_of("b"))
    with pytest.raises(ExecutionError, match="neither its commit file nor its staged parts"):
        DirectorySink(tmp_path / "b").recover(offset)  # the output folder was replaced
    DirectorySink(tmp_path / "b").recover(0)  # a checkpoint before any output is fine


def test_retention_drops_old_batches_but_keeps_the_numbering(tmp_path):
    sink = DirectorySink(tmp_path)
    for v in "abcd":
        step(sink, lines_of(v, v))
    assert sink.drop_committed(2) == 2
    assert [c.batch for c in committed_batches(tmp_path)] == [3, 4]
    assert sink.drop_committed(10) == 1  # the newest batch stays
    assert [(c.batch, c.first) for c in committed_batches(tmp_path)] == [(4, 7)]
    assert len(list((tmp_path / "data").iterdir())) == 1
    restarted = DirectorySink(tmp_path)
    restarted.recover(4)
    assert step(restarted, lines_of("e")) == 5
    assert [(c.batch, c.first) for c in restarted.committed()] == [(4, 7), (5, 9)]


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(ExecutionError, match="json or parquet"):
        DirectorySink(tmp_path, "csv")


# ---------------------------------------------------------------------------------------------- Spark frames


def frame(spark, rows, columns=("x", "v")):
    """An AnswerFrame built by hand: ``__at`` (µs) and one ``__b<i>`` per variable."""
    df = spark.createDataFrame(rows, "__at long, __b0 string, __b1 long").repartition(3)
    return AnswerFrame(df, tuple(columns))


ROWS = [(AT0, "a", 1), (AT0, "a", 1), (AT0 + 5_000_000, "b", None), (AT0 + 5_000_123, None, 7)]


def expected(rows, columns=("x", "v")):
    return sorted(
        (json.loads(x) for x in answer_lines([Answer(r[0], tuple(r[1:]), 1) for r in rows], columns)),
        key=json.dumps,
    )


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_spark_frames_are_written_by_spark_and_committed(spark, tmp_path, fmt):
    sink = DirectorySink(tmp_path / "out", fmt)
    sink.write_frame(frame(spark, ROWS[:2]))
    sink.write_frame(frame(spark, ROWS[2:]))
    sink.write_lines(lines_of("local"))  # a driver-side part in the same batch
    offset = sink.flush()
    assert offset == 1 and sink.read() == []  # staged only
    sink.commit(offset)
    got = sink.read()
    assert sorted(got[:-1], key=json.dumps) == expected(ROWS)
    assert got[-1] == dicts(lines_of("local"))[0]
    names = [p.name for p in sink.committed_files()]
    ext = "json" if fmt == "json" else "parquet"
    assert names == [f"batch-00000001-part-{i:05d}.{ext}" for i in range(len(names))]
    assert sum(c.lines for c in sink.committed()) == 5
    assert not any((tmp_path / "out" / "_staging").iterdir())
    # an empty frame: a batch without data files
    sink.write_frame(frame(spark, []))
    sink.commit(sink.flush())
    assert [(c.batch, c.lines, c.files) for c in sink.committed(after_batch=1)] == [(2, 0, ())]


@pytest.mark.spark
def test_spark_parquet_parts_read_like_json_parts(spark, tmp_path):
    j, p = DirectorySink(tmp_path / "j", "json"), DirectorySink(tmp_path / "p", "parquet")
    for sink in (j, p):
        sink.write_frame(frame(spark, ROWS))
        sink.commit(sink.flush())
    assert sorted(j.read(), key=json.dumps) == sorted(p.read(), key=json.dumps) == expected(ROWS)


@pytest.mark.spark
def test_spark_batch_staged_but_not_committed_is_recovered_or_dropped(spark, tmp_path):
    sink = DirectorySink(tmp_path)
    sink.write_frame(frame(spark, ROWS[:1]))
    first = sink.flush()
    sink.commit(first)
    sink.write_frame(frame(spark, ROWS[1:]))
    second = sink.flush()  # killed before the checkpoint: dropped
    dropped = DirectorySink(tmp_path)
    dropped.recover(first)
    assert dropped.read() == expected(ROWS[:1])
    dropped.write_frame(frame(spark, ROWS[1:]))
    assert dropped.flush() == second  # killed after the checkpoint: committed
    kept = DirectorySink(tmp_path)
    kept.recover(second)
    assert sorted(kept.read(), key=json.dumps) == expected(ROWS)
