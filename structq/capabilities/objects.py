"""What a source declares: tables with their columns, search indices with their fields.

``Table`` and ``Index`` answer the same questions — ``members`` (as declared),
``flat_members`` (by name or dotted path), ``readable_members`` (what a query may name),
``member``, and the words ``word`` / ``plural`` / ``member_word`` / ``member_plural`` — so code
that serves every kind of source walks a manifest's ``objects`` (``model.Manifest``) without
asking which kind it is. Pydantic, strict like the rest of the model.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "OBJECT_TYPES",
    "SQL_COLUMN_TYPES",
    "SEARCH_FIELD_TYPES",
    "Coverage",
    "Column",
    "Table",
    "SearchField",
    "Index",
]

SqlColumnType = Literal["text", "integer", "real", "numeric", "boolean", "date", "datetime", "json", "binary"]
SearchFieldType = Literal[
    "keyword", "text", "date", "long", "integer", "short", "byte", "double", "float", "scaled_float",
    "boolean", "nested", "object", "ip",
]
#: The same choices as tuples, for code that checks or lists them.
SQL_COLUMN_TYPES: tuple[str, ...] = typing.get_args(SqlColumnType)
SEARCH_FIELD_TYPES: tuple[str, ...] = typing.get_args(SearchFieldType)

#: Table and column names: whatever the database allows (spaces, non-ASCII letters, %, …),
#: but no control characters and no surrounding blanks. The sandbox quotes them as needed.
_NAME = r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?$"


class _Strict(BaseModel):
    """Unknown keys are errors; models are immutable once loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


def _enum_keys(values: Any) -> Any:
    """YAML reads ``{1: 男}`` with an int key; enums compare as text, so keys become strings."""
    if not isinstance(values, dict):
        return values  # the wrong shape: pydantic reports it, the loader explains the form
    return {str(k) if k is None else _text(k): _text(v) for k, v in values.items()}


def _text(value: Any) -> Any:
    """A scalar as enum text (``true``, ``1``, an empty meaning as ``""``); a list or mapping is
    left as it is, for pydantic to refuse: a meaning is one piece of text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, (str, int, float)) else value


class Coverage(_Strict):
    """The period a date column's data covers and how its values are stored, as ``structq
    init``/``sync`` last measured them: the planner needs both to turn "last quarter" into a
    literal that matches something (a question about "the past 7 days" of data that ended last
    year deserves a warning, not an empty result)."""

    min: str
    max: str
    #: How the values are stored: ``date``, ``datetime``, ``ISO date text``, ``epoch seconds``…
    format: str = ""


class _Access:
    """``access: deny`` as a question (columns and fields). Holds no field of its own, so each
    model keeps its fields in the order it declares them.

    ``access: restricted`` is denied exactly as ``deny`` is (no query may name it, no value of
    it is read), but the planner is told that it exists, so a question about it is declined
    precisely instead of answered from some other column. ``deny`` keeps even the name out."""

    if typing.TYPE_CHECKING:
        access: str

    @property
    def denied(self) -> bool:
        return self.access in ("deny", "restricted")

    @property
    def restricted(self) -> bool:
        """Denied, but named in the prompt as restricted."""
        return self.access == "restricted"


class Column(_Access, _Strict):
    """One column of a table. ``access: deny`` columns may appear nowhere in a query."""

    name: str = Field(pattern=_NAME)
    type: SqlColumnType
    description: str = ""
    values: dict[str, str] | None = None
    references: str | None = Field(default=None, pattern=r"^[^.\x00-\x1f]+\.[^.\x00-\x1f]+$")
    #: ``references`` was inferred by ``structq init`` from names, types and data, not declared
    #: by the database; it joins like any other (review it, then remove the flag).
    inferred: bool = False
    access: Literal["allow", "deny", "restricted"] = "allow"
    synonyms: list[str] = Field(default_factory=list)
    primary_key: bool = False
    nullable: bool | None = None
    #: Measured by sync for date columns; refreshed by every sync, never drift.
    coverage: Coverage | None = None
    #: Added by ``structq sync`` and not yet described by a person.
    draft: bool = False

    _values = field_validator("values", mode="before")(_enum_keys)


class Table(_Strict):
    """A table or view the planner may read.

    ``Table`` and ``Index`` answer the same questions (``members``, ``flat_members``,
    ``readable_members``, ``member``, the words below), so code that serves every kind of
    source reads a manifest's ``objects`` through them instead of asking which kind it is.
    """

    #: What one is called, and the manifest key its list sits under.
    word: ClassVar[str] = "table"
    plural: ClassVar[str] = "tables"
    #: What its members are called, and the key they sit under.
    member_word: ClassVar[str] = "column"
    member_plural: ClassVar[str] = "columns"
    #: Whether members carry keys (``primary_key``, ``nullable``, ``references``) that join objects.
    keyed: ClassVar[bool] = True

    name: str = Field(pattern=_NAME)
    description: str = ""
    synonyms: list[str] = Field(default_factory=list)
    columns: list[Column] = Field(min_length=1)
    draft: bool = False

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive), or None."""
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    @property
    def allowed_columns(self) -> list[Column]:
        return [c for c in self.columns if not c.denied]

    @property
    def members(self) -> list[Column]:
        """The columns, as declared."""
        return self.columns

    def flat_members(self) -> dict[str, Column]:
        """Every column by name (a table has no sub-columns)."""
        return {c.name: c for c in self.columns}

    def readable_members(self) -> dict[str, Column]:
        """The columns a query may name, by name (``access: deny`` ones left out)."""
        return {c.name: c for c in self.allowed_columns}

    def member(self, name: str) -> Column | None:
        return self.column(name)


