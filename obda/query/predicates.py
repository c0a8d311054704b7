"""A variable in predicate position (``?s ?p ?o``), or as the class of ``rdf:type`` (``?s a ?c``): a bag union over
the ontology's vocabulary.

SPARQL matches ``?s ?p ?o`` against every triple of the dataset; obda's dataset is the mapped data closed
under the ontology (docs/semantics.md), whose triples have the ontology's properties and ``rdf:type`` with its
classes as predicates.  So the pattern is one alternative per vocabulary term, each a bag union member (two
triples with different predicates are different solutions):

* ``R(?s, ?o)`` with ``?p`` bound to ``<R>``, for every object and data property ``R`` (data properties only
  when the object is a literal, object properties only when it is an IRI);
* ``C(?s)`` with ``?p`` bound to ``rdf:type`` and the object bound to ``<C>`` (or equal to it, when it is
  an IRI), for every class ``C`` (``?s a ?c`` is these alternatives alone, ``?c`` bound to ``<C>``).

Each alternative is then rewritten like any atom (its subproperties and subclasses, the entailed triples), and
unfolded; one no mapping can produce is dropped by the unfolder.  ``?p`` is bound by a ``BIND`` of the constant:
a filter, the projection or another pattern reading it reads that IRI (another pattern joins on it).  Without a
vocabulary (a query parsed outside a project) the pattern is refused.

This is a mixin of the tree walk (:mod:`obda.query.walk`): it reads ``vocabulary``, ``time_vars``,
``in_scope`` and ``_atom``.
"""

from __future__ import annotations

from rdflib.term import Literal as RDFLiteral, URIRef, Variable

from obda.model.query import IRI, RDF_TYPE, Atom, Var
from obda.query import tokens as tk


class AnyPredicate:
    """``?s ?p ?o`` → the alternatives ``(atoms, binds)`` of one triple pattern whose predicate is ``?p``."""

    def _any_predicate(self, s, p: Variable, o, time: Var | None, roles) -> list[tuple[tuple[Atom, ...], tuple]]:
        at = self._role_token(roles, {tk.PREDICATE}, lambda t: t.var_name == str(p))
        var = self._vocabulary_variable(p, at, "variable predicate", f"variable ?{p} in predicate position",
                                        "classes and properties", "a predicate")
        voc = self.vocabulary
        literal, iri = isinstance(o, RDFLiteral), isinstance(o, URIRef)
        properties = sorted((voc.data_properties if literal else set())
                            | (voc.object_properties if iri else set())
                            | (set() if literal or iri else voc.object_properties | voc.data_properties))
        out: list[tuple[tuple[Atom, ...], tuple]] = []
        for prop in properties:
            out.append(((self._atom(s, URIRef(prop), o, time, roles),), ((var, IRI(prop)),)))
        classes = [] if literal else sorted(voc.classes) if not iri else [str(o)] if str(o) in voc.classes else []
        for cls in classes:
            atom = self._atom(s, URIRef(RDF_TYPE), URIRef(cls), time, roles)
            binds = ((var, IRI(RDF_TYPE)),) + (((self.term(o), IRI(cls)),) if not iri else ())
            out.append(((atom,), binds))
        self.in_scope.add(var)
        self.in_scope.update(t for t in (self.term(o),) if isinstance(t, Var) and not literal and not iri)
        if not out:
            raise self.unsupported("variable predicate", f"no class or property of the ontology can be the "
                                   f"predicate of this pattern (its object is {'a literal' if literal else 'an IRI'} "
                                   "no class or property takes)", at)
        return out

    def _any_class(self, s, o: Variable, time: Var | None, roles) -> list[tuple[tuple[Atom, ...], tuple]]:
        """``?s rdf:type ?c``: one alternative ``C(?s)`` with ``?c`` bound to ``<C>`` per class ``C``."""
        at = self._role_token(roles, {tk.OBJECT}, lambda t: t.var_name == str(o))
        var = self._vocabulary_variable(o, at, "variable class", f"the class ?{o} of rdf:type", "classes", "a class")
        self.in_scope.add(var)
        return [((self._atom(s, URIRef(RDF_TYPE), URIRef(cls), time, roles),), ((var, IRI(cls)),))
                for cls in sorted(self.vocabulary.classes)]

    def _vocabulary_variable(self, v: Variable, at: int | None, construct: str, what: str, ranges: str,
                             role: str) -> Var:
        """``v`` as a variable that ranges over the vocabulary: refused without one, or when it names a time."""
        if self.vocabulary is None:
            raise self.unsupported(construct, f"{what} ranges over the ontology's {ranges}: compile the query in "
                                   "a project", at)
        var = Var(str(v))
        if var in self.time_vars:
            raise self.unsupported(construct, f"?{v} names a GRAPH (a time) and cannot be {role}", at)
        return var
