"""Property-based round trip: random DL-Lite_R TBoxes → OWL in RDF (written by this test) → loader → same axioms.

The writer below follows the OWL 2 → RDF mapping directly; rdflib then
serialises the graph as Turtle, RDF/XML and N-Triples, and each must load back
to exactly the generated axioms.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rdflib import BNode, Graph, Namespace
from rdflib.collection import Collection
from rdflib.namespace import OWL, RDF, RDFS

from obda.model.ontology import (
    AtomicConcept,
    DisjointClasses,
    DisjointProperties,
    Exists,
    Role,
    SubClassOf,
    SubPropertyOf,
)
from obda.ontology import parse_ontology_text

EX = Namespace("http://ex.org/rt#")
CLASSES = ["A", "B", "C", "D"]
OBJECT = ["p", "q", "r"]
DATA = ["u", "v"]

roles = st.builds(lambda p, inv: Role(str(EX[p]), inverse=inv), st.sampled_from(OBJECT), st.booleans())
data_roles = st.builds(lambda u: Role(str(EX[u]), data=True), st.sampled_from(DATA))
atomic = st.builds(lambda c: AtomicConcept(str(EX[c])), st.sampled_from(CLASSES))
basic = st.one_of(atomic, st.builds(Exists, roles), st.builds(Exists, data_roles))
sup = st.one_of(basic, st.builds(lambda r, c: Exists(r, str(EX[c])), roles, st.sampled_from(CLASSES)))
axiom = st.one_of(
    st.builds(SubClassOf, basic, sup),
    st.builds(SubPropertyOf, roles, roles),
    st.builds(SubPropertyOf, data_roles, data_roles),
    st.builds(DisjointClasses, basic, basic),
    st.builds(DisjointProperties, roles, roles),
    st.builds(DisjointProperties, data_roles, data_roles),
)


def _prop(g: Graph, r: Role):
    if not r.inverse:
        return EX[r.prop.rsplit("#", 1)[1]]
    node = BNode()
    g.add((node, OWL.inverseOf, EX[r.prop.rsplit("#", 1)[1]]))
    return node


def _concept(g: Graph, c):
    if isinstance(c, AtomicConcept):
        return EX[c.iri.rsplit("#", 1)[1]]
    node = BNode()
    g.add((node, RDF.type, OWL.Restriction))
    g.add((node, OWL.onProperty, _prop(g, c.role)))
    if c.role.data:
        g.add((node, OWL.someValuesFrom, RDFS.Literal))
    else:
        g.add((node, OWL.someValuesFrom, EX[c.filler.rsplit("#", 1)[1]] if c.filler else OWL.Thing))
    return node


def write_owl(axioms) -> Graph:
    g = Graph()
    g.bind("", EX)
    for c in CLASSES:
        g.add((EX[c], RDF.type, OWL.Class))
    for p in OBJECT:
        g.add((EX[p], RDF.type, OWL.ObjectProperty))
    for u in DATA:
        g.add((EX[u], RDF.type, OWL.DatatypeProperty))
    for ax in axioms:
        if isinstance(ax, SubClassOf):
            g.add((_concept(g, ax.sub), RDFS.subClassOf, _concept(g, ax.sup)))
        elif isinstance(ax, SubPropertyOf):
            g.add((_prop(g, ax.sub), RDFS.subPropertyOf, _prop(g, ax.sup)))
        elif isinstance(ax, DisjointClasses):
            node = BNode()  # use the n-ary form for variety
            g.add((node, RDF.type, OWL.AllDisjointClasses))
            members = BNode()
            Collection(g, members, [_concept(g, ax.left), _concept(g, ax.right)])
            g.add((node, OWL.members, members))
        else:
            g.add((_prop(g, ax.left), OWL.propertyDisjointWith, _prop(g, ax.right)))
    return g


def _not_tautology(ax) -> bool:
    return not (isinstance(ax, (SubClassOf, SubPropertyOf)) and ax.sub == ax.sup)


@settings(max_examples=60, deadline=None)
@given(st.lists(axiom.filter(_not_tautology), max_size=8))
def test_random_tboxes_round_trip_in_every_rdf_syntax(axioms):
    g = write_owl(axioms)
    for fmt in ("turtle", "xml", "nt"):
        onto = parse_ontology_text(g.serialize(format=fmt), fmt)
        assert set(onto.axioms) == set(axioms), fmt
        assert onto.findings == ()
