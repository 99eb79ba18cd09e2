"""How long ``check_sql`` takes next to a bare ``sqlglot.parse_one``, over the legit corpora.

Every accepted query is timed in interleaved rounds (per round: parse, then check, query
after query, so machine noise falls on both alike); a query's time is its fastest over the
rounds — on a shared machine one preemption (a 10 ms time slice) turns a 300 µs call into a
30× outlier, so the median of a few rounds measures the load, the minimum the code — and its
ratio is check ÷ parse.

Each round visits the queries in a fresh random order (seeded: ``--seed``). In a fixed order
every round makes the same allocations, so the garbage collector's young-generation pass
(~80–100 µs here, started every 700 allocations) falls on the same few queries round after
round, and their fastest time still includes it: with ``--order fixed``, the order the bench
used before, a 150 µs check measured 216 µs in all eleven rounds, and which queries are hit
changes with anything that shifts the allocation count. Shuffled, a pass lands on a query in
some rounds only, and the minimum drops it like any other interruption. The collector stays
on: what it costs is spread over the allocations of every query, as in a real process.

The default is 21 rounds (about a minute). The p99 is the 49th-highest of ~4,900 ratios, each
of two minima: with few rounds, a query whose minimum still holds an interruption is as
likely to land there as one that is slow, and five rounds put it 0.3–0.4 higher than 21. Every timed check is a full one: remembered checks (``memo.py``) are
forgotten before each (outside the timer), or every round after the first would time a
look-up. Printed per corpus and overall: queries accepted /
rejected (with the commonest codes), the median times, and the p50 / p90 / p99 / max of the
per-query ratios. Every column is resolved by sqlglot's ``qualify_columns`` (the resolver that
copied it for speed was removed: under 1 ms a check against tens to hundreds of ms a question,
``docs/security.md``).
Manifests are built permissively from each corpus's schema (``bench/corpora.py``:
``manifest_from_columns``). Figures only; nothing is asserted.

Run: ``python bench/sandbox.py [--rounds 21]``
"""

from __future__ import annotations

import argparse
import collections
import random
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
from structq.safety.sql import memo  # noqa: E402

from figures import percentile


def _time(fn, *args, **kw) -> float:
    memo.clear()
    start = time.perf_counter()
    try:
        fn(*args, **kw)
    except (SandboxViolation, PlanError, sqlglot.errors.ParseError):
        pass
    return time.perf_counter() - start


def _row(label: str, n: int, accepted: int, rejected: int, check: list[float], parse: list[float],
         ratios: list[float], top: str) -> str:
    mc = statistics.median(check) * 1e6 if check else 0.0
    mp = statistics.median(parse) * 1e6 if parse else 0.0
    p = [percentile(ratios, q, empty=0.0) for q in (50, 90, 99)]
    return (f"{label:<18} {n:>7} {accepted:>8} {rejected:>8} {mc:>8.0f} {mp:>8.0f} "
            f"{p[0]:>5.2f}× {p[1]:>5.2f}× {p[2]:>5.2f}× {max(ratios, default=0):>5.2f}×  {top}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="rounds per query, the fastest kept (default 21)")
    parser.add_argument("--order", choices=("shuffled", "fixed"), default="shuffled",
                        help="visit the queries in a new random order each round (default), or always in corpus order")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffled orders")
    args = parser.parse_args()
    rounds = args.rounds
    shuffle = random.Random(args.seed).shuffle if args.order == "shuffled" else (lambda order: None)
    if not LEGIT.is_dir():
        print(f"corpora not found at {LEGIT}")
        return
    warnings.simplefilter("ignore")
    every_check: list[float] = []
    every_parse: list[float] = []
    every_ratio: list[float] = []
    totals = collections.Counter()
    print(f"fastest of {rounds} interleaved rounds per query, {args.order} order; ratio = check_sql ÷ parse_one, per query")
    print(f"{'corpus':<18} {'queries':>7} {'accepted':>8} {'rejected':>8} {'check µs':>8} {'parse µs':>8} "
          f"{'p50':>6} {'p90':>6} {'p99':>6} {'max':>6}  top codes")
    for label, manifests, queries in all_corpora():
        codes: collections.Counter[str] = collections.Counter()
        chosen = []
        for query in queries:
            manifest = manifests.get(query.db)
            if manifest is None:
                codes["no_schema"] += 1
                continue
            try:
                check_sql(query.sql, manifest)
            except SandboxViolation as exc:
                codes[exc.code] += 1
                continue
            chosen.append((query, manifest))
        checks: list[list[float]] = [[] for _ in chosen]
        parses: list[list[float]] = [[] for _ in chosen]
        order = list(range(len(chosen)))
        for _ in range(rounds):
            shuffle(order)
            for i in order:
                query, manifest = chosen[i]
                parses[i].append(_time(sqlglot.parse_one, query.sql, read=query.dialect))
                checks[i].append(_time(check_sql, query.sql, manifest))
        check = [min(t) for t in checks]
        parse = [min(t) for t in parses]
        ratios = [c / p for c, p in zip(check, parse)]
        every_check += check
        every_parse += parse
        every_ratio += ratios
        totals["accepted"] += len(chosen)
        totals["rejected"] += sum(codes.values())
        top = ", ".join(f"{c}×{n}" for c, n in codes.most_common(4))
        print(_row(label, len(queries), len(chosen), sum(codes.values()), check, parse, ratios, top))
    print(_row("overall", totals["accepted"] + totals["rejected"], totals["accepted"], totals["rejected"],
               every_check, every_parse, every_ratio, ""))


if __name__ == "__main__":
    main()
