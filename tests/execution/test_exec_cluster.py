"""End to end on a real Spark standalone cluster (1 master + 2 workers on 127.0.0.1) against DuckDB.

Slow (excluded from the default run); run it with::

    .venv/bin/python -m pytest tests/execution/test_exec_cluster.py -m slow -q -p no:cacheprovider

The cluster (tests/cluster.py) is started once for this module.  The test process may
already hold a local SparkSession (conftest's ``spark``), so the driver of the cluster
application is a subprocess (tests/cluster_run.py): one application runs every bounded
harness case on a few seeds and a few bounded demo catalog queries, each through the
public ``ContinuousQuery`` API into a ``JsonLinesSink``.  Here the answers are compared with
the DuckDB oracle: the final answers (bag equality; DISTINCT: set equality and no
duplicate), and cumulatively, for every ``emitted_at`` T, the answers emitted up to T with
the oracle over the rows with timestamps ≤ T.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from cluster import own_group_dying_with_parent, standalone_cluster
from execution.exec_harness import (
    CASES,
    SOURCES_YAML,
    STATIC_R,
    Oracle,
    random_splits,
    random_streams,
    write_csv_batches,
    write_static,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "cluster_run.py"
SEEDS = (1, 2, 3)
# per seed: files per stream and micro-batch (None: all files present in one micro-batch, then the end of input).
# A micro-batch costs a few Spark jobs (seconds on a busy 2-core machine): one seed runs several, the others few.
FILES_PER_BATCH = {1: 3, 2: 4, 3: None}
# queries at a time in the cluster application (threads sharing its SparkSession; 1: one after the other)
PARALLEL = int(os.environ.get("OBDA_CLUSTER_PARALLEL", "2"))
BOUNDED = [c for c in CASES if c.verdict == "bounded"]
DEMO_ENTRIES = ("hot_readings_after_maintenance", "turbines_hot_after_maintenance_distinct",
                "readings_above_earlier_alarm_severity")
DEMO_SEED = 5
WORKERS = 2
DRIVER_TIMEOUT = 480  # seconds for the whole cluster application (about 3 minutes on a busy 2-core machine)


# ------------------------------------------------------------------------------------ data

def _harness_sources(path: Path) -> Path:
    """The harness's sources with CSV locations data/<table> (relative to a run's base dir)."""
    doc = yaml.safe_load(SOURCES_YAML)
    for name, table in doc["tables"].items():
        table.update(location=f"data/{name}", format="csv")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _harness_run(base: Path, seed: int, sources: Path) -> tuple[dict, list[dict]]:
    rows = random_streams(seed)
    from obda.model.sources import Sources

    write_csv_batches(base / "data", random_splits(rows, seed, max_chunk=6), Sources.load(sources))
    write_static(base / "data", "r", STATIC_R)
    runs = [
        {
            "name": f"{case.name}/seed{seed}",
            "sql": case.sql,
            "verdicts": [case.verdict] * (case.sql.upper().count(" UNION ") + 1),  # one per member
            "sources": str(sources),
            "base_dir": str(base),
            "output": str(base / f"{case.name}.jsonl"),
            "metrics": str(base / f"{case.name}.metrics.json"),
            "options": {"max_files_per_batch": FILES_PER_BATCH[seed]},
        }
        for case in BOUNDED
    ]
    return rows, runs


def _demo_runs(base: Path):
    from obda.catalog import load_catalog
    from obda.datagen import generate_rows
    from obda.datagen.writer import write_dataset
    from obda.project import Project

    project = Project.load(ROOT / "demo")
    src = project.sources
    data = generate_rows(src, seed=DEMO_SEED, timestamps=12, rows_per_timestamp=(0, 4))
    write_dataset(data, base / "data", format="csv", files=4)
    rows = {t.name: [dict(zip([c.name for c in t.columns], r)) for r in data.rows(t.name)] for t in src.tables}
    streams = {t.name: sorted(rows[t.name], key=lambda r: r[t.timestamp]) for t in src.streams}
    statics = {t.name: rows[t.name] for t in src.tables if not t.is_stream}
    entries = {e.name: e for e in load_catalog(ROOT / "catalogs" / "demo.yaml")}
    compiled, runs = {}, []
    for name in DEMO_ENTRIES:
        assert entries[name].expected == "bounded", name
        compiled[name] = project.compile(entries[name].query)
        runs.append({
            "name": f"demo/{name}",
            "catalog": {"project": str(ROOT / "demo"), "file": str(ROOT / "catalogs" / "demo.yaml"), "entry": name},
            "base_dir": str(base),
            "output": str(base / f"{name}.jsonl"),
            "metrics": str(base / f"{name}.metrics.json"),
            "options": {"max_files_per_batch": 2},
        })
    return src, streams, statics, compiled, runs


# ------------------------------------------------------------------------------------ driver

def _drive(url: str, job_path: Path, log: Path) -> dict:
    """Run tests/cluster_run.py against the cluster; its process group is killed on a timeout."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TZ="UTC")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    with open(log, "wb") as err:
        p = subprocess.Popen([sys.executable, str(RUNNER), url, str(job_path)], stdout=subprocess.DEVNULL, stderr=err,
                             env=env, cwd=str(ROOT), preexec_fn=own_group_dying_with_parent)
        try:
            code = p.wait(timeout=DRIVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            pytest.fail(f"the cluster driver did not finish in {DRIVER_TIMEOUT}s; log: {log}")
    result = job_path.with_name("result.json")
    if code != 0 or not result.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"the cluster driver exited with {code}:\n{tail}")
    return json.loads(result.read_text())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Start the cluster, run every job in one application, stop the cluster; what the tests check."""
    root = tmp_path_factory.mktemp("spark-cluster")
    sources = _harness_sources(root / "sources.yaml")
    harness, runs = {}, []
    for seed in SEEDS:
        rows, r = _harness_run(root / f"harness-{seed}", seed, sources)
        harness[seed] = rows
        runs += r
    demo = _demo_runs(root / "demo")
    runs += demo[-1]
    job = root / "job.json"
    job.write_text(json.dumps({"result": str(root / "result.json"), "executors": WORKERS, "parallel": PARALLEL,
                                "runs": runs}, indent=1))
    t0 = time.monotonic()
    with standalone_cluster(workers=WORKERS, cores_per_worker=1, memory="1g", root=root / "cluster") as url:
        started = time.monotonic() - t0
        result = _drive(url, job, root / "driver.log")
    timings = {"cluster_start": round(started, 1), "total": round(time.monotonic() - t0, 1),
               "application": result.get("seconds")}
    print(f"\ncluster timings (s): {timings}")
    return {"url": url, "result": result, "runs": {r["name"]: r for r in runs}, "harness": harness, "demo": demo,
            "sources": sources, "timings": timings}


# ------------------------------------------------------------------------------------ checks

def _value(v):
    """An oracle value as the JSON sink writes it."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (dt.datetime, dt.date)):
        return str(v)
    return v


