"""OWL 2 QL (DL-Lite_R) TBoxes as typed objects.

``obda.ontology`` loads OWL files into an :class:`Ontology`; ``obda.rewrite``
compiles its axioms into queries.  Only the OWL 2 QL fragment is represented:

* basic concepts ``A``, ``∃R`` and ``∃R⁻`` (``R`` an object property), ``∃U``
  (``U`` a data property: "has some value for U");
* concept inclusions ``B ⊑ C`` with ``C`` a basic concept or ``∃R.A``
  (qualified existential, only on the right);
* role inclusions ``R ⊑ S`` over object properties and their inverses, data
  property inclusions ``U ⊑ V``;
* disjointness of concepts or roles (used only for consistency checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from obda.errors import Location

OWL_THING = "http://www.w3.org/2002/07/owl#Thing"


@dataclass(frozen=True, order=True)
class Role:
    """An object property ``prop`` or its inverse; or a data property (``data=True``)."""

    prop: str
    inverse: bool = False
    data: bool = False

    def inv(self) -> "Role":
        if self.data:
            raise ValueError("a data property has no inverse")
        return Role(self.prop, not self.inverse)

    def __str__(self) -> str:
        from obda.model.query import short_iri

        return short_iri(self.prop) + ("⁻" if self.inverse else "")


@dataclass(frozen=True, order=True)
class AtomicConcept:
    iri: str

    def __str__(self) -> str:
        from obda.model.query import short_iri

        return short_iri(self.iri)


@dataclass(frozen=True, order=True)
class Exists:
    """``∃R.A`` (``filler`` a class IRI) or ``∃R`` (``filler`` None, i.e. owl:Thing)."""

    role: Role
    filler: str | None = None

    def __str__(self) -> str:
        from obda.model.query import short_iri

        return f"∃{self.role}" + (f".{short_iri(self.filler)}" if self.filler else "")


BasicConcept = Union[AtomicConcept, Exists]  # Exists with filler None only on the left


@dataclass(frozen=True)
class SubClassOf:
    sub: BasicConcept
    sup: BasicConcept  # AtomicConcept, Exists(role) or Exists(role, filler)
    location: Location = field(default_factory=Location, compare=False)

    def __str__(self) -> str:
        return f"{self.sub} ⊑ {self.sup}"


@dataclass(frozen=True)
class SubPropertyOf:
    sub: Role
    sup: Role
    location: Location = field(default_factory=Location, compare=False)

    def __str__(self) -> str:
        return f"{self.sub} ⊑ {self.sup}"


@dataclass(frozen=True)
class DisjointClasses:
    left: BasicConcept
    right: BasicConcept
    location: Location = field(default_factory=Location, compare=False)


@dataclass(frozen=True)
class DisjointProperties:
    left: Role
    right: Role
    location: Location = field(default_factory=Location, compare=False)


Axiom = Union[SubClassOf, SubPropertyOf, DisjointClasses, DisjointProperties]


@dataclass(frozen=True)
class ProfileFinding:
    """An axiom outside OWL 2 QL: the axiom (as text) and why it is outside."""

    axiom: str
    reason: str
    location: Location = field(default_factory=Location)

    def __str__(self) -> str:
        return f"{self.location}: axiom outside OWL 2 QL: {self.axiom}: {self.reason}"


@dataclass(frozen=True)
class Ontology:
    """The vocabulary and the OWL 2 QL axioms of one or more ontology files."""

    classes: frozenset[str] = frozenset()
    object_properties: frozenset[str] = frozenset()
    data_properties: frozenset[str] = frozenset()
    axioms: tuple[Axiom, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()  # (iri, label)
    findings: tuple[ProfileFinding, ...] = ()  # axioms ignored in lenient mode
    files: tuple[str, ...] = ()
    # (kind, iri, location): classes and properties axioms use that no declaration names (a typo, often)
    undeclared: tuple[tuple[str, str, Location], ...] = ()

    def label(self, iri: str) -> str | None:
        for i, lab in self.labels:
            if i == iri:
                return lab
        return None

    def is_class(self, iri: str) -> bool:
        return iri in self.classes or iri == OWL_THING

    def is_object_property(self, iri: str) -> bool:
        return iri in self.object_properties

    def is_data_property(self, iri: str) -> bool:
        return iri in self.data_properties

    def knows(self, iri: str) -> bool:
        return self.is_class(iri) or self.is_object_property(iri) or self.is_data_property(iri)
