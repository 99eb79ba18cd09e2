"""``structq check --connect``: what the connecting account can do beyond its manifest.

The sandbox lets a query read the declared, allowed columns of the declared tables; the
account is the wall behind it, and this audit says where that wall stands further out:

- ``write``       a privilege that changes data or schema (INSERT, UPDATE, DELETE, TRUNCATE,
                  CREATE, … on anything), or a role attribute that overrides privileges
                  (PostgreSQL superuser, BYPASSRLS);
- ``session``     sessions that are not read-only by default (PostgreSQL: no
                  ``default_transaction_read_only`` for the role or database; structq makes each
                  of its transactions read-only anyway, but the account itself could write);
- ``column``      an undeclared or denied column of a declared table that the account can read;
- ``table``       a table outside the declared ones (or outside the declared schema) it can read;
- ``row_filter``  (PostgreSQL) a table with row filters that row-level security does not guard
                  for this account: not enabled, or the account owns the table.

MariaDB/MySQL have no per-account read-only default and no row-level security, so they get no
``session`` or ``row_filter`` finding; their privileges are read from ``information_schema``'s
privilege tables, which show the current account's own grants (privileges that come through a
MariaDB role are not read). Every query is a catalog read inside the read-only, time-limited
transaction that sync uses (``connect.sql_connection``). SQLite has no accounts: no findings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .connect import sql_connection

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from structq.capabilities import Manifest

__all__ = ["Finding", "audit_account"]


@dataclass(frozen=True)
class Finding:
    """One thing the account can do beyond the manifest: ``kind`` (see the module docstring),
    the ``object`` it is about, and a sentence that says it."""

    kind: str
    object: str
    message: str


#: What a name is in the catalog's spelling: compared case-insensitively, as manifests are.
def _key(*parts: str) -> tuple[str, ...]:
    return tuple(part.lower() for part in parts)


class _Declared:
    """The manifest's tables and their allowed columns, keyed the way the catalog is read."""

    def __init__(self, manifest: "Manifest", schema: str) -> None:
        self.schema = schema
        self.tables = {_key(t.name): t for t in manifest.tables}
        self.allowed = {_key(t.name): {c.name.lower() for c in t.allowed_columns} for t in manifest.tables}

    def has(self, schema: str, table: str) -> bool:
        return schema.lower() == self.schema.lower() and _key(table) in self.tables

    def extra_columns(self, table: str, readable: Iterable[str]) -> list[Finding]:
        allowed = self.allowed[_key(table)]
        declared = self.tables[_key(table)]
        findings = []
        for column in sorted(readable):
            if column.lower() in allowed:
                continue
            spec = declared.column(column)
            what = "denied" if spec is not None and spec.denied else "undeclared"
            findings.append(Finding("column", f"{table}.{column}",
                                    f"can read the {what} column {table}.{column}"))
        return findings


def _columns_by_table(rows: Iterable[Any]) -> dict[str, list[str]]:
    """(table, column) rows → table → its columns."""
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        tables.setdefault(table, []).append(column)
    return tables


