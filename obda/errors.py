"""Typed errors of obda.

Every error carries a :class:`Location` (file, line, column, or a position in a
query text) and a message a user can act on.  Stages raise subclasses of
:class:`ObdaError`; the CLI and the API render them uniformly.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Location:
    """Where a problem is: a file and/or a line/column (1-based)."""

    file: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts) if parts else "<unknown>"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column}


class ObdaError(Exception):
    """Base class: a message and an optional location."""

    code = "obda_error"

    def __init__(self, message: str, location: Location | None = None):
        self.message = message
        self.location = location or Location()
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.location == Location():
            return self.message
        return f"{self.location}: {self.message}"

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "location": self.location.to_dict()}


class SourcesError(ObdaError):
    """The sources file is malformed (unknown kind, missing timestamp, bad type, ...)."""

    code = "sources_error"


class OntologyError(ObdaError):
    """An ontology file cannot be read or uses an unknown construct."""

    code = "ontology_error"


class ProfileViolation(OntologyError):
    """An axiom lies outside OWL 2 QL (raised in strict mode)."""

    code = "owl2ql_profile_violation"


class QuerySyntaxError(ObdaError):
    """The SPARQL text does not parse."""

    code = "query_syntax_error"


class UnsupportedConstructError(ObdaError):
    """The query (or SQL) uses a construct obda does not support; names it."""

    code = "unsupported_construct"

    def __init__(self, construct: str, message: str, location: Location | None = None):
        self.construct = construct
        super().__init__(message, location)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["construct"] = self.construct
        return d


class UnknownTermError(ObdaError):
    """A query or mapping names an ontology term that the ontology does not declare."""

    code = "unknown_term"


class MappingError(ObdaError):
    """An R2RML mapping is malformed (single problem)."""

    code = "mapping_error"


@dataclass(frozen=True)
class Problem:
    """One finding of validation: a code, a message and where."""

    code: str
    message: str
    location: Location = field(default_factory=Location)
    severity: str = "error"  # error | warning

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: [{self.code}] {self.message}"

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "location": self.location.to_dict(),
        }


class ValidationError(ObdaError):
    """One or more problems found while validating a project; nothing was loaded."""

    code = "validation_error"

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]):
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else None
        msg = f"{len(self.problems)} problem(s); first: {first}" if first else "validation failed"
        super().__init__(msg, first.location if first else None)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["problems"] = [p.to_dict() for p in self.problems]
        return d


class RewritingError(ObdaError):
    """The rewriting of a query under the ontology's axioms is too large to compute."""

    code = "rewriting_error"


class BudgetError(ObdaError):
    """Compiling a query would build more than its budget allows (``budget``: ``members``, ``nodes`` or ``cqs``).

    The message says how to make the query smaller; a caller that lets its user raise a budget (the CLI's
    ``--max-members``) adds how."""

    code = "budget_exceeded"

    def __init__(self, message: str, location: Location | None = None, budget: str = "members"):
        self.budget = budget
        super().__init__(message, location)


class AnalysisError(ObdaError):
    """SQL given to the analyser is malformed or outside the supported class."""

    code = "analysis_error"


class ExecutionError(ObdaError):
    """A query cannot be executed (e.g. unbounded without opt-in)."""

    code = "execution_error"


class BrokerError(ExecutionError):
    """A message broker a source or sink names cannot be used: unreachable, refusing the credentials or a
    subscription, or a topic that does not exist; located at the sources file's line (a source) or named by the
    output URL (a sink).  A password is never part of the message."""

    code = "broker_error"


class CheckpointError(ExecutionError):
    """A query's saved state cannot be used: its checkpoint is corrupt, was not written by obda or belongs to
    another query or version, or the output it records does not match it (a results folder altered or
    replaced).  Unlike the other failures of a running query (its environment or input: a stream folder, a
    static table, Spark, a JDBC database), it does not go away when the cause outside is fixed, so a query that
    fails with it cannot resume: it starts again with a fresh checkpoint (and a fresh output)."""

    code = "checkpoint_error"


def failure_text(error: BaseException) -> str:
    """A failure of a running query as its user reads it (the CLI, the service): obda's typed errors say what and
    where; an error of the file system names its file and reason; anything else is an internal error, named
    by its type (never a traceback)."""
    if isinstance(error, ObdaError):
        return str(error)
    if isinstance(error, OSError):
        what = error.strerror or type(error).__name__
        if not error.filename:
            return f"{what} (a file or folder the query needs could not be read or written)"
        where = f"{error.filename}" + (f" -> {error.filename2}" if error.filename2 else "")
        return f"{where}: {what} (a file or folder the query needs could not be read or written)"
    return f"internal error ({type(error).__name__}: {error})"
