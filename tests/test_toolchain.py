"""What the project promises its users and its test command, held in place: the public names of
``structq``, the versions installed, the lint step, and corpus tests that fail where they must."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpora_or_skip

import structq

ROOT = Path(__file__).resolve().parent.parent

#: The public surface of ``import structq``. A change here is a change for every user: add a
#: name deliberately, and remove one only with a changelog line (this is 0.x, but say so).
PUBLIC = sorted("""
    Agent Answer CapabilitySet Plan
    StructqError ConfigError ManifestError PlanError SandboxViolation ExecutionError SourceUnavailable
    QueryTimeout ModelError SynthesisError
    __version__
""".split())


def test_the_public_names_of_structq_are_pinned() -> None:
    assert sorted(structq.__all__) == sorted(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_resolves(name: str) -> None:
    """``__all__`` names only what exists, lazily imported ones included."""
    assert getattr(structq, name) is not None


def test_importing_structq_loads_no_heavy_dependency() -> None:
    """The lazy names stay lazy: ``structq --help`` must not pay for LangChain or SQLAlchemy."""
    code = "import sys, structq; print(sorted(m for m in ('langchain_core', 'sqlalchemy') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


# --------------------------------------------------------------------------------------------
# The versions tested are the versions installed
# --------------------------------------------------------------------------------------------

CONSTRAINTS = ROOT / "constraints.txt"
TEST_SH = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name] = version
    return pins


def _requirements() -> list[str]:
    """Every package name pyproject.toml depends on, extras included (structq's own aside)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    names = {re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0] for requirement in wanted}
    return sorted(re.sub(r"[-_.]+", "-", name).lower() for name in names if name != "structq")


def test_constraints_pin_one_exact_version_of_every_dependency() -> None:
    pins = _pins()
    assert all(re.fullmatch(r"[a-z0-9-]+", name) and re.fullmatch(r"[\w.+!]+", v) for name, v in pins.items())
    missing = [name for name in _requirements() if name not in pins]
    assert not missing, f"constraints.txt lacks {missing}: run `bash scripts/lock.sh` after changing pyproject.toml"


def test_the_test_command_installs_with_the_constraints_and_reinstalls_when_they_change() -> None:
    assert "-c constraints.txt" in TEST_SH
    assert re.search(r"sha256sum pyproject\.toml constraints\.txt", TEST_SH), "the stamp must hash constraints.txt"


def test_the_readme_installs_with_the_constraints() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "-c constraints.txt" in readme


def test_the_test_command_lints_and_builds_the_docs_before_pytest() -> None:
    pytest_run = TEST_SH.index('-m pytest "$@"')
    assert TEST_SH.index("ruff check") < pytest_run
    assert TEST_SH.index("mkdocs\" build --strict") < pytest_run


def test_no_wheel_is_committed() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.whl"], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked == ""
    assert "*.whl" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


# --------------------------------------------------------------------------------------------
# Corpus tests: skipped where the corpora are absent, failed where the run demands them
# --------------------------------------------------------------------------------------------


def test_missing_corpora_skip_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRUCTQ_REQUIRE_CORPORA", raising=False)
    with pytest.raises(pytest.skip.Exception, match="STRUCTQ_REQUIRE_CORPORA=1"):
        corpora_or_skip(tmp_path / "absent")


def test_missing_corpora_fail_when_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTQ_REQUIRE_CORPORA", "1")
    with pytest.raises(pytest.fail.Exception, match="the corpora are required"):
        corpora_or_skip(tmp_path / "absent")


def test_present_corpora_are_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTQ_REQUIRE_CORPORA", "1")
    assert corpora_or_skip(tmp_path) == tmp_path


def test_the_test_command_requires_the_corpora_where_they_are() -> None:
    assert "STRUCTQ_REQUIRE_CORPORA" in TEST_SH
    assert "../shared/corpora" in TEST_SH
