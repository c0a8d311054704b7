"""Deeply nested queries: a located error naming the nesting limit, never "maximum recursion depth exceeded"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from obda.errors import UnsupportedConstructError
from obda.query import tokens as tk
from obda.query.parser import MAX_NESTING, parse_query

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "PREFIX : <http://example.org/turbine#>\n"
TRIPLES = "GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . }"


def braces(n: int) -> str:
    return PREFIX + "SELECT ?s ?v WHERE " + "{ " * n + TRIPLES + " }" * n + "\n"


def parens(n: int) -> str:
    """``n`` parentheses inside FILTER( ), itself inside the WHERE group: n + 2 levels."""
    return PREFIX + "SELECT ?s ?v WHERE { " + TRIPLES + "\n  FILTER(" + "(" * n + "?v > 90" + ")" * n + ") }\n"


def _error(text: str) -> UnsupportedConstructError:
    with pytest.raises(UnsupportedConstructError) as ei:
        parse_query(text, file="q.rq")
    return ei.value


def test_fifty_nested_braces_are_refused_at_the_first_brace_too_deep():
    e = _error(braces(50))
    assert e.construct == "nesting"
    assert f"more than {MAX_NESTING} deep" in e.message and "recursion" not in e.message
    col = len("SELECT ?s ?v WHERE ") + 2 * MAX_NESTING + 1  # the brace that opens level MAX_NESTING + 1
    assert (e.location.file, e.location.line, e.location.column) == ("q.rq", 2, col)


def test_fifty_nested_parentheses_in_filter_are_refused():
    e = _error(parens(50))
    assert e.construct == "nesting" and f"more than {MAX_NESTING} deep" in e.message
    assert "recursion" not in e.message
    assert e.location.line == 3 and e.location.column == len("  FILTER(") + (MAX_NESTING - 2) + 1


def _deep(n, f):  # call f with n more frames on the stack (a server thread, a test runner)
    return f() if n == 0 else _deep(n - 1, f)


def test_nesting_up_to_the_limit_parses_even_with_little_stack_left():
    parse_query(braces(MAX_NESTING - 1), file="q.rq")  # GRAPH's { } is one more level
    parse_query(parens(MAX_NESTING - 2), file="q.rq")
    for q in (braces(MAX_NESTING - 1), parens(MAX_NESTING - 2)):
        q_ = parse_query(q, file="q.rq")
        assert _deep(sys.getrecursionlimit() - 150, lambda: parse_query(q, file="q.rq")) == q_


def test_parser_never_left_broken_by_running_out_of_stack():
    """A RecursionError inside rdflib's parser used to leave its grammar broken: a later SERVICE query
    parsed into a list instead of a group ('list' object has no attribute 'name')."""
    _deep(sys.getrecursionlimit() - 150, lambda: parse_query(parens(MAX_NESTING - 2), file="q.rq"))
    with pytest.raises(UnsupportedConstructError) as ei:
        parse_query(PREFIX + "SELECT ?x WHERE {\n  SERVICE <http://s/> { ?x a :C }\n}", file="q.rq")
    assert ei.value.construct == "SERVICE"


def test_brackets_in_strings_iris_and_comments_do_not_count():
    q = (PREFIX + "# " + "{(" * 40 + "\nSELECT ?s ?v WHERE { " + TRIPLES
         + ' FILTER(?v > 90 || ?v = "' + "{[(" * 40 + '") }\n')
    parse_query(q, file="q.rq")
    assert tk.too_deep(tk.tokenize(q), MAX_NESTING) is None


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cli_exit_2_with_location(tmp_path, fmt):
    q = tmp_path / "deep.rq"
    q.write_text(braces(50))
    r = subprocess.run([sys.executable, "-m", "obda.cli", "compile", str(q), "--project", str(ROOT / "demo"),
                        "--format", fmt], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "recursion" not in r.stderr + r.stdout
    if fmt == "json":
        err = json.loads(r.stdout)["error"]
        assert err["code"] == "unsupported_construct" and err["construct"] == "nesting"
        assert err["location"]["file"] == str(q) and err["location"]["line"] == 2
    else:
        assert f"{q}:2:" in r.stderr and f"more than {MAX_NESTING} deep" in r.stderr
