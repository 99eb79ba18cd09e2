"""The import direction of DESIGN §2, held by a test so it stays true.

Every module under ``structq/`` is parsed (never imported) and every ``import`` / ``from … import``
in it is collected: module-level imports AND imports inside functions, methods and
``if TYPE_CHECKING:`` blocks. Lazy imports count: they keep ``structq --help`` fast, but they are
still a dependency, and a lazy import against the direction closes an import circle as surely as
an eager one. Relative imports are resolved against the importing module's package.

Each import is reduced to the top-level unit it lands in (``structq.safety.sql.parse`` →
``safety``, ``structq/errors.py`` → ``errors``) and checked against ``ALLOWED``: one row per unit,
listing what it may import. An import outside its row fails unless it is one of the named
``EXCEPTIONS`` below, each with the reason it is still there; an exception that no longer occurs
fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parent.parent / "structq"

_BOTTOM = {"errors", "config", "periods"}

#: What each unit may import (besides itself). DESIGN §2:
#: ``capabilities ← safety ← executors ← sources ← agent ← cli, langchain, server`` (``sources``:
#: the registry of source kinds, which names each kind's sandbox check and executor); ``linking`` beside
#: ``safety`` (reads capabilities, no executor); ``sync`` uses capabilities, executors and sources (and the
#: layers below them, ``linking`` for its value index); ``errors``/``config`` at the bottom;
#: ``demo`` standalone. ``structq`` is the root ``__init__`` (the public re-exports and
#: ``__version__``), which anything may read.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "periods": set(),
    "config": {"errors"},
    "structq": {"errors"},  # the lazy re-exports go through __getattr__ strings, not imports
    "demo": set(),
    "capabilities": _BOTTOM,
    "safety": _BOTTOM | {"capabilities"},
    "linking": _BOTTOM | {"capabilities"},
    "templates": _BOTTOM | {"capabilities"},
    "executors": _BOTTOM | {"capabilities", "safety"},
    "sources": _BOTTOM | {"capabilities", "safety", "executors"},
    "sync": _BOTTOM | {"capabilities", "safety", "linking", "executors", "sources"},
    "agent": _BOTTOM | {"capabilities", "safety", "linking", "executors", "sources", "templates"},
    "langchain": _BOTTOM | {"structq", "capabilities", "safety", "linking", "executors", "sources", "agent"},
    "server": _BOTTOM | {"structq", "capabilities", "safety", "linking", "executors", "sources", "agent"},
    "cli": _BOTTOM | {"structq", "capabilities", "safety", "linking", "executors", "sources", "agent",
                      "sync", "server", "langchain", "demo"},
    "__main__": {"cli"},
}


class Import(NamedTuple):
    source: str  # importing unit
    target: str  # imported unit
    where: str  # file:line


#: Known imports against the direction, each named by (importing unit, imported unit, file) with
#: the one-line reason it is not fixed yet. Never widen this into a blanket skip.
EXCEPTIONS: dict[tuple[str, str, str], str] = {}


def _unit(module: str) -> str | None:
    """The top-level unit of a dotted ``structq`` module name, or None outside structq."""
    parts = module.split(".")
    if parts[0] != "structq":
        return None
    return parts[1] if len(parts) > 1 else "structq"


def _module_name(path: Path) -> tuple[str, str]:
    """(dotted module name, dotted package relative imports resolve against)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def _imported(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or ""]
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
        if node.module is None:  # ``from . import x``: x may be a submodule
            return [f"{module}.{alias.name}" for alias in node.names]
        return [module]
    return []


def collect_imports() -> list[Import]:
    """Every structq → structq import between different units, lazy ones included."""
    found: list[Import] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, package = _module_name(path)
        source = _unit(module)
        assert source is not None
        # ast.walk reaches imports nested in functions, classes and TYPE_CHECKING blocks
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _imported(node, package):
                target = _unit(name)
                if target is not None and target != source:
                    rel = path.relative_to(PACKAGE.parent).as_posix()
                    found.append(Import(source, target, f"{rel}:{getattr(node, 'lineno', 0)}"))
    return found


def _key(imp: Import) -> tuple[str, str, str]:
    return imp.source, imp.target, imp.where.rsplit(":", 1)[0]


IMPORTS = collect_imports()


def test_the_walk_sees_lazy_imports() -> None:
    """The walk is not module-level only: the CLI's commands import the agent inside functions."""
    lazy = [i for i in IMPORTS if i.source == "cli" and i.target == "agent"]
    assert lazy, "no cli → agent import found; the AST walk is missing function-level imports"


def test_every_unit_has_a_row() -> None:
    units = {i.source for i in IMPORTS} | {i.target for i in IMPORTS}
    assert units <= set(ALLOWED), f"units without a row in ALLOWED: {sorted(units - set(ALLOWED))}"


def test_imports_follow_the_layer_rule() -> None:
    against = [i for i in IMPORTS if i.target not in ALLOWED.get(i.source, set()) and _key(i) not in EXCEPTIONS]
    assert not against, "imports against DESIGN §2:\n" + "\n".join(
        f"  {i.where}: {i.source} → {i.target} (allowed: {sorted(ALLOWED.get(i.source, ()))})"
        for i in against)


def test_every_exception_still_occurs() -> None:
    """A fixed exception is removed from the list, so it cannot come back unnoticed."""
    stale = [key for key in sorted(EXCEPTIONS) if not any(_key(i) == key for i in IMPORTS)]
    assert not stale, f"{stale} no longer occur: remove them from EXCEPTIONS"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_between_units() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for i in IMPORTS:
        if _key(i) not in EXCEPTIONS:
            edges[i.source].add(i.target)
    assert _cycles(edges) == []
