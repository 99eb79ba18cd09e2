"""List every function the legitimate corpora call, per dialect.

The sandbox's allowlist (``structq/safety/functions.py``) was derived from this inventory:
run ``python bench/function_inventory.py`` to see which expression classes and anonymous
names analysts' gold queries use, and which of them the allowlist does not cover yet.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import sqlglot
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import all_corpora  # noqa: E402

from structq.safety.functions import is_allowed  # noqa: E402


def main() -> None:
    used: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    missing: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for _label, _manifests, queries in all_corpora():
        for query in queries:
            try:
                tree = sqlglot.parse_one(query.sql, read=query.dialect)
            except sqlglot.errors.ParseError:
                continue
            for node in tree.find_all(exp.Func):
                name = node.name.lower() if isinstance(node, exp.Anonymous) else f"exp.{type(node).__name__}"
                used[query.dialect][name] += 1
                if not is_allowed(node, query.dialect, ()):
                    missing[query.dialect][name] += 1
    for dialect, counter in sorted(used.items()):
        print(f"== {dialect}: {len(counter)} functions")
        print("  ", ", ".join(f"{name}×{n}" for name, n in counter.most_common()))
        if missing[dialect]:
            print("   not allowed:", ", ".join(f"{name}×{n}" for name, n in missing[dialect].most_common()))


if __name__ == "__main__":
    main()
