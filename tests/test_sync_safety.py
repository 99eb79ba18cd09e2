"""Schema sync on SQLite: safe writes (kill mid-write, failed replace), history and rollback,
policies that hold a drop, references, ``--profile-values``, the CLI's exit codes and JSON, and
``missing_objects`` for ``structq check --connect``."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from manifest_support import manifest_text

from structq.capabilities import load_manifest
from structq.cli import app
from structq.sync import history, missing_objects


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "hr.db"
    with sqlite3.connect(path) as c:
        c.executescript("""
            CREATE TABLE employees (id INTEGER PRIMARY KEY, tenant INTEGER, status TEXT, fax TEXT);
            CREATE TABLE offices (id INTEGER PRIMARY KEY, city TEXT, zone TEXT);
            INSERT INTO employees VALUES (1, 1, 'active', NULL), (2, 1, 'left', NULL), (3, 2, 'active', NULL);
        """)
    return path


@pytest.fixture
def manifest(tmp_path: Path, db: Path) -> Path:
    path = tmp_path / "caps" / "hr.yaml"
    path.parent.mkdir()
    path.write_text(manifest_text("sync_hr_sqlite", db=db), encoding="utf-8")
    return path


def execute(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as c:
        c.executescript(sql)


def sync(*args: str) -> Any:
    return CliRunner().invoke(app, ["sync", *args])


# --- safe writes -------------------------------------------------------------------------------

_KILLED_WRITER = """
import os, sys, time
from structq.sync import history

real, calls, stop_at = history._write_all, [0], int(sys.argv[2])

