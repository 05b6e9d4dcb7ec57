"""The context pipeline in its three hosts: a StateGraph, create_react_agent, create_agent."""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget, is_summary_message
from langgraph_ctx.context.compaction import CompactionRecord, LLMSummary
from langgraph_ctx.context.llm_error import is_llm_error
from langgraph_ctx.context.prompt import (
    PromptParts,
    compose_system_prompt,
    is_system_prompt_message,
)
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.nodes.compaction import CompactionNode
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextAgentState, ContextState
from langgraph_ctx.testing import Cut, ExtractiveSummaryModel, StreamingScript, ordering_problems

PARTS = PromptParts(persona="You are Ada, a careful analyst.")
RUN = {"workflow_id": "wf", "run_id": "r1", "step": {"id": "s1", "brief": "Collect the data."}}


@tool
def lookup(city: str) -> str:
    """Look up facts about a city."""
    return f"{city}: population 545,000; founded 1256; river Tagus"


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def words(i: int) -> str:
    return f"turn {i}: the depot at /srv/depot/{i}.csv holds {i * 37} pallets " + "padding " * 30


def graph_with_pipeline(saver: JsonlSaver, model: Any, pipeline: Any, tools: list[Any] = ()):
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=list(tools) or None))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    if tools:
        builder.add_node("tools", ToolNode(list(tools)))
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def exact(messages: list[BaseMessage], tools: list[Any] = ()) -> int:
    return count_tokens(messages, model="gpt-4o", tools=list(tools) or None)


def one_prompt(messages: list[BaseMessage]) -> BaseMessage:
    prompts = [m for m in messages if is_system_prompt_message(m)]
    assert len(prompts) == 1 and messages[0] == prompts[0]
    return prompts[0]


# -- in a StateGraph --------------------------------------------------------------------------


def test_the_budget_counts_the_prompt_and_tools_that_are_sent(saver: JsonlSaver) -> None:
    model = StreamingScript(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": "Lisbon"}, "id": "c1"}]),
            "Lisbon has 545,000 people.",
            "In run mode now.",
        ]
    )
    pipeline = context_pipeline("planning", tools=[lookup], prompt=PARTS, mode="agent")
    graph = graph_with_pipeline(saver, model, pipeline, [lookup])
    state = graph.invoke({"messages": [("user", "How big is Lisbon?")]}, config("b"))

    # Each request the model got is what the pipeline wrote, counted exactly.
    assert [m.content for m in model.received[-1]] == [
        m.content for m in state["llm_input_messages"]
    ]
    usage = state["context_usage"]
    assert usage.used == exact(state["llm_input_messages"], [lookup])
    assert usage.breakdown["tools"] == exact([], [lookup]) - exact([])
    prompt = compose_system_prompt("agent", PARTS)
    assert usage.breakdown["system"] == exact([SystemMessage(prompt)]) - exact([])
    assert state["mode"] == "agent" and state["system_prompt"] == prompt

    # A mode switch is counted in the same step that sends the new prompt.
    state = graph.invoke(
        {"messages": [("user", "go")], "mode": "run", "run_context": RUN}, config("b")
    )
    run_prompt = compose_system_prompt("run", PARTS, run=RUN)
    assert model.received[-1][0].content == run_prompt
    assert state["context_usage"].used == exact(state["llm_input_messages"], [lookup])
    assert not state["context_usage"].calibrated  # the provider measured another prompt
    assert state["messages"][-1].response_metadata["langgraph_ctx"] == {
        "mode": "run",
        "run_id": "r1",
        "step_id": "s1",
    }


def test_add_to_refuses_a_state_that_would_drop_the_pipeline_writes() -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {})
    with pytest.raises(ValueError, match=r"lacks \['llm_input_messages', 'context_usage'"):
        context_pipeline("fast").add_to(builder, before="model")


