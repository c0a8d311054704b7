"""The ``obda`` command line: a thin shell over the Python API.

Exit codes: 0 success; 1 the check failed (validation problems, catalog
mismatches); 2 bad input (syntax error, unsupported construct, unreadable
file) — the message names the file, line and column.  One module per group of commands
(:mod:`obda.cli.analysis`, :mod:`obda.cli.run`, :mod:`obda.cli.catalog`, :mod:`obda.cli.service`); each registers its
commands on the apps of :mod:`obda.cli.common` when imported.
"""

from __future__ import annotations

from obda.cli import analysis, catalog, run, service  # noqa: F401  (each registers its commands)
from obda.cli.analysis import REMOVED_SHOWN
from obda.cli.common import app

__all__ = ["app", "main", "REMOVED_SHOWN"]


def main() -> None:  # entry point of the `obda` script
    app()


if __name__ == "__main__":
    main()
