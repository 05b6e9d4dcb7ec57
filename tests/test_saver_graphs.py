"""LogSavers under real LangGraph graphs, compared with LangGraph's InMemorySaver.

Every scenario runs on each backend (``backend`` fixture: JsonlSaver on a
directory, RedisLogSaver on a real redis-server). Each runs twice, once on
InMemorySaver and once on the backend's saver, and every state and history a
user can observe must be the same. A third run reads the store with a fresh
saver (a cold process) and must see the same again.
"""

from __future__ import annotations

import operator
import subprocess
import sys
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from langgraph.types import Command, Send, interrupt

from .backends import Backend
from .conftest import history_view, normalize, snapshot_view

ON_REDIS_CLUSTER = True  # the backend tests also run on a Redis Cluster (conftest)


def chat_graph():
    def chatbot(state: MessagesState):
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"you said: {last.content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(chatbot)
    builder.add_edge(START, "chatbot")
    return builder


def both(backend: Backend) -> dict[str, Any]:
    return {"memory": InMemorySaver(), "log": backend.saver()}


def assert_same(graph_builder, backend: Backend, run, config: dict) -> None:
    """Run ``run(graph)`` on both savers and compare state + history (+ a cold read)."""
    views = {}
    for name, saver in both(backend).items():
        graph = graph_builder.compile(checkpointer=saver)
        run(graph)
        views[name] = (snapshot_view(graph.get_state(config)), history_view(graph, config))
    assert views["log"] == views["memory"]
    cold = graph_builder.compile(checkpointer=backend.saver())
    assert (snapshot_view(cold.get_state(config)), history_view(cold, config)) == views["memory"]


# ---------------------------------------------------------------- chat


def test_multi_turn_chat_matches_in_memory_saver(backend):
    config = {"configurable": {"thread_id": "chat"}}

    def run(graph):
        for i in range(5):
            graph.invoke({"messages": [HumanMessage(content=f"turn {i}")]}, config)
        graph.invoke({"messages": [("user", "a tuple")]}, config)
        graph.invoke({"messages": [{"role": "user", "content": "a dict"}]}, config)

    assert_same(chat_graph(), backend, run, config)


async def test_async_invoke_matches_sync(backend):
    config = {"configurable": {"thread_id": "async"}}
    graph = chat_graph().compile(checkpointer=backend.saver())
    for i in range(3):
        await graph.ainvoke({"messages": [HumanMessage(content=f"turn {i}")]}, config)
    state = await graph.aget_state(config)
    assert [m.content for m in state.values["messages"]][-2:] == ["turn 2", "you said: turn 2"]
    history = [s async for s in graph.aget_state_history(config)]
    assert len(history) == 9
    # the sync API sees exactly what the async one wrote
    assert snapshot_view(graph.get_state(config)) == snapshot_view(state)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes(backend, durability):
    config = {"configurable": {"thread_id": f"d-{durability}"}}

    def run(graph):
        for i in range(3):
            graph.invoke({"messages": [("user", f"m{i}")]}, config, durability=durability)

    assert_same(chat_graph(), backend, run, config)


def test_remove_message_and_tool_calls_round_trip(backend):
    class State(MessagesState):
        pass

    def agent(state):
        if not any(isinstance(m, ToolMessage) for m in state["messages"]):
            call = {"name": "lookup", "args": {"q": "weather"}, "id": "call-1"}
            return {"messages": [AIMessage(content="", tool_calls=[call], id="ai-1")]}
        return {"messages": [AIMessage(content="sunny", id="ai-2")]}

    def tools(state):
        return {"messages": [ToolMessage(content="sunny, 21C", tool_call_id="call-1", id="t-1")]}

    def cleanup(state):
        return {"messages": [RemoveMessage(id="t-1")]}

    def route(state):
        return "tools" if state["messages"][-1].tool_calls else "cleanup"

    builder = StateGraph(State)
    builder.add_node(agent)
    builder.add_node(tools)
    builder.add_node(cleanup)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "cleanup"])
    builder.add_edge("tools", "agent")
    builder.add_edge("cleanup", END)
    config = {"configurable": {"thread_id": "tools"}}

    def run(graph):
        graph.invoke({"messages": [HumanMessage(content="weather?", id="h-1")]}, config)

    assert_same(builder, backend, run, config)
    state = builder.compile(checkpointer=backend.saver()).get_state(config)
    assert [m.id for m in state.values["messages"]] == ["h-1", "ai-1", "ai-2"]
    assert state.values["messages"][1].tool_calls[0]["args"] == {"q": "weather"}


# ---------------------------------------------------------- interrupts


def approval_graph():
    class State(TypedDict):
        request: str
        decision: str

    def ask(state):
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"decision": answer}

    builder = StateGraph(State)
    builder.add_node(ask)
    builder.add_edge(START, "ask")
    return builder


