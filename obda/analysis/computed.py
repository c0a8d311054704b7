"""Computed conditions: functions and arithmetic in a member's WHERE clause (docs/analysis.md, Rules 5–7).

The paper's atoms compare attributes and constants.  SPARQL's FILTER functions and arithmetic
(``obda.mapping.functions``) give conditions such as ``ABS(m1.o) < 30``, ``STRPOS(m1.o, 'a') > 0`` or
``(m2.o - m1.o) > 0.5``.  They are read as follows:

* **Rule 5 — a computed condition over one FROM entry is a per-row filter.** It bounds nothing and relates
  nothing: the member is judged as the member without it over the filtered stream ``σ_f(S)``, which is a
  stream like any other.  The executor runs it in the entry's pipeline, before any synopsis.
* **Rule 6 — a computed comparison of two FROM entries is an atom over derived attributes.** A comparison
  whose sides are sums (``+ -``) of terms each over one entry separates into ``f(A) op g(B)`` (:func:`separate`);
  ``f(A)`` and ``g(B)`` are attributes of ``A`` and ``B`` computed per row (a derived column; a plain column
  stays itself), and the atom ``f(A) op g(B)`` is an ordinary join atom between them.
* **Rule 7 — a function of bounded attributes is bounded.** A derived attribute has finitely many values when
  every column it reads has (``Closure`` role ``derived``).

What is sound: a *bounded* verdict (the criteria hold for every content of the filtered / extended streams,
so for the ones the real columns produce).  What is not: the lower-bound witnesses of an *unbounded*
verdict choose values freely, which a filter or a derived column may not allow — such a verdict becomes
``not_shown`` with the reason (:func:`adjust`).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div)
# template pieces (an IRI's or literal's text), which the term rules (obda.analysis.terms) read
_TERM_FUNCS = (exp.Cast, exp.TryCast, exp.Concat, exp.ConcatWs, exp.Replace, exp.Nullif)
_PREDICATES = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Not, exp.And, exp.Or)
_STRING_FUNCS = (exp.Lower, exp.Upper, exp.Concat, exp.Substring, exp.DPipe, exp.RegexpReplace)


def is_computed(node: exp.Expression) -> bool:
    """Whether a condition's side computes: a function other than a term's pieces, or a predicate as a value."""
    for n in node.walk():
        if isinstance(n, exp.Func) and not isinstance(n, _TERM_FUNCS):
            return True
        if isinstance(n, _PREDICATES):
            return True
    return False


def takes_text(node: exp.Expression) -> bool:
    """Whether a condition's side is a column's text: ``CAST(c AS VARCHAR)`` (``STR(?v)``), or a time's
    ``REPLACE(CAST(ts AS VARCHAR), ' ', 'T')`` (``STR(?t)``) — a value computed per row, as a function's."""
    node = node.unnest()
    if isinstance(node, exp.Replace):
        node = node.this.unnest()
    return (isinstance(node, (exp.Cast, exp.TryCast)) and node.to.is_type(*exp.DataType.TEXT_TYPES)
            and node.find(exp.Column) is not None)


def has_arith(node: exp.Expression) -> bool:
    return any(isinstance(n, ARITH) for n in node.walk())


def owners(node: exp.Expression, owner) -> set[str]:
    """The FROM aliases of the columns of ``node`` (``owner(column)`` resolves one)."""
    return {owner(c) for c in node.find_all(exp.Column)}


def _terms(node: exp.Expression, sign: int, out: list) -> None:
    """Signed summands of ``node`` (through ``+``, ``-``, unary minus and parentheses)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Add):
        _terms(node.this, sign, out)
        _terms(node.expression, sign, out)
    elif isinstance(node, exp.Sub):
        _terms(node.this, sign, out)
        _terms(node.expression, -sign, out)
    elif isinstance(node, exp.Neg):
        _terms(node.this, -sign, out)
    else:
        out.append((sign, node))


def _sum(terms: list) -> exp.Expression:
    """``t1 ± t2 ± …`` of signed terms (a leading ``0 -`` only when every sign is negative)."""
    pos = [t for s, t in terms if s > 0]
    neg = [t for s, t in terms if s < 0]
    out = pos[0].copy() if pos else exp.Literal.number(0)
    for t in pos[1:]:
        out = exp.Add(this=out, expression=t.copy())
    for t in neg:
        out = exp.Sub(this=out, expression=exp.Paren(this=t.copy()))
    return out


def separate(left: exp.Expression, right: exp.Expression, owner) -> tuple[exp.Expression, exp.Expression] | None:
    """``left op right`` over two FROM entries as ``f(A) op g(B)`` (same ``op``), or None when it does not
    separate (a summand reads both entries, or more than two entries are read)."""
    lo, ro = owners(left, owner), owners(right, owner)
    if len(lo) == 1 and len(ro) == 1 and lo != ro:
        return left, right
    terms: list = []
    _terms(left, 1, terms)
    _terms(right, -1, terms)
    groups: dict[str, list] = {}
    consts: list = []
    for s, t in terms:
        o = owners(t, owner)
        if len(o) > 1:
            return None
        if o:
            groups.setdefault(o.pop(), []).append((s, t))
        else:
            consts.append((s, t))
    if len(groups) != 2:
        return None
    (_, a_terms), (_, b_terms) = groups.items()
    # Σa + Σb + Σc op 0  ⇔  Σa op −Σb − Σc
    return _sum(a_terms), _sum([(-s, t) for s, t in b_terms + consts])


def domain_of(node: exp.Expression) -> str | None:
    """``numeric``, ``string`` or ``boolean``: what a computed expression gives (None: a column's, whose type
    the caller knows)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, _PREDICATES):
        return "boolean"
    if isinstance(node, _STRING_FUNCS):
        return "string"
    if isinstance(node, exp.Case):  # IF: its first branch's
        return domain_of(node.args["ifs"][0].args["true"])
    if isinstance(node, exp.Coalesce):
        return domain_of(node.this)
    if isinstance(node, exp.Column):
        return None
    return "numeric"


def adjust(m, report):
    """A member's report under Rules 5–7: notes naming the computed conditions; ``unbounded`` → ``not_shown``."""
    from obda.analysis.criteria import NOT_SHOWN, UNBOUNDED

    if not (m.filters or m.derived or m.joined):
        return report
    notes = list(report.notes)
    if m.filters:
        notes.append("per-row filters (docs/analysis.md Rule 5: computed conditions over one FROM entry, run "
                     "before any synopsis, bound nothing): " + "; ".join(m.filters))
    if m.joined:
        notes.append("filters on the joined row (Rule 8: computed conditions of several FROM entries that do not "
                     "separate, tested on each answer; their columns are kept with it): " + "; ".join(m.joined))
    if m.derived:
        notes.append("derived attributes (Rule 6: computed sides of a comparison of two FROM entries; Rule 7: "
                     "bounded when the columns they read are): " + ", ".join(str(a) for a, _ in m.derived))
    if report.verdict != UNBOUNDED:
        return replace(report, notes=tuple(notes))
    why = ("the criteria's witness chooses values freely, which the computed conditions may not allow "
           f"({'; '.join(m.filters + m.joined + tuple(str(a) for a, _ in m.derived))}): unbounded is not shown; the "
           f"criteria without them say: {report.verdict} [{report.criterion}]")
    return replace(report, verdict=NOT_SHOWN, notes=tuple(notes) + (why,))
