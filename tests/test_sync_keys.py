"""Sync and keys: ``primary_key``, ``nullable`` and ``references`` drift is reported where the
manifest states them, and filled in where it does not (written, but not drift)."""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from structq.cli import app

_counter = itertools.count()

BEFORE = [
    "CREATE TABLE teams (team_id INTEGER PRIMARY KEY, title VARCHAR(20))",
    "CREATE TABLE people (person_id INTEGER PRIMARY KEY, team_id INTEGER, nick VARCHAR(20) NOT NULL, code VARCHAR(5))",
]
#: The same tables after a migration: people.team_id gained a foreign key and NOT NULL,
#: nick became nullable, and the key moved from person_id to code.
AFTER = [
    "DROP TABLE people",
    "CREATE TABLE people (person_id INTEGER NOT NULL, team_id INTEGER NOT NULL REFERENCES teams(team_id), "
    "nick VARCHAR(20), code VARCHAR(5) PRIMARY KEY)",
]

MANIFEST = """\
source: keys
kind: sql
url: ${KEYS_TEST_URL}
tables:
  - name: teams
    columns:
      - {name: team_id, type: integer}
      - {name: title, type: text}
  - name: people
    columns:
      - {name: person_id, type: integer, primary_key: true}
      - {name: team_id, type: integer}
      - {name: nick, type: text, nullable: false}
      - {name: code, type: text}
"""


def _engine(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    from sqlalchemy import create_engine

    if request.param == "sqlite":
        return create_engine(f"sqlite:///{tmp_path / 'keys.db'}")
    server = request.getfixturevalue("pg_server" if request.param == "postgres" else "mariadb_server")
    return create_engine(server.create_database(f"keys_{request.param}_{next(_counter)}"))


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    engine = _engine(request, tmp_path)
    execute(engine, BEFORE)
    monkeypatch.setenv("KEYS_TEST_URL", engine.url.render_as_string(hide_password=False))
    yield engine
    engine.dispose()


def execute(engine: Any, statements: list[str]) -> None:
    from sqlalchemy import text

    with engine.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))


def sync(path: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["sync", "-m", str(path), *args])


def test_unstated_keys_are_filled_without_drift(database: Any, tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(MANIFEST, encoding="utf-8")
    result = sync(path, "--check", "--json")
    assert result.exit_code == 0, result.output  # nothing disagrees: in sync
    entry = json.loads(result.stdout)["sources"][0]
    assert entry["drift"] is False and entry["changed"] == []
    assert [(f["object"], f["attribute"], f["to"]) for f in entry["filled"]] == [("teams.team_id", "primary_key", True)]
    assert sync(path, "--write").exit_code == 0
    text = path.read_text(encoding="utf-8")
    assert "- {name: team_id, type: integer, primary_key: true}" in text
    assert "- {name: title, type: text}\n" in text  # a stated or nullable column is left alone
    assert json.loads(sync(path, "--check", "--json").stdout)["sources"][0]["filled"] == []


def test_key_drift_is_reported_and_written(database: Any, tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(MANIFEST.replace("{name: team_id, type: integer}\n      - {name: title",
                                     "{name: team_id, type: integer, primary_key: true}\n      - {name: title"),
                    encoding="utf-8")
    execute(database, AFTER)
    result = sync(path, "--check", "--json")
    assert result.exit_code == 1, result.output
    entry = json.loads(result.stdout)["sources"][0]
    changed = {(c["object"], c["attribute"]): (c["from"], c["to"]) for c in entry["changed"]}
    assert changed == {("people.person_id", "primary_key"): (True, False), ("people.nick", "nullable"): (False, True)}
    filled = {(c["object"], c["attribute"]): c["to"] for c in entry["filled"]}
    assert filled == {("people.team_id", "references"): "teams.team_id", ("people.team_id", "nullable"): False,
                      ("people.code", "primary_key"): True, ("people.person_id", "nullable"): False}
    assert sync(path, "--write").exit_code == 0
    people = textwrap.dedent(path.read_text(encoding="utf-8").split("- name: people", 1)[1])
    assert "{name: person_id, type: integer, primary_key: false, nullable: false}" in people
    assert "{name: team_id, type: integer, references: teams.team_id, nullable: false}" in people
    assert "{name: nick, type: text, nullable: true}" in people
    assert "{name: code, type: text, primary_key: true}" in people
    assert sync(path, "--check").exit_code == 0
