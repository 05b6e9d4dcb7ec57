"""A warm read returns what a cold read returns, and both what `SqliteSaver` returns.

The saver that wrote a checkpoint keeps an index of it; reads from that index
must not hand back the caller's own objects (a tuple where a fresh process
reads a list), in metadata or in channel values.
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, TypedDict

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from tests.backends import Backend

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _put(saver: Any) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"pair": (1, 2), "nested": {"k": (3, [4, (5,)])}, "text": "x"}
    cp["channel_versions"] = {"pair": 1, "nested": 1, "text": 1}
    metadata = {"source": "loop", "step": 1, "counters": {"messages": (2, 4)}, "pair": (7, 8)}
    return saver.put(CONFIG, cp, metadata, dict(cp["channel_versions"]))  # type: ignore[no-any-return]


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
