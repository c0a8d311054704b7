"""The report: JSON shape, text, synopsis plans, provenance from a Compilation, domains, hints."""

from __future__ import annotations

import json

import sqlglot

from obda.analysis import analyze
from obda.model.compilation import AtomSource, Compilation, MemberOrigin, SqlMember
from obda.model.query import CQ, ClassAtom, PropertyAtom, Query, Var

EX = "http://example.org/"


def test_json_shape(sources):
    r = analyze("SELECT T.D FROM S, T WHERE T.t2 < S.t1 UNION ALL SELECT S.A FROM S, T WHERE T.t2 < S.t1", sources)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["verdict"] == "unbounded"
    m0, m1 = d["members"]
    for m in (m0, m1):
        assert {"sql", "projection", "verdict", "criterion", "violations", "streams", "plan", "origin"} <= set(m)
    assert m0["verdict"] == "unbounded" and m1["verdict"] == "bounded"
    v = m0["violations"][0]
    assert {"condition": "C3", "streams": ["T"], "attributes": ["T.D"]}.items() <= v.items()
    assert v["message"] and v["witness"] and v["hint"]
    assert m0["streams"]["T"] == {**m0["streams"]["T"], "kind": "infinite", "parent": "S", "depth": 1}
    assert m1["plan"]["S"]["strategy"] == "pass_through" and m1["plan"]["T"]["strategy"] == "counts"
    assert m1["plan"]["T"]["keeps"] == ["count"] and m1["plan"]["T"]["bound_value"] == 2


def test_overall_verdict_combination(sources):
    bounded = "SELECT T.D FROM S, T WHERE T.t2 < S.t1 AND T.D = 1"
    not_shown = "SELECT DISTINCT S.A FROM S, T WHERE T.t2 < S.t1"
    unbounded = "SELECT S.A FROM S, T"
    assert analyze(bounded, sources).verdict == "bounded"
    assert analyze(f"{bounded} UNION ALL {not_shown}", sources).verdict == "not_shown"
    assert analyze(f"{not_shown} UNION {unbounded}", sources).verdict == "unbounded"


def test_text_report(sources):
    text = analyze("SELECT T.D FROM S, T WHERE T.t2 < S.t1", sources).to_text()
    assert "verdict: UNBOUNDED" in text and "C3" in text and "witness:" in text and "hint:" in text
    text = analyze("SELECT T.D FROM S, T WHERE T.t2 < S.t1 AND T.D BETWEEN 1 AND 4", sources).to_text()
    assert "synopsis plan" in text and "≤ 8 entries" in text


def test_counts_plan_bound_numbers(sources):
    r = analyze("SELECT T.D, U.F FROM S, T, U WHERE T.t2 < S.t1 AND U.t3 < S.t1 AND T.D BETWEEN 1 AND 4 "
                "AND U.F > 0 AND U.F < 3 AND T.E = U.H", sources)
    # T.E = U.H is an equality join between siblings: it must be bounded (C4)
    assert r.verdict == "unbounded" and {v.condition for v in r.members[0].violations} == {"C4"}
    r = analyze("SELECT T.D, U.F FROM S, T, U WHERE T.t2 < S.t1 AND U.t3 < S.t1 AND T.D BETWEEN 1 AND 4 "
                "AND U.F > 0 AND U.F < 3 AND T.E = U.H AND U.H IN (7)", sources)
    m = r.members[0]
    assert m.verdict == "bounded"
    plan = m.plan
    assert plan["T"]["counts"] and plan["T"]["current_past_split"] and plan["T"]["depth"] == 1
    assert {k["attribute"]: k["size"] for k in plan["T"]["keys"]} == {"T.D": 4}
    assert plan["T"]["bound_value"] == 8 and plan["U"]["bound_value"] == 4
    assert m.parts[0].plan.total_value == 12


def test_existence_plan_and_output_cache(sources):
    r = analyze("SELECT DISTINCT S.A FROM S, T WHERE T.t2 < S.t1 AND S.A = 10 AND S.B < T.D AND S.B > 10 AND T.D > 10",
                sources)
    m = r.members[0]
    assert m.verdict == "bounded" and m.criterion == "theorem2"
    s = m.plan["S"]
    assert s["strategy"] == "existence" and s["first_timestamp"] and not s["counts"]
    assert s["extreme"]["keep"] == "min"
    assert m.parts[0].plan.output_cache
    assert any("remembers written outputs" in n for n in m.parts[0].plan.notes)


def test_static_relation_bounds_and_symbolic_plan(sources):
    r = analyze("SELECT T.D FROM S, T, R WHERE T.t2 < S.t1 AND T.D = R.x", sources)
    m = r.members[0]
    assert m.verdict == "bounded"
    assert m.plan["T"]["keys"][0]["expression"] == "|dom(R.x)|" and m.plan["T"]["bound_value"] is None
    assert "2 × |dom(R.x)|" in m.plan["T"]["bound"]
    assert m.plan["R"]["strategy"] == "store_all" and m.streams["R"]["kind"] == "static"


def test_static_timestamp_makes_stream_finite(sources):
    r = analyze("SELECT DISTINCT S.A FROM S, T, R WHERE S.t1 < R.since AND S.B = T.D AND S.A = R.x", sources)
    m = r.members[0]
    assert m.streams["S"]["kind"] == "finite" and m.verdict == "bounded"


