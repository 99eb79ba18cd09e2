"""``server.yaml``: who may call the service, with which fixed variables, on which sources.

Tokens are stored as SHA-256 hashes (``structq serve --new-token`` makes one and prints its
line): a leaked config file gives no usable token, and tokens are long random strings, so a
fast hash is enough (no password-style stretching). Each token names a user, the row-filter
variables **fixed** for it (a request can never set or change them) and the sources it may
use (all when omitted)::

    limits: {max_body_bytes: 262144, max_question_chars: 2000, requests_per_minute: 60, max_steps: 20}
    store: postgresql://structq@db.internal/structq   # plan cache + conversations, shared by workers
    conversation_days: 30     # conversations nobody continued for this long are forgotten
    tokens:
      - sha256: 3b1f…            # sha256 of the token, hex
        user: alice
        vars: {tenant_id: 1}
        sources: [hr, sales]
      - sha256: 9c2e…
        user: prometheus
        metrics: true            # may read /metrics
        sources: []

Without a config file the server serves one local caller (variables from ``--var``) and binds
loopback only: anyone who can reach the port would otherwise read the data.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from structq.errors import ConfigError

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

__all__ = ["Principal", "Limits", "ServerConfig", "hash_token", "new_token", "is_loopback_host", "bearer_token",
           "required_variables", "check_variables"]


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
    #: May read ``/metrics`` (a monitoring system's token; the local caller always may).
    metrics: bool = False

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
    metrics: bool = False


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limits: Limits = Field(default_factory=Limits)
    tokens: list[_Token] = Field(default_factory=list)
    store: str | None = None
    conversation_days: float = Field(default=30, gt=0)


@dataclass(frozen=True)
class ServerConfig:
    """Tokens by hash and the limits. ``open`` (no config file) serves one local principal."""

    tokens: dict[str, Principal] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    local: Principal | None = None
    #: The shared store's URL (``store.py``); ``STRUCTQ_STORE_URL`` wins over it.
    store: str | None = None
    #: Conversations nobody continued for this many days are forgotten.
    conversation_days: float = 30

    @property
    def open(self) -> bool:
        """True when no token is required (no config file): loopback only."""
        return self.local is not None

    @classmethod
    def local_only(cls, vars: dict[str, Any] | None = None, limits: Limits | None = None) -> "ServerConfig":
        return cls(local=Principal("local", dict(vars or {}), metrics=True), limits=limits or Limits())

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
                                   "tokens [{sha256, user, vars, sources, metrics}], store (a database URL), conversation_days") from None
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
            tokens[token.sha256] = Principal(token.user, dict(token.vars), allowed, key=token.sha256[:16],
                                             metrics=token.metrics)
        return cls(tokens=tokens, limits=parsed.limits, store=parsed.store, conversation_days=parsed.conversation_days)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal of a bearer token (or the local one when no config); None if unknown."""
        if self.local is not None:
            return self.local
        if not token:
            return None
        return self.tokens.get(hash_token(token))


def required_variables(capabilities: "CapabilitySet") -> dict[str, list[str]]:
    """Source → the caller variables its row filters need (sources without any left out)."""
    needed = {m.source: sorted({v for f in m.policies.row_filters for v in f.variables}) for m in capabilities}
    return {source: names for source, names in needed.items() if names}


def check_variables(config: ServerConfig, capabilities: "CapabilitySet", *, command: str = "serve") -> None:
    """``ConfigError`` naming the user and the variable when a caller lacks a value for a
    row-filter variable of a source it may use: such a server would answer every question on
    that source with a refusal its callers cannot act on, so it does not start."""
    needed = required_variables(capabilities)
    callers = [config.local] if config.local is not None else list(config.tokens.values())
    for principal in callers:
        for source, names in needed.items():
            missing = [n for n in names if principal.vars.get(n) is None]
            if not principal.may_use(source) or not missing:
                continue
            name = missing[0]
            if config.local is not None:
                raise ConfigError(f"source {source!r} filters rows by the variable {name!r}, and structq {command} "
                                  "was given no value for it",
                                  hint=f"pass --var {name}=VALUE (one --var per variable: {', '.join(names)})")
            raise ConfigError(f"the token of user {principal.user!r} has no value for the variable {name!r}, "
                              f"which source {source!r} filters rows by",
                              hint=f"set it in server.yaml under that token: vars: {{{name}: …}}; or leave {source!r} "
                                   "out of the token's sources")
