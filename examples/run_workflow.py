"""Run-mode workflow: chat, then a three-step run, then questions after it; async.

    .venv/bin/python examples/run_workflow.py

Offline by default; with ``OPENAI_API_KEY`` set and ``langchain-openai`` installed, a
real model. One conversation, one thread file, three modes:

1. chat mode: your own prompt (``system_prompt=``, sent first in every mode) and the
   chat rules, no run information;
2. run mode while a step is active: ``RUN_DIRECTIVE`` and ``NODE_BRIEF`` (with the
   step's context) in the system prompt; replies are tagged with the run and step ids;
3. run mode after completion: ``RUN_DIRECTIVE`` with the post-run protocol only, no
   step or node information;
4. back to chat: the whole history is still there, only the system prefix changed.

Every request prints its context usage bar; the budget is small, so compaction shows up.
The thread file lands in ``examples/chats/run-workflow.jsonl``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _show import notebook, offline, thread_file, turn
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.compaction import LLMSummary
from langgraph_ctx.context.prompt import RunContext, WorkflowStep
from langgraph_ctx.nodes.errors import ModelNode, arecord_tool_errors, record_tool_errors
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import ExtractiveSummaryModel, chat_model

ROOT = Path(__file__).parent / "chats"
THREAD = "run-workflow"
BUDGET = ContextBudget(total=1_500, output_reserve=200, name="demo 1.5k")
# Sent first, verbatim, in every mode. (A persona in PromptParts would be sent in run
# mode only, and chat mode would leave it out with a PersonaDroppedWarning.)
SYSTEM_PROMPT = "You are Quill, an analyst who writes short, sourced reports."


@tool
def fetch_sales(region: str) -> str:
    """Monthly sales of a region for the quarter, as a table."""
    months = ["July", "August", "September"]
    rows = [
        f"{month} week {w}: {region.split()[0]} revenue {11_000 + 731 * i + 97 * w} EUR, "
        f"orders {310 + 7 * i + w}, returns {12 + (i * w) % 9}"
        for i, month in enumerate(months)
        for w in range(1, 5)
    ]
    return "month | revenue | orders | returns\n" + "\n".join(rows)


TOOLS = [fetch_sales]
STEPS = [
    WorkflowStep(
        id="collect",
        name="Collect sales",
        brief="Fetch the Q3 sales of EMEA with fetch_sales.",
        context={"region": "EMEA", "quarter": "Q3", "source": "warehouse"},
        index=1,
        total=3,
    ),
    WorkflowStep(
        id="analyse",
        name="Analyse",
        brief="Find the weakest month and say why, from the table of step 1.",
        index=2,
        total=3,
    ),
    WorkflowStep(
        id="report",
        name="Report",
        brief="Write a five-line summary for the board.",
        context="Audience: the board. Tone: plain. No tables.",
        index=3,
        total=3,
    ),
]
ASKS = {
    "collect": "Run the current step: fetch_sales EMEA",
    "analyse": "Run the current step: which month was weakest?",
    "report": "Run the current step: write the board summary.",
}


def build(saver: JsonlSaver, model):
    # Compaction folds what it drops into a running summary. Offline the summariser is
    # ExtractiveSummaryModel (deterministic, copies fact sentences; not an LLM).
    summariser = ExtractiveSummaryModel() if offline() else model
    pipeline = context_pipeline(
        BUDGET,
        model=getattr(model, "model_name", "gpt-4o"),
        tools=TOOLS,
        system_prompt=SYSTEM_PROMPT,
        mode="chat",
        strategy=LLMSummary(summariser),
        trigger=0.75,
        target=0.6,
    )
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=TOOLS, timeout=120.0))
    builder.add_node(
        "tools",
        ToolNode(TOOLS, wrap_tool_call=record_tool_errors, awrap_tool_call=arecord_tool_errors),
    )
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def sections(prompt: str) -> str:
    """The section headers of a composed system prompt (its upper-case first lines)."""
    heads = [block.splitlines()[0] for block in prompt.split("\n\n") if block]
    return " | ".join(h for h in heads if h.isupper() or h.startswith("You are"))


async def main() -> None:
    saver = JsonlSaver(ROOT)
    await saver.adelete_thread(THREAD)
    model = chat_model()
    graph = build(saver, model)
    config = {"configurable": {"thread_id": THREAD}}
    print("model: " + ("offline (deterministic)" if offline() else type(model).__name__))
    seen = 0

    async def say(label: str, text: str, **state: Any) -> dict[str, Any]:
        nonlocal seen
        out = await graph.ainvoke({"messages": [("user", text)], **state}, config)
        seen = turn(label, text, out, seen)
        print(f"  prompt sections: {sections(out['system_prompt'])}")
        return out

    # 1. Chat before the run.
    await say("chat", "Hi! I need the Q3 EMEA sales report for the board today.")

    # 2. The run, one step at a time: the app moves `run_context` along.
    run = RunContext(workflow_id="q3-board-report", run_id="run-0042", goal="Q3 EMEA report")
    for step in STEPS:
        run = run.model_copy(update={"step": step})
        out = await say(f"run {step.id}", ASKS[step.id], mode="run", run_context=run)
        tags = out["messages"][-1].response_metadata.get("langgraph_ctx")
        print(f"  reply tagged: {tags}")
    brief = out["system_prompt"].split("\n\nNODE_BRIEF\n", 1)[1].splitlines()
    print(f"  NODE_BRIEF of the last step: {brief}")

    summary = [m for m in out["llm_input_messages"] if m.type == "system"][1:]
    if summary:
        print(f"  the model is sent: system prompt, then {str(summary[0].content)[:60]!r}...")

    # 3. After completion: RUN_DIRECTIVE with the post-run protocol, no step information.
    done = run.model_copy(update={"status": "completed", "result": "board summary written"})
    out = await say("after run", "What did the run find?", run_context=done)
    assert "POST_RUN_PROTOCOL" in out["system_prompt"]
    assert "NODE_BRIEF" not in out["system_prompt"]

    # 4. Back to chat: the history is whole, the prefix is chat's.
    out = await say("chat again", "Thanks! Unrelated: any tip for a rainy weekend?", mode="chat")
    assert "RUN_DIRECTIVE" not in out["system_prompt"]  # chat mode carries no run information
    notebook(out)
    thread_file(saver.path(THREAD), len(out["messages"]))


if __name__ == "__main__":
    asyncio.run(main())
