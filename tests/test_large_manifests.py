"""A 1,000-table manifest loads completely and its lookups stay right (speed is in
``bench/manifests.py``; nothing here is timed)."""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from manifests import COLUMNS, manifest_text  # noqa: E402

from structq.capabilities import CapabilitySet, loader, yamlnodes  # noqa: E402
from structq.capabilities.loader import load_manifest_text  # noqa: E402
from structq.cli import app  # noqa: E402
from structq.errors import ManifestError  # noqa: E402


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Manifest cache entries of these tests go to their temporary folder."""
    monkeypatch.setenv("STRUCTQ_CACHE_DIR", str(tmp_path / "cache"))


def test_a_thousand_tables_load_with_every_reference(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_text(manifest_text(1000), encoding="utf-8")
    capabilities = CapabilitySet.from_path(tmp_path, env={})
    manifest = capabilities.get("big")
    assert len(manifest.tables) == 1000
    assert sum(len(table.columns) for table in manifest.tables) == 20_000
    assert manifest.table("T999").name == "t999"  # case-insensitive, by dict
    assert manifest.table("t999").column("c1").references == "t998.id"
    assert manifest.table("t1000") is None


def test_the_table_lookup_follows_a_changed_table_list() -> None:
    manifest, _ = load_manifest_text(manifest_text(3), env={})
    assert manifest.table("t2") is not None
    smaller = manifest.model_copy(update={"tables": manifest.tables[:2]})
    assert smaller.table("t2") is None
    assert manifest.table("t2") is not None
    manifest.tables.append(manifest.tables[0].model_copy(update={"name": "extra"}))
    assert manifest.table("EXTRA") is not None


def test_loading_leaves_the_garbage_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    load_manifest_text(manifest_text(2), env={})
    assert gc.isenabled()
    gc.disable()
    try:
        load_manifest_text(manifest_text(2), env={})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_what_a_load_keeps_counts_as_old() -> None:
    """No young-generation rescan of what a load kept: it is in the oldest generation."""
    gc.collect()
    manifest, _ = load_manifest_text(manifest_text(50), env={})
    young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
    assert young < 100, young
    assert len(manifest.tables) == 50  # kept, and still not young


def test_loading_makes_no_cyclic_garbage() -> None:
    """(A whole ``SafeLoader`` used to construct the non-string scalars: a cycle each load.)"""
    gc.collect()
    gc.disable()
    try:
        load_manifest_text(manifest_text(50), env={})
        assert gc.collect() == 0
    finally:
        gc.enable()


def _database_of(path: Path, tables: int, columns: int) -> None:
    """A SQLite database holding exactly the tables ``manifest_text`` describes."""
    with sqlite3.connect(path) as db:
        for t in range(tables):
            cols = ["id INTEGER PRIMARY KEY"] + [
                f"c{k} TEXT" + (f" REFERENCES t{t - 1}(id)" if k == 1 and t else "") for k in range(1, columns)]
            db.execute(f"CREATE TABLE t{t} ({', '.join(cols)})")


def test_sync_check_loads_each_manifest_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One load of each file per command, whatever reads it (the examples of every manifest,
    the synced source's own plan): counted by the text each load was given."""
    text = manifest_text(1000)
    (tmp_path / "big.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "small.yaml").write_text(manifest_text(2).replace("source: big", "source: small")
                                         .replace("big.db", "small.db"), encoding="utf-8")
    _database_of(tmp_path / "big.db", 1000, COLUMNS)
    _database_of(tmp_path / "small.db", 2, COLUMNS)
    loads: collections.Counter[str] = collections.Counter()
    real = loader._load_manifest_text

    def counting(text: str, *args: Any) -> Any:
        loads[text] += 1
        return real(text, *args)

    monkeypatch.setattr(loader, "_load_manifest_text", counting)
    result = CliRunner().invoke(app, ["sync", "--check", "--json", "-m", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [s["drift"] for s in json.loads(result.stdout)["sources"]] == [False, False]
    assert loads[text] == 1
    assert sum(loads.values()) == 2


@pytest.fixture
def count_reads(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How often texts are composed and positions recorded."""
    counts: collections.Counter[str] = collections.Counter()
    for name in ("compose", "record_positions"):
        real = getattr(yamlnodes, name)

        def counting(*args: Any, _real: Any = real, _name: str = name) -> Any:
            counts[_name] += 1
            return _real(*args)

        monkeypatch.setattr(yamlnodes, name, counting)
    return counts


def test_a_thousand_tables_are_composed_once_and_their_positions_never(
        tmp_path: Path, count_reads: collections.Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCTQ_CACHE", "0")
    (tmp_path / "big.yaml").write_text(manifest_text(1000), encoding="utf-8")
    assert len(CapabilitySet.from_path(tmp_path, env={}).get("big").tables) == 1000
    assert count_reads == {"compose": 1}


def test_an_unchanged_large_manifest_is_not_composed_again(
        tmp_path: Path, count_reads: collections.Counter[str]) -> None:
    """The second command reads the first one's data back; a changed byte or another
    environment is never served stale."""
    text = manifest_text(1000).replace("url: sqlite:///big.db", "url: ${BIG_URL}")
    first = load_manifest_text(text, env={"BIG_URL": "sqlite:///one.db"})[0]
    assert count_reads == {"compose": 1}
    again = load_manifest_text(text, env={"BIG_URL": "sqlite:///one.db"})[0]
    assert count_reads == {"compose": 1}
    assert again.model_dump() == first.model_dump()
    assert load_manifest_text(text, env={"BIG_URL": "sqlite:///two.db"})[0].url == "sqlite:///two.db"
    assert count_reads == {"compose": 1}
    changed = text.replace("table number 999", "table number 999 (renamed)")
    assert load_manifest_text(changed, env={"BIG_URL": "x"})[0].table("t999").description.endswith("(renamed)")
    assert count_reads == {"compose": 2}


def _at(text: str, table: int, old: str, new: str) -> tuple[str, int, int]:
    """``text`` with ``old`` replaced by ``new`` in table ``table``'s lines, and the 1-based
    line and column where ``new`` starts."""
    lines = text.split("\n")
    start = lines.index(f"  - name: t{table}")
    for n in range(start, len(lines)):
        if old in lines[n]:
            column = lines[n].index(old) + 1
            lines[n] = lines[n].replace(old, new, 1)
            return "\n".join(lines), n + 1, column
    raise AssertionError(f"{old!r} not in table {table}")


def _fields(exc: ManifestError) -> tuple[Any, ...]:
    return exc.file, exc.line, exc.column, exc.message, exc.suggestion, exc.hint


#: One edit per kind of manifest error, in table 900 of 1,000: (old, new, where the error points in new).
ERRORS = {
    "unknown key": ("    description: table number 900", "    descripton: table number 900", "descripton"),
    "invalid choice": ("c5, type: text", "c5, type: txt", "txt"),
    "wrong type": ("primary_key: true", "primary_key: maybe", "maybe"),
    "unknown reference": ("references: t899.id", "references: t8999.id", "t8999.id"),
    "duplicate key": ("{name: c7, type: text", "{name: c7, name: c8, type: text", "name: c8"),
    "unset variable": ("description: column 3 of t900", 'description: column 3 of t900, url: "${NOPE}"', '"${NOPE}"'),
}


@pytest.mark.parametrize(("kind", "cached"), [(kind, False) for kind in ERRORS] + [
    # the data of a text kept by an earlier command: errors found after reading it
    ("unknown key", True), ("unknown reference", True), ("unset variable", True)])
def test_an_error_in_table_900_names_its_line_as_before(
        kind: str, cached: bool, tmp_path: Path, count_reads: collections.Counter[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file, line, column, message and suggestion as when positions were recorded
    while loading (``loader._parse_yaml``, the previous path), from a fresh or a kept text."""
    old, new, marker = ERRORS[kind]
    text, line, column = _at(manifest_text(1000), 900, old, new)
    (tmp_path / "big.yaml").write_text(text, encoding="utf-8")
    if cached:
        with contextlib.suppress(ManifestError):
            CapabilitySet.from_path(tmp_path, env={})  # an earlier command kept what it could
        count_reads.clear()
    with pytest.raises(ManifestError) as now:
        CapabilitySet.from_path(tmp_path, env={})
    assert count_reads["compose"] <= 2, "one compose for the data (none when kept), one for positions"
    monkeypatch.setattr(loader, "_read", loader._parse_yaml)
    with pytest.raises(ManifestError) as before:
        CapabilitySet.from_path(tmp_path, env={})
    assert _fields(now.value) == _fields(before.value)
    assert (now.value.line, now.value.column) == (line, column + new.index(marker))
    if kind in ("unknown key", "invalid choice"):
        assert now.value.suggestion in ("description", "text")
