"""Reading ontology files into rdflib graphs.

Turtle, RDF/XML and N-Triples are parsed by rdflib.  OWL/XML is parsed by
owlready2 in an isolated :class:`owlready2.World`, saved as N-Triples and
re-parsed by rdflib, so every format reaches the extractor as the same kind of
RDF graph (the OWL 2 → RDF mapping).

owlready2 silently drops some OWL/XML axioms (``HasKey``,
``DatatypeDefinition``, SWRL rules).  To keep the promise that no axiom is
lost without a word, an expat pass over the OWL/XML text lists the top-level
elements with their lines; those owlready2 does not convert are returned as
:class:`~obda.model.ontology.ProfileFinding` s.  The same pass checks that the
XML is well formed, so syntax errors get a line and column.
"""

from __future__ import annotations

import io
import re
import sys
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax import SAXParseException

from rdflib import Graph
from rdflib.exceptions import ParserError
from rdflib.plugins.parsers.notation3 import BadSyntax

from obda.errors import Location, OntologyError
from obda.model.ontology import ProfileFinding

from . import translate as T

FORMATS = ("turtle", "xml", "owlxml", "nt")
_ALIASES = {
    "turtle": "turtle",
    "ttl": "turtle",
    "text/turtle": "turtle",
    "xml": "xml",
    "rdfxml": "xml",
    "rdf/xml": "xml",
    "rdf+xml": "xml",
    "application/rdf+xml": "xml",
    "owlxml": "owlxml",
    "owl/xml": "owlxml",
    "owx": "owlxml",
    "nt": "nt",
    "ntriples": "nt",
    "n-triples": "nt",
}
_EXTENSIONS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".nt": "nt",
    ".owx": "owlxml",
    ".owl": None,  # RDF/XML or OWL/XML (or Turtle): sniff
    ".rdf": None,
    ".xml": None,
}
OWL_NS = "http://www.w3.org/2002/07/owl#"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_DUMMY_BASE = "http://obda.invalid/ontology"


@dataclass(frozen=True)
class SourceDocument:
    """One parsed ontology file: its text, format, graph and what owlready2 dropped."""

    file: str | None
    format: str
    text: str
    graph: Graph
    prefixes: tuple[tuple[str, str], ...] = ()
    dropped: tuple[ProfileFinding, ...] = field(default=())
    units: tuple[tuple[int, int], ...] = ()  # OWL/XML: (first, last) line of each top-level element


def normalise_format(fmt: str, file: str | None = None) -> str:
    """Canonical format name (``turtle``, ``xml``, ``owlxml``, ``nt``) or OntologyError."""
    canonical = _ALIASES.get(fmt.strip().lower())
    if canonical is None:
        raise OntologyError(
            f"unknown ontology format {fmt!r}; use one of {', '.join(FORMATS)}", Location(file=file)
        )
    return canonical


def sniff_format(text: str) -> str | None:
    """Guess the format from the content: XML root element, Turtle directives, N-Triples lines."""
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith("<?xml") or head.startswith("<!") or re.match(r"<[A-Za-z_][\w.-]*(:[A-Za-z_][\w.-]*)?(\s|>|/>)", head):
        root = _xml_root(text)
        if root == (OWL_NS, "Ontology"):
            return "owlxml"
        return "xml"
    body = "\n".join(line for line in head.splitlines() if not line.lstrip().startswith("#"))
    if re.match(r"\s*(@prefix|@base|PREFIX\s|BASE\s)", body, re.IGNORECASE):
        return "turtle"
    if re.match(r"\s*(Prefix\(|Ontology\()", body):
        return "functional"
    if re.match(r"\s*(<[^>\s]+>|_:\S+)\s+<[^>\s]+>\s+", body):
        # N-Triples is a subset of Turtle: prefer the strict parser when every line is a triple
        lines = [ln for ln in body.splitlines() if ln.strip()]
        if all(re.match(r"\s*(<[^>\s]*>|_:\S+)\s+<[^>\s]*>\s+.*\.\s*$", ln) for ln in lines):
            return "nt"
        return "turtle"
    if re.match(r"\s*[\w-]*:", body):
        return "turtle"
    return None


