"""The ``obda`` command line: a thin shell over the Python API.

Exit codes: 0 success; 1 the check failed (validation problems, catalog
mismatches); 2 bad input (syntax error, unsupported construct, unreadable
file) — the message names the file, line and column.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from obda.errors import ObdaError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="obda: ask ontology questions over streams; learn whether they run in bounded memory.",
)
catalog_app = typer.Typer(no_args_is_help=True, help="Batch-check a catalog of named queries.")
app.add_typer(catalog_app, name="catalog")
users_app = typer.Typer(no_args_is_help=True, help="Users of the HTTP service (obda serve --users-file): roles and tokens.")
app.add_typer(users_app, name="users")

# soft_wrap: long lines are not broken (a redirected `obda compile > q.sql` stays valid SQL, `file:line:col:`
# messages stay on one line)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


class Dialect(str, Enum):
    spark = "spark"
    duckdb = "duckdb"
    postgres = "postgres"
    sqlite = "sqlite"


class Format(str, Enum):
    text = "text"
    json = "json"


class OutputFormat(str, Enum):
    json = "json"
    parquet = "parquet"


class CatalogFormat(str, Enum):
    table = "table"
    json = "json"
    junit = "junit"


FORGET_AFTER_OPTION = typer.Option(
    None, "--forget-after", min=0, envvar="OBDA_FORGET_AFTER",
    help="seconds: a read file that a retention job removed, whose timestamps are closed, is dropped from the "
         "checkpoint once read this long ago (default 3600)")
MAX_MEMBERS_OPTION = typer.Option(
    None, "--max-members", min=1, help="the unfolding's budget: at most this many SQL members (default 5000)")


def _fail(e: ObdaError, as_json: bool = False) -> None:
    from obda.errors import BudgetError

    if isinstance(e, BudgetError) and e.budget == "members":  # the CLI's user can raise that one
        e = BudgetError(e.message + "; or raise the budget with --max-members N", e.location, e.budget)
    if as_json:
        print(json.dumps({"error": e.to_dict()}, indent=2))
    else:
        err.print(f"[bold red]error[/]: {escape(str(e))}", markup=True, highlight=False)
        for p in getattr(e, "problems", ())[1:]:
            err.print(f"  {escape(str(p))}", highlight=False)
    raise typer.Exit(2)


def _problem_line(p) -> str:
    """One problem as an obda message, ``file:line:column: warning: [code] message`` (no markup)."""
    return str(p) if str(p.location) else f"{p.severity}: [{p.code}] {p.message}"


@contextmanager
def _no_profile_warnings():
    """Silence the ontology loader's Python ``ProfileWarning`` (lenient profile): the CLI prints the
    project's findings itself, once each, as obda messages (see :func:`_print_ontology_warnings`)."""
    from obda.ontology.loader import ProfileWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfileWarning)
        yield


def _print_ontology_warnings(proj) -> None:
    for p in proj.warnings:
        if p.code == "owl2ql_profile":
            err.print(_problem_line(p), markup=False, highlight=False)


def _load_project(project: Path):
    from obda.project import Project

    with _no_profile_warnings():
        proj = Project.load(project)
    _print_ontology_warnings(proj)
    return proj


