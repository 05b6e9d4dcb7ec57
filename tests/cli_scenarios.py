"""Real threads for the command-line tests, made by running real graphs.

``build_directory(root)`` writes a `JsonlSaver` directory with:

* ``trip``: an agent with a tool, a `BudgetNode` and a `CompactionNode` that compacts
  (a small window), over eight turns: tool calls and results, ``context_usage``,
  ``compaction_log`` and ``running_summary`` in the state;
* ``trip-retry``: a fork of ``trip`` after its second turn, continued elsewhere;
* ``chat``: a plain chat, reverted to its second turn (so it has a backup);
* ``hitl``: a thread waiting at an interrupt;
* ``nested``: a graph with a subgraph (checkpoint namespaces), interrupted and resumed.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.compaction import HybridSummary
from langgraph_ctx.nodes.budget import BudgetNode
from langgraph_ctx.nodes.compaction import CompactionNode, CompactionState
from langgraph_ctx.testing import ExtractiveSummaryModel
from tests.graphs import single_node

CITIES = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao", "Granada", "Malaga"]


def travel_agent(saver: Any) -> Any:
    """budget -> compact -> agent <-> tools; deterministic, offline."""

    class State(CompactionState):
        pass

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        last = state["messages"][-1]
        if last.type == "human":
            city = last.content.split()[-1].strip("?")
            call = {
                "name": "weather",
                "args": {"city": city, "days": 3},
                "id": f"call-{len(state['messages'])}",
            }
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        report = last.content.split(".")[0]
        return {"messages": [AIMessage(content=f"Noted: {report}. Pack accordingly.")]}

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        city = call["args"]["city"]
        text = (
            f"{city}: sunny, 24 C by day, 15 C at night. "
            + f"Forecast details for {city}: light wind, no rain expected, UV index 7. " * 6
        )
        return {"messages": [ToolMessage(content=text, tool_call_id=call["id"], name="weather")]}

    def route(state: dict[str, Any]) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(State)
    builder.add_node("budget", BudgetNode(model="gpt-4o", system_prompt="Be brief."))
    builder.add_node(
        "compact",
        CompactionNode(
            HybridSummary(ExtractiveSummaryModel()),
            trigger=("tokens", 700),
            target=("tokens", 400),
            max_context_tokens=4_000,
            model="gpt-4o",
        ),
    )
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "compact")
    builder.add_edge("compact", "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def chat_graph(saver: Any) -> Any:
    def chatbot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"you said: {state['messages'][-1].content}")]}

    return single_node(saver, chatbot)


def approval_graph(saver: Any) -> Any:
    class State(TypedDict):
        request: str
        decision: str
        log: Annotated[list[str], operator.add]

    def ask(state):
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"decision": answer, "log": [f"decided {answer}"]}

    builder = StateGraph(State)
    builder.add_node(ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=saver)


def subgraph_with_interrupt() -> StateGraph:
    """outer: before -> sub (a compiled subgraph whose node waits at an interrupt)."""

    class S(TypedDict):
        x: int
        log: Annotated[list[str], operator.add]

    def inner_node(state):
        value = interrupt(f"add to {state['x']}?")
        return {"x": state["x"] + int(value), "log": [f"inner +{value}"]}

    inner = StateGraph(S)
    inner.add_node(inner_node)
    inner.add_edge(START, "inner_node")

    def before(state):
        return {"log": ["outer"]}

    outer = StateGraph(S)
    outer.add_node(before)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "before")
    outer.add_edge("before", "sub")
    return outer


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def build_directory(root: Path, *, turns: int = 8) -> JsonlSaver:
    saver = JsonlSaver(root)
    agent = travel_agent(saver)
    for i in range(turns):
        agent.invoke(
            {"messages": [("user", f"What is the weather in {CITIES[i]}?")]}, config("trip")
        )
    history = list(agent.get_state_history(config("trip")))
    second = next(
        s for s in reversed(history) if len(s.values.get("messages", [])) == 8 and not s.next
    )
    head = saver.fork(
        "trip", "trip-retry", checkpoint_id=second.config["configurable"]["checkpoint_id"]
    )
    agent.invoke({"messages": [("user", "And the weather in Reykjavik?")]}, head)

    chat = chat_graph(saver)
    for text in ["hi", "plan a trip", "make it cheaper"]:
        chat.invoke({"messages": [("user", text)]}, config("chat"))
    chat_history = list(chat.get_state_history(config("chat")))
    after_two = next(s for s in chat_history if len(s.values["messages"]) == 4 and not s.next)
    saver.revert("chat", after_two.config["configurable"]["checkpoint_id"])

    approval_graph(saver).invoke({"request": "refund", "log": []}, config("hitl"))

    nested = subgraph_with_interrupt().compile(checkpointer=saver)
    nested.invoke({"x": 1, "log": []}, config("nested"))
    nested.invoke(Command(resume="41"), config("nested"))
    return saver
