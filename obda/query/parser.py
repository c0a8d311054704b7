"""SPARQL 1.1 SELECT → :class:`obda.model.query.Query` (a UCQ with application time): the entry point.

rdflib parses the text (``parseQuery``); this module guards that parse — nesting deeper than
:data:`MAX_NESTING` is refused with its location, the recursion limit is raised so rdflib's parser never runs
out of frames, and rdflib's syntax errors become :class:`~obda.errors.QuerySyntaxError` — translates RSP-QL
first (:mod:`obda.query.rspql`), and hands the parse tree to the tree walk (:mod:`obda.query.walk`), which
builds typed model objects:

* a basic graph pattern becomes atoms (``?x a :C`` → ClassAtom, ``?x :p ?y`` →
  PropertyAtom); blank nodes become non-projected variables; a sequence path
  ``:p/:q`` becomes a chain of atoms through fresh blank-node variables;
* ``GRAPH ?t { P }`` gives the atoms of ``P`` the time label ``?t``;
* UNION and the ``||`` alternatives of FILTERs are expanded into disjunctive
  normal form (:mod:`obda.query.normal_forms`): one CQ per combination, each with a conjunction of comparisons;
* the SELECT clause and solution modifiers are :mod:`obda.query.solutions`'.

Every construct outside that fragment raises
:class:`~obda.errors.UnsupportedConstructError` naming it, with the line and
column found by re-scanning the text (:mod:`obda.query.locations`), because
rdflib's tree has no positions.
"""

from __future__ import annotations

import logging
import sys
import threading
from contextlib import contextmanager
from dataclasses import replace

from pyparsing import ParseBaseException
from rdflib.plugins.sparql.parser import parseQuery

from obda.errors import Location, ObdaError, QuerySyntaxError, UnsupportedConstructError
from obda.model.query import Query
from obda.query import rspql
from obda.query import tokens as tk
from obda.query.walk import Converter

# Upper bound on how deeply { }, ( ) and [ ] nest (all kinds counted together): rdflib's parser recurses
# some 40 Python frames per parenthesis level, so a query nested much deeper exhausts the interpreter's
# recursion limit; beyond this depth the query is refused with its location instead.
MAX_NESTING = 16


def parse_query(text: str, *, file: str | None = None, base: str | None = None, vocabulary=None) -> Query:
    """Parse a SPARQL ``SELECT`` / ``SELECT DISTINCT`` query into a :class:`Query`.

    ``file`` is only used in error locations and ``Query.location``; ``base``
    is the base IRI for relative IRIs (a ``BASE`` in the text overrides it).
    Raises :class:`QuerySyntaxError` when the text does not parse and
    :class:`UnsupportedConstructError` for constructs outside the supported
    fragment (see the module docstring).  An RSP-QL text (``REGISTER``, ``FROM NAMED WINDOW``, ``WINDOW``) is
    rewritten to this SPARQL first (:mod:`obda.query.rspql`); its errors point at the RSP-QL text.
    ``vocabulary``: the :class:`~obda.model.ontology.Ontology` whose classes and properties a variable in
    predicate position ranges over (without it, such a pattern is refused).
    """
    translation = rspql.translate(text, file)
    if translation is None:
        return _parse_sparql(text, file, base, vocabulary)
    try:
        query = _parse_sparql(translation.text, file, base, vocabulary)
    except ObdaError as e:
        raise translation.relocate(e) from None
    rspql.check(translation, query.aggregation is not None)  # located in the RSP-QL text already
    return replace(query, text=text, location=translation.locate(query.location))


def _parse_sparql(text: str, file: str | None, base: str | None, vocabulary=None) -> Query:
    tokens = tk.tokenize(text)
    deep = tk.too_deep(tokens, MAX_NESTING)
    if deep is not None:  # rdflib's parser recurses per level: fail here, located, not with a RecursionError
        raise _nesting_error(deep, MAX_NESTING + 1, file)
    try:
        with _stack_for(tk.deepest(tokens)[1]), _ill_typed_literals_quiet():
            tree = parseQuery(text)
    except ParseBaseException as e:
        raise QuerySyntaxError(f"SPARQL syntax error: {e.msg}", Location(file, e.lineno, e.col)) from None
    except RecursionError:  # within the limit, but called with little stack left
        raise _nesting_error(*tk.deepest(tokens), file) from None
    except Exception as e:  # rdflib raises plain exceptions for some lexical errors
        raise QuerySyntaxError(f"SPARQL syntax error: {e}", Location(file)) from None
    try:
        with _ill_typed_literals_quiet():
            return Converter(text, file, base, vocabulary).convert(tree)
    except RecursionError:
        raise _nesting_error(*tk.deepest(tokens), file) from None


@contextmanager
def _ill_typed_literals_quiet():
    """rdflib logs a traceback for a literal whose lexical form is not of its datatype (``"abc"^^xsd:integer``);
    the literal is valid SPARQL (an error where it is compared, as SPARQL says), so the parse stays quiet."""
    log = logging.getLogger("rdflib.term")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


# Python frames rdflib's parser uses per nesting level (measured: about 40 for a parenthesis inside FILTER,
# 26 for a { } group), and for a query without nesting, with a margin.
_FRAMES_PER_LEVEL = 50
_FRAMES_BASE = 300


@contextmanager
def _stack_for(depth: int):
    """Make sure the recursion limit leaves rdflib's parser room for ``depth`` nested brackets.

    A RecursionError inside rdflib's parser leaves its grammar in a broken state (later queries parse
    into wrong trees), so the parser must never run out of frames: when the caller is already deep
    (a server thread, a test runner) the limit is raised — bounded, since ``depth`` is at most
    :data:`MAX_NESTING` — and never lowered again while another thread may rely on it.
    """
    frame, used = sys._getframe(), 0
    while frame is not None:
        used += 1
        frame = frame.f_back
    need = used + _FRAMES_BASE + _FRAMES_PER_LEVEL * depth
    with _LIMIT_LOCK:
        if need > sys.getrecursionlimit():
            sys.setrecursionlimit(need)
    yield


_LIMIT_LOCK = threading.Lock()


def _nesting_error(t: "tk.Token | None", level: int, file: str | None) -> UnsupportedConstructError:
    """Nesting too deep: beyond :data:`MAX_NESTING`, or (``level`` within it) deeper than the stack left allows."""
    where = f"this '{t.text}' opens level {level}" if t is not None else "the query is nested too deeply"
    if level > MAX_NESTING:
        what = f"brackets nested more than {MAX_NESTING} deep are not supported"
    else:
        what = "the query is nested too deeply to parse here (Python recursion limit)"
    return UnsupportedConstructError(
        "nesting",
        f"{what} ({where}; the limit of {MAX_NESTING} counts {{ }} groups, ( ) and [ ] together); flatten the nesting",
        Location(file, t.line, t.column) if t is not None else Location(file),
    )
