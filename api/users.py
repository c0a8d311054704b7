"""The service's users file: names, roles and *hashed* tokens (``obda users add | list | remove``).

A JSON file (written atomically, mode 0600)::

    {"version": 1, "users": {"alice": {"role": "operator", "key_id": "3f9c0a1b2c4d", "kdf": "scrypt",
                                       "n": 16384, "r": 8, "p": 1, "salt": "<hex>", "hash": "<hex>",
                                       "rate_limit": null, "created_at": "..."}}}

A token is ``obda_<key_id>_<secret>`` (``secrets.token_urlsafe``): the key id, which is no secret, finds the
user; the whole token is checked against the user's scrypt hash (per-user salt; ``hmac.compare_digest``).
The token itself is printed once by ``obda users add`` and stored nowhere.  A verified token is remembered
in memory by its HMAC under a key of the process (never in clear), so only a token's first request pays the
key derivation; the memory is forgotten whenever the file changes.

The service notices changes of the file (a user added or removed while it runs) within a second: a removed
user's token stops working at once.  A file that cannot be read any more fails closed (no user of the file
is let in, the error is logged); the single ``--token`` / ``OBDA_TOKEN`` is the user :data:`LEGACY_ADMIN`.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

log = logging.getLogger("obda.api")

ROLES = ("reader", "operator", "admin")
#: the user of the single ``--token`` / ``OBDA_TOKEN``; queries of a registry older than users belong to it
LEGACY_ADMIN = "admin"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
_NAME = re.compile(NAME_PATTERN)
_TOKEN = re.compile(r"^obda_([0-9a-f]{12})_[A-Za-z0-9_-]{20,100}$")
FILE_VERSION = 1
#: scrypt's cost (RFC 7914): 16 MiB of memory per derivation
KDF = {"kdf": "scrypt", "n": 1 << 14, "r": 8, "p": 1}
RECHECK_SECONDS = 1.0  # how often the service looks at the file's modification time
CACHE_SIZE = 1024


class UsersFileError(ValueError):
    """The users file cannot be read or written, or a request to change it is not valid (the message says why)."""


@dataclass(frozen=True)
class User:
    name: str
    role: str
    rate_limit: int | None = None  # requests per minute; None: the service's (OBDA_RATE_LIMIT)
    created_at: str | None = None


def _derive(token: str, entry: dict) -> bytes:
    return hashlib.scrypt(token.encode("utf-8", "surrogatepass"), salt=bytes.fromhex(entry["salt"]), n=entry["n"],
                          r=entry["r"], p=entry["p"], maxmem=64 << 20, dklen=32)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsersFileError(f"user name {name!r} is not valid: 1 to 32 letters, digits, '_' or '-', starting with a "
                             "letter or digit")
    if name == LEGACY_ADMIN:
        raise UsersFileError(f"the name {LEGACY_ADMIN!r} is reserved for the service's --token / OBDA_TOKEN user")
    return name


# -------------------------------------------------------------------------------------- the file


def read_users(path: Path) -> dict[str, dict]:
    """The users of the file (name → entry); a missing file has none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsersFileError(f"{path}: cannot read the users file: {e}") from None
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, dict) or data.get("version") != FILE_VERSION:
        raise UsersFileError(f"{path}: not a users file of this version (expected {{\"version\": {FILE_VERSION}, "
                             "\"users\": {...}}); write it with `obda users add`")
    for name, e in users.items():
        if (not isinstance(e, dict) or e.get("role") not in ROLES or e.get("kdf") != "scrypt"
                or not all(isinstance(e.get(k), str) for k in ("key_id", "salt", "hash"))):
            raise UsersFileError(f"{path}: user {name!r} is not a valid entry")
    return users


