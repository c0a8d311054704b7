"""Extracting the vocabulary and the DL-Lite_R axioms of an RDF graph of an OWL ontology.

The graph is read as the OWL 2 → RDF mapping.  Each TBox triple (or group of
triples such as ``owl:AllDisjointClasses``) is one source axiom; it becomes
zero or more DL-Lite_R axioms of :mod:`obda.model.ontology` and, when part of
it lies outside OWL 2 QL, one :class:`~obda.model.ontology.ProfileFinding`
(the axiom in functional syntax and every reason).  Parts of a source axiom
that are inside the profile and are entailed by it on their own are kept (a
sound weakening): ``A ⊑ B ⊓ ∀R.C`` keeps ``A ⊑ B``, ``A ≡ ∃R.B`` keeps
``A ⊑ ∃R.B``, ``DisjointUnion(A B C)`` keeps ``B ⊑ A``, ``C ⊑ A`` and the
disjointness of ``B`` and ``C``.

Individuals and ABox assertions (class and property assertions,
``owl:differentFrom``, negative assertions) are ignored; ``owl:sameAs`` is
reported, as OWL 2 QL has no individual equality.  ``owl:imports`` is not
followed: pass every file to :func:`obda.ontology.load_ontology`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from rdflib import Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF, RDFS

from obda.errors import Location
from obda.model.ontology import (
    Axiom,
    DisjointClasses,
    DisjointProperties,
    ProfileFinding,
    SubClassOf,
    SubPropertyOf,
)

from . import translate as T
from .extract_properties import PropertyAxioms
from .expressions import (
    BUILTIN_CLASSES,
    ClassExpression,
    ExpressionReader,
    Malformed,
    PropertyExpression,
    Usage,
    first_iri,
    is_datatype_iri,
    make_shortener,
    render_any,
    render_prop,
)

SWRL_IMP = URIRef("http://www.w3.org/2003/11/swrl#Imp")
_OBJECT_PROPERTY_TYPES = (
    OWL.ObjectProperty,
    OWL.TransitiveProperty,
    OWL.SymmetricProperty,
    OWL.AsymmetricProperty,
    OWL.ReflexiveProperty,
    OWL.IrreflexiveProperty,
    OWL.InverseFunctionalProperty,
)
_BUILTIN_ANNOTATION_PROPERTIES = frozenset(
    str(p)
    for p in (
        RDFS.label,
        RDFS.comment,
        RDFS.seeAlso,
        RDFS.isDefinedBy,
        OWL.versionInfo,
        OWL.deprecated,
        OWL.priorVersion,
        OWL.backwardCompatibleWith,
        OWL.incompatibleWith,
    )
)
_TOP_BOTTOM_PROPERTIES = frozenset(
    str(p) for p in (OWL.topObjectProperty, OWL.bottomObjectProperty, OWL.topDataProperty, OWL.bottomDataProperty)
)
_TOP_PROPERTIES = frozenset({str(OWL.topObjectProperty), str(OWL.topDataProperty)})
_PROPERTY_LINKS = (RDFS.subPropertyOf, OWL.equivalentProperty, OWL.propertyDisjointWith)

KEPT_MARK = "kept the part inside OWL 2 QL"

#: ``locate(source_triple, anchor_iris, keywords, partner_iri) -> Location``
Locate = Callable[[tuple, Sequence[str], Sequence[str], "str | None"], Location]


def _no_location(triple, anchors, keywords, partner) -> Location:
    return Location()


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract` finds in a graph."""

    classes: frozenset[str]
    object_properties: frozenset[str]
    data_properties: frozenset[str]
    axioms: tuple[Axiom, ...]
    labels: tuple[tuple[str, str], ...]
    findings: tuple[ProfileFinding, ...]
    undeclared: tuple[tuple[str, str], ...] = ()  # (kind, iri) used in axioms, declared nowhere


@dataclass
class _Draft:
    """One source axiom: its rendering, the DL-Lite_R axioms it yields and the reasons it is outside QL."""

    triple: tuple
    text: str
    keywords: tuple[str, ...]
    anchors: list[str]
    partner: str | None = None
    axioms: list[Axiom] = field(default_factory=list)
    reasons: list[T.Reason] = field(default_factory=list)


def axiom_text(ax: Axiom) -> str:
    """A readable DL rendering of a DL-Lite_R axiom (``A ⊑ ∃R.B``, ``A ⊓ B ⊑ ⊥``)."""
    if isinstance(ax, (DisjointClasses, DisjointProperties)):
        return f"{ax.left} ⊓ {ax.right} ⊑ ⊥"
    return str(ax)


