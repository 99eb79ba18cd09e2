"""Search results the model can reason about: counting with ``size: 0`` through the agent, and
what the planning and answer prompts say about result shapes and truncation. Scripted models on
the demo company (the embedded search server)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from scripted import plan_reply, scripted, text_reply

from structq.agent import Agent
from structq.agent.audit import AuditLog
from structq.config import Settings

TODAY = dt.date(2026, 11, 30)
#: One week of reports: a few dozen, well under the source's max_rows (200).
FILTER = {"bool": {"filter": [{"range": {"week_start_date": {"gte": "2026-03-02", "lte": "2026-03-08"}}}]}}


def test_size_0_counts_matching_documents_as_one_row(demo_capabilities, tmp_path: Path) -> None:
    plan = {"steps": [
        {"output_key": "n", "source": "reports", "index": "weekly_reports", "purpose": "周报数",
         "query": {"size": 0, "query": FILTER}},
        {"output_key": "titles", "source": "reports", "index": "weekly_reports", "purpose": "周报",
         "query": {"query": FILTER, "_source": ["title"], "size": 200}},
    ]}
    model = scripted(plan_reply(plan), text_reply("那一周共有若干份周报 [n]。"))
    with Agent(demo_capabilities, llm=model, settings=Settings(llm=None, cache_enabled=False),
               audit=AuditLog(tmp_path / "audit.jsonl")) as agent:
        answer = agent.ask("2026年3月第一周有多少份周报？", today=TODAY)
    count, titles = answer.results.steps["n"], answer.results.steps["titles"]
    assert count.columns == ("count",) and not titles.truncated and titles.row_count > 0
    assert count.rows == [(titles.row_count,)]

    plan_prompt, answer_prompt = model.prompt_text(0), model.prompt_text(1)
    assert "(`_id`, `_score`," in plan_prompt and "`doc_count`" in plan_prompt
    assert "one\n  `count` row, the exact number of matches" in plan_prompt
    assert "more rows not shown here\" is different" in answer_prompt and "truncated: more exist" in answer_prompt
    assert "NULL means no data matched" in answer_prompt
