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
from obda.model.ontology import Exists, SubClassOf

from .strategies import (
    abox,
    aligned_query,
    existential_tbox,
    flat_tbox,
    query,
    small_abox,
    small_existential_tbox,
    tree_query,
)

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=100, **SETTINGS)
@given(flat_tbox(), abox, st.lists(query(), min_size=4, max_size=4))
def test_flat_tbox_matches_owlrl_closure(ontology, facts, queries):
    kb = KB(facts)
    closure = owlrl_closure(ontology, facts)
    for q in queries:
        assert answers_by_rewriting(q, ontology, kb) == answers_plain(q, closure), str(q)


def _chase_depth(query, ontology) -> int:
    generators = {ax.sup for ax in ontology.axioms if isinstance(ax, SubClassOf) and isinstance(ax.sup, Exists)}
    return len(query.branches[0].variables) + len(generators)


@settings(max_examples=150, **SETTINGS)
@given(existential_tbox(), abox, st.lists(query(), min_size=3, max_size=3))
def test_existential_tbox_matches_chase(ontology, facts, queries):
    kb = KB(facts)
    for q in queries:
        assert answers_by_rewriting(q, ontology, kb) == answers_by_chase(q, ontology, facts, _chase_depth(q, ontology)), str(q)


@settings(max_examples=300, derandomize=True, **SETTINGS)  # a random run once took 138 s (CI)
@given(small_existential_tbox(), small_abox, st.data())
def test_tree_queries_along_existential_axioms_match_chase(ontology, facts, data):
    """Queries grown along the TBox's generators: about 1 in 10 has answers only anonymous individuals give."""
    kb = KB(facts)
    queries = [data.draw(aligned_query(ontology)), data.draw(aligned_query(ontology)), data.draw(tree_query(3))]
    for q in queries:
        assert answers_by_rewriting(q, ontology, kb) == answers_by_chase(q, ontology, facts, _chase_depth(q, ontology)), str(q)
