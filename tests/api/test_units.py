"""Units of the service: the numbered result log (against a list model), settings, the feeder, `obda serve --help`."""

from __future__ import annotations

import csv
import json
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from api import Settings
from api.feeder import Feeder, main as feeder_main, prepare_workspace
from api.results import ResultLog
from apikit import DEMO, TOKEN
from obda.cli import app as cli_app
from obda.project import Project

# ------------------------------------------------------------------------------------------ result log

ops = st.lists(
    st.one_of(
        st.tuples(st.just("step"), st.integers(0, 7)),  # a micro-batch: write, flush, checkpoint, commit
        st.tuples(st.just("crash"), st.tuples(st.integers(0, 7), st.booleans())),  # killed after the flush
        st.tuples(st.just("page"), st.tuples(st.integers(0, 45), st.integers(1, 10))),
    ),
    max_size=40,
)


@given(capacity=st.integers(1, 12), script=ops)
@settings(max_examples=150, deadline=None)
def test_result_log_pages_like_a_bounded_list(tmp_path_factory, capacity, script):
    """Against a list model: committed answers only, numbered by position, the last ``capacity`` kept, and a
    restart after a crash between the flush and the commit (checkpoint written or not) repeats nothing."""
    from obda.execution.committed_output import committed_batches

    folder = tmp_path_factory.mktemp("results")
    log = ResultLog(capacity, directory=folder)
    model: list[dict] = []  # every committed answer
    offset = 0  # what the executor's checkpoint records
    for op, arg in script:
        if op == "page":
            after, limit = arg
            page = log.page(after, limit)
            first = max(1, len(model) - capacity + 1)
            want = [a for a in model if a["seq"] >= first and a["seq"] > after][:limit]
            assert list(page.items) == want
            assert page.last_seq == log.last_seq == len(model)
            assert page.next_after == (want[-1]["seq"] if want else None)
            assert page.first_seq == first
            continue
        n, checkpointed = (arg, True) if op == "step" else arg
        lines = [json.dumps({"emitted_at": "t", "binding": {"k": len(model) + i}}) for i in range(n)]
        log.write_lines(lines)
        flushed = log.flush()
        assert log.last_seq == len(model)  # staged answers are not visible
        if checkpointed:
            offset = flushed
            model += [{"seq": len(model) + i + 1, "emitted_at": "t", "binding": {"k": len(model) + i}}
                      for i in range(n)]
        if op == "step":
            log.commit(offset)
        else:  # a new process: the log over the same folder, the executor recovers from its checkpoint
            log = ResultLog(capacity, log.store, log.id, folder)
            log.recover(offset)
        assert log.last_seq == len(model)
        kept = committed_batches(folder)
        assert all(c.last >= len(model) - capacity + 1 for c in kept[:-1])  # older batches left the disk


def test_result_log_rejects_zero_capacity():
    with pytest.raises(ValueError):
        ResultLog(0)


# ------------------------------------------------------------------------------------------ settings


def test_settings_check_their_values(tmp_path):
    with pytest.raises(ValueError, match="token"):
        Settings(project_dir=tmp_path, token="short")
    with pytest.raises(ValueError, match="backend"):
        Settings(project_dir=tmp_path, token=TOKEN, backend="flink")
    with pytest.raises(ValueError, match="max_running"):
        Settings(project_dir=tmp_path, token=TOKEN, max_running=0)
    with pytest.raises(ValueError, match="max_query_chars"):
        Settings(project_dir=tmp_path, token=TOKEN, max_query_chars=10**9)


def test_settings_from_env(tmp_path):
    env = {"OBDA_PROJECT": str(tmp_path), "OBDA_TOKEN": TOKEN, "OBDA_SPARK_MASTER": "spark://h:7077",
           "OBDA_MAX_RUNNING": "2", "OBDA_TRIGGER_INTERVAL": "0.5", "OBDA_BACKEND": "local"}
    s = Settings.from_env(env)
    assert (s.project_dir, s.master, s.max_running, s.trigger_interval, s.backend) == (
        tmp_path, "spark://h:7077", 2, 0.5, "local")
    assert Settings.from_env(env, max_running=3).max_running == 3
    with pytest.raises(ValueError, match="OBDA_TOKEN"):
        Settings.from_env({"OBDA_PROJECT": str(tmp_path)})
    with pytest.raises(ValueError, match="OBDA_PROJECT"):
        Settings.from_env({"OBDA_TOKEN": TOKEN})


# ------------------------------------------------------------------------------------------ feeder


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_workspace_is_a_loadable_copy_with_its_own_data(tmp_path):
    ws = prepare_workspace(DEMO, tmp_path / "ws")
    p = Project.load(ws)
    assert p.directory == ws and p.settings.data_dir == ws / "data"
    assert p.settings.ontology_files == Project.load(DEMO).settings.ontology_files


def test_feeder_appends_time_ordered_parts_deterministically(tmp_path):
    a, b = (prepare_workspace(DEMO, tmp_path / n) for n in ("a", "b"))
    fa, fb = Feeder(a, seed=4, points=3), Feeder(b, seed=4, points=3)
    assert {p.parent.name for p in fa.write_static()} == {"site", "turbine", "sensor"}
    assert fa.write_static() == []  # never overwrites data that is there
    fb.write_static()
    for _ in range(3):
        files_a, files_b = fa.feed_block(), fb.feed_block()
        assert {k: read_rows(v) for k, v in files_a.items()} == {k: read_rows(v) for k, v in files_b.items()}
    meas = sorted((a / "data" / "measurement").iterdir())
    assert [p.name for p in meas] == ["feed-000000.csv", "feed-000001.csv", "feed-000002.csv"]
    # timestamps increase across parts: part k holds time points 3k .. 3k+2
    spans = []
    for p in meas:
        rows = read_rows(p)
        ts = [datetime.fromisoformat(r[rows[0].index("ts")]) for r in rows[1:]]
        spans.append((min(ts), max(ts)))
    assert all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
    # stream rows refer to existing sensors
    sensors = {r[0] for r in read_rows(a / "data" / "sensor" / "part-00000.csv")[1:]}
    assert {r[0] for p in meas for r in read_rows(p)[1:]} <= sensors
    # a new feeder on the same folder continues after the last part
    assert Feeder(a, seed=4, points=3).block == 3
    assert not [p for p in (a / "data" / "measurement").iterdir() if p.name.startswith(".")]


def test_feeder_command_line(tmp_path, capsys):
    assert feeder_main(["--project", str(DEMO), "--workspace", str(tmp_path / "w"), "--parts", "2",
                        "--interval", "0", "--points", "2"]) == 0
    out = capsys.readouterr().out
    assert "block 0" in out and "block 1" in out
    assert len(list((tmp_path / "w" / "data" / "power").glob("feed-*.csv"))) == 2
    assert not (DEMO / "data" / "power" / "feed-000000.csv").exists()  # the original project is untouched


# ------------------------------------------------------------------------------------------ CLI


def test_serve_help_shows_an_example():
    r = CliRunner().invoke(cli_app, ["serve", "--help"])
    assert r.exit_code == 0
    for word in ("--project", "--host", "--port", "--token", "--master", "OBDA_TOKEN", "Example", "obda serve"):
        assert word in r.output, word


def test_serve_rejects_a_short_token(tmp_path):
    r = CliRunner().invoke(cli_app, ["serve", "--project", str(DEMO), "--token", "short"])
    assert r.exit_code == 2 and "at least 8" in r.output
