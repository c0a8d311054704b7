"""Helpers of the users-and-roles tests: a users file with real (scrypt-hashed) users, their headers."""

from __future__ import annotations

from pathlib import Path

from api.users import add_user

from apikit import AUTH

#: the users of the role tests: two operators, a reader, an admin (and the service's --token, the user "admin")
ROLES = {"alice": "operator", "bob": "operator", "rita": "reader", "ada": "admin"}


def make_users(path: Path, roles: dict[str, str] = ROLES, **rate_limits: int) -> dict[str, dict]:
    """Add ``roles`` to the users file ``path``; the ``Authorization`` header of each (and of ``admin``)."""
    headers = {"admin": AUTH}
    for name, role in roles.items():
        headers[name] = bearer(add_user(path, name, role, rate_limits.get(name)))
    return headers


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}
