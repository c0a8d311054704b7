"""R2RML mappings as typed objects (W3C R2RML, https://www.w3.org/TR/r2rml/).

``obda.mapping.parse`` reads Turtle into these objects; the unfolder and the
materialiser consume them.  Every object keeps the :class:`Location` (file and
line of the triples map or term map) so validation errors can point at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Union

from obda.errors import Location, MappingError

#: R2RML's default graph (``rr:defaultGraph``): the graph of a graph map that puts triples where no map would
R2RML_DEFAULT_GRAPH = "http://www.w3.org/ns/r2rml#defaultGraph"


class TermType(str, Enum):
    IRI = "iri"
    BLANK_NODE = "blank_node"
    LITERAL = "literal"


class TermMapKind(str, Enum):
    CONSTANT = "constant"
    COLUMN = "column"
    TEMPLATE = "template"


@dataclass(frozen=True)
class TemplatePart:
    """A piece of an ``rr:template``: literal text, or a column reference."""

    text: str
    is_column: bool


def parse_template(template: str, location: Location | None = None) -> tuple[TemplatePart, ...]:
    """Split an R2RML string template into literal and column parts.

    ``\\{`` and ``\\}`` escape braces; ``\\\\`` a backslash (R2RML §7.3).
    """
    parts: list[TemplatePart] = []
    buf: list[str] = []
    i = 0
    n = len(template)
    while i < n:
        ch = template[i]
        if ch == "\\" and i + 1 < n and template[i + 1] in "{}\\":
            buf.append(template[i + 1])
            i += 2
            continue
        if ch == "{":
            j = i + 1
            col: list[str] = []
            while j < n and template[j] != "}":
                if template[j] == "\\" and j + 1 < n and template[j + 1] in "{}\\":
                    col.append(template[j + 1])
                    j += 2
                    continue
                if template[j] == "{":
                    raise MappingError(f"template {template!r}: nested '{{'", location)
                col.append(template[j])
                j += 1
            if j >= n:
                raise MappingError(f"template {template!r}: '{{' without matching '}}'", location)
            if not col:
                raise MappingError(f"template {template!r}: empty column reference '{{}}'", location)
            if buf:
                parts.append(TemplatePart("".join(buf), False))
                buf = []
            parts.append(TemplatePart("".join(col), True))
            i = j + 1
            continue
        if ch == "}":
            raise MappingError(f"template {template!r}: '}}' without matching '{{'", location)
        buf.append(ch)
        i += 1
    if buf:
        parts.append(TemplatePart("".join(buf), False))
    return tuple(parts)


@dataclass(frozen=True)
class TermMap:
    """A subject, predicate, object or graph map.

    ``kind`` says whether ``value`` is a constant RDF term (IRI or literal
    lexical form), a column name, or a template string.  ``term_type`` is the
    generated term's type (R2RML defaults applied by the parser).
    """

    kind: TermMapKind
    value: str
    term_type: TermType
    datatype: str | None = None
    language: str | None = None
    inverse_expression: str | None = None
    location: Location = field(default_factory=Location, compare=False)

    @property
    def template(self) -> tuple[TemplatePart, ...]:
        if self.kind is not TermMapKind.TEMPLATE:
            raise ValueError("not a template term map")
        return parse_template(self.value, self.location)

    @property
    def columns(self) -> tuple[str, ...]:
        """Columns this term map reads."""
        if self.kind is TermMapKind.COLUMN:
            return (self.value,)
        if self.kind is TermMapKind.TEMPLATE:
            return tuple(p.text for p in self.template if p.is_column)
        return ()


@dataclass(frozen=True)
class JoinCondition:
    child: str
    parent: str
    location: Location = field(default_factory=Location, compare=False)


@dataclass(frozen=True)
class RefObjectMap:
    """``rr:parentTriplesMap`` with its join conditions: the object is the parent's subject."""

    parent_triples_map: str
    join_conditions: tuple[JoinCondition, ...] = ()
    location: Location = field(default_factory=Location, compare=False)


ObjectMap = Union[TermMap, RefObjectMap]


@dataclass(frozen=True)
class LogicalTable:
    """``rr:tableName`` or ``rr:sqlQuery`` (exactly one is set)."""

    table_name: str | None = None
    sql_query: str | None = None
    sql_versions: tuple[str, ...] = ()
    location: Location = field(default_factory=Location, compare=False)

    @property
    def is_query(self) -> bool:
        return self.sql_query is not None


@dataclass(frozen=True)
class PredicateObjectMap:
    predicates: tuple[TermMap, ...]
    objects: tuple[ObjectMap, ...]
    graphs: tuple[TermMap, ...] = ()
    location: Location = field(default_factory=Location, compare=False)


@dataclass(frozen=True)
class TriplesMap:
    """One ``rr:TriplesMap``.  ``id`` is its IRI (or blank node label)."""

    id: str
    logical_table: LogicalTable
    subject: TermMap
    classes: tuple[str, ...] = ()
    subject_graphs: tuple[TermMap, ...] = ()
    predicate_object_maps: tuple[PredicateObjectMap, ...] = ()
    location: Location = field(default_factory=Location, compare=False)
    base_iri: str | None = field(default=None, compare=False)  # base for relative generated IRIs (R2RML §5.1)

    @property
    def name(self) -> str:
        """Short name for messages: the IRI's local part."""
        return re.split(r"[/#]", self.id.rstrip("/#"))[-1] or self.id


@dataclass(frozen=True)
class Mapping:
    """All triples maps of a project (from one or more files)."""

    triples_maps: tuple[TriplesMap, ...]
    files: tuple[str, ...] = ()

    def get(self, tm_id: str) -> TriplesMap:
        for tm in self.triples_maps:
            if tm.id == tm_id:
                return tm
        raise KeyError(tm_id)
