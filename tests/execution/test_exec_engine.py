"""The synopsis engine's join: compiled join programs against a brute-force nested loop."""

import itertools
import operator

from hypothesis import given, settings
from hypothesis import strategies as st

from obda.execution import relations
from obda.execution.engine import binder
from obda.execution.relations import Rel, _compile, join_aggregate, merge_into
from obda.analysis.forest import CrossPred, OutItem

OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def brute_force(rels, preds, out, setsem):
    """Every combination of entries, SQL comparisons (NULL is never true), counts multiplied."""
    result = {}
    for combo in itertools.product(*(list(r.data.items()) for r in rels)):
        row = {}
        count = 1
        for r, (t, c) in zip(rels, combo):
            row.update(zip(r.schema, t))
            count *= c
        if all(row[p.left] is not None and row[p.right] is not None and OPS[p.op](row[p.left], row[p.right])
               for p in preds):
            k = tuple(row[a] for a in out)
            result[k] = result.get(k, 0) + count
    return {k: 1 for k in result} if setsem else result


values = st.one_of(st.none(), st.integers(0, 3))
SCHEMAS = [(("a", "x"), ("a", "y")), (("b", "x"), ("b", "z")), (("c", "y"),)]
ATTRS = [a for s in SCHEMAS for a in s]


@st.composite
def cases(draw):
    n = draw(st.integers(1, 3))
    schemas = SCHEMAS[:n]
    rels = []
    for schema in schemas:
        rows = draw(st.dictionaries(st.tuples(*[values] * len(schema)), st.integers(1, 3), max_size=5))
        rels.append(Rel(schema, rows))
    attrs = [a for s in schemas for a in s]
    preds = []
    for _ in range(draw(st.integers(0, 3))):
        left, right = draw(st.sampled_from(attrs)), draw(st.sampled_from(attrs))
        if left[0] != right[0]:
            preds.append(CrossPred(left, draw(st.sampled_from(sorted(OPS))), right))
        elif left != right:  # two attributes of one relation: a local check
            preds.append(CrossPred(left, draw(st.sampled_from(sorted(OPS))), right))
    out = tuple(draw(st.lists(st.sampled_from(attrs), max_size=3, unique=True)))
    return rels, preds, out, draw(st.booleans())


@settings(max_examples=400, deadline=None)
@given(cases())
def test_join_aggregate_equals_brute_force(case):
    rels, preds, out, setsem = case
    assert join_aggregate(rels, preds, out, setsem) == brute_force(rels, preds, out, setsem)


def test_compiled_program_is_reused_for_new_data():
    s, t = (("a", "x"),), (("b", "x"), ("b", "v"))
    preds = (CrossPred(("a", "x"), "=", ("b", "x")),)
    out = (("b", "v"),)
    first = join_aggregate([Rel(s, {(1,): 2}), Rel(t, {(1, "p"): 3, (2, "q"): 1})], preds, out, False)
    prog = _compile((s, t), preds, out)
    second = join_aggregate([Rel(s, {(2,): 1}), Rel(t, {(1, "p"): 3, (2, "q"): 5})], preds, out, False)
    assert first == {("p",): 6} and second == {("q",): 5}
    assert _compile((s, t), preds, out) is prog


def test_join_does_not_change_its_inputs():
    s = Rel((("a", "x"),), {(1,): 1, (2,): 1})
    before = dict(s.data)
    res = join_aggregate([s], [], (("a", "x"),), False)
    res[(1,)] = 99
    assert s.data == before


def _reference_merge(data, delta, setsem, compress):
    """merge_into's meaning, written plainly: counts add, sets keep existence, compression keeps
    per rest of key the extreme non-NULL value of the compressed position."""
    out = dict(data)
    if compress is None:
        for k, c in delta.items():
            out[k] = 1 if setsem else out.get(k, 0) + c
        return out
    pos, mode = compress
    for k in delta:
        rest = k[:pos] + k[pos + 1:]
        olds = [o for o in out if o[:pos] + o[pos + 1:] == rest]
        if not olds:
            out[k] = 1
        elif k[pos] is not None and (olds[0][pos] is None or (k[pos] < olds[0][pos] if mode == "min"
                                                              else k[pos] > olds[0][pos])):
            del out[olds[0]]
            out[k] = 1
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.dictionaries(st.tuples(values, values), st.integers(1, 3), max_size=4), min_size=1, max_size=6),
    st.sampled_from([(False, None), (True, None), (True, (1, "min")), (True, (1, "max")), (True, (0, "min"))]),
    st.lists(st.sampled_from([(0,), (1,), (0, 1), (1, 0)]), max_size=3),
)
def test_merges_keep_the_indexes_of_a_past_relation_current(deltas, mode, probes):
    """A past synopsis is probed at every closed timestamp and merged into after it: its indexes
    are updated with each merge (never rebuilt) and always equal an index built afresh."""
    setsem, compress = mode
    past, expected = Rel((("p", "x"), ("p", "y"))), {}
    for delta in deltas:
        for positions in probes:
            past.index(positions)  # built once, on first use, as a join would
        if compress is not None:
            delta = relations.compress_counted(delta, compress)
        merge_into(past, delta, setsem, compress)
        expected = _reference_merge(expected, delta, setsem, compress)
        assert past.data == expected
        for positions in probes:
            assert past.index(positions) == Rel(past.schema, dict(past.data)).index(positions)


def test_a_past_index_is_updated_not_rebuilt(monkeypatch):
    past = Rel((("p", "x"),), {(1,): 1})
    idx = past.index((0,))
    built = []
    monkeypatch.setattr(relations, "tuple_getter", lambda positions: built.append(positions))
    merge_into(past, {(2,): 1}, True, None)
    assert past.index((0,)) is idx and idx == {(1,): {(1,): 1}, (2,): {(2,): 1}} and not built


def test_binder_fills_constants_and_concats_with_null():
    items = (
        OutItem("t", "concat", parts=(("const", "http://x/"), ("attr", ("a", "id")))),
        OutItem("k", "const", value="fixed"),
        OutItem("v", "attr", attr=("a", "v")),
    )
    bind = binder(items, (("a", "id"), ("a", "v")))
    assert bind((7, 1.5)) == ("http://x/7", "fixed", 1.5)
    assert bind((None, 2)) == (None, "fixed", 2)
    assert binder((OutItem("v", "attr", attr=("a", "v")),), (("a", "id"), ("a", "v")))((7, 1.5)) == (1.5,)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-10**12, 10**15).map(lambda x: x - x % 1_000_000)),
            st.lists(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(),
                               st.decimals(allow_nan=False, allow_infinity=False, places=2),
                               st.decimals(allow_nan=False, allow_infinity=False)), min_size=2, max_size=2),
            st.integers(1, 3),
        ),
        max_size=5,
    )
)
def test_answer_lines_are_json_dumps_of_each_answer(rows):
    """The fast line formatter gives exactly the bytes of json.dumps (unicode, floats, NaN, NULLs)."""
    import json

    from obda.execution.query_engine import Answer
    from obda.execution.rows import micros_to_iso
    from obda.execution.sinks import json_value, answer_lines

    columns = ("x", "y\\u00e9")
    answers = [Answer(ts, tuple(values), count) for ts, values, count in rows]
    expected = []
    for a in answers:
        line = json.dumps({"emitted_at": micros_to_iso(a.emitted_at),
                           "binding": {c: json_value(v) for c, v in zip(columns, a.values)}})
        expected.extend([line] * a.count)
    assert answer_lines(answers, columns) == expected
