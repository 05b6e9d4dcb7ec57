"""Issue 13, points 5, 6 and 8, in each host: `create_agent`, a `StateGraph`, `create_react_agent`.

Every test runs the same conversation through the three hosts with a scripted model that
records exactly what it receives (`ScriptedChatModel.received`), and checks that request:

* 5: the compaction target is a goal: a pasted message that fits the hard budget reaches
  the model whole; one that cannot fit is shortened, keeps its start and its end (where
  the error is) and says it was shortened;
* 6: `read_tool_result` never loops: its answers are never previewed again, and a result
  too large for the budget is read page by page;
* 8: model facts come from the model: the profile's window, `context_window=`, and
  fine-tuned names counted as their base model without an "unknown model" warning.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver, UnknownContextWindowError
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.compaction import CompactionRecord, read_tool_result
from langgraph_ctx.context.compaction.previews import TOOL_RESULT_PAGE, is_preview
from langgraph_ctx.context.prompt import is_system_prompt_message
from langgraph_ctx.context.tokens import count_message_tokens, count_tokens
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import ContextPipeline, context_pipeline
from langgraph_ctx.nodes.state import ContextAgentState, ContextState
from langgraph_ctx.testing import ScriptedChatModel, ordering_problems

HOSTS = ("create_agent", "StateGraph", "create_react_agent")


def build(host: str, model: Any, pipeline: ContextPipeline, tools: list[Any], root: Path) -> Any:
    """The same agent in one of the three hosts, checkpointed by a JsonlSaver."""
    saver = JsonlSaver(root / host)
    if host == "create_agent":
        from langchain.agents import create_agent

        return create_agent(
            model, tools, middleware=[pipeline.middleware(offer_tools=False)], checkpointer=saver
        )
    if host == "create_react_agent":
        from langgraph.prebuilt import create_react_agent

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated upstream in favour of create_agent
            return create_react_agent(
                model,
                tools,
                pre_model_hook=pipeline,
                state_schema=ContextAgentState,
                checkpointer=saver,
            )
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=tools or None))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    if tools:
        builder.add_node("tools", ToolNode(tools))
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def config(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def exact(messages: list[BaseMessage], tools: list[Any] | None = None, model: str = "gpt-4o"
          ) -> int:
    return count_tokens(messages, model=model, tools=tools or None)


def conversation(sent: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in sent if not is_system_prompt_message(m)]


def records(state: dict[str, Any]) -> list[CompactionRecord]:
    return [CompactionRecord.model_validate(r) for r in state.get("compaction_log") or []]


# -- 5: the target is a goal, the hard budget a limit ----------------------------------------

#: The issue's numbers: a 3,300-token limit (4,000 minus a 700-token reply reserve).
LIMITED = ContextBudget(total=4_000, output_reserve=700)
HARD_LIMIT = LIMITED.total - LIMITED.output_reserve
ERROR_LINE = "ValueError: invalid literal for int() with base 10: 'N/A' (row 4812)"


def own_tokens(text: str) -> int:
    """Tokens a user message adds to a request (gpt-4o, its 3-token overhead included)."""
    return count_message_tokens(("user", text), model="gpt-4o")


def pasted(tokens: int) -> str:
    """A pasted traceback of `tokens` tokens (gpt-4o) whose last line is the error."""
    head = "Here is what I get when I run the nightly import, can you tell me why?"
    lines: list[str] = []
    while own_tokens("\n".join([head, *lines, ERROR_LINE])) < tokens - 30:
        i = len(lines)
        lines.append(f'  File "/srv/app/import_{i}.py", line {i * 7}, in step_{i}')
    while own_tokens("\n".join([head, *lines, ERROR_LINE])) < tokens:
        head += " ok"  # one token at a time
    text = "\n".join([head, *lines, ERROR_LINE])
    assert own_tokens(text) == tokens
    return text


def earlier_turns(agent: Any, count: int) -> None:
    for i in range(count):
        agent.invoke(
            {"messages": [("user", f"turn {i}: the depot at /srv/depot/{i}.csv " + "note " * 90)]},
            config(),
        )


@pytest.mark.parametrize("host", HOSTS)
def test_a_pasted_message_that_fits_reaches_the_model_whole(host: str, tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[lambda msgs: f"seen {len(msgs)} messages"])
    pipeline = context_pipeline(LIMITED, model="gpt-4o", target=0.5)
    agent = build(host, model, pipeline, [], tmp_path)
    earlier_turns(agent, 3)
    paste = pasted(2_305)
    state = agent.invoke({"messages": [("user", paste)]}, config())

    sent = model.received[-1]
    assert sent[-1].content == paste, "the latest user message is sent as the user wrote it"
    assert sent[-1].content.endswith(ERROR_LINE)
    assert exact(sent) <= HARD_LIMIT
    [*_, record] = records(state)  # the trigger fired: compaction ran
    assert record.target_tokens is not None and record.tokens_after > record.target_tokens
    assert record.within_budget and "shorten_latest_user" not in record.ladder
    assert record.shortened == []
    assert ordering_problems(conversation(sent)) == []


@pytest.mark.parametrize("host", HOSTS)
def test_a_message_larger_than_the_hard_budget_is_shortened_and_says_so(
    host: str, tmp_path: Path
) -> None:
    model = ScriptedChatModel(script=[lambda msgs: f"seen {len(msgs)} messages"])
    pipeline = context_pipeline(LIMITED, model="gpt-4o", target=0.5)
    agent = build(host, model, pipeline, [], tmp_path)
    earlier_turns(agent, 2)
    paste = pasted(6_000)
    state = agent.invoke({"messages": [("user", paste)]}, config())

    sent = model.received[-1]
    latest = sent[-1]
    assert isinstance(latest, HumanMessage) and latest.content != paste
    text = str(latest.content)
    assert text.startswith("Here is what I get when I run the nightly import")  # the head
    assert ERROR_LINE in text, "the tail, where the error is, is kept"
    assert "shortened by compaction: this 6000-token message" in text  # says it was
    assert exact(sent) <= HARD_LIMIT
    [*_, record] = records(state)
    assert record.ladder[-1] == "shorten_latest_user" and record.within_budget
    assert [s.tokens for s in record.shortened] == [6_000]
    assert state["messages"][-2].content == paste, "the history keeps the whole message"


# -- 6: read_tool_result pages and never loops ------------------------------------------------

LOG = "\n".join(
    f"2024-05-01 02:{i // 60:02d}:{i % 60:02d} INFO worker-{i % 4} batch {i} rows {i * 13} ok"
    for i in range(200)
)  # about 5,000 tokens: more than the 3,300 the request may use


@tool
def grep_logs() -> str:
    """Return the nightly job's log."""
    return LOG


