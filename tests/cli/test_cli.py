"""The `obda` command line: each command, its output formats and its exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obda.cli import app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"
runner = CliRunner()

HOT = """PREFIX : <http://example.org/turbine#>
SELECT ?s ?v WHERE { GRAPH ?t { ?m :measuredBy ?s ; :hasValue ?v . } FILTER(?v > 90) }
"""


@pytest.fixture()
def query(tmp_path: Path) -> Path:
    p = tmp_path / "hot.rq"
    p.write_text(HOT)
    return p


def test_compile_json_has_sql_and_members_with_origin(query):
    r = runner.invoke(app, ["compile", str(query), "--project", str(DEMO), "--format", "json", "--dialect", "duckdb"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert "measurement" in doc["sql"].lower()
    assert doc["members"] and all("sql" in m and "origin" in m for m in doc["members"])
    assert doc["members"][0]["origin"]["mappings"][0]["file"].endswith("turbine.r2rml.ttl")


def test_compile_text_prints_sql(query):
    r = runner.invoke(app, ["compile", str(query), "--project", str(DEMO)])
    assert r.exit_code == 0, r.output
    assert "SELECT" in r.stdout and "member" in r.stdout


def test_compile_text_shows_the_first_removed_members_and_counts_the_rest(tmp_path):
    """A variable predicate removes one alternative per property no mapping answers: the text lists the first
    ones and counts the others; the JSON lists every one."""
    from obda.cli import REMOVED_SHOWN

    q = tmp_path / "any.rq"
    q.write_text("SELECT ?p ?o WHERE { <http://example.org/turbine/data/sensor/1> ?p ?o }\n")
    text = runner.invoke(app, ["compile", str(q), "--project", str(DEMO)])
    doc = json.loads(runner.invoke(app, ["compile", str(q), "--project", str(DEMO), "--format", "json"]).stdout)
    more = len(doc["removed"]) - REMOVED_SHOWN
    assert more > 0 and text.exit_code == 0
    assert text.stdout.count("-- removed:") == REMOVED_SHOWN
    assert f"-- … and {more} more removed (--format json lists every one)" in text.stdout


def test_compile_unsupported_construct_exit_2_with_position(tmp_path):
    q = tmp_path / "bad.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\nSELECT ?s WHERE {\n  ?s a :Sensor .\n  OPTIONAL { GRAPH ?t { ?m :measuredBy ?s } }\n}\n")
    r = runner.invoke(app, ["compile", str(q), "--project", str(DEMO), "--format", "json"])
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "unsupported_construct" and err["construct"] == "OPTIONAL"
    assert err["location"]["line"] == 4 and err["location"]["column"] == 3


def test_compile_unknown_term_is_located(tmp_path):
    q = tmp_path / "bad.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\nSELECT ?s WHERE {\n  ?s a :Sensr .\n}\n")
    r = runner.invoke(app, ["compile", str(q), "--project", str(DEMO), "--format", "json"])
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "unknown_term" and "Sensr" in err["message"]
    assert err["location"]["line"] == 3


def test_validate_demo_ok():
    r = runner.invoke(app, ["validate", "--project", str(DEMO)])
    assert r.exit_code == 0, r.output


def test_validate_reports_every_broken_mapping_with_line(tmp_path):
    proj = tmp_path / "p"
    shutil.copytree(DEMO, proj, ignore=shutil.ignore_patterns("data"))
    (proj / "ontologies").mkdir()
    shutil.copy(ROOT / "ontologies" / "turbine.ttl", proj / "ontologies" / "turbine.ttl")
    mdir = proj / "mappings"
    mdir.mkdir()
    text = (ROOT / "mappings" / "turbine.r2rml.ttl").read_text()
    text = text.replace('rr:column "kind"', 'rr:column "knd"', 1)
    (mdir / "turbine.r2rml.ttl").write_text(text)
    (proj / "project.yaml").write_text("name: broken\nontology: [ontologies/turbine.ttl]\nmappings: [mappings/turbine.r2rml.ttl]\nsources: sources.yaml\n")
    r = runner.invoke(app, ["validate", "--project", str(proj), "--format", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    bad = [p for p in doc["problems"] if p["severity"] == "error"]
    assert bad and bad[0]["location"]["line"] == text[: text.index('"knd"')].count("\n") + 1
    assert "knd" in bad[0]["message"]


def test_analyze_sql_json():
    r = runner.invoke(
        app,
        ["analyze", "--sql", "SELECT m.value FROM measurement AS m WHERE m.value > 90",
         "--sources", str(DEMO / "sources.yaml"), "--format", "json"],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "bounded"
    assert doc["members"][0]["projection"] == "bag"


def test_a_location_at_column_100_is_printed_as_digits():
    """rich replaced ``:100:`` by an emoji in error lines (``1💯 type error``); the consoles print no emoji."""
    sql = "SELECT m.sensor_id FROM measurement m WHERE m.value > 1 AND m.value > 2 AND m.value > 3 AND        m.ts > 'abc'"
    assert sql.index("m.ts > 'abc'") == 99
    r = runner.invoke(app, ["analyze", "--sql", sql, "--sources", str(DEMO / "sources.yaml")])
    assert r.exit_code == 2 and "error: 1:100: type error" in r.output, r.output


def test_run_output_that_is_a_folder_is_refused_before_running(tmp_path):
    """--output FOLDER printed the write error, then a traceback from the cleanup, exit 1."""
    r = runner.invoke(app, ["run", str(DEMO / "queries" / "hot_readings.rq"), "--project", str(DEMO), "--backend",
                            "local", "--until-exhausted", "--output", str(tmp_path)])
    assert r.exit_code == 2 and "is a folder" in r.output and "--output-dir" in r.output, r.output
    assert "Traceback" not in r.output


def test_an_ill_typed_literal_prints_no_traceback(tmp_path, caplog):
    """rdflib logged a Python traceback for "abc"^^xsd:decimal (a valid SPARQL term, an error where compared)."""
    import logging

    q = tmp_path / "q.rq"
    q.write_text('PREFIX : <http://example.org/turbine#>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n'
                 'SELECT ?s WHERE { ?s :hasCapacity "abc"^^xsd:decimal }\n')
    with caplog.at_level(logging.WARNING, logger="rdflib.term"):
        r = runner.invoke(app, ["analyze", str(q), "--project", str(DEMO)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert not [rec for rec in caplog.records if rec.name == "rdflib.term"], caplog.records


def test_analyze_says_when_the_executor_cannot_run_an_analysable_query():
    """The verdict is the theory's; a query the executor refuses was shown as plain BOUNDED (JSON said
    not_executable, the text did not)."""
    sql = ("SELECT m.sensor_id FROM measurement m, maintenance e WHERE m.ts = e.ts AND "
           "CONCAT(CAST(m.ts AS VARCHAR), e.kind) = 'x'")
    r = runner.invoke(app, ["analyze", "--sql", sql, "--sources", str(DEMO / "sources.yaml")])
    assert r.exit_code == 0 and "\nnot executable: " in r.stdout and "stream's timestamp" in r.stdout, r.output
    # a check inside OR: it stopped with "unknown table or alias 'a'" (the executor read the subquery's columns)
    sql = ("SELECT m.sensor_id FROM measurement m WHERE m.value > 90 OR (m.sensor_id, m.ts) IN "
           "(SELECT a.sensor_id, a.ts FROM alarm a)")
    r = runner.invoke(app, ["analyze", "--sql", sql, "--sources", str(DEMO / "sources.yaml")])
    assert r.exit_code == 0 and "not executable: 1:45: " in r.stdout and "UNION of two SELECTs" in r.stdout, r.output


def test_analyze_aggregate_sql(tmp_path):
    """An aggregate query gets Arasu §8.2's verdict, with the condition that decides it."""
    srcs = str(DEMO / "sources.yaml")
    r = runner.invoke(app, ["analyze", "--sql", "SELECT MEDIAN(m.value) FROM measurement AS m", "--sources", srcs,
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "unbounded" and doc["theorem"].endswith("8.5")
    assert [c["name"] for c in doc["conditions"] if not c["holds"]] == ["C2: holistic aggregate over a bounded attribute"]
    r = runner.invoke(app, ["analyze", "--sql", "SELECT m.sensor_id, COUNT(*) FROM measurement AS m "
                            "WHERE 0 < m.sensor_id AND m.sensor_id < 9 GROUP BY m.sensor_id", "--sources", srcs])
    assert r.exit_code == 0 and r.stdout.startswith("verdict: BOUNDED")
    r = runner.invoke(app, ["analyze", "--sql", "SELECT m.ts, COUNT(*) FROM measurement AS m GROUP BY m.ts",
                            "--sources", srcs])
    assert r.exit_code == 2 and "application time" in r.output


def test_analyze_query_text(query):
    r = runner.invoke(app, ["analyze", str(query), "--project", str(DEMO)])
    assert r.exit_code == 0, r.output
    assert "bounded" in r.stdout


def test_analyze_bad_sql_is_exit_2():
    r = runner.invoke(app, ["analyze", "--sql", "SELECT x FROM nowhere", "--sources", str(DEMO / "sources.yaml")])
    assert r.exit_code == 2


def test_catalog_check_formats(tmp_path):
    cat = tmp_path / "c.yaml"
    cat.write_text(
        "- name: hot\n  query: |\n" + "".join("    " + line + "\n" for line in HOT.splitlines())
        + "  expect: {verdict: bounded}\n"
        "- name: wrong\n  query: |\n" + "".join("    " + line + "\n" for line in HOT.splitlines())
        + "  expect: {verdict: unbounded}\n"
    )
    r = runner.invoke(app, ["catalog", "check", str(cat), "--project", str(DEMO), "--format", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert [x["ok"] for x in doc["results"]] == [True, False]
    out = tmp_path / "r.xml"
    r = runner.invoke(app, ["catalog", "check", str(cat), "--project", str(DEMO), "--format", "junit", "--output", str(out)])
    assert r.exit_code == 1
    xml = out.read_text()
    assert 'tests="2"' in xml and 'failures="1"' in xml and "expected verdict unbounded, got bounded" in xml


def test_demo_catalog_checks_clean():
    r = runner.invoke(app, ["catalog", "check", str(ROOT / "catalogs" / "demo.yaml"), "--project", str(DEMO), "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0, [x for x in doc["results"] if not x["ok"]]


def test_generate_writes_csv(tmp_path):
    r = runner.invoke(app, ["generate", "--project", str(DEMO), "--rows", "50", "--seed", "3", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert list((tmp_path / "measurement").glob("*.csv"))


@pytest.mark.parametrize("cmd", [["compile"], ["validate"], ["analyze"], ["generate"], ["run"], ["catalog", "check"]])
def test_help_shows_an_example(cmd):
    r = runner.invoke(app, cmd + ["--help"])
    assert r.exit_code == 0 and "Example" in r.stdout


def _catalog_query(name: str, tmp_path: Path) -> Path:
    import yaml

    entry = next(e for e in yaml.safe_load((ROOT / "catalogs" / "demo.yaml").read_text()) if e["name"] == name)
    p = tmp_path / f"{name}.rq"
    p.write_text(entry["query"])
    return p


@pytest.fixture()
def demo_copy(tmp_path: Path) -> Path:
    """The demo project with its own small generated data (the shipped demo folder stays untouched)."""
    proj = tmp_path / "demo"
    shutil.copytree(DEMO, proj, ignore=shutil.ignore_patterns("data"))
    for sub in ("ontologies", "mappings"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    r = runner.invoke(app, ["generate", "--project", str(proj), "--rows", "60", "--seed", "5"])
    assert r.exit_code == 0, r.output
    return proj


def test_run_until_exhausted_writes_json_lines(demo_copy, tmp_path):
    q = _catalog_query("hot_readings_after_maintenance", tmp_path)
    out = tmp_path / "answers.jsonl"
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(out), "--checkpoint", str(tmp_path / "ckpt")])
    assert r.exit_code == 0, r.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and set(lines[0]) == {"emitted_at", "binding"}
    assert set(lines[0]["binding"]) == {"turbine", "v"} and all(x["binding"]["v"] > 90 for x in lines)


def test_run_of_an_ask_writes_its_boolean_and_output_dash_is_the_console(demo_copy, tmp_path, monkeypatch):
    """``--output -`` is the console (no file named ``-``); an ASK over static data answers one line."""
    q = tmp_path / "ask.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\nASK { ?turbine :hasModel ?model }\n")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", "-"])
    assert r.exit_code == 0, r.output
    assert '{"emitted_at": null, "binding": {"boolean": true}}' in r.stdout.splitlines()
    assert not (tmp_path / "-").exists()


def test_run_refuses_unbounded_without_opt_in(demo_copy, tmp_path):
    q = _catalog_query("readings_and_alarms_any_time", tmp_path)
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local"])
    assert r.exit_code == 2 and "allow-unbounded" in r.output
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--allow-unbounded", "--output", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("k", ["P1D", "PT1M"])
def test_run_of_a_query_bounded_by_a_k_constraint_prints_its_watch(demo_copy, tmp_path, k):
    """The sources file's RI admits the query without --allow-unbounded; the summary has the constrained
    verdict and the watch; with a k the generated data breaks, the breaking rows are in the quarantine."""
    with open(demo_copy / "sources.yaml", "a") as f:
        f.write(f"constraints:\n  - name: alarm_near_reading\n"
                f"    referential: {{from: measurement, to: alarm, on: [sensor_id]}}\n    after: {k}\n    before: {k}\n")
    q = _catalog_query("readings_and_alarms_any_time", tmp_path)
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(tmp_path / "o.jsonl"), "--checkpoint", str(tmp_path / "ck")])
    assert r.exit_code == 0, r.output
    assert "verdict: unbounded (bounded under the k-constraints alarm_near_reading" in r.output
    metrics = json.loads(r.output.strip().splitlines()[-1])
    watch = metrics["constraints"]["alarm_near_reading"]
    assert watch["rows"] > 0 and watch["declared"] == {"after": k, "before": k}
    records = [json.loads(x) for x in (tmp_path / "ck" / "quarantine.jsonl").read_text().splitlines()] \
        if (tmp_path / "ck" / "quarantine.jsonl").exists() else []
    named = [x for x in records if x.get("constraint") == "alarm_near_reading"]
    assert metrics.get("constraint_violations", 0) == watch["violations"] == sum(x["rows"] for x in named)
    if k == "P1D":
        assert not named and watch["in_use"] and metrics["incomplete_since"] is None
    else:
        assert named and metrics["incomplete_since"] and watch["breaches"] > 0


def test_run_aggregate_writes_changelog_and_final_table(demo_copy, tmp_path):
    """An aggregate query: the changelog replayed gives the --final table, in ORDER BY order."""
    out, final = tmp_path / "changelog.jsonl", tmp_path / "answer.jsonl"
    q = demo_copy / "queries" / "readings_per_sensor.rq"
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(out), "--final", str(final)])
    assert r.exit_code == 0, r.output
    assert "verdict: bounded" in r.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and {x["op"] for x in lines} == {"upsert"}
    replayed = {x["binding"]["sensor"]: x["binding"] for x in lines}
    rows = [json.loads(line) for line in final.read_text().splitlines()]
    assert sorted(rows, key=lambda b: b["sensor"]) == sorted(replayed.values(), key=lambda b: b["sensor"])
    means = [b["mean"] for b in rows]
    assert means == sorted(means, reverse=True)  # ORDER BY DESC(?mean)


def test_run_optional_keeps_every_hot_reading_once_with_its_model(demo_copy, tmp_path):
    """The shipped OPTIONAL query (demo/queries/hot_readings_with_model.rq): every answer of hot_readings.rq,
    once, with the model of its sensor's turbine (the demo's turbines all have one)."""
    def run(name: str) -> list[dict]:
        out = tmp_path / f"{name}.jsonl"
        r = runner.invoke(app, ["run", str(demo_copy / "queries" / f"{name}.rq"), "--project", str(demo_copy),
                                "--until-exhausted", "--backend", "local", "--output", str(out)])
        assert r.exit_code == 0, r.output
        return [json.loads(line)["binding"] for line in out.read_text().splitlines()]

    hot, with_model = run("hot_readings"), run("hot_readings_with_model")
    assert hot and all(b["model"] for b in with_model)
    assert sorted((b["sensor"], b["v"]) for b in with_model) == sorted((b["sensor"], b["v"]) for b in hot)


PREFIX_TURBINE = "PREFIX : <http://example.org/turbine#>\n"


def test_run_optional_with_a_condition_on_the_reading(demo_copy, tmp_path):
    """A FILTER in OPTIONAL reading the reading's value is the left join's condition: every hot reading once, with
    its turbine's model where the value is above 95 and unbound elsewhere (catalogs/patterns.yaml,
    optional_model_of_very_hot_readings)."""
    query = tmp_path / "q.rq"
    query.write_text(PREFIX_TURBINE + "SELECT ?sensor ?v ?model WHERE { GRAPH ?t { ?m :measuredBy ?sensor ; "
                     ":hasValue ?v . } FILTER(?v > 90) OPTIONAL { ?sensor :isSensorOf ?turbine . ?turbine :hasModel "
                     "?model FILTER(?v > 95) } }\n")
    runs = {}
    for name, q in (("hot", demo_copy / "queries" / "hot_readings.rq"), ("cond", query)):
        out = tmp_path / f"{name}.jsonl"
        r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                                "--output", str(out)])
        assert r.exit_code == 0, r.output
        runs[name] = [json.loads(line)["binding"] for line in out.read_text().splitlines()]
    hot, cond = runs["hot"], runs["cond"]
    assert sorted((b["sensor"], b["v"]) for b in cond) == sorted((b["sensor"], b["v"]) for b in hot)
    assert any(b["v"] > 95 for b in cond) and any(b["v"] <= 95 for b in cond)
    assert all((b["model"] is not None) == (b["v"] > 95) for b in cond)


