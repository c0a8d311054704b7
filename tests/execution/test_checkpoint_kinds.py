"""A checkpoint is plain typed data for every kind of query, and a query restored from it continues exactly.

Four kinds of query over the turbine demo, fed with small time-ordered files (``api.feeder``), one file per
stream and micro-batch:

* ``bag_join`` — two streams and a static table, bag semantics, into a directory sink (exactly-once commits);
* ``distinct`` — the same join, ``SELECT DISTINCT`` (the set of emitted answers is state);
* ``window_aggregate`` — per sensor the mean and count of the last 10 minutes (``NOW()`` window: panes);
* ``constrained`` — a join bounded only under a declared RI k-constraint (the constraint watch is state:
  first timestamps per key, Bloom filters, sliding maxima, whether it is still used).

Each is run once uninterrupted, and once stopped after a few micro-batches, several times, each time
continued by a **new** :class:`~obda.execution.ContinuousQuery` over the same checkpoint; the committed
output (an aggregate's changelog, replayed at every timestamp), the quarantine and the constraint metrics
must be the uninterrupted run's.  The checkpoint file refers to no class of obda's but ``Metrics``
(the restricted unpickler of :mod:`obda.execution.checkpoint` refuses any other).  In-process, the constrained
query runs also with its constraint kept in use throughout (``constrained_in_use``), and a finished query of
each kind resumes when new files arrive (what the service does).  The user's reproduction (``obda run
--checkpoint`` of the constrained query, new files, ``obda run`` again) runs through the CLI; some kinds
also on the Spark backend.  Below the queries, every kind of watch (RI, CA, OA, a stream key; in use and
disabled) goes through a checkpoint file after every micro-batch of tests/execution/test_constraints_exec.py's
data, into a new watch, and must decide as the watch that was kept.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from api.feeder import Feeder, prepare_workspace

ROOT = Path(__file__).resolve().parents[2]

#: hot readings after a maintenance of the turbine (two streams, a static table): bounded
BAG_JOIN = """PREFIX : <http://example.org/turbine#>
SELECT ?turbine ?v WHERE {
  GRAPH ?t1 { ?e :onTurbine ?turbine . }
  GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?t1 < ?t2 && ?v > 80)
}
"""

#: the same join as a set: each (turbine, value) once, at its first timestamp (bounded: Theorem 2)
DISTINCT = """PREFIX : <http://example.org/turbine#>
SELECT DISTINCT ?turbine ?v WHERE {
  GRAPH ?t1 { ?e :onTurbine ?turbine . }
  GRAPH ?t2 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?t1 < ?t2 && ?v > 40 && ?v < 100)
}
"""

#: a sliding window (demo/queries/mean_last_10_minutes.rq): the panes of the last 10 minutes are state
WINDOW_AGGREGATE = (ROOT / "demo" / "queries" / "mean_last_10_minutes.rq").read_text(encoding="utf-8")

#: catalogs/demo.yaml readings_and_alarms_any_time_constrained: unbounded, bounded under the constraint below
CONSTRAINED = """PREFIX : <http://example.org/turbine#>
SELECT ?sensor ?v WHERE {
  GRAPH ?t1 { ?m :measuredBy ?sensor ; :hasValue ?v . }
  GRAPH ?t2 { ?a :raisedBy ?sensor . }
}
"""
CONSTRAINT_YAML = """constraints:
  - name: alarm_near_reading
    referential: {from: measurement, to: alarm, on: [sensor_id]}
    after: PT5M
    before: PT5M
