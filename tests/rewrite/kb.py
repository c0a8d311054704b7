"""Test support: a tiny ABox, a CQ evaluator, and two independent oracles.

* :func:`answers_by_rewriting` — the system under test: ``rewrite`` then every
  atom expanded by ``expand_atom``, evaluated over the raw ABox.
* :func:`owlrl_closure` — oracle for TBoxes without existentials on the
  right: evaluate the query over the OWL RL closure (owlrl) of ABox ∪ TBox.
* :func:`answers_by_chase` — oracle for existential TBoxes: evaluate the query
  over a depth-bounded (oblivious) chase written here from the axioms, and keep
  the answers made of named individuals.

Facts are ``(predicate IRI, args tuple, time)`` with values being
``obda.model.query`` ``IRI`` / ``Literal`` objects (or chase nulls) and
``time`` None (static) or a snapshot name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import owlrl
import rdflib
from rdflib.namespace import OWL, RDF, RDFS

from obda.model.ontology import AtomicConcept, Exists, Ontology, Role, SubClassOf, SubPropertyOf
from obda.model.query import CQ, XSD, Atom, IRI, Literal, Query, Var
from obda.rewrite import expand_atom, rewrite

EX = "http://ex.org/"
CLASSES = [EX + f"A{i}" for i in range(4)]
PROPS = [EX + f"P{i}" for i in range(3)]
DPROPS = [EX + "U0"]
INDIVIDUALS = [IRI(EX + n) for n in "abcd"]
LITERALS = [Literal("1"), Literal("2")]


@dataclass(frozen=True)
class Null:
    """An anonymous individual (or literal) created by the chase."""

    n: int
    literal: bool = False


Fact = tuple  # (pred, args, time)


class KB:
    def __init__(self, facts: Iterable[Fact]):
        self.facts = set(facts)
        self.by_pred: dict[str, list[Fact]] = {}
        for f in self.facts:
            self.by_pred.setdefault(f[0], []).append(f)


def _match(atom: Atom, kb: KB, binding: dict) -> Iterable[dict]:
    """Extensions of ``binding`` matching ``atom`` against the facts (time labels included)."""
    terms = atom.terms
    for pred, args, time in kb.by_pred.get(atom.predicate, ()):
        if len(args) != len(terms):
            continue
        if (atom.time is None) != (time is None):
            continue
        b = dict(binding)
        ok = True
        pairs = list(zip(terms, args)) + ([(atom.time, time)] if atom.time is not None else [])
        for t, v in pairs:
            if isinstance(t, Var):
                if t in b:
                    if b[t] != v:
                        ok = False
                        break
                else:
                    b[t] = v
            elif t != v:
                ok = False
                break
        if ok:
            yield b


def _compare(op: str, a, b) -> bool:
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    key = lambda v: float(v.lexical) if isinstance(v, Literal) else str(v)  # noqa: E731
    x, y = key(a), key(b)
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def evaluate(cq: CQ, kb: KB, projection: tuple[Var, ...], expand: Callable[[Atom], list[Atom]] | None = None) -> set:
    """The set of projection tuples of ``cq`` over ``kb``; each atom matched by any of ``expand(atom)``.

    Set semantics, evaluated as a sequence of hash joins; after each join the
    bindings are projected onto the variables still needed and deduplicated.
    """
    relations: list[tuple[tuple[Var, ...], set[tuple]]] = []
    for atom in cq.atoms:
        own = tuple(sorted({t for t in atom.terms if isinstance(t, Var)} | ({atom.time} if atom.time is not None else set()),
                           key=lambda v: (v.name, v.bnode)))
        rows = set()
        for alt in expand(atom) if expand else [atom]:
            for b in _match(alt, kb, {}):
                rows.add(tuple(b[v] for v in own))
        relations.append((own, rows))
    filter_vars = {t for f in cq.filters for t in (f.left, f.right) if isinstance(t, Var)}
    # join order: smallest first, then the relation sharing most variables with what is bound
    order: list[int] = []
    bound: set[Var] = set()
    remaining = list(range(len(relations)))
    while remaining:
        i = max(remaining, key=lambda k: (len(bound & set(relations[k][0])), -len(relations[k][1])))
        remaining.remove(i)
        order.append(i)
        bound |= set(relations[i][0])
    cols: tuple[Var, ...] = ()
    rows: set[tuple] = {()}
    for pos, i in enumerate(order):
        own, rel = relations[i]
        shared = [v for v in own if v in cols]
        index: dict[tuple, list[tuple]] = {}
        for r in rel:
            index.setdefault(tuple(r[own.index(v)] for v in shared), []).append(r)
        later = set(projection) | filter_vars
        for k in order[pos + 1:]:
            later |= set(relations[k][0])
        new_cols = tuple(v for v in dict.fromkeys(cols + own) if v in later)
        new_rows = set()
        for row in rows:
            b = dict(zip(cols, row))
            for r in index.get(tuple(b[v] for v in shared), ()):
                nb = dict(b)
                nb.update(zip(own, r))
                new_rows.add(tuple(nb[v] for v in new_cols))
        cols, rows = new_cols, new_rows
        if not rows:
            return set()
    out = set()
    for row in rows:
        b = dict(zip(cols, row))
        pending = list(cq.filters)
        ok = True
        for _ in range(len(pending) + 1):  # '=' with an unbound side binds it (merged answer variables)
            rest = []
            for f in pending:
                lv = b.get(f.left, f.left) if isinstance(f.left, Var) else f.left
                rv = b.get(f.right, f.right) if isinstance(f.right, Var) else f.right
                binds = f.op == "=" and not f.not_true
                if binds and isinstance(lv, Var) and not isinstance(rv, Var):
                    b[lv] = rv
                elif binds and isinstance(rv, Var) and not isinstance(lv, Var):
                    b[rv] = lv
                elif isinstance(lv, Var) or isinstance(rv, Var):
                    rest.append(f)
                elif _compare(f.op, lv, rv) == f.not_true:  # a not-true part holds where the comparison does not
                    ok = False
            pending = rest
        if not ok:
            continue
        if pending:
            raise AssertionError(f"filters with unbound variables: {pending}")
        out.add(tuple(b[v] for v in projection))
    return out


def answers_by_rewriting(query: Query, ontology: Ontology, kb: KB) -> set:
    out = set()
    for r in rewrite(query, ontology):
        out |= evaluate(r.cq, kb, query.projection, lambda a: [alt.atom for alt in expand_atom(a, ontology)])
    return out


def answers_plain(query: Query, kb: KB, named_only: bool = False) -> set:
    out = set()
    for b in query.branches:
        out |= evaluate(b, kb, query.projection)
    if named_only:
        out = {t for t in out if not any(isinstance(v, Null) for v in t)}
    return out


# ---------------------------------------------------------------- owlrl oracle
def _role_iri(g: rdflib.Graph, role: Role) -> rdflib.URIRef:
    p = rdflib.URIRef(role.prop)
    if not role.inverse:
        return p
    inv = rdflib.URIRef(role.prop + "_inv")
    g.add((inv, OWL.inverseOf, p))
    g.add((inv, RDF.type, OWL.ObjectProperty))
    return inv


def tbox_graph(ontology: Ontology) -> rdflib.Graph:
    """RDF (RDFS/OWL) triples for a TBox without existentials on the right."""
    g = rdflib.Graph()
    for c in ontology.classes:
        g.add((rdflib.URIRef(c), RDF.type, OWL.Class))
    for p in ontology.object_properties:
        g.add((rdflib.URIRef(p), RDF.type, OWL.ObjectProperty))
    for p in ontology.data_properties:
        g.add((rdflib.URIRef(p), RDF.type, OWL.DatatypeProperty))
    for ax in ontology.axioms:
        if isinstance(ax, SubClassOf):
            assert isinstance(ax.sup, AtomicConcept), "owlrl oracle: no existential on the right"
            sup = rdflib.URIRef(ax.sup.iri)
            if isinstance(ax.sub, AtomicConcept):
                g.add((rdflib.URIRef(ax.sub.iri), RDFS.subClassOf, sup))
            else:
                pred = RDFS.range if ax.sub.role.inverse else RDFS.domain
                g.add((rdflib.URIRef(ax.sub.role.prop), pred, sup))
        elif isinstance(ax, SubPropertyOf):
            g.add((_role_iri(g, ax.sub), RDFS.subPropertyOf, _role_iri(g, ax.sup)))
    return g


def _to_rdf(v):
    if isinstance(v, IRI):
        return rdflib.URIRef(v.value)
    return rdflib.Literal(v.lexical, datatype=rdflib.URIRef(v.datatype))


def _from_rdf(v):
    if isinstance(v, rdflib.URIRef):
        return IRI(str(v))
    if isinstance(v, rdflib.Literal):
        return Literal(str(v), str(v.datatype) if v.datatype else XSD + "string")
    return None


def owlrl_closure(ontology: Ontology, abox: Iterable[Fact]) -> KB:
    """The OWL RL closure (owlrl) of TBox ∪ ABox, restricted to the ontology's vocabulary."""
    g = tbox_graph(ontology)
    for pred, args, time in abox:
        assert time is None
        if len(args) == 1:
            g.add((_to_rdf(args[0]), RDF.type, rdflib.URIRef(pred)))
        else:
            g.add((_to_rdf(args[0]), rdflib.URIRef(pred), _to_rdf(args[1])))
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    vocab_c = set(ontology.classes)
    vocab_p = set(ontology.object_properties) | set(ontology.data_properties)
    facts = []
    for s, p, o in g:
        if p == RDF.type and str(o) in vocab_c:
            facts.append((str(o), (_from_rdf(s),), None))
        elif str(p) in vocab_p:
            facts.append((str(p), (_from_rdf(s), _from_rdf(o)), None))
    return KB(facts)