def test_compaction_sends_prompt_then_summary_then_history_and_the_file_keeps_all(
    saver: JsonlSaver,
) -> None:
    model = StreamingScript(script=[lambda msgs: f"noted, {len(msgs)} messages in view"])
    pipeline = context_pipeline(
        ContextBudget(total=2_000, output_reserve=200),
        prompt=PARTS,
        strategy=LLMSummary(ExtractiveSummaryModel()),
        trigger=0.8,
        target=0.55,
    )
    graph = graph_with_pipeline(saver, model, pipeline)
    for i in range(32):
        state = graph.invoke({"messages": [("user", words(i))]}, config("c"))
        sent = model.received[-1]
        one_prompt(sent)
        assert ordering_problems(sent) == []
        assert exact(sent) <= 2_000 - 200
    records = [CompactionRecord.model_validate(r) for r in state["compaction_log"]]
    assert len(records) >= 2 and all(r.within_budget for r in records)
    assert sent[0].content == compose_system_prompt("chat", PARTS)
    assert is_summary_message(sent[1]) and sent[1].content.startswith("CONVERSATION_SUMMARY")
    assert [m.type for m in sent[2:]].count("system") == 0
    assert len(sent) < len(state["messages"]) == 64  # the history is whole
    assert state["context_usage"].used == exact(sent)

    lines = [json.loads(x) for x in Path(saver.path("c")).read_text().splitlines()]
    stored = {line["msg"]["content"] for line in lines if line["t"] == "msg" and "msg" in line}
    assert {m.content for m in state["messages"]} <= stored


def test_continue_sees_the_failed_reply_even_when_compaction_drops_it(saver: JsonlSaver) -> None:
    failing = Cut("Step one is to load the data and then", 6, error=ConnectionError("reset"))
    model = StreamingScript(script=["a", "b", "c", failing, "resumed"])
    # Compaction fires on the 9th message, the "continue", and leaves little room.
    compaction = CompactionNode(trigger=("messages", 9), target=500)
    pipeline = context_pipeline("fast", compaction=compaction)
    graph = graph_with_pipeline(saver, model, pipeline)
    for text in (words(1), words(2), words(3), "plan it"):
        state = graph.invoke({"messages": [("user", text)]}, config("pin"))
    assert is_llm_error(state["messages"][-1])
    state = graph.invoke({"messages": [("user", "continue")]}, config("pin"))
    record = CompactionRecord.model_validate(state["compaction_log"][-1])
    assert record.dropped  # compaction did drop part of the history ...
    sent = model.received[-1]
    assert is_llm_error(sent[-2]) and sent[-1].content == "continue"  # ... not the failed reply
    assert ordering_problems(sent) == []


def test_a_host_prompt_is_counted_when_the_pipeline_composes_none() -> None:
    pipeline = context_pipeline("fast", prompt=False, system_prompt="Be terse.")
    update = pipeline.invoke({"messages": [("user", "hi")]})
    assert [m.type for m in update["llm_input_messages"]] == ["human"]
    assert update["context_usage"].breakdown["system"] == exact([SystemMessage("Be terse.")]) - 3
    assert "system_prompt" not in update and "mode" not in update


# -- in create_react_agent --------------------------------------------------------------------


def react_agent(saver: JsonlSaver, model: Any, pipeline: Any):
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain
        return create_react_agent(
            model,
            [lookup],
            pre_model_hook=pipeline,
            state_schema=ContextAgentState,
            checkpointer=saver,
        )


def test_the_pipeline_as_create_react_agents_pre_model_hook(saver: JsonlSaver) -> None:
    model = StreamingScript(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": "Porto"}, "id": "c1"}]),
            lambda msgs: f"answer {len(msgs)}",
        ]
    )
    pipeline = context_pipeline(
        ContextBudget(total=1_800, output_reserve=200),
        tools=[lookup],
        prompt=PARTS,
        mode="agent",
        target=0.6,
    )
    agent = react_agent(saver, model, pipeline)
    state = agent.invoke({"messages": [("user", "Tell me about Porto.")]}, config("r"))
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    for sent in model.received:
        assert one_prompt(sent).content == compose_system_prompt("agent", PARTS)
    assert model.received[1][-1].type == "tool"  # the tool result went through the pipeline
    assert state["context_usage"].breakdown["tools"] == exact([], [lookup]) - exact([])

    # Mode switch, then enough turns to compact: the agent sends the pipeline's view.
    agent.invoke({"messages": [("user", words(0))], "mode": "run", "run_context": RUN}, config("r"))
    assert "NODE_BRIEF" in model.received[-1][0].content
    for i in range(1, 14):
        state = agent.invoke({"messages": [("user", words(i))]}, config("r"))
    assert state["compaction_log"], "the small budget must have been compacted"
    sent = model.received[-1]
    assert len(sent) < len(state["messages"])
    assert [m.content for m in sent] == [m.content for m in state["llm_input_messages"]]
    one_prompt(sent)
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])
    cold = react_agent(JsonlSaver(saver.storage.root), model, pipeline).get_state(config("r"))
    assert len(cold.values["messages"]) == len(state["messages"])


