"""Hypothesis strategies: small DL-Lite_R TBoxes, ABoxes and CQs over a fixed vocabulary."""

from __future__ import annotations

from hypothesis import strategies as st

from obda.model.ontology import AtomicConcept, Exists, Ontology, Role, SubClassOf, SubPropertyOf
from obda.model.query import CQ, ClassAtom, PropertyAtom, Query, Var

from .kb import CLASSES, DPROPS, INDIVIDUALS, LITERALS, PROPS

VARS = [Var("x"), Var("y"), Var("z"), Var("w", bnode=True)]

atomic = st.sampled_from(CLASSES).map(AtomicConcept)
obj_role = st.builds(Role, st.sampled_from(PROPS), st.booleans())
data_role = st.sampled_from(DPROPS).map(lambda u: Role(u, data=True))
basic = st.one_of(atomic, obj_role.map(Exists), data_role.map(Exists))

subclass = st.builds(SubClassOf, basic, atomic)
subrole = st.builds(SubPropertyOf, obj_role, obj_role).filter(lambda a: a.sub != a.sup)
equivalence = st.tuples(atomic, atomic).map(lambda p: (SubClassOf(p[0], p[1]), SubClassOf(p[1], p[0])))
role_equivalence = st.tuples(obj_role, obj_role).map(
    lambda p: (SubPropertyOf(p[0], p[1]), SubPropertyOf(p[1], p[0]))
).filter(lambda p: p[0].sub != p[0].sup)

existential = st.one_of(
    st.builds(SubClassOf, basic, st.builds(Exists, obj_role, st.none() | st.sampled_from(CLASSES))),
    st.builds(SubClassOf, basic, data_role.map(Exists)),
)


def _ontology(axioms) -> Ontology:
    return Ontology(
        classes=frozenset(CLASSES),
        object_properties=frozenset(PROPS),
        data_properties=frozenset(DPROPS),
        axioms=tuple(dict.fromkeys(axioms)),
    )


@st.composite
def flat_tbox(draw) -> Ontology:
    """Hierarchies, inverses, domains/ranges, equivalences: no existential on the right."""
    axioms = draw(st.lists(st.one_of(subclass, subrole), max_size=7))
    for pair in draw(st.lists(st.one_of(equivalence, role_equivalence), max_size=1)):
        axioms.extend(pair)
    return _ontology(axioms)


@st.composite
def existential_tbox(draw) -> Ontology:
    """Flat axioms plus 1–3 existential axioms (qualified, inverse, data, possibly cyclic)."""
    axioms = draw(st.lists(st.one_of(subclass, subrole), max_size=4))
    axioms += draw(st.lists(existential, min_size=1, max_size=3))
    return _ontology(axioms)


class_fact = st.builds(lambda c, a: (c, (a,), None), st.sampled_from(CLASSES), st.sampled_from(INDIVIDUALS))
prop_fact = st.builds(
    lambda p, a, b: (p, (a, b), None), st.sampled_from(PROPS), st.sampled_from(INDIVIDUALS), st.sampled_from(INDIVIDUALS)
)
data_fact = st.builds(
    lambda u, a, v: (u, (a, v), None), st.sampled_from(DPROPS), st.sampled_from(INDIVIDUALS), st.sampled_from(LITERALS)
)
abox = st.lists(st.one_of(class_fact, prop_fact, prop_fact, data_fact), max_size=8)

term = st.sampled_from(VARS)
obj_term = st.one_of(term, term, term, st.sampled_from(INDIVIDUALS[:2]))
atom = st.one_of(
    st.builds(ClassAtom, st.sampled_from(CLASSES), term),
    st.builds(PropertyAtom, st.sampled_from(PROPS), obj_term, obj_term),
    st.builds(PropertyAtom, st.sampled_from(DPROPS), term, term),
)


@st.composite
def query(draw, max_atoms: int = 4) -> Query:
    """A CQ of 1..max_atoms atoms; a random subset of its (non-blank) variables is projected."""
    atoms = draw(st.lists(atom, min_size=1, max_size=max_atoms))
    cq = CQ(tuple(atoms))
    named = sorted((v for v in cq.variables if not v.bnode), key=lambda v: v.name)
    proj = tuple(v for v in named if draw(st.booleans()))
    return Query(proj, (cq,), distinct=True)


