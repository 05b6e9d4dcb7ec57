"""Budgets, usage, levels, and BudgetNode in real graphs and in create_react_agent."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from pydantic import BaseModel, ConfigDict, PrivateAttr

from langgraph_ctx.context.budget import (
    DEGRADATION_LEVELS,
    PRESETS,
    ContextBudget,
    ContextUsage,
    compute_usage,
    context_window,
    degradation_level,
    split_components,
    usage_status,
)
from langgraph_ctx.context.tokens import (
    MessageTokenCounter,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
)
from langgraph_ctx.nodes.budget import BudgetAgentState, BudgetNode, BudgetState

SERDE = JsonPlusSerializer(
    allowed_msgpack_modules=[("langgraph_ctx.context.budget", "ContextUsage")]
)

# ---------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------


def test_presets_follow_the_seed_allocation() -> None:
    figures = {name: (b.total, b.history) for name, b in PRESETS.items()}
    assert figures == {
        "fast": (4000, 2000),
        "personalized": (8000, 4000),
        "planning": (16000, 8000),
    }
    eight = ContextBudget.preset("personalized")
    assert (eight.persona, eight.instruction, eight.summary) == (1000, 500, 500)
    assert (eight.current_input, eight.output_reserve) == (500, 1400)
    for budget in PRESETS.values():
        assert sum(budget.allocated().values()) <= budget.total
    with pytest.raises(ValueError, match="unknown budget preset 'huge'"):
        ContextBudget.preset("huge")


def test_components_exceeding_the_total_are_rejected_by_name() -> None:
    with pytest.raises(ValueError) as info:
        ContextBudget(total=1000, persona=600, history=500, extra={"emotional": 100})
    message = str(info.value)
    assert "1,200" in message and "1,000" in message
    assert "persona=600" in message and "history=500" in message and "emotional=100" in message
    with pytest.raises(ValueError, match="level_thresholds must increase"):
        ContextBudget(total=10, level_thresholds=(90, 80, 100))


def test_budget_from_a_model_context_window() -> None:
    budget = ContextBudget.for_model("openai:gpt-4o-mini", reserved_output=4096)
    assert (budget.total, budget.output_reserve, budget.input_capacity) == (128_000, 4096, 123_904)
    assert context_window("anthropic:claude-sonnet-4-5") == 200_000
    assert context_window("gpt-4") == 8192 and context_window("gpt-4-turbo") == 128_000
    with pytest.raises(ValueError, match="pass context_window"):
        ContextBudget.for_model("my-local-llm")
    local = ContextBudget.for_model("my-local-llm", context_window=32_768, history=16_000)
    assert (local.total, local.history) == (32_768, 16_000)


def test_levels_and_status_boundaries() -> None:
    assert [degradation_level(p) for p in (0, 69.99, 70, 84.99, 85, 100, 100.01)] == [
        0, 0, 1, 1, 2, 2, 3,
    ]  # fmt: skip
    assert [usage_status(p) for p in (69.9, 70, 79.9, 80, 130)] == [
        "normal", "warning", "warning", "compressing", "compressing",
    ]  # fmt: skip
    actions = [(lv.level, lv.from_percent, lv.action) for lv in DEGRADATION_LEVELS]
    assert actions == [
        (0, 0.0, "none"),
        (1, 70.0, "trim_history"),
        (2, 85.0, "drop_optional"),
        (3, 100.0, "summary_and_recent"),
    ]
    assert DEGRADATION_LEVELS[1].history_keep_ratio == 0.7
    assert DEGRADATION_LEVELS[2].drop_priorities == ("P2",)
    assert DEGRADATION_LEVELS[3].keep_recent_turns == 3


# ---------------------------------------------------------------------------
# Usage
# ---------------------------------------------------------------------------

TOOL = convert_to_openai_tool(
    {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "Query"}},
        },
    }
)


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You plan trips.", id="s"),
        HumanMessage("Plan five days in Tokyo.", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"name": "search", "args": {"q": "Tokyo"}, "id": "c1"}]),
        ToolMessage("Tokyo is the capital of Japan. " * 20, tool_call_id="c1", id="t1"),
        AIMessage("Day 1: Asakusa. Day 2: Shibuya.", id="a2"),
        HumanMessage("Add a day trip.", id="h2"),
    ]


def test_usage_adds_up_to_the_request_count() -> None:
    messages = conversation()
    budget = ContextBudget.preset("fast")
    usage = compute_usage(
        messages,
        budget,
        counter=MessageTokenCounter("gpt-4o"),
        system_prompt="Answer in English.",
        tools=[TOOL],
    )
    request = [SystemMessage("Answer in English."), *messages]
    assert usage.used == count_tokens(request, model="gpt-4o", tools=[TOOL])
    assert usage.breakdown["tools"] == count_tool_tokens([TOOL])
    assert usage.breakdown["system"] == count_message_tokens(request[0]) + count_message_tokens(
        messages[0]
    )
    assert usage.breakdown["current_input"] == count_message_tokens(messages[-1])
    assert usage.breakdown["overhead"] == 3
    assert sum(usage.breakdown.values()) == usage.used + budget.output_reserve
    assert usage.remaining == budget.total - budget.output_reserve - usage.used
    assert usage.percent == round(100 * (usage.used + 700) / 4000, 2)
    assert (usage.calibrated, usage.exact, usage.messages) == (False, True, 6)
    assert usage.allocation["system"] == 750 and usage.allocation["history"] == 2000


def test_split_components() -> None:
    summary = SystemMessage("So far: ...", additional_kwargs={"langgraph_ctx": "summary"})
    kinds = split_components([summary, *conversation()])
    assert kinds == [
        "summary", "system", "history", "history", "history", "history", "current_input",
    ]  # fmt: skip
    # In an agent loop the tool results after the last AI message are the current input.
    loop = conversation()[:4]
    assert split_components(loop)[-1] == "current_input"
    assert split_components([HumanMessage("a"), HumanMessage("b")]) == ["history", "current_input"]


def test_calibration_uses_provider_input_tokens() -> None:
    messages = conversation()
    anchor = messages[4]
    assert isinstance(anchor, AIMessage)
    anchor.usage_metadata = {"input_tokens": 400, "output_tokens": 12, "total_tokens": 412}
    counter = MessageTokenCounter("gpt-4o")
    usage = compute_usage(messages, ContextBudget.preset("fast"), counter=counter, tools=[TOOL])
    uncalibrated = count_tokens(messages, model="gpt-4o", tools=[TOOL])
    # The provider's 400 stand for everything before the anchor (tools and priming
    # included); the anchor is counted as it will be sent back, then what follows.
    expected = 400 + count_message_tokens(anchor) + count_message_tokens(messages[5])
    assert usage.calibrated
    assert usage.used == expected
    prefix = uncalibrated - count_message_tokens(anchor) - count_message_tokens(messages[5])
    assert usage.calibration_delta == 400 - prefix
    assert sum(usage.breakdown.values()) == usage.used + usage.reserved_output
    # Without usage metadata, or with calibrate=False, nothing is anchored.
    plain = compute_usage(
        messages, ContextBudget.preset("fast"), counter=counter, tools=[TOOL], calibrate=False
    )
    assert (plain.calibrated, plain.used) == (False, uncalibrated)


def test_calibration_with_an_approximate_tokenizer_uses_visible_output() -> None:
    messages = [
        HumanMessage("Think hard about this.", id="h"),
        AIMessage(
            "Done.",
            id="a",
            usage_metadata={
                "input_tokens": 50,
                "output_tokens": 900,
                "total_tokens": 950,
                "output_token_details": {"reasoning": 880},
            },
        ),
        HumanMessage("Thanks", id="h2"),
    ]
    counter = MessageTokenCounter("claude-sonnet-4-5")
    usage = compute_usage(messages, ContextBudget.for_model("claude-sonnet-4-5"), counter=counter)
    # Reasoning tokens are not sent back: 20 visible + 4 framing.
    assert usage.used == 50 + (900 - 880 + 4) + counter.count(messages[2])
    assert usage.calibrated and not usage.exact


def test_levels_and_status_through_usage() -> None:
    messages = [HumanMessage("word " * 200, id="x")]
    n = count_tokens(messages)
    seen = []
    for total in (n * 4, int(n / 0.75), int(n / 0.9), n - 1):
        usage = compute_usage(messages, ContextBudget(total=total), counter=MessageTokenCounter())
        seen.append((usage.level, usage.status, usage.action))
    assert seen == [
        (0, "normal", "none"),
        (1, "warning", "trim_history"),
        (2, "compressing", "drop_optional"),
        (3, "compressing", "summary_and_recent"),
    ]
    over = compute_usage(
        messages, ContextBudget(total=10_000, current_input=10), counter=MessageTokenCounter()
    )
    assert over.over_allocation == ["current_input"]
    assert over.remaining == 10_000 - n


def test_usage_renders_as_bar_and_html_and_round_trips() -> None:
    messages = conversation()
    usage = compute_usage(
        messages, ContextBudget.preset("fast"), counter=MessageTokenCounter(), tools=[TOOL]
    )
    text = str(usage)
    assert "\n" not in text
    bar = usage.bar()
    assert len(bar) == 40 and bar.startswith("S") and bar.endswith("R")
    assert {"S", "T", "H", "I", "R", "."} <= set(bar)
    assert f"{usage.percent:.1f}%" in text and f"{usage.used:,}/4,000" in text
    page = usage._repr_html_()
    for label in ("system", "tools", "history", "input", "reserve"):
        assert f"{label}:" in page
    assert "<script" not in page
    evil = usage.model_copy(update={"model": "<script>alert(1)</script>"})
    assert "<script>" not in evil._repr_html_()
    again = ContextUsage.model_validate_json(usage.model_dump_json())
    assert again == usage
    assert json.loads(usage.model_dump_json())["breakdown"]["tools"] == usage.breakdown["tools"]


def test_huge_messages_and_unknown_types_are_reported() -> None:
    class Thought(BaseMessage):
        type: str = "thought"

    messages = [Thought("hmm", id="t"), {"weird": True}, ToolMessage("x " * 5000, tool_call_id="c")]
    usage = compute_usage(messages, ContextBudget.preset("fast"), counter=MessageTokenCounter())
    assert any("unknown type 'thought'" in note for note in usage.notes)
    assert any("unknown type 'dict'" in note for note in usage.notes)
    assert any("message 2 (tool) alone is" in note for note in usage.notes)
    assert usage.level == 3


# ---------------------------------------------------------------------------
# BudgetNode in graphs
# ---------------------------------------------------------------------------


class TravelState(BudgetState):
    user_id: str
    system_prompt: str


def echo_model(state: dict[str, Any]) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"reply number {n}", id=f"ai-{n}")]}


def travel_graph(node: BudgetNode) -> Any:
    builder = StateGraph(TravelState)
    builder.add_node("budget", node)
    builder.add_node("model", echo_model)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=InMemorySaver(serde=SERDE))


def test_node_in_a_state_graph_with_an_extended_schema_counts_only_new_messages() -> None:
    node = BudgetNode("personalized", model="gpt-4o")
    graph = travel_graph(node)
    config = {"configurable": {"thread_id": "trip"}}
    state = graph.invoke(
        {"messages": [("user", "Plan Tokyo.")], "user_id": "u1", "system_prompt": "Be brief."},
        config,
    )
    usage = state["context_usage"]
    assert isinstance(usage, ContextUsage)
    assert state["user_id"] == "u1"
    assert usage.used == count_tokens(
        [SystemMessage("Be brief."), HumanMessage("Plan Tokyo.")], model="gpt-4o"
    )
    for turn in range(5):
        misses = node.counter.misses
        state = graph.invoke({"messages": [("user", f"And day {turn}?")]}, config)
        # Per step: the AI reply of the last step and the new user message.
        assert node.counter.misses - misses == 2
    request = [SystemMessage("Be brief."), *state["messages"][:-1]]
    assert state["context_usage"].used == count_tokens(request)
    saved = graph.get_state(config).values["context_usage"]
    assert isinstance(saved, ContextUsage) and saved == state["context_usage"]


def test_editing_a_message_in_state_recounts_it() -> None:
    node = BudgetNode("fast", model="gpt-4o")
    graph = travel_graph(node)
    config = {"configurable": {"thread_id": "edit"}}
    graph.invoke({"messages": [HumanMessage("Short.", id="q1")], "user_id": "u"}, config)
    before = node.usage(graph.get_state(config).values)
    entries = len(node.counter)
    graph.update_state(config, {"messages": [HumanMessage("Much longer now. " * 20, id="q1")]})
    after = node.usage(graph.get_state(config).values)
    edited = count_message_tokens(HumanMessage("Much longer now. " * 20))
    assert after.used - before.used == edited - count_message_tokens(HumanMessage("Short."))
    assert len(node.counter) == entries  # the entry for q1 was replaced


async def test_async_path_matches_sync() -> None:
    node = BudgetNode("fast", model="gpt-4o")
    graph = travel_graph(node)
    inputs = {"messages": [("user", "Hello there")], "user_id": "u"}
    sync_usage = graph.invoke(inputs, {"configurable": {"thread_id": "s"}})["context_usage"]
    async_state = await graph.ainvoke(inputs, {"configurable": {"thread_id": "a"}})
    assert async_state["context_usage"] == sync_usage
    direct = await node.ainvoke({"messages": [("user", "Hello there")]})
    assert direct == node({"messages": [("user", "Hello there")]})


class PydanticState(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: Annotated[list[AnyMessage], add_messages]
    context_usage: ContextUsage | None = None
    topic: str = "general"


def test_node_with_a_pydantic_state_schema() -> None:
    builder = StateGraph(PydanticState)
    builder.add_node("budget", BudgetNode("fast"))
    builder.add_edge(START, "budget")
    builder.add_edge("budget", END)
    state = builder.compile().invoke({"messages": [("user", "hi")], "topic": "travel"})
    assert state["topic"] == "travel"
    assert state["context_usage"].used == count_tokens([("user", "hi")])


def test_node_survives_bad_state() -> None:
    node = BudgetNode("fast", tools=[{"name": "no_schema"}])
    usage = node({"messages": None})["context_usage"]
    assert usage.used == 3 + usage.breakdown["tools"] and usage.breakdown["tools"] > 0
    assert any("no parameter schema" in n for n in usage.notes)
    odd = node(
        {
            "messages": [
                AIMessage.model_construct(content=None, id="x", tool_calls=[]),
                {"role": "alien", "content": 3},
                RemoveMessage(id="gone"),
            ],
            "tools": "not a list",
            "system_prompt": 42,
        }
    )["context_usage"]
    assert odd.used > 3 and odd.messages == 3
    assert node({})["context_usage"].messages == 0


def test_custom_token_counter_in_the_node() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a custom counter needs no known model name
        node = BudgetNode("fast", model="some-model", token_counter=count_tokens_approximately)
        usage = node({"messages": [("user", "x" * 400)]})["context_usage"]
    assert usage.used == count_tokens_approximately([HumanMessage("x" * 400)])
    assert not usage.exact


# ---------------------------------------------------------------------------
# create_react_agent with a deterministic tool-calling model
# ---------------------------------------------------------------------------


class ScriptedChatModel(BaseChatModel):
    """Replies from a script; supports bind_tools like a real provider model."""

    responses: list[AIMessage]
    model_name: str = "gpt-4o"
    _calls: int = PrivateAttr(default=0)
    _seen_tools: list[Any] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self._seen_tools.append(kw.get("tools"))
        reply = self.responses[min(self._calls, len(self.responses) - 1)]
        self._calls += 1
        n = count_tokens(messages, model=self.model_name, tools=kw.get("tools"))
        reply = reply.model_copy(
            update={
                "usage_metadata": {"input_tokens": n, "output_tokens": 5, "total_tokens": n + 5}
            }
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"Sunny in {city}."


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            AIMessage(
                "", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]
            ),
            AIMessage("It is sunny in Paris."),
        ]
    )


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_pre_model_hook_in_create_react_agent() -> None:
    model = scripted()
    hook = BudgetNode(model=model.bind_tools([get_weather]), system_prompt="Be helpful.")
    assert hook.model == "gpt-4o" and hook.budget.total == 128_000
    agent = create_react_agent(
        model,
        [get_weather],
        prompt="Be helpful.",
        pre_model_hook=hook,
        state_schema=BudgetAgentState,
    )
    state = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert state["messages"][-1].content == "It is sunny in Paris."
    assert isinstance(state["messages"][2], ToolMessage)
    usage = state["context_usage"]
    # The hook ran before the second model call: the model's reported input tokens for
    # the first call anchor the count; the result is exactly what the second call sent.
    second_request = [SystemMessage("Be helpful."), *state["messages"][:-1]]
    tools = model._seen_tools[-1]
    assert usage.calibrated and usage.calibration_delta == 0
    assert usage.used == count_tokens(second_request, tools=tools)
    assert usage.breakdown["tools"] == count_tool_tokens(tools) > 0


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_pre_model_hook_without_a_context_usage_key_leaves_the_agent_working() -> None:
    agent = create_react_agent(scripted(), [get_weather], pre_model_hook=BudgetNode("planning"))
    state = await agent.ainvoke({"messages": [("user", "Weather in Paris?")]})
    assert state["messages"][-1].content == "It is sunny in Paris."
    assert "context_usage" not in state


def test_fresh_copies_reuse_the_counted_prefix_and_edits_are_recounted(
    fingerprinted: list[BaseMessage],
) -> None:
    # A checkpointer hands the state back as new objects: same ids and values. The
    # node must not re-fingerprint the history, yet see a field changed under the same id.
    from langchain_core.messages import messages_from_dict, messages_to_dict

    def fresh(messages: list[BaseMessage]) -> list[BaseMessage]:
        return messages_from_dict(json.loads(json.dumps(messages_to_dict(messages))))

    history: list[BaseMessage] = []
    for i in range(30):
        history.append(HumanMessage(f"question {i} about the plan", id=f"h{i}"))
        call = {"name": "lookup", "args": {"q": f"q{i}"}, "id": f"c{i}", "type": "tool_call"}
        history.append(AIMessage("", id=f"a{i}", tool_calls=[call]))
        history.append(ToolMessage(f"result {i} " * 20, tool_call_id=f"c{i}", id=f"t{i}"))
    node = BudgetNode("fast", model="gpt-4o")
    node.usage({"messages": history})
    grown = fresh([*history, HumanMessage("and now?", id="h-new")])
    fingerprinted.clear()
    usage = node.usage({"messages": grown})
    assert len(fingerprinted) == 1  # only the new message
    assert usage.used == count_tokens(grown)
    # The same id and content, other tool call arguments: counted anew.
    edited = fresh(grown)
    edited[4] = AIMessage(
        "",
        id="a1",
        tool_calls=[{"name": "lookup", "args": {"q": "a much longer query " * 5}, "id": "c1"}],
    )
    assert node.usage({"messages": edited}).used == count_tokens(edited)
    # An edit in place on the very objects counted before.
    edited[0].content = "question 0, now rewritten in place and longer than before"
    assert node.usage({"messages": edited}).used == count_tokens(edited)


@pytest.mark.parametrize("bad", [1500, 1500.0, {"total": 1500}])
def test_a_budget_that_is_not_a_preset_or_a_contextbudget_is_refused_when_built(bad) -> None:
    """`context_pipeline(1500)` and `BudgetNode(1500)` were accepted, then failed on the
    first call with `AttributeError: 'int' object has no attribute 'output_reserve'`."""
    from langgraph_ctx.nodes.budget import BudgetNode
    from langgraph_ctx.nodes.pipeline import context_pipeline

    with pytest.raises(TypeError, match="pass context_window=N"):
        BudgetNode(bad)
    with pytest.raises(TypeError, match="budget must be a preset name"):
        context_pipeline(bad)
