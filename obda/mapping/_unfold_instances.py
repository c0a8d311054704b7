"""Assertions instantiated: a mapping assertion at given FROM aliases, with the RDF terms its term maps produce.

Private helper of :mod:`obda.mapping.unfold`.  A term map on a table instance is a
:class:`~obda.mapping._unfold_terms.TermValue` (a constant, a column, or an IRI / literal template of columns;
the columns it reads are recorded, for ``IS NOT NULL``); an assertion instantiated at alias number ``first``
(:func:`_instantiate`) is its FROM entries, join and timestamp conditions and subject / object / timestamp
terms.  Candidate members share most of their atoms, so one ``unfold`` call computes each instantiation, term
equality and constant term once (:class:`_Memo`).
"""

from __future__ import annotations

from dataclasses import dataclass

from obda.mapping._unfold_assertions import Assertion
from obda.mapping._unfold_compare import equal_terms
from obda.mapping._unfold_ir import Expr
from obda.mapping._unfold_optimize import make_cmp
from obda.mapping._unfold_tables import FromEntry, TableInstance
from obda.mapping._unfold_terms import NATURAL_DATATYPE, RDF_LANGSTRING, Slot, TermValue, Unsat, Val, make_parts
from obda.model.mapping import TermMap, TermMapKind, TermType, TriplesMap
from obda.model.query import IRI, XSD, Literal, Term


def _is_absolute(text: str) -> bool:
    import re

    return re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text) is not None


_TEMPLATES: dict[str, tuple] = {}


def _template_parts(tm: TermMap) -> tuple:
    """``tm.template``, parsed once per template string (the model parses on every access)."""
    parts = _TEMPLATES.get(tm.value)
    if parts is None:
        parts = _TEMPLATES[tm.value] = tm.template
    return parts


def _term_value(tm: TermMap, inst: TableInstance, triples_map: TriplesMap, used: list[Val]) -> TermValue:
    """The RDF term a term map produces on a table instance (columns it reads are recorded in ``used``)."""
    label = f"{tm.kind.value} {tm.value!r} of {triples_map.name}"
    if tm.kind is TermMapKind.CONSTANT:
        return TermValue(tm.term_type, make_parts([tm.value]), tm.datatype, tm.language, label=label)
    if tm.kind is TermMapKind.COLUMN:
        val = inst.column(tm.value, tm, "rr:column")
        used.append(val)
        if tm.term_type is TermType.LITERAL:
            dt = tm.datatype or (RDF_LANGSTRING if tm.language else NATURAL_DATATYPE.get(val.type))
            return TermValue(TermType.LITERAL, (Slot(val, False),), dt, tm.language, native=True, label=label)
        return TermValue(tm.term_type, (Slot(val, False),), label=label)
    parts: list = []
    encode = tm.term_type is TermType.IRI
    for p in _template_parts(tm):
        if p.is_column:
            val = inst.column(p.text, tm, "template column")
            used.append(val)
            parts.append(Slot(val, encode))
        else:
            parts.append(p.text)
    if encode and triples_map.base_iri and not (parts and isinstance(parts[0], str) and _is_absolute(parts[0])):
        parts.insert(0, triples_map.base_iri)
    if tm.term_type is TermType.LITERAL:
        dt = tm.datatype or (RDF_LANGSTRING if tm.language else XSD + "string")
        return TermValue(TermType.LITERAL, make_parts(parts), dt, tm.language, label=label)
    return TermValue(tm.term_type, make_parts(parts), label=label)


def _constant_value(t: Term) -> TermValue:
    if isinstance(t, IRI):
        return TermValue(TermType.IRI, make_parts([t.value]), label=str(t))
    assert isinstance(t, Literal)
    dt = RDF_LANGSTRING if t.language else t.datatype
    return TermValue(TermType.LITERAL, make_parts([t.lexical]) or ("",), dt, t.language, label=str(t))


@dataclass(frozen=True)
class _Unfolded:
    """An assertion instantiated at given aliases: what it adds to a member before any variable is bound."""

    entries: tuple[FromEntry, ...]
    conds: tuple[Expr, ...]  # inlined conditions, join conditions, timestamp equality
    used: tuple[Val, ...]  # columns read by the term maps
    exempt: frozenset[str]
    aliases: tuple[str, ...]
    subj: TermValue
    obj: TermValue | None
    ts: Val | None


class _Memo:
    """Caches of one ``unfold`` call: instantiated assertions, term equalities, constant terms.

    Candidate members share most of their atoms (a product of per-atom options),
    so an assertion instantiated at the same first alias number, and the
    equality of the same two (shared, immutable) terms, are computed once.
    Results are keyed by object identity; the keys' objects are kept alive in
    the values so that an identity is never reused while cached.
    """

    def __init__(self) -> None:
        self.unfolded: dict[tuple[int, int], tuple[Assertion, _Unfolded]] = {}
        self.equal: dict[tuple[int, int], tuple[TermValue, TermValue, tuple | str]] = {}
        self.constants: dict[Term, TermValue] = {}

    def constant(self, t: Term) -> TermValue:
        tv = self.constants.get(t)
        if tv is None:
            tv = self.constants[t] = _constant_value(t)
        return tv

    def equal_terms(self, a: TermValue, b: TermValue) -> tuple:
        key = (id(a), id(b))
        hit = self.equal.get(key)
        if hit is None or hit[0] is not a or hit[1] is not b:
            try:
                res: tuple | str = tuple(equal_terms(a, b))
            except Unsat as e:
                res = str(e)
            hit = self.equal[key] = (a, b, res)
        if isinstance(hit[2], str):
            raise Unsat(hit[2])
        return hit[2]

    def unfold_assertion(self, a: Assertion, first: int) -> _Unfolded:
        key = (id(a), first)
        hit = self.unfolded.get(key)
        if hit is None or hit[0] is not a:
            hit = self.unfolded[key] = (a, _instantiate(a, first))
        return hit[1]


def _instantiate(a: Assertion, first: int) -> _Unfolded:
    """The FROM entries, conditions and terms of assertion ``a`` with aliases ``m<first+1>, m<first+2>, ...``."""
    counter = [first]

    def fresh() -> str:
        counter[0] += 1
        return f"m{counter[0]}"

    used: list[Val] = []
    conds: list[Expr] = []
    child = a.child.instantiate(fresh)
    entries = list(child.entries)
    conds += child.conditions
    exempt = set(child.not_null_exempt)
    aliases = list(child.aliases)
    tm = a.triples_map
    subj = _term_value(a.subject, child, tm, used)
    obj = None
    ts = child.timestamp
    if a.obj is not None:
        if a.parent is not None and not a.same_row:
            parent = a.parent_shape.instantiate(fresh)
            entries += parent.entries
            conds += parent.conditions
            exempt |= parent.not_null_exempt
            aliases += parent.aliases
            for jc in a.joins:
                cv = child.column(jc.child, None, "rr:child")
                pv = parent.column(jc.parent, None, "rr:parent")
                conds.append(make_cmp("=", cv.expr, pv.expr))
            obj = _term_value(a.obj, parent, a.parent, used)
            if ts is None:
                ts = parent.timestamp
            elif parent.timestamp is not None:
                conds.append(make_cmp("=", ts.expr, parent.timestamp.expr))
        elif a.parent is not None:
            obj = _term_value(a.obj, child, a.parent, used)
        else:
            obj = _term_value(a.obj, child, tm, used)
    return _Unfolded(tuple(entries), tuple(conds), tuple(used), frozenset(exempt), tuple(aliases), subj, obj, ts)
