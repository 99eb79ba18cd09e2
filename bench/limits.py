"""What the resource limits cost at their edges, on SQLite in this process.

Prints three tables (figures only; nothing is asserted):

1. ``REGEXP '(a+)+$'`` over ``'a' * n + '!'``: Python's ``re`` (what SQLAlchemy registers) against
   RE2 (what the executor registers), per n. ``re`` doubles per character; RE2 stays flat.
   ``re`` stops being measured once one match passes ``RE_CUTOFF_S``.
2. SQLite ``LIKE`` with the adversarial pattern ``'%aaa…ab%'`` of the sandbox's longest length
   (``MAX_PATTERN_CHARS``) over texts of growing size: the longest constant string a query may
   build (``MAX_CONSTANT_CHARS``), then data values grown by ``MAX_GROWTH``.
3. The same text against patterns of growing length, to show why the cap is on both sides.

Run: ``python bench/limits.py``
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable

from structq.executors.sql import limit_sqlite
from structq.safety.sql.rules.growth import MAX_CONSTANT_CHARS, MAX_GROWTH
from structq.safety.query import MAX_PATTERN_CHARS

RE_CUTOFF_S = 2.0


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def python_re(connection: sqlite3.Connection) -> None:
    connection.create_function("regexp", 2, lambda p, s: int(re.search(p, s) is not None), deterministic=True)


def regexp_table() -> None:
    print("REGEXP '(a+)+$' over 'a' * n + '!'")
    print(f"  {'n':>6}  {'Python re':>10}  {'RE2':>10}")
    backtracking, linear = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    python_re(backtracking)
    limit_sqlite(linear)
    query = "SELECT ? REGEXP '(a+)+$'"
    give_up = False
    for n in (16, 18, 20, 22, 24, 1_000, 1_000_000):
        text = "a" * n + "!"
        slow = "—" if give_up or n > 30 else f"{timed(lambda: backtracking.execute(query, (text,)).fetchall()):.3f} s"
        give_up = give_up or (slow != "—" and float(slow.split()[0]) > RE_CUTOFF_S)
        fast = timed(lambda: linear.execute(query, (text,)).fetchall())
        print(f"  {n:>6}  {slow:>10}  {fast:>8.4f} s")


def like_time(connection: sqlite3.Connection, size: int, pattern_chars: int) -> float:
    pattern = "%" + "a" * (pattern_chars - 2) + "b%"
    return timed(lambda: connection.execute(
        "SELECT replace(printf('%.*c', ?, ' '), ' ', 'a') LIKE ?", (size, pattern)).fetchall())


def like_tables() -> None:
    connection = sqlite3.connect(":memory:")
    limit_sqlite(connection)
    print(f"\nSQLite LIKE, adversarial {MAX_PATTERN_CHARS}-character pattern, by text size")
    for label, size in (("longest constant string", MAX_CONSTANT_CHARS),
                        (f"10 kB value × MAX_GROWTH ({MAX_GROWTH})", 10_000 * MAX_GROWTH),
                        (f"100 kB value × MAX_GROWTH ({MAX_GROWTH})", 100_000 * MAX_GROWTH),
                        ("9 MB (under SQLite's 10 MB value limit)", 9_000_000)):
        print(f"  {label:<36} {size:>12,} chars  {like_time(connection, size, MAX_PATTERN_CHARS):8.3f} s")
    print("\nSQLite LIKE over 1,000,000 characters, by pattern length")
    for chars in (10, MAX_PATTERN_CHARS, 4 * MAX_PATTERN_CHARS + 1):
        try:
            figure = f"{like_time(connection, 1_000_000, chars):8.3f} s"
        except sqlite3.OperationalError as error:  # SQLITE_LIMIT_LIKE_PATTERN_LENGTH, set by limit_sqlite
            figure = f"refused: {error}"
        print(f"  {chars:>5} chars  {figure}")


if __name__ == "__main__":
    regexp_table()
    like_tables()
