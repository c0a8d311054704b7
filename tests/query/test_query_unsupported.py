"""Each unsupported construct fails with UnsupportedConstructError naming it, at its line and column.

In the query texts below, the marker ``¦`` stands just before the token the
error must point at; it is removed before parsing and its (line, column) is
the expected location.
"""

from __future__ import annotations

import pytest

from obda.errors import Location, QuerySyntaxError, UnsupportedConstructError
from obda.query import parse_query

HEAD = "PREFIX : <http://e/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"

MARK = "¦"


def marked(text: str) -> tuple[str, int, int]:
    """Strip the marker; return the text and the 1-based (line, column) where it stood."""
    i = text.index(MARK)
    before = text[:i]
    line = before.count("\n") + 1
    col = i - (before.rfind("\n") + 1) + 1
    return text.replace(MARK, "", 1), line, col


CASES = [
    # OPTIONAL, MINUS and [NOT] EXISTS run over static data (obda/query/negation.py); these stay refused
    ("OPTIONAL", "SELECT ?x WHERE {\n  ?x a :C .\n  ¦OPTIONAL { GRAPH ?t { ?x :p ?y } }\n}"),
    ("OPTIONAL", "SELECT ?x WHERE { ?x a :C . # OPTIONAL in a comment\n ?x :n \"OPTIONAL\" ¦optional { GRAPH ?t { ?y :p ?z } } }"),
    ("MINUS", "SELECT ?x WHERE {\n  ?x a :C\n  ¦MINUS { GRAPH ?t { ?x a :D } }\n}"),
    ("NOT EXISTS", "SELECT ?x WHERE {\n  ?x a :C\n  FILTER(?x != :a && ¦NOT EXISTS { ?x a :D })\n}"),
    ("EXISTS", "SELECT ?x WHERE {\n  ?x a :C FILTER(?x != :a || ¦EXISTS { ?x a :D })\n}"),
    ("aggregate in an aggregate", "SELECT ?x (¦SUM(AVG(?v) * 2) AS ?s) WHERE { ?x :v ?v } GROUP BY ?x"),
    ("COUNT(DISTINCT *)", "SELECT ?x\n  (¦COUNT(DISTINCT *) AS ?s) WHERE { ?x :v ?v } GROUP BY ?x"),
    ("GROUP BY expression", "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?x :v ?v } }\n¦GROUP BY (?v + 1)"),
    ("ungrouped variable", "SELECT ¦?x WHERE { ?x :v ?v }\n  GROUP BY ?v"),
    ("ungrouped variable", "SELECT ?x (COUNT(*) AS ?n) WHERE { ?x :v ?v }\n  GROUP BY ?x HAVING (¦?v > 1)"),
    ("aggregate of time", "SELECT ?x (MAX(¦?t + \"PT1H\"^^xsd:dayTimeDuration) AS ?s) WHERE { GRAPH ?t { ?x :v ?v } } "
                          "GROUP BY ?x"),
    ("unselected grouping variable", "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?x :v ?v } } GROUP BY ¦?x"),
    ("NOW()", "SELECT ?x ?v WHERE { GRAPH ?t { ?x :v ?v } GRAPH ?u { ?x :w ?w } "
              "FILTER(?t > ¦NOW() - \"PT1M\"^^xsd:dayTimeDuration) }"),
    ("NOW()", "SELECT ?x (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?x :v ?v } FILTER(?t > ¦NOW() - \"PT1M\"^^xsd:dayTimeDuration "
              "|| ?v > 2) } GROUP BY ?x"),
    ("COUNT", "SELECT ?x WHERE { ?x :v ?v FILTER(¦COUNT(?v) > 1) }"),
    ("ORDER BY", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } }\n¦ORDER BY ?x"),
    ("LIMIT", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } }\n  ¦LIMIT 10"),
    ("OFFSET", "SELECT ?x (COUNT(*) AS ?n) WHERE { GRAPH ?t { ?x a :C } } GROUP BY ?x ¦OFFSET 10"),
    ("ORDER BY expression", "SELECT DISTINCT ?x WHERE { ?x :v ?v }\nORDER BY ¦?v"),
    ("ORDER BY expression", "SELECT DISTINCT ?x WHERE { ?x :v ?v } ORDER BY ?x ¦(?v + 1)"),
    ("function call", "SELECT ?x WHERE { ?x :v ?v } ORDER BY ¦xsd:date(?v)"),
    ("function call", "SELECT ?x WHERE { ?x :v ?v } ORDER BY DESC(?x) ASC(¦xsd:date(?v))"),
    # ASK's answer is one boolean: no solution modifier applies to it
    ("ORDER BY", "ASK { ?x a :C }\n¦ORDER BY ?x"),
    ("LIMIT", "ASK { ?x a :C } ¦LIMIT 1"),
    ("OFFSET", "ASK { ?x a :C } ¦OFFSET 1"),
    ("GROUP BY", "ASK { ?x a :C } ¦GROUP BY ?x"),
    ("FROM", "ASK ¦FROM <http://g/> { ?x a :C }"),
    ("CONSTRUCT", "¦CONSTRUCT { ?x a :D } WHERE { ?x a :C }"),
    ("DESCRIBE", "¦DESCRIBE ?x WHERE { ?x a :C }"),
    ("SERVICE", "SELECT ?x WHERE {\n  ¦SERVICE <http://s/> { ?x a :C }\n}"),
    ("VALUES", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } ¦VALUES ?t { \"2024-01-01T00:00:00\"^^xsd:dateTime } }"),
    ("VALUES", "SELECT ?x WHERE { ?x a :C }\n¦VALUES (?x ?y) { (:a) }"),
    ("BIND", "SELECT ?x WHERE {\n  ?x :v ?v .\n  BIND(?v AS ¦?x)\n}"),
    ("BIND", "SELECT ?x WHERE {\n  BIND(¦?v AS ?w) ?x :v ?v .\n}"),
    ("BIND of an aggregate", "SELECT ?x WHERE {\n  ?x :v ?v . ¦BIND(SUM(?v) AS ?w)\n}"),
    ("BIND in GRAPH", "SELECT ?x WHERE {\n  GRAPH ?t { ?x :v ?v . ¦BIND(?v AS ?w) }\n}"),
    # a subquery is inlined (obda/query/subselect.py) unless it cannot be
    ("subquery with aggregates", "SELECT ?x WHERE { ?x a :C {\n  ¦SELECT ?x (COUNT(*) AS ?n) WHERE { ?x a :D } GROUP BY ?x } }"),
    ("LIMIT in a subquery", "SELECT ?x WHERE { ?x a :C { SELECT ?x WHERE { ?x a :D }\n ¦LIMIT 2 } }"),
    ("DISTINCT in a subquery", "SELECT ?x WHERE { ?x a :C { SELECT ¦DISTINCT ?x WHERE { ?x a :D } } }"),
    ("subquery", "SELECT ?x WHERE { ?x a :C { SELECT ?x (STR(?x) AS ¦?s) WHERE { ?x a :D } } }"),
    ("SELECT expression", "SELECT ?x (¦?t * 2 AS ?w) WHERE { GRAPH ?t { ?x :v ?v } }"),
    ("REDUCED", "SELECT ¦REDUCED ?x WHERE { ?x a :C }"),
    ("FROM", "SELECT ?x ¦FROM <http://g/> WHERE { ?x a :C }"),
    ("FROM NAMED", "SELECT ?x ¦FROM NAMED <http://g/> WHERE { ?x a :C }"),
    # property paths other than sequences
    ("property path *", "SELECT ?x WHERE { ?x :p¦* ?y }"),
    ("property path +", "SELECT ?x WHERE { ?x :a/:p¦+ ?y }"),
    ("property path ?", "SELECT ?x WHERE { ?x :p¦? ?y }"),
    ("property path !", "SELECT ?x WHERE { ?x ¦!:p ?y }"),
    ("property path !", "SELECT ?x WHERE { ?x ¦!:p ?y }"),
    # application time
    ("GRAPH <IRI>", "SELECT ?x WHERE {\n  ¦GRAPH <http://g/> { ?x a :C }\n}"),
    ("GRAPH <IRI>", "SELECT ?x WHERE { ¦GRAPH :g { ?x a :C } }"),
    ("unbound answer variable", "SELECT ?x ¦?t WHERE { ?x a :C }"),
    ("time comparison", "SELECT ?x WHERE { GRAPH ?t { ?x a :C }\n  FILTER(¦?t > 5) }"),
    ("time comparison", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } FILTER(\"x\" = ¦?t) }"),
    ("time comparison", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } FILTER(¦?t != :a) }"),
    ("time comparison", "SELECT ?x WHERE { GRAPH ?t { ?x :v ?v } FILTER(?v < ¦?t) }"),
    ("time variable as term", "SELECT ?x WHERE { GRAPH ?t { ?x a :C } ?x :p ¦?t }"),
    ("time variable as term", "SELECT ?x WHERE { GRAPH ?t { ?x a :C . ¦?t a :D } }"),
    ("FILTER on unbound variable", "SELECT ?x WHERE { GRAPH ?t { ?x a :C FILTER(¦?t > \"2020-01-01T00:00:00\"^^xsd:dateTime) } }"),
    ("GRAPH without triple patterns", "SELECT ?x WHERE { ?x a :C . ¦GRAPH ?t0 { GRAPH ?t1 { ?x a :D } } }"),
    ("GRAPH without triple patterns", "SELECT ?x WHERE { ?x a :C .\n  ¦GRAPH ?t { } }"),
    ("GRAPH without triple patterns", "SELECT ?x WHERE { ?x a :C . ¦GRAPH ?t { { ?x a :D } UNION { GRAPH ?u { ?x a :E } } } }"),
    # terms
    ("variable predicate", "SELECT ?x WHERE { ?x :p ?y .\n  ?y ¦?p ?z }"),
    ("variable predicate", "SELECT ?x WHERE { ?p :q ?x ; ¦?p ?z }"),
    ("variable class", "SELECT ?x WHERE { ?x a ¦?c }"),
    ("literal subject", "SELECT ?x WHERE { ¦\"s\" :p ?x }"),
    # filter expressions
    ("REGEX flags", "SELECT ?x WHERE { ?x :n ?n FILTER(¦regex(?n, \"^a\", \"x\")) }"),
    ("TZ", "SELECT ?x WHERE { ?x :n ?n FILTER(¦TZ(?n) = \"Z\") }"),
    ("REPLACE", "SELECT ?x WHERE { ?x :n ?n FILTER(?n = \"a\" && ¦REPLACE(?n, \"a*\", \"b\") = \"a\") }"),
    ("REPLACE", "SELECT ?x WHERE { ?x :n ?n BIND(¦REPLACE(?n, \"(a)\", \"$2\") AS ?r) }"),
    ("REPLACE flags", "SELECT ?x WHERE { ?x :n ?n BIND(¦REPLACE(?n, \"a\", \"b\", \"s\") AS ?r) }"),
    ("MD5", "SELECT ?x WHERE { ?x :n ?n FILTER(?n > 1 && ¦MD5(?n) = \"a\") }"),
    ("SUBSTR", "SELECT ?x WHERE { ?x :n ?n FILTER(¦SUBSTR(?n, 0, 2) = \"a\") }"),
    ("SUBSTR", "SELECT ?x WHERE { ?x :n ?n ; :m ?m FILTER(¦SUBSTR(?n, ?m) = \"a\") }"),
    ("SUBSTR", "SELECT ?x WHERE { ?x :n ?n BIND(¦SUBSTR(?n, 1, 1.5) AS ?s) }"),
    ("TIMEZONE", "SELECT ?x WHERE { GRAPH ?t { ?x :n ?n } FILTER(¦TIMEZONE(?t) = 8) }"),
    ("function of a time variable", "SELECT ?x WHERE { GRAPH ?t { ?x :n ?n } FILTER(STRLEN(CONCAT(¦?t)) > 8) }"),
    ("|| over a computed condition", "SELECT ?x WHERE { ?x :n ?n FILTER(STRLEN(?n) > 2 ¦|| ?n = \"a\") }"),
    ("STRUUID", "SELECT ?x WHERE { ?x :n ?n FILTER(¦STRUUID() = ?n) }"),
    ("SHA1", "SELECT ?x WHERE { ?x :n ?n FILTER(¦sha1(?n) = \"a\") }"),
    ("ENCODE_FOR_URI", "SELECT ?x WHERE { ?x :n ?n FILTER(¦ENCODE_FOR_URI(?n) = \"a\") }"),
    ("function call", "SELECT ?x WHERE { ?x :n ?n FILTER(¦xsd:date(?n) > 1) }"),
    ("arithmetic", "SELECT ?x WHERE { ?x :n ?n FILTER(?n ¦+ 1) }"),
    ("effective boolean value", "SELECT ?x WHERE { ?x :n ?n ¦FILTER(\"abc\") }"),  # a constant: ?n alone runs (EBV)
    ("FILTER on unbound variable", "SELECT ?x WHERE { ?x :n ?n FILTER(¦?m > 1) }"),
    ("FILTER on unbound variable", "SELECT ?x WHERE { ?x :n ?n { ?x :q ?z FILTER(¦?n > 1) } }"),
    # projection
    ("unbound answer variable", "SELECT ?x ¦?nope WHERE { ?x a :C }"),
    # a function obda computes, alone as a FILTER's condition (its truth value): the message said "function ABS is
    # not supported (obda computes ABS, …)"
    ("ABS", "SELECT ?x WHERE { ?x :v ?v FILTER(¦ABS(?v)) }"),
]


