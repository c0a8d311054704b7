"""A W3C *bag* oracle: SPARQL multiplicity over the virtual R2RML dataset, computed without obda's SQL.

``oracle.py`` (the set oracle) answers with rdflib, whose SPARQL engine loses
duplicates.  This oracle keeps them, as the W3C recommendations define them:

1. **Dataset.**  The R2RML mapping is materialised over the project's tables
   into an RDF dataset, a *set* of quads: static triples in the default graph,
   the triples of each stream row in the named graph of its timestamp
   (``obda.mapping.materialise``, graph IRIs ``urn:obda:time:<ISO>``).  A triple
   produced by two triples maps, by a class and its subclass, or by two equal
   rows is one quad.  ``obda.mapping.materialise`` shares only the parsed
   mapping model with the unfolder; ``morph_kgc_dataset`` materialises the same
   mapping with morph-kgc (an independent R2RML engine) and
   ``test_bag_oracle.py`` checks that both datasets are equal, for the fixture
   project and for the W3C R2RML test cases.  morph-kgc cannot live in the
   project's virtualenv (every release pins ``duckdb<2``, ``pyoxigraph<0.4`` and
   2.10.0 also ``rdflib<7.3``, against the project's ``duckdb==2.0.0`` and
   ``rdflib==7.6.0``), so it runs in a side virtualenv of its own
   (``morph-kgc-requirements.txt``, exact pins), ``.venv-morph-kgc`` made by
   ``scripts/setup.sh`` (or ``$OBDA_MORPH_KGC_VENV``; made on first use if missing).
2. **Reasoning.**  Each snapshot (the default graph; each time graph on its own)
   is closed under the ontology with owlrl (``oracle.closed_dataset``).
3. **Query.**  The closed quads go into a pyoxigraph ``Store`` and the user's
   SPARQL text, with time comparisons rewritten by ``oracle.oracle_query_text``,
   runs on pyoxigraph's SPARQL engine (bag semantics: one solution per solution
   mapping of all the query's variables, projection keeps duplicates, UNION is
   a bag union, DISTINCT a set).
4. **Answers** are a ``Counter`` of tuples normalised with ``oracle.norm`` (the
   normalisation the set oracle applies to DuckDB's values too).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import urllib.parse
from collections import Counter
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterable, Sequence

import pyoxigraph as ox
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.namespace import XSD

from obda.mapping import materialise
from obda.mapping.rdf_terms import time_graph_iri
from obda.model.sources import ColumnType, Sources

from duckdb_tables import load_csv_tables
from integration.oracle import closed_dataset, interval_as_difference, norm, oracle_query_text, run_sql

__all__ = [
    "BagOracle",
    "load_csv_tables",
    "sql_bag",
    "bag_diff",
    "concatenations_sorted",
    "morph_kgc_dataset",
    "morph_kgc_python",
    "quads_by_value",
    "copy_to_sqlite",
]

# --------------------------------------------------------------------------- data


def sql_bag(con, sql: str) -> Counter:
    """The answers of obda's SQL in DuckDB, as a bag of normalised tuples (``oracle.run_sql``)."""
    return run_sql(con, sql)


def bag_diff(got: Counter, want: Counter, got_name: str = "obda", want_name: str = "oracle") -> str:
    """A readable difference of two bags: every tuple whose count differs, with both counts."""
    keys = sorted(set(got) | set(want), key=repr)
    lines = [
        f"  {k!r}: {got_name}={got.get(k, 0)} {want_name}={want.get(k, 0)}"
        for k in keys
        if got.get(k, 0) != want.get(k, 0)
    ]
    head = (
        f"{got_name}: {sum(got.values())} answers ({len(got)} distinct); "
        f"{want_name}: {sum(want.values())} answers ({len(want)} distinct); "
        f"{len(lines)} differing tuples"
    )
    return "\n".join([head, *lines])


def concatenations_sorted(bag: Counter, query) -> Counter:
    """``bag`` (the oracle's) with each GROUP_CONCAT value's parts sorted: SPARQL leaves their order to the engine,
    pyoxigraph's is the solutions', obda's the strings' (code points), which the sorted oracle bag then checks."""
    from obda.model.query import Aggregate

    seps = {i: it.expression.separator for i, it in enumerate(query.aggregation.items)
            if isinstance(it.expression, Aggregate) and it.expression.function.startswith("group_concat")}
    if not seps:
        return bag
    out: Counter = Counter()
    for row, n in bag.items():
        out[tuple(seps[i].join(sorted(v.split(seps[i]))) if i in seps and isinstance(v, str) and seps[i] else v
                  for i, v in enumerate(row))] += n
    return out