def _xml_root(text: str) -> tuple[str, str] | None:
    """(namespace, local name) of the XML root element, or None when unreadable."""
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    root: list[tuple[str, str]] = []

    def start(name, attrs):
        ns, _, local = name.rpartition(" ")
        root.append((ns, local))
        raise _StopParsing

    parser.StartElementHandler = start
    try:
        parser.Parse(text.encode("utf-8"), True)
    except _StopParsing:
        pass
    except xml.parsers.expat.ExpatError:
        pass
    return root[0] if root else None


class _StopParsing(Exception):
    pass


def detect_format(path: str | Path, text: str) -> str:
    """The format of an ontology file, from its extension and (for .owl/.rdf/.xml or unknown) its content."""
    ext = Path(path).suffix.lower()
    by_ext = _EXTENSIONS.get(ext, None)
    if by_ext is not None:
        return by_ext
    sniffed = sniff_format(text)
    if sniffed == "functional":
        raise OntologyError(
            "OWL functional syntax is not supported; save the ontology as Turtle, RDF/XML or OWL/XML",
            Location(file=str(path)),
        )
    if sniffed is None:
        raise OntologyError(
            f"cannot tell the format of the ontology file (extension {ext or 'none'!r}); "
            "use .ttl, .owl/.rdf (RDF/XML), .owx (OWL/XML) or .nt",
            Location(file=str(path)),
        )
    return sniffed


def read_text(path: str | Path) -> str:
    """The file's text (UTF-8), or OntologyError naming the file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise OntologyError("ontology file not found", Location(file=str(path))) from None
    except IsADirectoryError:
        raise OntologyError("ontology path is a directory, not a file", Location(file=str(path))) from None
    except OSError as e:
        raise OntologyError(f"cannot read ontology file: {e.strerror or e}", Location(file=str(path))) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise OntologyError(f"ontology file is not UTF-8 text: byte 0x{data[e.start]:02x} at byte offset {e.start} "
                            f"({e.reason}); save it as UTF-8", Location(str(path), line, column)) from None


def parse_document(text: str, fmt: str, file: str | None = None) -> SourceDocument:
    """Parse ontology text of a known format into a :class:`SourceDocument`."""
    fmt = normalise_format(fmt, file)
    if fmt == "owlxml":
        graph, prefixes, dropped, units = _parse_owlxml(text, file)
        return SourceDocument(file, fmt, text, graph, prefixes, dropped, units)
    graph = _parse_rdf(text, fmt, file)
    prefixes = tuple((p, str(ns)) for p, ns in graph.namespaces())
    units: tuple[tuple[int, int], ...] = ()
    if fmt == "xml":  # top-level elements, for locating axioms (the text parsed, so this cannot fail)
        try:
            units = tuple((el.line, el.end_line) for el in _scan_xml(text, file, "RDF/XML")[0])
        except OntologyError:
            units = ()
    return SourceDocument(file, fmt, text, graph, prefixes, units=units)


def _new_graph() -> Graph:
    return Graph(bind_namespaces="core")


def _parse_rdf(text: str, fmt: str, file: str | None) -> Graph:
    graph = _new_graph()
    base = Path(file).resolve().as_uri() if file else _DUMMY_BASE
    try:
        graph.parse(data=text, format=fmt, publicID=base)
    except BadSyntax as e:
        line, col = _bad_syntax_position(e)
        raise OntologyError(f"Turtle syntax error: {getattr(e, '_why', e)}", Location(file, line, col)) from None
    except SAXParseException as e:
        raise OntologyError(
            f"RDF/XML syntax error: {e.getMessage()}", Location(file, e.getLineNumber(), e.getColumnNumber() + 1)
        ) from None
    except ParserError as e:
        line = _first_bad_ntriples_line(text) if fmt == "nt" else None
        raise OntologyError(f"{_FORMAT_NAMES[fmt]} syntax error: {e}", Location(file, line)) from None
    except Exception as e:  # rdflib raises assorted errors (e.g. bad IRIs, RDF/XML structure)
        raise OntologyError(f"{_FORMAT_NAMES[fmt]} parse error: {e}", Location(file)) from None
    return graph


_FORMAT_NAMES = {"turtle": "Turtle", "xml": "RDF/XML", "nt": "N-Triples", "owlxml": "OWL/XML"}


def _bad_syntax_position(e: BadSyntax) -> tuple[int | None, int | None]:
    """Line and column of a Turtle error from rdflib's BadSyntax (which keeps the text and offset)."""
    text, offset = getattr(e, "_str", None), getattr(e, "_i", None)
    if isinstance(text, bytes) and isinstance(offset, int):
        before = text[:offset]
        line = before.count(b"\n") + 1
        col = offset - (before.rfind(b"\n") + 1) + 1
        return line, col
    lines = getattr(e, "lines", None)
    return (lines + 1 if isinstance(lines, int) else None), None


