"""The write path's shortcuts keep what it saves exact.

A put compares each message it shares with the parent's list against the
fingerprint taken when it was saved (`_unchanged`, a C-level tuple comparison for
messages whose dicts and lists are empty): a dict or list that was empty and is
filled in place must still count as an edit, and be saved.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.saver._index import _fingerprint, _unchanged

CONFIG = {"configurable": {"thread_id": "t"}}


def test_unchanged_is_the_fingerprint_comparison() -> None:
    plain = HumanMessage("hi", id="h")
    full = AIMessage("a", id="a", response_metadata={"usage": {"tokens": 3}})
    for message in (plain, full):
        fp = _fingerprint(message)
        assert _unchanged(message, fp)
        message.additional_kwargs["note"] = [1]  # an empty dict filled in place
        assert not _unchanged(message, fp) and _fingerprint(message) != fp
        message.additional_kwargs["note"].append(2)
        assert not _unchanged(message, _fingerprint(message) and fp)
        del message.additional_kwargs["note"]
        assert _unchanged(message, fp)
    fp = _fingerprint(full)
    full.response_metadata["usage"]["tokens"] = 4  # a full one changed deep inside
    assert not _unchanged(full, fp)
    assert _unchanged(HumanMessage("hi", id="h"), _fingerprint(plain))  # equal, not same


def _review_graph(saver: Any) -> Any:
    """``answer`` saves a reply; ``review`` then fills its empty dict and list in place."""

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    def review(state: MessagesState) -> dict[str, Any]:
        reply = state["messages"][-1]
        reply.additional_kwargs["flag"] = "set"
        reply.tool_calls.append(
            {"name": "search", "args": {"q": "x"}, "id": "call-1", "type": "tool_call"}
        )
        return {"messages": [AIMessage("reviewed")]}

    builder = StateGraph(MessagesState)
    builder.add_node(answer)
    builder.add_node(review)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", "review")
    return builder.compile(checkpointer=saver)


def test_empty_fields_filled_in_place_are_saved(tmp_path) -> None:
    saver = JsonlSaver(tmp_path)
    _review_graph(saver).invoke({"messages": [HumanMessage("first")]}, CONFIG)
    for reader in (saver, JsonlSaver(tmp_path)):  # warm, then a fresh process
        messages = reader.get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
        assert [m.content for m in messages] == ["first", "answer 1", "reviewed"]
        assert messages[1].additional_kwargs == {"flag": "set"}
        assert [c["args"] for c in messages[1].tool_calls] == [{"q": "x"}]


def _fill_graph(saver: Any) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if messages[-1].content == "fill":  # fill an empty dict of a message read back
            messages[0].additional_kwargs["flag"] = "set"
        return {"messages": [AIMessage(f"answer {len(messages)}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def test_an_empty_field_of_a_message_read_back_filled_in_place_is_saved(tmp_path) -> None:
    saver = JsonlSaver(tmp_path)
    graph = _fill_graph(saver)
    graph.invoke({"messages": [HumanMessage("first")]}, CONFIG)
    graph.invoke({"messages": [HumanMessage("fill")]}, CONFIG)
    messages = JsonlSaver(tmp_path).get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert messages[0].additional_kwargs == {"flag": "set"}
