"""Who is calling and what they may do: principals, roles, per-user rate limits and stream cookies.

Roles (:data:`api.users.ROLES`):

* ``reader`` — analyses queries (``POST /v1/analyze``), reads the ontology and validates the project, and
  reads the status and answers of the queries *shared with it*;
* ``operator`` — also registers queries and starts, stops, deletes and shares *its own*;
* ``admin`` — everything, on every query (the single ``--token`` / ``OBDA_TOKEN`` is the admin ``admin``).

Every query has an owner.  A query a caller may not see answers 404 exactly as a query that does not exist
(its existence is not revealed); one it may see but not change answers 403.  Each user's requests are
limited by a token bucket (``rate_limit`` per minute, ``rate_burst`` at once; a user of the users file may
have its own rate): above it, 429 with ``Retry-After``.

A browser's ``EventSource`` reads a query's stream with a short-lived cookie instead of the bearer token:
its value is ``<expires>.<HMAC>.<user>``, the HMAC (keyed by the service's stream key) covering the user, the
query and the expiry, so a cookie works only for that user and query, and only while the user still exists
and may see the query.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from api.problems import ApiProblem
from api.settings import Settings
from api.users import LEGACY_ADMIN, UserDirectory

#: the stream cookie's key, kept in the state folder so that a restarted service accepts its cookies
STREAM_KEY_FILE = "stream.key"
BUCKETS = 10_000  # rate-limit buckets kept (full ones are forgotten first)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    name: str
    role: str
    rate_limit: int  # requests per minute (0: none)

    @property
    def admin(self) -> bool:
        return self.role == "admin"


def may_see(p: Principal, owner: str, shared_with) -> bool:
    """Whether ``p`` may read a query of ``owner`` shared with ``shared_with`` (status, answers, its stream)."""
    return p.admin or owner == p.name or p.name in shared_with


def may_control(p: Principal, owner: str) -> bool:
    """Whether ``p`` may start, stop, delete and share a query of ``owner``."""
    return p.admin or (p.role == "operator" and owner == p.name)


def may_register(p: Principal) -> bool:
    return p.role in ("operator", "admin")


def forbidden(p: Principal, what: str) -> ApiProblem:
    return ApiProblem(403, "forbidden", f"user {p.name!r} (role {p.role}) may not {what}; an operator may on its own "
                      "queries, an admin on every query", role=p.role)


def stream_ticket(key: bytes, user: str, query_id: str, expires: int) -> str:
    """A stream cookie's value: its expiry, an HMAC of the user, the query and the expiry, and the user."""
    mac = hmac.new(key, f"stream:{user}:{query_id}:{expires}".encode(), hashlib.sha256).hexdigest()
    return f"{expires}.{mac}.{user}"


def ticket_user(key: bytes, query_id: str, ticket: str | None, now: float) -> str | None:
    """The user of a valid, unexpired stream cookie for ``query_id`` (None otherwise)."""
    expires, _, rest = (ticket or "").partition(".")
    _mac, _, user = rest.partition(".")
    if not expires.isdigit() or len(expires) > 12 or int(expires) < now or not user:
        return None
    expected = stream_ticket(key, user, query_id, int(expires))
    return user if secrets.compare_digest(ticket.encode(), expected.encode()) else None


class RateLimiter:
    """Token buckets per user: ``burst`` requests at once, refilled at ``per_minute`` a minute."""

    def __init__(self, burst: int):
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}  # user → (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str, per_minute: int) -> float | None:
        """Take one request of ``key``'s bucket; None when allowed, else the seconds until one is allowed."""
        if per_minute <= 0:
            return None
        rate = per_minute / 60.0
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                return (1.0 - tokens) / rate
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > BUCKETS:
                self._forget(now, rate)
            return None

    def _forget(self, now: float, rate: float) -> None:
        full = [k for k, (t, at) in self._buckets.items() if t + (now - at) * rate >= self.burst]
        for k in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[k]


def _stream_key(state_dir: Path | None) -> bytes:
    if state_dir is None:
        return secrets.token_bytes(32)
    path = Path(state_dir) / STREAM_KEY_FILE
    try:
        key = path.read_bytes()
        if len(key) == 32:
            return key
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    tmp = path.with_name(f".{STREAM_KEY_FILE}.{secrets.token_hex(4)}")
    with open(tmp, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as fh:
        fh.write(key)
    tmp.replace(path)
    return key


class Access:
    """The service's authentication, rate limiting and stream cookies."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.users = UserDirectory(settings.users_file, settings.token)
        self.limiter = RateLimiter(settings.rate_burst)
        self.stream_key = _stream_key(settings.state_dir)

    def _principal(self, user) -> Principal:
        rate = user.rate_limit if user.rate_limit is not None else self.settings.rate_limit
        return Principal(user.name, user.role, rate)

    def identify(self, token: str | None) -> Principal | None:
        """The caller a bearer token belongs to (None: no such token)."""
        if not token:
            return None
        user = self.users.authenticate(token)
        return self._principal(user) if user is not None else None

    def authenticate(self, scheme: str | None, token: str | None, client: str = "") -> Principal:
        """The caller, or a 401 problem; a 429 once ``client`` (its address) sent more requests without a valid
        token than a user's rate allows (a wrong token has no user whose bucket it could use)."""
        if token is None or (scheme or "").lower() != "bearer":
            self._refused(client)
            raise ApiProblem(401, "unauthorized", "missing bearer token: send 'Authorization: Bearer <token>'",
                             headers={"WWW-Authenticate": 'Bearer realm="obda"'})
        p = self.identify(token)
        if p is None:
            self._refused(client)
            raise ApiProblem(401, "unauthorized", "the bearer token is not valid",
                             headers={"WWW-Authenticate": 'Bearer realm="obda", error="invalid_token"'})
        return p

    def _refused(self, client: str) -> None:
        """Count a request without a valid token against its client's bucket (429 once it is empty)."""
        wait = self.limiter.take("\0client " + client, self.settings.rate_limit)  # never a user's name
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise ApiProblem(429, "rate_limited", f"{client or 'this client'} sent more than "
                             f"{self.settings.rate_limit} requests a minute without a valid token "
                             f"({self.settings.rate_burst} at once); retry in {seconds} s",
                             headers={"Retry-After": str(seconds)}, retry_after=seconds)

    def from_ticket(self, query_id: str, ticket: str | None) -> Principal | None:
        """The caller of a stream cookie, while the cookie is valid and its user exists."""
        name = ticket_user(self.stream_key, query_id, ticket, time.time())
        user = self.users.user(name) if name is not None else None
        return self._principal(user) if user is not None else None

    def ticket(self, p: Principal, query_id: str, expires: int) -> str:
        return stream_ticket(self.stream_key, p.name, query_id, expires)

    def throttle(self, p: Principal) -> None:
        """429 with ``Retry-After`` when ``p`` sends more than its rate allows."""
        wait = self.limiter.take(p.name, p.rate_limit)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise ApiProblem(429, "rate_limited", f"user {p.name!r} sent more than {p.rate_limit} requests a minute "
                             f"({self.settings.rate_burst} at once); retry in {seconds} s",
                             headers={"Retry-After": str(seconds)}, retry_after=seconds)

    def known_users(self) -> set[str]:
        return self.users.names()


__all__ = ["LEGACY_ADMIN", "Access", "Principal", "may_control", "may_register", "may_see"]
