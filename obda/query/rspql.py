"""RSP-QL → obda's application-time SPARQL (issue 27, item 4).

RSP-QL (the W3C RSP community's continuous query language, Dell'Aglio et al. 2015) adds four clauses to
SPARQL; this module rewrites each into the SPARQL obda already reads and keeps a position map, so that
every error of the rewritten text points at the user's own text (line and column):

* ``REGISTER RSTREAM|ISTREAM|DSTREAM [<out>] AS`` before the query: blanked; the operator is checked against
  what obda emits (:func:`check`): ISTREAM (each answer once, when it enters; an aggregate's changelog),
  RSTREAM on aggregates only (the changelog replays to the answer at every closed timestamp); not DSTREAM.
* ``FROM NAMED WINDOW :w ON :s [RANGE d (STEP s)?]``: removed; it declares window ``:w`` of width ``d``.
  ``[ROWS n]`` and every other window shape are refused, located.  ``:s`` is not resolved: obda's stream
  assertions form one dataset with a named graph per timestamp (no graph per stream), so the window sees
  what its pattern asks for, through the mappings.
* ``WINDOW :w { P }`` (or ``WINDOW ?w`` when one window is declared) → ``GRAPH ?t_w { P }`` followed, with
  one window in use, by ``FILTER(?t_w > NOW() - "d"^^xsd:dayTimeDuration)`` (obda's sliding window: the
  window ``(NOW − d, NOW]``).  With several windows in use (a join of windows), or a window and obda's own
  ``GRAPH ?t``, a solution is in the windows at some evaluation instant iff each window's time is within its
  RANGE of every other time (take NOW = the latest): the interval join ``?t_j < ?t_i + d_i`` for every window
  ``i`` and other time ``j`` (queries without aggregates; an aggregate over several times is refused).
* ``FROM <g>`` (a static graph): removed; obda's static data is what the mappings make of static tables.

Nothing here parses SPARQL: the clauses are found with :mod:`obda.query.tokens`; the rewritten text is parsed
by :func:`obda.query.parser.parse_query` (rdflib): the same verdicts and errors as the hand-written query's.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from obda.errors import Location, ObdaError, QuerySyntaxError, UnsupportedConstructError
from obda.model.constraints import parse_duration
from obda.query import tokens as tk
from obda.query.text_edits import Piece, apply_edits, brace_depths, line_col, line_starts, token_end

OPERATORS = ("RSTREAM", "ISTREAM", "DSTREAM")
DAY_TIME_DURATION = "<http://www.w3.org/2001/XMLSchema#dayTimeDuration>"
_HINT = re.compile(r"(?i)(?<![\w:?$])(?:REGISTER|WINDOW)(?![\w:])")  # cheap pre-check before tokenizing
_ANY_DURATION = re.compile(r"^-?P(?:\d+Y)?(?:\d+M)?(?:\d+W)?(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$")
_COUNT_WINDOWS = ("ROWS", "ELEMENTS", "TRIPLES", "PHYSICAL")
_FORMS = ("SELECT", "CONSTRUCT", "ASK", "DESCRIBE")


@dataclass(frozen=True)
class NamedWindow:
    """A ``FROM NAMED WINDOW``: its name as written and resolved, its stream (as written), RANGE and STEP in
    microseconds, and the time variable its ``WINDOW`` blocks bind."""

    name: str
    iri: str
    stream: str
    range: int
    range_text: str
    step: int | None
    variable: str


@dataclass(frozen=True)
class Translation:
    """An RSP-QL text rewritten to obda's SPARQL, with what the rewriting found and the way back to positions
    in the user's text."""

    source: str
    text: str
    file: str | None
    operator: str | None = None  # RSTREAM / ISTREAM / DSTREAM, None without REGISTER
    operator_offset: int = 0
    output: str | None = None  # the stream name after REGISTER …STREAM (obda names queries elsewhere)
    windows: tuple[NamedWindow, ...] = ()
    used: tuple[NamedWindow, ...] = ()  # the windows WINDOW blocks use, in text order
    join_offset: int | None = None  # the WINDOW keyword that made the query a join of times
    distinct_offset: int | None = None  # SELECT DISTINCT's DISTINCT
    ask_offset: int | None = None  # the ASK of an ASK query
    pieces: tuple[Piece, ...] = field(default=(), repr=False)

    def source_offset(self, offset: int) -> int:
        """The offset in the user's text of ``offset`` in the rewritten text."""
        starts = [p.start for p in self.pieces]
        k = max(bisect.bisect_right(starts, offset) - 1, 0)
        p = self.pieces[k] if self.pieces else Piece(0, 0, 0, True)
        return p.source + min(offset - p.start, max(p.end - p.start - 1, 0)) if p.copied else p.source

    def locate_offset(self, offset: int) -> Location:
        return Location(self.file, *line_col(self.source, offset))

    def locate(self, loc: Location) -> Location:
        """A location in the rewritten text → the same place in the user's text."""
        if loc.line is None:
            return loc
        starts = line_starts(self.text)
        line = min(loc.line, len(starts))
        offset = min(starts[line - 1] + (loc.column or 1) - 1, max(len(self.text) - 1, 0))
        return self.locate_offset(self.source_offset(offset))

    def relocate(self, error: ObdaError) -> ObdaError:
        """``error`` (raised on the rewritten text), of the same type, located in the user's text."""
        out = type(error).__new__(type(error))
        out.__dict__.update(error.__dict__, location=self.locate(error.location))
        out.args = (str(out),)
        return out