# ---------------------------------------------------------------- chase oracle
def _has_witness(e, sup: Exists, unary: dict, binary: dict, holds_roles) -> bool:
    """Whether ``e`` already has an ``R``-successor in the filler (restricted chase)."""
    fillers = unary.get(sup.filler, set()) if sup.filler else None
    for a, b in holds_roles(sup.role, binary):
        if a == e and (fillers is None or b in fillers):
            return True
    return False


def chase(ontology: Ontology, abox: Iterable[Fact], depth: int, restricted: bool = True) -> KB:
    """Chase of the (static) ABox with the TBox, creating nulls up to ``depth`` below the ABox.

    Written directly from the DL semantics of the axioms, independently of
    ``obda.rewrite``.  Restricted (default): ``B ⊑ ∃R.A`` creates a null for
    ``e`` only if ``e`` has no ``R``-successor in ``A`` yet; oblivious: one null
    per (element, right-hand side).  Either result, truncated at ``depth``,
    contains every match whose anonymous part lies within ``depth`` of the
    ABox in the canonical model (a homomorphism from the canonical model into
    the chase never maps a node deeper than it is).
    """
    facts = set(abox)
    level: dict = {}
    for _, args, _ in facts:
        for v in args:
            level.setdefault(v, 0)
    fired: set = set()
    counter = [0]

    def holds_roles(role: Role, idx: dict) -> set:
        pairs = idx.get(role.prop, set())
        return {(b, a) for a, b in pairs} if role.inverse else set(pairs)

    def members(c, unary: dict, binary: dict) -> set:
        if isinstance(c, AtomicConcept):
            return set(unary.get(c.iri, set()))
        pairs = holds_roles(c.role, binary)
        return {a for a, _ in pairs}

    def add_edge(role: Role, a, b) -> None:
        facts.add((role.prop, (b, a) if role.inverse else (a, b), None))

    changed = True
    while changed:
        changed = False
        unary: dict = {}
        binary: dict = {}
        for pred, args, _ in facts:
            if len(args) == 1:
                unary.setdefault(pred, set()).add(args[0])
            else:
                binary.setdefault(pred, set()).add(args)
        before = len(facts)
        for ax in ontology.axioms:
            if isinstance(ax, SubPropertyOf):
                for a, b in holds_roles(ax.sub, binary):
                    add_edge(ax.sup, a, b)
            elif isinstance(ax, SubClassOf):
                for e in members(ax.sub, unary, binary):
                    if isinstance(e, Null) and e.literal:
                        continue
                    sup = ax.sup
                    if isinstance(sup, AtomicConcept):
                        facts.add((sup.iri, (e,), None))
                        continue
                    key = (e, sup)
                    if key in fired or level[e] >= depth:
                        continue
                    if restricted and _has_witness(e, sup, unary, binary, holds_roles):
                        continue
                    fired.add(key)
                    counter[0] += 1
                    n = Null(counter[0], literal=sup.role.data)
                    level[n] = level[e] + 1
                    add_edge(sup.role, e, n)
                    if sup.filler is not None:
                        facts.add((sup.filler, (n,), None))
        changed = len(facts) != before or changed
    return KB(facts)


def answers_by_chase(query: Query, ontology: Ontology, abox: Iterable[Fact], depth: int) -> set:
    return answers_plain(query, chase(ontology, abox, depth), named_only=True)
