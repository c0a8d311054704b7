"""Comparing RDF terms as SQL: ``v1 op v2`` of two :class:`~obda.mapping._unfold_terms.TermValue` objects.

Private helper of :mod:`obda.mapping.unfold`.  Two IRIs of templates decompose into column equalities where the
templates' parts align (their fixed text stripped from both ends, a slot's value matched against the other's
text); literals compare as values of their kind (numbers, strings, booleans, timestamps); a comparison that can
never hold raises :class:`~obda.mapping._unfold_terms.Unsat`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from sqlglot import exp

from obda.mapping._unfold_ir import Cmp, Const, Expr, NotAll
from obda.mapping._unfold_read import const, parse_datetime
from obda.mapping._unfold_terms import (
    RDF_LANGSTRING,
    Part,
    Slot,
    TermValue,
    Unsat,
    Val,
    category,
    concat_sql,
    held_as_text,
    literal_sql,
    may_contain,
    number_sql,
    slot_text_sql,
    string_sql,
    text_sql,
    timestamp_sql,
)
from obda.mapping._unfold_text import UNRESERVED
from obda.mapping.template_text import iso_text
from obda.model.mapping import TermType
from obda.model.query import XSD
from obda.model.sources import ColumnType


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
    return [_cmp("=", slot_text_sql(Slot(slot.val, False)), string_sql(decoded))]


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
    held_as_text(a, label)
    held_as_text(b, label)
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