@app.command()
def compile(
    query: Path = typer.Argument(..., help="SPARQL query file (.rq)", exists=True, dir_okay=False),
    project: Path = typer.Option(..., "--project", "-p", help="project folder (project.yaml, ontology, mappings, sources)"),
    dialect: Dialect = typer.Option(Dialect.spark, help="SQL dialect to print"),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json"),
    max_members: Optional[int] = MAX_MEMBERS_OPTION,
) -> None:
    """Rewrite a SPARQL query with the ontology and unfold it into SQL.

    Example: obda compile demo/queries/hot_readings.rq --project demo --dialect duckdb --format json
    """
    try:
        comp = _load_project(project).compile_file(query, max_members)
        # the SQL first: a dialect that cannot spell a construct is an error before anything is printed
        text = (json.dumps(comp.to_dict(dialect.value), indent=2, default=str) if format is Format.json
                else comp.to_sql(dialect.value, pretty=True))
    except ObdaError as e:
        _fail(e, format is Format.json)
    if format is Format.json:
        print(text)
        return
    out.print(f"[bold]-- {len(comp.members)} SPJ member(s), {'set (DISTINCT)' if comp.distinct else 'bag'} semantics[/]")
    for i, m in enumerate(comp.members):
        o = m.origin
        out.print(f"[dim]-- member {i + 1}: branch {o.branch}: {o.cq}[/]", highlight=False)
        for s in o.atom_sources:
            out.print(f"[dim]--   {s.describe()}[/]", highlight=False)
    for r in comp.removed[:REMOVED_SHOWN]:
        out.print(f"[dim]-- removed: {r}[/]", highlight=False)
    if len(comp.removed) > REMOVED_SHOWN:  # a variable predicate removes one alternative per unmapped property
        out.print(f"[dim]-- … and {len(comp.removed) - REMOVED_SHOWN} more removed (--format json lists every "
                  "one)[/]", highlight=False)
    print(text)


REMOVED_SHOWN = 12  # why members were removed, printed by `obda compile` (the JSON output has them all)


@app.command()
def validate(
    project: Path = typer.Option(..., "--project", "-p", help="project folder"),
    format: Format = typer.Option(Format.text, "--format", "-f"),
) -> None:
    """Check the ontology (OWL 2 QL), the sources file and the R2RML mappings.

    Every problem is reported with file and line; exit code 1 if there is an error, 2 if the project
    folder does not exist (bad input).

    Example: obda validate --project demo
    """
    from obda.project import ProjectError, validate_project

    if not project.is_dir():
        _fail(ProjectError(f"project folder '{project}' does not exist or is not a folder"), format is Format.json)
    with _no_profile_warnings():  # the findings are among the problems printed below
        problems = validate_project(project)
    errors = [p for p in problems if p.severity == "error"]
    if format is Format.json:
        print(json.dumps({"ok": not errors, "problems": [p.to_dict() for p in problems]}, indent=2))
    else:
        for p in problems:
            err.print(_problem_line(p), markup=False, highlight=False)
        if errors:
            err.print(f"[bold red]{len(errors)} error(s)[/]")
        else:
            out.print(f"[green]ok[/]: project {project} is valid ({len(problems)} warning(s))")
    if errors:
        raise typer.Exit(1)


@app.command()
def analyze(
    query: Optional[Path] = typer.Argument(None, help="SPARQL query file (with --project)"),
    project: Optional[Path] = typer.Option(None, "--project", "-p", help="project folder"),
    sql: Optional[str] = typer.Option(None, "--sql", help="analyse this SQL directly (with --sources)"),
    sources: Optional[Path] = typer.Option(None, "--sources", help="sources file for --sql"),
    format: Format = typer.Option(Format.text, "--format", "-f"),
    max_members: Optional[int] = MAX_MEMBERS_OPTION,
) -> None:
    """Decide whether a query can run forever in bounded memory, and explain why.

    Examples:
      obda analyze demo/queries/hot_readings.rq --project demo
      obda analyze --sql "SELECT m.sensor_id FROM measurement m, maintenance e WHERE e.ts < m.ts" --sources demo/sources.yaml --format json
      obda analyze --sql "SELECT m.sensor_id, MAX(m.value) FROM measurement m WHERE 0 < m.sensor_id AND m.sensor_id < 50 GROUP BY m.sensor_id" --sources demo/sources.yaml
      obda analyze --sql "SELECT m.value FROM maintenance e, measurement m WHERE e.ts < m.ts AND m.ts <= e.ts + INTERVAL '5' MINUTE" --sources demo/sources.yaml
    """
    from obda.analysis import analyze_query
    from obda.model.sources import load_sources

    try:  # an aggregate query gets the report of Arasu §8.2 (obda.analysis.aggregates)
        if sql is not None:
            if sources is None:
                raise typer.BadParameter("--sql needs --sources FILE.yaml")
            report = analyze_query(sql, load_sources(sources))
        else:
            if query is None or project is None:
                raise typer.BadParameter("give QUERY.rq with --project DIR, or --sql with --sources")
            proj = _load_project(project)
            report = analyze_query(proj.compile_file(query, max_members), proj.sources)
    except ObdaError as e:
        _fail(e, format is Format.json)
    if format is Format.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.to_text())


