"""How long loading a large manifest takes, and whether it stays linear.

Generates manifests of 250, 500, 1,000 and 2,000 tables (20 columns each, descriptions, a
primary key and one reference per table: about 23,000 YAML lines at 1,000) and prints, per
size, the median of interleaved rounds of ``CapabilitySet.from_path`` (parse, validate,
cross-check) in five ways:

- ``cached``: as a command finds it when an earlier command loaded the same text (the data
  read back from ``manifest_cache``, positions deferred);
- ``composed``: the first load of that text (composed, positions deferred);
- ``survivors young``: that, with what the load kept left in the collector's young
  generation when it resumes (the path before ``loader._age_survivors``: the next
  allocation rescans all of it);
- ``positions up front``: the previous path, positions recorded while loading;
- ``+ GC running``: that, with the cyclic garbage collector running during the load (the
  path before that: the issue's 2.1-2.3 s);

plus milliseconds per table of the first two (flat = linear). Target: 1,000 tables in
≤ 0.5 s, linear.

Then, per size, what the first SQL check on a freshly loaded manifest costs: ``first check``
derives what the sandbox reads from the manifest (``safety/sql/schema.py``: once per manifest
object), ``next check`` is a check of another query on the same object, and ``full-path
schema`` the ``MappingSchema`` only ``qualify_columns``' full path reads, built on its first
use. (Before, the first check also built that schema, with a dialect and a generator made per
name: 0.3 ms per table, 295 ms at 1,000 tables; now 0.05–0.07 ms per table.)

Last, a search check (a two-filter ``bool`` query, the default ``_source``) on one index of
10 to 5,000 declared fields, the fastest of 200: what the check reads from the index is
derived once per index object (``safety/dsl/_context.IndexFacts``), so what still grows is the
``_source`` list of every readable field the rewrite writes. (Derived on every check before:
2.1 ms at 1,000 fields, 11.5 ms at 5,000; now 0.26 and 1.2.) Figures only; nothing is
asserted.

Run: ``python bench/manifests.py [--rounds 3] [--sizes 250,500,1000,2000]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from structq.capabilities import CapabilitySet, loader  # noqa: E402
from structq.capabilities import load_manifest_text  # noqa: E402
from structq.safety import check_dsl, check_sql  # noqa: E402
from structq.safety.sql import memo  # noqa: E402
from structq.safety.sql.schema import derived  # noqa: E402

SIZES = (250, 500, 1000, 2000)
COLUMNS = 20


def manifest_text(tables: int, columns: int = COLUMNS) -> str:
    lines = ["source: big", "kind: sql", "url: sqlite:///big.db", "tables:"]
    for t in range(tables):
        lines += [f"  - name: t{t}", f"    description: table number {t}", "    columns:",
                  f"      - {{name: id, type: integer, primary_key: true, description: key of t{t}}}"]
        for k in range(1, columns):
            reference = f", references: t{t - 1}.id" if k == 1 and t else ""
            lines.append(f"      - {{name: c{k}, type: text, description: column {k} of t{t}{reference}}}")
    return "\n".join(lines) + "\n"


def timed(load: Callable[[], object]) -> float:
    started = time.perf_counter()
    load()
    return time.perf_counter() - started


@contextlib.contextmanager
def way(name: str, cache_dir: Path) -> Iterator[None]:
    """Load as ``name`` says: from the cache, composed, or along the previous paths."""
    saved = dict(os.environ), loader._read, loader._without_cyclic_gc, loader._age_survivors
    os.environ["STRUCTQ_CACHE_DIR"] = str(cache_dir)
    os.environ["STRUCTQ_CACHE"] = "1" if name == "cached" else "0"
    if name in ("positions up front", "+ GC running"):
        loader._read = loader._parse_yaml  # composed once, positions recorded with the data
    if name == "survivors young":
        loader._age_survivors = lambda: None
    if name == "+ GC running":
        loader._without_cyclic_gc = contextlib.nullcontext
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        loader._read, loader._without_cyclic_gc, loader._age_survivors = saved[1:]


WAYS = ("cached", "composed", "survivors young", "positions up front", "+ GC running")
CHECKS = ("first check", "next check", "full-path schema")


def checks_after_load(path: Path, cache: Path) -> dict[str, float]:
    """Seconds of each of ``CHECKS`` on a manifest loaded (from the cache) just before."""
    with way("cached", cache):
        manifest = CapabilitySet.from_path(path, env={}).get("big")
    memo.clear()
    return {
        "first check": timed(lambda: check_sql("SELECT c2 FROM t7 WHERE id = 3", manifest)),
        "next check": timed(lambda: check_sql("SELECT c3 FROM t8 WHERE id = 4", manifest)),
        "full-path schema": timed(lambda: derived(manifest).schema),
    }


FIELDS = (10, 100, 1000, 5000)


def search_check_us(fields: int, tries: int = 200) -> float:
    """Microseconds of the fastest of ``tries`` checks of one search body on an index of
    ``fields`` declared fields."""
    lines = ["source: docs", "kind: opensearch", "url: http://127.0.0.1:9200", "indices:",
             "  - name: reports", "    fields:"]
    lines += [f"      - {{name: field_{k}, type: keyword}}" for k in range(fields)]
    manifest, _ = load_manifest_text("\n".join(lines) + "\n", env={})
    body = {"query": {"bool": {"filter": [{"term": {"field_1": "x"}}, {"range": {"field_2": {"gte": "a"}}}]}}}
    return min(timed(lambda: check_dsl(body, manifest, "reports")) for _ in range(tries)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    print(f"CapabilitySet.from_path, median of {args.rounds} interleaved rounds (wall seconds)")
    print(f"{'tables':>7} {'YAML lines':>10} " + " ".join(f"{w:>18}" for w in WAYS)
          + f" {'ms/table cached':>16} {'ms/table composed':>18}")
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "cache"
        for size in sizes:
            path = Path(folder) / f"big{size}"
            path.mkdir()
            text = manifest_text(size)
            (path / "big.yaml").write_text(text, encoding="utf-8")
            with way("cached", cache):
                CapabilitySet.from_path(path, env={})  # the earlier command that filled the cache
            times: dict[str, list[float]] = {w: [] for w in WAYS}
            for _ in range(args.rounds):
                for name in WAYS:
                    with way(name, cache):
                        times[name].append(timed(lambda: CapabilitySet.from_path(path, env={})))
            median = {w: statistics.median(t) for w, t in times.items()}
            print(f"{size:>7} {text.count(chr(10)):>10} " + " ".join(f"{median[w]:>17.2f}s" for w in WAYS)
                  + f" {median['cached'] / size * 1000:>16.2f} {median['composed'] / size * 1000:>18.2f}")
        print("target: 1,000 tables ≤ 0.5 s, linear")
        print(f"\nthe first checks on a manifest just loaded, median of {args.rounds} rounds (milliseconds)")
        print(f"{'tables':>7} " + " ".join(f"{name:>18}" for name in CHECKS) + f" {'ms/table first':>16}")
        for size in sizes:
            rounds = [checks_after_load(Path(folder) / f"big{size}", cache) for _ in range(args.rounds)]
            median = {name: statistics.median(r[name] for r in rounds) * 1000 for name in CHECKS}
            print(f"{size:>7} " + " ".join(f"{median[name]:>16.1f}ms" for name in CHECKS)
                  + f" {median['first check'] / size:>16.3f}")
    print("\na search check on one index, fastest of 200 (microseconds)")
    print(f"{'fields':>7} {'check':>10} {'µs/field':>9}")
    for fields in FIELDS:
        took = search_check_us(fields)
        print(f"{fields:>7} {took:>8.0f}µs {took / fields:>9.3f}")


if __name__ == "__main__":
    main()
