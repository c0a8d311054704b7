"""``obda serve`` (the HTTP service) and ``obda users`` (its users file: roles and tokens)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from obda.cli.common import FORGET_AFTER_OPTION, _no_profile_warnings, _print_ontology_warnings, app, err, users_app


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
