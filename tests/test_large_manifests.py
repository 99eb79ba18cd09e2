"""A 1,000-table manifest loads completely and its lookups stay right (speed is in
``bench/manifests.py``; nothing here is timed)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from manifests import manifest_text  # noqa: E402

from structq.capabilities import CapabilitySet  # noqa: E402
from structq.capabilities.loader import load_manifest_text  # noqa: E402


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
