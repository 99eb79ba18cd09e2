"""The command line starts without the heavy libraries: they load inside the commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
#: What only a model-written answer needs (the answer check and its number words, the model's
#: prompts): a run with no model renders its answer deterministically.
MODEL_ANSWER_ONLY = ("structq.agent.figures", "structq.agent.numerals", "structq.agent.planner",
                     "structq.agent.routing")

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
    assert {"sqlite3", "sqlglot", "structq.safety"} <= modules  # it did run the plan, through the sandbox
    assert not loaded_from(modules, ("sqlalchemy",)), "a SQLite source runs on sqlite3 connections straight"
    assert not loaded_from(modules, NOT_FOR_SQLITE), loaded_from(modules, NOT_FOR_SQLITE)
    assert not loaded_from(modules, PLANNING_ONLY), loaded_from(modules, PLANNING_ONLY)
    assert not loaded_from(modules, NOT_FOR_A_SQLITE_PLAN), loaded_from(modules, NOT_FOR_A_SQLITE_PLAN)
    assert not loaded_from(modules, MODEL_ANSWER_ONLY), loaded_from(modules, MODEL_ANSWER_ONLY)


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


# --------------------------------------------------------------------------------------------
# Who imports what, and what is built before it is used
# --------------------------------------------------------------------------------------------

#: Runs the ``structq`` entry point with the given arguments under ``-X importtime``.
_RUN = "import json, sys; sys.argv = ['structq', *json.loads(sys.argv[1])]; from structq.cli import main; main()"


def importers(tmp_path: Path, *args: str) -> dict[str, str | None]:
    """Every module ``structq ARGS…`` imported → the module whose import first imported it (None
    for a top-level import), read from ``-X importtime``: each module is printed after the
    modules it imported, one nesting level deeper."""
    command_modules(tmp_path, *args)  # the files, and that the command succeeds
    env = {**os.environ, "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0", "STRUCTQ_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", _RUN, json.dumps(args)], cwd=tmp_path,
                            env=env, capture_output=True, text=True, check=True)
    found: dict[str, str | None] = {}
    waiting: dict[int, list[str]] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        name = line.rsplit("|", 1)[1]
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        for child in waiting.pop(depth + 1, []):
            found[child] = name.strip()
        waiting.setdefault(depth, []).append(name.strip())
    found.update({name: None for name in waiting.get(0, [])})
    return found


def test_run_of_a_saved_plan_starts_no_event_loop(tmp_path: Path) -> None:
    """A synchronous run drives the agent's core on its own thread (``bridge.block_on``): no
    structq module imports asyncio on the way (a library may: SQLAlchemy does), nor the thread
    pools' module for a plan with nothing to overlap; the search server the command line chooses
    is not made for a plan that reads no embedded source, and the demo folder's default (which
    asks platformdirs) is not worked out for a manifest that does not name it."""
    imported = importers(tmp_path, "run", "-m", "shop.yaml", "plan.json", "--json")
    assert "structq.agent.bridge" in imported
    for module in ("asyncio", "concurrent.futures"):
        by = imported.get(module)
        assert by is None or not by.startswith("structq"), f"{module} imported by {by}"
    assert "structq.executors.search.server_daemon" not in imported
    assert "platformdirs" not in imported


def test_a_synchronous_run_makes_its_calls_on_the_callers_thread(tmp_path: Path) -> None:
    """``Agent.run``: the plan runs and its answer is written on the calling thread; the
    engine's call pool is never started. From inside a running event loop too."""
    import asyncio
    import threading

    from structq.agent import Agent, Plan
    from structq.capabilities import CapabilitySet
    from structq.config import Settings

    command_modules(tmp_path, "run", "-m", "shop.yaml", "plan.json", "--json")  # the database and manifest
    plan = Plan.parse(json.loads(PLAN))
    with Agent(CapabilitySet.from_path(tmp_path / "shop.yaml"),
               settings=Settings.from_env(audit_enabled=False, cache_enabled=False)) as agent:
        assert [list(row) for row in agent.run(plan).results.final.rows] == [[42]]

        async def from_a_coroutine() -> list[list[int]]:
            return [list(row) for row in agent.run(plan).results.final.rows]

        assert asyncio.run(from_a_coroutine()) == [[42]]
        assert not [t.name for t in threading.enumerate() if t.name.startswith("structq-call")]


def test_the_core_driven_without_a_loop_refuses_to_await_anything_else() -> None:
    import asyncio

    from structq.agent.bridge import block_on

    async def sleeps() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="not Engine.call"):
        block_on(sleeps)


def test_importing_the_model_builds_no_validator() -> None:
    """Pydantic models build their validators on first use (``defer_build``): importing the
    manifest and plan models builds none, so pydantic's plugin loader (which reads every
    installed distribution's entry points) is not even imported."""
    statement = ("import json, sys, structq.agent, structq.capabilities\n"
                 "from structq.agent.plan import Plan\nfrom structq.capabilities import Manifest\n"
                 "print(json.dumps([sorted(sys.modules), Plan.__pydantic_complete__, Manifest.__pydantic_complete__]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, check=True, env=env)
    modules, plan_built, manifest_built = json.loads(result.stdout)
    assert not plan_built and not manifest_built
    assert "pydantic" in modules and "pydantic.plugin._loader" not in modules


def test_command_modules_do_not_postpone_annotations() -> None:
    """typer reads every command's parameters at each start: annotations that are text would be
    compiled and evaluated each time (``structq/cli/__init__.py``)."""
    import inspect

    from structq.cli import app

    def callbacks(group) -> list:
        found = [c.callback for c in group.registered_commands]
        found += [group.registered_callback.callback] if group.registered_callback else []
        for sub in group.registered_groups:
            found += callbacks(sub.typer_instance)
        return found

    texts = {f"{fn.__module__}.{fn.__name__}": name for fn in callbacks(app)
             for name, annotation in inspect.get_annotations(fn).items() if isinstance(annotation, str)}
    assert not texts, texts


def test_a_synchronous_run_keeps_what_it_sets_to_itself() -> None:
    """Driven on the caller's thread, the core still runs in a copy of the caller's context, as
    ``asyncio.run`` ran it: a context variable set inside does not change the caller's."""
    import contextvars

    from structq.agent.bridge import block_on, call_here

    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller")

    def inner() -> str:
        seen.set("call")
        return seen.get()

    async def core() -> tuple[str, str]:
        seen.set("core")
        return call_here(inner), seen.get()

    assert block_on(core) == ("call", "core")  # the call's setting stays the call's
    assert seen.get() == "caller"
