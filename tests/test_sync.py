"""Schema sync, one behavioural suite for every database (SQLite, PostgreSQL, MariaDB) and the
search server. Each test builds a fresh database (or index set), a hand-annotated manifest, makes
one schema change, and checks that ``--check`` reports exactly that change (exit 1), that
``--write`` applies it, and that every line of the objects it did not touch is unchanged.
"""

from __future__ import annotations

import difflib
import itertools
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from manifest_support import manifest_text

from structq.cli import app

_counter = itertools.count()

SQL_MANIFEST = manifest_text("sync_hr")

SEARCH_MANIFEST = manifest_text("sync_search")


# --- backends: the same five schema changes, in each backend's own words -----------------------


@dataclass
class Backend:
    """One database (or index prefix) for one test, and how to change its schema."""

    name: str
    url: str
    manifest_template: str
    execute: Callable[[str], None]
    #: manifest types of a text column and of an integer column
    text: str = "text"
    integer: str = "integer"
    prefix: str = ""
    change_type_sql: str = ""
    search: Any = None
    mapping: dict[str, Any] = field(default_factory=dict)

    @property
    def table(self) -> str:
        return f"{self.prefix}employees"

    @property
    def new_table(self) -> str:
        return f"{self.prefix}projects"

    def manifest(self) -> str:
        return self.manifest_template.replace("{p}", self.prefix)

    # Each operation: one schema change.
    def create(self) -> None:
        if self.search is not None:
            self._recreate(self.mapping)
        else:
            self.execute("CREATE TABLE employees (employee_id VARCHAR(20) PRIMARY KEY, name VARCHAR(50), "
                         "grade VARCHAR(5), age INTEGER, fax VARCHAR(20))")

    def _recreate(self, properties: dict[str, Any]) -> None:
        """Search mappings cannot drop, rename or retype a field: make the index again."""
        client = self.search
        if client.indices.exists(index=self.table):
            client.indices.delete(index=self.table)
        client.indices.create(index=self.table, body={"mappings": {"properties": properties}})

    def add_column(self) -> None:
        if self.search is not None:
            self.search.indices.put_mapping(index=self.table, body={"properties": {"nickname": {"type": "keyword"}}})
        else:
            self.execute("ALTER TABLE employees ADD COLUMN nickname VARCHAR(30)")

    def drop_column(self) -> None:
        if self.search is not None:
            self._recreate({k: v for k, v in self.mapping.items() if k != "fax"})
        else:
            self.execute("ALTER TABLE employees DROP COLUMN fax")

    def rename_column(self) -> None:
        if self.search is not None:
            self._recreate({("full_name" if k == "name" else k): v for k, v in self.mapping.items()})
        else:
            self.execute("ALTER TABLE employees RENAME COLUMN name TO full_name")

    def add_table(self) -> None:
        if self.search is not None:
            self.search.indices.create(index=self.new_table, body={"mappings": {"properties": {
                "id": {"type": "long"}, "title": {"type": "text"}}}})
        else:
            self.execute("CREATE TABLE projects (id INTEGER PRIMARY KEY, title VARCHAR(50))")

    def change_type(self) -> None:
        if self.search is not None:
            self._recreate({**self.mapping, "age": {"type": "keyword"}})
        else:
            for statement in self.change_type_sql.split(";"):
                self.execute(statement)


def _sqlite(tmp_path: Path) -> Backend:
    path = tmp_path / "hr.db"

    def execute(sql: str) -> None:
        with sqlite3.connect(path) as db:
            db.execute(sql)

    return Backend("sqlite", f"sqlite:///{path}", SQL_MANIFEST, execute,
                  change_type_sql="ALTER TABLE employees DROP COLUMN age;ALTER TABLE employees ADD COLUMN age VARCHAR(10)")


def _server_backend(name: str, server: Any, change_type_sql: str) -> Backend:
    from sqlalchemy import create_engine, text

    url = server.create_database(f"sync_{name}_{next(_counter)}")
    pool = create_engine(url)

    def execute(sql: str) -> None:
        with pool.begin() as connection:
            connection.execute(text(sql))

    return Backend(name, url, SQL_MANIFEST, execute, change_type_sql=change_type_sql)


def _search(server: Any) -> Backend:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[server.url])
    mapping = {"employee_id": {"type": "keyword"}, "name": {"type": "text"}, "grade": {"type": "keyword"},
               "age": {"type": "long"}, "fax": {"type": "keyword"}}
    return Backend("search", server.url, SEARCH_MANIFEST, lambda sql: None, text="keyword", integer="long",
                  prefix=f"t{next(_counter)}_", search=client, mapping=mapping)


