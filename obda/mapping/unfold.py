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
  (:class:`~obda.mapping._unfold_instances._Memo`); sqlglot trees are built only for surviving members, node by
  node; the cyclic garbage collector is paused meanwhile (:func:`_gc_paused`).

The jobs are split across private helpers: :mod:`obda.mapping._unfold_candidates` (per-atom options, views or
inlined branches, compatible choices), :mod:`obda.mapping._unfold_members` (one choice → one SPJ member),
:mod:`obda.mapping._unfold_instances` (assertions instantiated, term maps → terms), and the older
``_unfold_assertions`` / ``_unfold_tables`` / ``_unfold_terms`` / ``_unfold_ir`` / ``_unfold_optimize`` /
``_unfold_views``; this module drives them and owns the budgets.
"""


from __future__ import annotations

import gc
from dataclasses import replace
from contextlib import contextmanager
from typing import Callable, NamedTuple, Sequence

from sqlglot import exp

from obda.errors import BudgetError
from obda.mapping._unfold_assertions import AssertionIndex
from obda.mapping._unfold_candidates import (
    _atom_branches,
    _atom_options,
    _choose,
    _compatible_choices,
    _describe_choice,
    _freshen,
    _join_vars,
    _overlapping,
    _signature,
    _Views,
)
from obda.mapping._unfold_checks import Checks
from obda.mapping._unfold_compare import term_kind
from obda.mapping._unfold_instances import _Memo
from obda.mapping._unfold_members import _build, _Built, _select
from obda.mapping._unfold_optimize import canonical_key
from obda.mapping._unfold_terms import Unsat
from obda.mapping._unfold_views import AtomView
from obda.model.compilation import SqlMember
from obda.model.mapping import Mapping
from obda.model.ontology import Ontology
from obda.model.query import CQ, Atom, Query, Var
from obda.model.sources import Sources
from obda.rewrite import AtomAlternative, RewrittenCQ, expand_atom, rewrite

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


def _empty(query: Query) -> exp.Select:
    """A query with the answer columns and no rows (every member was removed)."""
    items = [
        exp.alias_(exp.cast(exp.Null(), exp.DataType.build("VARCHAR")), exp.to_identifier(v.name))
        for v in query.projection
    ]
    return exp.Select(expressions=items).where(exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0)))


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
    expand = expand or _default_expand(ontology)

    def compile_check(pattern: Query, keep: tuple) -> "Unfolding":  # a check's query (obda.mapping._unfold_checks)
        named = replace(pattern, projection=pattern.projection + keep)  # rewritten as the joining branch is
        cqs = rewrite(named, ontology) if ontology is not None else tuple(
            RewrittenCQ(i, b) for i, b in enumerate(pattern.branches))
        return unfold(pattern, cqs, mapping, sources, ontology, expand=expand, max_members=max_members,
                      max_nodes=max_nodes, max_cqs=max_cqs)

    def is_stream(name: str) -> bool:
        t = sources.table(name)
        return t is not None and t.is_stream

    with _gc_paused():
        return _unfold(query, rewritten, mapping, sources, expand, _Budget(query, max_members, max_nodes),
                       Checks(compile_check, is_stream))


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


class Unfolding(NamedTuple):
    """What :func:`unfold` returns: the SPJ members, the whole UNION [ALL], why members were removed, the views,
    and the unfolding of every check's pattern (OPTIONAL, MINUS, [NOT] EXISTS) by that pattern's query."""

    members: tuple[SqlMember, ...]
    sql: exp.Expression
    removed: tuple[str, ...]
    views: tuple[AtomView, ...]
    checks: tuple[tuple[Query, "Unfolding"], ...] = ()
    # per answer column, the kinds of term (obda.mapping._unfold_compare.term_kind) the members give it
    kinds: tuple[frozenset, ...] = ()


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


def _unfold(query: Query, rewritten: Sequence, mapping: Mapping, sources: Sources, expand_fn, budget: _Budget,
            checks: Checks):
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
                b = _build(query, rcq.branch, cq, tuple(rcq.steps), choice, memo, checks)
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
    members = tuple(SqlMember(budget.add(_select(b, False)), b.origin, _terms(b)) for b in built)
    if not members:
        whole: exp.Expression = _empty(query)
    elif len(members) == 1:
        whole = _select(built[0], query.distinct)
    else:
        whole = _select(built[0], False)
        for b in built[1:]:  # left-deep chain of fresh trees (exp.union would copy the growing chain)
            whole = exp.Union(this=whole, expression=_select(b, False), distinct=query.distinct)
    used = {s.view for m in members for s in m.origin.atom_sources if s.view}
    kinds = tuple(frozenset(term_kind(tv) for b in built for n, tv in b.bound if n == v.name and tv is not None)
                  for v in query.projection)
    return Unfolding(members, whole, tuple(removed), tuple(v for v in views.by_text.values() if v.name in used),
                     checks.compiled(), kinds)


def _terms(b: _Built) -> tuple[str | None, ...]:
    """The term each answer column of a member holds (:attr:`SqlMember.terms`): ``bnode``, ``iri``, a literal's
    datatype IRI or ``@tag``; None where the member does not bind it."""
    kinds = [None if tv is None else term_kind(tv) for _, tv in b.bound]
    return tuple(None if k is None else k[0] if k[0] != "literal" else k[1] for k in kinds)
