"""The Turtle text of an R2RML mapping: where its nodes are written, and its syntax errors located.

rdflib keeps no source positions, so lines are recovered best-effort by scanning the text (:class:`LineIndex`): a
triples map's own name at the start of a statement, and inside its text region the line where a term map's
template, column or constant, or a predicate or class, is written.  What rdflib would fail on without saying
where (a lone surrogate, a variable, brackets nested too deep) is refused before it parses
(:func:`lexical_error`), and rdflib's own syntax errors are read for their reason, line and column
(:func:`turtle_error`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Sequence

from rdflib.term import Node, URIRef

from obda.errors import Location, MappingError
from obda.query import tokens as tk


class LineIndex:
    """Best-effort line numbers for nodes of one Turtle text."""

    def __init__(self, text: str, file: str | None, base: str | None):
        self.text = text
        self.file = file
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        self.prefixes = {
            m.group(1): m.group(2)
            for m in re.finditer(r"(?im)^\s*@?prefix\s+([A-Za-z0-9_.\-]*):\s*<([^>]*)>", text)
        }
        m = re.search(r"(?im)^\s*@?base\s+<([^>]*)>", text)
        self.base = base if base is not None else (m.group(1) if m else None)
        self._regions: dict[str, tuple[int, int]] = {}
        self._statement_starts: dict[str, int] | None = None

    def line_of(self, offset: int) -> int:
        return bisect_right(self._line_starts, offset)

    def loc(self, offset: int | None) -> Location:
        if offset is None:
            return Location(self.file)
        return Location(self.file, self.line_of(offset))

    def spellings(self, node: Node) -> list[str]:
        """The ways ``node`` may be written in Turtle (``<iri>``, ``<relative>``, ``prefix:local``)."""
        if not isinstance(node, URIRef):
            return []
        iri = str(node)
        out = [f"<{iri}>"]
        if self.base and iri.startswith(self.base) and len(iri) > len(self.base):
            out.append(f"<{iri[len(self.base):]}>")
        for pfx, ns in self.prefixes.items():
            if ns and iri.startswith(ns):
                local = iri[len(ns) :]
                if re.fullmatch(r"[A-Za-z0-9_\-.]*", local) and not local.endswith("."):
                    out.append(f"{pfx}:{local}")
        return out

    def patterns(self, node: Node) -> list[str]:
        """:meth:`spellings` as regexes (prefixed names must end at a name boundary)."""
        return [
            re.escape(s) if s.startswith("<") else re.escape(s) + r"(?![A-Za-z0-9_\-:])" for s in self.spellings(node)
        ]

    def statement_offset(self, node: Node) -> int | None:
        """Offset where ``node`` starts a statement (first token of a line), else its first mention."""
        if self._statement_starts is None:
            self._statement_starts = {}
            for m in re.finditer(r"(?m)^[ \t]*(<[^>\s]*>|[A-Za-z0-9_\-.]*:[A-Za-z0-9_\-.]*)", self.text):
                self._statement_starts.setdefault(m.group(1), m.start(1))
        found = [self._statement_starts[s] for s in self.spellings(node) if s in self._statement_starts]
        if found:
            return min(found)
        pats = self.patterns(node)
        m = re.search("|".join(pats), self.text) if pats else None
        return m.start() if m else None

    def set_regions(self, starts: dict[str, int]) -> None:
        """Text regions of triples maps: from their start to the next one's."""
        ordered = sorted(starts.items(), key=lambda kv: kv[1])
        for i, (tm, off) in enumerate(ordered):
            end = ordered[i + 1][1] if i + 1 < len(ordered) else len(self.text)
            self._regions[tm] = (off, end)

    def find_in(self, tm: str, patterns: Sequence[str], after: int | None = None) -> int | None:
        """First offset in the region of ``tm`` matching one of the patterns."""
        if tm not in self._regions or not patterns:
            return None
        start, end = self._regions[tm]
        if after is not None and start <= after < end:
            start = after
        m = re.compile("|".join(f"(?:{p})" for p in patterns)).search(self.text, start, end)
        return m.start() if m else None

    def find_first(self, tm: str, groups: Sequence[Sequence[str]], after: int | None = None) -> int | None:
        """Like :meth:`find_in`, trying the pattern groups in order (most specific first)."""
        for g in groups:
            off = self.find_in(tm, g, after)
            if off is not None:
                return off
        return None


def _quoted_patterns(value: str) -> list[str]:
    """Regexes for a Turtle short string literal with lexical value ``value``."""
    esc = value.replace("\\", "\\\\").replace('"', '\\"')
    esc_sq = value.replace("\\", "\\\\").replace("'", "\\'")
    return [re.escape(f'"{esc}"'), re.escape(f"'{esc_sq}'"), re.escape(f'"""{value}"""')]


