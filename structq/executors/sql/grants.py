"""``structq grants``: the least-privilege SQL for one source's database account.

What the manifest lets a query read is what the account gets, and nothing more:

- PostgreSQL: the role (created when missing, stripped of superuser, BYPASSRLS and the like,
  its sessions read-only by default), ``CONNECT`` on the database, ``USAGE`` on the declared
  schema, every table privilege in that schema taken back, then ``SELECT (<declared, allowed
  columns>)`` per declared table. Each table with row filters gets row-level security: a
  policy for this role whose ``USING`` is the filter, its ``:var`` placeholders read from the
  transaction's ``structq.<var>`` setting, which the executor sets before each query
  (``PostgresBackend.row_settings``).
- MariaDB/MySQL: the account (created when missing), every privilege taken back, then
  column-level ``SELECT`` per declared table. There is no row-level security there.
- SQLite: no accounts; a note on file permissions and ``mode=ro``.

Every script is idempotent (run it again after a manifest change: the grants become the new
manifest's, not a union of both) and is only printed, never executed. Names are quoted by
sqlglot for the dialect, values written as literals by sqlglot; the role and the account's host
are checked first because a role name also goes into a ``DO`` block's body.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot import exp, parse_one

from structq.errors import ConfigError

from .postgresql import ROW_SETTING_PREFIX
from .session import resolve

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from structq.capabilities import Manifest, Table

__all__ = ["DEFAULT_ROLE", "grants_sql"]

DEFAULT_ROLE = "structq_reader"

#: A role or user name: plain, so that it reads the same in every place it is written.
_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
#: The host part of a MariaDB/MySQL account: a name, an address, or a ``%`` pattern.
_HOST = re.compile(r"[A-Za-z0-9_.%:-]{1,255}")

#: The PostgreSQL type a policy casts a setting to, by the manifest type of the column the
#: variable is compared with (a setting is text; ``integer_column = '7'::text`` does not exist).
_POSTGRES_TYPES = {
    "text": "TEXT", "integer": "BIGINT", "real": "DOUBLE PRECISION", "numeric": "NUMERIC",
    "boolean": "BOOLEAN", "date": "DATE", "datetime": "TIMESTAMP", "json": "JSONB", "binary": "BYTEA",
}

_RLS_NOTE = """\
-- Row-level security. PostgreSQL applies a table's policies to every role except the table's
-- owner, superusers and roles with BYPASSRLS: connect structq as this role, never as the owner
-- (or also run ALTER TABLE ... FORCE ROW LEVEL SECURITY, which holds the owner to the policies
-- too). Enabling it on a table hides every row from any other role that reads the table until
-- that role gets a policy of its own. structq sets structq.<variable> for each transaction
-- (set_config(..., true), the value bound, never spliced); a transaction that did not set it
-- reads NULL, and the policy matches no row."""


class _Quoting:
    """Identifiers and string literals of one dialect, written by sqlglot."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def name(self, *parts: str) -> str:
        return ".".join(exp.to_identifier(part, quoted=True).sql(self.dialect) for part in parts)

    def text(self, value: str) -> str:
        return exp.Literal.string(value).sql(self.dialect)

    def columns(self, table: "Table") -> str:
        return ", ".join(self.name(column.name) for column in table.allowed_columns)


def _role(role: str) -> str:
    if not _ROLE.fullmatch(role):
        raise ConfigError(f"the role name {role!r} is not a plain name",
                          hint="use letters, digits and underscores, starting with a letter (at most 63)")
    return role


def _table_note(table: "Table") -> str:
    denied = [column.name for column in table.columns if column.denied]
    note = f"-- {table.name}: " + (", ".join(c.name for c in table.allowed_columns) or "no readable column")
    return note + (f" (denied: {', '.join(denied)})" if denied else "")


def _one_line(text: str) -> str:
    """``text`` on one line, for a ``--`` comment: a line break in it would end the comment."""
    return " ".join(text.split())


