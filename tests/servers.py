"""Real PostgreSQL, MariaDB and search servers for the test-suite.

Each server gets a free loopback port (never the well-known one, which a system service may
hold) and a temporary directory of its own that is deleted when it stops. When the tests run
as root the database servers run as their service accounts, because ``initdb`` refuses root
and a server should not own files as root.

    with PostgresServer.start() as pg:
        admin = pg.create_database("hr")                       # SQLAlchemy URL, superuser
        reader = pg.create_readonly_user("hr", "reader", "s3cret")   # SELECT-only URL

Nothing may outlive the test session: the fixtures stop their servers, an ``atexit`` hook kills
whatever is still registered, and a watchdog process kills a database server whose parent
died without stopping it (a crash or SIGKILL, where ``atexit`` never runs).
"""

from __future__ import annotations

import abc
import atexit
import glob
import importlib
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

LOOPBACK = "127.0.0.1"
STARTUP_TIMEOUT_S = 30.0
_WELL_KNOWN_PORTS = frozenset({3306, 5432, 9200})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_LOG_TAIL_LINES = 25

# A statement for a DB-API cursor: the query and its parameters (None when it has none).
Statement = tuple[Any, Sequence[Any] | None]


class ServerUnavailable(RuntimeError):
    """The server cannot run here: not installed, or it failed to start (the log tail says why)."""


# --------------------------------------------------------------------------------------------
# Process bookkeeping shared by every kind of server
# --------------------------------------------------------------------------------------------

_running: set[ManagedServer] = set()


class ManagedServer(abc.ABC):
    """A server started for the tests; registered so that ``atexit`` can stop it."""

    def _register(self) -> None:
        _running.add(self)

    def _unregister(self) -> None:
        _running.discard(self)

    @abc.abstractmethod
    def stop(self) -> None:
        """Shut the server down cleanly and remove everything it wrote."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the server abruptly, as an outage would, so tests can see a dead source."""

    @abc.abstractmethod
    def is_running(self) -> bool: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@atexit.register
def _stop_everything() -> None:
    """Last resort when a session ends without its fixtures' teardown having run."""
    for server in list(_running):
        try:
            server.kill()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


def free_port() -> int:
    """A port on the loopback interface that nothing listens on right now."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            port = probe.getsockname()[1]
        if port not in _WELL_KNOWN_PORTS:
            return port


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The end of a log file, for error messages that must say why a start failed."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def _check_identifier(kind: str, name: str) -> None:
    """Names go into DDL, which cannot bind them as parameters, so only plain ones are taken."""
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{kind} name {name!r} must match {_IDENTIFIER.pattern}")


def _descendants(pid: int) -> list[int]:
    """Child processes of ``pid`` (Linux /proc); PostgreSQL's children leave its process group."""
    children = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            children.append(int(Path(stat).parent.name))
    return children


