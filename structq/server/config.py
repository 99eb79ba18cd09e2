"""``server.yaml``: who may call the service, with which fixed variables, on which sources.

Tokens are stored as SHA-256 hashes (``structq serve --new-token`` makes one and prints its
line): a leaked config file gives no usable token, and tokens are long random strings, so a
fast hash is enough (no password-style stretching). Each token names a user, the row-filter
variables **fixed** for it (a request can never set or change them) and the sources it may
use (all when omitted)::

    limits: {max_body_bytes: 262144, max_question_chars: 2000, requests_per_minute: 60, max_steps: 20}
    store: postgresql://structq@db.internal/structq   # plan cache + conversations, shared by workers
    tokens:
      - sha256: 3b1f…            # sha256 of the token, hex
        user: alice
        vars: {tenant_id: 1}
        sources: [hr, sales]

Without a config file the server serves one local caller (variables from ``--var``) and binds
loopback only: anyone who can reach the port would otherwise read the data.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from structq.errors import ConfigError

__all__ = ["Principal", "Limits", "ServerConfig", "hash_token", "new_token", "is_loopback_host", "bearer_token"]


def hash_token(token: str) -> str:
    """The hex SHA-256 of a token, as written in ``server.yaml``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random API token (256 bits, URL-safe)."""
    return "sq_" + secrets.token_urlsafe(32)


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    scheme, _, token = (header or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Principal:
    """Who is asking: a user, the variables fixed for them, and the sources they may use.

    ``sources`` None means every source. ``key`` identifies the caller for rate limits and
    conversations without carrying the token itself.
    """

    user: str
    vars: dict[str, Any] = field(default_factory=dict)
    sources: frozenset[str] | None = None
    key: str = "local"

    def may_use(self, source: str) -> bool:
        return self.sources is None or source in self.sources


class Limits(BaseModel):
    """Request limits; the request rate is counted per token across every worker sharing the store."""

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    max_question_chars: int = Field(default=2000, ge=1)
    requests_per_minute: float = Field(default=60, gt=0)
    #: Requests allowed at once above the steady rate.
    burst: int = Field(default=10, ge=1)
    #: Steps a plan given to ``/v1/run`` (or MCP ``run_plan``) or made by ``/v1/plan`` may have.
    max_steps: int = Field(default=20, ge=1, le=1000)
    #: Bytes of one JSON response (a streamed answer: of one event); a larger one is refused
    #: (``response_too_large``) rather than built and sent.
    max_response_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    #: Seconds one request may take from start to answer (every query has its own manifest
    #: timeout besides); past it the caller gets 504 ``request_timeout``.
    request_timeout_s: float = Field(default=120, gt=0, le=3600)


class _Token(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    user: str = Field(min_length=1)
    vars: dict[str, Any] = Field(default_factory=dict)
    sources: list[str] | None = None


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limits: Limits = Field(default_factory=Limits)
    tokens: list[_Token] = Field(default_factory=list)
    store: str | None = None


@dataclass(frozen=True)
class ServerConfig:
    """Tokens by hash and the limits. ``open`` (no config file) serves one local principal."""

    tokens: dict[str, Principal] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    local: Principal | None = None
    #: The shared store's URL (``store.py``); ``STRUCTQ_STORE_URL`` wins over it.
    store: str | None = None

    @property
    def open(self) -> bool:
        """True when no token is required (no config file): loopback only."""
        return self.local is not None

    @classmethod
    def local_only(cls, vars: dict[str, Any] | None = None, limits: Limits | None = None) -> "ServerConfig":
        return cls(local=Principal("local", dict(vars or {})), limits=limits or Limits())

    @classmethod
    def from_file(cls, path: str | Path, *, sources: list[str] | None = None) -> "ServerConfig":
        """Read ``server.yaml``; ``sources`` (the manifests' names) checks each token's list."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read the server config {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"the server config {path} is not valid YAML: {exc}") from None
        return cls.from_data(data, where=str(path), sources=sources)

    @classmethod
    def from_data(cls, data: Any, *, where: str = "server config", sources: list[str] | None = None) -> "ServerConfig":
        try:
            parsed = _File.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            at = ".".join(str(p) for p in err["loc"]) or "(top level)"
            raise ConfigError(f"{where}: {at}: {err['msg']}",
                              hint="keys: limits {max_body_bytes, max_question_chars, requests_per_minute, burst, max_steps, "
                                   "max_response_bytes, request_timeout_s}, "
                                   "tokens [{sha256, user, vars, sources}], store (a database URL)") from None
        if not parsed.tokens:
            raise ConfigError(f"{where} lists no tokens, so nobody could call the server",
                              hint="add one: structq serve --new-token USER prints a token and its config line")
        tokens: dict[str, Principal] = {}
        for i, token in enumerate(parsed.tokens):
            if token.sha256 in tokens:
                raise ConfigError(f"{where}: tokens.{i}: the same token hash is listed twice")
            unknown = sorted(set(token.sources or ()) - set(sources or token.sources or ()))
            if unknown:
                raise ConfigError(f"{where}: tokens.{i} ({token.user}) names unknown sources: {', '.join(unknown)}",
                                  hint=f"sources in the manifests: {', '.join(sources or [])}")
            allowed = frozenset(token.sources) if token.sources is not None else None
            tokens[token.sha256] = Principal(token.user, dict(token.vars), allowed, key=token.sha256[:16])
        return cls(tokens=tokens, limits=parsed.limits, store=parsed.store)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal of a bearer token (or the local one when no config); None if unknown."""
        if self.local is not None:
            return self.local
        if not token:
            return None
        return self.tokens.get(hash_token(token))
