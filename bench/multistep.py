"""Two-step plans vs the equivalent single query, over the corpora's real databases.

For every declared foreign key (Spider-de SQLite files; the defog databases, whose keys are
declared in their PostgreSQL dumps) in both directions, a plan ``k: SELECT key FROM a`` →
``rows: … WHERE col IN (<k>)`` is run through structq next to the single query with the
subquery in ``<k>``'s place, in several shapes: IN, NOT IN, COUNT over IN / NOT IN, IN under
an OR, GROUP BY — each once with the keys and once with an empty key list. Both sides must
return the same multiset of rows. Counts per engine and kind are printed as a table (target:
every case equal); unequal cases are listed below it.

PostgreSQL and MariaDB run when their servers can be started like the test suite does
(``tests/servers.py``); the defog dumps are loaded into them.

    python bench/multistep.py [--no-servers] [--show 10]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import multistep_support as ms  # noqa: E402
from structq.capabilities import Manifest  # noqa: E402

EMPTY = " WHERE 1 = 0"
#: Which table row a case counts in.
KINDS = {"in": "FK pairs (IN)", "not_in": "NOT IN", "count_in": "COUNT", "count_not_in": "COUNT",
         "in_or": "IN under OR", "group_in": "GROUP BY"}


def cases(manifest_: Manifest, keys: list[ms.ForeignKey]) -> Iterator[tuple[str, ms.Case]]:
    for key in keys:
        for direction in key.directions():
            for shape in ms.SHAPES:
                yield KINDS[shape], ms.case(manifest_, direction, shape)
                yield "empty list", ms.case(manifest_, direction, shape, keys_where=EMPTY)


def measure(manifest_: Manifest, keys: list[ms.ForeignKey]) -> list[tuple[str, ms.Outcome]]:
    made = list(cases(manifest_, keys))
    outcomes = ms.run_cases(manifest_, lambda: (c for _, c in made))
    return [(kind, outcome) for (kind, _), outcome in zip(made, outcomes)]


def sqlite_sources() -> Iterator[tuple[str, Manifest, list[ms.ForeignKey]]]:
    for db, path in ms.spider_databases():
        keys = ms.sqlite_foreign_keys(db, path)
        if keys:
            yield "spider_de", ms.manifest(db, f"sqlite:///{path}", "sqlite", ms.sqlite_tables(path)), keys
    for db in ms.DEFOG_WITH_KEYS:
        path = ms.defog_sqlite(db)
        yield "defog", ms.manifest(db, f"sqlite:///{path}", "sqlite", ms.sqlite_tables(path)), ms.defog_foreign_keys(db)


def server_sources(stack: ExitStack) -> Iterator[tuple[str, str, Manifest, list[ms.ForeignKey]]]:
    from servers import MariaDBServer, PostgresServer, ServerUnavailable

    for label, server_class, load, dialect in (("PostgreSQL", PostgresServer, ms.load_postgres, "postgres"),
                                               ("MariaDB", MariaDBServer, ms.load_mariadb, "mysql")):
        try:
            server = stack.enter_context(server_class.start())
        except ServerUnavailable as exc:
            print(f"  {label} skipped: {str(exc).splitlines()[0]}")
            continue
        for db in ms.DEFOG_WITH_KEYS:
            url = load(server, db)
            yield label, "defog", ms.manifest(db, url, dialect, ms.server_tables(url)), ms.defog_foreign_keys(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-servers", action="store_true", help="SQLite only")
    parser.add_argument("--show", type=int, default=10, help="unequal cases to list")
    args = parser.parse_args()
    if not ms.SPIDER_DE.is_dir():
        sys.exit(f"corpora not found at {ms.SPIDER_DE.parent.parent}")
    started = time.perf_counter()
    counts: dict[tuple[str, str, str], collections.Counter[bool]] = collections.defaultdict(collections.Counter)
    keys_seen: dict[tuple[str, str], int] = collections.Counter()
    unequal: list[str] = []

    def record(engine: str, corpus: str, source: Manifest, keys: list[ms.ForeignKey]) -> None:
        keys_seen[(engine, corpus)] += len(keys)
        for kind, outcome in measure(source, keys):
            counts[(engine, corpus, kind)][outcome.equal] += 1
            if not outcome.equal:
                unequal.append(f"{engine} {source.source}: {outcome.label}: {outcome.detail}")

    for corpus, source, keys in sqlite_sources():
        record("SQLite", corpus, source, keys)
    if not args.no_servers:
        with ExitStack() as stack:
            for engine, corpus, source, keys in server_sources(stack):
                record(engine, corpus, source, keys)

    print("Two-step plan vs single query with a subquery (multiset of rows); target: all equal")
    print(f"{'backend':<11}{'corpus':<11}{'kind':<16}{'FKs':>5}{'cases':>7}{'equal':>7}{'unequal':>9}")
    kinds = [*dict.fromkeys(KINDS.values()), "empty list"]
    for engine, corpus in keys_seen:
        for kind in kinds:
            tally = counts[(engine, corpus, kind)]
            total = tally[True] + tally[False]
            print(f"{engine:<11}{corpus:<11}{kind:<16}{keys_seen[(engine, corpus)]:>5}{total:>7}"
                  f"{tally[True]:>7}{tally[False]:>9}")
    total = sum(sum(t.values()) for t in counts.values())
    equal = sum(t[True] for t in counts.values())
    print(f"all: {equal}/{total} equal in {time.perf_counter() - started:.1f} s")
    for line in unequal[: args.show]:
        print("  unequal:", line[:300])


if __name__ == "__main__":
    main()