def _first_bad_ntriples_line(text: str) -> int | None:
    """rdflib's N-Triples errors carry no line number: re-parse line by line to find it."""
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            Graph().parse(data=line + "\n", format="nt")
        except Exception:
            return n
    return None


# ----------------------------------------------------------------------------
# OWL/XML

# Top-level OWL/XML elements owlready2 converts to RDF (or that carry no TBox content).
_OWLXML_CONVERTED = frozenset(
    """Prefix Import Annotation Declaration SubClassOf EquivalentClasses DisjointClasses DisjointUnion
    SubObjectPropertyOf SubDataPropertyOf SubAnnotationPropertyOf EquivalentObjectProperties
    EquivalentDataProperties DisjointObjectProperties DisjointDataProperties InverseObjectProperties
    ObjectPropertyDomain ObjectPropertyRange DataPropertyDomain DataPropertyRange AnnotationPropertyDomain
    AnnotationPropertyRange FunctionalObjectProperty InverseFunctionalObjectProperty ReflexiveObjectProperty
    IrreflexiveObjectProperty SymmetricObjectProperty AsymmetricObjectProperty TransitiveObjectProperty
    FunctionalDataProperty ClassAssertion ObjectPropertyAssertion DataPropertyAssertion AnnotationAssertion
    SameIndividual DifferentIndividuals""".split()
)
# ABox axioms owlready2 drops: ignored like every other assertion.
_OWLXML_IGNORED = frozenset({"NegativeObjectPropertyAssertion", "NegativeDataPropertyAssertion"})
_OWLXML_DROPPED_REASONS = {
    "HasKey": T.HAS_KEY,
    "DatatypeDefinition": T.DATATYPE_DEFINITION,
    "DLSafeRule": T.SWRL_RULE,
}


@dataclass
class _Element:
    name: str
    attrs: dict
    line: int
    end_line: int = 0
    children: list = field(default_factory=list)
    text: str = ""


def _scan_xml(text: str, file: str | None, label: str = "OWL/XML") -> tuple[list[_Element], dict[str, str]]:
    """Top-level elements (children of the root, with subtrees and lines) and OWL/XML prefixes.

    Raises OntologyError with line/column when the XML is not well formed.
    """
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    stack: list[_Element] = []
    top: list[_Element] = []
    prefixes: dict[str, str] = {}
    abbreviated: list[tuple[str, int, int]] = []

    def start(name, attrs):
        local = name.rpartition(" ")[2]
        el = _Element(local, attrs, parser.CurrentLineNumber)
        if "abbreviatedIRI" in attrs:
            abbreviated.append((attrs["abbreviatedIRI"], parser.CurrentLineNumber, parser.CurrentColumnNumber + 1))
        if stack:
            stack[-1].children.append(el)
        stack.append(el)
        if local == "Prefix" and "IRI" in attrs:
            prefixes[attrs.get("name", "")] = attrs["IRI"]

    def end(name):
        el = stack.pop()
        el.end_line = parser.CurrentLineNumber
        if len(stack) == 1:
            top.append(el)

    def chars(data):
        if stack:
            stack[-1].text += data

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text.encode("utf-8"), True)
    except xml.parsers.expat.ExpatError as e:
        raise OntologyError(
            f"{label} syntax error: {xml.parsers.expat.ErrorString(e.code)}",
            Location(file, e.lineno, e.offset + 1),
        ) from None
    if label == "OWL/XML":
        for value, line, col in abbreviated:
            prefix = value.partition(":")[0]
            if prefix not in prefixes:
                raise OntologyError(
                    f"undeclared prefix {prefix!r} in abbreviatedIRI {value!r}; declare it with "
                    f'<Prefix name="{prefix}" IRI="..."/>',
                    Location(file, line, col),
                )
    return top, prefixes


