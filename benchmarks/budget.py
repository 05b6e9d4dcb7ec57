"""Per-step cost of BudgetNode on a 2,000-message history.

Run: .venv/bin/python benchmarks/budget.py

Each step appends one user message and one AI reply, as an agent turn does, then
measures the next request three ways:

* BudgetNode: per-message cache, so a step counts only the new messages. Measured with
  the same message objects, and with fresh objects per step (what a checkpointer hands
  back after deserializing the state: same ids, new strings). Either way the counter
  finds the prefix it counted before by comparing the messages' fields in C, and sums
  per component are kept with the counts, so a step costs its new messages plus one
  comparison of the list.
* count_tokens: the same exact count, recomputed over the whole history every step.
* count_tokens_approximately: langchain-core's character-based estimate.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_ctx.context.tokens import count_tokens, load_encoding
from langgraph_ctx.nodes.budget import BudgetNode

HISTORY = 2_000
STEPS = 15
MODEL = "gpt-4o"
VOCABULARY = (
    "the a budget context model token tool call result weather Tokyo Paris plan day "
    "train museum hotel price search query summary history agent user reply first next "
    "because however although 2024 3.14 42 {json} [list] def return import class "
    "東京 天気 données résumé naïve café"
)
WORDS = VOCABULARY.split()


def text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def make_history(n: int, rng: random.Random) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are a travel planner.", id="sys")]
    i = 0
    while len(messages) < n:
        i += 1
        messages.append(HumanMessage(text(rng, 5, 60), id=f"h{i}"))
        if i % 4 == 0:  # a tool round trip every fourth turn
            messages.append(
                AIMessage(
                    "",
                    id=f"c{i}",
                    tool_calls=[{"name": "search", "args": {"q": text(rng, 2, 6)}, "id": f"t{i}"}],
                )
            )
            messages.append(ToolMessage(text(rng, 100, 600), tool_call_id=f"t{i}", id=f"r{i}"))
        messages.append(AIMessage(text(rng, 20, 250), id=f"a{i}"))
    return messages[:n]


def fresh_copy(messages: list[BaseMessage]) -> list[BaseMessage]:
    """New objects with the same content, as a checkpointer returns them."""
    return messages_from_dict(json.loads(json.dumps(messages_to_dict(messages))))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    # Making the fresh copies leaves the garbage collector a debt that the next function
    # to allocate would pay, whichever it is: collect before each timing.
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    rng = random.Random(7)
    load_encoding("o200k_base")  # loading once per process is not part of a step
    history = make_history(HISTORY, rng)
    turns = [
        (
            HumanMessage(text(rng, 5, 60), id=f"new-h{s}"),
            AIMessage(text(rng, 20, 250), id=f"new-a{s}"),
        )
        for s in range(STEPS)
    ]

    node = BudgetNode(model=MODEL)  # the state keeps its message objects (one graph run)
    restored = BudgetNode(model=MODEL)  # the state comes back from a checkpointer
    cold, first = timed(lambda: node.usage({"messages": history}))
    restored.usage({"messages": history})

    results: dict[str, list[float]] = {
        "node": [],
        "node_fresh": [],
        "recount": [],
        "approx": [],
    }
    last: dict[str, int] = {}
    messages = list(history)
    for human, ai in turns:
        messages = [*messages, human, ai]
        fresh = fresh_copy(messages)  # prepared outside the timing
        seconds, usage = timed(lambda m=messages: node.usage({"messages": m}))
        results["node"].append(seconds)
        last["node"] = usage.used
        # Same content in new objects: id + fingerprint hits, strings hashed again.
        seconds, usage = timed(lambda m=fresh: restored.usage({"messages": m}))
        results["node_fresh"].append(seconds)
        seconds, last["recount"] = timed(lambda m=messages: count_tokens(m, model=MODEL))
        results["recount"].append(seconds)
        seconds, last["approx"] = timed(lambda m=messages: count_tokens_approximately(m))
        results["approx"].append(seconds)

    median = {k: statistics.median(v) for k, v in results.items()}
    base = median["node"]
    rows = [
        ("BudgetNode, incremental cache", median["node"], last["node"]),
        ("BudgetNode, fresh objects (from a checkpoint)", median["node_fresh"], last["node"]),
        ("count_tokens, full recount each step", median["recount"], last["recount"]),
        ("count_tokens_approximately each step", median["approx"], last["approx"]),
    ]
    exact = last["recount"]
    print(
        f"{HISTORY:,}-message history (+2 messages per step), model {MODEL}, "
        f"median of {STEPS} steps, Python {sys.version.split()[0]}"
    )
    print()
    approx = median["approx"]
    print(
        "| method | ms / step | vs BudgetNode | vs count_tokens_approximately "
        "| tokens counted | vs exact |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, seconds, tokens in rows:
        error = 100 * (tokens - exact) / exact
        print(
            f"| {label} | {seconds * 1000:.2f} | {seconds / base:.1f}x | {seconds / approx:.2f}x "
            f"| {tokens:,} | {error:+.1f}% |"
        )
    print()
    worst = max(median["node"], median["node_fresh"]) / approx
    print(
        f"Issue 16 goal (BudgetNode step at most 1.5x count_tokens_approximately, same or "
        f"fresh objects): {worst:.2f}x, {'met' if worst <= 1.5 else 'MISSED'}"
    )
    print(f"BudgetNode first step (cold cache, {first.messages:,} messages): {cold * 1000:.1f} ms")
    assert last["node"] == last["recount"], "incremental and full counts must agree"


if __name__ == "__main__":
    main()
