"""``obda catalog check``: every query of a catalog compiled and analysed, each verdict compared with the
expected one (a table, JSON or a JUnit report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table as RichTable

from obda.cli.common import CatalogFormat, _fail, _load_project, catalog_app, err, out
from obda.errors import ObdaError


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
                Console(file=fh, width=160, emoji=False).print(table)
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
