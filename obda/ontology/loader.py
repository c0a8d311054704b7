"""Loading OWL 2 QL ontologies into :class:`obda.model.ontology.Ontology`.

``strict`` mode rejects an ontology with any axiom outside OWL 2 QL (one
:class:`~obda.errors.ProfileViolation` listing every finding); ``lenient``
mode warns (:class:`ProfileWarning`) and keeps only the parts inside the
profile, recording the findings in :attr:`Ontology.findings`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal, Sequence

from rdflib import Graph

from obda.errors import Location, OntologyError, ProfileViolation
from obda.model.ontology import Axiom, Ontology, ProfileFinding

from .extract import KEPT_MARK, axiom_text, extract
from .locate import TextLocator
from .reading import SourceDocument, detect_format, parse_document, read_text

Mode = Literal["strict", "lenient"]
MODES = ("strict", "lenient")


class ProfileWarning(UserWarning):
    """An axiom outside OWL 2 QL was ignored (lenient mode)."""


def load_ontology(paths: Sequence[str | Path] | str | Path, mode: Mode = "strict") -> Ontology:
    """Load and merge the ontology files ``paths`` (format from extension and content)."""
    _check_mode(mode)
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise OntologyError("no ontology file given")
    docs = []
    for p in paths:
        text = read_text(p)
        docs.append(parse_document(text, detect_format(p, text), str(p)))
    return build_ontology(docs, mode)


def parse_ontology_text(text: str, format: str, file: str | None = None, mode: Mode = "strict") -> Ontology:
    """Load one ontology given as text in ``format`` (turtle, xml, owlxml, nt); ``file`` names it in errors."""
    _check_mode(mode)
    return build_ontology([parse_document(text, format, file)], mode)


def build_ontology(docs: Sequence[SourceDocument], mode: Mode = "strict") -> Ontology:
    """Extract the merged ontology of parsed documents and apply the profile ``mode``."""
    _check_mode(mode)
    graph = _merge([d.graph for d in docs])
    locators: dict[int, TextLocator] = {}

    def locate(triple, anchors, keywords, partner) -> Location:
        for i, doc in enumerate(docs):
            if len(docs) == 1 or triple in doc.graph:
                if i not in locators:
                    locators[i] = TextLocator(doc.text, doc.format, doc.prefixes, doc.units)
                pos = locators[i].locate(anchors, keywords, partner)
                return Location(doc.file, *pos) if pos else Location(doc.file)
        return Location()

    ex = extract(graph, locate)
    order = {d.file: i for i, d in enumerate(docs)}
    findings = sorted(
        [*ex.findings, *(f for d in docs for f in d.dropped)],
        key=lambda f: (order.get(f.location.file, 0), f.location.line or 0, f.axiom),
    )
    if findings and mode == "strict":
        raise _violation(findings)
    for f in findings:
        rest = "the rest is" if KEPT_MARK in f.reason else "it is"
        warnings.warn(f"{f} ({rest} ignored in lenient mode)", ProfileWarning, stacklevel=3)
    axioms = sorted(ex.axioms, key=lambda a: _axiom_key(a, order))

    def first_mention(iri: str) -> Location:
        for i, doc in enumerate(docs):
            if i not in locators:
                locators[i] = TextLocator(doc.text, doc.format, doc.prefixes, doc.units)
            lines = locators[i].mentions(iri)
            if lines:
                return Location(doc.file, lines[0] + 1)
        return Location(docs[0].file if docs else None)

    return Ontology(
        classes=ex.classes,
        object_properties=ex.object_properties,
        data_properties=ex.data_properties,
        axioms=tuple(axioms),
        labels=ex.labels,
        findings=tuple(findings),
        files=tuple(d.file for d in docs if d.file is not None),
        undeclared=tuple((kind, iri, first_mention(iri)) for kind, iri in ex.undeclared),
    )


def _axiom_key(a: Axiom, order: dict) -> tuple:
    return (order.get(a.location.file, 0), a.location.line or 0, type(a).__name__, axiom_text(a))


def _merge(graphs: list[Graph]) -> Graph:
    if len(graphs) == 1:
        return graphs[0]
    merged = Graph(bind_namespaces="core")
    for g in graphs:
        merged += g  # blank nodes keep their identity, so a triple can be traced to its file
        for prefix, ns in g.namespaces():
            merged.bind(prefix, ns, override=False)
    return merged


def _violation(findings: list[ProfileFinding]) -> ProfileViolation:
    lines = "\n".join(f"  {f.location}: {f.axiom}: {f.reason}" for f in findings)
    err = ProfileViolation(
        f"{len(findings)} axiom(s) outside OWL 2 QL:\n{lines}\n"
        "(load the ontology in lenient mode to ignore them with a warning)",
        findings[0].location,
    )
    err.findings = tuple(findings)
    return err


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be 'strict' or 'lenient', not {mode!r}")
