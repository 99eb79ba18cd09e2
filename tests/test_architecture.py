"""The import direction of DESIGN §2, held by a test so it stays true.

Every module under ``structq/`` is parsed (never imported) and every ``import`` / ``from … import``
in it is collected: module-level imports AND imports inside functions, methods and
``if TYPE_CHECKING:`` blocks. Lazy imports count: they keep ``structq --help`` fast, but they are
still a dependency, and a lazy import against the direction closes an import circle as surely as
an eager one. Relative imports are resolved against the importing module's package.

Each import is reduced to the top-level unit it lands in (``structq.safety.sql.rules.parse`` →
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

_BOTTOM = {"errors", "config", "periods", "collector"}

#: What each unit may import (besides itself). DESIGN §2:
#: ``capabilities ← safety ← executors ← sources ← agent ← cli, langchain, server`` (``sources``:
#: the registry of source kinds, which names each kind's sandbox check and executor); ``linking`` beside
#: ``safety`` (reads capabilities, no executor); ``sync`` uses capabilities, executors and sources (and the
#: layers below them, ``linking`` for its value index); ``errors``/``config``/``periods``/``collector`` at the bottom;
#: ``demo`` standalone. ``structq`` is the root ``__init__`` (the public re-exports and
#: ``__version__``), which anything may read.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "periods": set(),
    "collector": set(),
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



def module_imports(package: str) -> dict[str, set[str]]:
    """Module → the modules of the same ``structq`` package it imports (lazy ones included),
    read with the same scan as the units' imports."""
    paths = sorted(PACKAGE.joinpath(*package.split(".")[1:]).rglob("*.py"))
    modules = {_module_name(path)[0] for path in paths}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        module, base = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _imported(node, base):
                # ``from structq.executors import embedded`` imports the module ``embedded``
                named = [f"{name}.{alias.name}" for alias in getattr(node, "names", ())]
                edges[module] |= {m for m in (name, *named) if m in modules and m != module}
    return edges


def test_the_module_scan_sees_the_executors_imports() -> None:
    """Guards the test below: a scan that found no edges would pass it."""
    edges = module_imports("structq.executors")
    assert "structq.executors.search.embedded_process" in edges["structq.executors.search.server_daemon"]


#: Import circles between modules that are still open, each with the reason it is not broken yet.
#: A circle is broken along concepts (the shared piece moves to the module it belongs to), never
#: by hiding an import inside a function: the walk counts those too. The list only shrinks.
KNOWN_MODULE_CYCLES: dict[tuple[str, ...], str] = {}


def _module_cycles() -> set[tuple[str, ...]]:
    return {tuple(component) for component in _cycles(module_imports("structq"))}


def test_the_module_cycle_finder_sees_a_circle() -> None:
    """Guards the test below: two modules of one package that import each other are found."""
    edges = {"structq.p.a": {"structq.p.b"}, "structq.p.b": {"structq.p.a"}, "structq.p.c": {"structq.p.a"}}
    assert _cycles(edges) == [["structq.p.a", "structq.p.b"]]


def test_no_import_circles_between_modules() -> None:
    """0 circles inside every package (and across them): modules of ``structq`` form a tree of
    imports, lazy and ``TYPE_CHECKING`` imports included, so each package reads bottom-up."""
    found = _module_cycles() - set(KNOWN_MODULE_CYCLES)
    assert not found, "import circles between modules:\n" + "\n".join(f"  {' ↔ '.join(c)}" for c in sorted(found))


def test_every_known_module_cycle_still_occurs() -> None:
    stale = sorted(set(KNOWN_MODULE_CYCLES) - _module_cycles())
    assert not stale, f"{stale} no longer occur: remove them from KNOWN_MODULE_CYCLES"

# --- kind branches: asked of the registry and the model's neutral accessors, not by name -------
#
# ``structq.sources`` is the registry of source kinds, and ``capabilities.Manifest`` has
# kind-neutral accessors (``objects``, ``object_type``, ``object_word``, ``query_dialect``…), so a
# new kind of source is one module and one registry entry. These tests count what would bring
# the branches back: asking a manifest ``is_search``, and comparing a step's source with
# ``LOCAL_SOURCE`` (a built-in source: ``sources.is_builtin``). Where they still occur is pinned
# below, with the reason, and the pins only go down (a count lower than its pin fails too, so
# the pin is lowered in the same change).

#: Where a kind question is at home: the model that defines the accessors and the registry.
_KIND_HOMES = ("structq/capabilities/model.py", "structq/capabilities/references.py", "structq/sources/")

#: File → uses of ``.is_search`` outside the homes, each with the reason it remains.
IS_SEARCH_USES: dict[str, int] = {}

#: File → comparisons of a source with ``LOCAL_SOURCE`` / ``"local"`` outside the homes.
LOCAL_SOURCE_COMPARISONS: dict[str, int] = {
    # Below the registry (capabilities may not import sources): the name 'local' is reserved for
    # a manifest's source, and a verified example's local step is checked at load time.
    "structq/capabilities/validate.py": 2,
}


