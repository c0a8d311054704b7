"""What every ``obda`` command shares: the Typer apps, the consoles, the option types, located errors.

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

import typer
from rich.console import Console
from rich.markup import escape

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
out = Console(soft_wrap=True, emoji=False)  # no ":100:" → 💯 in a location
err = Console(stderr=True, soft_wrap=True, emoji=False)


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
