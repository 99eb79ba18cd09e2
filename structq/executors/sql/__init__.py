"""Run checked SQL against SQLite files (``sqlite3``), PostgreSQL and MySQL/MariaDB (SQLAlchemy).

The sandbox is the first line of defence; this executor is the second, for the day a query it
should have refused gets through. Whatever the text says, a query here:

- runs on a **read-only** connection or transaction, and is rolled back, never committed;
- is cancelled by the **server** after ``limits.timeout_s``, and if the server's own timeout
  did not stop it, a backstop cancels it on the server (``cancel.py``) half a second later;
  a dead server fails fast thanks to a connect timeout;
- returns at most ``max_rows`` rows, fetched with ``fetchmany`` (one more tells truncation).

What differs between databases lives in one small strategy object per backend (``Backend``,
one module each, as sqlglot has one file per dialect): how to open a read-only connection,
how to start a read-only transaction with a timeout, and how to recognise a timeout or a lost
server in the driver's error. Everything else is shared:

- ``fetch.py``     binding (``bind``), fetching (``fetch``) and reporting (``fetched_result``);
- ``guards.py``    the ``Backend`` base class, the client-side ``Backstop`` timer (servers);
- ``deadlines.py`` the one deadline thread behind every SQLite statement;
- ``sqlite_pool.py`` the ``sqlite3`` connections a SQLite file's queries run on, no SQLAlchemy;
- ``sqlite.py``, ``postgresql/``, ``mysql/``  one backend each; a backend with more than one
  concern is a package (PostgreSQL: ``arrays.py`` packs lists, ``describe.py`` asks the server
  their types, ``stream.py`` reads long results in chunks; MySQL: ``drivers.py``, its two drivers);
- ``session.py``   URL → backend, the read-only engine and transaction (``sync`` uses them too);
- ``executor.py``  ``SqlExecutor``: fetch, translate errors;
- ``grants.py``    the least-privilege SQL for a source's database account (``structq grants``):
  column-level SELECT grants and, on PostgreSQL, row-level security policies that read the
  caller's row-filter variables, which each transaction sets (``Backend.row_settings``).

Per backend (each guard verified against the real server in ``tests/test_executor_sql.py``):

===========  ======================================  ==========================================
backend      read-only                               statement timeout
===========  ======================================  ==========================================
SQLite       file opened ``mode=ro`` (URI) plus      progress handler that aborts the VM past
             ``PRAGMA query_only``; no ATTACH;       the deadline + the process's one deadline
             values, SQL text and LIKE patterns      thread (``deadlines.py``) interrupts a long
             size-limited; REGEXP matched by RE2;    single step at the deadline; ``REGEXP``
             a pooled connection whose file was      by RE2, linear in the text
             moved or replaced is dropped
PostgreSQL   ``SET TRANSACTION READ ONLY`` per       ``set_config('statement_timeout', …,
             query, ``default_transaction_read_      true)`` (transaction-local) + a timer that
             only`` per session; every statement     cancels the backend as a backstop
             prepared, so ``…; COMMIT; …`` cannot
             run (the simple protocol would run it)
MariaDB /    ``SET SESSION TRANSACTION READ ONLY``   MariaDB ``max_statement_time`` (s), MySQL
MySQL        + ``START TRANSACTION READ ONLY``;      ``max_execution_time`` (ms, SELECT only);
             the session mode matters: a READ ONLY   ``KILL QUERY`` from a second connection
             transaction alone still lets DDL run    as a backstop, then the read timeout
             (DDL commits implicitly first)
===========  ======================================  ==========================================

With a ``schema`` in the manifest, each transaction is also pinned to it (PostgreSQL
``search_path``, MySQL/MariaDB ``USE``): the sandbox already writes every table qualified
with that schema, and the pin keeps any name that is not from reaching a same-named object
elsewhere (``Backend.pin_schema``).

Plain ``postgresql://`` URLs (and other drivers' URLs) are run with psycopg 3; plain
``mysql://`` / ``mariadb://`` ones with mysqlclient when it is installed, PyMySQL otherwise
(``mysql+pymysql://`` and ``mysql+mysqldb://`` keep theirs). The guards above are tested with
those drivers only.
"""

from __future__ import annotations

from .executor import SqlExecutor
from .fetch import Fetched, NotAQuery, Statement, bind, fetch, fetched_result
from .guards import Backend, Setup
from .session import backend_for, begin_read_only, parse_url, read_only_engine, resolve
from .sqlite import SQLITE_TOO_BIG_HINT, limit_sqlite, sqlite_deadline, sqlite_interrupted, sqlite_too_big

__all__ = ["SQLITE_TOO_BIG_HINT", "Backend", "Fetched", "NotAQuery", "Setup", "SqlExecutor", "Statement",
           "backend_for", "begin_read_only", "bind", "fetch", "fetched_result", "limit_sqlite", "parse_url",
           "read_only_engine", "resolve", "sqlite_deadline", "sqlite_interrupted", "sqlite_too_big"]