def _is_local_source(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "LOCAL_SOURCE") or \
        (isinstance(node, ast.Attribute) and node.attr == "LOCAL_SOURCE")


def _names_a_source(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "source") or \
        (isinstance(node, ast.Name) and node.id == "source")


def _compares_with_local(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    operands = [node.left, *node.comparators]
    local_literal = any(isinstance(o, ast.Constant) and o.value == "local" for o in operands)
    return any(_is_local_source(o) for o in operands) or (local_literal and any(_names_a_source(o) for o in operands))


def _count(predicate) -> dict[str, int]:
    """File → nodes of the package matching ``predicate``, outside the homes."""
    counts: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith(_KIND_HOMES):
            continue
        n = sum(1 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)) if predicate(node))
        if n:
            counts[rel] = n
    return counts


def test_the_kind_counters_see_what_they_count() -> None:
    tree = ast.parse("m.is_search\nstep.source == LOCAL_SOURCE\nx.source != 'local'\ntz != 'local'\n")
    nodes = list(ast.walk(tree))
    assert sum(isinstance(n, ast.Attribute) and n.attr == "is_search" for n in nodes) == 1
    assert sum(_compares_with_local(n) for n in nodes) == 2


def test_no_new_is_search_branches() -> None:
    """Ask ``Manifest.objects`` / ``object_type`` / ``query_dialect``, or the kind
    (``sources.kind_of(manifest)``), instead."""
    found = _count(lambda node: isinstance(node, ast.Attribute) and node.attr == "is_search")
    assert found == IS_SEARCH_USES, f"is_search asked outside the model and the registry: {found}"


def test_no_new_local_source_comparisons() -> None:
    """Ask ``sources.is_builtin(source)`` (or whether the source has a manifest) instead."""
    found = _count(_compares_with_local)
    assert found == LOCAL_SOURCE_COMPARISONS, f"sources compared with 'local': {found}"


# --- inside packages: no circles; the sandboxes' rules stay inside the sandbox ------------------

def _packages() -> list[str]:
    """Every package of structq, as a dotted name (``structq``, ``structq.safety.sql.rules``…)."""
    return sorted(".".join(p.relative_to(PACKAGE.parent).parts[:-1]) for p in PACKAGE.rglob("__init__.py"))


def test_the_package_scan_sees_the_sandbox_packages() -> None:
    """Guards the tests below: the rules package is found, and its modules' imports seen."""
    assert {"structq.safety.sql", "structq.safety.sql.rules", "structq.safety.sql.resolution"} <= set(_packages())
    edges = module_imports("structq.safety.sql")
    assert "structq.safety.sql.rules.tables" in edges["structq.safety.sql.rules.confine"]


def test_no_import_circles_inside_the_sandbox_packages() -> None:
    """``structq.safety`` and every package in it import in one direction."""
    for package in [p for p in _packages() if p == "structq.safety" or p.startswith("structq.safety.")]:
        assert _cycles(module_imports(package)) == [], package


def test_a_rule_imports_only_rules_that_run_before_it() -> None:
    """A rule may use what an earlier rule defines (``output_names`` for ``check_columns``), never
    a later one's: reading the rules in ``RULES`` order, each module's dependencies are read."""
    from structq.safety.sql import RULES

    order = list(dict.fromkeys(rule.__module__ for rule in RULES))
    edges = module_imports("structq.safety.sql")
    later = [f"{module} → {target}" for i, module in enumerate(order) for target in edges.get(module, ())
             if target in order[i + 1:]]
    assert not later, later


#: The sandboxes' packages: outside ``structq.safety`` only their ``__all__`` may be imported,
#: never a rule or helper module inside them. What an executor needs of a rewrite is on
#: ``structq.safety.query`` (``SafeQuery``, ``qualifying_schema``, ``variable_parameter``…).
_SANDBOX_PACKAGES = ("structq.safety.sql", "structq.safety.dsl")


def _public(package: str) -> set[str]:
    init = PACKAGE.joinpath(*package.split(".")[1:], "__init__.py")
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def test_nothing_outside_the_sandbox_imports_its_internals() -> None:
    public = {package: _public(package) for package in _SANDBOX_PACKAGES}
    reaching: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, package = _module_name(path)
        if module == "structq.safety" or module.startswith("structq.safety."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _imported(node, package):
                where = f"{path.relative_to(PACKAGE.parent).as_posix()}:{getattr(node, 'lineno', 0)}"
                for sandbox in _SANDBOX_PACKAGES:
                    if name.startswith(sandbox + "."):
                        reaching.append(f"{where}: {name}")
                    elif name == sandbox and isinstance(node, ast.ImportFrom):
                        reaching += [f"{where}: {name}.{a.name}" for a in node.names if a.name not in public[sandbox]]
    assert public["structq.safety.sql"] >= {"check_sql"}
    assert not reaching, "sandbox internals imported from outside structq.safety:\n" + "\n".join(reaching)
