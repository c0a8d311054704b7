"""The W3C SPARQL 1.1 query evaluation tests for obda's functions and operators, run through R2RML.

For a test of a manifest (``suite/<dir>/manifest.ttl``, vendored from ``w3c/rdf-tests``: only the manifests
and the files of the tests listed in ``test_w3c_functions.py``):

1. **Data → tables → mapping.** The test's data (Turtle) is split into one table per
   (predicate, subject kind, object kind / datatype / language): columns ``s`` and ``o``, typed by the
   object's datatype (``xsd:integer`` → integer, ``xsd:decimal`` → decimal, ``xsd:double`` → double,
   ``xsd:float`` → double, ``xsd:boolean`` → boolean, ``xsd:dateTime`` in UTC → timestamp, strings and language-tagged strings →
   string).  A generated R2RML triples map per table gives back the triple (``rr:column`` terms with the
   term type, datatype or language of the group), a generated ontology declares each predicate and class.
   Another datatype is a string column with that ``rr:datatype``. A class or property the query names and the
   data lacks is declared too, with no triples (outside an entailment manifest, and not RDF's, RDFS', OWL's or
   XSD's own terms). A test with named graphs (``qt:graphData``) is *refused*: the runner loads the default
   graph only, and obda's named graphs are timestamps. In an entailment manifest
   (:data:`SCHEMA_MANIFESTS`) the data's schema triples — class and property axioms and declarations — are the
   project's ontology instead, so that the answers the ontology entails come from obda's rewriting.  A triple obda cannot represent exactly —
   a non-canonical lexical form, a dateTime with a time zone other than ``Z`` — is left out, and a test whose
   query reads its predicate (or class) is *refused* with the reason.
2. **Query.** The test's query is compiled by obda (``Project.compile``) and its DuckDB SQL run over the
   tables.  An obda error (a refused construct, a construct outside the mapping's reach) is *refused*.
3. **Answers.** The expected results (``.srx``, ``.srj`` or a DAWG result set in Turtle) and obda's rows are
   compared as bags of normalised tuples (``integration.oracle.norm``: IRIs as text, numbers by value).

``python tests/w3c/runner.py`` prints passed / failed / refused per manifest.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import duckdb
from rdflib import BNode, Graph, Literal, Namespace, URIRef
from rdflib.namespace import OWL, RDF, RDFS, XSD
from rdflib.query import Result

from obda.errors import ObdaError
from obda.project import Project

SUITE = Path(__file__).resolve().parent / "suite"
MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
QT = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-query#")
RS = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/result-set#")

_TYPES = {  # datatype -> (column type, SQL type, canonical lexical form of the Python value)
    XSD.integer: ("integer", "BIGINT", lambda v: str(int(v))),
    XSD.decimal: ("decimal", "DECIMAL(28, 10)", None),
    XSD.double: ("double", "DOUBLE", None),
    XSD.float: ("double", "DOUBLE", None),  # a float is a double's value (rr:datatype xsd:float on the column)
    XSD.boolean: ("boolean", "BOOLEAN", lambda v: "true" if v else "false"),
    XSD.dateTime: ("timestamp", "TIMESTAMP", None),
    XSD.string: ("string", "VARCHAR", str),
}


# the manifests whose data holds an ontology (the entailment regimes'): its schema triples are the project's
# ontology, not tables
SCHEMA_MANIFESTS = {"entailment"}
_SCHEMA_PREDICATES = {RDFS.subClassOf, RDFS.subPropertyOf, RDFS.domain, RDFS.range, OWL.inverseOf,
                      OWL.equivalentClass, OWL.equivalentProperty, OWL.disjointWith, OWL.propertyDisjointWith,
                      OWL.onProperty, OWL.someValuesFrom, OWL.allValuesFrom, OWL.intersectionOf, OWL.unionOf,
                      OWL.complementOf, OWL.onClass, OWL.qualifiedCardinality, OWL.minQualifiedCardinality,
                      OWL.maxQualifiedCardinality, OWL.cardinality, OWL.minCardinality, OWL.maxCardinality,
                      OWL.hasValue, OWL.oneOf, OWL.members, OWL.disjointUnionOf, OWL.imports, RDF.first, RDF.rest,
                      RDFS.label, RDFS.comment}
_SCHEMA_TYPES = {OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty, OWL.AnnotationProperty, OWL.Ontology,
                 OWL.NamedIndividual, OWL.Restriction, RDFS.Class, RDF.Property, OWL.TransitiveProperty,
                 OWL.SymmetricProperty, OWL.AsymmetricProperty, OWL.ReflexiveProperty, OWL.IrreflexiveProperty,
                 OWL.FunctionalProperty, OWL.InverseFunctionalProperty, OWL.AllDisjointClasses,
                 OWL.AllDisjointProperties, RDFS.Datatype}


def split_schema(g: Graph) -> Graph:
    """Take the schema triples (class and property axioms, declarations) out of ``g``: they are returned as the
    ontology's graph, and ``g`` keeps the data."""
    schema = Graph()
    for s, p, o in list(g):
        if p in _SCHEMA_PREDICATES or (p == RDF.type and o in _SCHEMA_TYPES):
            schema.add((s, p, o))
            g.remove((s, p, o))
    return schema