def _filter_columns(table: "Table") -> dict[str, str]:
    return {column.name.lower(): column.type for column in table.columns}


def _setting(name: str, cast: str | None) -> exp.Expr:
    """``CAST(NULLIF(current_setting('structq.<name>', true), '') AS <cast>)``: NULL, hence no
    row, when the transaction did not set it (a session that once set it reads '' after)."""
    read = exp.Anonymous(this="current_setting",
                         expressions=[exp.Literal.string(ROW_SETTING_PREFIX + name), exp.true()])
    value = exp.Nullif(this=read, expression=exp.Literal.string(""))
    return exp.cast(value, cast) if cast else value


def _compared_type(placeholder: exp.Placeholder, types: dict[str, str]) -> str | None:
    """The PostgreSQL type of the column ``placeholder`` is compared with, if it is."""
    parent = placeholder.parent
    if isinstance(parent, exp.Tuple):  # col IN (:a, :b)
        parent = parent.parent
    if isinstance(parent, (exp.In, exp.Between)):
        other = parent.this
    elif isinstance(parent, exp.Binary):
        other = parent.expression if parent.this is placeholder else parent.this
    else:
        return None
    if isinstance(other, exp.Column):
        kind = types.get(other.name.lower())
        return _POSTGRES_TYPES.get(kind) if kind else None
    return None


def policy_condition(manifest: "Manifest", table: "Table", schema: str) -> str | None:
    """The ``USING`` expression for ``table``: its row filters (AND-ed, as the sandbox does),
    each ``:var`` read from the transaction's setting; tables the filters' own subqueries read
    qualified with ``schema``. None when the table has no SQL row filter."""
    wheres = [f.where for f in manifest.row_filters_for(table.name) if f.where]
    if not wheres:
        return None
    types = _filter_columns(table)
    parts = []
    for where in wheres:
        predicate = parse_one(where, read="postgres")
        for node in list(predicate.find_all(exp.Table)):
            if not node.args.get("db") and not isinstance(node.this, exp.Func):
                node.set("db", exp.to_identifier(schema, quoted=True))
        for placeholder in list(predicate.find_all(exp.Placeholder)):
            placeholder.replace(_setting(placeholder.name, _compared_type(placeholder, types)))
        parts.append(predicate)
    condition = exp.and_(*parts) if len(parts) > 1 else parts[0]
    return condition.sql("postgres")


def _postgres(manifest: "Manifest", role: str, url: "URL", host: str) -> list[str]:
    q = _Quoting("postgres")
    schema = manifest.schema_ or "public"
    who = q.name(role)
    lines = [
        f"-- Least-privilege account for structq source {manifest.source!r} (PostgreSQL), role {role}.",
        "-- Review, then apply as a superuser or the tables' owner: psql -v ON_ERROR_STOP=1 -f FILE",
        "-- Idempotent: running it again makes the grants exactly those of the current manifest.",
        f"-- No password is set here: ALTER ROLE {who} PASSWORD '...';",
        "BEGIN;",
        "DO $$",
        "BEGIN",
        f"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = {q.text(role)}) THEN",
        f"    CREATE ROLE {who} LOGIN;",
        "  END IF;",
        "END",
        "$$;",
        f"ALTER ROLE {who} NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION;",
        f"ALTER ROLE {who} SET default_transaction_read_only = on;",
    ]
    if url.database:
        database = q.name(url.database)
        lines += [f"REVOKE CREATE ON DATABASE {database} FROM {who};",
                  f"GRANT CONNECT ON DATABASE {database} TO {who};"]
    lines += [
        f"GRANT USAGE ON SCHEMA {q.name(schema)} TO {who};",
        "-- Whatever the role could read or write in the schema before is taken back first.",
        f"REVOKE CREATE ON SCHEMA {q.name(schema)} FROM {who};",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {q.name(schema)} FROM {who};",
    ]
    policies = []
    for table in manifest.tables:
        lines.append(_table_note(table))
        if table.allowed_columns:
            lines.append(f"GRANT SELECT ({q.columns(table)}) ON TABLE {q.name(schema, table.name)} TO {who};")
        condition = policy_condition(manifest, table, schema)
        if condition is not None:
            name, target = q.name(f"{role}_rows"), q.name(schema, table.name)
            policies += [
                f"-- {table.name}: rows where " + " AND ".join(
                    _one_line(f.where) for f in manifest.row_filters_for(table.name) if f.where),
                f"ALTER TABLE {target} ENABLE ROW LEVEL SECURITY;",
                f"DROP POLICY IF EXISTS {name} ON {target};",
                f"CREATE POLICY {name} ON {target} AS PERMISSIVE FOR SELECT TO {who}",
                f"  USING ({condition});",
            ]
    if policies:
        lines += [_RLS_NOTE, *policies]
    return [*lines, "COMMIT;"]