# --------------------------------------------------------------------------- rdflib <-> pyoxigraph


def _to_ox(term):
    if isinstance(term, URIRef):
        return ox.NamedNode(str(term))
    if isinstance(term, BNode):
        return ox.BlankNode(re.sub(r"[^A-Za-z0-9_]", "_", str(term)) or None)
    if isinstance(term, Literal):
        if term.language:
            return ox.Literal(str(term), language=term.language)
        if term.datatype is not None:
            return ox.Literal(str(term), datatype=ox.NamedNode(str(term.datatype)))
        return ox.Literal(str(term))
    raise TypeError(f"not an RDF term: {term!r}")


_PLAIN = {str(XSD.string), "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"}


def _from_ox(term):
    """An rdflib term (then ``norm``-able) of a pyoxigraph result term."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return BNode(term.value)
    if isinstance(term, ox.Literal):
        if term.language:
            return Literal(term.value, lang=term.language)
        dt = term.datatype.value
        return Literal(term.value) if dt in _PLAIN else Literal(term.value, datatype=URIRef(dt))
    raise TypeError(f"unexpected result term {term!r}")


def store_of(ds: Dataset) -> ox.Store:
    """A pyoxigraph store with every quad of an rdflib dataset (default graph = pyoxigraph's default graph)."""
    store = ox.Store()
    default_id = ds.default_graph.identifier if hasattr(ds, "default_graph") else ds.default_context.identifier
    quads = []
    for g in ds.graphs():
        graph = ox.DefaultGraph() if g.identifier == default_id else _to_ox(g.identifier)
        for s, p, o in g:
            quads.append(ox.Quad(_to_ox(s), _to_ox(p), _to_ox(o), graph))
    store.extend(quads)
    return store


# --------------------------------------------------------------------------- the oracle


class BagOracle:
    """W3C SPARQL answers (bags) over the materialised, per-snapshot closed dataset of a project.

    ``dataset``: the raw materialised dataset (rdflib, a set of quads);
    ``closed``: the closed one; ``store``: pyoxigraph store of ``closed``.
    """

    def __init__(self, dataset: Dataset, ontology_files: Iterable[Path]):
        self.dataset = dataset
        tbox = Graph()
        for f in ontology_files:
            tbox.parse(str(f))
        self.closed = closed_dataset(dataset, tbox)
        self.store = store_of(self.closed)

    @classmethod
    def of_project(cls, project, con, dialect: str = "duckdb") -> "BagOracle":
        """Materialise ``project``'s mapping over the tables behind ``con`` (obda's R2RML materialiser)."""
        ds = materialise(project.mapping, con, sources=project.sources, dialect=dialect)
        return cls(ds, project.settings.ontology_files)

    def answers(self, text: str, columns: Sequence[str] | None = None) -> Counter:
        """The bag of answers of the SPARQL ``text``: a Counter of tuples in ``columns`` order (default: the
        query's projection)."""
        res = self.store.query(interval_as_difference(oracle_query_text(text)))
        if isinstance(res, ox.QueryBoolean):  # ASK: one row, obda's column ``boolean``
            return Counter([(bool(res),)])
        names = [v.value for v in res.variables] if columns is None else list(columns)
        return Counter(self._rows(res, names))

    def ordered(self, text: str, columns: Sequence[str]) -> list[tuple]:
        """The answers of the SPARQL ``text`` as a list, in the order pyoxigraph gives them (ORDER BY, LIMIT)."""
        res = self.store.query(interval_as_difference(oracle_query_text(text)))
        return list(self._rows(res, list(columns)))

    @staticmethod
    def _rows(res, names):
        for sol in res:
            yield tuple(None if sol[c] is None else norm(_from_ox(sol[c])) for c in names)


# --------------------------------------------------------------------------- morph-kgc (side virtualenv)


#: morph-kgc and its dependencies, exact versions (installed in a virtualenv of their own, see the module doc)
MORPH_KGC_REQUIREMENTS = [
    line.strip() for line in (Path(__file__).with_name("morph-kgc-requirements.txt")).read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

_DRIVER = r'''
import json, logging, sys
logging.disable(logging.CRITICAL)
import morph_kgc
jobs = json.load(open(sys.argv[1]))
for job in jobs:
    # N-QUADS keeps graphs (the default N-TRIPLES drops them); pandas reads a NULL of a text column as None
    cfg = ("[CONFIGURATION]\nnumber_of_processes=1\nlogging_level=CRITICAL\noutput_format=N-QUADS\n"
           "na_values=,nan,None\n"
           "[DataSource1]\nmappings=%s\ndb_url=sqlite:///%s\n" % (job["mapping"], job["db"]))
    try:
        quads = morph_kgc.materialize_set(cfg)
        text = "".join(q + " .\n" for q in sorted(quads))
        open(job["out"], "w", encoding="utf-8").write(text)
    except BaseException as e:  # one failing case must not stop the others
        open(job["out"] + ".err", "w", encoding="utf-8").write(repr(e))
'''


def _venv_dir() -> Path:
    """``$OBDA_MORPH_KGC_VENV``, else the repository's ``.venv-morph-kgc`` (made by ``scripts/setup.sh``)."""
    env = os.environ.get("OBDA_MORPH_KGC_VENV")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".venv-morph-kgc"


def morph_kgc_python() -> Path:
    """The Python of the side virtualenv with morph-kgc (created, with pinned versions, on first use)."""
    venv = _venv_dir()
    py = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = "\n".join(MORPH_KGC_REQUIREMENTS) + "\n"
    if py.exists() and stamp.exists() and stamp.read_text() == wanted:
        return py
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True)
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *MORPH_KGC_REQUIREMENTS],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cannot install morph-kgc in {venv}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    stamp.write_text(wanted)
    return py


