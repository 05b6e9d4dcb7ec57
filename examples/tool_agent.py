"""Tool-using agent: pipeline, model node and tool node in a StateGraph, saved as JSONL.

    .venv/bin/python examples/tool_agent.py

Offline by default (a deterministic model that calls a tool when a message names it);
with ``OPENAI_API_KEY`` set and ``langchain-openai`` installed, a real model. It shows:

1. a large tool result pushing the context past the trigger: compaction shows it to the
   model as a preview with a ``read_tool_result`` reference (the full text stays in the
   conversation and the thread file);
2. a tool that raises: the model gets an error result instead of the run failing, and
   the failure goes to the error notebook;
3. the context usage bar (system prompt, tool schemas, history) of every request.

The thread file lands in ``examples/chats/tool-agent.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from _show import clip, notebook, offline, thread_file, turn
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.compaction import read_tool_result
from langgraph_ctx.context.prompt import PromptParts
from langgraph_ctx.nodes.errors import ModelNode, arecord_tool_errors, record_tool_errors
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import chat_model

ROOT = Path(__file__).parent / "chats"
THREAD = "tool-agent"
BUDGET = ContextBudget(total=3_000, output_reserve=300, name="demo 3k")
PARTS = PromptParts(persona="You are Otto, the on-call assistant of a small web shop.")


@tool
def grep_logs(pattern: str) -> str:
    """Search the web shop's logs for a pattern; returns the matching log lines."""
    lines = [
        f"2026-11-21 03:{i // 60:02d}:{i % 60:02d} INFO worker-{i % 4} "
        f"served /cart in {40 + i % 9} ms"
        for i in range(160)
    ]
    lines[97] = (
        "2026-11-21 03:01:37 ERROR worker-1 payment gateway timeout after 30000 ms "
        "(order 48213, /srv/shop/payments.py:212)"
    )
    return f"{len(lines)} lines matching {pattern!r}:\n" + "\n".join(lines)


@tool
def book_courier(order: str) -> str:
    """Book a courier pickup for an order id."""
    if "48213" in order:
        raise RuntimeError(f"order {order} is on hold: payment not captured")
    return f"courier booked for order {order}, pickup tomorrow 09:00-12:00"


TOOLS = [grep_logs, book_courier, read_tool_result]


def build(saver: JsonlSaver, model):
    """START -> context -> model -> (tools -> context -> model)* -> END."""
    pipeline = context_pipeline(
        BUDGET,
        model=getattr(model, "model_name", "gpt-4o"),
        tools=TOOLS,  # their schemas count in the budget
        prompt=PARTS,
        mode="agent",
    )
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=TOOLS, chunk_timeout=30.0))
    builder.add_node(
        "tools",
        ToolNode(TOOLS, wrap_tool_call=record_tool_errors, awrap_tool_call=arecord_tool_errors),
    )
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)  # tool results go through the pipeline too
    return builder.compile(checkpointer=saver)


def main() -> None:
    saver = JsonlSaver(ROOT)
    saver.delete_thread(THREAD)
    model = chat_model()
    graph = build(saver, model)
    config = {"configurable": {"thread_id": THREAD}}
    print(f"budget: {BUDGET.total:,} tokens; tools: {[t.name for t in TOOLS]}")
    print("model: " + ("offline (deterministic)" if offline() else type(model).__name__))

    seen = 0
    turns = [
        "Checkout feels slow tonight. Please grep_logs ERROR",
        "Thanks. Order 48213 must go out: book_courier 48213",
        "Then book_courier 48214 instead, it is ready.",
        "Summarise what we found and did, in two sentences.",
    ]
    before = 0
    for i, text in enumerate(turns, 1):
        out = graph.invoke({"messages": [("user", text)]}, config)
        seen = turn(f"agent {i}", text, out, seen)
        for message in out["messages"][before:]:
            if message.type == "tool":
                status = " (error)" if message.status == "error" else ""
                print(f"  tool {message.name}{status}: {clip(message.content, 80)}")
        before = len(out["messages"])

    shown = [m for m in out["llm_input_messages"] if m.type == "tool"]
    for message in shown:
        if str(message.content).startswith("TOOL_RESULT_PREVIEW"):
            print(f"\nthe model sees the big result as: {clip(message.content, 120)}")
    full = next(m for m in out["messages"] if m.type == "tool" and m.name == "grep_logs")
    print(f"the conversation keeps it whole: {len(str(full.content)):,} characters")
    notebook(out)
    thread_file(saver.path(THREAD), len(out["messages"]))


if __name__ == "__main__":
    main()
