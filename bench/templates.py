"""Slotted verified examples on their own question set: how many variants are answered right,
and that nothing is answered wrong.

The set (``bench/templates_questions.yaml``, apart from ``capabilities/eval.yaml``) holds
variants of the demo's slotted examples (other values, periods, wording) with the example and
the slot parameters each must get, paraphrases of the examples (other words, other order) with
the same, and questions that no template may answer: the strict matcher's ``must_not_match``
and the paraphrase matcher's ``near_misses`` (another metric, grouping, order, period, N, a
negation, an extra filter). Paraphrases are also counted before paraphrase matching (the
strict matcher alone). Each question
goes through ``TemplatePlans.outcome`` of an agent with no model over the demo company:

- correct: answered from the expected example with the expected parameters;
- wrong: answered from another example or with other values, or a must-not-match answered;
- abstained: not answered (the model would plan it; without one, "did you mean").

Matching time is per question, wall clock: "cold" the first time (an entity slot's value is
looked up in the database), "warm" asked again (lookups cached by the agent). Targets: 0
wrong, at least 80% of the variants correct, matching at most 5 ms a question; the paraphrase
threshold (``structq.templates.THRESHOLD``) is set from this run: no near-miss answered, and
the lowest score of a paraphrase answered right is printed. The ``held_out`` paraphrases,
written after the rules, are never tuned on: their recall is printed apart.

Run: ``python bench/templates.py [--dir DEMO_DIR] [--misses]`` (builds the demo once into
``--dir``, default ``$STRUCTQ_DEMO_DIR`` or the user data folder, as ``structq demo`` does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import yaml

QUESTIONS = Path(__file__).resolve().parent / "templates_questions.yaml"
CAPABILITIES = Path(__file__).resolve().parents[1] / "capabilities"


def _demo_dir(given: str | None) -> Path:
    from structq.config import default_demo_dir
    from structq.demo import build_demo

    folder = Path(given) if given else default_demo_dir()
    os.environ["STRUCTQ_DEMO_DIR"] = str(folder)
    if not (folder / "company.db").exists():
        print(f"building the demo company in {folder} …")
        build_demo(folder)
    return folder


def _timed(agent, question: str, today) -> tuple[object, float]:
    started = time.perf_counter()
    outcome = agent.templates.outcome(question, today)
    return outcome, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="the demo company's folder")
    parser.add_argument("--misses", action="store_true", help="list every abstention and wrong answer")
    args = parser.parse_args()
    _demo_dir(args.dir)

    from structq import Agent
    from structq.capabilities import CapabilitySet
    from structq.config import Settings

    data = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))
    today = data["today"]
    started = time.perf_counter()
    agent = Agent(CapabilitySet.from_path(CAPABILITIES), llm=None,
                  settings=Settings(cache_enabled=False, audit_enabled=False))
    load_ms = (time.perf_counter() - started) * 1000
    from structq.templates import THRESHOLD, TemplateSet

    strict = TemplateSet(agent.capabilities, paraphrases=False)  # before paraphrase matching
    counts = {"correct": 0, "wrong": 0, "abstained": 0}
    paraphrased = {"correct": 0, "wrong": 0, "abstained": 0, "before": 0}
    scores: list[float] = []
    refused = {"wrong": 0, "abstained": 0}
    cold: list[float] = []
    warm: list[float] = []
    misses: list[str] = []

    for item in data["variants"]:
        outcome, ms = _timed(agent, item["q"], today)
        cold.append(ms)
        warm.append(_timed(agent, item["q"], today)[1])
        match = outcome.match
        if match is None:
            counts["abstained"] += 1
            misses.append(f"abstained  {item['q']}  ({outcome.reason})")
            continue
        expected = item["params"]
        got = match.params
        if match.example.question == item["example"] and all(got.get(k) == v for k, v in expected.items()):
            counts["correct"] += 1
        else:
            counts["wrong"] += 1
            misses.append(f"WRONG      {item['q']}  → {match.example.question} {got}")
    held_out = {"correct": 0, "wrong": 0, "abstained": 0}
    for item in data["held_out"]:
        match = agent.templates.outcome(item["q"], today).match
        if match is None:
            held_out["abstained"] += 1
            misses.append(f"abstained  {item['q']}  (held out)")
        elif match.example.question == item["example"] and all(match.params.get(k) == v for k, v in item["params"].items()):
            held_out["correct"] += 1
        else:
            held_out["wrong"] += 1
            misses.append(f"WRONG      {item['q']}  → {match.example.question} {match.params}  (held out)")
    for item in data["paraphrases"]:
        outcome, ms = _timed(agent, item["q"], today)
        cold.append(ms)
        warm.append(_timed(agent, item["q"], today)[1])
        before = strict.match(item["q"], today, lambda column, text: agent.templates.lookup(column, text))
        paraphrased["before"] += before.match is not None
        match = outcome.match
        if match is None:
            paraphrased["abstained"] += 1
            misses.append(f"abstained  {item['q']}  ({outcome.reason})")
        elif match.example.question == item["example"] and all(match.params.get(k) == v for k, v in item["params"].items()):
            paraphrased["correct"] += 1
            scores.append(match.score)
        else:
            paraphrased["wrong"] += 1
            misses.append(f"WRONG      {item['q']}  → {match.example.question} {match.params}")
    for question in data["must_not_match"] + data["near_misses"]:
        outcome, ms = _timed(agent, question, today)
        cold.append(ms)
        warm.append(_timed(agent, question, today)[1])
        if outcome.match is None:
            refused["abstained"] += 1
        else:
            refused["wrong"] += 1
            misses.append(f"WRONG      {question}  → {outcome.match.example.question} {outcome.match.params}")
    agent.close()

    variants = len(data["variants"])
    print(f"templates: {len(agent.templates.set)} slotted examples (compiled with the manifests in {load_ms:.0f} ms)")
    print(f"variants:        {variants:3d}  answered {counts['correct'] + counts['wrong']:3d}  correct {counts['correct']:3d}"
          f"  wrong {counts['wrong']:3d}  abstained {counts['abstained']:3d}  ({counts['correct'] / variants:.0%} correct)")
    total = len(data["paraphrases"])
    print(f"paraphrases:     {total:3d}  answered {paraphrased['correct'] + paraphrased['wrong']:3d}"
          f"  correct {paraphrased['correct']:3d}  wrong {paraphrased['wrong']:3d}  abstained {paraphrased['abstained']:3d}"
          f"  (recall {paraphrased['correct'] / total:.0%}; before paraphrase matching {paraphrased['before']} answered)")
    kept = len(data["held_out"])
    print(f"held out:        {kept:3d}  answered {held_out['correct'] + held_out['wrong']:3d}"
          f"  correct {held_out['correct']:3d}  wrong {held_out['wrong']:3d}  abstained {held_out['abstained']:3d}"
          f"  (recall {held_out['correct'] / kept:.0%}; paraphrases never tuned on)")
    if scores:
        print(f"  scores of the paraphrases matched: min {min(scores):.2f}  (threshold {THRESHOLD})")
    refusals = len(data["must_not_match"]) + len(data["near_misses"])
    print(f"must not match:  {refusals:3d}  answered {refused['wrong']:3d} (wrong)"
          f"              abstained {refused['abstained']:3d}"
          f"  ({len(data['must_not_match'])} of the strict matcher's, {len(data['near_misses'])} near-misses)")
    print(f"wrong in all:    {counts['wrong'] + paraphrased['wrong'] + held_out['wrong'] + refused['wrong']}")
    for name, times in (("cold", cold), ("warm", warm)):
        ordered = sorted(times)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        print(f"matching ms/question ({name}): mean {statistics.mean(times):.2f}  p50 {statistics.median(times):.2f}"
              f"  p95 {p95:.2f}  max {max(times):.2f}")
    if args.misses:
        print("\n".join(misses) or "(no misses)")


if __name__ == "__main__":
    main()
