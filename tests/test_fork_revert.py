"""fork and revert: copies and roll-backs of a thread, sync and async, on each backend."""

from __future__ import annotations

import json
import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph

from langgraph_ctx import (
    CheckpointNotFoundError,
    ThreadExistsError,
    ThreadNotFoundError,
)

from .conftest import chat
from .test_saver_graphs import chat_graph

ON_REDIS_CLUSTER = True  # the backend tests also run on a Redis Cluster (conftest)


def contents(graph, thread_id: str) -> list[str]:
    state = graph.get_state({"configurable": {"thread_id": thread_id}})
    return [m.content for m in state.values.get("messages", [])]


@pytest.fixture
def saver(backend):
    return backend.saver()


@pytest.fixture
def graph(saver):
    return chat_graph().compile(checkpointer=saver)


def test_fork_copies_the_whole_thread_and_is_independent(backend, saver, graph):
    chat(graph, "src", "a", "b")
    head = saver.fork("src", "dst")
    assert head["configurable"]["thread_id"] == "dst"
    assert (
        head["configurable"]["checkpoint_id"]
        == graph.get_state({"configurable": {"thread_id": "src"}}).config["configurable"][
            "checkpoint_id"
        ]
    )
    assert contents(graph, "dst") == contents(graph, "src")
    chat(graph, "dst", "only in the fork")
    chat(graph, "src", "only in the source")
    assert contents(graph, "dst")[-2:] == ["only in the fork", "you said: only in the fork"]
    assert contents(graph, "src")[-2:] == ["only in the source", "you said: only in the source"]
    assert "only in the source" not in contents(graph, "dst")
    # full history came along, and the header names the new thread and its origin
    assert len(list(graph.get_state_history({"configurable": {"thread_id": "dst"}}))) == 9
    header = json.loads(backend.log_bytes("dst").splitlines()[0])
    assert header["thread_id"] == "dst"
    assert header["forked_from"] == {"thread_id": "src", "checkpoint_id": None}


def test_fork_up_to_a_checkpoint(saver, graph):
    chat(graph, "src", "a", "b", "c")
    history = list(graph.get_state_history({"configurable": {"thread_id": "src"}}))
    after_b = next(
        s for s in history if [m.content for m in s.values["messages"]][-1:] == ["you said: b"]
    )
    head = saver.fork("src", "early", checkpoint_id=after_b.config["configurable"]["checkpoint_id"])
    assert head["configurable"]["checkpoint_id"] == after_b.config["configurable"]["checkpoint_id"]
    assert contents(graph, "early") == ["a", "you said: a", "b", "you said: b"]
    chat(graph, "early", "x")
    assert contents(graph, "early")[-2:] == ["x", "you said: x"]
    assert contents(graph, "src")[-1] == "you said: c"


def test_fork_errors(backend, saver, graph):
    chat(graph, "src", "a")
    chat(graph, "taken", "b")
    with pytest.raises(ThreadNotFoundError, match="'nope'"):
        saver.fork("nope", "new")
    with pytest.raises(ThreadExistsError, match="'taken'"):
        saver.fork("src", "taken")
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint 'bogus'"):
        saver.fork("src", "new", checkpoint_id="bogus")
    with pytest.raises(ValueError, match="same"):
        saver.fork("src", "src")
    assert not backend.exists("new")
    assert contents(graph, "taken") == ["b", "you said: b"]


def test_revert_rolls_back_and_rotates_backups(backend, saver, graph):
    chat(graph, "t", "a", "b")
    original = backend.log_bytes("t")
    history = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))
    after_a = history[3]  # ["a", "you said: a"]
    assert [m.content for m in after_a.values["messages"]] == ["a", "you said: a"]

    head = saver.revert("t", after_a.config["configurable"]["checkpoint_id"])
    assert head["configurable"]["checkpoint_id"] == after_a.config["configurable"]["checkpoint_id"]
    assert contents(graph, "t") == ["a", "you said: a"]
    assert saver.storage.backups("t") == [backend.backup_name("t", 1)]
    assert backend.backup_bytes("t", 1) == original

    chat(graph, "t", "c")
    assert contents(graph, "t") == ["a", "you said: a", "c", "you said: c"]
    second = backend.log_bytes("t")
    first_cp = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))[-1]
    saver.revert("t", first_cp.config["configurable"]["checkpoint_id"])
    # newest backup is .1, the older one moved to .2
    assert backend.backup_bytes("t", 1) == second
    assert backend.backup_bytes("t", 2) == original
    assert saver.list_threads() == ["t"]  # backups are not threads


def test_revert_errors(backend, saver, graph):
    with pytest.raises(ThreadNotFoundError):
        saver.revert("missing", "x")
    chat(graph, "t", "a")
    before = backend.log_bytes("t")
    with pytest.raises(CheckpointNotFoundError):
        saver.revert("t", "not-a-checkpoint")
    assert backend.log_bytes("t") == before
    assert saver.storage.backups("t") == []


