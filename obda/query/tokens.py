"""A small SPARQL tokenizer used only to locate constructs in the query text.

rdflib's SPARQL parse tree keeps no source positions, so the query stage
re-scans the text to point error messages at the construct that caused them.
The tokenizer knows just enough of the SPARQL lexical grammar to never confuse
a keyword with the inside of a comment, an IRI or a string literal; it is not a
parser and never decides what a query means (rdflib does that).

Positions are 1-based lines and columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

#: SPARQL's PN_CHARS, loosely: letters of every plane (a prefix or name in the astral planes is one token too)
_NAME_CHARS = r"A-Za-z0-9_\u00B7\u00C0-\uFFFF\U00010000-\U000EFFFF"

# Order matters: the first alternative that matches at a position wins.
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n\r]*)
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
             |'''(?:[^'\\]|\\.|'(?!''))*'''
             |"(?:[^"\\\n\r]|\\.)*"
             |'(?:[^'\\\n\r]|\\.)*')
  | (?P<var>[?$][""" + _NAME_CHARS + r"""]+)
  | (?P<bnode>_:[""" + _NAME_CHARS + r"""][""" + _NAME_CHARS + r""".\-]*)
  | (?P<pname>(?:[A-Za-z\u00C0-\uFFFF\U00010000-\U000EFFFF][""" + _NAME_CHARS + r""".\-]*)?:(?:[""" + _NAME_CHARS + r""".\-:%\\]*))
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<punct>&&|\|\||<=|>=|!=|\^\^|.)
    """,
    re.VERBOSE | re.DOTALL,
)

_OPEN = {"{": "}", "(": ")", "[": "]"}
_CLOSE = frozenset(_OPEN.values())


