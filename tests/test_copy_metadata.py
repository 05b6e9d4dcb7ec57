"""`fork` and `copy_thread` make the copy's checkpoints its own (issue 11 point 5).

LangGraph's server filters a copied thread's history by ``metadata={"thread_id": copy}``
(its default checkpointer rewrites the id on ``threads.copy``); so do we.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.graph import START, MessagesState, StateGraph

from tests.backends import Backend


def _graph(saver: Any) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"heard {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _as_the_server(saver: Any) -> Any:
    """The saver with ``put`` enriched as the LangGraph server's checkpointer adapter
    does: the thread id (with other configurable keys) goes into the metadata."""
    put = saver.put

    def enriched(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = {"thread_id": config["configurable"]["thread_id"]}
        return put(config, checkpoint, {**conf, **metadata}, new_versions)

    saver.put = enriched
    return saver


def _thread_ids(saver: Any, thread_id: str) -> list[Any]:
    return [t.metadata.get("thread_id") for t in saver.list(_cfg(thread_id))]


def _run(saver: Any, thread_id: str, *texts: str) -> None:
    graph = _graph(_as_the_server(saver))
    for text in texts:
        graph.invoke({"messages": [("user", text)]}, _cfg(thread_id))


def test_copy_thread_metadata_names_the_copy(backend: Backend) -> None:
    saver = backend.saver()
    _run(saver, "src", "one", "two")
    n = len(list(saver.list(_cfg("src"))))
    saver.copy_thread("src", "dst")
    for reader in (saver, backend.saver()):  # warm, and a fresh process
        assert _thread_ids(reader, "dst") == ["dst"] * n
        assert _thread_ids(reader, "src") == ["src"] * n
        assert len(list(reader.list(_cfg("dst"), filter={"thread_id": "dst"}))) == n
        assert list(reader.list(_cfg("dst"), filter={"thread_id": "src"})) == []
        assert [i.metadata["thread_id"] for i in reader.checkpoint_infos("dst")] == ["dst"] * n
    _run(backend.saver(), "dst", "three")
    assert set(_thread_ids(backend.saver(), "dst")) == {"dst"}
    asyncio.run(saver.acopy_thread("dst", "dst2"))
    assert set(_thread_ids(backend.saver(), "dst2")) == {"dst2"}


def test_fork_at_a_checkpoint_and_a_fork_of_a_fork_name_themselves(backend: Backend) -> None:
    saver = backend.saver()
    _run(saver, "a", "one", "two")
    history = list(saver.list(_cfg("a")))
    at = history[2].config["configurable"]["checkpoint_id"]
    saver.fork("a", "b", checkpoint_id=at)
    assert set(_thread_ids(backend.saver(), "b")) == {"b"}
    _run(saver, "b", "in b")
    saver.fork("b", "c")
    assert set(_thread_ids(backend.saver(), "c")) == {"c"}
    state = _graph(backend.saver()).get_state(_cfg("c"))
    assert state.metadata["thread_id"] == "c"
    assert [m.content for m in state.values["messages"]][-2:] == ["in b", "heard 3"]
    # pruning the fork keeps it its own
    saver.prune(["c"])
    assert _thread_ids(backend.saver(), "c") == ["c"]
