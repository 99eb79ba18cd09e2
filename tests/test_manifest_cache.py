"""The manifest cache gives back exactly what composing built, and never stands in the way.

Speed is in ``bench/manifests.py``; here: the data read back equals the data composed, types
included, for any YAML data; a damaged, unreadable or switched-off cache is a miss.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from yaml_support import DATA, same

from structq.capabilities import loader, manifest_cache

PAD = "#" * manifest_cache.MIN_CHARS + "\n"  # a comment: a text large enough to be kept


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STRUCTQ_CACHE", raising=False)
    return tmp_path / "cache" / "manifests"




@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DATA)
def test_what_is_read_back_is_what_was_composed(data: Any) -> None:
    text = PAD + yaml.safe_dump({"data": data, "url": "${HOST:-h}"})
    composed, _ = loader._read(text, "f.yaml", {"HOST": "x"})
    kept = manifest_cache.get(text)
    if kept is not None:  # nothing marshal cannot hold (dates) is kept
        read_back, _ = loader._read(text, "f.yaml", {"HOST": "x"})
        assert same(read_back, composed)
        assert read_back["url"] == "x" and kept[0]["url"] == "${HOST:-h}"
    else:
        assert "datetime.date" in repr(composed)


def test_a_large_text_is_kept_and_a_small_one_is_not(cache_dir: Path) -> None:
    loader._read("a: 1\n", "f.yaml", {})
    assert not cache_dir.exists()
    loader._read(PAD + "a: 1\n", "f.yaml", {})
    assert len(list(cache_dir.iterdir())) == 1


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", b"\xe9", None])
def test_a_damaged_entry_is_a_miss(cache_dir: Path, damage: bytes | None) -> None:
    text = PAD + "a: [1, 2]\n"
    loader._read(text, "f.yaml", {})
    (entry,) = cache_dir.iterdir()
    if damage is None:
        entry.unlink()
        entry.mkdir()  # unreadable as a file
    else:
        entry.write_bytes(damage)
    assert manifest_cache.get(text) is None
    assert loader._read(text, "f.yaml", {})[0] == {"a": [1, 2]}


def test_a_date_is_composed_every_time(cache_dir: Path) -> None:
    text = PAD + "a: 2024-03-01\n"
    assert loader._read(text, "f.yaml", {})[0] == {"a": datetime.date(2024, 3, 1)}
    assert not cache_dir.exists() or not list(cache_dir.glob("*.marshal"))


@pytest.mark.parametrize("setting", ["0", "off", "false"])
def test_switched_off_nothing_is_kept(cache_dir: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("STRUCTQ_CACHE", setting)
    loader._read(PAD + "a: 1\n", "f.yaml", {})
    assert not cache_dir.exists()


def test_an_unwritable_folder_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path / "file"))
    assert loader._read(PAD + "a: 1\n", "f.yaml", {})[0] == {"a": 1}


def _age(cache_dir: Path) -> None:
    """Give the entries distinct ages, in their present order, whatever the clock's resolution."""
    for i, entry in enumerate(sorted(cache_dir.iterdir(), key=lambda p: p.stat().st_mtime)):
        os.utime(entry, (i, i))


def test_only_the_most_recently_used_entries_are_kept(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest_cache, "KEEP", 3)
    for n in range(3):
        loader._read(PAD + f"a: {n}\n", "f.yaml", {})
        _age(cache_dir)
    assert manifest_cache.get(PAD + "a: 0\n") is not None  # the oldest written, now the last used
    _age(cache_dir)
    for n in (3, 4):
        loader._read(PAD + f"a: {n}\n", "f.yaml", {})
        _age(cache_dir)
    assert len(list(cache_dir.iterdir())) == 3
    assert {n for n in range(5) if manifest_cache.get(PAD + f"a: {n}\n") is not None} == {0, 3, 4}


def test_a_catalogue_of_many_manifests_is_kept_whole(cache_dir: Path) -> None:
    texts = [PAD + f"a: {n}\n" for n in range(100)]
    for text in texts:
        loader._read(text, "f.yaml", {})
    assert all(manifest_cache.get(text) is not None for text in texts)


def test_a_manifest_as_large_as_init_writes_for_a_few_tables_is_kept(cache_dir: Path) -> None:
    tables = [{"name": f"t{i}", "columns": [{"name": f"c{j}", "type": "text", "description": "a column"}
                                         for j in range(10)]} for i in range(20)]
    text = yaml.safe_dump({"source": "s", "kind": "sql", "url": "sqlite:///x.db", "tables": tables})
    loader._read(text, "f.yaml", {})
    assert manifest_cache.get(text) is not None