def _rows(connection: "Connection", sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import text

    return list(connection.execute(text(sql), params))


# -- PostgreSQL ------------------------------------------------------------------------------

_PG_USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"

_PG_ROLE = """
SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
       has_database_privilege(current_database(), 'CREATE') AS create_in_database
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"""

#: Role and database defaults, most specific last (role in this database, role, database).
_PG_DEFAULTS = """
SELECT (s.setrole <> 0)::int + 2 * (s.setdatabase <> 0 AND s.setrole <> 0)::int AS rank, c.setting
FROM pg_catalog.pg_db_role_setting s, unnest(s.setconfig) AS c(setting)
WHERE s.setrole IN (0, (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user))
  AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
  AND c.setting LIKE 'default\\_transaction\\_read\\_only=%'
ORDER BY rank"""

_PG_SCHEMAS = f"""
SELECT n.nspname FROM pg_catalog.pg_namespace n
WHERE {_PG_USER_SCHEMAS} AND has_schema_privilege(n.oid, 'CREATE') ORDER BY 1"""

_PG_TABLES = f"""
SELECT n.nspname, c.relname,
       has_any_column_privilege(c.oid, 'SELECT') AS can_read,
       has_any_column_privilege(c.oid, 'INSERT') AS can_insert,
       has_any_column_privilege(c.oid, 'UPDATE') AS can_update,
       has_table_privilege(c.oid, 'DELETE') AS can_delete,
       has_table_privilege(c.oid, 'TRUNCATE') AS can_truncate,
       has_table_privilege(c.oid, 'TRIGGER') AS can_trigger,
       c.relrowsecurity, c.relforcerowsecurity, pg_catalog.pg_get_userbyid(c.relowner) = current_user AS owned
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND {_PG_USER_SCHEMAS}
ORDER BY 1, 2"""

#: The readable columns of every table of the declared schema, in one round trip.
_PG_COLUMNS = """
SELECT c.relname, a.attname
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
WHERE n.nspname = :schema AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 AND NOT a.attisdropped
  AND has_column_privilege(c.oid, a.attnum, 'SELECT')"""

_PG_WRITES = (("can_insert", "INSERT"), ("can_update", "UPDATE"), ("can_delete", "DELETE"),
              ("can_truncate", "TRUNCATE"), ("can_trigger", "TRIGGER"))


def _postgres(manifest: "Manifest", connection: "Connection") -> list[Finding]:
    declared = _Declared(manifest, manifest.schema_ or "public")
    findings: list[Finding] = []
    role = _rows(connection, _PG_ROLE)[0]
    for flag, what in (("rolsuper", "is a superuser: every privilege check and row-level security is skipped"),
                       ("rolbypassrls", "has BYPASSRLS: row-level security policies do not apply to it"),
                       ("rolcreaterole", "has CREATEROLE"), ("rolcreatedb", "has CREATEDB"),
                       ("rolreplication", "has REPLICATION"),
                       ("create_in_database", "can CREATE schemas in the database")):
        if getattr(role, flag):
            findings.append(Finding("write", "account", f"the account {what}"))
    defaults = [setting.split("=", 1)[1].strip().lower() for _rank, setting in _rows(connection, _PG_DEFAULTS)]
    if not defaults or defaults[-1] not in ("on", "true", "yes", "1"):
        findings.append(Finding("session", "account",
                                "sessions of the account are not read-only by default "
                                "(ALTER ROLE … SET default_transaction_read_only = on)"))
    for (schema,) in _rows(connection, _PG_SCHEMAS):
        findings.append(Finding("write", f"schema {schema}", f"can CREATE objects in the schema {schema}"))
    filtered = {_key(t.name) for t in manifest.tables if any(f.where for f in manifest.row_filters_for(t.name))}
    readable = _columns_by_table(_rows(connection, _PG_COLUMNS, schema=declared.schema))
    for row in _rows(connection, _PG_TABLES):
        name = f"{row.nspname}.{row.relname}"
        writes = [word for flag, word in _PG_WRITES if getattr(row, flag)]
        if writes:
            findings.append(Finding("write", name, f"can {', '.join(writes)} on {name}"))
        if not declared.has(row.nspname, row.relname):
            if row.can_read:
                findings.append(Finding("table", name, f"can read {name}, which the manifest does not declare"))
            continue
        findings += declared.extra_columns(row.relname, readable.get(row.relname, ()))
        if _key(row.relname) in filtered and row.can_read:
            if not row.relrowsecurity:
                findings.append(Finding("row_filter", name, f"{name} has row filters but no row-level security "
                                                              "(structq grants prints the policies)"))
            elif row.owned and not row.relforcerowsecurity:
                findings.append(Finding("row_filter", name, f"the account owns {name}, so its row-level "
                                                              "security does not apply to it"))
    return findings


# -- MariaDB / MySQL -------------------------------------------------------------------------

#: Privileges that read, or do nothing: everything else changes data, schema or the server.
_MYSQL_READS = frozenset({"SELECT", "USAGE", "SHOW VIEW"})

_MYSQL_ME = "SELECT CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', " \
            "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
_MYSQL_GLOBAL = "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = :me"
_MYSQL_SCHEMA = "SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = :me"
_MYSQL_TABLE = ("SELECT TABLE_SCHEMA, TABLE_NAME, PRIVILEGE_TYPE FROM information_schema.TABLE_PRIVILEGES "
                "WHERE GRANTEE = :me")
_MYSQL_COLUMN = ("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, PRIVILEGE_TYPE "
                 "FROM information_schema.COLUMN_PRIVILEGES WHERE GRANTEE = :me")
_MYSQL_TABLES = "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = :schema"
_MYSQL_COLUMNS = "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = :schema"


@dataclass
class _MySQLGrants:
    """The current account's privileges, by level: ``*.*``, ``db.*``, ``db.table``, and the
    SELECT-able columns (a column's other privileges are kept with the table's)."""

    everywhere: set[str]
    schemas: dict[str, set[str]]
    tables: dict[tuple[str, str], set[str]]
    columns: dict[tuple[str, str], set[str]]

    @classmethod
    def read(cls, connection: "Connection") -> "_MySQLGrants":
        me = _rows(connection, _MYSQL_ME)[0][0]
        grants = cls({p for (p,) in _rows(connection, _MYSQL_GLOBAL, me=me)}, {}, {}, {})
        for schema, privilege in _rows(connection, _MYSQL_SCHEMA, me=me):
            grants.schemas.setdefault(schema, set()).add(privilege)
        for schema, table, privilege in _rows(connection, _MYSQL_TABLE, me=me):
            grants.tables.setdefault((schema, table), set()).add(privilege)
        for schema, table, column, privilege in _rows(connection, _MYSQL_COLUMN, me=me):
            if privilege == "SELECT":
                grants.columns.setdefault((schema, table), set()).add(column)
            else:
                grants.tables.setdefault((schema, table), set()).add(f"{privilege} ({column})")
        return grants

    def writes(self) -> list[Finding]:
        levels = [("*.*", self.everywhere), *((f"{s}.*", p) for s, p in sorted(self.schemas.items())),
                  *((f"{s}.{t}", p) for (s, t), p in sorted(self.tables.items()))]
        findings = []
        for on, privileges in levels:
            beyond = sorted(p for p in privileges if p not in _MYSQL_READS)
            if beyond:
                findings.append(Finding("write", on, f"can {', '.join(beyond)} on {on}"))
        return findings

    def reads_schema(self, schema: str) -> bool:
        return "SELECT" in self.everywhere or "SELECT" in self.schemas.get(schema, set())


def _mysql(manifest: "Manifest", connection: "Connection") -> list[Finding]:
    from structq.executors.sql import parse_url

    database = manifest.schema_ or parse_url(manifest).database or ""
    declared = _Declared(manifest, database)
    grants = _MySQLGrants.read(connection)
    findings = grants.writes()
    if "SELECT" in grants.everywhere:
        findings.append(Finding("table", "*.*", "can read every table of every database (SELECT on *.*)"))
    findings += [Finding("table", f"{schema}.*", f"can read every table of the database {schema}")
                 for schema, privileges in sorted(grants.schemas.items())
                 if "SELECT" in privileges and schema != database]
    whole_schema = grants.reads_schema(database)
    readable_tables = {key for key, p in grants.tables.items() if "SELECT" in p} | set(grants.columns)
    if whole_schema:
        readable_tables |= {(database, t) for (t,) in _rows(connection, _MYSQL_TABLES, schema=database)}
    every_column = _columns_by_table(_rows(connection, _MYSQL_COLUMNS, schema=database)) if readable_tables else {}
    for schema, table in sorted(readable_tables):
        if not declared.has(schema, table):
            findings.append(Finding("table", f"{schema}.{table}",
                                    f"can read {schema}.{table}, which the manifest does not declare"))
        elif whole_schema or "SELECT" in grants.tables.get((schema, table), set()):
            findings += declared.extra_columns(table, every_column.get(table, []))
        else:
            findings += declared.extra_columns(table, grants.columns.get((schema, table), set()))
    return findings


#: Backend label → its audit (``Backend.label``); a backend without one has no accounts.
_AUDITS: dict[str, Callable[["Manifest", "Connection"], list[Finding]]] = {
    "PostgreSQL": _postgres,
    "MySQL/MariaDB": _mysql,
}


def audit_account(manifest: "Manifest") -> list[Finding]:
    """What ``manifest``'s connecting account can do beyond the manifest, worst first (writes,
    then sessions, then reads). ``SourceUnavailable`` when the source cannot be reached."""
    if manifest.query_dialect is None:
        return []
    from structq.executors.sql import resolve

    backend, _url = resolve(manifest)
    audit = _AUDITS.get(backend.label)
    if audit is None:
        return []
    with sql_connection(manifest) as source, source.transaction() as connection:
        findings = audit(manifest, connection)
    order = {"write": 0, "session": 1, "row_filter": 2, "table": 3, "column": 4}
    return sorted(findings, key=lambda f: order[f.kind])
