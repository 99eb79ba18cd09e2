"""``structq init`` on every database: the drafted manifest declares what the source holds, denies
what looks secret or personal, never holds the URL's password, refuses to overwrite, and is
in sync and connectable straight away."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from structq.capabilities import load_manifest
from structq.cli import app

_counter = itertools.count()

#: Sampled content that must be denied although the names say nothing.
_EMAILS = ["ann@example.com", "bo@example.org", "cy@example.net"]
_HASHES = ["$2b$12$" + "a" * 53, "$2b$12$" + "b" * 53, "$2b$12$" + "c" * 53]


@dataclass
class Source:
    """One freshly built source for ``init``, and the facts its manifest must state."""

    name: str
    url: str
    kind: str = "sql"
    schema: str | None = None
    secret: str = ""  # a password in the URL that must never reach the file
    include: tuple[str, ...] = ()


def _sql_statements(text_type: str, comments: bool) -> list[str]:
    c = (lambda s: f" COMMENT '{s}'") if comments else (lambda s: "")
    return [
        f"CREATE TABLE teams (team_id INTEGER PRIMARY KEY, title {text_type} NOT NULL{c('team name')})"
        + (" COMMENT='teams of the company'" if comments else ""),
        f"CREATE TABLE members (member_id INTEGER PRIMARY KEY, team_id INTEGER NOT NULL REFERENCES teams(team_id), "
        f"status {text_type}, password_hash {text_type}, api_key {text_type}, contact {text_type}, "
        f"login {text_type}, joined DATE)",
        "INSERT INTO teams VALUES (1, 'core'), (2, 'web')",
        *(f"INSERT INTO members VALUES ({i + 1}, {i % 2 + 1}, 'active', 'x', 'k', '{e}', '{h}', '2024-01-0{i + 1}')"
          for i, (e, h) in enumerate(zip(_EMAILS, _HASHES))),
    ]


def _sqlite(tmp_path: Path, request: pytest.FixtureRequest) -> Source:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        for statement in _sql_statements("TEXT", comments=False):
            db.execute(statement)
    return Source("shop", f"sqlite:///{path}")


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Source:
    server = request.getfixturevalue("pg_server")
    database = f"init_pg_{next(_counter)}"
    server.create_database(database)
    statements = ["CREATE SCHEMA people", "SET search_path TO people"] + _sql_statements("VARCHAR(80)", comments=False)
    statements += ["COMMENT ON TABLE people.teams IS 'teams of the company'",
                   "COMMENT ON COLUMN people.teams.title IS 'team name'",
                   "CREATE TABLE public.elsewhere (id INTEGER PRIMARY KEY)"]
    reader = server.create_readonly_user(database, role := f"reader{next(_counter)}", "pw-s3cret-9")
    statements += [f"GRANT USAGE ON SCHEMA people TO {role}", f"GRANT SELECT ON ALL TABLES IN SCHEMA people TO {role}"]
    server.execute([(s, None) for s in statements], database=database)
    return Source("hrpg", reader, schema="people", secret="pw-s3cret-9")


def _mariadb(tmp_path: Path, request: pytest.FixtureRequest) -> Source:
    server = request.getfixturevalue("mariadb_server")
    admin = server.create_database(database := f"init_maria_{next(_counter)}")
    server.execute([(s, None) for s in _sql_statements("VARCHAR(80)", comments=True)], database=database)
    return Source("hrmaria", admin)


def _search(tmp_path: Path, request: pytest.FixtureRequest) -> Source:
    from opensearchpy import OpenSearch

    server = request.getfixturevalue("search_server")
    prefix = f"init{next(_counter)}_"
    client = OpenSearch(hosts=[server.url])
    client.indices.create(index=f"{prefix}members", body={"mappings": {
        "_meta": {"description": "members of the company"},
        "properties": {
            "member_id": {"type": "keyword"},
            "status": {"type": "keyword", "meta": {"description": "membership state"}},
            "contact": {"type": "keyword"},
            "login": {"type": "keyword"},
            "password_hash": {"type": "keyword"},
            "team": {"properties": {"team_id": {"type": "long"}, "title": {"type": "text"}}},
            "visits": {"type": "nested", "properties": {"day": {"type": "date"}, "ip": {"type": "ip"}}},
        }}})
    for i, (email, hashed) in enumerate(zip(_EMAILS, _HASHES)):
        client.index(index=f"{prefix}members", id=str(i), refresh=True, body={
            "member_id": f"m{i}", "status": "active", "contact": email, "login": hashed, "password_hash": "x",
            "team": {"team_id": 1, "title": "core"}, "visits": [{"day": "2024-01-01", "ip": "10.0.0.1"}]})
    return Source("searchidx", server.url, kind="opensearch", include=(f"{prefix}*",))


def _elasticsearch(tmp_path: Path, request: pytest.FixtureRequest) -> Source:
    """The same index through the test proxy that makes osmem answer like Elasticsearch."""
    from es_proxy import EsProxy

    built = _search(tmp_path, request)
    proxy = EsProxy(built.url).__enter__()
    request.addfinalizer(lambda: proxy.__exit__(None, None, None))
    return Source("esidx", proxy.url, kind="elasticsearch", include=built.include)


ENGINES: dict[str, Callable[[Path, pytest.FixtureRequest], Source]] = {
    "sqlite": _sqlite, "postgres": _postgres, "mariadb": _mariadb, "search": _search, "elasticsearch": _elasticsearch,
}


@pytest.fixture(params=sorted(ENGINES))
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Source:
    return ENGINES[request.param](tmp_path, request)


def init(source: Source, directory: Path, *extra: str) -> Any:
    args = ["init", "--source", source.name, "--url", source.url, "-m", str(directory)]
    if source.kind != "sql":
        args += ["--kind", source.kind]
    if source.schema:
        args += ["--schema", source.schema]
    for pattern in source.include:
        args += ["--include", pattern]
    return CliRunner().invoke(app, [*args, *extra])


def _members(manifest: Any) -> dict[str, Any]:
    """Every column, or every field by dotted path (sub-fields too), by ``object.member``."""
    if manifest.is_search:
        return {f"{i.name.split('_', 1)[1]}.{path}": f for i in manifest.indices for path, f in i.flat_fields().items()}
    return {f"{t.name}.{c.name}": c for t in manifest.tables for c in t.columns}


def test_init_drafts_a_safe_manifest_that_is_in_sync(source: Source, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    caps = tmp_path / "caps"
    result = init(source, caps, "--json")
    assert result.exit_code == 0, result.output
    path = caps / f"{source.name}.yaml"
    text = path.read_text(encoding="utf-8")
    variable = f"{source.name.upper()}_URL"
    # the URL is not in the file; its value is shown once, on stderr
    assert f"url: ${{{variable}}}" in text
    assert source.url.split("://", 1)[1] not in text
    if source.secret:
        assert source.secret not in text and source.secret not in result.stdout
    assert result.stderr.count(f"export {variable}=") == 1
    monkeypatch.setenv(variable, source.url)
    manifest, _ = load_manifest(path)
    summary = json.loads(result.stdout)
    members = _members(manifest)
    objects = manifest.indices if manifest.is_search else manifest.tables
    assert all(o.draft for o in objects) and all(m.draft for m in members.values())
    # secret or personal by name (password_hash, api_key) and by content (emails, bcrypt hashes)
    denied = {name for name, m in members.items() if m.denied}
    expected = {"members.password_hash", "members.contact", "members.login"}
    if manifest.is_search:
        expected |= {"members.visits.ip"}
    else:
        expected |= {"members.api_key"}
    assert denied == expected, text
    assert len(summary["denied"]) == len(expected)
    for line in text.splitlines():
        if "access: deny" in line and "{" in line:
            assert "# denied: " in line  # every denial says why
    if manifest.is_search:
        assert members["members.team.title"].type == "text" and members["members.visits"].type == "nested"
        assert next(i for i in manifest.indices).description == "members of the company"
        assert members["members.status"].description == "membership state"
    else:
        assert members["teams.team_id"].primary_key and members["members.team_id"].nullable is False
        assert members["members.team_id"].references == "teams.team_id"
        assert members["members.joined"].type == "date"
        assert {t.name for t in manifest.tables} == {"teams", "members"}  # public.elsewhere is out of scope
        if source.name != "shop":  # SQLite has no comments
            assert manifest.table("teams").description == "teams of the company"
            assert members["teams.title"].description == "team name"
    assert manifest.sync is not None and manifest.sync.schema_ == source.schema
    # afterwards: check --connect passes, sync --check reports in sync
    checked = CliRunner().invoke(app, ["check", "-m", str(caps), "--connect"])
    assert checked.exit_code == 0, checked.output
    synced = CliRunner().invoke(app, ["sync", "-m", str(caps), "--check", "--json"])
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.stdout)["sources"][0]["drift"] is False
    # never overwrites
    again = init(source, caps)
    assert again.exit_code == 3 and "never overwrites" in again.stderr
    assert path.read_text(encoding="utf-8") == text


def test_init_needs_a_kind_for_cluster_urls(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", "--source", "logs", "--url", "http://127.0.0.1:9", "-m", str(tmp_path)])
    assert result.exit_code == 3
    assert "--kind" in result.stderr and not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["1bad", "has-dash", "sp ace"])
def test_init_refuses_names_that_are_not_identifiers(name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", "--source", name, "--url", "sqlite:///x.db", "-m", str(tmp_path)])
    assert result.exit_code == 3 and "identifier" in result.stderr


def test_init_says_when_the_scope_holds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER)")
    result = CliRunner().invoke(app, ["init", "--source", "e", "--url", f"sqlite:///{db}", "-m", str(tmp_path / "c"),
                                      "--include", "nothing_*"])
    assert result.exit_code == 3 and "no tables or views found" in result.stderr
    assert not (tmp_path / "c" / "e.yaml").exists()


def test_init_makes_relative_sqlite_paths_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with sqlite3.connect(tmp_path / "rel.db") as c:
        c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["init", "--source", "rel", "--url", "sqlite:///rel.db", "-m", "caps"])
    assert result.exit_code == 0, result.output
    assert f"export REL_URL=sqlite:///{tmp_path / 'rel.db'}" in result.stderr


def test_init_on_the_demo_denies_id_card_and_salary(demo_data: Any, tmp_path: Path) -> None:
    """The demo's HR database: the hand-written manifest denies id_card and monthly_salary;
    init, knowing nothing of it, must come to the same conclusion."""
    db = Path(demo_data.directory) / "company.db"
    result = CliRunner().invoke(app, ["init", "--source", "hr", "--url", f"sqlite:///{db}", "-m", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    denied = {d["object"] for d in json.loads(result.stdout)["denied"]}
    assert {"employees.id_card", "employees.monthly_salary"} <= denied, denied


def test_init_on_defog_ewallet_denies_its_secrets(shared_corpora: Path, tmp_path: Path) -> None:
    """A third-party schema nobody here wrote: its password hashes and API keys are denied by
    name, its UUID transaction references by content, and none of their values is written."""
    db = shared_corpora / "legit" / "defog" / "sqlite" / "ewallet.db"
    result = CliRunner().invoke(app, ["init", "--source", "ewallet", "--url", f"sqlite:///{db}", "-m", str(tmp_path),
                                      "--json", "--profile-values", "20"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    denied = {d["object"]: d["kind"] for d in summary["denied"]}
    assert denied["user_setting_snapshot.password_hash"] == "secret"
    assert denied["user_setting_snapshot.api_key"] == "secret"
    assert {"users.email", "users.phone_number", "wallet_transactions_daily.ip_address"} <= set(denied)
    text = (tmp_path / "ewallet.yaml").read_text(encoding="utf-8")
    with sqlite3.connect(db) as c:
        stored = [v for (v,) in c.execute("SELECT password_hash FROM user_setting_snapshot UNION "
                                          "SELECT api_key FROM user_setting_snapshot UNION SELECT email FROM users")]
    assert stored and not any(str(v) in text for v in stored if v)
    # values were proposed only where they are codes, never for keys or denied columns
    proposed = set(summary["values_proposed"])
    assert proposed and not proposed & set(denied)
    assert not any(name.endswith(("_id", ".id")) for name in proposed)


def test_profiling_the_demo_never_touches_a_described_column(demo_env: dict[str, str], demo_capabilities: Any,
                                                            tmp_path: Path) -> None:
    """The bundled manifests are written by people: ``--profile-values`` proposes nothing for
    columns they described (``project_name`` once got values and ``draft: true``)."""
    import shutil

    from conftest import REPO_ROOT

    caps = tmp_path / "caps"
    shutil.copytree(REPO_ROOT / "capabilities", caps)
    result = CliRunner().invoke(app, ["sync", "-m", str(caps), "--check", "--json", "--profile-values", "50"], env=demo_env)
    assert result.exit_code in (0, 1), result.output
    described = {f"{m.source}:{t.name}.{c.name}" for m in demo_capabilities for t in m.tables for c in t.columns
                 if c.description and not c.draft}
    proposed = {f"{s['source']}:{c['object']}" for s in json.loads(result.stdout)["sources"]
                for c in s["changed"] + s["filled"] if c.get("attribute") == "values"}
    assert described and not proposed & described


@pytest.mark.parametrize("seed", ["", "tables:\n", "tables: []\n", "tables: []   # filled by sync\nexamples: []\n"])
def test_sync_fills_a_manifest_that_declares_no_tables(seed: str, tmp_path: Path) -> None:
    """A seed without tables (absent, empty or ``[]``) is synced, not a crash."""
    db = tmp_path / "seed.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, label TEXT)")
    path = tmp_path / "seed.yaml"
    path.write_text(f"source: seed\nkind: sql\nurl: sqlite:///{db}\n{seed}", encoding="utf-8")
    written = CliRunner().invoke(app, ["sync", "-m", str(path), "--write"])
    assert written.exit_code == 0, written.output
    manifest, _ = load_manifest(path)
    assert [c.name for c in manifest.table("t").columns] == ["id", "label"]
    assert CliRunner().invoke(app, ["sync", "-m", str(path), "--check"]).exit_code == 0