_NEXT = re.compile(r"call again with offset=(\d+) for more\]$")


def reader(messages: list[BaseMessage]) -> AIMessage:
    """Reads an offloaded result to its end, page by page, then answers."""
    last = messages[-1]
    assert isinstance(last, ToolMessage), last
    text = str(last.content)
    calls = sum(1 for m in messages if isinstance(m, ToolMessage))
    if calls > 40:
        return AIMessage("giving up: too many calls")
    if is_preview(last):
        ref = text.split("ref=")[1].split()[0]
        call_id = "r0" if last.tool_call_id == "g1" else f"{last.tool_call_id}-again"
        return AIMessage("", tool_calls=[{"name": "read_tool_result", "args": {"ref": ref},
                                          "id": call_id}])
    more = _NEXT.search(text)
    if more is None:
        return AIMessage("The log has 200 batches, all ok.")
    n = int(last.tool_call_id[1:]) + 1
    args = {"ref": "tool-result/g1", "offset": int(more.group(1))}
    return AIMessage("", tool_calls=[{"name": "read_tool_result", "args": args, "id": f"r{n}"}])


@pytest.mark.parametrize("host", HOSTS)
def test_read_tool_result_answers_are_never_previewed_and_large_results_come_in_pages(
    host: str, tmp_path: Path
) -> None:
    tools = [grep_logs, read_tool_result]
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[{"name": "grep_logs", "args": {}, "id": "g1"}]),
        reader,
    ])
    pipeline = context_pipeline(LIMITED, model="gpt-4o", tools=tools, target=0.5)
    agent = build(host, model, pipeline, tools, tmp_path)
    state = agent.invoke({"messages": [("user", "Why did the nightly job fail?")]}, config())

    assert state["messages"][-1].content == "The log has 200 batches, all ok."
    pages: dict[str, str] = {}
    for sent in model.received:
        assert exact(sent, tools) <= HARD_LIMIT
        assert ordering_problems(conversation(sent)) == []
        for message in sent:
            if isinstance(message, ToolMessage) and is_preview(message):
                # The only preview is of the original result, never of an answer of
                # read_tool_result (which would point the model at its own call: r1 -> r2).
                assert message.tool_call_id == "g1", message.content
                assert "tool-result/g1" in str(message.content)
            elif isinstance(message, ToolMessage) and message.name == "read_tool_result":
                pages.setdefault(message.tool_call_id, str(message.content))
    assert len(pages) > 1, "the result is larger than the budget: it came in pages"
    text = "".join(re.sub(r"\n\[characters \d+-\d+ of \d+[^\]]*\]$", "", p) for p in
                   (pages[f"r{i}"] for i in range(len(pages))))
    assert text == LOG, "the pages, in order, are the whole result"
    answers = [m for m in state["messages"] if getattr(m, "name", None) == "read_tool_result"]
    key, value = TOOL_RESULT_PAGE
    assert answers and all(m.artifact[key] == value for m in answers)