@app.command()
def generate(
    project: Path = typer.Option(..., "--project", "-p", help="project folder"),
    rows: int = typer.Option(1000, help="approximate number of stream rows per stream"),
    seed: int = typer.Option(0, help="random seed (same seed, same data)"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="output folder (default: the project's data folder)"),
) -> None:
    """Write deterministic demo data (CSV) for the project's tables.

    Example: obda generate --project demo --rows 5000 --seed 7
    """
    from obda.datagen import main_generate

    try:
        result = main_generate(project, rows=rows, seed=seed, out_dir=out_dir)
    except ObdaError as e:
        _fail(e)
    out.print(result if isinstance(result, str) else f"[green]ok[/]: {result}")


def _byte_size(text: str) -> int:
    """``256M``, ``1G``, ``64k`` or a plain number of bytes (a clear error otherwise)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in "KMG" else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a size (e.g. 256M, 1G, 500000)", param_hint="--max-bytes-per-batch")
    if value < 1:
        raise typer.BadParameter("must be at least 1 byte", param_hint="--max-bytes-per-batch")
    return int(value * units[unit])


def _shed_option(max_lag: str | None, policy: str):
    """``--shed-max-lag`` / ``--shed-policy`` as a shedding setting (None: nothing is ever dropped)."""
    if max_lag is None:
        return None
    from obda.execution.shedding import Shed

    try:
        return Shed.parse({"max_lag": max_lag, "policy": policy})
    except ObdaError as e:
        raise typer.BadParameter(e.message, param_hint="--shed-max-lag / --shed-policy")


#: what a failed run with --checkpoint can do (obda.execution.checkpoint.is_state_fault: not for a failure of the
#: checkpoint itself)
_RESUME_HINT = ("; once the cause is fixed, run the same command again (same --checkpoint): it resumes from "
                "the last committed micro-batch, every answer once")


@app.command()
def run(
    query: Path = typer.Argument(..., help="SPARQL query file (.rq)", exists=True, dir_okay=False),
    project: Path = typer.Option(..., "--project", "-p", help="project folder"),
    until_exhausted: bool = typer.Option(False, "--until-exhausted", help="process the current files to the end, close the last timestamp, exit"),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="JSON-lines file for the answers (default or -: console; written afresh unless "
                                     "--checkpoint continues a run), or a Kafka topic: "
                                     "kafka://host:port/topic (records keyed <query file name>:<line number>)"),
    output_dir: Optional[Path] = typer.Option(
        None, "--output-dir", file_okay=False,
        help="folder for the answers instead: part files published by an atomic commit log "
             "(data/, _commits/; exactly once with --checkpoint)"),
    output_format: Optional[OutputFormat] = typer.Option(
        None, "--format", "-f", help="part files of --output-dir: json (JSON lines, default) or parquet"),
    max_files_per_batch: Optional[int] = typer.Option(
        None, "--max-files-per-batch", min=1, help="at most this many new files per stream in one micro-batch"),
    max_bytes_per_batch: Optional[str] = typer.Option(
        None, "--max-bytes-per-batch",
        help="at most this many bytes of new files in one micro-batch, e.g. 256M (default), 1G, 500000 "
             "(at least one file per stream): a backlog is processed in bounded steps"),
    master: Optional[str] = typer.Option(None, "--master", envvar="OBDA_SPARK_MASTER", help="Spark master URL (default local[*])"),
    conf: Optional[List[str]] = typer.Option(
        None, "--conf", help="a Spark setting key=value, e.g. --conf spark.driver.memory=2g (repeatable; "
                             "$SPARK_CONF_DIR/spark-defaults.conf is read too, --conf wins)"),
    allow_unbounded: bool = typer.Option(False, "--allow-unbounded", help="also run members not shown bounded (state grows; reported)"),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="checkpoint folder: a restarted run continues exactly once"),
    idle_timeout: Optional[float] = typer.Option(None, "--idle-timeout", help="seconds without rows after which a stream stops holding back the marker"),
    backend: str = typer.Option("spark", help="spark, or local (pipelines in Python: small inputs, no JVM)"),
    max_members: Optional[int] = MAX_MEMBERS_OPTION,
    wait_for_data: bool = typer.Option(False, "--wait-for-data", help="a stream location that does not exist yet is a warning (its files are read once it exists), not an error"),
    final: Optional[Path] = typer.Option(
        None, "--final", dir_okay=False,
        help="aggregate queries, with --until-exhausted: also write the final answer table here (one JSON object "
             "per row, in ORDER BY order)"),
    shed_max_lag: Optional[str] = typer.Option(
        None, "--shed-max-lag", help="opt-in load shedding: input files that waited longer than this (PT5M, or "
                                     "seconds) are dropped unread, every dropped row counted in the quarantine and "
                                     "the metrics (shed, incomplete_since); without it nothing is dropped"),
    shed_policy: str = typer.Option("drop_oldest", "--shed-policy", help="with --shed-max-lag: drop_oldest"),
    forget_after: Optional[float] = FORGET_AFTER_OPTION,
) -> None:
    """Run a query continuously over the project's streams, in application-time order.

    Each answer is one JSON line {"emitted_at": ..., "binding": {...}}; late and
    invalid rows go to <checkpoint>/quarantine.jsonl with a reason. A query
    that is not shown bounded needs --allow-unbounded.

    With --output-dir DIR the answers go to part files: DIR/data/batch-<n>-part-<i>.json (or
    .parquet), published per micro-batch by DIR/_commits/<n>.json once the checkpoint covers
    them; read only the files a commit file lists.

    An aggregate query (GROUP BY, COUNT, SUM, AVG, MIN, MAX, SAMPLE) writes a changelog instead:
    {"emitted_at": ..., "op": "upsert" | "delete", "binding": {...}} per group whose row changed
    at a closed timestamp; --final FILE also writes the answer table at the end of the input.

    Examples:
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output-dir answers --format parquet --checkpoint ckpt
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output-dir answers --max-bytes-per-batch 64M
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl --conf spark.driver.memory=2g
      obda run demo/queries/readings_per_sensor.rq --project demo --until-exhausted --output changelog.jsonl --final answer.jsonl
      obda run demo/queries/hot_readings.rq --project demo --until-exhausted --output answers.jsonl --checkpoint ckpt --shed-max-lag PT5M
    """
    from obda.analysis import analyze_query, plan_execution
    from obda.errors import ExecutionError, failure_text
    from obda.execution import ConsoleSink, ContinuousQuery, DirectorySink, JsonLinesSink
    from obda.execution.checkpoint import is_state_fault
    from obda.execution.spark_io import parse_conf

    if output is not None and output_dir is not None:
        raise typer.BadParameter("give either --output FILE or --output-dir DIR, not both", param_hint="--output-dir")
    if output_format is not None and output_dir is None:
        raise typer.BadParameter("--format chooses the part files of --output-dir; give --output-dir DIR too",
                                 param_hint="--format")
    if final is not None and not until_exhausted:
        raise typer.BadParameter("--final writes the answer table at the end of the input; give --until-exhausted too",
                                 param_hint="--final")
    try:
        proj = _load_project(project)
        comp = proj.compile_file(query, max_members)
        if final is not None and comp.aggregation is None:
            raise typer.BadParameter(f"{query}: --final writes the answer table of an aggregate query; the answers "
                                     "of this query are the output itself", param_hint="--final")
        report = analyze_query(comp, proj.sources)
        if output_dir is not None:
            sink = DirectorySink(output_dir, (output_format or OutputFormat.json).value)
        else:
            from obda.execution.kafka_sink import KafkaSink, is_kafka_url

            if output is not None and is_kafka_url(output):  # at least once, keyed: README "The Kafka sink"
                sink = KafkaSink(str(output), query.stem, checkpoint / "kafka-sink" if checkpoint else None)
            else:
                sink = JsonLinesSink(output) if output and str(output) != "-" else ConsoleSink()  # -: the console
        cq = ContinuousQuery(
            plan_execution(comp, proj.sources, report), base_dir=proj.directory, sink=sink, checkpoint_dir=checkpoint,
            allow_unbounded=allow_unbounded, idle_timeout=idle_timeout, master=master, backend=backend,
            spark_conf=parse_conf(conf), max_files_per_batch=max_files_per_batch,
            shed=_shed_option(shed_max_lag, shed_policy), forget_after=forget_after,
            **({"max_bytes_per_batch": _byte_size(max_bytes_per_batch)} if max_bytes_per_batch else {}),
        )
        from obda.model.sources import missing_locations_error, missing_stream_locations

        missing = missing_stream_locations(cq.plan.stream_tables(), proj.directory)
        if missing:
            e = missing_locations_error(missing, "create it, fix 'location' in the sources file, or pass "
                                                 "--wait-for-data to wait for it")
            if not wait_for_data:
                cq.close()
                raise e
            err.print(f"[yellow]warning[/]: {e.location}: {e.message.split('; ')[0]}; waiting for it (--wait-for-data)",
                      highlight=False)
        cq.open()  # static tables, checkpoint: refused here, before the verdict line
    except ObdaError as e:
        _fail(e)
    under = getattr(report, "constrained_verdict", report.verdict)
    used = ", ".join(getattr(report, "constraints_used", ()))
    err.print(f"verdict: {report.verdict}" + (f" ({under} under the k-constraints {used}: watched, violations "
                                               "quarantined)" if under != report.verdict and used else "")
              + f"; running {query.name} ({'until exhausted' if until_exhausted else 'Ctrl-C stops'})")
    try:
        if until_exhausted:
            metrics = cq.run_until_exhausted()
            if final is not None:
                from obda.execution.sinks import row_lines

                final.write_text("".join(line + "\n" for line in row_lines(cq.answer(), cq.columns)), encoding="utf-8")
        else:
            import time as _time

            cq.start()
            try:
                while cq.running:
                    _time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            cq.stop()
            if cq.error:
                raise cq.error
            metrics = cq.metrics
    except ObdaError as e:
        if checkpoint is not None and type(e) is ExecutionError and not is_state_fault(e) and "resume" not in e.message:
            e = ExecutionError(e.message + _RESUME_HINT, e.location)
        _fail(e)
    except Exception as e:  # noqa: BLE001 - a disk, a folder, a bug: typed, with what to do, never a traceback
        _fail(ExecutionError(f"the query failed: {failure_text(e)}; nothing of the micro-batch it was in was "
                             "committed" + (_RESUME_HINT if checkpoint is not None else
                                            "; a new run starts from the first file again (with --checkpoint it "
                                            "would resume from the last committed micro-batch)")))
    finally:
        close = getattr(cq, "close", None)
        if close:
            close()
    err.print(json.dumps(metrics.to_dict(), default=str), highlight=False)


@catalog_app.command("check")
def catalog_check(
    catalog: Path = typer.Argument(..., help="catalog YAML: a list of {name, query | file, expect: {verdict}}", exists=True),
    project: Path = typer.Option(..., "--project", "-p", help="project folder"),
    format: CatalogFormat = typer.Option(CatalogFormat.table, "--format", "-f"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report here instead of stdout"),
) -> None:
    """Compile and analyse every query of a catalog; compare each verdict with `expect.verdict`.

    Exit code 1 if any query fails to compile, gets a different verdict, or has no `expect.verdict`, or if
    the catalog has no query; 2 if the catalog or the project cannot be read.  A JUnit report is always
    written (a broken entry is an error of its own; an unreadable catalog one error for the whole file).

    Example: obda catalog check catalogs/demo.yaml --project demo --format junit --output report.xml
    """
    from rich.progress import Progress

    from obda.catalog import CatalogResult, check_catalog, load_catalog, render_junit

    try:
        proj = _load_project(project)
        entries = load_catalog(catalog)
    except ObdaError as e:
        if format is CatalogFormat.junit:  # CI reads the report: the failure is in it too
            text = render_junit([CatalogResult(str(catalog), None, None, None, 0.0, str(e), e.code)], name=str(catalog))
            if output:
                Path(output).write_text(text, encoding="utf-8")
            else:
                print(text)
        _fail(e, format is CatalogFormat.json)
    results = [] if entries else [CatalogResult(str(catalog), None, None, None, 0.0,
                                                "the catalog has no query: nothing was checked", "catalog_error")]
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("checking", total=len(entries))
        for res in check_catalog(proj, entries):
            results.append(res)
            progress.advance(task)
    failed = [r for r in results if not r.ok]
    if format is CatalogFormat.json:
        text = json.dumps({"ok": not failed, "results": [r.to_dict() for r in results]}, indent=2)
    elif format is CatalogFormat.junit:
        text = render_junit(results, name=str(catalog))
    else:
        table = RichTable(title=f"{catalog}: {len(results) - len(failed)}/{len(results)} as expected")
        for col in ("query", "expected", "verdict", "members", "result"):
            table.add_column(col)
        for r in results:
            table.add_row(
                r.name,
                (r.expected or "-") + (f" / k: {r.expected_constrained}" if r.expected_constrained else ""),
                (r.verdict or "-") + (f" / k: {r.constrained}" if r.constrained and r.constrained != r.verdict
                                      or r.expected_constrained else ""),
                str(r.members) if r.members is not None else "-",
                "[green]ok[/]" if r.ok else f"[red]{r.error or 'differs'}[/]",
            )
        if output:
            with open(output, "w", encoding="utf-8") as fh:
                Console(file=fh, width=160).print(table)
        else:
            out.print(table)
        text = None
    if text is not None:
        if output:
            Path(output).write_text(text, encoding="utf-8")
        else:
            print(text)
    if failed:
        raise typer.Exit(1)


@app.command()
def serve(
    project: Path = typer.Option(..., "--project", "-p", help="project folder", exists=True, file_okay=False),
    host: str = typer.Option("127.0.0.1", help="interface to listen on (0.0.0.0: every interface)"),
    port: int = typer.Option(8000, help="TCP port"),
    token: Optional[str] = typer.Option(
        None, envvar="OBDA_TOKEN", help="bearer token clients must send (default: $OBDA_TOKEN, else a random one, printed)"
    ),
    master: Optional[str] = typer.Option(
        None, envvar="OBDA_SPARK_MASTER", help="Spark master URL, e.g. spark://host:7077 (default: local[*])"
    ),
    backend: str = typer.Option("spark", help="spark, or local (pipelines evaluated in Python: small inputs)"),
    max_running: int = typer.Option(4, help="cap on continuous queries running at once"),
    state_dir: Optional[Path] = typer.Option(
        None, envvar="OBDA_STATE_DIR",
        help="folder of the durable registry (registry.sqlite3: queries, status, answers) and the per-query "
             "checkpoints; a restart with the same folder resumes every query (default: in memory)",
    ),
    users_file: Optional[Path] = typer.Option(
        None, "--users-file", envvar="OBDA_USERS_FILE", dir_okay=False,
        help="users, roles and hashed tokens (obda users add); --token is then one more admin, or none"),
    rate_limit: Optional[int] = typer.Option(
        None, "--rate-limit", min=0, envvar="OBDA_RATE_LIMIT", help="requests per minute per user (0: no limit; default 3000)"),
    max_lag: Optional[float] = typer.Option(
        None, "--max-lag", min=0, envvar="OBDA_MAX_LAG",
        help="seconds: new registrations get 429 while a running query's oldest unread file waits longer (0: no bound)"),
    forget_after: Optional[float] = FORGET_AFTER_OPTION,
) -> None:
    """Run the HTTP service (FastAPI + uvicorn): analyse SPARQL, run continuous queries, stream answers.

    Example:
      OBDA_TOKEN=change-me-please obda serve --project demo --port 8000
      curl -H "Authorization: Bearer change-me-please" http://127.0.0.1:8000/v1/ontology
    The OpenAPI docs page is at http://127.0.0.1:8000/docs.
    """
    import secrets

    import uvicorn

    from api import Settings, create_app
    from api.users import UsersFileError

    if not token and users_file is None:
        token = secrets.token_urlsafe(24)
        err.print(f"no --token / OBDA_TOKEN given; generated token: {token}", highlight=False)
    try:
        settings = Settings.from_env(
            project_dir=project, token=token or None, master=master, backend=backend, max_running=max_running,
            state_dir=state_dir, users_file=users_file, rate_limit=rate_limit, max_lag_seconds=max_lag,
            **({"forget_after_seconds": forget_after} if forget_after is not None else {}),
        )
    except ValueError as e:
        err.print(f"[bold red]error[/]: {e}")
        raise typer.Exit(2)
    try:
        with _no_profile_warnings():
            app_ = create_app(settings)
    except UsersFileError as e:  # an unreadable users file: said, not a traceback
        err.print(f"[bold red]error[/]: {escape(str(e))}", highlight=False)
        raise typer.Exit(2)
    if app_.state.service.project is not None:
        _print_ontology_warnings(app_.state.service.project)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            # SIGTERM / Ctrl-C: live SSE streams end now (clients reconnect with Last-Event-ID), so uvicorn's
            # graceful shutdown does not wait for them; running queries stop after their micro-batch and
            # resume from their checkpoints when the service starts again with the same --state-dir
            app_.state.service.closing.set()
            super().handle_exit(sig, frame)

    try:
        Server(uvicorn.Config(app_, host=host, port=port, log_level="info", timeout_graceful_shutdown=10)).run()
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after its graceful shutdown (as uvicorn.run does)
        pass


class Role(str, Enum):
    reader = "reader"
    operator = "operator"
    admin = "admin"


USERS_FILE_OPTION = typer.Option(..., "--users-file", envvar="OBDA_USERS_FILE", dir_okay=False,
                                 help="the users file (JSON; the one given to obda serve --users-file)")


def _users_call(fn, *args):
    from api.users import UsersFileError

    try:
        return fn(*args)
    except (UsersFileError, OSError) as e:
        err.print(f"[bold red]error[/]: {escape(str(e))}", highlight=False)
        raise typer.Exit(2)


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="the user's name: letters, digits, '_' or '-'"),
    role: Role = typer.Option(..., "--role", help="reader (analyses; reads queries shared with it), operator (its "
                                                  "own queries), or admin (everything)"),
    users_file: Path = USERS_FILE_OPTION,
    rate_limit: Optional[int] = typer.Option(None, "--rate-limit", min=1, help="this user's requests per minute "
                                                                               "(default: the service's)"),
) -> None:
    """Add a user and print its new token, once (only a hash of it is stored: keep it).

    Example: obda users add alice --role operator --users-file state/users.json
    """
    from api.users import add_user

    token = _users_call(add_user, users_file, name, role.value, rate_limit)
    err.print(f"user {name!r} ({role.value}) added to {users_file}; its token (shown once, only its hash is kept):",
              highlight=False)
    print(token)


@users_app.command("list")
def users_list(users_file: Path = USERS_FILE_OPTION) -> None:
    """The users of the file: name, role, rate limit, creation time (never a token or hash).

    Example: obda users list --users-file state/users.json
    """
    from api.users import list_users

    for u in _users_call(list_users, users_file):
        print(f"{u.name}\t{u.role}\t{u.rate_limit or '-'}\t{u.created_at or '-'}")


@users_app.command("remove")
def users_remove(name: str = typer.Argument(...), users_file: Path = USERS_FILE_OPTION) -> None:
    """Remove a user: its token stops working within a second, also in a running service.

    Example: obda users remove alice --users-file state/users.json
    """
    from api.users import remove_user

    _users_call(remove_user, users_file, name)
    err.print(f"user {name!r} removed from {users_file}", highlight=False)


def main() -> None:  # entry point of the `obda` script
    app()


if __name__ == "__main__":
    main()
