"""The documentation (README.md and the pages under docs/) is the user guide: every CLI command,
manifest key, refusal code and `STRUCTQ_*` variable must be documented on some page, and every
page's examples must be valid: manifests, plans, question sets and server configs in YAML
blocks validate, Python blocks compile, and `structq …` command lines parse against the CLI."""

from __future__ import annotations

import ast
import re
import textwrap
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from structq.capabilities.model import Manifest
from structq.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: Every page a user reads, README first.
PAGES = {"README.md": README} | {
    f"docs/{page.name}": page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md"))
}
DOCS = "\n".join(PAGES.values())


def _commands() -> list[str]:
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    names += [g.name for g in app.registered_groups]
    return names


def _keys(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    seen = seen or set()
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        keys.add(info.alias or name)
        for arg in _types(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys |= _keys(arg, seen)
    return keys


def _types(annotation: object) -> list[object]:
    args = typing.get_args(annotation)
    return [t for a in args for t in _types(a)] if args else [annotation]


def _page(name: str) -> str:
    return PAGES[f"docs/{name}"]


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_in_the_cli_reference(command: str) -> None:
    assert f"`structq {command}" in _page("cli.md"), f"docs/cli.md does not document `structq {command}`"


@pytest.mark.parametrize("key", sorted(_keys(Manifest)))
def test_every_manifest_key_is_in_the_manifest_reference(key: str) -> None:
    assert re.search(rf"`{re.escape(key)}`", _page("manifests.md")), f"docs/manifests.md lacks the key `{key}`"


def test_readme_gives_the_two_commands_and_stays_short() -> None:
    assert "structq demo" in README and "bash scripts/test.sh" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
    assert len(README.splitlines()) <= 200, "README is the front door: the rest belongs on a page under docs/"


def test_every_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [name for name in PAGES if name.startswith("docs/") and f" {name.removeprefix('docs/')}" not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


#: A module path in backticks: ``structq/safety/sql/rules/confine.py``, or one inside the package
#: written from its subpackage (``agent/figures.py``), or a test or benchmark file.
_MODULE_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.py)`")


def _module_paths() -> list[tuple[str, str, Path]]:
    """(page, path as written, the file it names) for every backticked ``…/….py`` path whose
    first folder is the repository's or the package's (``structq/``, ``tests/``, ``agent/``…)."""
    top = {p.name for p in ROOT.iterdir() if p.is_dir()}
    package = {p.name for p in (ROOT / "structq").iterdir() if p.is_dir()}
    found = []
    for page, text in PAGES.items():
        for written in dict.fromkeys(_MODULE_PATH.findall(text)):
            first = written.split("/", 1)[0]
            if first in package:  # ``capabilities/`` is also the demo's manifests folder: the package wins
                found.append((page, written, ROOT / "structq" / written))
            elif first in top:
                found.append((page, written, ROOT / written))
    return found


def test_the_module_path_scan_finds_the_paths() -> None:
    """Guards the test below: a scan that silently found nothing would pass it."""
    written = {w for _, w, _ in _module_paths()}
    assert {"structq/safety/sql/rules/confine.py", "agent/figures.py", "tests/test_architecture.py"} <= written


def test_every_module_path_on_a_page_exists() -> None:
    """A module moved, renamed or deleted leaves no page pointing at it."""
    missing = [f"{page}: `{written}`" for page, written, path in _module_paths() if not path.is_file()]
    assert not missing, "pages name files that do not exist:\n  " + "\n  ".join(missing)


def test_every_page_starts_with_its_title() -> None:
    untitled = [name for name, text in PAGES.items() if not text.startswith("# ")]
    assert not untitled, f"pages that do not start with '# Title': {untitled}"


# --------------------------------------------------------------------------------------------
# Refusal codes and STRUCTQ_* variables: found in the code, so a new one cannot go undocumented
# --------------------------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "structq"

#: Calls that raise a SandboxViolation, and which positional argument is its code.
_CODE_ARGUMENT = {"fail": 0, "violation": 0, "refuse": 0, "SandboxViolation": 0, "refuse_name": 1}

#: ``STRUCTQ_*`` strings in the code that are not settings, and why.
NOT_SETTINGS = {
    "STRUCTQ_BOOLEAN": "a column type the local executor declares in its in-memory SQLite",
    "STRUCTQ_JSON_TEXT": "a column type the local executor declares in its in-memory SQLite",
    "STRUCTQ_SERVE_OPTIONS": "how `structq serve` hands its options to its own worker processes",
}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _refusal_codes() -> set[str]:
    """Every code the sandbox raises literally (``fail("code", …)``, ``code="…"``), plus the
    SQL sandbox's list (some of its codes are chosen at run time)."""
    from structq.safety.sql import CODES

    codes = set(CODES)
    for path in (PACKAGE / "safety").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            position = _CODE_ARGUMENT.get(_called_name(node) or "")
            arguments = [*([node.args[position]] if position is not None and len(node.args) > position else []),
                         *(k.value for k in node.keywords if k.arg == "code")]
            codes |= {a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return codes


def _settings() -> set[str]:
    """Every whole string ``STRUCTQ_…`` in the code: the names it reads from the environment
    (messages and docstrings that mention one are not whole strings)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"STRUCTQ_[A-Z0-9_]+", node.value):
                    names.add(node.value)
    return names


def test_the_code_scans_find_what_they_look_for() -> None:
    """Guards the two scans below: a scan that silently found nothing would pass them."""
    codes = _refusal_codes()
    assert {"denied_field", "script", "unknown_column", "string_size", "leading_wildcard"} <= codes
    assert len(codes) > 25
    settings = _settings()
    assert {"STRUCTQ_LLM", "STRUCTQ_CACHE_DIR", "STRUCTQ_MANIFESTS", "STRUCTQ_STORE_URL"} <= settings
    assert set(NOT_SETTINGS) <= settings, "a name NOT_SETTINGS excuses is no longer in the code"


@pytest.mark.parametrize("code", sorted(_refusal_codes()))
def test_every_refusal_code_is_in_the_refusal_codes_page(code: str) -> None:
    assert f"| `{code}` |" in _page("refusal-codes.md"), f"docs/refusal-codes.md lacks `{code}`"


@pytest.mark.parametrize("name", sorted(_settings() - set(NOT_SETTINGS)))
def test_every_structq_variable_is_documented(name: str) -> None:
    assert re.search(rf"`{name}[`=]", DOCS), f"no page documents the variable {name}"


# --------------------------------------------------------------------------------------------
# The examples of every page
# --------------------------------------------------------------------------------------------


class Block(typing.NamedTuple):
    page: str
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks() -> list[Block]:
    """Every fenced code block of every page, with its language and where it starts."""
    blocks = []
    for page, text in PAGES.items():
        for match in re.finditer(r"^([ \t]*)```(\w*)[^\n]*\n(.*?)^\1```", text, re.M | re.S):
            body = textwrap.dedent(match.group(3))  # a block inside a list item is indented
            blocks.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group(2), body))
    return blocks


BLOCKS = _blocks()


def _of(*languages: str) -> list[Block]:
    return [b for b in BLOCKS if b.language in languages]


def test_the_block_scan_finds_the_examples() -> None:
    """Guards the tests below: a scan that silently found nothing would pass them."""
    assert len(_of("yaml")) >= 6 and len(_of("python")) >= 2 and len(COMMAND_LINES) >= 20


#: The environment a documented manifest's ``${VAR}`` reads.
_EXAMPLE_ENV = {"HR_DB_URL": "sqlite:///hr.db", "SHOP_URL": "sqlite:///shop.db"}


def _validate_yaml(block: Block) -> str:
    """Validates a YAML example by what it is; returns what it was taken for."""
    import yaml

    from structq.agent import Plan
    from structq.agent.evaluate import EvalSet
    from structq.capabilities.loader import load_manifest_text
    from structq.server.config import ServerConfig

    data = yaml.safe_load(block.text)
    if isinstance(data, dict) and {"source", "kind"} <= set(data):
        load_manifest_text(block.text, block.where, env=_EXAMPLE_ENV)
        return "manifest"
    if isinstance(data, dict) and "steps" in data and "question" not in data:
        Plan.parse(data)
        return "plan"
    if isinstance(data, dict) and "questions" in data:
        EvalSet.model_validate(data)
        return "question set"
    if isinstance(data, dict) and "tokens" in data:
        ServerConfig.from_data(data, where=block.where)
        return "server config"
    return "fragment"  # part of a manifest, shown in context; it must still be valid YAML


@pytest.mark.parametrize("block", _of("yaml"), ids=lambda b: b.where)
def test_every_yaml_example_is_valid(block: Block) -> None:
    _validate_yaml(block)


def test_the_yaml_examples_include_each_kind_of_document() -> None:
    kinds = {_validate_yaml(block) for block in _of("yaml")}
    assert {"manifest", "plan", "question set", "server config"} <= kinds


@pytest.mark.parametrize("block", _of("python"), ids=lambda b: b.where)
def test_every_python_example_compiles(block: Block) -> None:
    import ast as python_ast

    compile(block.text, block.where, "exec", flags=python_ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _command_lines() -> list[tuple[str, list[str]]]:
    """Every ``structq …`` invocation in a shell, console or cron block: (where, arguments).

    A line is cut at pipes, ``&&``, ``||`` and redirections; ``VAR=value`` prefixes and a path
    before ``structq`` are dropped; console blocks count only the lines typed after ``$ ``."""
    import shlex

    found = []
    for block in _of("bash", "console", "cron", "sh"):
        for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
            if block.language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            for part in re.split(r"&&|\|\||\||;", line):
                try:
                    words = shlex.split(part)
                except ValueError:
                    continue
                words = [w for w in words if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w)]
                if not words or not (words[0] == "structq" or words[0].endswith("/structq")):
                    continue
                arguments = []
                for word in words[1:]:
                    if re.match(r"\d?>", word):
                        break
                    arguments.append(word)
                found.append((f"{block.page}:{number}", arguments))
    return found


def _parse(arguments: list[str]) -> int:
    """Run the real CLI on a command line with ``--help`` appended: every option and command is
    parsed (an unknown one is a usage error, exit 2) and then help exits before anything runs."""
    from typer.testing import CliRunner

    return CliRunner().invoke(app, [*arguments, "--help"]).exit_code


COMMAND_LINES = _command_lines()


@pytest.mark.parametrize(("where", "arguments"), COMMAND_LINES, ids=[where for where, _ in COMMAND_LINES])
def test_every_documented_command_line_parses(where: str, arguments: list[str]) -> None:
    """An option renamed or removed, or a command gone, fails here."""
    assert _parse(arguments) == 0, f"{where}: `structq {' '.join(arguments)}` does not parse"


@pytest.mark.parametrize("arguments", [["ask", "q", "--no-such-option"], ["no-such-command"], ["cache", "wipe"]])
def test_a_wrong_command_line_does_not_parse(arguments: list[str]) -> None:
    """Guards the test above: the parse really checks options and commands."""
    assert _parse(arguments) == 2


# -- one word, one meaning: "engine" ------------------------------------------------------------
# The glossary (docs/glossary.md) keeps "engine" for the plan runner (``Engine``) and nothing else:
# a database is "the database", a search server "the search server", SQLAlchemy's ``Engine`` a
# pool. The packages below (and the modules at the top of ``executors/``) never hold a plan
# runner, except the server's files that build, guard or observe the agent's one
# (``ENGINE_FILES``); there prose may say "the engine" and mean it.
# Everywhere else in them, prose names the plan runner by its identifier (``Engine``), so a bare
# "engine" can only be a slip for a database or a search server.

_WORDED = ("safety", "server", "sync", "capabilities", "sources", "executors/local", "executors/search")
#: Server modules that hold the agent's engine (build it, guard it, count or trace its runs).
ENGINE_FILES = {f"structq/server/{name}" for name in ("__init__.py", "service.py", "observe.py", "metrics.py", "traces.py")}
#: Identifiers with "engine" in them that the packages above may use: the plan runner's classes,
#: SQLAlchemy's own functions, and the read-only pool ``executors/sql/session.py`` makes.
_ENGINE_NAMES = {"Engine", "GuardedEngine", "create_engine", "read_only_engine"}
_CODE_SPAN = re.compile(r"``[^`]*``|`[^`]*`|\bsqlalchemy\.engine\b|\bagent[./]engine\b|\bengine=")
#: The word in prose; a capital ``Engine`` is the class (a string annotation, a sentence naming it).
_ENGINE_WORD = re.compile(r"\bengines?\b")
#: Phrases that never mean the plan runner, on any page or in any of the packages above.
_NEVER = re.compile(r"\bengines\b|\b(?:search|regex|database|SQL) engine\b", re.IGNORECASE)


def _engine_words(path: Path) -> list[str]:
    """Where ``path``'s prose (comments, docstrings, messages) or identifiers say "engine" other
    than as the plan runner's identifiers: ``file:line: text`` for each."""
    import io
    import tokenize

    relative = path.relative_to(ROOT).as_posix()
    found: list[str] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))
    for i, token in enumerate(tokens):
        text = token.string
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            prose = _CODE_SPAN.sub("", text)
            if _NEVER.search(prose) or (_ENGINE_WORD.search(prose) and relative not in ENGINE_FILES):
                found.append(f"{relative}:{token.start[0]}: {text.strip()[:100]}")
        elif token.type == tokenize.NAME and "engine" in text.lower() and text not in _ENGINE_NAMES:
            dotted = "".join(t.string for t in tokens[max(0, i - 2):i])  # sqlalchemy.engine.…
            if dotted != "sqlalchemy." and not (text == "engine" and relative in ENGINE_FILES):
                found.append(f"{relative}:{token.start[0]}: identifier {text}")
    return found


def test_the_engine_scan_finds_slips() -> None:
    path = ROOT / "structq" / "safety" / "sql" / "rules" / "limit.py"  # read, never written
    assert _engine_words(path) == []
    probe = ROOT / "tests" / "fixtures" / "engine_words_probe.py"
    assert [line.split(": ", 1)[1] for line in _engine_words(probe)] == [
        "# the engine reads the column first",
        '"""Both engines lock the row."""',
        "identifier engine_name",
        "identifier engine_name",
    ]


def test_engine_means_only_the_plan_runner_in_code() -> None:
    paths = [path for folder in _WORDED for path in sorted((PACKAGE / folder).rglob("*.py"))]
    paths += sorted((PACKAGE / "executors").glob("*.py"))  # base.py and the API executors; sql/ is its own
    slips = [slip for path in paths for slip in _engine_words(path)]
    assert not slips, "say 'the database' or 'the search server' (or ``Engine``):\n" + "\n".join(slips)


def test_engine_means_only_the_plan_runner_in_the_docs() -> None:
    slips = [f"{page}: {m.group(0)}" for page, text in PAGES.items() for m in _NEVER.finditer(text)]
    assert not slips, "say 'the databases' or 'the search server':\n" + "\n".join(slips)
