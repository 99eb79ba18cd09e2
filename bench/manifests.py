"""How long loading a large manifest takes, and whether it stays linear.

Generates manifests of 250, 500 and 1,000 tables (20 columns each, descriptions, a primary key
and one reference per table: about 23,000 YAML lines at 1,000) and prints, per size, the median
of interleaved rounds of ``CapabilitySet.from_path`` (parse, validate, cross-check) with the
loader as it is, with libyaml's composer without the memoised tag resolution
(``loader._Composer``; the previous composer), and with the cyclic garbage collector left
running during the load (the behaviour before that), plus milliseconds per table (flat = linear). Target: 1,000 tables in
≤ 0.5 s. Figures only; nothing is asserted.

Run: ``python bench/manifests.py [--rounds 3]``
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from structq.capabilities import CapabilitySet, loader  # noqa: E402

SIZES = (250, 500, 1000)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    paused_gc = loader._without_cyclic_gc
    print(f"CapabilitySet.from_path, median of {rounds} interleaved rounds")
    composer = loader._Composer
    print(f"{'tables':>7} {'YAML lines':>10} {'now':>8} {'ms/table':>9} {'plain composer':>15} {'GC running':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as folder:
        for size in SIZES:
            path = Path(folder) / f"big{size}"
            path.mkdir()
            text = manifest_text(size)
            (path / "big.yaml").write_text(text, encoding="utf-8")
            now, plain, old = [], [], []
            for _ in range(rounds):
                loader._without_cyclic_gc = paused_gc
                now.append(timed(lambda: CapabilitySet.from_path(path, env={})))
                loader._Composer = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                plain.append(timed(lambda: CapabilitySet.from_path(path, env={})))
                loader._Composer = composer
                loader._without_cyclic_gc = contextlib.nullcontext
                old.append(timed(lambda: CapabilitySet.from_path(path, env={})))
            loader._without_cyclic_gc = paused_gc
            new_s, plain_s, old_s = statistics.median(now), statistics.median(plain), statistics.median(old)
            print(f"{size:>7} {text.count(chr(10)):>10} {new_s:>7.2f}s {new_s / size * 1000:>8.2f} "
                  f"{plain_s:>14.2f}s {old_s:>10.2f}s {old_s / new_s:>5.1f}x")
    print("target: 1,000 tables ≤ 0.5 s")


if __name__ == "__main__":
    main()
