"""The context pipeline in a graph whose messages reducer is `operator.add`.

LangGraph allows any reducer for `messages`. With `operator.add` nothing gives a message
an id (`ToolNode`'s results have none; `add_messages` would add one) and nothing merges
two messages with one id (a host that reuses an id, a model whose replies all carry the
same one). The pipeline must still send the latest user message, every tool call with
its results, and no more than the budget, and keep its compacted view from step to
step: a message is never recognised by its id alone.
"""

from __future__ import annotations

import operator
import warnings
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.compaction import CompactionError, CompactionRecord
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.nodes.compaction import CompactionNode
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextKeys, ContextState, compaction_history
from langgraph_ctx.testing import ScriptedChatModel, ordering_problems

TOTAL, RESERVE = 3_000, 200


class AppendState(ContextKeys):
    """`ContextKeys` with `messages` appended by `operator.add` (no ids, no merging)."""

    messages: Annotated[list[AnyMessage], operator.add]


@tool
def census(city: str) -> str:
    """Look up a city's census rows."""
    rows = "\n".join(f"row {i} of the {city} census: {i * 37} households" for i in range(120))
    return f"{city}: population 545,000\n{rows}"


def replies(reply_id: str | None) -> ScriptedChatModel:
    """A model that calls `census` at every other question and otherwise answers."""
    calls = 0

    def reply(messages: list[BaseMessage]) -> AIMessage:
        nonlocal calls
        calls += 1
        rid = reply_id or f"run-{calls}"
        if isinstance(messages[-1], HumanMessage) and calls % 2 == 0:
            call = {"name": "census", "args": {"city": f"c{calls}"}, "id": f"call{calls}"}
            return AIMessage("", tool_calls=[{**call, "type": "tool_call"}], id=rid)
        return AIMessage(f"answer {calls}: " + "words " * 40, id=rid)

    return ScriptedChatModel(script=[reply])


def agent(saver: Any, model: ScriptedChatModel, pipeline: Any) -> Any:
    builder = StateGraph(AppendState)
    builder.add_node("model", ModelNode(model, tools=[census]))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_node("tools", ToolNode([census]))
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def savers(tmp_path: Path) -> list[Any]:
    return [InMemorySaver(), JsonlSaver(tmp_path / "chats")]


@pytest.mark.parametrize(
    ("user_id", "reply_id"),
    [(None, None), ("u", None), (None, "reply"), ("u", "reply")],
    ids=["no-shared-ids", "one-user-id", "one-reply-id", "both"],
)
def test_every_request_keeps_the_latest_question_the_pairs_and_the_budget(
    tmp_path: Path, user_id: str | None, reply_id: str | None
) -> None:
    for saver in savers(tmp_path):
        model = replies(reply_id)
        pipeline = context_pipeline(
            ContextBudget(total=TOTAL, output_reserve=RESERVE), trigger=0.8, target=0.5
        )
        graph = agent(saver, model, pipeline)
        config: RunnableConfig = {"configurable": {"thread_id": f"t-{user_id}-{reply_id}"}}
        for i in range(24):
            question = f"question {i}: where is depot {i}? " + "padding " * 30
            before = len(model.received)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # ModelNode warns when it sends `messages`
                state = graph.invoke(
                    {"messages": [HumanMessage(question, id=user_id or f"u{i}")]}, config
                )
            assert len(model.received) > before
            for sent in model.received[before:]:
                assert ordering_problems(sent) == [], (i, ordering_problems(sent))
                asked = [m for m in sent if isinstance(m, HumanMessage)]
                assert asked[-1].content == question, i
                assert count_tokens(sent, model="gpt-4o", tools=[census]) <= TOTAL - RESERVE, i
        records = [CompactionRecord.model_validate(r) for r in state["compaction_log"]]
        assert len(records) >= 3 and all(r.within_budget for r in records)
        history = state["messages"]  # whole: every question, call and result
        assert sum(isinstance(m, HumanMessage) for m in history) == 24
        results = [m for m in history if isinstance(m, ToolMessage)]
        assert len(results) == sum(bool(getattr(m, "tool_calls", None)) for m in history) > 10
        assert all(m.id is None for m in results)  # ToolNode gives none, operator.add neither


def test_a_reused_user_id_keeps_the_compacted_view(tmp_path: Path) -> None:
    """Compaction's cursor finds where it stopped although the new message has its id.

    The cursor remembered the id of the last message it read and looked for it from the
    end: the next question, under the same id, made it think the history was edited, so
    each step started over, dropped the view and compacted again. A reused id must
    send what distinct ids send.
    """

    def run(user_id: str | None) -> tuple[list[list[str]], int]:
        model = ScriptedChatModel(script=[lambda msgs: AIMessage(f"noted ({len(msgs)} in view)")])
        compaction = CompactionNode("window", trigger=("messages", 12), target=150)
        pipeline = context_pipeline("fast", compaction=compaction, prompt=False)
        builder = StateGraph(AppendState)
        builder.add_node("model", ModelNode(model))
        builder.add_edge(START, pipeline.add_to(builder, before="model"))
        graph = builder.compile(checkpointer=JsonlSaver(tmp_path / str(user_id)))
        config: RunnableConfig = {"configurable": {"thread_id": "notes"}}
        for i in range(20):
            text = f"note {i}: the depot at /srv/depot/{i}.csv holds {i * 37} pallets"
            graph.invoke({"messages": [HumanMessage(text, id=user_id or f"u{i}")]}, config)
            assert model.received[-1][-1].content == text
        requests = [[str(m.content) for m in sent] for sent in model.received]
        return requests, len(compaction_history(graph.get_state_history(config)))

    requests, fired = run("u")
    assert (requests, fired) == run(None)
    assert 1 < fired < 10  # it fired, and the view carried on in between
    assert len(requests[-1]) < 2 * 20 - 1


