"""T-mappings: the atoms whose assertions entail a query atom through the hierarchy.

``expand_atom(A(x))`` lists ``B(x)`` for every class ``B ⊑* A``, ``P(x, _)`` for
``∃P ⊑* A``, ``P(_, x)`` for ``∃P⁻ ⊑* A`` and ``U(x, _)`` for a data property
with ``∃U ⊑* A``; ``expand_atom(R(x, y))`` lists ``S(x, y)`` for ``S ⊑* R`` and
``S(y, x)`` for ``S⁻ ⊑* R``.  ``⊑*`` is the *entailed* hierarchy of
:mod:`obda.rewrite.saturation`.  The unfolder takes, per atom of a rewritten
CQ, the product of these alternatives with the mappings of their predicates:
only alternatives that have mappings multiply, which keeps NPD-size
hierarchies out of the UCQ (Ontop's T-mappings, done lazily per atom).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from obda.model.ontology import AtomicConcept, BasicConcept, Ontology
from obda.model.query import Atom, ClassAtom, PropertyAtom, Term, Var
from obda.rewrite.saturation import Saturation, concept_key, exists, saturate


@dataclass(frozen=True)
class AtomAlternative:
    """An atom that entails the expanded atom, and the hierarchy axioms that say why.

    Fresh variables (the unconstrained end of ``P(x, _)``) are
    ``Var(name, bnode=True)`` with names unique in the process (``_e1``, ``_e2``, ...).
    """

    atom: Atom
    steps: tuple[str, ...]


_FRESH = itertools.count(1)


def _global_fresh() -> Var:
    return Var(f"_e{next(_FRESH)}", bnode=True)


def concept_atom(concept: BasicConcept, term: Term, time: Var | None, fresh: Callable[[], Var]) -> Atom:
    """The query atom saying ``term`` is an instance of basic concept ``concept``.

    ``∃P`` becomes ``P(term, _f)``, ``∃P⁻`` becomes ``P(_f, term)``, with ``_f`` from ``fresh``.
    """
    if isinstance(concept, AtomicConcept):
        return ClassAtom(concept.iri, term, time)
    if concept.role.inverse:
        return PropertyAtom(concept.role.prop, fresh(), term, time)
    return PropertyAtom(concept.role.prop, term, fresh(), time)


def atom_concept(atom: Atom, term: Term, sat: Saturation) -> BasicConcept | None:
    """The basic concept that ``atom`` asserts of ``term`` (None if ``term`` is not in it)."""
    if isinstance(atom, ClassAtom):
        return AtomicConcept(atom.cls) if atom.term == term else None
    role = sat.role_of(atom.prop)
    if atom.subject == term:
        return exists(role)
    if atom.object == term and not role.data:
        return exists(role.inv())
    return None


def expand_atom(atom: Atom, ontology: Ontology) -> tuple[AtomAlternative, ...]:
    """All atoms whose assertions entail ``atom`` through the entailed hierarchy (``atom`` itself first).

    The time label of ``atom`` is kept on every alternative.
    """
    return expand_with(atom, saturate(ontology), _global_fresh)


def expand_with(atom: Atom, sat: Saturation, fresh: Callable[[], Var]) -> tuple[AtomAlternative, ...]:
    """:func:`expand_atom` over a given saturation and fresh-variable supply."""
    out: list[AtomAlternative] = []
    if isinstance(atom, ClassAtom):
        target: BasicConcept = AtomicConcept(atom.cls)
        subs = sat.concept_descendants(target)
        for c in sorted(subs, key=lambda c: (c != target, concept_key(c))):
            out.append(AtomAlternative(concept_atom(c, atom.term, atom.time, fresh), subs[c]))
        return tuple(out)
    target_role = sat.role_of(atom.prop)
    subs_r = sat.role_descendants(target_role)
    for r in sorted(subs_r, key=lambda r: (r != target_role, r.inverse, r.prop)):
        if r.inverse:
            alt = PropertyAtom(r.prop, atom.object, atom.subject, atom.time)
        else:
            alt = PropertyAtom(r.prop, atom.subject, atom.object, atom.time)
        out.append(AtomAlternative(alt, subs_r[r]))
    return tuple(out)


def concept_cover(concepts: set[BasicConcept], sat: Saturation) -> list[BasicConcept]:
    """Few basic concepts whose T-mapping expansions together cover ``concepts`` (a down-closed set).

    The expansion of an atomic class covers its whole down-set; the expansion of
    ``P(x, _)`` covers only ``∃S`` for roles ``S ⊑* P`` (a property atom is
    expanded through the role hierarchy, not the concept hierarchy), so concepts
    below ``∃P`` reached through classes need their own atom.  Greedy: take a
    maximal uncovered concept (atomic classes first), remove what it covers, repeat.
    """
    remaining = set(concepts)
    out: list[BasicConcept] = []
    order = sorted(remaining, key=concept_key)
    for m in order:
        if m not in remaining:
            continue
        # m must be maximal among the remaining ones (up to equivalence)
        if any(
            r in remaining and r != m and m not in sat.concept_ancestors(r) for r in sat.concept_ancestors(m)
        ):
            continue
        out.append(m)
        remaining -= _covered(m, sat)
        remaining.discard(m)
    while remaining:  # concepts whose maximal ancestors were visited before them
        m = min(
            (c for c in remaining if not any(
                r in remaining and r != c and c not in sat.concept_ancestors(r) for r in sat.concept_ancestors(c))),
            key=concept_key,
        )
        out.append(m)
        remaining -= _covered(m, sat)
        remaining.discard(m)
    return out


def _covered(c: BasicConcept, sat: Saturation) -> set[BasicConcept]:
    if isinstance(c, AtomicConcept):
        return set(sat.concept_descendants(c))
    return {exists(r) for r in sat.role_descendants(c.role)}


__all__ = ["AtomAlternative", "expand_atom", "expand_with", "concept_atom", "atom_concept", "concept_cover"]