def test_delete_thread_removes_backups(backend, saver, graph):
    chat(graph, "t", "a", "b")
    first = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))[-1]
    saver.revert("t", first.config["configurable"]["checkpoint_id"])
    saver.delete_thread("t")
    assert not backend.exists("t")
    assert saver.storage.backups("t") == []
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None


async def test_async_fork_and_revert(backend):
    saver = backend.saver()
    graph = chat_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "src"}}
    await graph.ainvoke({"messages": [("user", "a")]}, config)
    await graph.ainvoke({"messages": [("user", "b")]}, config)
    head = await saver.afork("src", "dst")
    state = await graph.aget_state(head)
    assert [m.content for m in state.values["messages"]][-1] == "you said: b"
    first = [s async for s in graph.aget_state_history(config)][-1]
    head = await saver.arevert("src", first.config["configurable"]["checkpoint_id"])
    assert head["configurable"]["checkpoint_id"] == first.config["configurable"]["checkpoint_id"]
    assert (await graph.aget_state(config)).values.get("messages", []) == []
    await saver.acopy_thread("dst", "dst2")
    assert len([t async for t in saver.alist({"configurable": {"thread_id": "dst2"}})]) == 6


def test_a_saver_sees_forks_and_reverts_made_by_another(backend):
    writer, reader = backend.saver(), backend.saver()
    graph_w = chat_graph().compile(checkpointer=writer)
    graph_r = chat_graph().compile(checkpointer=reader)
    chat(graph_w, "t", "a", "b")
    assert contents(graph_r, "t")[-1] == "you said: b"
    first = list(graph_w.get_state_history({"configurable": {"thread_id": "t"}}))[3]
    writer.revert("t", first.config["configurable"]["checkpoint_id"])
    assert contents(graph_r, "t") == ["a", "you said: a"]  # reader notices the rewrite
    chat(graph_r, "t", "c")
    assert contents(graph_w, "t")[-1] == "you said: c"


class Steps(TypedDict):
    log: Annotated[list, operator.add]


