"""RDF terms produced by term maps, as SQL: values, IRI templates, literals.

Private helper of :mod:`obda.mapping.unfold`.  A :class:`TermValue` is what a
query variable is bound to after unfolding one atom: a constant RDF term, a
column, or an R2RML template whose column parts are SQL expressions of the
member's FROM aliases (light expressions of :mod:`obda.mapping._unfold_ir`;
conditions are built as such too, and become sqlglot trees only in the SQL
of a surviving member).  :func:`compare` turns ``v1 op v2`` into SQL conditions
(IRI templates decompose into column equalities), or reports that the
comparison can never hold (:class:`Unsat`).

IRI-safe encoding (R2RML §7.3): a template column value is percent-encoded
before it is put into an IRI.  Integer, decimal, double and boolean values
only contain characters that need no encoding, so they are cast as they are.
For string and timestamp columns the projection applies a nested ``REPLACE``
chain that percent-encodes ``%`` and every printable ASCII character outside
``ALPHA / DIGIT / - . _ ~`` (see ``_unfold_ir.ENCODED_CHARS``).  Control characters
and non-ASCII characters outside RFC 3987 ``iunreserved`` are not encoded
(documented limitation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Union
from urllib.parse import unquote

from sqlglot import exp

from obda.mapping._unfold_ir import (
    UNRESERVED,
    Cast,
    Cmp,
    Col,
    Concat,
    Const,
    Encode,
    Expr,
    IsoText,
    NotAll,
    Shift,
    const,
    from_sqlglot,
    parse_datetime,
)
from obda.mapping.template_text import alphabet, can_contain, iso_text
from obda.model.mapping import TermType
from obda.model.query import XSD
from obda.model.sources import ColumnType
from obda.model.terms import NUMERIC

RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

_HEX = frozenset("0123456789ABCDEFabcdef")


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


def _string(text: str) -> Const:
    return Const(exp.Literal.string(text), ("s", text))


def concat_sql(tv: TermValue) -> Expr:
    """The term as one SQL string: ``CONCAT('fixed', CAST(col AS VARCHAR), ...)``."""
    parts: list[Part] = list(tv.parts)
    if tv.term_type is TermType.BLANK_NODE:
        parts = ["_:"] + parts
    parts = list(make_parts(parts))
    items = [_string(p) if isinstance(p, str) else slot_text_sql(p) for p in parts]
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
                return _string(tv.text)
        return concat_sql(tv)
    if tv.is_constant:
        return _string(("_:" if tv.term_type is TermType.BLANK_NODE else "") + tv.text)
    if len(tv.parts) == 1 and tv.term_type is TermType.IRI:
        slot = tv.parts[0]
        assert isinstance(slot, Slot)
        return slot_text_sql(slot)
    return concat_sql(tv)


# ----------------------------------------------------------------------------- comparisons


def _cmp(op: str, left: Expr, right: Expr) -> Expr:
    return Cmp(op, left, right)


def _const_for_column(value_text: str, val: Val, what: str) -> Expr:
    return const(_sqlglot_const_for_column(value_text, val, what))


def _sqlglot_const_for_column(value_text: str, val: Val, what: str) -> exp.Expression:
    """The SQL constant a column must equal so that its text is ``value_text`` (a decoded slot)."""
    t = val.type
    if t is ColumnType.INTEGER:
        if not re.fullmatch(r"-?(0|[1-9][0-9]*)", value_text) or value_text == "-0":
            raise Unsat(f"{what}: {value_text!r} is not the text of an integer column value")
        return exp.Literal.number(int(value_text))
    if t in (ColumnType.DECIMAL, ColumnType.DOUBLE):
        return number_sql(value_text)
    if t is ColumnType.BOOLEAN:
        if value_text not in ("true", "false"):
            raise Unsat(f"{what}: {value_text!r} is not the text of a boolean column value")
        return exp.Boolean(this=value_text == "true")
    if t is ColumnType.TIMESTAMP:
        try:
            d = parse_datetime(value_text)
        except ValueError:
            raise Unsat(f"{what}: {value_text!r} is not the text of a timestamp value") from None
        if iso_text(d) != value_text:  # the column's text is canonical: 10:00:00.50 or 10:00 never occur
            raise Unsat(f"{what}: {value_text!r} is not the canonical xsd:dateTime text of a timestamp")
        return timestamp_sql(d)
    return exp.Literal.string(value_text)


def _slot_equal(a: Slot, b: Slot) -> Expr:
    """``text(a) = text(b)`` for two slots at the same position of equal templates."""
    ta, tb = a.val.type, b.val.type
    if ta == tb or (ta is not None and tb is not None and ta.is_numeric and tb.is_numeric):
        return _cmp("=", a.val.expr, b.val.expr)
    return _cmp("=", text_sql(a.val), text_sql(b.val))


def _strip_common(a: list[Part], b: list[Part], label: str) -> None:
    """Remove the common leading / trailing text of two part lists; Unsat on a mismatch."""
    for rev in (False, True):
        while a and b:
            i = -1 if rev else 0
            pa, pb = a[i], b[i]
            if isinstance(pa, str) and isinstance(pb, str):
                n = min(len(pa), len(pb))
                xa, xb = (pa[-n:], pb[-n:]) if rev else (pa[:n], pb[:n])
                if xa != xb:
                    raise Unsat(label)
                ra, rb = (pa[:-n], pb[:-n]) if rev else (pa[n:], pb[n:])
                for lst, rest in ((a, ra), (b, rb)):
                    if rest:
                        lst[i] = rest
                    else:
                        lst.pop(i)
                continue
            # a slot against text: the slot must be able to produce the text's first (last) char
            if isinstance(pa, Slot) and isinstance(pb, str) and not may_contain(pa, pb[i]):
                raise Unsat(label)
            if isinstance(pb, Slot) and isinstance(pa, str) and not may_contain(pb, pa[i]):
                raise Unsat(label)
            break
    # one side a single slot: it cannot produce text characters it cannot contain
    for x, y in ((a, b), (b, a)):
        if len(x) == 1 and isinstance(x[0], Slot):
            for p in y:
                if isinstance(p, str) and any(not may_contain(x[0], ch) for ch in p):
                    raise Unsat(label)
    if (not a) != (not b):
        rest = a or b
        if any(isinstance(p, str) for p in rest):
            raise Unsat(label)


def _slot_const(slot: Slot, raw: str, label: str) -> list[Expr]:
    """Conditions for ``text(slot) = raw`` (``raw`` as it appears in the term, i.e. encoded if the slot is)."""
    if any(not may_contain(slot, ch) for ch in raw):
        raise Unsat(label)
    if slot.encoded and slot.val.type in (ColumnType.STRING, ColumnType.TIMESTAMP, None):
        if re.search(r"%(?![0-9A-F]{2})", raw):
            raise Unsat(label)
        decoded = unquote(raw, errors="strict") if "%" in raw else raw
        # the encoding is canonical: re-encoding must give the same text
        if "".join(c if (c in UNRESERVED or ord(c) > 127) else "%%%02X" % ord(c) for c in decoded) != raw:
            raise Unsat(label)
    else:
        decoded = raw
    if slot.val.is_column:
        return [_cmp("=", slot.val.expr, _const_for_column(decoded, slot.val, label))]
    value = slot.val.expr.value if isinstance(slot.val.expr, Const) else None
    if value is not None and str(value[1]) == decoded:
        return []
    return [_cmp("=", slot_text_sql(Slot(slot.val, False)), _string(decoded))]


def _align(pa: list[Part], pb: list[Part], label: str, rev: bool = False) -> list[Expr]:
    """Match two part lists left to right as far as the parse is unique; consumes what it matched.

    Text against text must agree; two slots followed by the same delimiter that
    neither can contain (or both last) are equal; a slot against fixed text takes
    the text up to its delimiter.  Stops (leaving the rest) where that is not
    decidable part by part.  ``rev``: the lists are reversed (parts in reverse
    order, each text reversed): :func:`_align_right` matches from the end.
    """

    def fwd(text: str) -> str:
        return text[::-1] if rev else text

    conds: list[Expr] = []
    while pa and pb:
        x, y = pa[0], pb[0]
        if isinstance(x, str) and isinstance(y, str):
            n = min(len(x), len(y))
            if x[:n] != y[:n]:
                raise Unsat(label)
            for lst, rest in ((pa, x[n:]), (pb, y[n:])):
                if rest:
                    lst[0] = rest
                else:
                    lst.pop(0)
            continue
        if isinstance(x, Slot) and isinstance(y, Slot):
            nx = pa[1] if len(pa) > 1 else None
            ny = pb[1] if len(pb) > 1 else None
            if x.encoded != y.encoded:
                break
            both_last = nx is None and ny is None
            same_delim = (
                isinstance(nx, str) and isinstance(ny, str) and nx[0] == ny[0]
                and not may_contain(x, nx[0]) and not may_contain(y, nx[0])
            )
            if not (both_last or same_delim):
                break
            conds.append(_slot_equal(x, y))
            pa.pop(0)
            pb.pop(0)
            continue
        slot_list, text_list = (pa, pb) if isinstance(x, Slot) else (pb, pa)
        slot, text = slot_list[0], text_list[0]
        assert isinstance(slot, Slot) and isinstance(text, str)
        if not may_contain(slot, text[0]):
            raise Unsat(label)
        nxt = slot_list[1] if len(slot_list) > 1 else None
        if nxt is None:
            if all(isinstance(p, str) for p in text_list):
                conds += _slot_const(slot, fwd("".join(text_list)), label)  # type: ignore[arg-type]
                slot_list.clear()
                text_list.clear()
                continue
            break
        if isinstance(nxt, str) and not may_contain(slot, nxt[0]):
            idx = text.find(nxt[0])
            if idx < 0:
                if len(text_list) == 1:
                    raise Unsat(label)
                break
            conds += _slot_const(slot, fwd(text[:idx]), label)
            slot_list.pop(0)
            text_list[0] = text[idx:]
            continue
        break
    return conds


def _align_right(pa: list[Part], pb: list[Part], label: str) -> list[Expr]:
    """:func:`_align` from the end: two slots *preceded* by the same text character that neither can contain
    are equal (``{code}_{n}`` with a string ``code`` and an integer ``n``: ``n`` is the text after the last
    ``_``), a slot against fixed text takes the text after its delimiter.  Consumes what it matched."""

    def flip(parts: list[Part]) -> list[Part]:
        return [p[::-1] if isinstance(p, str) else p for p in reversed(parts)]

    ra, rb = flip(pa), flip(pb)
    conds = _align(ra, rb, label, rev=True)
    pa[:], pb[:] = flip(ra), flip(rb)
    return conds


def _describe(tv: TermValue) -> str:
    if tv.label:
        return tv.label
    return "".join(p if isinstance(p, str) else "{" + p.val.key() + "}" for p in tv.parts)


def term_kind(tv: TermValue) -> tuple[str, str | None]:
    """What a term is — ``iri``, ``bnode`` or ``literal`` — and a literal's type: its datatype (a simple literal's
    is xsd:string) or ``@tag``, as the term map fixes them."""
    if tv.term_type is TermType.BLANK_NODE:
        return "bnode", None
    if tv.term_type is not TermType.LITERAL:
        return "iri", None
    return "literal", ("@" + (tv.language or "") if tv.language or tv.datatype == RDF_LANGSTRING
                       else (tv.datatype or XSD + "string"))


def same_kind(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Whether two term kinds (:func:`term_kind`) are one (tags compared without case): sameTerm can then hold."""
    return a[0] == b[0] and (a[1] or "").lower() == (b[1] or "").lower()


