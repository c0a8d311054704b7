"""OWL 2 QL profile check and translation of class expressions into DL-Lite_R.

OWL 2 QL (W3C OWL 2 Profiles, section 3) allows, in ``SubClassOf(L R)``:

* on the left (``subClassExpression``): a class other than ``owl:Thing``,
  ``ObjectSomeValuesFrom(P owl:Thing)`` with ``P`` a property or its inverse,
  ``DataSomeValuesFrom(U D)``;
* on the right (``superClassExpression``): a class, ``ObjectSomeValuesFrom(P A)``
  with ``A`` a class, ``DataSomeValuesFrom(U D)``, ``ObjectIntersectionOf`` of
  superclass expressions, ``ObjectComplementOf`` of a subclass expression.

:func:`sub_concept` maps a left-hand side to a DL-Lite_R basic concept;
:func:`sup_parts` maps a right-hand side to the list of its conjuncts, each a
positive basic concept (``B ⊑ C``), a negated one (``B ⊑ ¬C``, i.e. disjointness),
bottom, or a :class:`Reason` explaining why that conjunct is outside the profile.
"""

from __future__ import annotations

from dataclasses import dataclass

from obda.model.ontology import AtomicConcept, BasicConcept, Exists, Role

from .expressions import (
    BOTTOM,
    LITERAL,
    TOP,
    ClassExpression,
    ComplexDataRange,
    Complement,
    Connective,
    Malformed,
    NamedClass,
    NamedDatatype,
    OneOf,
    PropertyExpression,
    Restriction,
)


@dataclass(frozen=True)
class Reason:
    """Why a construct is outside OWL 2 QL, and substrings to find it in a file."""

    text: str
    keywords: tuple[str, ...] = ()


class NotInProfile(Exception):
    def __init__(self, reason: Reason):
        super().__init__(reason.text)
        self.reason = reason


# The reasons, in one place so messages stay consistent (and tests can refer to them).
UNION = Reason("owl:unionOf (ObjectUnionOf) is not in OWL 2 QL", ("unionof",))
QUALIFIED_LEFT = Reason(
    "qualified existential on the left-hand side is not in OWL 2 QL "
    "(only ObjectSomeValuesFrom(R owl:Thing) may be a subclass)",
    ("somevaluesfrom",),
)
INTERSECTION_LEFT = Reason("owl:intersectionOf on the left-hand side is not in OWL 2 QL", ("intersectionof",))
COMPLEMENT_LEFT = Reason("owl:complementOf on the left-hand side is not in OWL 2 QL", ("complementof",))
COMPLEMENT_COMPLEX = Reason(
    "owl:complementOf is allowed in OWL 2 QL only around a class or ObjectSomeValuesFrom(R owl:Thing)",
    ("complementof",),
)
THING_LEFT = Reason("owl:Thing on the left-hand side is not in OWL 2 QL", ("thing",))
FILLER_NOT_NAMED = Reason(
    "the filler of an existential restriction must be a class name in OWL 2 QL", ("somevaluesfrom",)
)
ALL_VALUES = Reason("owl:allValuesFrom (universal restriction) is not in OWL 2 QL", ("allvaluesfrom",))
HAS_VALUE = Reason("owl:hasValue is not in OWL 2 QL", ("hasvalue",))
HAS_SELF = Reason("owl:hasSelf (self restriction) is not in OWL 2 QL", ("hasself",))
CARDINALITY = Reason(
    "cardinality restrictions (owl:minCardinality, owl:maxCardinality, owl:cardinality, qualified or not) "
    "are not in OWL 2 QL",
    ("cardinality",),
)
ONE_OF = Reason("owl:oneOf (enumeration of individuals) is not in OWL 2 QL", ("oneof",))
DATA_RANGE = Reason(
    "data ranges other than datatypes and their intersections (DataUnionOf, DataOneOf, DataComplementOf, "
    "datatype restrictions) are not in OWL 2 QL",
    ("datatyperestriction", "ondatatype", "withrestrictions", "oneof", "unionof", "complementof"),
)
DATA_FILLER_LEFT = Reason(
    "DataSomeValuesFrom with a datatype other than rdfs:Literal on the left-hand side is not supported by obda "
    "(its DL-Lite_R TBox has no datatype-qualified ∃U)",
    ("somevaluesfrom",),
)
FUNCTIONAL = Reason("functional properties are not in OWL 2 QL", ("functional",))
INVERSE_FUNCTIONAL = Reason("inverse-functional properties are not in OWL 2 QL", ("inversefunctional",))
TRANSITIVE = Reason("transitive properties are not in OWL 2 QL", ("transitive",))
REFLEXIVE = Reason(
    "reflexive properties are in OWL 2 QL but not supported by obda's DL-Lite_R reasoner", ("reflexive",)
)
IRREFLEXIVE = Reason(
    "irreflexive properties are in OWL 2 QL but not supported by obda's DL-Lite_R reasoner", ("irreflexive",)
)
PROPERTY_CHAIN = Reason("property chains (owl:propertyChainAxiom) are not in OWL 2 QL", ("propertychain",))
HAS_KEY = Reason("keys (owl:hasKey) are not in OWL 2 QL", ("haskey",))
SAME_AS = Reason(
    "individual equality (owl:sameAs / SameIndividual) is not in OWL 2 QL", ("sameas", "sameindividual")
)
DISJOINT_UNION = Reason("owl:disjointUnionOf (DisjointUnion) is not in OWL 2 QL", ("disjointunion",))
DATATYPE_DEFINITION = Reason(
    "datatype definitions are not in OWL 2 QL", ("datatypedefinition", "equivalentclass")
)
NARY_DATA = Reason("n-ary data restrictions (owl:onProperties) are not in OWL 2 QL", ("onproperties",))
SWRL_RULE = Reason("SWRL rules are not in OWL 2 QL", ("imp", "dlsaferule"))


