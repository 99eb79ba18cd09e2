"""The feedback loop: ratings callers give their answers become verified examples and
regression questions, reviewed by a person, without retraining anything.

``POST /v1/feedback`` (and the MCP tool ``feedback``) keeps a rating with a copy of what the
answer was (``service.answer_record``: question, day, user, plan, plan source, row counts).
A reviewer then runs ``structq feedback``:

- ``promote ID``: a good answer's plan becomes a verified example in the manifest of the
  source its first step reads, marked ``draft: true`` and ``feedback: ID``. The file is
  edited with ruamel.yaml's round trip, so its comments stay. A question with relative dates
  (上个月, last quarter) gets ``today:``/``period:``, so it keeps meaning the same period.
  A value the question names and a step compares a declared free-text column with
  (``customer = '星火'``) becomes a column slot (``:customer``), so the example answers the
  same question about another value; a value whose column or place is uncertain stays text.
- ``to-eval ID``: a bad answer's question goes into an eval file for the regression run;
  with ``--expect-sql`` it is a live item, else a commented-out block for the reviewer to
  complete (an eval file that has items keeps loading meanwhile).
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structq.errors import ConfigError

if TYPE_CHECKING:
    from structq.capabilities import CapabilitySet

    from .store import Store

__all__ = ["find_feedback", "example_from", "promote", "to_eval"]

#: Period kinds (``structq.periods``) → the ``period:`` of a relative-date example.
_PERIOD_OF_KIND = {"date": "day", "date_range": "day", "week": "week", "month": "month", "quarter": "quarter",
                   "year": "year"}


def find_feedback(store: "Store", wanted: str) -> dict[str, Any]:
    """The rating whose answer id is ``wanted`` or starts with it (one only)."""
    found = [f for f in store.list_feedback() if f["answer_id"].startswith(wanted)] if wanted else []
    if len(found) != 1:
        said = "no rating" if not found else f"{len(found)} ratings"
        raise ConfigError(f"{said} for answer id {wanted!r}", hint="structq feedback list shows the ids")
    return found[0]


def _relative_period(question: str, day: dt.date) -> str | None:
    """The unit of the relative period ``question`` names (its dates move with the day it is
    asked), or None when every date in it is absolute."""
    from structq.periods import find_periods

    here = find_periods(question, day)
    later = find_periods(question, day + dt.timedelta(days=400))
    for now, then in zip(here, later):
        if (now.first, now.last) != (then.first, then.last):
            return _PERIOD_OF_KIND.get(now.kind, "day")
    return None


def example_from(entry: dict[str, Any], capabilities: "CapabilitySet | None" = None) -> dict[str, Any]:
    """The verified example a rated answer makes (``ConfigError`` when it should not make one);
    with ``capabilities``, its question's values become slots where that is certain (``propose_slots``)."""
    if entry["rating"] != "up":
        raise ConfigError(f"answer {entry['answer_id']} was rated {entry['rating']}: only a good answer becomes an example",
                          hint="structq feedback to-eval ID makes a bad one a regression question")
    if entry["plan_source"] in ("verified", "template"):
        raise ConfigError(f"answer {entry['answer_id']} already came from a verified example", hint="nothing to promote")
    plan = entry["plan"]
    if plan.get("cannot_answer") is not None or not plan.get("steps"):
        raise ConfigError(f"answer {entry['answer_id']} declined the question: there is no plan to keep")
    example: dict[str, Any] = {"question": entry["question"]}
    if plan.get("reasoning"):
        example["reasoning"] = plan["reasoning"]
    example["steps"] = [{k: v for k, v in step.items() if v not in (None, "")} for step in plan["steps"]]
    if capabilities is not None:
        from structq.agent.slotting import propose_slots, slots_compile

        slots, steps = propose_slots(entry["question"], example["steps"], capabilities)
        slotted = {"question": entry["question"], "slots": slots, "steps": steps}
        if slots and slots_compile(slotted, capabilities, steps[0]["source"]):
            example = {"question": entry["question"], "slots": slots,
                       **{k: v for k, v in example.items() if k != "question"}, "steps": steps}
    if plan.get("answer_with"):
        example["answer_with"] = plan["answer_with"]
    day = dt.date.fromisoformat(entry["today"])
    period = _relative_period(entry["question"], day)
    if period is not None:
        example["today"] = day
        example["period"] = period
    example["draft"] = True
    example["feedback"] = entry["answer_id"]
    return example


def _round_trip() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long query or description
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _manifest_file(manifests: Path, source: str) -> Path:
    from structq.capabilities.loader import manifest_files

    yaml = _round_trip()
    for path in manifest_files(manifests):
        data = yaml.load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("source") == source:
            return path
    raise ConfigError(f"no manifest under {manifests} declares the source {source!r}",
                      hint="pass -m with the folder of the manifests the server uses")


def promote(entry: dict[str, Any], manifests: Path) -> tuple[Path, dict[str, Any]]:
    """Append the example of ``entry`` to the manifest of its first step's source; (file, example)."""
    from structq.capabilities import CapabilitySet, load_manifest_text

    example = example_from(entry, CapabilitySet.from_path(manifests))
    path = _manifest_file(manifests, example["steps"][0]["source"])
    yaml = _round_trip()
    text = path.read_text(encoding="utf-8")
    data = yaml.load(text)
    examples = data.setdefault("examples", [])
    if any(isinstance(e, dict) and e.get("question") == example["question"] for e in examples):
        raise ConfigError(f"{path.name} already has an example for {example['question']!r}",
                          hint="edit that example, or remove it first")
    examples.append(example)
    out = io.StringIO()
    yaml.dump(data, out)
    load_manifest_text(out.getvalue(), str(path))  # the manifest still loads, or nothing is written
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, example


def to_eval(entry: dict[str, Any], eval_file: Path, *, expect_sql: str | None = None,
            source: str | None = None) -> str:
    """Append ``entry``'s question to ``eval_file`` (created when missing); the text appended."""
    import yaml

    item: dict[str, Any] = {"question": entry["question"]}
    if entry.get("vars"):
        item["vars"] = entry["vars"]
    plan_sources = [s["source"] for s in entry["plan"].get("steps", [])]
    if expect_sql is not None:
        item["source"] = source or (plan_sources[0] if plan_sources else None)
        item["expect_sql"] = expect_sql
    body = yaml.safe_dump([item], allow_unicode=True, sort_keys=False, width=4096)
    why = f"# from feedback {entry['answer_id']} ({entry['rating']}, {entry.get('user')})"
    if entry.get("comment"):
        why += ": " + " ".join(str(entry["comment"]).split())
    lines = [why]
    if expect_sql is None:
        lines.append("# TODO: add expect_sql (+ source) or expect_rows, then uncomment")
        body += f"  expect_sql: …  # the plan answered with {entry['plan_source']}; it was wrong\n"
        lines += ["# " + line for line in body.rstrip("\n").splitlines()]
    else:
        lines += [line for line in body.rstrip("\n").splitlines()]
    text = "\n".join("  " + line for line in lines) + "\n"
    if not eval_file.exists():
        eval_file.write_text(f"today: {entry['today']}\nquestions:\n", encoding="utf-8")
    existing = eval_file.read_text(encoding="utf-8")
    with eval_file.open("a", encoding="utf-8") as out:
        out.write(("" if existing.endswith("\n") or not existing else "\n") + text)
    return text