class Refused(Exception):
    """The test is outside what obda (or this harness) represents: counted as refused, with the reason."""


@dataclass(frozen=True)
class W3CTest:
    manifest: str
    name: str
    query: Path
    data: tuple[Path, ...]
    result: Path
    named_graphs: bool = False  # the test also has named graphs (qt:graphData), which the runner does not load


@dataclass(frozen=True)
class Outcome:
    test: W3CTest
    status: str  # passed | failed | refused
    detail: str = ""


def manifest_tests(manifest: Path, names: set[str] | None = None) -> list[W3CTest]:
    """The query evaluation tests of a manifest (in its order), only ``names`` when given."""
    g = Graph()
    g.parse(manifest, format="turtle", publicID=manifest.resolve().as_uri())
    out = []
    for entry in g.items(next(g.objects(None, MF.entries))):
        if (entry, RDF.type, MF.QueryEvaluationTest) not in g:
            continue
        name = str(entry).rsplit("#", 1)[-1]
        if names is not None and name not in names:
            continue
        action = next(g.objects(entry, MF.action))
        query = _path(next(g.objects(action, QT.query)))
        data = tuple(_path(d) for d in g.objects(action, QT.data))
        out.append(W3CTest(manifest.parent.name, name, query, data, _path(next(g.objects(entry, MF.result))),
                           next(g.objects(action, QT.graphData), None) is not None))
    return out


def _path(iri) -> Path:
    return Path(str(iri).replace("file://", ""))


# ----------------------------------------------------------------------------------------------- data


def _group(s, p, o) -> tuple:
    skind = "bnode" if isinstance(s, BNode) else "iri"
    if isinstance(o, (URIRef, BNode)):
        return (p, skind, "bnode" if isinstance(o, BNode) else "iri", None, None)
    if o.language:
        return (p, skind, "literal", None, o.language)
    return (p, skind, "literal", o.datatype or XSD.string, None)  # another datatype: a string column


def _cell(o) -> object:
    """The SQL value of an object (or a subject) term; Refused when the table cannot hold it exactly."""
    if isinstance(o, BNode):
        return str(o)
    if isinstance(o, URIRef):
        return str(o)
    if o.language or (o.datatype or XSD.string) not in _TYPES or o.datatype in (None, XSD.string):
        return str(o)
    v = o.value
    if v is None:
        raise Refused(f"data: {o.n3()} is not a valid {o.datatype}")
    dt = o.datatype
    if dt == XSD.dateTime:
        if v.tzinfo is not None and v.utcoffset().total_seconds() != 0:
            raise Refused(f"data: {o} has a time zone other than Z (obda's timestamps are UTC)")
        return v.replace(tzinfo=None)
    canon = _TYPES[dt][2]
    if canon is not None and canon(v) != str(o):
        raise Refused(f"data: {o.n3()} is not in canonical form (a column keeps the value, not the text)")
    if dt == XSD.decimal:
        return Decimal(str(o))
    return v


