"""The benchmarks time obda's phases by wrapping its functions by name (``benchmarks/shared_queries.py``,
``Phases.install``): a function renamed or moved would stop the benchmark at its start. Each wrapped name must
exist where the benchmark looks for it, and be restored afterwards."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shared_queries_benchmark_finds_every_phase_it_times():
    from obda.execution import query_state, spark_io

    before = (spark_io.list_files, query_state.list_files)
    phases = _module("shared_queries").Phases().install()
    try:
        assert spark_io.list_files is not before[0] and query_state.list_files is not before[1]
    finally:
        phases.uninstall()
    assert (spark_io.list_files, query_state.list_files) == before
