"""OWL class and property expressions read from an RDF graph.

The OWL 2 → RDF mapping encodes class expressions as blank-node structures
(``owl:Restriction`` with ``owl:onProperty`` / ``owl:someValuesFrom``,
``owl:intersectionOf`` lists, ...).  This module reads such a node into a small
typed tree (:class:`ClassExpression`) so the profile check and the DL-Lite_R
translation (:mod:`obda.ontology.translate`) work on structure, not on triples,
and renders any tree in OWL functional syntax for error messages
(``ObjectSomeValuesFrom(:hasPart :Engine)``).

Every named term met while reading is recorded in a :class:`Usage`, so the
vocabulary of the ontology includes terms that occur only inside axioms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF, RDFS, XSD

# Datatypes that need no declaration (OWL 2 datatype map plus RDF/RDFS built-ins).
BUILTIN_DATATYPE_NAMESPACES = (str(XSD),)
BUILTIN_DATATYPES = frozenset(
    {
        str(RDFS.Literal),
        str(RDF.PlainLiteral),
        str(RDF.langString),
        str(RDF.XMLLiteral),
        str(RDF.HTML),
        str(OWL.real),
        str(OWL.rational),
    }
)
BUILTIN_CLASSES = frozenset({str(OWL.Thing), str(OWL.Nothing), str(RDFS.Resource)})
TOP = str(OWL.Thing)
BOTTOM = str(OWL.Nothing)
LITERAL = str(RDFS.Literal)


# ----------------------------------------------------------------------------
# expression tree


@dataclass(frozen=True)
class PropertyExpression:
    """A named property or (object properties only) its inverse."""

    iri: str
    inverse: bool = False
    data: bool = False


@dataclass(frozen=True)
class NamedClass:
    iri: str


@dataclass(frozen=True)
class NamedDatatype:
    iri: str


@dataclass(frozen=True)
class ComplexDataRange:
    """A data range other than a named datatype (``DataIntersectionOf`` ...)."""

    kind: str  # DataIntersectionOf | DataUnionOf | DataComplementOf | DataOneOf | DatatypeRestriction
    operands: tuple["DataRange | str", ...] = ()


DataRange = Union[NamedDatatype, ComplexDataRange]


@dataclass(frozen=True)
class Restriction:
    """``owl:Restriction``: kind is one of some, all, value, self, min, max, exact."""

    kind: str
    prop: PropertyExpression
    filler: "ClassExpression | DataRange | None" = None
    value: str | None = None  # rendered individual / literal for owl:hasValue
    cardinality: int | None = None


@dataclass(frozen=True)
class Connective:
    """``owl:intersectionOf`` (kind ``and``) or ``owl:unionOf`` (kind ``or``)."""

    kind: str
    operands: tuple["ClassExpression", ...]


@dataclass(frozen=True)
class Complement:
    operand: "ClassExpression"


@dataclass(frozen=True)
class OneOf:
    members: tuple[str, ...]


@dataclass(frozen=True)
class Malformed:
    """A node that does not encode any OWL class expression; ``why`` says what is wrong."""

    why: str


ClassExpression = Union[NamedClass, Restriction, Connective, Complement, OneOf, Malformed]


# ----------------------------------------------------------------------------
# vocabulary typing


@dataclass
class Usage:
    """Named terms met while reading expressions (mutable accumulator)."""

    classes: set[str] = field(default_factory=set)
    object_properties: set[str] = field(default_factory=set)
    data_properties: set[str] = field(default_factory=set)


def is_datatype_iri(iri: str, declared_datatypes: frozenset[str] = frozenset()) -> bool:
    """True for built-in datatypes (``xsd:*``, ``rdfs:Literal`` ...) and declared ones."""
    return iri in BUILTIN_DATATYPES or iri.startswith(BUILTIN_DATATYPE_NAMESPACES) or iri in declared_datatypes


class ExpressionReader:
    """Reads class, property and data-range expressions from ``graph``.

    ``data_properties`` is the (declared or inferred) set of data property IRIs:
    it decides whether ``owl:someValuesFrom`` is an object or a data
    restriction.  Named terms met are added to ``usage``.
    """

    def __init__(
        self,
        graph: Graph,
        data_properties: frozenset[str],
        datatypes: frozenset[str],
        usage: Usage | None = None,
    ):
        self.graph = graph
        self.data_properties = data_properties
        self.datatypes = datatypes
        self.usage = usage if usage is not None else Usage()
        self._cache: dict[BNode, ClassExpression] = {}

    # -- properties ---------------------------------------------------------

    def prop(self, node) -> PropertyExpression | Malformed:
        """A property expression: an IRI or a blank node ``[owl:inverseOf P]``."""
        if isinstance(node, URIRef):
            iri = str(node)
            data = iri in self.data_properties
            (self.usage.data_properties if data else self.usage.object_properties).add(iri)
            return PropertyExpression(iri, data=data)
        if isinstance(node, BNode):
            target = self.graph.value(node, OWL.inverseOf)
            if isinstance(target, URIRef):
                inner = self.prop(target)
                if isinstance(inner, PropertyExpression) and inner.data:
                    return Malformed(f"ObjectInverseOf of the data property {target}")
                return PropertyExpression(str(target), inverse=True)
            return Malformed("a blank-node property expression without owl:inverseOf <IRI>")
        return Malformed(f"a literal {node!r} used as a property")

    # -- data ranges --------------------------------------------------------

    def is_data_range(self, node) -> bool:
        """Does ``node`` denote a datatype or a data range (not a class)?"""
        if isinstance(node, URIRef):
            return is_datatype_iri(str(node), self.datatypes)
        if isinstance(node, BNode):
            g = self.graph
            if (node, RDF.type, RDFS.Datatype) in g:
                return True
            if g.value(node, OWL.onDatatype) is not None or g.value(node, OWL.datatypeComplementOf) is not None:
                return True
            one_of = g.value(node, OWL.oneOf)
            if one_of is not None:
                items = list(g.items(one_of))
                return bool(items) and all(isinstance(i, Literal) for i in items)
            for p in (OWL.intersectionOf, OWL.unionOf):
                lst = g.value(node, p)
                if lst is not None:
                    items = list(g.items(lst))
                    return bool(items) and all(self.is_data_range(i) for i in items)
        return False

    def data_range(self, node) -> DataRange:
        g = self.graph
        if isinstance(node, URIRef):
            return NamedDatatype(str(node))
        if g.value(node, OWL.onDatatype) is not None:
            return ComplexDataRange("DatatypeRestriction", (self.data_range(g.value(node, OWL.onDatatype)),))
        comp = g.value(node, OWL.datatypeComplementOf)
        if comp is not None:
            return ComplexDataRange("DataComplementOf", (self.data_range(comp),))
        one_of = g.value(node, OWL.oneOf)
        if one_of is not None:
            return ComplexDataRange("DataOneOf", tuple(_literal_text(i) for i in g.items(one_of)))
        for p, kind in ((OWL.intersectionOf, "DataIntersectionOf"), (OWL.unionOf, "DataUnionOf")):
            lst = g.value(node, p)
            if lst is not None:
                return ComplexDataRange(kind, tuple(self.data_range(i) for i in g.items(lst)))
        return ComplexDataRange("DataRange")

    # -- classes ------------------------------------------------------------

    def cls(self, node, anonymous: bool = False) -> ClassExpression:
        """The class expression of ``node``.

        An IRI is a named class unless ``anonymous`` is set: then the
        constructor triples attached to it (OWL 1 style ``:A owl:unionOf
        (...)``) are read instead.
        """
        if isinstance(node, URIRef) and not anonymous:
            iri = str(node)
            if iri not in BUILTIN_CLASSES:
                self.usage.classes.add(iri)
            return NamedClass(iri)
        if isinstance(node, Literal):
            return Malformed(f"a literal {node!r} used as a class")
        if isinstance(node, BNode) and node in self._cache:
            return self._cache[node]
        if isinstance(node, BNode):
            self._cache[node] = Malformed("a cyclic class expression")  # guard against cycles
        expr = self._read(node)
        if isinstance(node, BNode):
            self._cache[node] = expr
        return expr

    def _items(self, lst) -> list:
        try:
            return list(self.graph.items(lst))
        except ValueError:  # rdflib: recursive rdf:rest
            return []

    def _read(self, node) -> ClassExpression:
        g = self.graph
        on_prop = g.value(node, OWL.onProperty)
        if on_prop is not None:
            return self._restriction(node, on_prop)
        if g.value(node, OWL.onProperties) is not None:
            return Malformed("an n-ary data restriction (owl:onProperties)")
        for p, kind in ((OWL.intersectionOf, "and"), (OWL.unionOf, "or")):
            lst = g.value(node, p)
            if lst is not None:
                return Connective(kind, tuple(self.cls(i) for i in self._items(lst)))
        comp = g.value(node, OWL.complementOf)
        if comp is not None:
            return Complement(self.cls(comp))
        one_of = g.value(node, OWL.oneOf)
        if one_of is not None:
            return OneOf(tuple(_term_text(i) for i in self._items(one_of)))
        return Malformed("a blank node that is not a class expression")

    def _restriction(self, node, on_prop) -> ClassExpression:
        g = self.graph
        prop = self.prop(on_prop)
        if isinstance(prop, Malformed):
            return prop
        some = g.value(node, OWL.someValuesFrom)
        every = g.value(node, OWL.allValuesFrom)
        filler_node = some if some is not None else every
        if filler_node is not None:
            kind = "some" if some is not None else "all"
            data = prop.data or (not prop.inverse and self.is_data_range(filler_node))
            if data:
                prop = self._as_data(prop)
                return Restriction(kind, prop, self.data_range(filler_node))
            return Restriction(kind, prop, self.cls(filler_node))
        value = g.value(node, OWL.hasValue)
        if value is not None:
            if isinstance(value, Literal):
                prop = self._as_data(prop)
            return Restriction("value", prop, value=_term_text(value))
        if g.value(node, OWL.hasSelf) is not None:
            return Restriction("self", prop)
        for p, kind in (
            (OWL.minCardinality, "min"),
            (OWL.maxCardinality, "max"),
            (OWL.cardinality, "exact"),
            (OWL.minQualifiedCardinality, "min"),
            (OWL.maxQualifiedCardinality, "max"),
            (OWL.qualifiedCardinality, "exact"),
        ):
            n = g.value(node, p)
            if n is not None:
                try:
                    count = int(n)
                except (TypeError, ValueError):
                    return Malformed(f"a non-integer cardinality {n!r}")
                on_class = g.value(node, OWL.onClass)
                on_range = g.value(node, OWL.onDataRange)
                filler: ClassExpression | DataRange | None = None
                if on_range is not None:
                    prop = self._as_data(prop)
                    filler = self.data_range(on_range)
                elif on_class is not None:
                    filler = self.cls(on_class)
                return Restriction(kind, prop, filler, cardinality=count)
        return Malformed("an owl:Restriction without someValuesFrom, allValuesFrom, hasValue, hasSelf or a cardinality")

    def _as_data(self, prop: PropertyExpression) -> PropertyExpression:
        """Re-type an (undeclared) property used with a data range as a data property."""
        if prop.data:
            return prop
        self.usage.object_properties.discard(prop.iri)
        self.usage.data_properties.add(prop.iri)
        return PropertyExpression(prop.iri, prop.inverse, data=True)


def _literal_text(node) -> str:
    if isinstance(node, Literal):
        return _term_text(node)
    return str(node)


def _term_text(node) -> str:
    """A short, readable rendering of an individual or literal for messages."""
    if isinstance(node, Literal):
        s = f'"{node}"'
        if node.language:
            return s + "@" + node.language
        if node.datatype is not None:
            return s + "^^" + str(node.datatype)
        return s
    return str(node)


# ----------------------------------------------------------------------------
# rendering (OWL functional syntax)

Shorten = Callable[[str], str]


def render_prop(p: PropertyExpression | Malformed, short: Shorten) -> str:
    if isinstance(p, Malformed):
        return f"<malformed: {p.why}>"
    return f"ObjectInverseOf({short(p.iri)})" if p.inverse else short(p.iri)


def render_range(r: "DataRange | str", short: Shorten) -> str:
    if isinstance(r, str):
        return r
    if isinstance(r, NamedDatatype):
        return short(r.iri)
    return f"{r.kind}({' '.join(render_range(o, short) for o in r.operands)})"


_RESTRICTION_NAMES = {
    "some": "SomeValuesFrom",
    "all": "AllValuesFrom",
    "value": "HasValue",
    "self": "HasSelf",
    "min": "MinCardinality",
    "max": "MaxCardinality",
    "exact": "ExactCardinality",
}


def render_class(e: ClassExpression, short: Shorten) -> str:
    """OWL functional-syntax text of a class expression, with prefixed names."""
    if isinstance(e, NamedClass):
        return short(e.iri)
    if isinstance(e, Malformed):
        return f"<malformed: {e.why}>"
    if isinstance(e, Connective):
        name = "ObjectIntersectionOf" if e.kind == "and" else "ObjectUnionOf"
        return f"{name}({' '.join(render_class(o, short) for o in e.operands)})"
    if isinstance(e, Complement):
        return f"ObjectComplementOf({render_class(e.operand, short)})"
    if isinstance(e, OneOf):
        members = " ".join(m if m.startswith('"') else short(m) for m in e.members)
        return f"ObjectOneOf({members})"
    kind = ("Data" if e.prop.data else "Object") + _RESTRICTION_NAMES[e.kind]
    args = []
    if e.cardinality is not None:
        args.append(str(e.cardinality))
    args.append(render_prop(e.prop, short))
    if e.kind == "value":
        v = e.value or ""
        args.append(v if v.startswith('"') else short(v))
    elif e.filler is not None:
        f = e.filler
        args.append(render_range(f, short) if isinstance(f, (NamedDatatype, ComplexDataRange)) else render_class(f, short))
    return f"{kind}({' '.join(args)})"


def render_any(e, short: Shorten) -> str:
    """Render a class expression, data range or property expression."""
    if isinstance(e, PropertyExpression):
        return render_prop(e, short)
    if isinstance(e, (NamedDatatype, ComplexDataRange)):
        return render_range(e, short)
    return render_class(e, short)


def first_iri(e) -> str | None:
    """The first named term inside an expression (used to locate it in a file)."""
    if isinstance(e, NamedClass):
        return e.iri if e.iri not in BUILTIN_CLASSES else None
    if isinstance(e, PropertyExpression):
        return e.iri
    if isinstance(e, NamedDatatype):
        return None
    if isinstance(e, Restriction):
        return e.prop.iri
    if isinstance(e, Connective):
        for o in e.operands:
            found = first_iri(o)
            if found:
                return found
        return None
    if isinstance(e, Complement):
        return first_iri(e.operand)
    if isinstance(e, OneOf):
        return e.members[0] if e.members and not e.members[0].startswith('"') else None
    return None


def make_shortener(graph: Graph) -> Shorten:
    """Prefixed names from the prefixes bound in ``graph`` (``:Car``, ``xsd:int``), else ``<iri>``."""
    bindings = sorted(((str(ns), prefix) for prefix, ns in graph.namespaces()), key=lambda t: -len(t[0]))

    def short(iri: str) -> str:
        for ns, prefix in bindings:
            if iri.startswith(ns):
                local = iri[len(ns):]
                if local and all(c not in local for c in "/#?:"):
                    return f"{prefix}:{local}"
        return f"<{iri}>"

    return short
