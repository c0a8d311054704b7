"""Best-effort line numbers for axioms.

rdflib and owlready2 keep no source positions, so an axiom is located in the
file text instead.  Its *anchor* is a term of the axiom (usually the subject),
its *partner* another term (usually the object), its *keywords* lower-case
substrings naming the construct (``subclassof``, ``unionof`` ...; matched
case-insensitively, so ``subclassof`` finds ``rdfs:subClassOf`` in Turtle and
RDF/XML and ``<SubClassOf>`` in OWL/XML).

A term is mentioned on a line when the line holds its full IRI, a prefixed
name ``p:Local``, a relative ``#Local``, an XML entity reference ``&e;Local``
or ``rdf:ID="Local"``.  The search area is:

* XML formats: the top-level elements ("units") that mention the anchor; a
  unit whose first line mentions the anchor (``<owl:Class rdf:about=...>``)
  and that also mentions the partner is preferred;
* Turtle / N-Triples: the block of lines from a mention of the anchor to the
  next one.

Inside the area, keywords are tried in order (the first ones name the
offending construct of a profile finding); the first line with the keyword
whose segment (up to the next keyword line) mentions the partner wins, else
the first keyword line.  The result is a hint for the user, not a guarantee.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from typing import Iterable, Sequence

_TOKEN = re.compile(r"[^\s<>\"'#:/;()\[\],=&{}|^*@]+")
_WINDOW = 400  # at most this many lines are searched after a mention (Turtle/N-Triples)
_SEGMENT = 20  # the partner must appear within this many lines after the keyword line

Position = tuple[int, int]  # 1-based line and column


def local_name(iri: str) -> tuple[str, str]:
    """Split an IRI into (namespace, local name) at the last ``#`` or ``/``."""
    cut = max(iri.rfind("#"), iri.rfind("/"))
    return iri[: cut + 1], iri[cut + 1 :]


class TextLocator:
    """Finds the line and column of an axiom in one ontology file's text."""

    def __init__(
        self,
        text: str,
        fmt: str,
        prefixes: Iterable[tuple[str, str]] = (),
        units: Sequence[tuple[int, int]] = (),
    ):
        self.fmt = fmt
        self.lines = text.splitlines()
        self.lower = [line.lower() for line in self.lines]
        self.units = sorted((a - 1, b - 1) for a, b in units)  # 0-based, inclusive
        self._unit_starts = [u[0] for u in self.units]
        self.prefixes: dict[str, list[str]] = defaultdict(list)  # namespace -> prefixes
        for prefix, ns in prefixes:
            self.prefixes[str(ns)].append(prefix)
        index: dict[str, list[int]] = defaultdict(list)
        for i, line in enumerate(self.lines):
            for token in set(_TOKEN.findall(line)):
                index[token].append(i)
                stripped = token.rstrip(".")
                if stripped != token:
                    index[stripped].append(i)
        self.index = index
        self._mentions: dict[str, list[int]] = {}
        self._forms_cache: dict[str, list[str]] = {}

    # -- mentions -----------------------------------------------------------

    def _forms(self, iri: str) -> list[str]:
        forms = self._forms_cache.get(iri)
        if forms is None:
            ns, local = local_name(iri)
            forms = [iri] + [f"{p}:{local}" for p in self.prefixes.get(ns, [])]
            if ns.endswith("#"):
                forms.append(f"#{local}")
            forms += [f";{local}", f'rdf:ID="{local}"', f"rdf:ID='{local}'"]
            self._forms_cache[iri] = forms
        return forms

    def mentions(self, iri: str) -> list[int]:
        """0-based indices of the lines that mention ``iri`` (cached)."""
        found = self._mentions.get(iri)
        if found is not None:
            return found
        _, local = local_name(iri)
        forms = self._forms(iri)
        candidates = sorted(set(self.index.get(local, []))) if local else range(len(self.lines))
        found = [i for i in candidates if any(f in self.lines[i] for f in forms)]
        self._mentions[iri] = found
        return found

    def _mentioned_in(self, i: int, iri: str | None) -> bool:
        return iri is not None and any(f in self.lines[i] for f in self._forms(iri))

    # -- locating -----------------------------------------------------------

    def locate(
        self, anchors: Sequence[str], keywords: Sequence[str] = (), partner: str | None = None
    ) -> Position | None:
        """Position of the axiom anchored at the first anchor that the text mentions."""
        for anchor in anchors:
            mentions = self.mentions(anchor)
            if not mentions:
                continue
            if self.units:
                hit = self._in_units(anchor, mentions, keywords, partner)
                if hit:
                    return hit
            return self._in_blocks(mentions, keywords, partner)
        return None

    def _best_in(self, rows: range, keywords: Sequence[str], partner: str | None) -> tuple[Position, bool] | None:
        """The best keyword line in ``rows`` and whether its segment mentions the partner."""
        for kw in keywords:
            hits = []
            for i in rows:
                col = self.lower[i].find(kw)
                if col >= 0 and not self.lines[i].lstrip().startswith("</"):
                    hits.append((i, col))
            if not hits:
                continue
            if partner is not None:
                for n, (i, col) in enumerate(hits):
                    stop = min(hits[n + 1][0] if n + 1 < len(hits) else rows.stop, i + _SEGMENT, rows.stop)
                    if any(self._mentioned_in(j, partner) for j in range(i, max(stop, i + 1))):
                        return (i + 1, col + 1), True
            i, col = hits[0]
            return (i + 1, col + 1), partner is None
        return None

    def _in_units(self, anchor: str, mentions: list[int], keywords: Sequence[str], partner: str | None) -> Position | None:
        best: tuple[int, Position] | None = None
        seen: set[int] = set()
        for m in mentions:
            k = bisect.bisect_right(self._unit_starts, m) - 1
            if k < 0 or k in seen or m > self.units[k][1]:
                continue
            seen.add(k)
            a, b = self.units[k]
            found = self._best_in(range(a, b + 1), keywords, partner)
            if found is None:
                continue
            pos, with_partner = found
            score = 2 * with_partner + self._mentioned_in(a, anchor)
            if best is None or score > best[0]:
                best = (score, pos)
                if score == 3:
                    break
        return best[1] if best else None

    def _in_blocks(self, mentions: list[int], keywords: Sequence[str], partner: str | None) -> Position:
        fallback: Position | None = None
        for n, start in enumerate(mentions):
            end = mentions[n + 1] if n + 1 < len(mentions) else len(self.lines)
            end = max(min(end, start + _WINDOW), start + 1)
            found = self._best_in(range(start, end), keywords, partner)
            if found is None:
                continue
            pos, with_partner = found
            if with_partner:
                return pos
            fallback = fallback or pos
        if fallback is not None:
            return fallback
        start = self._definition(mentions)
        return start + 1, 1 + len(self.lines[start]) - len(self.lines[start].lstrip())

    def _definition(self, mentions: list[int]) -> int:
        """Prefer a defining mention (``rdf:about``, subject position) over a use."""
        for i in mentions:
            line = self.lines[i]
            if "rdf:about" in line or "rdf:ID" in line or "<Declaration" in line:
                return i
            if self.fmt in ("turtle", "nt") and line[:1] not in (" ", "\t"):
                return i
        return mentions[0]
