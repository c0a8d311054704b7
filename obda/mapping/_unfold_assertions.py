"""Mapping assertions indexed by predicate.

Private helper of :mod:`obda.mapping.unfold`.  Every triples map yields

* class assertions: one per ``rr:class`` of its subject map, and one per
  predicate-object map with predicate ``rdf:type`` (constant object: a class
  assertion of that class; otherwise a *dynamic* class assertion whose class is
  the object term);
* property assertions: one per (constant predicate × object map) of each
  predicate-object map.  A referencing object map makes the object the parent
  triples map's subject, on the parent's logical table joined by the join
  conditions (or on the same row when both logical tables are the same and
  there are no join conditions, R2RML §8).

An assertion is *temporal* when a logical table it reads reads a stream; its
timestamp is the stream's timestamp column (the child's when both read one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from obda.errors import Location
from obda.mapping._unfold_tables import TableShape, table_shape
from obda.mapping.sql import sqlglot_schema
from obda.model.mapping import JoinCondition, LogicalTable, Mapping, RefObjectMap, TermMap, TermMapKind, TriplesMap
from obda.model.query import RDF_TYPE, Atom, ClassAtom, PropertyAtom
from obda.model.sources import Sources


@dataclass(frozen=True)
class Assertion:
    """One mapping assertion ``P(subject, object)`` or ``C(subject)``.

    ``obj`` is the object term map (None for ``rr:class``); ``obj_on_parent``
    says it is evaluated on the parent logical table (a referencing object map),
    joined by ``joins`` (or on the child row when ``same_row``).  For a class
    assertion from an ``rdf:type`` predicate-object map, ``obj`` is the class term.
    """

    predicate: str | None  # class or property IRI; None for a dynamic class assertion
    is_class: bool
    triples_map: TriplesMap
    shapes: Callable[[TriplesMap], TableShape] = field(compare=False, repr=False)
    subject: TermMap
    obj: TermMap | None = None
    parent: TriplesMap | None = None
    joins: tuple[JoinCondition, ...] = ()
    same_row: bool = False
    location: Location = Location()

    @property
    def child(self) -> TableShape:
        """The analysed logical table of the triples map (analysed on first use)."""
        return self.shapes(self.triples_map)

    @property
    def parent_shape(self) -> TableShape | None:
        return self.shapes(self.parent) if self.parent is not None else None

    @property
    def temporal(self) -> bool:
        return self.child.temporal or (self.parent_shape is not None and not self.same_row and self.parent_shape.temporal)


def _same_table(a: LogicalTable, b: LogicalTable) -> bool:
    """Same effective SQL query (R2RML §8): same table name or same query text."""
    if a.table_name is not None and b.table_name is not None:
        return a.table_name.strip('"').lower() == b.table_name.strip('"').lower()
    if a.sql_query is not None and b.sql_query is not None:
        return " ".join(a.sql_query.split()) == " ".join(b.sql_query.split())
    return False


class AssertionIndex:
    """Assertions of a mapping by predicate, with each logical table analysed once."""

    def __init__(self, mapping: Mapping, sources: Sources):
        self._shapes: dict[int, TableShape] = {}
        self._sources = sources
        self._schema = None  # sqlglot schema of the catalog, built on first use
        self._by_class: dict[str, list[Assertion]] = {}
        self._dynamic_class: list[Assertion] = []
        self._by_property: dict[str, list[Assertion]] = {}
        by_id = {tm.id: tm for tm in mapping.triples_maps}
        for tm in mapping.triples_maps:
            self._add_triples_map(tm, by_id)

    def _shape(self, tm: TriplesMap) -> TableShape:
        key = id(tm.logical_table)
        if key not in self._shapes:
            if self._schema is None:
                self._schema = sqlglot_schema(self._sources)
            self._shapes[key] = table_shape(tm.logical_table, self._sources, self._schema)
        return self._shapes[key]

    def _add_triples_map(self, tm: TriplesMap, by_id: dict[str, TriplesMap]) -> None:
        shape = self._shape
        for cls in tm.classes:
            self._by_class.setdefault(cls, []).append(
                Assertion(cls, True, tm, shape, tm.subject, location=tm.subject.location or tm.location)
            )
        for pom in tm.predicate_object_maps:
            for pred in pom.predicates:
                if pred.kind is not TermMapKind.CONSTANT:
                    continue  # non-constant predicate maps cannot be indexed (documented gap)
                for om in pom.objects:
                    a = self._assertion(tm, shape, pred.value, om, by_id, pom.location)
                    if pred.value == RDF_TYPE:
                        if isinstance(om, TermMap) and om.kind is TermMapKind.CONSTANT:
                            self._by_class.setdefault(om.value, []).append(
                                Assertion(om.value, True, tm, shape, tm.subject, location=pom.location)
                            )
                        else:
                            self._dynamic_class.append(
                                Assertion(None, True, tm, shape, tm.subject, a.obj, a.parent, a.joins, a.same_row,
                                          pom.location)
                            )
                    else:
                        self._by_property.setdefault(pred.value, []).append(a)

    def _assertion(self, tm, shape, pred: str, om, by_id, loc: Location) -> Assertion:
        if isinstance(om, RefObjectMap):
            parent = by_id[om.parent_triples_map]
            same = not om.join_conditions and _same_table(tm.logical_table, parent.logical_table)
            return Assertion(pred, False, tm, shape, tm.subject, parent.subject, parent, om.join_conditions, same,
                             om.location if om.location.line else loc)
        return Assertion(pred, False, tm, shape, tm.subject, om, location=loc)

    def matching(self, atom: Atom) -> list[tuple[Assertion, str]]:
        """Assertions that can produce ``atom``, with the kind of match.

        The kind is ``class`` (class atom, class assertion), ``dynamic-class``
        (class atom, rdf:type assertion with a computed class), ``property``,
        or ``type-property`` (an ``rdf:type`` property atom matched by a class
        assertion).  Temporal atoms match temporal assertions only, static
        atoms static ones (docs/semantics.md).
        """
        temporal = atom.time is not None
        out: list[tuple[Assertion, str]] = []
        if isinstance(atom, ClassAtom):
            out += [(a, "class") for a in self._by_class.get(atom.cls, [])]
            out += [(a, "dynamic-class") for a in self._dynamic_class]
        elif isinstance(atom, PropertyAtom):
            out += [(a, "property") for a in self._by_property.get(atom.prop, [])]
            if atom.prop == RDF_TYPE:
                for cls_assertions in self._by_class.values():
                    out += [(a, "type-property") for a in cls_assertions]
                out += [(a, "type-property") for a in self._dynamic_class]
        return [(a, k) for a, k in out if a.temporal == temporal]


AssertionIndexFactory = Callable[[Mapping, Sources], AssertionIndex]
