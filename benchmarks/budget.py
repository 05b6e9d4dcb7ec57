"""Per-step cost of BudgetNode on a 2,000-message checkpointed thread (issue 16).

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/budget.py [--steps 15] [--messages 2000]

A `StateGraph` (`BudgetState`: messages, context_usage) with a budget node and a model
node answers one user message per turn, checkpointed. The first turn brings a 2,000-message
history; every later turn adds the user's message and the model's reply. Inside the
budget node, on the state LangGraph read back through the checkpointer, each step runs:

* `BudgetNode` (exact tiktoken counts, cached per message: a step should cost its new
  messages), and
* `count_tokens_approximately` (langchain-core's character estimate) on the same list,

in alternating order (the second to run finds the messages in the CPU cache). Two
checkpointers hand the node different objects:

* `JsonlSaver` serves its head from memory: the state holds the same message objects
  from step to step (after the first, which holds the objects it decoded);
* `InMemorySaver` deserializes the state every step: fresh copies, compared by value.

Two clocks, medians over the steps:

* CPU: `time.thread_time()` of the thread running the node. The issue's goal is read
  on it: it is the node's own work, and stays meaningful on a loaded machine.
* wall: `time.perf_counter()`. With LangGraph's default `durability="async"` the
  previous checkpoint is written in a background thread while the step runs. tiktoken's
  encoder releases the GIL on every call; the writer, waiting for the GIL, took it at the
  node's first count of a new message and kept it until its put ended (a thread that
  gave the GIL up has no priority to take it back before `sys.getswitchinterval()`,
  5 ms), so the node's wall time held the rest of that put (1.67x the estimate's, which
  never releases the GIL). Found with a profile hook on the node's thread: its wall
  minus CPU time between events sat in `CoreBPE.encode_ordinary`, and stayed there with
  the switch interval at 1 s. Now a counter counts a step's few new messages holding the
  GIL (`keeping_gil`: the encoding's own split by `regex`, told not to release it, then
  `encode_single_piece`; the same tokens), and the put at 2,000 messages costs about
  half what it did; with both durabilities wall time is CPU time.

`benchmarks/perf.py --only budget` runs `measure` with `JsonlSaver` (the same numbers).
The exact full recount (`count_tokens` over the whole list every step) is timed once on
the last state, for scale.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.tokens import count_tokens, load_encoding
from langgraph_ctx.nodes.budget import BudgetNode, BudgetState

HISTORY = 2_000
STEPS = 15
MODEL = "gpt-4o"
THREAD = {"configurable": {"thread_id": "budget"}}
USAGE_TYPE = ("langgraph_ctx.context.budget", "ContextUsage")  # the state's context_usage
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
    """`n` messages: a system prompt, user turns, replies, a tool round trip every 4th turn."""
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


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(CPU seconds of this thread, wall seconds, value)."""
    cpu, wall = time.thread_time(), time.perf_counter()
    value = fn()
    return time.thread_time() - cpu, time.perf_counter() - wall, value


