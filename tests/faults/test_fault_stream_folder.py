"""Fault: a stream folder removed and recreated while a query runs (issue 29, item 4).

Behaviour (README "Faults"): a stream's files are known by their path.  While its folder is missing the query
keeps running — the folder lists no file, nothing is read, and (without an idle timeout) the stream holds the
marker back, so no timestamp closes without it.  Once the folder is there again, the files in it that were not
read before are read; a file under a name that was read already is not read again (its rows were answered: a
restored copy would repeat them; one whose size or time differ is reported as changed in the quarantine).

The test: `obda run --output-dir D --checkpoint C` (no --until-exhausted: a running query) reads six blocks of
two streams; the measurement folder is removed; the run goes on for a micro-batch without it; the folder is
recreated with a restored copy of one file it read and three new blocks (both streams).  Every new file is
read; then the run is stopped and `--until-exhausted` closes the last timestamps.  The committed output equals
one uninterrupted run's over every block, line for line: nothing lost, nothing repeated, nothing late.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections import Counter

import pytest

from faults.faultkit import check_log, checkpoint_mark, cli, command, fed, metrics_of, run, start, stop
from obda.execution import checkpoint
from obda.execution.committed_output import read_committed
from waiting import wait_for


def read_files(ck) -> set[str]:
    """The files the run's last checkpoint records as read."""
    try:
        state = checkpoint.load(ck / "state.pkl")
    except (FileNotFoundError, Exception):  # not written yet (or being replaced): not yet
        return set()
    return {f for fs in state["processed"].values() for f in fs}


#: the Spark backend keeps no rows of open timestamps in memory: each micro-batch reads them again from the files
#: that hold them (SparkSteps.carried); where one of those is gone the run stops, located, rather than lose them
GONE = "still hold rows of timestamps not closed yet and are gone"


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=[pytest.mark.slow, pytest.mark.spark])])
def test_a_stream_folder_removed_and_recreated_loses_and_repeats_nothing(tmp_path, backend):
    ws, query, feeder = fed(tmp_path / "run", blocks=6, seed=4)
    folder = ws / "data" / "measurement"
    streams = ("maintenance", "measurement")  # the query's streams (the feeder writes power and alarm too)
    first = {str(p) for s in streams for p in (ws / "data" / s).glob("feed-*.csv")}
    out, ck = tmp_path / "out", tmp_path / "ck"
    proc = start(command(ws, query, out, ck, exhausted=False, backend=backend), tmp_path / "run.log")
    try:
        wait_for(lambda: first <= read_files(ck) or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, (tmp_path / "run.log").read_text()
        kept = tmp_path / "kept.csv"
        shutil.copy2(folder / "feed-000002.csv", kept)  # a copy of a file it read, restored later
        backup = tmp_path / "backup"
        shutil.copytree(folder, backup)
        shutil.rmtree(folder)
        mark = checkpoint_mark(ck)
        # a micro-batch without the folder (Spark: or the located stop, when its files held open rows)
        wait_for(lambda: checkpoint_mark(ck) != mark or proc.poll() is not None, timeout=60)
        if proc.poll() is not None:
            log_text = (tmp_path / "run.log").read_text()
            assert backend == "spark" and proc.returncode != 0 and GONE in log_text, log_text[-3000:]
            assert "Traceback" not in log_text, log_text[-3000:]
            shutil.copytree(backup, folder)  # the files restored: the same command resumes
            proc = start(command(ws, query, out, ck, exhausted=False, backend=backend), tmp_path / "run.log")
            wait_for(lambda: checkpoint_mark(ck) != mark or proc.poll() is not None, timeout=300)
        else:
            folder.mkdir()
            shutil.copy2(kept, folder / "feed-000002.csv")
        assert proc.poll() is None, (tmp_path / "run.log").read_text()
        new = [str(f) for _ in range(3) for s, f in feeder.feed_block().items() if s in streams]
        wait_for(lambda: set(new) <= read_files(ck), timeout=300)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: stops after the micro-batch, checkpoint complete
        assert proc.wait(30) == 0, (tmp_path / "run.log").read_text()
    finally:
        stop(proc)
    assert read_files(ck) == first | set(new)
    # the end of the input: the last timestamps close (Spark: in a process of its own, no session in this one)
    if backend == "local":
        last = cli(command(ws, query, out, ck))
        code, text = last.exit_code, last.output
    else:
        last = run(command(ws, query, out, ck, backend=backend), timeout=600)
        code, text = last.returncode, last.stderr
    assert code == 0, text[-3000:]
    metrics = metrics_of(text)
    assert metrics["late"] == 0 and metrics["invalid"] == 0 and metrics["changed_files"] == 0

    # one uninterrupted run over the same nine blocks (the same seed writes the same files), local backend
    ref_ws, ref_query, _ = fed(tmp_path / "ref", blocks=9, seed=4)
    ref = cli(command(ref_ws, ref_query, tmp_path / "ref-out", tmp_path / "ref-ck"))
    assert ref.exit_code == 0, ref.output[-3000:]
    expected = read_committed(tmp_path / "ref-out")
    assert len(expected) > 20
    got = read_committed(out)
    if backend == "local":
        assert got == expected  # line for line
    else:  # the same answers (Spark may order those of one timestamp differently)
        assert multiset(got) == multiset(expected)
    check_log(out)


def multiset(rows: list[dict]) -> Counter:
    return Counter((r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in rows)


def test_a_query_whose_open_rows_files_are_gone_stops_located(tmp_path):
    """The Spark backend reads the rows of open timestamps again from their files each micro-batch: where one is
    gone, the micro-batch fails with the file named (nothing committed) instead of answering without its rows."""
    from obda.analysis import plan_execution
    from obda.errors import ExecutionError
    from obda.execution import ContinuousQuery, JsonLinesSink
    from obda.model.sources import Sources

    yaml = ("tables:\n  s: {kind: stream, timestamp: ts, location: data/s, format: csv,"
            " columns: {a: integer, ts: timestamp}}\n")
    (tmp_path / "data" / "s").mkdir(parents=True)
    kept, gone = tmp_path / "data" / "s" / "a.csv", tmp_path / "data" / "s" / "b.csv"
    kept.write_text("a,ts\n1,2024-01-01T00:00:01Z\n")
    q = ContinuousQuery(plan_execution("SELECT m.a AS a FROM s AS m", Sources.from_yaml(yaml), ["bounded"]),
                        base_dir=tmp_path, backend="spark", sink=JsonLinesSink(tmp_path / "out.jsonl"))
    q.open_files = {"s": {str(kept): 1, str(gone): 2}}
    with pytest.raises(ExecutionError, match="1 file\\(s\\) read earlier still hold rows") as e:
        q.carried()
    assert e.value.location.file == str(gone)
    q.open_files = {"s": {str(kept): 1}}
    assert q.carried() == {"s": [str(kept)]}