def _signal(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to a process group, ignoring one that is already gone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


# The watchdog blocks on a pipe from the test process. A clean stop writes to it first; bare
# end-of-file means the test process died, so the watchdog kills the server and its files.
_WATCHDOG = """
import os, shutil, signal, sys
if sys.stdin.read() == "":
    for pid in map(int, sys.argv[2:]):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def _start_watchdog(workdir: Path, pid: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(workdir), str(pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # a Ctrl-C in the terminal must not kill it before cleanup
    )


def _dismiss_watchdog(watchdog: subprocess.Popen[str] | None) -> None:
    if watchdog is None or watchdog.stdin is None:
        return
    try:
        watchdog.stdin.write("stopped")
        watchdog.stdin.close()
        watchdog.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        watchdog.kill()


# --------------------------------------------------------------------------------------------
# SQL servers: one base class, the database specifics in small overrides
# --------------------------------------------------------------------------------------------


class DatabaseServer(ManagedServer):
    """A throw-away SQL server on loopback, with helpers that hand out SQLAlchemy URLs."""

    label: ClassVar[str]  # for messages: "PostgreSQL"
    drivername: ClassVar[str]  # SQLAlchemy dialect+driver
    service_account: ClassVar[str]  # the OS user the server runs as when we are root
    binaries: ClassVar[tuple[str, ...]]  # executables to find, in order
    debian_package: ClassVar[str]
    admin_user: ClassVar[str]
    admin_database: ClassVar[str | None] = None
    stop_signal: ClassVar[signal.Signals] = signal.SIGTERM

    def __init__(self, workdir: Path, port: int, executables: dict[str, str]) -> None:
        self.host = LOOPBACK
        self.port = port
        self.workdir = workdir
        self.datadir = workdir / "data"
        self.log_path = workdir / "server.log"
        self._exe = executables
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[str] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def start(cls, timeout: float = STARTUP_TIMEOUT_S) -> Self:
        """Initialise a fresh data directory, launch the server and wait until it answers."""
        executables = cls._find_executables()
        workdir = Path(tempfile.mkdtemp(prefix=f"structq-{cls.service_account}-"))
        server = cls(workdir, free_port(), executables)
        try:
            server._give_to_service_account(workdir)
            server._initialise()
            server._launch()
            server._wait_until_ready(timeout)
        except BaseException as exc:
            server.kill()
            if isinstance(exc, (OSError, subprocess.SubprocessError)):
                raise ServerUnavailable(f"{cls.label} could not start: {exc}") from exc
            raise
        return server

    def stop(self) -> None:
        self._terminate(self.stop_signal)

    def kill(self) -> None:
        self._terminate(signal.SIGKILL)

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _terminate(self, sig: signal.Signals, grace_s: float = 15.0) -> None:
        """Signal the server, escalate to SIGKILL after ``grace_s``, then delete its files."""
        process = self._process
        if process is not None and process.poll() is None:
            children = _descendants(process.pid) if sig == signal.SIGKILL else []
            for pid in [process.pid, *children]:
                _signal(pid, sig)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal(process.pid, signal.SIGKILL)
                process.wait()
        _dismiss_watchdog(self._watchdog)
        self._watchdog = None
        shutil.rmtree(self.workdir, ignore_errors=True)
        self._unregister()

    @classmethod
    def _find_executables(cls) -> dict[str, str]:
        search_path = os.pathsep.join(cls._search_dirs())
        found = {name: shutil.which(name, path=search_path) for name in cls.binaries}
        missing = [name for name, path in found.items() if path is None]
        if missing:
            raise ServerUnavailable(
                f"{cls.label} is not installed ({', '.join(missing)} not found); on Debian: "
                f"apt-get install {cls.debian_package} (bash scripts/test.sh does it as root)"
            )
        return {name: path for name, path in found.items() if path}

    @classmethod
    def _search_dirs(cls) -> list[str]:
        """Where to look for the server's executables; PATH plus the sbin directories."""
        return [*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/usr/bin"]

    def _give_to_service_account(self, path: Path) -> None:
        """The server writes its data, socket and pid file as the service account."""
        if os.geteuid() == 0:
            account = self._account()
            os.chown(path, account.pw_uid, account.pw_gid)

    def _account(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(self.service_account)
        except KeyError:
            raise ServerUnavailable(
                f"{self.label}: the service account {self.service_account!r} does not exist"
            ) from None

    def _as_service_account(self) -> dict[str, Any]:
        """Popen arguments that drop root to the service account (nothing to do otherwise).

        The server is exec'ed directly rather than through ``runuser``, so the process we
        hold is the server itself and ``kill()`` cannot orphan it behind a wrapper.
        """
        if os.geteuid() != 0:
            return {}
        account = self._account()
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def _run(self, argv: list[str], timeout: float = 120.0) -> None:
        """Run a set-up command as the service account; its output goes to the server log."""
        with self.log_path.open("ab") as log:
            result = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                timeout=timeout,
                check=False,
                **self._as_service_account(),
            )
        if result.returncode != 0:
            raise ServerUnavailable(
                f"{self.label}: {Path(argv[0]).name} failed with exit code {result.returncode}; "
                f"log:\n{_tail(self.log_path)}"
            )

    def _launch(self) -> None:
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self._server_command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # own process group: kill() reaches all of it
                **self._as_service_account(),
            )
        self._register()
        self._watchdog = _start_watchdog(self.workdir, self._process.pid)

    def _wait_until_ready(self, timeout: float) -> None:
        """Poll with an admin login until it works, the server exits, or time runs out."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ServerUnavailable(
                    f"{self.label} exited with code {self._process.returncode} while starting; "
                    f"log:\n{_tail(self.log_path)}"
                )
            try:
                self._connect(self.admin_database).close()
                return
            except Exception as exc:  # noqa: BLE001 - any driver error means "not yet"
                last_error = exc
                time.sleep(0.05)
        raise ServerUnavailable(
            f"{self.label} did not accept connections on {self.host}:{self.port} within "
            f"{timeout:.0f} s (last error: {last_error}); log:\n{_tail(self.log_path)}"
        )

    # -- URLs and administration ------------------------------------------------------------

    def url(self, database: str | None = None, user: str | None = None,
            password: str | None = None) -> str:
        """A SQLAlchemy URL for this server; the admin account and database by default."""
        from sqlalchemy.engine import URL

        return URL.create(
            self.drivername,
            username=user or self.admin_user,
            password=password,
            host=self.host,
            port=self.port,
            database=database or self.admin_database,
        ).render_as_string(hide_password=False)

    @property
    def admin_url(self) -> str:
        """Superuser URL: for test set-up only, never what the code under test should get."""
        return self.url()

    def create_database(self, name: str) -> str:
        """Create an empty UTF-8 database; returns its admin URL (for creating test tables)."""
        _check_identifier("database", name)
        self.execute(self._create_database_sql(name))
        return self.url(name)

    def create_readonly_user(self, database: str, user: str, password: str) -> str:
        """Create a password login that can only read ``database``; returns its URL.

        This is the account README recommends, so tests can show that writes fail at the
        server, not only in the sandbox. It also covers tables created later by the admin.
        """
        _check_identifier("database", database)
        _check_identifier("user", user)
        self.execute(self._readonly_user_sql(database, user, password), database=database)
        return self.url(database, user, password)

    def execute(self, statements: Iterable[Statement], database: str | None = None) -> None:
        """Run admin statements in autocommit mode (DDL such as CREATE DATABASE needs it)."""
        connection = self._connect(database or self.admin_database)
        try:
            with connection.cursor() as cursor:
                for query, params in statements:
                    cursor.execute(query, params)
        finally:
            connection.close()

    # -- what each database supplies ----------------------------------------------------------

    @abc.abstractmethod
    def _initialise(self) -> None:
        """Create the data directory (initdb / mariadb-install-db)."""

    @abc.abstractmethod
    def _server_command(self) -> list[str]:
        """The server in the foreground, on ``self.port`` and loopback only."""

    @abc.abstractmethod
    def _connect(self, database: str | None) -> Any:
        """An autocommit DB-API connection as the admin user, failing fast when not ready."""

    @abc.abstractmethod
    def _create_database_sql(self, name: str) -> list[Statement]: ...

    @abc.abstractmethod
    def _readonly_user_sql(self, database: str, user: str, password: str) -> list[Statement]:
        """Statements run inside ``database`` that create a SELECT-only login."""


def _import_driver(label: str, module: str) -> Any:
    """Import a DB-API driver, turning its absence into a reason to skip."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ServerUnavailable(
            f"{label}: the Python driver {module!r} is not installed (pip install -e '.[dev]')"
        ) from None


