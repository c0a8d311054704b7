"""Rule A1 (docs/analysis.md, "Anti-joins"): a check against a static query's answers — ``[NOT] (…) IN (SELECT
… FROM static tables)``, what OPTIONAL, MINUS and [NOT] EXISTS unfold into — is a per-row filter: the verdict
of a member with it is the verdict without it, bounded or not, and the polynomial and naive checkers agree.  Rule
A2: a check over a stream in the answer's own timestamp keeps the verdict too; one across timestamps is refused,
located."""

from __future__ import annotations

import pytest

from obda.analysis import analyze, build_forest
from obda.errors import AnalysisError, UnsupportedConstructError

KEYS = "(SELECT DISTINCT R.x FROM R WHERE R.y > 3)"

QUERIES = [
    "SELECT S.A FROM S",  # one stream: bounded
    "SELECT S.A, T.E FROM S, T WHERE T.t2 < S.t1 AND S.A = T.D",  # a join over all the past: unbounded
    "SELECT DISTINCT S.A FROM S",  # a set over an unbounded attribute
    "SELECT DISTINCT S.A FROM S WHERE S.A > 0 AND S.A < 9",  # bounded attribute
    "SELECT S.A, R.name FROM S, R WHERE S.B = R.x",  # a static join
]


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("check", [f"NOT S.A IN {KEYS}", f"S.A IN {KEYS}", f"NOT (S.A, S.B) IN (SELECT R.x, R.y FROM R)",
                                   "NOT EXISTS (SELECT 1 FROM R WHERE R.y > 3)"])
def test_a_check_keeps_the_verdict_of_the_member_without_it(verdicts, sql, check):
    with_check = sql + (" AND " if " WHERE " in sql else " WHERE ") + check
    poly, naive, report = verdicts(with_check)
    base_poly, base_naive, _ = verdicts(sql)
    assert (poly, naive) == (base_poly, base_naive)
    assert report.verdict == base_poly
    assert all(any("rule A1" in n for n in m.notes) for m in report.members)  # the report says what the check holds


def test_the_check_is_a_filter_on_the_entry_whose_terms_it_reads(sources):
    forest = build_forest(f"SELECT S.A FROM S, R WHERE S.B = R.x AND NOT S.A IN {KEYS}", sources)
    (pipe,) = [p for p in forest.pipelines if p.alias == "S"]
    assert any("IN (SELECT DISTINCT R.x FROM R" in f.sql() for f in pipe.filters)
    ((text, keys),) = forest.checks
    assert text == "SELECT DISTINCT R.x FROM R WHERE R.y > 3"
    assert keys.columns == ("x",) and keys.distinct


def test_a_check_over_a_stream_across_timestamps_is_refused_located(verdicts):
    """Over a stream, a check is decided in the answer's own timestamp only (rule A2): one comparing no timestamp,
    or in a member joining several timestamps, is refused with its reason, located at the subquery."""
    for sql, why in (("SELECT S.A FROM S WHERE NOT S.A IN (SELECT T.D FROM T)", "no term compared with it"),
                     ("SELECT S.A FROM S, T WHERE T.t2 < S.t1 AND NOT (S.A, S.t1) IN (SELECT U.F, U.t3 FROM U)",
                      "several timestamps")):
        with pytest.raises(AnalysisError) as e:
            verdicts(sql)
        assert "stream 'T'" in str(e.value) or "stream 'U'" in str(e.value)
        assert why in str(e.value) and e.value.location.column > 30, e.value