def slow_write(fd, data):
    calls[0] += 1
    if calls[0] == stop_at:                     # write half, make it durable, then hang
        real(fd, data[: len(data) // 2])
        os.fsync(fd)
        print("HALF", flush=True)
        time.sleep(60)
    real(fd, data)

history._write_all = slow_write
from structq.cli import app
app(["sync", "-m", sys.argv[1], "--write"])
"""


@pytest.mark.parametrize("stop_at", [1, 2], ids=["during-history-save", "during-manifest-write"])
def test_killed_writer_leaves_the_old_manifest(manifest: Path, db: Path, stop_at: int) -> None:
    execute(db, "ALTER TABLE employees ADD COLUMN nickname TEXT")
    original = manifest.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(manifest), str(stop_at)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "HALF", child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert manifest.read_bytes() == original           # never half: the old file, untouched
    load_manifest(manifest)                             # and it loads
    # a half-written temporary file is left behind, hidden and not a manifest; the next write removes it
    def temporaries() -> list[Path]:
        return [*manifest.parent.glob(".hr.yaml.*"), *manifest.parent.glob(".history/hr/.*.sync-tmp")]

    assert len(temporaries()) == 1
    result = sync("-m", str(manifest), "--write")
    assert result.exit_code == 0, result.output
    assert "nickname" in manifest.read_text(encoding="utf-8")
    assert temporaries() == []
    assert sync("-m", str(manifest), "--rollback").exit_code == 0
    assert manifest.read_bytes() == original


def test_failed_replace_keeps_old_file(manifest: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    execute(db, "ALTER TABLE employees ADD COLUMN nickname TEXT")
    original = manifest.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(history.os, "replace", broken_replace)
    result = sync("-m", str(manifest), "--write")
    assert result.exit_code != 0
    assert manifest.read_bytes() == original
    assert not list(manifest.parent.glob(".hr.yaml.*"))  # the temporary file was cleaned up


def test_concurrent_edit_is_not_overwritten(manifest: Path, db: Path) -> None:
    from structq.sync import plan_sync, write_sync

    execute(db, "ALTER TABLE employees ADD COLUMN nickname TEXT")
    plan = plan_sync(manifest)
    manifest.write_text(manifest.read_text(encoding="utf-8") + "# a person's edit\n", encoding="utf-8")
    with pytest.raises(history.HistoryError, match="changed while sync was running"):
        write_sync(plan)
    assert manifest.read_text(encoding="utf-8").endswith("# a person's edit\n")


def test_rollback_to_a_named_version(manifest: Path, db: Path) -> None:
    v0 = manifest.read_bytes()
    execute(db, "ALTER TABLE employees ADD COLUMN a TEXT")
    assert sync("-m", str(manifest), "--write").exit_code == 0
    v1 = manifest.read_bytes()
    execute(db, "ALTER TABLE employees ADD COLUMN b TEXT")
    assert sync("-m", str(manifest), "--write").exit_code == 0
    versions = history.list_versions(manifest, "hr")
    assert [v.path.read_bytes() for v in versions] == [v0, v1]
    result = sync("-m", str(manifest), "--rollback", versions[0].name, "--json")
    assert result.exit_code == 0, result.output
    assert manifest.read_bytes() == v0
    assert json.loads(result.stdout)["restored"] == str(versions[0].path)


def test_rollback_without_history_fails_clearly(manifest: Path) -> None:
    result = sync("-m", str(manifest), "--rollback")
    assert result.exit_code == 1
    assert "no saved versions" in result.output


# --- what the merge protects -----------------------------------------------------------------


def test_table_needed_by_policies_or_examples_is_held(manifest: Path, db: Path) -> None:
    execute(db, "DROP TABLE offices")
    before = manifest.read_bytes()
    result = sync("-m", str(manifest), "--check", "--json")
    assert result.exit_code == 1
    found = json.loads(result.stdout)["sources"][0]
    assert found["dropped"] == [{"object": "offices", "kind": "table", "held": True}]
    assert any("所有办公室" in w and "kept in the manifest" in w for w in found["warnings"])
    written = sync("-m", str(manifest), "--write")
    assert written.exit_code == 0 and manifest.read_bytes() == before  # nothing safe to write
    assert sync("-m", str(manifest), "--check").exit_code == 1  # still alerting


def test_dropped_column_read_by_a_row_filter_is_warned_about(manifest: Path, db: Path) -> None:
    execute(db, "ALTER TABLE employees DROP COLUMN tenant")
    found = json.loads(sync("-m", str(manifest), "--check", "--json").stdout)["sources"][0]
    assert [d["object"] for d in found["dropped"]] == ["employees.tenant"]
    assert any("policies.row_filters[0]" in w for w in found["warnings"])


def test_foreign_keys_become_references_and_values_are_profiled(manifest: Path, db: Path) -> None:
    execute(db, """
        CREATE TABLE visits (id INTEGER PRIMARY KEY, employee_id INTEGER REFERENCES employees(id),
                             kind TEXT NOT NULL);
        INSERT INTO visits VALUES (1, 1, 'onsite'), (2, 2, 'remote'), (3, 1, 'onsite'), (4, 2, 'remote');
        INSERT INTO offices VALUES (1, 'north', 'a'), (2, 'south', 'b'), (3, 'north', 'a'), (4, 'south', 'b');
    """)
    result = sync("-m", str(manifest), "--write", "--profile-values", "5")
    assert result.exit_code == 0, result.output
    text = manifest.read_text(encoding="utf-8")
    assert "{name: employee_id, type: integer, references: employees.id, draft: true}" in text
    assert "{name: kind, type: text, nullable: false, values: {onsite: onsite, remote: remote}, draft: true}" in text
    # an undescribed column gets a proposal marked draft (a suggestion); a described one is untouched
    assert "{name: city, type: text, draft: true, values: {north: north, south: south}}" in text
    assert "- {name: zone, type: text, description: 区域}\n" in text
    assert "- {name: id, type: integer, description: 工号, primary_key: true}\n" in text  # keys are never profiled
    manifest_obj, _ = load_manifest(manifest)
    assert manifest_obj.table("visits").draft


def test_dropped_last_column_keeps_trailing_comment_and_new_one_goes_before_it(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "hr.yaml"
    path.write_text(textwrap.dedent(f"""\
        source: hr
        kind: sql
        url: sqlite:///{db}
        tables:
          - name: offices
            columns:
              - {{name: id, type: integer, primary_key: true}}
              - {{name: city, type: text}}

        # --- end of tables ---
        """), encoding="utf-8")
    execute(db, "ALTER TABLE offices DROP COLUMN city; ALTER TABLE offices DROP COLUMN zone; "
                "ALTER TABLE offices ADD COLUMN town TEXT")
    execute(db, "DROP TABLE employees")
    assert sync("-m", str(path), "--write").exit_code == 0
    assert path.read_text(encoding="utf-8").endswith(
        "      - {name: id, type: integer, primary_key: true}\n      - {name: town, type: text, draft: true}\n\n# --- end of tables ---\n")


# --- CLI contract ---------------------------------------------------------------------------------


def test_json_shape(manifest: Path, db: Path) -> None:
    execute(db, "ALTER TABLE employees ADD COLUMN nickname TEXT")
    result = sync("-m", str(manifest), "--check", "--json")
    document = json.loads(result.stdout)
    entry = document["sources"][0]
    assert set(entry) >= {"source", "drift", "added", "dropped", "changed", "warnings"}
    assert entry["added"] == [{"object": "employees.nickname", "kind": "column", "type": "text", "native_type": "TEXT"}]


def test_usage_errors(manifest: Path) -> None:
    assert sync("-m", str(manifest)).exit_code == 2
    assert sync("-m", str(manifest), "--check", "--write").exit_code == 2
    assert sync("-m", str(manifest.parent), "--source", "nope", "--check").exit_code == 2


def test_check_with_diff_prints_the_yaml_change(manifest: Path, db: Path) -> None:
    execute(db, "ALTER TABLE employees ADD COLUMN nickname TEXT")
    result = sync("-m", str(manifest), "--check", "--diff")
    assert result.exit_code == 1
    assert "+      - {name: nickname, type: text, draft: true}" in result.stdout
    assert "+ column employees.nickname text" in result.stdout


def test_unreachable_sqlite_file_is_exit_4_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "gone.db"
    path = tmp_path / "hr.yaml"
    path.write_text(manifest_text("sync_hr_sqlite", db=missing), encoding="utf-8")
    result = sync("-m", str(path), "--check")
    assert result.exit_code == 4
    assert "unavailable" in result.output
    assert not missing.exists()  # read-only open: no empty database created by accident


def test_unreachable_server_is_exit_4(tmp_path: Path) -> None:
    path = tmp_path / "hr.yaml"
    text = manifest_text("sync_hr_sqlite", db="x").replace("sqlite:///x", "postgresql+psycopg://u@127.0.0.1:9/hr")
    path.write_text(text, encoding="utf-8")
    result = sync("-m", str(path), "--check", "--json")
    assert result.exit_code == 4
    assert json.loads(result.stdout)["sources"][0]["error"].startswith("source 'hr' is unavailable")


def test_missing_objects_for_check_connect(manifest: Path, db: Path) -> None:
    execute(db, "ALTER TABLE employees DROP COLUMN fax; CREATE TABLE ignored (x INTEGER)")
    m, _ = load_manifest(manifest)
    assert missing_objects(m) == [{
        "source": "hr", "object": "employees.fax", "kind": "column",
        "message": "column employees.fax is declared but does not exist",
    }]


def test_missing_objects_search(search_server: Any) -> None:
    from opensearchpy import OpenSearch

    from structq.capabilities import load_manifest_text

    OpenSearch(hosts=[search_server.url]).indices.create(
        index="mo_reports", body={"mappings": {"properties": {"title": {"type": "text"},
                                                              "meta": {"properties": {"k": {"type": "keyword"}}}}}})
    m, _ = load_manifest_text(manifest_text("sync_missing_reports", url=search_server.url))
    assert sorted(p["object"] for p in missing_objects(m)) == ["mo_missing", "mo_reports.body", "mo_reports.meta.gone"]


def test_nested_search_fields_are_added(search_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[search_server.url])
    client.indices.create(index="nf_docs", body={"mappings": {"properties": {"title": {"type": "text"}}}})
    path = tmp_path / "docs.yaml"
    path.write_text(textwrap.dedent(f"""\
        source: docs
        kind: opensearch
        url: {search_server.url}
        sync: {{include: [nf_*]}}
        indices:
          - name: nf_docs
            fields:
              - {{name: title, type: text, description: 标题}}
        """), encoding="utf-8")
    client.indices.put_mapping(index="nf_docs", body={"properties": {
        "author": {"properties": {"id": {"type": "keyword"}, "name": {"type": "text"}}}}})
    assert sync("-m", str(path), "--write").exit_code == 0
    assert path.read_text(encoding="utf-8").endswith(
        "      - {name: title, type: text, description: 标题}\n"
        "      - name: author\n"
        "        type: object\n"
        "        draft: true\n"
        "        fields:\n"
        "          - {name: id, type: keyword, draft: true}\n"
        "          - {name: name, type: text, draft: true}\n")
    assert sync("-m", str(path), "--check").exit_code == 0


def test_names_the_database_allows_are_quoted(manifest: Path, db: Path) -> None:
    execute(db, 'CREATE TABLE "order lines" ("line no" INTEGER PRIMARY KEY, "单价" REAL)')
    assert sync("-m", str(manifest), "--write").exit_code == 0
    text = manifest.read_text(encoding="utf-8")
    assert '  - name: "order lines"\n' in text
    assert '- {name: "line no", type: integer, primary_key: true, draft: true}' in text
    assert "- {name: 单价, type: real, draft: true}" in text
    assert sync("-m", str(manifest), "--check").exit_code == 0


# --- the executor's guards: drivers, read-only transactions, timeouts, redaction ---------------


@pytest.mark.parametrize("server_fixture, plain_scheme", [("pg_server", "postgresql"), ("mariadb_server", "mysql")])
def test_plain_server_url_runs_with_the_extras_drivers_read_only(
        request: pytest.FixtureRequest, server_fixture: str, plain_scheme: str, tmp_path: Path) -> None:
    """``postgresql://`` / ``mysql://`` without a driver name: sync connects with psycopg 3 /
    PyMySQL (the extras' drivers), and every transaction it reads in is read-only."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    from structq.capabilities import load_manifest_text
    from structq.sync.connect import sql_connection

    server = request.getfixturevalue(server_fixture)
    name = f"plain_{plain_scheme}_{tmp_path.name[-8:]}".replace("-", "_")
    with create_engine(server.create_database(name)).begin() as c:
        c.execute(text("CREATE TABLE offices (id INTEGER PRIMARY KEY, city VARCHAR(20))"))
    reader = make_url(server.create_readonly_user(name, f"r{tmp_path.name[-6:]}".replace("-", "_"), "pw_s3cret"))
    url = reader.set(drivername=plain_scheme).render_as_string(hide_password=False)
    assert url.startswith(f"{plain_scheme}://") and "pw_s3cret@127.0.0.1:" in url

    path = tmp_path / "hr.yaml"
    path.write_text(f"source: hr\nkind: sql\nurl: {url}\n"
                    "tables:\n  - name: offices\n    columns:\n      - {name: id, type: integer}\n", encoding="utf-8")
    result = sync("-m", str(path), "--check", "--json")
    assert result.exit_code == 1, result.output
    assert [a["object"] for a in json.loads(result.stdout)["sources"][0]["added"]] == ["offices.city"]

    m, _ = load_manifest_text(path.read_text(encoding="utf-8"), str(path))
    with sql_connection(m) as source:
        for _ in range(2):  # every transaction, not only the first one
            with source.transaction() as connection, pytest.raises(DBAPIError) as refused:
                connection.execute(text("CREATE TABLE written (x INTEGER)"))
            assert "read" in str(refused.value.orig).lower()  # "read-only transaction"
        if plain_scheme == "postgresql":
            with source.transaction() as connection:
                assert connection.execute(text("SHOW statement_timeout")).scalar() == "1min"


def test_sqlite_reads_are_query_only(manifest: Path) -> None:
    from sqlalchemy import text

    from structq.sync.connect import sql_connection

    m, _ = load_manifest(manifest)
    with sql_connection(m) as source, source.transaction() as connection:
        assert connection.execute(text("PRAGMA query_only")).scalar() == 1


@pytest.mark.parametrize("url", [
    "postgresql://u:s3cret@db.example:notaport/hr",  # a port that is not a number
    "postgresql//u:s3cret@db.example/hr",            # not a URL at all
    "u:s3cret@db.example/hr",                        # the scheme forgotten
    "oracle://u:s3cret@db.example/hr",               # no read-only executor for it
    "postgresql://u:s3/cret@db.example/hr",          # a password urlsplit misreads
    "postgresql://u:s3cret@127.0.0.1:9/hr",          # nobody listening
])
def test_a_password_never_appears_in_messages(tmp_path: Path, url: str) -> None:
    path = tmp_path / "hr.yaml"
    path.write_text(manifest_text("sync_hr_sqlite", db="x").replace("sqlite:///x", url), encoding="utf-8")
    for args in (["--check"], ["--check", "--json"]):
        result = sync("-m", str(path), *args)
        assert result.exit_code not in (0, 1)
        shown = result.output + str(result.exception or "")
        assert "u:***@" in shown or "not a database URL" in shown or "oracle" in shown, shown
        assert "s3cret" not in shown and "cret@" not in shown, shown


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("http://admin:s3cret@127.0.0.1:9200", "http://admin:***@127.0.0.1:9200"),
    ("postgresql://u:s3cret@h:abc/db", "postgresql://u:***@h:abc/db"),   # bad port: no ValueError
    ("postgresql://u:s3/c?r#et@h/db", "postgresql://u:***@h/db"),
    ("mysql://u:s3@cret@h/db", "mysql://u:***@h/db"),
    ("u:s3cret@h/db", "u:***@h/db"),
    ("postgresql//u:s3cret@h/db", "postgresql//u:***@h/db"),
    ("http://[::1", "http://[::1"),                                      # urlsplit would raise
    ("http://h:9200", "http://h:9200"),
    ("http://user@h", "http://user@h"),
    ("sqlite:///data/x@y.db", "sqlite:///data/x@y.db"),
    ("embedded", "embedded"),
])
def test_redact_url_is_total(url: str, shown: str) -> None:
    from structq.executors.urls import redact_url

    assert redact_url(url) == shown


def test_profile_values_skips_row_filtered_tables(manifest: Path) -> None:
    """employees has a row filter: its distinct statuses are every tenant's, so they are not
    written into the manifest (nor, from there, into prompts); the warning says so."""
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        "{name: status, type: text, description: 状态}", "{name: status, type: text}"), encoding="utf-8")
    execute(manifest.parent.parent / "hr.db", "INSERT INTO offices VALUES (1, 'north', 'a'), (2, 'north', 'a')")
    entry = json.loads(sync("-m", str(manifest), "--check", "--json", "--profile-values", "5").stdout)["sources"][0]
    assert [c["object"] for c in entry["changed"] if c["attribute"] == "values"] == ["offices.city"]
    assert any(w.startswith("employees: values not profiled, it has row filters") for w in entry["warnings"])
    assert sync("-m", str(manifest), "--write", "--profile-values", "5").exit_code == 0
    assert "- {name: status, type: text}\n" in manifest.read_text(encoding="utf-8")