def malformed(why: str) -> Reason:
    """A structure that is not valid OWL at all (reported like a profile violation)."""
    return Reason(f"malformed axiom: {why}", ())


@dataclass(frozen=True)
class Positive:
    concept: BasicConcept


@dataclass(frozen=True)
class Negative:
    concept: BasicConcept


@dataclass(frozen=True)
class Bottom:
    """The right-hand side is (a conjunct equivalent to) ``owl:Nothing``."""


SupPart = Positive | Negative | Bottom | Reason


def role(p: PropertyExpression) -> Role:
    """The DL-Lite_R role of a property expression."""
    return Role(p.iri, inverse=p.inverse, data=p.data)


def _restriction_reason(e: Restriction) -> Reason:
    return {
        "all": ALL_VALUES,
        "value": HAS_VALUE,
        "self": HAS_SELF,
        "min": CARDINALITY,
        "max": CARDINALITY,
        "exact": CARDINALITY,
    }[e.kind]


def _range_ok(r) -> bool:
    """A data range inside OWL 2 QL: a named datatype or an intersection of such."""
    if isinstance(r, NamedDatatype):
        return True
    return isinstance(r, ComplexDataRange) and r.kind == "DataIntersectionOf" and all(_range_ok(o) for o in r.operands)


def data_range_reason(r) -> Reason | None:
    """None if the data range is inside OWL 2 QL, else why not."""
    return None if _range_ok(r) else DATA_RANGE


def _structural_reason(e: ClassExpression) -> Reason | None:
    """Why ``e`` is not a class expression at all (malformed / n-ary), if so."""
    if isinstance(e, Malformed):
        return NARY_DATA if "onProperties" in e.why else malformed(e.why)
    return None


def sub_concept(e: ClassExpression) -> BasicConcept | None:
    """The basic concept of a left-hand side; None for ``owl:Nothing`` (vacuous axiom).

    Raises :class:`NotInProfile` when ``e`` is not a ``subClassExpression``.
    """
    bad = _structural_reason(e)
    if bad:
        raise NotInProfile(bad)
    if isinstance(e, NamedClass):
        if e.iri == TOP:
            raise NotInProfile(THING_LEFT)
        if e.iri == BOTTOM:
            return None
        return AtomicConcept(e.iri)
    if isinstance(e, Restriction):
        if e.kind != "some":
            raise NotInProfile(_restriction_reason(e))
        if e.prop.data:
            if isinstance(e.filler, NamedDatatype) and e.filler.iri == LITERAL:
                return Exists(role(e.prop))
            if not _range_ok(e.filler):
                raise NotInProfile(DATA_RANGE)
            raise NotInProfile(DATA_FILLER_LEFT)
        if isinstance(e.filler, NamedClass) and e.filler.iri == TOP:
            return Exists(role(e.prop))
        raise NotInProfile(QUALIFIED_LEFT)
    if isinstance(e, Connective):
        raise NotInProfile(INTERSECTION_LEFT if e.kind == "and" else UNION)
    if isinstance(e, Complement):
        raise NotInProfile(COMPLEMENT_LEFT)
    if isinstance(e, OneOf):
        raise NotInProfile(ONE_OF)
    raise NotInProfile(malformed(f"unexpected expression {e!r}"))


def sup_parts(e: ClassExpression) -> list[SupPart]:
    """The conjuncts of a right-hand side (``[]`` for ``owl:Thing``)."""
    bad = _structural_reason(e)
    if bad:
        return [bad]
    if isinstance(e, NamedClass):
        if e.iri == TOP:
            return []
        if e.iri == BOTTOM:
            return [Bottom()]
        return [Positive(AtomicConcept(e.iri))]
    if isinstance(e, Connective):
        if e.kind == "or":
            return [UNION]
        return [part for operand in e.operands for part in sup_parts(operand)]
    if isinstance(e, Complement):
        inner = e.operand
        if isinstance(inner, NamedClass) and inner.iri == TOP:
            return [Bottom()]
        try:
            c = sub_concept(inner)
        except NotInProfile as x:
            if x.reason in (THING_LEFT,):
                return [Bottom()]
            return [COMPLEMENT_COMPLEX]
        return [] if c is None else [Negative(c)]
    if isinstance(e, OneOf):
        return [ONE_OF]
    if isinstance(e, Restriction):
        if e.kind != "some":
            return [_restriction_reason(e)]
        if e.prop.data:
            return [Positive(Exists(role(e.prop)))] if _range_ok(e.filler) else [DATA_RANGE]
        f = e.filler
        if isinstance(f, NamedClass):
            if f.iri == TOP:
                return [Positive(Exists(role(e.prop)))]
            if f.iri == BOTTOM:
                return [Bottom()]
            return [Positive(Exists(role(e.prop), f.iri))]
        bad = _structural_reason(f) if f is not None else None
        return [bad or FILLER_NOT_NAMED]
    return [malformed(f"unexpected expression {e!r}")]
