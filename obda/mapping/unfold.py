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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from sqlglot import exp

from obda.errors import MappingError, RewritingError, UnsupportedConstructError
from obda.mapping._unfold_assertions import Assertion, AssertionIndex
from obda.mapping._unfold_optimize import (
    canonical_key,
    eliminate_self_joins,
    make_cmp,
    rename_aliases,
    simplify,
    split_cmp,
)
from obda.mapping._unfold_tables import FromEntry, TableInstance
from obda.mapping._unfold_terms import (
    NATURAL_DATATYPE,
    RDF_LANGSTRING,
    Slot,
    TermValue,
    Unsat,
    Val,
    compare_terms,
    equal_terms,
    make_parts,
    projection_sql,
)
from obda.model.compilation import AtomSource, MemberOrigin, SqlMember
from obda.model.mapping import Mapping, TermMap, TermMapKind, TermType, TriplesMap
from obda.model.ontology import Ontology
from obda.model.query import CQ, IRI, XSD, Atom, ClassAtom, Comparison, Literal, Query, Term, Var
from obda.model.sources import Sources
from obda.rewrite import AtomAlternative, expand_atom

__all__ = ["unfold"]


def _default_expand(ontology: Ontology | None) -> Callable[[Atom], Sequence[AtomAlternative]]:
    """``obda.rewrite.expand_atom`` over ``ontology``; the atom itself when there is no ontology."""
    if ontology is None:
        return lambda a: (AtomAlternative(a, ()),)
    return lambda a: expand_atom(a, ontology)


# ----------------------------------------------------------------------------- terms


def _is_absolute(text: str) -> bool:
    import re

    return re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text) is not None


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
    for p in tm.template:
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


@dataclass
class _Member:
    entries: list[FromEntry] = field(default_factory=list)
    conds: list[exp.Expression] = field(default_factory=list)
    used: list[Val] = field(default_factory=list)
    exempt: set[str] = field(default_factory=set)
    bound: dict[Var, TermValue] = field(default_factory=dict)
    sources: list[tuple[Atom, Assertion, tuple[str, ...]]] = field(default_factory=list)
    counter: int = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"m{self.counter}"

    def add(self, inst: TableInstance) -> TableInstance:
        self.entries.extend(inst.entries)
        self.conds.extend(inst.conditions)
        self.exempt |= inst.not_null_exempt
        return inst

    def bind(self, term: Term, value: TermValue) -> None:
        if isinstance(term, Var):
            if term in self.bound:
                self.conds.extend(equal_terms(self.bound[term], value))
            else:
                self.bound[term] = value
        else:
            self.conds.extend(equal_terms(_constant_value(term), value))


def _unfold_atom(m: _Member, atom: Atom, a: Assertion, kind: str) -> None:
    """Add the FROM entries, bindings and conditions of one atom unfolded with assertion ``a``."""
    child = m.add(a.child.instantiate(m.fresh))
    aliases = list(child.aliases)
    tm = a.triples_map
    subj = _term_value(a.subject, child, tm, m.used)
    obj = None
    ts = child.timestamp
    if a.obj is not None:
        if a.parent is not None and not a.same_row:
            parent = m.add(a.parent_shape.instantiate(m.fresh))
            aliases += parent.aliases
            for jc in a.joins:
                cv = child.column(jc.child, None, "rr:child")
                pv = parent.column(jc.parent, None, "rr:parent")
                m.conds.append(make_cmp("=", cv.expr.copy(), pv.expr.copy()))
            obj = _term_value(a.obj, parent, a.parent, m.used)
            if ts is None:
                ts = parent.timestamp
            elif parent.timestamp is not None:
                m.conds.append(make_cmp("=", ts.expr.copy(), parent.timestamp.expr.copy()))
        elif a.parent is not None:
            obj = _term_value(a.obj, child, a.parent, m.used)
        else:
            obj = _term_value(a.obj, child, tm, m.used)
    if isinstance(atom, ClassAtom):
        m.bind(atom.term, subj)
        if kind == "dynamic-class":
            m.conds.extend(equal_terms(obj, _constant_value(IRI(atom.cls))))
    elif kind == "type-property":
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj if obj is not None else _constant_value(IRI(a.predicate)))
    else:
        m.bind(atom.subject, subj)
        m.bind(atom.object, obj)
    if atom.time is not None:
        if ts is None:  # a temporal assertion always has a timestamp (checked when indexing)
            raise MappingError(f"triples map {tm.name} reads a stream but has no timestamp column", tm.location)
        m.bind(atom.time, TermValue(TermType.LITERAL, (Slot(ts, False),), XSD + "dateTime", native=True,
                                    label=f"timestamp {ts.key()}"))
    m.sources.append((atom, a, tuple(aliases)))


