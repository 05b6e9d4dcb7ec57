"""A message a node changes in place is saved (issue 11 point 4).

`InMemorySaver` and `SqliteSaver` serialize the whole list each step, so an
in-place edit (``messages[0].content = ...``, ``response_metadata[...] = ...``)
reaches them. Ours takes shared messages from the parent unread; a fingerprint
per message tells an edited one, which is written again as a new message line.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from tests.backends import Backend
from tests.graphs import single_node

CONFIG = {"configurable": {"thread_id": "t"}}


def _graph(saver: Any) -> Any:
    """Turn 1 answers; turn 2 edits earlier messages in place, then answers."""

    def bot(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if len(messages) == 1:
            reply = AIMessage(
                "first answer",
                response_metadata={"model_name": "m", "usage": {"tokens": 3}},
                tool_calls=[{"name": "search", "args": {"q": "old"}, "id": "c1"}],
            )
            return {"messages": [reply]}
        messages[0].content = "edited question"
        messages[1].response_metadata["usage"]["tokens"] = 99
        messages[1].response_metadata["reviewed"] = True
        messages[1].tool_calls[0]["args"]["q"] = "new"
        return {"messages": [("ai", f"answer {len(messages)}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _summary(messages: list[Any]) -> list[Any]:
    return [
        [
            m.type,
            m.content,
            m.response_metadata,
            [[c["name"], c["args"]] for c in getattr(m, "tool_calls", [])],
        ]
        for m in messages
    ]


def _two_turns(saver: Any) -> list[Any]:
    graph = _graph(saver)
    graph.invoke({"messages": [("user", "question")]}, CONFIG)
    out = graph.invoke({"messages": [("user", "again")]}, CONFIG)
    return _summary(out["messages"])


def _cold(backend: Backend) -> list[Any]:
    script = (
        "import json\n"
        f"saver = {backend.saver_code()}\n"
        "t = saver.get_tuple({'configurable': {'thread_id': 't'}})\n"
        "print(json.dumps([[m.type, m.content, m.response_metadata,"
        " [[c['name'], c['args']] for c in getattr(m, 'tool_calls', [])]]"
        " for m in t.checkpoint['channel_values']['messages']]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_in_place_edits_survive_a_cold_reopen_as_in_langgraphs_savers(
    backend: Backend, tmp_path: Any
) -> None:
    with sqlite3.connect(tmp_path / "ref.db", check_same_thread=False) as conn:
        expected = _two_turns(SqliteSaver(conn))
        sqlite_cold = _summary(
            SqliteSaver(conn).get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
        )
    memory = InMemorySaver()
    assert _two_turns(memory) == expected
    assert sqlite_cold == expected
    assert expected[0][1] == "edited question"
    assert expected[1][2]["usage"] == {"tokens": 99} and expected[1][2]["reviewed"] is True
    assert expected[1][3] == [["search", {"q": "new"}]]

    assert _two_turns(backend.saver()) == expected
    assert _cold(backend) == expected  # a fresh process
    fresh = backend.saver().get_tuple(CONFIG)
    assert _summary(fresh.checkpoint["channel_values"]["messages"]) == expected
    # nothing is lost: the log still holds the text as first saved
    assert '"question"' in backend.log_bytes("t").decode()


def _message_lines(backend: Backend) -> int:
    return sum('"t":"msg"' in line for line in backend.log_bytes("t").decode().splitlines())


@pytest.mark.parametrize("cold", [False, True])
def test_an_edit_costs_one_message_line_and_unchanged_ones_nothing(
    backend: Backend, cold: bool
) -> None:
    def bot(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if messages[-1].content == "edit":
            messages[2].content = "changed in place"
        return {"messages": [("ai", f"answer {len(messages)}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    saver = backend.saver()
    graph = builder.compile(checkpointer=saver)
    for i in range(5):
        graph.invoke({"messages": [("user", f"q{i}")]}, CONFIG)
    before = _message_lines(backend)
    if cold:  # the edited message was read from the log, not saved by this process
        graph = builder.compile(checkpointer=backend.saver())
    graph.invoke({"messages": [("user", "plain")]}, CONFIG)
    assert _message_lines(backend) == before + 2
    graph.invoke({"messages": [("user", "edit")]}, CONFIG)
    assert _message_lines(backend) == before + 5  # question, answer, the edited one
    contents = [m.content for m in backend.saver().get_tuple(CONFIG).checkpoint[
        "channel_values"]["messages"]]
    assert contents[2] == "changed in place" and contents[-2:] == ["edit", "answer 13"]
    assert contents[0] == "q0" and len(contents) == 14
    # the list is kept up to the edit (by whichever checkpoint of the step saw it first:
    # LangGraph may put the previous one in the background while the node edits)
    assert '"keep":2' in backend.log_bytes("t").decode().replace(" ", "")


def test_a_tool_call_given_a_key_in_place_reads_back_as_in_langgraphs_savers(
    backend: Backend, tmp_path: Any
) -> None:
    """A node adds a key of its own to a tool call (``index``, as streaming chunks carry):
    LangChain's validator refuses the message, LangGraph's serializer builds it without
    validation, and so does our reader: the thread stays readable, warm and cold."""

    def bot(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        if len(messages) == 1:
            call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
            return {"messages": [AIMessage("", id="a1", tool_calls=[call])]}
        messages[1].tool_calls[0]["index"] = 0
        return {"messages": [AIMessage(f"answer {len(messages)}", id=f"a{len(messages)}")]}

    def run(saver: Any) -> list[Any]:
        builder = StateGraph(MessagesState)
        builder.add_node(bot)
        builder.add_edge(START, "bot")
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [("user", "question")]}, CONFIG)
        graph.invoke({"messages": [("user", "again")]}, CONFIG)
        graph.invoke({"messages": [("user", "and again")]}, CONFIG)
        return [m.tool_calls for m in graph.get_state(CONFIG).values["messages"] if m.type == "ai"]

    with sqlite3.connect(tmp_path / "ref.db", check_same_thread=False) as conn:
        expected = run(SqliteSaver(conn))
    assert run(InMemorySaver()) == expected
    assert expected[0] == [
        {"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call", "index": 0}
    ]
    assert run(backend.saver()) == expected
    fresh = backend.saver().get_tuple(CONFIG)
    messages = fresh.checkpoint["channel_values"]["messages"]
    assert [m.tool_calls for m in messages if m.type == "ai"] == expected


def test_an_edit_of_a_dict_the_answers_shared_when_made_reaches_one_message(
    backend: Backend,
) -> None:
    """The answers of a model name one dict (``response_metadata={"model": MODEL}``); a
    later step edits it through the first answer only. Read back, each answer has its
    own copy, as in `InMemorySaver` (whose reads deserialize): the edit reaches the one
    message edited, whether or not the process reopened the thread between turns."""

    def run(saver_of_turn: Any, thread_id: str) -> list[Any]:
        config = {"configurable": {"thread_id": thread_id}}
        shared: dict[str, Any] = {"name": "m", "params": {"temperature": 0}}

        def bot(state: MessagesState) -> dict[str, Any]:
            messages = state["messages"]
            if messages[-1].content == "rate the first answer":
                messages[1].response_metadata["model"]["rated"] = True
            reply = AIMessage(f"answer {len(messages)}", response_metadata={"model": shared})
            return {"messages": [reply]}

        for question in ["q1", "q2", "rate the first answer"]:
            single_node(saver_of_turn(), bot).invoke({"messages": [("user", question)]}, config)
        messages = saver_of_turn().get_tuple(config).checkpoint["channel_values"]["messages"]
        return [m.response_metadata["model"].get("rated") for m in messages if m.type == "ai"]

    memory = InMemorySaver()
    assert run(lambda: memory, "t") == [True, None, None]
    warm = backend.saver()
    assert run(lambda: warm, "warm") == [True, None, None]
    assert run(lambda: backend.saver(), "reopened") == [True, None, None]  # every turn
