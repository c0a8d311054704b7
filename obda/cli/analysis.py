"""``obda compile``, ``obda validate``, ``obda analyze``, ``obda generate``: a query, a project, a verdict, data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from obda.cli.common import (
    MAX_MEMBERS_OPTION,
    Dialect,
    Format,
    _fail,
    _load_project,
    _no_profile_warnings,
    _problem_line,
    app,
    err,
    out,
)
from obda.errors import ObdaError


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
    from obda.model.sources_file import load_sources

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