# ---------------------------------------------------------------- existential-focused generation
# A smaller vocabulary and tree-shaped queries with few answer variables make
# anonymous individuals matter often (checked: a sizeable share of the examples
# have answers that only tree witnesses find).
SMALL_CLASSES = CLASSES[:3]
SMALL_PROPS = PROPS[:2]
small_atomic = st.sampled_from(SMALL_CLASSES).map(AtomicConcept)
small_role = st.builds(Role, st.sampled_from(SMALL_PROPS), st.booleans())
small_basic = st.one_of(small_atomic, small_atomic, small_role.map(Exists), data_role.map(Exists))
small_existential = st.one_of(
    st.builds(SubClassOf, small_basic, st.builds(Exists, small_role, st.none() | st.sampled_from(SMALL_CLASSES))),
    st.builds(SubClassOf, small_basic, st.builds(Exists, small_role, st.sampled_from(SMALL_CLASSES))),
    st.builds(SubClassOf, small_basic, data_role.map(Exists)),
)
small_flat = st.one_of(
    st.builds(SubClassOf, small_basic, small_atomic),
    st.builds(SubPropertyOf, small_role, small_role).filter(lambda a: a.sub != a.sup),
)


@st.composite
def small_existential_tbox(draw) -> Ontology:
    axioms = draw(st.lists(small_flat, max_size=3)) + draw(st.lists(small_existential, min_size=1, max_size=4))
    return _ontology(axioms)


small_abox = st.lists(
    st.one_of(
        st.builds(lambda c, a: (c, (a,), None), st.sampled_from(SMALL_CLASSES), st.sampled_from(INDIVIDUALS)),
        st.builds(
            lambda p, a, b: (p, (a, b), None),
            st.sampled_from(SMALL_PROPS), st.sampled_from(INDIVIDUALS), st.sampled_from(INDIVIDUALS),
        ),
        data_fact,
    ),
    max_size=5,
)


@st.composite
def tree_query(draw, max_edges: int = 4) -> Query:
    """A tree- (or cycle-) shaped CQ grown from ?x; ?x usually the only answer variable."""
    names = [Var("x")]
    atoms: list = []
    for i in range(draw(st.integers(1, max_edges))):
        src = draw(st.sampled_from(names))
        if draw(st.integers(0, 4)) == 0 and len(names) > 1:
            dst = draw(st.sampled_from(names))
        else:
            dst = Var(f"v{i}", bnode=draw(st.booleans()))
            names.append(dst)
        if draw(st.integers(0, 5)) == 0:
            atoms.append(PropertyAtom(DPROPS[0], src, dst))
            continue
        prop = draw(st.sampled_from(SMALL_PROPS))
        atoms.append(PropertyAtom(prop, src, dst) if draw(st.booleans()) else PropertyAtom(prop, dst, src))
    for v in names:
        if draw(st.integers(0, 2)) == 0:
            atoms.append(ClassAtom(draw(st.sampled_from(SMALL_CLASSES)), v))
    cq = CQ(tuple(atoms))
    proj = [Var("x")] if draw(st.integers(0, 3)) else []
    proj += [v for v in sorted(cq.variables, key=lambda v: v.name) if not v.bnode and v.name != "x" and draw(st.integers(0, 5)) == 0]
    return Query(tuple(proj), (cq,), distinct=True)


def aligned_query(ontology: Ontology, max_edges: int = 3):
    """A tree-shaped CQ that follows the ontology's existential axioms (so tree witnesses matter)."""
    gens = [ax for ax in ontology.axioms if isinstance(ax, SubClassOf) and isinstance(ax.sup, Exists)]

    @st.composite
    def build(draw) -> Query:
        names = [Var("x")]
        cur = names[0]
        atoms: list = []
        for i in range(draw(st.integers(1, max_edges))):
            ax = draw(st.sampled_from(gens))
            role = ax.sup.role
            new = Var(f"v{i}", bnode=draw(st.booleans()))
            names.append(new)
            if draw(st.integers(0, 3)) == 0:  # a random role instead of the generator's
                role = draw(small_role)
            atoms.append(PropertyAtom(role.prop, new, cur) if role.inverse else PropertyAtom(role.prop, cur, new))
            if ax.sup.filler and draw(st.booleans()):
                atoms.append(ClassAtom(ax.sup.filler, new))
            if not role.data and draw(st.integers(0, 2)):
                cur = new
        if draw(st.integers(0, 3)) == 0:
            atoms.append(ClassAtom(draw(st.sampled_from(SMALL_CLASSES)), draw(st.sampled_from(names))))
        cq = CQ(tuple(atoms))
        proj = [Var("x")] if draw(st.integers(0, 3)) else []
        proj += [v for v in sorted(cq.variables, key=lambda v: v.name)
                 if not v.bnode and v.name != "x" and draw(st.integers(0, 5)) == 0]
        return Query(tuple(proj), (cq,), distinct=True)

    return build()
