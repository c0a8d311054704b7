"""The value types of computed values (:mod:`obda.mapping.functions`) and the two views of their SQL.

A computed value's type is an xsd datatype IRI, ``iri`` (an IRI's text), or ``@tag`` (a language-tagged string,
its tag static per term map).  Its SQL is a light expression (:mod:`obda.mapping._unfold_ir`), built from
sqlglot trees: :func:`light` and :func:`sql` convert.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from obda.mapping._unfold_ir import Expr
from obda.mapping._unfold_read import from_sqlglot
from obda.model.query import XSD

DOUBLE = {XSD + "double", XSD + "float"}
STRING = XSD + "string"
BOOLEAN = XSD + "boolean"
DATETIME = XSD + "dateTime"

Value = Callable[[object], tuple[Expr, str]]  # an argument expression -> (its SQL, its type)


def lang(dt: str) -> str | None:
    """The language tag of a value type (``@en``: a language-tagged string; its tag is static per term map)."""
    return dt[1:] if dt.startswith("@") else None


def sql(e: Expr) -> exp.Expression:
    """The sqlglot tree of a light expression (aliases as in the member)."""
    return e.to_sqlglot()


def light(node: exp.Expression) -> Expr:
    return from_sqlglot(node)