@pytest.mark.parametrize("sql", QUERIES[:1] + QUERIES[2:4])
def test_a_check_in_the_answers_timestamp_keeps_the_verdict(verdicts, sources, sql):
    """Rule A2: a check over a stream in the answer's own timestamp keeps nothing after it closes, and its terms
    are not kept as projected columns: the verdict is the member's without it; the forest tests it on the
    answer, with the check's query read by the query's own pipelines."""
    check = "NOT (S.A, S.t1) IN (SELECT T.D, T.t2 FROM T WHERE T.E > 1)"
    with_check = sql + (" AND " if " WHERE " in sql else " WHERE ") + check
    poly, naive, report = verdicts(with_check)
    assert (poly, naive) == verdicts(sql)[:2]
    assert all(any("rule A2" in n for n in m.notes) for m in report.members)
    forest = build_forest(with_check, sources)
    ((text, timed),) = forest.timed_checks
    assert not forest.checks and all(c.timed for mf in forest.members for c in mf.member.checks)
    assert {p.id for p in timed.pipelines} <= {p.id for p in forest.pipelines}


def test_a_check_over_two_entries_counts_its_terms_as_projected(verdicts):
    """A check whose terms read two FROM entries is tested on the joined answer, which keeps those terms: the
    verdict is that of the query projecting them too (here T.E, unbounded, under DISTINCT)."""
    base = "SELECT DISTINCT S.A FROM S, T WHERE S.t1 = T.t2 AND S.A > 0 AND S.A < 9"
    assert verdicts(base)[:2] == ("bounded", "bounded")
    assert verdicts(base + " AND NOT S.A IN (SELECT R.x FROM R)")[:2] == ("bounded", "bounded")  # one entry: a filter
    assert verdicts(base + " AND NOT (S.A, T.E) IN (SELECT R.x, R.y FROM R)")[:2] == ("unbounded", "unbounded")
    assert verdicts("SELECT DISTINCT S.A, T.E FROM S, T WHERE S.t1 = T.t2 AND S.A > 0 AND S.A < 9")[:2] == (
        "unbounded", "unbounded")  # the same as projecting T.E


WINDOW = ("SELECT S.A FROM S WHERE NOT EXISTS (SELECT 1 FROM (SELECT T.D AS d, T.t2 AS ts FROM T) AS __w WHERE "
          "__w.d = S.B AND {})")


def test_a_check_in_a_window_of_the_past_keeps_the_verdict(verdicts, sources):
    """Rule A3: the correlated [NOT] EXISTS a windowed check unfolds into is read as a check of (S.B, S.t1) against
    the query's (d, ts), in a window of S.t1; the verdict is the member's without it."""
    sql = WINDOW.format("__w.ts >= S.t1 - INTERVAL '60' SECOND AND __w.ts < S.t1")
    poly, naive, report = verdicts(sql)
    assert (poly, naive) == verdicts("SELECT S.A FROM S")[:2] == ("bounded", "bounded")
    assert all(any("rule A3" in n for n in m.notes) for m in report.members)
    (m,) = report.members  # what the window keeps, said in the plan and the memory
    assert "last 1 min" in m.memory and "last 1 min" in m.plan["check window"]["keeps"][0]
    for text in (sql, WINDOW.format("S.t1 - INTERVAL '60' SECOND <= __w.ts AND S.t1 > __w.ts")):  # either side
        (mf,) = build_forest(text, sources).members
        (check,) = mf.member.checks
        assert check.timed and check.window == (-60_000_000, False, 0, True)


def test_a_check_in_a_window_after_the_answer_keeps_the_verdict(verdicts, sources):
    """Rule A4: a window reaching after the answer's time; the verdict is the member's without it, and the plan and
    the memory say what waits: the answers of the window's last part, and the check's answers of its part before
    the answer."""
    sql = WINDOW.format("__w.ts > S.t1 - INTERVAL '30' SECOND AND __w.ts <= S.t1 + INTERVAL '60' SECOND")
    poly, naive, report = verdicts(sql)
    assert (poly, naive) == ("bounded", "bounded")
    assert all(any("rule A4" in n for n in m.notes) for m in report.members)
    (m,) = report.members
    keeps = m.plan["check window"]["keeps"]
    # the check's answers of the window's part before the answer: a later one meets the waiting answers as it comes
    assert "last 30 s" in keeps[0] and "last 1 min" in keeps[1] and "until a match or their window's end" in keeps[1]
    (mf,) = build_forest(sql, sources).members
    (check,) = mf.member.checks
    assert check.window == (-30_000_000, True, 60_000_000, False) and check.waits == 60_000_000
    assert verdicts(WINDOW.replace("SELECT S.A", "SELECT DISTINCT S.A").format(
        "__w.ts > S.t1 AND __w.ts <= S.t1 + INTERVAL '60' SECOND"))[:2] == verdicts("SELECT DISTINCT S.A FROM S")[:2]


