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
from langgraph.types import Send

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


def _send_graph(saver: Any) -> Any:
    """``plan`` edits the first message in place and sends the whole state to ``work``,
    which is interrupted before it runs: the `Send` (its state's message list) is
    what the log holds of the pending step."""

    def plan(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if messages[-1].content == "edit":
            messages[0].additional_kwargs["flag"] = "set"
        return {"messages": [AIMessage(f"plan {len(messages)}")]}

    def fan_out(state: MessagesState) -> list[Send]:
        return [Send("work", {"messages": state["messages"]})]

    def work(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("done")]}

    builder = StateGraph(MessagesState)
    builder.add_node(plan)
    builder.add_node(work)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan_out, ["work"])
    return builder.compile(checkpointer=saver, interrupt_before=["work"])


def _sent_messages(saver: Any) -> list[Any]:
    """The messages of the pending `Send`'s state, as the saver reads them back."""
    found = saver.get_tuple(CONFIG)
    sends = [w[2] for w in found.pending_writes if isinstance(w[2], Send)]
    sends += [s for s in found.checkpoint["channel_values"].get("__pregel_tasks", [])]
    assert sends, "the pending Send is in the log"
    return sends[-1].arg["messages"]  # type: ignore[no-any-return]


def test_a_message_edited_in_place_is_saved_inside_a_send(tmp_path) -> None:
    saver = JsonlSaver(tmp_path)
    graph = _send_graph(saver)
    graph.invoke({"messages": [HumanMessage("first")]}, CONFIG)
    graph.invoke(None, CONFIG)  # run `work`
    graph.invoke({"messages": [HumanMessage("edit")]}, CONFIG)
    for reader in (saver, JsonlSaver(tmp_path)):  # warm, then a fresh process
        sent = _sent_messages(reader)
        assert [m.content for m in sent] == ["first", "plan 1", "done", "edit", "plan 4"]
        assert sent[0].additional_kwargs == {"flag": "set"}


def test_nested_lists_encode_as_message_by_message(tmp_path) -> None:
    """`_Batch.refs` (a list checked whole against known lists) gives the ordinals that
    `_Batch.ref`, one message at a time, gives: shared, edited and new messages."""
    from langgraph_ctx.saver._batch import _Batch

    saver = JsonlSaver(tmp_path)
    graph = _send_graph(saver)
    graph.invoke({"messages": [HumanMessage("first")]}, CONFIG)
    graph.invoke(None, CONFIG)
    state = graph.get_state(CONFIG).values["messages"]
    with saver._view("t", exclusive=True) as index:
        cases = [
            state,  # the head's list, as read
            state[:2],  # its first part
            [*state, AIMessage("new")],  # and a message the log does not hold
            [state[1], state[0]],  # another order
        ]
        edited = [m.model_copy(deep=True) for m in state]
        edited[1].response_metadata["x"] = 1
        cases.append(edited)  # equal objects, one of them changed
        for case in cases:
            whole = _Batch(index, saver.serde).refs(case)
            one_by_one = _Batch(index, saver.serde)
            assert whole == [one_by_one.ref(m) for m in case]
        state[0].additional_kwargs["late"] = True  # edited in place after it was read
        batch = _Batch(index, saver.serde)
        refs = batch.refs(state)
        assert refs[1:] == _Batch(index, saver.serde).refs(state)[1:]
        assert refs[0] not in _Batch(index, saver.serde).refs(state[1:])
        assert [line["t"] for line in batch.lines] == ["msg"]  # the edit, saved anew
