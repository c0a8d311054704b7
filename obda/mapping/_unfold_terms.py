"""RDF terms produced by term maps, as SQL: values, IRI templates, literals.

Private helper of :mod:`obda.mapping.unfold`.  A :class:`TermValue` is what a
query variable is bound to after unfolding one atom: a constant RDF term, a
column, or an R2RML template whose column parts are SQL expressions of the
member's FROM aliases (light expressions of :mod:`obda.mapping._unfold_ir`;
conditions are built as such too, and become sqlglot trees only in the SQL
of a surviving member).  Comparing two terms (``v1 op v2`` as SQL conditions: IRI
templates decompose into column equalities, or :class:`Unsat` when the comparison can
never hold) is :mod:`obda.mapping._unfold_compare`.

IRI-safe encoding (R2RML §7.3): a template column value is percent-encoded
before it is put into an IRI.  Integer, decimal, double and boolean values
only contain characters that need no encoding, so they are cast as they are.
For string and timestamp columns the projection applies a nested ``REPLACE``
chain that percent-encodes ``%`` and every printable ASCII character outside
``ALPHA / DIGIT / - . _ ~`` (see ``_unfold_text.ENCODED_CHARS``).  Control characters
and non-ASCII characters outside RFC 3987 ``iunreserved`` are not encoded
(documented limitation).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Union

from sqlglot import exp

from obda.errors import UnsupportedConstructError
from obda.mapping._unfold_ir import Col, Const, Expr, Shift
from obda.mapping._unfold_read import const, from_sqlglot, parse_datetime
from obda.mapping._unfold_text import Cast, Concat, Encode, IsoText
from obda.mapping.template_text import alphabet, can_contain
from obda.model.mapping import TermType
from obda.model.query import XSD, short_iri
from obda.model.sources import ColumnType
from obda.model.terms import NUMERIC

RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

class Unsat(Exception):
    """A comparison or binding that no row can satisfy; the message says why."""


@dataclass(frozen=True)
class Val:
    """An SQL scalar of one member: a qualified column or a constant, with its type.

    ``expr`` is a light expression (:mod:`obda.mapping._unfold_ir`); a sqlglot
    column or constant is converted on construction.
    """

    expr: Expr
    type: ColumnType | None = None

    def __post_init__(self) -> None:
        if isinstance(self.expr, exp.Expression):
            object.__setattr__(self, "expr", from_sqlglot(self.expr))

    @property
    def is_column(self) -> bool:
        return isinstance(self.expr, Col)

    def key(self) -> str:
        return self.expr.sql()


@dataclass(frozen=True)
class Slot:
    """A column part of an IRI/literal: ``encoded`` is True for IRI template columns."""

    val: Val
    encoded: bool


Part = Union[str, Slot]


@dataclass(frozen=True)
class TermValue:
    """An RDF term as SQL.

    ``parts`` is a sequence of fixed text and column slots whose concatenation is
    the IRI / blank node label / literal lexical form.  A constant has only text
    parts; an ``rr:column`` term one slot; a template any mix.  ``native`` marks a
    literal whose single slot is the typed column itself (compared as a value,
    projected as-is).  ``datatype`` / ``language`` describe literals.
    """

    term_type: TermType
    parts: tuple[Part, ...]
    datatype: str | None = None
    language: str | None = None
    native: bool = False
    label: str = ""  # for messages: the term map or constant it came from

    @property
    def is_constant(self) -> bool:
        return all(isinstance(p, str) for p in self.parts)

    @property
    def text(self) -> str:
        """The lexical form of a constant."""
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def slots(self) -> tuple[Slot, ...]:
        return tuple(p for p in self.parts if isinstance(p, Slot))


def make_parts(parts: list[Part]) -> tuple[Part, ...]:
    """Merge adjacent text parts and drop empty ones."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + p
                continue
        out.append(p)
    return tuple(out)


# ----------------------------------------------------------------------------- datatypes



def held_as_text(tv: "TermValue", label: str) -> None:
    """Refuse a number, truth value or time that is held as text: a literal of such a datatype read from a string
    column (``rr:column "code"; rr:datatype xsd:integer``) or built by a template. Compared or computed with as
    text, ``9 > 50`` would hold and ``"9" + 1`` would fail."""
    if category(tv.datatype) in ("numeric", "boolean", "datetime") and not tv.is_constant and (
            not tv.native or tv.parts[0].val.type is ColumnType.STRING):  # type: ignore[union-attr]
        raise UnsupportedConstructError(
            "literal of a string column", f"{label}: {tv.label or 'the value'} is an {short_iri(tv.datatype)} literal "
            "held as text (a string column, or a template), and obda compares and computes with such values only "
            "from a column of that type (as text, 9 > 50 would hold); declare the column integer, decimal, double, "
            "boolean or timestamp in the sources file")


def category(datatype: str | None) -> str:
    """Comparison category of a literal datatype: numeric, string, boolean, datetime, or the IRI itself."""
    if datatype is None or datatype in (XSD + "string", RDF_LANGSTRING):
        return "string"
    if datatype.startswith(XSD):
        local = datatype[len(XSD):]
        if datatype in NUMERIC:
            return "numeric"
        if local == "boolean":
            return "boolean"
        if local in ("dateTime", "dateTimeStamp"):
            return "datetime"
        if local == "date":
            return "date"
    return datatype


