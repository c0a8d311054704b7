"""Differential tests: rewriting + T-mappings over the raw ABox = an independent oracle.

* Flat TBoxes (no existential on the right): the oracle evaluates the query
  over the OWL RL closure computed by owlrl, which is complete for such TBoxes.
* Existential TBoxes: the oracle evaluates the query over a depth-bounded
  chase (tests/rewrite/kb.py), deep enough for the query: a homomorphism of a
  connected group of k variables into anonymous individuals reaches depth ≤ k
  below its top, and a top generator is reachable from an individual in at
  most (number of generators) steps.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .kb import KB, answers_by_chase, answers_by_rewriting, answers_plain, owlrl_closure
from .strategies import abox, existential_tbox, flat_tbox, query

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=150, **SETTINGS)
@given(flat_tbox(), abox, st.lists(query(), min_size=4, max_size=4))
def test_flat_tbox_matches_owlrl_closure(ontology, facts, queries):
    kb = KB(facts)
    closure = owlrl_closure(ontology, facts)
    for q in queries:
        assert answers_by_rewriting(q, ontology, kb) == answers_plain(q, closure), str(q)


@settings(max_examples=400, **SETTINGS)
@given(existential_tbox(), abox, st.lists(query(), min_size=3, max_size=3))
def test_existential_tbox_matches_chase(ontology, facts, queries):
    kb = KB(facts)
    generators = {ax.sup for ax in ontology.axioms if type(ax.sup).__name__ == "Exists"}
    for q in queries:
        depth = len(q.branches[0].variables) + len(generators)
        assert answers_by_rewriting(q, ontology, kb) == answers_by_chase(q, ontology, facts, depth), str(q)
