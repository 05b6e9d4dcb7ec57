"""A checkpointed graph gets back the message objects it saw (issue 16, item 1).

`LogSaver` answers a read with the messages it decoded once (see
`_Index.message`), so a step over a long thread costs what it adds: here a
`BudgetNode` in a real checkpointed `StateGraph`, counted by what its token
counter examines (its per-message cache and its tokenizer calls), not by time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import START, StateGraph

from langgraph_ctx import BudgetNode
from langgraph_ctx.nodes.state import BudgetState
from tests.backends import Backend
from tests.graphs import single_node

CONFIG = {"configurable": {"thread_id": "t"}}


def test_a_budget_step_costs_its_new_messages_not_the_history(backend: Backend) -> None:
    tokenized: list[int] = []

    def count(messages: list[BaseMessage]) -> int:  # the real rules, with a call count
        from langgraph_ctx.context.tokens import count_tokens

        tokenized.append(len(messages))
        return int(count_tokens(messages, model="gpt-4o"))

    node = BudgetNode(model="gpt-4o", token_counter=count)
    seen: list[list[BaseMessage]] = []

    def bot(state: BudgetState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        used = state["context_usage"].used
        return {"messages": [AIMessage(f"turn {len(seen)}: {used} tokens so far " + "x" * 200)]}

    builder = StateGraph(BudgetState)
    builder.add_node("budget", node)
    builder.add_node(bot)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "bot")
    graph = builder.compile(checkpointer=backend.saver())

    examined: list[int] = []  # messages the counter looked up beyond the shared prefix
    calls: list[int] = []
    for turn in range(30):
        before, before_calls = node.counter.hits + node.counter.misses, len(tokenized)
        graph.invoke({"messages": [("user", f"question {turn} " + "y" * 200)]}, CONFIG)
        examined.append(node.counter.hits + node.counter.misses - before)
        calls.append(len(tokenized) - before_calls)

    # the history read back is the same objects: only the last turn's two messages
    # (decoded from their lines) and the new question are looked up, at 6 or 60 messages
    # (the counter may also recognise the answer it saw last turn: 2 or 3 lookups, but
    # the same number at turn 4 and turn 30)
    assert examined[3:] == [examined[3]] * 27 and examined[3] <= 3, examined
    assert calls[3:] == [2] * 27, calls  # the previous answer and the new question
    previous, last = seen[-2], seen[-1]
    assert len(last) == len(previous) + 2
    assert all(a is b for a, b in zip(previous[:-1], last, strict=False))
    # and the usage is what a fresh process (a fresh node, fresh objects) computes
    fresh = backend.saver().get_tuple(CONFIG).checkpoint["channel_values"]
    again = BudgetNode(model="gpt-4o", token_counter=count)
    assert again.usage({"messages": fresh["messages"][:-1]}).used == fresh["context_usage"].used


def _chat(saver: Any) -> Any:
    def bot(state: BudgetState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    return single_node(saver, bot, BudgetState)


def _contents(saver: Any, thread_id: str) -> list[str]:
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    return [m.content for m in tup.checkpoint["channel_values"]["messages"]]


def test_idle_thread_indexes_are_evicted_and_reopen_from_the_log(backend: Backend) -> None:
    saver = backend.saver(max_cached_threads=2)
    graph = _chat(saver)
    threads = [f"t{i}" for i in range(5)]
    for turn in range(3):
        for thread_id in threads:
            config = {"configurable": {"thread_id": thread_id}}
            graph.invoke({"messages": [("user", f"{thread_id} q{turn}")]}, config)
            assert len(saver._indexes) <= 2
    assert list(saver._indexes) == ["t3", "t4"]  # the least recently used went first
    fresh = backend.saver()
    for thread_id in threads:
        assert _contents(saver, thread_id) == _contents(fresh, thread_id)
        assert len(_contents(saver, thread_id)) == 6
        history = list(saver.list({"configurable": {"thread_id": thread_id}}))
        assert len(history) == len(list(fresh.list({"configurable": {"thread_id": thread_id}})))
    # a reopened thread goes on where it was: no message text stored twice
    graph.invoke({"messages": [("user", "t0 q3")]}, {"configurable": {"thread_id": "t0"}})
    assert _contents(fresh, "t0")[-2:] == ["t0 q3", "answer 7"]
    lines = [json.loads(line) for line in backend.log_bytes("t0").decode().splitlines()]
    bodies = [o["msg"]["content"] for o in lines if o["t"] == "msg" and "msg" in o]
    assert sorted(bodies) == sorted(set(bodies)) and len(bodies) == 8


def test_the_line_bound_keeps_the_thread_in_use(backend: Backend) -> None:
    saver = backend.saver(max_cached_lines=1)
    graph = _chat(saver)
    for thread_id in ("a", "b"):
        for turn in range(2):
            config = {"configurable": {"thread_id": thread_id}}
            graph.invoke({"messages": [("user", f"{thread_id}{turn}")]}, config)
    assert list(saver._indexes) == ["b"]
    assert _contents(saver, "a") == ["a0", "answer 1", "a1", "answer 3"]
    assert list(saver._indexes) == ["a"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "64"])
def test_cache_bounds_must_be_positive_ints(backend: Backend, bad: Any) -> None:
    with pytest.raises(ValueError, match="max_cached_threads"):
        backend.saver(max_cached_threads=bad)
    with pytest.raises(ValueError, match="max_cached_lines"):
        backend.saver(max_cached_lines=bad)
