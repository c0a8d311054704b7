"""The kinds of RDF term an answer column holds, where the members of a query give it several.

SQL gives a column one type, so where one member of a query binds a variable to numbers and another to strings
(``?s ?p ?o`` over ``:age`` and ``:name``, a ``UNION``) the union holds their text.  SPARQL keeps each value's
kind and orders terms of different kinds (§15.1): unbound first, then blank nodes, IRIs, literals.  The unfolder
knows each member's term for each answer column (a term map fixes its term type and datatype:
:attr:`obda.model.compilation.SqlMember.terms`), so:

* the compiled SQL carries, beside such a column ``v``, a column ``v__type`` holding each row's term:
  ``bnode``, ``iri``, or the literal's datatype IRI (``@tag`` for a language-tagged string) — as Ontop's SQL
  carries its term-type columns — and orders by SPARQL's order of terms (:func:`obda.mapping.aggregate.ordered`);
* the executors hold such a value as its class's letter followed by its text (:func:`encode`): distinct kinds stay
  distinct (the integer 7 and the string "7"), and the sinks write each value as its own kind (:func:`decode`:
  a number as a JSON number), ordered as SPARQL orders them (:func:`order_key`).

The letters are SPARQL's order of the classes, so encoded values of one column compare as their terms' kinds do.
"""

from __future__ import annotations

from decimal import Decimal

from obda.model.query import XSD

#: the XSD datatypes of integers, and of numbers (SPARQL's numeric types and XSD's integer subtypes)
INTEGER = frozenset(XSD + t for t in (
    "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger", "negativeInteger",
    "nonPositiveInteger", "unsignedLong", "unsignedInt", "unsignedShort", "unsignedByte"))
NUMERIC = INTEGER | {XSD + "decimal", XSD + "double", XSD + "float"}

#: a term class's letter, in SPARQL's order of terms: blank nodes, IRIs, then literals (numbers, booleans, the rest)
LETTER = {"bnode": "1", "iri": "2", "number": "3", "boolean": "4", "literal": "5"}
_CLASS = {v: k for k, v in LETTER.items()}


def type_column(column: str) -> str:
    """The compiled SQL's column beside ``column`` that holds each row's term type."""
    return f"{column}__type"


def term_class(term: str | None) -> str | None:
    """The class of a term type (``bnode``, ``iri``, a datatype IRI or ``@tag``): ``bnode``, ``iri``, ``number``,
    ``boolean`` or ``literal``; None for None (the member does not bind the column)."""
    if term is None or term in ("bnode", "iri"):
        return term
    if term in NUMERIC:
        return "number"
    return "boolean" if term == XSD + "boolean" else "literal"


def mixed(classes) -> bool:
    """Whether the classes the members give one column (None: unbound there) differ."""
    return len({c for c in classes if c is not None}) > 1


def mixed_columns(terms: list[tuple], n: int) -> list[int]:
    """The columns (of ``n``) whose members' terms (``terms``: per member, a term type per column) are of several
    classes: the typed columns of the compiled SQL and of the executors."""
    return [k for k in range(n) if mixed(term_class(t[k]) for t in terms if len(t) > k)]


def as_text(value) -> str | None:
    """A value as the text Spark's ``CAST(value AS STRING)`` and the SQL engines give it (``true``, ``34``,
    ``20.5``); unbound stays unbound."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode(cls: str, value) -> str | None:
    """A value of a column of several kinds, as the executors hold it: its class's letter, then its text."""
    return None if value is None else LETTER[cls] + as_text(value)


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        d = Decimal(text)
    except ArithmeticError:
        return text  # not a number after all (an ill-typed literal): its text
    return float(d) if d.is_finite() else text


def decode(held):
    """What :func:`encode` held, as the value the sinks write: a number, a boolean, or text."""
    if held is None:
        return None
    cls, text = _CLASS[held[0]], held[1:]
    if cls == "number":
        return _number(text)
    if cls == "boolean" and text in ("true", "false"):
        return text == "true"
    return text


def decoded(values: tuple, typed) -> tuple:
    """An answer's values with those of the columns ``typed`` (indexes) decoded (:func:`decode`)."""
    return tuple(decode(v) if k in typed else v for k, v in enumerate(values))


def order_key(held) -> tuple:
    """SPARQL's order (§15.1) of a value :func:`encode` held: unbound, blank nodes, IRIs, then literals — numbers
    by value, then booleans, then the rest by their text."""
    if held is None:
        return (0, 0, "")
    value = decode(held)
    number = value if held[0] == LETTER["number"] and not isinstance(value, str) else 0
    return (int(held[0]), number, held[1:])
