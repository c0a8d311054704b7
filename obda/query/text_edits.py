"""Edits of a query's text and the map back from the edited text to the user's (:mod:`obda.query.rspql`).

The edited text is made of pieces, each copied from the user's text or generated for a clause of it, so that
a position in the edited text (an error rdflib or obda found there) maps to a line and column of the user's.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from obda.query import tokens as tk


@dataclass(frozen=True)
class Piece:
    """A stretch of the rewritten text: copied from the user's text at ``source`` (``copied``), or generated
    for the clause at ``source``."""

    start: int
    end: int
    source: int
    copied: bool


def token_end(t: tk.Token) -> int:
    return t.offset + len(t.text)


def brace_depths(ts: tk.TokenStream) -> list[int]:
    """For each token, how many ``{ }`` groups it is inside (an opening brace counts as outside its group)."""
    out, depth = [], 0
    for t in ts.tokens:
        if t.is_punct("}"):
            depth = max(depth - 1, 0)
        out.append(depth)
        if t.is_punct("{"):
            depth += 1
    return out


def apply_edits(text: str, edits: list[tuple[int, int, str, int | None]]) -> tuple[str, tuple[Piece, ...]]:
    """The text with the edits made, and its pieces (copied or generated) for the position map."""
    out: list[str] = []
    pieces: list[Piece] = []
    pos = n = 0

    def piece(new: str, source: int, copied: bool) -> None:
        nonlocal n
        if new:
            out.append(new)
            pieces.append(Piece(n, n + len(new), source, copied))
            n += len(new)

    for start, end, new, source in sorted(edits, key=lambda e: (e[0], e[1])):
        piece(text[pos:start], pos, True)
        piece(new, start if source is None else source, source is None)
        pos = max(pos, end)
    piece(text[pos:], pos, True)
    return "".join(out), tuple(pieces)


def line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]


def line_col(text: str, offset: int) -> tuple[int, int]:
    line = bisect.bisect_right(starts := line_starts(text), offset)
    return line, offset - starts[line - 1] + 1
