"""A node given something that is no state, or messages that are no list, says so.

From a new-user trial: `ModelNode(llm).invoke([HumanMessage("hello")])` called the model
with no messages, `BudgetNode("fast").invoke([msg])` counted 0, `pipeline.invoke("hi")`
returned only the system prompt, and `pipeline.invoke({"messages": "hi"})` sent two
messages, 'h' and 'i'. LangGraph states are dicts, pydantic models or dataclasses: those
keep working, in a graph and called directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel

from langgraph_ctx import (
    BudgetNode,
    CompactionNode,
    ModelNode,
    StateShapeError,
    SystemPromptNode,
    context_pipeline,
)
from langgraph_ctx.testing import OfflineChatModel

HELLO = HumanMessage("hello there, how are you?", id="u1")


def _nodes() -> dict[str, Callable[[], Any]]:
    return {
        "budget": lambda: BudgetNode("fast"),
        "compaction": lambda: CompactionNode(max_context_tokens=4_000),
        "prompt": lambda: SystemPromptNode(),
        "model": lambda: ModelNode(OfflineChatModel()),
        "pipeline": lambda: context_pipeline("fast"),
    }


NOT_STATES = {
    "a list of messages": ([HELLO], "got a list: [HumanMessage("),
    "a string": ("hi", "got a str: 'hi'"),
    "a message": (HELLO, "got a HumanMessage: "),
    "a tuple": ((HELLO,), "got a tuple: "),
    "None": (None, "got None"),
}


@pytest.mark.parametrize("node", list(_nodes()))
@pytest.mark.parametrize("given", list(NOT_STATES))
def test_a_value_that_is_no_state_is_refused(node: str, given: str) -> None:
    value, shown = NOT_STATES[given]
    built = _nodes()[node]()
    for call in (built.invoke, lambda v: asyncio.run(built.ainvoke(v))):
        with pytest.raises(StateShapeError) as err:
            call(value)
        assert isinstance(err.value, TypeError)
        text = str(err.value)
        assert text.startswith('the state must be a dict such as {"messages": [...]}'), text
        assert shown in text, text
        assert 'node.invoke({"messages": [("user", "hi")]})' in text


@pytest.mark.parametrize("node", list(_nodes()))
@pytest.mark.parametrize("messages", ["hi", HELLO, {"role": "user", "content": "hi"}, 3])
def test_messages_that_are_no_list_are_refused(node: str, messages: Any) -> None:
    with pytest.raises(StateShapeError) as err:
        _nodes()[node]().invoke({"messages": messages})
    assert err.value.key == "messages"
    text = str(err.value)
    assert text.startswith("the state's 'messages' must be a list of messages"), text
    assert f"got a {type(messages).__name__}: " in text
    assert text.endswith('Write {"messages": [("user", "hi")]}')


def test_the_model_is_not_called_with_nothing() -> None:
    model = OfflineChatModel()
    for state in ([HELLO], {"messages": "hello"}, {"msgs": [HELLO]}, {"messages": []}):
        with pytest.raises(StateShapeError):
            ModelNode(model).invoke(state)
    assert model.received == []
    with pytest.raises(StateShapeError, match=r"holds \['msgs'\]"):
        ModelNode(model).invoke({"msgs": [HELLO]})


def test_the_budget_counts_messages_it_is_given_as_a_tuple_too() -> None:
    node = BudgetNode("fast")
    listed = node.invoke({"messages": [HELLO]})["context_usage"]
    assert listed.breakdown["current_input"] > 0
    assert node.invoke({"messages": (HELLO,)})["context_usage"].used == listed.used


# -- what LangGraph passes: dicts, pydantic models, dataclasses -----------------------


class PydanticState(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages]
    context_usage: Any = None


@dataclasses.dataclass
class DataclassState:
    messages: Annotated[list[AnyMessage], add_messages]
    context_usage: Any = None


@pytest.mark.parametrize("schema", [PydanticState, DataclassState])
def test_object_states_work_in_a_graph(schema: type) -> None:
    model = OfflineChatModel()
    builder = StateGraph(schema)
    builder.add_node("budget", BudgetNode("fast"))
    builder.add_node("model", ModelNode(model))
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "model")
    out = builder.compile().invoke({"messages": [("user", "hello")]})
    assert out["context_usage"].breakdown["current_input"] > 0
    assert [m.content for m in model.received[-1]] == ["hello"]
    assert isinstance(out["messages"][-1], AIMessage)


@pytest.mark.parametrize("schema", [PydanticState, DataclassState])
def test_object_states_work_called_directly(schema: type) -> None:
    state = schema(messages=[HELLO])
    assert BudgetNode("fast").invoke(state)["context_usage"].breakdown["current_input"] > 0
    update = context_pipeline("fast").invoke(state)
    assert [m.type for m in update["llm_input_messages"]] == ["system", "human"]
    model = OfflineChatModel()
    ModelNode(model).invoke(state)
    assert model.received[-1] == [HELLO]