def _render_owlxml(el: _Element, short) -> str:
    """Functional-syntax text of an OWL/XML element (OWL/XML mirrors functional syntax)."""
    if "IRI" in el.attrs:
        return short(el.attrs["IRI"])
    if "abbreviatedIRI" in el.attrs:
        return el.attrs["abbreviatedIRI"]
    if el.name in ("IRI", "AbbreviatedIRI"):
        return el.text.strip()
    if el.name == "Literal":
        return f'"{el.text}"'
    return f"{el.name}({' '.join(_render_owlxml(c, short) for c in el.children)})"


def _parse_owlxml(text: str, file: str | None):
    """(graph, prefixes, findings for dropped elements, line spans of top-level elements)."""
    import owlready2

    top, prefixes = _scan_xml(text, file)
    if _xml_root(text) != (OWL_NS, "Ontology"):
        raise OntologyError("not an OWL/XML document: the root element is not owl:Ontology", Location(file, 1))
    base_iri = _ontology_iri(text) or _DUMMY_BASE

    def short(iri: str) -> str:
        if iri.startswith("#"):
            return ":" + iri[1:]
        for name, ns in sorted(prefixes.items(), key=lambda t: -len(t[1])):
            if iri.startswith(ns) and len(iri) > len(ns):
                return f"{name}:{iri[len(ns):]}"
        return f"<{iri}>"

    dropped = []
    for el in top:
        if el.name in _OWLXML_CONVERTED or el.name in _OWLXML_IGNORED:
            continue
        reason = _OWLXML_DROPPED_REASONS.get(el.name) or T.Reason(
            f"the OWL/XML element {el.name} is not supported (owlready2 cannot read it)", (el.name.lower(),)
        )
        dropped.append(ProfileFinding(_render_owlxml(el, short), reason.text, Location(file, el.line)))

    world = owlready2.World()
    hook = sys.excepthook
    sys.excepthook = lambda *a: None  # owlready2 prints parser tracebacks through sys.excepthook
    try:
        onto = world.get_ontology(base_iri)
        onto.load(fileobj=io.BytesIO(text.encode("utf-8")), format="owlxml")
        buf = io.BytesIO()
        onto.save(file=buf, format="ntriples")
    except Exception as e:
        m = re.search(r"line (\d+)(?:, column (\d+))?", str(e))
        line = int(m.group(1)) if m else None
        col = int(m.group(2)) + 1 if m and m.group(2) else None
        raise OntologyError(f"OWL/XML parse error (owlready2): {_root_cause(e)}", Location(file, line, col)) from None
    finally:
        sys.excepthook = hook
        world.close()

    graph = _new_graph()
    graph.parse(data=buf.getvalue().decode("utf-8"), format="nt")
    for name, ns in prefixes.items():
        graph.bind(name, ns, override=False, replace=False)
    units = tuple((el.line, el.end_line) for el in top)
    return graph, tuple(prefixes.items()), tuple(dropped), units


def _root_cause(e: BaseException) -> str:
    """The innermost exception behind owlready2's wrapper errors, as text."""
    seen = set()
    while id(e) not in seen and (e.__cause__ or e.__context__) is not None:
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return f"{type(e).__name__}: {e}"


def _ontology_iri(text: str) -> str | None:
    m = re.search(r"<(?:\w+:)?Ontology\b[^>]*\bontologyIRI\s*=\s*[\"']([^\"']+)[\"']", text)
    return m.group(1) if m else None
