"""The period grammar's cost: ``find_periods`` over question-shaped texts.

Texts: every question of ``capabilities/eval.yaml`` and of the bundled manifests' verified
examples, plus Chinese and English period phrases inside filler. Figures: periods found, time
per text p50/p95/max (wall clock and this thread's CPU time, which does not count waiting for a
core and so stays meaningful on a busy machine).

    python bench/periods.py [--repeat N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from pathlib import Path

import yaml

from structq.periods import find_periods

ROOT = Path(__file__).resolve().parent.parent
TODAY = dt.date(2026, 11, 30)

PHRASES = [
    "2026年3月", "上个月", "今年前三季度", "去年第三季度", "三月第一周", "最近7天", "从2026年3月到5月", "上周五",
    "2025年11月", "本季度", "last month", "Q3 2025", "the first week of March", "past 30 days",
    "between March 2026 and May 2026", "yesterday", "since March 2026", "the second half of last year",
]
FILLERS = ["各部门绩效为A的人数是多少？", "华东区的销售额", " what were total sales for product X", "写了哪些周报"]


def texts() -> list[str]:
    out: list[str] = []
    eval_file = ROOT / "capabilities" / "eval.yaml"
    if eval_file.is_file():
        out += [item["question"] for item in yaml.safe_load(eval_file.read_text(encoding="utf-8"))["questions"]]
    for path in sorted((ROOT / "capabilities").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            out += [example["question"] for example in data.get("examples") or []]
    out += [f"{phrase}{filler}" for phrase in PHRASES for filler in FILLERS]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs over the whole set (default 20)")
    args = parser.parse_args()
    items = texts()
    wall: list[float] = []
    cpu: list[float] = []
    found = 0
    for _ in range(args.repeat):
        found = 0
        for text in items:
            w, c = time.perf_counter(), time.thread_time()
            found += len(find_periods(text, TODAY))
            cpu.append((time.thread_time() - c) * 1000)
            wall.append((time.perf_counter() - w) * 1000)
    print(f"texts: {len(items)} × {args.repeat} runs; periods found per run: {found}")
    for name, values in (("wall", wall), ("cpu", cpu)):
        q = statistics.quantiles(values, n=100)
        print(f"{name:4} ms per text: p50 {q[49]:.3f}  p95 {q[94]:.3f}  max {max(values):.3f}")


if __name__ == "__main__":
    main()