@pytest.mark.parametrize("construct,text", CASES, ids=[f"{i}-{c}" for i, (c, _) in enumerate(CASES)])
def test_unsupported_construct_named_and_located(construct, text):
    body, line, col = marked(HEAD + text)
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(body, file="q.rq")
    err = info.value
    assert err.construct == construct, err.message
    assert err.location == Location("q.rq", line, col), err.message
    assert err.to_dict()["construct"] == construct


def test_order_by_message_explains_continuous_queries():
    with pytest.raises(UnsupportedConstructError, match="continuous"):
        parse_query(HEAD + "SELECT ?x WHERE { GRAPH ?t { ?x a :C } } ORDER BY ?x")


def test_first_unsupported_construct_in_text_is_reported():
    text, line, col = marked(HEAD + "SELECT ?x WHERE { ¦OPTIONAL { ?x a :C } OPTIONAL { ?x a :D } } ORDER BY ?y")
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(text)
    assert (info.value.construct, info.value.location.line, info.value.location.column) == ("OPTIONAL", line, col)


def test_filter_alternatives_that_can_never_hold_are_an_error():
    text, line, col = marked(HEAD + "SELECT ?x WHERE { { ?x :p ?y } UNION { ?x :q ?z } ¦FILTER(?y = 1 && ?z = 1) }")
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(text)
    assert info.value.construct == "FILTER on unbound variable"
    assert (info.value.location.line, info.value.location.column) == (line, col)