def _mysql(manifest: "Manifest", role: str, url: "URL", host: str) -> list[str]:
    if not _HOST.fullmatch(host):
        raise ConfigError(f"the account host {host!r} is not a host name, address or pattern",
                          hint="e.g. --host % (anywhere), --host 10.0.0.% or --host app.example.com")
    database = manifest.schema_ or url.database
    if not database:
        raise ConfigError(f"source {manifest.source!r}: no database to grant on",
                          hint="name the database in the URL (mysql://user@host/DB) or as schema: in the manifest")
    q = _Quoting("mysql")
    who = f"{q.text(role)}@{q.text(host)}"
    lines = [
        f"-- Least-privilege account for structq source {manifest.source!r} (MariaDB/MySQL), {role}@{host}.",
        "-- Review, then apply as an administrator: mariadb < FILE (or mysql < FILE).",
        "-- Idempotent: running it again makes the grants exactly those of the current manifest.",
        f"CREATE USER IF NOT EXISTS {who};",
        f"-- No password is set here: ALTER USER {who} IDENTIFIED BY '...';",
        "-- Every privilege the account held before is taken back first.",
        f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {who};",
    ]
    for table in manifest.tables:
        lines.append(_table_note(table))
        if table.allowed_columns:
            lines.append(f"GRANT SELECT ({q.columns(table)}) ON {q.name(database, table.name)} TO {who};")
    filtered = [t.name for t in manifest.tables if manifest.row_filters_for(t.name)]
    if filtered:
        lines += [
            f"-- Row filters ({', '.join(filtered)}): MariaDB and MySQL have no row-level security,",
            "-- so these grants cannot hold them; they stay the sandbox's job. To make the database",
            "-- hold them too, give each tenant an account of its own and grant it a view fixed to",
            "-- its rows instead of the table.",
        ]
    return lines


def _sqlite(manifest: "Manifest", role: str, url: "URL", host: str) -> list[str]:
    return [
        f"-- structq source {manifest.source!r} is SQLite: it has no accounts, grants or row-level security.",
        "-- structq opens the file read-only (mode=ro, PRAGMA query_only); what else protects it is the",
        "-- file system: let the user structq runs as read the file but not write it or its directory",
        "-- (e.g. chmod 0440 on the file), and keep data nobody may ask about in another file.",
    ]


#: Backend label → the writer of its script.
_WRITERS: dict[str, Callable[["Manifest", str, "URL", str], list[str]]] = {
    "PostgreSQL": _postgres,
    "MySQL/MariaDB": _mysql,
    "SQLite": _sqlite,
}


def grants_sql(manifest: "Manifest", role: str = DEFAULT_ROLE, host: str = "%") -> str:
    """The reviewable script that gives ``role`` read access to what ``manifest`` declares and
    nothing else (``host``: the account's host part on MariaDB/MySQL)."""
    if manifest.query_dialect is None:
        raise ConfigError(f"source {manifest.source!r} is a {manifest.kind} source: grants are for SQL sources",
                          hint="give the search cluster's user read access to the declared indices only")
    backend, url = resolve(manifest)
    return "\n".join(_WRITERS[backend.label](manifest, _role(role), url, host)) + "\n"
