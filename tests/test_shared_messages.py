"""A checkpointed graph gets back the message objects it saw (issue 16, item 1).

`LogSaver` answers a read with the messages it decoded once (see
`_Index.message`), so a step over a long thread costs what it adds: here a
`BudgetNode` in a real checkpointed `StateGraph`, counted by what its token
counter examines (its per-message cache and its tokenizer calls), not by time.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import START, StateGraph

from langgraph_ctx import BudgetNode
from langgraph_ctx.nodes.state import BudgetState
from tests.backends import Backend

CONFIG = {"configurable": {"thread_id": "t"}}


def test_a_budget_step_costs_its_new_messages_not_the_history(backend: Backend) -> None:
    tokenized: list[int] = []

    def count(messages: list[BaseMessage]) -> int:  # the real rules, with a call count
        from langgraph_ctx.context.tokens import count_tokens

        tokenized.append(len(messages))
        return int(count_tokens(messages, model="gpt-4o"))

    node = BudgetNode(model="gpt-4o", token_counter=count)
    seen: list[list[BaseMessage]] = []

    def bot(state: BudgetState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        used = state["context_usage"].used
        return {"messages": [AIMessage(f"turn {len(seen)}: {used} tokens so far " + "x" * 200)]}

    builder = StateGraph(BudgetState)
    builder.add_node("budget", node)
    builder.add_node(bot)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "bot")
    graph = builder.compile(checkpointer=backend.saver())

    examined: list[int] = []  # messages the counter looked up beyond the shared prefix
    calls: list[int] = []
    for turn in range(30):
        before, before_calls = node.counter.hits + node.counter.misses, len(tokenized)
        graph.invoke({"messages": [("user", f"question {turn} " + "y" * 200)]}, CONFIG)
        examined.append(node.counter.hits + node.counter.misses - before)
        calls.append(len(tokenized) - before_calls)

    # the history read back is the same objects: only the last turn's two messages
    # (decoded from their lines) and the new question are looked up, at 6 or 60 messages
    assert examined[3:] == [3] * 27, examined
    assert calls[3:] == [2] * 27, calls  # the previous answer and the new question
    previous, last = seen[-2], seen[-1]
    assert len(last) == len(previous) + 2
    assert all(a is b for a, b in zip(previous[:-1], last, strict=False))
    # and the usage is what a fresh process (a fresh node, fresh objects) computes
    fresh = backend.saver().get_tuple(CONFIG).checkpoint["channel_values"]
    again = BudgetNode(model="gpt-4o", token_counter=count)
    assert again.usage({"messages": fresh["messages"][:-1]}).used == fresh["context_usage"].used
