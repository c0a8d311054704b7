"""Compile cost per NPD benchmark query (ontology + mappings at real-world size), now and at a baseline revision.

    .venv/bin/python benchmarks/npd_compile.py [--baseline REV|none] [--repeat N] [--timeout S] [--mem-gib G] [--only 09,31-noorder]

Per query — the 31 NPD queries, plus ``NN-noorder`` (the query with its
trailing ORDER BY removed) for every query that ORDER BY alone keeps out of
obda's fragment — prints, for the current working tree and for the baseline
revision (default 17a09a7, the commit before the per-atom-view unfolding;
``--baseline none`` skips it): SPJ members of the unfolded union, per-atom views
(the baseline has none), compile time (parse + rewrite + unfold, median of N;
a compile slower than 5 s is not repeated) and the peak resident set of the
process (NPD load included; the load alone is printed in the header), or why the
query did not compile: rejected (the unsupported construct), budget (the
current code's BudgetError), timeout, out of memory.

Every query of every side runs in its own subprocess, one at a time, under an
address-space limit (``--mem-gib``, RLIMIT_AS) and a compile timeout
(``--timeout``), so that a query whose unfolding explodes is reported instead of
taking the machine down.  The baseline is a temporary detached ``git worktree``
(removed afterwards) put first on PYTHONPATH for the same interpreter.

Exit status 1 if a query that compiled at the baseline does not compile now.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "@@npd_compile@@ "
SLOW_S = 5.0  # a compile slower than this is not repeated
LOAD_SLACK_S = 120.0  # hard limit on a worker = --timeout + this (interpreter start, NPD load)


def strip_order_by(text: str) -> str | None:
    """The query without its trailing ``ORDER BY ...`` clause; None when it has none."""
    m = re.search(r"\bORDER\s+BY\b[^{}]*\Z", text, re.IGNORECASE)
    return text[: m.start()].rstrip() + "\n" if m else None


def default_npd_dir() -> Path:
    env = os.environ.get("OBDA_NPD_DIR")
    return Path(env) if env else (ROOT.parent / "shared" / "testdata" / "npd")


# --------------------------------------------------------------------------- worker (one query, one side)


class _Timeout(Exception):
    pass


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(spec: dict) -> dict:
    """Load NPD with the ``obda`` first on sys.path and compile one query; a JSON-able result."""
    import obda

    src = Path(obda.__file__).resolve()
    if Path(spec["root"]).resolve() not in src.parents:  # the baseline must really be the baseline
        raise SystemExit(f"obda imported from {src}, expected under {spec['root']}")
    from obda.errors import ObdaError
    from obda.mapping import unfold
    from obda.mapping.ddl import sources_from_ddl
    from obda.project import Project
    from obda.rewrite import rewrite

    d = Path(spec["npd"])
    t0 = time.perf_counter()
    schema = d / "npd-schema.psql"
    sources = sources_from_ddl(schema.read_text(encoding="utf-8"), "postgres", file=str(schema))
    project = Project.from_files([d / "npd-v2-ql.owl"], [d / "npd-v2-ql.r2rml.ttl"], sources,
                                 profile="lenient", name="npd", validate=False)
    out: dict = {"load_s": time.perf_counter() - t0, "load_mb": _maxrss_mb(), "obda": str(src.parent)}
    path = Path(spec["query"])
    text = path.read_text(encoding="utf-8")
    if spec["noorder"]:
        text = strip_order_by(text)

    def on_alarm(signum, frame):
        raise _Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    times: list[float] = []
    t = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
        for _ in range(spec["repeat"]):
            t = time.perf_counter()
            query = project.parse(text, file=str(path))
            result = unfold(query, rewrite(query, project.ontology), project.mapping, project.sources, project.ontology)
            times.append(time.perf_counter() - t)
            # 17a09a7: (members, sql, removed); now: Unfolding(members, sql, removed, views)
            out["members"] = len(result[0])
            out["views"] = len(result.views) if hasattr(result, "views") else None
            del result
            gc.collect()  # the next run's peak RSS is its own, not this one's garbage
            if times[-1] > SLOW_S:
                break
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.update(status="ok", ms=statistics.median(times) * 1000, runs=len(times))
    except _Timeout:
        out.update(status="timeout", ms=(time.perf_counter() - t) * 1000)
    except MemoryError:
        signal.setitimer(signal.ITIMER_REAL, 0)
        out.update(status="oom", ms=(time.perf_counter() - t) * 1000)
    except ObdaError as e:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if type(e).__name__ == "BudgetError":
            out.update(status="budget", note=e.message.split(";")[0])
        else:
            construct = getattr(e, "construct", None) or e.code
            out.update(status="rejected", note=f"{construct} at {e.location.line}:{e.location.column}")
        out["ms"] = (time.perf_counter() - t) * 1000
    out["peak_mb"] = _maxrss_mb()
    return out


# --------------------------------------------------------------------------- parent


def run_one(root: Path, npd: Path, query: Path, noorder: bool, args) -> dict:
    """One worker subprocess (the current interpreter, ``root`` first on PYTHONPATH), limited in memory and time."""
    spec = {"root": str(root), "npd": str(npd), "query": str(query), "noorder": noorder,
            "repeat": args.repeat, "timeout": args.timeout}
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OBDA_NPD_DIR", None)
    limit = int(args.mem_gib * 2**30)

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, env=env, cwd=str(root), capture_output=True, text=True,
                           timeout=args.timeout + LOAD_SLACK_S, preexec_fn=limits)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "note": "hard limit (killed)"}
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (p.stderr.strip().splitlines() or [""])[-1]
    if "MemoryError" in p.stderr or "Cannot allocate memory" in p.stderr or "bad_alloc" in p.stderr:
        return {"status": "oom"}
    if p.returncode < 0:
        return {"status": "crash", "note": f"signal {-p.returncode} {tail}"}
    return {"status": "crash", "note": f"exit {p.returncode}: {tail[:120]}"}


def cell(r: dict | None, args, views: bool) -> str:
    """members [views] ms peakMB, or the reason the query did not compile (same width)."""
    width = 8 + (6 if views else 0) + 10 + 9
    if r is None:
        return " " * width
    st = r["status"]
    if st == "ok":
        v = f"{'-' if r.get('views') is None else r['views']:>6}" if views else ""
        return f"{r['members']:>8}{v}{r['ms']:>10.1f}{r['peak_mb']:>9.0f}"
    text = {
        "timeout": f"timeout >{args.timeout:g} s" + (f", {r['peak_mb']:.0f} MB" if "peak_mb" in r else ""),
        "oom": f"out of memory >{args.mem_gib:g} GiB" + (f", {r['ms'] / 1000:.0f} s" if "ms" in r else ""),
        "budget": f"budget: {r.get('note', '')}",
        "rejected": f"rejected: {r.get('note', '').split(' at ')[0]}",
    }.get(st, f"{st}: {r.get('note', '')}")
    return f"{text[:width]:>{width}}"


def queries(npd: Path, only: set[str] | None) -> list[tuple[str, Path, bool]]:
    """(name, file, ORDER BY stripped) — variants only where the stripped text is in obda's fragment."""
    from obda.errors import ObdaError
    from obda.query import parse_query

    out = []
    for path in sorted((npd / "queries").glob("*.rq")):
        out.append((path.stem, path, False))
        stripped = strip_order_by(path.read_text(encoding="utf-8"))
        if stripped is not None:
            try:
                parse_query(stripped)
            except ObdaError:
                continue  # still outside the fragment (aggregates, SELECT expressions, ...)
            out.append((path.stem + "-noorder", path, True))
    return [q for q in out if only is None or q[0] in only]


