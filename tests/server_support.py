"""A two-tenant shop for the server tests: a SQLite file, its manifests, a server.yaml, tokens.

``shop`` has a row filter ``tenant_id = :tenant_id`` on ``orders`` and a denied column; its
verified examples give a time series (a line chart) and totals per category (a bar chart).
``notes`` is a second source that only some tokens may use. Every tenant-2 customer's name
starts with ``T2-`` so a leak is visible in any result.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

TOKENS = {"tenant1": "tok-tenant-one", "tenant2": "tok-tenant-two", "shop_only": "tok-shop-only", "slow": "tok-rate"}

MONTHS = ["2026-01-01", "2026-02-01", "2026-03-01", "2026-04-01", "2026-05-01", "2026-06-01"]
CATEGORIES = ["图书", "家电", "服装"]

SERIES_QUESTION = "每个月的订单金额是多少？"
CATEGORY_QUESTION = "各品类的订单总额分别是多少？"
NOTES_QUESTION = "有哪些备注？"

SHOP_MANIFEST = {
    "source": "shop",
    "kind": "sql",
    "url": "sqlite:///shop.db",
    "description": "两家租户共用的网店订单库",
    "limits": {"max_rows": 100, "timeout_s": 5},
    "policies": {"row_filters": [{"table": "orders", "where": "tenant_id = :tenant_id"}]},
    "tables": [{
        "name": "orders",
        "description": "订单，每行一单",
        "columns": [
            {"name": "order_id", "type": "integer", "primary_key": True, "description": "订单号"},
            {"name": "tenant_id", "type": "integer", "description": "租户"},
            {"name": "customer", "type": "text", "description": "客户名称"},
            {"name": "category", "type": "text", "description": "品类", "values": {c: c for c in CATEGORIES}},
            {"name": "order_month", "type": "date", "description": "下单月份，取每月1日"},
            {"name": "amount", "type": "real", "description": "订单金额（元）"},
            {"name": "card_number", "type": "text", "access": "deny", "description": "银行卡号"},
        ],
    }],
    "examples": [
        {"question": SERIES_QUESTION, "steps": [{
            "output_key": "by_month", "source": "shop", "purpose": "按月汇总订单金额",
            "query": "SELECT order_month, SUM(amount) AS total FROM orders GROUP BY order_month ORDER BY order_month"}]},
        {"question": CATEGORY_QUESTION, "steps": [{
            "output_key": "by_category", "source": "shop", "purpose": "按品类汇总订单金额",
            "query": "SELECT category, SUM(amount) AS total FROM orders GROUP BY category ORDER BY total DESC"}]},
    ],
}

NOTES_MANIFEST = {
    "source": "notes",
    "kind": "sql",
    "url": "sqlite:///shop.db",
    "description": "内部备注",
    "tables": [{"name": "notes", "description": "备注", "columns": [
        {"name": "note_id", "type": "integer", "description": "编号"},
        {"name": "body", "type": "text", "description": "内容"}]}],
    "examples": [{"question": NOTES_QUESTION, "steps": [{
        "output_key": "notes", "source": "notes", "query": "SELECT note_id, body FROM notes"}]}],
}


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def server_yaml(**limits: Any) -> dict[str, Any]:
    return {
        "limits": {"requests_per_minute": 600, "burst": 100, **limits},
        "tokens": [
            {"sha256": sha(TOKENS["tenant1"]), "user": "ann", "vars": {"tenant_id": 1}},
            {"sha256": sha(TOKENS["tenant2"]), "user": "bob", "vars": {"tenant_id": 2}},
            {"sha256": sha(TOKENS["shop_only"]), "user": "cat", "vars": {"tenant_id": 1}, "sources": ["shop"]},
        ],
    }


@dataclass
class Shop:
    directory: Path
    manifests: Path
    config: Path

    def tenant_customers(self, tenant: int) -> set[str]:
        with sqlite3.connect(self.directory / "shop.db") as db:
            return {r[0] for r in db.execute("SELECT customer FROM orders WHERE tenant_id = ?", (tenant,))}


def build_shop(directory: Path, *, timeout_s: float = 5, **limits: Any) -> Shop:
    """The database, the manifests folder and server.yaml (with ``limits``) under ``directory``."""
    manifests = directory / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(directory / "shop.db") as db:
        db.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, tenant_id INTEGER, customer TEXT, "
                   "category TEXT, order_month TEXT, amount REAL, card_number TEXT)")
        db.execute("CREATE TABLE notes (note_id INTEGER, body TEXT)")
        rows = []
        for n in range(120):
            tenant = 1 + n % 2
            prefix = "T1-" if tenant == 1 else "T2-"
            k = n // 2  # both tenants get every month, category and customer number
            rows.append((n + 1, tenant, f"{prefix}客户{k % 7}", CATEGORIES[k % 3], MONTHS[k % 6],
                         100.0 * (1 + k % 9) * tenant, f"6222{n:012d}"))
        db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        db.execute("INSERT INTO notes VALUES (1, '仅限内部')")
    for manifest in (SHOP_MANIFEST, NOTES_MANIFEST):
        manifest = {**manifest, "url": f"sqlite:///{directory / 'shop.db'}",
                    "limits": {**manifest.get("limits", {}), "timeout_s": timeout_s}}
        (manifests / f"{manifest['source']}.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    config = directory / "server.yaml"
    config.write_text(yaml.safe_dump(server_yaml(**limits), allow_unicode=True), encoding="utf-8")
    return Shop(directory, manifests, config)


CUSTOMER_QUESTION = "客户T1-客户0的订单金额一共多少？"


def add_customer_example(shop: Shop) -> Shop:
    """A slotted example on the shop whose customer is looked up in the (row-filtered) orders."""
    path = shop.manifests / "shop.yaml"
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    manifest["examples"].append({
        "question": CUSTOMER_QUESTION,
        "slots": {"customer": {"column": "shop.orders.customer", "example": "T1-客户0"}},
        "steps": [{"output_key": "spent", "source": "shop", "purpose": "客户订单金额合计",
                   "query": "SELECT SUM(amount) AS total FROM orders WHERE customer = :customer"}]})
    path.write_text(yaml.safe_dump(manifest, allow_unicode=True), encoding="utf-8")
    return shop


@contextmanager
def service_clients() -> Iterator[Any]:
    """``open(capabilities, config, model=None)`` → (TestClient, Service): a service on an agent
    without cache or audit, through the ASGI test client; every one closed at the end."""
    from fastapi.testclient import TestClient

    from structq.config import Settings
    from structq.server.app import create_app
    from structq.server.service import Service

    opened: list[Any] = []

    def open_client(capabilities: Any, config: Any, model: Any = None) -> tuple[Any, Any]:
        settings = Settings(llm=None, cache_enabled=False, audit_enabled=False, max_replans=0)
        service = Service(Service.agent_for(capabilities, llm=model, settings=settings), config)
        client = TestClient(create_app(service, mcp=False), raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return client, service

    try:
        yield open_client
    finally:
        for client in opened:
            client.__exit__(None, None, None)


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) pairs of a text/event-stream body."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields.get("event", "message"), fields.get("data", "")))
    return events


# --- a real `structq serve` on a loopback port ------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(args: list[str], *, env: dict[str, str] | None = None, log: Path, ready_path: str = "/healthz",
                 deadline_s: float = 120) -> ServerProcess:
    """``structq serve ARGS --port P`` started and answering ``ready_path``; raises with its log otherwise."""
    port = free_port()
    command = [sys.executable, "-m", "structq.cli", "serve", *args, "--port", str(port)]
    handle = log.open("w")
    store = {"STRUCTQ_STORE_URL": f"sqlite:///{log.with_suffix('.store.db')}"}  # never the user's cache file
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, **store, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    server = ServerProcess(process, url, log)
    give_up = time.monotonic() + deadline_s
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise RuntimeError(f"structq serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + ready_path, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"structq serve did not answer {ready_path} within {deadline_s} s:\n{log.read_text()}")


@contextmanager
def serving_shop(shop: Shop, log: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """``structq serve`` on the shop with its server.yaml (tokens required), stopped afterwards."""
    process = start_server(["-m", str(shop.manifests), "--config", str(shop.config), *extra], log=log,
                           env={"STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0", **(env or {})})
    try:
        yield process
    finally:
        process.stop()