def run_morph_kgc(jobs: list[dict]) -> None:
    """Run morph-kgc on ``[{"mapping": path, "db": sqlite path, "out": n-quads path}, ...]`` in one process.

    A failing job leaves ``out + ".err"`` instead of ``out``.
    """
    py = morph_kgc_python()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "jobs.json"
        spec.write_text(json.dumps(jobs))
        driver = Path(tmp) / "driver.py"
        driver.write_text(_DRIVER)
        proc = subprocess.run([str(py), str(driver), str(spec)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"morph-kgc driver failed:\n{proc.stderr[-3000:]}")


_SQLITE_TYPES = {
    ColumnType.INTEGER: "INTEGER",
    ColumnType.DECIMAL: "DECIMAL(18, 4)",
    ColumnType.DOUBLE: "DOUBLE",
    ColumnType.STRING: "VARCHAR(200)",
    ColumnType.BOOLEAN: "BOOLEAN",
    ColumnType.TIMESTAMP: "TIMESTAMP",
}


def copy_to_sqlite(con, sources: Sources, path: Path) -> None:
    """The tables of ``sources`` from the DuckDB ``con`` into a SQLite file (timestamps as ISO text with ``T``:
    morph-kgc writes a SQLite value's text as it is, and R2RML's natural form of a timestamp is xsd:dateTime's).

    An integer column with NULLs is declared ``VARCHAR``: morph-kgc reads SQL results through pandas,
    which turns such a column into floats (``dept/1.0`` instead of ``dept/1``); its literals then come
    out as strings, which ``quads_by_value`` compares by value anyway.
    """
    lite = sqlite3.connect(str(path))
    for t in sources.tables:
        names = ", ".join(f'"{c.name}"' for c in t.columns)
        rows = con.execute(f'SELECT {names} FROM "{t.name}"').fetchall()
        nulls = {c.name for i, c in enumerate(t.columns) if any(r[i] is None for r in rows)}
        cols = ", ".join(
            f'"{c.name}" '
            + ("VARCHAR(40)" if c.type is ColumnType.INTEGER and c.name in nulls else _SQLITE_TYPES[c.type])
            for c in t.columns
        )
        lite.execute(f'CREATE TABLE "{t.name}" ({cols})')

        def conv(v):
            if isinstance(v, Decimal):
                return str(v)
            if isinstance(v, bool):
                return int(v)
            if hasattr(v, "isoformat") and not isinstance(v, str):
                return v.isoformat()  # 2024-01-01T10:00:00: R2RML's natural form, which morph-kgc copies into IRIs
            return v

        marks = ", ".join("?" for _ in t.columns)
        lite.executemany(f'INSERT INTO "{t.name}" VALUES ({marks})', [tuple(conv(v) for v in r) for r in rows])
    lite.commit()
    lite.close()


_MORPH_TIME_PREFIX = "http://obda.invalid/time/"


def _mapping_with_time_graphs(project, out: Path) -> None:
    """A copy of the project's mapping where every stream triples map's subject map has
    ``rr:graphMap [ rr:template "http://obda.invalid/time/{ts}" ]`` (decoded back to obda's time graph
    IRIs by :func:`_time_graphs`; morph-kgc drops graph maps whose IRIs are ``urn:`` ones).

    A triples map reads a stream when its ``rr:tableName`` is a stream table or its
    ``rr:sqlQuery`` names one (docs/semantics.md)."""
    rr = "http://www.w3.org/ns/r2rml#"
    streams = {t.name.lower(): t.timestamp for t in project.sources.streams}
    g = Graph()
    for f in project.settings.mapping_files:
        g.parse(str(f), format="turtle")
    for tm, lt in list(g.subject_objects(URIRef(rr + "logicalTable"))):
        names = [str(n).strip('"').lower() for n in g.objects(lt, URIRef(rr + "tableName"))]
        for q in g.objects(lt, URIRef(rr + "sqlQuery")):
            names += [w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(q))]
        hit = sorted({n for n in names if n in streams})
        if not hit:
            continue
        assert len(hit) == 1, f"{tm} reads several streams {hit}"
        for sm in g.objects(tm, URIRef(rr + "subjectMap")):
            gm = BNode()
            g.add((sm, URIRef(rr + "graphMap"), gm))
            g.add((gm, URIRef(rr + "template"), Literal(_MORPH_TIME_PREFIX + "{" + streams[hit[0]] + "}")))
    g.serialize(str(out), format="turtle")