@dataclass(frozen=True)
class Token:
    """One lexical token: kind (iri, string, var, bnode, pname, number, word, punct), text, position."""

    kind: str
    text: str
    offset: int
    line: int
    column: int

    def is_word(self, *words: str) -> bool:
        """True for a bare word (keyword, function name) equal to one of ``words`` ignoring case."""
        return self.kind == "word" and self.text.upper() in {w.upper() for w in words}

    def is_punct(self, *texts: str) -> bool:
        return self.kind == "punct" and self.text in texts

    @property
    def var_name(self) -> str | None:
        """The variable name of a ``?x`` / ``$x`` token, else None."""
        return self.text[1:] if self.kind == "var" else None


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens (whitespace and comments dropped).

    Prefixed names and blank-node labels never end with '.', as in the
    SPARQL grammar, so ``?x a :C.`` yields the name ``:C`` and the dot.
    """
    out: list[Token] = []
    line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line_idx = 0
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup or "punct"
        tok_text = m.group()
        if kind in ("pname", "bnode"):
            tok_text = tok_text.rstrip(".")
        end = pos + len(tok_text)
        if kind not in ("ws", "comment"):
            while line_idx + 1 < len(line_starts) and line_starts[line_idx + 1] <= pos:
                line_idx += 1
            out.append(Token(kind, tok_text, pos, line_idx + 1, pos - line_starts[line_idx] + 1))
        pos = end
    return out


def _openings(tokens: Iterable[Token]) -> Iterable[tuple[Token, int]]:
    """Every opening bracket (``{`` ``(`` ``[``) with the nesting level it opens.

    Brackets of every kind count together (a ``(`` of a FILTER inside a ``{``
    group is level 2); brackets inside IRIs, strings and comments do not.
    """
    depth = 0
    for t in tokens:
        if t.kind != "punct":
            continue
        if t.text in _OPEN:
            depth += 1
            yield t, depth
        elif t.text in _CLOSE and depth > 0:
            depth -= 1


def too_deep(tokens: Iterable[Token], limit: int) -> Token | None:
    """The first bracket that opens nesting level ``limit + 1``, or None."""
    return next((t for t, depth in _openings(tokens) if depth > limit), None)


def deepest(tokens: Iterable[Token]) -> tuple[Token | None, int]:
    """The first bracket that opens the deepest nesting level of the text, and that level (None, 0 without
    brackets)."""
    found, best = None, 0
    for t, depth in _openings(tokens):
        if depth > best:
            found, best = t, depth
    return found, best


class TokenStream:
    """Tokens of a query text with search helpers used to locate constructs."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self._match = self._bracket_matches()

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> Token:
        return self.tokens[i]

    def _bracket_matches(self) -> dict[int, int]:
        """Index of the matching closing bracket for every opening ``{ ( [``."""
        stack: list[int] = []
        match: dict[int, int] = {}
        for i, t in enumerate(self.tokens):
            if t.kind != "punct":
                continue
            if t.text in _OPEN:
                stack.append(i)
            elif t.text in _OPEN.values():
                # Tolerate mismatches (the text parsed, so this is rare): close the nearest opener.
                while stack:
                    j = stack.pop()
                    if _OPEN[self.tokens[j].text] == t.text:
                        match[j] = i
                        break
        return match

    def matching(self, i: int) -> int:
        """Index of the bracket closing the one at ``i`` (the last token if unmatched)."""
        return self._match.get(i, len(self.tokens) - 1)

    def find(self, pred: Callable[[Token], bool], start: int = 0, end: int | None = None) -> int | None:
        """Index of the first token in ``[start, end)`` satisfying ``pred``."""
        stop = len(self.tokens) if end is None else min(end, len(self.tokens))
        for i in range(max(start, 0), stop):
            if pred(self.tokens[i]):
                return i
        return None

    def find_word(self, words: str | Iterable[str], start: int = 0, end: int | None = None) -> int | None:
        """First keyword/function-name token among ``words`` (case-insensitive)."""
        ws = (words,) if isinstance(words, str) else tuple(words)
        return self.find(lambda t: t.is_word(*ws), start, end)

    def find_words(self, phrase: str, start: int = 0, end: int | None = None) -> int | None:
        """First occurrence of a keyword sequence such as ``"NOT EXISTS"`` or ``"ORDER BY"``."""
        words = phrase.split()
        i = start
        while True:
            i = self.find_word(words[0], i, end)
            if i is None:
                return None
            if all(
                i + k < len(self.tokens) and self.tokens[i + k].is_word(w)
                for k, w in enumerate(words[1:], 1)
            ):
                return i
            i += 1

    def find_punct(self, texts: str | Iterable[str], start: int = 0, end: int | None = None) -> int | None:
        ts = (texts,) if isinstance(texts, str) else tuple(texts)
        return self.find(lambda t: t.is_punct(*ts), start, end)

    def find_var(self, name: str, start: int = 0, end: int | None = None) -> int | None:
        return self.find(lambda t: t.var_name == name, start, end)

    def position(self, i: int | None) -> tuple[int | None, int | None]:
        """(line, column) of token ``i``; (None, None) when not located."""
        if i is None or not self.tokens:
            return (None, None)
        t = self.tokens[min(i, len(self.tokens) - 1)]
        return (t.line, t.column)

    def first_var_positions(self, start: int = 0, end: int | None = None) -> dict[str, int]:
        """Variable name → index of its first occurrence in ``[start, end)``."""
        out: dict[str, int] = {}
        stop = len(self.tokens) if end is None else end
        for i in range(start, stop):
            name = self.tokens[i].var_name
            if name is not None and name not in out:
                out[name] = i
        return out


# Roles of tokens inside a block of triples (see ``triple_roles``).
SUBJECT, PREDICATE, OBJECT, PATH_OP = "subject", "predicate", "object", "path"

_TERM_KINDS = ("iri", "string", "var", "bnode", "pname", "number")
_PATH_OPS = ("/", "|", "^", "!", "*", "+", "?")


def triple_roles(ts: TokenStream, start: int, end: int) -> list[tuple[int, str]]:
    """Classify the tokens of a triples block ``[start, end)`` by role.

    Returns (token index, role) for every term in subject, predicate or
    object position and for every property-path operator.  A small state
    machine over the Turtle-like triple syntax (``;`` ``,`` ``.`` ``[ ]``
    ``( )``); used only for error locations, so it errs on the side of
    simplicity (collections are skipped as a single term).
    """
    roles: list[tuple[int, str]] = []
    state = SUBJECT
    stack: list[str] = []
    i = start
    toks = ts.tokens

    def is_term(t: Token) -> bool:
        return t.kind in _TERM_KINDS or t.is_word("a", "true", "false")

    while i < end:
        t = toks[i]
        if t.is_punct("."):
            state = SUBJECT
        elif t.is_punct(";"):
            state = PREDICATE
        elif t.is_punct(","):
            state = OBJECT
        elif t.is_punct("["):
            stack.append(state)
            state = PREDICATE
        elif t.is_punct("]"):
            outer = stack.pop() if stack else SUBJECT
            state = PREDICATE if outer == SUBJECT else "done"
        elif t.is_punct("(") and state in (SUBJECT, OBJECT):
            i = ts.matching(i)
            state = PREDICATE if state == SUBJECT else "done"
        elif state == PREDICATE:
            # A verb: a variable or a property path.
            j = i
            while j < end:
                u = toks[j]
                if u.is_punct(*_PATH_OPS):
                    roles.append((j, PATH_OP))
                elif u.is_punct("("):
                    for k in range(j + 1, ts.matching(j)):
                        if toks[k].is_punct(*_PATH_OPS):
                            roles.append((k, PATH_OP))
                        elif is_term(toks[k]):
                            roles.append((k, PREDICATE))
                    j = ts.matching(j)
                elif is_term(u):
                    roles.append((j, PREDICATE))
                else:
                    break
                j += 1
                # The path continues after a primary only with a binary operator or a modifier.
                if j < end and not toks[j].is_punct(*_PATH_OPS) and not toks[j - 1].is_punct("^", "!", "/", "|"):
                    break
            i = j - 1
            state = OBJECT
        elif is_term(t):
            roles.append((i, state if state in (SUBJECT, OBJECT) else OBJECT))
            # Skip a datatype or language tag attached to a literal.
            if i + 2 < end and toks[i + 1].is_punct("^^"):
                i += 2
            elif i + 2 < end and toks[i + 1].is_punct("@"):
                i += 2
            state = PREDICATE if state == SUBJECT else "done"
        i += 1
    return roles


def words_position(text: str, phrase: str) -> tuple[int | None, int | None]:
    """(line, column) of the first ``phrase`` (``"ORDER BY"``) in a query's text; (None, None) when it has none.
    For the errors of later stages, as :func:`binding_position`."""
    ts = TokenStream(text)
    return ts.position(ts.find_words(phrase))


def filter_position(text: str, names: Iterable[str], word: str | None = None) -> tuple[int | None, int | None]:
    """(line, column) of the FILTER that reads every variable of ``names``: the first that calls the function
    ``word`` (``STR``), at that call, else the first at FILTER; (None, None) when the query has no such FILTER.
    For the errors of later stages, as :func:`binding_position`."""
    ts = TokenStream(text)
    wanted = set(names)
    readers: list[tuple[int, int]] = []  # (FILTER, end of its clause)
    i = ts.find_word("FILTER")
    while i is not None:
        opening = ts.find_punct(("(", "{"), i + 1)
        end = (ts.matching(opening) if opening is not None else len(ts) - 1) + 1
        if wanted <= {t.var_name for t in ts.tokens[i:end] if t.var_name}:
            readers.append((i, end))
        i = ts.find_word("FILTER", i + 1)
    calls = [ts.find_word(word, i, end) for i, end in readers] if word and word.isidentifier() else []
    at = next((c for c in calls if c is not None), readers[0][0] if readers else None)
    return ts.position(at)


def binding_position(text: str, name: str) -> tuple[int | None, int | None]:
    """(line, column) where a query binds its answer variable ``name`` with an expression (``AS ?name``, in BIND or
    SELECT), else of its first occurrence; (None, None) when it has none. For the errors of later stages, which
    read the compiled query, not its tokens."""
    ts = TokenStream(text)
    for i in range(len(ts) - 1):
        if ts[i].is_word("AS") and ts[i + 1].var_name == name:
            return ts.position(i + 1)
    return ts.position(ts.find_var(name))

