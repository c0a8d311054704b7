"""Soak: ``obda serve`` with 20 continuous queries over streams fed at a fixed rate, for an hour (issue 29, item 1).

What it does:

1. **Project.** A workspace (``--workdir``, default a fresh folder under ``/tmp``) holding a copy of the demo
   project (``api.feeder.prepare_workspace``) plus two small *ticket* streams of its own
   (``ticket_open(rid, sensor_id, ts)``, ``ticket_close(rid, severity, ts)``; an ontology file with two
   properties and an R2RML file mapping them, written here) and the k-constraint ``ticket_closed_soon``:
   RI(ticket_open → ticket_close on rid, ±PT5M). The generated tickets keep it (every ticket is closed
   0–3 minutes after it is opened, inside its block), so the constrained query runs bounded under it
   without violations. The demo's own streams (measurement, power, maintenance, alarm) are fed by
   ``api.feeder.Feeder`` (seeded demo rows; ``--sites/--turbines/--sensors`` set the fleet).
2. **Service.** ``obda serve`` as a real subprocess (Spark backend, ``local[*]``, ``--state-dir``, SQLite
   registry, ``--max-running 25``), its log in ``<workdir>/serve.log``.
3. **Queries.** 20 registered and started (:data:`QUERIES`): 7 bag queries, 3 DISTINCT, 6 aggregates (5 with
   a sliding window, 1 over the whole stream with bounded groups), 3 interval joins, 1 constrained join.
   Every ``--extra-every`` seconds one more query is registered, started, run until it committed a
   micro-batch, read (a page of answers), stopped and deleted (:data:`EXTRA`, a new name each time).
4. **Feed.** Every ``--interval`` seconds one new block: one file per stream (``feed-NNNNNN.csv``, written
   under a hidden name and renamed), ``--points`` application-time minutes each, in time order. A retention
   job removes each block's files ``--retain-seconds`` after they were written (as a deployment's would; the
   service forgets a removed file ``--forget-after`` seconds after it read it, once its timestamps are closed,
   so the checkpoints stay as large as the folders).
5. **Samples.** Every ``--sample-seconds`` (first after ``--warmup`` seconds): the server's Python RSS, threads
   and open file descriptors (``/proc``); the Spark JVM (the server's ``java`` descendant): its heap used
   after a full GC (``jcmd <pid> GC.run`` twice, then ``GC.heap_info``; ``--heap-samples`` such measurements
   and the least kept), and its floor (the least of the last 5 samples: the heap after GC still holds what
   the micro-batch in flight holds, so the baseline, where a leak shows, is the floor), metaspace, RSS,
   threads and descriptors;
   the SQLite database (``registry.sqlite3`` with ``-wal``/``-shm``), the state folder (checkpoints,
   committed answers, quarantine); from ``GET /v1/queries``: the micro-batch latency (each query's mean
   seconds per micro-batch since the last sample, then the mean and the max over the 20), ``lag_seconds``
   (the oldest unread file's wait) and ``app_lag_seconds`` (max over the queries), synopsis state entries
   (sum); how long ``GET /v1/queries`` took (``api_seconds``; a sample whose call failed keeps its other
   figures and ``api_error``); the load average, and what was fed so far. Written to ``--csv`` (one row per sample) and
   ``--json`` (the samples, the parameters, the extra queries' runs, the summary).
6. **Report.** A table of the figures at the start (the first sample, after the warm-up), at 1/3, 2/3 and the
   end (20/40/60 minutes of a 60-minute run), and each figure's least-squares slope over the last 2/3 of the
   run (the samples from 1/3 on: the last 40 minutes of an hour), as % of their mean per hour, and its
   Theil–Sen slope (as % of their median per hour). ``flat``: the slope is below
   ``--flat`` (default 2 %/hour). Some figures grow by design and are not judged (marked ``info``): what was
   fed, the stream folders. Exit 0 when every judged figure is flat, 1 otherwise (``--no-fail`` always 0);
   2 when the run itself failed (a query failed, the server died).

::

    .venv/bin/python benchmarks/soak.py                       # 60 minutes (the issue's run)
    .venv/bin/python benchmarks/soak.py --minutes 3 --sample-seconds 20 --warmup 30 --extra-every 60
    .venv/bin/python benchmarks/soak.py --minutes 60 --csv /tmp/m/soak60.csv > /tmp/m/soak60.log 2>&1

Not part of the default test run; ``tests/soak/test_soak.py`` (slow) runs 5 minutes of it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# --------------------------------------------------------------------------------------------- queries
#: (catalog file, entry name, kind) — the 20 soak queries; their text is read from the catalogs
QUERIES = [
    ("demo.yaml", "hot_readings", "bag"),
    ("demo.yaml", "high_temperature_readings", "bag"),
    ("demo.yaml", "critical_alarms_with_some_sensor", "bag"),
    ("demo.yaml", "events_by_asset", "bag"),
    ("demo.yaml", "high_power_output", "bag"),
    ("demo.yaml", "alarm_with_reading_same_time", "bag"),
    ("demo.yaml", "readings_in_fahrenheit_above_200", "bag"),
    ("demo.yaml", "hot_temperature_sensors_distinct", "distinct"),
    ("demo.yaml", "vibration_alarms_with_reading_same_time_distinct", "distinct"),
    ("demo.yaml", "turbines_hot_after_maintenance_distinct", "distinct"),
    ("aggregates.yaml", "mean_per_sensor_last_3_minutes", "aggregate+window"),
    ("aggregates.yaml", "alarm_bursts_last_5_minutes", "aggregate+window"),
    ("aggregates.yaml", "readings_last_2_minutes_overall", "aggregate+window"),
    ("aggregates.yaml", "power_per_site_last_4_minutes", "aggregate+window"),
    ("rspql.yaml", "rspql_mean_temperature_per_sensor_last_10_minutes", "aggregate+window"),
    ("aggregates.yaml", "readings_per_sensor", "aggregate"),
    ("demo.yaml", "hot_readings_within_5_minutes_of_maintenance", "interval join"),
    ("rspql.yaml", "rspql_readings_joined_with_alarms_two_windows", "interval join"),
    ("aggregates.yaml", "readings_within_4_minutes_after_maintenance", "interval join"),
    (None, "tickets_closed_constrained", "constrained"),
]
#: the query registered, run, read and deleted every --extra-every seconds
EXTRA = ("rspql.yaml", "rspql_readings_above_threshold_istream")

CONSTRAINED_QUERY = """PREFIX : <http://example.org/turbine#>
SELECT ?sensor ?sev WHERE {
  GRAPH ?t1 { ?x :ticketFor ?sensor . }
  GRAPH ?t2 { ?x :closedWithSeverity ?sev . }
}
"""

SOAK_ONTOLOGY = """@prefix :     <http://example.org/turbine#> .
@prefix owl:  <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd:  <http://www.w3.org/2001/XMLSchema#> .