def test_the_model_node_refuses_a_stale_view_that_ends_with_another_message_of_that_id() -> None:
    """A view ending with an older message under the newest message's id is stale."""
    node = ModelNode(ScriptedChatModel(script=["ok"]))
    older = HumanMessage("What is the capital of Peru?", id="u")
    newest = HumanMessage("And of Chile?", id="u")
    state = {
        "messages": [older, AIMessage("Lima.", id="a"), newest],
        "llm_input_messages": [older],
    }
    with pytest.warns(UserWarning, match="from an earlier step"):
        assert node.input_messages(state) == state["messages"]
    # a view that is current is sent, also when nothing has an id
    plain = [HumanMessage("hi"), AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}])]
    result = ToolMessage("done", tool_call_id="c")
    current = {"messages": [*plain, result], "llm_input_messages": [plain[1], result]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert node.input_messages(current) == [plain[1], result]


def test_rewrite_messages_refuses_a_reducer_that_cannot_remove() -> None:
    """`rewrite_messages=True` writes `RemoveMessage(REMOVE_ALL)`; `operator.add` keeps it."""
    rewriting = context_pipeline("fast", compaction=CompactionNode(rewrite_messages=True))
    builder = StateGraph(AppendState)
    builder.add_node("model", ModelNode(ScriptedChatModel(script=["ok"])))
    with pytest.raises(CompactionError, match="add_messages"):
        rewriting.add_to(builder, before="model")
    # without the rewrite, or with add_messages, nothing to refuse
    assert context_pipeline("fast").add_to(builder, before="model") == "context"
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(ScriptedChatModel(script=["ok"])))
    assert rewriting.add_to(builder, before="model") == "context"


@pytest.mark.parametrize("again", ["call", "result"])
def test_a_call_or_result_appended_again_is_repaired_before_the_model_sees_it(
    tmp_path: Path, again: str
) -> None:
    """`operator.add` appends a message given again; `add_messages` would have merged it.

    A repeated assistant message with tool calls has no results after it, a repeated
    result answers nothing: providers refuse both. Below the trigger the pipeline sent
    the history as it was; now compaction runs to repair the request (once).
    """
    call = {"name": "census", "args": {"city": "Porto"}, "id": "c1", "type": "tool_call"}
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[call], id="a1"), "Done."])
    pipeline = context_pipeline(ContextBudget(total=100_000, output_reserve=RESERVE))
    graph = agent(JsonlSaver(tmp_path / "chats"), model, pipeline)
    config: RunnableConfig = {"configurable": {"thread_id": "again"}}
    state = graph.invoke({"messages": [HumanMessage("Census of Porto?", id="u1")]}, config)
    repeated = next(
        m
        for m in state["messages"]
        if isinstance(m, ToolMessage if again == "result" else AIMessage)
    )
    before = len(model.received)
    state = graph.invoke({"messages": [repeated, HumanMessage("And the total?", id="u2")]}, config)
    sent = model.received[before]
    assert ordering_problems(sent) == [] and sent[-1].content == "And the total?"
    assert repeated in state["messages"][-4:]  # the history keeps what it was given
    (record,) = [CompactionRecord.model_validate(r) for r in state["compaction_log"]]
    assert record.reason.startswith("repair: ") and record.repairs, record.reason
    # the next question appends to the repaired view: no new compaction
    before = len(model.received)
    state = graph.invoke({"messages": [HumanMessage("Thanks.", id="u3")]}, config)
    assert ordering_problems(model.received[before]) == []
    assert len(state["compaction_log"]) == 1


def test_an_invalid_tool_call_answered_by_an_error_result_is_no_break() -> None:
    """A call the model emitted with unparsable arguments (`invalid_tool_calls`) answered
    by an error result, as `create_agent` answers it, is a pair providers accept: no
    repair compaction runs for it, and the request keeps the call with its result."""
    from langgraph_ctx.nodes.compaction import broken_pairing

    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "f", "args": "{oops", "id": "c1", "error": "bad json",
             "type": "invalid_tool_call"}
        ],
        id="a1",
    )  # fmt: skip
    error = ToolMessage("Error: could not parse arguments", tool_call_id="c1", status="error")
    assert broken_pairing([HumanMessage("go", id="u1"), bad, error]) is None
    assert broken_pairing([HumanMessage("go", id="u1"), bad, error, error]) is not None

    model = ScriptedChatModel(script=[bad, "fixed"])
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model))
    entry = context_pipeline(ContextBudget(total=100_000, output_reserve=200)).add_to(
        builder, before="model"
    )
    builder.add_edge(START, entry)

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [error.model_copy(update={"tool_call_id": c["id"]})
                             for c in last.invalid_tool_calls]}  # fmt: skip

    builder.add_node("tools", tools)
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].invalid_tool_calls else "__end__"
    )
    builder.add_edge("tools", entry)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "invalid"}}
    state = graph.invoke({"messages": [HumanMessage("go", id="u1")]}, config)
    assert len(state["messages"]) == 4  # the question, the call, its result, the answer
    assert not state.get("compaction_log")
    sent = model.received[1]
    assert [type(m).__name__ for m in sent[1:]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert sent[3].tool_call_id == "c1" and sent[2].invalid_tool_calls[0]["id"] == "c1"
