"""MCP with the SDK's own client: ``structq mcp`` over stdio and ``/mcp`` on a real
``structq serve`` over streamable HTTP. Variables come from the command line (stdio) or the
token (HTTP), never from a tool's arguments."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from server_support import NOTES_QUESTION, SERIES_QUESTION, TOKENS, ServerProcess, build_shop, serving_shop

TOOLS = {"ask", "plan", "run_plan", "list_sources", "describe_source", "feedback"}


def plan_of(query: str, source: str = "shop") -> dict[str, Any]:
    return {"steps": [{"output_key": "rows", "source": source, "query": query}]}


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    return build_shop(tmp_path_factory.mktemp("shop"))


@asynccontextmanager
async def stdio_session(shop, *args: str) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "structq.cli", "mcp", "-m", str(shop.manifests), *args],
                                   env={**os.environ, "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        async with streamable_http_client(url + "/mcp", http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def rows_of(result: Any) -> list[list[Any]]:
    assert not result.is_error, result.content
    return result.structured_content["steps"][-1]["rows"]


def error_text(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


async def test_stdio_tools_answer_with_the_command_lines_variables(shop) -> None:
    async with stdio_session(shop, "--var", "tenant_id=1") as session:
        tools = await session.list_tools()
        assert {t.name for t in tools.tools} == TOOLS
        for tool in tools.tools:  # no tool lets the caller name variables
            assert not {"vars", "variables", "tenant_id"} & set(tool.input_schema.get("properties", {}))

        answer = await session.call_tool("ask", {"question": SERIES_QUESTION})
        assert answer.structured_content["plan_source"] == "verified" and len(rows_of(answer)) == 6
        assert json.loads(answer.content[0].text)["steps"][0]["row_count"] == 6
        rated = await session.call_tool("feedback", {"answer_id": answer.structured_content["answer_id"],
                                                     "rating": "up", "comment": "对"})
        assert not rated.is_error and rated.structured_content["rating"] == "up"
        assert "rating='sideways' is not up or down" in error_text(await session.call_tool(
            "feedback", {"answer_id": answer.structured_content["answer_id"], "rating": "sideways"}))

        sneaky = await session.call_tool("run_plan", {"plan": plan_of("SELECT customer FROM orders WHERE tenant_id = 2")})
        assert {r[0] for r in rows_of(sneaky)} <= shop.tenant_customers(1)

        refused = await session.call_tool("run_plan", {"plan": plan_of("SELECT card_number FROM orders")})
        text = error_text(refused)
        assert "sandbox_refused: " in text and "card_number" in text and "(hint:" in text

        sources = await session.call_tool("list_sources", {})
        assert {s["source"] for s in sources.structured_content["sources"]} == {"shop", "notes"}
        schema = await session.call_tool("describe_source", {"source": "shop"})
        assert "orders" in schema.content[0].text and "card_number" not in schema.content[0].text


@pytest.fixture(scope="module")
def server(shop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serving_shop(shop, tmp_path_factory.mktemp("log") / "serve.log") as process:
        yield process


async def test_http_tools_take_the_variables_and_sources_of_the_token(server, shop) -> None:
    async with http_session(server.url, TOKENS["tenant2"]) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        everything = await session.call_tool("run_plan", {"plan": plan_of("SELECT customer FROM orders")})
        assert {r[0] for r in rows_of(everything)} == shop.tenant_customers(2)
    async with http_session(server.url, TOKENS["shop_only"]) as session:
        refused = await session.call_tool("ask", {"question": NOTES_QUESTION})
        assert "forbidden: " in error_text(refused) and "'notes'" in error_text(refused)
        described = await session.call_tool("describe_source", {"source": "notes"})
        assert "forbidden: " in error_text(described)


@pytest.mark.parametrize("header", [None, "Bearer wrong"])
def test_http_mcp_refuses_a_missing_or_unknown_token(server, header) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if header:
        headers["Authorization"] = header
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(server.url + "/mcp", json=body, headers=headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
