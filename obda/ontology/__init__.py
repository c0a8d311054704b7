"""The ontology stage: OWL 2 QL ontologies (Turtle, RDF/XML, OWL/XML, N-Triples) → :class:`Ontology`.

* :func:`load_ontology` / :func:`parse_ontology_text` read files or text,
  check the OWL 2 QL profile (``strict`` rejects, ``lenient`` warns with
  :class:`ProfileWarning` and ignores) and return the typed DL-Lite_R TBox;
* :func:`check_profile` lists the axioms of an rdflib graph outside OWL 2 QL;
* :func:`extract` gives the raw extraction of a graph (vocabulary, axioms, findings).
"""

from .extract import Extraction, axiom_text, check_profile, extract
from .loader import MODES, ProfileWarning, build_ontology, load_ontology, parse_ontology_text
from .reading import FORMATS, SourceDocument, detect_format, parse_document, sniff_format

__all__ = [
    "FORMATS",
    "MODES",
    "Extraction",
    "ProfileWarning",
    "SourceDocument",
    "axiom_text",
    "build_ontology",
    "check_profile",
    "detect_format",
    "extract",
    "load_ontology",
    "parse_document",
    "parse_ontology_text",
    "sniff_format",
]
