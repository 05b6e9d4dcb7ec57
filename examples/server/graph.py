"""A small booking assistant for the LangGraph server, kept in JSONL by langgraph-ctx.

No model and no API key: the assistant node answers deterministically, so the
app runs anywhere. Asking to "book" something stops at an `interrupt` until a
person confirms, which the server resumes with ``Command(resume=...)``.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class State(MessagesState):
    bookings: list[str]


def assistant(state: State) -> dict:
    """Echo the request; route bookings to the confirmation step."""
    text = str(state["messages"][-1].content)
    return {"messages": [AIMessage(f"noted: {text}")]}


def wants_booking(state: State) -> str:
    request = str(state["messages"][-2].content).lower()
    return "confirm" if request.startswith("book ") else END


def confirm(state: State) -> dict:
    """Ask a person before booking; the run pauses here until it is resumed."""
    what = str(state["messages"][-2].content)[len("book ") :]
    answer = interrupt({"question": f"Book {what}?"})
    if str(answer).lower() in ("yes", "y", "ok"):
        return {
            "bookings": [*state.get("bookings", []), what],
            "messages": [AIMessage(f"booked: {what}")],
        }
    return {"messages": [AIMessage(f"not booked: {what}")]}


builder = StateGraph(State)
builder.add_node("assistant", assistant)
builder.add_node("confirm", confirm)
builder.add_edge(START, "assistant")
builder.add_conditional_edges("assistant", wants_booking, ["confirm", END])
builder.add_edge("confirm", END)

# No checkpointer here: the server supplies the one langgraph.json names.
graph = builder.compile()
