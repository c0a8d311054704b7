"""Homomorphisms of a tree witness's atoms into the canonical model's tree of anonymous individuals.

Part of the tree-witness rewriting (:mod:`obda.rewrite.treewitness`).  A node of the tree is a word of
generators (``∃R.B`` axioms) from its top; :class:`Embedder` maps the witness's interior variables to nodes and
its roots to the top (ROOT), searching one variable next to an already mapped one (so that a cyclic TBox,
``A ⊑ ∃R.A``, terminates: ``k`` variables reach depth ``k`` at most); :func:`hom_steps` names the axioms a
homomorphism uses, for the explanation of a rewriting.
"""

from __future__ import annotations

from typing import Iterator

from obda.model.ontology import OWL_THING, AtomicConcept, Exists
from obda.model.query import Atom, ClassAtom, Term, Var
from obda.rewrite.saturation import Saturation

Node = tuple[Exists, ...]  # a word of generators from the top of the tree; () is the root individual
ROOT: Node = ()


class Embedder:
    """Backtracking search of a homomorphism from ``q_t`` into the tree under a generator."""

    def __init__(self, sat: Saturation, atoms: list[Atom], interior: frozenset[Var], roots: frozenset[Term]):
        self.sat = sat
        self.atoms = atoms
        self.interior = interior
        self.roots = roots
        self.by_var: dict[Var, list[Atom]] = {v: [] for v in interior}
        for a in atoms:
            for t in set(a.terms):
                if t in self.by_var:
                    self.by_var[t].append(a)

    def embed(self, top: Exists, top_vars: list[Var]) -> dict[Term, Node] | None:
        """A homomorphism sending ``top_vars`` to the top node ``(top,)`` and roots to ROOT."""
        h: dict[Term, Node] = {r: ROOT for r in self.roots}
        for v in top_vars:
            h[v] = (top,)
        for v in top_vars:
            if not self._check(v, h):
                return None
        order = self._order(top_vars)
        return self._search(order, 0, h)

    def _order(self, start: list[Var]) -> list[Var]:
        seen = set(start)
        order: list[Var] = []
        queue = list(start)
        while queue:
            v = queue.pop(0)
            for a in self.by_var[v]:
                for t in a.terms:
                    if t in self.interior and t not in seen:
                        seen.add(t)
                        order.append(t)
                        queue.append(t)
        return order

    def _search(self, order: list[Var], i: int, h: dict[Term, Node]) -> dict[Term, Node] | None:
        if i == len(order):
            return dict(h)
        v = order[i]
        for cand in self._candidates(v, h):
            h[v] = cand
            if self._check(v, h):
                got = self._search(order, i + 1, h)
                if got is not None:
                    return got
            del h[v]
        return None

    def _candidates(self, v: Var, h: dict[Term, Node]) -> Iterator[Node]:
        # v is adjacent (through some atom) to an already mapped interior variable
        for a in self.by_var[v]:
            for t in a.terms:
                if t != v and t in h and h[t] != ROOT:
                    n = h[t]
                    if len(n) > 1:
                        yield n[:-1]
                    for child in self.sat.generator_children(n[-1]):
                        yield n + (child.gen,)
                    return

    def _check(self, v: Var, h: dict[Term, Node]) -> bool:
        for a in self.by_var[v]:
            if all(t in h for t in a.terms) and not _holds(self.sat, a, h):
                return False
        return True


def _holds(sat: Saturation, a: Atom, h: dict[Term, Node]) -> bool:
    """Whether atom ``a`` holds in the tree under homomorphism ``h`` (at least one term anonymous)."""
    if isinstance(a, ClassAtom):
        n = h[a.term]
        g = n[-1]
        if sat.is_literal_generator(g):
            return False
        return a.cls == OWL_THING or AtomicConcept(a.cls) in sat.generator_type(g)
    role = _edge_role(sat, h[a.subject], h[a.object])
    return role is not None and sat.is_subrole(role, sat.role_of(a.prop))


def _edge_role(sat: Saturation, s: Node, o: Node):
    """The role of the tree edge from node ``s`` to node ``o`` (None if they are not adjacent)."""
    if len(o) == len(s) + 1 and o[:-1] == s:
        return o[-1].role
    if len(s) == len(o) + 1 and s[:-1] == o:
        g = s[-1]
        return None if g.role.data else g.role.inv()
    return None


def hom_steps(sat: Saturation, atoms: list[Atom], h: dict[Term, Node]) -> tuple[str, ...]:
    """The axioms a homomorphism into the tree uses: child generation, then types and edges."""
    steps: list[str] = []
    nodes = sorted({n for n in h.values() if len(n) > 1}, key=len)
    for n in nodes:
        for child in sat.generator_children(n[-2]):
            if child.gen == n[-1]:
                steps.append(str(child.axiom))
                break
    for a in atoms:
        if isinstance(a, ClassAtom):
            if a.cls == OWL_THING:
                continue
            g = h[a.term][-1]
            target = AtomicConcept(a.cls)
            for seed in sat.generator_seeds(g):
                if sat.is_subconcept(seed, target):
                    steps.extend(sat.concept_derivation(seed, target))
                    break
        else:
            role = _edge_role(sat, h[a.subject], h[a.object])
            if role is not None:
                steps.extend(sat.role_derivation(role, sat.role_of(a.prop)))
    return tuple(steps)
