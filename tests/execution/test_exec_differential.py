"""Differential tests: executor answers == DuckDB over the same rows (final and after every marker).

Fast path: the ordering runtime and the synopsis engine are driven in-process
over random micro-batch splits (local pipelines), 50 seeds per query.  The
Spark path (same pipelines as DataFrame operations) runs a few seeds end to
end in test_exec_spark.py.
"""

from collections import Counter

import pytest

from seeds import seed_sets
from execution.exec_harness import (CASE, CASES, CHECK_CASES, S_T, STATIC_R, WAITING_CASES, Case, Oracle, counter_of, drive,
                                    from_us, random_splits, random_streams, released, sources)

BOUNDED = [c for c in CASES if c.verdict == "bounded"]


def _check(case, seed, steps=14):
    src = sources()
    rows = random_streams(seed, steps=steps)
    batches = random_splits(rows, seed)
    oracle = Oracle(src, rows, {"r": STATIC_R})
    distinct = "DISTINCT" in case.sql or " UNION SELECT" in case.sql
    snapshots = {}

    def on_close(rt, out):
        if rt.closed_upto is not None:
            snapshots[from_us(rt.closed_upto)] = counter_of(out)

    rt, out = drive(case.sql, src, batches, static={"r": STATIC_R}, on_close=on_close)
    assert len(snapshots) >= 2, "too few markers"
    expected_at = oracle.answers_at(case.sql, sorted(snapshots))
    for m, got in snapshots.items():
        expected = expected_at[m]
        if distinct:
            assert all(v == 1 for v in got.values()), f"duplicate answers {got}"
            assert set(got) == set(expected), (case.name, seed, m)
        else:
            assert got == expected, (case.name, seed, m, got - expected, expected - got)
    final = oracle.answers(case.sql)
    got = counter_of(out)
    assert (set(got) == set(final)) if distinct else (got == final)
    # emitted_at is the closed timestamp, non-decreasing
    stamps = [a.emitted_at for a in out]
    assert stamps == sorted(stamps)
    return rt, out


@seed_sets()
@pytest.mark.parametrize("case", BOUNDED, ids=lambda c: c.name)
def test_bounded_queries_match_duckdb_on_seeds(case, seeds):
    for seed in seeds:
        _check(case, seed)


@pytest.mark.parametrize("case", [c for c in CASES if c.verdict != "bounded"], ids=lambda c: c.name)
def test_unbounded_queries_match_duckdb(case):
    for seed in range(15):
        _check(case, seed)


def test_answers_are_nonempty_for_most_seeds():
    """Guard against a vacuous oracle: the random data does produce answers."""
    src = sources()
    nonempty = 0
    for seed in range(20):
        rows = random_streams(seed)
        o = Oracle(src, rows, {"r": STATIC_R})
        nonempty += bool(o.answers(CASE["row5_bag"].sql)) and bool(o.answers(CASE["row9_set"].sql))
    assert nonempty >= 15


def test_bag_multiplicities_are_kept():
    src = sources()
    rows = {"s": [], "t": [], "u": []}
    from execution.exec_harness import BASE
    import datetime as dt

    for k in (0, 0, 1):
        rows["t"].append({"d": 2, "e": 0, "ts": BASE + dt.timedelta(seconds=k)})
    rows["s"] = [{"a": 7, "b": 0, "c": 0, "ts": BASE + dt.timedelta(seconds=2)}] * 2
    _, out = drive(CASE["row5_bag"].sql, src, [rows])
    assert counter_of(out) == Counter({(7,): 6})
    assert Oracle(src, rows).answers(CASE["row5_bag"].sql) == Counter({(7,): 6})


# issue 27: computed conditions and values (functions, arithmetic, CASE / COALESCE as obda's unfolder writes them)
FUNCTION_CASES = [
    Case("fn_strlen_case", "SELECT m1.a AS a, CASE WHEN m1.b > 3 THEN 'hi' WHEN NOT m1.b > 3 THEN 'lo' END AS k "
         "FROM s AS m1 WHERE LENGTH(CAST(m1.c AS VARCHAR)) = 1 AND m1.c > 2", "bounded"),
    Case("fn_cross_arith", f"SELECT m1.a AS a {S_T} WHERE m2.ts < m1.ts AND 0 < m2.d AND m2.d < 5 AND m1.a - m2.d > 1",
         "bounded"),
    Case("fn_coalesce_div", "SELECT m1.a AS a, COALESCE(CAST(m1.a AS DOUBLE) / NULLIF(m1.b - 2, 0), -1) AS w "
         "FROM s AS m1 WHERE m1.c < 4", "bounded"),
    Case("fn_same_ts_arith", "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m1.ts = m2.ts AND m1.a + m2.d = 6", "bounded"),
]