def test_interrupt_and_resume(backend):
    config = {"configurable": {"thread_id": "hitl"}}

    def run(graph):
        out = graph.invoke({"request": "refund"}, config)
        assert out["__interrupt__"][0].value == {"question": "approve refund?"}
        assert graph.get_state(config).next == ("ask",)
        graph.invoke(Command(resume="yes"), config)

    assert_same(approval_graph(), backend, run, config)


def test_resume_from_a_cold_process(backend):
    config = {"configurable": {"thread_id": "hitl-cold"}}
    approval_graph().compile(checkpointer=backend.saver()).invoke({"request": "x"}, config)
    # a new saver (new process, in effect) resumes the interrupted run
    graph = approval_graph().compile(checkpointer=backend.saver())
    assert graph.get_state(config).interrupts[0].value == {"question": "approve x?"}
    assert graph.invoke(Command(resume="no"), config) == {"request": "x", "decision": "no"}


# ---------------------------------------------------------- subgraphs


def nested_graph():
    class Inner(TypedDict):
        log: Annotated[list[str], operator.add]

    def inner_step(state):
        return {"log": ["inner"]}

    inner = StateGraph(Inner)
    inner.add_node(inner_step)
    inner.add_edge(START, "inner_step")

    def outer_step(state):
        return {"log": ["outer"]}

    outer = StateGraph(Inner)
    outer.add_node("sub", inner.compile())
    outer.add_node(outer_step)
    outer.add_edge(START, "outer_step")
    outer.add_edge("outer_step", "sub")
    return outer


def test_subgraph_namespaces(backend):
    config = {"configurable": {"thread_id": "nested"}}

    def run(graph):
        graph.invoke({"log": []}, config)
        graph.invoke({"log": ["again"]}, config)

    assert_same(nested_graph(), backend, run, config)
    saver = backend.saver()
    namespaces = {
        t.config["configurable"]["checkpoint_ns"]
        for t in saver.list(
            config | {"configurable": {"thread_id": "nested", "checkpoint_ns": None}}
        )
    }
    assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)


def test_subgraph_state_with_interrupt(backend):
    class S(TypedDict):
        x: int

    def inner_node(state):
        value = interrupt("inner?")
        return {"x": state["x"] + int(value)}

    inner = StateGraph(S)
    inner.add_node(inner_node)
    inner.add_edge(START, "inner_node")
    outer = StateGraph(S)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    graph = outer.compile(checkpointer=backend.saver())
    config = {"configurable": {"thread_id": "sub-hitl"}}
    graph.invoke({"x": 1}, config)
    state = graph.get_state(config, subgraphs=True)
    sub_state = state.tasks[0].state
    assert sub_state.config["configurable"]["checkpoint_ns"].startswith("sub:")
    assert sub_state.next == ("inner_node",)
    assert graph.invoke(Command(resume="41"), config) == {"x": 42}


# ---------------------------------------------------------------- Send


def send_graph() -> StateGraph:
    """START fans out one `Send` per topic to a worker; results add up."""

    class State(TypedDict):
        topics: list[str]
        results: Annotated[list[str], operator.add]

    def fan_out(state):
        return [Send("worker", {"topic": t}) for t in state["topics"]]

    def worker(payload):
        return {"results": [payload["topic"].upper()]}

    builder = StateGraph(State)
    builder.add_node("worker", worker)
    builder.add_conditional_edges(START, fan_out, ["worker"])
    return builder


def test_send_fan_out(backend):
    builder = send_graph()
    config = {"configurable": {"thread_id": "send"}}

    def run(graph):
        graph.invoke({"topics": ["a", "b", "c"], "results": []}, config)

    assert_same(builder, backend, run, config)
    graph = builder.compile(checkpointer=backend.saver())
    assert sorted(graph.get_state(config).values["results"]) == ["A", "B", "C"]


# ----------------------------------------------------------- time travel


def test_update_state_history_and_replay(backend):
    config = {"configurable": {"thread_id": "travel"}}

    def run(graph):
        for i in range(3):
            graph.invoke({"messages": [("user", f"q{i}")]}, config)
        history = list(graph.get_state_history(config))
        past = history[4].config  # before the second answer
        graph.update_state(past, {"messages": [AIMessage(content="edited")]}, as_node="chatbot")
        graph.invoke(None, history[6].config)  # replay from an older checkpoint

    assert_same(chat_graph(), backend, run, config)
    graph = chat_graph().compile(checkpointer=backend.saver())
    sources = [s.metadata["source"] for s in graph.get_state_history(config)]
    assert "update" in sources


def test_get_state_at_every_checkpoint_matches(backend):
    config = {"configurable": {"thread_id": "every"}}
    graphs = {n: chat_graph().compile(checkpointer=s) for n, s in both(backend).items()}
    for graph in graphs.values():
        for i in range(4):
            graph.invoke({"messages": [("user", f"q{i}")]}, config)
    log_history = list(graphs["log"].get_state_history(config))
    memory_history = list(graphs["memory"].get_state_history(config))
    for a, b in zip(log_history, memory_history, strict=True):
        assert normalize(graphs["log"].get_state(a.config).values) == normalize(
            graphs["memory"].get_state(b.config).values
        )


