"""Seeds and mutations for the fuzz tests: real inputs of the repository, changed a few tokens at a time.

Purely random text is rejected by a parser's first character; inputs that are *almost* valid reach its
deeper paths.  So every generator here starts from a real query, mapping or sources file of the repository
(``demo/``, ``catalogs/``, ``mappings/``, ``tests/``), splits it into tokens (words, numbers, quoted strings,
IRIs, punctuation, white space) and applies one to four edits — delete a token, insert one, replace one,
duplicate or drop a span, swap two, nest brackets or indentation up to 3000 deep — drawing inserted tokens from every seed's own tokens and from a list of
characters that parsers trip on (unbalanced brackets and quotes, escapes, NUL, surrogates, huge numbers, YAML
tags and anchors, Turtle directives).  A few inputs are random text, for the first-character paths.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

#: a token: an IRI, a quoted string (any of Turtle's or SPARQL's quotes), a word, a number, white space, one char
_TOKEN = re.compile(r'<[^<>\s]*>|"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[?$]?[\w:.-]+|\s+|.',
                    re.UNICODE)

#: tokens parsers trip on, added to every vocabulary
TRICKY = (
    "{", "}", "(", ")", "[", "]", "<", ">", '"', "'", '"""', "\\", "\\u", "\\U0010FFFF", "\x00", "\ud800", "\ufeff",
    "#", "@", "^^", ":", "::", ";", ",", ".", "..", "*", "?", "$", "|", "||", "&&", "!", "=", "-", "+", "/",
    "\n", "\t", "\r", " ", "a", "_:", "_:b0", "99999999999999999999999999999", "1e999", "-0", "NaN", "0x1F",
    "PT5M", "P", "PT", "P1Y", "2024-13-45T99:99:99Z", "-PT5M", "\u00e9", "\U0001F600", "\u202e",
    # SPARQL
    "SELECT", "DISTINCT", "WHERE", "GRAPH", "FILTER", "OPTIONAL", "UNION", "MINUS", "BIND", "VALUES", "GROUP BY",
    "ORDER BY", "HAVING", "COUNT(*)", "SUM(", "AS", "PREFIX", "BASE", "NOW()", "REGISTER", "ISTREAM", "RSTREAM",
    "FROM NAMED WINDOW", "ON", "RANGE", "STEP", "WINDOW", "LIMIT", "OFFSET", "SERVICE", "?t", "?x",
    # Turtle / R2RML
    "@prefix", "@base", "rr:template", "rr:column", "rr:constant", "rr:termType", "rr:IRI", "rr:Literal",
    "rr:BlankNode", "rr:sqlQuery", "rr:tableName", "rr:logicalTable", "rr:subjectMap", "rr:predicateObjectMap",
    "rr:parentTriplesMap", "rr:joinCondition", "rr:child", "rr:parent", "rr:graph", "rr:datatype", "rr:language",
    "rr:class", "rr:objectMap", "rr:sqlVersion", "{sensor_id}", "{", "\\{", "\\}", "@en", "xsd:integer",
    # YAML
    "&a", "*a", "!!python/object:os.system", "!!binary", "!!int", "!!float", "? ", "- ", "---", "...", "%YAML 1.2",
    "~", "null", "true", "yes", "on", ": ", "[]", "{}", ">-", "|-", "<<: *a",
)


#: what the "nest" edit repeats: flow brackets, and YAML's indented blocks (``{i}``: the indentation)
NESTING = ("[", "(", "{", "[ <p> ", "( <a> ", "{a: ", "[[", "- ", "{i}a:\n", "{i}- ")


def _nested(unit: str, depth: int) -> str:
    if "{i}" not in unit:
        return unit * depth
    return "\n" + "".join(unit.replace("{i}", " " * i) for i in range(depth))


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


