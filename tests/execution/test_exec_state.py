"""State stays flat for bounded queries (10x input: ≤ 1.05x entries, within the plan's bound);
it grows for opted-in unbounded ones, and the growth is reported."""

import datetime as dt
import random
import re

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


def _dom_size(expr: str, report_member, rows: dict[str, list], static: dict[str, list]) -> int:
    """The value of a key-domain expression of the analyser's plan, ``N`` or ``|dom(alias.col)|`` terms, on the data."""
    if expr.isdigit():
        return int(expr)
    total = 0
    for term in expr.split(" + "):
        m = re.fullmatch(r"\|dom\((\w+)\.(\w+)\)\|", term)
        assert m, f"the analyser's key domain {expr!r} has a form this test cannot evaluate: extend it"
        alias, col = m.groups()
        table = report_member.tables[alias]
        data = rows.get(table) or static.get(table) or []
        total += len({r[col] for r in data})
    return total


class _Member:
    """The analyser's plan of one member: alias → table, and the plan of each unit."""

    def __init__(self, m):
        self.tables = {}
        for p in m.plan.values():
            self.tables.update(zip(p["aliases"], p["tables"]))
        for st in m.streams.values():
            self.tables.update(zip(st.get("aliases", ()), st.get("tables", ())))
        self.plans = m.plan


def _analyser_bounds(sql, rows, static):
    """(member index, aliases of a unit) → the analyser's bound on what the executor keeps for that unit.

    ``pass_through`` / ``filter_only``: 0; ``prefix``: the unit's rows up to its
    ``until`` timestamp; ``counts`` / ``existence``: the plan's ``bound_value``
    (its key domains evaluated on the data when they are ``|dom(X.c)|``
    terms); ``store_all`` (a finite stream): its rows.  Parts of a member
    split by ≠ / ≤ keep one synopsis in the executor: their bounds add up.
    """
    from obda.analysis import analyze

    report = analyze(sql, sources())
    out: dict[tuple[int, frozenset], int] = {}
    for m in report.members:
        am = _Member(m)
        for p in m.plan.values():
            aliases = frozenset(p["aliases"])
            if p["strategy"] in ("pass_through", "filter_only"):
                b = 0
            elif p["strategy"] == "prefix":  # its tuples up to the finite streams' last timestamp
                assert p.get("until") is not None, f"{sql}: a prefix without a constant end cannot be checked"
                b = sum(1 for a in aliases for r in rows.get(am.tables[a], []) if to_us(r["ts"]) <= p["until"])
            elif p["strategy"] == "store_all":
                b = sum(len(rows.get(am.tables[a]) or static.get(am.tables[a]) or []) for a in aliases)
            elif p["bound_value"] is not None:
                b = p["bound_value"]
            else:
                b = (2 if p["counts"] else 1)
                for k in p["keys"]:
                    b *= k["size"] if k["size"] is not None else _dom_size(k["expression"], am, rows, static)
            key = (m.index, aliases)
            out[key] = out.get(key, 0) + b
    return out


@pytest.mark.parametrize("case", [c for c in CASES if c.verdict == "bounded"], ids=lambda c: c.name)
def test_synopses_stay_within_the_analysers_plan_bound(case):
    """Every unit of every bounded member keeps at most what the analyser's plan says it keeps.

    Units are matched by member and alias set: a unit of the executor that the
    analyser's plan does not describe fails the test, as does one whose peak
    state exceeds the plan's bound (pass-through roots and filtered streams: 0).
    """
    steps, seed = 30, 1
    rows = mixed_streams(seed, 10 * steps)
    bounds = _analyser_bounds(case.sql, rows, {"r": STATIC_R})
    peak: dict[tuple[int, frozenset], int] = {}

    def on_close(rt, out):
        for me in rt.engine.members:
            for node in me.plan.nodes:
                k = (me.plan.member.origin, frozenset(node.aliases))
                peak[k] = max(peak.get(k, 0), len(me.past[node.id]))

    drive(case.sql, sources(), random_splits(rows, seed, max_chunk=8), static={"r": STATIC_R}, on_close=on_close)
    assert peak, case.name
    for k, entries in peak.items():
        assert k in bounds, f"{case.name}: executor unit {sorted(k[1])} of member {k[0]} is not in the analyser's plan {sorted(bounds)}"
        assert entries <= bounds[k], (case.name, sorted(k[1]), entries, bounds[k])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_verdicts_agree_with_the_analyser(case):
    from obda.analysis import analyze

    assert analyze(case.sql, sources()).verdict == case.verdict