def two_step_graph(saver):
    """START -> a -> b, each node appending its name: a checkpoint whose next is ``b``."""
    builder = StateGraph(Steps)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("b", lambda s: {"log": ["b"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    return builder.compile(checkpointer=saver)


def test_revert_and_fork_drop_writes_saved_before_their_checkpoint(backend, saver):
    """LangGraph saves a step's writes in the background: they can reach the log before
    the line of the checkpoint they belong to. A revert or fork at that checkpoint kept
    them (the head was the state after its step, which then never ran again). Here the
    order is made by hand: the writes of X, then X's line."""
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    parent = saver.put(config, first, {"source": "input", "step": -1}, {})
    x = empty_checkpoint()
    x_config = {"configurable": {**parent["configurable"], "checkpoint_id": x["id"]}}
    saver.put_writes(x_config, [("log", ["b"])], "task-b")  # before X's line
    saver.put(parent, x, {"source": "loop", "step": 0}, {})
    assert saver.get_tuple(x_config).pending_writes == [("task-b", "log", ["b"])]
    saver.fork("t", "forked", checkpoint_id=x["id"])
    head = saver.revert("t", x["id"])
    assert head["configurable"]["checkpoint_id"] == x["id"]
    for thread in ("t", "forked"):
        for reader in (saver, backend.saver()):  # warm, then a fresh process
            tup = reader.get_tuple({"configurable": {"thread_id": thread}})
            assert tup.checkpoint["id"] == x["id"]
            assert tup.pending_writes == []
    assert backend.saver().get_tuple(x_config) is not None  # the backup keeps the rest
    assert saver.storage.backups("t")


@pytest.mark.parametrize("operation", ["revert", "fork"])
def test_a_revert_or_fork_at_a_step_runs_that_step_again(backend, saver, operation):
    """The same with a real graph and LangGraph's own ordering (default durability), many
    times: the head is the checkpoint whose next node is ``b``, and ``b`` runs again."""
    graph = two_step_graph(saver)
    for i in range(12):
        config = {"configurable": {"thread_id": f"t{i}"}}
        graph.invoke({"log": []}, config)
        x = next(s for s in graph.get_state_history(config) if s.next == ("b",))
        x_id = x.config["configurable"]["checkpoint_id"]
        if operation == "revert":
            saver.revert(f"t{i}", x_id)
        else:
            config = {"configurable": {"thread_id": f"f{i}"}}
            saver.fork(f"t{i}", f"f{i}", checkpoint_id=x_id)
        for reader in (saver, backend.saver()):
            head = two_step_graph(reader).get_state(config)
            assert (head.values, head.next) == ({"log": ["a"]}, ("b",))
        assert graph.invoke(None, config) == {"log": ["a", "b"]}


def test_revert_and_fork_keep_a_parents_writes_saved_after_the_checkpoints_line(backend):
    """LangGraph saves a step's writes in the background, so a checkpoint's writes can also
    land *after* its child's line (24 of 2,000 in one plain chat). A fork or revert at the
    child kept the parent and dropped those writes: with a `DeltaChannel`, whose value is
    rebuilt from them, the fork read another state (a user message gone). Here the input
    task's writes are held back until its checkpoint's child is saved, every turn."""
    from langchain_core.messages import HumanMessage

    from .test_saver_graphs import delta_graph

    saver = backend.saver()
    held: list = []
    put, put_writes = saver.put, saver.put_writes

    def late_put_writes(config, writes, task_id, task_path=""):
        if task_path.endswith("__start__") and not held:
            held.append((config, writes, task_id, task_path))
            return None
        return put_writes(config, writes, task_id, task_path)

    def put_then_held(config, checkpoint, metadata, new_versions):
        out = put(config, checkpoint, metadata, new_versions)
        parent = config["configurable"].get("checkpoint_id")
        if held and parent == held[0][0]["configurable"]["checkpoint_id"]:  # the child's put
            put_writes(*held.pop())
        return out

    saver.put_writes, saver.put = late_put_writes, put_then_held
    graph = delta_graph().compile(checkpointer=saver)
    source = {"configurable": {"thread_id": "src"}}
    for i in range(4):
        graph.invoke({"messages": [HumanMessage(f"u{i}", id=f"h{i}")]}, source)
        assert not held
    plain = backend.saver()
    history = list(delta_graph().compile(checkpointer=plain).get_state_history(source))
    for i, snapshot in enumerate(history):
        checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
        plain.fork("src", f"fork{i}", checkpoint_id=checkpoint_id)
        plain.fork("src", f"rev{i}")
        plain.revert(f"rev{i}", checkpoint_id)
        for thread in (f"fork{i}", f"rev{i}"):
            for reader in (plain, backend.saver()):
                got = delta_graph().compile(checkpointer=reader).get_state(
                    {"configurable": {"thread_id": thread}}
                )
                assert (got.values, got.next) == (snapshot.values, snapshot.next), (i, thread)


class _Profiled(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    profile: dict[str, str]
    counter: int


def _setup_graph():
    def setup(state):
        return {"profile": {"plan": state["log"][-1]}, "counter": len(state["log"])}

    builder = StateGraph(_Profiled)
    builder.add_node(setup)
    builder.add_edge(START, "setup")
    return builder


def _slow_graph(inside, go):
    def first(state):
        return {"log": ["first"]}

    def slow(state):
        inside.set()
        assert go.wait(10)
        return {"log": ["slow"]}

    builder = StateGraph(_Profiled)
    builder.add_node(first)
    builder.add_node(slow)
    builder.add_edge(START, "first")
    builder.add_edge("first", "slow")
    return builder


@pytest.mark.parametrize("operation", ["revert", "delete_thread", "sqlite"])
def test_a_run_whose_thread_is_reverted_or_deleted_meanwhile_keeps_every_channel(
    backend, operation, tmp_path
):
    """Another process reverts (or deletes) the thread while a run on it is in a step:
    the run's next checkpoint has no parent in the log, and the channels the step did not
    change had no line left to be read from. They read back as the run holds them, as
    with `SqliteSaver` (the last case). Before, ``profile`` and ``counter`` were gone,
    still named in ``channel_versions``, and `verify` saw nothing wrong."""
    import sqlite3
    import threading

    if operation == "sqlite":
        if backend.name != "jsonl":
            pytest.skip("the reference runs once")
        from langgraph.checkpoint.sqlite import SqliteSaver

        def make():
            conn = sqlite3.connect(tmp_path / "ref.db", check_same_thread=False)
            return SqliteSaver(conn)
    else:
        make = backend.saver
    config = {"configurable": {"thread_id": "t"}}
    setup = _setup_graph().compile(checkpointer=make())
    setup.invoke({"log": ["gold"]}, config)
    after_gold = setup.get_state(config).config["configurable"]["checkpoint_id"]
    setup.invoke({"log": ["platinum"]}, config)
    inside, go = threading.Event(), threading.Event()
    run = _slow_graph(inside, go).compile(checkpointer=make())
    worker = threading.Thread(target=run.invoke, args=({"log": ["turn3"]}, config))
    worker.start()
    try:
        assert inside.wait(10)
        other = make()  # another process (the CLI) changes the thread under the run
        if operation == "revert":
            other.revert("t", after_gold)
        else:
            other.delete_thread("t")
    finally:
        go.set()
        worker.join()
    state = _slow_graph(inside, go).compile(checkpointer=make()).get_state(config)
    assert state.values == {
        "log": ["gold", "platinum", "turn3", "first", "slow"],
        "profile": {"plan": "platinum"},
        "counter": 2,
    }