def equal_terms(a: TermValue, b: TermValue) -> list[Expr]:
    """Conditions under which two RDF terms are the same term; raises Unsat if never."""
    label = f"{_describe(a)} can never equal {_describe(b)}"
    if a.term_type is not b.term_type:
        raise Unsat(f"{label} ({a.term_type.value} vs {b.term_type.value})")
    if a.term_type is TermType.LITERAL:  # the same term: the same datatype (or tag), then the same value
        if not same_kind(term_kind(a), term_kind(b)):
            raise Unsat(f"{label} (another datatype or language tag: {term_kind(a)[1]} vs {term_kind(b)[1]})")
        return compare_literals("=", a, b)
    pa, pb = list(a.parts), list(b.parts)
    if a.is_constant and b.is_constant:
        if a.text != b.text:
            raise Unsat(label)
        return []
    conds = _align(pa, pb, label)
    if pa or pb:
        conds += _align_right(pa, pb, label)
    if not pa and not pb:
        return conds
    _strip_common(pa, pb, label)
    if not pa and not pb:
        return conds
    # could match, but not part by part: compare the concatenated strings of the rest
    return conds + [_cmp("=", concat_sql(TermValue(a.term_type, tuple(pa))), concat_sql(TermValue(b.term_type, tuple(pb))))]