def git(*a: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *a], check=True, capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="17a09a7", help="git revision to compare with, or 'none' (default 17a09a7)")
    ap.add_argument("--repeat", type=int, default=3, help="compiles per query and side (median; default 3)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per compile before 'timeout' (default 60)")
    ap.add_argument("--mem-gib", type=float, default=4.0, help="address-space limit per worker, GiB (default 4)")
    ap.add_argument("--only", help="comma-separated query names (e.g. 09,31-noorder)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(MARK + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0

    npd = default_npd_dir()
    if not npd.exists():
        print(f"NPD data not found at {npd} (set OBDA_NPD_DIR)", file=sys.stderr)
        return 2
    todo = queries(npd, set(args.only.split(",")) if args.only else None)
    base_rev = None if args.baseline.lower() == "none" else git("rev-parse", "--short", f"{args.baseline}^{{commit}}")
    tmp = Path(tempfile.mkdtemp(prefix="npd-compile-baseline-")) if base_rev else None
    base_root = tmp / "worktree" if tmp else None
    try:
        if base_root:
            git("worktree", "add", "--detach", str(base_root), base_rev)
        return report(todo, npd, base_rev, base_root, args)
    finally:
        if tmp:
            if base_root.exists():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_root)],
                               capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)


def report(todo, npd: Path, base_rev: str | None, base_root: Path | None, args) -> int:
    head = git("rev-parse", "--short", "HEAD")
    dirty = " + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    print(f"# NPD compile: {len(todo)} queries; baseline {base_rev or 'none'} vs current {head}{dirty}; "
          f"repeat={args.repeat}, timeout={args.timeout:g} s, memory limit {args.mem_gib:g} GiB per worker, 1 worker at a time")
    print("# members: SPJ members of the union; views: per-atom views; ms: parse+rewrite+unfold (median); "
          "peak MB: process peak RSS incl. NPD load")
    wb, wc = 8 + 10 + 9, 8 + 6 + 10 + 9
    print(f"{'':>12} {('baseline ' + base_rev) if base_rev else '':<{wb}} | {'current':<{wc}}")
    print(f"{'query':>12} {'members':>8}{'ms':>10}{'peak MB':>9} | {'members':>8}{'views':>6}{'ms':>10}{'peak MB':>9}")
    rows = []
    t_start = time.perf_counter()
    for name, path, noorder in todo:
        b = run_one(base_root, npd, path, noorder, args) if base_root else None
        c = run_one(ROOT, npd, path, noorder, args)
        rows.append((name, b, c))
        flags = []
        if b and b["status"] == "ok" and c["status"] == "ok":
            if c["members"] > b["members"]:
                flags.append("MORE MEMBERS")
            if c["ms"] > 1.5 * b["ms"] and c["ms"] - b["ms"] > 50:
                flags.append(f"SLOWER x{c['ms'] / b['ms']:.1f}")
            if c["peak_mb"] > 1.2 * b["peak_mb"] + 20:
                flags.append("MORE MEMORY")
        if b and b["status"] == "ok" and c["status"] != "ok":
            flags.append("!!! REGRESSION: compiled at the baseline, not now")
        print(f"{name:>12} {cell(b, args, False) if base_root else ' ' * wb} | {cell(c, args, True)}  {' '.join(flags)}",
              flush=True)
    loads = {side: [r for r in (row[i] for row in rows) if r and "load_mb" in r] for side, i in (("baseline", 1), ("current", 2))}
    for side, rs in loads.items():
        if rs:
            print(f"# {side}: NPD load {statistics.median(r['load_s'] for r in rs):.2f} s, "
                  f"RSS after load {statistics.median(r['load_mb'] for r in rs):.0f} MB (median over workers); obda from {rs[0]['obda']}")
    n = len(rows)
    ok_c = {name for name, _, c in rows if c["status"] == "ok"}
    summary = f"# compiles: current {len(ok_c)}/{n}"
    regressions = []
    if base_root:
        ok_b = {name for name, b, _ in rows if b["status"] == "ok"}
        regressions = sorted(ok_b - ok_c)
        gained = sorted(ok_c - ok_b)
        tot_b = sum(b["ms"] for _, b, c in rows if b["status"] == "ok" and c["status"] == "ok")
        tot_c = sum(c["ms"] for _, b, c in rows if b["status"] == "ok" and c["status"] == "ok")
        worst_b = max((b.get("peak_mb", 0) for _, b, _ in rows if b["status"] == "ok"), default=0)
        worst_c = max((c.get("peak_mb", 0) for _, _, c in rows if c["status"] == "ok"), default=0)
        summary = (f"# compiles: baseline {base_rev} {len(ok_b)}/{n}, current {len(ok_c)}/{n}; "
                   f"newly compiling: {', '.join(gained) or 'none'}; "
                   f"total ms on queries compiling on both sides: baseline {tot_b:.0f}, current {tot_c:.0f}; "
                   f"max members: baseline {max((b['members'] for _, b, _ in rows if b['status'] == 'ok'), default=0)}, "
                   f"current {max((c['members'] for _, _, c in rows if c['status'] == 'ok'), default=0)}; "
                   f"max peak RSS: baseline {worst_b:.0f} MB, current {worst_c:.0f} MB")
    summary += f"; wall {time.perf_counter() - t_start:.0f} s"
    print(summary)
    if regressions:
        print(f"!!! REGRESSION: {len(regressions)} quer{'y' if len(regressions) == 1 else 'ies'} compiled at "
              f"{base_rev} and do not compile now: {', '.join(regressions)}")
        return 1
    if base_root:
        print(f"# no regression: every query that compiled at {base_rev} compiles now")
    return 0


if __name__ == "__main__":
    sys.exit(main())
