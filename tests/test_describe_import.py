"""``structq describe --from FILE``: descriptions and synonyms companies already have (a dbt
project's ``manifest.json`` and ``schema.yml``, a CSV/JSON data dictionary) imported into the
draft manifest ``structq init`` wrote for a real SQLite database; and ``--languages``.

The dbt files are written here, small but in dbt's own shapes; no model is called on import.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scripted import scripted, text_reply
from structq.capabilities import CapabilitySet, load_manifest
from structq.cli import app
from structq.linking import Budget, select


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``structq init`` on a shop database: every table and column a draft without description."""
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as c:
        c.executescript("""
            CREATE TABLE dim_customers (customer_id INTEGER PRIMARY KEY, cust_nm TEXT, email TEXT);
            CREATE TABLE fct_orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, amt REAL);
            INSERT INTO dim_customers VALUES (1, 'ACME', 'a@example.com');
            INSERT INTO fct_orders VALUES (1, 1, 9.5);
        """)
    folder = tmp_path / "caps"
    monkeypatch.setenv("SHOP_URL", f"sqlite:///{db}")  # init writes url: ${SHOP_URL}
    result = CliRunner().invoke(app, ["init", "--source", "shop", "--url", f"sqlite:///{db}", "-m", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


DBT_MANIFEST = {
    "metadata": {"dbt_version": "1.8.0"},
    "nodes": {
        "model.shop.dim_customers": {
            "resource_type": "model", "name": "dim_customers", "alias": "dim_customers",
            "description": "One row per customer.", "meta": {"synonyms": ["clients", "客户"]},
            "columns": {"cust_nm": {"name": "cust_nm", "description": "Customer's legal name", "meta": {}},
                        "email": {"name": "email", "description": "never written: the column is denied"}}},
        "model.shop.orders_v2": {
            "resource_type": "model", "name": "orders_v2", "alias": "fct_orders",
            "description": "One row per order.",
            "columns": {"amt": {"name": "amt", "description": "Order amount in EUR",
                                "meta": {"synonyms": ["amount", "金额"]}}}},
        "test.shop.not_null": {"resource_type": "test", "name": "not_null", "description": "not a table"},
    },
    "sources": {},
}


def _import(folder: Path, path: Path, *more: str) -> Any:
    return CliRunner().invoke(app, ["describe", "-m", str(folder), "--from", str(path), "--json", *more],
                              env={"STRUCTQ_LLM": None, "OPENAI_API_KEY": None})


def test_dbt_manifest_descriptions_are_imported_as_drafts_with_their_origin(shop: Path, tmp_path: Path) -> None:
    dbt = tmp_path / "manifest.json"
    dbt.write_text(json.dumps(DBT_MANIFEST), encoding="utf-8")
    result = _import(shop, dbt)
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)["sources"]
    assert entry["origin"] == "dbt manifest manifest.json" and entry["model_calls"] == 0 and entry["written"]
    text = (shop / "shop.yaml").read_text(encoding="utf-8")
    assert text.startswith("# descriptions imported from dbt manifest manifest.json")
    manifest, _ = load_manifest(shop / "shop.yaml")
    customers, orders = manifest.table("dim_customers"), manifest.table("fct_orders")
    assert customers.description == "One row per customer." and customers.synonyms == ["clients", "客户"]
    assert customers.draft and customers.column("cust_nm").description == "Customer's legal name"
    assert customers.column("email").denied and not customers.column("email").description
    assert orders.description == "One row per order." and orders.column("amt").synonyms == ["amount", "金额"]


def test_imported_synonyms_let_a_chinese_question_link(shop: Path, tmp_path: Path) -> None:
    dbt = tmp_path / "manifest.json"
    dbt.write_text(json.dumps(DBT_MANIFEST), encoding="utf-8")
    assert _import(shop, dbt).exit_code == 0
    filler = "".join(f"  - name: audit_{i}\n    columns:\n" + "".join(f"      - {{name: field_{j}, type: text}}\n"
                                                                      for j in range(8)) for i in range(6))
    (shop / "logs.yaml").write_text(f"source: logs\nkind: sql\nurl: sqlite://\ntables:\n{filler}", encoding="utf-8")
    capabilities = CapabilitySet.from_path(shop)
    budget = Budget(prompt_tokens=300, linked_tokens=300)
    selection = select("客户的订单金额合计", capabilities, budget=budget)
    assert selection.pruned and selection.confident
    assert selection.keeps("shop", "fct_orders") and selection.keeps("shop", "dim_customers")


def test_dbt_schema_yml_with_doc_blocks(shop: Path, tmp_path: Path) -> None:
    project = tmp_path / "dbt" / "models"
    project.mkdir(parents=True)
    (project / "docs.md").write_text("{% docs order_amount %}\nOrder amount, EUR, after discounts.\n{% enddocs %}\n",
                                     encoding="utf-8")
    (project / "schema.yml").write_text("""version: 2
models:
  - name: fct_orders
    description: Orders placed in the shop.
    columns:
      - name: amt
        description: '{{ doc("order_amount") }}'
sources:
  - name: crm
    tables:
      - name: dim_customers
        description: Customers from the CRM.
""", encoding="utf-8")
    assert _import(shop, project / "schema.yml").exit_code == 0
    manifest, _ = load_manifest(shop / "shop.yaml")
    assert manifest.table("fct_orders").column("amt").description == "Order amount, EUR, after discounts."
    assert manifest.table("dim_customers").description == "Customers from the CRM."


@pytest.mark.parametrize("name, body", [
    ("dictionary.csv", "table,column,description,synonyms\nfct_orders,,Orders placed,sales|订单\n"
                       "fct_orders,amt,Amount in EUR,amount;金额\n"),
    ("dictionary.json", json.dumps([{"table": "fct_orders", "description": "Orders placed", "synonyms": ["sales", "订单"]},
                                    {"table": "fct_orders", "column": "amt", "description": "Amount in EUR",
                                     "synonyms": "amount;金额"}])),
])
def test_a_data_dictionary_is_imported(shop: Path, tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    result = _import(shop, path)
    assert result.exit_code == 0, result.output
    manifest, _ = load_manifest(shop / "shop.yaml")
    orders = manifest.table("fct_orders")
    assert (orders.description, orders.synonyms) == ("Orders placed", ["sales", "订单"])
    assert (orders.column("amt").description, orders.column("amt").synonyms) == ("Amount in EUR", ["amount", "金额"])


def test_import_never_replaces_what_a_person_wrote(shop: Path, tmp_path: Path) -> None:
    path = shop / "shop.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("- name: fct_orders", "- name: fct_orders\n    description: by hand", 1),
                    encoding="utf-8")
    dictionary = tmp_path / "d.csv"
    dictionary.write_text("table,column,description\nfct_orders,,imported\n", encoding="utf-8")
    assert _import(shop, dictionary).exit_code == 0
    assert load_manifest(path)[0].table("fct_orders").description == "by hand"


def test_an_unreadable_file_says_what_is_expected(shop: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello", encoding="utf-8")
    result = _import(shop, path)
    assert result.exit_code != 0 and "data dictionary" in result.output


def test_languages_ask_for_descriptions_in_the_first_and_synonyms_in_each(shop: Path, monkeypatch) -> None:
    reply = {"objects": {"fct_orders": {"description": "订单，每行一笔", "synonyms": ["订单", "销售", "orders", "sales"],
                                        "members": {"amt": {"description": "金额", "synonyms": ["金额", "amount"]}}}}}
    model = scripted(text_reply(json.dumps(reply)), text_reply("{}"))
    monkeypatch.setattr("structq.agent.llm.resolve_model", lambda spec: model)
    result = CliRunner().invoke(app, ["describe", "-m", str(shop), "--languages", "zh,en"])
    assert result.exit_code == 0, result.output
    prompt = model.prompt_text(0)
    assert "Write, in Chinese" in prompt and "synonyms in each of Chinese, English" in prompt
    orders = load_manifest(shop / "shop.yaml")[0].table("fct_orders")
    assert orders.synonyms == ["订单", "销售", "orders", "sales"]