def _major_version(bindir: str) -> int:
    """15 for /usr/lib/postgresql/15/bin, so the newest installed server wins."""
    version = Path(bindir).parent.name
    return int(version) if version.isdigit() else 0


class PostgresServer(DatabaseServer):
    """PostgreSQL: the superuser ``postgres`` is trusted on loopback; every other role needs
    its password (scram-sha-256), so the read-only accounts really authenticate."""

    label = "PostgreSQL"
    drivername = "postgresql+psycopg"
    service_account = "postgres"
    binaries = ("initdb", "postgres")
    debian_package = "postgresql"
    admin_user = "postgres"
    admin_database = "postgres"
    stop_signal = signal.SIGINT  # "fast" shutdown; SIGTERM would wait for clients to leave

    _HBA = (
        "local all all trust\n"
        f"host all postgres {LOOPBACK}/32 trust\n"
        f"host all all {LOOPBACK}/32 scram-sha-256\n"
    )

    @classmethod
    def _search_dirs(cls) -> list[str]:
        """Debian keeps the server binaries off PATH, one directory per major version."""
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major_version, reverse=True)
        return [*bindirs, *super()._search_dirs()]

    def _initialise(self) -> None:
        self._run([
            self._exe["initdb"], "--pgdata", str(self.datadir), "--username", self.admin_user,
            "--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions",
        ])
        hba = self.datadir / "pg_hba.conf"
        hba.write_text(self._HBA)
        self._give_to_service_account(hba)

    def _server_command(self) -> list[str]:
        settings = {
            "listen_addresses": LOOPBACK,
            "port": str(self.port),
            "unix_socket_directories": str(self.workdir),
            "TimeZone": "UTC",
            # Durability buys nothing for a database deleted at the end of the session.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return [self._exe["postgres"], "-D", str(self.datadir), *options]

    def _connect(self, database: str | None) -> Any:
        psycopg = _import_driver(self.label, "psycopg")
        return psycopg.connect(
            host=self.host, port=self.port, user=self.admin_user,
            dbname=database or self.admin_database, connect_timeout=2, autocommit=True,
        )

    def _create_database_sql(self, name: str) -> list[Statement]:
        from psycopg import sql

        query = sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'")
        return [(query.format(sql.Identifier(name)), None)]

    def _readonly_user_sql(self, database: str, user: str, password: str) -> list[Statement]:
        from psycopg import sql

        role, db = sql.Identifier(user), sql.Identifier(database)
        queries = [
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(password)),
            # PUBLIC may connect and create temp tables by default; keep only CONNECT, for us.
            sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db),
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, role),
            sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"),
            sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role),
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(role),
            sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}")
            .format(role),
        ]
        return [(query, None) for query in queries]


