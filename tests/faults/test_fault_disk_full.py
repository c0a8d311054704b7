"""Fault: the state folder's disk fills up while answers are committed (issue 29, item 4).

A real full disk: the checkpoint and output folders of `obda run --output-dir D --checkpoint C` are on a small
tmpfs, filled up (a file written until the kernel says ENOSPC) while the run commits micro-batches.  The run
stops with exit code 2 and a typed error located at the folder it could not write, saying "no space left on
device" and how to resume (never a traceback); what it committed is a prefix of an uninterrupted run's output.
Once the filler is removed, the same command resumes, and the committed output equals the uninterrupted run's,
line for line, with a gapless commit log.  Below it, each write of the sink and the checkpoint on a full disk:
refused with that error, leaving nothing half-written, and done once space is back.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from faults.faultkit import (BAG_JOIN, check_log, cli, command, commits, fed, fill, metrics_of, run,
                             small_filesystem, start, stop)
from obda.errors import ExecutionError
from obda.execution import DirectorySink, answer_lines, checkpoint
from obda.execution.query_engine import Answer
from obda.execution.committed_output import read_committed
from waiting import wait_for


def multiset(rows: list[dict]) -> Counter:
    return Counter((r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in rows)


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=[pytest.mark.slow, pytest.mark.spark])])
def test_a_full_disk_stops_the_run_with_a_located_error_and_the_same_command_resumes(tmp_path, backend):
    """On Spark the answers' part files are written by Spark's writers (the reference is the local backend's
    run: the same answers; their order within a timestamp may differ)."""
    ws, query, _ = fed(tmp_path, blocks=20, seed=3)
    exact = backend == "local"
    with small_filesystem(tmp_path / "state", "2m") as state:
        ref = cli(command(ws, query, state / "ref" / "out", state / "ref" / "ck"))  # (in the tmpfs: no fsync cost)
        assert ref.exit_code == 0, ref.output[-3000:]
        expected = read_committed(state / "ref" / "out")
        assert len(expected) > 30

        out, ck = state / "out", state / "ck"
        # a running query (not --until-exhausted: it would wait for more files once it read them all)
        proc = start(command(ws, query, out, ck, exhausted=False, backend=backend), tmp_path / "run.log")
        try:
            wait_for(lambda: commits(out) >= 3 or proc.poll() is not None, timeout=300, every=0.002)
            assert proc.poll() is None, (tmp_path / "run.log").read_text()
            filler = fill(state)  # the disk is full now, in the middle of the run's micro-batches
            rc = proc.wait(120)
        finally:
            stop(proc)
        log = (tmp_path / "run.log").read_text()
        assert rc == 2, log
        # typed, located at the folder that could not be written, says why and what to do
        error = log.strip().splitlines()[-1]
        m = re.fullmatch(r"error: (\S+): no space left on device: (.+?) could not be written; .+", error)
        assert m, error
        assert m.group(1) in (str(out), str(ck), str(ck / "quarantine.jsonl")), m.group(1)
        assert "run the same command again (same --checkpoint): it resumes" in error
        committed = read_committed(out)
        assert 0 < len(committed) < len(expected)
        # nothing wrong committed, nothing lost before the fault
        assert committed == expected[: len(committed)] if exact else not multiset(committed) - multiset(expected)
        check_log(out, staged=True)

        filler.unlink()  # space is back
        if exact:
            resumed = cli(command(ws, query, out, ck))
            code, text = resumed.exit_code, resumed.output
        else:  # (no Spark session in the test process)
            resumed = run(command(ws, query, out, ck, backend=backend), timeout=600)
            code, text = resumed.returncode, resumed.stderr
        assert code == 0, text[-3000:]
        got = read_committed(out)
        assert got == expected if exact else multiset(got) == multiset(expected)  # every answer once
        check_log(out)
        metrics = metrics_of(text)
        assert metrics["late"] == 0 and metrics["invalid"] == 0
    assert "Traceback" not in log, log[-3000:]  # one located line, no traceback (ContinuousQuery.start's loop)


# -- each write on a full disk -------------------------------------------------------------------------------

def lines(*values: int, at: int = 1_704_067_200_000_000) -> list[str]:
    return answer_lines([Answer(at, (v,), 1) for v in values], ("v",))


@pytest.fixture()
def full(tmp_path):
    """A small tmpfs (the sink's and the checkpoint's folders) and a function that fills it up."""
    with small_filesystem(tmp_path / "fs", "256k") as fs:
        yield fs


@pytest.mark.parametrize("point", ["part", "checkpoint", "commit"])
def test_each_write_on_a_full_disk_is_refused_whole_and_done_once_space_is_back(full, point):
    """The executor's protocol by hand — write, flush, checkpoint, commit — with the disk filling up before
    ``point``: a located ExecutionError ("no space left on device"); the committed output and the checkpoint
    are as they were; the partial files are gone; after ``recover`` with the checkpoint on disk (what a resumed
    query does) the batch is committed once or computed again."""
    out, ck = full / "out", full / "ck" / "state.pkl"
    sink = DirectorySink(out)
    sink.recover(None)
    sink.write_lines(lines(1, 2))
    checkpoint.dump({"offset": sink.flush()}, ck)
    sink.commit(1)
    before = read_committed(out)
    second = lines(3, 4, 5)

    filler = None
    if point == "part":
        filler = fill(full)
    with pytest.raises(ExecutionError, match="no space left on device") as err:
        sink.write_lines(second)
        offset = sink.flush()
        if point == "checkpoint":
            filler = fill(full)
        checkpoint.dump({"offset": offset}, ck)
        if point == "commit":
            filler = fill(full)
        sink.commit(offset)
    e = err.value
    assert e.location.file == str(ck.parent if point == "checkpoint" else out), e
    assert "Traceback" not in str(e) and str(e).startswith(f"{e.location.file}: no space left on device")
    assert read_committed(out) == before  # nothing published by the failed micro-batch
    assert checkpoint.load(ck) == {"offset": 1 if point != "commit" else 2}
    assert not list(ck.parent.glob("*.tmp")) and not list((out / "_commits").glob(".*"))
    if point == "part":
        assert not any((out / "_staging").rglob("part-*"))  # the partial part is removed

    filler.unlink()  # space is back: a resumed query
    resumed = DirectorySink(out)
    offset = checkpoint.load(ck)["offset"]
    resumed.recover(offset)
    if point != "commit":  # the checkpoint did not cover the batch: computed again
        resumed.write_lines(second)
        offset = resumed.flush()
        checkpoint.dump({"offset": offset}, ck)
        resumed.commit(offset)
    assert read_committed(out) == [json.loads(x) for x in lines(1, 2) + second]
    check_log(out)


# -- the service ------------------------------------------------------------------------------------------------

def test_a_full_state_folder_fails_the_query_resumably_and_start_resumes_it(tmp_path):
    """`obda serve --state-dir S` (the app in-process, local backend) with S on a tmpfs that fills up while a
    query commits: the query is ``failed``, resumable, its error located and saying "no space left on device";
    its published answers stay; once space is back POST /start resumes it, and its answers are an uninterrupted
    run's, numbered without a gap."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from api import Settings, create_app

    ws, query, feeder = fed(tmp_path, blocks=3, seed=8)
    auth = {"Authorization": "Bearer fault-test-token-0123"}

    def info():
        return c.get(f"/v1/queries/{qid}", headers=auth)

    def answers() -> list[dict]:
        items, after = [], 0
        while True:
            page = c.get(f"/v1/queries/{qid}/results", params={"after": after, "limit": 1000}, headers=auth).json()
            if not page["items"]:
                return items
            items += page["items"]
            after = page["next_after"]

    with small_filesystem(tmp_path / "state", "2m") as state:
        settings = Settings(project_dir=ws, token=auth["Authorization"][7:], backend="local", trigger_interval=0.05,
                            sse_poll=0.02, state_dir=state)
        with TestClient(create_app(settings), raise_server_exceptions=False) as c:
            r = c.post("/v1/queries", json={"name": "join", "query": BAG_JOIN, "idle_timeout": 0.3}, headers=auth)
            assert r.status_code == 201, r.text
            qid = r.json()["id"]
            assert c.post(f"/v1/queries/{qid}/start", headers=auth).json()["status"] == "running"
            wait_for(lambda: info().json()["results"] > 0, timeout=30)
            filler = fill(state)
            for _ in range(3):
                feeder.feed_block()
            seen = []  # the status answers while the disk is full
            failed = wait_for(lambda: seen.append(r := info()) or (r.status_code == 200 and r.json()["status"] ==
                                                                     "failed" and r.json()), timeout=30)
            errors = [r.status_code for r in seen if r.status_code >= 500]
            assert failed["resumable"] is True and "Traceback" not in failed["error"]
            assert re.match(rf"{re.escape(str(state / qid))}\S*: no space left on device: ", failed["error"]), failed
            published = answers()

            filler.unlink()  # space is back
            r = c.post(f"/v1/queries/{qid}/start", headers=auth)
            assert r.status_code == 200 and r.json()["status"] == "running", r.text
            expected = cli(command(ws, query, tmp_path / "ref" / "out", tmp_path / "ref" / "ck"))
            assert expected.exit_code == 0, expected.output
            want = Counter((a["emitted_at"], json.dumps(a["binding"], sort_keys=True))
                           for a in read_committed(tmp_path / "ref" / "out"))
            wait_for(lambda: info().json()["results"] >= sum(want.values()), timeout=30)
            c.post(f"/v1/queries/{qid}/stop", headers=auth)
            items = answers()
    assert [a["seq"] for a in items] == list(range(1, len(items) + 1))  # numbering continued, no gap
    assert items[: len(published)] == published  # what was published stays, under the same numbers
    assert Counter((a["emitted_at"], json.dumps(a["binding"], sort_keys=True)) for a in items) == want
    assert not errors, f"GET /v1/queries/{{id}} answered {errors[0]} while the state folder was full"


@pytest.mark.slow
@pytest.mark.spark
def test_a_part_file_spark_cannot_write_on_a_full_disk_is_refused_whole(spark, full):
    """The answers a micro-batch computed with Spark are written by Spark's writers (``write_frame``): on a full
    disk the failed job's files are removed and the error is the same located "no space left on device"."""
    from obda.execution.answers import AnswerFrame

    sink = DirectorySink(full / "out")
    rows = [(1_704_067_200_000_000 + i, f"s{i}", i) for i in range(2000)]
    frame = AnswerFrame(spark.createDataFrame(rows, "__at long, __b0 string, __b1 long").repartition(2), ("x", "v"))
    filler = fill(full)
    with pytest.raises(ExecutionError, match="no space left on device") as err:
        sink.write_frame(frame)
    assert err.value.location.file == str(full / "out") and "written by Spark" in str(err.value)
    assert not any((full / "out" / "_staging").rglob("part-*"))
    filler.unlink()
    sink.write_frame(frame)  # space is back: the micro-batch computed again
    sink.commit(sink.flush())
    assert len(read_committed(full / "out")) == len(rows)
