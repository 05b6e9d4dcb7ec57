"""Context switching: the model archives a topic, starts fresh, and comes back to it.

    .venv/bin/python examples/context_switching.py

Offline by default (a deterministic model that calls a tool when a message names it);
with ``OPENAI_API_KEY`` set and ``langchain-openai`` installed, a real model decides when
to call the tools. It shows:

1. a trip plan, then a new topic: ``chat_context_new`` archives the trip (a fork of the
   thread) and the model is sent only the system prompt and the new question;
2. the new topic archived in turn, then ``chat_context_load`` by words from the trip: the
   archive comes back as an ``ARCHIVED CONTEXT`` block, "for reference only, may not match
   the current question";
3. ``chat_context_list``, a load by id, and ``chat_context_clear_active``;
4. the files: the thread, one file per archive, the index beside them; the transcript
   keeps every message of every topic.

Everything lands in ``examples/chats/`` (thread ``context-switching``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _show import clip, offline
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.active_context import is_loaded_context_message
from langgraph_ctx.context.prompt import is_system_prompt_message
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import chat_model
from langgraph_ctx.tools import ContextArchive, context_tools

ROOT = Path(__file__).parent / "chats"
THREAD = "context-switching"


def build(saver: JsonlSaver, model: Any, tools: list[Any]) -> Any:
    """START -> context -> model -> (tools -> context -> model)* -> END."""
    pipeline = context_pipeline("personalized", model="gpt-4o", tools=tools, mode="chat")
    builder = StateGraph(ContextState)  # declares `active_context`
    builder.add_node("model", ModelNode(model, tools=tools, chunk_timeout=30.0))
    builder.add_node("tools", ToolNode(tools))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)  # the switch shows in the very next model call
    return builder.compile(checkpointer=saver)


def show_request(out: dict[str, Any]) -> None:
    """What the model was sent last: the composed prompt, then the active context."""
    parts = []
    for message in out["llm_input_messages"]:
        if is_system_prompt_message(message):
            parts.append("[system prompt]")
        elif is_loaded_context_message(message):
            parts.append("[ARCHIVED CONTEXT block]")
        elif message.type == "tool":
            parts.append(f"[{message.name} result]")
        elif message.type == "ai" and message.tool_calls:
            parts.append(f"[call {message.tool_calls[0]['name']}]")
        else:
            parts.append(f"{message.type}: {clip(message.content, 28)}")
    print(f"  model was sent ({len(parts)}): " + " | ".join(parts))


def main() -> None:
    saver = JsonlSaver(ROOT)
    archive = ContextArchive(saver)
    for entry in archive.entries(THREAD):  # start from a clean slate on every run
        saver.delete_thread(entry.archive_thread_id)
    archive.index.delete(THREAD)
    saver.delete_thread(THREAD)

    model = chat_model()
    tools = context_tools(saver)
    graph = build(saver, model, tools)
    config = {"configurable": {"thread_id": THREAD}}
    print("model: " + ("offline (deterministic)" if offline() else type(model).__name__))

    seen = 0

    def say(text: str) -> dict[str, Any]:
        nonlocal seen
        out = graph.invoke({"messages": [("user", text)]}, config)
        print(f"\nuser: {clip(text, 90)}")
        for message in out["messages"][seen:]:
            if message.type == "tool":
                status = "" if message.status == "success" else f" ({message.status})"
                print(f"  {message.name}{status}: {clip(message.content, 150)}")
        print(f"  assistant: {clip(out['messages'][-1].content, 90)}")
        show_request(out)
        print(f"  context  {out['context_usage']}")
        seen = len(out["messages"])
        return out

    say("I'm planning three days in Paris in May. I love museums but hate crowds.")
    say("Which day is best for the Musee d'Orsay, and how early should I go?")
    say("Different topic: a Python script that parses CSV invoices. chat_context_new Paris trip")
    say("The invoices have the columns date, client and amount in EUR.")
    out = say("Let me park the invoices for now. chat_context_new CSV invoices")
    invoices = out["messages"][-2].artifact["context"]["contextId"]
    out = say("Back to my trip: chat_context_load Orsay museums Paris")
    block = next(m for m in out["llm_input_messages"] if is_loaded_context_message(m))
    print("\n  the block the model sees:")
    for line in str(block.content).splitlines()[:9]:
        print(f"    {clip(line, 96)}")
    say("So, Orsay on which morning?")
    say("chat_context_list 5")
    say(f"Now the invoices again: chat_context_load {invoices}")
    out = say("Forget all of that. chat_context_clear_active")

    print(f"\nfiles in {ROOT}/:")
    for entry in reversed(archive.entries(THREAD)):
        path = Path(saver.path(entry.archive_thread_id))
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        # `msg` lines hold each message once ("like" lines repeat one under a new id)
        said = {str(x["msg"].get("content")) for x in lines if "msg" in x}
        kept = all(str(m.content) in said for m in archive.messages(entry))
        print(
            f"  {path.name}: {entry.title!r}, {entry.message_count} messages"
            f"{' (all in the file)' if kept else ' (MISSING from the file)'}; a fork of the "
            "thread as it was then"
        )
    index = archive.index.path(THREAD)  # type: ignore[attr-defined]
    print(f"  {index.name}: the index ({len(json.loads(index.read_text())['items'])} items)")
    print(f"  {Path(saver.path(THREAD)).name}: the thread, {len(out['messages'])} messages")
    users = [m for m in out["messages"] if m.type == "human"]
    print(f"the transcript keeps every message: {len(users)} user messages, all topics")
    print(f"read an archive with: jq -c 'select(.t==\"msg\") | .msg | {{type, content}}' {path}")


if __name__ == "__main__":
    main()