def _filter(m: _Member, f: Comparison, cq: CQ) -> None:
    def side(t: Term) -> TermValue:
        if isinstance(t, Var):
            if t not in m.bound:
                raise UnsupportedConstructError(
                    "unbound filter variable",
                    f"FILTER ({f}) uses {t}, which no triple pattern of the branch binds",
                )
            return m.bound[t]
        return _constant_value(t)

    m.conds.extend(compare_terms(f.op, side(f.left), side(f.right)))


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
    entries: list[FromEntry]
    conds: list[exp.Expression]
    items: list[tuple[str, exp.Expression]]
    skeleton: list[exp.Expression]  # small stand-ins of the items for duplicate detection
    origin: MemberOrigin


def _build(query: Query, branch: int, cq: CQ, steps: tuple[str, ...], choice) -> _Built:
    """One SPJ member for a choice of (alternative atom, alternative steps, assertion, kind) per atom."""
    m = _Member()
    for atom, _steps, a, kind in choice:
        _unfold_atom(m, atom, a, kind)
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
    expanded = CQ(tuple(atom for atom, _, _, _ in choice), cq.filters)
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
    # renumber aliases m1..mk in FROM order
    ren = {e.alias: f"m{i}" for i, e in enumerate(entries, 1)}
    entries = [replace(e, alias=ren[e.alias]) for e in entries]
    conds = [rename_aliases(c, ren) for c in conds]
    bound = [(n, _rename_term(tv, ren)) for n, tv in bound]
    items = [(n, projection_sql(tv) if tv is not None else exp.Null()) for n, tv in bound]
    skeleton = [_skeleton(tv) for _, tv in bound]
    atom_sources = tuple(
        AtomSource(atom, a.triples_map.id, a.location.file or a.triples_map.location.file,
                   a.location.line or a.triples_map.location.line, tuple(ren[x] for x in al))
        for atom, a, al in sources
    )
    origin = MemberOrigin(
        branch=branch,
        cq=expanded,
        atom_sources=atom_sources,
        rewriting_steps=all_steps,
        alias_tables=tuple((e.alias, e.table) for e in entries),
    )
    return _Built(entries, conds, items, skeleton, origin)


def _rename_term(tv: TermValue | None, ren: dict[str, str]) -> TermValue | None:
    """``tv`` with the FROM aliases of its columns renamed."""
    if tv is None:
        return None
    parts = tuple(
        p if isinstance(p, str) else Slot(Val(rename_aliases(p.val.expr, ren), p.val.type), p.encoded) for p in tv.parts
    )
    return replace(tv, parts=parts)


def _skeleton(tv: TermValue | None) -> exp.Expression:
    """A small expression that determines the projection of ``tv`` (compared instead of REPLACE chains)."""
    if tv is None:
        return exp.Null()
    args: list[exp.Expression] = [exp.Literal.string(f"{tv.term_type.value}|{tv.datatype}|{tv.language}|{tv.native}")]
    for p in tv.parts:
        args.append(exp.Literal.string(p) if isinstance(p, str) else
                    exp.Anonymous(this="S", expressions=[p.val.expr.copy(), exp.Literal.string(str(p.encoded))]))
    return exp.Anonymous(this="T", expressions=args)


def _not_null(used: list[Val], conds: list[exp.Expression], exempt: set[str]) -> list[exp.Expression]:
    """``c IS NOT NULL`` for term-map columns no comparison of the member already requires non-null."""
    rejected: set[str] = set(exempt)
    for c in conds:
        s = split_cmp(c)
        if s is not None:
            rejected.update(x.sql() for x in (s[1], s[2]) if isinstance(x, exp.Column))
        elif isinstance(c, exp.Not) and isinstance(c.this, exp.Is):
            rejected.add(c.this.this.sql())
    out = []
    for u in used:
        if isinstance(u.expr, exp.Column) and u.expr.sql() not in rejected:
            rejected.add(u.expr.sql())
            out.append(exp.Not(this=exp.Is(this=u.expr.copy(), expression=exp.Null())))
    return out