def literal_patterns(value: str, prop: str | None = None) -> list[list[str]]:
    """Pattern groups locating a string literal, most specific first.

    ``rr:<prop> "value"``, then ``"value"`` anywhere, then (for long strings
    written with triple quotes) the value's first non-blank line.
    """
    quoted = _quoted_patterns(value)
    groups = []
    if prop:
        groups.append([rf"rr:{prop}\s*" + q for q in quoted])
    groups.append(quoted)
    first = value.strip().splitlines()[0] if value.strip() else ""
    if first:
        groups.append([re.escape(first.replace("\\", "\\\\"))])
    return groups


#: brackets ( [ { nested deeper than this are refused before rdflib parses: its Turtle parser recurses per level
#: (about 7 Python frames a level), an R2RML mapping nests a few (a term map's [ ], a list's ( ))
MAX_NESTING = 32


def lexical_error(text: str, file: str | None) -> MappingError | None:
    """What rdflib would fail on without saying where, located: a character that is not Unicode text (a lone
    surrogate), a variable (N3 and SPARQL have them, Turtle does not), brackets nested too deep."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        line = text.count("\n", 0, e.start) + 1
        return MappingError(f"R2RML file is not valid Turtle: character U+{ord(text[e.start]):04X} is not Unicode "
                            "text (a lone surrogate)", Location(file, line))
    tokens = tk.tokenize(text)  # the SPARQL tokenizer: Turtle's strings, IRIs and comments are lexically the same
    # a '?' outside strings, IRIs and comments starts a variable for rdflib (which then fails, saying nowhere where)
    var = next((t for t in tokens if t.kind == "var" or t.is_punct("?")), None)
    if var is not None:
        return MappingError(f"R2RML file is not valid Turtle: {var.text!r} is a variable (N3 and SPARQL have them, "
                            f"Turtle does not){_near(text, var.line, var.column)}", Location(file, var.line))
    return nesting_error(text, file, MAX_NESTING, tokens)


def nesting_error(text: str, file: str | None, limit: int = MAX_NESTING, tokens=None) -> MappingError | None:
    """The error for brackets nested deeper than ``limit`` (with ``limit=0``: the deepest one), or None."""
    tokens = tk.tokenize(text) if tokens is None else tokens
    deep, level = (tk.too_deep(tokens, limit), limit + 1) if limit else tk.deepest(tokens)
    if deep is None:
        return None
    what = (f"brackets nested more than {limit} deep are not supported" if limit else
            "brackets nested too deeply to parse here (Python recursion limit)")
    return MappingError(f"R2RML file is not valid Turtle: {what} (this '{deep.text}' opens level {level}"
                        f"{_near(text, deep.line, deep.column)}); flatten the nesting", Location(file, deep.line))


def turtle_error(e: Exception, text: str) -> tuple[str, int | None, int | None]:
    """rdflib's reason for a Turtle syntax error, with its line and (where known) column.

    rdflib's ``BadSyntax`` keeps the reason in ``_why`` and the offending offset in
    ``_i`` of the parsed text ``_str``; its ``str()`` is a multi-line excerpt whose
    first line ("at line N of <>:") alone says nothing of what is wrong.
    """
    why = getattr(e, "_why", None)
    if isinstance(why, str) and why.strip():
        line = getattr(e, "lines", None)
        line = line + 1 if isinstance(line, int) else None
        column = None
        raw, i = getattr(e, "_str", None), getattr(e, "_i", None)
        if isinstance(raw, bytes) and isinstance(i, int) and 0 <= i <= len(raw):
            try:
                before = raw[:i].decode("utf-8")
            except UnicodeDecodeError:
                before = None
            if before is not None and text.startswith(before):  # the offset is into this very text
                line = before.count("\n") + 1
                column = len(before) - (before.rfind("\n") + 1) + 1
        reason = " ".join(why.split())
        near = _near(text, line, column)
        return (f"{reason}{near}", line, column)
    if isinstance(e, IndexError):  # rdflib's Turtle parser runs off the end of an unfinished statement
        return ("the file ends inside a statement (a missing '.', ']' or closing quote?)",
                max(1, len(text.rstrip().splitlines())), None)
    msg = " ".join(str(e).split()) or type(e).__name__
    m = re.search(r"line (\d+)", msg)
    return (msg, int(m.group(1)) if m else None, None)


def _near(text: str, line: int | None, column: int | None) -> str:
    """`` near 'token'``: the start of the text at the error position, for messages."""
    if line is None or column is None:
        return ""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    rest = lines[line - 1][column - 1:].strip()
    if not rest:
        return " at the end of the line"
    return f" near {rest[:40]!r}"
