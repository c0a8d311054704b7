"""The window of a [NOT] EXISTS pattern in time (docs/analysis.md, rules A3–A6).

``FILTER NOT EXISTS { GRAPH ?t2 { … } FILTER(?t2 >= ?t1 - "PT1H"^^xsd:dayTimeDuration && ?t2 < ?t1) }``: the
pattern's FILTER compares its time ``?t2`` with the answer's ``?t1`` (SPARQL's NOT EXISTS sees the answer's
variables).  Those comparisons, each ``?t2 (+ d) op ?t1 (+ d')``, bound ``?t2 - ?t1`` below and above: a
:class:`~obda.model.query.TimeWindow`.  When an answer is final depends on it (docs/semantics.md):

* **A3** — a window in the answer's past or its own timestamp (``?t2 - ?t1 <= 0`` and bounded below): final
  when the answer's timestamp closes; the pattern's answers of the last ``d`` are kept.  Runs.
* **A4** — a window reaching into the future (``?t2 - ?t1`` may be positive, bounded above and below): final
  once ``?t1 + d`` closes; the answer waits until then (:mod:`obda.execution.check_windows`).  Runs.
* **A5** — no lower bound: the pattern's keys are kept forever, each with its earliest time (its verdict: that of
  the set of those keys).  Runs.
* **A6** — no upper bound into the future: an EXISTS answer is final at its first match, which may never come
  (it waits until then; the verdict is unbounded, and it runs opted in).  A NOT EXISTS, MINUS or OPTIONAL answer
  would never be final: refused.

The answer's stream patterns must all be in the one ``GRAPH ?t1`` (its answers close at ``?t1``), and the
pattern's in one ``GRAPH ?t2``.  Anything else is refused, located at the keyword.
"""

from __future__ import annotations

from obda.model.query import Shifted, TimeWindow, Var

_BOUND = {"<": ("upper", True), "<=": ("upper", False), ">": ("lower", True), ">=": ("lower", False)}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


def check_window(conv, parts: list, times: set, mine: set, kw: str, at: int | None, negated: bool) -> TimeWindow:
    """The window of a check from its FILTER's time comparisons ``parts`` (``(comparisons, token)`` pairs);
    ``times``: the pattern's time variables, ``mine``: the answer's; ``negated``: a NOT EXISTS, MINUS or OPTIONAL's
    anti-join, which a window without an end never decides; ``conv`` locates the errors."""
    if len(times) != 1:
        raise conv.unsupported(kw, f"{kw} with a window in time needs its stream patterns in one GRAPH ?t2 (its "
                               "FILTER compares that time with the answer's)", at)
    (inner,) = times
    if len(mine) != 1:
        raise conv.unsupported(kw, f"{kw} with a window in time compares the pattern's time with the answer's: "
                               "the answer's stream patterns must all be in one GRAPH ?t1", at)
    (outer,) = mine
    bounds: dict[str, tuple[int, bool] | None] = {"lower": None, "upper": None}
    for comparisons, token in parts:
        for c in comparisons:
            (side, k, strict) = _normalised(c, inner, outer, conv, token)
            for s in side:
                old = bounds[s]
                tighter = old is None or (k > old[0] if s == "lower" else k < old[0]) or (k == old[0] and strict)
                if tighter:
                    bounds[s] = (k, strict)
    lower, upper = bounds["lower"], bounds["upper"]
    window = TimeWindow(outer, inner, None if lower is None else lower[0], bool(lower and lower[1]),
                        None if upper is None else upper[0], bool(upper and upper[1]))
    if upper is not None or not negated:
        return window
    why = (f"its pattern may match at any later time ({inner} has no upper bound after {outer}), so no answer "
           "would ever be final (rule A6; an EXISTS answer is final at its first match, and runs); bound it: "
           f"{inner} <= {outer} + \"PT1H\"^^xsd:dayTimeDuration")
    raise conv.unsupported(kw, f"{kw} in a window of time: {why} (docs/analysis.md)", at)


def _normalised(c, inner: Var, outer: Var, conv, token) -> tuple[tuple[str, ...], int, bool]:
    """``c`` as ``inner - outer op k``: which bounds it sets (lower, upper or both for ``=``), ``k`` µs, strict."""
    def split(t) -> tuple[Var | None, int]:
        if isinstance(t, Shifted):
            return t.var, t.micros
        return (t, 0) if isinstance(t, Var) else (None, 0)

    (lv, la), (rv, ra), op = split(c.left), split(c.right), c.op
    if (lv, rv) == (outer, inner):
        (lv, la), (rv, ra), op = (rv, ra), (lv, la), _FLIP[op]
    if (lv, rv) != (inner, outer) or c.not_true:
        raise conv.unsupported("FILTER in NOT EXISTS", f"in a window of time, compare the pattern's time {inner} "
                               f"with the answer's {outer} ({c} compares other terms)", token)
    k = ra - la  # inner + la op outer + ra  ⇔  inner - outer op ra - la
    if op == "=":
        return ("lower", "upper"), k, False
    side, strict = _BOUND[op]
    return (side,), k, strict