# benchmarks/soak.py: maintenance tickets, opened for a sensor and closed with a severity (a join on the ticket)
:ticketFor a owl:ObjectProperty ; rdfs:label "ticket for" .
:closedWithSeverity a owl:DatatypeProperty ; rdfs:label "closed with severity" ; rdfs:range xsd:integer .
"""

SOAK_MAPPING = """@prefix rr:   <http://www.w3.org/ns/r2rml#> .
@prefix xsd:  <http://www.w3.org/2001/XMLSchema#> .
@prefix :     <http://example.org/turbine#> .
@prefix map:  <http://example.org/turbine/soak#> .

map:TicketOpen a rr:TriplesMap ;
    rr:logicalTable [ rr:tableName "ticket_open" ] ;
    rr:subjectMap [ rr:template "http://example.org/turbine/data/ticket/{rid}" ] ;
    rr:predicateObjectMap [
        rr:predicate :ticketFor ;
        rr:objectMap [ rr:template "http://example.org/turbine/data/sensor/{sensor_id}" ]
    ] .

map:TicketClose a rr:TriplesMap ;
    rr:logicalTable [ rr:tableName "ticket_close" ] ;
    rr:subjectMap [ rr:template "http://example.org/turbine/data/ticket/{rid}" ] ;
    rr:predicateObjectMap [
        rr:predicate :closedWithSeverity ;
        rr:objectMap [ rr:column "severity" ; rr:datatype xsd:integer ]
    ] .
"""

SOAK_SOURCES = """
  ticket_open:                 # benchmarks/soak.py
    kind: stream
    timestamp: ts
    columns: {rid: integer, sensor_id: integer, ts: timestamp}
    key: [rid, ts]
    location: data/ticket_open
    format: csv
  ticket_close:
    kind: stream
    timestamp: ts
    columns: {rid: integer, severity: integer, ts: timestamp}
    key: [rid, ts]
    location: data/ticket_close
    format: csv
constraints:
  - name: ticket_closed_soon
    referential: {from: ticket_open, to: ticket_close, on: [rid]}
    after: PT5M
    before: PT5M