def extract(graph: Graph, locate: Locate | None = None) -> Extraction:
    """The vocabulary, labels, DL-Lite_R axioms and OWL 2 QL findings of ``graph``."""
    return _Extractor(graph, locate or _no_location).run()


def check_profile(graph: Graph) -> list[ProfileFinding]:
    """The axioms of ``graph`` outside OWL 2 QL (without locations: a graph has no lines)."""
    return list(extract(graph).findings)


class _Extractor(PropertyAxioms):
    def __init__(self, graph: Graph, locate: Locate):
        self.g = graph
        self.locate = locate
        self.short = make_shortener(graph)
        self._type_vocabulary()
        self.usage = Usage()
        self.reader = ExpressionReader(graph, frozenset(self.data_props), frozenset(self.datatypes), self.usage)
        self.drafts: list[_Draft] = []

    # -- vocabulary typing --------------------------------------------------

    def _typed(self, *types) -> set[str]:
        return {str(s) for t in types for s in self.g.subjects(RDF.type, t) if isinstance(s, URIRef)}

    def _type_vocabulary(self) -> None:
        g = self.g
        self.datatypes = self._typed(RDFS.Datatype)
        self.object_decl = self._typed(*_OBJECT_PROPERTY_TYPES)
        data_decl = self._data_decl = self._typed(OWL.DatatypeProperty)
        self.classes_decl = self._typed(OWL.Class, RDFS.Class) - BUILTIN_CLASSES - self.datatypes
        annotation = self._typed(OWL.AnnotationProperty) | _BUILTIN_ANNOTATION_PROPERTIES
        declared = self.object_decl | data_decl

        def open_(p) -> bool:  # a property whose kind must be inferred from use
            return isinstance(p, URIRef) and str(p) not in declared and str(p) not in annotation

        probe = ExpressionReader(g, frozenset(), frozenset(self.datatypes))
        inferred: set[str] = set()
        for p, r in g.subject_objects(RDFS.range):
            if open_(p) and probe.is_data_range(r):
                inferred.add(str(p))
        for r, p in g.subject_objects(OWL.onProperty):
            if not open_(p):
                continue
            filler = g.value(r, OWL.someValuesFrom) or g.value(r, OWL.allValuesFrom)
            if (
                (filler is not None and probe.is_data_range(filler))
                or g.value(r, OWL.onDataRange) is not None
                or isinstance(g.value(r, OWL.hasValue), Literal)
            ):
                inferred.add(str(p))
        data = data_decl | inferred
        changed = True
        while changed:  # sub/equivalent/disjoint properties of data properties are data properties
            changed = False
            for link in _PROPERTY_LINKS:
                for s, o in g.subject_objects(link):
                    for a, b in ((s, o), (o, s)):
                        if str(a) in data and open_(b) and str(b) not in data:
                            data.add(str(b))
                            changed = True
        self.data_props = data
        self.annotation = annotation - self.object_decl - data

    def _is_annotation(self, node) -> bool:
        return isinstance(node, URIRef) and str(node) in self.annotation

    # -- drafting helpers ---------------------------------------------------

    def _draft(self, triple, text, keywords, anchors, partner=None) -> _Draft:
        d = _Draft(triple, text, tuple(keywords), [a for a in anchors if a], partner)
        self.drafts.append(d)
        return d

    def _anchor(self, node, expr=None) -> str | None:
        if isinstance(node, URIRef):
            return str(node)
        return first_iri(expr) if expr is not None else None

    def _include(self, d: _Draft, sub_e: ClassExpression, sup_e: ClassExpression) -> None:
        """Add ``sub_e ⊑ sup_e`` to the draft: its DL-Lite_R axioms and reasons."""
        failed = False
        sub = None
        try:
            sub = T.sub_concept(sub_e)
        except T.NotInProfile as x:
            d.reasons.append(x.reason)
            failed = True
        parts = T.sup_parts(sup_e)
        d.reasons.extend(p for p in parts if isinstance(p, T.Reason))
        if failed or sub is None:
            return
        self._add_sup_parts(d, sub, parts)

    @staticmethod
    def _add_sup_parts(d: _Draft, sub, parts) -> None:
        for p in parts:
            if isinstance(p, T.Positive):
                d.axioms.append(SubClassOf(sub, p.concept))
            elif isinstance(p, T.Negative):
                d.axioms.append(DisjointClasses(sub, p.concept))
            elif isinstance(p, T.Bottom):
                d.axioms.append(DisjointClasses(sub, sub))

    def _disjoint(self, d: _Draft, a: ClassExpression, b: ClassExpression) -> None:
        concepts = []
        for e in (a, b):
            try:
                concepts.append(T.sub_concept(e))
            except T.NotInProfile as x:
                d.reasons.append(x.reason)
                return
        if None not in concepts:  # owl:Nothing is disjoint with everything
            d.axioms.append(DisjointClasses(concepts[0], concepts[1]))

    def _prop(self, d: _Draft, node) -> PropertyExpression | None:
        p = self.reader.prop(node)
        if isinstance(p, Malformed):
            d.reasons.append(T.malformed(p.why))
            return None
        return p

    def _prop_pair(self, d: _Draft, s, o) -> tuple[PropertyExpression, PropertyExpression] | None:
        ps, po = self._prop(d, s), self._prop(d, o)
        if ps is None or po is None:
            return None
        if ps.data != po.data:
            d.reasons.append(T.malformed("it relates a data property and an object property"))
            return None
        return ps, po

    def _list(self, node) -> list:
        try:
            return list(self.g.items(node))
        except ValueError:
            return []

    def _r(self, e) -> str:
        return render_any(e, self.short)

    # -- class axioms -------------------------------------------------------

    def _class_axioms(self) -> None:
        g, cls = self.g, self.reader.cls
        for s, o in g.subject_objects(RDFS.subClassOf):
            if str(s) in self.datatypes:
                continue
            es, eo = cls(s), cls(o)
            d = self._draft((s, RDFS.subClassOf, o), f"SubClassOf({self._r(es)} {self._r(eo)})",
                            ("subclassof",), [self._anchor(s, es), first_iri(eo)], self._anchor(o, eo))
            self._include(d, es, eo)

        for s, o in g.subject_objects(OWL.equivalentClass):
            triple = (s, OWL.equivalentClass, o)
            if self.reader.is_data_range(s) or self.reader.is_data_range(o) or str(s) in self.datatypes:
                self._datatype_definition(triple, s, o)
                continue
            es, eo = cls(s), cls(o)
            d = self._draft(triple, f"EquivalentClasses({self._r(es)} {self._r(eo)})",
                            ("equivalentclass",), [self._anchor(s, es), first_iri(eo)], self._anchor(o, eo))
            self._include(d, es, eo)
            self._include(d, eo, es)

        # OWL 1 style class definitions on a named class: ``:A owl:unionOf (:B :C)`` means A ≡ B ⊔ C
        for p in (OWL.intersectionOf, OWL.unionOf, OWL.complementOf, OWL.oneOf):
            for s, o in g.subject_objects(p):
                if not isinstance(s, URIRef) or self.reader.is_data_range(s):
                    continue
                named, defined = cls(s), cls(s, anonymous=True)
                d = self._draft((s, p, o), f"EquivalentClasses({self._r(named)} {self._r(defined)})",
                                (p.fragment.lower(),), [str(s)])
                self._include(d, named, defined)
                self._include(d, defined, named)

        for s, o in g.subject_objects(OWL.disjointWith):
            es, eo = cls(s), cls(o)
            d = self._draft((s, OWL.disjointWith, o), f"DisjointClasses({self._r(es)} {self._r(eo)})",
                            ("disjointwith", "disjointclasses"), [self._anchor(s, es), first_iri(eo)],
                            self._anchor(o, eo))
            self._disjoint(d, es, eo)

        for n in g.subjects(RDF.type, OWL.AllDisjointClasses):
            members = [cls(m) for m in self._list(g.value(n, OWL.members))]
            d = self._draft((n, RDF.type, OWL.AllDisjointClasses),
                            f"DisjointClasses({' '.join(self._r(m) for m in members)})",
                            ("alldisjointclasses", "disjointclasses", "members"), [first_iri(m) for m in members])
            if len(members) < 2:
                d.reasons.append(T.malformed("owl:AllDisjointClasses needs at least two owl:members"))
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    self._disjoint(d, a, b)

        for s, o in g.subject_objects(OWL.disjointUnionOf):
            union = cls(s)
            members = [cls(m) for m in self._list(o)]
            d = self._draft((s, OWL.disjointUnionOf, o),
                            f"DisjointUnion({' '.join(self._r(e) for e in [union, *members])})",
                            ("disjointunion",), [self._anchor(s, union)])
            d.reasons.append(T.DISJOINT_UNION)
            for m in members:  # the entailed QL part: every member is a subclass, members pairwise disjoint
                self._include(d, m, union)
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    self._disjoint(d, a, b)

    def _datatype_definition(self, triple, s, o) -> None:
        d = self._draft(triple, f"DatatypeDefinition({self.short(str(s)) if isinstance(s, URIRef) else '_'} "
                        f"{self._r(self.reader.data_range(o))})", ("equivalentclass",),
                        [str(s) if isinstance(s, URIRef) else None])
        d.reasons.append(T.DATATYPE_DEFINITION)

    # -- other non-QL constructs -------------------------------------------

    def _other_axioms(self) -> None:
        g = self.g
        for s, o in g.subject_objects(OWL.hasKey):
            keys = " ".join(render_prop(self.reader.prop(p), self.short) for p in self._list(o))
            d = self._draft((s, OWL.hasKey, o), f"HasKey({self._r(self.reader.cls(s))} ({keys}))", ("haskey",),
                            [self._anchor(s)])
            d.reasons.append(T.HAS_KEY)
        for s, o in g.subject_objects(OWL.sameAs):
            d = self._draft((s, OWL.sameAs, o), f"SameIndividual({self._term(s)} {self._term(o)})",
                            ("sameas", "sameindividual"), [self._anchor(s)], self._anchor(o))
            d.reasons.append(T.SAME_AS)
        for n in g.subjects(RDF.type, SWRL_IMP):
            d = self._draft((n, RDF.type, SWRL_IMP), "DLSafeRule(...)", ("imp",), [])
            d.reasons.append(T.SWRL_RULE)

    def _term(self, node) -> str:
        return self.short(str(node)) if isinstance(node, URIRef) else str(node)

    # -- assembling ---------------------------------------------------------

    def run(self) -> Extraction:
        self._class_axioms()
        self._property_axioms()
        self._other_axioms()
        axioms: dict[Axiom, None] = {}
        findings: list[ProfileFinding] = []
        for d in self.drafts:
            kept = [a for a in dict.fromkeys(d.axioms) if not _tautology(a)]
            if kept:
                loc = self.locate(d.triple, d.anchors, d.keywords, d.partner)
                for ax in kept:
                    if ax not in axioms:
                        axioms[replace(ax, location=loc)] = None
            if d.reasons:
                keywords = tuple(k for r in d.reasons for k in r.keywords) + d.keywords
                loc = self.locate(d.triple, d.anchors, keywords, d.partner)
                reason = "; ".join(dict.fromkeys(r.text for r in d.reasons))
                if kept:
                    reason += f"; {KEPT_MARK}: " + ", ".join(axiom_text(a) for a in kept)
                findings.append(ProfileFinding(d.text, reason, loc))
        return Extraction(
            classes=self._classes(),
            object_properties=frozenset(self.object_decl | self.usage.object_properties) - _TOP_BOTTOM_PROPERTIES,
            data_properties=frozenset(self.data_props | self.usage.data_properties) - _TOP_BOTTOM_PROPERTIES,
            axioms=tuple(axioms),
            labels=self._labels(),
            findings=tuple(dict.fromkeys(findings)),
            undeclared=self._undeclared(),
        )

    def _undeclared(self) -> tuple[tuple[str, str], ...]:
        """The classes and properties the axioms use that no declaration (``a owl:Class``, ``a
        owl:ObjectProperty`` ...) names: often a typo (``rdfs:domain :WindSpeedReadin``)."""
        declared = self.classes_decl | self.object_decl | self._data_decl | self.annotation | BUILTIN_CLASSES
        used = [("class", c) for c in self.usage.classes - self.datatypes]
        used += [("property", p) for p in (self.usage.object_properties | self.usage.data_properties)
                 - _TOP_BOTTOM_PROPERTIES]
        return tuple(sorted((k, iri) for k, iri in used if iri not in declared and not is_datatype_iri(iri)))

    def _classes(self) -> frozenset[str]:
        named = (self.classes_decl | self.usage.classes) - BUILTIN_CLASSES - self.datatypes
        return frozenset(c for c in named if not is_datatype_iri(c))

    def _labels(self) -> tuple[tuple[str, str], ...]:
        """One rdfs:label per vocabulary term: English first, then no language tag, then any."""
        terms = self._classes() | self.object_decl | self.usage.object_properties | self.data_props | self.usage.data_properties
        out = []
        for iri in sorted(terms):
            labels = [o for o in self.g.objects(URIRef(iri), RDFS.label) if isinstance(o, Literal)]
            if labels:
                best = min(labels, key=_label_rank)
                out.append((iri, str(best)))
        return tuple(out)


def _tautology(a: Axiom) -> bool:
    """``X ⊑ X`` and ``R ⊑ owl:topObjectProperty`` say nothing (NPD has ``Transfer ⊑ Transfer``): drop them."""
    if isinstance(a, SubPropertyOf) and a.sup.prop in _TOP_PROPERTIES and not a.sup.inverse:
        return True
    return isinstance(a, (SubClassOf, SubPropertyOf)) and a.sub == a.sup


def _label_rank(lit: Literal) -> tuple[int, str]:
    lang = (lit.language or "").lower()
    if lang == "en" or lang.startswith("en-"):
        return (0, str(lit))
    if not lang:
        return (1, str(lit))
    return (2, lang + str(lit))
