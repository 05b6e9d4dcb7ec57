"""Chat assistant: the context pipeline in a StateGraph, saved as JSONL.

    .venv/bin/python examples/chat_assistant.py

Offline by default (a deterministic model); with ``OPENAI_API_KEY`` set and
``langchain-openai`` installed, the same script talks to a real model. It shows:

1. the context usage bar of every request, and compaction when the (deliberately
   small) budget fills up: the model sees less, the thread file keeps everything;
2. a switch to agent mode that changes only the system prompt (your own prompt stays
   first, the mode's rules follow it), not the history;
3. a reply cut off by a timeout: it stays in the conversation as the partial text
   plus an ``LLM_ERROR`` block, and "continue" resumes from it.

The thread file lands in ``examples/chats/chat-assistant.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from _show import notebook, offline, thread_file, turn
from langgraph.graph import START, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import chat_model

ROOT = Path(__file__).parent / "chats"
THREAD = "chat-assistant"
# Small on purpose, so that compaction happens within a dozen turns.
BUDGET = ContextBudget(total=1_400, output_reserve=200, name="demo 1.4k")
# Sent first, verbatim, in every mode. (A persona in PromptParts would be sent in agent
# and run mode only, and chat mode would leave it out with a PersonaDroppedWarning.)
SYSTEM_PROMPT = "You are Juniper, a patient gardening coach."

TURNS = [
    "Hi! I'm Sam and I'm planning a vegetable garden.",
    "The plot is 6 by 4 metres and faces south.",
    "It must be safe for my two cats: nothing toxic to them.",
    "I'd like tomatoes, basil and some salad leaves.",
    "The soil is heavy clay; last year the carrots failed.",
    "I can water every morning, about 20 minutes.",
    "My budget is 150 euros for seeds and tools.",
    "We get late frosts until mid-May here.",
    "Could I grow strawberries along the fence?",
    "What about a compost corner, 1 square metre?",
]


def build(saver: JsonlSaver, model, **limits):
    """A chat graph: START -> context (budget, compaction, prompt) -> model."""
    pipeline = context_pipeline(
        BUDGET,
        model=getattr(model, "model_name", "gpt-4o"),
        system_prompt=SYSTEM_PROMPT,
        mode="chat",
        trigger=0.8,
        target=0.5,
    )
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, **limits))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    return builder.compile(checkpointer=saver)


def opening(prompt: str) -> str:
    """The start of a composed system prompt: your own prompt, then the mode's first rule."""
    yours, rules = prompt.split("\n\n")[:2]
    return f"{yours!r} + {rules.splitlines()[0]!r} ..."


def main() -> None:
    saver = JsonlSaver(ROOT)
    saver.delete_thread(THREAD)  # start the demo from scratch every run
    model = chat_model(interrupt_on="essay", stall_seconds=5.0)
    graph = build(saver, model, chunk_timeout=20.0)
    # The same thread through a node with a short time limit, for step 3: offline the
    # model stalls mid-answer; a real model cannot write an essay in one second.
    impatient = build(saver, model, timeout=1.0)
    config = {"configurable": {"thread_id": THREAD}}
    print(f"budget: {BUDGET.total:,} tokens, {BUDGET.output_reserve:,} kept for the reply")
    print("model: " + ("offline (deterministic)" if offline() else type(model).__name__))

    # 1. A conversation that outgrows the budget.
    seen = 0
    for i, text in enumerate(TURNS, 1):
        out = graph.invoke({"messages": [("user", text)]}, config)
        seen = turn(f"chat {i}", text, out, seen)
    # What chat mode sends: your prompt, then the chat rules.
    print(f"  system prompt sent: {opening(out['system_prompt'])}")

    # 2. Agent mode: a new system prefix, the same history.
    text = "Act as my planning agent now: list the next three tasks."
    out = graph.invoke({"messages": [("user", text)], "mode": "agent"}, config)
    seen = turn("agent", text, out, seen)
    print(f"  system prompt now: {opening(out['system_prompt'])}")

    # 3. A reply cut off by a timeout, then "continue".
    text = "Write me an essay on companion planting."
    out = impatient.invoke({"messages": [("user", text)]}, config)
    seen = turn("timeout", text, out, seen)
    out = graph.invoke({"messages": [("user", "continue")]}, config)
    seen = turn("continue", "continue", out, seen)
    notebook(out)

    messages = len(out["messages"])
    print(f"\nthe model was sent {len(out['llm_input_messages'])} messages of {messages}")
    thread_file(saver.path(THREAD), messages)


if __name__ == "__main__":
    main()
