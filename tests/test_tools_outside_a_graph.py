"""`read_tool_result` and `search_history` called outside a graph say what they need.

They read the graph state, which `ToolNode` injects (`InjectedState`); called directly
they raised pydantic's "Field required" for `messages` or `state`, which did not say a
graph state was needed, nor how to give one in a test.
"""

from __future__ import annotations

import pickle

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from langgraph_ctx import MissingGraphStateError, read_tool_result, search_history

HISTORY = [
    HumanMessage("find the invoice", id="u1"),
    AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "call_1"}], id="a1"),
    ToolMessage("invoice 42 is paid", tool_call_id="call_1", id="t1"),
    HumanMessage("and who approved it?", id="u2"),  # (the current round is not searched)
]


def test_read_tool_result_outside_a_graph_says_how_to_pass_the_messages() -> None:
    with pytest.raises(MissingGraphStateError) as err:
        read_tool_result.invoke({"ref": "tool-result/call_1"})
    text = str(err.value)
    assert text.startswith("read_tool_result reads the graph state's messages, which ")
    assert "InjectedState" in text and "ToolNode" in text
    assert text.endswith(
        'read_tool_result.invoke({"ref": "tool-result/call_1", "messages": state["messages"]})'
    )
    assert isinstance(err.value, ValueError)  # as pydantic's error was


def test_search_history_outside_a_graph_says_how_to_pass_the_state() -> None:
    with pytest.raises(MissingGraphStateError, match="search_history reads the graph state") as err:
        search_history.invoke({"query": "invoice"})
    assert str(err.value).endswith(
        'search_history.invoke({"query": "invoice", "state": {"messages": state["messages"]}})'
    )


def test_the_ways_the_messages_name_work() -> None:
    text = read_tool_result.invoke({"ref": "tool-result/call_1", "messages": HISTORY})
    assert text == "invoice 42 is paid"
    found = search_history.invoke({"query": "paid", "state": {"messages": HISTORY}})
    assert "tool-result/call_1" in found


def test_the_model_still_sees_no_state_argument_and_tool_node_injects_it() -> None:
    for tool, shown in (
        (read_tool_result, {"ref", "offset", "limit"}),
        (search_history, {"query", "limit"}),
    ):
        assert set(tool.tool_call_schema.model_json_schema()["properties"]) == shown
    calls = [
        {"name": "read_tool_result", "args": {"ref": "tool-result/call_1"}, "id": "r1"},
        {"name": "search_history", "args": {"query": "paid"}, "id": "s1"},
    ]
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([read_tool_result, search_history]))
    builder.add_edge(START, "tools")
    out = builder.compile().invoke({"messages": [*HISTORY, AIMessage("", tool_calls=calls)]})
    read, search = out["messages"][-2:]
    assert read.content == "invoice 42 is paid" and read.status == "success"
    assert "tool-result/call_1" in search.content and search.status == "success"


def test_the_error_pickles() -> None:
    err = MissingGraphStateError("read_tool_result", "the graph state's messages", "x()")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is MissingGraphStateError and str(again) == str(err)