# -- 8: model facts from the model ------------------------------------------------------------


def unknown_model_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "unknown model" in str(w.message)]


@pytest.mark.parametrize("host", HOSTS)
def test_the_window_comes_from_the_models_profile_and_a_fine_tune_counts_as_its_base(
    host: str, tmp_path: Path
) -> None:
    model = ScriptedChatModel(
        script=["noted"],
        model_name="ft:gpt-4o-mini:acme::abc123",
        profile={"max_input_tokens": 3_300},  # what langchain's provider packages fill in
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipeline = context_pipeline(model=model)  # no budget: the model's whole window
        agent = build(host, model, pipeline, [], tmp_path)
        state = agent.invoke({"messages": [("user", "How many tokens do I have?")]}, config())
    assert unknown_model_warnings(caught) == []
    usage = state["context_usage"]
    assert usage.total == 3_300, "the profile's window wins over the package's table (128k)"
    assert usage.model == "ft:gpt-4o-mini:acme::abc123" and usage.exact
    sent = model.received[-1]
    assert usage.used == exact(sent, model="gpt-4o-mini") == exact(sent, model=usage.model)


@pytest.mark.parametrize("host", HOSTS)
def test_context_window_is_a_parameter_for_models_nothing_knows(host: str, tmp_path: Path) -> None:
    model = ScriptedChatModel(script=["noted"], model_name="my-local-llama")
    with pytest.raises(UnknownContextWindowError, match=r"pass context_window=<tokens>"):
        context_pipeline(model=model)
    with pytest.raises(UnknownContextWindowError, match="my-local-llama"):
        context_pipeline(model="my-local-llama")
    pipeline = context_pipeline(model=model, context_window=8_192)
    agent = build(host, model, pipeline, [], tmp_path)
    state = agent.invoke({"messages": [("user", "hi")]}, config())
    usage = state["context_usage"]
    assert usage.total == 8_192 and usage.reserved_output == 2_048  # a quarter of a small window
    assert not usage.exact  # llama: o200k_base times a documented margin
    assert model.received and conversation(model.received[-1])[-1].content == "hi"


def test_a_profile_wins_over_context_window_and_a_preset_refuses_it() -> None:
    model = ScriptedChatModel(
        script=["x"], model_name="gpt-4o", profile={"max_input_tokens": 9_000}
    )
    assert context_pipeline(model=model, context_window=5_000).budget.budget.total == 9_000
    assert context_pipeline(model=model).budget.budget.total == 9_000
    assert context_pipeline(model="gpt-4o").budget.budget.total == 128_000
    with pytest.raises(ValueError, match="context_window applies to budget=None"):
        context_pipeline("fast", model="gpt-4o", context_window=5_000)
    with pytest.raises(ValueError, match="positive int"):
        context_pipeline(model="my-local-llama", context_window=0)

