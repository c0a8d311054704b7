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
    GET  /v1/ontology                      classes and properties with labels (autocomplete)
    POST /v1/validate                      check the project (ontology, sources, mappings)
    GET  /healthz, /readyz                 liveness, readiness (project loaded)
    GET  /openapi.json, /docs, /redoc      the OpenAPI document and its docs pages (assets served locally)
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from contextlib import asynccontextmanager
from typing import Annotated, AsyncIterator

from fastapi import Cookie, Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from api import models as m
from api.limits import BodySizeLimit
from api.problems import PROBLEM_JSON, ApiProblem, install_handlers
from api.registry import QueryRegistry, RegisteredQuery
from api.settings import Settings
from obda.errors import ObdaError

log = logging.getLogger("obda.api")

API_VERSION = "1.0.0"
ID_PATTERN = r"^[0-9a-f]{32}$"

_bearer = HTTPBearer(auto_error=False, description="the token given to `obda serve --token` (or OBDA_TOKEN)")
STREAM_COOKIE = "obda_stream"
STREAM_SESSION_SECONDS = 900  # a browser's stream cookie lasts 15 minutes (POST again to renew it)


def stream_ticket(secret: str, query_id: str, expires: int) -> str:
    """A stream cookie's value: its expiry and an HMAC (keyed by the service's token) of the query and the expiry."""
    mac = hmac.new(secret.encode("utf-8"), f"stream:{query_id}:{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}"


def valid_ticket(secret: str, query_id: str, ticket: str | None, now: float) -> bool:
    expires, _, _mac = (ticket or "").partition(".")
    if not expires.isdigit() or int(expires) < now:
        return False
    return secrets.compare_digest(ticket.encode(), stream_ticket(secret, query_id, int(expires)).encode())


def _problem_responses(*codes: int) -> dict:
    text = {
        400: "SPARQL syntax error (the problem carries line and column), or a body that is not JSON",
        401: "missing or wrong bearer token",
        404: "no such query",
        409: "conflict (name taken; a failed query that cannot be resumed: the detail says why and what to do)",
        413: "request body or query text too large",
        422: "invalid request, unsupported construct, unknown term, or not executable",
        429: "too many registered or running queries",
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


DOCS_ASSETS = "/docs-assets"


def _install_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their JavaScript, CSS and icon served by this server from the
    pinned ``fastapi-offline`` package, not from a CDN: the pages work without Internet access."""
    from pathlib import Path as _Path

    import fastapi_offline
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount(DOCS_ASSETS, StaticFiles(directory=_Path(fastapi_offline.__file__).parent / "static"), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui():
        return get_swagger_ui_html(
            openapi_url=app.openapi_url, title=f"{app.title} - API docs",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc():
        return get_redoc_html(openapi_url=app.openapi_url, title=f"{app.title} - API reference",
                              redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png", with_google_fonts=False)


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
                    prop["description"] = f"SPARQL SELECT query (at most {settings.max_query_chars} characters)"
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_handlers(app)

    def authenticate(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise ApiProblem(401, "unauthorized", "missing bearer token: send 'Authorization: Bearer <token>'",
                             headers={"WWW-Authenticate": 'Bearer realm="obda"'})
        if not secrets.compare_digest(credentials.credentials.encode("utf-8", "surrogatepass"),
                                      settings.token.encode("utf-8")):
            raise ApiProblem(401, "unauthorized", "the bearer token is not valid",
                             headers={"WWW-Authenticate": 'Bearer realm="obda", error="invalid_token"'})

    def query_of(query_id: Annotated[str, Path(pattern=ID_PATTERN, description="the id returned at registration")]) -> RegisteredQuery:
        return service.registry.get(query_id)

    v1 = dict(dependencies=[Depends(authenticate)])
    common = _problem_responses(401, 422)

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
              responses=_problem_responses(400, 401, 409, 413, 422, 429, 503))
    def register_query(body: m.RegisterRequest, request: Request) -> m.QueryCreated:
        """Register a continuous query: compiled and analysed now, run with `POST /v1/queries/{id}/start`.

        A query that is not shown bounded, even under the declared k-constraints, is refused (422) unless
        `allow_unbounded` is true.
        """
        comp, report = service.compile(body.query)
        q = service.registry.register(body.name, comp, report, allow_unbounded=body.allow_unbounded,
                                      idle_timeout=body.idle_timeout)
        info = _info(q, request)
        return m.QueryCreated(**info.model_dump(), report=_jsonable(report.to_dict()),
                              compilation=m.Compilation(**comp.to_dict("spark")))

    @app.get("/v1/queries", response_model=m.QueryList, tags=["queries"], **v1, responses=common)
    def list_queries(request: Request) -> m.QueryList:
        """The registered queries with their status."""
        qs = service.registry.list()
        return m.QueryList(queries=[_info(q, request) for q in qs], running=sum(q.running for q in qs),
                           max_running=settings.max_running)

    @app.get("/v1/queries/{query_id}", response_model=m.QueryInfo, tags=["queries"], **v1,
             responses=_problem_responses(401, 404, 422))
    def get_query(request: Request, q: RegisteredQuery = Depends(query_of)) -> m.QueryInfo:
        """Status and executor metrics of one query."""
        return _info(q, request)

    @app.post("/v1/queries/{query_id}/start", response_model=m.QueryInfo, tags=["queries"], **v1,
              responses=_problem_responses(401, 404, 409, 422, 429))
    def start_query(request: Request, q: RegisteredQuery = Depends(query_of)) -> m.QueryInfo:
        """Start the query (or resume it after a stop). Idempotent while it runs.

        A failed query resumes from its checkpoint, under its id and numbering, once the cause of a failure of its
        environment or input is fixed (`resumable` in its status); while the cause is still there the start fails
        with it (422) and the query stays failed. 409 when it cannot resume (its checkpoint or results cannot be
        used, it no longer compiles, or the service keeps no state folder): the message says what to do."""
        return _info(service.registry.start(q.id), request)

    @app.post("/v1/queries/{query_id}/stop", response_model=m.QueryInfo, tags=["queries"], **v1,
              responses=_problem_responses(401, 404, 422))
    def stop_query(request: Request, q: RegisteredQuery = Depends(query_of)) -> m.QueryInfo:
        """Stop after the current micro-batch; its answers stay readable. Idempotent."""
        return _info(service.registry.stop(q.id), request)

    @app.delete("/v1/queries/{query_id}", status_code=204, tags=["queries"], **v1,
                responses=_problem_responses(401, 404, 409, 422))
    def delete_query(q: RegisteredQuery = Depends(query_of)) -> None:
        """Stop the query and forget it and its answers."""
        service.registry.delete(q.id)

    @app.get("/v1/queries/{query_id}/results", response_model=m.ResultsPage, tags=["results"], **v1,
             responses=_problem_responses(401, 404, 422))
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
             responses=_problem_responses(401, 404, 409, 422))
    def current_answer(q: RegisteredQuery = Depends(query_of)) -> m.AnswerTable:
        """The current answer of an aggregate query: one row per group at the last closed timestamp, in
        ORDER BY order. Its changelog (`results`) replayed gives the same rows."""
        if q.compilation is None or q.compilation.aggregation is None:
            raise ApiProblem(409, "not_an_aggregate", "the current answer table is for aggregate queries (GROUP BY, "
                             "COUNT, SUM, ...); read this query's answers from its results")
        handle = q.handle
        if handle is None:
            raise ApiProblem(409, "not_started", "the query has not run since the service started; start it "
                             "(POST /v1/queries/{id}/start), it continues from its checkpoint")
        rows = handle.answer()
        closed = handle.metrics.closed_upto
        from obda.execution.sinks import micros_to_iso

        return m.AnswerTable(query_id=q.id, columns=list(handle.columns), rows=_jsonable(rows),
                             closed_upto=None if closed is None else micros_to_iso(closed))

    def authenticate_stream(
        query_id: Annotated[str, Path(pattern=ID_PATTERN)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        obda_stream: Annotated[str | None, Cookie(max_length=128, description="the cookie of POST …/stream-session "
                                                                            "(a browser's EventSource)")] = None,
    ) -> None:
        """The bearer token, or (a browser's EventSource cannot send headers) the query's stream cookie."""
        if credentials is None and obda_stream is not None:
            if valid_ticket(settings.token, query_id, obda_stream, time.time()):
                return
            raise ApiProblem(401, "unauthorized", "the stream cookie is not valid or has expired: POST "
                             f"/v1/queries/{query_id}/results/stream-session again",
                             headers={"WWW-Authenticate": 'Bearer realm="obda", error="invalid_token"'})
        authenticate(credentials)

    @app.post(
        "/v1/queries/{query_id}/results/stream-session", tags=["results"], **v1, status_code=204,
        responses=_problem_responses(401, 404, 422),
    )
    def stream_session(response: Response, q: RegisteredQuery = Depends(query_of)) -> Response:
        """A short-lived cookie (15 minutes) that lets a browser's `EventSource` read this query's stream: it
        cannot send an `Authorization` header. The cookie is HttpOnly, SameSite=Strict and sent only to this
        query's stream URL; no token appears in a URL (nor in the server's logs). POST again to renew it."""
        expires = int(time.time()) + STREAM_SESSION_SECONDS
        response.status_code = 204
        response.set_cookie(STREAM_COOKIE, stream_ticket(settings.token, q.id, expires), max_age=STREAM_SESSION_SECONDS,
                            path=f"/v1/queries/{q.id}/results/stream", httponly=True, samesite="strict",
                            secure=settings.secure_cookies)
        return response

    @app.get(
        "/v1/queries/{query_id}/results/stream", tags=["results"], dependencies=[Depends(authenticate_stream)],
        response_class=StreamingResponse,
        responses={
            200: {"description": "Server-Sent Events: `event: result` with `id: <seq>` and `data: <answer JSON>`; "
                                 "`event: gap` with `id: <to>` and `data: {from, to, dropped}` for answers the "
                                 "retention limit dropped; `event: status` when the query stops or fails; comments "
                                 "as keep-alive.",
                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            **_problem_responses(401, 404, 422),
        },
    )
    async def stream_results(
        request: Request,
        q: RegisteredQuery = Depends(query_of),
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
    @app.get("/v1/ontology", response_model=m.OntologyResponse, tags=["project"], **v1,
             responses=_problem_responses(401, 503))
    def ontology() -> m.OntologyResponse:
        """Classes and properties of the ontology with their labels (for clients that autocomplete)."""
        return _ontology(service.require_project().ontology)

    @app.post("/v1/validate", response_model=m.ValidateResponse, tags=["project"], **v1,
              responses=_problem_responses(401))
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

        Without the bearer token only the project folder's name and the error code are shown; with it, the
        folder's path and the error's message and location.
        """
        trusted = credentials is not None and secrets.compare_digest(
            credentials.credentials.encode("utf-8", "surrogatepass"), settings.token.encode("utf-8"))
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


# ------------------------------------------------------------------------------------------ helpers


def _verdict(report) -> str:
    v = getattr(report, "verdict", None)
    return str(getattr(v, "value", v)).lower()


def _jsonable(obj):
    """Plain JSON values (enums, tuples, paths → JSON); a decimal is a number, as in every output of obda
    (:func:`obda.execution.sinks.json_value`)."""
    from decimal import Decimal

    from obda.execution.sinks import json_value

    return json.loads(json.dumps(obj, default=lambda o: json_value(o) if isinstance(o, Decimal) else getattr(o, "value", str(o))))


def _info(q: RegisteredQuery, request: Request) -> m.QueryInfo:
    base = f"/v1/queries/{q.id}"
    return m.QueryInfo(
        id=q.id, name=q.name, status=q.status, verdict=q.verdict, constrained_verdict=q.constrained_verdict,
        constraints=q.constraints, query=q.text,
        sql=q.compilation.to_sql("spark") if q.compilation is not None else "",
        columns=list(q.compilation.columns) if q.compilation is not None else [],
        distinct=q.compilation.distinct if q.compilation is not None else False, allow_unbounded=q.allow_unbounded,
        idle_timeout=q.idle_timeout, created_at=q.created_at, started_at=q.started_at, stopped_at=q.stopped_at,
        error=q.error, resumable=q.resumable, results=q.results.last_seq, metrics=_jsonable(q.metrics()) if q.handle is not None else None,
        links=m.Links(self=base, start=f"{base}/start", stop=f"{base}/stop", results=f"{base}/results",
                      stream=f"{base}/results/stream"),
    )


def _event(event: str, data: dict, id: int | None = None) -> bytes:
    lines = [f"event: {event}"]
    if id is not None:
        lines.append(f"id: {id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


async def _sse(request: Request, q: RegisteredQuery, after: int, limit: int | None, settings: Settings,
               closing: threading.Event) -> AsyncIterator[bytes]:
    """Replay kept answers after ``after``, then follow new ones; end when the query stops or fails.

    The client's disconnection is checked before every page of the replay and while waiting, so a client that
    leaves stops the writing within one page (at most 500 answers).
    """
    sent = 0
    last_beat = time.monotonic()
    yield b"retry: 2000\n\n"
    try:
        while True:
            if await request.is_disconnected():
                log.info("results stream of %s: client gone after %d answer(s), at seq %d", q.id, sent, after)
                return
            if closing.is_set():  # the server shuts down: the client reconnects with Last-Event-ID
                return
            page = await run_in_threadpool(q.results.page, after, 500 if limit is None else min(500, limit - sent))
            gap = page.gap
            if gap is not None:
                lo, hi = gap
                yield _event("gap", {"from": lo, "to": hi, "dropped": hi - lo + 1,
                                     "reason": "retention limit (OBDA_MAX_RESULTS)"}, hi)
                after = hi
            for a in page.items:
                yield _event("result", {"emitted_at": a["emitted_at"], "op": a.get("op"), "binding": a["binding"]}, a["seq"])
                after = a["seq"]
                sent += 1
            if limit is not None and sent >= limit:
                return
            if page.items or gap is not None:
                last_beat = time.monotonic()
                continue
            status = q.status
            if status in ("stopped", "failed") and q.results.last_seq <= after:
                yield _event("status", {"status": status, "error": q.error, "last_seq": after})
                return
            if time.monotonic() - last_beat >= settings.sse_heartbeat:
                yield f": keep-alive {status}\n\n".encode()
                last_beat = time.monotonic()
            await asyncio.sleep(settings.sse_poll)
    except asyncio.CancelledError:
        log.info("results stream of %s: cancelled after %d answer(s), at seq %d", q.id, sent, after)
        raise


def _local_name(iri: str) -> str:
    return re.split(r"[#/]", iri)[-1]


def _namespace(iri: str) -> str:
    return iri[: len(iri) - len(_local_name(iri))]


def _ontology(onto) -> m.OntologyResponse:
    from obda.model.ontology import AtomicConcept, SubClassOf, SubPropertyOf

    supers: dict[str, set[str]] = {}
    psupers: dict[str, set[str]] = {}
    for ax in onto.axioms:
        if isinstance(ax, SubClassOf) and isinstance(ax.sub, AtomicConcept) and isinstance(ax.sup, AtomicConcept):
            supers.setdefault(ax.sub.iri, set()).add(ax.sup.iri)
        elif isinstance(ax, SubPropertyOf) and not ax.sub.inverse and not ax.sup.inverse and ax.sub.prop != ax.sup.prop:
            psupers.setdefault(ax.sub.prop, set()).add(ax.sup.prop)
    labels = dict(onto.labels)
    namespaces = sorted({_namespace(i) for i in (*onto.classes, *onto.object_properties, *onto.data_properties)})
    prefixes = {"": namespaces[0]} if len(namespaces) == 1 else {f"ns{i + 1}": ns for i, ns in enumerate(namespaces)}

    def cls(i: str) -> m.ClassTerm:
        return m.ClassTerm(iri=i, local_name=_local_name(i), label=labels.get(i), superclasses=sorted(supers.get(i, ())))

    def prop(i: str) -> m.PropertyTerm:
        return m.PropertyTerm(iri=i, local_name=_local_name(i), label=labels.get(i),
                              superproperties=sorted(psupers.get(i, ())))

    return m.OntologyResponse(
        files=[str(f) for f in onto.files], prefixes=prefixes,
        classes=[cls(i) for i in sorted(onto.classes)],
        object_properties=[prop(i) for i in sorted(onto.object_properties)],
        data_properties=[prop(i) for i in sorted(onto.data_properties)],
    )
