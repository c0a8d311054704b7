"""Configuration of the HTTP service: one frozen value, built by hand, from the CLI or from the environment.

Every limit that protects the service lives here, so a deployment can tune it
without touching code:

* ``max_body_bytes`` — largest request body accepted (413 above it);
* ``max_query_chars`` — longest SPARQL text accepted (413 above it);
* ``max_running`` — continuous queries running at once (429 when full);
* ``max_registered`` — registered queries kept (429 when full);
* ``max_results`` — answers kept per query for paging and SSE replay (older
  ones are dropped; the paging response says from where answers are kept);
* ``max_lag_seconds`` — while the oldest unread input file of a running query has
  waited longer than this, new registrations get 429 with the reason (0: no bound);
* ``max_bytes_per_batch`` — bytes of new files one micro-batch of a query reads (at least one file per
  stream): what keeps memory flat when the input outpaces the service;
* ``forget_after_seconds`` — a consumed file that a retention job removed, whose timestamps are closed, is
  forgotten (dropped from the checkpoint) once it was read this long ago (default one hour;
  :mod:`obda.execution.consumed`);
* ``rate_limit`` / ``rate_burst`` — requests per minute per user (per token), and
  how many may come at once (429 with ``Retry-After`` above it; 0: no limit).

Who may call: ``token`` (the single admin token) and/or ``users_file``
(:mod:`api.users`: users with roles and hashed tokens).  State-changing calls are
written to the audit log, ``audit_file`` (default ``<state_dir>/audit.jsonl``).

Environment variables (for containers): ``OBDA_PROJECT``, ``OBDA_TOKEN``,
``OBDA_SPARK_MASTER``, ``OBDA_BACKEND``, ``OBDA_MAX_BODY_BYTES``,
``OBDA_MAX_QUERY_CHARS``, ``OBDA_MAX_RUNNING``, ``OBDA_MAX_REGISTERED``,
``OBDA_MAX_RESULTS``, ``OBDA_TRIGGER_INTERVAL``, ``OBDA_STATE_DIR``,
``OBDA_USERS_FILE``, ``OBDA_RATE_LIMIT``, ``OBDA_RATE_BURST``, ``OBDA_AUDIT_LOG``, ``OBDA_MAX_LAG``,
``OBDA_MAX_BYTES_PER_BATCH``, ``OBDA_FORGET_AFTER``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

#: Hard ceiling of the SPARQL text length, also written into the OpenAPI document.
QUERY_CHARS_CEILING = 100_000
BACKENDS = ("spark", "local")


@dataclass(frozen=True)
class Settings:
    """What the service needs: the project folder, who may call (the admin token, a users file), limits and the
    Spark master.

    ``backend="spark"`` runs queries on Spark (``master`` = ``local[*]`` when
    None, or e.g. ``spark://host:7077``); ``backend="local"`` evaluates the same
    pipelines in Python (small inputs, tests).
    """

    project_dir: Path
    token: str | None = None  # the single admin token (the user "admin"); None: only the users of users_file
    master: str | None = None
    backend: str = "spark"
    max_body_bytes: int = 64 * 1024
    max_query_chars: int = 20_000
    max_running: int = 4
    max_registered: int = 100
    max_lag_seconds: float = 0.0  # registrations refused (429) while a running query's input waits longer (0: never)
    max_bytes_per_batch: int = 256 << 20  # new files one micro-batch reads (obda.execution.query's default)
    max_results: int = 10_000
    forget_after_seconds: float = 3600.0  # obda.execution.consumed.FORGET_AFTER
    max_analyses: int = 2  # compilations (analyze, register) at once; more get 429 (each may take seconds)
    trigger_interval: float = 1.0
    state_dir: Path | None = None  # per query checkpoint + quarantine files; None: in memory
    sse_heartbeat: float = 15.0
    sse_poll: float = 0.2
    secure_cookies: bool = False  # the stream cookie only over HTTPS (OBDA_SECURE_COOKIES=1 behind TLS)
    users_file: Path | None = None  # users, roles and hashed tokens (api.users; `obda users add`)
    rate_limit: int = 3000  # requests per minute per user (0: no limit); a user of the users file may have its own
    rate_burst: int = 300  # requests a user may send at once before the rate applies
    audit_file: Path | None = None  # JSON lines of every state-changing call (default: <state_dir>/audit.jsonl)

    def __post_init__(self) -> None:
        object.__setattr__(self, "project_dir", Path(self.project_dir))
        for name in ("state_dir", "users_file", "audit_file"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        if self.token is None and self.users_file is None:
            raise ValueError("no bearer token and no users file: give a token (OBDA_TOKEN), a users file "
                             "(OBDA_USERS_FILE), or both")
        if self.token is not None and (not isinstance(self.token, str) or len(self.token) < 8):
            raise ValueError("the bearer token must be a string of at least 8 characters")
        if self.rate_limit < 0 or self.rate_burst < 1:
            raise ValueError("rate_limit must be 0 (no limit) or more, rate_burst at least 1")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {self.backend!r}")
        for name in ("max_body_bytes", "max_query_chars", "max_running", "max_registered", "max_results",
                     "max_analyses"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_query_chars > QUERY_CHARS_CEILING:
            raise ValueError(f"max_query_chars must not exceed {QUERY_CHARS_CEILING}")
        if self.max_bytes_per_batch < 1:
            raise ValueError("max_bytes_per_batch must be at least 1 byte")
        if self.forget_after_seconds < 0:
            raise ValueError("forget_after_seconds must be 0 or more")
        if self.max_lag_seconds < 0:
            raise ValueError("max_lag_seconds must be 0 (no bound) or more")
        if self.trigger_interval <= 0 or self.sse_heartbeat <= 0 or self.sse_poll <= 0:
            raise ValueError("trigger_interval, sse_heartbeat and sse_poll must be positive")

    @property
    def audit_path(self) -> Path | None:
        """Where the audit log is written (None: the service keeps no state folder and none was given)."""
        if self.audit_file is not None:
            return self.audit_file
        return self.state_dir / "audit.jsonl" if self.state_dir is not None else None

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None, **overrides) -> "Settings":
        """Settings from ``OBDA_*`` variables; keyword arguments win over the environment."""
        env = os.environ if env is None else env
        ints = {
            "max_body_bytes": "OBDA_MAX_BODY_BYTES",
            "max_query_chars": "OBDA_MAX_QUERY_CHARS",
            "max_running": "OBDA_MAX_RUNNING",
            "max_registered": "OBDA_MAX_REGISTERED",
            "max_results": "OBDA_MAX_RESULTS",
            "max_analyses": "OBDA_MAX_ANALYSES",
            "rate_limit": "OBDA_RATE_LIMIT",
            "rate_burst": "OBDA_RATE_BURST",
            "max_bytes_per_batch": "OBDA_MAX_BYTES_PER_BATCH",
        }
        values: dict = {
            "project_dir": env.get("OBDA_PROJECT"),
            "token": env.get("OBDA_TOKEN"),
            "master": env.get("OBDA_SPARK_MASTER") or None,
            "backend": env.get("OBDA_BACKEND") or "spark",
            "state_dir": env.get("OBDA_STATE_DIR") or None,
            "users_file": env.get("OBDA_USERS_FILE") or None,
            "audit_file": env.get("OBDA_AUDIT_LOG") or None,
        }
        for key, var in ints.items():
            if env.get(var):
                values[key] = int(env[var])
        if env.get("OBDA_MAX_LAG"):
            values["max_lag_seconds"] = float(env["OBDA_MAX_LAG"])
        if env.get("OBDA_FORGET_AFTER"):
            values["forget_after_seconds"] = float(env["OBDA_FORGET_AFTER"])
        if env.get("OBDA_SECURE_COOKIES"):
            values["secure_cookies"] = env["OBDA_SECURE_COOKIES"].strip().lower() in ("1", "true", "yes")
        if env.get("OBDA_TRIGGER_INTERVAL"):
            values["trigger_interval"] = float(env["OBDA_TRIGGER_INTERVAL"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        if not values.get("project_dir"):
            raise ValueError("no project folder: set OBDA_PROJECT or pass project_dir")
        if not values.get("token") and not values.get("users_file"):
            raise ValueError("no bearer token: set OBDA_TOKEN (or OBDA_USERS_FILE), or pass token")
        return Settings(**{k: v for k, v in values.items() if v is not None})
