"""The NPD benchmark ontology (RDF/XML, ~25k lines, OWL 2 QL) loads strictly, fast, and agrees with owlready2.

owlready2 parses the RDF/XML with its own parser and exposes named superclasses,
existential restrictions, domains and ranges: an independent oracle for the
axioms obda extracts.
"""

from __future__ import annotations

import time
from collections import Counter

import owlready2
import pytest
from rdflib import Graph, URIRef
from rdflib.namespace import OWL, RDF

from obda.model.ontology import AtomicConcept, DisjointClasses, Exists, SubClassOf, SubPropertyOf
from obda.ontology import load_ontology
from shared_data import TESTDATA

NPD = str(TESTDATA / "npd" / "npd-v2-ql.owl")


@pytest.fixture(scope="module")
def npd():
    start = time.perf_counter()
    onto = load_ontology([NPD])  # strict: raises if anything is outside OWL 2 QL
    elapsed = time.perf_counter() - start
    print(f"NPD loaded in {elapsed:.2f}s")
    return onto, elapsed


@pytest.fixture(scope="module")
def oracle():
    world = owlready2.World()
    world.get_ontology(f"file://{NPD}").load()
    yield world
    world.close()


def test_npd_loads_strictly_without_findings_in_reasonable_time(npd):
    onto, elapsed = npd
    assert onto.findings == ()
    assert elapsed < 20, f"NPD took {elapsed:.1f}s"  # ~1-2s on an idle machine; generous for loaded CI


def test_npd_vocabulary_counts(npd):
    onto, _ = npd
    g = Graph().parse(NPD, format="xml")

    def declared(t):
        return {str(s) for s in g.subjects(RDF.type, t) if isinstance(s, URIRef)}

    # NPD declares every term it uses in axioms
    assert onto.classes == declared(OWL.Class)
    assert onto.object_properties == declared(OWL.ObjectProperty)
    assert onto.data_properties == declared(OWL.DatatypeProperty)
    assert len(onto.classes) == 342
    assert len(onto.object_properties) == 142
    assert len(onto.data_properties) == 238
    assert len(onto.labels) == 163


def test_npd_axiom_counts(npd):
    onto, _ = npd
    counts = Counter(type(a).__name__ for a in onto.axioms)
    # 51 owl:disjointWith + one AllDisjointClasses of 3 members (3 pairs)
    assert counts["DisjointClasses"] == 54
    # 26 non-annotation rdfs:subPropertyOf + 4 owl:inverseOf (2 axioms each) + 4 owl:SymmetricProperty
    assert counts["SubPropertyOf"] == 38
    assert counts["SubClassOf"] == 1183
    assert len(onto.axioms) == 1275
    assert all(a.location.line for a in onto.axioms)


def _iri(x):
    return None if x is owlready2.Thing or x is None else x.iri


def test_npd_subclass_and_existentials_agree_with_owlready2(npd, oracle):
    onto, _ = npd
    data_props = {p.iri for p in oracle.data_properties()}
    named, existentials = set(), set()
    for c in oracle.classes():
        for sup in c.is_a:
            if isinstance(sup, owlready2.ThingClass) and sup is not owlready2.Thing:
                named.add((c.iri, sup.iri))
            elif isinstance(sup, owlready2.Restriction):
                assert sup.type == owlready2.SOME
                prop, inverse = sup.property, False
                if isinstance(prop, owlready2.Inverse):
                    prop, inverse = prop.property, True
                filler = None if prop.iri in data_props else _iri(sup.value)
                existentials.add((c.iri, prop.iri, inverse, filler))

    ours_named = {
        (a.sub.iri, a.sup.iri)
        for a in onto.axioms
        if isinstance(a, SubClassOf) and isinstance(a.sub, AtomicConcept) and isinstance(a.sup, AtomicConcept)
    }
    ours_exists = {
        (a.sub.iri, a.sup.role.prop, a.sup.role.inverse, a.sup.filler)
        for a in onto.axioms
        if isinstance(a, SubClassOf) and isinstance(a.sub, AtomicConcept) and isinstance(a.sup, Exists)
    }
    assert ours_named == named
    assert ours_exists == existentials


def test_npd_domains_and_ranges_agree_with_owlready2(npd, oracle):
    onto, _ = npd
    expected = set()
    for p in oracle.object_properties():
        expected |= {(p.iri, False, d.iri) for d in p.domain if isinstance(d, owlready2.ThingClass)}
        expected |= {(p.iri, True, r.iri) for r in p.range if isinstance(r, owlready2.ThingClass)}
    for p in oracle.data_properties():
        expected |= {(p.iri, False, d.iri) for d in p.domain if isinstance(d, owlready2.ThingClass)}
    ours = {
        (a.sub.role.prop, a.sub.role.inverse, a.sup.iri)
        for a in onto.axioms
        if isinstance(a, SubClassOf) and isinstance(a.sub, Exists) and isinstance(a.sup, AtomicConcept)
    }
    assert ours == expected


def test_npd_property_hierarchy_agrees_with_owlready2(npd, oracle):
    onto, _ = npd
    props = [*oracle.object_properties(), *oracle.data_properties()]
    iris = {p.iri for p in props}
    expected = set()
    for p in props:  # is_a also lists owl:ObjectProperty, owl:SymmetricProperty ...: keep properties only
        expected |= {(p.iri, q.iri) for q in p.is_a if getattr(q, "iri", None) in iris and q.iri != p.iri}
    ours = {
        (a.sub.prop, a.sup.prop)
        for a in onto.axioms
        if isinstance(a, SubPropertyOf) and not a.sub.inverse and not a.sup.inverse and a.sub.prop != a.sup.prop
    }
    assert ours == expected


def test_npd_disjointness_agrees_with_owlready2(npd, oracle):
    onto, _ = npd
    expected = set()
    for d in oracle.disjoint_classes():
        members = [e.iri for e in d.entities]
        expected |= {frozenset((a, b)) for i, a in enumerate(members) for b in members[i + 1 :]}
    ours = {frozenset((a.left.iri, a.right.iri)) for a in onto.axioms if isinstance(a, DisjointClasses)}
    assert ours == expected


def test_npd_inverse_properties_agree_with_owlready2(npd, oracle):
    onto, _ = npd
    expected = set()
    for p in oracle.object_properties():
        q = p.inverse_property
        if q is not None:
            expected |= {(p.iri, q.iri), (q.iri, p.iri)}
    symmetric = {p.iri for p in oracle.object_properties() if owlready2.SymmetricProperty in p.is_a}
    ours = {
        (a.sub.prop, a.sup.prop)
        for a in onto.axioms
        if isinstance(a, SubPropertyOf) and not a.sub.inverse and a.sup.inverse
    }
    assert ours == expected | {(p, p) for p in symmetric}
