"""Materialise an R2RML mapping over a database into RDF (the test oracle of obda).

:func:`materialise` runs every logical table on a DB-API connection (sqlite3
or duckdb) and generates the RDF dataset of the W3C R2RML recommendation:
natural RDF literals for SQL values (§10), IRI-safe percent-encoding of
template values (§7.3), relative IRIs resolved against the base IRI, one blank
node per distinct value, ``rr:language`` / ``rr:datatype``, graph maps with
``rr:defaultGraph``, referencing object maps joined on their join conditions
(or on the same row when child and parent share the logical table), and no
triple for a NULL.

Application time: when a sources catalog is given, every row of a triples map
whose logical table reads a stream yields its triples in the named graph
:func:`~obda.mapping.rdf_terms.time_graph_iri` of the row's timestamp (``docs/semantics.md``); static
triples go to the default graph.  Graph maps of a stream triples map are
ignored: its triples belong to their time graph only.

This module is deliberately independent of the unfolder (and of
``obda.mapping.sql``): it shares only the model, so that comparing the
materialised graph with unfolded SQL answers is a real differential test.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Sequence

import sqlglot
from rdflib import BNode, Dataset, Literal, URIRef
from rdflib.namespace import RDF
from sqlglot import exp

from obda.errors import Location, MappingError
from obda.mapping.rdf_terms import SCHEME, iri_safe, is_valid_iri, natural_form, time_graph_iri
from obda.model.mapping import (
    R2RML_DEFAULT_GRAPH,
    LogicalTable,
    Mapping,
    RefObjectMap,
    TermMap,
    TermMapKind,
    TermType,
    TriplesMap,
)
from obda.model.sources import Sources

log = logging.getLogger(__name__)


Term = URIRef | BNode | Literal

# --------------------------------------------------------------------------- running logical tables


@dataclass
class _Result:
    names: list[str]
    decls: list[str | None]
    rows: list[tuple]

    def index(self, r2rml_name: str) -> int | None:
        """Position of an R2RML column name: exact, then as delimited identifier, then case-insensitive."""
        if r2rml_name in self.names:
            return self.names.index(r2rml_name)
        n = r2rml_name.strip()
        if len(n) >= 2 and n[0] == n[-1] == '"':
            n = n[1:-1]
            return self.names.index(n) if n in self.names else None
        low = [x.lower() for x in self.names]
        return low.index(n.lower()) if n.lower() in low else None


def _quote_table(name: str) -> str:
    n = name.strip()
    if n.startswith('"') or "." in n:
        return n
    return '"' + n.replace('"', '""') + '"'


def _sql_of(lt: LogicalTable) -> str:
    if lt.table_name is not None:
        return f"SELECT * FROM {_quote_table(lt.table_name)}"
    return (lt.sql_query or "").strip().rstrip(";").strip()


def _run(connection, lt: LogicalTable, dialect: str, tm: TriplesMap, counter: list[int]) -> _Result:
    sql = _sql_of(lt)
    cur = connection.cursor()
    try:
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        rows = [tuple(r) for r in cur.fetchall()]
    except Exception as e:  # any DB-API error
        raise MappingError(f"triples map {tm.name}: the logical table's SQL fails: {e}", lt.location) from e
    low = [n.lower() for n in names]
    dups = sorted({n for n in names if low.count(n.lower()) > 1})
    if dups:
        raise MappingError(
            f"triples map {tm.name}: the logical table has duplicate column names {dups} (R2RML §5)", lt.location
        )
    if dialect == "sqlite":
        decls = _sqlite_decls(connection, lt, names, counter)
    else:
        decls = [str(d[1]) if d[1] is not None else None for d in cur.description]
    return _Result(names, decls, rows)


def _sqlite_decls(connection, lt: LogicalTable, names: list[str], counter: list[int]) -> list[str | None]:
    """Declared types of the result columns (SQLite keeps them for columns copied from tables)."""
    cur = connection.cursor()
    try:
        if lt.table_name is not None:
            cur.execute(f"PRAGMA table_info({_quote_table(lt.table_name)})")
            info = {r[1]: r[2] for r in cur.fetchall()}
        else:
            counter[0] += 1
            view = f"obda_materialise_view_{counter[0]}"
            cur.execute(f'CREATE TEMP VIEW "{view}" AS {_sql_of(lt)}')
            try:
                cur.execute(f'PRAGMA table_info("{view}")')
                info = {r[1]: r[2] for r in cur.fetchall()}
            finally:
                cur.execute(f'DROP VIEW "{view}"')
    except Exception:
        return [None] * len(names)
    return [info.get(n) or None for n in names]


# --------------------------------------------------------------------------- term generation


class _Generator:
    """Generates RDF terms for the rows of one logical table."""

    def __init__(self, tm: TriplesMap, res: _Result, bnodes: dict[str, BNode]):
        self.tm = tm
        self.res = res
        self.bnodes = bnodes
        self.base = tm.base_iri or ""

    def col(self, name: str, loc: Location) -> int:
        i = self.res.index(name)
        if i is None:
            raise MappingError(
                f"triples map {self.tm.name}: column {name!r} is not a column of the logical table "
                f"(columns: {', '.join(self.res.names)})",
                loc,
            )
        return i

    def compile(self, tmap: TermMap) -> Callable[[tuple], Term | None]:
        """A function row → term (None: no term, e.g. NULL or invalid IRI)."""
        if tmap.kind is TermMapKind.CONSTANT:
            if tmap.term_type is TermType.LITERAL:
                term: Term = Literal(
                    tmap.value,
                    lang=tmap.language,
                    datatype=URIRef(tmap.datatype) if tmap.datatype else None,
                    normalize=False,
                )
            else:
                term = URIRef(tmap.value)
            return lambda row: term
        if tmap.kind is TermMapKind.COLUMN:
            i = self.col(tmap.value, tmap.location)
            decl = self.res.decls[i]

            def value(row: tuple) -> tuple[str, str | None] | None:
                v = row[i]
                return None if v is None else natural_form(v, decl)

        else:
            parts = []
            for p in tmap.template:
                if p.is_column:
                    j = self.col(p.text, tmap.location)
                    parts.append((j, self.res.decls[j]))
                else:
                    parts.append((p.text, None))
            encode = tmap.term_type is TermType.IRI

            def value(row: tuple) -> tuple[str, str | None] | None:
                out = []
                for what, decl in parts:
                    if isinstance(what, str):
                        out.append(what)
                        continue
                    v = row[what]
                    if v is None:
                        return None
                    lex = natural_form(v, decl)[0]
                    out.append(iri_safe(lex) if encode else lex)
                return "".join(out), None

        tt = tmap.term_type
        if tt is TermType.IRI:

            def make(row: tuple) -> Term | None:
                v = value(row)
                if v is None:
                    return None
                s = v[0]
                if not SCHEME.match(s):
                    s = self.base + s
                if not is_valid_iri(s):
                    log.warning("triples map %s: %r is not a valid IRI; no triple generated", self.tm.name, s)
                    return None
                return URIRef(s)

        elif tt is TermType.BLANK_NODE:

            def make(row: tuple) -> Term | None:
                v = value(row)
                if v is None:
                    return None
                return self.bnodes.setdefault(v[0], BNode())

        else:
            lang = tmap.language
            dtype = URIRef(tmap.datatype) if tmap.datatype else None
            natural = tmap.kind is TermMapKind.COLUMN

            def make(row: tuple) -> Term | None:
                v = value(row)
                if v is None:
                    return None
                lex, nat = v
                if lang:
                    return Literal(lex, lang=lang)
                if dtype is not None:
                    return Literal(lex, datatype=dtype, normalize=False)
                if natural and nat is not None:
                    return Literal(lex, datatype=URIRef(nat), normalize=False)
                return Literal(lex)

        return make


# --------------------------------------------------------------------------- streams


def _stream_of(lt: LogicalTable, sources: Sources | None, dialect: str) -> tuple[str, str] | None:
    """(stream table, timestamp column) read by a logical table, or None if it reads only static tables."""
    if sources is None:
        return None
    if lt.table_name is not None:
        names = [lt.table_name]
    else:
        try:
            tree = sqlglot.parse_one(_sql_of(lt), read=dialect)
        except sqlglot.errors.SqlglotError:
            return None
        names = [t.name for t in tree.find_all(exp.Table)]
    streams = []
    for n in names:
        t = sources.table(n)
        if t is not None and t.is_stream and t.name not in [s[0] for s in streams]:
            streams.append((t.name, t.timestamp))
    if len(streams) > 1:
        raise MappingError(
            f"logical table reads several streams ({', '.join(s[0] for s in streams)}); at most one is allowed",
            lt.location,
        )
    return streams[0] if streams else None


# --------------------------------------------------------------------------- main


def materialise(
    mapping: Mapping, connection, *, sources: Sources | None = None, dialect: str = "sqlite"
) -> Dataset:
    """Generate the RDF dataset of ``mapping`` over the database behind ``connection``.

    ``dialect`` is ``"sqlite"`` or ``"duckdb"`` (how declared column types are
    learnt).  With ``sources``, triples of stream rows go to the time graph of
    the row's timestamp.  Raises :class:`MappingError` for SQL errors, columns
    the logical table lacks, and duplicate column names.
    """
    ds = Dataset(default_union=False)
    bnodes: dict[str, BNode] = {}
    results: dict[str, _Result] = {}
    counter = [0]

    def result_of(tm: TriplesMap) -> _Result:
        if tm.id not in results:
            results[tm.id] = _run(connection, tm.logical_table, dialect, tm, counter)
        return results[tm.id]

    for tm in mapping.triples_maps:
        _materialise_tm(ds, mapping, tm, result_of, bnodes, sources, dialect)
    return ds


def _graph_fn(gen: _Generator, maps: Sequence[TermMap]) -> Callable[[tuple], list[Term | None]]:
    fns = [gen.compile(g) for g in maps]

    def graphs(row: tuple) -> list[Term | None]:
        out: list[Term | None] = []
        for f in fns:
            g = f(row)
            if g is None:
                continue
            out.append(None if str(g) == R2RML_DEFAULT_GRAPH else g)
        return out

    return graphs


def _materialise_tm(ds, mapping, tm, result_of, bnodes, sources, dialect) -> None:
    res = result_of(tm)
    gen = _Generator(tm, res, bnodes)
    subject = gen.compile(tm.subject)
    subj_graphs = _graph_fn(gen, tm.subject_graphs)
    stream = _stream_of(tm.logical_table, sources, dialect)
    ts_index = None
    if stream is not None:
        ts_index = res.index(stream[1])
        if ts_index is None:
            raise MappingError(
                f"triples map {tm.name} reads stream {stream[0]!r} but its logical table does not return the "
                f"timestamp column {stream[1]!r}",
                tm.logical_table.location,
            )

    poms = []
    for pom in tm.predicate_object_maps:
        preds = [gen.compile(p) for p in pom.predicates]
        graphs = _graph_fn(gen, pom.graphs)
        objs = []
        for om in pom.objects:
            if isinstance(om, RefObjectMap):
                objs.append(("ref", _ref_objects(tm, om, mapping, res, result_of, bnodes)))
            else:
                objs.append(("term", gen.compile(om)))
        poms.append((preds, graphs, objs))

    def context(g: Term | None):
        return ds.default_graph if g is None else ds.graph(g)

    for row_no, row in enumerate(res.rows):
        s = subject(row)
        if s is None:
            continue
        if ts_index is not None:
            ts = row[ts_index]
            if ts is None:
                continue
            sg_list: list[Term | None] = [time_graph_iri(ts)]
        else:
            sg_list = subj_graphs(row) or [None]
        for c in tm.classes:
            for g in dict.fromkeys(sg_list):
                context(g).add((s, RDF.type, URIRef(c)))
        for preds, graphs, objs in poms:
            if ts_index is not None:
                targets = sg_list
            else:
                pg = graphs(row)
                targets = list(dict.fromkeys((subj_graphs(row) + pg) or [None]))
            p_terms = [p for p in (f(row) for f in preds) if p is not None]
            o_terms: list[Term] = []
            for kind, f in objs:
                if kind == "term":
                    o = f(row)
                    if o is not None:
                        o_terms.append(o)
                else:
                    o_terms.extend(f(row_no, row))
            for p in p_terms:
                for o in o_terms:
                    for g in targets:
                        context(g).add((s, p, o))


def _ref_objects(tm, om: RefObjectMap, mapping, res: _Result, result_of, bnodes):
    """A function (row number, child row) → parent subjects joined with it."""
    parent = mapping.get(om.parent_triples_map)
    pres = result_of(parent)
    pgen = _Generator(parent, pres, bnodes)
    psubj = pgen.compile(parent.subject)
    same_table = _sql_of(parent.logical_table) == _sql_of(tm.logical_table)
    if not om.join_conditions:
        if same_table:
            return lambda row_no, row: [o for o in [psubj(pres.rows[row_no])] if o is not None]
        raise MappingError(
            f"triples map {tm.name}: referencing object map to {parent.name} without rr:joinCondition over a "
            "different logical table (R2RML §8 requires a join condition)",
            om.location,
        )
    cgen = _Generator(tm, res, bnodes)
    child_idx = [cgen.col(j.child, j.location) for j in om.join_conditions]
    parent_idx = [pgen.col(j.parent, j.location) for j in om.join_conditions]
    index: dict[tuple, list[Term]] = {}
    for r in pres.rows:
        key = tuple(r[i] for i in parent_idx)
        if any(k is None for k in key):
            continue
        o = psubj(r)
        if o is not None:
            index.setdefault(_join_key(key), []).append(o)

    def objs(row_no: int, row: tuple) -> list[Term]:
        key = tuple(row[i] for i in child_idx)
        if any(k is None for k in key):
            return []
        return index.get(_join_key(key), [])

    return objs


def _join_key(values: tuple) -> tuple:
    """SQL equality of join values: numbers by value (1 = 1.0), everything else as is."""
    out = []
    for v in values:
        if isinstance(v, bool):
            out.append(int(v))
        elif isinstance(v, (int, float, Decimal)):
            out.append(Decimal(str(v)) if not isinstance(v, Decimal) else v)
        else:
            out.append(v)
    return tuple(out)
