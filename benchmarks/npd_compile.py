"""Compile time per NPD benchmark query (ontology + mappings at real-world size).

    .venv/bin/python benchmarks/npd_compile.py [--repeat N]

Prints, per query: members of the unfolded union, compile time (median of N),
or the unsupported construct that rejected it; plus load times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from integration.npd import load_npd, npd_dir  # noqa: E402

from obda.errors import ObdaError  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    project = load_npd()
    t_load = time.perf_counter() - t0
    print(f"# NPD: {len(project.ontology.classes)} classes, {len(project.ontology.axioms)} axioms, "
          f"{len(project.mapping.triples_maps)} triples maps, {len(project.sources.tables)} tables; "
          f"load+validate {t_load:.2f}s; repeat={args.repeat}")
    print(f"{'query':>6} {'members':>8} {'median ms':>10} {'max ms':>8}  note")
    total = []
    for path in sorted((npd_dir() / "queries").glob("*.rq")):
        text = path.read_text(encoding="utf-8")
        times, note, members = [], "", "-"
        for _ in range(args.repeat):
            t = time.perf_counter()
            try:
                comp = project.compile(text, file=str(path))
                members = str(len(comp.members))
            except ObdaError as e:
                note = f"rejected: {getattr(e, 'construct', e.code)} at {e.location.line}:{e.location.column}"
            times.append((time.perf_counter() - t) * 1000)
        med = statistics.median(times)
        total.append(med)
        print(f"{path.stem:>6} {members:>8} {med:>10.1f} {max(times):>8.1f}  {note}")
    print(f"# total median compile time {sum(total):.0f} ms over {len(total)} queries")


if __name__ == "__main__":
    main()