def _write_users(path: Path, users: dict[str, dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": FILE_VERSION, "users": users}, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer of the file at a time (two ``obda users add`` at once keep both users)."""
    lock = Path(path).with_name(f".{Path(path).name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def add_user(path: Path, name: str, role: str, rate_limit: int | None = None) -> str:
    """Add a user; returns its new token (shown once: only its hash is written)."""
    check_name(name)
    if role not in ROLES:
        raise UsersFileError(f"role {role!r} is not one of {', '.join(ROLES)}")
    if rate_limit is not None and rate_limit < 1:
        raise UsersFileError("the rate limit must be at least 1 request per minute")
    with _locked(path):
        users = read_users(path)
        if name in users:
            raise UsersFileError(f"user {name!r} exists already in {path}; remove it first to give it a new token "
                                 "or role")
        key_ids = {e["key_id"] for e in users.values()}
        key_id = secrets.token_hex(6)
        while key_id in key_ids:
            key_id = secrets.token_hex(6)
        token = f"obda_{key_id}_{secrets.token_urlsafe(32)}"
        entry = {"role": role, "key_id": key_id, **KDF, "salt": secrets.token_hex(16), "rate_limit": rate_limit,
                 "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        entry["hash"] = _derive(token, entry).hex()
        users[name] = entry
        _write_users(path, users)
    return token


def remove_user(path: Path, name: str) -> None:
    with _locked(path):
        users = read_users(path)
        if name not in users:
            raise UsersFileError(f"no user {name!r} in {path}")
        del users[name]
        _write_users(path, users)


def list_users(path: Path) -> list[User]:
    return [User(n, e["role"], e.get("rate_limit"), e.get("created_at")) for n, e in sorted(read_users(path).items())]


# -------------------------------------------------------------------------------------- the service's view


class UserDirectory:
    """Who a token is: the users of the file (re-read when it changes) and the legacy admin token."""

    def __init__(self, users_file: Path | None, legacy_token: str | None):
        self.path = Path(users_file) if users_file is not None else None
        self._legacy = legacy_token.encode("utf-8") if legacy_token else None
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)  # the in-memory cache's keys are HMACs under it, never tokens
        self._cache: OrderedDict[bytes, str | None] = OrderedDict()
        self._users: dict[str, dict] = {}
        self._by_key: dict[str, str] = {}
        self._stamp: tuple | None = None
        self._checked = 0.0
        if self.path is not None:
            self._load(read_users(self.path), self._stat())  # an unreadable file stops the service from starting

    def _stat(self) -> tuple | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self, users: dict[str, dict], stamp) -> None:
        self._users = users
        self._by_key = {e["key_id"]: n for n, e in users.items()}
        self._stamp = stamp
        self._cache.clear()

    def _refresh(self) -> None:
        now = time.monotonic()
        if self.path is None or now - self._checked < RECHECK_SECONDS:
            return
        self._checked = now
        stamp = self._stat()
        if stamp == self._stamp:
            return
        try:
            self._load(read_users(self.path), stamp)
            log.info("users file %s re-read: %d user(s)", self.path, len(self._users))
        except UsersFileError as e:  # fail closed: nobody of the file gets in until it is fixed
            log.error("%s; its users are refused until it is fixed", e)
            self._load({}, stamp)

    def user(self, name: str) -> User | None:
        """The user called ``name`` now (None: removed, or never there)."""
        with self._lock:
            self._refresh()
            if name == LEGACY_ADMIN:
                return User(LEGACY_ADMIN, "admin") if self._legacy is not None else None
            e = self._users.get(name)
            return User(name, e["role"], e.get("rate_limit"), e.get("created_at")) if e is not None else None

    def names(self) -> set[str]:
        with self._lock:
            self._refresh()
            return set(self._users) | ({LEGACY_ADMIN} if self._legacy is not None else set())

    def authenticate(self, token: str) -> User | None:
        """The user whose token this is, or None."""
        raw = token.encode("utf-8", "surrogatepass")
        if self._legacy is not None and hmac.compare_digest(raw, self._legacy):
            return User(LEGACY_ADMIN, "admin")
        m = _TOKEN.match(token)
        if m is None or self.path is None:
            return None
        mac = hmac.new(self._key, raw, hashlib.sha256).digest()
        with self._lock:
            self._refresh()
            if mac in self._cache:
                self._cache.move_to_end(mac)
                name = self._cache[mac]
                return self.user_locked(name) if name is not None else None
            name = self._by_key.get(m.group(1))
            entry = self._users.get(name) if name is not None else None
            stamp = self._stamp
        ok = entry is not None and hmac.compare_digest(_derive(token, entry).hex(), entry["hash"])  # outside the lock
        with self._lock:
            if self._stamp != stamp or (entry is not None and self._users.get(name) is not entry):
                return None  # the file changed meanwhile: the entry checked may be gone (the client retries)
            self._cache[mac] = name if ok else None
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
            return self.user_locked(name) if ok else None

    def user_locked(self, name: str) -> User | None:
        """The user ``name`` of the file as last read (the caller holds the lock)."""
        e = self._users.get(name)
        return User(name, e["role"], e.get("rate_limit"), e.get("created_at")) if e is not None else None
