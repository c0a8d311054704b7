"""Read W3C R2RML mappings (Turtle) into the typed model of :mod:`obda.model.mapping`.

rdflib parses the Turtle; this module walks the graph, applies the R2RML
defaults (term types, shortcuts ``rr:subject``/``rr:predicate``/``rr:object``/
``rr:graph``) and checks the structural rules of the recommendation (one
subject map, one logical table, exactly one of constant/column/template, ...).
Structural errors raise :class:`~obda.errors.MappingError` with file and line.

rdflib keeps no source positions: lines are recovered best-effort from the Turtle text, and its syntax errors
located, by :mod:`obda.mapping.turtle_text`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from rdflib import BNode, Graph, Literal, Namespace, URIRef
from rdflib.namespace import RDF
from rdflib.term import Node

from obda.errors import Location, MappingError
from obda.mapping.turtle_text import LineIndex, lexical_error, literal_patterns, nesting_error, turtle_error
from obda.model.mapping import (
    JoinCondition,
    LogicalTable,
    Mapping,
    ObjectMap,
    PredicateObjectMap,
    RefObjectMap,
    TermMap,
    TermMapKind,
    TermType,
    TriplesMap,
    parse_template,
)
from obda.model.sources_file import read_utf8

RR = Namespace("http://www.w3.org/ns/r2rml#")
DEFAULT_GRAPH = str(RR.defaultGraph)

#: SQL version identifiers of R2RML §5.2 and the W3C list of identifiers
#: (https://www.w3.org/2001/sw/wiki/RDB2RDF/SQL_Version_IRIs).
KNOWN_SQL_VERSIONS = frozenset(str(RR[n]) for n in (
    "SQL2008", "Oracle", "MySQL", "MSSQLServer", "HSQLDB", "PostgreSQL", "DB2", "Informix", "Ingres", "Progress",
    "SybaseASE", "SybaseSQLAnywhere", "Virtuoso", "Firebird"))

_TERM_TYPES = {RR.IRI: TermType.IRI, RR.BlankNode: TermType.BLANK_NODE, RR.Literal: TermType.LITERAL}

#: BCP 47 language tag, syntactic check (primary subtag of 2-3 letters as in
#: ISO 639, or the private-use / grandfathered ``x-`` and ``i-`` forms).
_LANG_TAG = re.compile(r"^(?:[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*|[xXiI](?:-[A-Za-z0-9]{1,8})+)$")


# --------------------------------------------------------------------------- reader


class _Reader:
    """Turns the R2RML triples of one file into model objects."""

    def __init__(self, graph: Graph, index: LineIndex):
        self.g = graph
        self.ix = index
        self.file = index.file

    # ---- small helpers

    def _err(self, msg: str, offset: int | None) -> MappingError:
        return MappingError(msg, self.ix.loc(offset))

    def _objects(self, s: Node, p: URIRef) -> list[Node]:
        return sorted(self.g.objects(s, p), key=lambda n: (isinstance(n, BNode), str(n)))

    def _one(self, s: Node, p: URIRef, what: str, off: int | None, required: bool = False) -> Node | None:
        vals = self._objects(s, p)
        if len(vals) > 1:
            raise self._err(f"{what} has {len(vals)} values for {self._qn(p)}; R2RML allows one", off)
        if not vals:
            if required:
                raise self._err(f"{what} has no {self._qn(p)}", off)
            return None
        return vals[0]

    def _qn(self, p: Node) -> str:
        s = str(p)
        return "rr:" + s[len(str(RR)) :] if s.startswith(str(RR)) else f"<{s}>"

    def _string(self, node: Node, what: str, off: int | None) -> str:
        if not isinstance(node, Literal):
            raise self._err(f"{what} must be a string literal, got {node.n3()}", off)
        return str(node)

    # ---- triples maps

    def triples_map_nodes(self) -> list[Node]:
        """Resources that are triples maps: typed rr:TriplesMap or having rr:logicalTable."""
        nodes = set(self.g.subjects(RR.logicalTable, None)) | set(self.g.subjects(RDF.type, RR.TriplesMap))
        return sorted(nodes, key=lambda n: (isinstance(n, BNode), str(n)))

    def read_all(self) -> list[TriplesMap]:
        nodes = self.triples_map_nodes()
        starts = {}
        for n in nodes:
            off = self.ix.statement_offset(n)
            if off is not None:
                starts[str(n)] = off
        self.ix.set_regions(starts)
        self._starts = starts
        tms = [self.read_triples_map(n) for n in nodes]
        return sorted(tms, key=lambda t: (t.location.line or 0, t.id))

    def read_triples_map(self, node: Node) -> TriplesMap:
        tm_id = str(node) if isinstance(node, URIRef) else f"_:{node}"
        off = self._starts.get(str(node))
        what = f"triples map {_short(tm_id)}"
        lt_nodes = self._objects(node, RR.logicalTable)
        if not lt_nodes:
            raise self._err(f"{what} has no rr:logicalTable", off)
        if len(lt_nodes) > 1:
            raise self._err(f"{what} has {len(lt_nodes)} rr:logicalTable values; R2RML allows exactly one", off)
        logical_table = self.read_logical_table(lt_nodes[0], str(node), what, off)

        subj_maps = [(n, "map") for n in self._objects(node, RR.subjectMap)]
        subj_maps += [(n, "const") for n in self._objects(node, RR.subject)]
        if not subj_maps:
            raise self._err(f"{what} has no subject map (rr:subjectMap or rr:subject)", off)
        if len(subj_maps) > 1:
            raise self._err(f"{what} has {len(subj_maps)} subject maps; R2RML allows exactly one", off)
        sm_node, how = subj_maps[0]
        classes: tuple[str, ...] = ()
        subject_graphs: tuple[TermMap, ...] = ()
        if how == "const":
            subject = self.constant_term_map(sm_node, "subject", str(node), off)
        else:
            subject = self.read_term_map(sm_node, "subject", str(node), off)
            cls = []
            for c in self._objects(sm_node, RR["class"]):
                if not isinstance(c, URIRef):
                    raise self._err(f"{what}: rr:class must be an IRI, got {c.n3()}", off)
                cls.append(str(c))
            classes = tuple(cls)
            subject_graphs = self.read_graph_maps(sm_node, str(node), off)

        poms = tuple(
            self.read_pom(p, str(node), what, off) for p in self._objects(node, RR.predicateObjectMap)
        )
        poms = tuple(sorted(poms, key=lambda p: p.location.line or 0))
        return TriplesMap(
            id=tm_id,
            logical_table=logical_table,
            subject=subject,
            classes=classes,
            subject_graphs=subject_graphs,
            predicate_object_maps=poms,
            location=self.ix.loc(off),
            base_iri=self.ix.base,
        )

    def read_logical_table(self, lt: Node, tm: str, what: str, tm_off: int | None) -> LogicalTable:
        off = self.ix.find_in(tm, [r"rr:logicalTable", r"<http://www\.w3\.org/ns/r2rml#logicalTable>"]) or tm_off
        table = self._one(lt, RR.tableName, f"{what}: logical table", off)
        query = self._one(lt, RR.sqlQuery, f"{what}: logical table", off)
        if table is not None and query is not None:
            raise self._err(f"{what}: logical table has both rr:tableName and rr:sqlQuery; use one", off)
        if table is None and query is None:
            raise self._err(f"{what}: logical table has neither rr:tableName nor rr:sqlQuery", off)
        versions = []
        for v in self._objects(lt, RR.sqlVersion):
            if str(v) not in KNOWN_SQL_VERSIONS:
                raise self._err(
                    f"{what}: unknown rr:sqlVersion {v.n3()}; known: rr:SQL2008 and the W3C SQL version IRIs", off
                )
            versions.append(str(v))
        if table is not None:
            name = self._string(table, f"{what}: rr:tableName", off)
            if not name.strip():
                raise self._err(f"{what}: empty rr:tableName", off)
            off = self.ix.find_first(tm, literal_patterns(name, "tableName")) or off
            return LogicalTable(table_name=name, sql_versions=tuple(versions), location=self.ix.loc(off))
        sql = self._string(query, f"{what}: rr:sqlQuery", off)
        if not sql.strip():
            raise self._err(f"{what}: empty rr:sqlQuery", off)
        q_off = self.ix.find_in(tm, [r"rr:sqlQuery"]) or off
        return LogicalTable(sql_query=sql, sql_versions=tuple(versions), location=self.ix.loc(q_off))

    # ---- term maps

    def constant_term_map(
        self, value: Node, position: str, tm: str, tm_off: int | None, via: str | None = None
    ) -> TermMap:
        """A constant term map from a shortcut (rr:subject, rr:predicate, rr:object, rr:graph) or rr:constant.

        ``via`` is the property that holds the constant (its local name), used to locate it.
        """
        via = via or position
        if isinstance(value, URIRef):
            pats = self.ix.patterns(value)
            groups = [[rf"rr:{via}\s+(?:{'|'.join(pats)})"], pats] if pats else []
        else:
            groups = literal_patterns(str(value), via)
        off = self.ix.find_first(tm, groups) if groups else None
        off = off if off is not None else tm_off
        if isinstance(value, BNode):
            raise self._err(f"{position} constant must be an IRI or a literal, not a blank node", off)
        if isinstance(value, Literal):
            if position != "object":
                raise self._err(
                    f"{position} map constant {value.n3()} is a literal; a {position} must be an IRI", off
                )
            return TermMap(
                TermMapKind.CONSTANT,
                str(value),
                TermType.LITERAL,
                datatype=str(value.datatype) if value.datatype else None,
                language=value.language,
                location=self.ix.loc(off),
            )
        return TermMap(TermMapKind.CONSTANT, str(value), TermType.IRI, location=self.ix.loc(off))

    def read_term_map(self, node: Node, position: str, tm: str, tm_off: int | None) -> TermMap:
        """A term map resource with rr:constant / rr:column / rr:template, R2RML defaults applied."""
        what = f"{position} map"
        if not isinstance(node, (BNode, URIRef)):
            raise self._err(f"{what} must be a resource, got {node.n3()}", tm_off)
        consts = self._objects(node, RR.constant)
        cols = self._objects(node, RR.column)
        tmpls = self._objects(node, RR.template)
        given = [n for n, v in (("rr:constant", consts), ("rr:column", cols), ("rr:template", tmpls)) if v]
        # locate the term map by what it holds
        anchor = (cols or tmpls or consts or [None])[0]
        if anchor is None:
            off = tm_off
        elif isinstance(anchor, Literal):
            prop = "column" if cols else "template" if tmpls else "constant"
            off = self.ix.find_first(tm, literal_patterns(str(anchor), prop))
        else:
            pats = self.ix.patterns(anchor)
            off = self.ix.find_first(tm, [[rf"rr:constant\s+(?:{'|'.join(pats)})"], pats]) if pats else None
        off = off if off is not None else tm_off
        if len(given) != 1 or len(consts) + len(cols) + len(tmpls) != 1:
            if not given:
                raise self._err(f"{what} has none of rr:constant, rr:column, rr:template", off)
            raise self._err(f"{what} must have exactly one of rr:constant, rr:column, rr:template; has {', '.join(given)}", off)

        tt_node = self._one(node, RR.termType, what, off)
        datatype = self._one(node, RR.datatype, what, off)
        language = self._one(node, RR.language, what, off)
        inverse = self._one(node, RR.inverseExpression, what, off)
        inverse_s = self._string(inverse, f"{what}: rr:inverseExpression", off) if inverse is not None else None
        if datatype is not None and not isinstance(datatype, URIRef):
            raise self._err(f"{what}: rr:datatype must be an IRI, got {datatype.n3()}", off)
        lang_s = None
        if language is not None:
            lang_s = self._string(language, f"{what}: rr:language", off)
            if not _LANG_TAG.match(lang_s):
                raise self._err(f"{what}: rr:language {lang_s!r} is not a valid BCP 47 language tag (e.g. 'en', 'es-ES')", off)
        if datatype is not None and language is not None:
            raise self._err(f"{what} has both rr:datatype and rr:language; use one", off)
        if (datatype is not None or language is not None) and position != "object":
            raise self._err(f"{what}: rr:datatype / rr:language are only allowed on object maps", off)

        if consts:  # the constant's own term decides its type (R2RML §7.4)
            tmap = self.constant_term_map(consts[0], position, tm, off, "constant")
            return replace(tmap, location=self.ix.loc(off), inverse_expression=inverse_s)

        if cols:
            kind, value = TermMapKind.COLUMN, self._string(cols[0], f"{what}: rr:column", off)
            if not value.strip():
                raise self._err(f"{what}: empty rr:column", off)
        else:
            kind, value = TermMapKind.TEMPLATE, self._string(tmpls[0], f"{what}: rr:template", off)
            parse_template(value, self.ix.loc(off))  # raises MappingError on bad braces

        if tt_node is not None:
            if tt_node not in _TERM_TYPES:
                raise self._err(f"{what}: rr:termType {tt_node.n3()} is not rr:IRI, rr:BlankNode or rr:Literal", off)
            term_type = _TERM_TYPES[tt_node]
        elif position == "object" and (kind is TermMapKind.COLUMN or datatype is not None or language is not None):
            term_type = TermType.LITERAL
        else:
            term_type = TermType.IRI
        allowed = {
            "subject": (TermType.IRI, TermType.BLANK_NODE),
            "predicate": (TermType.IRI,),
            "graph": (TermType.IRI,),
            "object": (TermType.IRI, TermType.BLANK_NODE, TermType.LITERAL),
        }[position]
        if term_type not in allowed:
            raise self._err(
                f"{what}: rr:termType {term_type.value} is not allowed for a {position} map "
                f"(allowed: {', '.join(t.value for t in allowed)})",
                off,
            )
        if term_type is not TermType.LITERAL and (datatype is not None or language is not None):
            raise self._err(f"{what}: rr:datatype / rr:language require term type literal, not {term_type.value}", off)
        return TermMap(
            kind,
            value,
            term_type,
            datatype=str(datatype) if datatype is not None else None,
            language=lang_s,
            inverse_expression=inverse_s,
            location=self.ix.loc(off),
        )

    def read_graph_maps(self, node: Node, tm: str, off: int | None) -> tuple[TermMap, ...]:
        out = [self.constant_term_map(g, "graph", tm, off) for g in self._objects(node, RR.graph)]
        out += [self.read_term_map(g, "graph", tm, off) for g in self._objects(node, RR.graphMap)]
        return tuple(out)

    def read_pom(self, node: Node, tm: str, what: str, tm_off: int | None) -> PredicateObjectMap:
        preds = [self.constant_term_map(p, "predicate", tm, tm_off) for p in self._objects(node, RR.predicate)]
        preds += [self.read_term_map(p, "predicate", tm, tm_off) for p in self._objects(node, RR.predicateMap)]
        off = min((p.location.line for p in preds if p.location.line), default=None)
        loc = Location(self.file, off) if off else self.ix.loc(tm_off)
        if not preds:
            raise MappingError(f"{what}: predicate-object map has no rr:predicate or rr:predicateMap", loc)
        objs: list[ObjectMap] = [self.constant_term_map(o, "object", tm, tm_off) for o in self._objects(node, RR.object)]
        for o in self._objects(node, RR.objectMap):
            if (o, RR.parentTriplesMap, None) in self.g:
                objs.append(self.read_ref_object_map(o, tm, what, tm_off))
            else:
                objs.append(self.read_term_map(o, "object", tm, tm_off))
        if not objs:
            raise MappingError(f"{what}: predicate-object map has no rr:object or rr:objectMap", loc)
        graphs = self.read_graph_maps(node, tm, tm_off)
        return PredicateObjectMap(tuple(preds), tuple(objs), graphs, location=loc)

    def read_ref_object_map(self, node: Node, tm: str, what: str, tm_off: int | None) -> RefObjectMap:
        parents = self._objects(node, RR.parentTriplesMap)
        parent = parents[0]
        pats = self.ix.patterns(parent)
        off = self.ix.find_in(tm, [rf"rr:parentTriplesMap\s+(?:{'|'.join(pats)})"]) if pats else None
        if off is None:
            off = self.ix.find_in(tm, [r"rr:parentTriplesMap"])
        off = off if off is not None else tm_off
        if len(parents) > 1:
            raise self._err(f"{what}: referencing object map has {len(parents)} rr:parentTriplesMap values", off)
        if not isinstance(parent, (URIRef, BNode)):
            raise self._err(f"{what}: rr:parentTriplesMap must name a triples map, got {parent.n3()}", off)
        conds = []
        for jc in self._objects(node, RR.joinCondition):
            child = self._one(jc, RR.child, f"{what}: join condition", off, required=True)
            par = self._one(jc, RR.parent, f"{what}: join condition", off, required=True)
            c = self._string(child, f"{what}: rr:child", off)
            p = self._string(par, f"{what}: rr:parent", off)
            j_off = self.ix.find_first(tm, literal_patterns(c, "child")[:1], after=off)
            conds.append(JoinCondition(c, p, location=self.ix.loc(j_off if j_off is not None else off)))
        parent_id = str(parent) if isinstance(parent, URIRef) else f"_:{parent}"
        return RefObjectMap(parent_id, tuple(conds), location=self.ix.loc(off))


def _short(iri: str) -> str:
    return re.split(r"[/#]", iri.rstrip("/#"))[-1] or iri


# --------------------------------------------------------------------------- API


def _read_text(text: str, file: str | None, base: str | None) -> list[TriplesMap]:
    """Parse one Turtle text into triples maps (parents are not checked here)."""
    early = lexical_error(text, file)
    if early is not None:  # e.g. rdflib would run out of Python stack: refused, located
        raise early
    ix = LineIndex(text, file, base)
    g = Graph()
    try:
        g.parse(data=text, format="turtle", publicID=base)
    except RecursionError:  # within the limit, but called with little stack left
        raise nesting_error(text, file, 0) or MappingError("R2RML file is nested too deeply to parse",
                                                            Location(file, 1)) from None
    except Exception as e:  # rdflib raises various parser exceptions
        reason, line, _column = turtle_error(e, text)  # the column is in the reason ("near '...'"); structural
        # errors of mappings are located by line only, and so are these
        raise MappingError(f"R2RML file is not valid Turtle: {reason}", Location(file, line)) from None
    return _Reader(g, ix).read_all()


def _same_logical_table(a: LogicalTable, b: LogicalTable) -> bool:
    """Identical child and parent queries (R2RML §8): same table name, or same SQL text."""
    if a.table_name is not None or b.table_name is not None:
        return a.table_name == b.table_name
    return (a.sql_query or "").strip() == (b.sql_query or "").strip()


def _check_references(tms: Sequence[TriplesMap]) -> None:
    ids: dict[str, TriplesMap] = {}
    for tm in tms:
        if tm.id in ids and not tm.id.startswith("_:"):
            raise MappingError(
                f"triples map {tm.name} is defined twice (also at {ids[tm.id].location})", tm.location
            )
        ids[tm.id] = tm
    for tm in tms:
        for pom in tm.predicate_object_maps:
            for om in pom.objects:
                if not isinstance(om, RefObjectMap):
                    continue
                if om.parent_triples_map not in ids:
                    raise MappingError(
                        f"triples map {tm.name}: rr:parentTriplesMap {om.parent_triples_map} is not a triples map "
                        "of this mapping",
                        om.location,
                    )
                parent = ids[om.parent_triples_map]
                if not om.join_conditions and not _same_logical_table(tm.logical_table, parent.logical_table):
                    raise MappingError(
                        f"triples map {tm.name}: the referencing object map to {parent.name} has no rr:joinCondition, "
                        "but the two logical tables differ; R2RML §8 requires at least one join condition then",
                        om.location,
                    )


def parse_mapping_text(text: str, file: str | None = None, base: str | None = None) -> Mapping:
    """Parse R2RML Turtle text into a :class:`Mapping`; raises :class:`MappingError` with file and line.

    ``base`` is the base IRI for relative IRIs of the mapping and for generated
    relative IRIs (R2RML §5.1); by default the file's ``@base``.
    """
    tms = _read_text(text, str(file) if file is not None else None, base)
    _check_references(tms)
    return Mapping(tuple(tms), (str(file),) if file is not None else ())


def load_mapping(paths: Sequence[str | Path] | str | Path) -> Mapping:
    """Read one or more R2RML Turtle files into one :class:`Mapping`.

    Parent triples maps may live in another of the files; triples map IRIs
    must be unique over all files.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    tms: list[TriplesMap] = []
    files: list[str] = []
    for p in paths:
        path = Path(p)
        text = read_utf8(path, "mapping file", MappingError)  # not UTF-8: located at the bad byte, not a traceback
        tms.extend(_read_text(text, str(path), None))
        files.append(str(path))
    _check_references(tms)
    return Mapping(tuple(tms), tuple(files))
