"""A cold read leaves the fingerprints of the messages it builds to be made when needed.

`_Index.decode_many` builds the head's messages; for a body built without validation
(`message_unvalidated`) it keeps the body instead of a fingerprint, and
`body_fingerprint` makes the fingerprint from that body when a later read or put
first needs it. The body cannot have changed since, so an edit made in between, in
place, is still told (and saved, or read past), exactly as with an eager fingerprint.
Also here: a cold read of a log with a long snapshot chain equals the warm index's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.messages import (
    EMPTY_STANDINS,
    body_fingerprint,
    message_from_json_owned,
    message_unvalidated,
)
from langgraph_ctx.saver import _index
from tests.test_cold_open import chat, log_lines, snap_lines, tuple_view

CONFIG = {"configurable": {"thread_id": "t"}}


@pytest.mark.parametrize(
    "body",
    [
        {"type": "human", "content": "hi"},
        {"type": "human", "content": "", "id": "h1", "name": "ada"},
        {"type": "ai", "content": "sure", "id": "a1"},
        {"type": "system", "content": "be brief"},
        {"type": "tool", "content": "42", "tool_call_id": "c1", "id": "t1"},
        {"type": "chat", "content": "x", "role": "critic"},
        {"type": "human", "content": [{"type": "text", "text": "hi"}], "id": "h2"},
        {"type": "ai", "content": "x", "response_metadata": {"model": "m", "n": [1]}},
        {
            "type": "ai",
            "content": "",
            "id": "a2",
            "tool_calls": [{"name": "search", "args": {"q": "x", "k": [1]}, "id": "c1"}],
        },
        {"type": "tool", "content": "x", "tool_call_id": "c", "status": "error"},
        {"type": "human", "content": "x", "id": None},
    ],
)
def test_a_body_builds_as_validation_does_and_fingerprints_from_the_body(
    body: dict[str, Any],
) -> None:
    msg = message_unvalidated(dict(body))
    assert msg is not None
    assert msg == message_from_json_owned(dict(body))
    assert list(msg.__dict__.items()) == list(type(msg).model_validate(body).__dict__.items())
    fp = body_fingerprint(body)
    assert fp == _index._fingerprint(msg)
    assert _index._unchanged(msg, fp)
    # Nothing the fingerprint holds is the message's own (or the body's) container.
    held, theirs = _containers(list(msg.__dict__.values())), _containers(list(fp))
    assert held and not held & theirs and not theirs & _containers(list(body.values()))
    if all(type(v) is str for v in body.values()):
        assert all(v in EMPTY_STANDINS.values() for v in fp if isinstance(v, (dict, list)))
    msg.additional_kwargs["filled"] = True  # a fill-in of an empty container
    assert not _index._unchanged(msg, fp)


def _containers(values: list[Any]) -> set[int]:
    """The ids of every dict and list in ``values``, nested ones too."""
    out: set[int] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.add(id(v))
            stack.extend(v.values())
        elif isinstance(v, list):
            out.add(id(v))
            stack.extend(v)
    return out


@pytest.mark.parametrize(
    "body",
    [
        {"type": "tool", "content": "x", "tool_call_id": "c", "status": "maybe"},
        {"type": "ai", "content": "x", "additional_kwargs": {"tool_calls": []}},
        {"type": "human", "content": "x", "surprise": "extra"},
        {"type": "human"},
        {"type": "nope", "content": "x"},
        {"type": "AIMessageChunk", "content": "x"},  # left to validation
        ["not", "a", "body"],
    ],
)
def test_bodies_validation_would_change_are_left_to_it(body: Any) -> None:
    assert message_unvalidated(body) is None


def _editing_graph(saver: Any) -> Any:
    """A node that changes earlier messages in place, then answers."""

    def bot(state: MessagesState) -> dict[str, Any]:
        messages = state["messages"]
        messages[0].content = "edited in a step"
        messages[1].additional_kwargs["reviewed"] = True
        return {"messages": [AIMessage(f"answer {len(messages)}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _head(saver: JsonlSaver) -> list[BaseMessage]:
    tup = saver.get_tuple(CONFIG)
    assert tup is not None
    return tup.checkpoint["channel_values"]["messages"]  # type: ignore[no-any-return]


def test_a_cold_read_builds_no_fingerprint_and_an_edit_in_a_step_is_saved(
    tmp_path: Path,
) -> None:
    chat(JsonlSaver(tmp_path), "t", 40)  # past the first snapshot
    cold = JsonlSaver(tmp_path)
    messages = _head(cold)
    index = cold._indexes["t"]
    entries = [index.templates.get(o) for o in index.materialize(*_list_of(index))]
    assert len(entries) == len(messages) == 80
    assert all(e is not None and e[1] is None for e in entries)  # left to when needed
    _editing_graph(cold).invoke({"messages": [("user", "one more")]}, CONFIG)
    fresh = _head(JsonlSaver(tmp_path))
    assert fresh[0].content == "edited in a step"
    assert fresh[1].additional_kwargs == {"reviewed": True}
    assert [m.content for m in fresh[2:80]] == [m.content for m in messages[2:80]]
    assert fresh[-1].content == "answer 81"


def test_an_edit_after_a_cold_read_is_read_past(tmp_path: Path) -> None:
    """Outside a step, an object its holder changed is left to them: the next read
    decodes the message again, as a fresh process reads it."""
    chat(JsonlSaver(tmp_path), "t", 40)
    cold = JsonlSaver(tmp_path)
    first = _head(cold)
    stored = first[3].content
    first[3].content = "changed by the app"
    first[5].response_metadata["note"] = "x"
    again = _head(cold)
    assert again[3] is not first[3] and again[3].content == stored
    assert again[5] is not first[5] and again[5].response_metadata == {}
    assert all(a is b for i, (a, b) in enumerate(zip(first, again, strict=True)) if i not in (3, 5))


def _list_of(index: Any) -> tuple[int, str]:
    head = index.latest("")
    writer = index.resolve("", "messages", head.versions["messages"], head.id)
    return writer[1], "messages"


def test_a_long_snapshot_chain_reads_as_the_warm_index(tmp_path: Path) -> None:
    """Only the last snapshot's heads are parsed; the earlier ones give their messages
    and lists: the cold read and the history equal what the writer holds."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 150)
    lines = log_lines(_Files(tmp_path), "t")
    assert len(snap_lines(lines)) >= 4
    cold = JsonlSaver(tmp_path)
    assert tuple_view(cold.get_tuple(CONFIG)) == tuple_view(writer.get_tuple(CONFIG))
    assert cold._indexes["t"].partial  # opened from the snapshot
    cold_history = [tuple_view(t) for t in cold.list(CONFIG, limit=30)]
    assert cold_history == [tuple_view(t) for t in writer.list(CONFIG, limit=30)]