"""

QUERIES = {"bag_join": BAG_JOIN, "distinct": DISTINCT, "window_aggregate": WINDOW_AGGREGATE, "constrained": CONSTRAINED}
KINDS = tuple(QUERIES)
#: what a kind declares in the sources file: the catalog's constraint (over the demo data it breaks often, so
#: it stops being used after a few minutes); in-process also kept in use throughout (every breach quarantined,
#: half the keys sampled beyond the margin)
DECLARED = {"constrained": CONSTRAINT_YAML,
            "constrained_in_use": CONSTRAINT_YAML + "    max_violation_rate: 1.0\n    sample: 0.5\n"}
QUERIES["constrained_in_use"] = CONSTRAINED
LOCAL_KINDS = (*KINDS, "constrained_in_use")


def is_constrained(kind: str) -> bool:
    return kind in DECLARED


def workspace(dest: Path, blocks: int, seed: int, kind: str = "") -> tuple[Path, Feeder]:
    """A copy of the demo project with ``blocks`` files per stream (3 time points each); the constraint
    ``kind`` needs (:data:`DECLARED`) declared in its sources file."""
    ws = prepare_workspace(ROOT / "demo", dest)
    if kind in DECLARED:
        src = ws / "sources.yaml"
        src.write_text(src.read_text(encoding="utf-8") + DECLARED[kind], encoding="utf-8")
    feeder = Feeder(ws, seed=seed, points=3)
    feeder.write_static()
    for _ in range(blocks):
        feeder.feed_block()
    return ws, feeder


# -- what a run committed, compared -------------------------------------------------------------------------

def answers(rows: list[dict]) -> Counter:
    """The answers as a multiset of ``(emitted_at, binding)``."""
    return Counter((r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in rows)


def replayed(records: list[dict], groups: tuple[str, ...] = ("sensor",)) -> dict[str, dict]:
    """An aggregate's answer table after every timestamp of its changelog: emitted_at → {group: row}."""
    table: dict[tuple, str] = {}
    out: dict[str, dict] = {}
    for at in sorted({r["emitted_at"] for r in records}):
        for r in (r for r in records if r["emitted_at"] == at):
            key = tuple(r["binding"][g] for g in groups)
            if r["op"] == "delete":
                assert key in table, ("a delete of a group not in the answer", r)
                del table[key]
            else:
                assert r["op"] == "upsert", r
                table[key] = json.dumps(r["binding"], sort_keys=True)
        out[at] = dict(table)
    return out


def assert_same_output(kind: str, got: list[dict], want: list[dict]) -> None:
    """``got`` (a run that was interrupted) is the uninterrupted run's ``want``."""
    assert want, "the uninterrupted run has output"
    if kind == "window_aggregate":
        assert replayed(got) == replayed(want)  # the changelog replayed: the same answer at every timestamp
    elif kind == "distinct":
        bindings = [json.dumps(r["binding"], sort_keys=True) for r in got]
        assert len(bindings) == len(set(bindings)), "DISTINCT: every answer once"
        assert {(r["emitted_at"], json.dumps(r["binding"], sort_keys=True)) for r in got} == set(answers(want))
    else:
        have, should = answers(got), answers(want)
        assert have == should, (f"missing: {sum((should - have).values())}, "
                                f"repeated or foreign: {sum((have - should).values())}")


def constraint_records(path: Path) -> Counter:
    """The quarantine records that name a k-constraint, as a multiset."""
    if not path.exists():
        return Counter()
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return Counter(json.dumps(r, sort_keys=True) for r in lines if r.get("constraint"))


# -- the checkpoint file: plain typed data -----------------------------------------------------------------

class _Globals(pickle.Unpickler):
    """Records every ``(module, name)`` a pickle refers to (GLOBAL / STACK_GLOBAL), resolving it as usual."""

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.seen: set[tuple[str, str]] = set()

    def find_class(self, module, name):
        self.seen.add((module, name))
        return super().find_class(module, name)


def checkpoint_globals(path: Path) -> set[tuple[str, str]]:
    import pickletools

    data = path.read_bytes()
    u = _Globals(data)
    u.load()
    # the opcodes themselves, too: a GLOBAL names its class inline
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            u.seen.add(tuple(arg.split(" ", 1)))
    return u.seen


def assert_plain(ck: Path) -> dict:
    """The checkpoint in ``ck`` refers to no class of obda's but ``Metrics``, and loads with the restricted
    unpickler; returns its state."""
    from obda.execution import checkpoint

    found = checkpoint_globals(ck / "state.pkl")
    assert {g for g in found if g[0].split(".")[0] == "obda"} <= {("obda.execution.runtime", "Metrics")}, found
    assert found <= checkpoint.ALLOWED, found - checkpoint.ALLOWED
    return checkpoint.load(ck / "state.pkl")


# -- in-process runs ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    """kind → (workspace, project): 12 blocks (36 time points) per stream, the constraint only where used."""
    from obda.project import Project

    base = tmp_path_factory.mktemp("kinds")
    projects = {k: Project.load(workspace(base / (k or "plain"), 12, seed=7, kind=k)[0]) for k in ("", *DECLARED)}
    return {k: projects[k if is_constrained(k) else ""] for k in LOCAL_KINDS}


def query(project, kind: str, out: Path, ck: Path | None, backend: str = "local", spark=None, files: int = 1, **kw):
    from obda.analysis import plan_execution
    from obda.execution import ContinuousQuery, DirectorySink, JsonLinesSink

    sink = DirectorySink(out) if kind == "bag_join" else JsonLinesSink(out)
    return ContinuousQuery(plan_execution(project.compile(QUERIES[kind]), project.sources), base_dir=project.directory,
                           sink=sink, checkpoint_dir=ck, backend=backend, spark=spark, max_files_per_batch=files,
                           quarantine=(ck or out.parent) / "quarantine.jsonl", **kw)


