"""The SQL the sandbox generates runs on MariaDB wherever the gold query itself does.

Every defog MySQL gold query the sandbox accepts runs twice on MariaDB, on the defog databases
loaded from their MySQL dumps: as written (a plain connection) and as the sandbox regenerated
it (through ``SqlExecutor``, as in production). Some gold queries fail on MariaDB as written —
it is not MySQL 8: no ``REGEXP_LIKE``, error 1247 on ``ORDER BY CASE WHEN <alias>`` — and
those may fail regenerated too. The property: **the regenerated text fails only where the
original fails**, and where both run they return the same number of rows. A rewrite that
MariaDB cannot run (sqlglot writes ``a REGEXP b`` as ``REGEXP_LIKE(a, b)``) breaks it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corpora import LegitCorpus, load_defog, quiet_sqlglot
from structq.errors import ExecutionError, SandboxViolation
from structq.executors.sql import SqlExecutor
from structq.safety import check_sql


@pytest.fixture(scope="module")
def defog(shared_corpora: Path) -> LegitCorpus:
    quiet_sqlglot()
    return load_defog(shared_corpora)


@pytest.fixture(scope="module")
def loaded(mariadb_server: Any, defog_mariadb: dict[str, str], defog: LegitCorpus) -> Iterator[dict[str, Any]]:
    """One executor per defog database, and the server for running the gold text as written."""
    executors = {
        database: SqlExecutor(defog.manifests[(database, "mysql")].model_copy(update={"url": url}))
        for database, url in defog_mariadb.items()
        if (database, "mysql") in defog.manifests
    }
    yield {"server": mariadb_server, "executors": executors}
    for executor in executors.values():
        executor.close()


def _run_as_written(server: Any, database: str, sql: str) -> tuple[int | None, str | None]:
    connection = server._connect(database)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return len(cursor.fetchall()), None
    except Exception as exc:  # noqa: BLE001 - any failure of the gold text is the reference
        return None, str(exc)
    finally:
        connection.close()


def test_generated_text_fails_only_where_the_original_fails(defog: LegitCorpus, loaded: dict[str, Any]) -> None:
    broken: list[str] = []
    counts = {"accepted": 0, "original fails": 0, "both run": 0}
    for query in (q for q in defog.queries if q.dialect == "mysql"):
        try:
            safe = check_sql(query.sql, defog.manifest_for(query))
        except SandboxViolation:
            continue  # refusals are reviewed in tests/test_sandbox_corpora.py
        counts["accepted"] += 1
        rows, error = _run_as_written(loaded["server"], query.database, query.sql)
        counts["original fails"] += error is not None
        try:
            generated = len(loaded["executors"][query.database].fetch(safe).rows)
        except ExecutionError as exc:
            if error is None:
                broken.append(f"{query.origin}: {exc.cause}\n  original:  {query.sql}\n  generated: {safe.text}")
            continue
        if error is None:
            counts["both run"] += 1
            if generated != rows:
                broken.append(f"{query.origin}: {rows} rows as written, {generated} regenerated\n  {safe.text}")
    assert counts["accepted"] > 300, counts
    assert not broken, f"{len(broken)} of {counts}:\n" + "\n".join(broken)
