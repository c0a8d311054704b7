"""Unfolding: rewritten ontology queries → SQL through R2RML mappings.

:func:`unfold` turns each rewritten CQ into SPJ members
``SELECT <items> FROM t1 AS m1, ... WHERE <conjunction>`` (one per choice of
an atom alternative — from the class / property hierarchy, T-mapping style —
and a matching mapping assertion for every atom), simplifies them, removes
unsatisfiable and duplicate members, and unions them (docs/semantics.md,
"SQL shape" and "Multiplicity").

Decisions worth knowing:

* Variables are bound by the first term map that produces them; every other
  occurrence becomes an equality.  IRI equalities decompose into column
  equalities part by part when both templates have the same shape and parse
  back uniquely (:mod:`obda.mapping._unfold_terms`); a constant IRI is parsed
  against the template; templates that cannot match make the member
  unsatisfiable; templates that may match but not part by part are compared as
  concatenated strings.
* Type mismatches (an ``xsd:integer`` literal against a string-valued term, an
  IRI against a literal, ``<`` on IRIs) are SPARQL type errors or never-equal
  RDF terms: the member is unsatisfiable and removed, with the reason in
  ``removed``.  ``!=`` between incomparable terms is true.
* R2RML generates no triple when a referenced column is NULL, so every column a
  used term map reads gets ``c IS NOT NULL`` unless a comparison in the member
  already rejects NULL, or the column is a declared key column or a stream
  timestamp (assumed non-null).
* Literal answer values are the typed columns themselves; IRIs are
  ``CONCAT(...)`` of fixed text and cast columns (string and timestamp columns
  percent-encoded with a ``REPLACE`` chain); blank nodes are prefixed ``_:``.
  A projected variable a branch does not bind (SPARQL UNION) is ``NULL``; a
  rewritten CQ that lost an answer variable its branch binds is a
  :class:`RewritingError` (a rewriter bug, never silently NULL).
* No members: ``SELECT CAST(NULL AS VARCHAR) AS v, ... WHERE 1 = 0``.
* Speed (NPD query 28: ~2450 candidate members): candidates are built from the
  light expressions of :mod:`obda.mapping._unfold_ir` (simplified, renamed and
  compared by text without sqlglot); an assertion instantiated at a given
  alias number and the equality of two shared terms are computed once per call
  (:class:`_Memo`); sqlglot trees are built only for surviving members, node by
  node; the cyclic garbage collector is paused meanwhile (:func:`_gc_paused`).
"""

from __future__ import annotations

import gc
from collections import Counter
from contextlib import contextmanager
from itertools import combinations
from dataclasses import dataclass, field, replace
from typing import Callable, NamedTuple, Sequence

from sqlglot import exp

from obda.errors import BudgetError, MappingError, RewritingError, UnsupportedConstructError
from obda.mapping._unfold_assertions import Assertion, AssertionIndex
from obda.mapping._unfold_ir import Arith, Cmp, Col, Expr, NotNull, Raw, Seq, Shift, const
from obda.mapping._unfold_optimize import (
    canonical_key,
    eliminate_self_joins,
    make_cmp,
    rename_aliases,
    simplify,
    split_cmp,
)
from obda.mapping._unfold_tables import FromEntry, TableInstance
from obda.mapping._unfold_views import (
    PLACEHOLDER,
    TS,
    AtomView,
    Branch,
    ViewUse,
    branch_items,
    build_view,
    coarse_shape,
    column_layout,
    contained,
    duplicate_free,
    fine_shape,
    injective,
    may_overlap,
    select_sql,
    view_terms,
)
from obda.mapping._unfold_terms import (
    NATURAL_DATATYPE,
    RDF_LANGSTRING,
    Slot,
    TermValue,
    Unsat,
    Val,
    category,
    compare_terms,
    equal_terms,
    make_parts,
    projection_sql,
)
from obda.model.compilation import AtomSource, MemberOrigin, SqlMember
from obda.model.mapping import Mapping, TermMap, TermMapKind, TermType, TriplesMap
from obda.model.ontology import Ontology
from obda.model.query import CQ, IRI, XSD, Atom, ClassAtom, Comparison, Literal, Query, Shifted, Term, Var
from obda.model.sources import ColumnType, Sources
from obda.rewrite import AtomAlternative, expand_atom

__all__ = ["unfold", "MAX_CQS", "MAX_MEMBERS", "MAX_NODES"]