def output(kind: str, out: Path) -> list[dict]:
    from obda.execution.committed_output import read_committed

    if kind == "bag_join":
        return read_committed(out)
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []


def uninterrupted(project, kind: str, base: Path, backend: str = "local", spark=None):
    """One run over every file: (its output, its quarantine's constraint records, its metrics)."""
    q = query(project, kind, base / "out", base / "ck", backend, spark)
    q.run_until_exhausted()
    q.close()
    return output(kind, base / "out"), constraint_records(base / "ck" / "quarantine.jsonl"), q.metrics.to_dict()


def interrupted(project, kind: str, base: Path, stops: list[int], backend: str = "local", spark=None, files: int = 1):
    """Runs of ``stops[i]`` micro-batches each (``files`` per stream), every one a new query over the checkpoint,
    then one to the end."""
    for n in stops:
        q = query(project, kind, base / "out", base / "ck", backend, spark, files)
        q.run_until_exhausted(max_batches=n)
        q.close()
        st = assert_plain(base / "ck")
        assert not st["finished"]
        if is_constrained(kind):  # the watch's state is there, as plain data
            watch = st["runtime"]["constraints"]["watches"]["alarm_near_reading"]
            assert isinstance(watch["refs"]["alarm"]["departed"]["filters"], list)
    q = query(project, kind, base / "out", base / "ck", backend, spark, files)
    q.run_until_exhausted()
    q.close()
    assert_plain(base / "ck")
    return output(kind, base / "out"), constraint_records(base / "ck" / "quarantine.jsonl"), q.metrics.to_dict()


def assert_same_run(kind: str, got, want, fields=None) -> None:
    (out, records, metrics), (ref_out, ref_records, ref_metrics) = got, want
    assert_same_output(kind, out, ref_out)
    assert records == ref_records
    if is_constrained(kind):
        assert ref_records and ref_metrics["constraint_violations"] > 0  # the watch quarantined rows
        assert metrics["constraint_violations"] == ref_metrics["constraint_violations"] == sum(
            json.loads(r)["rows"] * n for r, n in ref_records.items())
        assert metrics["incomplete_since"] == ref_metrics["incomplete_since"]
        if fields is None:
            assert metrics["constraints"] == ref_metrics["constraints"]
        else:
            for name, watch in ref_metrics["constraints"].items():
                for f in fields:
                    assert metrics["constraints"][name][f] == watch[f], (name, f)


@pytest.mark.parametrize("kind", LOCAL_KINDS)
def test_a_query_restored_from_its_checkpoint_continues_exactly(fed, tmp_path, kind):
    want = uninterrupted(fed[kind], kind, tmp_path / "reference")
    got = interrupted(fed[kind], kind, tmp_path / "restarted", stops=[2, 4, 1, 3])
    assert_same_run(kind, got, want)
    if kind == "window_aggregate":  # groups whose window emptied: panes left it, across restarts too
        assert any(r["op"] == "delete" for r in want[0])


@pytest.mark.parametrize("kind", LOCAL_KINDS)
def test_a_finished_query_resumes_when_new_files_arrive(tmp_path, kind):
    """What the service does: the input ends (every timestamp closes), the query stops; new files arrive, a
    new query over the checkpoint continues."""
    from obda.project import Project

    ws, feeder = workspace(tmp_path / "ws", 5, seed=3, kind=kind)
    project = Project.load(ws)
    q = query(project, kind, tmp_path / "out", tmp_path / "ck")
    q.run_until_exhausted()
    q.close()
    assert assert_plain(tmp_path / "ck")["finished"]
    for _ in range(5):
        feeder.feed_block()
    project = Project.load(ws)
    q = query(project, kind, tmp_path / "out", tmp_path / "ck")
    q.run_until_exhausted()
    q.close()
    assert_plain(tmp_path / "ck")
    got = output(kind, tmp_path / "out"), constraint_records(tmp_path / "ck" / "quarantine.jsonl"), q.metrics.to_dict()
    assert_same_run(kind, got, uninterrupted(project, kind, tmp_path / "reference"))


