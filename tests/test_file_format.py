"""The thread file: one JSON object per line, readable, messages stored once."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import FORMAT_VERSION

from .test_saver_graphs import chat_graph


def lines(saver: JsonlSaver, thread_id: str = "t") -> list[dict]:
    return [json.loads(line) for line in Path(saver.path(thread_id)).read_text().splitlines()]


def run_chat(saver: JsonlSaver, turns: int, thread_id: str = "t") -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(turns):
        graph.invoke(
            {"messages": [HumanMessage(content=f"question {i} " + "word " * 60)]},
            {"configurable": {"thread_id": thread_id}},
        )


def test_every_line_is_versioned_json_and_starts_with_a_header(saver):
    run_chat(saver, 3)
    objs = lines(saver)
    assert objs[0]["t"] == "thread" and objs[0]["thread_id"] == "t"
    assert all(o["v"] == FORMAT_VERSION for o in objs)
    assert {o["t"] for o in objs} == {"thread", "msg", "ckpt", "writes"}


def test_each_message_is_stored_once_as_readable_json(saver):
    run_chat(saver, 5)
    objs = lines(saver)
    bodies = [o["msg"] for o in objs if o["t"] == "msg" and "msg" in o]
    # the conversation, as jq would show it: `select(.t=="msg") | .msg.content`
    assert [b["content"] for b in bodies] == [
        text
        for i in range(5)
        for text in (f"question {i} " + "word " * 60, f"you said: question {i} " + "word " * 60)
    ]
    assert len({b["content"] for b in bodies}) == len(bodies)  # no text twice
    state = chat_graph().compile(checkpointer=saver).get_state({"configurable": {"thread_id": "t"}})
    ids = Counter(o.get("id") or o["msg"].get("id") for o in objs if o["t"] == "msg")
    assert all(ids[m.id] == 1 for m in state.values["messages"])
    # checkpoints reference messages by ordinal, never embed them
    for o in objs:
        if o["t"] == "ckpt":
            assert "content" not in json.dumps(o["values"])


def test_tool_calls_and_results_are_readable(saver):
    cp_messages = [
        HumanMessage(content="weather in Paris?", id="h1"),
        AIMessage(
            content="",
            id="a1",
            tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}],
        ),
        ToolMessage(content="21C, sunny", tool_call_id="c1", name="weather", id="t1"),
    ]
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": 1}
    cp["channel_values"] = {"messages": cp_messages}
    saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {"step": 1}, {"messages": 1}
    )
    msgs = {o["msg"]["id"]: o["msg"] for o in lines(saver) if o["t"] == "msg"}
    assert msgs["a1"] == {
        "type": "ai",
        "content": "",
        "id": "a1",
        "tool_calls": [
            {"name": "weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
        ],
    }
    assert msgs["t1"] == {
        "type": "tool",
        "content": "21C, sunny",
        "name": "weather",
        "id": "t1",
        "tool_call_id": "c1",
    }


def test_other_values_are_plain_json_or_readable_tags(saver):
    class State(TypedDict):
        count: int
        tags: list[str]
        profile: dict
        when: dt.datetime
        seen: set

    def node(state):
        return {"count": state["count"] + 1}

    builder = StateGraph(State)
    builder.add_node(node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=saver)
    when = dt.datetime(2026, 1, 28, 10, 0, tzinfo=dt.timezone.utc)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke(
        {"count": 1, "tags": ["a"], "profile": {"name": "Ada"}, "when": when, "seen": {1, 2}},
        config,
    )
    values = {}
    for o in lines(saver):
        if o["t"] == "ckpt":
            values.update({ch: e[1] for ch, e in o["values"].items() if len(e) == 2})
    assert values["count"] == 2 and values["tags"] == ["a"]
    assert values["profile"] == {"json": {"name": "Ada"}}
    # readable with jq, where the serializer used to write base64 msgpack
    assert values["when"] == {"datetime": "2026-01-28T10:00:00+00:00"}
    assert values["seen"] == {"set": [1, 2]}
    state = graph.get_state(config).values
    assert state["when"] == when and state["seen"] == {1, 2} and state["count"] == 2


def test_storage_grows_linearly(root):
    """Bytes per turn stay flat: the 120th turn costs what the 10th did.

    The workload has the issue's shape: ~340-byte messages (273 KB over 400 turns).
    """
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    path = Path(saver.path("t"))
    sizes, raw = [], 0
    for i in range(120):
        text = f"q{i:04d} " + "lorem ipsum " * 28
        out = graph.invoke(
            {"messages": [HumanMessage(content=text)]}, {"configurable": {"thread_id": "t"}}
        )
        raw += len(text) + len(out["messages"][-1].content)
        # without the snapshot lines (one every 256 lines, a cache of the index, about 1 KB
        # each): one landing in a window and not the other was 5% of its bytes
        sizes.append(sum(len(line) for line in path.read_bytes().splitlines(keepends=True)
                         if b'"t":"snap"' not in line[:24]))  # fmt: skip
    early = (sizes[19] - sizes[9]) / 10
    late = (sizes[119] - sizes[109]) / 10
    assert late <= early * 1.05, (early, late)
    # About 3x the text at this message size: a turn's fixed cost is ~6 lines of ids,
    # versions and checksums (format 2 adds ~13 bytes a line). Whether LangGraph gives a
    # message its id before or after a background put serialises it decides if a `like`
    # line is written, which moves the figure by about 1% from run to run.
    assert path.stat().st_size <= 3.1 * raw, path.stat().st_size / raw
