"""Fixtures shared by the whole test-suite, grouped by concern.

Add a new group under its own banner rather than growing an existing one.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from servers import MariaDBServer, ManagedServer, PostgresServer, SearchServer, ServerUnavailable

REPO_ROOT = Path(__file__).resolve().parents[1]

# Commands under test start the embedded search server inside their own process: a background
# search server shared between commands would outlive the test that started it. The tests of that
# shared search server (test_search_server_daemon.py) turn it on for the commands they run, with a state
# folder of their own.
os.environ["STRUCTQ_SEARCH_DAEMON"] = "0"

# ============================================================================================
# Network: loopback only. A test that reaches further would depend on the machine it runs on.
# ============================================================================================


class NetworkBlocked(OSError):
    """Raised instead of a connection to anything but this machine.

    An ``OSError``, so the code under test sees what an offline machine would show it.
    """


def _ip_address(host: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host string spells literally, or None for a name."""
    text = host.decode() if isinstance(host, bytes) else str(host)
    try:
        return ipaddress.ip_address(text.split("%")[0])  # drop an IPv6 zone such as %lo
    except ValueError:
        return None


def _is_loopback(host: Any) -> bool:
    if host in (None, "localhost", b"localhost"):
        return True
    address = _ip_address(host)
    return address is not None and address.is_loopback


def _check_address(address: Any) -> None:
    """Inet addresses are tuples ``(host, port, …)``; unix-socket paths pass untouched."""
    if isinstance(address, tuple) and address and not _is_loopback(address[0]):
        raise NetworkBlocked(f"tests may only use loopback; blocked a connection to {address!r}")


