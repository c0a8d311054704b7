"""Ontology queries: unions of conjunctive queries with application time.

A SPARQL ``SELECT`` is parsed (``obda.query``) into a :class:`Query`: a
projection, a DISTINCT flag and a union of :class:`CQ` branches.  Each CQ is a
set of atoms over the ontology vocabulary plus a conjunction of comparisons.
An atom inside ``GRAPH ?t { ... }`` carries ``time=Var('t')``: it is a stream
assertion at application time ``?t``; an atom with ``time=None`` is static.

Terms are plain frozen dataclasses so that rewriting (``obda.rewrite``) and
unfolding (``obda.mapping``) can hash, compare and substitute them freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Union

from obda.errors import Location

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


@dataclass(frozen=True, order=True)
class Var:
    """A variable.  ``bnode`` marks a blank node of the query text (never projected)."""

    name: str
    bnode: bool = False

    def __str__(self) -> str:
        return ("_:" if self.bnode else "?") + self.name


@dataclass(frozen=True, order=True)
class IRI:
    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


@dataclass(frozen=True, order=True)
class Literal:
    """An RDF literal: lexical form, datatype IRI (xsd:string if plain) and language tag."""

    lexical: str
    datatype: str = XSD + "string"
    language: str | None = None

    def __str__(self) -> str:
        if self.language:
            return f'"{self.lexical}"@{self.language}'
        if self.datatype == XSD + "string":
            return f'"{self.lexical}"'
        return f'"{self.lexical}"^^<{self.datatype}>'

    @property
    def is_datetime(self) -> bool:
        return self.datatype in (XSD + "dateTime", XSD + "dateTimeStamp", XSD + "date")


Term = Union[Var, IRI, Literal]


@dataclass(frozen=True, order=True)
class ClassAtom:
    """``cls(term)``, at application time ``time`` (None: static)."""

    cls: str
    term: Term
    time: Var | None = None

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.term,)

    @property
    def predicate(self) -> str:
        return self.cls

    def __str__(self) -> str:
        s = f"{_short(self.cls)}({self.term})"
        return s + (f"@{self.time}" if self.time else "")


@dataclass(frozen=True, order=True)
class PropertyAtom:
    """``prop(subject, object)`` for an object or data property, at time ``time``."""

    prop: str
    subject: Term
    object: Term
    time: Var | None = None

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.subject, self.object)

    @property
    def predicate(self) -> str:
        return self.prop

    def __str__(self) -> str:
        s = f"{_short(self.prop)}({self.subject}, {self.object})"
        return s + (f"@{self.time}" if self.time else "")


Atom = Union[ClassAtom, PropertyAtom]

COMPARISON_OPS = ("<", "<=", "=", "!=", ">", ">=")
FLIP = {"<": ">", "<=": ">=", "=": "=", "!=": "!=", ">": "<", ">=": "<="}


@dataclass(frozen=True, order=True)
class Comparison:
    """``left op right``; op in ``< <= = != > >=``."""

    op: str
    left: Term
    right: Term

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}")

    def flipped(self) -> "Comparison":
        return Comparison(FLIP[self.op], self.right, self.left)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class CQ:
    """A conjunctive query: atoms and a conjunction of comparisons (a branch of a UCQ)."""

    atoms: tuple[Atom, ...]
    filters: tuple[Comparison, ...] = ()

    @property
    def variables(self) -> frozenset[Var]:
        out: set[Var] = set()
        for a in self.atoms:
            out.update(t for t in a.terms if isinstance(t, Var))
            if a.time is not None:
                out.add(a.time)
        for c in self.filters:
            out.update(t for t in (c.left, c.right) if isinstance(t, Var))
        return frozenset(out)

    @property
    def time_variables(self) -> frozenset[Var]:
        return frozenset(a.time for a in self.atoms if a.time is not None)

    def substitute(self, mapping: dict[Var, Term]) -> "CQ":
        def s(t):
            return mapping.get(t, t) if isinstance(t, Var) else t

        atoms = []
        for a in self.atoms:
            time = s(a.time) if a.time is not None else None
            if isinstance(a, ClassAtom):
                atoms.append(replace(a, term=s(a.term), time=time))
            else:
                atoms.append(replace(a, subject=s(a.subject), object=s(a.object), time=time))
        filters = tuple(Comparison(c.op, s(c.left), s(c.right)) for c in self.filters)
        return CQ(tuple(atoms), filters)

    def __str__(self) -> str:
        parts = [str(a) for a in self.atoms] + [str(f) for f in self.filters]
        return " ∧ ".join(parts)


@dataclass(frozen=True)
class Query:
    """A parsed SPARQL SELECT: a union of CQs with a projection.

    ``distinct`` is True for ``SELECT DISTINCT`` (set semantics, Π = π) and
    False for ``SELECT`` (bag semantics, Π = π̇).  ``projection`` lists the
    answer variables in SELECT order; time variables are never projected.
    ``branches`` holds the disjunctive normal form of the WHERE clause: one CQ
    per UNION branch and per ``||`` alternative of FILTERs.
    """

    projection: tuple[Var, ...]
    branches: tuple[CQ, ...]
    distinct: bool = False
    text: str = ""
    prefixes: tuple[tuple[str, str], ...] = ()
    location: Location = field(default_factory=Location, compare=False)

    @property
    def time_variables(self) -> frozenset[Var]:
        out: set[Var] = set()
        for b in self.branches:
            out |= b.time_variables
        return frozenset(out)

    def with_branches(self, branches: Iterable[CQ]) -> "Query":
        return replace(self, branches=tuple(branches))

    def __str__(self) -> str:
        head = ("SELECT DISTINCT " if self.distinct else "SELECT ") + " ".join(map(str, self.projection))
        return head + " WHERE " + "  ∪  ".join(f"{{{b}}}" for b in self.branches)


_SHORT = {
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#": "rdf:",
    "http://www.w3.org/2000/01/rdf-schema#": "rdfs:",
    "http://www.w3.org/2002/07/owl#": "owl:",
    XSD: "xsd:",
}


def _short(iri: str) -> str:
    for ns, p in _SHORT.items():
        if iri.startswith(ns):
            return p + iri[len(ns):]
    for sep in ("#", "/"):
        if sep in iri:
            return iri.rsplit(sep, 1)[1] or iri
    return iri
