"""Validate an R2RML mapping against the ontology and the sources catalog.

:func:`validate_mapping` returns every :class:`~obda.errors.Problem` found
(each with the file and line of the triples map / term map); :func:`check_mapping`
raises :class:`~obda.errors.ValidationError` if any of them is an error, so a
caller only ever holds a mapping that passed ("nothing is half-loaded").

Problem codes:

``unknown_term``            rr:class / predicate IRI not declared in the ontology
``class_as_property``       a class used as predicate, or a property used in rr:class
``object_property_with_literal`` / ``data_property_with_iri`` (warnings)
``sql_syntax``              rr:sqlQuery that sqlglot cannot parse (sqlglot's message)
``unknown_table`` / ``unknown_column``  tables or columns missing from the sources
``duplicate_column``        a logical table returning two columns of the same name
``multiple_streams``        a logical table reading more than one stream
``stream_without_timestamp`` a logical table reading a stream without returning its timestamp
``template_placeholder``    a template placeholder that is not a column of the logical table
``datatype_mismatch``       rr:datatype that does not fit the column type (:data:`DATATYPE_COMPATIBILITY`)
``join_condition_column``   rr:child / rr:parent column missing from the child / parent logical table
``unknown_parent``          rr:parentTriplesMap that is not a triples map of the mapping
``graph_map_ignored``       (warning) a graph map other than rr:defaultGraph: obda's named graphs are timestamps
"""

from __future__ import annotations

from obda.errors import Location, MappingError, Problem, ValidationError
from obda.mapping.sql import LogicalTableError, LogicalTableInfo, describe_logical_table, find_column
from obda.model.mapping import R2RML_DEFAULT_GRAPH, Mapping, RefObjectMap, TermMap, TermMapKind, TermType, TriplesMap
from obda.model.ontology import Ontology
from obda.model.sources import ColumnType, Sources

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LITERAL = "http://www.w3.org/2000/01/rdf-schema#Literal"
RDF_PLAIN = "http://www.w3.org/1999/02/22-rdf-syntax-ns#PlainLiteral"
RDF_LANG = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

_ANY = frozenset(ColumnType)
_NUM = frozenset({ColumnType.INTEGER, ColumnType.DECIMAL, ColumnType.DOUBLE})

#: Which column types may carry which rr:datatype.  A string column fits any
#: datatype (its lexical form may be valid; the database cannot tell us), a
#: datatype not listed here is not checked.  Integers fit every numeric type
#: (every integer is a decimal, float and double); decimal and double columns
#: only fit non-integer numeric types; timestamps fit date/time types.
DATATYPE_COMPATIBILITY: dict[str, frozenset[ColumnType]] = {
    **{
        XSD + t: frozenset({ColumnType.INTEGER, ColumnType.STRING})
        for t in (
            "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
            "nonPositiveInteger", "negativeInteger", "unsignedInt", "unsignedLong", "unsignedShort",
            "unsignedByte",
        )
    },
    XSD + "decimal": frozenset(_NUM | {ColumnType.STRING}),
    XSD + "double": frozenset(_NUM | {ColumnType.STRING}),
    XSD + "float": frozenset(_NUM | {ColumnType.STRING}),
    XSD + "boolean": frozenset({ColumnType.BOOLEAN, ColumnType.INTEGER, ColumnType.STRING}),
    XSD + "dateTime": frozenset({ColumnType.TIMESTAMP, ColumnType.STRING}),
    XSD + "dateTimeStamp": frozenset({ColumnType.TIMESTAMP, ColumnType.STRING}),
    XSD + "date": frozenset({ColumnType.TIMESTAMP, ColumnType.STRING}),
    XSD + "time": frozenset({ColumnType.TIMESTAMP, ColumnType.STRING}),
    XSD + "gYear": frozenset({ColumnType.INTEGER, ColumnType.TIMESTAMP, ColumnType.STRING}),
    XSD + "string": _ANY,
    XSD + "anyURI": _ANY,
    RDFS_LITERAL: _ANY,
    RDF_PLAIN: _ANY,
}


def _short(iri: str) -> str:
    for ns, p in ((XSD, "xsd:"), ("http://www.w3.org/1999/02/22-rdf-syntax-ns#", "rdf:"),
                  ("http://www.w3.org/2000/01/rdf-schema#", "rdfs:")):
        if iri.startswith(ns):
            return p + iri[len(ns) :]
    return f"<{iri}>"


def _loc(*cands: Location) -> Location:
    for c in cands:
        if c.line is not None:
            return c
    return cands[0] if cands else Location()


