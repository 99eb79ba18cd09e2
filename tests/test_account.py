"""Wall 3, the database account: ``structq grants`` and ``structq check --connect``.

On real PostgreSQL and MariaDB (loopback servers from ``servers.py``): the generated grants are
applied as the administrator (twice: they are idempotent), a login is made from them, and

- the known bypass, sent as raw text on that login with the sandbox out of the way, fails in
  the database: the undeclared column cannot be read;
- on PostgreSQL the row filter holds in the database too: through the executor, with the
  caller's variable set, a query with no filter of its own sees only that tenant's rows;
- the account audits clean, while the administrator and an over-privileged login do not.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from structq.capabilities import CapabilitySet, Manifest
from structq.cli import app
from structq.errors import ConfigError, ExecutionError
from structq.executors.sql import SqlExecutor
from structq.executors.sql.grants import grants_sql, policy_condition
from structq.safety.query import SafeQuery
from structq.sync.audit import audit_account

#: What the administrator creates in each database: a table with an undeclared column, a
#: table with a row filter and a denied column, and a table the manifest does not declare.
_TABLES = [
    "CREATE TABLE products (id INTEGER PRIMARY KEY, name VARCHAR(40), price NUMERIC(10, 2), cost_secret VARCHAR(40))",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, tenant_id INTEGER, amount NUMERIC(10, 2), card VARCHAR(20))",
    "CREATE TABLE payroll (id INTEGER PRIMARY KEY, salary INTEGER)",
    "INSERT INTO products VALUES (1, 'pen', 2.50, 'COSTSECRET_1'), (2, 'ink', 9.00, 'COSTSECRET_2')",
    "INSERT INTO orders VALUES (1, 7, 10, '4111-1'), (2, 7, 20, '4111-2'), (3, 8, 30, '4111-3')",
    "INSERT INTO payroll VALUES (1, 100000)",
]

#: The bypass issue 29 found: the output alias hides a read of the real, undeclared column.
BYPASS = ("SELECT id, 'k' AS cost_secret FROM products "
          "ORDER BY CASE WHEN cost_secret = 'X' THEN 0 ELSE 1 END, id DESC")

PASSWORD = "Acc0unt-pw"


def shop_manifest(url: str, source: str = "shop", where: str = "tenant_id = :tenant_id") -> Manifest:
    return Manifest.model_validate({
        "source": source, "kind": "sql", "url": url,
        "policies": {"row_filters": [{"table": "orders", "where": where}]},
        "tables": [
            {"name": "products", "columns": [{"name": "id", "type": "integer"}, {"name": "name", "type": "text"},
                                             {"name": "price", "type": "numeric"}]},
            {"name": "orders", "columns": [{"name": "id", "type": "integer"}, {"name": "tenant_id", "type": "integer"},
                                           {"name": "amount", "type": "numeric"},
                                           {"name": "card", "type": "text", "access": "deny"}]},
        ],
    })


def _statements(script: str) -> list[str]:
    """A MariaDB script's statements: one per line, comments dropped (what ``mariadb < FILE`` runs)."""
    return [line.rstrip(";") for line in script.splitlines() if line and not line.startswith("--")]


