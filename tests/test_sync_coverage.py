"""``coverage:``: the period each date column covers and how it is stored — measured by init,
refreshed by sync without calling it drift, shown in the planning prompt."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from structq.capabilities import load_manifest, render_manifest
from structq.cli import app
from structq.sync.coverage import stored_format

_counter = itertools.count()


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    from sqlalchemy import create_engine, text

    if request.param == "sqlite":
        engine = create_engine(f"sqlite:///{tmp_path / 'sales.db'}")
    else:
        server = request.getfixturevalue("pg_server" if request.param == "postgres" else "mariadb_server")
        engine = create_engine(server.create_database(f"cov_{request.param}_{next(_counter)}"))
    with engine.begin() as c:
        c.execute(text("CREATE TABLE sales (id INTEGER PRIMARY KEY, sale_date DATE, amount INTEGER, day_text VARCHAR(10))"))
        c.execute(text("INSERT INTO sales VALUES (1, '2023-01-01', 5, '2023-01-01'), (2, '2024-06-30', 7, '2024-06-30')"))
    yield request.param, engine
    engine.dispose()


def test_coverage_is_measured_refreshed_and_shown(database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import text

    kind, engine = database
    url = engine.url.render_as_string(hide_password=False)
    caps = tmp_path / "caps"
    result = CliRunner().invoke(app, ["init", "--source", "sales", "--url", url, "-m", str(caps)])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("SALES_URL", url)
    path = caps / "sales.yaml"
    manifest, _ = load_manifest(path)
    coverage = manifest.table("sales").column("sale_date").coverage
    assert (coverage.min, coverage.max) == ("2023-01-01", "2024-06-30")
    assert coverage.format == ("ISO date text (YYYY-MM-DD)" if kind == "sqlite" else "date")
    assert manifest.table("sales").column("amount").coverage is None
    assert "sale_date date (data covers 2023-01-01 … 2024-06-30" in render_manifest(manifest)

    with engine.begin() as c:
        c.execute(text("INSERT INTO sales VALUES (3, '2025-02-01', 1, NULL)"))
    checked = CliRunner().invoke(app, ["sync", "-m", str(caps), "--check", "--json"])
    assert checked.exit_code == 0, checked.output  # new data is not drift
    filled = json.loads(checked.stdout)["sources"][0]["filled"]
    assert [(f["object"], f["attribute"], f["to"]["max"]) for f in filled] == [("sales.sale_date", "coverage", "2025-02-01")]
    before = path.read_text(encoding="utf-8")
    assert CliRunner().invoke(app, ["sync", "-m", str(caps), "--write"]).exit_code == 0
    after = path.read_text(encoding="utf-8")
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert len(changed) == 1 and 'max: "2025-02-01"' in changed[0]
    assert json.loads(CliRunner().invoke(app, ["sync", "-m", str(caps), "--check", "--json"]).stdout)[
        "sources"][0]["filled"] == []


def test_hand_written_date_columns_are_not_measured(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "s.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE s (d DATE)")
        c.execute("INSERT INTO s VALUES ('2020-01-01')")
    path = tmp_path / "s.yaml"
    path.write_text(f"source: s\nkind: sql\nurl: sqlite:///{db}\ntables:\n  - name: s\n    columns:\n"
                    "      - {name: d, type: date, description: day}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["sync", "-m", str(path), "--check", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["sources"][0]["filled"] == []


@pytest.mark.parametrize(("value", "expected"), [
    ("2024-01-31", "ISO date text (YYYY-MM-DD)"), ("2024-01-31 10:00:00", "ISO datetime text (YYYY-MM-DD HH:MM:SS)"),
    ("2024-01-31T10:00:00Z", "ISO datetime text (YYYY-MM-DD HH:MM:SS)"), (1700000000, "epoch seconds"),
    (1700000000000, "epoch milliseconds"), ("31/01/2024", "text"),
])
def test_stored_format(value: Any, expected: str) -> None:
    assert stored_format(value) == expected


def test_suggested_values_are_refreshed_without_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A draft's profiled values follow the data (a new status appears) and are not drift; a
    meaning a person wrote for one of them is kept."""
    import sqlite3

    db = tmp_path / "o.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)")
        c.executemany("INSERT INTO orders (status) VALUES (?)", [("open",), ("open",), ("paid",), ("paid",)])
    caps = tmp_path / "caps"
    assert CliRunner().invoke(app, ["init", "--source", "o", "--url", f"sqlite:///{db}", "-m", str(caps)]).exit_code == 0
    monkeypatch.setenv("O_URL", f"sqlite:///{db}")
    path = caps / "o.yaml"
    text = path.read_text(encoding="utf-8")
    assert "values: {open: open, paid: paid}" in text
    path.write_text(text.replace("paid: paid", "paid: 已付款"), encoding="utf-8")
    with sqlite3.connect(db) as c:
        c.executemany("INSERT INTO orders (status) VALUES (?)", [("void",), ("void",)])
    checked = CliRunner().invoke(app, ["sync", "-m", str(caps), "--check", "--json", "--profile-values", "20"])
    assert checked.exit_code == 0, checked.output
    entry = json.loads(checked.stdout)["sources"][0]
    assert [(f["object"], f["to"]) for f in entry["filled"]] == [("orders.status", ["open", "paid", "void"])]
    assert CliRunner().invoke(app, ["sync", "-m", str(caps), "--write", "--profile-values", "20"]).exit_code == 0
    assert "values: {open: open, paid: 已付款, void: void}" in path.read_text(encoding="utf-8")