def test_a_malformed_head_in_an_earlier_snapshot_is_not_read(tmp_path: Path) -> None:
    """An earlier snapshot's heads are not what a cold open reads: damage there (with a
    resealed checksum) changes nothing; the last snapshot's heads are still checked."""
    from langgraph_ctx.codec.lines import dumps_line, loads_line

    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    path = Path(writer.path("t"))
    lines = path.read_bytes().split(b"\n")[:-1]
    snaps = snap_lines(lines)
    assert len(snaps) >= 2
    obj = loads_line(lines[snaps[0] - 1])
    obj["heads"] = [{"id": 7}]
    lines[snaps[0] - 1] = dumps_line(obj)[:-1]
    path.write_bytes(b"\n".join(lines) + b"\n")
    cold = JsonlSaver(tmp_path)
    assert tuple_view(cold.get_tuple(CONFIG)) == tuple_view(writer.get_tuple(CONFIG))
    assert cold._indexes["t"].partial


class _Files:
    """`log_lines`' view of a JSONL root."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def log_bytes(self, thread_id: str) -> bytes:
        return Path(JsonlSaver(self.root).path(thread_id)).read_bytes()


def _tool_call_graph(saver: Any) -> Any:
    """Each turn answers with a tool call (a body with dicts and lists in it)."""

    def bot(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        call = {"name": "search", "args": {"q": f"turn {n}", "opts": [n]}, "id": f"c{n}"}
        return {"messages": [AIMessage("", tool_calls=[call], response_metadata={"n": n})]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def test_a_cold_read_tool_call_is_fingerprinted_from_its_body(tmp_path: Path) -> None:
    """A message with containers (tool calls, metadata) is built unvalidated and left
    without a fingerprint too; an edit of a nested part is told, in a step or out."""
    graph = _tool_call_graph(JsonlSaver(tmp_path))
    for i in range(12):
        graph.invoke({"messages": [("user", f"question {i}")]}, CONFIG)
    cold = JsonlSaver(tmp_path)
    first = _head(cold)
    index = cold._indexes["t"]
    entries = [index.templates.get(o) for o in index.materialize(*_list_of(index))]
    assert len(entries) == 24 and all(e is not None and e[1] is None for e in entries)
    first[1].tool_calls[0]["args"]["opts"].append("changed")  # nested, outside a step
    again = _head(cold)
    assert again[1] is not first[1] and again[1].tool_calls[0]["args"]["opts"] == [1]
    assert all(a is b for i, (a, b) in enumerate(zip(first, again, strict=True)) if i != 1)

    def editing(state: MessagesState) -> dict[str, Any]:
        state["messages"][3].tool_calls[0]["args"]["q"] = "edited in a step"
        return {"messages": [AIMessage("done")]}

    builder = StateGraph(MessagesState)
    builder.add_node(editing)
    builder.add_edge(START, "editing")
    builder.compile(checkpointer=cold).invoke({"messages": [("user", "last")]}, CONFIG)
    fresh = _head(JsonlSaver(tmp_path))
    assert fresh[3].tool_calls[0]["args"] == {"q": "edited in a step", "opts": [3]}
    assert fresh[1].tool_calls[0]["args"] == {"q": "turn 1", "opts": [1]}