def _select(b: _Built, distinct: bool) -> exp.Select:
    sel = exp.Select(expressions=[exp.alias_(e, exp.to_identifier(n)) for n, e in b.items])
    first, *rest = b.entries
    sel = sel.from_(first.expression(), copy=False)
    for e in rest:
        sel = sel.join(e.expression(), copy=False)
    if b.conds:
        sel = sel.where(exp.and_(*b.conds), copy=False)
    if distinct:
        sel = sel.distinct(copy=False)
    return sel


def _describe_choice(branch: int, choice) -> str:
    return f"branch {branch}: " + " ∧ ".join(f"{atom} ← {a.triples_map.name}" for atom, _, a, _ in choice)


def _empty(query: Query) -> exp.Select:
    """A query with the answer columns and no rows (every member was removed)."""
    items = [
        exp.alias_(exp.cast(exp.Null(), exp.DataType.build("VARCHAR")), exp.to_identifier(v.name))
        for v in query.projection
    ]
    return exp.Select(expressions=items).where(exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0)))


def _signature(option) -> dict[Var, TermValue]:
    """The terms one unfolded atom binds its variables to (raises Unsat if the atom alone is unsatisfiable)."""
    atom, _, a, kind = option
    m = _Member()
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
) -> tuple[tuple[SqlMember, ...], exp.Expression, tuple[str, ...]]:
    """Unfold rewritten CQs into SQL members, the whole UNION [ALL] query, and why members were removed.

    ``rewritten`` holds objects with ``branch``, ``cq`` and ``steps``
    (``obda.rewrite.RewrittenCQ``).  ``expand(atom)`` gives the atoms entailing
    ``atom`` (objects with ``atom`` and ``steps``); by default
    ``obda.rewrite.expand_atom(atom, ontology)``, or the atom itself when
    ``ontology`` is None.  Raises :class:`MappingError` for a mapping that
    refers to unknown tables or columns.
    """
    expand_fn = expand or _default_expand(ontology)
    cache: dict[Atom, tuple] = {}

    def expand_cached(atom: Atom) -> tuple:
        if atom not in cache:
            cache[atom] = tuple(expand_fn(atom))
        return cache[atom]

    index = _index(mapping, sources)
    removed: list[str] = []
    built: list[_Built] = []
    keys: dict[str, int] = {}  # (branch, canonical form) → member index
    for rcq in rewritten:
        cq: CQ = rcq.cq
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
                        options.append((option, _signature(option)))
                    except Unsat as e:
                        removed.append(f"{_describe_choice(rcq.branch, (option,))}: unsatisfiable: {e}")
            if not options:
                where = "stream" if atom.time is not None else "static"
                removed.append(f"branch {rcq.branch}: CQ {cq}: no {where} mapping produces {atom}"
                               + (" satisfiably" if any_match else ""))
                per_atom = None
                break
            per_atom.append(options)
        if per_atom is None:
            continue
        for choice in _compatible_choices(per_atom, rcq.branch, removed):
            try:
                b = _build(query, rcq.branch, cq, tuple(rcq.steps), choice)
            except Unsat as e:
                removed.append(f"{_describe_choice(rcq.branch, choice)}: unsatisfiable: {e}")
                continue
            # duplicates only within a branch: SPARQL UNION keeps duplicates across branches
            key = f"{rcq.branch}#" + canonical_key(b.entries, b.conds, b.skeleton)
            if key in keys:
                removed.append(f"{_describe_choice(rcq.branch, choice)}: duplicate of member {keys[key] + 1}")
                continue
            keys[key] = len(built)
            built.append(b)
    members = tuple(SqlMember(_select(b, False), b.origin) for b in built)
    if not members:
        whole: exp.Expression = _empty(query)
    elif len(members) == 1:
        whole = _select(built[0], query.distinct)
    else:
        whole = members[0].select.copy()
        for mem in members[1:]:  # left-deep chain, built without exp.union's copies (quadratic for NPD sizes)
            whole = exp.Union(this=whole, expression=mem.select.copy(), distinct=query.distinct)
    return members, whole, tuple(removed)