# ---------------------------------------------------------- DeltaChannel


def delta_graph():
    class State(TypedDict):
        messages: Annotated[list, DeltaChannel(_messages_delta_reducer, snapshot_frequency=3)]

    def bot(state):
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"echo {n}", id=f"ai-{n}")]}

    builder = StateGraph(State)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder


def delta_turns(graph, config, n=7, runs=None):
    for i in range(n):
        run_id = str(uuid.uuid4())
        if runs is not None:
            runs.append(run_id)
        graph.invoke(
            {
                "messages": [
                    HumanMessage(content=f"u{i}", id=f"h-{config['configurable']['thread_id']}-{i}")
                ]
            },
            {**config, "metadata": {"run_id": run_id}},
        )


def test_delta_channel_matches_in_memory_saver(backend):
    config = {"configurable": {"thread_id": "delta"}}
    assert_same(delta_graph(), backend, lambda g: delta_turns(g, config), config)


def test_delta_channel_history_uses_the_index(backend, monkeypatch):
    saver = backend.saver()
    graph = delta_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "delta-direct"}}
    delta_turns(graph, config)
    # the override must not walk ancestors through get_tuple
    calls = []
    original = type(saver).get_tuple
    monkeypatch.setattr(
        type(saver), "get_tuple", lambda self, c: calls.append(c) or original(self, c)
    )
    history = saver.get_delta_channel_history(config=config, channels=["messages"])
    assert calls == []
    base = InMemorySaver()
    ref = delta_graph().compile(checkpointer=base)
    delta_turns(ref, config)
    expected = base.get_delta_channel_history(config=config, channels=["messages"])

    def view(h):  # task ids derive from checkpoint ids, which differ between runs
        entry = h["messages"]
        return [(ch, normalize(v)) for _, ch, v in entry["writes"]], normalize(entry.get("seed"))

    assert view(history) == view(expected)
    assert view(history)[1] is not None  # a snapshot seeded the walk


def test_prune_copy_and_delete_for_runs_keep_delta_chains(backend):
    saver = backend.saver()
    graph = delta_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "src"}}
    runs: list[str] = []
    delta_turns(graph, config, runs=runs)
    expected = normalize(graph.get_state(config).values)

    def check(thread_id):
        cfg = {"configurable": {"thread_id": thread_id}}
        assert normalize(graph.get_state(cfg).values) == expected
        graph.invoke({"messages": [HumanMessage(content="next", id=f"next-{thread_id}")]}, cfg)
        values = graph.get_state(cfg).values["messages"]
        assert [m.content for m in values][-2:] == ["next", f"echo {len(values) - 1}"]

    saver.copy_thread("src", "copy")
    check("copy")

    saver.copy_thread("src", "pruned")
    saver.prune(["pruned"], strategy="keep_latest")
    # The head and its ancestors back to the channel's last stored value (snapshot_frequency
    # 3): LangGraph's default delta walk, the LangGraph server's, reads the channel from them.
    kept = len(list(saver.list({"configurable": {"thread_id": "pruned"}})))
    assert 1 < kept <= 1 + 3 < len(list(saver.list(config)))
    check("pruned")

    saver.copy_thread("src", "deleted")
    saver.delete_for_runs(runs[2:5])  # also deletes them from "src" and "copy"
    remaining = {
        t.metadata.get("run_id") for t in saver.list({"configurable": {"thread_id": "deleted"}})
    }
    assert not remaining & set(runs[2:5])
    check("deleted")


# -------------------------------------------------------- cold process


def test_a_cold_process_reads_the_same_state(backend):
    config = {"configurable": {"thread_id": "cold"}}
    graph = chat_graph().compile(checkpointer=backend.saver())
    for i in range(3):
        graph.invoke({"messages": [("user", f"q{i}")]}, config)
    script = (
        "import json\n"
        f"saver = {backend.saver_code()}\n"
        "t = saver.get_tuple({'configurable': {'thread_id': 'cold'}})\n"
        "print(json.dumps([m.content for m in t.checkpoint['channel_values']['messages']]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        '["q0", "you said: q0", "q1", "you said: q1", "q2", "you said: q2"]'
    )


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_stored_message_ids_match_the_live_state(backend, durability):
    """Reducers give ids to messages while background puts serialize them;
    what the file says must still be exactly what the graph holds."""
    graph = chat_graph().compile(checkpointer=backend.saver())
    config = {"configurable": {"thread_id": f"ids-{durability}"}}
    for i in range(40):
        out = graph.invoke(
            {"messages": [HumanMessage(content=f"q{i}")]}, config, durability=durability
        )
    live = [(m.type, m.id, m.content) for m in out["messages"]]
    assert all(m_id for _, m_id, _ in live)
    cold = backend.saver()
    stored = cold.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert [(m.type, m.id, m.content) for m in stored] == live
    for tup in cold.list(config):  # every older checkpoint is a prefix of the live list
        values = tup.checkpoint["channel_values"].get("messages", [])
        assert [(m.type, m.id, m.content) for m in values] == live[: len(values)]
