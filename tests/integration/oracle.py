"""An independent oracle for catalog queries: materialise, close with owlrl, run SPARQL with rdflib.

The oracle shares nothing with the SQL path but the parsed R2RML mapping: the
mapping is materialised row by row (``obda.mapping.materialise``, one named
graph per timestamp for stream rows), each snapshot (the static default graph,
and each time graph on its own) is closed under the ontology with owlrl's
OWL 2 RL semantics, and the user's SPARQL text runs on the result with rdflib.

Time comparisons: rdflib cannot compare graph IRIs, so the query text is
adjusted mechanically: every ``GRAPH ?t { … }`` block becomes
``GRAPH ?t__g { … } ?t__g <urn:obda:at> ?t``, so every other ``?t`` (in FILTERs,
or projected) is the time of its graph as an ``xsd:dateTime`` literal, and the
default graph states ``<graph> <urn:obda:at> "time"^^xsd:dateTime``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from decimal import Decimal

import owlrl
from rdflib import RDF, BNode, Graph, Literal, URIRef
from rdflib.namespace import OWL, RDFS, XSD

from obda.mapping.rdf_terms import graph_time

AT = URIRef("urn:obda:at")
_VOCAB_NS = (str(OWL), str(RDF), str(RDFS), str(XSD))


def _graph_blocks(text: str):
    """(start_of_GRAPH, index_after_closing_brace, var) for every GRAPH ?v { … } block."""
    for m in re.finditer(r"GRAPH\s+\?(\w+)\s*\{", text, flags=re.IGNORECASE):
        depth = 0
        i = m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        yield m.start(), i + 1, m.group(1)


def oracle_query_text(text: str) -> str:
    blocks = list(_graph_blocks(text))
    # GRAPH ?t { … } becomes GRAPH ?t__g { … } ?t__g <urn:obda:at> ?t: every other ?t (FILTERs, the SELECT list)
    # is then the time of its graph, a dateTime literal, under its own name
    out = text
    for start, end, v in sorted(blocks, key=lambda b: -b[0]):
        out = out[:end] + f" ?{v}__g <{AT}> ?{v} . " + out[end:]
        head = re.match(rf"GRAPH\s+\?{v}\b", out[start:], flags=re.IGNORECASE)
        out = out[:start] + f"GRAPH ?{v}__g" + out[start + head.end():]
    # the data is naive UTC: drop a trailing Z of dateTime constants so rdflib compares like with like
    out = re.sub(r'"(\d{4}-\d\d-\d\dT[\d:.]+)Z"\^\^', r'"\1"^^', out)
    return out


def interval_as_difference(text: str) -> str:
    """An interval join ``?a <= ?b + "PT5M"^^xsd:dayTimeDuration`` as ``(?a - ?b) <= "PT5M"^^…``: SPARQL 1.1
    defines no dateTime + duration (rdflib evaluates it, pyoxigraph does not), but pyoxigraph implements
    dateTime − dateTime (a dayTimeDuration) and compares durations; both forms say the same."""
    return re.sub(r'(\?\w+)\s*(<=|>=|<|>|=)\s*(\?\w+)\s*([+-])\s*"(-?)(P[^"]+)"\^\^(xsd:dayTimeDuration|<[^>]+>)',
                  lambda m: f'({m[1]} - {m[3]}) {m[2]} "{"-" if (m[4] == "-") != (m[5] == "-") else ""}{m[6]}"^^{m[7]}',
                  text)


def closed_dataset(ds, tbox: Graph):
    """Close the default graph and each named graph separately under ``tbox`` (OWL 2 RL)."""
    from rdflib import Dataset

    vocab = {s for s in tbox.subjects()} | {o for o in tbox.objects() if isinstance(o, URIRef)}
    out = Dataset(default_union=False)

    def close(g: Graph) -> Graph:
        tmp = Graph()
        tmp += tbox
        tmp += g
        owlrl.DeductiveClosure(owlrl.OWLRL_Semantics, axiomatic_triples=False, datatype_axioms=False).expand(tmp)
        res = Graph()
        for s, p, o in tmp:
            if s in vocab or isinstance(s, Literal) or str(s).startswith(_VOCAB_NS):
                continue
            if p == RDF.type and (o in (OWL.Thing, RDFS.Resource) or str(o).startswith(_VOCAB_NS)):
                continue
            res.add((s, p, o))
        return res

    default = out.default_context if hasattr(out, "default_context") else out.graph()
    default += close(ds.default_context if hasattr(ds, "default_context") else ds.graph())
    for g in ds.graphs():
        ident = g.identifier
        if not str(ident).startswith("urn:obda:time:"):
            continue
        target = out.graph(ident)
        target += close(g)
        default.add((ident, AT, Literal(graph_time(str(ident)).replace(tzinfo=None), datatype=XSD.dateTime)))
    return out


def norm(v):
    """Comparable Python value of an SQL or RDF answer value."""
    if isinstance(v, BNode) or (isinstance(v, str) and v.startswith("_:")):
        return "<bnode>"
    if isinstance(v, URIRef):
        return str(v)
    if isinstance(v, Literal):
        v = v.toPython()
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float, Decimal)):
        return round(float(v), 6)
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None)
    return v


def run_oracle(closed, text: str, columns) -> Counter:
    res = closed.query(oracle_query_text(text))
    return Counter(tuple(norm(row[c]) if row[c] is not None else None for c in columns) for row in res)


def run_sql(con, sql: str) -> Counter:
    return Counter(tuple(norm(v) for v in row) for row in sql_rows(con, sql))


def sql_rows(con, sql: str) -> list[tuple]:
    """The rows of obda's SQL, in order: where a column ``v`` has its term types beside it (``v__type``, a column
    of several kinds of term: obda.model.terms), each value read as its term with rdflib, and no type column."""
    result = con.execute(sql)
    names = [d[0] for d in result.description]
    kept = [(i, names.index(f"{n}__type") if f"{n}__type" in names else None)
            for i, n in enumerate(names) if not (n.endswith("__type") and n[:-6] in names)]
    return [tuple(term(row[i], None if t is None else row[t]) for i, t in kept) for row in result.fetchall()]


def term(value, kind: str | None):
    """A value of obda's SQL as the RDF term its term type says (``iri``, ``bnode``, a literal's datatype or
    ``@tag``); the value itself without one."""
    if value is None or kind is None or kind == "bnode":
        return value
    if kind == "iri":
        return URIRef(value)
    if kind.startswith("@"):
        return Literal(value, lang=kind[1:] or None)
    return Literal(value, datatype=URIRef(kind))


def demo_database(project):
    """The demo catalog tests' data: generated rows (seed 11, a small scenario) loaded into a fresh DuckDB."""
    import duckdb

    from obda.datagen import generate_rows

    data = generate_rows(project.sources, seed=11, sites=2, turbines_per_site=2, sensors_per_turbine=3, timestamps=6)
    con = duckdb.connect()
    data.load_into(con, "duckdb")
    return con
