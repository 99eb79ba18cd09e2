"""How fast the command line starts, what it imports on the way, and what a search question costs.

Prints the median wall time of ``structq --help`` over 10 runs next to ``python -c pass``
(the target is under 0.3 s), then, from ``python -X importtime``, the heavy libraries (LangChain,
SQLAlchemy, sqlglot, the search clients, …) that ``import structq.cli`` and ``structq --help``
pull in — none is the goal: they load when a command needs them — and the slowest imports.

Last, a search question of the demo (a verified example, no model) through ``structq ask``:
with the embedded search server started inside the command (``--no-daemon``: start the server, index
the 12,854 reports, answer) and with the shared background search server already warm (target
≤ 1.5 s), in interleaved rounds, with each command's peak resident memory. The demo data is
built at full scale in a temporary folder, and the background search server it starts is stopped at
the end. ``--no-search`` skips this part.
Then ``structq run`` of a one-step plan on a SQLite file, whole process, next to a process that only
imports the libraries (and standard modules) it imports — the floor that no change inside structq
can go under; the run minus the floor, structq's own time, has a line of its own (with
``--before``, for each checkout against its own floor) — and next to the equivalent
LangChain script — ``SQLDatabase.from_uri(url).run(query)`` when ``langchain_community`` is
installed, else what that does written out (``langchain_core`` imported, the tables reflected
with SQLAlchemy, the query run and its rows printed) — in interleaved rounds, with each one's
peak resident memory (target ≤ 1.5×), and the heavy packages ``structq run`` imports.
Figures only; nothing is asserted.

Run: ``python bench/cli.py [--no-search] [--run-only] [--rounds N] [--before CHECKOUT] [--instructions]``
(``--before /path/to/main``: that checkout's ``structq run`` joins the same interleaved rounds;
``--instructions``: each command is also run once under valgrind's callgrind, whose instruction
counts do not move with the machine's load as times do).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RUNS = 10
TARGET_S = 0.3
#: Top-level packages that must stay off the start-up path.
HEAVY = ("langchain", "langchain_core", "langchain_openai", "langchain_community", "langgraph", "openai",
         "sqlalchemy", "sqlglot", "elasticsearch", "opensearchpy", "elastic_transport", "jieba", "numpy",
         "psycopg", "pymysql", "httpx", "pydantic", "yaml", "rich")
#: Every Python this bench starts gets ``-P``: without it ``-c`` and ``-m`` put the current folder
#: first on the import path, and run from inside a checkout they would import its ``structq``
#: whatever ``PYTHONPATH`` names (``--before`` would measure the same code twice).
#: What the ``structq`` script runs; and ``structq --help`` in-process, for ``-X importtime``.
ENTRY_POINT = "from structq.cli import main; main()"
HELP_CODE = f"import sys; sys.argv = ['structq', '--help']; {ENTRY_POINT}"


def structq_command() -> list[str]:
    """The installed ``structq`` script, else the same entry point through this interpreter."""
    script = Path(sys.executable).with_name("structq")
    found = str(script) if script.exists() else shutil.which("structq")
    return [found] if found else [sys.executable, "-P", "-c", ENTRY_POINT]


def median_wall(command: list[str], runs: int = RUNS) -> float:
    """Median seconds of ``runs`` runs of ``command`` (output discarded; a failure is an error)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@dataclass(frozen=True)
class Import:
    """One line of ``-X importtime``: times in microseconds, ``depth`` 0 for a top-level import."""

    module: str
    self_us: int
    cumulative_us: int
    depth: int

    @property
    def package(self) -> str:
        return self.module.split(".", 1)[0]


def import_times(code: str, env: dict[str, str] | None = None) -> list[Import]:
    """Every module imported while running ``code``, from ``python -X importtime``."""
    result = subprocess.run([sys.executable, "-P", "-X", "importtime", "-c", code], capture_output=True, text=True,
                            check=False, env=env)
    imports = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2  # one space, then two per nesting level
        imports.append(Import(name.strip(), int(own), int(cumulative), depth))
    return imports


