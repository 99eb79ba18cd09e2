"""How long ``structq sync`` takes on a large schema: 1,000 tables, 20,000 columns.

Prints, for SQLite and PostgreSQL (started like the test-suite does; skipped with a message when
it cannot run here): introspection, diff + merge of a manifest that declares one table (so 999
tables are added), and a second sync of the written manifest (nothing to do). Figures only.

    python bench/sync.py [--tables 1000] [--columns 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from structq.capabilities.loader import load_manifest_text  # noqa: E402
from structq.sync import diff_manifest, introspect, merge_text, plan_sync, write_sync  # noqa: E402

_TYPES = ("INTEGER", "VARCHAR(40)", "NUMERIC(10,2)", "DATE", "TIMESTAMP", "BOOLEAN", "REAL", "TEXT")


def ddl(tables: int, columns: int) -> list[str]:
    statements = []
    for t in range(tables):
        cols = ["id INTEGER PRIMARY KEY"]
        cols += [f"c{c:02d} {_TYPES[c % len(_TYPES)]}" for c in range(1, columns)]
        if t:
            cols[-1] = f"parent_id INTEGER REFERENCES t{t - 1:04d}(id)"
        statements.append(f"CREATE TABLE t{t:04d} ({', '.join(cols)})")
    return statements


def manifest_text(url: str) -> str:
    return (f"source: big\nkind: sql\nurl: {url}\ntables:\n  - name: t0000\n    description: the first table\n"
            "    columns:\n      - {name: id, type: integer, description: key}\n")


def timed(label: str, fn: Callable[[], object]) -> object:
    start = time.perf_counter()
    result = fn()
    print(f"  {label:<44} {time.perf_counter() - start:7.2f} s")
    return result


def measure(engine: str, url: str, folder: Path) -> None:
    print(f"{engine}:")
    path = folder / f"{engine}.yaml"
    path.write_text(manifest_text(url), encoding="utf-8")
    manifest, _ = load_manifest_text(path.read_text(), str(path))
    snapshot = timed("introspect (get_multi_*)", lambda: introspect(manifest))
    members = sum(len(o.members) for o in snapshot.objects)  # type: ignore[attr-defined]
    print(f"  {'':<44} ({len(snapshot.objects)} tables, {members} columns)")  # type: ignore[attr-defined]
    found = timed("diff", lambda: diff_manifest(manifest, snapshot))  # type: ignore[arg-type]
    text = timed("merge into YAML text", lambda: merge_text(path.read_text(), manifest, found, str(path)))  # type: ignore[arg-type]
    print(f"  {'':<44} ({len(str(text).splitlines())} lines written)")
    plan = timed("full sync --write (introspect+merge+check+write)", lambda: write_sync(plan_sync(path)))
    assert plan.written  # type: ignore[attr-defined]
    timed("second sync (in sync, nothing written)", lambda: plan_sync(path))


@contextmanager
def postgres() -> Iterator[str | None]:
    try:
        from servers import PostgresServer, ServerUnavailable
    except ImportError as exc:
        print(f"postgresql: skipped ({exc})")
        yield None
        return
    try:
        server = PostgresServer.start()
    except ServerUnavailable as exc:
        print(f"postgresql: skipped ({exc})")
        yield None
        return
    with server:
        yield server.create_database("bench_sync")


def create(url: str, statements: list[str]) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--columns", type=int, default=20)
    args = parser.parse_args()
    statements = ddl(args.tables, args.columns)
    print(f"schema: {args.tables} tables x {args.columns} columns = {args.tables * args.columns} columns")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = folder / "big.db"
        create(f"sqlite:///{db}", statements)
        measure("sqlite", f"sqlite:///{db}", folder)
        with postgres() as url:
            if url is not None:
                create(url, statements)
                measure("postgresql", url, folder)


if __name__ == "__main__":
    main()
