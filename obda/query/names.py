"""Names in a query: its prologue (BASE, PREFIX), prefixed names and relative IRIs resolved, rdflib terms as
model terms, and fresh names — blank nodes' and hidden columns' — that never collide with the query's own.

A mixin of the tree walk (:class:`obda.query.walk.Converter`); it reads the walk's ``ts``, ``file``, ``base``
and keeps ``labels``, ``taken``, ``bnode_names`` and ``fresh`` (the last number given per stem).
"""

from __future__ import annotations

import functools

from rdflib.plugins.sparql.algebra import translatePath, translatePName, traverse
from rdflib.plugins.sparql.parserutils import CompValue
from rdflib.plugins.sparql.sparql import Prologue
from rdflib.term import BNode, Identifier, Literal as RDFLiteral, URIRef, Variable

from obda.errors import Location, QuerySyntaxError
from obda.model.query import IRI, XSD, Literal, Term, Var


class Names:
    """Prologue, name resolution, terms and fresh names of one query conversion."""

    def _prologue(self, prologue_tree) -> tuple[Prologue, tuple[tuple[str, str], ...]]:
        """BASE and PREFIX declarations, resolved as rdflib's ``translatePrologue`` does."""
        prologue = Prologue()
        prologue.base = self.base or ""
        prefixes: list[tuple[str, str]] = []
        for decl in prologue_tree:
            if decl.name == "Base":
                prologue.base = decl.iri
            elif decl.name == "PrefixDecl":
                iri = prologue.absolutize(decl.iri)
                prologue.bind(decl.prefix, iri)
                prefixes.append((decl.prefix or "", str(iri)))
        return prologue, tuple(prefixes)

    def _resolve_names(self, q: CompValue, prologue: Prologue) -> CompValue:
        """Expand prefixed names / relative IRIs and build rdflib property-path objects."""
        try:
            q = traverse(q, visitPost=functools.partial(translatePName, prologue=prologue))
        except Exception as e:
            msg = str(e)
            if "Unknown namespace prefix" in msg:
                prefix = msg.split(":", 1)[1].strip()
                prefix = "" if prefix == "None" else prefix
                i = self.ts.find(lambda t: t.kind == "pname" and t.text.split(":", 1)[0] == prefix)
                raise QuerySyntaxError(f"undeclared prefix '{prefix}:'; add PREFIX {prefix}: <...>", self.loc(i)) from None
            raise QuerySyntaxError(f"cannot resolve names: {msg}", Location(self.file)) from None
        if q.where is not None:
            q["where"] = traverse(q.where, visitPost=translatePath)
        return q

    def _collect_names(self) -> None:
        """Remember blank-node labels and variable names so fresh names never collide."""
        for t in self.ts.tokens:
            if t.kind == "bnode":
                self.labels.add(t.text[2:])
            elif t.kind == "var":
                self.taken.add(t.text[1:])
        self.taken |= self.labels

    def _fresh_bnode(self) -> Var:
        return Var(self._fresh_column("b"), bnode=True)

    def _bnode(self, b: BNode) -> Var:
        """A labelled blank node keeps its label; an anonymous one gets a fresh name (b1, b2, ...)."""
        key = str(b)
        if key in self.labels:
            return Var(key, bnode=True)
        if key not in self.bnode_names:
            self.bnode_names[key] = self._fresh_bnode().name
        return Var(self.bnode_names[key], bnode=True)

    def term(self, x: Identifier) -> Term:
        """rdflib term → model term."""
        if isinstance(x, Variable):
            return Var(str(x))
        if isinstance(x, BNode):
            return self._bnode(x)
        if isinstance(x, URIRef):
            return IRI(str(x))
        if isinstance(x, RDFLiteral):
            if x.language:
                return Literal(str(x), language=x.language)
            return Literal(str(x), str(x.datatype) if x.datatype else XSD + "string")
        raise TypeError(f"unexpected term {x!r}")

    def _fresh_column(self, stem: str) -> str:
        """A name ``<stem><n>`` no variable, label or earlier fresh name of the query has (n counted per stem)."""
        n = self.fresh.get(stem, 0)
        while True:
            n += 1
            if f"{stem}{n}" not in self.taken:
                break
        self.fresh[stem] = n
        self.taken.add(f"{stem}{n}")
        return f"{stem}{n}"