def _emitted(text: str, columns) -> list[tuple[dt.datetime, tuple]]:
    out = []
    for line in text.splitlines():
        d = json.loads(line)
        t = dt.datetime.fromisoformat(d["emitted_at"].replace("Z", "+00:00")).replace(tzinfo=None)
        out.append((t, tuple(d["binding"][c] for c in columns)))
    return out


def _norm(counter: Counter) -> Counter:
    return Counter({tuple(_value(v) for v in k): n for k, n in counter.items()})


def _same(got: Counter, expected: Counter, distinct: bool) -> bool:
    if distinct:
        return set(got) == set(expected) and max(got.values(), default=1) == 1
    return got == expected


def _check_run(cluster, name: str, oracle: Oracle, sql: str, distinct: bool) -> Counter:
    res = cluster["result"]["runs"][name]
    assert res["ok"], f"{name} failed on the cluster:\n{res.get('error')}"
    text = Path(cluster["runs"][name]["output"]).read_text()
    emitted = _emitted(text, res["columns"])
    stamps = [t for t, _ in emitted]
    assert stamps == sorted(stamps), f"{name}: emitted_at decreases"
    expected = _norm(oracle.answers(sql))
    got = Counter(b for _, b in emitted)
    assert _same(got, expected, distinct), (name, got - expected, expected - got)
    # cumulatively: what was emitted up to T is the answer over the rows with timestamps <= T
    marks = sorted(set(stamps))
    at = oracle.answers_at(sql, marks)
    for t in marks:
        upto = Counter(b for s, b in emitted if s <= t)
        exp = _norm(at[t])
        assert _same(upto, exp, distinct), (name, t, upto - exp, exp - upto)
    return expected


def test_application_ran_on_the_cluster(cluster):
    r = cluster["result"]
    assert r["master"] == cluster["url"] and r["master"].startswith("spark://127.0.0.1:")
    assert r["app_id"].startswith("app-")  # a standalone application id (local mode: local-...)
    # block managers: the driver + one executor per worker, all along
    assert r["executors_before"] >= WORKERS + 1 and r["executors_after"] >= WORKERS + 1, r
    assert r["default_parallelism"] == WORKERS  # cores of the executors (spark.cores.max)
    assert len(r["runs"]) == len(cluster["runs"])
    print(f"\ncluster timings (s): {cluster['timings']}; per run (s): "
          f"{ {k: v.get('seconds') for k, v in r['runs'].items()} }")


@pytest.mark.parametrize("case", BOUNDED, ids=lambda c: c.name)
def test_bounded_case_matches_duckdb_on_cluster(cluster, case):
    from obda.model.sources import Sources

    src = Sources.load(cluster["sources"])
    distinct = "DISTINCT" in case.sql or " UNION SELECT" in case.sql
    for seed in SEEDS:
        rows = cluster["harness"][seed]
        name = f"{case.name}/seed{seed}"
        _check_run(cluster, name, Oracle(src, rows, {"r": STATIC_R}), case.sql, distinct)
        metrics = cluster["result"]["runs"][name]["metrics"]
        for stream, n in metrics["rows_in"].items():
            assert n == len(rows[stream]), (name, stream, n, len(rows[stream]))


def test_some_harness_answers_are_nonempty(cluster):
    """Guard against a vacuous comparison: most runs do emit answers."""
    sizes = [Path(r["output"]).stat().st_size for n, r in cluster["runs"].items() if not n.startswith("demo/")]
    assert sum(s > 0 for s in sizes) >= len(sizes) * 2 // 3


@pytest.mark.parametrize("entry", DEMO_ENTRIES)
def test_demo_catalog_query_matches_duckdb_on_cluster(cluster, entry):
    src, streams, statics, compiled, _ = cluster["demo"]
    comp = compiled[entry]
    expected = _check_run(cluster, f"demo/{entry}", Oracle(src, streams, statics), comp.to_sql("spark"), comp.distinct)
    assert sum(expected.values()) > 0, f"{entry}: no answers on the demo data (seed {DEMO_SEED})"