def test_a_window_without_a_lower_bound_reaching_after_the_answer_says_both_what_it_keeps(verdicts):
    """Rules A4 and A5 in one window (``__w.ts <= S.t1 + 1 min``): the check's keys are kept forever, and the
    answers wait for a match or the window's end; the plan says both."""
    sql = WINDOW.replace("T.D AS d", "T.D AS d").format("__w.ts <= S.t1 + INTERVAL '60' SECOND")
    sql = sql.replace("FROM T)", "FROM T WHERE T.D > 0 AND T.D < 9)")
    _, _, report = verdicts(sql)
    assert report.verdict == "bounded"
    (m,) = report.members
    assert "forever" in m.plan["check keys"]["keeps"][0]
    assert m.plan["check window"]["keeps"] == ["the answers of the last 1 min, until a match or their window's end "
                                              "decides them"], m.plan
    assert "the answers of the last 1 min" in m.memory and "the check's keys: a finite set" in m.memory


@pytest.mark.parametrize("keys, expected", [("T.D", "unbounded"), ("T.D", "bounded"), ("", "bounded")])
def test_a_check_in_the_whole_past_is_judged_by_its_set_of_keys(verdicts, sources, keys, expected):
    """Rule A5: without a lower bound the check's keys are kept forever, so the member is bounded iff P is and the
    set of the keys is (``SELECT DISTINCT`` of them over the check's pattern: bounded under ``0 < T.D < 9``, one
    entry without a key); both checkers agree, and the plan says what is kept."""
    where = " WHERE T.D > 0 AND T.D < 9" if expected == "bounded" and keys else ""
    inner = f"SELECT {keys + ' AS d, ' if keys else ''}T.t2 AS ts FROM T{where}"
    sql = (f"SELECT S.A FROM S WHERE NOT EXISTS (SELECT 1 FROM ({inner}) AS __w WHERE "
           f"{'__w.d = S.B AND ' if keys else ''}__w.ts < S.t1)")
    poly, naive, report = verdicts(sql)
    assert poly == naive == "bounded"  # P's, without the check
    assert report.verdict == analyze(sql, sources, checker="naive").verdict == expected
    (m,) = report.members
    assert "forever" in m.plan["check keys"]["keeps"][0]
    assert any("rule A5" in n for n in m.notes), m.notes
    if expected != "bounded":
        assert any("?t2 >= ?t -" in h for h in m.hints)
    assert verdicts(sql.replace("SELECT S.A", "SELECT DISTINCT S.A"))[0] == "unbounded"  # P's verdict still counts


@pytest.mark.parametrize("window", ["__w.ts > S.t1", "__w.ts >= S.t1 - INTERVAL '60' SECOND"])  # no upper bound (A6)
def test_a_negated_check_in_a_window_without_an_upper_bound_is_refused_located(verdicts, window):
    with pytest.raises(AnalysisError) as e:
        verdicts(WINDOW.format(window))
    assert "rules A3–A5" in str(e.value) and "never final" in str(e.value) and e.value.location.column > 20, e.value


