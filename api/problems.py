"""RFC 9457 problem details (``application/problem+json``) for every error the service returns.

A problem is ``{"type", "title", "status", "detail", "instance"}`` plus
extensions.  obda's typed errors become problems with their ``code``, their
``location`` (``line`` and ``column`` in the submitted query text for syntax
errors and unknown terms) and, where they have them, the unsupported
``construct`` or the list of validation ``problems``.  Unexpected exceptions
become a 500 problem without internals (logged on the server).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from obda.errors import ObdaError, QuerySyntaxError

log = logging.getLogger("obda.api")

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:obda:problem:"


class ApiProblem(Exception):
    """An error the service answers with a problem document (raised by endpoints and dependencies)."""

    def __init__(self, status: int, code: str, detail: str, *, title: str | None = None, headers: dict | None = None, **extra: Any):
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase
        self.headers = headers or {}
        self.extra = extra
        super().__init__(detail)


def problem_body(status: int, code: str, title: str, detail: str, instance: str | None = None, **extra: Any) -> dict:
    """The JSON body of a problem: the RFC 9457 members first, then the extensions."""
    body = {"type": TYPE_PREFIX + code, "title": title, "status": status, "detail": detail}
    if instance is not None:
        body["instance"] = instance
    body["code"] = code
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def problem_response(status: int, code: str, detail: str, *, title: str | None = None, instance: str | None = None,
                     headers: dict | None = None, **extra: Any) -> JSONResponse:
    body = problem_body(status, code, title or HTTPStatus(status).phrase, detail, instance, **extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def status_of(error: ObdaError) -> int:
    """HTTP status of an obda error raised while handling user input.

    Syntax errors are malformed requests (400); a well-formed query that
    obda cannot accept (unsupported construct, unknown term, outside the
    analysed class, not executable) is unprocessable content (422).
    """
    return 400 if isinstance(error, QuerySyntaxError) else 422


def obda_problem(error: ObdaError, instance: str | None = None, status: int | None = None, **extra: Any) -> JSONResponse:
    """The problem response of an obda error: code, message, location (line/column), construct, problems."""
    d = error.to_dict()
    loc = d.get("location") or {}
    location = {k: v for k, v in loc.items() if v is not None} or None
    return problem_response(
        status or status_of(error),
        d.get("code", "obda_error"),
        d.get("message", str(error)),
        title=_TITLES.get(d.get("code", ""), "Invalid query"),
        instance=instance,
        location=location,
        construct=d.get("construct"),
        problems=d.get("problems"),
        **extra,
    )


_TITLES = {
    "query_syntax_error": "SPARQL syntax error",
    "unsupported_construct": "Unsupported SPARQL construct",
    "unknown_term": "Unknown ontology term",
    "analysis_error": "Query outside the analysed class",
    "execution_error": "Query cannot be executed",
    "checkpoint_error": "Query state cannot be used",
    "rewriting_error": "Rewriting too large",
    "validation_error": "Project validation failed",
}


def install_handlers(app: FastAPI) -> None:
    """Render every error of the app as problem+json."""

    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem):
        return problem_response(exc.status, exc.code, exc.detail, title=exc.title, instance=request.url.path,
                                headers=exc.headers, **exc.extra)

    @app.exception_handler(ObdaError)
    async def _obda_error(request: Request, exc: ObdaError):
        return obda_problem(exc, instance=request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        first = errors[0] if errors else None
        if any(e["type"] == "json_invalid" for e in errors):  # a body that is not JSON at all: malformed, 400
            bad = next(e for e in errors if e["type"] == "json_invalid")
            return problem_response(400, "malformed_json", f"the request body is not valid JSON: {bad['msg']}",
                                    instance=request.url.path, errors=errors)
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method in ("POST", "PUT", "PATCH") and ctype and ctype != "application/json" and not ctype.endswith("+json"):
            return problem_response(415, "unsupported_media_type",
                                    f"the request body must be application/json, not {ctype}",
                                    instance=request.url.path, headers={"Accept-Post": "application/json"})
        detail = f"invalid request: {'/'.join(first['loc'])}: {first['msg']}" if first else "invalid request"
        return problem_response(422, "invalid_request", detail, instance=request.url.path, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}.get(exc.status_code, "http_error")
        return problem_response(exc.status_code, code, str(exc.detail), instance=request.url.path,
                                headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return problem_response(500, "internal_error", "the server failed to handle the request; see the server log",
                                instance=request.url.path)