def test_profile_values_that_time_out_are_skipped(manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column whose distinct values take longer than the read timeout is left out, with a
    warning; the rest of the sync goes on."""
    from structq.sync import connect

    monkeypatch.setattr(connect, "READ_TIMEOUT_S", 0.2)
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        "kind: sql\n", "kind: sql\nlimits: {timeout_s: 0.2}\n"), encoding="utf-8")
    execute(manifest.parent.parent / "hr.db", """
        CREATE VIEW slow AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000000)
        SELECT 'c' || (n % 3) AS code FROM r;
        INSERT INTO offices VALUES (1, 'north', 'a'), (2, 'north', 'a');
    """)
    entry = json.loads(sync("-m", str(manifest), "--check", "--json", "--profile-values", "5").stdout)["sources"][0]
    assert "slow.code: values not profiled, reading them took longer than 0.2 s" in entry["warnings"]
    assert [c["object"] for c in entry["changed"] if c["attribute"] == "values"] == ["offices.city"]


def test_profile_values_on_the_embedded_search_server(tmp_path: Path) -> None:
    """``url: embedded`` keeps each index under a name of its own; profiling reads that one."""
    from structq.executors.search import embedded_server

    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in [
        {"_id": "1", "author_id": "E1", "status": "draft"},
        {"_id": "2", "author_id": "E2", "status": "final"},
        {"_id": "3", "author_id": "E1", "status": "final"},
        {"_id": "4", "author_id": "E2", "status": "draft"},
    ]) + "\n", encoding="utf-8")
    path = tmp_path / "reports.yaml"
    path.write_text(textwrap.dedent("""\
        source: reports
        kind: opensearch
        url: embedded
        indices:
          - name: emb_profiled
            documents: docs.jsonl
            fields:
              - {name: author_id, type: keyword, description: 作者}
              - {name: status, type: keyword}
        """), encoding="utf-8")
    embedded_server.stop()
    try:
        result = sync("-m", str(path), "--check", "--json", "--profile-values", "5")
        assert result.exit_code == 1, result.output
        changed = json.loads(result.stdout)["sources"][0]["changed"]
        # author_id is a described key: never profiled
        assert {c["object"]: c["to"] for c in changed} == {"emb_profiled.status": ["draft", "final"]}
        assert embedded_server._SERVER._holders == 0  # sync gave back what it acquired
    finally:
        embedded_server.stop()
