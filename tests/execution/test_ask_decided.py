"""An ASK over streams stops reading once it answered true (its answer is final; README "ASK").

Before, `obda run ask.rq --until-exhausted` read every file of the backlog after its one line was out, and the
service kept reading for it forever. The answer line is the same; what changes is how much is read: nothing
after the micro-batch that emitted it, also after a restart from the checkpoint and in a shared loop.
"""

from __future__ import annotations

import json

import pytest

from execution.exec_harness import demo_world, write_seed
from obda.analysis import plan_execution
from obda.execution import ContinuousQuery, JsonLinesSink
from obda.execution.shared import SharedScan

PREFIX = "PREFIX : <http://example.org/turbine#>\n"
ASK = PREFIX + "ASK { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 10) }"
NEVER = PREFIX + "ASK { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 1000) }"
SELECT = PREFIX + "SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } }"


@pytest.fixture
def world(demo, tmp_path):
    streams, statics = demo_world(demo.sources, 5, timestamps=12, rows_per_timestamp=(2, 4))
    located = write_seed(tmp_path, demo.sources, streams, statics, 5)
    return demo, located, sum(1 for _ in (tmp_path / "data" / "measurement").iterdir())


def _query(demo, located, tmp_path, text, name, backend="local", spark=None, **kw):
    return ContinuousQuery(plan_execution(demo.compile(text), located), base_dir=tmp_path, backend=backend,
                           spark=spark, sink=JsonLinesSink(tmp_path / f"{name}.jsonl"), max_files_per_batch=1, **kw)


def _lines(tmp_path, name):
    path = tmp_path / f"{name}.jsonl"
    return [json.loads(line)["binding"] for line in path.read_text().splitlines()] if path.exists() else []


def _read(q) -> int:
    return sum(len(fs) for fs in q.processed.values())


@pytest.mark.parametrize("backend", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_an_answered_ask_reads_no_more_files(world, tmp_path, backend, request):
    demo, located, files = world
    spark = request.getfixturevalue("spark") if backend == "spark" else None
    q = _query(demo, located, tmp_path, ASK, "ask", backend, spark, checkpoint_dir=tmp_path / "ck")
    q.run_until_exhausted()
    assert _lines(tmp_path, "ask") == [{"boolean": True}]
    assert q.decided and q.metrics.to_dict()["decided"] is True
    read = _read(q)
    assert 0 < read < files  # the first files hold a reading above 10: not the whole backlog (it reads one stream)
    assert q.step(exhausted=True) == 0 and _read(q) == read
    q.close()
    again = _query(demo, located, tmp_path, ASK, "ask", backend, spark, checkpoint_dir=tmp_path / "ck")
    again.run_until_exhausted()  # restarted: the checkpoint says the answer is final
    assert again.decided and _read(again) == read and _lines(tmp_path, "ask") == [{"boolean": True}]
    again.close()


def test_an_ask_without_a_solution_reads_everything_and_says_nothing(world, tmp_path):
    demo, located, files = world
    q = _query(demo, located, tmp_path, NEVER, "never")
    q.run_until_exhausted()
    assert not q.decided and _lines(tmp_path, "never") == [] and "decided" not in q.metrics.to_dict()
    assert len(q.processed["measurement"]) == files  # false is never final: every file is read
    q.close()


def test_in_a_shared_loop_the_others_read_on(world, tmp_path):
    demo, located, files = world
    loop = SharedScan(max_files_per_batch=1)
    ask, select = _query(demo, located, tmp_path, ASK, "ask"), _query(demo, located, tmp_path, SELECT, "select")
    loop.add("ask", ask)
    loop.add("select", select)
    loop.run_until_exhausted(max_batches=10 * files)
    assert ask.decided and len(select.processed["measurement"]) == files
    assert len(ask.processed["measurement"]) < files
    assert _lines(tmp_path, "ask") == [{"boolean": True}] and select.metrics.rows_out > 0
    for q in (ask, select):
        q.close()
