"""Writing the generated rows: SQLite tables, a JSONL file, and files that appear atomically.

Files are built under temporary names in the target directory and renamed into place only
when everything succeeded, so an interrupted or failed build leaves either the previous demo
or nothing — never a half-written database.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from .schema import Table

#: ``progress(stage, done, total)``: called as each stage advances.
Progress = Callable[[str, int, int], None]

#: Rows inserted (and progress reported) per batch.
BATCH = 20_000


@contextmanager
def staged(*targets: Path) -> Iterator[list[Path]]:
    """Fresh temporary paths beside ``targets`` (nothing is created there yet); renamed onto
    the targets if the block succeeds, deleted if it fails."""
    temporaries = [target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp") for target in targets]
    try:
        yield list(temporaries)
        for temporary, target in zip(temporaries, targets, strict=True):
            os.replace(temporary, target)
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)


@contextmanager
def bulk_loading(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection tuned for one-off bulk loading of a fresh file (no journal, no syncs);
    committed and analysed on success."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode = OFF")
        connection.execute("PRAGMA synchronous = OFF")
        yield connection
        connection.execute("ANALYZE")
        connection.commit()
    finally:
        connection.close()


def write_table(
    connection: sqlite3.Connection,
    table: Table,
    rows: Iterable[tuple[object, ...]],
    progress: Progress,
    total: int | None = None,
) -> int:
    """Create ``table`` with its indexes and insert ``rows`` in batches; returns the row count.

    ``total`` (for progress) defaults to ``len(rows)``; pass it for a lazy iterable. Indexes
    are created after the rows are in, several times faster than maintaining them row by row.
    """
    if total is None:
        total = len(rows) if isinstance(rows, Sized) else 0
    create_table, *create_indexes = table.create_statements()
    connection.execute(create_table)
    insert = table.insert_statement()
    done = 0
    progress(table.name, done, total)
    iterator = iter(rows)
    while batch := list(islice(iterator, BATCH)):
        connection.executemany(insert, batch)
        done += len(batch)
        progress(table.name, done, max(total, done))
    for statement in create_indexes:
        connection.execute(statement)
    return done


def write_jsonl(path: Path, documents: Sequence[NamedTuple], stage: str, progress: Progress) -> int:
    """One JSON object per line, keys in field order, Chinese kept readable (UTF-8)."""
    total = len(documents)
    progress(stage, 0, total)
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for done, document in enumerate(documents, start=1):
            out.write(json.dumps(document._asdict(), ensure_ascii=False))
            out.write("\n")
            if done % BATCH == 0 or done == total:
                progress(stage, done, total)
    return total