@pytest.fixture(params=["sqlite", "postgres", "mariadb", "search"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Backend:
    if request.param == "sqlite":
        built = _sqlite(tmp_path)
    elif request.param == "postgres":
        built = _server_backend("pg", request.getfixturevalue("pg_server"),
                               "ALTER TABLE employees ALTER COLUMN age TYPE VARCHAR(10)")
    elif request.param == "mariadb":
        built = _server_backend("maria", request.getfixturevalue("mariadb_server"),
                               "ALTER TABLE employees MODIFY age VARCHAR(10)")
    else:
        built = _search(request.getfixturevalue("search_server"))
    built.create()
    monkeypatch.setenv("SYNC_TEST_URL", built.url)
    return built


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["sync", *args])


def report(manifest: Path) -> tuple[int, dict[str, Any]]:
    result = run("-m", str(manifest), "--check", "--json")
    return result.exit_code, json.loads(result.stdout)["sources"][0]


def line_changes(before: str, after: str) -> tuple[list[str], list[str]]:
    """Lines removed from and added to ``before``; everything else is identical and in order."""
    removed, added = [], []
    a, b = before.splitlines(), after.splitlines()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


# --- the behavioural suite -------------------------------------------------------------------------


class TestSyncBehaviour:
    """Every backend: each schema change is reported exactly, written, and nothing else moves."""

    @pytest.fixture
    def manifest(self, backend: Backend, tmp_path: Path) -> Path:
        path = tmp_path / "manifests" / "source.yaml"
        path.parent.mkdir()
        path.write_text(backend.manifest(), encoding="utf-8")
        return path

    def _check_then_write(self, manifest: Path) -> tuple[dict[str, Any], str, str]:
        before = manifest.read_text(encoding="utf-8")
        code, found = report(manifest)
        assert code == 1, found
        assert found["drift"] is True
        assert manifest.read_text(encoding="utf-8") == before  # --check changes nothing
        written = run("-m", str(manifest), "--write")
        assert written.exit_code == 0, written.output
        after = manifest.read_text(encoding="utf-8")
        again, in_sync = report(manifest)
        assert again == 0 and in_sync["drift"] is False, in_sync
        return found, before, after

    def test_in_sync_from_the_start(self, manifest: Path) -> None:
        code, found = report(manifest)
        assert code == 0, found
        assert (found["added"], found["dropped"], found["changed"]) == ([], [], [])

    def test_add_column(self, backend: Backend, manifest: Path) -> None:
        backend.add_column()
        found, before, after = self._check_then_write(manifest)
        assert [(a["object"], a["type"]) for a in found["added"]] == [(f"{backend.table}.nickname", backend.text)]
        assert found["dropped"] == [] and found["changed"] == []
        removed, added = line_changes(before, after)
        assert removed == []
        assert added == [f"      - {{name: nickname, type: {backend.text}, draft: true}}"]

    def test_drop_column(self, backend: Backend, manifest: Path) -> None:
        backend.drop_column()
        found, before, after = self._check_then_write(manifest)
        assert [d["object"] for d in found["dropped"]] == [f"{backend.table}.fax"]
        assert found["added"] == [] and found["changed"] == []
        removed, added = line_changes(before, after)
        assert removed == [f"      - {{name: fax, type: {backend.text}, access: deny}}   # legacy, never query"]
        assert added == []

    def test_rename_column(self, backend: Backend, manifest: Path) -> None:
        backend.rename_column()
        found, before, after = self._check_then_write(manifest)
        assert [d["object"] for d in found["dropped"]] == [f"{backend.table}.name"]
        assert [a["object"] for a in found["added"]] == [f"{backend.table}.full_name"]
        assert len(found["renames"]) == 1 and "probable rename" in found["renames"][0]
        removed, added = line_changes(before, after)
        # the person's comment above the old column stays; its annotations are not carried over
        assert removed == ["      - name: name", "        type: text", "        description: 姓名"]
        assert added == ["      - {name: full_name, type: text, draft: true}"]
        assert "# the person's name, as on the ID card" in after

    def test_add_table(self, backend: Backend, manifest: Path) -> None:
        backend.add_table()
        found, before, after = self._check_then_write(manifest)
        assert [(a["object"], a["kind"]) for a in found["added"]] == [
            (backend.new_table, "index" if backend.search is not None else "table")]
        assert [c["name"] for c in found["added"][0]["columns" if backend.search is None else "fields"]] == ["id", "title"]
        removed, added = line_changes(before, after)
        assert removed == []
        assert added[0] == f"  - name: {backend.new_table}"
        assert all("draft: true" in line or line.strip() in ("columns:", "fields:") for line in added[1:])

    def test_change_type(self, backend: Backend, manifest: Path) -> None:
        backend.change_type()
        found, before, after = self._check_then_write(manifest)
        assert [(c["object"], c["attribute"], c["from"], c["to"]) for c in found["changed"]] == [
            (f"{backend.table}.age", "type", backend.integer, backend.text)]
        assert found["added"] == [] and found["dropped"] == []
        removed, added = line_changes(before, after)
        assert removed == [f"      - {{name: age, type: {backend.integer}, description: 年龄}}"]
        assert added == [f"      - {{name: age, type: {backend.text}, description: 年龄}}"]

    def test_second_write_changes_nothing(self, backend: Backend, manifest: Path) -> None:
        backend.add_column()
        backend.add_table()
        assert run("-m", str(manifest), "--write").exit_code == 0
        history = manifest.parent / ".history"
        versions = sorted(history.rglob("*.yaml"))
        text = manifest.read_bytes()
        second = run("-m", str(manifest), "--write")
        assert second.exit_code == 0, second.output
        assert manifest.read_bytes() == text
        assert sorted(history.rglob("*.yaml")) == versions  # no new history entry

    def test_raw_variables_stay(self, backend: Backend, manifest: Path) -> None:
        backend.add_column()
        assert run("-m", str(manifest), "--write").exit_code == 0
        assert "url: ${SYNC_TEST_URL}" in manifest.read_text(encoding="utf-8")
        assert backend.url not in manifest.read_text(encoding="utf-8")

    def test_rollback_restores_exactly(self, backend: Backend, manifest: Path) -> None:
        original = manifest.read_bytes()
        backend.drop_column()
        backend.add_column()
        assert run("-m", str(manifest), "--write").exit_code == 0
        synced = manifest.read_bytes()
        assert synced != original
        back = run("-m", str(manifest), "--rollback")
        assert back.exit_code == 0, back.output
        assert manifest.read_bytes() == original
        # the rollback saved what it replaced, so it can be undone
        again = run("-m", str(manifest), "--rollback")
        assert again.exit_code == 0 and manifest.read_bytes() == synced
