"""The synopsis forest, rule by rule (obda/analysis/forest): each rule is a pure function of a draft.

Each test builds a member from SQL, applies the rules *before* the one under
test, then the rule itself, and checks what that rule alone decided; the draft
it was given is left unchanged (the rules are pure).  The last tests check the
executor runs the analysis's forest and contains no SQL parsing or planning.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from obda.analysis import analyze
from obda.analysis.forest import RULES, build_forest, members_of
from obda.analysis.forest.cutoffs import finite_cutoffs
from obda.analysis.forest.draft import start
from obda.analysis.forest.edges import order_units
from obda.analysis.forest.expiry import interval_expiry
from obda.analysis.forest.extremes import compress_extremes
from obda.analysis.forest.keys import synopsis_keys
from obda.analysis.forest.model import FOREST
from obda.analysis.forest.order import order_expiry
from obda.analysis.forest.consumed import keyed_consumption
from obda.analysis.forest.pipelines import row_pipelines
from obda.analysis.forest.sites import place_conditions, place_statics
from obda.analysis.forest.units import merge_synchronous
from obda.model.sources_file import parse_sources

SOURCES_TEXT = """tables:
  s: {kind: stream, timestamp: ts, columns: {a: integer, b: integer, ts: timestamp}}
  t: {kind: stream, timestamp: ts, columns: {d: integer, ts: timestamp}}
  u: {kind: stream, timestamp: ts, columns: {f: integer, ts: timestamp}}
  r: {kind: static, columns: {id: integer, name: string}}
"""
SOURCES = parse_sources(SOURCES_TEXT)


def draft_before(rule, sql: str, index: int = 0):
    """The draft a rule receives: the member's start, after every rule before ``rule`` in RULES."""
    members, distinct, _ = members_of(sql, SOURCES)
    d = start(members[index], distinct)
    for r in RULES[: RULES.index(rule)]:
        d = r(d)
    return d


def apply(rule, sql: str, index: int = 0):
    d = draft_before(rule, sql, index)
    before = repr(d)
    out = rule(d)
    assert repr(d) == before, f"{rule.__name__} changed its input"
    return out


def units(d):
    return {n.id: n.aliases for n in d.nodes}


def test_order_expiry_drops_entries_below_the_parents_value_watermark():
    """OA(k) on t.d: an entry of a unit that waits for t rows (its parent, or another root) and keys on an
    attribute equated with t.d is dead below t's watermark; none without the equality, none for DISTINCT."""
    from dataclasses import replace

    from obda.model.sources_file import parse_constraints
    import yaml

    oa = parse_constraints(yaml.compose("- {name: t_in_order, ordered: {stream: t, column: d}, within: PT1M}"),
                           SOURCES, None)

    def rule(sql):
        members, distinct, _ = members_of(sql, SOURCES)
        d = replace(start(members[0], distinct), constraints=oa)
        for r in RULES[: RULES.index(order_expiry)]:
            d = r(d)
        before = repr(d)
        out = order_expiry(d)
        assert repr(d) == before
        return out

    child = rule("SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m1.a = m2.d AND m1.ts < m2.ts")
    s_node = next(n for n in child.nodes if n.aliases == ("m1",))
    t_node = next(n for n in child.nodes if n.aliases == ("m2",))
    assert s_node.value_expiry == (((s_node.key.index(("m1", "a")), "t_in_order"),),) and not t_node.value_expiry
    roots = rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d")
    assert [bool(n.value_expiry) for n in roots.nodes] == [n.aliases == ("m1",) for n in roots.nodes]
    assert not any(n.value_expiry for n in rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.b < m2.d").nodes)
    assert not any(n.value_expiry for n in rule("SELECT DISTINCT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d").nodes)


def test_keyed_consumption_drops_an_entry_once_its_one_keyed_row_came():
    """t keyed on d (no timestamp): an entry waiting for t rows with its d-equated attribute is consumed by
    the one t row; not when the key holds the timestamp, not without the equality, not for DISTINCT."""
    def rule(sql, key="[d]"):
        src = parse_sources(SOURCES_TEXT.replace("t: {kind: stream, timestamp: ts, columns: {d: integer, ts: timestamp}}",
                                                 f"t: {{kind: stream, timestamp: ts, columns: {{d: integer, ts: timestamp}}, key: {key}}}"))
        members, distinct, _ = members_of(sql, src)
        d = start(members[0], distinct)
        for r in RULES[: RULES.index(keyed_consumption)]:
            d = r(d)
        return keyed_consumption(d)

    out = rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d AND m1.ts < m2.ts")
    child = next(n for n in out.nodes if n.aliases == ("m1",))
    assert child.consumed == (("m2", (child.key.index(("m1", "a")),), "t:key"),) and ("m2", "d") in out.kept
    assert not next(n for n in out.nodes if n.aliases == ("m2",)).consumed
    two_roots = rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d")
    assert [bool(n.consumed) for n in two_roots.nodes] == [n.aliases == ("m1",) for n in two_roots.nodes]
    assert not any(n.consumed for n in rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d AND m1.ts < m2.ts",
                                             key="[d, ts]").nodes)
    assert not any(n.consumed for n in rule("SELECT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a < m2.d").nodes)
    assert not any(n.consumed for n in rule("SELECT DISTINCT m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a = m2.d").nodes)


def test_rules_are_in_pipeline_order():
    assert RULES == (merge_synchronous, order_units, place_statics, place_conditions, synopsis_keys,
                     interval_expiry, order_expiry, keyed_consumption, compress_extremes, finite_cutoffs,
                     row_pipelines)