def heavy_imports(imports: list[Import]) -> dict[str, tuple[int, float]]:
    """Each heavy package imported: how many of its modules, and their own milliseconds added up."""
    found: dict[str, tuple[int, float]] = {}
    for i in imports:
        if i.package in HEAVY:
            modules, ms = found.get(i.package, (0, 0.0))
            found[i.package] = (modules + 1, ms + i.self_us / 1000)
    return found


def report_imports(label: str, code: str, env: dict[str, str] | None = None) -> None:
    """The heavy packages ``code`` imports, its total import time and its slowest top-level imports."""
    imports = import_times(code, env)
    heavy = heavy_imports(imports)
    top_level = sorted((i for i in imports if i.depth == 0), key=lambda i: -i.cumulative_us)
    total_ms = sum(i.cumulative_us for i in top_level) / 1000
    print(f"\n{label}: {len(imports)} modules, {total_ms:.0f} ms of imports (as -X importtime measures them)")
    if heavy:
        listed = ", ".join(f"{name} ({modules} modules, {ms:.0f} ms)" for name, (modules, ms) in heavy.items())
        print(f"  heavy packages imported: {listed}")
    else:
        print(f"  heavy packages imported: none (checked: {', '.join(HEAVY)})")
    slowest = ", ".join(f"{i.module} {i.cumulative_us / 1000:.0f} ms" for i in top_level[:8])
    print(f"  slowest top-level imports: {slowest}")


SEARCH_QUESTION = "2026年10月有哪些周报提到了灰度发布？"
SEARCH_ROUNDS = 3
#: Runs a command and prints, as the last line, the peak resident memory of its largest process
#: (kB) and the CPU seconds (user + system) its processes used.
_PEAK_RSS = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL); used = resource.getrusage(resource.RUSAGE_CHILDREN); "
             "print(used.ru_maxrss, used.ru_utime + used.ru_stime)")


def timed_with_memory(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB) of one run of ``command``."""
    wall, rss, _ = timed_with_cpu(command, env)
    return wall, rss


def timed_with_cpu(command: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds of one run of ``command``. On a busy machine
    the CPU seconds vary less than the wall time: waiting for a core is not counted."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-P", "-c", _PEAK_RSS, *command], env=env, check=True,
                            capture_output=True, text=True)
    rss_kb, cpu_s = result.stdout.split()[-2:]
    return time.perf_counter() - started, int(rss_kb) // 1024, float(cpu_s)


def report_search_question(command: list[str]) -> None:
    """A search server started in the command vs the warm background one, interleaved."""
    import os
    import tempfile

    from structq.demo.builder import build_demo

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        build_demo(root / "demo")
        env = {**os.environ, "STRUCTQ_DEMO_DIR": str(root / "demo"), "STRUCTQ_STATE_DIR": str(root / "state"),
               "STRUCTQ_SEARCH_DAEMON": "1", "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"}
        ask = ["ask", SEARCH_QUESTION, "--no-answer"]
        try:
            started = time.perf_counter()
            subprocess.run([*command, *ask], env=env, check=True, stdout=subprocess.DEVNULL)
            first = time.perf_counter() - started
            cold, warm = [], []
            for _ in range(SEARCH_ROUNDS):
                cold.append(timed_with_memory([*command, "--no-daemon", *ask], env))
                warm.append(timed_with_memory([*command, *ask], env))
        finally:
            subprocess.run([*command, "search-server", "stop"], env=env, stdout=subprocess.DEVNULL)
    print(f"\nsearch question via structq ask ({SEARCH_QUESTION}), median of {SEARCH_ROUNDS} interleaved rounds")
    print(f"  first command, starting the background search server  {first:6.2f} s")
    for label, runs in (("--no-daemon (search server in the command)", cold), ("background search server, warm", warm)):
        wall = statistics.median(t for t, _ in runs)
        rss = max(m for _, m in runs)
        print(f"  {label:<36} {wall:6.2f} s   peak RSS {rss:,} MiB")
    verdict = "met" if statistics.median(t for t, _ in warm) <= 1.5 else "MISSED"
    print(f"  target: warm ≤ 1.5 s ({verdict})")


RUN_ROUNDS = 7
RUN_TARGET = 1.5
#: The baseline of ``report_run``: LangChain's own ``SQLDatabase`` when installed, else the same calls.
_SQLDATABASE = """import sys
try:
    from langchain_community.utilities import SQLDatabase
