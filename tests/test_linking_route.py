"""Routing: one bounded model call when linking is not confident, none otherwise.

The model is scripted (``tests/scripted.py``): it answers the routing prompt with the sources,
tables and translated terms a real model would. The catalogue is SQLite files with real rows
written here, large enough (filler tables) that a small budget prunes it.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from scripted import plan_reply, scripted, text_reply

from structq.agent import Agent
from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.linking import Budget, select
from structq.linking.route import Route, catalogue_map, parse_route

TODAY = dt.date(2026, 11, 30)


def _catalogue(folder: Path) -> CapabilitySet:
    """sales (English names: customers, orders) beside a German-named personal source, plus filler."""
    folder.mkdir()
    with sqlite3.connect(folder / "sales.db") as c:
        c.executescript("""CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT, city TEXT);
            CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL);
            INSERT INTO customers VALUES (1, 'ACME', 'Shanghai'), (2, 'Globex', 'Beijing');
            INSERT INTO orders VALUES (1, 1, 10.5), (2, 1, 4.5), (3, 2, 20.0);""")
    with sqlite3.connect(folder / "personal.db") as c:
        c.executescript("""CREATE TABLE mitarbeiter (mitarbeiter_id INTEGER PRIMARY KEY, vorname TEXT, gehalt REAL);
            INSERT INTO mitarbeiter VALUES (1, 'Anna', 5000), (2, 'Ben', 7000);""")
    col = lambda n, t="text", **k: {"name": n, "type": t, **k}  # noqa: E731
    sales = {"source": "sales", "kind": "sql", "url": f"sqlite:///{folder / 'sales.db'}", "description": "orders and customers",
             "tables": [{"name": "customers", "columns": [col("customer_id", "integer", primary_key=True), col("name"), col("city")]},
                        {"name": "orders", "columns": [col("order_id", "integer", primary_key=True),
                                                       col("customer_id", "integer", references="customers.customer_id"),
                                                       col("amount", "real")]},
                        *[{"name": f"audit_log_{i}", "columns": [col(f"field_{j}") for j in range(8)]} for i in range(10)]]}
    personal = {"source": "personal", "kind": "sql", "url": f"sqlite:///{folder / 'personal.db'}",
                "tables": [{"name": "mitarbeiter", "columns": [col("mitarbeiter_id", "integer", primary_key=True),
                                                               col("vorname"), col("gehalt", "real")]}]}
    for m in (sales, personal):
        (folder / f"{m['source']}.yaml").write_text(yaml.safe_dump(m, allow_unicode=True), encoding="utf-8")
    return CapabilitySet.from_path(folder)


@pytest.fixture
def catalogue(tmp_path: Path) -> CapabilitySet:
    return _catalogue(tmp_path / "company")


def _agent(capabilities: CapabilitySet, model, **settings) -> Agent:
    return Agent(capabilities, llm=model, settings=Settings(llm=None, prompt_tokens=300, link_tokens=300,
                                                            cache_enabled=False, audit_enabled=False, **settings))


SUM_PLAN = {"reasoning": "sum", "answer_with": "a number",
            "steps": [{"output_key": "total", "source": "sales", "query": "SELECT SUM(amount) AS total FROM orders"}]}


def test_an_unsure_question_is_routed_by_one_call(catalogue) -> None:
    route = {"sources": ["sales"], "tables": ["sales.orders"], "terms": ["order", "amount"]}
    model = scripted(text_reply(json.dumps(route)), plan_reply(SUM_PLAN), text_reply("35 [total]"))
    with _agent(catalogue, model) as agent:
        answer = agent.ask("所有订单的总金额是多少？", today=TODAY, answer=False)
    assert [tuple(r) for r in answer.results.steps["total"].rows] == [(35.0,)]
    assert model.calls == 2  # the routing call and the plan
    routing, planning = model.prompt_text(0), model.prompt_text(1)
    assert "Catalogue (source: description — tables)" in routing and "mitarbeiter" in routing
    assert "所有订单的总金额是多少" in routing
    assert "table orders" in planning and "table mitarbeiter" not in planning


def test_a_confident_question_costs_no_routing_call(catalogue, tmp_path: Path) -> None:
    """An English question over English names (the German source described in English: reachable)."""
    folder = tmp_path / "company"
    manifest = yaml.safe_load((folder / "personal.yaml").read_text(encoding="utf-8"))
    manifest["tables"][0]["synonyms"] = ["employees", "staff"]
    (folder / "personal.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    model = scripted(plan_reply(SUM_PLAN), text_reply("35 [total]"))
    with _agent(CapabilitySet.from_path(folder), model) as agent:
        agent.ask("total order amount of customers", today=TODAY, answer=False)
    assert model.calls == 1


def test_a_useless_routing_reply_leaves_the_selection_and_is_not_repeated(catalogue) -> None:
    model = scripted(text_reply("I am not sure."), plan_reply(SUM_PLAN), text_reply("35 [total]"))
    with _agent(catalogue, model) as agent:
        answer = agent.ask("所有订单的总金额是多少？", today=TODAY, answer=False)
    assert answer.results.steps["total"].rows and model.calls == 2


def test_routing_is_off_at_zero_tokens(catalogue) -> None:
    model = scripted(plan_reply(SUM_PLAN), text_reply("35 [total]"))
    with _agent(catalogue, model, route_tokens=0) as agent:
        agent.ask("所有订单的总金额是多少？", today=TODAY, answer=False)
    assert model.calls == 1


def test_parse_route_keeps_only_names_the_catalogue_has(catalogue) -> None:
    reply = ('```json\n{"sources": ["sales", "nowhere"], "tables": ["sales.orders", "sales.ghost", "mitarbeiter"], '
             '"terms": ["amount", 3]}\n```')
    route = parse_route(reply, catalogue)
    assert route.sources == ("sales", "personal")
    assert route.tables == (("sales", "orders"), ("personal", "mitarbeiter"))
    assert route.terms == ("amount",)
    assert not parse_route("no json here", catalogue)


def test_a_route_restricts_linking_to_its_sources_and_keeps_its_tables(catalogue) -> None:
    budget = Budget(prompt_tokens=300, linked_tokens=300)
    routed = select("员工的平均工资", catalogue, budget=budget,
                    route=Route(("personal",), (("personal", "mitarbeiter"),), ("salary", "gehalt")))
    assert routed.confident and routed.keeps("personal", "mitarbeiter")
    assert {k[0] for k in routed.kept} == {"personal"}
    assert routed.to_dict()["route"]["tables"] == ["personal.mitarbeiter"]


def test_the_map_falls_back_to_sources_first_when_tables_do_not_fit(catalogue) -> None:
    whole = catalogue_map(catalogue, 2000)
    assert "audit_log_9" in whole
    compact = catalogue_map(catalogue, 40, first=("personal",))
    assert compact.startswith("Catalogue, sources only")
    lines = compact.splitlines()
    assert lines[1].startswith("- personal") and "audit_log_9" not in compact
