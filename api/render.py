"""How the service renders what it returns: query status, answers as Server-Sent Events, the ontology's terms,
the docs pages.

Helpers of :mod:`api.app`'s endpoints; they only read (a query, its results, the ontology) and build response
bodies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from typing import AsyncIterator

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from api import models as m
from api.registered import RegisteredQuery
from api.settings import Settings

log = logging.getLogger("obda.api")


DOCS_ASSETS = "/docs-assets"


def install_docs(app: FastAPI) -> None:
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


def verdict(report) -> str:
    v = getattr(report, "verdict", None)
    return str(getattr(v, "value", v)).lower()


def jsonable(obj):
    """Plain JSON values (enums, tuples, paths → JSON); a decimal is a number, as in every output of obda
    (:func:`obda.execution.sinks.json_value`)."""
    from decimal import Decimal

    from obda.execution.sinks import json_value

    return json.loads(json.dumps(obj, default=lambda o: json_value(o) if isinstance(o, Decimal) else getattr(o, "value", str(o))))


def info(q: RegisteredQuery) -> m.QueryInfo:
    base = f"/v1/queries/{q.id}"
    return m.QueryInfo(
        id=q.id, name=q.name, owner=q.owner, shared_with=list(q.shared_with), status=q.status, verdict=q.verdict, constrained_verdict=q.constrained_verdict,
        constraints=q.constraints, query=q.text,
        sql=q.compilation.to_sql("spark") if q.compilation is not None else "",
        columns=list(q.compilation.columns) if q.compilation is not None else [],
        distinct=q.compilation.distinct if q.compilation is not None else False, allow_unbounded=q.allow_unbounded,
        idle_timeout=q.idle_timeout, created_at=q.created_at, started_at=q.started_at, stopped_at=q.stopped_at,
        error=q.error, resumable=q.resumable, results=q.results.last_seq,
        output=q.output, shed=q.shed, incomplete_since=q.incomplete_since, metrics=jsonable(q.metrics()) if q.handle is not None else None,
        links=m.Links(self=base, start=f"{base}/start", stop=f"{base}/stop", results=f"{base}/results",
                      stream=f"{base}/results/stream"),
    )


def _event(event: str, data: dict, id: int | None = None) -> bytes:
    lines = [f"event: {event}"]
    if id is not None:
        lines.append(f"id: {id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


async def sse(request: Request, q: RegisteredQuery, after: int, limit: int | None, settings: Settings,
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


def ontology(onto) -> m.OntologyResponse:
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