def test_the_watch_state_round_trips_as_plain_data(fed, tmp_path):
    """ConstraintWatch.state() → pickle → restricted load → restore() into a fresh watch: the same state."""
    from obda.execution import checkpoint
    from obda.execution.constraints import ConstraintWatch

    q = query(fed["constrained_in_use"], "constrained_in_use", tmp_path / "out", tmp_path / "ck")
    q.run_until_exhausted(max_batches=8)
    watch = q.runtime.constraints
    st = watch.state()
    assert checkpoint_globals_of(st) == set()  # no class at all: dicts, lists, tuples, numbers, str, bytes, None
    fresh = ConstraintWatch(q.plan)
    fresh.restore(checkpoint.load(_dumped(st, tmp_path / "w.pkl")))
    assert fresh.state() == st and fresh.relaxed == watch.relaxed
    w, f = watch.watches["alarm_near_reading"], fresh.watches["alarm_near_reading"]
    for table, ref in w.refs.items():
        assert f.refs[table].first == ref.first and f.refs[table].sampled == ref.sampled
        assert [(t, bytes(b.bits), b.n) for t, b in f.refs[table].departed.filters] == \
               [(t, bytes(b.bits), b.n) for t, b in ref.departed.filters]
    assert fresh.report(q.runtime.closed_upto) == watch.report(q.runtime.closed_upto)
    q.close()


def checkpoint_globals_of(state) -> set:
    """The ``(module, name)`` pairs ``state`` pickled refers to."""
    u = _Globals(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    u.load()
    return u.seen


def _dumped(state, path: Path) -> Path:
    from obda.execution import checkpoint

    checkpoint.dump(state, path)
    return path


def test_a_checkpoint_for_other_declarations_is_refused(fed, tmp_path):
    """The declared constraints are configuration, not state: a checkpoint written under other declarations
    (here: another bound) is refused, not silently mixed with them."""
    from obda.errors import ExecutionError
    from obda.execution.constraints import ConstraintWatch
    from obda.project import Project

    q = query(fed["constrained"], "constrained", tmp_path / "out", tmp_path / "ck")
    q.run_until_exhausted(max_batches=4)
    st = q.runtime.constraints.state()
    q.close()
    ws = Path(fed["constrained"].directory)
    other = prepare_workspace(ws, tmp_path / "other")
    text = (other / "sources.yaml").read_text(encoding="utf-8").replace("after: PT5M", "after: PT6M")
    (other / "sources.yaml").write_text(text, encoding="utf-8")
    project = Project.load(other)
    from obda.analysis import plan_execution

    plan = plan_execution(project.compile(CONSTRAINED), project.sources).forest
    with pytest.raises(ExecutionError, match="does not fit the declared constraints"):
        ConstraintWatch(plan).restore(st)


# -- every kind of watch, restored from a checkpoint after every micro-batch ------------------------------------

def _watch_cases():
    """name → seed → (sql, sources, rows, key column): the generators of test_constraints_exec.py."""
    from execution import test_constraints_exec as c

    return {
        "ri": lambda s: (c.SQL, c.sources(2, 3), c.generate(s, 2, 3, steps=30, late=0.15), "rid"),
        "ri_disabled": lambda s: (c.SQL, c.sources(2, 2, rate=0.05), c.generate(s, 2, 2, steps=40, late=0.5), "rid"),
        "ri_beyond_margin": lambda s: (c.SQL, c.sources(3, 1, margin=1.0, extra="    sample: 0.5\n    window: PT20S\n"),
                                       c.generate(s, 3, 1, steps=30, late=0.3), "rid"),
        "ca": lambda s: (c.CA_SQL, c.ca_sources(2), c.ca_generate(s, 2, steps=30, late=0.15), "sensor"),
        "oa": lambda s: (c.OA_SQL, c.oa_sources(2), c.oa_generate(s, 2, steps=30, late=0.15), "seq"),
        "oa_disabled": lambda s: (c.OA_SQL, c.oa_sources(2, rate=0.05), c.oa_generate(s, 2, steps=40, late=0.5), "seq"),
        "key": lambda s: (c.KEY_SQL, c.key_sources(), c.key_generate(s, steps=30, duplicates=0.2), "rid"),
    }


WATCH_CASES = ("ri", "ri_disabled", "ri_beyond_margin", "ca", "oa", "oa_disabled", "key")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", WATCH_CASES)
def test_every_watch_restored_after_every_micro_batch_decides_as_the_one_kept(tmp_path, case, seed):
    """RI (in use, disabled, measured beyond the margin), CA, OA (in use, disabled), a stream key: after every
    micro-batch the runtime's state goes through a checkpoint file and comes back into a **new** watch; the
    answers, quarantine and constraint metrics are those of the watch that was kept."""
    from execution import test_constraints_exec as c
    from execution.exec_harness import counter_of, drive
    from obda.execution import checkpoint
    from obda.execution.constraints import ConstraintWatch

    sql, src, rows, key = _watch_cases()[case](seed)
    kept, kept_out = drive(sql, src, c.batches(rows, seed))
    restores = []

    def restart(rt, _out):
        path = tmp_path / "state.pkl"
        checkpoint.dump(rt.state(), path)
        assert {g for g in checkpoint_globals(path) if g[0].startswith("obda")} <= {("obda.execution.runtime", "Metrics")}
        rt.constraints = ConstraintWatch(rt.engine.plan)  # as a restarted query builds it from the plan
        rt.restore(checkpoint.load(path))
        restores.append(rt.closed_upto)

    restored, out = drive(sql, src, c.batches(rows, seed), on_close=restart)
    assert len(restores) > 5
    assert counter_of(out) == counter_of(kept_out)
    assert c.quarantined(restored, key) == c.quarantined(kept, key) != set()
    assert restored.metrics.constraints == kept.metrics.constraints
    assert restored.metrics.constraint_violations == kept.metrics.constraint_violations
    assert restored.metrics.incomplete_since == kept.metrics.incomplete_since
    assert restored.constraints.state() == kept.constraints.state()


# -- the Spark backend -------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("kind", ["constrained", "window_aggregate"])
def test_the_spark_backend_continues_from_its_checkpoint(spark, tmp_path, kind):
    """Stopped twice and continued by new queries on Spark: the output of one uninterrupted (local) run."""
    from obda.project import Project

    ws, _ = workspace(tmp_path / "ws", 5, seed=5, kind=kind)
    project = Project.load(ws)
    want = uninterrupted(project, kind, tmp_path / "reference")
    # two files per stream and micro-batch (a Spark micro-batch runs several jobs): stopped after 2 and 4 files
    got = interrupted(project, kind, tmp_path / "restarted", stops=[1, 1], backend="spark", spark=spark, files=2)
    # the backends agree on these (tests/execution/test_constraints_exec.py, both_backends)
    assert_same_run(kind, got, want, fields=("estimated_us", "breaches", "violations", "in_use", "disabled_at",
                                             "incomplete_since"))


# -- the user's reproduction, through the command line -------------------------------------------------------

def obda_run(ws: Path, query_file: Path, out: Path, ck: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "obda.cli", "run", str(query_file), "--project", str(ws), "--until-exhausted",
           "--checkpoint", str(ck), "--output", str(out), "--backend", "local"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable))


