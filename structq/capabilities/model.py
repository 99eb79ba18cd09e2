"""The capability manifest model: what each source holds and what may be read from it.

Pydantic at the edge (manifests are user input), strict: unknown keys are errors so a typo
never silently drops a policy. The loader (``loader.py``) turns validation errors into
``ManifestError`` with file, line and column; this module only describes the shape and the
rules that need no file positions.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import Field, PrivateAttr, field_validator, model_validator

from . import objects
from .api import API_KINDS, ApiType, Operation
from .objects import (  # noqa: F401 (re-exported: the model is where callers have always found them)
    OBJECT_TYPES,
    SEARCH_FIELD_TYPES,
    SQL_COLUMN_TYPES,
    Column,
    Coverage,
    Index,
    SearchField,
    Table,
    _Strict,
)
from .slots import Slot, check_slots, step_parameters

__all__ = [  # noqa: PLE0604 (ruff cannot read the unpacked list; it holds names only)
    *objects.__all__,
    "RowFilter",
    "Policies",
    "Limits",
    "ExampleStep",
    "Example",
    "SyncSettings",
    "Manifest",
    "dialect_from_url",
    "EMBEDDED_URL",
    "is_embedded",
]

_OUTPUT_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_Scalar = str | int | float | bool


class RowFilter(_Strict):
    """A predicate added to every read of a table or index, in every scope.

    SQL sources give ``table`` and ``where`` (SQL over that table's columns, with ``:var``
    placeholders filled from the caller's variables). Search sources give ``index`` and
    ``term`` (field → ``:var`` or a literal), applied as ``bool.filter`` terms.
    A variable the caller does not supply is an error, never a silent no-filter.
    """

    table: str | None = None
    where: str | None = None
    index: str | None = None
    #: field → ``:var``, a literal, or a list of literals (applied as ``terms``).
    term: dict[str, _Scalar | list[_Scalar]] | None = None
    #: API sources: the argument of a GraphQL root field (``field: Query.projects``,
    #: ``argument``) or the parameter of a REST operation (``operation``, ``parameter``) that
    #: is always ``value`` (``:var`` or a literal); a plan may not set it.
    field: str | None = None
    argument: str | None = None
    operation: str | None = None
    parameter: str | None = None
    value: _Scalar | None = None

    @property
    def target(self) -> str | None:
        """The table, index or operation (a GraphQL root field without ``Query.``) it applies to."""
        if self.field is not None:
            return self.field.split(".", 1)[-1]
        return self.table or self.index or self.operation

    @property
    def variables(self) -> list[str]:
        """Names of the caller variables this filter needs."""
        if self.value is not None:
            return [self.value[1:]] if isinstance(self.value, str) and re.fullmatch(r":[A-Za-z_]\w*", self.value) else []
        if self.where is not None:
            return sorted(set(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", self.where)))
        found = []
        for value in (self.term or {}).values():
            if isinstance(value, str) and re.fullmatch(r":[A-Za-z_]\w*", value):
                found.append(value[1:])
        return sorted(set(found))


class Policies(_Strict):
    row_filters: list[RowFilter] = Field(default_factory=list)


class Limits(_Strict):
    """Per-source caps: rows returned to the answer, seconds a query may run, and the size of a
    query the sandbox reads (``safety/bounds.py``)."""

    max_rows: int = Field(default=1000, ge=1, le=1_000_000)
    timeout_s: float = Field(default=5.0, gt=0, le=3600)
    #: Rows a step may pass on to later steps through references.
    max_intermediate_rows: int = Field(default=100_000, ge=1, le=10_000_000)
    #: Documents a search count counts exactly; past it the search server stops and the answer is
    #: "at least N" (``track_total_hits`` is bounded, so a count over a huge index is bounded work).
    max_count: int = Field(default=1_000_000, ge=1, le=1_000_000_000)
    #: API sources: how deeply a GraphQL selection may nest, how many aliases it may use, and
    #: its estimated cost (each field 1, times the page size of every list above it).
    max_depth: int = Field(default=6, ge=1, le=50)
    max_aliases: int = Field(default=20, ge=0, le=1000)
    max_cost: int = Field(default=50_000, ge=1, le=100_000_000)
    #: API sources: requests one step may send (a list reference fans out), how many at once,
    #: requests per second to the source, and the bytes one response may have.
    max_requests: int = Field(default=50, ge=1, le=10_000)
    max_concurrency: int = Field(default=4, ge=1, le=64)
    requests_per_second: float = Field(default=10.0, gt=0, le=10_000)
    max_response_bytes: int = Field(default=5_000_000, ge=1, le=1_000_000_000)
    #: Bytes of one query (SQL text, or a search body as JSON) the sandbox reads at all: the
    #: check's cost grows with the size (and sqlglot's compiled tokenizer and parser hold the
    #: GIL while they run: in the server, other requests wait that long), and no question needs
    #: a longer query (long lists of values pass from step to step by reference).
    max_query_bytes: int = Field(default=32_768, ge=256, le=16_777_216)
    #: Tokens of one SQL query, checked after reading it and before parsing it.
    max_query_tokens: int = Field(default=10_000, ge=16, le=4_000_000)


class ExampleStep(_Strict):
    output_key: str
    source: str
    index: str | None = None
    purpose: str = ""
    #: SQL text, a search DSL body, or a GraphQL document; not given for a REST step.
    query: str | dict[str, Any] | None = None
    #: A GraphQL step's variables (values may be ``<key.column>`` references).
    variables: dict[str, Any] | None = None
    #: A REST step: the ``operationId`` and its parameters (values may be references).
    operation: str | None = None
    params: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _query_or_operation(self) -> "ExampleStep":
        if (self.query is None) == (self.operation is None):
            raise ValueError("a step has a query, or (on a REST source) an operation with its params; not both")
        if self.operation is None and self.params is not None:
            raise ValueError("params belong to a REST step, which names its operation")
        return self

    @property
    def slotted(self) -> str | dict[str, Any]:
        """Where the step's ``:name`` parameters may stand: its query, or an API step's
        variables or params (a GraphQL document has none of its own)."""
        if self.operation is not None:
            return self.params or {}
        if self.variables is not None:
            return self.variables
        return self.query if self.query is not None else {}

    @field_validator("output_key")
    @classmethod
    def _key_shape(cls, value: str) -> str:
        if not _OUTPUT_KEY.match(value):
            raise ValueError("output_key must be an identifier (letters, digits, underscore)")
        return value


class Example(_Strict):
    """A verified plan: a question whose normalised text matches skips the LLM.

    A question with relative time (去年, 上个季度, last month) declares the day its dates were
    resolved for (``today``) and the calendar unit its words count in (``period``). Asked on
    a day in another period, the plan's dates move by the periods in between (去年第三季度
    asked in 2028 reads 2027's third quarter), never answering a stale period. ``shift: false``
    is for dates that do not move by whole periods (三月第一周 starts on a different day each
    year): the example then matches only within ``today``'s period and is planned afresh after.
    """

    question: str = Field(min_length=1)
    reasoning: str = ""
    steps: list[ExampleStep] = Field(min_length=1)
    answer_with: str = ""
    today: dt.date | None = None
    period: Literal["year", "quarter", "month", "week", "day"] | None = None
    shift: bool = True
    #: The parts of the question a person may change, each bound as a parameter in the steps
    #: (``slots.py``); a question of the same shape is then answered with its values.
    slots: dict[str, Slot] = Field(default_factory=dict)
    #: Written by ``structq feedback promote`` from an answer a user rated up: it answers like
    #: any example, and is listed as a draft until a reviewer removes the flag.
    draft: bool = False
    #: The ``answer_id`` of the rated answer it came from (``structq feedback show ID``).
    feedback: str | None = None

    @model_validator(mode="after")
    def _today_with_period(self) -> "Example":
        if (self.today is None) != (self.period is None):
            raise ValueError("a relative-date example gives both today: (the day its dates were resolved for) "
                             "and period: (year, quarter, month, week or day)")
        if self.slots:
            check_slots(self.question, self.slots, [step.slotted for step in self.steps])
        elif any(step_parameters(step.slotted) for step in self.steps):
            name = sorted(p for step in self.steps for p in step_parameters(step.slotted))[0]
            raise ValueError(f"a step uses the parameter :{name} but the example declares no slots:")
        return self


class SyncSettings(_Strict):
    """What ``structq sync`` introspects: one schema, include/exclude glob patterns."""

    schema_: str | None = Field(default=None, alias="schema")
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


#: The manifest ``url`` that asks for the embedded search server, which structq starts itself.
EMBEDDED_URL = "embedded"


def is_embedded(url: str) -> bool:
    """Whether a manifest ``url`` asks for the embedded search server."""
    return url.strip().lower() == EMBEDDED_URL


def dialect_from_url(url: str) -> str | None:
    """The sqlglot dialect of a SQLAlchemy URL (``postgresql+psycopg://`` → ``postgres``)."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    return {
        "sqlite": "sqlite",
        "postgresql": "postgres",
        "postgres": "postgres",
        "mysql": "mysql",
        "mariadb": "mysql",
        "duckdb": "duckdb",
        "mssql": "tsql",
        "oracle": "oracle",
        "snowflake": "snowflake",
        "bigquery": "bigquery",
        "trino": "trino",
        "clickhouse": "clickhouse",
    }.get(scheme)


class _Shape(NamedTuple):
    """What a manifest of one ``kind:`` declares, and whether its queries are SQL text."""

    objects: type[Table | Index | Operation]
    sql: bool


#: The one place the model maps a manifest ``kind:`` to its shape; everything else asks the
#: accessors of ``Manifest`` below, or the registry of source kinds (``structq.sources``).
_SHAPES: dict[str, _Shape] = {"sql": _Shape(Table, sql=True), "elasticsearch": _Shape(Index, sql=False),
                              "opensearch": _Shape(Index, sql=False),
                              **{kind: _Shape(Operation, sql=False) for kind in API_KINDS}}


class Manifest(_Strict):
    """One source: a SQL database or a search cluster, and what of it may be read."""

    source: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: Literal["sql", "elasticsearch", "opensearch", "graphql", "openapi"]
    url: str
    #: API sources: HTTP headers sent with every request; ``${VAR}`` in a value is expanded
    #: only when the request is sent, so a credential is never part of the loaded manifest.
    headers: dict[str, str] = Field(default_factory=dict)
    #: GraphQL: the schema (SDL) saved beside the manifest; the sandbox validates against it.
    schema_file: str | None = None
    #: OpenAPI: where the description is (a path below ``url``, a URL, or a file beside the
    #: manifest), for ``structq sync --check``.
    spec: str | None = None
    dialect: str | None = None
    #: The database schema the declared tables live in. Queries may qualify tables with it
    #: (``schema.table``); any other qualifier is refused. ``structq sync`` introspects it.
    schema_: str | None = Field(default=None, alias="schema")
    description: str = ""
    limits: Limits = Field(default_factory=Limits)
    policies: Policies = Field(default_factory=Policies)
    tables: list[Table] = Field(default_factory=list)
    indices: list[Index] = Field(default_factory=list)
    operations: list[Operation] = Field(default_factory=list)
    types: list[ApiType] = Field(default_factory=list)
    functions: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    sync: SyncSettings | None = None

    _path: Path | None = PrivateAttr(default=None)
    #: (the tables list it was built from, its length, lower-cased name → table); see ``table``.
    _table_lookup: tuple[list[Table], int, dict[str, Table]] | None = PrivateAttr(default=None)

    @field_validator("tables", "indices", "operations", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        """``tables:`` with nothing under it is an empty list (a seed for ``structq sync``)."""
        return [] if value is None else value

    @property
    def path(self) -> Path | None:
        """The file this manifest was loaded from (None when built in code)."""
        return self._path

    @property
    def is_search(self) -> bool:
        """Prefer the kind-neutral accessors below (``objects``, ``object_type``,
        ``query_dialect``) or the registry (``structq.sources``): a new kind of source then
        needs no branch elsewhere. ``tests/test_architecture.py`` counts the uses."""
        return self.object_type is Index

    @property
    def runs_here(self) -> bool:
        """Whether this source's queries take this machine's cores: a SQLite file runs in this
        process, and the embedded search server is a child process structq starts. A thread
        waiting on such a source waits for the same cores, which is why ``Engine``'s pools are
        sized by it (``agent.engine.work_threads``)."""
        return self.query_dialect == "sqlite" or is_embedded(self.url)

    # --- kind-neutral accessors: what any kind of source declares, without asking which ----

    @property
    def object_type(self) -> type[Table | Index | Operation]:
        """``Table`` or ``Index``: what this source declares, and the words for it
        (``object_type.word``, ``.plural`` — also the manifest key —, ``.member_word``…)."""
        return _SHAPES[self.kind].objects

    @property
    def objects(self) -> list[Table] | list[Index] | list[Operation]:
        """The tables or indices the manifest declares, in order."""
        return getattr(self, self.object_type.plural)

    @property
    def object_word(self) -> str:
        """What one object is called: "table" or "index"."""
        return self.object_type.word

    @property
    def member_word(self) -> str:
        """What one member is called: "column" or "field"."""
        return self.object_type.member_word

    def object(self, name: str) -> Table | Index | Operation | None:
        """The table, index or operation called ``name`` (as ``table`` / ``index`` /
        ``operation`` look them up), or None."""
        if self.object_type is Operation:
            return self.operation(name)
        return self.table(name) if self.object_type is Table else self.index(name)

    @property
    def query_dialect(self) -> str | None:
        """The sqlglot dialect this source's queries are written in; None when they are not
        SQL (a search source's DSL bodies)."""
        return self.sql_dialect if _SHAPES[self.kind].sql else None

    @property
    def sql_dialect(self) -> str:
        """The sqlglot dialect queries to this source are written in."""
        if self.dialect:
            return self.dialect
        return dialect_from_url(self.url) or "sqlite"

    def table(self, name: str) -> Table | None:
        """The table called ``name`` (case-insensitive), or None.

        A dict lookup: the sandbox and the cross-checks ask for every table of a 1,000-table
        manifest, and a scan each time made loading one quadratic. The dict is rebuilt when
        ``tables`` is another list or changed length (``model_copy``, sync's edits); the first
        declaration of a name wins, as a scan would have it.
        """
        lookup = self._table_lookup
        if lookup is None or lookup[0] is not self.tables or lookup[1] != len(self.tables):
            by_name: dict[str, Table] = {}
            for table in self.tables:
                by_name.setdefault(table.name.lower(), table)
            lookup = self._table_lookup = (self.tables, len(self.tables), by_name)
        return lookup[2].get(name.lower())

    def index(self, name: str) -> Index | None:
        return next((i for i in self.indices if i.name == name), None)

    def operation(self, name: str) -> Operation | None:
        """The operation (GraphQL root field, REST operationId) called ``name``, or None."""
        return next((o for o in self.operations if o.name == name), None)

    def api_type(self, name: str) -> ApiType | None:
        """The GraphQL object type called ``name`` declared under ``types:``, or None."""
        return next((t for t in self.types if t.name == name), None)

    def row_filters_for(self, name: str) -> list[RowFilter]:
        """The row filters that apply to table or index ``name``."""
        lowered = name.lower()
        return [
            f
            for f in self.policies.row_filters
            if (f.target or "").lower() == lowered
        ]

    def resolve_path(self, value: str) -> Path:
        """A path written in the manifest, relative to the manifest's folder."""
        p = Path(value).expanduser()
        if not p.is_absolute() and self._path is not None:
            p = self._path.parent / p
        return p