@pytest.mark.parametrize(
    "text",
    [
        # pyparsing reports the start of the element that failed to match
        "SELECT ?x WHERE {\n  ¦?x a }",
        "SELECT ?x WHERE { ?x a :C ¦",
        "SELECT ?x WHERE ¦WHERE { ?x a :C }",
        "SELECT ?x WHERE { ?x :p ?y ¦FILTER(?y >) }",
    ],
)
def test_syntax_error_location(text):
    body, line, col = marked(HEAD + text)
    with pytest.raises(QuerySyntaxError) as info:
        parse_query(body, file="bad.rq")
    assert info.value.location.file == "bad.rq"
    assert (info.value.location.line, info.value.location.column) == (line, col)


def test_undeclared_prefix_is_a_syntax_error_at_the_name():
    body, line, col = marked("PREFIX : <http://e/>\nSELECT ?x WHERE { ?x ¦foo:p ?y }")
    with pytest.raises(QuerySyntaxError) as info:
        parse_query(body)
    assert "foo" in info.value.message
    assert (info.value.location.line, info.value.location.column) == (line, col)


def test_an_empty_where_clause_selecting_everything_is_an_error():
    # its one solution binds nothing: an answer with no columns
    with pytest.raises(UnsupportedConstructError) as info:
        parse_query(HEAD + "SELECT * WHERE { }")
    assert info.value.construct == "empty projection"


def test_a_computed_value_alone_in_filter_names_what_to_write():
    """ABS is computed; what is not is the truth value of its result: the message said ABS was unsupported, and
    listed ABS among the functions obda computes."""
    with pytest.raises(UnsupportedConstructError, match=r"truth value of ABS\(…\).*FILTER\(ABS\(…\) != 0\)"):
        parse_query(HEAD + "SELECT ?x WHERE { ?x :v ?v FILTER(ABS(?v)) }")
