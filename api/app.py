"""The FastAPI application: ``create_app(settings)``.

Thin by design: every endpoint calls obda's Python API (``Project.compile``,
``obda.analysis.analyze``, ``obda.project.validate_project``,
``obda.execution.ContinuousQuery``) and renders the result.

Endpoints (all under ``/v1`` need ``Authorization: Bearer <token>``)::

    POST /v1/analyze                       SPARQL → compilation + bounded-memory report (nothing registered)
    POST /v1/queries                       register a continuous query (201: id, SQL, verdict, report)
    GET  /v1/queries                       the registered queries with status
    GET  /v1/queries/{id}                  status and executor metrics
    POST /v1/queries/{id}/start | /stop    run / pause it
    DELETE /v1/queries/{id}                stop and forget it
    GET  /v1/queries/{id}/results          answers, paged (?after=SEQ&limit=N)
    GET  /v1/queries/{id}/results/stream   answers live, as Server-Sent Events
    POST /v1/queries/{id}/results/stream-session   a short-lived cookie for a browser's EventSource
    GET  /v1/queries/{id}/answer           an aggregate query's current answer table
    PUT  /v1/queries/{id}/shared-with      the users who may read the query (its owner or an admin)
    GET  /v1/me                            who the token is: name, role, rate limit
    GET  /v1/ontology                      classes and properties with labels (autocomplete)
    POST /v1/validate                      check the project (ontology, sources, mappings)
    GET  /healthz, /readyz                 liveness, readiness (project loaded)
    GET  /openapi.json, /docs, /redoc      the OpenAPI document and its docs pages (assets served locally)

Who may call what: :mod:`api.access` (roles reader, operator, admin; a query's owner; 404 for another user's
query); every state-changing call is written to the audit log (:mod:`api.audit`).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Cookie, Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from api import models as m
from api.access import Access, Principal, forbidden, may_control, may_register, may_see
from api.audit import QUERY_KEY, USER_KEY, AuditLog, AuditMiddleware
from api.limits import BodySizeLimit
from api.problems import PROBLEM_JSON, ApiProblem, install_handlers
from api.registry import QueryRegistry, RegisteredQuery, query_not_found
from api.render import info as _info, install_docs as _install_docs, jsonable as _jsonable, ontology as _ontology
from api.render import sse as _sse, verdict as _verdict
from api.settings import Settings
from obda.errors import ObdaError

log = logging.getLogger("obda.api")

API_VERSION = "1.0.0"
ID_PATTERN = r"^[0-9a-f]{32}$"

_bearer = HTTPBearer(auto_error=False, description="a user's token (`obda users add`), or the service's admin token "
                                                   "(`obda serve --token`, OBDA_TOKEN)")
STREAM_COOKIE = "obda_stream"
STREAM_SESSION_SECONDS = 900  # a browser's stream cookie lasts 15 minutes (POST again to renew it)


def _problem_responses(*codes: int) -> dict:
    text = {
        400: "SPARQL syntax error (the problem carries line and column), or a body that is not JSON",
        401: "missing or wrong bearer token",
        403: "the user's role does not allow it on this query (reader; an operator on another's shared query)",
        404: "no such query (or one the user may not see)",
        409: "conflict (name taken; a failed query that cannot be resumed: the detail says why and what to do)",
        413: "request body or query text too large",
        422: "invalid request, unsupported construct, unknown term, or not executable",
        429: "the user's rate limit (Retry-After), or too many registered, running or analysed queries",
        503: "the project did not load",
    }
    return {c: {"description": text[c], "model": m.Problem, "content": {PROBLEM_JSON: {}}} for c in codes}


class Service:
    """What the endpoints share: settings, the loaded project (or why it did not load), the registry."""

    def __init__(self, settings: Settings):
        from obda.project import Project

        self.settings = settings
        self.closing = threading.Event()  # set when the server shuts down: live streams end, clients reconnect
        self.project = None
        self.load_error: ObdaError | None = None
        try:
            self.project = Project.load(settings.project_dir)
        except ObdaError as e:
            self.load_error = e
            log.error("project %s did not load: %s", settings.project_dir, e)
        self.analyses = threading.BoundedSemaphore(settings.max_analyses)  # compilations at once
        self.access = Access(settings)
        self.audit = AuditLog(settings.audit_path)
        self.registry = QueryRegistry(settings, self.project)
        self.resume = self.registry.reattach(self.compile)  # stored queries under their ids; running ones resume

    def require_project(self):
        if self.project is None:
            raise ApiProblem(503, "project_not_loaded", f"the project did not load: {self.load_error}",
                             error=self.load_error.to_dict() if self.load_error else None)
        return self.project

    def compile(self, text: str):
        """Parse → rewrite → unfold → analyse; obda errors propagate (rendered as problems)."""
        from obda.analysis import analyze_query

        if len(text) > self.settings.max_query_chars:
            raise ApiProblem(413, "query_too_long",
                             f"the query has {len(text)} characters; the limit is {self.settings.max_query_chars}")
        project = self.require_project()
        if not self.analyses.acquire(blocking=False):
            raise ApiProblem(429, "too_many_analyses", f"{self.settings.max_analyses} queries are being analysed "
                             "already; retry in a moment", headers={"Retry-After": "1"})
        try:
            comp = project.compile(text)
            return comp, analyze_query(comp, project.sources)  # an aggregate query: Arasu §8.2
        finally:
            self.analyses.release()


def create_app(settings: Settings) -> FastAPI:
    """Build the service for one project (loaded now; a failure makes /readyz report it)."""
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        service.registry.resume(service.resume)
        yield
        await run_in_threadpool(service.registry.shutdown)

    app = FastAPI(
        title="obda",
        version=API_VERSION,
        summary="Streaming ontology-based data access: ask SPARQL over streams, learn whether it runs in bounded "
                "memory, watch the answers arrive.",
        description=(
            "Every endpoint under `/v1` needs `Authorization: Bearer <token>`. Errors are RFC 9457 problem "
            "documents (`application/problem+json`); SPARQL syntax errors carry the `location` (line, column). "
            "User text (SPARQL, names) is only parsed; SQL is generated from the mappings as an AST, never by "
            "interpolating user text."
        ),
        lifespan=lifespan,
        docs_url=None,  # served below from the local Swagger UI / ReDoc files: the pages work offline
        redoc_url=None,
    )
    app.state.service = service
    _install_docs(app)

    def openapi() -> dict:
        """The OpenAPI document, with the query length limit this server enforces (not the hard ceiling)."""
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            doc = get_openapi(title=app.title, version=app.version, summary=app.summary,
                              description=app.description, routes=app.routes)
            for name in ("AnalyzeRequest", "RegisterRequest"):
                prop = doc.get("components", {}).get("schemas", {}).get(name, {}).get("properties", {}).get("query")
                if prop is not None:
                    prop["maxLength"] = settings.max_query_chars
                    prop["description"] = f"SPARQL SELECT or ASK query (at most {settings.max_query_chars} characters)"
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(AuditMiddleware, audit=service.audit)  # outermost: it sees the 413s and 401s too
    install_handlers(app)
    access = service.access

    def _admit(request: Request, who: Principal) -> Principal:
        setattr(request.state, USER_KEY, who.name)  # for the audit log
        access.throttle(who)
        return who

    def current_user(request: Request,
                     credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Principal:
        """The caller of a bearer token (401 otherwise), within its rate limit (429 otherwise)."""
        who = access.authenticate(*((credentials.scheme, credentials.credentials) if credentials else (None, None)),
                                  request.client.host if request.client else "")
        return _admit(request, who)

    def _visible(query_id: str, who: Principal) -> RegisteredQuery:
        q = service.registry.get(query_id)
        if not may_see(who, q.owner, q.shared_with):
            raise query_not_found(query_id)  # exactly as a query that does not exist
        return q

    def query_of(query_id: Annotated[str, Path(pattern=ID_PATTERN, description="the id returned at registration")],
                 who: Principal = Depends(current_user)) -> RegisteredQuery:
        """A query the caller may see (its owner, an admin, or a user it is shared with); 404 otherwise."""
        return _visible(query_id, who)

    def controlled_query(q: RegisteredQuery = Depends(query_of), who: Principal = Depends(current_user)) -> RegisteredQuery:
        """A query the caller may change (its owner, if an operator, or an admin); 403 when it may only read it."""
        if not may_control(who, q.owner):
            raise forbidden(who, "start, stop, delete or share this query")
        return q

    def _known_users(names) -> tuple[str, ...]:
        unknown = sorted(set(names) - access.known_users())
        if unknown:
            raise ApiProblem(422, "unknown_user", f"no user named {', '.join(map(repr, unknown))}: share with users "
                             "of the service (obda users list)", users=unknown)
        return tuple(sorted(set(names)))

    v1 = dict(dependencies=[Depends(current_user)])
    common = _problem_responses(401, 422, 429)
    one = _problem_responses(401, 404, 422, 429)  # the endpoints that read one query

    # -- analysis -------------------------------------------------------------------------------
    @app.post("/v1/analyze", response_model=m.AnalyzeResponse, tags=["queries"], **v1,
              responses=_problem_responses(400, 401, 413, 422, 429, 503))
    def analyze_query(body: m.AnalyzeRequest) -> m.AnalyzeResponse:
        """Compile a SPARQL query (rewrite, unfold) and decide whether it runs in bounded memory. Registers nothing."""
        comp, report = service.compile(body.query)
        return m.AnalyzeResponse(
            verdict=_verdict(report), compilation=m.Compilation(**comp.to_dict(body.dialect)),
            report=_jsonable(report.to_dict()), report_text=report.to_text(),
        )

    # -- continuous queries ---------------------------------------------------------------------
    @app.post("/v1/queries", status_code=201, response_model=m.QueryCreated, tags=["queries"], **v1,
              responses=_problem_responses(400, 401, 403, 409, 413, 422, 429, 503))
    def register_query(body: m.RegisterRequest, request: Request,
                       who: Principal = Depends(current_user)) -> m.QueryCreated:
        """Register a continuous query: compiled and analysed now, run with `POST /v1/queries/{id}/start`.

        A query that is not shown bounded, even under the declared k-constraints, is refused (422) unless
        `allow_unbounded` is true. The caller owns the query (operators and admins register; a reader gets 403);
        `shared_with` names users who may read its status and answers.
        """
        if not may_register(who):
            raise forbidden(who, "register queries")
        shared = _known_users(body.shared_with)
        comp, report = service.compile(body.query)
        q = service.registry.register(body.name, comp, report, allow_unbounded=body.allow_unbounded,
                                      idle_timeout=body.idle_timeout, owner=who.name, shared_with=shared, output=body.output,
                                      shed=body.shed.model_dump() if body.shed is not None else None)
        setattr(request.state, QUERY_KEY, q.id)
        return m.QueryCreated(**_info(q).model_dump(), report=_jsonable(report.to_dict()),
                              compilation=m.Compilation(**comp.to_dict("spark")))

    @app.get("/v1/queries", response_model=m.QueryList, tags=["queries"], **v1, responses=common)
    def list_queries(who: Principal = Depends(current_user)) -> m.QueryList:
        """The queries the caller may see (its own and those shared with it; an admin: all) with their status."""
        qs = [q for q in service.registry.list() if may_see(who, q.owner, q.shared_with)]
        return m.QueryList(queries=[_info(q) for q in qs], running=sum(q.running for q in qs),
                           max_running=settings.max_running)

    @app.get("/v1/queries/{query_id}", response_model=m.QueryInfo, tags=["queries"], **v1, responses=one)
    def get_query(q: RegisteredQuery = Depends(query_of)) -> m.QueryInfo:
        """Status and executor metrics of one query."""
        return _info(q)

    @app.post("/v1/queries/{query_id}/start", response_model=m.QueryInfo, tags=["queries"], **v1,
              responses=_problem_responses(401, 403, 404, 409, 422, 429))
    def start_query(q: RegisteredQuery = Depends(controlled_query)) -> m.QueryInfo:
        """Start the query (or resume it after a stop). Idempotent while it runs.

        A failed query resumes from its checkpoint, under its id and numbering, once the cause of a failure of its
        environment or input is fixed (`resumable` in its status); while the cause is still there the start fails
        with it (422) and the query stays failed. 409 when it cannot resume (its checkpoint or results cannot be
        used, it no longer compiles, or the service keeps no state folder): the message says what to do."""
        return _info(service.registry.start(q.id))

    @app.post("/v1/queries/{query_id}/stop", response_model=m.QueryInfo, tags=["queries"], **v1,
              responses=_problem_responses(401, 403, 404, 422, 429))
    def stop_query(q: RegisteredQuery = Depends(controlled_query)) -> m.QueryInfo:
        """Stop after the current micro-batch; its answers stay readable. Idempotent."""
        return _info(service.registry.stop(q.id))

    @app.delete("/v1/queries/{query_id}", status_code=204, tags=["queries"], **v1,
                responses=_problem_responses(401, 403, 404, 409, 422, 429))
    def delete_query(q: RegisteredQuery = Depends(controlled_query)) -> None:
        """Stop the query and forget it and its answers."""
        service.registry.delete(q.id)

    @app.put("/v1/queries/{query_id}/shared-with", response_model=m.QueryInfo, tags=["queries"], **v1,
             responses=_problem_responses(400, 401, 403, 404, 413, 422, 429))
    def share_query(body: m.ShareRequest, q: RegisteredQuery = Depends(controlled_query)) -> m.QueryInfo:
        """Let exactly these users read the query's status and answers (replaces the list; its owner and admins
        always may). Its owner (an operator) or an admin."""
        return _info(service.registry.share(q.id, _known_users(body.users)))

    @app.get("/v1/queries/{query_id}/results", response_model=m.ResultsPage, tags=["results"], **v1, responses=one)
    def results(
        q: RegisteredQuery = Depends(query_of),
        after: Annotated[int, Query(ge=0, le=2**53, description="return answers with seq > after")] = 0,
        limit: Annotated[int, Query(ge=1, le=1000, description="at most this many answers")] = 100,
    ) -> m.ResultsPage:
        """Answers produced so far, oldest first, paged by sequence number.

        Only the newest answers are kept (`OBDA_MAX_RESULTS`); `gap` says which answers after `after` were dropped.
        """
        page = q.results.page(after, limit)
        gap = m.Gap(**{"from": page.gap[0], "to": page.gap[1], "dropped": page.gap[1] - page.gap[0] + 1}) if page.gap else None
        return m.ResultsPage(query_id=q.id, items=[m.Answer(**a) for a in page.items], first_seq=page.first_seq,
                             last_seq=page.last_seq, next_after=page.next_after, gap=gap)

    @app.get("/v1/queries/{query_id}/answer", response_model=m.AnswerTable, tags=["results"], **v1,
             responses=_problem_responses(401, 404, 409, 422, 429))
    def current_answer(q: RegisteredQuery = Depends(query_of)) -> m.AnswerTable:
        """The current answer of an aggregate query: one row per group at the last closed timestamp, in
        ORDER BY order. Its changelog (`results`) replayed gives the same rows. 409 `time_keyed` for a query
        grouped by its timestamps (`GROUP BY ?t`): its groups are written and dropped, the changelog holds them."""
        if q.compilation is None or q.compilation.aggregation is None:
            raise ApiProblem(409, "not_an_aggregate", "the current answer table is for aggregate queries (GROUP BY, "
                             "COUNT, SUM, ...); read this query's answers from its results")
        handle = q.handle
        if handle is None:
            raise ApiProblem(409, "not_started", "the query has not run since the service started; start it "
                             "(POST /v1/queries/{id}/start), it continues from its checkpoint")
        if handle.aggregate is not None and handle.aggregate.time_keyed:
            from obda.execution.aggregate import TIME_KEYED_TABLE

            raise ApiProblem(409, "time_keyed", TIME_KEYED_TABLE)
        rows = handle.answer()
        closed = handle.metrics.closed_upto
        from obda.execution.sinks import micros_to_iso

        return m.AnswerTable(query_id=q.id, columns=list(handle.columns), rows=_jsonable(rows),
                             closed_upto=None if closed is None else micros_to_iso(closed))

    def stream_user(
        request: Request,
        query_id: Annotated[str, Path(pattern=ID_PATTERN)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        obda_stream: Annotated[str | None, Cookie(max_length=128, description="the cookie of POST …/stream-session "
                                                                            "(a browser's EventSource)")] = None,
    ) -> Principal:
        """The bearer token's user, or (a browser's EventSource cannot send headers) the stream cookie's: the
        cookie names its user and query, and works while that user exists."""
        if credentials is None and obda_stream is not None:
            who = access.from_ticket(query_id, obda_stream)
            if who is None:
                raise ApiProblem(401, "unauthorized", "the stream cookie is not valid or has expired: POST "
                                 f"/v1/queries/{query_id}/results/stream-session again",
                                 headers={"WWW-Authenticate": 'Bearer realm="obda", error="invalid_token"'})
            return _admit(request, who)
        return current_user(request, credentials)

    def stream_query(query_id: Annotated[str, Path(pattern=ID_PATTERN)],
                     who: Principal = Depends(stream_user)) -> RegisteredQuery:
        return _visible(query_id, who)

    @app.post(
        "/v1/queries/{query_id}/results/stream-session", tags=["results"], **v1, status_code=204, responses=one,
    )
    def stream_session(response: Response, q: RegisteredQuery = Depends(query_of),
                       who: Principal = Depends(current_user)) -> Response:
        """A short-lived cookie (15 minutes) that lets a browser's `EventSource` read this query's stream: it
        cannot send an `Authorization` header. The cookie is HttpOnly, SameSite=Strict and sent only to this
        query's stream URL; it works for the caller only, while the caller may see the query; no token appears in
        a URL (nor in the server's logs). POST again to renew it."""
        expires = int(time.time()) + STREAM_SESSION_SECONDS
        response.status_code = 204
        response.set_cookie(STREAM_COOKIE, access.ticket(who, q.id, expires), max_age=STREAM_SESSION_SECONDS,
                            path=f"/v1/queries/{q.id}/results/stream", httponly=True, samesite="strict",
                            secure=settings.secure_cookies)
        return response

    @app.get(
        "/v1/queries/{query_id}/results/stream", tags=["results"], dependencies=[Depends(stream_user)],
        response_class=StreamingResponse,
        responses={
            200: {"description": "Server-Sent Events: `event: result` with `id: <seq>` and `data: <answer JSON>`; "
                                 "`event: gap` with `id: <to>` and `data: {from, to, dropped}` for answers the "
                                 "retention limit dropped; `event: status` when the query stops or fails; comments "
                                 "as keep-alive.",
                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            **one,
        },
    )
    async def stream_results(
        request: Request,
        q: RegisteredQuery = Depends(stream_query),
        after: Annotated[int | None, Query(ge=0, le=2**53, description="start after this seq (default 0); a "
                                                                        "Last-Event-ID header wins over it")] = None,
        limit: Annotated[int | None, Query(ge=1, le=100000, description="close the stream after this many "
                                                                        "answers (default: never)")] = None,
        last_event_id: Annotated[str | None, Header(max_length=32, description="resume after this seq")] = None,
    ) -> StreamingResponse:
        """Answers live as Server-Sent Events (`curl -N`). Replays kept answers after `after`, then follows.

        A `Last-Event-ID` header (an `EventSource` reconnecting to the same URL) wins over `after`, so a reconnect
        resumes where the client was. Answers dropped by the retention limit are announced by an `event: gap`
        (`data: {"from", "to", "dropped"}`, `id: <to>`). The stream ends when the query is stopped or failed and
        every answer was sent, or after `limit` answers; the server stops writing as soon as the client is gone.
        """
        # a browser's EventSource reconnects to the same URL (same ?after=) with Last-Event-ID: the header wins
        resumed = last_event_id is not None and last_event_id.strip().isdigit()
        start = int(last_event_id.strip()) if resumed else (after or 0)
        gen = _sse(request, q, start, limit, settings, service.closing)
        return StreamingResponse(gen, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # -- project --------------------------------------------------------------------------------
    @app.get("/v1/me", response_model=m.Me, tags=["project"], **v1, responses=_problem_responses(401, 429))
    def me(who: Principal = Depends(current_user)) -> m.Me:
        """Who the bearer token is: the user's name, role and rate limit."""
        return m.Me(name=who.name, role=who.role, rate_limit=who.rate_limit)

    @app.get("/v1/ontology", response_model=m.OntologyResponse, tags=["project"], **v1,
             responses=_problem_responses(401, 429, 503))
    def ontology() -> m.OntologyResponse:
        """Classes and properties of the ontology with their labels (for clients that autocomplete)."""
        return _ontology(service.require_project().ontology)

    @app.post("/v1/validate", response_model=m.ValidateResponse, tags=["project"], **v1,
              responses=_problem_responses(401, 429))
    def validate() -> m.ValidateResponse:
        """Check the project folder as it is now on disk: ontology (OWL 2 QL), sources file, R2RML mappings."""
        from obda.project import validate_project

        problems = validate_project(settings.project_dir)
        errors = sum(p.severity == "error" for p in problems)
        return m.ValidateResponse(ok=errors == 0, errors=errors, warnings=len(problems) - errors,
                                  problems=[m.ProblemItem(**p.to_dict()) for p in problems])

    # -- probes ---------------------------------------------------------------------------------
    @app.get("/healthz", response_model=m.Health, tags=["probes"])
    def healthz() -> m.Health:
        """Liveness: the process answers."""
        return m.Health(status="ok")

    @app.get("/readyz", response_model=m.Readiness, tags=["probes"],
             responses={503: {"model": m.Readiness, "description": "the project did not load"}})
    def readyz(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]):
        """Readiness: the project loaded (else 503 with the error's code).

        Without a user's bearer token only the project folder's name and the error code are shown; with one, the
        folder's path and the error's message and location.
        """
        trusted = credentials is not None and access.identify(credentials.credentials) is not None
        qs = service.registry.list()
        error = service.load_error.to_dict() if service.load_error else None
        if error is not None and not trusted:
            error = {"code": error.get("code", "obda_error")}
        body = m.Readiness(
            ready=service.project is not None,
            project=str(settings.project_dir) if trusted else settings.project_dir.resolve().name,
            error=error, backend=settings.backend,
            master=settings.master, registered=len(qs), running=sum(q.running for q in qs),
        )
        if service.project is None:
            from fastapi.responses import JSONResponse

            return JSONResponse(body.model_dump(), status_code=503)
        return body

    return app
