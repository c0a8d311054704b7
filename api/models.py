"""Request and response bodies of the HTTP API (pydantic models: validation and the OpenAPI document).

User text (the SPARQL query, the query name) is only ever *parsed* by obda;
it is never executed, and never interpolated into SQL: the SQL is built by
the unfolding stage as a sqlglot AST from the mappings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.settings import QUERY_CHARS_CEILING
from api.users import NAME_PATTERN

Dialect = Literal["spark", "duckdb", "postgres", "sqlite"]
Verdict = Literal["bounded", "unbounded", "not_shown"]
Status = Literal["registered", "starting", "running", "stopped", "failed"]
UserName = Annotated[str, Field(pattern=NAME_PATTERN, description="a user of the service")]

EXAMPLE_QUERY = (
    "PREFIX : <http://example.org/turbine#>\n"
    "SELECT ?sensor ?v WHERE {\n"
    "  GRAPH ?t { ?m :measuredBy ?sensor ; :hasValue ?v . }\n"
    "  FILTER(?v > 90)\n"
    "}\n"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AnalyzeRequest(_Strict):
    query: str = Field(..., min_length=1, max_length=QUERY_CHARS_CEILING, description="SPARQL SELECT or ASK query",
                       examples=[EXAMPLE_QUERY])
    dialect: Dialect = Field("spark", description="SQL dialect the compiled SQL is printed in")


class Member(BaseModel):
    sql: str
    origin: dict[str, Any] = Field(description="branch, rewritten CQ, axioms used, triples maps (file, line) per atom")


class Compilation(BaseModel):
    query: str
    distinct: bool
    columns: list[str]
    rewritten: list[str] = Field(description="the rewritten UCQ, one CQ per entry")
    sql: str
    members: list[Member]
    removed: list[str] = Field(description="why members were dropped (unsatisfiable, duplicate, ...)")
    views: list[dict[str, Any]] = Field(default=[], description="the per-atom views the members read: kind, "
                                        "columns, branches, triples maps, pruned branches, SQL")


class AnalyzeResponse(BaseModel):
    verdict: Verdict
    compilation: Compilation
    report: dict[str, Any] = Field(description="the bounded-memory report (obda.analysis): per member verdict, "
                                               "failing condition, witness, hint or synopsis plan")
    report_text: str = Field(description="the same report as text")


class ShedSetting(_Strict):
    max_lag: Annotated[str, Field(max_length=40)] | Annotated[float, Field(gt=0, le=1e9)] = Field(
        ..., description="an xsd:dayTimeDuration (PT5M) or seconds: how long an input file may wait unread before "
                         "it is dropped", examples=["PT5M"])
    policy: Literal["drop_oldest"] = Field("drop_oldest", description="drop_oldest: the files that waited longer "
                                           "than max_lag are dropped, the newer ones read (README, 'Load shedding')")


class RegisterRequest(_Strict):
    name: str = Field(..., min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                      description="a unique name for the query", examples=["hot_readings"])
    query: str = Field(..., min_length=1, max_length=QUERY_CHARS_CEILING, description="SPARQL SELECT or ASK query",
                       examples=[EXAMPLE_QUERY])
    allow_unbounded: bool = Field(False, description="run a query that is not shown bounded (its state may grow)")
    idle_timeout: float | None = Field(None, ge=0.1, le=86400,
                                       description="seconds without new rows after which a lagging stream no longer "
                                                   "holds timestamps open (default: wait for every stream)")
    shared_with: list[UserName] = Field([], max_length=100, description="users who may read the query's status and "
                                        "answers (its owner and admins always may)")
    output: str | None = Field(None, max_length=2000, pattern=r"^kafka:/",
                               description="also publish the committed answers to a Kafka topic, at least once, each "
                                           "keyed '<query id>:<seq>': kafka://host:port/topic (README 'The Kafka sink')",
                               examples=["kafka://127.0.0.1:9092/answers"])
    shed: ShedSetting | None = Field(None, description="opt-in load shedding: input files that waited longer than "
                                       "max_lag are dropped unread, every dropped row counted (metrics.shed, the "
                                       "quarantine) and incomplete_since set; without it nothing is ever dropped")


class ShareRequest(_Strict):
    users: list[UserName] = Field(..., max_length=100, description="exactly the users who may read the query's "
                                  "status and answers from now on (an empty list: nobody but its owner and admins)")


class Me(BaseModel):
    name: str
    role: Literal["reader", "operator", "admin"]
    rate_limit: int = Field(description="requests per minute this user may send (0: no limit)")


class Links(BaseModel):
    self: str
    start: str
    stop: str
    results: str
    stream: str


class QueryInfo(BaseModel):
    id: str
    name: str
    owner: str = Field(description="the user who registered the query")
    shared_with: list[str] = Field(description="users who may read its status and answers")
    status: Status
    verdict: Verdict
    constrained_verdict: Verdict = Field(description="the verdict under the k-constraints declared in the sources "
                                                     "file; the query runs without allow_unbounded when it is bounded")
    constraints: list[str] = Field(default=[], description="the declared k-constraints that bound the query: its "
                                   "synopses drop state by them, and metrics.constraints says how well they hold")
    query: str
    sql: str
    columns: list[str]
    distinct: bool
    allow_unbounded: bool
    idle_timeout: float | None
    created_at: str
    started_at: str | None = None
    stopped_at: str | None = None
    error: str | None = Field(None, description="why the query failed, if it did")
    resumable: bool | None = Field(None, description="for a failed query: whether POST …/start resumes it from its "
                                   "checkpoint, under its id and numbering, once the cause is fixed (a failure of "
                                   "its environment or input, with a state folder); false: its checkpoint or "
                                   "results cannot be used, or it no longer compiles (the start's 409 says what to "
                                   "do)")
    results: int = Field(description="answers produced so far (the seq of the newest answer)")
    output: str | None = Field(None, description="the Kafka topic its answers are published to as well (null: none)")
    shed: dict[str, Any] | None = Field(None, description="the query's shedding setting {max_lag, policy} (null: it "
                                        "never drops input)")
    incomplete_since: str | None = Field(None, description="the first application time whose answers may miss input: "
                                         "a dropped (shed) row's or a quarantined constraint violation's; null: none")
    metrics: dict[str, Any] | None = Field(None, description="executor metrics: rows in per stream, rows out, late, "
                                                             "invalid, state entries/bytes, batch latency; with "
                                                             "k-constraints, per constraint its estimated k, breaches "
                                                             "and use (constraints), constraint_violations and "
                                                             "incomplete_since")
    links: Links


class QueryCreated(QueryInfo):
    report: dict[str, Any]
    compilation: Compilation


class QueryList(BaseModel):
    queries: list[QueryInfo]
    running: int
    max_running: int


class Answer(BaseModel):
    seq: int = Field(description="position of the answer in the query's output (1, 2, ...)")
    emitted_at: str | None = Field(description="the closed application timestamp that produced the answer")
    op: str | None = Field(None, description="aggregate queries: upsert (the group's row now) or delete (the group "
                                             "left the answer); null for other queries")
    binding: dict[str, Any]


class AnswerTable(BaseModel):
    query_id: str
    columns: list[str]
    rows: list[dict[str, Any]] = Field(description="one per group the answer holds, in ORDER BY order")
    closed_upto: str | None = Field(description="the last closed application timestamp the rows are the answer at")


class Gap(BaseModel):
    from_: int = Field(alias="from", description="first dropped seq")
    to: int = Field(description="last dropped seq")
    dropped: int = Field(description="how many answers were dropped")

    model_config = ConfigDict(populate_by_name=True)


class ResultsPage(BaseModel):
    query_id: str
    items: list[Answer]
    first_seq: int = Field(description="oldest answer still kept (older ones were dropped)")
    last_seq: int = Field(description="newest answer produced so far")
    next_after: int | None = Field(description="pass as ?after= to get the next page (null: no answers in this page)")
    gap: Gap | None = Field(None, description="answers after `after` that the retention limit (OBDA_MAX_RESULTS) "
                                              "dropped before they were read (null: none)")


class Term(BaseModel):
    iri: str
    local_name: str
    label: str | None


class ClassTerm(Term):
    superclasses: list[str] = Field(description="named superclasses stated in the ontology")


class PropertyTerm(Term):
    superproperties: list[str]


class OntologyResponse(BaseModel):
    files: list[str]
    prefixes: dict[str, str] = Field(description="namespace suggestions for the query's PREFIX lines")
    classes: list[ClassTerm]
    object_properties: list[PropertyTerm]
    data_properties: list[PropertyTerm]


class Location(BaseModel):
    file: str | None = None
    line: int | None = None
    column: int | None = None


class ProblemItem(BaseModel):
    code: str
    severity: str
    message: str
    location: Location


class ValidateResponse(BaseModel):
    ok: bool
    errors: int
    warnings: int
    problems: list[ProblemItem]


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    project: str
    error: dict[str, Any] | None = None
    backend: str
    master: str | None
    registered: int
    running: int


class Problem(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    model_config = ConfigDict(extra="allow")
    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    code: str
    location: Location | None = Field(None, description="where in the query text (line, column) or file")
