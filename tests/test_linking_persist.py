"""The linking index kept on disk: reused by the next process, rebuilt when it must be.

Reuse is proven by outcome: the entry's bytes and modification time are unchanged by a second
process (a rebuild writes a new file), never by timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from structq.capabilities import CapabilitySet
from structq.linking import Budget, index as index_module, persist, select

REPO = Path(__file__).resolve().parents[1]
QUESTION = "total order amount per customer city"


def _table(name: str, columns: list[str]) -> dict[str, Any]:
    return {"name": name, "columns": [{"name": c, "type": "text"} for c in columns]}


def _write(folder: Path, filler: int = 12) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"source": "sales", "kind": "sql", "url": "sqlite://", "tables": [
        _table("customers", ["customer_id", "name", "city"]),
        _table("orders", ["order_id", "customer_id", "amount", "order_date"]),
        *[_table(f"audit_log_{i}", [f"field_{j}" for j in range(6)]) for i in range(filler)]]}
    (folder / "sales.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return folder


def _plan(catalogue: Path, cache: Path, **env: str) -> dict[str, Any]:
    """``structq plan --explain-linking --json`` in a process of its own."""
    environment = {k: v for k, v in os.environ.items() if k not in ("STRUCTQ_CACHE", "STRUCTQ_LLM", "OPENAI_API_KEY")}
    environment.update(PYTHONPATH=str(REPO), STRUCTQ_CACHE_DIR=str(cache), STRUCTQ_PROMPT_TOKENS="300",
                       STRUCTQ_LINK_TOKENS="300", **env)
    done = subprocess.run([sys.executable, "-m", "structq", "plan", QUESTION, "--explain-linking", "--json",
                           "-m", str(catalogue)], env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    explained = json.loads(done.stdout)
    explained.pop("milliseconds")  # the one field that differs between equal selections
    return explained


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "linking").glob("*.pickle")) if (cache / "linking").is_dir() else []


def test_a_second_process_reuses_the_kept_index(tmp_path: Path) -> None:
    catalogue, cache = _write(tmp_path / "c"), tmp_path / "cache"
    first = _plan(catalogue, cache)
    (entry,) = _entries(cache)
    written, content = entry.stat().st_ino, entry.read_bytes()
    second = _plan(catalogue, cache)
    assert _entries(cache) == [entry]
    # Read, not rebuilt: a rewrite replaces the file (a new inode); a read only marks it used.
    assert entry.stat().st_ino == written and entry.read_bytes() == content
    assert first == second


def test_a_changed_manifest_is_a_new_entry(tmp_path: Path) -> None:
    catalogue, cache = _write(tmp_path / "c"), tmp_path / "cache"
    _plan(catalogue, cache)
    (before,) = _entries(cache)
    _write(catalogue, filler=13)
    _plan(catalogue, cache)
    after = _entries(cache)
    assert len(after) == 2 and before in after


@pytest.mark.parametrize("damage", [b"", b"\x80\x05garbage", b"not a pickle at all", None])
def test_a_damaged_entry_is_rebuilt(tmp_path: Path, damage: bytes | None) -> None:
    catalogue, cache = _write(tmp_path / "c"), tmp_path / "cache"
    clean = _plan(catalogue, cache)
    (entry,) = _entries(cache)
    if damage is None:  # a well-formed pickle of something else
        import pickle

        entry.write_bytes(pickle.dumps(("structq-linking-index-1", {"not": "an index"})))
    else:
        entry.write_bytes(damage)
    assert _plan(catalogue, cache) == clean
    assert persist._read(entry, index_module.LinkingIndex) is not None  # written again, whole


def test_cache_off_writes_nothing(tmp_path: Path) -> None:
    catalogue, cache = _write(tmp_path / "c"), tmp_path / "cache"
    _plan(catalogue, cache, STRUCTQ_CACHE="0")
    assert not (cache / "linking").exists()


def test_an_unwritable_folder_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(blocker))  # a file where the folder should be
    monkeypatch.delenv("STRUCTQ_CACHE", raising=False)
    caps = CapabilitySet.from_path(_write(tmp_path / "c"))
    assert persist.cached(caps.fingerprint(), lambda: index_module.LinkingIndex.build(caps), index_module.LinkingIndex) is not None


def test_selections_are_the_same_with_and_without_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STRUCTQ_CACHE", raising=False)
    folder = _write(tmp_path / "c")
    budget = Budget(prompt_tokens=300, linked_tokens=300)
    questions = [QUESTION, "orders by date", "audit log field 3", "明天的天气预报怎么样？"]

    def selections() -> list[Any]:
        index_module._CACHE = index_module.Memo()  # as a new process would start
        caps = CapabilitySet.from_path(folder)
        chosen = [select(q, caps, budget=budget) for q in questions]
        return [(s.kept, s.matches, s.pruned, s.full_tokens, s.notes, s.confidence, s.route, s.column_notes)
                for s in chosen]  # all but the capabilities object and the time taken

    built = selections()
    assert len(_entries(tmp_path / "cache")) == 1
    loaded = selections()  # read from the file
    monkeypatch.setenv("STRUCTQ_CACHE", "0")
    uncached = selections()
    assert built == loaded == uncached
    assert any(kept for kept, *_ in built)