class SearchField(_Access, _Strict):
    """One field of a search index; dotted names address object sub-fields."""

    name: str = Field(pattern=r"^[A-Za-z_@][\w.@-]*$")
    type: SearchFieldType
    description: str = ""
    values: dict[str, str] | None = None
    access: Literal["allow", "deny", "restricted"] = "allow"
    synonyms: list[str] = Field(default_factory=list)
    #: Sub-fields of a ``nested`` or ``object`` field.
    fields: list[SearchField] = Field(default_factory=list)
    draft: bool = False

    _values = field_validator("values", mode="before")(_enum_keys)


class Index(_Strict):
    """A search index (never a pattern, alias list or remote cluster); see ``Table`` for the
    accessors both share."""

    word: ClassVar[str] = "index"
    plural: ClassVar[str] = "indices"
    member_word: ClassVar[str] = "field"
    member_plural: ClassVar[str] = "fields"
    keyed: ClassVar[bool] = False

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    description: str = ""
    synonyms: list[str] = Field(default_factory=list)
    fields: list[SearchField] = Field(min_length=1)
    #: JSON-lines documents the embedded search server loads at start (relative to the manifest).
    documents: str | None = None
    draft: bool = False

    def flat_fields(self) -> dict[str, SearchField]:
        """Every field by its full dotted path, sub-fields included."""
        out: dict[str, SearchField] = {}

        def walk(fields: list[SearchField], prefix: str) -> None:
            for f in fields:
                path = f"{prefix}{f.name}"
                out[path] = f
                walk(f.fields, path + ".")

        walk(self.fields, "")
        return out

    @property
    def members(self) -> list[SearchField]:
        """The top-level fields, as declared (sub-fields under each)."""
        return self.fields

    def flat_members(self) -> dict[str, SearchField]:
        return self.flat_fields()

    def readable_members(self) -> dict[str, SearchField]:
        """The fields a query may name, by dotted path: a denied field and every sub-field
        under it left out."""
        fields = self.flat_fields()
        denied = [p for p, f in fields.items() if f.denied]
        return {p: f for p, f in fields.items() if not any(p == d or p.startswith(d + ".") for d in denied)}

    def member(self, name: str) -> SearchField | None:
        """The field at dotted path ``name``, or None."""
        return self.flat_fields().get(name)


#: Every kind of object a manifest may declare (``model.Manifest.object_type`` is one of them).
OBJECT_TYPES: tuple[type[Table | Index], ...] = (Table, Index)