def measure(
    checkpointer: BaseCheckpointSaver[Any],
    *,
    messages: int = HISTORY,
    steps: int = STEPS,
    seed: int = 7,
    durability: Literal["sync", "async", "exit"] = "async",
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the checkpointed graph and time BudgetNode and the estimate in its node.

    `durability` is LangGraph's: `"async"` (its default) writes each checkpoint in a
    background thread while the next node runs, `"sync"` before it.

    Returns medians in ms (`node_ms` / `approx_ms`: CPU; `*_wall_ms`: wall), their
    ratios, the first (cold cache) step, the list lengths seen and the last counts.
    """
    load_encoding("o200k_base")  # loading once per process is not part of a step
    node = BudgetNode(model=MODEL)
    samples: dict[str, list[float]] = {"node": [], "node_wall": [], "approx": [], "approx_wall": []}
    seen: list[int] = []
    last: dict[str, Any] = {}

    def budget(state: dict[str, Any]) -> dict[str, Any]:
        history = state["messages"]
        runs: list[tuple[str, Callable[[], Any]]] = [
            ("node", lambda: node(state)),
            ("approx", lambda: count_tokens_approximately(history)),
        ]
        if len(seen) % 2:
            runs.reverse()
        for name, fn in runs:
            cpu, wall, value = _timed(fn)
            samples[name].append(cpu)
            samples[f"{name}_wall"].append(wall)
            last[name] = value
        seen.append(len(history))
        last["messages"] = history
        return {"context_usage": last["node"]["context_usage"]}

    rng = random.Random(seed)

    def model(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(text(rng, 20, 250))]}

    builder: Any = StateGraph(BudgetState)
    builder.add_node("budget", budget)
    builder.add_node("model", model)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "model")
    graph = builder.compile(checkpointer=checkpointer)
    if log:
        log(f"budget: {messages:,}-message thread, {steps} steps, {type(checkpointer).__name__}")
    graph.invoke({"messages": make_history(messages - 1, random.Random(seed))}, THREAD)
    first = {k: v[0] for k, v in samples.items()}
    for values in samples.values():
        values.clear()
    seen.clear()
    for _ in range(steps):
        graph.invoke({"messages": [HumanMessage(text(rng, 5, 60))]}, THREAD, durability=durability)
    final: list[BaseMessage] = last["messages"]
    used = last["node"]["context_usage"].used
    recount_cpu, _, exact = _timed(lambda: count_tokens(final, model=MODEL))
    assert used == exact, f"BudgetNode counted {used:,}, count_tokens {exact:,}"
    ms = {k: 1000 * statistics.median(v) for k, v in samples.items()}
    return {
        "checkpointer": type(checkpointer).__name__,
        "durability": durability,
        "node_ms": ms["node"],
        "approx_ms": ms["approx"],
        "node_wall_ms": ms["node_wall"],
        "approx_wall_ms": ms["approx_wall"],
        "ratio": ms["node"] / ms["approx"],
        "ratio_wall": ms["node_wall"] / ms["approx_wall"],
        "first_step_ms": 1000 * first["node"],
        "recount_ms": 1000 * recount_cpu,
        "messages": list(seen),
        "tokens": used,
        "approx_tokens": last["approx"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--messages", type=int, default=HISTORY)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sizes: dict[str, Any] = {"messages": args.messages, "steps": args.steps}
        results = [
            measure(JsonlSaver(Path(tmp) / "async"), **sizes),
            measure(JsonlSaver(Path(tmp) / "sync"), durability="sync", **sizes),
            measure(
                InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=[USAGE_TYPE])),
                **sizes,
            ),
        ]
    print(
        f"{args.messages:,}-message checkpointed thread (+2 messages per step), model {MODEL}, "
        f"median of {args.steps} steps, Python {sys.version.split()[0]}"
    )
    print()
    print(
        "| checkpointer (objects the node gets), durability | BudgetNode CPU ms "
        "| estimate CPU ms | ratio (CPU) | BudgetNode wall ms | estimate wall ms | ratio (wall) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    kinds = {"JsonlSaver": "the same objects", "InMemorySaver": "fresh copies"}
    for r in results:
        print(
            f"| {r['checkpointer']} ({kinds[r['checkpointer']]}), {r['durability']} "
            f"| {r['node_ms']:.2f} | {r['approx_ms']:.2f} | {r['ratio']:.2f}x "
            f"| {r['node_wall_ms']:.2f} | {r['approx_wall_ms']:.2f} | {r['ratio_wall']:.2f}x |"
        )
    print()
    jsonl = results[0]
    exact, approx = jsonl["tokens"], jsonl["approx_tokens"]
    print(
        f"Tokens on the last state: BudgetNode {exact:,} (equal to a full `count_tokens`, "
        f"which takes {jsonl['recount_ms']:.1f} ms CPU); count_tokens_approximately "
        f"{approx:,} ({100 * (approx - exact) / exact:+.1f}%)."
    )
    print(
        "BudgetNode first step (cold cache, every message counted): "
        + ", ".join(f"{r['checkpointer']} {r['first_step_ms']:.1f} ms" for r in results)
        + " CPU."
    )
    value = jsonl["ratio"]
    print(
        f"Issue 16 goal (BudgetNode step at most 1.5x count_tokens_approximately, CPU, "
        f"JsonlSaver, as `perf.py --only budget`): {value:.2f}x, "
        f"{'met' if value <= 1.5 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