def _check_lookup(host: Any) -> None:
    """Names other than localhost need DNS; address literals resolve locally."""
    if not _is_loopback(host) and _ip_address(host) is None:
        raise NetworkBlocked(f"tests may only use loopback; blocked a lookup of {host!r}")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python-level sockets only: C drivers (libpq) are not seen, but they get loopback URLs."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(sock: socket.socket, address: Any) -> None:
        _check_address(address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        _check_address(address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        _check_lookup(host)
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


# ============================================================================================
# Real servers on loopback (tests/servers.py). Session-wide ones are shared: give each test its
# own database and users. Tests that stop or kill a server take a fresh_* one.
# ============================================================================================

S = TypeVar("S", bound=ManagedServer)


def _start_or_skip(start: Callable[[], S]) -> S:
    """Skip when the server cannot run here, unless the run demands servers (test.sh does)."""
    try:
        return start()
    except ServerUnavailable as exc:
        reason = str(exc)
    if os.environ.get("STRUCTQ_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason}\n(STRUCTQ_REQUIRE_SERVERS=1: servers are required)", pytrace=False)
    pytest.skip(f"{reason} (set STRUCTQ_REQUIRE_SERVERS=1 to make this a failure)")


def mysqlclient_or_skip() -> None:
    """Skip a test that needs mysqlclient when it is not installed, or fail when the test
    command installed it (``STRUCTQ_REQUIRE_MYSQLCLIENT=1``) and it still cannot be imported."""
    import importlib.util

    if importlib.util.find_spec("MySQLdb") is not None:
        return
    reason = "mysqlclient (MySQLdb) is not installed: it needs libmariadb-dev and a C compiler to build"
    if os.environ.get("STRUCTQ_REQUIRE_MYSQLCLIENT") == "1":
        pytest.fail(f"{reason}\n(STRUCTQ_REQUIRE_MYSQLCLIENT=1: it is required)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """PostgreSQL shared by the session: ``admin_url``, ``create_database``,
    ``create_readonly_user``."""
    with _start_or_skip(PostgresServer.start) as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    """MariaDB shared by the session; same API as ``pg_server``."""
    with _start_or_skip(MariaDBServer.start) as server:
        yield server


@pytest.fixture(scope="session")
def search_server() -> Iterator[SearchServer]:
    """osmem-server (OpenSearch-compatible) shared by the session: ``url``."""
    with _start_or_skip(SearchServer.start) as server:
        yield server


@pytest.fixture
def fresh_pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own, for tests that ``stop()`` or ``kill()`` it."""
    with _start_or_skip(PostgresServer.start) as server:
        yield server


@pytest.fixture
def fresh_mariadb_server() -> Iterator[MariaDBServer]:
    """A MariaDB of this test's own, for tests that ``stop()`` or ``kill()`` it."""
    with _start_or_skip(MariaDBServer.start) as server:
        yield server


# ============================================================================================
# The sandbox tests' small HR database (tests/sandbox_support.py) on the session servers,
# loaded once: (admin URL, read-only URL).
# ============================================================================================


@pytest.fixture(scope="session")
def pg_hr(pg_server: PostgresServer) -> tuple[str, str]:
    from sandbox_support import load_hr

    return load_hr(pg_server, "postgres")


@pytest.fixture(scope="session")
def mariadb_hr(mariadb_server: MariaDBServer) -> tuple[str, str]:
    from sandbox_support import load_hr

    return load_hr(mariadb_server, "mysql")


# ============================================================================================
# Third-party corpora, copied beside the repository as ../shared/corpora
# ============================================================================================


def corpora_or_skip(path: Path) -> Path:
    """The corpora's folder. Absent, its tests skip, unless the run demands the corpora
    (``STRUCTQ_REQUIRE_CORPORA=1``, which the test command sets where they are copied): then
    a missing or moved folder fails every corpus test instead of silently skipping them."""
    if path.is_dir():
        return path
    reason = f"third-party corpora not found at {path} (expected beside the repository)"
    if os.environ.get("STRUCTQ_REQUIRE_CORPORA") == "1":
        pytest.fail(f"{reason}\n(STRUCTQ_REQUIRE_CORPORA=1: the corpora are required)", pytrace=False)
    pytest.skip(f"{reason} (set STRUCTQ_REQUIRE_CORPORA=1 to make this a failure)")


@pytest.fixture(scope="session")
def shared_corpora() -> Path:
    return corpora_or_skip(REPO_ROOT.parent / "shared" / "corpora")


@pytest.fixture(scope="session")
def defog_mariadb(mariadb_server: MariaDBServer, shared_corpora: Path) -> dict[str, str]:
    """The 11 defog databases loaded from their MySQL dumps, each under its own name (what
    the defog manifests' ``schema`` says), once per session: database → admin URL."""
    from corpora import split_statements

    urls = {}
    for dump in sorted((shared_corpora / "legit" / "defog" / "dumps").glob("*_mysql.sql")):
        database = dump.name.removesuffix("_mysql.sql")
        urls[database] = mariadb_server.create_database(database)
        statements = split_statements(dump.read_text(encoding="utf-8"))
        mariadb_server.execute([(statement, None) for statement in statements], database=database)
    return urls


# ============================================================================================
# Markers follow fixtures, so `-m "not postgres"` deselects every test that needs PostgreSQL.
# ============================================================================================

_MARKER_FOR_FIXTURE = {
    "pg_server": "postgres",
    "fresh_pg_server": "postgres",
    "mariadb_server": "mariadb",
    "fresh_mariadb_server": "mariadb",
    "search_server": "search",
    "shared_corpora": "corpus",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in _MARKER_FOR_FIXTURE:
                item.add_marker(_MARKER_FOR_FIXTURE[fixture])


# --- the demo company ---------------------------------------------------------------------
# Built once per session at the default scale (about 10 s); the bundled manifests read it
# through STRUCTQ_DEMO_DIR, given to the loader explicitly so no test depends on the environment.

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory):
    from structq.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def demo_env(demo_data) -> dict[str, str]:
    """The environment under which the bundled manifests point at the session's demo data."""
    return {**os.environ, "STRUCTQ_DEMO_DIR": str(demo_data.directory)}


@pytest.fixture(scope="session")
def demo_capabilities(demo_env: dict[str, str]):
    from structq.capabilities import CapabilitySet

    return CapabilitySet.from_path(REPO_ROOT / "capabilities", env=demo_env)


# ============================================================================================
# Agents on the demo company with a scripted model (tests/scripted.py)
# ============================================================================================


@pytest.fixture
def make_agent(demo_capabilities, tmp_path: Path):
    """``make_agent(model, **settings)``: an ``Agent`` on the demo with a private plan cache
    (``tmp_path/plans.sqlite``) and audit log (``tmp_path/audit.jsonl``); closed afterwards."""
    from structq.agent import Agent
    from structq.agent.audit import AuditLog
    from structq.agent.cache import PlanCache
    from structq.config import Settings

    agents: list[Any] = []

    def make(model: Any = None, **settings: Any) -> Any:
        config = Settings(llm=None, timezone="Asia/Shanghai", **settings)
        agent = Agent(demo_capabilities, llm=model, settings=config,
                      cache=PlanCache(tmp_path / "plans.sqlite"), audit=AuditLog(tmp_path / "audit.jsonl"))
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.close()
