"""The first ten minutes on third-party databases: ``structq init`` + ``check --connect`` + ``sync --check``.

For every database of ``../shared/corpora`` — the 20 spider_de and 11 defog SQLite files, and
the 11 defog dumps loaded into PostgreSQL and MariaDB (started like the test-suite does;
skipped with a message when a server cannot run here) — it drafts a manifest with
``--profile-values 20``, checks it against the live database and syncs it, and prints one line
per database: tables, columns, foreign keys written as references vs. declared in the database,
columns denied (secret/personal), columns with proposed values, seconds, and whether all three
steps passed. It also verifies that no stored value of a denied column appears in the written
file. Figures only; the last line is the total.

    python bench/onboarding.py [--only sqlite|postgres|mariadb] [--limit N]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from typer.testing import CliRunner  # noqa: E402

from structq.cli import app  # noqa: E402

CORPORA = REPO.parent / "shared" / "corpora" / "legit"


@dataclass
class Database:
    engine: str
    name: str
    url: str
    schema: str | None = None


@dataclass
class Outcome:
    db: Database
    ok: bool = False
    error: str = ""
    tables: int = 0
    columns: int = 0
    references: int = 0
    foreign_keys: int = 0
    denied: dict[str, str] = field(default_factory=dict)
    proposed: int = 0
    leaked: list[str] = field(default_factory=list)
    seconds: float = 0.0


def sqlite_databases() -> Iterator[Database]:
    for path in sorted((CORPORA / "spider_de" / "database").rglob("*.sqlite")):
        yield Database("sqlite", f"spider_de/{path.stem}", f"sqlite:///{path}")
    for path in sorted((CORPORA / "defog" / "sqlite").glob("*.db")):
        yield Database("sqlite", f"defog/{path.stem}", f"sqlite:///{path}")


def _dumps(suffix: str) -> Iterator[tuple[str, str]]:
    for path in sorted((CORPORA / "defog" / "dumps").glob(f"*{suffix}.sql")):
        stem = path.stem.removesuffix(suffix)
        if "_" in stem and stem.rsplit("_", 1)[1] in ("mysql", "sqlite"):
            continue
        yield stem, path.read_text(encoding="utf-8")


def server_databases(engine: str, server: Any) -> Iterator[Database]:
    """Each defog dump loaded into a database of its own on ``server``."""
    from sqlalchemy import create_engine, text

    from corpora import ddl_schema_name, split_statements

    for name, ddl in _dumps("" if engine == "postgres" else "_mysql"):
        url = server.create_database(f"onb_{name}")
        sql_engine = create_engine(url)
        try:
            if engine == "postgres":
                raw = sql_engine.raw_connection()
                try:
                    raw.cursor().execute(ddl)
                    raw.commit()
                finally:
                    raw.close()
            else:
                with sql_engine.begin() as connection:
                    for statement in split_statements(ddl):
                        connection.execute(text(statement.replace(":", r"\:")))
        finally:
            sql_engine.dispose()
        schema = ddl_schema_name(ddl, "postgres") if engine == "postgres" else None
        yield Database(engine, f"defog/{name}", url, schema)


def _declared_foreign_keys(db: Database) -> int:
    from sqlalchemy import create_engine, inspect

    engine = create_engine(db.url)
    try:
        inspector = inspect(engine)
        return sum(len(fks) for fks in inspector.get_multi_foreign_keys(schema=db.schema).values())
    finally:
        engine.dispose()


def _leaks(db: Database, text: str, denied: list[str]) -> list[str]:
    """Stored values (4+ characters) of denied columns that appear in the written file."""
    from sqlalchemy import column, create_engine, select, table

    engine = create_engine(db.url)
    found = []
    try:
        with engine.connect() as connection:
            for name in denied:
                t, c = name.split(".", 1)
                query = select(column(c)).select_from(table(t, schema=db.schema)).where(column(c).is_not(None)).limit(50)
                for (value,) in connection.execute(query):
                    if len(str(value)) >= 4 and str(value) in text:
                        found.append(f"{name}={str(value)[:12]}…")
    finally:
        engine.dispose()
    return found


def onboard(db: Database, folder: Path) -> Outcome:
    runner = CliRunner()
    outcome = Outcome(db)
    source = "db_" + "".join(ch if ch.isalnum() else "_" for ch in db.name.split("/", 1)[1])[:40]
    caps = folder / db.engine / source
    args = ["init", "--source", source, "--url", db.url, "-m", str(caps), "--json", "--profile-values", "20"]
    if db.schema:
        args += ["--schema", db.schema]
    start = time.perf_counter()
    result = runner.invoke(app, args)
    if result.exit_code != 0:
        outcome.error = "init: " + (result.stderr.strip().splitlines() or ["?"])[0]
        return outcome
    summary = json.loads(result.stdout)
    os.environ[summary["url_variable"]] = db.url
    checked = runner.invoke(app, ["check", "-m", str(caps), "--connect"])
    synced = runner.invoke(app, ["sync", "-m", str(caps), "--check"])
    outcome.seconds = time.perf_counter() - start
    outcome.tables, outcome.columns, outcome.references = summary["objects"], summary["members"], summary["references"]
    outcome.denied = {d["object"]: d["reason"] for d in summary["denied"]}
    outcome.proposed = len(summary["values_proposed"])
    outcome.foreign_keys = _declared_foreign_keys(db)
    text = (caps / f"{source}.yaml").read_text(encoding="utf-8")
    outcome.leaked = _leaks(db, text, list(outcome.denied))
    if checked.exit_code != 0:
        outcome.error = "check --connect: " + checked.output.strip().splitlines()[-1]
    elif synced.exit_code != 0:
        outcome.error = "sync --check: " + synced.output.strip().splitlines()[0]
    elif outcome.leaked:
        outcome.error = "denied values in the file: " + ", ".join(outcome.leaked[:3])
    outcome.ok = not outcome.error
    return outcome


#: Tally labels by a word of the reason, in order (name and content reasons share a label).
_LABELS = (("password", "password/hash"), ("hex digest", "hash"), ("token", "token/key"), ("API key", "token/key"),
           ("UUID", "UUID key"), ("identity", "ID number"), ("ID number", "ID number"), ("pay", "salary"),
           ("phone", "phone"), ("email", "email"), ("postal", "address"), ("card", "bank/card"), ("IP", "IP address"),
           ("birth", "date of birth"))


def _why(reason: str) -> str:
    """``the name 'x' says it holds a phone number`` → ``phone (name)``, for the tally."""
    label = next((label for word, label in _LABELS if word in reason), reason)
    return f"{label} ({'name' if reason.startswith('the name') else 'content'})"


def report(outcomes: list[Outcome]) -> None:
    print(f"{'database':<42} {'tables':>6} {'cols':>5} {'FK w/db':>8} {'denied':>6} {'values':>6} {'s':>6}  result")
    for o in outcomes:
        fks = f"{o.references}/{o.foreign_keys}"
        print(f"{o.db.engine + ':' + o.db.name:<42} {o.tables:>6} {o.columns:>5} {fks:>8} {len(o.denied):>6} "
              f"{o.proposed:>6} {o.seconds:>6.2f}  {'ok' if o.ok else 'FAIL ' + o.error}")
    passed = sum(o.ok for o in outcomes)
    why = collections.Counter(_why(r) for o in outcomes for r in o.denied.values())
    print(f"\n{passed}/{len(outcomes)} databases passed init + check --connect + sync --check; "
          f"{sum(o.tables for o in outcomes)} tables, {sum(o.columns for o in outcomes)} columns, "
          f"{sum(o.references for o in outcomes)} references of {sum(o.foreign_keys for o in outcomes)} foreign keys, "
          f"{sum(len(o.denied) for o in outcomes)} columns denied, {sum(o.proposed for o in outcomes)} with values; "
          f"{sum(o.seconds for o in outcomes):.1f} s in all; denied values found in files: "
          f"{sum(len(o.leaked) for o in outcomes)}")
    print("denied because: " + ", ".join(f"{what} {n}" for what, n in why.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["sqlite", "postgres", "mariadb"])
    parser.add_argument("--limit", type=int, default=0, help="at most N databases per backend (sqlite, postgres, mariadb)")
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        sources: list[tuple[str, Any]] = []
        if args.only in (None, "sqlite"):
            sources.append(("sqlite", lambda: sqlite_databases()))
        for engine in ("postgres", "mariadb"):
            if args.only in (None, engine):
                sources.append((engine, engine))
        for engine, make in sources:
            if engine != "sqlite":
                from servers import MariaDBServer, PostgresServer, ServerUnavailable

                try:
                    server = stack.enter_context((PostgresServer if engine == "postgres" else MariaDBServer).start())
                except ServerUnavailable as exc:
                    print(f"{engine}: skipped ({exc})")
                    continue
                databases: Iterator[Database] = server_databases(engine, server)
            else:
                databases = make()
            for i, db in enumerate(databases):
                if args.limit and i >= args.limit:
                    break
                outcomes.append(onboard(db, folder))
                o = outcomes[-1]
                print(f"  {db.engine}:{db.name}: {'ok' if o.ok else o.error}", file=sys.stderr)
    report(outcomes)


if __name__ == "__main__":
    main()
