"""How long ``check_sql`` takes next to a bare ``sqlglot.parse_one``, over the legit corpora.

Prints, per corpus and overall: queries accepted / rejected (with the commonest codes), the
median ``check_sql`` time, the median ``parse_one`` time of the same queries, and their ratio
(the target is at most 3×). Manifests are built permissively from each corpus's schema
(``bench/corpora.py``: ``manifest_from_columns``). Figures only; nothing is asserted.

Run: ``python bench/sandbox.py``
"""

from __future__ import annotations

import collections
import statistics
import sys
import time
import warnings
from pathlib import Path

import sqlglot

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import LEGIT, all_corpora  # noqa: E402

from structq.errors import PlanError, SandboxViolation  # noqa: E402
from structq.safety import check_sql  # noqa: E402

REPEAT = 3


def _best(fn, *args, **kw) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        try:
            fn(*args, **kw)
        except (SandboxViolation, PlanError, sqlglot.errors.ParseError):
            pass
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    if not LEGIT.is_dir():
        print(f"corpora not found at {LEGIT}")
        return
    warnings.simplefilter("ignore")
    all_check: list[float] = []
    all_parse: list[float] = []
    totals = collections.Counter()
    print(f"{'corpus':<18} {'queries':>7} {'accepted':>8} {'rejected':>8} {'check µs':>9} {'parse µs':>9} {'ratio':>6}  top codes")
    for label, manifests, queries in all_corpora():
        codes: collections.Counter[str] = collections.Counter()
        check_times, parse_times = [], []
        accepted = 0
        for query in queries:
            manifest = manifests.get(query.db)
            if manifest is None:
                codes["no_schema"] += 1
                continue
            try:
                check_sql(query.sql, manifest)
                accepted += 1
            except SandboxViolation as exc:
                codes[exc.code] += 1
                continue
            check_times.append(_best(check_sql, query.sql, manifest))
            parse_times.append(_best(sqlglot.parse_one, query.sql, read=query.dialect))
        all_check += check_times
        all_parse += parse_times
        totals["accepted"] += accepted
        totals["rejected"] += sum(codes.values())
        mc = statistics.median(check_times) * 1e6 if check_times else 0.0
        mp = statistics.median(parse_times) * 1e6 if parse_times else 0.0
        top = ", ".join(f"{c}×{n}" for c, n in codes.most_common(4))
        print(f"{label:<18} {len(queries):>7} {accepted:>8} {sum(codes.values()):>8} {mc:>9.0f} {mp:>9.0f} "
              f"{(mc / mp if mp else 0):>5.2f}×  {top}")
    mc = statistics.median(all_check) * 1e6
    mp = statistics.median(all_parse) * 1e6
    ratios = sorted(c / p for c, p in zip(all_check, all_parse))
    print(f"\noverall: {totals['accepted']} accepted, {totals['rejected']} rejected")
    print(f"median check_sql {mc:.0f} µs, median parse_one {mp:.0f} µs, ratio of medians {mc / mp:.2f}× "
          f"(median per-query ratio {statistics.median(ratios):.2f}×; target ≤ 3×)")


if __name__ == "__main__":
    main()
