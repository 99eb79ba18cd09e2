"""A 1,000-table manifest loads completely and its lookups stay right (speed is in
``bench/manifests.py``; nothing here is timed)."""

from __future__ import annotations

import collections
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

from structq.capabilities import CapabilitySet, loader  # noqa: E402
from structq.capabilities.loader import load_manifest_text  # noqa: E402
from structq.cli import app  # noqa: E402


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
