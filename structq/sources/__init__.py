"""The registry of source kinds: what ``sql``, search and ``local`` sources each provide.

A plan step names a source; the source's kind decides how its query is validated, checked,
run and capped. Everything kind-specific lives in the kind's module (``sql.py``,
``search.py``, ``local.py``, each a ``SourceKind``); the rest of structq looks the kind up
here (``kind_of`` for a manifest, ``step_kind`` for a step's source) instead of asking
"is it a search source?". A new kind — an HTTP API, DuckDB files — is one new module and one
entry in ``KINDS``.

This is the only registry of kinds: executors do not register themselves; each kind names
the executor class of every manifest ``kind:`` it serves (``SourceKind.executors``).

Layer: above ``executors`` and ``safety`` (a kind names its sandbox check and executor), below
``agent``, ``sync``, ``cli``, ``server`` and ``langchain``, which use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from structq.errors import ConfigError

from .base import Bound, SourceKind
from .graphql import GraphqlKind
from .local import LocalKind
from .openapi import OpenapiKind
from .search import SearchKind
from .sql import SqlKind

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet, Manifest
    from structq.executors.base import Executor

__all__ = ["KINDS", "Bound", "SourceKind", "builtin_sources", "executor_for", "is_builtin", "kind_of", "objects",
           "per_kind", "step_kind"]

T = TypeVar("T")

#: Every kind of source. A new kind is one module and one entry here.
KINDS: tuple[SourceKind, ...] = (SqlKind(), SearchKind(), LocalKind(), GraphqlKind(), OpenapiKind())

_BY_MANIFEST_KIND = {name: kind for kind in KINDS for name in kind.manifest_kinds}
_BY_SOURCE = {name: kind for kind in KINDS for name in kind.builtin_sources}


def kind_of(manifest: "Manifest") -> SourceKind:
    """The kind that serves ``manifest`` (by its ``kind:``); a ``ConfigError`` naming the known
    kinds when none does (a manifest built in code can carry any ``kind``)."""
    try:
        return _BY_MANIFEST_KIND[manifest.kind]
    except KeyError:
        raise ConfigError(f"source {manifest.source!r}: no source kind {manifest.kind!r}",
                          hint=f"set kind: to one of {', '.join(sorted(_BY_MANIFEST_KIND))}") from None


def executor_for(manifest: "Manifest") -> "Executor":
    """A new executor for ``manifest``'s source, from its kind (a ``ConfigError`` for a kind
    the registry does not know)."""
    return kind_of(manifest).executor(manifest)


def step_kind(source: str, capabilities: "CapabilitySet") -> SourceKind:
    """The kind of the source a step names: a built-in source (``local``) or a declared one
    (a ``KeyError`` naming the closest source when there is none)."""
    builtin = _BY_SOURCE.get(source)
    return builtin if builtin is not None else kind_of(capabilities[source])


def builtin_sources() -> list[str]:
    """Source names that need no manifest."""
    return list(_BY_SOURCE)


def is_builtin(source: str) -> bool:
    """Whether a step's ``source`` is built in (``local``: it reads only earlier results of
    the same plan, so it needs no manifest, no grant and no connection)."""
    return source in _BY_SOURCE


def objects(manifest: "Manifest") -> Sequence[Any]:
    """The tables or indices ``manifest`` declares."""
    return kind_of(manifest).objects(manifest)


def per_kind(table: Mapping[str, T], manifest: "Manifest", what: str) -> T:
    """``table``'s entry for ``manifest``'s kind (keyed by ``SourceKind.name``).

    For behaviour a layer above this one keeps per kind (sync's introspection readers): one
    table per module, one entry per kind, and a kind without an entry fails here, by name,
    rather than silently taking another kind's branch."""
    kind = kind_of(manifest)
    try:
        return table[kind.name]
    except KeyError:
        raise ConfigError(f"source {manifest.source!r}: source kind {kind.name!r} has no {what}",
                          hint=f"kinds with one: {', '.join(sorted(table))}") from None
