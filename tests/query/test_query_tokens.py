"""The tokenizer that locates constructs: comments, IRIs and strings never hide or fake keywords."""

from obda.query.tokens import OBJECT, PATH_OP, PREDICATE, SUBJECT, TokenStream, tokenize, triple_roles


def kinds(text: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(text)]


def test_comments_iris_and_strings_are_single_tokens():
    text = '<http://e/#OPTIONAL> # OPTIONAL here is a comment\n"say \\"OPTIONAL\\"" \'x\' """a\n"b" OPTIONAL"""'
    assert kinds(text) == [
        ("iri", "<http://e/#OPTIONAL>"),
        ("string", '"say \\"OPTIONAL\\""'),
        ("string", "'x'"),
        ("string", '"""a\n"b" OPTIONAL"""'),
    ]


def test_names_variables_numbers_and_operators():
    assert kinds("?x $y _:b1. :C. npdv:name; a 1.5 2. <= && || ^^ != ?") == [
        ("var", "?x"), ("var", "$y"), ("bnode", "_:b1"), ("punct", "."), ("pname", ":C"), ("punct", "."),
        ("pname", "npdv:name"), ("punct", ";"), ("word", "a"), ("number", "1.5"), ("number", "2"), ("punct", "."),
        ("punct", "<="), ("punct", "&&"), ("punct", "||"), ("punct", "^^"), ("punct", "!="), ("punct", "?"),
    ]


def test_less_than_is_not_an_iri():
    assert kinds("?a < ?b && ?c > 1")[1] == ("punct", "<")


def test_positions_are_one_based_lines_and_columns():
    toks = tokenize("SELECT\n  ?x\r\n\tWHERE")
    assert [(t.text, t.line, t.column) for t in toks] == [("SELECT", 1, 1), ("?x", 2, 3), ("WHERE", 3, 2)]


def test_keyword_search_and_bracket_matching():
    ts = TokenStream("SELECT * { ?x a :C FILTER(?x = (1)) } ORDER BY ?x")
    i = ts.find_punct("{")
    assert ts[ts.matching(i)].text == "}"
    assert ts[ts.find_words("ORDER BY")].column == 39
    assert ts.find_words("BY ORDER") is None


def test_triple_roles():
    text = "?s :p/:q* [ :r ?o ] ; ?v 'lit' , ?w . ?z a :C"
    ts = TokenStream(text)
    roles = [(ts[i].text, r) for i, r in triple_roles(ts, 0, len(ts))]
    assert roles == [
        ("?s", SUBJECT), (":p", PREDICATE), ("/", PATH_OP), (":q", PREDICATE), ("*", PATH_OP),
        (":r", PREDICATE), ("?o", OBJECT), ("?v", PREDICATE), ("'lit'", OBJECT), ("?w", OBJECT),
        ("?z", SUBJECT), ("a", PREDICATE), (":C", OBJECT),
    ]