except ImportError:
    import langchain_core.tools  # noqa: F401 - what an agent using SQLDatabase loads anyway
    from sqlalchemy import MetaData, create_engine, text
    engine = create_engine(sys.argv[1])
    MetaData().reflect(bind=engine)
    with engine.connect() as connection:
        print(connection.execute(text(sys.argv[2])).fetchall())
else:
    print(SQLDatabase.from_uri(sys.argv[1]).run(sys.argv[2]))
"""


#: The floor of ``report_run``: a process that imports what ``structq run`` imports, structq's own modules aside.
LIBRARIES = "its libraries alone (floor)"


#: What ``report_run`` calls the time that is structq's and nobody else's: the run minus its floor.
OWN = "structq's own time (run − floor)"


def _own_time_pairs(runs: dict[str, object]) -> list[tuple[str, str]]:
    """Each ``structq run`` label with the label of its floor (the same checkout's libraries)."""
    pairs = []
    for label in runs:
        if label.startswith("structq run"):
            floor = LIBRARIES + label.removeprefix("structq run")
            if floor in runs:
                pairs.append((label, floor))
    return pairs


def libraries_code(imports: list[Import]) -> str:
    """Code that imports every module of ``imports`` that is not structq's own, in the same order:
    what ``structq run`` would cost if structq itself took no time (a module that does not load
    on its own is skipped)."""
    names = [i.module for i in imports if i.package != "structq"]
    return (f"import importlib\nfor name in {names!r}:\n    try:\n        importlib.import_module(name)\n"
            "    except Exception:\n        pass\n")


def instructions(argv: list[str], env: dict[str, str], cwd: Path) -> int | None:
    """Instructions one run of ``argv`` executes, counted by valgrind's callgrind (None without
    valgrind): unlike time, the same on a busy machine as on a quiet one, to a fraction of a percent."""
    import re

    if shutil.which("valgrind") is None:
        return None
    result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env=env,
                            cwd=cwd, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", result.stderr)
    return int(found.group(1)) if result.returncode == 0 and found else None


def report_instructions(commands: dict[str, tuple[list[str], dict[str, str]]], cwd: Path) -> None:
    """Each command once under callgrind: instructions, the ratio to the LangChain script, and
    structq's own share (the run minus its floor)."""
    counted = {label: instructions(argv, its_env, cwd) for label, (argv, its_env) in commands.items()}
    baseline = counted.get("LangChain SQLDatabase")
    if baseline is None:
        print("\ninstructions: not counted (valgrind is not installed, or a command failed under it)")
        return
    print("\ninstructions executed (valgrind callgrind, one run each)")
    for label, count in counted.items():
        if count is not None:
            print(f"  {label:<36} {count / 1e9:6.3f} G   {count / baseline:5.2f}× the LangChain script")
    for run, floor in _own_time_pairs(counted):
        if counted[run] is not None and counted[floor] is not None:
            own = counted[run] - counted[floor]
            print(f"  structq's own instructions (run − floor) of {run}: {own / 1e9:6.3f} G "
                  f"({own / counted[run]:.0%} of the run)")


def report_run(command: list[str], rounds: int = RUN_ROUNDS, before: Path | None = None,
               count_instructions: bool = False) -> None:
    """Whole-process ``structq run`` of a one-step plan vs the LangChain script, interleaved; with
    ``before`` (another checkout of structq, e.g. the main branch), its ``structq run`` too, in
    the same rounds, so that the ratios before and after a change come from one run."""
    import json
    import os
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with sqlite3.connect(root / "shop.db") as connection:
            connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
            connection.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item {i}") for i in range(1000)])
        url = f"sqlite:///{root / 'shop.db'}"
        (root / "shop.yaml").write_text(f"source: shop\nkind: sql\nurl: {url}\ntables:\n  - name: items\n"
                                        "    columns:\n      - {name: id, type: integer}\n"
                                        "      - {name: name, type: text}\n", encoding="utf-8")
        query = "SELECT count(*) AS n FROM items"
        (root / "plan.json").write_text(json.dumps({"steps": [{"output_key": "n", "source": "shop", "query": query}]}))
        env = {**os.environ, "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"}
        run_args = ["run", "-m", str(root / "shop.yaml"), str(root / "plan.json")]
        run_code = f"import sys; sys.argv = ['structq', *{run_args!r}]; {ENTRY_POINT}"
        commands: dict[str, tuple[list[str], dict[str, str]]] = {"structq run": ([*command, *run_args], env)}
        commands[LIBRARIES] = ([sys.executable, "-P", "-c", libraries_code(import_times(run_code, env))], env)
        if before is not None:
            before_env = {**env, "PYTHONPATH": os.pathsep.join([str(before), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
            commands[f"structq run ({before.name})"] = ([sys.executable, "-P", "-m", "structq.cli", *run_args], before_env)
            commands[f"{LIBRARIES} ({before.name})"] = (
                [sys.executable, "-P", "-c", libraries_code(import_times(run_code, before_env))], before_env)
        commands["LangChain SQLDatabase"] = ([sys.executable, "-P", "-c", _SQLDATABASE, url, query], env)
        runs: dict[str, list[tuple[float, int, float]]] = {label: [] for label in commands}
        for _ in range(rounds):
            for label, (argv, its_env) in commands.items():
                runs[label].append(timed_with_cpu(argv, its_env))
        report_imports("structq run of the plan (in-process)", run_code, env)
        if count_instructions:
            report_instructions(commands, root)
    walls = {label: statistics.median(t for t, _, _ in measured) for label, measured in runs.items()}
    cpus = {label: statistics.median(c for _, _, c in measured) for label, measured in runs.items()}
    baseline = runs["LangChain SQLDatabase"]
    print(f"\none-step plan on SQLite, whole process, median of {rounds} interleaved rounds")
    for label, measured in runs.items():
        print(f"  {label:<28} {walls[label]:6.2f} s wall  {cpus[label]:6.2f} s CPU   "
              f"peak RSS {max(m for _, m, _ in measured):,} MiB")
    for run, floor in _own_time_pairs(runs):
        own = [a[0] - b[0] for a, b in zip(runs[run], runs[floor])]
        print(f"  {OWN} of {run}: {walls[run] - walls[floor]:5.2f} s wall, {cpus[run] - cpus[floor]:5.2f} s CPU "
              f"(median per round {statistics.median(own):.2f} s wall)")
    for label, measured in runs.items():
        if label == "LangChain SQLDatabase":
            continue
        ratio = walls[label] / walls["LangChain SQLDatabase"]
        ratios = sorted(a[0] / b[0] for a, b in zip(measured, baseline))
        verdict = "met" if ratio <= RUN_TARGET else "MISSED"
        print(f"  {label} ratio {ratio:.2f}× wall [{ratios[0]:.2f}–{ratios[-1]:.2f} per round], "
              f"{cpus[label] / cpus['LangChain SQLDatabase']:.2f}× CPU (target ≤ {RUN_TARGET}×: {verdict})")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-search", action="store_true", help="skip the search question")
    parser.add_argument("--run-only", action="store_true", help="only the structq run comparison")
    parser.add_argument("--rounds", type=int, default=RUN_ROUNDS, help="rounds of the structq run comparison")
    parser.add_argument("--before", type=Path, help="another checkout of structq whose structq run joins the rounds")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions once under valgrind (steady on a busy machine)")
    args = parser.parse_args()
    command = structq_command()
    if not args.run_only:
        baseline = median_wall([sys.executable, "-P", "-c", "pass"])
        help_time = median_wall([*command, "--help"])
        print(f"median of {RUNS} runs")
        print(f"  python -c pass      {baseline:6.3f} s")
        verdict = "met" if help_time < TARGET_S else "MISSED"
        print(f"  structq --help      {help_time:6.3f} s   (target < {TARGET_S} s: {verdict})")
        print(f"  structq's own share {help_time - baseline:6.3f} s")
        report_imports('python -X importtime -c "import structq.cli"', "import structq.cli")
        report_imports("structq --help (in-process)", HELP_CODE)
    report_run(command, args.rounds, args.before, args.instructions)
    if not (args.run_only or args.no_search):
        report_search_question(command)


if __name__ == "__main__":
    main()