NATURAL_DATATYPE = {
    ColumnType.INTEGER: XSD + "integer",
    ColumnType.DECIMAL: XSD + "decimal",
    ColumnType.DOUBLE: XSD + "double",
    ColumnType.STRING: XSD + "string",
    ColumnType.BOOLEAN: XSD + "boolean",
    ColumnType.TIMESTAMP: XSD + "dateTime",
}


def slot_alphabet(slot: Slot) -> frozenset[str] | None:
    """Characters a slot's text may contain; None: any character (:func:`obda.mapping.template_text.alphabet`)."""
    return alphabet(slot.val.type, slot.encoded)


def may_contain(slot: Slot, ch: str) -> bool:
    """Can the text of ``slot`` contain character ``ch``?"""
    return can_contain(slot.val.type, slot.encoded, ch)


# ----------------------------------------------------------------------------- constants as SQL


def timestamp_sql(dt: datetime) -> exp.Expression:
    text = dt.isoformat(sep=" ")
    return exp.cast(exp.Literal.string(text), exp.DataType.build("TIMESTAMP"))


def number_sql(lexical: str) -> exp.Expression:
    """A numeric literal; raises Unsat for an invalid lexical form."""
    try:
        d = Decimal(lexical.strip())
    except InvalidOperation:
        raise Unsat(f"{lexical!r} is not a valid number") from None
    if not d.is_finite():
        raise Unsat(f"{lexical!r} is not a finite number")
    if d == d.to_integral_value() and "." not in lexical and "e" not in lexical.lower():
        return exp.Literal.number(int(d))
    return exp.Literal.number(str(d))


def boolean_value(lexical: str) -> bool:
    low = lexical.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise Unsat(f"{lexical!r} is not a valid xsd:boolean")


def literal_sql(lexical: str, datatype: str | None, column_type: ColumnType | None = None) -> exp.Expression:
    """The SQL constant for a literal, shaped for comparison with a column of ``column_type``."""
    cat = category(datatype)
    if column_type is ColumnType.STRING or (column_type is None and cat not in ("numeric", "boolean", "datetime", "date")):
        return exp.Literal.string(lexical)
    if cat == "numeric" or (column_type is not None and column_type.is_numeric):
        return number_sql(lexical)
    if cat == "boolean" or column_type is ColumnType.BOOLEAN:
        return exp.Boolean(this=boolean_value(lexical))
    if cat in ("datetime", "date") or column_type is ColumnType.TIMESTAMP:
        try:
            return timestamp_sql(parse_datetime(lexical))
        except ValueError:
            raise Unsat(f"{lexical!r} is not a valid xsd:dateTime") from None
    return exp.Literal.string(lexical)


# ----------------------------------------------------------------------------- SQL for terms


def text_sql(val: Val) -> Expr:
    """SQL for the text of a value: a string as it is, a timestamp in its ``xsd:dateTime`` form, others cast."""
    if val.type is ColumnType.STRING:
        return val.expr
    return IsoText(val.expr) if val.type is ColumnType.TIMESTAMP else Cast(val.expr)


def slot_text_sql(slot: Slot) -> Expr:
    """SQL for the text a slot contributes: a string cast, encoded when needed."""
    e = text_sql(slot.val)
    if slot.encoded and slot.val.type in (ColumnType.STRING, ColumnType.TIMESTAMP, None):
        e = Encode(e)
    return e


def string_sql(text: str) -> Const:
    return Const(exp.Literal.string(text), ("s", text))


def concat_sql(tv: TermValue) -> Expr:
    """The term as one SQL string: ``CONCAT('fixed', CAST(col AS VARCHAR), ...)``."""
    parts: list[Part] = list(tv.parts)
    if tv.term_type is TermType.BLANK_NODE:
        parts = ["_:"] + parts
    parts = list(make_parts(parts))
    items = [string_sql(p) if isinstance(p, str) else slot_text_sql(p) for p in parts]
    if len(items) == 1:
        return items[0]
    return Concat(tuple(items))


def time_sql(tv: TermValue, micros: int | None = None) -> Expr:
    """The timestamp column a time variable is bound to (its atom's), moved by ``micros`` when given: one side of
    an interval join's or a check window's comparison."""
    col = tv.parts[0].val.expr  # type: ignore[union-attr]
    return col if micros is None else Shift(col, micros)


def projection_sql(tv: TermValue) -> Expr:
    """What a member projects for a variable bound to ``tv``."""
    if tv.term_type is TermType.LITERAL:
        if tv.native:
            return tv.parts[0].val.expr  # type: ignore[union-attr]
        if tv.is_constant:
            try:
                return const(literal_sql(tv.text, tv.datatype))
            except Unsat:
                return string_sql(tv.text)
        return concat_sql(tv)
    if tv.is_constant:
        return string_sql(("_:" if tv.term_type is TermType.BLANK_NODE else "") + tv.text)
    if len(tv.parts) == 1 and tv.term_type is TermType.IRI:
        slot = tv.parts[0]
        assert isinstance(slot, Slot)
        return slot_text_sql(slot)
    return concat_sql(tv)
