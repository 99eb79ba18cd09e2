"""The command line starts without the heavy libraries: they load inside the commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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


# --------------------------------------------------------------------------------------------
# What a command imports when it runs (the import set, not its time)
# --------------------------------------------------------------------------------------------

#: Libraries that neither a saved plan nor a verified question on a SQLite file needs: the model
#: clients, the search clients and server, the other databases' drivers, the HTTP stack.
NOT_FOR_SQLITE = ("langchain", "langchain_core", "langchain_openai", "langgraph", "openai", "httpx", "opensearchpy",
                  "elasticsearch", "elastic_transport", "osmem_server", "psycopg", "pymysql", "MySQLdb", "jieba",
                  "numpy", "uvicorn", "starlette", "fastapi", "mcp")
#: The parts of structq that only planning needs; ``structq run`` of a saved plan leaves them out.
PLANNING_ONLY = ("structq.linking", "structq.templates", "structq.agent.cache", "structq.agent.templated",
                 "structq.agent.loop", "structq.agent.observe", "structq.agent.decline", "structq.agent.fallback")
#: What a plan of SQL steps on a SQLite file does not run: the other databases' backends and the
#: search DSL's sandbox.
NOT_FOR_A_SQLITE_PLAN = ("structq.executors.sql.postgresql", "structq.executors.sql.mysql", "structq.safety.dsl")

#: Runs the ``structq`` entry point with the given arguments, then prints every module it imported.
_RUN_AND_LIST = """
import json, sys
sys.argv = ["structq", *json.loads(sys.argv[1])]
from structq.cli import main
try:
    main()
finally:
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""

SHOP = """\
source: shop
kind: sql
url: sqlite:///{db}
tables:
  - name: items
    columns:
      - {{name: id, type: integer}}
      - {{name: name, type: text}}
examples:
  - question: How many items are there?
    steps:
      - output_key: n
        source: shop
        query: SELECT count(*) AS n FROM items
"""
PLAN = '{"steps": [{"output_key": "n", "source": "shop", "query": "SELECT count(*) AS n FROM items"}]}'


def command_modules(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """What ``structq ARGS…`` printed, and the modules it had imported when it ended (it must succeed)."""
    import sqlite3

    with sqlite3.connect(tmp_path / "shop.db") as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT)")
        connection.executemany("INSERT OR REPLACE INTO items VALUES (?, ?)", [(i, f"item {i}") for i in range(42)])
    (tmp_path / "shop.yaml").write_text(SHOP.format(db=tmp_path / "shop.db"), encoding="utf-8")
    (tmp_path / "plan.json").write_text(PLAN, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "STRUCTQ_LLM")}
    env.update(STRUCTQ_AUDIT="0", STRUCTQ_CACHE="0", STRUCTQ_STATE_DIR=str(tmp_path / "state"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", _RUN_AND_LIST, json.dumps(args)], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    listed = [line for line in result.stderr.splitlines() if line.startswith("MODULES ")]
    assert result.returncode == 0 and listed, result.stderr
    return result.stdout, set(json.loads(listed[-1].removeprefix("MODULES ")))


def loaded_from(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_run_of_a_saved_plan_imports_only_what_it_runs(tmp_path: Path) -> None:
    out, modules = command_modules(tmp_path, "run", "-m", "shop.yaml", "plan.json", "--json")
    assert json.loads(out)["steps"][0]["rows"] == [[42]]
    assert {"sqlalchemy", "sqlglot", "structq.safety"} <= modules  # it did run the plan, through the sandbox
    assert not loaded_from(modules, NOT_FOR_SQLITE), loaded_from(modules, NOT_FOR_SQLITE)
    assert not loaded_from(modules, PLANNING_ONLY), loaded_from(modules, PLANNING_ONLY)
    assert not loaded_from(modules, NOT_FOR_A_SQLITE_PLAN), loaded_from(modules, NOT_FOR_A_SQLITE_PLAN)


def test_a_backend_loads_when_a_url_needs_it() -> None:
    """The server backends are imported on first use, and each is one strategy object."""
    from sqlalchemy.engine import make_url

    from structq.executors.sql import session

    postgres = session.backend_for(make_url("postgresql://u@h/db"))
    assert postgres is session.backend_for(make_url("postgres+psycopg://u@h/db")) is session.POSTGRES
    assert session.backend_for(make_url("mariadb://u@h/db")) is session.MYSQL
    assert type(session.SQLITE).__name__ == "SQLiteBackend"


def test_ask_of_a_verified_question_imports_no_model_or_search_client(tmp_path: Path) -> None:
    out, modules = command_modules(tmp_path, "ask", "How many items are there?", "-m", "shop.yaml", "--json")
    assert json.loads(out)["plan_source"] == "verified"
    assert not loaded_from(modules, NOT_FOR_SQLITE), loaded_from(modules, NOT_FOR_SQLITE)