def test_run_optional_keeps_a_sensor_whose_turbine_is_unknown_unbound(demo_copy, tmp_path):
    """Every sensor is a sensor of some turbine (``Sensor ⊑ ∃isSensorOf``), but the OPTIONAL binds ``?turbine``
    to a named one: a sensor whose ``turbine_id`` is empty has none, so its readings come once, unbound there —
    the check's pattern keeps ``?turbine`` named, as the join branch does (docs/semantics.md)."""
    sensors = next((demo_copy / "data" / "sensor").glob("*.csv"))
    lines = sensors.read_text().splitlines()
    header = lines[0].split(",")
    first = lines[1].split(",")
    first[header.index("turbine_id")] = ""
    sensors.write_text("\n".join([lines[0], ",".join(first)] + lines[2:]) + "\n")
    blank = f"http://example.org/turbine/data/sensor/{first[header.index('id')]}"
    q = tmp_path / "q.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\nSELECT ?sensor ?v ?turbine WHERE { GRAPH ?t { ?m "
                 ":measuredBy ?sensor ; :hasValue ?v . } OPTIONAL { ?sensor :isSensorOf ?turbine } }\n")
    out = tmp_path / "a.jsonl"
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(out)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line)["binding"] for line in out.read_text().splitlines()]
    mine = [b for b in rows if b["sensor"] == blank]
    assert mine and all(b["turbine"] is None for b in mine)
    assert all(b["turbine"] for b in rows if b["sensor"] != blank)
    plain = tmp_path / "plain.rq"  # every reading once: the OPTIONAL neither drops nor repeats one
    plain.write_text("PREFIX : <http://example.org/turbine#>\nSELECT ?sensor ?v WHERE { GRAPH ?t { ?m "
                     ":measuredBy ?sensor ; :hasValue ?v . } }\n")
    r = runner.invoke(app, ["run", str(plain), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(tmp_path / "p.jsonl")])
    assert r.exit_code == 0, r.output
    readings = [json.loads(line)["binding"] for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert sorted((b["sensor"], b["v"]) for b in rows) == sorted((b["sensor"], b["v"]) for b in readings)


def test_run_final_needs_an_aggregate_and_until_exhausted(demo_copy, tmp_path):
    agg = demo_copy / "queries" / "readings_per_sensor.rq"
    r = runner.invoke(app, ["run", str(agg), "--project", str(demo_copy), "--final", str(tmp_path / "a.jsonl")])
    assert r.exit_code == 2 and "--until-exhausted" in r.output
    spj = demo_copy / "queries" / "hot_readings.rq"
    r = runner.invoke(app, ["run", str(spj), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--final", str(tmp_path / "a.jsonl")])
    assert r.exit_code == 2 and "aggregate" in r.output


def test_run_final_is_refused_for_groups_keyed_by_their_time_before_running(demo_copy, tmp_path):
    """GROUP BY ?t (Rule 9): each group is written when its timestamp closes and dropped, so there is no answer
    table to write at the end; --final is refused up front, naming the changelog, and nothing runs."""
    q = tmp_path / "per_time.rq"
    q.write_text("PREFIX : <http://example.org/turbine#>\nSELECT ?t (SUM(?out) AS ?total) WHERE { GRAPH ?t { ?p "
                 ":ofTurbine ?tu ; :hasOutput ?out } } GROUP BY ?t\n")
    out = tmp_path / "c.jsonl"
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(out), "--final", str(tmp_path / "a.jsonl")])
    assert r.exit_code == 2 and "GROUP BY ?t" in r.output and "changelog" in r.output, r.output
    assert not out.exists()
    r = runner.invoke(app, ["run", str(q), "--project", str(demo_copy), "--until-exhausted", "--backend", "local",
                            "--output", str(out)])
    assert r.exit_code == 0 and "verdict: bounded" in r.output, r.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    times = [x["binding"]["t"] for x in lines]
    assert lines and {x["op"] for x in lines} == {"upsert"} and len(times) == len(set(times))  # one final row each


def test_analyze_window_query_says_its_memory():
    r = runner.invoke(app, ["analyze", str(DEMO / "queries" / "mean_last_10_minutes.rq"), "--project", str(DEMO)])
    assert r.exit_code == 0, r.output
    assert "within the window" in r.stdout and "memory: window, per timestamp" in r.stdout


def test_catalog_check_fails_on_an_empty_catalog_and_on_an_entry_without_expect(tmp_path):
    """Nothing checked is not a pass: an empty catalog and an entry without ``expect.verdict`` fail (exit 1), each
    an error in the report; the other entries are still checked."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("queries: []\n")
    out = tmp_path / "empty.xml"
    r = runner.invoke(app, ["catalog", "check", str(empty), "--project", str(DEMO), "--format", "junit", "--output", str(out)])
    assert r.exit_code == 1 and 'errors="1"' in out.read_text() and "has no query" in out.read_text()
    cat = tmp_path / "c.yaml"
    body = "".join("    " + line + "\n" for line in HOT.splitlines())
    cat.write_text(f"- name: hot\n  query: |\n{body}  expect: {{verdict: bounded}}\n- name: unchecked\n  query: |\n{body}")
    r = runner.invoke(app, ["catalog", "check", str(cat), "--project", str(DEMO), "--format", "json"])
    assert r.exit_code == 1
    res = {x["name"]: x for x in json.loads(r.stdout)["results"]}
    assert res["hot"]["ok"] and not res["unchecked"]["ok"] and "no expect.verdict" in res["unchecked"]["error"]


def test_catalog_check_always_writes_its_junit_report(tmp_path):
    """A broken entry is an error of its own (the others are checked); an unreadable catalog is one error for the
    whole file (exit 2): the JUnit file is written either way."""
    body = "".join("    " + line + "\n" for line in HOT.splitlines())
    cat = tmp_path / "c.yaml"
    cat.write_text(f"- name: hot\n  query: |\n{body}  expect: {{verdict: bounded}}\n- name: broken\n  expect: {{verdict: bounded}}\n"
                   f"- name: hot\n  query: |\n{body}  expect: {{verdict: bounded}}\n")
    out = tmp_path / "r.xml"
    r = runner.invoke(app, ["catalog", "check", str(cat), "--project", str(DEMO), "--format", "junit", "--output", str(out)])
    assert r.exit_code == 1
    xml = out.read_text()
    assert 'tests="3"' in xml and 'errors="2"' in xml and "neither 'query' nor 'file'" in xml and "used twice" in xml
    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: [unclosed\n")
    out2 = tmp_path / "bad.xml"
    r = runner.invoke(app, ["catalog", "check", str(bad), "--project", str(DEMO), "--format", "junit", "--output", str(out2)])
    assert r.exit_code == 2 and 'errors="1"' in out2.read_text() and "not valid YAML" in out2.read_text()
