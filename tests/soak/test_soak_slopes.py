"""The soak benchmark's arithmetic (``benchmarks/soak.py``): slopes as % of the value per hour, the table's points
and the flat verdict. Fast (no service): the default run checks what the slow soak test and the hour-long run rely on."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"


@pytest.fixture(scope="module")
def soak():
    spec = importlib.util.spec_from_file_location("soak_benchmark", SOAK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_line_growing_10_percent_an_hour(soak):
    ts = [60.0 * i for i in range(61)]
    ys = [100 + 10 * t / 3600 for t in ts]  # 100 -> 110 in an hour; the mean is 105
    assert soak.slope_pct_per_hour(ts, ys) == pytest.approx(10 / 105 * 100)
    assert soak.robust_slope_pct_per_hour(ts, ys) == pytest.approx(10 / 105 * 100)


def test_one_burst_moves_theil_sen_not_least_squares(soak):
    ts = [60.0 * i for i in range(40)]
    ys = [200.0] * 40
    ys[-2] = 300.0  # one sample during a burst, near the end
    assert soak.slope_pct_per_hour(ts, ys) > 2
    assert soak.robust_slope_pct_per_hour(ts, ys) == 0


def test_noise_is_flat_and_a_leak_is_not(soak):
    rng = random.Random(1)
    ts = [60.0 * i for i in range(60)]
    flat = [{"t_s": t, "py_rss_mib": 140 + rng.uniform(-0.5, 0.5)} for t in ts]
    leak = [{"t_s": t, "py_rss_mib": 140 + 0.1 * t / 60 + rng.uniform(-0.5, 0.5)} for t in ts]  # 6 MiB an hour
    assert soak.summarize(flat, 2.0)["figures"]["py_rss_mib"]["flat"] is True
    s = soak.summarize(leak, 2.0)
    assert s["figures"]["py_rss_mib"]["flat"] is False
    assert s["figures"]["py_rss_mib"]["slope_pct_per_hour"] == pytest.approx(6 / 143.9 * 100, rel=0.1)


def test_the_table_points_and_window(soak):
    samples = [{"t_s": 120.0 + 60 * i, "py_rss_mib": 1.0} for i in range(59)]  # 2 .. 60 minutes
    s = soak.summarize(samples, 2.0, 3600)
    assert s["points"] == [2.0, 20.0, 40.0, 60.0]
    assert s["window_from_min"] == 20.0
    assert s["samples_in_window"] == 41  # minutes 20 .. 60
    assert s["figures"]["stream_files"]["judged"] is False
