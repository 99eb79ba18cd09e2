"""The servers the suite runs against: they start, answer, enforce read-only accounts, die
when killed, and explain themselves when they cannot start."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

import servers
from servers import DatabaseServer, PostgresServer, SearchServer, ServerUnavailable


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _run(url: str, *queries: str) -> list[Any]:
    """Run queries in one transaction and return the last one's rows (no pooling, so a
    stopped server leaves no connection behind)."""
    engine = sa.create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            rows: list[Any] = []
            for query in queries:
                result = connection.execute(sa.text(query))
                rows = list(result) if result.returns_rows else []
            return rows
    finally:
        engine.dispose()


@pytest.fixture(scope="module", params=["pg_server", "mariadb_server"])
def db_server(request: pytest.FixtureRequest) -> DatabaseServer:
    """Each SQL database in turn: the behaviour below must hold on both."""
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["fresh_pg_server", "fresh_mariadb_server"])
def fresh_db_server(request: pytest.FixtureRequest) -> DatabaseServer:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def populated(db_server: DatabaseServer) -> tuple[DatabaseServer, str]:
    """A database with one table holding Chinese text, shared by this module's tests (each
    makes its own users and tables); returns (server, database)."""
    database = _unique("db")
    url = db_server.create_database(database)
    _run(url, "CREATE TABLE projects (id INTEGER PRIMARY KEY, name VARCHAR(20))",
         "INSERT INTO projects VALUES (1, '星火')")
    return db_server, database


def test_server_listens_on_a_private_loopback_port(db_server: DatabaseServer) -> None:
    assert db_server.host == "127.0.0.1"
    assert db_server.port not in (3306, 5432)
    assert _run(db_server.admin_url, "SELECT 1 + 1") == [(2,)]


def test_new_database_round_trips_unicode(populated: tuple[DatabaseServer, str]) -> None:
    server, database = populated
    assert _run(server.url(database), "SELECT name FROM projects") == [("星火",)]


def test_readonly_user_can_select(populated: tuple[DatabaseServer, str]) -> None:
    server, database = populated
    url = server.create_readonly_user(database, _unique("reader"), "p@ss:w/rd'")
    assert _run(url, "SELECT id, name FROM projects") == [(1, "星火")]


@pytest.mark.parametrize("statement", [
    "INSERT INTO projects VALUES (2, 'x')",
    "UPDATE projects SET name = 'x'",
    "DELETE FROM projects",
    "CREATE TABLE intruder (id INTEGER)",
    "DROP TABLE projects",
])
def test_readonly_user_cannot_write(populated: tuple[DatabaseServer, str], statement: str) -> None:
    server, database = populated
    url = server.create_readonly_user(database, _unique("reader"), "secret")
    with pytest.raises(sa.exc.DBAPIError, match="(?i)denied|must be owner"):
        _run(url, statement)
    assert _run(server.url(database), "SELECT count(*) FROM projects") == [(1,)]


def test_readonly_user_can_read_tables_created_later(
    populated: tuple[DatabaseServer, str],
) -> None:
    server, database = populated
    url = server.create_readonly_user(database, _unique("reader"), "secret")
    _run(server.url(database), "CREATE TABLE later (id INTEGER)", "INSERT INTO later VALUES (7)")
    assert _run(url, "SELECT id FROM later") == [(7,)]


def test_readonly_user_needs_its_password(populated: tuple[DatabaseServer, str]) -> None:
    server, database = populated
    user = _unique("reader")
    server.create_readonly_user(database, user, "right")
    with pytest.raises(sa.exc.OperationalError):
        _run(server.url(database, user, "wrong"), "SELECT 1")


def test_killed_server_refuses_connections(fresh_db_server: DatabaseServer) -> None:
    server = fresh_db_server
    assert _run(server.admin_url, "SELECT 1") == [(1,)]
    server.kill()
    assert not server.is_running()
    assert not server.workdir.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.host, server.port), timeout=2).close()
    with pytest.raises(sa.exc.OperationalError):
        _run(server.admin_url, "SELECT 1")


def test_stopped_server_leaves_nothing_behind(fresh_pg_server: PostgresServer) -> None:
    fresh_pg_server.stop()
    assert not fresh_pg_server.is_running()
    assert not fresh_pg_server.workdir.exists()


def test_failed_start_reports_the_server_log(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))  # bound, not listening: a start fails, fast
        monkeypatch.setattr(servers, "free_port", lambda: squatter.getsockname()[1])
        try:
            server = PostgresServer.start(timeout=10)
        except ServerUnavailable as exc:
            assert "could not" in str(exc)  # postgres: "could not bind IPv4 address …"
        else:
            server.stop()
            pytest.fail("PostgreSQL started on a port that was already taken")


def test_search_server_indexes_and_searches(search_server: SearchServer) -> None:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[search_server.url])
    assert client.cluster.health()["status"] in ("green", "yellow")
    index = _unique("reports")
    client.indices.create(index=index, body={"mappings": {"properties": {
        "author_id": {"type": "keyword"}, "body": {"type": "text"}}}})
    client.index(index=index, id="1", body={"author_id": "E001", "body": "星火项目进展顺利"},
                 refresh=True)
    client.index(index=index, id="2", body={"author_id": "E002", "body": "other work"},
                 refresh=True)
    hits = client.search(index=index, body={"query": {"match": {"body": "星火"}}})["hits"]
    assert [hit["_source"]["author_id"] for hit in hits["hits"]] == ["E001"]


def test_tests_cannot_leave_this_machine() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="loopback"):
        sock.connect(("192.0.2.1", 80))  # TEST-NET-1: never routed
    with pytest.raises(OSError, match="loopback"):
        socket.getaddrinfo("example.com", 443)