def _time_graphs(ds: Dataset) -> Dataset:
    """morph-kgc's percent-encoded ``http://obda.invalid/time/2024-01-01%2010%3A00%3A00`` graphs → obda's
    ``urn:obda:time:2024-01-01T10:00:00``."""
    out = Dataset(default_union=False)
    for g in ds.graphs():
        ident = str(g.identifier)
        if ident.startswith(_MORPH_TIME_PREFIX):
            target = out.graph(time_graph_iri(urllib.parse.unquote(ident[len(_MORPH_TIME_PREFIX) :])))
        elif g.identifier == ds.default_graph.identifier:
            target = out.default_graph
        else:
            target = out.graph(g.identifier)
        for t in g:
            target.add(t)
    return out


def read_nquads(path: Path) -> tuple[Dataset, list[str]]:
    """An N-Quads file as a dataset, and the lines that are not valid N-Quads (e.g. relative IRIs)."""
    good, bad = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            Dataset().parse(data=line + "\n", format="nquads")
            good.append(line)
        except Exception:  # rdflib's ParserError and friends
            bad.append(line)
    ds = Dataset(default_union=False)
    if good:  # one parse: rdflib's N-Quads parser replaces the default graph on every call
        ds.parse(data="\n".join(good) + "\n", format="nquads")
    return ds, bad


def morph_kgc_dataset(project, con) -> Dataset:
    """The project's dataset materialised by morph-kgc over a SQLite copy of the DuckDB tables,
    stream triples in one named graph per timestamp."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        copy_to_sqlite(con, project.sources, tmp / "data.db")
        _mapping_with_time_graphs(project, tmp / "mapping.ttl")
        out = tmp / "out.nq"
        run_morph_kgc([{"mapping": str(tmp / "mapping.ttl"), "db": str(tmp / "data.db"), "out": str(out)}])
        if not out.exists():
            raise RuntimeError("morph-kgc failed: " + Path(str(out) + ".err").read_text())
        ds, bad = read_nquads(out)
        if bad:
            raise RuntimeError(f"morph-kgc wrote invalid N-Quads: {bad[:3]}")
        return _time_graphs(ds)


_NUMERIC = {str(XSD.integer), str(XSD.double), str(XSD.decimal), str(XSD.float)}
_NUM_RE = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _value_term(o):
    """Numeric literals (typed, or plain with a numeric lexical form) by value; other terms as they are.

    R2RML processors disagree on natural datatypes of SQLite columns (morph-kgc
    writes some integers as plain literals); the value is what both must agree on.
    """
    if isinstance(o, BNode):
        return "<bnode>"
    if not isinstance(o, Literal) or o.language:
        return o
    if (o.datatype is None or str(o.datatype) in _NUMERIC) and _NUM_RE.fullmatch(str(o)):
        try:
            return ("num", Decimal(str(o).strip()).normalize())
        except InvalidOperation:
            return o
    return o


def quads_by_value(ds: Dataset) -> dict[str, set]:
    """Non-empty graphs of a dataset ('default' or the graph IRI) → set of (s, p, o) compared by value."""
    out: dict[str, set] = {}
    default_id = ds.default_graph.identifier
    for g in ds.graphs():
        if len(g) == 0:
            continue
        name = "default" if g.identifier == default_id else str(g.identifier)
        out.setdefault(name, set()).update((_value_term(s), p, _value_term(o)) for s, p, o in g)
    return out
