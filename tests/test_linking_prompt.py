"""Prompt hygiene of the catalogue the planner sees: no filler for undescribed drafts,
restricted columns named (never read), value hints only for tables shown, format samples and
padding notes from the value index (never for denied columns or row-filtered tables).

Real SQLite files are written here and their value index built through ``structq.sync.values``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from structq.capabilities import CapabilitySet
from structq.capabilities.render import render_manifest
from structq.errors import SandboxViolation
from structq.linking import Budget, ValueIndex, select
from structq.linking.shapes import column_note, shape
from structq.safety import check_sql
from structq.sync.values import build_values

SMALL = Budget(prompt_tokens=300, linked_tokens=300)


def _col(name: str, type_: str = "text", **more: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **more}


def _write(folder: Path, manifests: list[dict[str, Any]]) -> CapabilitySet:
    for m in manifests:
        (folder / f"{m['source']}.yaml").write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return CapabilitySet.from_path(folder)


@pytest.fixture
def airline(tmp_path: Path) -> CapabilitySet:
    """flights with coded days and padded city names; a restricted and a denied column; a
    row-filtered table with a formatted column; filler so a small budget prunes."""
    db = tmp_path / "air.db"
    with sqlite3.connect(db) as c:
        c.executescript("""
            CREATE TABLE flights (flight_no TEXT, flight_days TEXT, city TEXT, pilot_email TEXT, pin TEXT);
            INSERT INTO flights VALUES ('CA1', '1-3-5', 'Aberdeen ', 'a@x.org', '1111-22'),
                                       ('CA2', '2-4-6', 'Paris', 'b@x.org', '3333-44'),
                                       ('CA3', '1-2-3', 'Paris', 'c@x.org', '5555-66'),
                                       ('CA4', '3-5-7', 'Rome', 'd@x.org', '7777-88');
            CREATE TABLE bookings (booking_id INTEGER, tenant_id INTEGER, booking_code TEXT);
            INSERT INTO bookings VALUES (1, 1, 'BK-0001'), (2, 2, 'BK-0002'), (3, 1, 'BK-0003'), (4, 2, 'BK-0004');
        """)
        for i in range(8):
            c.execute(f"CREATE TABLE audit_{i} ({', '.join(f'field_{j} TEXT' for j in range(8))})")
    manifest = {
        "source": "air", "kind": "sql", "url": f"sqlite:///{db}",
        "policies": {"row_filters": [{"table": "bookings", "where": "tenant_id = :tenant_id"}]},
        "tables": [
            {"name": "flights", "draft": True, "columns": [
                _col("flight_no", draft=True), _col("flight_days", draft=True), _col("city", draft=True),
                _col("pilot_email", access="restricted"), _col("pin", access="deny")]},
            {"name": "bookings", "columns": [_col("booking_id", "integer", primary_key=True),
                                             _col("tenant_id", "integer"), _col("booking_code")]},
            *[{"name": f"audit_{i}", "columns": [_col(f"field_{j}") for j in range(8)]} for i in range(8)],
        ]}
    caps = _write(tmp_path, [manifest])
    build_values(caps["air"])
    return caps


def test_undescribed_drafts_carry_no_filler(airline) -> None:
    text = render_manifest(airline["air"])
    assert "undescribed" not in text
    assert "  table flights\n" in text and "    flight_no text\n" in text


def test_restricted_columns_are_named_never_read(airline) -> None:
    text = render_manifest(airline["air"])
    assert "[restricted, exists but may not be read: pilot_email]" in text
    assert "pin" not in text.replace("pinned", "")  # a denied column stays unnamed
    for sql in ("SELECT pilot_email FROM flights", "SELECT pin FROM flights"):
        with pytest.raises(SandboxViolation):
            check_sql(sql, airline["air"])
    values = ValueIndex.load(airline)
    assert ("air", "flights", "pilot_email") not in values.columns and ("air", "flights", "pin") not in values.columns


def test_formatted_and_padded_values_are_called_out_from_the_value_index(airline) -> None:
    values = ValueIndex.load(airline)
    selection = select("which flights fly to Paris on which days", airline, budget=SMALL, values=values)
    text = selection.render()
    assert "flight_days text — stored like '1-2-3'" in text and "flight_no text — stored like 'CA1'" in text
    assert "leading/trailing spaces (e.g. 'Aberdeen ')" in text
    assert "@x.org" not in text and "1111-22" not in text  # restricted and denied: no sample


def test_row_filtered_tables_get_no_format_sample(airline) -> None:
    values = ValueIndex.load(airline)
    selection = select("booking codes of bookings", airline, budget=SMALL, values=values)
    assert selection.keeps("air", "bookings")
    assert "BK-" not in selection.render()


def test_a_padded_stored_value_is_called_out_in_the_hint(airline) -> None:
    values = ValueIndex.load(airline)
    [match] = [m for m in values.match("flights to Aberdeen") if m.column == "city"]
    assert "leading/trailing spaces" in match.describe()


def test_value_hints_only_for_tables_shown(tmp_path: Path) -> None:
    """A value many databases hold (a city) is no reason to show them all, nor to hint at them."""
    manifests = []
    for n in range(6):
        db = tmp_path / f"db{n}.db"
        with sqlite3.connect(db) as c:
            c.executescript(f"""CREATE TABLE places_{n} (place_id INTEGER PRIMARY KEY, city TEXT);
                INSERT INTO places_{n} VALUES (1, 'Shanghai'), (2, 'Lisbon'), (3, 'Oslo');""")
        manifests.append({"source": f"db{n}", "kind": "sql", "url": f"sqlite:///{db}",
                          "tables": [{"name": f"places_{n}", "columns": [_col("place_id", "integer", primary_key=True),
                                                                       _col("city")]},
                                     *[{"name": f"log_{n}_{i}", "columns": [_col(f"f_{j}") for j in range(8)]}
                                       for i in range(3)]]})
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE warehouses (warehouse_id INTEGER PRIMARY KEY, warehouse_city TEXT, stock INTEGER);"
                        "INSERT INTO warehouses VALUES (1, 'Lisbon', 10);")
    manifests.append({"source": "shop", "kind": "sql", "url": f"sqlite:///{db}", "tables": [
        {"name": "warehouses", "columns": [_col("warehouse_id", "integer", primary_key=True),
                                           _col("warehouse_city"), _col("stock", "integer")]}]})
    caps = _write(tmp_path, manifests)
    for m in caps:
        build_values(m)
    selection = select("warehouse stock in Lisbon", caps, budget=Budget(prompt_tokens=300, linked_tokens=200),
                       values=ValueIndex.load(caps))
    assert selection.keeps("shop", "warehouses")
    assert selection.matches and all(selection.keeps(m.source, m.table) for m in selection.matches)
    assert len({m.source for m in selection.matches}) < 6


@pytest.mark.parametrize("value, expected", [("2024-03-01", "9-9-9"), ("AB12", "A9"), ("Paris", "Aa"), ("1-3-5", "9-9-9")])
def test_shape(value: str, expected: str) -> None:
    assert shape(value) == expected


def test_words_are_not_a_format() -> None:
    assert column_note(["Paris", "Rome", "Oslo", "Lisbon"]) is None
    assert column_note(["09:30", "10:15", "23:05"]) == "stored like '09:30'"
