"""Failed model calls kept as LLM_ERROR messages, "continue", timeouts, retries, the notebook."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import RetryPolicy

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.llm_error import (
    LLM_ERROR_MARKER,
    classify_error,
    is_llm_error,
    llm_error_message,
    read_llm_error,
)
from langgraph_ctx.context.model_call import Invoke, ModelCallPolicy, Wait, drive_sync
from langgraph_ctx.context.notebook import (
    NOTEBOOK_SIZE,
    add_errors,
    errors_in,
    notebook_reducer,
    tool_error_record,
)
from langgraph_ctx.context.prompt import PromptParts
from langgraph_ctx.errors import ModelTimeoutError
from langgraph_ctx.nodes.errors import ModelNode, arecord_tool_errors, record_tool_errors
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import Cut, StreamingScript

PARTIAL = "The plan: first we load the sales data, then we clean it, then"


def chat_graph(saver: JsonlSaver, model: Any, **node: Any):
    """START -> context pipeline -> ModelNode, on ContextState."""
    pipeline = context_pipeline("fast", prompt=PromptParts(persona="You are Ada."), mode="agent")
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, **node))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    return builder.compile(checkpointer=saver)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def cut(after: int = len(PARTIAL.split(" ")), **kwargs: Any) -> Cut:
    """The reply `PARTIAL + " we chart it."`, cut off after `after` words (all of PARTIAL)."""
    return Cut(PARTIAL + " we chart it.", after, **kwargs)


# -- the message ------------------------------------------------------------------------------


def test_an_interrupted_stream_leaves_a_partial_message_and_llm_error_the_next_turn_sees(
    saver: JsonlSaver,
) -> None:
    model = StreamingScript(
        script=[cut(error=ConnectionResetError("connection reset by peer")), "then we chart it."]
    )
    graph = chat_graph(saver, model)
    state = graph.invoke({"messages": [("user", "plan the report")]}, config("t"))

    failed = state["messages"][-1]
    assert isinstance(failed, AIMessage) and is_llm_error(failed)
    assert failed.content.startswith(PARTIAL + "\n\nLLM_ERROR\n- kind: network\n")
    assert "- error: ConnectionResetError: connection reset by peer" in failed.content
    assert f"- partial_output: {len(PARTIAL)} characters above" in failed.content
    assert not failed.tool_calls
    info = read_llm_error(failed)
    assert info is not None and info.kind == "network" and info.partial_chars == len(PARTIAL)
    assert failed.additional_kwargs == {LLM_ERROR_MARKER[0]: LLM_ERROR_MARKER[1]}
    assert failed.response_metadata["langgraph_ctx"] == {"mode": "agent"}
    [record] = state["error_notebook"]
    assert record["kind"] == "llm_error" and record["error_type"] == "ConnectionResetError"
    assert record["message_id"] == failed.id and record["partial_chars"] == len(PARTIAL)

    state = graph.invoke({"messages": [("user", "continue")]}, config("t"))
    sent = model.received[1]
    assert [m.type for m in sent] == ["system", "human", "ai", "human"]
    assert sent[2].content == failed.content and sent[3].content == "continue"
    assert state["messages"][-1].content == "then we chart it."
    assert len(state["error_notebook"]) == 1  # recorded once, though seen twice

    # The failure is in the thread file, marks included, and comes back from a cold saver.
    cold = chat_graph(JsonlSaver(saver.storage.root), model).get_state(config("t"))
    again = cold.values["messages"][1]
    assert is_llm_error(again) and read_llm_error(again) == info
    lines = Path(saver.path("t")).read_text().splitlines()
    assert any("LLM_ERROR" in line and '"langgraph_ctx":"llm_error"' in line for line in lines)


async def test_async_interrupted_stream_and_continue(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[cut(error=ConnectionError("network down")), "resumed"])
    graph = chat_graph(saver, model)
    state = await graph.ainvoke({"messages": [("user", "plan")]}, config("a"))
    assert is_llm_error(state["messages"][-1])
    assert state["messages"][-1].content.startswith(PARTIAL)
    state = await graph.ainvoke({"messages": [("user", "continue")]}, config("a"))
    assert model.received[1][-2].content.startswith(PARTIAL + "\n\nLLM_ERROR")
    assert state["messages"][-1].content == "resumed"


def test_an_unfinished_tool_call_is_listed_not_sent(saver: JsonlSaver) -> None:
    @tool
    def search(q: str) -> str:
        """Search the web."""
        return "nothing"

    call = {"name": "search", "args": {"q": "lisbon weather"}, "id": "c1"}
    model = StreamingScript(
        script=[Cut("Let me look that up", 4, error=ConnectionError("eof"), tool_call=call)]
    )
    state = chat_graph(saver, model, tools=[search]).invoke(
        {"messages": [("user", "weather?")]}, config("tc")
    )
    failed = state["messages"][-1]
    assert is_llm_error(failed) and not failed.tool_calls and not failed.invalid_tool_calls
    assert '- unfinished_tool_call: search({"q": "lisb (cut off, not run)' in failed.content
    assert read_llm_error(failed).unfinished_tool_calls == ['search({"q": "lisb']  # type: ignore[union-attr]


def test_error_kinds() -> None:
    class APITimeoutError(Exception):  # a provider SDK's own class, unrelated to TimeoutError
        pass

    class APIConnectionError(Exception):
        pass

    assert classify_error(TimeoutError()) == "timeout"
    assert classify_error(ModelTimeoutError(3)) == "timeout"
    assert classify_error(APITimeoutError()) == "timeout"
    assert classify_error(ConnectionResetError()) == "network"
    assert classify_error(APIConnectionError()) == "network"
    assert classify_error(ValueError("bad request")) == "error"
    message = llm_error_message(ValueError("x" * 2_000))
    assert read_llm_error(message).message.endswith("…")  # type: ignore[union-attr]
    assert "- partial_output: none" in message.content
    assert message.content.startswith("LLM_ERROR\n")


# -- timeouts ---------------------------------------------------------------------------------


def warm_up(saver: JsonlSaver) -> None:
    """Run the graph's code paths once (tokenizer load, first imports) off the clock, so
    the timing bounds below measure the timeouts, not a cold process or a fresh venv."""
    chat_graph(saver, StreamingScript(script=["warm"])).invoke(
        {"messages": [("user", "hi")]}, config("warm-up")
    )


def test_a_stalled_stream_times_out_with_its_partial_text(saver: JsonlSaver) -> None:
    warm_up(saver)
    model = StreamingScript(script=[cut(after=6, stall=3.0), "ok"])
    graph = chat_graph(saver, model, chunk_timeout=0.3)
    started = time.monotonic()
    state = graph.invoke({"messages": [("user", "plan")]}, config("slow"))
    assert time.monotonic() - started < 2.0  # did not wait for the stalled model
    failed = state["messages"][-1]
    info = read_llm_error(failed)
    assert info is not None and info.kind == "timeout" and info.error_type == "ModelTimeoutError"
    assert info.message == "no output within 0.3 s"
    assert failed.content.startswith(" ".join(PARTIAL.split(" ")[:6]) + "\n\nLLM_ERROR")


async def test_an_async_call_past_its_total_timeout_is_cancelled(saver: JsonlSaver) -> None:
    # The stalled stream runs in the loop's executor (no native async stream): keep it short.
    await asyncio.to_thread(warm_up, saver)
    model = StreamingScript(script=[cut(after=3, stall=1.0), "ok"])
    graph = chat_graph(saver, model, timeout=0.3)
    started = time.monotonic()
    state = await graph.ainvoke({"messages": [("user", "plan")]}, config("slow-async"))
    assert time.monotonic() - started < 0.9
    info = read_llm_error(state["messages"][-1])
    assert info is not None and info.message == "no complete reply within 0.3 s"
    assert info.partial_chars == len(" ".join(PARTIAL.split(" ")[:3]))


# -- retries and what propagates --------------------------------------------------------------


def test_failures_before_any_output_are_retried(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[ConnectionError("down"), TimeoutError("slow"), "ok now"])
    state = chat_graph(saver, model, max_retries=2, retry_delay=0).invoke(
        {"messages": [("user", "hi")]}, config("retry")
    )
    assert state["messages"][-1].content == "ok now" and len(model.received) == 3
    assert not state.get("error_notebook")

    model = StreamingScript(script=[ConnectionError("down")])
    state = chat_graph(saver, model, max_retries=2, retry_delay=0).invoke(
        {"messages": [("user", "hi")]}, config("retry-out")
    )
    assert read_llm_error(state["messages"][-1]).attempts == 3  # type: ignore[union-attr]


def test_a_failure_after_streamed_output_is_not_retried(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[cut(error=ConnectionError("reset")), "never sent"])
    state = chat_graph(saver, model, max_retries=3, retry_delay=0).invoke(
        {"messages": [("user", "hi")]}, config("no-retry")
    )
    assert len(model.received) == 1
    assert read_llm_error(state["messages"][-1]).attempts == 1  # type: ignore[union-attr]


def test_raise_on_lets_errors_reach_langgraphs_retry_policy(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[ValueError("bad request"), "fine"])
    pipeline = context_pipeline("fast")
    builder = StateGraph(ContextState)
    builder.add_node(
        "model",
        ModelNode(model, raise_on=(ValueError,)),
        retry_policy=RetryPolicy(
            max_attempts=2, initial_interval=0, jitter=False, retry_on=ValueError
        ),
    )
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    state = builder.compile(checkpointer=saver).invoke(
        {"messages": [("user", "hi")]}, config("policy")
    )
    assert state["messages"][-1].content == "fine" and len(model.received) == 2

    model = StreamingScript(script=[ValueError("bad request")])
    graph = chat_graph(saver, model, raise_on=(ValueError,))
    with pytest.raises(ValueError, match="bad request"):
        graph.invoke({"messages": [("user", "hi")]}, config("raises"))


# -- streaming --------------------------------------------------------------------------------


def test_stream_mode_messages_sends_the_chunks_then_the_llm_error_message(
    saver: JsonlSaver,
) -> None:
    graph = chat_graph(saver, StreamingScript(script=[cut(error=ConnectionError("reset"))]))
    events = [
        message
        for message, meta in graph.stream(
            {"messages": [("user", "hi")]}, config("stream"), stream_mode="messages"
        )
        if meta["langgraph_node"] == "model"
    ]
    chunks, final = events[:-1], events[-1]
    assert "".join(c.content for c in chunks).strip() == PARTIAL
    assert {c.id for c in chunks} == {chunks[0].id}
    assert is_llm_error(final) and final.id == f"{chunks[0].id}~llm-error"
    assert read_llm_error(final).streamed_id == chunks[0].id  # type: ignore[union-attr]


# -- the model node's input -------------------------------------------------------------------


def test_a_stale_llm_input_is_not_sent() -> None:
    model = StreamingScript(script=["ok"])
    node = ModelNode(model)
    stale = [HumanMessage("old question", id="h0")]
    state = {"messages": [*stale, AIMessage("a", id="a0"), HumanMessage("new", id="h1")]}
    with pytest.warns(UserWarning, match="from an earlier step"):
        node.invoke({**state, "llm_input_messages": stale})
    assert [m.content for m in model.received[0]] == ["old question", "a", "new"]


# -- tools ------------------------------------------------------------------------------------


@tool
def book_courier(order: str) -> str:
    """Book a courier for an order."""
    if order == "48213":
        raise RuntimeError(f"order {order} is on hold")
    return f"booked {order}"


def agent_graph(saver: JsonlSaver, model: Any, tool_node: ToolNode):
    pipeline = context_pipeline("fast", tools=[book_courier], mode="agent")
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=[book_courier]))
    builder.add_node("tools", tool_node)
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def calls(order: str, call_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "book_courier", "args": {"order": order}, "id": call_id}]
    )


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_raising_tool_becomes_an_error_result_and_a_record(
    saver: JsonlSaver, asynchronous: bool
) -> None:
    model = StreamingScript(script=[calls("48213", "c1"), "It is on hold."])
    tools = ToolNode(
        [book_courier], wrap_tool_call=record_tool_errors, awrap_tool_call=arecord_tool_errors
    )
    graph = agent_graph(saver, model, tools)
    inputs = {"messages": [("user", "ship 48213")]}
    if asynchronous:
        state = await graph.ainvoke(inputs, config("tools"))
    else:
        state = graph.invoke(inputs, config("tools"))
    result = state["messages"][2]
    assert isinstance(result, ToolMessage) and result.status == "error"
    assert "RuntimeError: order 48213 is on hold" in result.content
    assert model.received[1][-1].content == result.content  # the model saw the error
    [record] = state["error_notebook"]
    assert record["kind"] == "tool_error" and record["tool_name"] == "book_courier"
    assert record["error_type"] == "RuntimeError" and record["message"] == "order 48213 is on hold"
    assert record["tool_call_id"] == "c1"


def test_tool_errors_that_toolnode_handled_are_recorded_by_the_pipeline(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[calls("48213", "c1"), "On hold.", calls("7", "c2"), "Done."])
    graph = agent_graph(saver, model, ToolNode([book_courier], handle_tool_errors=True))
    state = graph.invoke({"messages": [("user", "ship 48213")]}, config("handled"))
    [record] = state["error_notebook"]
    assert record["id"] == "tool:c1" and record["error_type"] == "RuntimeError"
    state = graph.invoke({"messages": [("user", "ship 7")]}, config("handled"))
    assert len(state["error_notebook"]) == 1  # successes add nothing, nothing twice


# -- the notebook -----------------------------------------------------------------------------


def test_the_notebook_reducer_appends_dedupes_and_keeps_the_newest() -> None:
    def rec(i: int) -> dict[str, Any]:
        return {
            "id": f"tool:c{i}",
            "kind": "tool_error",
            "error_type": "E",
            "message": "",
            "at": "",
        }

    notebook = add_errors([], [rec(i) for i in range(30)])
    notebook = add_errors(notebook, [rec(5), *[rec(i) for i in range(30, 60)]])
    assert len(notebook) == NOTEBOOK_SIZE == 50
    assert [r["id"] for r in notebook] == [f"tool:c{i}" for i in range(10, 60)]
    assert add_errors(None, rec(1)) == [rec(1)]
    assert len(notebook_reducer(3)([], [rec(i) for i in range(9)])) == 3
    with pytest.raises(TypeError, match="ErrorRecord"):
        add_errors([], ["not a record"])


def test_the_notebook_keeps_a_sliding_window_of_50_in_a_real_graph(saver: JsonlSaver) -> None:
    model = StreamingScript(script=[ConnectionError("down")])
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model))
    builder.add_edge(START, "model")
    graph = builder.compile(checkpointer=saver)
    ids = []
    for i in range(55):
        state = graph.invoke({"messages": [("user", f"try {i}")]}, config("window"))
        ids.append(state["messages"][-1].id)
    notebook = state["error_notebook"]
    assert len(notebook) == 50
    assert [r["message_id"] for r in notebook] == ids[5:]
    lines = Path(saver.path("window")).read_text().splitlines()
    last = JsonlSaver(saver.storage.root).get_tuple(config("window"))
    assert last is not None and len(last.checkpoint["channel_values"]["error_notebook"]) == 50
    assert json.loads(lines[0])["t"] == "thread"


def test_errors_in_reads_only_what_follows_the_last_model_call() -> None:
    old = ToolMessage("Error: KeyError('x')", tool_call_id="old", status="error", name="t")
    new = ToolMessage("Error: ValueError('bad')\n Please fix", tool_call_id="new", status="error")
    messages = [
        HumanMessage("q"),
        calls("1", "old"),
        old,
        AIMessage("retrying"),
        calls("2", "new"),
        new,
    ]
    [record] = errors_in(messages, step=4, mode="agent", run_id=None)
    assert record["id"] == "tool:new" and record["error_type"] == "ValueError"
    assert record["step"] == 4
    assert tool_error_record(old)["error_type"] == "KeyError"


# -- the one model-call driver ----------------------------------------------------------


def test_one_retry_policy_backs_off_and_retries_rejected_replies() -> None:
    """The summarizer's rule (an unusable reply is retried) is the model node's policy."""
    replies = iter(["", "", "a summary"])
    policy = ModelCallPolicy(max_retries=2, retry_delay=0.5, partial_output=False)
    steps = policy.attempts(
        lambda: next(replies), check=lambda reply: None if reply else "empty reply"
    )
    requests = []
    request = next(steps)
    try:
        while True:
            requests.append(request)
            answer = request.policy.call_sync(request.call) if isinstance(request, Invoke) else None
            request = steps.send(answer)
    except StopIteration as stop:
        outcome, attempts = stop.value
    assert [type(r).__name__ for r in requests] == ["Invoke", "Wait", "Invoke", "Wait", "Invoke"]
    assert [r.seconds for r in requests if isinstance(r, Wait)] == [0.5, 1.0]
    assert outcome.result == "a summary" and not outcome.failed and attempts == 3


def test_the_last_rejected_reply_is_returned_with_its_reason() -> None:
    policy = ModelCallPolicy(max_retries=1, retry_delay=0.0)
    outcome, attempts = drive_sync(policy.attempts(lambda: "", check=lambda r: "empty reply"))
    assert attempts == 2 and outcome.rejected == "empty reply" and outcome.error is None


def test_summaries_and_the_model_node_share_the_driver() -> None:
    """`compact_messages` answers the summarizer's calls with the same `drive_sync`."""
    from langgraph_ctx.context.compaction import core, summarizer
    from langgraph_ctx.nodes import errors, middleware, pipeline

    for module in (core, errors, middleware, pipeline):
        assert module.drive_sync is drive_sync
    assert summarizer.ModelCallPolicy is errors.ModelCallPolicy is ModelCallPolicy