# -- in create_agent (langchain) --------------------------------------------------------------


def agent_with_middleware(saver: JsonlSaver, model: Any, pipeline: Any, **limits: Any):
    # The `agents` extra (langchain) is part of the test dependencies: fail loudly without it.
    from langchain.agents import create_agent

    return create_agent(
        model,
        [lookup, explode],
        middleware=[pipeline.middleware(offer_tools=False, **limits)],
        checkpointer=saver,
    )


@tool
def explode(what: str) -> str:
    """Always fails."""
    raise RuntimeError(f"cannot explode {what}")


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_the_pipeline_as_create_agent_middleware(
    saver: JsonlSaver, asynchronous: bool
) -> None:
    model = StreamingScript(
        script=[
            AIMessage("", tool_calls=[{"name": "explode", "args": {"what": "moon"}, "id": "c1"}]),
            lambda msgs: f"answer {len(msgs)}",
        ]
    )
    pipeline = context_pipeline(
        ContextBudget(total=1_800, output_reserve=200), prompt=PARTS, mode="agent", target=0.6
    )
    agent = agent_with_middleware(saver, model, pipeline, tool_errors=True)

    async def run(inputs: dict[str, Any]) -> dict[str, Any]:
        if asynchronous:
            return await agent.ainvoke(inputs, config("m"))
        return agent.invoke(inputs, config("m"))

    state = await run({"messages": [("user", "blow it up")]})
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]
    for sent in model.received:
        assert sent[0].content == compose_system_prompt("agent", PARTS)
        assert [m.type for m in sent].count("system") == 1
    # The tools the request really sent are counted; the failing tool was recorded.
    assert state["context_usage"].breakdown["tools"] == exact([], [lookup, explode]) - exact([])
    [record] = state["error_notebook"]
    assert record["tool_name"] == "explode" and record["error_type"] == "RuntimeError"
    assert state["messages"][2].status == "error"

    await run({"messages": [("user", words(0))], "mode": "run", "run_context": RUN})
    assert "NODE_BRIEF" in model.received[-1][0].content
    for i in range(1, 14):
        state = await run({"messages": [("user", words(i))]})
    assert state["compaction_log"]
    sent = model.received[-1]
    assert len(sent) < len(state["messages"])
    assert exact(sent, [lookup, explode]) == state["context_usage"].used
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])


def test_create_agent_keeps_an_interrupted_reply_for_continue(saver: JsonlSaver) -> None:
    failing = Cut("First we load the data, then we clean it.", 6, error=ConnectionError("reset"))
    model = StreamingScript(script=[failing, "then we clean it."])
    agent = agent_with_middleware(saver, model, context_pipeline("fast", prompt=PARTS))
    state = agent.invoke({"messages": [("user", "plan")]}, config("x"))
    failed = state["messages"][-1]
    assert is_llm_error(failed) and failed.content.startswith("First we load the data, then\n\n")
    assert state["error_notebook"][0]["kind"] == "llm_error"
    state = agent.invoke({"messages": [("user", "continue")]}, config("x"))
    assert is_llm_error(model.received[-1][-2]) and state["messages"][-1].content.startswith(
        "then we clean"
    )