MAX_MEMBERS = 5000  # SPJ members one query may unfold into (BudgetError beyond)
# rewritten CQs one query may unfold (checked before unfolding, which costs about 2 ms per CQ): nested UNIONs
# multiply out; the NPD benchmark's queries rewrite into at most 6
MAX_CQS = 1000
MAX_NODES = 5_000_000  # sqlglot nodes of the members' SQL (BudgetError beyond)


def _default_expand(ontology: Ontology | None) -> Callable[[Atom], Sequence[AtomAlternative]]:
    """``obda.rewrite.expand_atom`` over ``ontology``; the atom itself when there is no ontology."""
    if ontology is None:
        return lambda a: (AtomAlternative(a, ()),)
    return lambda a: expand_atom(a, ontology)


# ----------------------------------------------------------------------------- terms


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


# ----------------------------------------------------------------------------- member building


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


@dataclass
class _Member:
    memo: _Memo
    entries: list[FromEntry] = field(default_factory=list)
    conds: list[Expr] = field(default_factory=list)
    used: list[Val] = field(default_factory=list)
    exempt: set[str] = field(default_factory=set)
    bound: dict[Var, TermValue] = field(default_factory=dict)
    sources: list[tuple[Atom, Assertion, tuple[str, ...]]] = field(default_factory=list)
    counter: int = 0  # aliases m1..m<counter> are taken

    def bind(self, term: Term, value: TermValue) -> None:
        if isinstance(term, Var):
            if term in self.bound:
                self.conds.extend(self.memo.equal_terms(self.bound[term], value))
            else:
                self.bound[term] = value
        else:
            self.conds.extend(self.memo.equal_terms(self.memo.constant(term), value))


def _unfold_atom(m: _Member, atom: Atom, a: Assertion, kind: str) -> None:
    """Add the FROM entries, bindings and conditions of one atom unfolded with assertion ``a``."""
    if kind == "view":
        _view_atom(m, atom, a)
        return
    u = m.memo.unfold_assertion(a, m.counter)
    m.counter += len(u.entries)
    m.entries += u.entries
    m.conds += u.conds
    m.used += u.used
    m.exempt |= u.exempt
    aliases = u.aliases
    subj, obj, ts, tm = u.subj, u.obj, u.ts, a.triples_map
    if isinstance(atom, ClassAtom):
        m.bind(atom.term, subj)
        if kind == "dynamic-class":
            m.conds.extend(m.memo.equal_terms(obj, m.memo.constant(IRI(atom.cls))))
    elif kind == "type-property":
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj if obj is not None else m.memo.constant(IRI(a.predicate)))
    else:
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj)
    if atom.time is not None:
        if ts is None:  # a temporal assertion always has a timestamp (checked when indexing)
            raise MappingError(f"triples map {tm.name} reads a stream but has no timestamp column", tm.location)
        m.bind(atom.time, TermValue(TermType.LITERAL, (Slot(ts, False),), XSD + "dateTime", native=True,
                                    label=f"timestamp {ts.key()}"))
    m.sources.append((atom, a, tuple(aliases)))


def _view_atom(m: _Member, atom: Atom, use: ViewUse) -> None:
    """Add one atom answered by its per-atom view: one derived FROM entry, its columns bound to the variables."""
    m.counter += 1
    alias = f"m{m.counter}"
    view = use.view
    m.entries.append(FromEntry(alias, exp.Subquery(this=view.select), view.name, derived=True, stream=view.temporal,
                               source_text=view.text))
    m.exempt.update(Col(alias, c.name).sql() for c in view.table.columns)  # a view's columns are never NULL
    ren = {PLACEHOLDER: alias}
    for vc in use.columns:
        m.bind(vc.var, _rename_term(vc.term, ren))
    if atom.time is not None:
        m.bind(atom.time, TermValue(TermType.LITERAL, (Slot(Val(Col(alias, TS), ColumnType.TIMESTAMP), False),),
                                    XSD + "dateTime", native=True, label=f"timestamp {alias}.{TS}"))
    m.sources.append((atom, use, (alias,)))


def _filter(m: _Member, f: Comparison, cq: CQ) -> None:
    if isinstance(f.left, Shifted) or isinstance(f.right, Shifted):  # an interval join: timestamp columns
        def ts(t) -> Expr:
            tv = m.bound[t.var if isinstance(t, Shifted) else t]
            col = tv.parts[0].val.expr  # a time variable is bound to its atom's timestamp column
            return Shift(col, t.micros) if isinstance(t, Shifted) else col

        m.conds.append(Cmp(f.op, ts(f.left), ts(f.right)))
        return

    def side(t: Term) -> TermValue:
        if isinstance(t, Var):
            if t not in m.bound:
                raise UnsupportedConstructError(
                    "unbound filter variable",
                    f"FILTER ({f}) uses {t}, which no triple pattern of the branch binds",
                )
            return m.bound[t]
        return _constant_value(t)

    m.conds.extend(compare_terms(f.op, side(f.left), side(f.right)))  # filters are few: not memoised


