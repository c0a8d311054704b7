"""Candidates: per atom of a rewritten CQ its mapping options, and the choices of one option per atom.

Private helper of :mod:`obda.mapping.unfold`.  An option is a hierarchy alternative of the atom (blank nodes
freshened) with a matching mapping assertion; its single-atom SPJ is a :class:`~obda.mapping._unfold_views.Branch`.
The branches of an atom are grouped by term shape on its join variables (:func:`_atom_options`): a group with
one provably duplicate-free branch is inlined, any other is answered by its per-atom view (:class:`_Views`,
shared by every member that uses it), and disjoint duplicate-free branches may also be lifted into members of
their own while the CQ stays within :data:`LIFT_LIMIT` (:func:`_choose`).  :func:`_compatible_choices`
searches the product of the options, cutting choices whose shared variables can never be equal.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from itertools import combinations

from obda.mapping._unfold_compare import equal_terms
from obda.mapping._unfold_instances import _Memo
from obda.mapping._unfold_members import _Member, _not_null, _unfold_atom
from obda.mapping._unfold_optimize import canonical_key, simplify
from obda.mapping._unfold_terms import TermValue, Unsat
from obda.mapping._unfold_views import (
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
    view_terms,
)
from obda.model.mapping import TermType
from obda.model.query import CQ, Atom, ClassAtom, Var
from obda.model.sources import Sources


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


def _option_name(a) -> str:
    return f"view {a.view.name}" if isinstance(a, ViewUse) else a.triples_map.name


def _describe_choice(branch: int, choice) -> str:
    return f"branch {branch}: " + " ∧ ".join(f"{atom} ← {_option_name(a)}" for atom, _, a, _ in choice)


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