@seed_sets()
@pytest.mark.parametrize("case", FUNCTION_CASES, ids=lambda c: c.name)
def test_computed_conditions_match_duckdb_on_seeds(case, seeds):
    """After every closed timestamp and at the end, on the seeds: what the executor answered equals DuckDB (and it
    answered something on most seeds: the comparison is not vacuous)."""
    answered = sum(bool(_check(case, seed)[1]) for seed in seeds)
    assert answered >= len(seeds) / 2, f"{case.name}: answers on {answered} of {len(seeds)} seeds"


@seed_sets()
@pytest.mark.parametrize("case", CHECK_CASES, ids=lambda c: c.name)
def test_checks_in_the_answers_timestamp_match_duckdb_on_seeds(case, seeds):
    """[NOT] IN over a stream in the answer's own timestamp: after every closed timestamp and at the end, on the
    seeds, what the executor answered equals DuckDB's answer over the rows so far (and it answered on most)."""
    from obda.analysis import analyze

    assert analyze(case.sql, sources()).verdict == case.verdict
    answered = sum(bool(_check(case, seed)[1]) for seed in seeds)
    assert answered >= len(seeds) / 2, f"{case.name}: answers on {answered} of {len(seeds)} seeds"


def _peaks(case: Case, *sizes) -> tuple:
    """Over 200 timestamps of seed 7: whether the query answered, and the peak of each of ``sizes`` (functions of
    the engine) after every micro-batch."""
    rows = random_streams(7, steps=200)
    peaks = [0] * len(sizes)

    def on_close(rt, out):
        for k, size in enumerate(sizes):
            peaks[k] = max(peaks[k], size(rt.engine))

    _, out = drive(case.sql, sources(), random_splits(rows, 7), static={"r": STATIC_R}, on_close=on_close)
    return bool(out), *peaks


def test_a_window_of_the_past_keeps_only_the_answers_of_its_length():
    """Rule A3's memory (a window, per answer): over 200 timestamps the other stream's answers kept never exceed
    those the window can read — 3 seconds back, so at most 4 timestamps of at most 3 keys each."""
    answered, peak = _peaks(next(c for c in CHECK_CASES if c.name == "anti_join_past_window"),
                            lambda e: e.windows.entries)
    assert answered and 0 < peak <= 4 * 3, peak


@seed_sets()
@pytest.mark.parametrize("case", WAITING_CASES, ids=lambda c: c.name)
def test_checks_in_a_window_after_the_answer_match_duckdb_on_seeds(case, seeds):
    """Rule A4: an answer waits until its check's window has closed. After every closed timestamp and at the end,
    on the seeds (every other one with gaps longer than the window), what the executor emitted equals DuckDB's
    answer over the rows so far, of the answers whose window ended by the last timestamp the query read; each is
    stamped with that timestamp or a later one."""
    from obda.analysis import analyze

    assert analyze(case.sql, sources()).verdict == case.verdict
    distinct = "DISTINCT" in case.sql
    answered = 0
    for seed in seeds:
        rows = random_streams(seed, gaps=0.3 if seed % 2 else 0.0)
        oracle = Oracle(sources(), rows, {"r": STATIC_R})
        snapshots = {}

        def on_close(rt, out):
            if rt.closed_upto is not None:
                snapshots[from_us(rt.closed_upto)] = counter_of(out)

        _, out = drive(case.sql, sources(), random_splits(rows, seed), on_close=on_close)
        assert len(snapshots) >= 2
        for m, got in snapshots.items():
            expected = released(oracle, case, m)
            assert (set(got) == set(expected) and max(got.values(), default=1) == 1) if distinct else got == expected, \
                (case.name, seed, m, got - expected, expected - got)
        stamps = [a.emitted_at for a in out]
        assert stamps == sorted(stamps)
        answered += bool(out)
    assert answered >= len(seeds) / 2, f"{case.name}: answers on {answered} of {len(seeds)} seeds"


def test_answers_waiting_for_their_window_are_only_those_of_its_length():
    """Rule A4's memory (a window, per answer): over 200 timestamps the answers waiting never exceed those of the
    window's last 3 seconds — at most 4 timestamps of at most 3 rows each — and the other stream's answers kept
    never exceed those of the 3 seconds a waiting answer's window reads."""
    answered, waiting, kept = _peaks(next(c for c in WAITING_CASES if c.name == "anti_join_future_window"),
                                     lambda e: e.waiting.entries, lambda e: e.windows.entries)
    assert answered and 0 < waiting <= 4 * 3 and 0 < kept <= 4 * 3, (waiting, kept)


def test_a_check_in_the_whole_past_keeps_one_entry_per_key():
    """Rule A5's memory (the set of keys): over 200 timestamps the other stream's answers kept never exceed its keys
    (0 < d < 4: three), each with its earliest timestamp only."""
    answered, peak = _peaks(next(c for c in CHECK_CASES if c.name == "anti_join_whole_past"),
                            lambda e: e.windows.entries)
    assert answered and peak == 3, peak
