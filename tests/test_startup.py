"""The command line starts without the heavy libraries: they load inside the commands."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("langchain", "langchain_core", "langchain_openai", "sqlalchemy", "sqlglot", "psycopg", "pymysql", "MySQLdb",
         "opensearchpy", "elasticsearch", "osmem_server")


def imported_modules(statement: str) -> set[str]:
    """Top-level modules imported by running ``statement`` in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                            capture_output=True, text=True, check=True)
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_importing_the_cli_loads_no_heavy_library() -> None:
    loaded = imported_modules("import structq.cli")
    assert "structq" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_importing_structq_loads_no_heavy_library() -> None:
    assert not imported_modules("import structq") & set(HEAVY)


def test_help_runs_and_lists_every_command() -> None:
    result = subprocess.run([sys.executable, "-m", "structq.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for command in ("demo", "ask", "plan", "run", "chat", "sandbox", "check", "sync", "eval", "cache"):
        assert command in result.stdout
