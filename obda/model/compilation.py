"""The result of compiling a SPARQL query: parsed query, rewriting, SQL, provenance.

Produced by ``obda.Project.compile``; consumed by the analyser, the executor,
the CLI and the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from obda.model.dialects import sql_text
from obda.model.query import CQ, Atom, Query
from obda.model.terms import type_column


@dataclass(frozen=True)
class AtomSource:
    """How one atom of a rewritten CQ was unfolded: which triples map, which table alias."""

    atom: Atom
    triples_map: str  # triples map IRI
    mapping_file: str | None = None
    mapping_line: int | None = None
    table_aliases: tuple[str, ...] = ()  # FROM aliases this atom contributed or joined
    view: str | None = None  # the per-atom view answering the atom (several triples maps, or deduplicated)
    triples_maps: tuple[str, ...] = ()  # every triples map behind the view

    def describe(self) -> str:
        """``atom ← triples map (file:line)``, or ``atom ← view v (its triples maps)``."""
        if self.view:
            names = ", ".join(_local(t) for t in self.triples_maps)
            return f"{self.atom} ← view {self.view} of {len(self.triples_maps)} triples map(s): {names}"
        return f"{self.atom} ← {self.triples_map} ({self.mapping_file}:{self.mapping_line})"

    def to_dict(self) -> dict:
        d = {
            "atom": str(self.atom),
            "triples_map": self.triples_map,
            "file": self.mapping_file,
            "line": self.mapping_line,
            "tables": list(self.table_aliases),
        }
        if self.view:
            d["view"] = self.view
            d["triples_maps"] = list(self.triples_maps)
        return d


def _local(iri: str) -> str:
    """The local name of a triples map IRI (after the last ``#`` or ``/``)."""
    for sep in ("#", "/"):
        if sep in iri and iri.rsplit(sep, 1)[1]:
            return iri.rsplit(sep, 1)[1]
    return iri


@dataclass(frozen=True)
class MemberOrigin:
    """Provenance of one SPJ member: the query branch, the rewritten CQ, the mappings."""

    branch: int  # index of the user query's UNION / || branch
    cq: CQ  # the rewritten CQ (ontology atoms after TBox compilation)
    atom_sources: tuple[AtomSource, ...] = ()
    rewriting_steps: tuple[str, ...] = ()  # axioms applied to reach cq from the branch
    alias_tables: tuple[tuple[str, str], ...] = ()  # (FROM alias, table name)

    def aliases_for(self, alias: str) -> tuple[AtomSource, ...]:
        return tuple(s for s in self.atom_sources if alias in s.table_aliases)

    def to_dict(self) -> dict:
        return {
            "branch": self.branch,
            "cq": str(self.cq),
            "atoms": [str(a) for a in self.cq.atoms],
            "axioms": list(self.rewriting_steps),
            "mappings": [s.to_dict() for s in self.atom_sources],
            "tables": {a: t for a, t in self.alias_tables},
        }


@dataclass(frozen=True)
class SqlMember:
    """One SPJ member of the unfolded union: ``SELECT … FROM … WHERE …``."""

    select: exp.Select
    origin: MemberOrigin
    # per answer column, the term the member gives it (a term map fixes its type): ``bnode``, ``iri``, a literal's
    # datatype IRI or ``@tag``; None where the member does not bind it, or the SELECT was not unfolded by obda
    terms: tuple[str | None, ...] = ()

    def sql(self, dialect: str = "spark", pretty: bool = False) -> str:
        return sql_text(self.select, dialect, pretty)

    def to_dict(self, dialect: str = "spark") -> dict:
        return {"sql": self.sql(dialect), "origin": self.origin.to_dict()}


@dataclass(frozen=True)
class Compilation:
    """Everything ``compile`` produced.

    ``sql`` is the whole query: a UNION ALL (bag, ``SELECT``) or UNION (set,
    ``SELECT DISTINCT``) of the members, or a single member.  When every
    member was unsatisfiable, ``members`` is empty and ``sql`` selects no rows.
    Output column ``i`` is named after ``query.projection[i]``.

    An aggregate query (``query.aggregation``): the members are its characteristic query
    (a bag of the grouping and aggregated variables), ``characteristic`` their union, and
    ``sql`` the whole query grouping it; the columns are the aggregation's SELECT items.
    """

    query: Query
    rewritten: tuple[CQ, ...]
    members: tuple[SqlMember, ...]
    sql: exp.Expression
    removed: tuple[str, ...] = field(default=())  # why members were dropped (unsatisfiable, duplicate, ...)
    views: tuple = ()  # the per-atom views (obda.mapping AtomView) the members read, by name
    # an aggregate query (``query.aggregation``): the union of the members, which ``sql`` groups
    characteristic: exp.Expression | None = None
    # the compilation of every check's pattern (OPTIONAL, MINUS, [NOT] EXISTS: obda.model.query.Exists), whose SQL
    # the members' ``[NOT] (…) IN (…)`` conditions read
    checks: tuple["Compilation", ...] = ()
    # the answer columns whose members give them terms of several kinds: ``sql`` also has, beside each, its
    # rows' term types (``<column>__type``: ``bnode``, ``iri``, a literal's datatype IRI or ``@tag``;
    # obda.model.terms), and orders them as SPARQL orders terms
    typed: tuple[str, ...] = ()

    def view(self, name: str):
        for v in self.views:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def distinct(self) -> bool:
        return self.query.distinct

    @property
    def columns(self) -> tuple[str, ...]:
        return self.query.columns

    @property
    def column_terms(self) -> dict[str, tuple[str, ...]]:
        """Per answer column, the RDF terms its members give it (:attr:`SqlMember.terms`: ``iri``, ``bnode``, a
        literal's datatype IRI or ``@tag``), sorted: what a value of the SQL's column is, where the answer's JSON
        value does not say it (a date is a string there)."""
        return {c: tuple(sorted({m.terms[k] for m in self.members if len(m.terms) > k and m.terms[k] is not None}))
                for k, c in enumerate(self.columns)}

    @property
    def aggregation(self):
        """The query's :class:`~obda.model.query.Aggregation`, or None for an SPJ query."""
        return self.query.aggregation

    def to_sql(self, dialect: str = "spark", pretty: bool = False) -> str:
        return sql_text(self.sql, dialect, pretty, self.query.location)

    def to_dict(self, dialect: str = "spark") -> dict:
        return {
            "query": self.query.text,
            "distinct": self.distinct,
            "columns": list(self.columns),
            **({"term_types": {c: type_column(c) for c in self.typed}} if self.typed else {}),
            **({"column_terms": {c: list(t) for c, t in self.column_terms.items()}} if self.aggregation is None else {}),
            "rewritten": [str(cq) for cq in self.rewritten],
            "sql": self.to_sql(dialect),
            "members": [m.to_dict(dialect) for m in self.members],
            "removed": list(self.removed),
            "views": [v.to_dict() for v in self.views],
            **({"aggregation": str(self.aggregation),
                "characteristic_sql": sql_text(self.characteristic, dialect)} if self.aggregation else {}),
        }
