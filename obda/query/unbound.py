"""Expressions in a UNION branch that leaves some of their variables unbound (SPARQL 1.1 §17.2, §17.4).

A group ``{ ?x :age ?a } UNION { ?x :name ?n }`` has solutions without ``?a``.  A FILTER or a BIND of the
group is evaluated in every branch; in a branch where a variable is unbound:

* ``BOUND(?a)`` is false;
* ``COALESCE(…)`` skips ``?a`` (an error), and is the first of its other arguments;
* ``IF(c, x, y)`` whose condition became a constant is the branch it picks;
* every other use of ``?a`` is an error: a comparison reading it is an error (false in a FILTER, and its
  negation is an error too), a BIND reading it leaves its variable unbound.

:func:`fold` rewrites a value expression for the variables a branch leaves unbound; :func:`leaf` gives what
one comparison of a FILTER is there: a comparison, a constant (True / False) or :data:`ERROR`.
"""

from __future__ import annotations

from obda.model.query import XSD, Arithmetic, Call, Comparison, Literal, Shifted, Var, value_variables
from obda.query.expressions import FilterProblem, Hint

ERROR = "error"  # the value of an expression that is an error wherever it is evaluated
_TRUE = Literal("true", XSD + "boolean")
_FALSE = Literal("false", XSD + "boolean")


def reads(e, unbound: frozenset[Var]) -> bool:
    """Whether value expression ``e`` reads a variable of ``unbound``."""
    return any(v in unbound for v in value_variables(e))


def fold(e, unbound: frozenset[Var]):
    """``e`` where the variables ``unbound`` have no value: BOUND, COALESCE and IF resolved; :data:`ERROR`
    when ``e`` is then certainly an error.  What still reads an unbound variable is an error where evaluated."""
    if isinstance(e, Var):
        return ERROR if e in unbound else e
    if isinstance(e, Shifted):
        return ERROR if e.var in unbound else e
    if isinstance(e, Arithmetic):
        left, right = fold(e.left, unbound), fold(e.right, unbound)
        return ERROR if ERROR in (left, right) else Arithmetic(e.op, left, right)
    if not isinstance(e, Call):
        return e
    if e.name == "BOUND" and isinstance(e.args[0], Var) and e.args[0] in unbound:
        return _FALSE
    if e.name == "COALESCE":
        args = [a for a in (fold(x, unbound) for x in e.args) if a != ERROR and not reads(a, unbound)]
        if not args:
            return ERROR
        return args[0] if len(args) == 1 else Call("COALESCE", tuple(args))
    if e.name == "IF":
        cond = fold(e.args[0], unbound)
        if cond == ERROR:
            return ERROR
        if cond in (_TRUE, _FALSE):
            return fold(e.args[1] if cond == _TRUE else e.args[2], unbound)
        return Call("IF", (cond, fold(e.args[1], unbound), fold(e.args[2], unbound)))
    args = tuple(fold(a, unbound) for a in e.args)
    if e.name == "NOT" and args[0] in (_TRUE, _FALSE):
        return _FALSE if args[0] == _TRUE else _TRUE
    if e.name in ("AND", "OR"):
        return _connective(e.name, args)
    if ERROR in args:
        return ERROR
    if e.name in ("=", "!=") and all(a in (_TRUE, _FALSE) for a in args):
        return _TRUE if (args[0] == args[1]) == (e.name == "=") else _FALSE
    return Call(e.name, args)


def _connective(name: str, args: tuple):
    """``&&`` / ``||`` of folded parts (Kleene: false && error is false, true || error is true)."""
    absorbing, neutral = (_FALSE, _TRUE) if name == "AND" else (_TRUE, _FALSE)
    if absorbing in args:
        return absorbing
    rest = tuple(a for a in args if a != neutral)
    if not rest:
        return neutral
    if ERROR in rest:  # false && error is false, true && error an error: not a value obda can write
        raise FilterProblem("unbound variable", f"{'&&' if name == 'AND' else '||'} inside a function, over a "
                            "variable that a UNION branch leaves unbound, is not supported; test it with BOUND() "
                            "first", Hint("punct", "&&" if name == "AND" else "||"))
    return rest[0] if len(rest) == 1 else Call(name, rest)


def sometimes_unbound(binds) -> frozenset[Var]:
    """The variables of a branch's BINDs (``(variable, expression)`` in order) that some solutions may leave
    unbound although every variable they read is bound: an expression that is an error for some values — a
    division by what may be zero — or that reads such a variable where an error follows (COALESCE, IF and BOUND
    guard it)."""
    out: set[Var] = set()
    for v, e in binds:
        folded = fold(e, frozenset(out))
        if folded == ERROR or reads(folded, frozenset(out)) or _may_err(folded):
            out.add(v)
    return frozenset(out)


def _may_err(e) -> bool:
    if isinstance(e, Arithmetic):
        zero_free = e.op != "/" or (isinstance(e.right, Literal) and _nonzero(e.right))
        return not zero_free or _may_err(e.left) or _may_err(e.right)
    if isinstance(e, Call):
        if e.name == "COALESCE":  # an error only where every argument is
            return all(_may_err(a) for a in e.args)
        return any(_may_err(a) for a in e.args)
    return False


def _nonzero(lit: Literal) -> bool:
    try:
        return float(lit.lexical) != 0
    except ValueError:
        return False


def leaf(c: Comparison, bound: frozenset[Var] | None):
    """A FILTER comparison in a branch whose bound variables are ``bound`` (None: all of them): the comparison
    itself, True or False where it became a constant, or :data:`ERROR`."""
    if bound is None or c.variables <= bound:
        return c
    unbound = frozenset(c.variables - bound)
    left, right = fold(c.left, unbound), fold(c.right, unbound)
    if ERROR in (left, right) or reads(left, unbound) or reads(right, unbound):
        return ERROR
    if left in (_TRUE, _FALSE) and right in (_TRUE, _FALSE) and c.op in ("=", "!="):
        return (left == right) == (c.op == "=")
    return Comparison(c.op, left, right, c.not_true)