@pytest.mark.parametrize("window", ["__w.ts > S.t1", "__w.ts >= S.t1 - INTERVAL '60' SECOND"])
def test_an_exists_in_a_window_without_an_end_is_unbounded_with_its_reason(verdicts, sources, window):
    """Rule A6: an EXISTS answer without a window end waits for its first match, which may never come: unbounded,
    with the rule and a hint to bound the window above, under both checkers; the check's answers are kept only for
    the window's part before the answer."""
    sql = WINDOW.replace("NOT EXISTS", "EXISTS").format(window)
    poly, naive, report = verdicts(sql)
    assert poly == naive == "bounded"  # P's, without the check
    assert report.verdict == analyze(sql, sources, checker="naive").verdict == "unbounded"
    (m,) = report.members
    assert any("rule A6" in n and "may never come" in n for n in m.notes), m.notes
    assert any("?t2 <= ?t +" in h for h in m.hints), m.hints
    (mf,) = build_forest(sql, sources).members
    (check,) = mf.member.checks
    assert check.window[2] is None and check.waits > 10 ** 18 and not check.negated


@pytest.mark.parametrize("sql", QUERIES)
def test_a_check_comparing_its_columns_with_the_answers_keeps_the_verdict(verdicts, sources, sql):
    """A FILTER of the pattern reading the answer's variables (the correlated ``… AS __c WHERE __c.x = … AND
    __c.y > …``) is a check like any other: the verdict is the member's without it, with both checkers, over static
    data (rule A1) and in the answer's timestamp (A2); the forest tests it on the answer, the compared terms after
    the keys."""
    static = ("NOT EXISTS (SELECT 1 FROM (SELECT R.x AS x, R.y AS y FROM R) AS __c WHERE __c.x = S.B AND "
              "__c.y > S.A)")
    timed = ("EXISTS (SELECT 1 FROM (SELECT T.t2 AS ts, T.E AS e FROM T) AS __c WHERE __c.ts = S.t1 AND "
             "__c.e <> S.C)")
    if "S." not in sql:
        return
    for check, rule in [(static, "A1")] + ([(timed, "A2")] if ", T " not in sql else []):  # A2: S one unit
        with_check = sql + (" AND " if " WHERE " in sql else " WHERE ") + check
        poly, naive, report = verdicts(with_check)
        assert (poly, naive) == verdicts(sql)[:2]
        assert all(any(f"rule {rule}" in n and "compared with" in n for n in m.notes) for m in report.members)
    (mf, *_) = build_forest(sql + (" AND " if " WHERE " in sql else " WHERE ") + static, sources).members
    (c,) = mf.member.checks
    assert c.compares == (">",) and not c.timed and len(c.positions) == 2


@pytest.mark.parametrize("query, message", [
    ("SELECT ?x WHERE { ?x :p ?v FILTER NOT EXISTS { ?y :p ?w FILTER(?w > ?u) } }", "neither the NOT EXISTS pattern"),
    ("SELECT ?x WHERE { ?x :p ?v FILTER NOT EXISTS { ?y :p ?w FILTER(?w > ?v || ?w < 2) } }", "comparisons (&&)"),
])
def test_what_a_comparison_with_the_answer_refuses_is_located(query, message):
    from obda.query import parse_query

    with pytest.raises(UnsupportedConstructError) as e:
        parse_query("PREFIX : <http://e/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n" + query)
    assert message in str(e.value) and e.value.location.line == 3 and e.value.location.column > 20, e.value


@pytest.mark.parametrize("condition, message", [
    ("__c.x = S.B AND __c.y > __c.x", "compare one of its query's columns with the member's terms"),
    ("__c.x = S.B AND __c.y + 1 > S.A", "compare one of its query's columns with the member's terms"),
    ("__c.x = S.B AND __c.y > S.A AND __c.y < S.A", "one comparison per other column"),
])
def test_a_correlated_check_the_analysis_cannot_read_is_refused_located_in_the_sql(verdicts, condition, message):
    """SQL given directly: a correlated check's condition outside what unfolding writes is refused at the condition
    (its line and column in the SQL text), not only named."""
    sql = ("SELECT S.A FROM S WHERE\n  NOT EXISTS (SELECT 1 FROM (SELECT R.x AS x, R.y AS y FROM R) AS __c WHERE "
           + condition + ")")
    with pytest.raises(AnalysisError) as e:
        verdicts(sql)
    assert message in str(e.value), e.value
    assert e.value.location is not None and e.value.location.line == 2 and e.value.location.column > 70, e.value
