"""The text of a template's column parts: which characters it can hold, and which parts a term's text determines.

An R2RML template (``http://example.org/Observation_{station}_{time}``) writes each column value as its
natural RDF lexical form, percent-encoded in an IRI (R2RML §7.3): an integer as its digits, a timestamp as
its canonical ``xsd:dateTime`` form (``2024-01-01T10:00:00``, ``:`` encoded as ``%3A``), a string as it is
with every character outside ``A-Z a-z 0-9 - . _ ~`` percent-encoded.  Whether two instances of one template
are equal exactly when their columns are (docs/semantics.md, "IRIs"), and whether a term's text determines
one of its columns (a projected time, docs/analysis.md), depends on the fixed text between the parts: a part
ends at a separator character it cannot contain.  The unfolder (:mod:`obda.mapping._unfold_terms`) and the
analysis (:mod:`obda.analysis.terms`) read templates with these functions.
"""

from __future__ import annotations

import string
from datetime import datetime
from typing import Callable, Sequence, Union

from sqlglot import exp

from obda.model.sources import ColumnType

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")

_INTEGER = frozenset(string.digits + "-")
_NUMBER = frozenset(string.digits + "-+.eE")
_BOOLEAN = frozenset("truefalsTRUEFALS01")
_TIMESTAMP = frozenset(string.digits + "-T:.")
_ENCODED_TIMESTAMP = frozenset(string.digits + "-T.%A")  # ':' becomes %3A

# a part of a template: fixed text, or a column part (its type, None when unknown; whether it is IRI-encoded)
Part = Union[str, tuple]


def iso_text(d: datetime) -> str:
    """The canonical ``xsd:dateTime`` lexical form of a naive timestamp (R2RML's natural form of a TIMESTAMP):
    ``2024-01-01T10:00:00``, fractional seconds without trailing zeros."""
    text = d.strftime("%Y-%m-%dT%H:%M:%S")
    return text + ("." + f"{d.microsecond:06d}".rstrip("0") if d.microsecond else "")


def alphabet(column_type: ColumnType | None, encoded: bool) -> frozenset[str] | None:
    """The characters the text of a column part can contain (after encoding); None: any character (a string
    part that is not encoded), or every unreserved character, ``%`` and any non-ASCII one (an encoded string)."""
    if column_type is ColumnType.INTEGER:
        return _INTEGER
    if column_type in (ColumnType.DECIMAL, ColumnType.DOUBLE):
        return _NUMBER
    if column_type is ColumnType.BOOLEAN:
        return _BOOLEAN
    if column_type is ColumnType.TIMESTAMP:
        return _ENCODED_TIMESTAMP if encoded else _TIMESTAMP
    return None


def can_contain(column_type: ColumnType | None, encoded: bool, ch: str) -> bool:
    """Can the text of a column part of this type contain the character ``ch``?"""
    alpha = alphabet(column_type, encoded)
    if alpha is not None:
        return ch in alpha
    if encoded:
        return ch in UNRESERVED or ch == "%" or ord(ch) > 127
    return True


def determined_parts(parts: Sequence[Part]) -> set[int]:
    """Indexes of the column parts whose text every text of the whole term determines.

    From the left, a column part ends at the first character of the fixed text after it when it cannot
    contain that character (or at the end of the term); the parts before it being determined, so is it.
    The same from the right with the last character of the fixed text before it.  One column part left
    between determined ones is the rest of the text.  ``Observation_{station}_{time}`` with a string
    ``station``: ``time`` from the right (a timestamp holds no ``_``), then ``station`` as the rest;
    ``Sensor_{station}_{kind}`` with two strings: neither."""
    cols = [i for i, p in enumerate(parts) if not isinstance(p, str)]
    found: set[int] = set()
    for order in (range(len(parts)), range(len(parts) - 1, -1, -1)):
        order = list(order)
        for k, i in enumerate(order):
            p = parts[i]
            if isinstance(p, str):
                continue
            nxt = parts[order[k + 1]] if k + 1 < len(order) else None
            edge = nxt if order[0] == 0 else (nxt[::-1] if isinstance(nxt, str) else nxt)
            if nxt is None or (isinstance(edge, str) and edge and not can_contain(p[0], p[1], edge[0])):
                found.add(i)
                continue
            break
    rest = [i for i in cols if i not in found]
    if len(rest) == 1:
        found.add(rest[0])
    return found


# --------------------------------------------------------------------------------------------------------
# templates in SQL: the unfolder prints a term as CONCAT of string constants and (cast, encoded) columns

_TRANSPARENT = (exp.Cast, exp.Paren)


def is_template(node: exp.Expression) -> bool:
    """Is ``node`` a concatenation (an IRI or literal template as the unfolder prints it)?"""
    node = node.unnest()
    return isinstance(node, (exp.Concat, exp.ConcatWs, exp.DPipe))


def _pieces(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, (exp.Concat, exp.ConcatWs)):
        return [p for e in node.expressions for p in _pieces(e)]
    if isinstance(node, exp.DPipe):
        return _pieces(node.this) + _pieces(node.expression)
    return [node]


def sql_slot(node: exp.Expression) -> tuple[exp.Column, str] | None:
    """The column of a template slot in SQL and the text function around it (casts, the IRI-safe REPLACE
    chain, the timestamp's ``' '`` → ``'T'``) as a signature (``"R'%'"`` in it: encoded), or None."""
    wrappers: list[str] = []
    while True:
        if isinstance(node, exp.Column):
            return node, "(".join(wrappers)
        if isinstance(node, _TRANSPARENT):
            wrappers.append(type(node).__name__ + (node.to.sql() if isinstance(node, exp.Cast) else ""))
            node = node.this
            continue
        if (isinstance(node, exp.Replace) and isinstance(node.expression, exp.Literal)
                and isinstance(node.args.get("replacement"), exp.Literal)):
            wrappers.append(f"R{node.expression.this!r}{node.args['replacement'].this!r}")
            node = node.this
            continue
        return None


def sql_template_parts(node: exp.Expression, column: Callable[[exp.Column], object]) -> list | None:
    """``node`` (a term in SQL) as ``('text', str)`` and ``('slot', (column(col), text function))`` parts,
    adjacent texts merged; None when a piece is neither a string constant nor a (wrapped) column."""
    out: list = []
    for piece in _pieces(node):
        if isinstance(piece, exp.Literal) and piece.is_string:
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + piece.this)
            elif piece.this:
                out.append(("text", piece.this))
            continue
        slot = sql_slot(piece)
        if slot is None:
            return None
        col, fn = slot
        out.append(("slot", (column(col), fn)))
    return out


def determined_columns(node: exp.Expression, column: Callable[[exp.Column], object],
                       type_of: Callable[[object], ColumnType | None]) -> list:
    """The columns (as ``column`` gives them) whose value every value of the SQL term ``node`` determines:
    the column itself, or the template parts :func:`determined_parts` names."""
    node = node.unnest()
    if not is_template(node):
        slot = sql_slot(node)
        return [] if slot is None else [column(slot[0])]
    parts = sql_template_parts(node, column)
    if parts is None:
        return []
    shaped = [v if k == "text" else (type_of(v[0]), "R'%'" in v[1]) for k, v in parts]
    return [parts[i][1][0] for i in sorted(determined_parts(shaped))]
