"""RSP-QL as an input syntax (issue 27, item 4 and evidence 5): the clauses are rewritten into obda's
application-time SPARQL; every RSP-QL query of ``rspql_pairs.py`` compiles to the same SQL and gets the same
analysis as its hand-written obda form; each refused feature fails with a typed error at its line and column
in the RSP-QL text (the marker ``¦`` stands before the token the error must point at)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rspql_pairs import HEAD, PAIRS  # noqa: E402

from obda.analysis import analyze  # noqa: E402
from obda.catalog import check_catalog, load_catalog  # noqa: E402
from obda.errors import QuerySyntaxError, UnknownTermError, UnsupportedConstructError  # noqa: E402
from obda.query import parse_query  # noqa: E402
from obda.query.rspql import translate  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MARK = "¦"
WIN = "FROM NAMED WINDOW :w ON :s [RANGE PT10M STEP PT1M]\n"


def marked(text: str) -> tuple[str, int, int]:
    i = text.index(MARK)
    before = text[:i]
    return text.replace(MARK, "", 1), before.count("\n") + 1, i - (before.rfind("\n") + 1) + 1


# ------------------------------------------------------------------ same answers as the hand-written form


def test_the_evidence_has_ten_queries_of_the_literature_shapes():
    assert len(PAIRS) >= 10
    texts = [p.rspql for p in PAIRS]
    assert sum("ISTREAM" in t for t in texts) >= 3 and sum("RSTREAM" in t for t in texts) >= 3
    assert any(t.count("FROM NAMED WINDOW") == 2 for t in texts)  # a join of two windows
    assert any(t.count("FROM NAMED WINDOW") == 3 for t in texts)
    assert any("FROM <" in t for t in texts)  # a window and a static graph
    assert any("WINDOW ?w" in t for t in texts) and any("REGISTER" not in t for t in texts)
    assert any("HAVING" in t for t in texts) and any("AVG(" in t for t in texts)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_rspql_compiles_and_analyses_as_its_obda_form(demo, pair):
    rsp, hand = demo.compile(pair.rspql), demo.compile(pair.obda)
    for dialect in ("duckdb", "spark"):
        assert rsp.to_sql(dialect) == hand.to_sql(dialect)
    assert [m.sql("duckdb") for m in rsp.members] == [m.sql("duckdb") for m in hand.members]
    assert rsp.query.window == hand.query.window and rsp.query.aggregation == hand.query.aggregation
    assert rsp.query.branches == hand.query.branches and rsp.query.projection == hand.query.projection
    a, b = analyze(rsp, demo.sources), analyze(hand, demo.sources)
    assert a.verdict == b.verdict
    assert a.to_dict() == b.to_dict()
    assert rsp.query.text == pair.rspql  # the user's own text is kept (the service stores and recompiles it)


def test_the_rspql_catalog_gets_its_expected_verdicts(demo):
    entries = load_catalog(ROOT / "catalogs" / "rspql.yaml")
    assert len(entries) >= 5 and all("WINDOW" in e.query for e in entries)
    results = check_catalog(demo, entries)
    assert all(r.ok for r in results), [(r.name, r.verdict, r.error) for r in results if not r.ok]


# ------------------------------------------------------------------ the translation


def test_a_window_becomes_graph_with_a_now_filter_and_register_and_from_are_blanked():
    text = HEAD + "REGISTER RSTREAM <http://o/> AS\nSELECT ?x (COUNT(*) AS ?n)\nFROM <http://g/>\n" + WIN + \
        "WHERE { WINDOW :w { ?x :p ?v } } GROUP BY ?x\n"
    tr = translate(text)
    assert tr.operator == "RSTREAM" and tr.output == "http://o/"
    assert [(w.iri, w.range, w.step, w.variable) for w in tr.windows] == [("http://example.org/turbine#w",
                                                                            600_000_000, 60_000_000, "t_w")]
    assert "REGISTER" not in tr.text and "FROM" not in tr.text and "WINDOW" not in tr.text
    assert 'GRAPH ?t_w { ?x :p ?v } FILTER(?t_w > NOW() - "PT10M"^^' in tr.text
    assert tr.text.count("\n") == text.count("\n")  # blanked clauses keep their lines
    q = parse_query(text)
    assert q.window is not None and q.window.width == 600_000_000 and not q.window.inclusive


def test_two_windows_become_an_interval_join_each_time_within_the_window_of_the_latest():
    text = HEAD + "SELECT ?x FROM NAMED WINDOW :a ON :s [RANGE PT5M] FROM NAMED WINDOW :b ON :s [RANGE PT2M]\n" \
        "WHERE { WINDOW :a { ?x :p ?v } WINDOW :b { ?x :q ?w } }"
    tr = translate(text)
    assert "?t_b < ?t_a + \"PT5M\"" in tr.text and "?t_a < ?t_b + \"PT2M\"" in tr.text and "NOW()" not in tr.text


def test_one_window_named_in_two_blocks_is_one_time():
    text = HEAD + "REGISTER ISTREAM :o AS SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } WINDOW :w { ?x :q ?w } }"
    q = parse_query(text)
    assert {a.time.name for a in q.branches[0].atoms} == {"t_w"}


def test_generated_time_variables_do_not_take_the_users_names():
    text = HEAD + "SELECT ?t_w " + WIN + "WHERE { WINDOW :w { ?t_w :p ?v } }"
    assert translate(text).windows[0].variable == "t_w_2"
    assert [v.name for v in parse_query(text).projection] == ["t_w"]


@pytest.mark.parametrize("text", [
    HEAD + "SELECT ?window WHERE { ?window :p \"REGISTER WINDOW\" } # WINDOW :w { }",
    HEAD + "SELECT ?x WHERE { ?x :WINDOW <http://e/REGISTER> }",
])
def test_plain_sparql_that_mentions_the_words_is_not_rspql(text):
    assert translate(text) is None
    parse_query(text)


def test_an_unknown_term_in_a_window_is_located_in_the_rspql_text(demo):
    text, line, col = marked(HEAD + "SELECT ?s\nFROM NAMED WINDOW :w ON :m [RANGE PT1M]\nWHERE {\n"
                             "  WINDOW :w { ?m ¦:measuredByX ?s }\n}")
    with pytest.raises(UnknownTermError) as e:
        demo.compile(text)
    assert (e.value.location.line, e.value.location.column) == (line, col)


# ------------------------------------------------------------------ refused, located

REFUSED = [
    # (error type, construct or None, marked text)
    (UnsupportedConstructError, "DSTREAM", "REGISTER ¦DSTREAM <http://o/> AS SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "RSTREAM", "REGISTER ¦RSTREAM <http://o/> AS\nSELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "[ROWS n]", "SELECT ?x\nFROM NAMED WINDOW :w ON :s [¦ROWS 10]\nWHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "[TRIPLES n]", "SELECT ?x FROM NAMED WINDOW :w ON :s [¦TRIPLES 5] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "[NOW]", "SELECT ?x FROM NAMED WINDOW :w ON :s [¦NOW] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "[FROM … TO …]",
     "SELECT ?x FROM NAMED WINDOW :w ON :s [¦FROM NOW-PT1H TO NOW-PT0S STEP PT5M] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "window", "SELECT ?x FROM NAMED WINDOW :w ON :s [RANGE PT1H ¦TUMBLING] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "STEP", "SELECT ?x\nFROM NAMED WINDOW :w ON :s [RANGE PT1M STEP ¦PT5M]\nWHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "duration", "SELECT ?x FROM NAMED WINDOW :w ON :s [RANGE ¦P1M] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "duration", "SELECT ?x FROM NAMED WINDOW :w ON :s [RANGE ¦PT0S] WHERE { WINDOW :w { ?x :p ?v } }"),
    (QuerySyntaxError, None, "SELECT ?x FROM NAMED WINDOW :w ON :s [RANGE ¦10m STEP 1m] WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "FROM NAMED", "SELECT ?x ¦FROM NAMED <http://g/> " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    (QuerySyntaxError, None, "SELECT ?x " + WIN + "WHERE {\n  WINDOW ¦:other { ?x :p ?v }\n}"),
    (QuerySyntaxError, None, "SELECT ?x FROM NAMED WINDOW :w ¦:s [RANGE PT1M] WHERE { WINDOW :w { ?x :p ?v } }"),
    (QuerySyntaxError, None, "SELECT ?x " + WIN + "FROM NAMED WINDOW ¦:w ON :s [RANGE PT1M] WHERE { WINDOW :w { ?x :p ?v } }"),
    (QuerySyntaxError, None, "REGISTER ¦QUERY q AS SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    (QuerySyntaxError, None, "SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }\n¦REGISTER ISTREAM :o AS"),
    (UnsupportedConstructError, "WINDOW ?w", "SELECT ?x " + WIN + "FROM NAMED WINDOW :u ON :s [RANGE PT1M]\n"
     "WHERE { WINDOW ¦?w { ?x :p ?v } }"),
    (UnsupportedConstructError, "WINDOW ?w", "SELECT ?x ¦?w " + WIN + "WHERE { WINDOW ?w { ?x :p ?v } }"),
    (UnsupportedConstructError, "WINDOW", "REGISTER RSTREAM :o AS SELECT ?x (COUNT(*) AS ?n)\n"
     "FROM NAMED WINDOW :a ON :s [RANGE PT5M]\nFROM NAMED WINDOW :b ON :s [RANGE PT5M]\n"
     "WHERE {\n  WINDOW :a { ?x :p ?v }\n  ¦WINDOW :b { ?x :q ?w }\n} GROUP BY ?x"),
    (UnsupportedConstructError, "WINDOW", "SELECT ?x\nFROM NAMED WINDOW :a ON :s [RANGE PT5M]\n"
     "FROM NAMED WINDOW :b ON :s [RANGE PT5M]\nWHERE {\n  WINDOW :a { ?x :p ?v }\n"
     "  { ¦WINDOW :b { ?x :q ?w } } UNION { ?x :r ?w }\n}"),
    (UnsupportedConstructError, "SELECT DISTINCT", "REGISTER ISTREAM :o AS\nSELECT ¦DISTINCT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    (UnsupportedConstructError, "ASK", "REGISTER ISTREAM :o AS\n¦ASK " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }"),
    # obda's own refusals, located in the RSP-QL text (the rewritten WINDOW :w shifts the rest of its line)
    (UnsupportedConstructError, "NOT EXISTS", "SELECT ?x " + WIN + "WHERE {\n  WINDOW :w { ?x :p ?v FILTER(?v > 1 || "
     "¦NOT EXISTS { ?x :q ?w }) }\n}"),
    (QuerySyntaxError, None, "SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } ?x :q ?v ¦?w }"),
    (QuerySyntaxError, None, "SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } ?x ¦zz:q ?v }"),
    (UnsupportedConstructError, "WINDOW", "SELECT ?x (COUNT(*) AS ?n) " + WIN + "WHERE {\n  GRAPH ?t { ?x :q ?w }\n"
     "  ¦WINDOW :w { ?x :p ?v }\n} GROUP BY ?x"),
    (UnsupportedConstructError, "WINDOW", "SELECT ?x " + WIN + "WHERE {\n  WINDOW :w { ?x :p ?v }\n"
     "  { ¦GRAPH ?t { ?x :q ?w } } UNION { ?x :r ?w }\n}"),
]


@pytest.mark.parametrize("error, construct, text", REFUSED, ids=[f"{i}-{c or e.__name__}" for i, (e, c, _) in enumerate(REFUSED)])
def test_refused_with_a_located_error(error, construct, text):
    text, line, col = marked(HEAD + text)
    with pytest.raises(error) as e:
        parse_query(text, file="q.rq")
    assert type(e.value) is error
    assert (e.value.location.file, e.value.location.line, e.value.location.column) == ("q.rq", line, col), str(e.value)
    if construct is not None:
        assert e.value.construct == construct
    assert str(e.value).startswith(f"q.rq:{line}:{col}: ")


def test_a_refusal_of_the_generated_filter_is_located_at_the_window_that_made_it():
    text, line, col = marked(HEAD + "SELECT DISTINCT ?x\nFROM NAMED WINDOW :a ON :s [RANGE PT5M]\n"
                             "FROM NAMED WINDOW :b ON :s [RANGE PT5M]\nWHERE {\n  WINDOW :a { ?x :p ?v }\n"
                             "  ¦WINDOW :b { ?x :q ?w }\n}")
    with pytest.raises(UnsupportedConstructError) as e:
        parse_query(text)
    assert (e.value.location.line, e.value.location.column) == (line, col)
    assert e.value.construct == "interval join"


def test_rstream_and_istream_of_aggregates_and_no_register_are_accepted():
    body = "SELECT ?x (COUNT(*) AS ?n) " + WIN + "WHERE { WINDOW :w { ?x :p ?v } } GROUP BY ?x"
    for head in ("REGISTER RSTREAM :o AS ", "REGISTER ISTREAM AS ", ""):
        assert parse_query(HEAD + head + body).window is not None
    assert parse_query(HEAD + "REGISTER ISTREAM :o AS SELECT ?x " + WIN + "WHERE { WINDOW :w { ?x :p ?v } }").window is None


def test_window_variable_in_two_blocks_and_a_duration_of_several_tokens():
    text = HEAD + "SELECT ?x FROM NAMED WINDOW :w ON :s [RANGE PT0.5S STEP PT0.25S]\n" \
        "WHERE { WINDOW ?w { ?x :p ?v } WINDOW ?w { ?x :q ?u } }"
    tr = translate(text)
    assert (tr.windows[0].range, tr.windows[0].step) == (500_000, 250_000)
    assert {a.time.name for a in parse_query(text).branches[0].atoms} == {"t_w"}


def test_a_refusal_of_the_parsed_query_is_located_once_on_a_line_the_rewriting_shifted():
    """The aggregate over two windows is refused after the parse, at the second WINDOW, which the rewritten first
    block (``GRAPH ?t_aa`` is longer than ``WINDOW :aa``) moved on the rewritten line."""
    text, line, col = marked(HEAD + "SELECT ?x (COUNT(*) AS ?n) FROM NAMED WINDOW :aa ON :s [RANGE PT1M] "
                             "FROM NAMED WINDOW :b ON :s [RANGE PT1M]\n"
                             "WHERE { WINDOW :aa { ?x :p ?v } ¦WINDOW :b { ?x :q ?u } } GROUP BY ?x")
    with pytest.raises(UnsupportedConstructError) as e:
        parse_query(text)
    assert (e.value.construct, e.value.location.line, e.value.location.column) == ("WINDOW", line, col)