_DOUBLE = {XSD + "double", XSD + "float"}
_INTEGER_TYPES = {XSD + t for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                                    "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
                                    "unsignedShort", "unsignedByte")}


def _bind_value(m: _Member, var: Var, e) -> TermValue:
    """The value ``BIND(e AS var)`` gives: the bound term of a variable, or a number computed in SQL (a native
    literal whose datatype follows SPARQL's numeric promotion: integer < decimal < double; ``/`` is decimal)."""
    if isinstance(e, Var):
        if e not in m.bound:
            raise UnsupportedConstructError("BIND", f"BIND({e} AS {var}): {e} is not bound by the branch")
        return m.bound[e]

    def number(x) -> tuple[Expr, str]:
        if isinstance(x, Literal):
            return const(exp.Literal.number(x.lexical)), x.datatype
        if isinstance(x, Var):
            tv = m.bound.get(x)
            if tv is None or not tv.native or category(tv.datatype) != "numeric":
                raise UnsupportedConstructError(
                    "BIND", f"BIND(… AS {var}) computes with {x}, which is not a number column (a literal of a "
                    "numeric datatype read from one column)")
            return tv.parts[0].val.expr, tv.datatype  # type: ignore[union-attr]
        left, lt = number(x.left)
        right, rt = number(x.right)
        if lt in _DOUBLE or rt in _DOUBLE:
            dt = XSD + "double"
        elif x.op == "/" or lt not in _INTEGER_TYPES or rt not in _INTEGER_TYPES:
            dt = XSD + "decimal"
        else:
            dt = XSD + "integer"
        return Arith(x.op, left, right), dt

    value, dt = number(e)
    ctype = {XSD + "double": ColumnType.DOUBLE, XSD + "integer": ColumnType.INTEGER}.get(dt, ColumnType.DECIMAL)
    return TermValue(TermType.LITERAL, (Slot(Val(value, ctype), False),), dt, native=True, label=f"BIND {var}")


def _freshen(alt_atom: Atom, original: Atom, position: int) -> Atom:
    """Rename blank-node variables an alternative introduced, so that atoms never share them by accident."""
    keep = {t for t in original.terms if isinstance(t, Var)}
    if original.time is not None:
        keep.add(original.time)

    def r(t):
        if isinstance(t, Var) and t.bnode and t not in keep:
            return Var(f"a{position}_{t.name}", bnode=True)
        return t

    if isinstance(alt_atom, ClassAtom):
        return replace(alt_atom, term=r(alt_atom.term))
    return replace(alt_atom, subject=r(alt_atom.subject), object=r(alt_atom.object))


@dataclass
class _Built:
    """A surviving member before SQL output: FROM entries (final aliases), conditions, projected terms."""

    entries: list[FromEntry]  # aliases before renumbering (``ren`` gives the final ones), as in conds and bound
    conds: list[Expr]
    bound: list[tuple[str, TermValue | None]]  # same aliases as conds
    ren: dict[str, str]
    origin: MemberOrigin

    def skeleton(self) -> list[Expr]:
        """Small stand-ins of the projected items for duplicate detection."""
        return [_skeleton(tv) for _, tv in self.bound]

    def items(self) -> list[tuple[str, exp.Expression]]:
        return [(n, projection_sql(tv).to_sqlglot(self.ren) if tv is not None else exp.Null()) for n, tv in self.bound]