def test_an_abandoned_call_logs_no_callback_error(caplog: pytest.LogCaptureFixture) -> None:
    """A sync call past `chunk_timeout` is abandoned (the reply keeps what came); when
    its thread then streams its next token, the capture stops it by raising
    `ModelCallAbandoned`, which LangChain logged as "Error in ... callback": noise
    that read as a failure, for a time-out already handled."""
    import logging

    from langgraph_ctx.nodes.errors import ModelNode
    from langgraph_ctx.nodes.state import ContextState
    from langgraph_ctx.testing import Cut, StreamingScript

    model = StreamingScript(script=[Cut("Here is the plan: first we load the data", 4, stall=0.5)])
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, chunk_timeout=0.1))
    builder.add_edge(START, "model")
    with caplog.at_level(logging.WARNING):
        state = builder.compile().invoke({"messages": [("user", "plan")]})
        time.sleep(0.8)  # the abandoned thread reaches its next token
    assert is_llm_error(state["messages"][-1])
    assert not [r for r in caplog.records if "ModelCallAbandoned" in r.getMessage()]


@pytest.mark.parametrize("host", ["node", "agent"])
def test_an_abandoned_calls_late_token_is_not_streamed_after_the_llm_error(host: str) -> None:
    """A sync call past `chunk_timeout` is abandoned and its reply kept as an LLM_ERROR
    message; the abandoned thread's next token still reached ``stream_mode="messages"``,
    after that message and under the partial reply's id (trial 8): LangGraph's stream
    handler got the token before the capture stopped the call. The stream is told the run
    is over when the call is abandoned."""
    from langchain.agents import create_agent

    model = StreamingScript(script=[Cut("Here is the plan: first we load the data", 4, stall=0.6)])
    pipeline = context_pipeline("fast")
    if host == "node":
        builder = StateGraph(ContextState)
        builder.add_node("model", ModelNode(model, chunk_timeout=0.15))
        builder.add_edge(START, pipeline.add_to(builder, before="model"))
        inner = builder
    else:
        agent = create_agent(model, [], middleware=[pipeline.middleware(chunk_timeout=0.15)])
        inner = StateGraph(ContextState)
        inner.add_node("model", agent)
        inner.add_edge(START, "model")
    inner.add_node("after", lambda state: time.sleep(1.2) or {})  # the stream stays open
    inner.add_edge("model", "after")
    events = [
        message
        for _, (message, _) in inner.compile().stream(
            {"messages": [("user", "plan")]}, stream_mode="messages", subgraphs=True
        )
        if isinstance(message, AIMessage)  # the chunks too
    ]
    error_at = next(i for i, m in enumerate(events) if is_llm_error(m))
    assert "".join(m.content for m in events[:error_at]).split() == ["Here", "is", "the", "plan:"]
    assert events[error_at + 1 :] == [], [m.content for m in events[error_at + 1 :]]
