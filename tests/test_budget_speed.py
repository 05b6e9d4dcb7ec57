"""BudgetNode's step costs its new messages, and an edit in place is still recounted.

The counter reuses the counted prefix of a list whether the state holds the very same
message objects (a graph run, `JsonlSaver` serving its head from memory) or fresh copies
(`InMemorySaver`, `SqliteSaver`). These tests pin both halves: what is reused (counted by
how many messages go through the per-message cache) and what must not be (every kind of
in-place edit a node can make to a message it already returned).
"""

from __future__ import annotations

import json
import operator
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget, compute_usage
from langgraph_ctx.context.tokens import MessageTokenCounter, count_tokens
from langgraph_ctx.nodes.budget import BudgetNode, BudgetState


def _history(n: int, seed: int = 3) -> list[BaseMessage]:
    rng = random.Random(seed)
    words = [
        "plan",
        "train",
        "museum",
        "hotel",
        "price",
        "weather",
        "Tokyo",
        "Paris",
        "search",
        "42",
        "東京",
        "café",
    ]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    out: list[BaseMessage] = [SystemMessage("You plan trips.", id="sys")]
    i = 0
    while len(out) < n:
        i += 1
        out.append(HumanMessage(text(12), id=f"h{i}"))
        if i % 3 == 0:
            call = {"name": "search", "args": {"q": text(3)}, "id": f"c{i}", "type": "tool_call"}
            out.append(AIMessage("", id=f"c{i}", tool_calls=[call]))
            out.append(ToolMessage(text(40), tool_call_id=f"c{i}", id=f"t{i}"))
        out.append(AIMessage(text(30), id=f"a{i}"))
    return out[:n]