def test_domains_strings_and_decimals(sources):
    # decimals between constants are not bounded (dense domain) …
    r = analyze("SELECT DISTINCT M.value FROM M WHERE M.value > 0 AND M.value < 5", sources)
    assert r.verdict == "unbounded"
    # … integers are
    assert analyze("SELECT DISTINCT M.sensor FROM M WHERE M.sensor > 0 AND M.sensor < 5", sources).verdict == "bounded"
    # strings only by equality with a constant or a static attribute
    assert analyze("SELECT DISTINCT M.label FROM M WHERE M.label > 'a' AND M.label < 'b'", sources).verdict == "unbounded"
    assert analyze("SELECT DISTINCT M.label FROM M WHERE M.label = 'hot'", sources).verdict == "bounded"
    assert analyze("SELECT DISTINCT M.label FROM M, R WHERE M.label = R.name", sources).verdict == "bounded"
    assert analyze("SELECT DISTINCT M.label FROM M WHERE M.label IN ('a', 'b')", sources).verdict == "bounded"
    # booleans have two values
    assert analyze("SELECT DISTINCT M.ok FROM M", sources).verdict == "bounded"


def test_hint_use_distinct_or_drop_it(sources):
    r = analyze("SELECT S.A FROM S, T WHERE S.A = 10 AND S.B < T.D AND S.B > 10 AND T.D > 10", sources)
    assert r.verdict == "unbounded"
    assert any("SELECT DISTINCT" in h for h in r.members[0].hints)
    r = analyze("SELECT DISTINCT S.A FROM S, T WHERE T.t2 < S.t1", sources)
    assert r.verdict == "not_shown"
    assert any("drop DISTINCT" in h for h in r.members[0].hints)
    assert any("sufficient condition" in n for n in r.members[0].notes)


def test_disequality_parts(sources):
    r = analyze("SELECT T.D FROM S, T WHERE T.t2 < S.t1 AND T.D <> 3 AND T.D BETWEEN 1 AND 5", sources)
    m = r.members[0]
    assert m.verdict == "bounded" and len(m.parts) == 2
    assert [p.choices for p in m.parts] == [("T.D < 3",), ("T.D > 3",)]
    assert set(m.plan) == {"part0:S", "part0:T", "part1:S", "part1:T"}


def test_timestamp_le_split(sources):
    r = analyze("SELECT S.A FROM S, T WHERE T.t2 <= S.t1 AND S.B = T.D AND T.D BETWEEN 1 AND 3", sources)
    m = r.members[0]
    assert [p.choices for p in m.parts] == [("T.t2 < S.t1",), ("T.t2 = S.t1",)]
    assert [p.criterion for p in m.parts] == ["theorem1", "single_stream"]
    assert m.verdict == "bounded"


def test_naive_checker_option(sources):
    sql = "SELECT DISTINCT S.A FROM S, T WHERE S.B < T.D AND S.C < T.E AND S.A = 10"
    assert analyze(sql, sources, checker="naive").verdict == analyze(sql, sources).verdict == "unbounded"
    assert analyze(sql, sources, checker="naive").members[0].checker == "naive"


# ---- a Compilation: provenance of streams and attributes -----------------------------------------


def _compilation(distinct: bool) -> Compilation:
    t, t2, x, y = Var("t"), Var("t2"), Var("x"), Var("y")
    a1 = PropertyAtom(EX + "hasValue", x, y, time=t)
    a2 = ClassAtom(EX + "Alarm", x, time=t2)
    cq = CQ((a1, a2))
    q = Query((y,), (cq,), distinct=distinct, text="SELECT ?y WHERE { GRAPH ?t { ?x :hasValue ?y } GRAPH ?t2 { ?x a :Alarm } }")
    sel = sqlglot.parse_one(
        "SELECT m1.B AS y FROM S AS m1, T AS m2 WHERE m1.A = m2.D AND m2.t2 < m1.t1"
        + (" AND m1.B BETWEEN 0 AND 9" if distinct else ""))
    if distinct:
        sel = sel.distinct()
    origin = MemberOrigin(
        branch=0, cq=cq,
        atom_sources=(AtomSource(a1, EX + "map/Values", "mappings/demo.ttl", 12, ("m1",)),
                      AtomSource(a2, EX + "map/Alarms", "mappings/demo.ttl", 30, ("m2",))),
        alias_tables=(("m1", "S"), ("m2", "T")),
    )
    return Compilation(q, (cq,), (SqlMember(sel, origin),), sel)


def test_compilation_provenance(sources):
    r = analyze(_compilation(distinct=False), sources)
    m = r.members[0]
    assert r.verdict == "unbounded" and m.criterion == "theorem1"
    v = next(v for v in m.violations if v.condition == "C4")
    assert v.attributes == ("m1.A", "m2.D")
    provs = {(p["stream"], p["triples_map"], p["line"]) for p in v.provenance}
    assert provs == {("m1", EX + "map/Values", 12), ("m2", EX + "map/Alarms", 30)}
    assert "Alarm" in " ".join(p["atom"] for p in v.provenance)
    assert m.origin["tables"] == {"m1": "S", "m2": "T"}
    assert "triples map" in r.to_text()


def test_compilation_distinct_not_shown(sources):
    r = analyze(_compilation(distinct=True), sources)
    m = r.members[0]
    assert m.projection == "set" and m.criterion == "theorem2"
    # m1.A = m2.D is an equality join on unbounded attributes: Theorem 2's C2 fails, which proves nothing
    assert r.verdict == m.verdict == "not_shown"
    assert [v.condition for v in m.violations] == ["C2"]


def test_empty_compilation(sources):
    q = Query((Var("x"),), (), text="SELECT ?x WHERE {}")
    sel = sqlglot.parse_one("SELECT CAST(NULL AS VARCHAR) AS x WHERE 1 = 0")
    c = Compilation(q, (), (), sel, removed=("branch 0: unsatisfiable",))
    r = analyze(c, sources)
    assert r.verdict == "bounded" and r.members == () and r.notes
