"""Reference lists on SQLite of any length up to the intermediate-row cap and values of any
width (``structq.safety.sql.rules.references``): a JSON list longer than one SQLite value may be is
bound in parts, and a value too wide for a part is bound alone — all still bound parameters
of the one query the sandbox checked. Run end to end on a real SQLite file; the split itself
is pinned by a property over small part sizes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structq.agent import Engine, Plan
from structq.capabilities import CapabilitySet
from structq.capabilities.loader import load_manifest_text
from structq.executors.sql.sqlite import SQLITE_MAX_VALUE_BYTES
from structq.safety.sql.rules import references

MANIFEST = """\
source: keys
kind: sql
url: sqlite:///{path}
limits: {{max_rows: 10, max_intermediate_rows: {cap}, timeout_s: 300}}
tables:
  - name: keys
    columns:
      - {{name: code, type: text}}
"""

MILLION = 1_000_000


def _database(path: Path, codes: list[str]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE keys (code TEXT)")
        db.executemany("INSERT INTO keys VALUES (?)", ((c,) for c in codes))


def _count_in(tmp_path: Path, codes: list[str], negated: bool = False) -> int:
    """Step 1 reads every code; step 2 counts the codes ``IN`` (or ``NOT IN``) that list."""
    path = tmp_path / "keys.db"
    _database(path, codes)
    manifest, _ = load_manifest_text(MANIFEST.format(path=path, cap=len(codes)), "<keys>", env={})
    plan = Plan.parse({"steps": [
        {"output_key": "picked", "source": "keys", "query": "SELECT code FROM keys"},
        {"output_key": "n", "source": "keys",
         "query": f"SELECT COUNT(*) AS n FROM keys WHERE code {'NOT ' if negated else ''}IN (<picked>)"},
    ]})
    with Engine(CapabilitySet([manifest])) as engine:
        result = engine.run(plan)
    assert result.steps["picked"].row_count == len(codes) and not result.steps["picked"].truncated
    return result.final.rows[0][0]


def test_the_part_size_is_below_the_executors_value_limit() -> None:
    assert references.SQLITE_LIST_PART_BYTES * 2 <= SQLITE_MAX_VALUE_BYTES


def test_a_million_text_references(tmp_path: Path) -> None:
    codes = [f"K{n:07d}-{'x' * 12}" for n in range(MILLION)]  # ~24 MB as one JSON list
    assert len(json.dumps(codes)) > SQLITE_MAX_VALUE_BYTES
    assert _count_in(tmp_path, codes) == MILLION


@pytest.mark.parametrize("widths", [
    [1, 5_000_000],                       # one value wider than a part
    [3_900_000, 3_900_000, 10, 9_000_000],  # values that fill parts, and one near the value limit
])
@pytest.mark.parametrize("negated", [False, True])
def test_values_of_any_width(tmp_path: Path, widths: list[int], negated: bool) -> None:
    codes = [chr(ord("a") + i) * width for i, width in enumerate(widths)]
    assert _count_in(tmp_path, codes, negated) == (0 if negated else len(codes))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.integers(), st.none()), max_size=40),
       st.integers(min_value=8, max_value=60))
def test_the_parts_hold_every_value_once_within_the_part_size(values: list, budget: int) -> None:
    original = references.SQLITE_LIST_PART_BYTES
    references.SQLITE_LIST_PART_BYTES = budget
    try:
        parts, alone = references._json_parts(values)
    finally:
        references.SQLITE_LIST_PART_BYTES = original
    assert parts  # at least one json_each, possibly of an empty list
    assert len(parts) == 1 or all(len(p.encode("utf-8")) <= budget for p in parts)
    together = [v for part in parts for v in json.loads(part)] + alone
    assert sorted(map(repr, together)) == sorted(map(repr, values))
