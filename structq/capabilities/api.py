"""What an API source declares: operations (GraphQL root query fields, REST GET operations),
their arguments or parameters, the fields they return, and GraphQL's object types.

An ``Operation`` answers the same questions as ``Table`` and ``Index`` (``members``,
``flat_members``, ``readable_members``, ``member``, the words), so code that serves every kind
of source walks an API manifest's ``objects`` without asking which kind it is. What a member
is differs by kind: a REST operation's members are the response fields it declares (dotted
paths into each row); a GraphQL root field's rows are its return type's fields, declared once
under ``types:`` and shared by every field that returns the type (``Manifest.api_type``).

Pure pydantic, strict like the rest of the model; the sandboxes (``safety.graphql``,
``safety.rest``) enforce it.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .objects import _Access, _enum_keys, _Strict

__all__ = ["API_KINDS", "ApiField", "ApiType", "Argument", "Operation", "Parameter", "named_type"]

#: The manifest ``kind:`` values of API sources.
API_KINDS: tuple[str, ...] = ("graphql", "openapi")

_GRAPHQL_NAME = r"^[_A-Za-z][_0-9A-Za-z]*$"
#: A GraphQL type reference as written in SDL: ``Int``, ``[Project!]!``.
_GRAPHQL_TYPE = r"^\[*[_A-Za-z][_0-9A-Za-z]*!?(?:\]!?)*$"


def named_type(type_ref: str) -> str:
    """The named type inside a GraphQL type reference: ``[Project!]!`` → ``Project``."""
    return re.sub(r"[\[\]!]", "", type_ref)


class ApiField(_Access, _Strict):
    """One field: of a GraphQL object type (``type`` a GraphQL type reference) or of a REST
    response row (``name`` a dotted path, ``type`` a JSON-schema type). ``access: deny`` fields
    may be selected nowhere (GraphQL) and are dropped from every response (REST). ``page``
    names the argument that bounds a GraphQL list field below the root (``first``): as for an
    operation's page argument, the sandbox caps it at ``max_rows`` at every level, sets it when
    a plan does not, and counts it in the cost estimate."""

    name: str = Field(pattern=r"^[_A-Za-z][\w.-]*$")
    type: str
    description: str = ""
    page: str | None = Field(default=None, pattern=_GRAPHQL_NAME)
    values: dict[str, str] | None = None
    access: Literal["allow", "deny"] = "allow"
    synonyms: list[str] = Field(default_factory=list)
    draft: bool = False

    _values = field_validator("values", mode="before")(_enum_keys)


class ApiType(_Strict):
    """A GraphQL object type a query may select fields of (``types:``)."""

    name: str = Field(pattern=_GRAPHQL_NAME)
    description: str = ""
    fields: list[ApiField] = Field(min_length=1)
    draft: bool = False

    def field(self, name: str) -> ApiField | None:
        return next((f for f in self.fields if f.name == name), None)


class Argument(_Strict):
    """An argument of a GraphQL root field. ``page: true`` marks the one that bounds the list
    (``first``, ``limit``): the sandbox caps it at ``max_rows`` and sets it when a plan does not."""

    name: str = Field(pattern=_GRAPHQL_NAME)
    type: str = Field(pattern=_GRAPHQL_TYPE)
    description: str = ""
    page: bool = False

    @property
    def required(self) -> bool:
        return self.type.endswith("!")


class Parameter(_Strict):
    """A parameter of a REST operation: where it goes (``in``) and its JSON schema (``type``,
    ``enum``, ``minimum``/``maximum``, ``format``, ``items``…), checked before any request.
    ``page: true`` as for ``Argument``."""

    name: str = Field(pattern=r"^[^\x00-\x1f\s{}/?#&=]+$")
    in_: Literal["query", "path"] = Field(default="query", alias="in")
    required: bool = False
    description: str = ""
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    page: bool = False


class Operation(_Strict):
    """One thing an API source answers: a GraphQL root query field, or a REST operation.

    GraphQL: ``name`` is the root field, ``returns`` its type, ``arguments`` its arguments.
    REST: ``name`` is the ``operationId``, ``method``/``path`` where it lives (relative to the
    manifest's ``url``), ``parameters``, and ``fields`` the response fields of one row; an
    operation that is not a GET is recorded with ``callable: false`` and can never run.
    ``rows`` is the dotted path to the list of rows in the response (default: the first list).
    """

    word: ClassVar[str] = "operation"
    plural: ClassVar[str] = "operations"
    member_word: ClassVar[str] = "field"
    member_plural: ClassVar[str] = "fields"
    keyed: ClassVar[bool] = False

    name: str = Field(pattern=_GRAPHQL_NAME)
    description: str = ""
    synonyms: list[str] = Field(default_factory=list)
    returns: str | None = Field(default=None, pattern=_GRAPHQL_TYPE)
    arguments: list[Argument] = Field(default_factory=list)
    method: str = "get"
    path: str | None = None
    parameters: list[Parameter] = Field(default_factory=list)
    fields: list[ApiField] = Field(default_factory=list)
    rows: str | None = None
    callable: bool = True
    draft: bool = False

    @field_validator("fields", "arguments", "parameters", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        """``fields:`` with nothing under it (``structq sync`` adds an operation so) is empty."""
        return [] if value is None else value

    @field_validator("method")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @property
    def readable(self) -> bool:
        """Whether a plan may call it as a REST operation: a GET, not ``callable: false``, with
        its ``path`` (one ``structq sync`` added has none until a person gives it)."""
        return self.callable and self.method == "get" and self.path is not None

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)

    @property
    def members(self) -> list[ApiField]:
        return self.fields

    def flat_members(self) -> dict[str, ApiField]:
        return {f.name: f for f in self.fields}

    def readable_members(self) -> dict[str, ApiField]:
        """Fields a result may carry: denied ones, and every path under one, left out."""
        denied = [f.name for f in self.fields if f.denied]
        return {f.name: f for f in self.fields
                if not any(f.name == d or f.name.startswith(d + ".") for d in denied)}

    def member(self, name: str) -> ApiField | None:
        return self.flat_members().get(name)
