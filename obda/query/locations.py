"""Errors with query positions: the token index of a construct in the query text → its line and column.

rdflib's parse tree has no positions, so the tree walk (:mod:`obda.query.walk`) finds each construct it refuses
by re-scanning the tokens (:mod:`obda.query.tokens`) from its cursor, in text order; this mixin holds those
searches and builds the located :class:`~obda.errors.UnsupportedConstructError`.  It reads the walk's ``ts``
(the token stream), ``file`` and ``pos`` (the cursor).
"""

from __future__ import annotations

from obda.errors import Location, UnsupportedConstructError
from obda.query.expressions import Hint

# Keywords that end a block of triples inside a group (start of a GraphPatternNotTriples).
_BLOCK_END_WORDS = ("OPTIONAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES")


class Located:
    """Token searches of one query conversion, and errors located at a token."""

    def loc(self, i: int | None) -> Location:
        line, col = self.ts.position(i)
        return Location(self.file, line, col)

    def unsupported(self, construct: str, message: str, i: int | None) -> UnsupportedConstructError:
        return UnsupportedConstructError(construct, message, self.loc(i))

    def problem(self, p, start: int, end: int, clause: str | None = None) -> UnsupportedConstructError:
        """The located error of an expression's :class:`~obda.query.expressions.FilterProblem` ``p`` between
        tokens ``start`` and ``end``, its message naming ``clause`` (``SELECT``, ``BIND``) instead of FILTER."""
        message = p.message if clause is None else p.message.replace("in FILTER", f"in {clause}")
        return self.unsupported(p.construct, message, self._locate_hint(p.hint, start, end))

    def _enclosing_paren(self, i: int | None, start: int) -> int | None:
        """Index of the outermost '(' after ``start`` whose bracket pair contains token ``i``."""
        if i is None:
            return None
        j = self.ts.find(lambda t: t.is_punct("("), start, i)
        while j is not None and self.ts.matching(j) < i:
            j = self.ts.find(lambda t: t.is_punct("("), j + 1, i)
        return i if j is None else j

    def _block_end(self, start: int, close_i: int) -> int:
        """End (exclusive) of the triples block starting at token ``start``."""
        i = self.ts.find(lambda t: t.is_punct("{", "}") or t.is_word(*_BLOCK_END_WORDS), start, close_i)
        return close_i if i is None else i

    def _role_token(self, roles: list[tuple[int, str]], wanted: set[str], pred) -> int | None:
        for i, role in roles:
            if role in wanted and pred(self.ts[i]):
                return i
        return roles[0][0] if roles else self.pos

    def _filter_end(self, start: int) -> int:
        """Last token of the FILTER at ``start``: ``FILTER (...)``, ``FILTER fn(...)``, ``FILTER [NOT] EXISTS {...}``."""
        j = start + 1
        while j < len(self.ts) and not self.ts[j].is_punct("(", "{"):
            j += 1
        return self.ts.matching(j) if j < len(self.ts) else len(self.ts) - 1

    def _locate_hint(self, hint: Hint, start: int, end: int) -> int:
        ts, stop = self.ts, end + 1
        i: int | None = None
        if hint.kind == "word":
            i = ts.find_word(hint.text, start, stop)
        elif hint.kind == "words":
            i = ts.find_words(hint.text, start, stop)
        elif hint.kind == "punct":
            i = ts.find_punct(hint.text, start + 1, stop)
        elif hint.kind == "var":
            i = ts.find_var(hint.text, start, stop)
        elif hint.kind == "callee":
            i = ts.find(
                lambda t: t.kind in ("iri", "pname"), start, stop
            )
            while i is not None and not (i + 1 < len(ts) and ts[i + 1].is_punct("(")):
                i = ts.find(lambda t: t.kind in ("iri", "pname"), i + 1, stop)
        return start if i is None else i