def _fresh(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages_from_dict(json.loads(json.dumps(messages_to_dict(messages))))


class _Counting:
    """Counts the messages that reach the per-message cache (the ones not reused)."""

    def __init__(self, counter: MessageTokenCounter) -> None:
        self.seen = 0
        original = counter._count_all

        def count_all(messages: Any) -> list[int]:
            self.seen += len(messages)
            return original(messages)

        counter._count_all = count_all  # type: ignore[method-assign]


EDITS: dict[str, Callable[[BaseMessage], None]] = {
    "content rebound": lambda m: setattr(m, "content", m.content + " and a much longer tail"),
    "name rebound": lambda m: setattr(m, "name", "a_rather_long_participant_name"),
    "additional_kwargs filled in place": lambda m: m.additional_kwargs.update(
        name="a_rather_long_participant_name"
    ),
    "tool call arguments edited in place": lambda m: m.tool_calls[0]["args"].update(
        q="a much longer query than the one counted before " * 4
    ),
    "tool call appended in place": lambda m: m.tool_calls.append(
        {"name": "search", "args": {"q": "more"}, "id": "extra", "type": "tool_call"}
    ),
    "list content block edited in place": lambda m: m.content[0].update(  # type: ignore[union-attr]
        text="a block of text rewritten in place, longer than it was"
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("objects", ["same", "fresh"])
def test_an_edit_in_place_is_recounted(edit: str, objects: str) -> None:
    history = _history(60)
    if edit.startswith("tool call"):
        target = next(i for i, m in enumerate(history) if getattr(m, "tool_calls", None))
    else:
        target = 5
    if edit == "list content block edited in place":
        history[target] = HumanMessage([{"type": "text", "text": "short"}], id="blocks")
    counter = MessageTokenCounter("gpt-4o")
    budget = ContextBudget.preset("planning")
    state = history if objects == "same" else _fresh(history)
    before = compute_usage(state, budget, counter=counter).used
    if objects == "fresh":  # the same copies served again: synced, compared by identity
        compute_usage(state, budget, counter=counter)
    EDITS[edit](state[target])
    after = compute_usage(state, budget, counter=counter)
    assert after.used == count_tokens(state)
    assert after.used != before
    # And the step after an edit reuses the list again.
    counting = _Counting(counter)
    grown = [*state, HumanMessage("one more question", id="late")]
    assert compute_usage(grown, budget, counter=counter).used == count_tokens(grown)
    assert counting.seen == 1


def test_a_rebound_field_that_does_not_change_the_count_still_keeps_the_prefix() -> None:
    # Metadata a provider adds later (response_metadata) is not part of a count: rebinding
    # it ends the reused prefix there (it is a field), replacing it keeps counts exact.
    history = _history(40)
    counter = MessageTokenCounter("gpt-4o")
    budget = ContextBudget.preset("planning")
    compute_usage(history, budget, counter=counter)
    history[-1].response_metadata = {"model_name": "gpt-4o", "finish_reason": "stop"}
    counting = _Counting(counter)
    assert compute_usage(history, budget, counter=counter).used == count_tokens(history)
    assert counting.seen == 1


def test_a_message_of_another_class_with_equal_fields_is_recounted() -> None:
    counter = MessageTokenCounter("gpt-4o")
    budget = ContextBudget.preset("planning")
    history = _history(20)
    compute_usage(history, budget, counter=counter)
    swapped = list(history)
    old = history[1]
    swapped[1] = ChatMessage(content=old.content, role="critic", id=old.id)
    assert compute_usage(swapped, budget, counter=counter).used == count_tokens(swapped)


def test_fresh_copies_served_twice_compare_by_identity_from_then_on() -> None:
    # JsonlSaver decodes a state once and serves the same objects afterwards: after one
    # step of value comparisons the counter's copies are those objects' fields.
    counter = MessageTokenCounter("gpt-4o")
    history = _history(200)
    counter.tally(history)
    served = _fresh(history)
    for step in range(3):
        served = [*served, HumanMessage(f"step {step}", id=f"s{step}")]
        tally = counter.tally(served)
        assert tally.counts == [count_tokens([m]) - 3 for m in served]
    states = tally.columns.states
    shared = sum(
        all(map(operator.is_, m.__dict__.values(), states[i])) for i, m in enumerate(served)
    )
    assert shared == len(served)


def test_a_checkpointer_that_copies_every_step_never_makes_the_counter_copy() -> None:
    counter = MessageTokenCounter("gpt-4o")
    history = _history(100)
    first = counter.tally(history)
    states_before = list(first.columns.states)
    tally = counter.tally(_fresh(history))
    assert all(a is b for a, b in zip(tally.columns.states, states_before, strict=True))


@pytest.mark.parametrize("saver", ["JsonlSaver", "InMemorySaver"])
def test_budget_node_in_a_checkpointed_graph_counts_only_new_messages(
    saver: str, tmp_path: Path
) -> None:
    node = BudgetNode("planning", model="gpt-4o")
    counting = _Counting(node.counter)
    seen: list[int] = []

    def budget(state: dict[str, Any]) -> dict[str, Any]:
        before = counting.seen
        out = node(state)
        seen.append(counting.seen - before)
        assert out["context_usage"].used == count_tokens(state["messages"])
        return out

    def model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])} " * 5)]}

    builder: Any = StateGraph(BudgetState)
    builder.add_node("budget", budget)
    builder.add_node("model", model)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "model")
    checkpointer = JsonlSaver(tmp_path) if saver == "JsonlSaver" else InMemorySaver()
    graph = builder.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": _history(80)}, config)
    for turn in range(4):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    # The first step counts everything; then a turn's new user message and the reply.
    assert seen[0] == 80
    assert seen[1:] == [2, 2, 2, 2]


def test_concurrent_steps_on_one_counter_stay_exact() -> None:
    counter = MessageTokenCounter("gpt-4o")
    budget = ContextBudget.preset("planning")
    history = _history(300)
    compute_usage(history, budget, counter=counter)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            messages = list(history)
            for step in range(15):
                messages = [*messages, HumanMessage(f"worker {seed} step {step}", id=None)]
                state = messages if step % 2 else _fresh(messages)
                used = compute_usage(state, budget, counter=counter).used
                assert used == count_tokens(state)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_the_budget_benchmark_runs_and_counts_exactly() -> None:
    # benchmarks/budget.py asserts, for each checkpointer, that the node's count of the
    # last state equals a full count_tokens; a small thread keeps this quick.
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "budget.py"),
            "--messages",
            "300",
            "--steps",
            "3",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| JsonlSaver (the same objects), async",
        "| JsonlSaver (the same objects), sync",
        "| InMemorySaver (fresh copies), async",
    ]
    assert "equal to a full `count_tokens`" in done.stdout
    assert "Issue 16 goal" in done.stdout
