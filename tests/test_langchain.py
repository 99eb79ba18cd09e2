"""structq as a LangChain tool: its schema, ToolMessages with artifacts, tool errors with hints,
and a ``create_agent`` agent that calls it. Every model is scripted; nothing reaches a network."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from scripted import ScriptedModel, plan_reply, scripted, text_reply

from structq.agent import Agent
from structq.config import Settings
from structq.errors import ConfigError, ExecutionError, SandboxViolation, StructqError
from structq.langchain import StructqTool, StructqToolInput, as_tool

TOOL = "company_data"
#: A verified example of the sales manifest: answered without any model.
EXAMPLE = "2025年各大区的销售额分别是多少？"
#: Not a verified example: the inner agent needs its planning model.
QUESTION = "2025年华东区的销售额一共是多少？"
PLAN: dict[str, Any] = {
    "reasoning": "汇总2025年华东区的销售额",
    "steps": [{"output_key": "total", "source": "sales", "purpose": "2025年华东区销售额合计",
               "query": "SELECT SUM(amount) AS total_amount FROM sales "
                        "WHERE region = '华东' AND sale_date >= '2025-01-01' AND sale_date <= '2025-12-31'"}],
    "answer_with": "给出合计金额",
}
#: The same plan with a column the manifest does not declare: the sandbox rejects it every time.
BROKEN_PLAN: dict[str, Any] = copy.deepcopy(PLAN)
BROKEN_PLAN["steps"][0]["query"] = PLAN["steps"][0]["query"].replace("region", "area")


@pytest.fixture
def make_agent(demo_capabilities, monkeypatch) -> Iterator[Any]:
    """Agents over the demo manifests with no cache and no audit log; no model from the environment."""
    monkeypatch.delenv("STRUCTQ_LLM", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agents: list[Agent] = []

    def make(model: Any = None, **settings: Any) -> Agent:
        config = Settings(llm=None, cache_enabled=False, audit_enabled=False, **settings)
        agents.append(Agent(demo_capabilities, llm=model, settings=config))
        return agents[-1]

    yield make
    for agent in agents:
        agent.close()


def tool_call(question: str, call_id: str = "call_1", **args: Any) -> dict[str, Any]:
    """The ToolCall dict an agent hands to a tool."""
    return {"name": TOOL, "args": {"question": question, **args}, "id": call_id, "type": "tool_call"}


def call_tool(tool: BaseTool, call: dict[str, Any], mode: str) -> ToolMessage:
    """``tool.invoke`` or ``tool.ainvoke``, whichever ``mode`` names."""
    if mode == "async":
        return asyncio.run(tool.ainvoke(call))
    return tool.invoke(call)


def calling_model(*replies: AIMessage) -> ScriptedModel:
    """The outer agent's model: it accepts ``bind_tools`` and replies with tool calls or text."""
    return scripted(*replies, tool_calling=True)


def assert_answer_message(message: ToolMessage, call_id: str, source: str) -> None:
    """A successful structq ToolMessage: answer and citations as content, the run as artifact."""
    assert isinstance(message, ToolMessage) and message.status == "success" and message.tool_call_id == call_id
    artifact = message.artifact
    assert set(artifact) == {"plan", "steps", "citations", "notes"}
    assert [c["source"] for c in artifact["citations"]] == [source] * len(artifact["plan"]["steps"])
    step = artifact["steps"][0]
    assert step["row_count"] > 0 and step["query"]
    for citation in artifact["citations"]:
        assert f"[{citation['step']}] {citation['source']}" in message.content
    assert "\n\nSources: " in message.content


# --- the tool and its schema ----------------------------------------------------------------


def test_example_question_is_a_verified_example(demo_capabilities) -> None:
    """The tests below rely on EXAMPLE skipping the model and QUESTION needing it."""
    questions = {example.question: manifest.source for manifest, example in demo_capabilities.examples()}
    assert questions.get(EXAMPLE) == "sales" and QUESTION not in questions


def test_as_tool_is_a_base_tool_described_from_the_manifests(make_agent, demo_capabilities) -> None:
    tool = as_tool(make_agent())

    assert isinstance(tool, BaseTool) and isinstance(tool, StructqTool) and tool.name == TOOL
    assert tool.args_schema is StructqToolInput
    assert set(StructqToolInput.model_fields) == {"question"}  # row-filter vars are never the model's to choose
    assert StructqToolInput.model_fields["question"].is_required()
    assert tool.response_format == "content_and_artifact" and tool.handle_tool_error is True
    for manifest in demo_capabilities:
        assert f"- {manifest.source}: " in tool.description
        for obj in manifest.indices if manifest.is_search else manifest.tables:
            assert obj.name in tool.description
    assert len(tool.description.splitlines()) == len(demo_capabilities) + 2  # intro, one line a source, advice


