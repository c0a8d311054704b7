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
    Exists,
    ProfileFinding,
    SubClassOf,
    SubPropertyOf,
)

from . import translate as T
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


class _Extractor:
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

    # -- property axioms ----------------------------------------------------

    def _property_axioms(self) -> None:
        g = self.g
        for s, o in g.subject_objects(RDFS.subPropertyOf):
            if self._is_annotation(s) or self._is_annotation(o):
                continue
            self._sub_properties((s, RDFS.subPropertyOf, o), s, o, both_ways=False)
        for s, o in g.subject_objects(OWL.equivalentProperty):
            if self._is_annotation(s) or self._is_annotation(o):
                continue
            self._sub_properties((s, OWL.equivalentProperty, o), s, o, both_ways=True)

        for s, o in g.subject_objects(OWL.inverseOf):
            if not isinstance(s, URIRef):
                continue  # a blank node [owl:inverseOf P] is a property expression, not an axiom
            d = self._draft((s, OWL.inverseOf, o), "", ("inverseof", "inverseobjectproperties"), [str(s)],
                            self._anchor(o))
            pair = self._prop_pair(d, s, o)
            d.text = f"InverseObjectProperties({self.short(str(s))} {render_prop(self.reader.prop(o), self.short)})"
            if pair is None:
                continue
            if pair[0].data:
                d.reasons.append(T.malformed("data properties have no inverse"))
                continue
            rs, ro = T.role(pair[0]), T.role(pair[1])
            d.axioms += [SubPropertyOf(rs, ro.inv()), SubPropertyOf(ro, rs.inv())]

        for s, o in g.subject_objects(OWL.propertyDisjointWith):
            self._disjoint_properties((s, OWL.propertyDisjointWith, o), [s, o])
        for n in g.subjects(RDF.type, OWL.AllDisjointProperties):
            self._disjoint_properties((n, RDF.type, OWL.AllDisjointProperties), self._list(g.value(n, OWL.members)))

        for s, o in g.subject_objects(RDFS.domain):
            if self._is_annotation(s):
                continue
            self._domain_range((s, RDFS.domain, o), s, o, domain=True)
        for s, o in g.subject_objects(RDFS.range):
            if self._is_annotation(s):
                continue
            self._domain_range((s, RDFS.range, o), s, o, domain=False)

        self._characteristics()

        for s, o in g.subject_objects(OWL.propertyChainAxiom):
            chain = " ".join(render_prop(self.reader.prop(p), self.short) for p in self._list(o))
            d = self._draft((s, OWL.propertyChainAxiom, o),
                            f"SubObjectPropertyOf(ObjectPropertyChain({chain}) {render_prop(self.reader.prop(s), self.short)})",
                            ("propertychain",), [self._anchor(s)])
            d.reasons.append(T.PROPERTY_CHAIN)

    def _sub_properties(self, triple, s, o, both_ways: bool) -> None:
        d = self._draft(triple, "", ("subpropertyof", "subobjectpropertyof", "subdatapropertyof", "equivalentproperty",
                                     "equivalentobjectproperties", "equivalentdataproperties")
                        if both_ways else ("subpropertyof", "subobjectpropertyof", "subdatapropertyof"),
                        [self._anchor(s), self._anchor(o)], self._anchor(o))
        pair = self._prop_pair(d, s, o)
        kind = "Data" if pair and pair[0].data else "Object"
        name = f"Equivalent{kind}Properties" if both_ways else f"Sub{kind}PropertyOf"
        d.text = f"{name}({render_prop(self.reader.prop(s), self.short)} {render_prop(self.reader.prop(o), self.short)})"
        if pair is None:
            return
        rs, ro = T.role(pair[0]), T.role(pair[1])
        d.axioms.append(SubPropertyOf(rs, ro))
        if both_ways:
            d.axioms.append(SubPropertyOf(ro, rs))

    def _disjoint_properties(self, triple, members: list) -> None:
        props = [self.reader.prop(m) for m in members]
        kind = "Data" if any(isinstance(p, PropertyExpression) and p.data for p in props) else "Object"
        d = self._draft(triple, f"Disjoint{kind}Properties({' '.join(render_prop(p, self.short) for p in props)})",
                        ("propertydisjointwith", "disjointobjectproperties", "disjointdataproperties",
                         "alldisjointproperties"), [self._anchor(m) for m in members])
        if len(members) < 2:
            d.reasons.append(T.malformed("a property disjointness needs at least two properties"))
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pair = self._prop_pair(d, a, b)
                if pair is not None:
                    d.axioms.append(DisjointProperties(T.role(pair[0]), T.role(pair[1])))

    def _domain_range(self, triple, s, o, domain: bool) -> None:
        prop = self.reader.prop(s)
        is_data = isinstance(prop, PropertyExpression) and prop.data
        kind = ("Data" if is_data else "Object") + ("PropertyDomain" if domain else "PropertyRange")
        d = self._draft(triple, "", ("domain",) if domain else ("range",), [self._anchor(s)], self._anchor(o))
        if isinstance(prop, Malformed):
            d.text = f"{kind}({render_prop(prop, self.short)} {self.short(str(o))})"
            d.reasons.append(T.malformed(prop.why))
            return
        if is_data and not domain:
            if self.reader.is_data_range(o):
                rng = self.reader.data_range(o)
                d.text = f"{kind}({render_prop(prop, self.short)} {self._r(rng)})"
                reason = T.data_range_reason(rng)
                if reason:
                    d.reasons.append(reason)
            else:
                d.text = f"{kind}({render_prop(prop, self.short)} {self._r(self.reader.cls(o))})"
                d.reasons.append(T.malformed("the range of a data property must be a datatype"))
            return
        if self.reader.is_data_range(o):
            d.text = f"{kind}({render_prop(prop, self.short)} {self._r(self.reader.data_range(o))})"
            d.reasons.append(T.malformed(f"the {'domain' if domain else 'range'} of {'a data' if is_data else 'an object'} property must be a class"))
            return
        target = self.reader.cls(o)
        d.text = f"{kind}({render_prop(prop, self.short)} {self._r(target)})"
        r = T.role(prop)
        sub = Exists(r if domain else r.inv())
        parts = T.sup_parts(target)
        d.reasons.extend(p for p in parts if isinstance(p, T.Reason))
        self._add_sup_parts(d, sub, parts)

    def _characteristics(self) -> None:
        g = self.g
        reasons = {
            OWL.FunctionalProperty: (T.FUNCTIONAL, "Functional{}Property"),
            OWL.InverseFunctionalProperty: (T.INVERSE_FUNCTIONAL, "InverseFunctional{}Property"),
            OWL.TransitiveProperty: (T.TRANSITIVE, "Transitive{}Property"),
            OWL.ReflexiveProperty: (T.REFLEXIVE, "Reflexive{}Property"),
            OWL.IrreflexiveProperty: (T.IRREFLEXIVE, "Irreflexive{}Property"),
            OWL.SymmetricProperty: (None, "Symmetric{}Property"),
            OWL.AsymmetricProperty: (None, "Asymmetric{}Property"),
        }
        for t, (reason, name) in reasons.items():
            for s in g.subjects(RDF.type, t):
                if self._is_annotation(s):
                    continue
                prop = self.reader.prop(s)
                is_data = isinstance(prop, PropertyExpression) and prop.data
                text = f"{name.format('Data' if is_data else 'Object')}({render_prop(prop, self.short)})"
                d = self._draft((s, RDF.type, t), text, (t.fragment.lower().replace("property", ""),),
                                [self._anchor(s)])
                if isinstance(prop, Malformed):
                    d.reasons.append(T.malformed(prop.why))
                elif reason is not None:
                    d.reasons.append(reason)
                elif is_data:
                    d.reasons.append(T.malformed(f"a data property cannot be {t.fragment}"))
                elif t == OWL.SymmetricProperty:
                    d.axioms.append(SubPropertyOf(T.role(prop), T.role(prop).inv()))
                else:  # asymmetric: R and R⁻ are disjoint
                    d.axioms.append(DisjointProperties(T.role(prop), T.role(prop).inv()))

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
