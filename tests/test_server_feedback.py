"""The feedback loop: every answer has an ``answer_id``; a caller rates its own answers
(``POST /v1/feedback``); a reviewer lists and reads the ratings, promotes a good answer's plan
into a verified example (the manifest keeps its comments, the example is a draft) that then
answers the question without a model, and turns a bad answer into an eval question.

The two-tenant shop on a real SQLite file and a SQLite store; a scripted model for the answer
being rated; the ``structq feedback`` commands run as real processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from scripted import plan_reply, scripted
from server_support import auth, build_shop

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service
from structq.server.store import Store

BIG_ORDERS = "金额最大的三单是哪些客户下的？"
LAST_MONTH = "上个月的订单一共多少钱？"
BIG_PLAN = {"reasoning": "按金额倒序取前三", "steps": [{
    "output_key": "top", "source": "shop", "purpose": "金额最大的三单",
    "query": "SELECT customer, amount FROM orders ORDER BY amount DESC, order_id LIMIT 3"}]}
MONTH_PLAN = {"steps": [{"output_key": "month", "source": "shop", "purpose": "上月订单金额",
                         "query": "SELECT SUM(amount) AS total FROM orders WHERE order_month = '2026-05-01'"}]}


@pytest.fixture
def shop(tmp_path: Path):
    shop = build_shop(tmp_path)
    path = shop.manifests / "shop.yaml"
    path.write_text("# 网店：人工维护的注释\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    return shop


def _service(shop, store: Store, model: Any = None) -> Service:
    capabilities = CapabilitySet.from_path(shop.manifests)
    settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
    config = ServerConfig.from_file(shop.config, sources=capabilities.names)
    return Service(Service.agent_for(capabilities, llm=model, settings=settings), config, store)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "structq.cli", "feedback", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "STRUCTQ_AUDIT": "0"})


def test_rate_list_promote_and_the_promoted_example_answers_offline(shop, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    model = scripted(plan_reply(BIG_PLAN), plan_reply(MONTH_PLAN))
    with TestClient(create_app(_service(shop, Store(url), model), mcp=False), raise_server_exceptions=False) as client:
        big = client.post("/v1/ask", json={"question": BIG_ORDERS, "no_answer": True, "today": "2026-06-20"},
                          headers=auth("tenant1")).json()
        month = client.post("/v1/ask", json={"question": LAST_MONTH, "no_answer": True, "today": "2026-06-20"},
                            headers=auth("tenant1")).json()
        assert big["plan_source"] == "model" and len(big["answer_id"]) == 32 and big["answer_id"] != month["answer_id"]
        rate = {"answer_id": big["answer_id"], "rating": "up", "comment": "正是我要的"}
        assert client.post("/v1/feedback", json=rate, headers=auth("tenant1")).json() == {
            "answer_id": big["answer_id"], "rating": "up"}
        # another caller cannot rate it; a rating is up or down
        assert client.post("/v1/feedback", json=rate, headers=auth("tenant2")).status_code == 404
        assert client.post("/v1/feedback", json={**rate, "rating": "meh"}, headers=auth("tenant1")).status_code == 400
        assert client.post("/v1/feedback", json={"answer_id": month["answer_id"], "rating": "up"},
                           headers=auth("tenant1")).status_code == 200

    listed = _cli("list", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    entries = {e["question"]: e for e in json.loads(listed.stdout)["feedback"]}
    entry = entries[BIG_ORDERS]
    assert entry["rating"] == "up" and entry["comment"] == "正是我要的" and entry["user"] == "ann"
    assert entry["plan_source"] == "model" and entry["row_counts"] == {"top": 3} and entry["plan"]["steps"]
    shown = _cli("show", big["answer_id"][:8], "--store", url)
    assert BIG_ORDERS in shown.stdout and "ORDER BY amount DESC" in shown.stdout and "正是我要的" in shown.stdout

    for answer in (big, month):
        promoted = _cli("promote", answer["answer_id"][:10], "-m", str(shop.manifests), "--store", url)
        assert promoted.returncode == 0, promoted.stderr
    text = (shop.manifests / "shop.yaml").read_text(encoding="utf-8")
    assert text.startswith("# 网店：人工维护的注释\n")  # the manifest's comments survive
    written = {e["question"]: e for e in yaml.safe_load(text)["examples"]}
    assert written[BIG_ORDERS]["draft"] is True and written[BIG_ORDERS]["feedback"] == big["answer_id"]
    assert "today" not in written[BIG_ORDERS]
    # a relative date keeps meaning the same period: the day it was answered for, and its unit
    assert str(written[LAST_MONTH]["today"]) == "2026-06-20" and written[LAST_MONTH]["period"] == "month"
    again = _cli("promote", big["answer_id"], "-m", str(shop.manifests), "--store", url)
    assert again.returncode == 3 and "already has an example" in again.stderr

    # a fresh server without a model answers the promoted question, and says where it came from
    with TestClient(create_app(_service(shop, Store(url)), mcp=False), raise_server_exceptions=False) as client:
        offline = client.post("/v1/ask", json={"question": BIG_ORDERS}, headers=auth("tenant1"))
        assert offline.status_code == 200 and offline.json()["plan_source"] == "verified"
        assert offline.json()["steps"][0]["rows"] == big["steps"][0]["rows"]
        examples = {e["question"]: e for e in client.get("/v1/examples", headers=auth("tenant1")).json()["examples"]}
        assert examples[BIG_ORDERS]["from_feedback"] and examples[BIG_ORDERS]["draft"]
        assert not examples["每个月的订单金额是多少？"]["from_feedback"]


def test_a_bad_answer_becomes_an_eval_question(shop, tmp_path: Path) -> None:
    from structq.agent.evaluate import EvalSet

    url = f"sqlite:///{tmp_path / 'store.db'}"
    with TestClient(create_app(_service(shop, Store(url), scripted(plan_reply(BIG_PLAN))), mcp=False),
                    raise_server_exceptions=False) as client:
        bad = client.post("/v1/ask", json={"question": BIG_ORDERS, "no_answer": True}, headers=auth("tenant2")).json()
        client.post("/v1/feedback", json={"answer_id": bad["answer_id"], "rating": "down", "comment": "应按客户合计"},
                    headers=auth("tenant2"))
    assert _cli("promote", bad["answer_id"], "-m", str(shop.manifests), "--store", url).returncode == 3
    evals = tmp_path / "eval.yaml"
    evals.write_text("today: 2026-06-20\nquestions:\n  - question: 有哪些备注？\n    expect_rows: [[1, 仅限内部]]\n",
                     encoding="utf-8")
    todo = _cli("to-eval", bad["answer_id"], "--eval", str(evals), "--store", url)
    assert todo.returncode == 0, todo.stderr
    assert len(EvalSet.model_validate(yaml.safe_load(evals.read_text(encoding="utf-8"))).questions) == 1
    assert "# TODO" in evals.read_text(encoding="utf-8") and "应按客户合计" in evals.read_text(encoding="utf-8")
    expect = "SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer ORDER BY total DESC LIMIT 3"
    live = _cli("to-eval", bad["answer_id"], "--eval", str(evals), "--store", url, "--expect-sql", expect)
    assert live.returncode == 0, live.stderr
    items = EvalSet.model_validate(yaml.safe_load(evals.read_text(encoding="utf-8"))).questions
    assert items[-1].question == BIG_ORDERS and items[-1].expect_sql == expect and items[-1].source == "shop"
    assert items[-1].vars == {"tenant_id": 2}


SPENT = "客户T1-客户0的订单一共多少钱？"
SPENT_PLAN = {"steps": [{"output_key": "spent", "source": "shop", "purpose": "客户订单金额合计",
                         "query": "SELECT SUM(amount) AS total FROM orders WHERE customer = 'T1-客户0'"}]}


def test_a_promoted_answer_gets_a_slot_for_the_value_it_names(shop, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with TestClient(create_app(_service(shop, Store(url), scripted(plan_reply(SPENT_PLAN))), mcp=False),
                    raise_server_exceptions=False) as client:
        spent = client.post("/v1/ask", json={"question": SPENT, "no_answer": True}, headers=auth("tenant1")).json()
        assert spent["plan_source"] == "model"
        client.post("/v1/feedback", json={"answer_id": spent["answer_id"], "rating": "up"}, headers=auth("tenant1"))
    promoted = _cli("promote", spent["answer_id"], "-m", str(shop.manifests), "--store", url, "--json")
    assert promoted.returncode == 0, promoted.stderr
    path = shop.manifests / "shop.yaml"
    text = path.read_text(encoding="utf-8")
    written = {e["question"]: e for e in yaml.safe_load(text)["examples"]}[SPENT]
    # the customer the question names is a slot bound as a parameter, never text in the query
    assert written["slots"] == {"customer": {"column": "shop.orders.customer", "example": "T1-客户0"}}
    assert written["steps"][0]["query"] == "SELECT SUM(amount) AS total FROM orders WHERE customer = :customer"
    accepted = "".join(line for line in text.splitlines(keepends=True) if line.strip() != "draft: true")
    path.write_text(accepted, encoding="utf-8")  # the reviewer accepts it

    with sqlite3.connect(shop.directory / "shop.db") as db:
        (total,), = db.execute("SELECT SUM(amount) FROM orders WHERE customer = 'T1-客户3' AND tenant_id = 1")
    with TestClient(create_app(_service(shop, Store(url)), mcp=False), raise_server_exceptions=False) as client:
        other = client.post("/v1/ask", json={"question": "客户T1-客户3的订单一共多少钱？"}, headers=auth("tenant1"))
        assert other.status_code == 200, other.text
        assert other.json()["plan_source"] == "template"
        assert other.json()["steps"][0]["rows"] == [[total]] and total > 0


def test_a_value_in_an_uncertain_place_stays_text(shop) -> None:
    from structq.agent.slotting import propose_slots

    capabilities = CapabilitySet.from_path(shop.manifests)
    # the value also stands outside the comparison: no slot
    labelled = [{**SPENT_PLAN["steps"][0], "query": "SELECT 'T1-客户0' AS who, SUM(amount) AS total FROM orders "
                 "WHERE customer = 'T1-客户0'"}]
    assert propose_slots(SPENT, labelled, capabilities) == ({}, labelled)
    # a value the question does not name, or a pattern rather than a value: no slot
    assert propose_slots("客户一共花了多少钱？", SPENT_PLAN["steps"], capabilities)[0] == {}
    assert propose_slots("客户T1-客户01的订单一共多少钱？", SPENT_PLAN["steps"], capabilities)[0] == {}  # inside a longer one
    like = [{**SPENT_PLAN["steps"][0], "query": "SELECT SUM(amount) FROM orders WHERE customer LIKE '%T1-客户0%'"}]
    assert propose_slots(SPENT, like, capabilities)[0] == {}
