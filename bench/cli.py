"""How fast the command line starts, and what it imports on the way.

Prints the median wall time of ``structq --help`` over 10 runs next to ``python -c pass``
(the target is under 0.3 s), then, from ``python -X importtime``, the heavy libraries (LangChain,
SQLAlchemy, sqlglot, the search clients, …) that ``import structq.cli`` and ``structq --help``
pull in — none is the goal: they load when a command needs them — and the slowest imports.
Figures only; nothing is asserted.

Run: ``python bench/cli.py``
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
#: What the ``structq`` script runs; and ``structq --help`` in-process, for ``-X importtime``.
ENTRY_POINT = "from structq.cli import main; main()"
HELP_CODE = f"import sys; sys.argv = ['structq', '--help']; {ENTRY_POINT}"


def structq_command() -> list[str]:
    """The installed ``structq`` script, else the same entry point through this interpreter."""
    script = Path(sys.executable).with_name("structq")
    found = str(script) if script.exists() else shutil.which("structq")
    return [found] if found else [sys.executable, "-c", ENTRY_POINT]


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


def import_times(code: str) -> list[Import]:
    """Every module imported while running ``code``, from ``python -X importtime``."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                            check=False)
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


def report_imports(label: str, code: str) -> None:
    """The heavy packages ``code`` imports, its total import time and its slowest top-level imports."""
    imports = import_times(code)
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


def main() -> None:
    command = structq_command()
    baseline = median_wall([sys.executable, "-c", "pass"])
    help_time = median_wall([*command, "--help"])
    print(f"median of {RUNS} runs")
    print(f"  python -c pass      {baseline:6.3f} s")
    verdict = "met" if help_time < TARGET_S else "MISSED"
    print(f"  structq --help      {help_time:6.3f} s   (target < {TARGET_S} s: {verdict})")
    print(f"  structq's own share {help_time - baseline:6.3f} s")
    report_imports('python -X importtime -c "import structq.cli"', "import structq.cli")
    report_imports("structq --help (in-process)", HELP_CODE)


if __name__ == "__main__":
    main()