def translate(text: str, file: str | None = None) -> Translation | None:
    """The RSP-QL ``text`` rewritten to obda's SPARQL, or None when it uses no RSP-QL clause (plain SPARQL:
    the words ``REGISTER`` and ``WINDOW`` as keywords, outside strings, IRIs, names and comments)."""
    if not _HINT.search(text):
        return None
    ts = tk.TokenStream(text)
    if not any(t.is_word("REGISTER", "WINDOW") for t in ts.tokens):
        return None
    return _Translator(text, ts, file).run()


def check(tr: Translation, aggregate: bool) -> None:
    """What the parsed query (``aggregate``: it has aggregates) may not do with its RSP-QL clauses."""
    if tr.used and not aggregate and tr.distinct_offset is not None:
        raise UnsupportedConstructError(
            "SELECT DISTINCT", "SELECT DISTINCT over a window is not supported: obda emits each distinct answer once "
            "ever, RSP-QL again whenever it re-enters the window; group instead (SELECT ?x (COUNT(*) AS ?n) … GROUP "
            "BY ?x, REGISTER RSTREAM: its changelog has an upsert when a group enters the window and a delete when "
            "it leaves)", tr.locate_offset(tr.distinct_offset))
    if tr.used and tr.ask_offset is not None:
        raise UnsupportedConstructError(
            "ASK", "ASK over a window is not supported: obda answers true once ever, when the first solution's "
            "timestamp closes; RSP-QL answers at each evaluation whether the window has a solution: count them "
            "instead (SELECT (COUNT(*) AS ?n) …, REGISTER RSTREAM: its changelog has the window's count at every "
            "closed timestamp)", tr.locate_offset(tr.ask_offset))
    if tr.operator == "RSTREAM" and not aggregate:
        raise UnsupportedConstructError(
            "RSTREAM", "RSTREAM of a query without aggregates would repeat every answer at each evaluation while it "
            "stays in the window; obda emits each answer once, when it enters: write REGISTER ISTREAM (or use "
            "aggregates: their changelog replays to the RSTREAM relation)", tr.locate_offset(tr.operator_offset))
    if aggregate and tr.join_offset is not None:
        names = ", ".join(w.name for w in tr.used)
        raise UnsupportedConstructError(
            "WINDOW", f"an aggregate over several windows ({names}), or over a window and GRAPH ?t, is not supported: "
            "obda's NOW() window is on the one time variable of an aggregate query; aggregate one window, or join "
            "the windows without aggregates (ISTREAM)", tr.locate_offset(tr.join_offset))


