"""Containment between CQs read modulo the hierarchy, and pruning of a UCQ.

``sub ⊆ sup`` (every answer of ``sub`` is an answer of ``sup``, over every
ABox, with atoms expanded by T-mappings) holds when there is a homomorphism
``h`` from ``sup`` into ``sub`` such that

* answer variables and constants are mapped to themselves;
* each atom ``α`` of ``sup`` is sent to an atom ``β`` of ``sub`` that entails
  ``h(α)`` in the hierarchy (``B(x)`` entails ``A(x)`` if ``B ⊑* A``;
  ``P(x, y)`` entails ``A(x)`` if ``∃P ⊑* A``; ``S(x, y)`` entails ``R(x, y)``
  if ``S ⊑* R`` and ``R(y, x)`` if ``S ⊑* R⁻``): the H-closed ABox satisfies
  ``β`` hence ``h(α)``;
* time labels are mapped along (static to static, a time variable to a time
  variable);
* every filter ``f`` of ``sup`` becomes a filter of ``sub`` (``h(f)`` is one of
  ``sub``'s comparisons, possibly flipped) — a conservative test.

This is sufficient (sound) for containment; pruning only needs soundness.
"""

from __future__ import annotations

from obda.model.ontology import AtomicConcept
from obda.model.query import CQ, Atom, ClassAtom, Comparison, PropertyAtom, Shifted, Term, Var
from obda.rewrite.expand import atom_concept
from obda.rewrite.saturation import Saturation


def _bind(h: dict[Term, Term], pairs: list[tuple[Term, Term]]) -> list[Term] | None:
    """Extend ``h`` with ``pairs`` (sup term ↦ sub term); the newly bound keys, or None on clash."""
    added: list[Term] = []
    for t, s in pairs:
        if not isinstance(t, Var):
            if t != s:
                for k in added:
                    del h[k]
                return None
            continue
        got = h.get(t)
        if got is None:
            h[t] = s
            added.append(t)
        elif got != s:
            for k in added:
                del h[k]
            return None
    return added


def _time_pair(alpha: Atom, beta: Atom) -> list[tuple[Term, Term]] | None:
    if (alpha.time is None) != (beta.time is None):
        return None
    return [] if alpha.time is None else [(alpha.time, beta.time)]


def _matches(alpha: Atom, beta: Atom, sat: Saturation) -> list[list[tuple[Term, Term]]]:
    """Ways in which ``beta`` entails an instance of ``alpha``, as term pairings."""
    tp = _time_pair(alpha, beta)
    if tp is None:
        return []
    out = []
    if isinstance(alpha, ClassAtom):
        target = AtomicConcept(alpha.cls)
        for term in dict.fromkeys(beta.terms):
            c = atom_concept(beta, term, sat)
            if c is not None and sat.is_subconcept(c, target):
                out.append([(alpha.term, term)] + tp)
        return out
    if not isinstance(beta, PropertyAtom):
        return []
    rb, ra = sat.role_of(beta.prop), sat.role_of(alpha.prop)
    if sat.is_subrole(rb, ra):
        out.append([(alpha.subject, beta.subject), (alpha.object, beta.object)] + tp)
    if not rb.data and sat.is_subrole(rb.inv(), ra):
        out.append([(alpha.subject, beta.object), (alpha.object, beta.subject)] + tp)
    return out


def contained_in(sub: CQ, sup: CQ, answer: frozenset[Var], sat: Saturation) -> bool:
    """Whether ``sub ⊆ sup`` by a hierarchy-aware homomorphism ``sup → sub`` (see module doc)."""
    if sub.binds != sup.binds or sub.checks != sup.checks:  # a branch's CQs share its BINDs and checks
        return False
    h: dict[Term, Term] = {v: v for v in answer}
    sub_filters = set(sub.filters) | {f.flipped() for f in sub.filters}
    order = sorted(sup.atoms, key=lambda a: -sum(1 for t in a.terms if t in h or not isinstance(t, Var)))
    candidates = [[(b, m) for b in sub.atoms for m in _matches(a, b, sat)] for a in order]
    if any(not c for c in candidates):
        return False

    def filters_ok() -> bool:
        for f in sup.filters:
            g = Comparison(f.op, _mapped(h, f.left), _mapped(h, f.right), f.not_true)
            if g not in sub_filters:
                return False
        return True

    def go(i: int) -> bool:
        if i == len(order):
            return filters_ok()
        for _, pairs in candidates[i]:
            added = _bind(h, pairs)
            if added is None:
                continue
            if go(i + 1):
                return True
            for k in added:
                del h[k]
        return False

    return go(0)


def prune(
    cqs: list[tuple[CQ, tuple[str, ...]]], answer: frozenset[Var], sat: Saturation
) -> list[tuple[CQ, tuple[str, ...]]]:
    """Drop CQs contained in another CQ of the list (duplicates up to renaming included).

    Among equivalent CQs the one with fewest atoms (then the earliest) is kept;
    the survivors keep their original order.
    """
    order = sorted(range(len(cqs)), key=lambda i: (len(cqs[i][0].atoms), len(cqs[i][0].filters), i))
    kept: list[int] = []
    for i in order:
        cq = cqs[i][0]
        if any(contained_in(cq, cqs[k][0], answer, sat) for k in kept):
            continue
        kept = [k for k in kept if not contained_in(cqs[k][0], cq, answer, sat)]
        kept.append(i)
    return [cqs[i] for i in sorted(kept)]


def unsatisfiable(cq: CQ, sat: Saturation) -> str | None:
    """A disjointness axiom that no ABox can satisfy together with ``cq``, if any.

    Per snapshot: only atoms with the same time label constrain one individual.
    """
    if not sat.disjoint_concepts and not sat.disjoint_roles:
        return None
    concepts: dict[tuple[Term, Var | None], list] = {}
    roles: dict[tuple[Term, Term, Var | None], list] = {}
    for a in cq.atoms:
        for t in dict.fromkeys(a.terms):
            c = atom_concept(a, t, sat)
            if c is not None:
                concepts.setdefault((t, a.time), []).append(c)
        if isinstance(a, PropertyAtom):
            r = sat.role_of(a.prop)
            roles.setdefault((a.subject, a.object, a.time), []).append(r)
            if not r.data:
                roles.setdefault((a.object, a.subject, a.time), []).append(r.inv())
    for cs in concepts.values():
        why = sat.concepts_disjoint(cs)
        if why:
            return why
    for rs in roles.values():
        why = sat.roles_disjoint(rs)
        if why:
            return why
    return None


__all__ = ["contained_in", "prune", "unsatisfiable"]


def _mapped(h: dict, t):
    """A filter side under the homomorphism ``h`` (a shifted time variable moves with its variable)."""
    if isinstance(t, Shifted):
        return Shifted(h.get(t.var, t.var), t.micros)
    return h.get(t, t)
