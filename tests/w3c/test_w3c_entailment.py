"""The W3C SPARQL 1.1 entailment-regime tests (``sparql11/entailment``), run through R2RML like the others
(``runner.py``): the schema triples of each test's data (class and property axioms, declarations) become the
project's ontology, the rest its tables, so that obda's OWL 2 QL rewriting — not the data — answers what the
ontology entails.

20 of the 70 pass, among them every RDFS inference test obda can state: ``rdfs:subPropertyOf`` (rdfs01, rdfs02,
its transitivity rdfs10), ``rdfs:subClassOf`` (rdfs04, transitivity rdfs09), ``rdfs:domain`` (rdfs06, with
subPropertyOf rdfs03), ``rdfs:range`` (rdfs07), and SPARQL-DL's undistinguished variables (sparqldl-07..09).
Two fail for a stated reason (:data:`KNOWN`); the others are refused with the reason the report prints: ASK, a
query over the schema itself (``?c rdfs:subClassOf :d``: the ontology is not data), a blank node as a class, a
term the ontology does not declare (``owl:DatatypeProperty`` as a class, a RIF rule's property).
"""

from __future__ import annotations

import pytest

from w3c.runner import SUITE, check_outcomes, manifest_tests, run_selected

SELECTED = {"entailment": {t.name for t in manifest_tests(SUITE / "entailment" / "manifest.ttl")}}
PASSING = {"lang", "owlds02", "plainLit", "rdf02", "rdf03", "rdf04", "rdfs01", "rdfs02", "rdfs03", "rdfs04",
           "rdfs06", "rdfs07", "rdfs09", "rdfs10", "rdfs12", "sparqldl-01", "sparqldl-04", "sparqldl-07",
           "sparqldl-08", "sparqldl-09"}
KNOWN = {
    # obda's answers are certain answers (docs/semantics.md, "Existential parts"): a variable the query does not
    # project may be an anonymous individual, so Alice — a Parent, hence with some child — answers
    # ?parent :hasChild ?child; the entailment regime binds every variable to a named individual
    "parent2": "a variable that is not projected may be an anonymous individual (certain answers)",
    # owl:sameAs is outside OWL 2 QL: obda reads it as a property of the data, without equality reasoning
    "sparqldl-13": "owl:sameAs is not reasoned with (outside OWL 2 QL)",
}


@pytest.fixture(scope="module")
def outcomes():
    return run_selected(SELECTED)


def test_the_entailment_tests_pass_but_the_known_differences(outcomes):
    check_outcomes(outcomes, PASSING, KNOWN)
