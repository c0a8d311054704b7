"""The audit log: one JSON line per state-changing call — who did what to which query, when, and how it ended.

Written to ``Settings.audit_path`` (``<state dir>/audit.jsonl`` by default; mode 0600) and to the
``obda.audit`` logger.  A line::

    {"time": "2025-01-01T12:00:00.000000Z", "user": "alice", "action": "start",
     "query_id": "3f…", "outcome": "ok", "status": 200}

``action`` is ``register``, ``start``, ``stop``, ``delete``, ``share`` or ``stream_session``; ``user`` is null
when the caller did not authenticate; ``outcome`` is ``ok`` (2xx), ``refused`` (4xx, with the problem's
``code``: ``forbidden``, ``query_not_found``, ``rate_limited``, …) or ``error`` (5xx).  Refused calls are
recorded too: an attempt on another user's query is in the log.  No token, request body or query text is
ever written.

The log is an ASGI middleware around the whole app, so calls refused before any endpoint runs (401, 413,
429) are recorded as well; the endpoints put the caller (``obda_user``) and a new query's id
(``obda_query_id``) in the request's state, where the middleware reads them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("obda.audit")

USER_KEY = "obda_user"
QUERY_KEY = "obda_query_id"

_PATH = re.compile(r"^/v1/queries(?:/(?P<id>[^/]+)(?P<rest>/start|/stop|/shared-with|/results/stream-session)?)?/?$")
#: (method, has a query id, rest of the path) → action
ACTIONS = {
    ("POST", False, None): "register",
    ("POST", True, "/start"): "start",
    ("POST", True, "/stop"): "stop",
    ("DELETE", True, None): "delete",
    ("PUT", True, "/shared-with"): "share",
    ("POST", True, "/results/stream-session"): "stream_session",
}
_BODY_KEPT = 8192  # bytes of a refusal's problem body read for its code


def action_of(method: str, path: str) -> tuple[str, str | None] | None:
    """The audited action of a request and the query id in its path (None: not a state-changing call)."""
    m = _PATH.match(path)
    if m is None:
        return None
    action = ACTIONS.get((method.upper(), m.group("id") is not None, m.group("rest")))
    return (action, m.group("id")) if action is not None else None


class AuditLog:
    """Appends audit lines to a file (None: only to the ``obda.audit`` logger)."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))

    def record(self, user: str | None, action: str, query_id: str | None, status: int, code: str | None = None) -> dict:
        outcome = "ok" if status < 400 else "refused" if status < 500 else "error"
        entry = {"time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "user": user,
                 "action": action, "query_id": query_id, "outcome": outcome, "status": status}
        if code is not None:
            entry["code"] = code
        line = json.dumps(entry, separators=(",", ":"))
        log.info("%s", line)
        if self.path is not None:
            with self._lock:
                try:
                    with open(self.path, "a", encoding="utf-8") as fh:
                        fh.write(line + "\n")
                except OSError as e:  # the call itself happened: the service says so in its log
                    log.error("audit log %s cannot be written (%s): %s", self.path, e.strerror, line)
        return entry


def _problem_code(body: bytes) -> str | None:
    try:
        code = json.loads(body.decode("utf-8")).get("code")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    return code if isinstance(code, str) else None


class AuditMiddleware:
    """Records every state-changing call in the audit log, whatever its outcome."""

    def __init__(self, app: ASGIApp, audit: AuditLog):
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = action_of(scope.get("method", ""), scope.get("path", ""))
        if found is None:
            await self.app(scope, receive, send)
            return
        action, query_id = found
        state = scope.setdefault("state", {})
        status = 500
        body = bytearray()

        async def send_and_see(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400 and len(body) < _BODY_KEPT:
                body.extend(message.get("body", b"")[: _BODY_KEPT - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, send_and_see)
        finally:
            self.audit.record(state.get(USER_KEY), action, state.get(QUERY_KEY) or query_id, status,
                              _problem_code(bytes(body)) if status >= 400 else None)