def build(test: W3CTest, folder: Path):
    """The project folder (ontology, mapping, sources) and the DuckDB tables of a test's data."""
    g = Graph()
    for d in test.data:
        g.parse(d, format={".ttl": "turtle", ".rdf": "xml"}.get(d.suffix, "nt"))
    schema = split_schema(g) if test.manifest in SCHEMA_MANIFESTS else Graph()
    groups: dict[tuple, list] = {}
    classes: dict[tuple, list] = {}
    incomplete: dict[str, str] = {}  # predicate -> why some of its triples are not in the tables
    for s, p, o in g:
        try:
            if isinstance(s, Literal):
                raise Refused("data: a literal subject")
            if p == RDF.type and isinstance(o, URIRef):
                classes.setdefault((o, "bnode" if isinstance(s, BNode) else "iri"), []).append((_cell(s),))
            else:
                groups.setdefault(_group(s, p, o), []).append((_cell(s), _cell(o)))
        except Refused as e:
            incomplete[str(o if p == RDF.type else p)] = str(e)
    con = duckdb.connect()
    tables, maps, kinds = [], [], {}
    for i, ((cls, skind), rows) in enumerate(sorted(classes.items())):
        name = f"c{i}"
        con.execute(f'CREATE TABLE {name} (s VARCHAR)')
        if rows:  # a group whose every triple was refused: an empty table
            con.executemany(f"INSERT INTO {name} VALUES (?)", rows)
        tables.append(f"  {name}: {{kind: static, columns: {{s: string}}}}")
        maps.append(_map(name, skind, f"rr:class <{cls}>"))
        kinds.setdefault(cls, "class")
    for i, ((p, skind, okind, dt, lang), rows) in enumerate(sorted(groups.items(), key=str)):
        name = f"t{i}"
        ctype, sqltype = _TYPES[dt][:2] if dt in _TYPES else ("string", "VARCHAR")
        con.execute(f"CREATE TABLE {name} (s VARCHAR, o {sqltype})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
        tables.append(f"  {name}: {{kind: static, columns: {{s: string, o: {ctype}}}}}")
        if okind == "literal":
            obj = f'rr:column "o" ; rr:termType rr:Literal' + (f' ; rr:language "{lang}"' if lang else
                                                                  f" ; rr:datatype <{dt}>")
        else:
            obj = f'rr:column "o" ; rr:termType {"rr:BlankNode" if okind == "bnode" else "rr:IRI"}'
        maps.append(_map(name, skind, None, f"rr:predicateObjectMap [ rr:predicate <{p}> ; rr:objectMap [ {obj} ] ]"))
        kind = "object" if okind != "literal" else "data"
        kinds[p] = kind if kinds.get(p, kind) == kind else "both"
    if test.manifest not in SCHEMA_MANIFESTS:  # (there the schema and the regime's rules are the vocabulary)
        for term, kind in query_vocabulary(test.query).items():  # what the query asks about, the data lacks
            if not str(term).startswith(_BUILT_IN):
                kinds.setdefault(term, kind)
    owl = {"class": "owl:Class", "object": "owl:ObjectProperty", "data": "owl:DatatypeProperty",
           "both": "owl:ObjectProperty, owl:DatatypeProperty"}
    onto = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n" + "".join(
        f"<{t}> a {owl[k]} .\n" for t, k in kinds.items()) + schema.serialize(format="nt")
    (folder / "ontology.ttl").write_text(onto)
    (folder / "mapping.ttl").write_text("@prefix rr: <http://www.w3.org/ns/r2rml#> .\n" + "\n".join(maps))
    (folder / "sources.yaml").write_text("tables:\n" + "\n".join(tables) + "\n" if tables else "tables: {}\n")
    (folder / "project.yaml").write_text("name: w3c\nontology: [ontology.ttl]\nmappings: [mapping.ttl]\n"
                                         "sources: sources.yaml\nprofile: lenient\n")
    return con, incomplete


# the vocabularies of RDF, RDFS, OWL and XSD themselves: terms about classes and properties, never declared
_BUILT_IN = (str(RDF), str(RDFS), str(OWL), str(XSD))


