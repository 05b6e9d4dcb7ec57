"""A warm read returns what a cold read returns, and both what `SqliteSaver` returns.

The saver that wrote a checkpoint keeps an index of it; reads from that index
must not hand back the caller's own objects (a tuple where a fresh process
reads a list), in metadata or in channel values.

Messages are the exception by design (README, "Message mutation"): every read
returns the same message objects, decoded once from the log, so a graph step
gets back what it saw and identity caches hit. An object changed in place by
whoever holds it is not read back: the next read decodes the message again.
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from tests.backends import Backend

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _put(saver: Any) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"pair": (1, 2), "nested": {"k": (3, [4, (5,)])}, "text": "x"}
    cp["channel_versions"] = {"pair": 1, "nested": 1, "text": 1}
    metadata = {"source": "loop", "step": 1, "counters": {"messages": (2, 4)}, "pair": (7, 8)}
    return saver.put(CONFIG, cp, metadata, dict(cp["channel_versions"]))  # type: ignore[no-any-return]


def test_editing_a_read_value_changes_no_later_read(backend: Backend) -> None:
    saver = backend.saver()
    config = _put(saver)
    first = _read(saver, config)
    first[0]["nested"]["k"][1].append(6)
    first[0]["pair"].append(9)
    first[1]["counters"]["messages"].append(1)
    assert _read(saver, config) == _read(backend.saver(), config)
    assert _read(saver, config)[0]["nested"] == {"k": [3, [4, [5]]]}


def _read(saver: Any, config: dict[str, Any]) -> tuple[Any, Any]:
    tup = saver.get_tuple(config)
    return tup.checkpoint["channel_values"], tup.metadata


def test_tuples_read_warm_as_cold_as_sqlite(backend: Backend) -> None:
    with sqlite3.connect(":memory:", check_same_thread=False) as conn:
        sqlite = SqliteSaver(conn)
        expected = _read(sqlite, _put(sqlite))
    assert expected[0]["pair"] == [1, 2] and expected[1]["pair"] == [7, 8]
    saver = backend.saver()
    config = _put(saver)
    warm = _read(saver, config)
    cold = _read(backend.saver(), config)
    assert warm == cold == expected
    assert type(warm[0]["pair"]) is type(cold[0]["pair"]) is list
    assert type(warm[1]["counters"]["messages"]) is list
    assert [t.metadata for t in saver.list(CONFIG)] == [expected[1]]


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer)]


def _delta_graph(saver: Any) -> Any:
    def bot(state: DeltaState) -> dict[str, Any]:
        return {"messages": [("ai", f"n={len(state['messages'])}")]}

    builder = StateGraph(DeltaState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def test_langgraphs_delta_counters_read_warm_as_cold_as_sqlite(backend: Backend) -> None:
    """LangGraph's own ``counters_since_delta_snapshot`` metadata holds tuples."""
    config = {"configurable": {"thread_id": "t"}}

    def run(saver: Any) -> list[Any]:
        graph = _delta_graph(saver)
        for text in ("a", "b", "c"):
            graph.invoke({"messages": [("user", text)]}, config)
        return [
            {k: v for k, v in t.metadata.items() if k not in ("run_id",)}
            for t in saver.list(config)
        ]

    with sqlite3.connect(":memory:", check_same_thread=False) as conn:
        expected = run(SqliteSaver(conn))
    assert any(m.get("counters_since_delta_snapshot") for m in expected)
    saver = backend.saver()
    warm = run(saver)
    cold = [
        {k: v for k, v in t.metadata.items() if k != "run_id"}
        for t in backend.saver().list(config)
    ]
    strip = [{k: v for k, v in m.items() if k != "parents"} for m in expected]
    assert [{k: v for k, v in m.items() if k != "parents"} for m in warm] == strip
    assert warm == cold


def _chat_graph(saver: Any) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {
            "messages": [
                AIMessage(
                    f"answer {len(state['messages'])}",
                    response_metadata={"usage": {"tokens": 3}},
                    tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c1"}],
                )
            ]
        }

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _dump(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


def test_reads_share_one_object_per_message(backend: Backend) -> None:
    config = {"configurable": {"thread_id": "t"}}
    saver = backend.saver()
    graph = _chat_graph(saver)
    for text in ("a", "b", "c"):
        graph.invoke({"messages": [("user", text)]}, config)
    first = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    again = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert len(first) == 6 and all(x is y for x, y in zip(first, again, strict=True))
    cold = backend.saver().get_tuple(config).checkpoint["channel_values"]["messages"]
    assert _dump(first) == _dump(cold)
    # list: one object per message across the tuples (the older lists are prefixes)
    tuples = list(saver.list(config))
    by_id: dict[str, BaseMessage] = {}
    for tup in tuples:
        for m in tup.checkpoint["channel_values"].get("messages", []):
            assert by_id.setdefault(m.id, m) is m
    assert {m.id for m in first} == set(by_id) and all(by_id[m.id] is m for m in first)
    cold_list = list(backend.saver().list(config))
    assert [_dump(t.checkpoint["channel_values"].get("messages", [])) for t in tuples] == [
        _dump(t.checkpoint["channel_values"].get("messages", [])) for t in cold_list
    ]


def test_a_message_changed_outside_a_step_is_not_read_back(backend: Backend) -> None:
    """As with `SqliteSaver`: editing what a read returned changes neither the next
    read nor the log; the edited object is left to its holder."""
    config = {"configurable": {"thread_id": "t"}}
    saver = backend.saver()
    graph = _chat_graph(saver)
    for text in ("a", "b"):
        graph.invoke({"messages": [("user", text)]}, config)
    expected = _dump(backend.saver().get_tuple(config).checkpoint["channel_values"]["messages"])
    held = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    held[0].content = "edited outside"
    held[1].response_metadata["usage"]["tokens"] = 99
    held[3].tool_calls[0]["args"]["q"] = "y"
    held[2].additional_kwargs["note"] = "added"
    read = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert _dump(read) == expected
    assert all(read[i] is not held[i] for i in range(4))
    history = [t.checkpoint["channel_values"].get("messages", []) for t in saver.list(config)]
    assert all(m.content != "edited outside" for ms in history for m in ms)
    # the next turn starts from the log, not from the edited objects
    out = graph.invoke({"messages": [("user", "c")]}, config)
    assert _dump(out["messages"][:4]) == expected
    log = backend.log_bytes("t").decode()
    assert "edited outside" not in log and '"added"' not in log