def _build(query: Query, branch: int, cq: CQ, steps: tuple[str, ...], choice, memo: _Memo) -> _Built:
    """One SPJ member for a choice of (alternative atom, alternative steps, assertion, kind) per atom."""
    m = _Member(memo)
    for atom, _steps, a, kind in choice:
        _unfold_atom(m, atom, a, kind)
    for v, e in cq.binds:
        m.bind(v, _bind_value(m, v, e))
    for f in cq.filters:
        _filter(m, f, cq)
    branch_vars = query.branches[branch].variables if 0 <= branch < len(query.branches) else frozenset()
    bound: list[tuple[str, TermValue | None]] = []
    for v in query.projection:
        tv = m.bound.get(v)
        if tv is None and v in branch_vars:
            raise RewritingError(
                f"rewritten CQ {cq} of branch {branch + 1} does not bind answer variable {v}, which the branch "
                "binds (an answer variable must never be folded into an anonymous individual)",
                query.location,
            )
        bound.append((v.name, tv))
    all_steps = tuple(steps) + tuple(s for _, st, _, _ in choice for s in st)
    expanded = cq.with_atoms(atom for atom, _, _, _ in choice)
    conds = simplify(m.conds, m.exempt)
    entries = list(m.entries)
    sources = list(m.sources)
    # self-join elimination on declared keys (repeat: a merge may enable another)
    while True:
        merges = eliminate_self_joins(entries, conds)
        if not merges:
            break
        ren = dict(merges)
        entries = [e for e in entries if e.alias not in ren]
        conds = simplify([rename_aliases(c, ren) for c in conds], m.exempt)
        bound = [(n, _rename_term(tv, ren)) for n, tv in bound]
        m.used = [Val(rename_aliases(u.expr, ren), u.type) for u in m.used]
        sources = [(atom, a, tuple(dict.fromkeys(ren.get(x, x) for x in al))) for atom, a, al in sources]
    conds = conds + _not_null(m.used, conds, m.exempt)
    # renumber aliases m1..mk in FROM order (applied when the SQL is output)
    ren = {e.alias: f"m{i}" for i, e in enumerate(entries, 1)}
    atom_sources = tuple(_atom_source(atom, a, tuple(ren[x] for x in al)) for atom, a, al in sources)
    origin = MemberOrigin(
        branch=branch,
        cq=expanded,
        atom_sources=atom_sources,
        rewriting_steps=all_steps,
        alias_tables=tuple((ren[e.alias], e.table) for e in entries),
    )
    return _Built(entries, conds, bound, ren, origin)


def _atom_source(atom: Atom, a, aliases: tuple[str, ...]) -> AtomSource:
    """Provenance of one atom: its triples map, or every triples map behind its view."""
    if isinstance(a, ViewUse):
        tms = a.view.triples_maps
        return AtomSource(atom, tms[0][0], tms[0][1], tms[0][2], aliases, view=a.view.name,
                          triples_maps=tuple(t[0] for t in tms))
    return AtomSource(atom, a.triples_map.id, a.location.file or a.triples_map.location.file,
                      a.location.line or a.triples_map.location.line, aliases)


def _rename_term(tv: TermValue | None, ren: dict[str, str]) -> TermValue | None:
    """``tv`` with the FROM aliases of its columns renamed."""
    if tv is None:
        return None
    if not any(a in ren for p in tv.parts if isinstance(p, Slot) for a in p.val.expr.aliases()):
        return tv
    parts = tuple(
        p if isinstance(p, str) else Slot(Val(rename_aliases(p.val.expr, ren), p.val.type), p.encoded) for p in tv.parts
    )
    return replace(tv, parts=parts)


def _skeleton(tv: TermValue | None) -> Expr:
    """A small key that determines the projection of ``tv`` (compared instead of REPLACE chains)."""
    if tv is None:
        return Seq(("NULL",))
    out: list = [repr(f"{tv.term_type.value}|{tv.datatype}|{tv.language}|{tv.native}")]
    for p in tv.parts:
        out += [",", repr(p)] if isinstance(p, str) else [",S(", p.val.expr, f",{p.encoded})"]
    return Seq(tuple(out))


def _not_null(used: list[Val], conds: list[Expr], exempt: set[str]) -> list[Expr]:
    """``c IS NOT NULL`` for term-map columns no comparison of the member already requires non-null."""
    rejected: set[str] = set(exempt)
    for c in conds:
        s = split_cmp(c)
        if s is not None:
            rejected.update(x.sql() for x in (s[1], s[2]) if isinstance(x, Col))
        elif isinstance(c, NotNull):
            rejected.add(c.arg.sql())
        elif isinstance(c, Raw) and c.not_is is not None:
            rejected.add(c.not_is.sql())
    out: list[Expr] = []
    for u in used:
        if isinstance(u.expr, Col) and u.expr.sql() not in rejected:
            rejected.add(u.expr.sql())
            out.append(NotNull(u.expr))
    return out


def _select(b: _Built, distinct: bool) -> exp.Select:
    """The sqlglot SELECT of a member, a fresh tree on every call (FROM aliases renumbered)."""
    return select_sql(b.entries, b.conds, b.items(), distinct, b.ren)


