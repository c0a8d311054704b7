"""Rewriting: compile an OWL 2 QL TBox into the query (Ontop-style split).

The TBox is compiled in two places, so that the UCQ handed to the unfolder
stays small even for large hierarchies such as NPD's:

* **Hierarchy → T-mappings** (:func:`expand_atom`).  Every atom of a
  rewritten CQ is read *modulo the entailed hierarchy*: ``A(x)`` stands for
  ``B(x)`` (``B ⊑* A``), ``P(x, _)`` (``∃P ⊑* A``), ``P(_, x)`` (``∃P⁻ ⊑* A``),
  ``U(x, _)`` (``∃U ⊑* A``); ``R(x, y)`` for ``S(x, y)`` (``S ⊑* R``) and
  ``S(y, x)`` (``S⁻ ⊑* R``).  ``⊑*`` is the DL-Lite_R closure computed once
  per ontology by :func:`saturate` (including inclusions that follow through
  existentials and role inclusions).  The unfolder multiplies alternatives
  by mappings, so only alternatives that have mappings cost anything.
* **Existentials → tree witnesses** (:func:`rewrite`).  Axioms ``B ⊑ ∃R``,
  ``B ⊑ ∃R.A``, ``∃R ⊑ ∃S`` (any depth, cyclic TBoxes included) are compiled
  by the tree-witness rewriting (:mod:`obda.rewrite.treewitness`): for every
  set of non-overlapping tree witnesses, their atoms are replaced by a
  concept that generates the anonymous tree, at the witness's root.  The
  result, with every atom expanded by :func:`expand_atom`, is a complete
  rewriting: its answers over any ABox are the certain answers.

Bound variables (answer variables, variables in filters, time variables) and
constants are never sent to anonymous individuals; blank nodes of the query
are ordinary non-answer variables.  A tree witness only folds atoms with the
same time label: anonymous individuals live inside one snapshot.

Each branch's UCQ is then pruned (:mod:`obda.rewrite.containment`): CQs
contained in another CQ of the branch (hierarchy-aware homomorphisms that fix
answer variables, time labels and filters), duplicates up to renaming, and
CQs that violate a disjointness axiom are removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from obda.errors import RewritingError
from obda.model.ontology import Ontology
from obda.model.query import CQ, Query, Var
from obda.rewrite.containment import contained_in, prune, unsatisfiable
from obda.rewrite.expand import AtomAlternative, expand_atom
from obda.rewrite.saturation import Saturation, saturate
from obda.rewrite.treewitness import rewrite_cq

MAX_CQS_PER_BRANCH = 2000


@dataclass(frozen=True)
class RewrittenCQ:
    """One CQ of the rewritten UCQ.

    ``branch`` indexes ``query.branches``; ``cq``'s atoms are still to be read
    modulo the hierarchy (:func:`expand_atom`); ``steps`` are the existential
    axioms (and the inclusions they needed) applied to get ``cq`` from the
    branch, rendered like ``"Turbine ⊑ ∃hasSensor.TemperatureSensor"``.
    """

    branch: int
    cq: CQ
    steps: tuple[str, ...] = ()


class _Fresh:
    """Fresh blank-node variables ``_w1, _w2, ...`` avoiding the names of a query."""

    def __init__(self, query: Query):
        self.taken = {v.name for b in query.branches for v in b.variables} | {v.name for v in query.projection}
        self.n = 0

    def __call__(self) -> Var:
        while True:
            self.n += 1
            name = f"_w{self.n}"
            if name not in self.taken:
                return Var(name, bnode=True)


def rewrite(query: Query, ontology: Ontology) -> tuple[RewrittenCQ, ...]:
    """The UCQ (per branch, pruned) whose T-mapping expansion is a complete rewriting of ``query``.

    Raises :class:`RewritingError` if a branch would need more than
    ``MAX_CQS_PER_BRANCH`` CQs.
    """
    sat = saturate(ontology)
    answer = frozenset(query.projection)
    fresh = _Fresh(query)
    out: list[RewrittenCQ] = []
    for i, branch in enumerate(query.branches):
        # a BIND reads them, or binds them (a pattern joining on the constant it binds): never folded into an
        # anonymous individual
        kept = answer | branch.bind_inputs | frozenset(v for v, _ in branch.binds) | branch.check_inputs
        try:
            cqs = rewrite_cq(branch, kept, sat, fresh, MAX_CQS_PER_BRANCH)
        except RewritingError as e:
            raise RewritingError(f"branch {i + 1}: {e.message}", query.location) from e
        cqs = [(cq, steps) for cq, steps in cqs if unsatisfiable(cq, sat) is None]
        for cq, steps in prune(cqs, kept, sat):
            out.append(RewrittenCQ(i, cq, steps))
    return tuple(out)


__all__ = [
    "RewrittenCQ",
    "AtomAlternative",
    "rewrite",
    "expand_atom",
    "saturate",
    "Saturation",
    "RewritingError",
    "contained_in",
    "MAX_CQS_PER_BRANCH",
]