def _raw(url: str, sql: str, setup: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` as it is on a plain connection of ``url``: no sandbox, no executor."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            for statement in setup:
                connection.execute(text(statement))
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


def _through_the_executor(manifest: Manifest, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
    """``sql`` run by the SQL executor as if the sandbox had passed it unchanged (walls 1 and 2
    out of the way): the read-only transaction and the row settings, nothing else."""
    executor = SqlExecutor(manifest)
    try:
        query = SafeQuery(source=manifest.source, kind="sql", limit=101, max_rows=100, text=sql, params=params or {})
        return [tuple(row) for row in executor.fetch(query).rows]
    finally:
        executor.close()


def _kinds(findings: list[Any]) -> set[tuple[str, str]]:
    return {(f.kind, f.object) for f in findings}


# -- what is printed, without a server ----------------------------------------------------------


def test_postgres_script_grants_declared_columns_and_a_policy_per_row_filter() -> None:
    script = grants_sql(shop_manifest("postgresql://u@db.example/shop"))
    assert 'GRANT SELECT ("id", "name", "price") ON TABLE "public"."products" TO "structq_reader";' in script
    assert 'GRANT SELECT ("id", "tenant_id", "amount") ON TABLE "public"."orders" TO "structq_reader";' in script
    assert "cost_secret" not in script and '"card"' not in script and "payroll" not in script
    assert "IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'structq_reader')" in script
    assert 'DROP POLICY IF EXISTS "structq_reader_rows" ON "public"."orders";' in script
    assert ("USING (tenant_id = CAST(NULLIF(CURRENT_SETTING('structq.tenant_id', TRUE), '') AS BIGINT));"
            in script)
    assert "owner" in script and "BYPASSRLS" in script  # the caveat is in the script itself


def test_names_are_quoted_for_each_dialect_and_role_names_must_be_plain() -> None:
    manifest = Manifest.model_validate({
        "source": "odd", "kind": "sql", "url": "mysql://u@h/shop",
        "tables": [{"name": 'we`ird"t', "columns": [{"name": "a`b", "type": "text"}]}],
    })
    assert "GRANT SELECT (`a``b`) ON `shop`.`we``ird\"t` TO 'structq_reader'@'%';" in grants_sql(manifest)
    pg = manifest.model_copy(update={"url": "postgresql://u@h/shop"})
    assert 'GRANT SELECT ("a`b") ON TABLE "public"."we`ird""t"' in grants_sql(pg)
    with pytest.raises(ConfigError, match="not a plain name"):
        grants_sql(pg, role="r; DROP TABLE x")
    with pytest.raises(ConfigError, match="host"):
        grants_sql(manifest, host="h' OR '1")


def test_a_multi_line_row_filter_stays_inside_its_comment() -> None:
    manifest = shop_manifest("postgresql://u@h/shop", where="tenant_id = :tenant_id\nAND amount > 0")
    script = grants_sql(manifest)
    assert "-- orders: rows where tenant_id = :tenant_id AND amount > 0" in script
    assert not any(line.startswith("AND") for line in script.splitlines())
    assert policy_condition(manifest, manifest.tables[1], "public").endswith("AND amount > 0")


def test_mariadb_script_says_there_is_no_row_level_security_and_sqlite_gets_a_note(tmp_path) -> None:
    script = grants_sql(shop_manifest("mysql://u@h/shop"))
    assert "REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'structq_reader'@'%';" in script
    assert "no row-level security" in script
    note = grants_sql(shop_manifest(f"sqlite:///{tmp_path}/shop.db"))
    assert all(line.startswith("--") for line in note.splitlines()) and "mode=ro" in note


def test_cli_prints_the_script_and_refuses_an_unknown_source(tmp_path) -> None:
    folder = tmp_path / "caps"
    folder.mkdir()
    (folder / "shop.yaml").write_text(json.dumps(shop_manifest("postgresql://u@h/shop").model_dump(
        by_alias=True, exclude_defaults=True)))
    runner = CliRunner()
    result = runner.invoke(app, ["grants", "--source", "shop", "--role", "bi_reader", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    assert 'TO "bi_reader";' in result.output
    missing = runner.invoke(app, ["grants", "--source", "nope", "-m", str(folder)])
    assert missing.exit_code == 2 and "shop" in missing.output
    assert "nothing is executed" in runner.invoke(app, ["grants", "--help"]).output.lower()


def _psql(pg_server: Any, script: str) -> None:
    """Apply ``script`` with ``psql -v ON_ERROR_STOP=1 -f``, as docs/database-account.md says."""
    import glob
    import subprocess

    psql = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1:] or ["psql"]
    subprocess.run([psql[0], "-v", "ON_ERROR_STOP=1", "-q", "-h", pg_server.host, "-p", str(pg_server.port),
                    "-U", pg_server.admin_user, "-d", "account_shop", "-f", "-"],
                   input=script, text=True, check=True, capture_output=True, timeout=60)


def _mariadb_client(mariadb_server: Any, script: str) -> None:
    """Apply ``script`` with ``mariadb < FILE``, as docs/database-account.md says."""
    import shutil
    import subprocess

    client = shutil.which("mariadb") or "mysql"
    subprocess.run([client, "--no-defaults", "-h", mariadb_server.host, "-P", str(mariadb_server.port),
                    "-u", mariadb_server.admin_user, "--protocol=TCP"],
                   input=script, text=True, check=True, capture_output=True, timeout=60)


def _shop_database(server: Any) -> tuple[str, str, str]:
    """The shop database on ``server``: (admin URL, the generated account's URL, its grants)."""
    admin = server.create_database("account_shop")
    server.execute([(statement, None) for statement in _TABLES], database="account_shop")
    reader = server.url("account_shop", "structq_reader", PASSWORD)
    return admin, reader, grants_sql(shop_manifest(reader))


# -- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_shop(pg_server) -> dict[str, str]:
    """The shop database, the generated grants applied twice, and a login made from them."""
    import psycopg

    admin, reader_url, script = _shop_database(pg_server)
    with psycopg.connect(host=pg_server.host, port=pg_server.port, user=pg_server.admin_user,
                         dbname="account_shop", autocommit=True) as connection:
        connection.execute(script)  # no parameters: psycopg sends the whole script at once
    _psql(pg_server, script)  # again, the way the docs apply it: idempotent
    with psycopg.connect(host=pg_server.host, port=pg_server.port, user=pg_server.admin_user,
                         dbname="account_shop", autocommit=True) as connection:
        connection.execute(f"ALTER ROLE structq_reader PASSWORD '{PASSWORD}'")
    wide = pg_server.create_readonly_user("account_shop", "wide_reader", PASSWORD)
    pg_server.execute([("GRANT INSERT ON products TO wide_reader", None)], database="account_shop")
    return {"admin": admin, "reader": reader_url, "wide": wide}


@pytest.fixture(params=["pg", "mariadb"])
def shop(request) -> dict[str, str]:
    """Each database's shop: the generated account, an over-privileged one and the administrator."""
    return request.getfixturevalue({"pg": "pg_shop", "mariadb": "mariadb_shop"}[request.param])


def test_the_bypass_fails_in_the_database(shop) -> None:
    import sqlalchemy.exc

    for sql in (BYPASS, "SELECT card FROM orders", "SELECT * FROM payroll"):
        with pytest.raises(sqlalchemy.exc.DBAPIError, match="denied"):
            _raw(shop["reader"], sql)
    assert _raw(shop["reader"], "SELECT id, name FROM products ORDER BY id") == [(1, "pen"), (2, "ink")]
    # The same text on the over-privileged login reads the column: the grants are what stops it.
    assert _raw(shop["wide"], BYPASS) == [(2, "k"), (1, "k")]


def test_the_bypass_fails_through_the_executor_without_the_sandbox(shop) -> None:
    with pytest.raises(ExecutionError, match="denied") as refused:
        _through_the_executor(shop_manifest(shop["reader"]), BYPASS, {"var_tenant_id": 7})
    # PostgreSQL: "permission denied for table products" (a column not granted); MariaDB:
    # "SELECT command denied … for column 'cost_secret' in table 'products'".
    assert "products" in str(refused.value)


def test_postgres_row_level_security_holds_through_the_executor(pg_shop) -> None:
    manifest = shop_manifest(pg_shop["reader"])
    executor = SqlExecutor(manifest)
    unfiltered = "SELECT tenant_id, count(*) AS n FROM orders GROUP BY tenant_id ORDER BY 1"
    try:
        def tenants(params: dict[str, Any]) -> list[Any]:
            query = SafeQuery(source="shop", kind="sql", limit=101, max_rows=100, params=params, text=unfiltered)
            return [tuple(row) for row in executor.fetch(query).rows]

        assert tenants({"var_tenant_id": 7}) == [(7, 2)]
        assert tenants({"var_tenant_id": 8}) == [(8, 1)]
        assert tenants({}) == []  # nothing set: the policy matches no row
        assert tenants({"var_tenant_id": 7}) == [(7, 2)]  # a pooled session, set again
        assert tenants({}) == []  # and forgotten at the end of each transaction
        with pytest.raises(ExecutionError, match="invalid input syntax for type bigint"):
            tenants({"var_tenant_id": "7 OR true"})  # a value, never SQL: its cast fails
    finally:
        executor.close()
    # Raw, without a setting: no row; with the setting spliced in by hand the policy reads it.
    assert _raw(pg_shop["reader"], "SELECT count(*) FROM orders") == [(0,)]
    assert _raw(pg_shop["reader"], "SELECT count(*) FROM orders",
                ("SELECT set_config('structq.tenant_id', '8', false)",)) == [(1,)]


def test_postgres_full_path_with_the_sandbox_runs_on_the_generated_account(pg_shop) -> None:
    from structq.safety import check_sql

    manifest = shop_manifest(pg_shop["reader"])
    query = check_sql("SELECT id, amount FROM orders ORDER BY id", manifest, vars={"tenant_id": 8})
    executor = SqlExecutor(manifest)
    try:
        assert [tuple(r) for r in executor.fetch(query).rows] == [(3, 30)]
    finally:
        executor.close()


def test_the_generated_account_audits_clean(shop) -> None:
    assert audit_account(shop_manifest(shop["reader"])) == []


def test_postgres_audit_reports_an_over_privileged_account(pg_shop) -> None:
    wide = _kinds(audit_account(shop_manifest(pg_shop["wide"])))
    assert ("write", "public.products") in wide
    assert ("session", "account") in wide
    assert ("column", "products.cost_secret") in wide
    assert ("column", "orders.card") in wide
    assert ("table", "public.payroll") in wide
    assert ("row_filter", "public.orders") not in wide  # the grants enabled RLS on orders
    admin = audit_account(shop_manifest(pg_shop["admin"]))
    assert any(f.kind == "write" and "superuser" in f.message for f in admin)
    assert ("row_filter", "public.orders") in _kinds(admin)  # the owner is exempt


# -- MariaDB -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mariadb_shop(mariadb_server) -> dict[str, str]:
    """The shop database, the generated grants applied twice, and a login made from them."""
    admin, reader_url, script = _shop_database(mariadb_server)
    mariadb_server.execute([(s, None) for s in _statements(script)])
    _mariadb_client(mariadb_server, script)  # again, the way the docs apply it: idempotent
    mariadb_server.execute([("ALTER USER 'structq_reader'@'%%' IDENTIFIED BY %s", (PASSWORD,))])
    wide = mariadb_server.create_readonly_user("account_shop", "wide_reader", PASSWORD)
    mariadb_server.execute([("GRANT INSERT ON account_shop.products TO 'wide_reader'@'127.0.0.1'", None)])
    return {"admin": admin, "reader": reader_url, "wide": wide}


def test_mariadb_audit_reports_an_over_privileged_account(mariadb_shop) -> None:
    wide = _kinds(audit_account(shop_manifest(mariadb_shop["wide"])))
    assert ("write", "account_shop.products") in wide
    assert ("column", "products.cost_secret") in wide
    assert ("column", "orders.card") in wide
    assert ("table", "account_shop.payroll") in wide
    admin = _kinds(audit_account(shop_manifest(mariadb_shop["admin"])))
    assert ("write", "*.*") in admin and ("table", "*.*") in admin


def test_check_connect_strict_exits_1_on_findings_and_0_when_clean(tmp_path, pg_shop, mariadb_shop) -> None:
    runner = CliRunner()

    def check(**urls: str) -> Any:
        folder = tmp_path / "-".join(urls)
        folder.mkdir()
        for source, url in urls.items():
            data = shop_manifest(url, source).model_dump(by_alias=True, exclude_defaults=True)
            (folder / f"{source}.yaml").write_text(json.dumps(data))
        assert CapabilitySet.from_path(folder)
        return runner.invoke(app, ["check", "--connect", "--strict", "-m", str(folder)])

    clean = check(pg=pg_shop["reader"], maria=mariadb_shop["reader"])
    assert clean.exit_code == 0, clean.output
    assert not re.search(r"^account ", clean.output, re.MULTILINE)
    # Column-level grants do not let MariaDB show the table definitions sync reflects: said, not failed.
    assert re.search(r"^unverified maria: .*SHOW command denied", clean.output, re.MULTILINE)
    wide = check(pgwide=pg_shop["wide"])
    assert wide.exit_code == 1, wide.output
    assert re.search(r"account pgwide: can read the undeclared column products\.cost_secret", wide.output)
    lenient = runner.invoke(app, ["check", "--connect", "--json", "-m", str(tmp_path / "pgwide")])
    document = json.loads(lenient.output)
    assert lenient.exit_code == 0 and document["ok"] is True
    assert {"source": "pgwide", "kind": "table", "object": "public.payroll",
            "message": "can read public.payroll, which the manifest does not declare"} in document["account"]


def test_executor_row_settings_are_bound_not_spliced() -> None:
    from structq.executors.sql.postgresql import PostgresBackend

    hostile = "7'); DROP TABLE orders; --"
    (setting,) = PostgresBackend().row_settings({"tenant_id": hostile, "since": dt.date(2024, 5, 1),
                                                 "regions": ["a", "b"], "active": True})
    assert setting.sql == ("SELECT set_config(:name_0, :value_0, true), set_config(:name_1, :value_1, true), "
                           "set_config(:name_2, :value_2, true)")
    assert setting.params == {"name_0": "structq.active", "value_0": "true", "name_1": "structq.since",
                              "value_1": "2024-05-01", "name_2": "structq.tenant_id", "value_2": hostile}
    assert PostgresBackend().row_settings({"regions": ["a", "b"]}) == []