class _Validator:
    def __init__(self, mapping: Mapping, ontology: Ontology | None, sources: Sources, dialect: str | None):
        self.m = mapping
        self.o = ontology
        self.s = sources
        self.dialect = dialect
        self.problems: list[Problem] = []
        self.infos: dict[str, LogicalTableInfo | None] = {}
        self._described: dict[tuple, LogicalTableInfo] = {}

    def add(self, code: str, msg: str, loc: Location, severity: str = "error") -> None:
        self.problems.append(Problem(code, msg, loc, severity))

    def info(self, tm: TriplesMap) -> LogicalTableInfo | None:
        """The logical table analysis (None after reporting why it failed)."""
        if tm.id not in self.infos:
            lt = tm.logical_table
            key = (lt.table_name, lt.sql_query)
            try:
                info = self._described.get(key)  # many triples maps share one logical table
                if info is None:  # errors are not cached: each triples map reports at its own line
                    info = self._described[key] = describe_logical_table(lt, self.s, self.dialect)
            except LogicalTableError as e:
                self.add(e.code, f"triples map {tm.name}: {e.message}", _loc(e.location, tm.location))
                info = None
            except MappingError as e:
                self.add("mapping_error", f"triples map {tm.name}: {e.message}", _loc(e.location, tm.location))
                info = None
            else:
                if info.stream is not None and info.timestamp_column is None:
                    st = self.s.table(info.stream)
                    ts = st.timestamp if st else None
                    self.add(
                        "stream_without_timestamp",
                        f"triples map {tm.name}: the logical table reads stream {info.stream!r} but does not select "
                        + (f"its timestamp column {ts!r}" if ts else "a timestamp column (the stream declares none)")
                        + "; stream rows need their application time",
                        _loc(tm.logical_table.location, tm.location),
                    )
            self.infos[tm.id] = info
        return self.infos[tm.id]

    # ---- ontology terms

    def check_class(self, tm: TriplesMap, cls: str) -> None:
        if self.o is None:
            return
        if self.o.is_class(cls):
            return
        if self.o.is_object_property(cls) or self.o.is_data_property(cls):
            self.add(
                "class_as_property",
                f"triples map {tm.name}: rr:class {cls} is a property of the ontology, not a class",
                _loc(tm.subject.location, tm.location),
            )
        else:
            self.add(
                "unknown_term",
                f"triples map {tm.name}: rr:class {cls} is not declared in the ontology",
                _loc(tm.subject.location, tm.location),
            )

    def check_predicate(self, tm: TriplesMap, pred: TermMap, objects) -> None:
        if self.o is None or pred.kind is not TermMapKind.CONSTANT:
            return
        p = pred.value
        loc = _loc(pred.location, tm.location)
        if p == RDF_TYPE:
            for om in objects:
                if isinstance(om, TermMap) and om.kind is TermMapKind.CONSTANT and om.term_type is TermType.IRI:
                    self.check_class(tm, om.value)
            return
        if self.o.is_class(p) and not (self.o.is_object_property(p) or self.o.is_data_property(p)):
            self.add("class_as_property", f"triples map {tm.name}: predicate {p} is a class of the ontology, not a property", loc)
            return
        if not (self.o.is_object_property(p) or self.o.is_data_property(p)):
            self.add("unknown_term", f"triples map {tm.name}: predicate {p} is not declared in the ontology", loc)
            return
        for om in objects:
            if isinstance(om, RefObjectMap):
                is_literal = False
            else:
                is_literal = om.term_type is TermType.LITERAL
            if self.o.is_object_property(p) and not self.o.is_data_property(p) and is_literal:
                self.add(
                    "object_property_with_literal",
                    f"triples map {tm.name}: object property {p} gets a literal object",
                    _loc(getattr(om, "location", Location()), loc),
                    "warning",
                )
            if self.o.is_data_property(p) and not self.o.is_object_property(p) and not is_literal:
                self.add(
                    "data_property_with_iri",
                    f"triples map {tm.name}: data property {p} gets an IRI / blank node object",
                    _loc(getattr(om, "location", Location()), loc),
                    "warning",
                )

    # ---- columns

    def check_term_map(self, tm: TriplesMap, tmap: TermMap, info: LogicalTableInfo | None, role: str) -> None:
        if info is None or tmap.kind is TermMapKind.CONSTANT:
            return
        loc = _loc(tmap.location, tm.location)
        avail = ", ".join(c.name for c in info.columns)
        if tmap.kind is TermMapKind.COLUMN:
            col = find_column(info.columns, tmap.value)
            if col is None:
                self.add(
                    "unknown_column",
                    f"triples map {tm.name}: {role} rr:column {tmap.value!r} is not a column of the logical table "
                    f"(columns: {avail})",
                    loc,
                )
                return
            self.check_datatype(tm, tmap, col, info, loc)
            return
        for part in tmap.template:
            if part.is_column and find_column(info.columns, part.text) is None:
                self.add(
                    "template_placeholder",
                    f"triples map {tm.name}: {role} template {tmap.value!r}: placeholder {{{part.text}}} is not a "
                    f"column of the logical table (columns: {avail})",
                    loc,
                )

    def check_datatype(self, tm: TriplesMap, tmap: TermMap, col, info: LogicalTableInfo, loc: Location) -> None:
        if tmap.datatype is None or col.name in info.untyped:
            return
        allowed = DATATYPE_COMPATIBILITY.get(tmap.datatype)
        if allowed is None or col.type in allowed:
            return
        instead = sorted(_short(dt) for dt, ok in DATATYPE_COMPATIBILITY.items() if col.type in ok)
        columns = ", ".join(t.value for t in ColumnType if t in allowed)
        self.add(
            "datatype_mismatch",
            f"triples map {tm.name}: rr:datatype {_short(tmap.datatype)} does not fit column {col.name!r} of type "
            f"{col.type.value}: a {col.type.value} column takes rr:datatype {', '.join(instead) or 'none'} "
            f"({_short(tmap.datatype)} takes {columns} columns)",
            loc,
        )

    def check_graph(self, tm: TriplesMap, g: TermMap) -> None:
        """A graph map other than ``rr:defaultGraph`` is not what obda's queries read: their named graphs are the
        streams' timestamps (``GRAPH ?t``)."""
        if g.value == R2RML_DEFAULT_GRAPH:
            return
        self.add("graph_map_ignored", f"triples map {tm.name}: its graph map is not used: obda's named graphs are the "
                 "streams' timestamps (GRAPH ?t), so these triples are read in the default graph (a static table's) "
                 "or in the graph of their row's time (a stream's); drop the graph map, or map the time as the "
                 "logical table's timestamp", _loc(g.location, tm.location), "warning")

    # ---- main

    def run(self) -> list[Problem]:
        ids = {tm.id: tm for tm in self.m.triples_maps}
        for tm in self.m.triples_maps:
            info = self.info(tm)
            self.check_term_map(tm, tm.subject, info, "subject map")
            for g in tm.subject_graphs:
                self.check_term_map(tm, g, info, "graph map")
                self.check_graph(tm, g)
            for c in tm.classes:
                self.check_class(tm, c)
            for pom in tm.predicate_object_maps:
                for p in pom.predicates:
                    self.check_term_map(tm, p, info, "predicate map")
                    self.check_predicate(tm, p, pom.objects)
                for g in pom.graphs:
                    self.check_term_map(tm, g, info, "graph map")
                    self.check_graph(tm, g)
                for om in pom.objects:
                    if isinstance(om, TermMap):
                        self.check_term_map(tm, om, info, "object map")
                        continue
                    self.check_ref(tm, om, info, ids)
        return self.problems

    def check_ref(self, tm: TriplesMap, om: RefObjectMap, info, ids) -> None:
        loc = _loc(om.location, tm.location)
        parent = ids.get(om.parent_triples_map)
        if parent is None:
            self.add(
                "unknown_parent",
                f"triples map {tm.name}: rr:parentTriplesMap {om.parent_triples_map} is not a triples map of the mapping",
                loc,
            )
            return
        pinfo = self.info(parent)
        for jc in om.join_conditions:
            jloc = _loc(jc.location, loc)
            if info is not None and find_column(info.columns, jc.child) is None:
                self.add(
                    "join_condition_column",
                    f"triples map {tm.name}: rr:child {jc.child!r} is not a column of its logical table "
                    f"(columns: {', '.join(c.name for c in info.columns)})",
                    jloc,
                )
            if pinfo is not None and find_column(pinfo.columns, jc.parent) is None:
                self.add(
                    "join_condition_column",
                    f"triples map {tm.name}: rr:parent {jc.parent!r} is not a column of the logical table of parent "
                    f"{parent.name} (columns: {', '.join(c.name for c in pinfo.columns)})",
                    jloc,
                )


