"""``structq init``: a first manifest for a source, drafted from the live database or cluster.

Init is a sync of a manifest that declares nothing yet: it writes a *seed* (``source``,
``kind``, ``url: ${NAME_URL}``, the ``sync:`` scope), and runs the ordinary sync pipeline on
it, so every object and member the scope holds is added the way sync adds them (types, keys,
``nullable``, ``references``, the database's comments as descriptions, ``draft: true``, and
``access: deny`` with the reason for what looks secret or personal). Because the result went
through sync's own idempotence check, ``structq sync --check`` reports it in sync straight away.

The URL itself is never written: the file says ``${NAME_URL}`` and the caller shows the value
once, so a password in it stays out of the file (and out of version control). A relative SQLite
path is made absolute first, so the variable means the same file from any working directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from structq.errors import ConfigError

from .job import SyncPlan, plan_sync
from .seed import seed_head, url_variable
from .yamledit import flow_map, scalar

if TYPE_CHECKING:
    from .diff import Denial

__all__ = ["InitResult", "init_manifest", "url_variable", "kind_of_url"]

_SOURCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "duckdb", "mssql", "oracle")

@dataclass(frozen=True)
class InitResult:
    """What init wrote: the file, the variable its URL lives in, and the sync that filled it."""

    path: Path
    variable: str
    url: str
    plan: SyncPlan

    @property
    def denials(self) -> tuple["Denial", ...]:
        return self.plan.diff.denials

    @property
    def objects(self) -> int:
        return len(self.plan.snapshot.objects)

    @property
    def members(self) -> int:
        return sum(len(o.members) for o in self.plan.snapshot.objects)

    @property
    def references(self) -> int:
        return sum(1 for o in self.plan.snapshot.objects for m in o.members if m.references)


def kind_of_url(url: str) -> str | None:
    """``sql`` for a database URL; None when the URL does not say (http(s): which cluster?)."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    return "sql" if scheme in _SQL_SCHEMES else None


def _absolute_sqlite(url: str) -> str:
    """``sqlite:///rel.db`` → ``sqlite:////abs/rel.db`` (memory and absolute paths unchanged)."""
    head, sep, rest = url.partition(":///")
    if not sep or not head.split("+", 1)[0].lower() == "sqlite" or not rest or rest.startswith("/"):
        return url
    path, query_sep, query = rest.partition("?")
    if path in ("", ":memory:"):
        return url
    return f"{head}:///{Path(path).resolve()}{query_sep}{query}"


def seed_text(source: str, kind: str, variable: str, *, schema: str | None = None,
              include: Sequence[str] = (), exclude: Sequence[str] = ()) -> str:
    """The manifest init starts from: no objects yet, the scope it will read."""
    scope: list[tuple[str, object]] = []
    if schema:
        scope.append(("schema", schema))
    lines = seed_head(source, kind, variable)
    if schema:
        lines.append(f"schema: {scalar(schema)}")
    patterns = [(key, "[" + ", ".join(scalar(p) for p in globs) + "]") for key, globs in
                (("include", include), ("exclude", exclude)) if globs]
    scope_text = flow_map(scope)[1:-1]
    parts = [scope_text] if scope_text else []
    parts += [f"{key}: {value}" for key, value in patterns]
    lines.append("sync: {" + ", ".join(parts) + "}")
    return "\n".join(lines) + "\n"


def init_manifest(directory: Path, source: str, url: str, *, kind: str | None = None, schema: str | None = None,
                  include: Sequence[str] = (), exclude: Sequence[str] = (),
                  profile_values: int | None = None) -> InitResult:
    """Write ``directory/source.yaml`` from the live source; never overwrites.

    Raises ``ConfigError`` for a bad name, kind or scope, an existing file, or a scope holding
    nothing; ``SourceUnavailable`` when the source cannot be reached.
    """
    if not _SOURCE.match(source):
        raise ConfigError(f"source name {source!r} is not an identifier",
                          hint="use letters, digits and underscores, starting with a letter (e.g. hr, sales_db)")
    kind = kind or kind_of_url(url)
    if kind is None:
        raise ConfigError(f"cannot tell from the URL whether source {source!r} is Elasticsearch or OpenSearch",
                          hint="add --kind elasticsearch or --kind opensearch (or --kind sql for a database, "
                               "--kind graphql or --kind openapi for an API)")
    if schema and kind != "sql":
        raise ConfigError("--schema applies to SQL sources only", hint="leave it out for a search cluster")
    path = directory / f"{source}.yaml"
    if path.exists():
        raise ConfigError(f"{path} already exists; init never overwrites a manifest",
                          hint=f"to bring it up to date run: structq sync --write -m {directory} -s {source}")
    variable = url_variable(source)
    url = _absolute_sqlite(url) if kind == "sql" else url
    seed = seed_text(source, kind, variable, schema=schema, include=include, exclude=exclude)
    plan = plan_sync(path, text=seed, env={**os.environ, variable: url}, examples=[], profile_values=profile_values,
                     infer_keys=True)
    if not plan.snapshot.objects:
        where = f" in schema {schema!r}" if schema else ""
        what = "tables or views" if kind == "sql" else "indices"
        raise ConfigError(f"source {source!r}: no {what} found{where} that a manifest can declare"
                          + (f" (include {list(include)}, exclude {list(exclude)})" if include or exclude else ""),
                          hint="check --schema and the --include/--exclude patterns (globs such as 'sales_*')")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("xb") as out:  # exclusive: a file created meanwhile is not overwritten
            out.write(plan.after)
    except FileExistsError:
        raise ConfigError(f"{path} already exists; init never overwrites a manifest") from None
    return InitResult(path, variable, url, plan)
