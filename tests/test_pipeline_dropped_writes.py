"""The pipeline warns when the graph it runs in drops its writes; correct wiring is silent.

From a new-user trial: `builder.add_node("context", pipeline)` on a `MessagesState` graph
did nothing: LangGraph drops writes to keys the state does not declare, so the model
got the plain history and nobody said so (`add_to` refuses that state; docs/compaction.md
says `CompactionNode` warns). The pipeline now warns (`DroppedWritesWarning`) at its first
step in a thread, naming the keys, and stays silent for the documented wirings: `add_to`
on `ContextState` or `pipeline.state_schema(...)`, `create_react_agent` with
`ContextAgentState`, and `create_agent` middleware (which never runs the node).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_ctx import (
    ContextAgentState,
    ContextState,
    DroppedWritesWarning,
    JsonlSaver,
    ModelNode,
    context_pipeline,
)
from langgraph_ctx.testing import OfflineChatModel


@contextmanager
def dropped_warnings() -> Iterator[list[str]]:
    """The texts of every `DroppedWritesWarning` raised inside (none filtered out)."""
    seen: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield seen
    seen.extend(str(w.message) for w in caught if issubclass(w.category, DroppedWritesWarning))


def plain_node_graph(pipeline: Any, model: Any, state: type = MessagesState, saver: Any = None):
    builder = StateGraph(state)
    builder.add_node("context", pipeline)
    builder.add_node("model", ModelNode(model))
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    return builder.compile(checkpointer=saver)


def add_to_graph(pipeline: Any, model: Any, state: type, saver: Any = None):
    builder = StateGraph(state)
    builder.add_node("model", ModelNode(model, keys=pipeline.keys))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    return builder.compile(checkpointer=saver)


def ask(graph: Any, thread: str | None = None, text: str = "hi") -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}} if thread else None
    return graph.invoke({"messages": [("user", text)]}, config)


# -- the mistake --------------------------------------------------------------------


def test_a_plain_node_on_messages_state_warns_naming_the_keys() -> None:
    model = OfflineChatModel()
    graph = plain_node_graph(context_pipeline("fast", model=model), model)
    with dropped_warnings() as seen:
        ask(graph)
    assert len(seen) == 1, seen
    text = seen[0]
    assert text.startswith("the context pipeline 'context' runs in a graph whose state")
    for key in ("llm_input_messages", "context_usage", "system_prompt", "compaction_cursor"):
        assert repr(key) in text
    assert "the model is sent the messages as they are" in text
    assert 'pipeline.add_to(builder, before="model")' in text and "ContextState" in text
    assert [m.type for m in model.received[-1]] == ["human"]  # what the warning says


def test_it_warns_once_per_thread(tmp_path: Path) -> None:
    model = OfflineChatModel()
    graph = plain_node_graph(
        context_pipeline("fast", model=model), model, saver=JsonlSaver(tmp_path)
    )
    with dropped_warnings() as seen:
        ask(graph, "a")
        ask(graph, "a", "again")
        ask(graph, "b")
    assert len(seen) == 2, seen


def test_the_async_door_warns_too() -> None:
    model = OfflineChatModel()
    graph = plain_node_graph(context_pipeline("fast", model=model), model)
    with dropped_warnings() as seen:
        asyncio.run(graph.ainvoke({"messages": [("user", "hi")]}))
    assert len(seen) == 1


def test_a_react_agent_without_the_state_schema_warns() -> None:
    from langgraph.prebuilt import create_react_agent

    model = OfflineChatModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(model, [], pre_model_hook=context_pipeline("fast", model=model))
    with dropped_warnings() as seen:
        ask(agent)
    assert len(seen) == 1 and "'context_usage'" in seen[0], seen
    assert "what the pipeline keeps from one step to the next is lost" in seen[0]


# -- the documented wirings stay silent -----------------------------------------------


class AppState(MessagesState):
    mode: str  # the app's own key: the pipeline's is renamed


@pytest.mark.parametrize("threaded", [False, True])
def test_add_to_on_the_documented_states_is_silent(tmp_path: Path, threaded: bool) -> None:
    model = OfflineChatModel()
    saver = JsonlSaver(tmp_path) if threaded else None
    plain = context_pipeline("fast", model=model)
    renamed = context_pipeline("fast", model=model, keys={"mode": "ctx_mode"})
    graphs = [
        add_to_graph(plain, model, ContextState, saver),
        add_to_graph(plain, model, plain.state_schema(), saver),
        add_to_graph(renamed, model, renamed.state_schema(AppState), saver),
        # the pipeline as a plain node is fine too, on a state that has its keys
        plain_node_graph(context_pipeline("fast", model=model), model, ContextState, saver),
    ]
    with dropped_warnings() as seen:
        for n, graph in enumerate(graphs):
            for turn in range(2):
                out = ask(graph, f"t{n}" if threaded else None, f"turn {turn}")
                assert out["context_usage"].used > 0
                assert model.received[-1][0].type == "system"
    assert seen == []


def test_react_agents_with_the_pipelines_schema_are_silent() -> None:
    from langgraph.prebuilt import create_react_agent

    model = OfflineChatModel()
    pipeline = context_pipeline("fast", model=model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agents = [
            pipeline.create_react_agent(model, []),
            create_react_agent(model, [], pre_model_hook=pipeline, state_schema=ContextAgentState),
        ]
    with dropped_warnings() as seen:
        for agent in agents:
            assert ask(agent)["context_usage"].used > 0
    assert seen == []


def test_the_middleware_and_a_direct_call_are_silent() -> None:
    from langchain.agents import create_agent

    model = OfflineChatModel()
    pipeline = context_pipeline("fast", model=model)
    agent = create_agent(model, [], middleware=[pipeline.middleware()])
    with dropped_warnings() as seen:
        ask(agent)
        pipeline.invoke({"messages": [HumanMessage("hi")]})
        asyncio.run(pipeline.ainvoke({"messages": [HumanMessage("hi")]}))
    assert seen == []


def test_the_functional_api_calling_the_pipeline_is_silent() -> None:
    """An `@entrypoint` that calls the pipeline and sends its request itself dropped
    nothing, yet was told its writes were dropped (review 25): a graph without a
    ``messages`` channel is no graph the pipeline can be a node of."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.func import entrypoint

    model = OfflineChatModel()
    pipeline = context_pipeline("fast", model=model)

    @entrypoint()
    def app(messages: list[Any], config: RunnableConfig) -> Any:
        update = pipeline.invoke({"messages": messages}, config)
        return model.invoke(update["llm_input_messages"])

    with dropped_warnings() as seen:
        reply = app.invoke([HumanMessage("hi")])
    assert seen == [] and reply.content


class History(TypedDict):
    history: Annotated[list[Any], add_messages]


def test_a_graph_whose_messages_have_another_name_still_warns() -> None:
    """The rule that kept an `@entrypoint` silent (no ``messages`` channel) also silenced
    a `StateGraph` whose conversation is under another key, where LangGraph drops every
    write of the pipeline (review 26): only the functional API is silent."""
    builder = StateGraph(History)
    builder.add_node("ctx", context_pipeline("fast", model=OfflineChatModel()))
    builder.add_edge(START, "ctx")
    with dropped_warnings() as seen:
        builder.compile().invoke({"history": [("user", "hi")]})
    assert len(seen) == 1 and "llm_input_messages" in seen[0]