def validate_mapping(
    mapping: Mapping, ontology: Ontology | None, sources: Sources, *, dialect: str | None = None
) -> list[Problem]:
    """All problems of ``mapping`` against ``ontology`` (None: skip term checks) and ``sources``.

    Also checks the catalog's streams: a stream without a timestamp column
    (possible when a :class:`Sources` is built programmatically) is reported.
    """
    problems: list[Problem] = []
    for t in sources.tables:
        if t.is_stream and (t.timestamp is None or t.column(t.timestamp) is None):
            problems.append(
                Problem(
                    "stream_without_timestamp",
                    f"stream {t.name!r} has no timestamp column; a stream needs exactly one application-time column",
                    t.source_location if t.source_location.file or t.source_location.line else Location(sources.file),
                )
            )
    problems.extend(_Validator(mapping, ontology, sources, dialect).run())
    return problems


def check_mapping(
    mapping: Mapping, ontology: Ontology | None, sources: Sources, *, dialect: str | None = None
) -> Mapping:
    """Return ``mapping`` if it has no error; raise :class:`ValidationError` with all problems otherwise.

    Warnings do not block; callers that want them use :func:`validate_mapping`.
    """
    problems = validate_mapping(mapping, ontology, sources, dialect=dialect)
    if any(p.severity == "error" for p in problems):
        raise ValidationError(problems)
    return mapping


def load_validated_mapping(
    paths, ontology: Ontology | None, sources: Sources, *, dialect: str | None = None
) -> Mapping:
    """Parse mapping files and validate them; the mapping is returned only if it has no error.

    Raises :class:`~obda.errors.MappingError` for a structural error and
    :class:`~obda.errors.ValidationError` with every problem otherwise.
    """
    from obda.mapping.parse import load_mapping

    return check_mapping(load_mapping(paths), ontology, sources, dialect=dialect)