def test_name_and_description_can_be_given(make_agent) -> None:
    tool = as_tool(make_agent(), name="sales_data", description="Sales only.")
    assert (tool.name, tool.description) == ("sales_data", "Sales only.")


def test_args_schema_converts_to_an_openai_tool_definition(make_agent) -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    tool = as_tool(make_agent())
    definition = convert_to_openai_tool(tool)

    assert definition["type"] == "function"
    function = definition["function"]
    assert function["name"] == TOOL and function["description"] == tool.description
    parameters = function["parameters"]
    assert parameters["type"] == "object" and parameters["required"] == ["question"]
    assert set(parameters["properties"]) == {"question"}
    assert parameters["properties"]["question"]["type"] == "string"


# --- invoking the tool ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_tool_call_returns_the_answer_with_citations_and_the_run_as_artifact(make_agent, mode) -> None:
    agent = make_agent()
    message = call_tool(as_tool(agent), tool_call(EXAMPLE, "call_7"), mode)

    assert_answer_message(message, "call_7", "sales")
    expected = agent.ask(EXAMPLE)  # deterministic: a verified plan and no model
    assert message.content.startswith(expected.text)
    assert message.artifact["plan"] == expected.plan.to_dict()
    assert message.artifact["steps"][0]["rows"] == expected.to_dict()["steps"][0]["rows"]


def test_plain_arguments_return_the_content_only(make_agent) -> None:
    content = as_tool(make_agent()).invoke({"question": EXAMPLE})
    assert isinstance(content, str) and "Sources: [" in content


def test_sync_call_works_inside_a_running_event_loop(make_agent) -> None:
    """A notebook or an async server calling ``invoke``: ``Agent.ask`` must not start a nested loop."""
    tool = as_tool(make_agent())

    async def from_a_coroutine() -> ToolMessage:
        return tool.invoke(tool_call(EXAMPLE))

    assert_answer_message(asyncio.run(from_a_coroutine()), "call_1", "sales")


def test_the_tool_plans_with_the_inner_model(make_agent) -> None:
    inner = scripted(plan_reply(PLAN), text_reply("2025年华东区的销售额合计见结果。"))
    message = call_tool(as_tool(make_agent(inner)), tool_call(QUESTION), "sync")

    assert_answer_message(message, "call_1", "sales")
    assert message.content.startswith("2025年华东区的销售额合计见结果。")
    assert inner.calls == 2  # plan, answer
    assert QUESTION in inner.prompt_text(0)


# --- errors come back as tool errors with the hint ------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_no_model_configured_is_a_config_error_with_the_hint(make_agent, mode) -> None:
    message = call_tool(as_tool(make_agent()), tool_call(QUESTION), mode)

    assert message.status == "error" and message.artifact is None
    assert message.content.startswith("ConfigError: no language model is configured. Hint: configure a model")
    assert "STRUCTQ_LLM" in message.content and "OPENAI_API_KEY" in message.content


def test_a_sandbox_violation_never_repaired_names_the_code_and_hints(make_agent) -> None:
    inner = scripted(*[plan_reply(BROKEN_PLAN)] * 3)
    message = call_tool(as_tool(make_agent(inner, max_repairs=2)), tool_call(QUESTION), "sync")

    assert inner.calls == 3 and message.status == "error"
    content = message.content
    assert content.startswith("RepairsExhausted: no working plan after 3 attempts; last error: [unknown_column]")
    assert "area" in content and "(hint: " in content  # the sandbox's own hint
    assert content.endswith("Hint: rephrase the question, or check that the manifests describe the data it needs.")
    assert "attempt 1:" not in content  # the plans tried stay out of the calling model's context


class FailingAgent:
    """Stands in for ``Agent``: ``ask`` and ``aask`` raise the given error."""

    capabilities: Any = ()

    def __init__(self, error: StructqError) -> None:
        self.error = error

    def ask(self, question: str, **_: Any) -> Any:
        raise self.error

    async def aask(self, question: str, **_: Any) -> Any:
        raise self.error


