"""One aggregate's running value (:mod:`obda.execution.aggregate`): its initial accumulator, an update by a
value seen ``n`` times, the merge of a partial (Spark's per timestamp and group), and the value it gives — SQL's
or, for a SPARQL query, SPARQL 1.1 §18.5's — with the numeric arithmetic and comparisons of HAVING and of
expressions over aggregates (an error is None).

The holistic functions (:data:`HOLISTIC`: COUNT(DISTINCT), MEDIAN, GROUP_CONCAT, SUM / AVG DISTINCT) keep a count
per value; the others a few numbers.
"""

from __future__ import annotations

import operator
from decimal import Decimal
from functools import reduce

from obda.model.query import OPS, Aggregate, Literal


def initial(name: str):
    if name in HOLISTIC:
        return {}
    if name == "avg":
        return [0, 0]
    if name == "count":
        return 0
    return None


def update(name: str, acc, v, n: int):
    """The accumulator of one aggregate after ``n`` occurrences of value ``v``."""
    if name == "count":
        return acc + n if v is not None else acc
    if v is None:
        return acc
    if name == "sum":
        return v * n if acc is None else acc + v * n
    if name == "avg":
        acc[0] += v * n
        acc[1] += n
        return acc
    if name == "min":
        return v if acc is None or v < acc else acc
    if name == "max":
        return v if acc is None or v > acc else acc
    if name == "sample":  # some value of the group: the smallest, as SQL's MIN and every backend
        return v if acc is None or v < acc else acc
    acc[v] = acc.get(v, 0) + n  # count_distinct, median, group_concat: a count per value
    return acc


def value_of(call: Aggregate, acc, sparql: bool = False):
    """The value of aggregate ``call`` from its accumulator."""
    name = call.function
    if name == "avg":
        return _mean(acc[0], acc[1], sparql)
    if name == "sum" and acc is None and sparql:
        return 0  # SPARQL: SUM of the empty (global) group is 0
    if name == "count_distinct":
        return len(acc)
    if name in ("sum_distinct", "avg_distinct"):  # over the distinct values, in order (the same float sum always)
        if not acc:
            return 0 if sparql else None  # SPARQL: SUM and AVG of the empty (global) group are 0
        total = reduce(operator.add, sorted(acc))
        return total if name == "sum_distinct" else _mean(total, len(acc), sparql)
    if name == "median":
        if not acc:
            return None
        values = sorted(acc)
        total = sum(acc.values())
        lo, hi = _nth(values, acc, (total - 1) // 2), _nth(values, acc, total // 2)
        return (lo + hi) / 2
    if name.startswith("group_concat"):  # the strings in code-point order, as the SQL's ORDER BY (SPARQL: any order)
        once = name.endswith("_distinct")
        return call.separator.join(v for v in sorted(acc) for _ in range(1 if once else acc[v]))
    return acc


def _mean(total, n: int, sparql: bool):
    """AVG: ``total / n``; of integers or decimals in SPARQL an exact decimal; of no value 0 (SPARQL) or None."""
    if n == 0:
        return 0 if sparql else None  # SPARQL: AVG of the empty (global) group is 0
    if sparql and isinstance(total, (int, Decimal)):  # xsd:integer / xsd:decimal: an exact decimal
        return Decimal(total) / Decimal(n)
    return total / n


def reducer(name: str):
    """How one aggregate's accumulators in every pane of a group combine into the group's accumulator over
    the window: :func:`initial` folded with each pane's (sums, merged counts, the extreme), with Python's
    builtins — a group's row is computed at every timestamp that changes it."""
    if name == "count":
        return sum
    if name == "avg":
        def mean_parts(accs):
            total = n = 0
            for a in accs:
                total += a[0]
                n += a[1]
            return [total, n]
        return mean_parts
    if name in HOLISTIC:
        def counts(accs):
            out: dict = {}
            for a in accs:
                for v, n in a.items():
                    out[v] = out.get(v, 0) + n
            return out
        return counts
    if name == "sum":
        # folded from the first present value, as _combine does (sum() would start at 0: -0.0 became 0.0)
        return lambda accs: reduce(operator.add, present) if (present := [a for a in accs if a is not None]) else None
    pick = max if name == "max" else min  # min, sample: the smallest; the first of equal values, as update keeps

    def extreme(accs):
        present = [a for a in accs if a is not None]
        return pick(present) if present else None
    return extreme


def _nth(values: list, counts: dict, k: int):
    for v in values:
        k -= counts[v]
        if k < 0:
            return v
    raise IndexError(k)


def merge(name: str, acc, p):
    """The accumulator of one aggregate after merging a partial of the same function (see ``partial_frames``)."""
    if name == "count":
        return acc + p
    if name == "avg":
        if p[1]:
            acc[0] += p[0]
            acc[1] += p[1]
        return acc
    if p is None:
        return acc
    if name == "sum":
        return p if acc is None else acc + p
    return update(name, acc, p, 1)  # min, max, sample


HOLISTIC = ("count_distinct", "median", "group_concat", "group_concat_distinct", "sum_distinct", "avg_distinct")


def number_of(lit: Literal):
    """A numeric constant of a SPARQL expression as a Python number of its XSD type."""
    local = lit.datatype.rsplit("#", 1)[-1]
    if local in ("double", "float"):
        return float(lit.lexical)
    if local == "decimal":
        return Decimal(lit.lexical)
    return int(lit.lexical)


def arith(op: str, x, y):
    """SPARQL numeric arithmetic (XPath op:numeric-*): an error (unbound, division by zero) is None."""
    if x is None or y is None or isinstance(x, (str, bool)) or isinstance(y, (str, bool)):
        return None
    if isinstance(x, float) or isinstance(y, float):
        x, y = float(x), float(y)
    elif isinstance(x, Decimal) or isinstance(y, Decimal) or op == "/":
        x, y = Decimal(x), Decimal(y)  # integer / integer is a decimal
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        return None
    return x / y


def compare(op: str, x, y):
    if x is None or y is None:
        return None
    try:
        return OPS[op](x, y)
    except TypeError:  # incomparable values: a SPARQL type error
        return None
