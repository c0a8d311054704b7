"""State stays flat for bounded queries (10x input: ≤ 1.05x entries, within the plan's bound);
it grows for opted-in unbounded ones, and the growth is reported."""

import datetime as dt
import random

import pytest

from execution.exec_harness import BASE, CASE, CASES, STATIC_R, drive, random_splits, sources, to_us


def mixed_streams(seed: int, steps: int):
    """Half the values in a small range (so joins and filters hit), half from a huge one (unbounded)."""
    cols = {"s": ("a", "b", "c"), "t": ("d", "e"), "u": ("f",)}
    out = {}
    for t, cs in cols.items():
        rng = random.Random(f"{seed}-{t}")  # per table: the 1x input is a prefix of the 10x input

        def val():
            return rng.randint(0, 6) if rng.random() < 0.5 else rng.randint(0, 10**9)

        rows = []
        for k in range(steps):
            for _ in range(rng.randint(0, 3)):
                row = {c: val() for c in cs}
                row["ts"] = BASE + dt.timedelta(seconds=k)
                rows.append(row)
        out[t] = rows
    return out


def entries_after_1x_and_10x(case, steps=60, seed=1):
    """One run over 10x the input: peak synopsis entries up to the 1x point, and over the whole run."""
    src = sources()
    rows = mixed_streams(seed, 10 * steps)
    one_x = to_us(BASE + dt.timedelta(seconds=steps - 1))
    peaks = [0, 0]

    def on_close(rt, out):
        e = rt.metrics.synopsis_entries
        if rt.closed_upto is not None and rt.closed_upto <= one_x:
            peaks[0] = max(peaks[0], e)
        peaks[1] = max(peaks[1], e)

    rt, _ = drive(case.sql, src, random_splits(rows, seed, max_chunk=8), static={"r": STATIC_R}, on_close=on_close)
    return peaks[0], peaks[1], rt


@pytest.mark.parametrize("case", [c for c in CASES if c.verdict == "bounded"], ids=lambda c: c.name)
def test_bounded_state_is_flat(case):
    small, large, rt = entries_after_1x_and_10x(case)
    assert large <= 1.05 * small, (case.name, small, large)
    if case.keys_bound is not None:
        assert large <= case.keys_bound, (case.name, large, case.keys_bound)
    assert rt.metrics.buffered_entries == 0


@pytest.mark.parametrize("name", ["row2_bag", "row3_bag", "row6_bag"])
def test_unbounded_state_grows_and_is_reported(name):
    small, large, rt = entries_after_1x_and_10x(CASE[name])
    assert large >= 5 * small > 0, (name, small, large)
    growth = rt.metrics.state_growth()
    assert growth["last_entries"] > growth["first_entries"]


def _analyser_bounds(sql):
    from obda.analysis import analyze

    report = analyze(sql, sources())
    return {
        (m.index, alias): p.get("bound_value")
        for m in report.members
        for alias, p in m.plan.items()
    }


@pytest.mark.parametrize("case", [c for c in CASES if c.verdict == "bounded"], ids=lambda c: c.name)
def test_synopses_stay_within_the_analysers_plan_bound(case):
    """Each single-stream unit keeps at most the analyser's bound (its plan: keys × domain sizes)."""
    bounds = _analyser_bounds(case.sql)
    _, _, rt = entries_after_1x_and_10x(case, steps=30)
    for me in rt.engine.members:
        for node in me.plan.nodes:
            if len(node.aliases) != 1:
                continue
            alias = node.aliases[0]
            b = bounds.get((me.plan.member.origin, alias))
            if isinstance(b, int):
                assert len(me.past[node.id]) <= b, (case.name, alias, len(me.past[node.id]), b)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_verdicts_agree_with_the_analyser(case):
    from obda.analysis import analyze

    assert analyze(case.sql, sources()).verdict == case.verdict
