"""Quickstart: a LangGraph chat persisted with JsonlSaver, then forked and reverted.

Run it with ``make demo`` (offline, no API key needed). With ``OPENAI_API_KEY``
set and ``langchain-openai`` installed, the same script talks to a real model.
The thread files land in ``examples/chats/``; look at them with ``jq``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.testing import chat_model

ROOT = Path(__file__).parent / "chats"


def build_graph(saver: JsonlSaver):
    model = chat_model()

    def chatbot(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    return builder.compile(checkpointer=saver)


def transcript(graph, thread_id: str) -> list[str]:
    state = graph.get_state({"configurable": {"thread_id": thread_id}})
    return [f"{m.type:>5}: {m.content}" for m in state.values.get("messages", [])]


def show(title: str, lines: list[str]) -> None:
    print(f"\n== {title}")
    for line in lines:
        print("  " + line)


def main() -> None:
    saver = JsonlSaver(ROOT)
    for thread_id in ("quickstart", "quickstart-retry"):
        saver.delete_thread(thread_id)  # start the demo from scratch every run
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "quickstart"}}

    # 1. A conversation, saved as it happens.
    for text in ["Hi! I'm planning a trip to Lisbon.", "What should I pack?", "Any food tips?"]:
        graph.invoke({"messages": [("user", text)]}, config)
    show("thread 'quickstart'", transcript(graph, "quickstart"))

    path = Path(saver.path("quickstart"))
    kinds = Counter(json.loads(line)["t"] for line in path.read_text().splitlines())
    print(f"\n{path} holds {sum(kinds.values())} lines: {dict(kinds)}")
    print(f"read it back with:  jq -c 'select(.t==\"msg\") | .msg | {{type, content}}' {path}")

    # 2. Fork the thread as it was after the first answer, and take it elsewhere.
    history = list(graph.get_state_history(config))  # newest first
    after_first = next(
        s for s in reversed(history) if len(s.values.get("messages", [])) == 2 and not s.next
    )
    first_id = after_first.config["configurable"]["checkpoint_id"]
    head = saver.fork("quickstart", "quickstart-retry", checkpoint_id=first_id)
    graph.invoke({"messages": [("user", "Actually, make it Porto instead.")]}, head)
    fork_lines = transcript(graph, "quickstart-retry")
    show("fork 'quickstart-retry' (branched after the first answer)", fork_lines)
    show("the source thread is unchanged", transcript(graph, "quickstart")[-2:])

    # 3. Revert the original thread to the same checkpoint; the old file is kept.
    head = saver.revert("quickstart", first_id)
    show(
        f"thread 'quickstart' reverted to {head['configurable']['checkpoint_id']}",
        transcript(graph, "quickstart"),
    )
    print(f"\nbackup of the previous file: {saver.storage.backups('quickstart')}")
    print(f"threads in {ROOT}: {saver.list_threads()}")


if __name__ == "__main__":
    main()