#: the catalogs whose queries are seeds (a fixed list: a catalog added later changes no fuzz run)
CATALOGS = tuple(ROOT / "catalogs" / f for f in ("demo.yaml", "aggregates.yaml", "rspql.yaml"))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _catalog_entries() -> list[dict]:
    entries = []
    for f in CATALOGS:
        data = yaml.safe_load(_read(f)) or []
        entries += [e for e in data if isinstance(e, dict)]
    return entries


@lru_cache(maxsize=None)
def sparql_seeds() -> tuple[str, ...]:
    """Every demo query file and every query of the catalogs of the demo, aggregates and RSP-QL."""
    seeds = [_read(p) for p in sorted((ROOT / "demo" / "queries").glob("*.rq"))]
    seeds += [e["query"] for e in _catalog_entries() if isinstance(e.get("query"), str)]
    return tuple(dict.fromkeys(seeds))


@lru_cache(maxsize=None)
def mapping_seeds() -> tuple[str, ...]:
    """The repository's R2RML files."""
    paths = [ROOT / "mappings" / "turbine.r2rml.ttl", ROOT / "tests" / "integration" / "multiplicity" / "mapping.ttl"]
    return tuple(_read(p) for p in paths)


@lru_cache(maxsize=None)
def sources_seeds() -> tuple[str, ...]:
    """The repository's sources files, and each with a catalog entry's constraints appended."""
    files = [_read(ROOT / "demo" / "sources.yaml"), _read(ROOT / "tests" / "integration" / "multiplicity" / "sources.yaml")]
    with_constraints = [
        files[0].rstrip("\n") + "\n" + yaml.safe_dump({"constraints": e["constraints"]}, sort_keys=False)
        for e in _catalog_entries() if isinstance(e.get("constraints"), list)
    ]
    return tuple(dict.fromkeys(files + with_constraints[:4]))


@lru_cache(maxsize=None)
def _tokenized(seeds: tuple[str, ...]) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    toks = tuple(tuple(tokenize(s)) for s in seeds)
    vocab = sorted({t for ts in toks for t in ts if not t.isspace() and len(t) < 80} | set(TRICKY))
    return toks, tuple(vocab)


@st.composite
def mutated(draw, seeds: tuple[str, ...], max_edits: int = 4) -> str:
    """A seed with one to ``max_edits`` token edits (one input in twenty is random text instead)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.text(max_size=200))
    token_lists, vocab = _tokenized(seeds)
    return _edited(draw, list(draw(st.sampled_from(token_lists))), vocab, max_edits)


@st.composite
def edited(draw, text: str, max_edits: int = 3) -> str:
    """``text`` (e.g. a JSON body) with one to ``max_edits`` token edits drawing on :data:`TRICKY`."""
    return _edited(draw, tokenize(text), TRICKY, max_edits)


def _edited(draw, toks: list[str], vocab: tuple[str, ...], max_edits: int) -> str:
    new_token = st.one_of(st.sampled_from(vocab), st.sampled_from(vocab), st.text(min_size=1, max_size=6))
    for _ in range(draw(st.integers(1, max_edits))):
        op = draw(st.sampled_from(("delete", "insert", "replace", "duplicate", "drop_span", "swap", "nest")))
        n = len(toks)
        i = draw(st.integers(0, max(0, n - 1)))
        if op == "nest":  # brackets or indentation nested deep: a recursive parser runs out of stack
            toks.insert(draw(st.integers(0, n)), _nested(draw(st.sampled_from(NESTING)), draw(st.integers(2, 3000))))
        elif op == "insert" or n == 0:
            toks.insert(draw(st.integers(0, n)), draw(new_token))
        elif op == "delete":
            del toks[i]
        elif op == "replace":
            toks[i] = draw(new_token)
        elif op == "duplicate":
            j = draw(st.integers(i, min(n, i + 20)))
            toks[j:j] = toks[i:j]
        elif op == "drop_span":
            del toks[i:draw(st.integers(i, min(n, i + 30)))]
        else:
            j = draw(st.integers(0, n - 1))
            toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)