def test_a_missing_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware.types", None)
    monkeypatch.delitem(sys.modules, "langgraph_ctx.nodes.middleware", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'langgraph-ctx\[agents\]'"):
        importlib.import_module("langgraph_ctx.nodes.middleware")
    with pytest.raises(ImportError, match=r"langgraph-ctx\[agents\]"):
        context_pipeline("fast").middleware()


def test_one_home_for_the_state_keys() -> None:
    """Every state schema of the package declares the keys of `ContextKeys`."""
    pytest.importorskip("langchain.agents.middleware")
    from langgraph_ctx.nodes.middleware import ContextMiddlewareState
    from langgraph_ctx.nodes.pipeline import PIPELINE_KEYS
    from langgraph_ctx.nodes.state import PIPELINE_KEYS as STATE_PIPELINE_KEYS
    from langgraph_ctx.nodes.state import ContextKeys

    assert PIPELINE_KEYS is STATE_PIPELINE_KEYS
    assert set(PIPELINE_KEYS) < set(ContextKeys.__annotations__)
    for schema in (ContextState, ContextAgentState, ContextMiddlewareState):
        assert set(ContextKeys.__annotations__) <= set(schema.__annotations__), schema


def test_the_pipeline_counts_like_the_budget_node() -> None:
    """The pipeline's `context_usage` is `BudgetNode.measure` of what it sends."""
    pipeline = context_pipeline("fast", model="gpt-4o", prompt=PARTS, compaction=False)
    state = {"messages": [("user", "hi"), ("ai", "hello"), ("user", "and now?")], "mode": "agent"}
    update = pipeline.invoke(state)
    prompt = update["llm_input_messages"][0].content
    assert update["system_prompt"] == prompt
    alone = pipeline.budget.usage({**state, "system_prompt": prompt})
    assert update["context_usage"].used == alone.used


def test_a_prompt_and_tools_over_the_target_still_get_the_window_they_fit(
    tmp_path: Path,
) -> None:
    """Twenty-eight tools (1,832 tokens of schemas) and a prompt take more than the "fast"
    preset's target: once the chat passed the trigger, every turn raised `CompactionError`
    ("target leaves no room for messages") though the request fit the window, and the
    thread was stuck. The target is a goal: the messages now get what the window leaves."""
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import StructuredTool

    from langgraph_ctx.testing import ScriptedChatModel

    def crm(customer_id: str, region: str, limit: int = 10) -> str:
        return "ok"

    description = (
        "CRM action {}: looks up the customer's orders, invoices and shipments in the given "
        "region and returns a table of the most recent entries with their status."
    )
    tools = [
        StructuredTool.from_function(crm, name=f"crm_action_{i}", description=description.format(i))
        for i in range(28)
    ]
    model = ScriptedChatModel(script=["Sure. " + "detail " * 60], model_name="gpt-4o")
    pipeline = context_pipeline("fast", model="gpt-4o", tools=tools, mode="agent")
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=tools))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    graph = builder.compile(checkpointer=JsonlSaver(tmp_path))
    window = ContextBudget.preset("fast")
    for i in range(12):
        text = f"turn {i}: " + "please check things " * 20
        state = graph.invoke({"messages": [HumanMessage(text)]}, config("tools"))
        assert state["messages"][-1].content.startswith("Sure.")
    sent = model.received[-1]
    assert count_tokens(sent, model="gpt-4o", tools=tools) <= window.input_capacity
    assert any(r["tokens_after"] < r["tokens_before"] for r in state["compaction_log"])


def test_one_pipeline_in_two_graphs_with_the_same_thread_id_does_not_warn(
    tmp_path: Path,
) -> None:
    """A notebook rebuilds its graph with the same pipeline object and thread "t": the
    compaction node remembered writing a cursor to "t" and warned, falsely, that its
    writes did not reach the state. A thread is now told apart by its checkpointer too;
    a state that really lacks the keys still warns (`test_compaction_node`)."""
    from langgraph_ctx.testing import ScriptedChatModel

    pipeline = context_pipeline("fast", model="gpt-4o", mode="agent")
    for run in range(2):
        builder = StateGraph(ContextState)
        builder.add_node("model", ModelNode(ScriptedChatModel(script=["ok"], model_name="gpt-4o")))
        builder.add_edge(START, pipeline.add_to(builder, before="model"))
        graph = builder.compile(checkpointer=JsonlSaver(tmp_path / f"run{run}"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for turn in range(2):
                graph.invoke({"messages": [("user", f"hello {turn}")]}, config("t"))