"""
TICKET_STREAMS = ("ticket_open", "ticket_close")


def catalog_query(catalog: str | None, name: str) -> str:
    import yaml

    if catalog is None:
        return CONSTRAINED_QUERY
    entries = yaml.safe_load((ROOT / "catalogs" / catalog).read_text(encoding="utf-8"))
    return next(e for e in entries if e["name"] == name)["query"]


# --------------------------------------------------------------------------------------------- project + feed
def make_project(workdir: Path) -> Path:
    """The demo project copied into ``workdir/project``, with the ticket streams, their mapping and constraint."""
    from api.feeder import prepare_workspace
    import yaml

    proj = prepare_workspace(ROOT / "demo", workdir / "project")
    (proj / "soak.ttl").write_text(SOAK_ONTOLOGY, encoding="utf-8")
    (proj / "soak.r2rml.ttl").write_text(SOAK_MAPPING, encoding="utf-8")
    sources = (proj / "sources.yaml").read_text(encoding="utf-8").rstrip("\n") + "\n" + SOAK_SOURCES
    (proj / "sources.yaml").write_text(sources, encoding="utf-8")
    settings = yaml.safe_load((proj / "project.yaml").read_text(encoding="utf-8"))
    settings["ontology"] = list(settings["ontology"]) + ["soak.ttl"]
    settings["mappings"] = list(settings["mappings"]) + ["soak.r2rml.ttl"]
    (proj / "project.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    return proj


class Feed:
    """One block per call: the demo streams' next ``points`` time points (api.feeder) and the tickets of them."""

    def __init__(self, project: Path, points: int, sites: int, turbines: int, sensors: int, tickets: int,
                 retain: float = 0.0):
        from api.feeder import Feeder

        self.feeder = Feeder(project, seed=7, points=points, sites=sites, turbines_per_site=turbines,
                             sensors_per_turbine=sensors)
        demo = tuple(t for t in self.feeder.sources.tables if t.name not in TICKET_STREAMS)
        self.feeder.sources = replace(self.feeder.sources, tables=demo)
        self.project, self.points, self.tickets = project, points, tickets
        self.sensors = sites * turbines * sensors
        self.files = 0
        self.bytes = 0
        self.written: list[tuple[int, float]] = []  # per block: its last timestamp (µs), wall time written
        self.retain = retain  # the retention job: a block's files are removed this many seconds after (0: kept)
        self.kept: list[tuple[float, list[Path]]] = []  # per block: wall time written, its files
        self.removed = 0
        self.lock = threading.Lock()
        for s in TICKET_STREAMS:
            (project / "data" / s).mkdir(parents=True, exist_ok=True)

    def close_lag(self, closed_upto: int | None, now: float) -> float:
        """Wall seconds since the oldest block whose last timestamp is not closed yet was written (0: none)."""
        with self.lock:
            for last, wall in self.written:
                if closed_upto is None or last > closed_upto:
                    return max(0.0, now - wall)
        return 0.0

    def write_static(self) -> None:
        self.feeder.write_static()

    def block(self) -> None:
        from api.feeder import _write  # noqa: PLC2701 - the feeder's write-then-rename
        from obda.model.sources import Sources

        with self.lock:
            b = self.feeder.block
            files = list(self.feeder.feed_block().values())
            start = self.feeder.start + b * self.points * self.feeder.step
            rng = random.Random(b)
            opened, closed = [], []
            # tickets opened in the first points-3 time points (at least the first), each closed 0-3 steps later,
            # inside the block: RI(open -> close on rid, ±5 min) holds for every pair
            for i in range(self.tickets):
                rid = b * self.tickets + i
                k = rng.randrange(max(1, self.points - 3))
                t_open = start + k * self.feeder.step
                t_close = t_open + rng.randrange(min(4, self.points - k)) * self.feeder.step
                opened.append((rid, 1 + rng.randrange(self.sensors), t_open))
                closed.append((rid, 1 + rng.randrange(5), t_close))
            srcs = Sources.load(self.project / "sources.yaml")
            for name, rows in (("ticket_open", opened), ("ticket_close", closed)):
                t = next(t for t in srcs.tables if t.name == name)
                rows.sort(key=lambda r: r[2])
                files.append(_write(self.project / "data" / name / f"feed-{b:06d}.csv", t, rows))
            self.files += len(files)
            self.bytes += sum(f.stat().st_size for f in files)
            last = start + (self.points - 1) * self.feeder.step
            self.written.append((int(last.replace(tzinfo=timezone.utc).timestamp() * 1_000_000), time.time()))
            if self.retain > 0:
                self.kept.append((time.time(), files))
                while self.kept and time.time() - self.kept[0][0] > self.retain:
                    for f in self.kept.pop(0)[1]:
                        f.unlink(missing_ok=True)
                        self.removed += 1


# --------------------------------------------------------------------------------------------- server + HTTP
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self, base: str, token: str):
        self.base, self.token = base, token

    def call(self, method: str, path: str, body=None, timeout: float = 600) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"detail": raw.decode(errors="replace")}

    def ok(self, method: str, path: str, body=None, timeout: float = 600) -> dict:
        code, d = self.call(method, path, body, timeout)
        if code >= 300:
            raise RuntimeError(f"{method} {path}: {code} {json.dumps(d)[:800]}")
        return d


# --------------------------------------------------------------------------------------------- /proc probes
def proc_status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def rss_mib(pid: int) -> float:
    return int(proc_status(pid)["VmRSS"].split()[0]) / 1024


def threads(pid: int) -> int:
    return int(proc_status(pid)["Threads"])


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return out


def find_java(pid: int) -> int | None:
    """The first ``java`` process among ``pid``'s descendants (PySpark's gateway JVM)."""
    todo = [pid]
    while todo:
        p = todo.pop(0)
        for c in children(p):
            try:
                if Path(f"/proc/{c}/comm").read_text().strip() == "java":
                    return c
            except OSError:
                continue
            todo.append(c)
    return None


def jcmd_path() -> str:
    for cand in (shutil.which("jcmd"), os.path.join(os.environ.get("JAVA_HOME", "/nonexistent"), "bin", "jcmd")):
        if cand and os.path.exists(cand):
            return cand
    raise SystemExit("soak: jcmd not found (a JDK's bin/jcmd on PATH or under $JAVA_HOME)")


