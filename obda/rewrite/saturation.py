"""The entailed hierarchy of an OWL 2 QL TBox (DL-Lite_R closure), computed once per ontology.

Nodes of the *concept graph* are basic concepts: atomic classes ``A``, ``∃P``,
``∃P⁻`` (object properties) and ``∃U`` (data properties), plus ``owl:Thing``.
Its told edges, each labelled with the axiom that justifies it, are:

* ``B ⊑ C`` for every ``SubClassOf(B, C)`` with ``C`` basic;
* ``B ⊑ ∃R`` for every ``SubClassOf(B, ∃R.A)`` (a qualified existential implies
  the unqualified one);
* ``∃R ⊑ ∃S`` and ``∃R⁻ ⊑ ∃S⁻`` for every role inclusion ``R ⊑ S``;
* ``B ⊑ owl:Thing`` for every basic concept (implicit, not stored).

Nodes of the *role graph* are object properties, their inverses, and data
properties; ``R ⊑ S`` gives ``R → S`` and ``R⁻ → S⁻``.

Reachability in these graphs is exactly entailed subsumption between basic
concepts and between roles in DL-Lite_R when every concept is satisfiable
(disjointness axioms only make concepts empty; they are used for pruning, not
for subsumption).  This is what Ontop calls the saturated TBox: T-mappings
(``obda.rewrite.expand_atom``) read atoms "modulo" this hierarchy.

The saturation also precomputes the *generators* used by the tree-witness
rewriting: every concept ``∃R.A`` / ``∃R`` on the right of a told axiom names a
kind of anonymous individual of the canonical model, with its type (the basic
concepts it belongs to) and the generators of its own children.
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from obda.model.ontology import (
    OWL_THING,
    AtomicConcept,
    BasicConcept,
    DisjointClasses,
    DisjointProperties,
    Exists,
    Ontology,
    Role,
    SubClassOf,
    SubPropertyOf,
)

THING = AtomicConcept(OWL_THING)


def exists(role: Role) -> Exists:
    """The unqualified basic concept ``∃role``."""
    return Exists(role, None)


def _role_inv(role: Role) -> Role | None:
    return None if role.data else role.inv()


@dataclass(frozen=True)
class GeneratorChild:
    """A child generator ``gen`` of an anonymous individual, created by ``axiom``."""

    gen: Exists
    axiom: SubClassOf


class Saturation:
    """Entailed concept and role hierarchy of one ontology, plus tree-witness generators.

    Build with :func:`saturate` (memoised per ontology object).  All queries are
    dictionary look-ups after construction, except derivation paths (the axioms
    that justify an entailed inclusion), which are computed on demand and cached.
    """

    def __init__(self, ontology: Ontology):
        self.ontology = ontology
        self._concept_up: dict[BasicConcept, list[tuple[BasicConcept, str]]] = {}
        self._concept_down: dict[BasicConcept, list[tuple[BasicConcept, str]]] = {}
        self._role_up: dict[Role, list[tuple[Role, str]]] = {}
        self._role_down: dict[Role, list[tuple[Role, str]]] = {}
        self.object_props: set[str] = set(ontology.object_properties)
        self.data_props: set[str] = set(ontology.data_properties)
        self.classes: set[str] = set(ontology.classes) - {OWL_THING}
        # told generator axioms: B ⊑ ∃R.A (and B ⊑ ∃R), keyed by the right-hand side
        self.generator_axioms: dict[Exists, list[SubClassOf]] = {}
        self.disjoint_concepts: list[tuple[BasicConcept, BasicConcept, str]] = []
        self.disjoint_roles: list[tuple[Role, Role, str]] = []

        for ax in ontology.axioms:
            if isinstance(ax, SubClassOf):
                self._add_subclass(ax)
            elif isinstance(ax, SubPropertyOf):
                self._add_subproperty(ax)
            elif isinstance(ax, DisjointClasses):
                self._note_concept(ax.left)
                self._note_concept(ax.right)
                self.disjoint_concepts.append((ax.left, ax.right, f"{ax.left} ⊓ {ax.right} ⊑ ⊥"))
            elif isinstance(ax, DisjointProperties):
                self._note_role(ax.left)
                self._note_role(ax.right)
                self.disjoint_roles.append((ax.left, ax.right, f"{ax.left} ⊓ {ax.right} ⊑ ⊥"))

        self.concepts: frozenset[BasicConcept] = frozenset(self._all_concepts())
        self.roles: frozenset[Role] = frozenset(self._all_roles())
        self._concept_anc: dict[BasicConcept, frozenset[BasicConcept]] = {}
        self._role_anc: dict[Role, frozenset[Role]] = {}
        for c in self.concepts:
            self.concept_ancestors(c)
        for r in self.roles:
            self.role_ancestors(r)
        self._concept_desc: dict[BasicConcept, dict[BasicConcept, tuple[str, ...]]] = {}
        self._role_desc: dict[Role, dict[Role, tuple[str, ...]]] = {}
        self._concept_paths: dict[BasicConcept, dict[BasicConcept, tuple[str, ...]]] = {}
        self._role_paths: dict[Role, dict[Role, tuple[str, ...]]] = {}

        # generators of anonymous individuals (tree witnesses)
        self.generators: tuple[Exists, ...] = tuple(sorted(self.generator_axioms, key=str))
        self._gen_seeds: dict[Exists, tuple[BasicConcept, ...]] = {}
        self._gen_type: dict[Exists, frozenset[BasicConcept]] = {}
        for g in self.generators:
            seeds: list[BasicConcept] = []
            inv = _role_inv(g.role)
            if inv is not None:
                seeds.append(exists(inv))
                if g.filler is not None:
                    seeds.append(AtomicConcept(g.filler))
            self._gen_seeds[g] = tuple(seeds)
            typ: set[BasicConcept] = set()
            for s in seeds:
                typ |= self.concept_ancestors(s)
            self._gen_type[g] = frozenset(typ)
        self._gen_children: dict[Exists, tuple[GeneratorChild, ...]] = {}
        for g in self.generators:
            kids = []
            typ = self._gen_type[g]
            for g2 in self.generators:
                for ax in self.generator_axioms[g2]:
                    if ax.sub in typ:
                        kids.append(GeneratorChild(g2, ax))
                        break
            self._gen_children[g] = tuple(kids)
        # what can hold of an anonymous individual: classes of generator types, edge roles
        self.anonymous_classes: frozenset[str] = frozenset(
            c.iri for t in self._gen_type.values() for c in t if isinstance(c, AtomicConcept)
        )
        edge_roles: set[Role] = set()
        for g in self.generators:
            edge_roles |= self.role_ancestors(g.role)
            inv = _role_inv(g.role)
            if inv is not None:
                edge_roles |= self.role_ancestors(inv)
        self.anonymous_edge_roles: frozenset[Role] = frozenset(edge_roles)

    # ------------------------------------------------------------------ building
    def _note_concept(self, c: BasicConcept) -> None:
        if isinstance(c, AtomicConcept):
            if c.iri != OWL_THING:
                self.classes.add(c.iri)
        else:
            self._note_role(c.role)
            if c.filler is not None and c.filler != OWL_THING and not c.role.data:
                self.classes.add(c.filler)

    def _note_role(self, r: Role) -> None:
        (self.data_props if r.data else self.object_props).add(r.prop)

    def _edge(self, graph_up, graph_down, sub, sup, label) -> None:
        if sub == sup:
            return
        graph_up.setdefault(sub, []).append((sup, label))
        graph_down.setdefault(sup, []).append((sub, label))

    def _add_subclass(self, ax: SubClassOf) -> None:
        sub, sup = ax.sub, ax.sup
        self._note_concept(sub)
        self._note_concept(sup)
        if isinstance(sub, Exists) and sub.filler is not None:
            # ∃R.A on the left is outside OWL 2 QL; the loader reports it.  It
            # has no sound reading as a basic-concept inclusion, so ignore it.
            return
        label = str(ax)
        if isinstance(sup, Exists):
            self.generator_axioms.setdefault(sup, []).append(ax)
            self._edge(self._concept_up, self._concept_down, sub, exists(sup.role), label)
        else:
            self._edge(self._concept_up, self._concept_down, sub, sup, label)

    def _add_subproperty(self, ax: SubPropertyOf) -> None:
        self._note_role(ax.sub)
        self._note_role(ax.sup)
        label = str(ax)
        pairs = [(ax.sub, ax.sup)]
        if not ax.sub.data and not ax.sup.data:
            pairs.append((ax.sub.inv(), ax.sup.inv()))
        for r, s in pairs:
            self._edge(self._role_up, self._role_down, r, s, label)
            self._edge(self._concept_up, self._concept_down, exists(r), exists(s), label)

    def _all_concepts(self) -> Iterable[BasicConcept]:
        yield THING
        for c in self.classes:
            yield AtomicConcept(c)
        for r in self._all_roles():
            yield exists(r)
        yield from self._concept_up
        yield from self._concept_down

    def _all_roles(self) -> Iterable[Role]:
        for p in self.object_props:
            yield Role(p)
            yield Role(p, True)
        for u in self.data_props:
            yield Role(u, data=True)
        yield from self._role_up
        yield from self._role_down

    # ------------------------------------------------------------------ lookups
    def role_of(self, prop: str) -> Role:
        """The role named by a property IRI of a query atom (data or object property)."""
        if prop in self.data_props and prop not in self.object_props:
            return Role(prop, data=True)
        return Role(prop)

    def is_data_property(self, prop: str) -> bool:
        return self.role_of(prop).data

    def _concept_up_edges(self, c: BasicConcept) -> list[tuple[BasicConcept, str]]:
        edges = self._concept_up.get(c, [])
        if c != THING:
            edges = edges + [(THING, f"{c} ⊑ owl:Thing")]
        return edges

    def _concept_down_edges(self, c: BasicConcept) -> list[tuple[BasicConcept, str]]:
        edges = self._concept_down.get(c, [])
        if c == THING:
            told = {s for s, _ in edges}
            edges = edges + [
                (s, f"{s} ⊑ owl:Thing") for s in sorted(self.concepts, key=concept_key) if s != THING and s not in told
            ]
        return edges

    def concept_ancestors(self, c: BasicConcept) -> frozenset[BasicConcept]:
        """All ``D`` with ``c ⊑* D`` (including ``c`` and ``owl:Thing``)."""
        got = self._concept_anc.get(c)
        if got is None:
            got = frozenset(_bfs(c, self._concept_up_edges))
            self._concept_anc[c] = got
        return got

    def role_ancestors(self, r: Role) -> frozenset[Role]:
        """All ``S`` with ``r ⊑* S`` (including ``r``)."""
        got = self._role_anc.get(r)
        if got is None:
            got = frozenset(_bfs(r, lambda x: self._role_up.get(x, [])))
            self._role_anc[r] = got
        return got

    def is_subconcept(self, sub: BasicConcept, sup: BasicConcept) -> bool:
        return sup in self.concept_ancestors(sub)

    def is_subrole(self, sub: Role, sup: Role) -> bool:
        return sup in self.role_ancestors(sub)

    def concept_descendants(self, c: BasicConcept) -> dict[BasicConcept, tuple[str, ...]]:
        """All ``B`` with ``B ⊑* c``, each with a shortest chain of axioms from ``B`` up to ``c``."""
        got = self._concept_desc.get(c)
        if got is None:
            got = _paths_down(c, self._concept_down_edges)
            self._concept_desc[c] = got
        return got

    def role_descendants(self, r: Role) -> dict[Role, tuple[str, ...]]:
        """All ``S`` with ``S ⊑* r``, each with a shortest chain of axioms from ``S`` up to ``r``."""
        got = self._role_desc.get(r)
        if got is None:
            got = _paths_down(r, lambda x: self._role_down.get(x, []))
            self._role_desc[r] = got
        return got

    def concept_derivation(self, sub: BasicConcept, sup: BasicConcept) -> tuple[str, ...]:
        """The axioms of a shortest derivation of ``sub ⊑* sup`` (empty if equal or not entailed)."""
        return self.concept_descendants(sup).get(sub, ())

    def role_derivation(self, sub: Role, sup: Role) -> tuple[str, ...]:
        return self.role_descendants(sup).get(sub, ())

    # ------------------------------------------------------------------ generators
    def generator_type(self, g: Exists) -> frozenset[BasicConcept]:
        """Basic concepts of an anonymous individual created by ``∃R.A``: up-closure of ``∃R⁻`` and ``A``.

        Empty for a data property generator (the anonymous element is a literal).
        """
        return self._gen_type[g]

    def generator_seeds(self, g: Exists) -> tuple[BasicConcept, ...]:
        return self._gen_seeds[g]

    def generator_children(self, g: Exists) -> tuple[GeneratorChild, ...]:
        """The generators of the children of an anonymous individual created by ``g``."""
        return self._gen_children[g]

    def is_literal_generator(self, g: Exists) -> bool:
        return g.role.data

    # ------------------------------------------------------------------ disjointness
    def concepts_disjoint(self, concepts: Iterable[BasicConcept]) -> str | None:
        """The disjointness axiom violated by an individual in all ``concepts``, if any."""
        if not self.disjoint_concepts:
            return None
        anc: set[BasicConcept] = set()
        for c in concepts:
            anc |= self.concept_ancestors(c)
        for left, right, label in self.disjoint_concepts:
            if left in anc and right in anc:
                return label
        return None

    def roles_disjoint(self, roles: Iterable[Role]) -> str | None:
        """The disjointness axiom violated by a pair of individuals related by all ``roles``, if any."""
        if not self.disjoint_roles:
            return None
        anc: set[Role] = set()
        for r in roles:
            anc |= self.role_ancestors(r)
        for left, right, label in self.disjoint_roles:
            if left in anc and right in anc:
                return label
        return None


def concept_key(c: BasicConcept) -> tuple:
    """Sort key: atomic classes first (they cover their whole down-set in T-mappings), then by text."""
    return (0 if isinstance(c, AtomicConcept) else 1, str(c), repr(c))


def _bfs(start, up_edges) -> set:
    seen = {start}
    todo = [start]
    while todo:
        x = todo.pop()
        for y, _ in up_edges(x):
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return seen


def _paths_down(target, down_edges) -> dict:
    """Breadth-first from ``target`` down the told edges: every descendant with its axiom chain."""
    paths = {target: ()}
    queue = deque([target])
    while queue:
        x = queue.popleft()
        for y, label in down_edges(x):
            if y not in paths:
                paths[y] = (label,) + paths[x]
                queue.append(y)
    return paths


_CACHE: dict[int, tuple[weakref.ref, Saturation]] = {}


def _forget(key: int, ref: weakref.ref, cache: dict = _CACHE) -> None:
    """Weakref callback: drop the cache entry of a collected ontology (not a newer one at the same id)."""
    hit = cache.get(key)
    if hit is not None and hit[0] is ref:
        del cache[key]


def saturate(ontology: Ontology) -> Saturation:
    """The :class:`Saturation` of ``ontology``, computed once per ontology object (cached by identity)."""
    key = id(ontology)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is ontology:
        return hit[1]
    sat = Saturation(ontology)
    try:
        ref = weakref.ref(ontology, lambda r, k=key, f=_forget: f(k, r))
    except TypeError:  # pragma: no cover - Ontology supports weak references
        return sat
    _CACHE[key] = (ref, sat)
    return sat