def test_units_merge_streams_with_equal_timestamps():
    d = apply(merge_synchronous, "SELECT m1.a AS a FROM s AS m1, t AS m2, u AS m3 WHERE m1.ts = m2.ts AND m3.ts < m1.ts")
    assert sorted(units(d).values()) == [("m1", "m2"), ("m3",)]
    assert d.unit_of["m1"] == d.unit_of["m2"] != d.unit_of["m3"]


def test_edges_make_the_later_unit_the_parent_and_absorb_the_comparison():
    d = apply(order_units, "SELECT m1.a AS a FROM s AS m1, t AS m2, u AS m3 WHERE m3.ts < m2.ts AND m2.ts < m1.ts AND m3.ts < m1.ts")
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m3"].parent == by["m2"].id and by["m2"].parent == by["m1"].id and by["m1"].parent is None
    assert d.roots == (by["m1"].id,) and by["m3"].depth == 2
    # m3.ts < m1.ts is implied (transitively reduced): absorbed, not a value comparison
    assert len(d.absorbed) == 3 and not any(d.is_stream_ts(p.left) for p in d.value_preds)


def test_edges_detect_a_cycle_as_unsatisfiable():
    d = apply(order_units, "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m1.ts < m2.ts AND m2.ts < m1.ts")
    assert d.unsatisfiable


def test_edges_keep_the_first_parent_and_compare_the_other_on_timestamps():
    d = apply(order_units, "SELECT DISTINCT m1.b AS b FROM s AS m1, t AS m2, u AS m3 WHERE m3.ts < m1.ts AND m3.ts < m2.ts")
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m3"].parent is not None
    assert any(d.is_stream_ts(p.left) for p in d.value_preds)  # the other edge is a value comparison


def test_sites_join_a_static_relation_where_it_is_compared():
    d = apply(place_statics, "SELECT m1.a AS a FROM s AS m1, t AS m2, r AS m3 WHERE m2.ts < m1.ts AND m2.d = m3.id")
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m2"].statics == ("m3",) and d.site["m3"] == by["m2"].id and not d.forest_statics
    d = apply(place_statics, "SELECT m1.a AS a, m3.name AS n FROM s AS m1, r AS m3")
    assert d.forest_statics == ("m3",) and d.site["m3"] == FOREST


def test_conditions_are_evaluated_where_both_sides_are_available():
    d = apply(place_conditions, "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND m1.b = m2.d")
    by = {n.aliases[0]: n for n in d.nodes}
    assert [str(p) for p in by["m1"].preds] == ["m1.b = m2.d"] and not by["m2"].preds
    assert d.out_attrs == (("m1", "a"),)


def test_keys_keep_what_is_needed_above_the_subtree():
    d = apply(synopsis_keys, "SELECT m2.d AS d FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND m2.d > 0 AND m2.d < 5")
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m2"].key == (("m2", "d"),)  # projected above m2's subtree


def test_extremes_compress_a_one_directional_attribute_with_set_semantics_only():
    sql = "SELECT {} m1.b AS b FROM s AS m1, t AS m2 WHERE m1.a > m2.d AND m1.b > 0 AND m1.b < 5"
    d = apply(compress_extremes, sql.format("DISTINCT"))
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m2"].compress == (0, "min")  # later s tuples only ask "some d < a": the least d decides
    d = apply(compress_extremes, sql.format(""))
    assert all(n.compress is None for n in d.nodes)


def test_cutoffs_end_finite_units_and_push_down_to_children():
    d = apply(finite_cutoffs, "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m1.ts < CAST('2024-01-01 00:00:00' AS TIMESTAMP) "
                              "AND m2.ts < m1.ts")
    by = {n.aliases[0]: n for n in d.nodes}
    assert by["m1"].cutoff == 1704067200_000_000 - 1 and by["m2"].cutoff == by["m1"].cutoff - 1


def test_pipelines_filter_per_alias_and_keep_what_is_compared_or_projected():
    d = apply(row_pipelines, "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND m1.b = m2.d AND m2.d > 3")
    p1, p2 = d.pipelines["m1"], d.pipelines["m2"]
    assert p1.attrs == (("m1", "a"), ("m1", "b")) and p2.attrs == (("m2", "d"),)
    assert [f.sql() for f in p2.filters] == ['"d" > 3']
    assert [f.sql() for f in p1.filters] == ['"b" > 3']  # implied through m1.b = m2.d: dropped before counting


def test_the_executor_runs_the_forest_of_the_analysis():
    sql = "SELECT m1.a AS a FROM s AS m1, t AS m2 WHERE m2.ts < m1.ts AND m1.b = m2.d AND m2.d > 0 AND m2.d < 5"
    report = analyze(sql, SOURCES)
    assert report.forest is not None
    assert report.forest.describe() == build_forest(sql, SOURCES).describe()


EXECUTION = Path(__file__).resolve().parents[2] / "obda" / "execution"


@pytest.mark.parametrize("path", sorted(EXECUTION.glob("*.py")), ids=lambda p: p.name)
def test_the_executor_neither_parses_sql_nor_plans(path):
    """No sqlglot parsing (sqlglot is only the printer there) and no planning rule in obda/execution."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("parse_one", "parse", "transpile") and \
                isinstance(node.value, ast.Name) and node.value.id == "sqlglot":
            pytest.fail(f"{path.name}:{node.lineno}: sqlglot.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("obda.analysis.forest."):
            assert node.module == "obda.analysis.forest.model", f"{path.name}:{node.lineno}: imports {node.module}"
        if isinstance(node, ast.ImportFrom) and node.module == "sqlglot":
            assert {a.name for a in node.names} <= {"exp"}, f"{path.name}:{node.lineno}"
        if isinstance(node, ast.FunctionDef):
            assert node.name not in {r.__name__ for r in RULES}, f"{path.name}: defines a planning rule"