class _Translator:
    """One rewriting of one text: finds the clauses, checks them, collects the edits."""

    def __init__(self, text: str, ts: tk.TokenStream, file: str | None):
        self.text, self.ts, self.file = text, ts, file
        self.edits: list[tuple[int, int, str, int | None]] = []  # (start, end, new text, source or None: blank)
        self.depth = brace_depths(ts)
        self.prefixes: dict[str, str] = {}
        self.windows: dict[str, NamedWindow] = {}
        self.taken = {t.var_name for t in ts.tokens if t.kind == "var"}
        self.operator: tuple[str, int] | None = None
        self.output: str | None = None
        self.removed: set[int] = set()  # indices of the blanked tokens

    # ------------------------------------------------------------------ errors and edits

    def loc(self, i: int) -> Location:
        t = self.ts[min(i, len(self.ts) - 1)]
        return Location(self.file, t.line, t.column)

    def syntax(self, message: str, i: int) -> QuerySyntaxError:
        return QuerySyntaxError(f"RSP-QL syntax error: {message}", self.loc(i))

    def token(self, i: int, what: str, after: int) -> tk.Token:
        if i >= len(self.ts):
            raise self.syntax(f"{what} expected at the end of the query", after)
        return self.ts[i]

    def blank(self, first: int, last: int) -> None:
        """Replace tokens ``first..last`` (and what lies between them) by spaces, keeping the line breaks."""
        start, end = self.ts[first].offset, token_end(self.ts[last])
        self.removed.update(range(first, last + 1))
        self.edits.append((start, end, re.sub(r"[^\r\n]", " ", self.text[start:end]), None))

    # ------------------------------------------------------------------ the clauses

    def run(self) -> Translation:
        ts = self.ts
        form = next((k for k, t in enumerate(ts.tokens) if t.is_word(*_FORMS) and self.depth[k] == 0), None)
        i = 0
        while i < len(ts):
            t = ts[i]
            if t.is_word("PREFIX") and i + 2 < len(ts) and ts[i + 1].kind == "pname" and ts[i + 2].kind == "iri":
                self.prefixes[ts[i + 1].text.rstrip(":")] = ts[i + 2].text[1:-1]
            elif t.is_word("REGISTER"):
                i = self.register(i, form)
            elif t.is_word("FROM") and self.depth[i] == 0:
                i = self.dataset(i)
            i += 1
        used, blocks = self.blocks()
        graphs = [(ts[k + 1].var_name, k) for k in range(len(ts) - 1) if ts[k].is_word("GRAPH") and ts[k + 1].kind == "var"]
        join = None
        if used and len(used) + len(graphs) > 1:  # the times of a solution: each within its window of the latest
            join = self.join(used, blocks, graphs, form)
        elif used:
            w = used[0]
            for open_i, kw, _ in blocks:
                close = token_end(ts[ts.matching(open_i)])
                self.edits.append((close, close, f" FILTER(?{w.variable} > NOW() - \"{w.range_text}\"^^"
                                   f"{DAY_TIME_DURATION})", ts[kw].offset))
        text, pieces = apply_edits(self.text, self.edits)
        op, op_at = self.operator or (None, 0)
        distinct = form + 1 if form is not None and form + 1 < len(ts) and ts[form + 1].is_word("DISTINCT") else None
        ask = ts[form].offset if form is not None and ts[form].is_word("ASK") else None
        return Translation(self.text, text, self.file, op, op_at, self.output, tuple(self.windows.values()),
                           tuple(used), join, None if distinct is None else ts[distinct].offset, ask, pieces)

    def register(self, i: int, form: int | None) -> int:
        """``REGISTER op [name] AS``: before the query form, once."""
        if self.operator is not None:
            raise self.syntax("a query has one REGISTER clause", i)
        if self.depth[i] != 0 or (form is not None and i > form):
            raise self.syntax("REGISTER RSTREAM|ISTREAM|DSTREAM <name> AS comes before the query (before SELECT)", i)
        op = self.token(i + 1, "RSTREAM, ISTREAM or DSTREAM", i)
        if not op.is_word(*OPERATORS):
            raise self.syntax(f"REGISTER is followed by RSTREAM, ISTREAM or DSTREAM, not {op.text!r}", i + 1)
        if op.is_word("DSTREAM"):
            raise UnsupportedConstructError(
                "DSTREAM", "DSTREAM (the answers that leave the window) is not supported: obda emits answers when "
                "they enter (ISTREAM) and, for aggregates, a changelog whose delete lines are only for groups that "
                "leave the answer, not for the old rows of changed groups; write REGISTER ISTREAM or RSTREAM",
                self.loc(i + 1))
        j = i + 2
        if self.token(j, "AS", i + 1).kind in ("iri", "pname"):
            self.output = self.resolve(j)
            j += 1
        if not self.token(j, "AS", j - 1).is_word("AS"):
            raise self.syntax(f"REGISTER {op.text.upper()} <name> is followed by AS, not {self.ts[j].text!r}", j)
        self.operator = (op.text.upper(), op.offset)
        self.blank(i, j)
        return j

    def dataset(self, i: int) -> int:
        """``FROM <g>`` (blanked) or ``FROM NAMED WINDOW … [ … ]``; ``FROM NAMED <g>`` is refused."""
        nxt = self.token(i + 1, "a graph IRI or NAMED", i)
        if nxt.kind in ("iri", "pname"):
            self.resolve(i + 1)
            self.blank(i, i + 1)
            return i + 1
        if not nxt.is_word("NAMED"):
            raise self.syntax(f"FROM is followed by a graph IRI or NAMED WINDOW, not {nxt.text!r}", i + 1)
        if not self.token(i + 2, "WINDOW", i + 1).is_word("WINDOW"):
            raise UnsupportedConstructError(
                "FROM NAMED", "FROM NAMED <g> (a static named graph) is not supported: obda's static data is the "
                "default graph, what the mappings make of the static tables; write FROM <g> and match it outside "
                "WINDOW blocks", self.loc(i))
        name_i, on_i, stream_i, open_i = i + 3, i + 4, i + 5, i + 6
        if self.token(name_i, "a window IRI", i + 2).kind not in ("iri", "pname"):
            raise self.syntax(f"FROM NAMED WINDOW is followed by the window's IRI, not {self.ts[name_i].text!r}", name_i)
        if not self.token(on_i, "ON", name_i).is_word("ON"):
            raise self.syntax(f"FROM NAMED WINDOW {self.ts[name_i].text} ON <stream>: ON expected, not "
                              f"{self.ts[on_i].text!r}", on_i)
        if self.token(stream_i, "a stream IRI", on_i).kind not in ("iri", "pname"):
            raise self.syntax(f"ON is followed by the stream's IRI, not {self.ts[stream_i].text!r}", stream_i)
        self.resolve(stream_i)
        if not self.token(open_i, "[RANGE …]", stream_i).is_punct("["):
            raise self.syntax("the stream is followed by the window, [RANGE PT10M] or [RANGE PT10M STEP PT1M]", open_i)
        close_i = self.ts.matching(open_i)
        width, width_text, k = self.spec(open_i, close_i)
        step = None
        if k < close_i and self.ts[k].is_word("STEP"):
            step_at = k + 1
            step, step_text, k = self.duration(k, close_i)
            if step > width:
                raise UnsupportedConstructError(
                    "STEP", f"STEP {step_text} is longer than RANGE {width_text}: such windows skip the data between "
                    "them, and obda evaluates the query at every closed timestamp; write a STEP no longer than the "
                    "RANGE", self.loc(step_at))
        if k < close_i or not self.ts[close_i].is_punct("]"):
            raise UnsupportedConstructError(
                "window", f"this window shape is not supported (at {self.ts[k].text!r}): obda reads RSP-QL windows "
                "[RANGE d] and [RANGE d STEP s] with xsd:dayTimeDuration values", self.loc(k))
        iri = self.resolve(name_i)
        if iri in self.windows:
            raise self.syntax(f"window {self.ts[name_i].text} is declared twice", name_i)
        self.windows[iri] = NamedWindow(self.ts[name_i].text, iri, self.ts[stream_i].text, width, width_text, step,
                                        self.fresh(iri))
        self.blank(i, close_i)
        return close_i

    def spec(self, open_i: int, close_i: int) -> tuple[int, str, int]:
        """``RANGE d`` at the start of the window's brackets; every other shape is refused, located."""
        first = self.token(open_i + 1, "RANGE", open_i)
        if first.is_word("RANGE"):
            return self.duration(open_i + 1, close_i)
        construct, why = ("window", f"the window shape starting with {first.text!r} is not supported")
        if first.is_word(*_COUNT_WINDOWS):
            construct = f"[{first.text.upper()} n]"
            why = "count-based windows are not supported: obda's windows are in application time"
        elif first.is_word("NOW", "FROM"):
            construct = "[NOW]" if first.is_word("NOW") else "[FROM … TO …]"
            why = f"the window {construct} is not supported"
        raise UnsupportedConstructError(construct, f"{why}; write [RANGE PT10M] or [RANGE PT10M STEP PT1M]",
                                        self.loc(open_i + 1))

    def duration(self, kw: int, close_i: int) -> tuple[int, str, int]:
        """The duration after ``RANGE`` / ``STEP`` at ``kw`` (adjacent tokens: ``PT0.5S`` is several): its
        microseconds, its text, the index of the token after it."""
        first = kw + 1
        if first >= close_i:
            raise self.syntax(f"{self.ts[kw].text.upper()} is followed by a duration such as PT10M", kw)
        last = first
        while last + 1 < close_i and self.ts[last + 1].offset == token_end(self.ts[last]):
            last += 1
        text = self.text[self.ts[first].offset:token_end(self.ts[last])]
        micros = parse_duration(text)
        if micros is None:
            if _ANY_DURATION.match(text) and text not in ("P", "-P") and not text.endswith("T"):
                raise UnsupportedConstructError(
                    "duration", f"{text} is not a duration obda can use: a window is in days, hours, minutes and "
                    "seconds (xsd:dayTimeDuration), not years, months or weeks, and not negative", self.loc(first))
            raise self.syntax(f"{text!r} is not an ISO 8601 duration: write PT10M, PT30S, PT1H or P1D", first)
        if micros == 0:
            raise UnsupportedConstructError(
                "duration", f"{self.ts[kw].text.upper()} {text} is empty: a window's RANGE and STEP are positive",
                self.loc(first))
        return micros, text, last + 1

    def blocks(self) -> tuple[list[NamedWindow], list[tuple[int, int, NamedWindow]]]:
        """``WINDOW :w {`` / ``WINDOW ?w {`` → ``GRAPH ?t_w {``; the windows used and the blocks (their ``{``,
        WINDOW keyword and window)."""
        used: list[NamedWindow] = []
        blocks: list[tuple[int, int, NamedWindow]] = []
        for i, t in enumerate(self.ts.tokens):
            if not t.is_word("WINDOW") or i in self.removed:
                continue
            if self.depth[i] == 0:
                raise self.syntax("WINDOW :w { … } is a graph pattern inside WHERE { … }", i)
            name = self.token(i + 1, "a window IRI or variable", i)
            if name.kind == "var":
                w = self.variable_window(i + 1)
            elif name.kind in ("iri", "pname"):
                w = self.windows.get(self.resolve(i + 1))
                if w is None:
                    raise self.syntax(f"WINDOW {name.text} names no declared window: declare it with FROM NAMED "
                                      f"WINDOW {name.text} ON <stream> [RANGE PT10M]", i + 1)
            else:
                raise self.syntax(f"WINDOW is followed by a window IRI or variable, not {name.text!r}", i + 1)
            if not self.token(i + 2, "{", i + 1).is_punct("{"):
                raise self.syntax(f"WINDOW {name.text} is followed by a group {{ … }}", i + 2)
            self.edits.append((t.offset, token_end(name), f"GRAPH ?{w.variable}", t.offset))
            if w not in used:
                used.append(w)
            blocks.append((i + 2, i, w))
        return used, blocks

    def variable_window(self, i: int) -> NamedWindow:
        """``WINDOW ?w``: the one declared window; ``?w`` may not be used anywhere else."""
        name = self.ts[i].var_name
        if len(self.windows) != 1:
            raise UnsupportedConstructError(
                "WINDOW ?w", f"WINDOW ?{name} over {len(self.windows)} declared windows is not supported: name the "
                "window (WINDOW :w { … })" if self.windows else f"WINDOW ?{name}: no window is declared (FROM NAMED "
                "WINDOW :w ON <stream> [RANGE PT10M])", self.loc(i))
        other = [k for k, t in enumerate(self.ts.tokens) if t.var_name == name and not self.ts[k - 1].is_word("WINDOW")]
        if other:
            raise UnsupportedConstructError(
                "WINDOW ?w", f"?{name} names the window of WINDOW ?{name} and cannot be used elsewhere (obda does not "
                "bind window names)", self.loc(other[0]))
        return next(iter(self.windows.values()))

    def join(self, used: list[NamedWindow], blocks: list[tuple[int, int, NamedWindow]], graphs: list[tuple[str, int]],
             form: int | None) -> int:
        """Several times (windows, ``GRAPH ?t``): every time within each window's RANGE of the others, as an
        interval join at the end of the WHERE group, where their blocks must be. The WINDOW keyword that made the
        join."""
        ts = self.ts
        where = ts.find(lambda t: t.is_punct("{"), form or 0) if form is not None and ts[form].is_word("SELECT") else None
        for kw in [kw for _, kw, _ in blocks] + [k for _, k in graphs]:
            if where is None or self.depth[kw] != self.depth[where] + 1 or not (where < kw < ts.matching(where)):
                raise UnsupportedConstructError(
                    "WINDOW", "with several windows, or a window and GRAPH ?t, every WINDOW and GRAPH block is in the "
                    "WHERE clause's own group (not inside UNION or a nested { }): their times are joined there",
                    self.loc(kw))
        times = [(w.variable, w.range_text) for w in used] + [(g, None) for g in dict.fromkeys(g for g, _ in graphs)]
        conds = [f"?{b} < ?{a} + \"{d}\"^^{DAY_TIME_DURATION}" for a, d in times if d for b, _ in times if b != a]
        second = next(kw for _, kw, w in blocks if w is used[min(1, len(used) - 1)])
        at = ts[ts.matching(where)].offset
        self.edits.append((at, at, f" FILTER({' && '.join(conds)}) ", ts[second].offset))
        return ts[second].offset

    # ------------------------------------------------------------------ names

    def resolve(self, i: int) -> str:
        t = self.ts[i]
        if t.kind == "iri":
            return t.text[1:-1]
        prefix, local = t.text.split(":", 1)
        if prefix not in self.prefixes:
            raise QuerySyntaxError(f"undeclared prefix '{prefix}:'; add PREFIX {prefix}: <...>", self.loc(i))
        return self.prefixes[prefix] + local

    def fresh(self, iri: str) -> str:
        """A time variable for window ``iri``: ``t_`` and the IRI's local name, not used in the text."""
        local = re.sub(r"\W", "_", re.split(r"[#/:]", iri.rstrip("#/:"))[-1]) or "w"
        name, k = f"t_{local}", 1
        while name in self.taken:
            k += 1
            name = f"t_{local}_{k}"
        self.taken.add(name)
        return name