def _option_name(a) -> str:
    return f"view {a.view.name}" if isinstance(a, ViewUse) else a.triples_map.name


def _describe_choice(branch: int, choice) -> str:
    return f"branch {branch}: " + " ∧ ".join(f"{atom} ← {_option_name(a)}" for atom, _, a, _ in choice)


def _empty(query: Query) -> exp.Select:
    """A query with the answer columns and no rows (every member was removed)."""
    items = [
        exp.alias_(exp.cast(exp.Null(), exp.DataType.build("VARCHAR")), exp.to_identifier(v.name))
        for v in query.projection
    ]
    return exp.Select(expressions=items).where(exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0)))


def _signature(option, memo: _Memo) -> dict[Var, TermValue]:
    """The terms one unfolded atom binds its variables to (raises Unsat if the atom alone is unsatisfiable)."""
    atom, _, a, kind = option
    m = _Member(memo)
    _unfold_atom(m, atom, a, kind)
    return m.bound


def _compatible_choices(per_atom, branch: int, removed: list[str]):
    """Choices of one option per atom whose shared variables can be equal (pairwise, by term shape).

    A backtracking search over the product: a partial choice whose new option
    binds a variable to a term that can never equal the term an earlier atom
    bound it to (incompatible IRI templates, IRI vs literal, ...) is cut with
    its whole subtree, recorded once in ``removed``.  The full build re-checks
    every surviving choice.
    """
    cache: dict[tuple[int, int], str | None] = {}

    def clash(t1: TermValue, t2: TermValue) -> str | None:
        key = (id(t1), id(t2))
        if key not in cache:
            try:
                equal_terms(t1, t2)
                cache[key] = None
            except Unsat as e:
                cache[key] = str(e)
        return cache[key]

    n = len(per_atom)
    chosen: list = []

    def search(i: int, bound: dict[Var, tuple[TermValue, object]]):
        if i == n:
            yield tuple(chosen)
            return
        for option, sig in per_atom[i]:
            why = None
            for v, tv in sig.items():
                if v in bound:
                    why = clash(bound[v][0], tv)
                    if why is not None:
                        removed.append(
                            f"{_describe_choice(branch, (bound[v][1], option))}: unsatisfiable: {why} "
                            f"(every combination with these two atoms pruned)"
                        )
                        break
            if why is not None:
                continue
            new = dict(bound)
            for v, tv in sig.items():
                new.setdefault(v, (tv, option))
            chosen.append(option)
            yield from search(i + 1, new)
            chosen.pop()

    yield from search(0, {})


_INDEXES: dict[tuple[int, int], tuple[Mapping, Sources, AssertionIndex]] = {}


def _index(mapping: Mapping, sources: Sources) -> AssertionIndex:
    """The assertion index of a mapping over a catalog, reused across queries (a few recent ones kept)."""
    key = (id(mapping), id(sources))
    hit = _INDEXES.get(key)
    if hit is not None and hit[0] is mapping and hit[1] is sources:
        return hit[2]
    index = AssertionIndex(mapping, sources)
    if len(_INDEXES) >= 8:
        _INDEXES.pop(next(iter(_INDEXES)))
    _INDEXES[key] = (mapping, sources, index)
    return index


def unfold(
    query: Query,
    rewritten: Sequence,
    mapping: Mapping,
    sources: Sources,
    ontology: Ontology | None = None,
    *,
    expand: Callable[[Atom], Sequence[AtomAlternative]] | None = None,
    max_members: int = MAX_MEMBERS,
    max_nodes: int = MAX_NODES,
    max_cqs: int = MAX_CQS,
) -> "Unfolding":
    """Unfold rewritten CQs into SQL members, the whole UNION [ALL] query, and why members were removed.

    ``rewritten`` holds objects with ``branch``, ``cq`` and ``steps``
    (``obda.rewrite.RewrittenCQ``).  ``expand(atom)`` gives the atoms entailing
    ``atom`` (objects with ``atom`` and ``steps``); by default
    ``obda.rewrite.expand_atom(atom, ontology)``, or the atom itself when
    ``ontology`` is None.  Raises :class:`MappingError` for a mapping that
    refers to unknown tables or columns.
    """
    if len(rewritten) > max_cqs:
        raise BudgetError(f"the query rewrites into {len(rewritten)} conjunctive queries (UNION and || alternatives, "
                          f"multiplied out, and the ontology's), more than the {max_cqs} the budget unfolds; split it "
                          "into several queries or nest fewer UNIONs", query.location, budget="cqs")
    with _gc_paused():
        return _unfold(query, rewritten, mapping, sources, expand or _default_expand(ontology),
                       _Budget(query, max_members, max_nodes))


@contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector while unfolding.

    Unfolding a large product allocates millions of small, long-lived objects
    (candidate members, then one sqlglot tree per member); every collection
    would traverse all of them again (and the caller's heap), which made up
    half of NPD query 28's compile time.  Nothing is freed late: the collector
    runs as usual once it is re-enabled.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _join_vars(cq: CQ) -> frozenset[Var]:
    """Variables whose term shape matters beyond one atom: shared by two atoms, or used in a filter."""
    count: Counter = Counter()
    for a in cq.atoms:
        for v in {t for t in a.terms if isinstance(t, Var)}:
            count[v] += 1
    out = {v for v, c in count.items() if c > 1}
    for f in cq.filters:
        out.update(f.variables)
    return frozenset(out)


def _atom_vars(atom: Atom) -> list[Var]:
    return list(dict.fromkeys(t for t in atom.terms if isinstance(t, Var)))


def _branch(option, sig: dict, atom: Atom, memo: _Memo) -> Branch:
    """The single-atom SPJ of one option (raises Unsat when it is unsatisfiable on its own)."""
    alt_atom, _steps, a, kind = option
    m = _Member(memo)
    _unfold_atom(m, alt_atom, a, kind)
    conds = simplify(m.conds, m.exempt)
    conds = conds + _not_null(m.used, conds, m.exempt)
    terms = {v: m.bound[v] for v in _atom_vars(atom)}
    ts = m.bound[atom.time].parts[0].val if atom.time is not None else None  # type: ignore[union-attr]
    return Branch(option, sig, list(m.entries), conds, terms, ts)


def _disjoint(x: Branch, y: Branch) -> bool:
    """Can the two branches never produce the same atom (some variable's terms never equal)?"""
    for v, tv in x.terms.items():
        try:
            equal_terms(tv, y.terms[v])
        except Unsat:
            return True
    return False


class _Views:
    """The per-atom views of one ``unfold`` call, shared by every member that uses the same one."""

    def __init__(self, sources: Sources):
        self.by_text: dict[str, AtomView] = {}
        self.taken = {t.name.lower() for t in sources.tables}

    def get(self, atom: Atom, branches: list[Branch], layout, disjoint: bool, free: bool,
            pruned: tuple[str, ...]) -> AtomView:
        probe = build_view("v", atom, branches, layout, disjoint, free, pruned)
        hit = self.by_text.get(probe.text)
        if hit is not None:
            return hit
        local = "".join(ch if ch.isalnum() else "_" for ch in _short_name(atom.predicate))[:40]
        n = len(self.by_text) + 1
        name = f"v{n}_{local}"
        while name.lower() in self.taken:
            n += 1
            name = f"v{n}_{local}"
        self.taken.add(name.lower())
        view = replace(probe, name=name, table=replace(probe.table, name=name))  # the name is not in the SQL
        self.by_text[probe.text] = view
        return view


def _short_name(iri: str) -> str:
    for sep in ("#", "/", ":"):
        if sep in iri:
            tail = iri.rsplit(sep, 1)[1]
            if tail:
                return tail
    return iri or "atom"


def _atom_branches(atom: Atom, options: list, memo: _Memo, removed: list[str], branch: int) -> list[Branch]:
    """The single-atom SPJ of every mapping option of an atom (unsatisfiable ones recorded and dropped)."""
    out: list[Branch] = []
    for option, sig in options:
        try:
            out.append(_branch(option, sig, atom, memo))
        except Unsat as e:
            removed.append(f"{_describe_choice(branch, (option,))}: unsatisfiable: {e}")
    return out


def _overlapping(atom: Atom, branches: list[Branch], join_vars: frozenset[Var]) -> set[Var]:
    """Join variables of an atom whose IRI templates may produce the same IRI — two templates, or one whose
    parts can run into each other (two slot tuples, one IRI): compared as whole terms."""
    out: set[Var] = set()
    for v in _atom_vars(atom):
        if v not in join_vars:
            continue
        reps: dict[tuple, TermValue] = {}
        for b in branches:
            reps.setdefault(fine_shape(b.terms[v]), b.terms[v])
        if any(may_overlap(x, y) for x, y in combinations(list(reps.values()), 2)) or any(
                t.term_type is not TermType.LITERAL and not injective(t) for t in reps.values()):
            out.add(v)
    return out


def _atom_options(atom: Atom, branches: list[Branch], join_vars: frozenset[Var], whole: set[Var], memo: _Memo,
                  views: _Views, removed: list[str], branch: int) -> list:
    """The per-atom choices of one CQ atom: one per term-shape group of its branches.

    ``whole``: the CQ's join variables compared as whole terms (rendered) in
    every atom, because some atom's templates for them may overlap; an atom
    with such a variable always reads its view (a string column), so that the
    join stays a column equality.  Otherwise a group with a single, provably
    duplicate-free branch is inlined; any other group is answered by its
    :class:`AtomView`.
    """
    atom_vars = sorted(_atom_vars(atom), key=lambda v: v.name)
    rendered: set[Var] = set()
    for v in atom_vars:
        if v not in join_vars or v in whole or any(b.terms[v].term_type is TermType.LITERAL for b in branches):
            rendered.add(v)  # used by this atom alone, compared as a whole term, or a literal: one column
    must_view = any(v in whole and any(b.terms[v].term_type is not TermType.LITERAL for b in branches)
                    for v in atom_vars)
    groups: dict[tuple, list[Branch]] = {}
    for b in branches:
        key = tuple(coarse_shape(b.terms[v]) if v in rendered else fine_shape(b.terms[v]) for v in atom_vars)
        groups.setdefault(key, []).append(b)
    out = []
    for bs in groups.values():
        layout = column_layout(atom, [b.terms for b in bs], rendered)
        items = [branch_items(b, layout) for b in bs]
        outs = [[e for _, e, _ in it] for it in items]
        keep: list[tuple[Branch, list]] = []
        pruned: list[str] = []
        seen: dict[str, Branch] = {}
        for b, o in zip(bs, outs):
            b.key = canonical_key(b.entries, b.conds, o)
            if b.key in seen:
                pruned.append(f"{_option_name(b.assertion)} ({b.option[0]}): the same triples as "
                              f"{_option_name(seen[b.key].assertion)} ({seen[b.key].option[0]})")
                continue
            seen[b.key] = b
            keep.append((b, o))
        texts = [[e.sql() for e in o] for _, o in keep]
        final: list[tuple[Branch, list]] = []
        for j, (b, o) in enumerate(keep):
            big = next((keep[k][0] for k in range(len(keep)) if k != j
                        and contained(b, keep[k][0], texts[j], texts[k])), None)
            if big is not None:
                pruned.append(f"{_option_name(b.assertion)} ({b.option[0]}): contained in "
                              f"{_option_name(big.assertion)} ({big.option[0]})")
                continue
            final.append((b, o))
        free = all(duplicate_free(b) for b, _ in final) and not must_view
        inline = [(b.option, b.sig) for b, _ in final]
        if len(final) == 1 and free:
            out.append(_Group(inline, None))
            removed.extend(f"branch {branch}: {p}" for p in pruned if f"branch {branch}: {p}" not in removed)
            continue
        disjoint = all(_disjoint(x, y) for (x, _), (y, _) in combinations(final, 2))
        view = views.get(atom, [b for b, _ in final], layout, disjoint, free, tuple(pruned))
        use = ViewUse(view, view_terms(final[0][0], layout), atom.time)
        steps = tuple(dict.fromkeys(s for b, _ in final for s in b.option[1]))
        sig = {vc.var: vc.term for vc in use.columns}
        # disjoint duplicate-free branches may also be members of their own (a union lifted above the join)
        out.append(_Group(inline if (free and disjoint) else None, ((atom, steps, use, "view"), sig)))
    return out


@dataclass(frozen=True)
class _Group:
    """A term-shape group of one atom: its options as separate members (``inline``), or its view, or both."""

    inline: list | None  # one option per branch: correct only for disjoint duplicate-free branches
    view: tuple | None


LIFT_LIMIT = 64  # a CQ's unions of disjoint duplicate-free branches become members while it has at most this many


def _choose(groups_per_atom: list[list[_Group]]) -> list[list]:
    """Per atom, the options to combine: lifted branches when the CQ stays within ``LIFT_LIMIT`` members."""
    lifted = 1
    for groups in groups_per_atom:
        lifted *= sum(len(g.inline) if g.inline is not None else 1 for g in groups)
    lift = lifted <= LIFT_LIMIT
    out = []
    for groups in groups_per_atom:
        options: list = []
        for g in groups:
            if g.inline is not None and (lift or g.view is None):
                options.extend(g.inline)
            else:
                options.append(g.view)
        out.append(options)
    return out


class Unfolding(NamedTuple):
    """What :func:`unfold` returns: the SPJ members, the whole UNION [ALL], why members were removed, the views."""

    members: tuple[SqlMember, ...]
    sql: exp.Expression
    removed: tuple[str, ...]
    views: tuple[AtomView, ...]


class _Budget:
    """Limits on what one compilation may build: members and sqlglot nodes (a located error beyond)."""

    def __init__(self, query: Query, max_members: int, max_nodes: int):
        self.query, self.max_members, self.max_nodes = query, max_members, max_nodes
        self.nodes = 0

    def members(self, n: int) -> None:
        if n > self.max_members:
            raise BudgetError(
                f"the query unfolds into more than {self.max_members} SQL members (the budget); bind more variables, "
                "add constants or filters", self.query.location)

    def add(self, tree: exp.Expression) -> exp.Expression:
        self.nodes += sum(1 for _ in tree.walk())
        if self.nodes > self.max_nodes:
            raise BudgetError(
                f"the unfolded SQL has more than {self.max_nodes} syntax-tree nodes (the budget); simplify the query",
                self.query.location, budget="nodes")
        return tree


def _unfold(query: Query, rewritten: Sequence, mapping: Mapping, sources: Sources, expand_fn, budget: _Budget):
    memo = _Memo()
    cache: dict[Atom, tuple] = {}

    def expand_cached(atom: Atom) -> tuple:
        if atom not in cache:
            cache[atom] = tuple(expand_fn(atom))
        return cache[atom]

    index = _index(mapping, sources)
    views = _Views(sources)
    removed: list[str] = []
    built: list[_Built] = []
    keys: dict[str, int] = {}  # (branch, canonical form) → member index
    for rcq in rewritten:
        cq: CQ = rcq.cq
        join_vars = _join_vars(cq)
        per_atom = []
        for i, atom in enumerate(cq.atoms):
            options = []
            any_match = False
            for alt in expand_cached(atom):
                alt_atom = _freshen(alt.atom, atom, i)
                for a, kind in index.matching(alt_atom):
                    any_match = True
                    option = (alt_atom, tuple(alt.steps), a, kind)
                    try:
                        options.append((option, _signature(option, memo)))
                    except Unsat as e:
                        removed.append(f"{_describe_choice(rcq.branch, (option,))}: unsatisfiable: {e}")
            if options:
                options = _atom_branches(atom, options, memo, removed, rcq.branch)
            if not options:
                where = "stream" if atom.time is not None else "static"
                removed.append(f"branch {rcq.branch}: CQ {cq}: no {where} mapping produces {atom}"
                               + (" satisfiably" if any_match else ""))
                per_atom = None
                break
            per_atom.append(options)
        if per_atom is None:
            continue
        whole: set[Var] = set()
        for atom, branches in zip(cq.atoms, per_atom):
            whole |= _overlapping(atom, branches, join_vars)
        per_atom = [_atom_options(atom, branches, join_vars, whole, memo, views, removed, rcq.branch)
                    for atom, branches in zip(cq.atoms, per_atom)]
        for choice in _compatible_choices(_choose(per_atom), rcq.branch, removed):
            try:
                b = _build(query, rcq.branch, cq, tuple(rcq.steps), choice, memo)
            except Unsat as e:
                removed.append(f"{_describe_choice(rcq.branch, choice)}: unsatisfiable: {e}")
                continue
            # duplicates only within a branch: SPARQL UNION keeps duplicates across branches
            key = f"{rcq.branch}#" + canonical_key(b.entries, b.conds, b.skeleton())
            if key in keys:
                removed.append(f"{_describe_choice(rcq.branch, choice)}: duplicate of member {keys[key] + 1}")
                continue
            keys[key] = len(built)
            built.append(b)
            budget.members(len(built))
    members = tuple(SqlMember(budget.add(_select(b, False)), b.origin) for b in built)
    if not members:
        whole: exp.Expression = _empty(query)
    elif len(members) == 1:
        whole = _select(built[0], query.distinct)
    else:
        whole = _select(built[0], False)
        for b in built[1:]:  # left-deep chain of fresh trees (exp.union would copy the growing chain)
            whole = exp.Union(this=whole, expression=_select(b, False), distinct=query.distinct)
    used = {s.view for m in members for s in m.origin.atom_sources if s.view}
    return Unfolding(members, whole, tuple(removed), tuple(v for v in views.by_text.values() if v.name in used))