def _literal_side(tv: TermValue, other: TermValue, label: str) -> Expr:
    """SQL for one side of a literal comparison."""
    if tv.native:
        return tv.parts[0].val.expr  # type: ignore[union-attr]
    if tv.is_constant:
        col_type = other.parts[0].val.type if other.native else None  # type: ignore[union-attr]
        try:
            return const(literal_sql(tv.text, tv.datatype, col_type))
        except Unsat as e:
            raise Unsat(f"{label}: {e}") from None
    return concat_sql(tv)


def compare_literals(op: str, a: TermValue, b: TermValue) -> list[Expr]:
    """Conditions for ``a op b`` over two literals; Unsat if the types never compare."""
    label = f"{_describe(a)} {op} {_describe(b)}"
    ca, cb = category(a.datatype), category(b.datatype)
    if ca != cb and not ({ca, cb} <= {"datetime", "date"}):
        if op == "!=":
            return []
        raise Unsat(f"{label}: incompatible types {a.datatype or 'xsd:string'} and {b.datatype or 'xsd:string'}")
    if (a.language or "").lower() != (b.language or "").lower():
        if op == "!=":
            return []
        raise Unsat(f"{label}: different language tags")
    if op not in ("=", "!=") and ca not in ("numeric", "string", "boolean", "datetime", "date"):
        raise Unsat(f"{label}: values of datatype {a.datatype} are not ordered")
    left = _literal_side(a, b, label)
    right = _literal_side(b, a, label)
    return [_cmp(op, left, right)]


def compare_terms(op: str, a: TermValue, b: TermValue) -> list[Expr]:
    """Conditions for the SPARQL comparison ``a op b``; Unsat if it never holds.

    IRIs and blank nodes support ``=`` and ``!=`` only (an ordering comparison is a
    SPARQL type error, i.e. false).  ``!=`` is the negation of the decomposed equality.
    """
    if a.term_type is TermType.LITERAL and b.term_type is TermType.LITERAL:
        return compare_literals(op, a, b)
    if op == "=":
        return equal_terms(a, b)
    if op == "!=":
        try:
            conds = equal_terms(a, b)
        except Unsat:
            return []
        if not conds:
            raise Unsat(f"{_describe(a)} != {_describe(b)}: the terms are always equal")
        if len(conds) == 1 and isinstance(conds[0], Cmp) and conds[0].op == "=":
            return [Cmp("!=", conds[0].left, conds[0].right)]
        return [NotAll(tuple(conds))]
    raise Unsat(f"{_describe(a)} {op} {_describe(b)}: IRIs and blank nodes cannot be ordered")