def query_vocabulary(query: Path) -> dict:
    """The classes and properties a test's query names in its triple patterns (class / object / data / both):
    a test's vocabulary is what its data and its query use, so a term only the query uses is declared too (with
    no triples: a pattern over it has no solution, as in the test's dataset)."""
    from rdflib.paths import Path as RDFPath
    from rdflib.plugins.sparql import prepareQuery
    from rdflib.term import Variable

    out: dict = {}

    def add(term, kind):
        out[term] = kind if out.get(term, kind) == kind else "both"

    def visit(node):
        if isinstance(node, dict):
            for s, p, o in (dict.get(node, "triples") or []):  # (CompValue.get answers a missing key's name)
                if p == RDF.type and isinstance(o, URIRef):
                    add(o, "class")
                elif isinstance(p, URIRef) and p != RDF.type:
                    add(p, "data" if isinstance(o, Literal) else "both" if isinstance(o, Variable) else "object")
                elif isinstance(p, RDFPath):
                    for term in _path_terms(p):
                        add(term, "both")
            for v in node.values():
                visit(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                visit(v)

    try:
        visit(prepareQuery(query.read_text(), base=query.resolve().as_uri()).algebra)
    except Exception:  # a query rdflib cannot translate: obda's own parse says why
        return {}
    return out


def _path_terms(path):
    from rdflib.paths import Path as RDFPath

    for attr in ("args", "path"):
        inner = getattr(path, attr, None)
        for p in (inner if isinstance(inner, (list, tuple)) else [inner] if inner is not None else []):
            if isinstance(p, URIRef) and p != RDF.type:
                yield p
            elif isinstance(p, RDFPath):
                yield from _path_terms(p)


def _map(name: str, skind: str, cls: str | None, pom: str = "") -> str:
    subject = f'rr:column "s" ; rr:termType {"rr:BlankNode" if skind == "bnode" else "rr:IRI"}'
    return (f"<#{name}> a rr:TriplesMap ; rr:logicalTable [ rr:tableName \"{name}\" ] ;\n"
            f"  rr:subjectMap [ {subject}{' ; ' + cls if cls else ''} ]{' ;' + chr(10) + '  ' + pom if pom else ''} .\n")


# ----------------------------------------------------------------------------------------------- results


def expected(path: Path) -> tuple[list[str], Counter, list | None]:
    """Variables, the bag of solutions and, for an ordered result, the solutions in order, of a result file
    (``.srx``, ``.srj``, or a DAWG result set in Turtle or RDF/XML, whose ``rs:index`` orders it)."""
    from integration.oracle import norm

    if path.suffix in (".srx", ".srj"):
        with open(path, "rb") as f:
            res = Result.parse(f, format="xml" if path.suffix == ".srx" else "json")
        if res.type == "ASK":  # an ASK's answer: obda's one column ``boolean``
            return ["boolean"], Counter([(bool(res.askAnswer),)]), None
        names = [str(v) for v in res.vars]
        rows = [tuple(_n(norm, row.get(v)) for v in res.vars) for row in res.bindings]
        return names, Counter(rows), rows
    g = Graph()
    g.parse(path, format="xml" if path.suffix == ".rdf" else "turtle")
    rs = next(g.subjects(RDF.type, RS.ResultSet), None) or next(g.subjects(RS.resultVariable, None))
    answer = g.value(rs, RS.boolean)
    if answer is not None:  # an ASK's answer
        return ["boolean"], Counter([(bool(answer.toPython()),)]), None
    names = sorted(str(v) for v in g.objects(rs, RS.resultVariable))
    indexed = []
    for sol in g.objects(rs, RS.solution):
        row = {str(g.value(b, RS.variable)): g.value(b, RS.value) for b in g.objects(sol, RS.binding)}
        index = g.value(sol, RS["index"])  # (RS.index is str.index: a Namespace is a str)
        indexed.append((None if index is None else int(index), tuple(_n(norm, row.get(v)) for v in names)))
    ordered = [r for _, r in sorted(indexed)] if indexed and all(i is not None for i, _ in indexed) else None
    return names, Counter(r for _, r in indexed), ordered


def _n(norm, v):
    return None if v is None else norm(v)


def run(test: W3CTest) -> Outcome:
    from integration.oracle import norm, sql_rows, term

    with tempfile.TemporaryDirectory() as tmp:
        try:
            if test.named_graphs:
                raise Refused("the runner does not load named graphs (qt:graphData), whose triples the expected "
                              "answers read: obda's named graphs are timestamps")
            con, incomplete = build(test, Path(tmp))
            project = Project.load(Path(tmp))
            text = test.query.read_text()
            used = {a.predicate for b in project.parse(text).branches for a in b.atoms}
            for p in sorted(used & set(incomplete)):
                raise Refused(incomplete[p])
            comp = project.compile(text)
            sql = comp.to_sql("duckdb")
        except Refused as e:
            return Outcome(test, "refused", str(e))
        except ObdaError as e:
            return Outcome(test, "refused", f"{type(e).__name__}: {e}")
        names, want, ordered = expected(test.result)
        columns = list(comp.columns)
        if sorted(columns) != sorted(names):
            return Outcome(test, "failed", f"columns {columns} != {names}")
        order = [columns.index(n) for n in names]
        # a column of one kind of literal: its values as literals of that datatype (obda's SQL holds a date as its
        # text, and so do its answers; the compilation says the column's datatype)
        one = {i: kinds[0] for i, c in enumerate(columns) if c not in comp.typed and comp.query.aggregation is None
               and len(kinds := comp.column_terms.get(c, ())) == 1 and kinds[0] not in ("iri", "bnode")}
        rows = [tuple(_n(norm, term(row[i], one.get(i))) for i in order) for row in sql_rows(con, sql)]
        got = Counter(rows)
        if got != want:
            return Outcome(test, "failed", f"obda {sorted(got.items(), key=str)} != expected {sorted(want.items(), key=str)}")
        if comp.query.order_by and ordered is not None:  # ORDER BY: the sort keys in the expected sequence (ties
            # may come in any order); keys the answer does not show (an expression, a variable not selected): the
            # answers in the expected sequence
            shown = all(n in names for n, _ in comp.query.order_by)
            keys = [names.index(n) for n, _ in comp.query.order_by] if shown else list(range(len(names)))
            if [tuple(r[k] for k in keys) for r in rows] != [tuple(r[k] for k in keys) for r in ordered]:
                return Outcome(test, "failed", f"order: obda {rows} != expected {ordered}")
        return Outcome(test, "passed")


def report(outcomes: list[Outcome]) -> str:
    lines = []
    for manifest in dict.fromkeys(o.test.manifest for o in outcomes):
        mine = [o for o in outcomes if o.test.manifest == manifest]
        c = Counter(o.status for o in mine)
        lines.append(f"{manifest}: passed {c['passed']}, failed {c['failed']}, refused {c['refused']}")
        for o in mine:
            lines.append(f"  {o.status:8} {o.test.name}" + (f" — {o.detail[:160]}" if o.detail else ""))
    return "\n".join(lines)


def check_outcomes(outcomes: list, passing: set[str] = frozenset(), known: dict | None = None) -> None:
    """No test fails but the ``known`` ones (name -> why), and every test of ``passing`` passes."""
    failed = [o for o in outcomes if o.status == "failed" and o.test.name not in (known or {})]
    assert not failed, report(failed)
    passed = {o.test.name for o in outcomes if o.status == "passed"}
    assert set(passing) <= passed, report([o for o in outcomes if o.test.name in set(passing) - passed])


def run_selected(selected: dict[str, set[str]]) -> list:
    """Run the tests ``selected`` (manifest folder -> test names), print the report, return the outcomes; every
    selected test must be vendored."""
    outs = [run(t) for manifest, names in selected.items()
            for t in manifest_tests(SUITE / manifest / "manifest.ttl", names)]
    print("\n" + report(outs))
    found = Counter(o.test.manifest for o in outs)
    assert found == Counter({m: len(n) for m, n in selected.items()}), f"not vendored: {found}"
    return outs


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from w3c.test_w3c_functions import SELECTED as FUNCTIONS
    from w3c.test_w3c_patterns import SELECTED as PATTERNS
    from w3c.test_w3c_whole import SELECTED as WHOLE

    run_selected({**FUNCTIONS, **PATTERNS, **WHOLE})