def _backticks(name: str) -> str:
    """Quote a MariaDB identifier (names are validated first; this keeps quoting honest)."""
    return "`" + name.replace("`", "``") + "`"


class MariaDBServer(DatabaseServer):
    """MariaDB: ``root`` logs in over TCP from 127.0.0.1 without a password (the install
    creates ``'root'@'127.0.0.1'``; ``--skip-name-resolve`` stops it matching ``localhost``);
    read-only accounts use passwords."""

    label = "MariaDB"
    #: URLs name the driver structq prefers (``executors/sql/mysql/drivers.py``), so the suite runs on it;
    #: ``test_executor_sql.py`` runs its guards once more on PyMySQL.
    drivername = "mysql+mysqldb" if importlib.util.find_spec("MySQLdb") else "mysql+pymysql"
    service_account = "mysql"
    binaries = ("mariadb-install-db", "mariadbd")
    debian_package = "mariadb-server"
    admin_user = "root"

    # Small redo log: less to write at install and start. Durability is pointless here.
    _INNODB = ("--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M",
               "--innodb-flush-log-at-trx-commit=0")

    def _initialise(self) -> None:
        user = [f"--user={self.service_account}"] if os.geteuid() == 0 else []
        self._run([
            self._exe["mariadb-install-db"], "--no-defaults", *user,
            f"--datadir={self.datadir}", "--auth-root-authentication-method=normal",
            "--skip-test-db", "--skip-name-resolve", *self._INNODB,
        ])

    def _server_command(self) -> list[str]:
        return [
            self._exe["mariadbd"], "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.workdir / 'mysqld.sock'}",
            f"--pid-file={self.workdir / 'mysqld.pid'}",
            f"--tmpdir={self.workdir}",
            f"--port={self.port}",
            f"--bind-address={LOOPBACK}",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--default-time-zone=+00:00",
            *self._INNODB,
        ]

    def _connect(self, database: str | None) -> Any:
        pymysql = _import_driver(self.label, "pymysql")
        return pymysql.connect(
            host=self.host, port=self.port, user=self.admin_user, database=database,
            connect_timeout=2, autocommit=True, charset="utf8mb4",
        )

    def _create_database_sql(self, name: str) -> list[Statement]:
        query = "CREATE DATABASE {} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        return [(query.format(_backticks(name)), None)]

    def _readonly_user_sql(self, database: str, user: str, password: str) -> list[Statement]:
        account = (user, LOOPBACK)
        return [
            ("CREATE USER %s@%s IDENTIFIED BY %s", (*account, password)),
            ("GRANT SELECT ON {}.* TO %s@%s".format(_backticks(database)), account),
        ]


# --------------------------------------------------------------------------------------------
# Search: osmem-server, an in-memory OpenSearch-compatible search server
# --------------------------------------------------------------------------------------------


class SearchServer(ManagedServer):
    """An osmem-server process (reports OpenSearch 3.x). It exits by itself when the test
    process dies (``--parent-pid``), so it needs no watchdog."""

    label = "osmem-server"

    def __init__(self, osmem: Any) -> None:
        self._osmem = osmem
        self.url: str = osmem.url
        self.version: str = osmem.version

    @classmethod
    def start(cls, timeout: float = STARTUP_TIMEOUT_S) -> SearchServer:
        try:
            from osmem_server import OsmemError, OsmemServer
        except ImportError:
            raise ServerUnavailable(
                "osmem-server is not installed (pip install -e '.[dev]')"
            ) from None
        try:
            osmem = OsmemServer.start(addr=f"{LOOPBACK}:0", startup_timeout=timeout)
        except (OsmemError, OSError) as exc:
            raise ServerUnavailable(f"{cls.label} did not start: {exc}") from exc
        server = cls(osmem)
        server._register()
        return server

    def stop(self) -> None:
        self._osmem.close()
        self._unregister()

    def kill(self) -> None:
        process = self._osmem.process
        if process.poll() is None:
            process.kill()
            process.wait()
        self._unregister()

    def is_running(self) -> bool:
        return bool(self._osmem.process.poll() is None)
