"""Property axioms of an ontology's RDF graph as DL-Lite_R axioms (a mixin of :mod:`obda.ontology.extract`).

``rdfs:subPropertyOf``, ``owl:equivalentProperty``, ``owl:inverseOf``, property disjointness, ``rdfs:domain`` and
``rdfs:range`` (each an ``∃R ⊑ A`` or ``∃R⁻ ⊑ A``), and the property characteristics OWL 2 QL keeps (symmetric,
asymmetric, reflexive, irreflexive) or reports (functional, transitive, ...).  It reads the extractor's graph,
vocabulary, expression reader and drafts (``_draft``, ``_prop``, ``_prop_pair``, ``_list``, ``_r``, ``_anchor``).
"""

from __future__ import annotations

from rdflib import URIRef
from rdflib.namespace import OWL, RDF, RDFS

from obda.model.ontology import DisjointProperties, Exists, SubPropertyOf

from . import translate as T
from .expressions import Malformed, PropertyExpression, render_prop


class PropertyAxioms:
    """The property axioms of :class:`~obda.ontology.extract._Extractor`."""

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
