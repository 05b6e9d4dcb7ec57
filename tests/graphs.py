"""Small LangGraph graphs the tests build again and again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import START, MessagesState, StateGraph


def single_node(saver: Any, node: Callable[..., Any], state: type[Any] = MessagesState) -> Any:
    """``START -> node`` on ``state``, compiled with ``saver`` (the node named after its
    function): the chat turn most saver tests run."""
    builder = StateGraph(state)
    builder.add_node(node)
    builder.add_edge(START, node.__name__)
    return builder.compile(checkpointer=saver)