def test_the_cli_resumes_a_constrained_query_after_new_files(tmp_path):
    """``obda run Q --checkpoint ck --until-exhausted``; new files; the same again: exit 0, and the answers,
    quarantine and constraint metrics of one run over every file (it used to exit 2: the checkpoint held the
    ConstraintWatch object, which the restricted unpickler refuses)."""
    ws, feeder = workspace(tmp_path / "ws", 4, seed=3, kind="constrained")
    q = tmp_path / "q.rq"
    q.write_text(CONSTRAINED, encoding="utf-8")
    first = obda_run(ws, q, tmp_path / "out.jsonl", tmp_path / "ck")
    assert first.returncode == 0, first.stderr[-3000:]
    assert_plain(tmp_path / "ck")
    for _ in range(4):
        feeder.feed_block()
    again = obda_run(ws, q, tmp_path / "out.jsonl", tmp_path / "ck")
    assert again.returncode == 0, again.stderr[-3000:]
    ref = obda_run(ws, q, tmp_path / "ref.jsonl", tmp_path / "ref-ck")
    assert ref.returncode == 0, ref.stderr[-3000:]

    def lines(p: Path) -> list[dict]:
        return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]

    assert_same_output("constrained", lines(tmp_path / "out.jsonl"), lines(tmp_path / "ref.jsonl"))
    got, want = constraint_records(tmp_path / "ck" / "quarantine.jsonl"), constraint_records(tmp_path / "ref-ck" / "quarantine.jsonl")
    assert got == want and want
    metrics, ref_metrics = (json.loads(r.stderr.strip().splitlines()[-1]) for r in (again, ref))  # printed last
    assert metrics["constraints"] == ref_metrics["constraints"]
    assert metrics["constraint_violations"] == ref_metrics["constraint_violations"] > 0
    assert dt.datetime.fromisoformat(metrics["incomplete_since"].rstrip("Z"))  # reported, and the same
    assert metrics["incomplete_since"] == ref_metrics["incomplete_since"]