def jvm_heap_after_gc(jcmd: str, pid: int) -> tuple[float, float]:
    """(heap used, metaspace used) in MiB after full GCs (``jcmd GC.run`` twice, then ``GC.heap_info``)."""
    # two full collections a second apart: the first lets Spark's ContextCleaner see the broadcasts and shuffles
    # whose driver-side references died, the second collects what it then released
    for k in range(2):
        if k:
            time.sleep(1.0)
        subprocess.run([jcmd, str(pid), "GC.run"], check=True, capture_output=True, timeout=120)
    out = subprocess.run([jcmd, str(pid), "GC.heap_info"], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    heap = re.search(r"heap\s+total\s+\d+K,\s+used\s+(\d+)K", out)
    meta = re.search(r"Metaspace\s+used\s+(\d+)K", out)
    if heap is None:
        raise RuntimeError(f"jcmd GC.heap_info: no heap figure in {out[:400]!r}")
    return int(heap.group(1)) / 1024, (int(meta.group(1)) / 1024 if meta else float("nan"))


def du_mib(path: Path, pattern: str | None = None) -> float:
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            if pattern is not None and not re.search(pattern, os.path.join(dirpath, n)):
                continue
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total / 2**20


# --------------------------------------------------------------------------------------------- figures
#: (column, label, unit, judged) — every sampled figure, in the table's order; judged: its slope decides "flat"
FIGURES = [
    ("py_rss_mib", "Python RSS", "MiB", True),
    ("py_threads", "Python threads", "", True),
    ("py_fds", "Python open fds", "", True),
    ("jvm_heap_mib", "JVM heap after full GC", "MiB", True),
    ("jvm_heap_floor_mib", "  its floor (min of last 5 samples)", "MiB", True),
    ("jvm_metaspace_mib", "JVM metaspace", "MiB", True),
    ("jvm_rss_mib", "JVM RSS", "MiB", True),
    ("jvm_threads", "JVM threads", "", True),
    ("jvm_fds", "JVM open fds", "", True),
    ("sqlite_kib", "SQLite db (+wal,shm)", "KiB", True),
    ("sqlite_db_kib", "  SQLite db file", "KiB", True),
    ("sqlite_wal_kib", "  SQLite WAL", "KiB", True),
    ("state_mib", "state folder", "MiB", True),
    ("checkpoint_mib", "  checkpoints (state.pkl)", "MiB", True),
    ("checkpoint_median_kib", "  checkpoint, median query", "KiB", True),
    ("results_mib", "  committed answers", "MiB", True),
    ("quarantine_kib", "  quarantine", "KiB", True),
    ("state_entries", "synopsis state entries (sum)", "", True),
    ("remembered_median", "consumed files remembered, median query", "", True),
    ("batch_s_mean", "micro-batch s (mean of queries)", "s", True),
    ("batch_s_max", "micro-batch s (max of queries)", "s", True),
    ("lag_s_max", "lag_seconds: unread file wait (max)", "s", True),
    ("app_lag_s_max", "app_lag_seconds (max)", "s", True),
    ("close_lag_s_max", "answer lag: oldest unclosed data (max)", "s", True),
    ("close_lag_s_mean", "answer lag (mean of queries)", "s", True),
    ("extra_seconds_last", "extra query: register..delete", "s", False),
    ("api_seconds", "GET /v1/queries took", "s", False),
    ("load1", "load average (1 min)", "", False),
    ("stream_files", "stream files fed", "", False),
    ("stream_mib", "stream folders", "MiB", False),
]


def slope_pct_per_hour(ts: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of ``ys`` over ``ts`` (seconds), as % of the mean of ``ys`` per hour."""
    pts = [(t, y) for t, y in zip(ts, ys) if y is not None and y == y]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    my = sum(y for _, y in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var == 0:
        return None
    b = sum((t - mt) * (y - my) for t, y in pts) / var  # per second
    if my == 0:
        return 0.0 if b == 0 else float("inf") * (1 if b > 0 else -1)
    return b * 3600 / abs(my) * 100


def robust_slope_pct_per_hour(ts: list[float], ys: list[float]) -> float | None:
    """Theil–Sen slope (the median of the slopes between every two samples) of ``ys`` over ``ts`` (seconds), as %
    of the median of ``ys`` per hour: one sample taken during a burst (a full GC while a micro-batch holds its
    rows, a slow micro-batch on a busy machine) does not move it."""
    pts = [(t, y) for t, y in zip(ts, ys) if y is not None and y == y]
    if len(pts) < 3:
        return None
    slopes = sorted((y2 - y1) / (t2 - t1) for i, (t1, y1) in enumerate(pts) for t2, y2 in pts[i + 1:] if t2 != t1)
    ys_sorted = sorted(y for _, y in pts)
    b, my = _median(slopes), _median(ys_sorted)
    if my == 0:
        return 0.0 if b == 0 else float("inf") * (1 if b > 0 else -1)
    return b * 3600 / abs(my) * 100


def _median(xs: list[float]) -> float:
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def add_floors(samples: list[dict], k: int = 5) -> None:
    """``jvm_heap_floor_mib``: the least heap after GC of each sample and the ``k - 1`` before it. The heap after a
    full GC still holds what the micro-batch in flight holds (its broadcasts, cached reads, collected rows), so one
    sample lies anywhere between the service's own baseline and that plus a micro-batch; the floor follows the
    baseline, where a leak shows."""
    for i, s in enumerate(samples):
        prev = [x.get("jvm_heap_mib") for x in samples[max(0, i - k + 1):i + 1]]
        prev = [v for v in prev if v is not None]
        s["jvm_heap_floor_mib"] = min(prev) if prev else None


def summarize(samples: list[dict], flat: float, run_seconds: float | None = None) -> dict:
    """The table's rows: the figure at the first sample, at 1/3 and 2/3 of the run (20 and 40 minutes of an hour)
    and at the last sample, its slope over the samples of the last 2/3 of the run, and whether it is flat.
    ``run_seconds``: the run's length (default: the span of the samples)."""
    if not samples:
        return {"points": [], "figures": {}}
    add_floors(samples)
    t0, t_end = samples[0]["t_s"], samples[-1]["t_s"]
    if run_seconds is None:
        run_seconds = t_end
    cut = run_seconds / 3

    def at(target: float) -> dict:
        return min(samples, key=lambda s: abs(s["t_s"] - target))

    points = [samples[0], at(cut), at(2 * cut), samples[-1]]
    window = [s for s in samples if s["t_s"] >= cut - 1e-6]
    rows = {}
    for col, label, unit, judged in FIGURES:
        sl = slope_pct_per_hour([s["t_s"] for s in window], [s.get(col) for s in window])
        ts = robust_slope_pct_per_hour([s["t_s"] for s in window], [s.get(col) for s in window])
        rows[col] = {
            "label": label, "unit": unit, "judged": judged,
            "values": [p.get(col) for p in points], "slope_pct_per_hour": sl, "theil_sen_pct_per_hour": ts,
            "flat": (sl is not None and sl < flat) if judged else None,
        }
    return {"points": [round(p["t_s"] / 60, 1) for p in points], "figures": rows, "window_from_min":
            round(cut / 60, 1), "samples_in_window": len(window)}


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def print_table(summary: dict, flat: float, out=sys.stdout) -> None:
    pts = summary["points"]
    head = f"{'figure':34} {'unit':4} " + " ".join(f"{'t=' + str(p) + 'min':>11}" for p in pts) + \
        f" {'slope %/h':>10} {'T-S %/h':>9}  verdict"
    print(head, file=out)
    print("-" * len(head), file=out)
    for col, r in summary["figures"].items():
        sl = r["slope_pct_per_hour"]
        verdict = "info" if not r["judged"] else ("flat" if r["flat"] else ("-" if sl is None else "GROWS"))
        print(f"{r['label']:34} {r['unit']:4} " + " ".join(f"{fmt(v):>11}" for v in r["values"])
              + f" {fmt(sl):>10} {fmt(r.get('theil_sen_pct_per_hour')):>9}  {verdict}", file=out)
    print(f"(slope: least squares over the samples from t={summary.get('window_from_min')} min on "
          f"({summary.get('samples_in_window')} samples), % of their mean per hour; flat: < {flat} %/h; "
          "T-S: the Theil-Sen slope, % of their median per hour)", file=out)


# --------------------------------------------------------------------------------------------- the run
class Soak:
    def __init__(self, a):
        self.a = a
        self.workdir = Path(a.workdir or f"/tmp/obda-soak-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}").resolve()
        self.samples: list[dict] = []
        self.extras: list[dict] = []
        self.events: list[str] = []
        self.stop = threading.Event()
        self.server: subprocess.Popen | None = None
        self.ids: dict[str, str] = {}
        self.prev_batches: dict[str, tuple[int, float]] = {}
        self.failure: str | None = None

    def log(self, msg: str) -> None:
        line = f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}"
        self.events.append(line)
        print(line, flush=True)

    # -- setup --
    def setup(self) -> None:
        a = self.a
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        self.project = make_project(self.workdir)
        self.feed = Feed(self.project, a.points, a.sites, a.turbines, a.sensors, a.tickets, a.retain_seconds)
        self.feed.write_static()
        for _ in range(a.initial_blocks):
            self.feed.block()
        self.state = self.workdir / "state"
        port = free_port()
        self.token = secrets.token_urlsafe(18)
        env = dict(os.environ, OBDA_TOKEN=self.token, OBDA_TRIGGER_INTERVAL=str(a.trigger_interval),
                   OBDA_RATE_LIMIT="0", OBDA_MAX_REGISTERED="200", OBDA_MAX_RESULTS=str(a.max_results))
        cwd = ROOT
        if a.tree:  # the server runs this source tree (e.g. `git archive HEAD | tar -x -C DIR`), not the checkout's
            cwd = Path(a.tree).resolve()
            env["PYTHONPATH"] = str(cwd) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [str(ROOT / ".venv" / "bin" / "obda"), "serve", "--project", str(self.project), "--host", "127.0.0.1",
               "--port", str(port), "--state-dir", str(self.state), "--max-running", "30", "--backend", "spark",
               "--forget-after", str(a.forget_after)]
        self.log("serve: " + " ".join(cmd))
        self.serve_log = open(self.workdir / "serve.log", "w")
        self.server = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self.serve_log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.client = Client(f"http://127.0.0.1:{port}", self.token)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"obda serve exited ({self.server.returncode}); see {self.workdir / 'serve.log'}")
            try:
                with urllib.request.urlopen(self.client.base + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError("obda serve not ready after 180 s")
        self.log(f"server pid {self.server.pid} ready on {self.client.base}")

    def register_all(self) -> None:
        for catalog, name, kind in QUERIES:
            d = self.client.ok("POST", "/v1/queries", {"name": name, "query": catalog_query(catalog, name),
                                                       "idle_timeout": self.a.idle_timeout})
            self.ids[name] = d["id"]
            v = d["verdict"] if d.get("constrained_verdict") == d["verdict"] else \
                f"{d['verdict']}, under constraints {d.get('constrained_verdict')} {d.get('constraints')}"
            self.log(f"registered {name} ({kind}): {v}")
        for name, qid in self.ids.items():
            t = time.time()
            self.client.ok("POST", f"/v1/queries/{qid}/start")
            self.log(f"started {name} in {time.time() - t:.1f} s")
        self.java = find_java(self.server.pid)
        if self.java is None:
            raise RuntimeError("no java process under the server")
        self.jcmd = jcmd_path()
        self.log(f"JVM pid {self.java}")

    # -- threads --
    def feeder_loop(self) -> None:
        nxt = time.monotonic()
        while not self.stop.is_set():
            try:
                self.feed.block()
            except Exception as e:  # noqa: BLE001
                self.log(f"feeder failed: {e!r}")
            nxt += self.a.interval
            self.stop.wait(max(0.0, nxt - time.monotonic()))

    def extra_loop(self) -> None:
        n = 0
        catalog, base = EXTRA
        text = catalog_query(catalog, base)
        while not self.stop.wait(self.a.extra_every):
            n += 1
            name = f"extra_{n:03d}"
            t0 = time.time()
            rec = {"name": name, "at_min": round((t0 - self.t_start) / 60, 2)}
            try:
                d = self.client.ok("POST", "/v1/queries", {"name": name, "query": text,
                                                           "idle_timeout": self.a.idle_timeout})
                qid = d["id"]
                self.client.ok("POST", f"/v1/queries/{qid}/start")
                deadline = time.time() + self.a.extra_timeout
                info = {}
                while time.time() < deadline and not self.stop.is_set():
                    info = self.client.ok("GET", f"/v1/queries/{qid}")
                    if info["status"] == "failed":
                        raise RuntimeError(f"extra query failed: {info.get('error')}")
                    if (info.get("metrics") or {}).get("batches", 0) >= 1:
                        break
                    time.sleep(1)
                page = self.client.ok("GET", f"/v1/queries/{qid}/results?after=0&limit=50")
                self.client.ok("POST", f"/v1/queries/{qid}/stop")
                self.client.ok("DELETE", f"/v1/queries/{qid}")
                rec.update(ok=True, seconds=round(time.time() - t0, 1), answers=info.get("results"),
                           page=len(page.get("items", [])), batches=(info.get("metrics") or {}).get("batches"))
                self.log(f"extra {name}: registered, ran {rec['batches']} micro-batches ({rec['answers']} answers), "
                         f"read, deleted in {rec['seconds']} s")
            except Exception as e:  # noqa: BLE001
                rec.update(ok=False, error=repr(e)[:500])
                self.log(f"extra {name} FAILED: {e!r}")
            self.extras.append(rec)

    # -- one sample --
    def sample(self) -> dict:
        pid, java = self.server.pid, self.java
        s: dict = {"t_s": round(time.time() - self.t_start, 1),
                   "utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        s["load1"], s["load5"] = (float(x) for x in Path("/proc/loadavg").read_text().split()[:2])
        t = time.time()
        heaps = []
        for k in range(self.a.heap_samples):  # the least of several: closer to the baseline (see add_floors)
            if k:
                time.sleep(self.a.heap_spacing)
            heaps.append(jvm_heap_after_gc(self.jcmd, java))
        s["jvm_heap_mib"], s["jvm_metaspace_mib"] = min(h for h, _ in heaps), heaps[-1][1]
        s["gc_seconds"] = round(time.time() - t, 2)
        s["py_rss_mib"], s["py_threads"], s["py_fds"] = rss_mib(pid), threads(pid), fds(pid)
        s["jvm_rss_mib"], s["jvm_threads"], s["jvm_fds"] = rss_mib(java), threads(java), fds(java)
        db = self.state / "registry.sqlite3"
        size = {suffix: os.path.getsize(f"{db}{suffix}") / 1024 if os.path.exists(f"{db}{suffix}") else 0.0
                for suffix in ("", "-wal", "-shm")}
        s["sqlite_kib"] = sum(size.values())
        s["sqlite_db_kib"], s["sqlite_wal_kib"] = size[""], size["-wal"]
        s["state_mib"] = du_mib(self.state)
        s["checkpoint_mib"] = du_mib(self.state, r"/state\.pkl$")
        sizes = sorted(os.path.getsize(p) for p in self.state.glob("*/state.pkl"))
        s["checkpoint_median_kib"] = sizes[len(sizes) // 2] / 1024 if sizes else None
        s["results_mib"] = du_mib(self.state, r"/results/")
        s["quarantine_kib"] = du_mib(self.state, r"quarantine") * 1024
        s["stream_files"] = self.feed.files
        s["stream_mib"] = self.feed.bytes / 2**20
        t_api = time.time()
        try:  # a start waiting for the shared micro-batch holds the registry (README: What the soak showed)
            listing = self.client.ok("GET", "/v1/queries", timeout=self.a.api_timeout or 0.75 * self.a.sample_seconds)[
                "queries"]
        except Exception as e:  # noqa: BLE001 - recorded: this sample has no API figures
            self.log(f"GET /v1/queries failed after {time.time() - t_api:.0f} s: {e!r}")
            s["api_seconds"] = round(time.time() - t_api, 2)
            s["api_error"] = repr(e)[:300]
            s["sample_seconds"] = round(time.time() - t, 2)
            return s
        s["api_seconds"] = round(time.time() - t_api, 2)
        mine = {q["id"]: q for q in listing}
        lat, lags, app_lags, close_lags, entries, running, failed, viol = [], [], [], [], 0, 0, [], 0
        remembered: list[int] = []
        now = time.time()
        for name, qid in self.ids.items():
            q = mine.get(qid)
            if q is None:
                failed.append(f"{name}: gone")
                continue
            running += q["status"] == "running"
            if q["status"] == "failed":
                failed.append(f"{name}: {q.get('error')}")
            m = q.get("metrics") or {}
            b, avg = m.get("batches", 0), m.get("avg_batch_seconds", 0.0)
            pb, pavg = self.prev_batches.get(qid, (0, 0.0))
            if b > pb:
                lat.append((b * avg - pb * pavg) / (b - pb))
            self.prev_batches[qid] = (b, avg)
            lags.append(m.get("lag_seconds", 0.0))
            app_lags.append(m.get("app_lag_seconds", 0.0))
            close_lags.append(self.feed.close_lag(m.get("closed_upto"), now))
            entries += m.get("state_entries", 0) or 0
            remembered.append(m.get("remembered_inputs", 0) or 0)
            viol += m.get("constraint_violations", 0) or 0
        s["batch_s_mean"] = sum(lat) / len(lat) if lat else None
        s["batch_s_max"] = max(lat) if lat else None
        s["lag_s_max"] = max(lags) if lags else None
        s["app_lag_s_max"] = max(app_lags) if app_lags else None
        s["close_lag_s_max"] = max(close_lags) if close_lags else None
        s["close_lag_s_mean"] = sum(close_lags) / len(close_lags) if close_lags else None
        done = [e for e in self.extras if e.get("ok")]
        s["extra_seconds_last"] = done[-1]["seconds"] if done else None
        s["state_entries"] = entries
        remembered.sort()
        s["remembered_median"] = remembered[len(remembered) // 2] if remembered else None
        s["queries_running"] = running
        s["queries_listed"] = len(listing)
        s["constraint_violations"] = viol
        s["batches_min"] = min((b for b, _ in self.prev_batches.values()), default=0)
        s["answers_total"] = sum(q.get("results", 0) for q in listing if q["id"] in self.ids.values())
        s["extras_done"] = sum(1 for e in self.extras if e.get("ok"))
        s["extras_failed"] = sum(1 for e in self.extras if not e.get("ok"))
        if failed:
            self.failure = "; ".join(failed)[:2000]
        s["sample_seconds"] = round(time.time() - t, 2)
        return s

    def write_outputs(self, summary: dict | None = None) -> None:
        cols = sorted({k for s in self.samples for k in s}, key=lambda k: (k not in ("t_s", "utc"), k))
        with open(self.a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for s in self.samples:
                w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()})
        with open(self.a.json, "w") as f:
            json.dump({"params": vars(self.a), "workdir": str(self.workdir), "queries": QUERIES, "extra": EXTRA,
                       "samples": self.samples, "extras": self.extras, "summary": summary,
                       "failure": self.failure}, f, indent=1, default=str)

    def run(self) -> int:
        a = self.a
        self.setup()
        try:
            self.t_start = time.time()
            self.register_all()
            threads_ = [threading.Thread(target=self.feeder_loop, daemon=True, name="feeder")]
            if a.extra_every > 0:
                threads_.append(threading.Thread(target=self.extra_loop, daemon=True, name="extra"))
            self.t_start = time.time()  # the clock starts when the 20 queries run and the feed begins
            for t in threads_:
                t.start()
            self.log(f"feeding every {a.interval} s ({a.points} time points per file); sampling every "
                     f"{a.sample_seconds} s after a {a.warmup} s warm-up, for {a.minutes} min")
            end = self.t_start + a.minutes * 60
            nxt = self.t_start + a.warmup
            while True:
                if self.stop.wait(max(0.0, nxt - time.time())):
                    break
                if self.server.poll() is not None:
                    self.failure = f"obda serve exited with {self.server.returncode}"
                    break
                try:
                    s = self.sample()
                except Exception as e:  # noqa: BLE001 - a probe failed (the JVM gone?): said, and the run goes on
                    self.log(f"sample failed: {e!r}")
                    nxt += a.sample_seconds
                    continue
                self.samples.append(s)
                if "api_error" in s:
                    self.write_outputs()
                    nxt += a.sample_seconds
                    continue
                self.log("sample t={:.1f}min py_rss={:.0f}MiB heap={:.0f}MiB jvm_rss={:.0f}MiB thr={}/{} fds={}/{} "
                         "sqlite={:.0f}KiB state={:.2f}MiB ckpt={:.2f}MiB entries={} batch={}s lag={}s load={} "
                         "running={} answers={} extras={}".format(
                             s["t_s"] / 60, s["py_rss_mib"], s["jvm_heap_mib"], s["jvm_rss_mib"], s["py_threads"],
                             s["jvm_threads"], s["py_fds"], s["jvm_fds"], s["sqlite_kib"], s["state_mib"],
                             s["checkpoint_mib"], s["state_entries"], fmt(s["batch_s_mean"]), fmt(s["lag_s_max"]),
                             s["load1"], s["queries_running"], s["answers_total"], s["extras_done"]))
                self.write_outputs()
                if self.failure:
                    self.log(f"FAILURE: {self.failure}")
                    break
                if time.time() >= end - 1:
                    break
                nxt += a.sample_seconds
                while nxt < time.time():  # a slow sample: skip the slots it overran
                    nxt += a.sample_seconds
                if nxt > end:
                    nxt = end
        finally:
            self.stop.set()
            self.shutdown()
        summary = summarize(self.samples, a.flat, a.minutes * 60)
        self.write_outputs(summary)
        print()
        print(f"soak: {a.minutes} min, {len(QUERIES)} queries, a block every {a.interval} s "
              f"({a.points} time points, {self.feed.sensors} sensors, {a.tickets} tickets), extra query every "
              f"{a.extra_every} s ({sum(1 for e in self.extras if e.get('ok'))} ok, "
              f"{sum(1 for e in self.extras if not e.get('ok'))} failed); samples: {a.csv}, {a.json}")
        print_table(summary, a.flat)
        if self.failure:
            print(f"soak: the run failed: {self.failure}")
            return 2
        grows = [r["label"] for r in summary["figures"].values() if r["judged"] and r["flat"] is False]
        print("soak: flat" if not grows else f"soak: not flat: {', '.join(g.strip() for g in grows)}")
        return 0 if (not grows or a.no_fail) else 1

    def shutdown(self) -> None:
        if self.server is None or self.server.poll() is not None:
            return
        try:
            os.killpg(self.server.pid, signal.SIGTERM)
            self.server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait(timeout=30)
        except ProcessLookupError:
            pass


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=60, help="length of the run (after the queries started)")
    p.add_argument("--sample-seconds", type=float, default=60, help="seconds between samples")
    p.add_argument("--warmup", type=float, default=120, help="seconds before the first sample")
    p.add_argument("--interval", type=float, default=30, help="seconds between blocks (one file per stream)")
    p.add_argument("--points", type=int, default=5, help="application-time minutes per block")
    p.add_argument("--sites", type=int, default=3)
    p.add_argument("--turbines", type=int, default=4, help="turbines per site")
    p.add_argument("--sensors", type=int, default=4, help="sensors per turbine")
    p.add_argument("--tickets", type=int, default=20, help="tickets per block (the constrained query's streams)")
    p.add_argument("--initial-blocks", type=int, default=2, help="blocks written before the queries start")
    p.add_argument("--extra-every", type=float, default=180, help="seconds between extra queries (0: none)")
    p.add_argument("--extra-timeout", type=float, default=300, help="seconds an extra query may take to run")
    p.add_argument("--idle-timeout", type=float, default=30, help="the queries' idle_timeout (seconds)")
    p.add_argument("--retain-seconds", type=float, default=600,
                   help="the retention job: a block's files are removed this long after they were written (0: kept "
                        "for ever, and every checkpoint grows with the folder)")
    p.add_argument("--forget-after", type=float, default=60,
                   help="obda serve --forget-after: a removed file is dropped from the checkpoints this long after it "
                        "was read, once its timestamps are closed")
    p.add_argument("--trigger-interval", type=float, default=1.0, help="OBDA_TRIGGER_INTERVAL of the service")
    p.add_argument("--api-timeout", type=float, default=None,
                   help="seconds a sample waits for GET /v1/queries (default 3/4 of --sample-seconds); a sample "
                        "whose call takes longer keeps its other figures, so the schedule holds")
    p.add_argument("--heap-samples", type=int, default=1,
                   help="heap measurements (full GCs) per sample, --heap-spacing s apart; the least is kept")
    p.add_argument("--heap-spacing", type=float, default=5.0)
    p.add_argument("--max-results", type=int, default=1000,
                   help="OBDA_MAX_RESULTS: answers kept per query (retention reaches its steady state sooner)")
    p.add_argument("--flat", type=float, default=2.0, help="flat: slope below this %% of the value per hour")
    p.add_argument("--workdir", help="workspace (project copy, state folder, server log); removed first")
    p.add_argument("--csv", default=None, help="samples as CSV (default <workdir>/soak.csv)")
    p.add_argument("--json", default=None, help="samples, parameters and summary as JSON (default <workdir>/soak.json)")
    p.add_argument("--tree", help="run the server from this copy of the source tree (PYTHONPATH), e.g. a "
                   "`git archive HEAD` snapshot, so that edits in the checkout during a long run do not reach it")
    p.add_argument("--keep", action="store_true", help="keep the workspace (default: removed after a run that passed)")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even when a figure is not flat")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    soak = Soak(a)
    a.csv = a.csv or str(soak.workdir / "soak.csv")
    a.json = a.json or str(soak.workdir / "soak.json")
    for f in (a.csv, a.json):
        Path(f).parent.mkdir(parents=True, exist_ok=True)
    if str(Path(a.csv).resolve()).startswith(str(soak.workdir)) or str(Path(a.json).resolve()).startswith(
            str(soak.workdir)):
        a.keep = True  # the outputs live in the workspace
    rc = soak.run()
    if rc == 0 and not a.keep:
        shutil.rmtree(soak.workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