TOOL_ERRORS = {
    "sandbox": (SandboxViolation("write", "only SELECT statements may run", hint="ask a read-only question",
                                 step="total"),
                "SandboxViolation [write] in step 'total': only SELECT statements may run. "
                "Hint: ask a read-only question."),
    "full stop kept single": (ExecutionError("the query failed.", hint="check the dates."),
                              "ExecutionError: the query failed. Hint: check the dates."),
    "no hint": (ConfigError("no manifests found"), "ConfigError: no manifests found."),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("case", list(TOOL_ERRORS))
def test_structq_errors_become_tool_messages(case: str, mode: str) -> None:
    error, expected = TOOL_ERRORS[case]
    tool = StructqTool(agent=FailingAgent(error))
    message = call_tool(tool, tool_call(QUESTION), mode)
    assert message.status == "error" and message.content == expected


def test_other_exceptions_are_not_swallowed() -> None:
    tool = StructqTool(agent=FailingAgent(RuntimeError("a bug")))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="a bug"):
        tool.invoke(tool_call(QUESTION))


# --- an agent built with langchain.agents.create_agent ----------------------------------------


def run_agent(model: ScriptedModel, tool: BaseTool, text: str, mode: str) -> list[Any]:
    """The messages after ``create_agent(model, [tool])`` answered ``text``."""
    from langchain.agents import create_agent

    graph = create_agent(model=model, tools=[tool])
    state = {"messages": [{"role": "user", "content": text}]}
    result = asyncio.run(graph.ainvoke(state)) if mode == "async" else graph.invoke(state)
    return result["messages"]


def tool_call_reply(question: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[tool_call(question, call_id)])


def message_types(messages: list[Any]) -> list[type]:
    return [type(m) for m in messages]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_create_agent_calls_structq_and_answers_from_its_tool_message(make_agent, mode) -> None:
    outer = calling_model(tool_call_reply(EXAMPLE, "call_42"), text_reply("华东区2025年销售额最高。"))
    messages = run_agent(outer, as_tool(make_agent()), "各大区去年卖了多少？", mode)

    assert message_types(messages) == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert_answer_message(messages[2], "call_42", "sales")
    assert messages[3].content == "华东区2025年销售额最高。"
    assert outer.calls == 2
    assert messages[2].content in outer.prompt_text(1)  # the outer model read structq's answer


def test_create_agent_with_an_inner_planning_model(make_agent) -> None:
    inner = scripted(plan_reply(PLAN), text_reply("合计如下。"))
    outer = calling_model(tool_call_reply(QUESTION, "call_1"), text_reply("华东区2025年的销售额见上。"))
    messages = run_agent(outer, as_tool(make_agent(inner)), "华东区去年一共卖了多少？", "sync")

    assert message_types(messages) == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert_answer_message(messages[2], "call_1", "sales")
    assert messages[2].content.startswith("合计如下。")
    assert messages[2].artifact["plan"]["steps"][0]["query"] == PLAN["steps"][0]["query"]
    assert (outer.calls, inner.calls) == (2, 2)  # outer: tool call, final; inner: plan, answer


def test_create_agent_reads_a_tool_error_and_rephrases(make_agent) -> None:
    """No inner model: the non-example question fails with a hint, the outer model asks the example."""
    outer = calling_model(tool_call_reply(QUESTION, "call_1"), tool_call_reply(EXAMPLE, "call_2"),
                          text_reply("见各大区的销售额。"))
    messages = run_agent(outer, as_tool(make_agent()), "华东区去年一共卖了多少？", "sync")

    assert message_types(messages) == [HumanMessage, AIMessage, ToolMessage, AIMessage, ToolMessage, AIMessage]
    failed, answered = messages[2], messages[4]
    assert failed.status == "error" and failed.content.startswith("ConfigError:") and "Hint:" in failed.content
    assert_answer_message(answered, "call_2", "sales")
    assert outer.calls == 3


def test_row_filter_variables_come_from_the_application_never_the_model(demo_capabilities) -> None:
    from structq.capabilities import CapabilitySet, Policies, RowFilter

    hr = demo_capabilities["hr"].model_copy(update={
        "policies": Policies(row_filters=[RowFilter(table="employees", where="region = :region")]),
        "examples": [],
    })
    plan = {"steps": [{"output_key": "regions", "source": "hr",
                       "query": "SELECT DISTINCT region FROM employees"}]}
    model = scripted(plan_reply(plan), text_reply("只有华东 [regions]"))
    agent = Agent(CapabilitySet([hr]), llm=model, settings=Settings(cache_enabled=False, audit_enabled=False))
    tool = as_tool(agent, vars={"region": "华东"})
    try:
        message = tool.invoke({"name": TOOL, "args": {"question": "有哪些大区的员工？"}, "id": "c1", "type": "tool_call"})
        assert message.artifact["steps"][0]["rows"] == [["华东"]]  # the application's filter held
        with pytest.raises(Exception, match="vars"):  # the model cannot pass its own
            tool.invoke({"question": "有哪些大区的员工？", "vars": {"region": "华北"}})
        assert model.calls == 2  # plan + answer for the first call; the second never reached the agent
    finally:
        agent.close()
