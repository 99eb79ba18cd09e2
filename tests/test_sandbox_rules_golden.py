"""One golden file per rule of the SQL sandbox: ``tests/fixtures/sandbox/<rule module>.sql``.

So that one rule can be audited from one file, as sqlglot's ``tests/fixtures/optimizer/<rule>.sql``:
each file names its rule and the manifest, then holds cases separated by blank lines —

    -- title
    -- dialect: postgres          (optional; sqlite otherwise)
    -- vars: {}                   (optional JSON; the row-filter variables, {"tenant_id": 7} otherwise)
    -- params: {"members": []}    (optional JSON; the references' values, ``PARAMS`` otherwise)
    SELECT …
    -- expected
    SELECT …                       (the SQL that runs)
    -- names: a, b                 (optional: the result columns' names, ``SafeQuery.names``)

or, for a query the sandbox refuses, ``-- refused: <code>`` instead of the expected block: the
refusal code, raised by this file's rule. A case that shows where the rule stops and another
one takes over says so: ``-- refused: unknown_column by check_columns``.

Every rule module has a file, every file has accepted cases and, unless its header says
``-- refuses: nothing`` (a rule that only rewrites), refused ones.
``STRUCTQ_UPDATE_GOLDEN=1`` rewrites the expected blocks and refusal lines (review the diff).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import structq.safety.sql as sandbox
from golden_support import UPDATE, blocks, expected_outcome, rewrite
from sandbox_support import FIXTURES, PARAMS, VARS, manifest
from structq.errors import PlanError, SandboxViolation
from structq.safety import check_sql
from structq.safety.sql import RULES, memo

RULES_DIR = Path(sandbox.__file__).parent / "rules"
#: Rule function → the module it lives in (``check_columns`` → ``columns``).
MODULE_OF = {rule.__name__: rule.__module__.rsplit(".", 1)[1] for rule in RULES}
FILES = sorted(FIXTURES / f"{module}.sql" for module in set(MODULE_OF.values()))


@dataclass
class Case:
    file: Path
    title: str
    query: str
    dialect: str = "sqlite"
    vars: dict[str, Any] = field(default_factory=lambda: dict(VARS))
    params: dict[str, Any] = field(default_factory=lambda: dict(PARAMS))
    expected: str | None = None
    names: tuple[str, ...] | None = None
    refused: str | None = None
    by: str | None = None


def _header(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^-- (rule|manifest|refuses): (.*)$", path.read_text(encoding="utf-8"), re.M))


def _cases(path: Path) -> list[Case]:
    cases = []
    for block in blocks(path, options=("dialect", "vars", "params", "names", "refused")):
        case = Case(path, block.title, block.sections["query"], expected=block.sections.get("expected"))
        for name, value in block.options.items():
            if name == "dialect":
                case.dialect = value
            elif name in ("vars", "params"):
                setattr(case, name, json.loads(value))
            elif name == "names":
                case.names = tuple(n.strip() for n in value.split(","))
            else:
                code, _, by = value.partition(" by ")
                case.refused, case.by = code.strip(), by.strip() or None
        cases.append(case)
    return cases


CASES = [case for path in FILES if path.exists() for case in _cases(path)]


def _run(case: Case, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str | None]:
    """Check ``case``: (the ``SafeQuery`` or the refusal, the rule that raised it)."""
    raised: list[str] = []

    def watched(rule):
        def run(check):
            try:
                rule(check)
            except Exception:
                raised.append(rule.__name__)
                raise
        return run

    memo.clear()  # a remembered check runs no rule
    monkeypatch.setattr(sandbox, "RULES", tuple(watched(rule) for rule in RULES))
    try:
        return check_sql(case.query, manifest(case.dialect), params=case.params, vars=case.vars), None
    except (SandboxViolation, PlanError) as exc:
        return exc, (raised[0] if raised else None)


def test_every_rule_has_a_golden_file() -> None:
    assert {p.stem for p in RULES_DIR.glob("*.py")} - {"__init__"} == set(MODULE_OF.values())
    missing = [p.name for p in FILES if not p.exists()]
    assert not missing, f"rules without a golden file: {missing}"
    for path in FILES:
        header, cases = _header(path), _cases(path)
        assert header.get("rule", "").split(" ")[0] in MODULE_OF, f"{path.name}: no '-- rule: <function>' line"
        assert header.get("manifest"), f"{path.name}: no '-- manifest:' line"
        assert any(c.refused is None for c in cases), f"{path.name}: no accepted case"
        if header.get("refuses", "").split(" ")[0] != "nothing":
            assert any(c.refused and not c.by for c in cases), f"{path.name}: no case this rule refuses"


@pytest.fixture(scope="module")
def current() -> dict[tuple[Path, str], Case]:
    """Each case as the files hold it when the tests run — rewritten first under
    ``STRUCTQ_UPDATE_GOLDEN=1``. Never at import: collecting the tests must not write into the
    repository."""
    if UPDATE:
        _update()
    return {(case.file, case.title): case for path in FILES for case in _cases(path)}


@pytest.mark.parametrize("listed", CASES, ids=lambda c: f"{c.file.stem}: {c.title}")
def test_rule_golden_case(listed: Case, current: dict[tuple[Path, str], Case],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    case = current[(listed.file, listed.title)]
    result, rule = _run(case, monkeypatch)
    if case.refused is None:
        assert not isinstance(result, Exception), f"refused: {result!r}"
        assert result.text == case.expected
        if case.names is not None:
            assert result.names == case.names
        return
    assert isinstance(result, Exception), f"accepted: {result.text}"
    assert getattr(result, "code", type(result).__name__) == case.refused, str(result)
    own = _header(case.file)["rule"].split(" ")[0]
    assert rule == (case.by or own), f"refused by {rule}, not {case.by or own}"


def _update() -> None:
    """Rewrite each case's expected block (or refusal line) with what the sandbox does now."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for path in FILES:
            rewrite(path, ((case.title, _outcome(case, _header(path)["rule"].split(" ")[0], monkeypatch))
                           for case in _cases(path)))


def _outcome(case: Case, own: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the sandbox does with ``case`` now, as the file writes it (``own``: the file's rule)."""
    result, rule = _run(case, monkeypatch)
    if isinstance(result, Exception):
        by = "" if rule == own else f" by {rule}"
        return f"-- refused: {getattr(result, 'code', type(result).__name__)}{by}"
    return expected_outcome(result.text, None if case.names is None else result.names or ())
