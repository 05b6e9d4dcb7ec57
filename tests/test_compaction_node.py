"""CompactionNode in real LangGraph graphs: triggers, the view, the log, costs, modes."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_ctx.context.compaction import (
    RUNNING_SUMMARY_ID,
    CompactionError,
    CompactionRecord,
    LLMSummary,
    RunningSummary,
    read_tool_result,
)
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.nodes.compaction import CompactionAgentState, CompactionNode, CompactionState
from langgraph_ctx.testing import (
    ExtractiveSummaryModel,
    ScriptedChatModel,
    ordering_problems,
)

CFG = {"configurable": {"thread_id": "t1"}}


class RecordingModel:
    """A model node that records the messages it is given (the view) and replies."""

    def __init__(self, reply_words: int = 40) -> None:
        self.views: list[list[BaseMessage]] = []
        self.reply_words = reply_words

    def __call__(self, state: dict[str, Any]) -> dict[str, Any]:
        view = state.get("llm_input_messages") or state["messages"]
        self.views.append(list(view))
        turn = len(state["messages"])
        return {"messages": [AIMessage(f"reply {turn}: " + "fine " * self.reply_words)]}


def graph(
    node: Any, model: RecordingModel, *, state: Any = CompactionState, before: Any = None,
    checkpointer: Any = None,
):  # type: ignore[no-untyped-def]
    builder = StateGraph(state)
    builder.add_node("compact", node)
    builder.add_node("model", model)
    if before is not None:
        builder.add_node("budget", before)
        builder.add_edge(START, "budget")
        builder.add_edge("budget", "compact")
    else:
        builder.add_edge(START, "compact")
    builder.add_edge("compact", "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=checkpointer or InMemorySaver())


def user(i: int, words: int = 60) -> HumanMessage:
    return HumanMessage(f"turn {i}: we must keep /srv/app/part-{i}.yaml. " + "detail " * words)


class SpyCounter:
    """A token counter that remembers how many messages it was asked to count."""

    def __init__(self, exact: bool = False) -> None:
        self.counted = 0
        self.exact = exact

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        self.counted += len(messages)
        return count_tokens(messages) if self.exact else count_tokens_approximately(messages)


# -- the node in a graph ---------------------------------------------------------------------
def test_the_model_sees_a_compacted_view_and_the_checkpoint_keeps_every_message() -> None:
    saver = InMemorySaver()
    model = RecordingModel()
    app = graph(CompactionNode(max_context_tokens=3_000), model, checkpointer=saver)
    for i in range(40):
        out = app.invoke({"messages": [user(i)]}, CFG)

    assert len(out["messages"]) == 80, "messages is never trimmed"
    stored = saver.get_tuple(CFG).checkpoint["channel_values"]["messages"]  # type: ignore[union-attr]
    assert [m.id for m in stored] == [m.id for m in out["messages"]]

    log = [CompactionRecord.model_validate(r) for r in out["compaction_log"]]
    assert len(log) >= 2
    assert all(r.tokens_after <= 1_500 and r.within_budget for r in log)
    for i, view in enumerate(model.views):
        assert count_tokens(view) < 0.8 * 3_000, f"step {i} sent more than the trigger"
        assert view[-1].content == user(i).content, "the latest user message is sent"
        assert ordering_problems(view) == []
    assert len(model.views[-1]) < 80


def test_the_jsonl_thread_file_keeps_every_message_after_compaction(tmp_path: Path) -> None:
    from langgraph_ctx.saver.jsonl import JsonlSaver

    model = RecordingModel()
    node = CompactionNode(LLMSummary(ExtractiveSummaryModel(), retry_delay=0),
                          max_context_tokens=3_000)
    app = graph(node, model, checkpointer=JsonlSaver(tmp_path))
    for i in range(30):
        out = app.invoke({"messages": [user(i)]}, CFG)
    assert out["compaction_log"] and len(out["messages"]) == 60
    assert out["messages"][0].id not in {m.id for m in model.views[-1]}, "the view was compacted"

    text = (tmp_path / "t1.jsonl").read_text()
    assert all(f'"{m.id}"' in text for m in out["messages"]), "every message is in the file"
    assert "turn 0: we must keep /srv/app/part-0.yaml" in text
    reopened = graph(node, RecordingModel(), checkpointer=JsonlSaver(tmp_path))
    values = reopened.get_state(CFG).values
    assert [m.id for m in values["messages"]] == [m.id for m in out["messages"]]
    assert values["llm_input_messages"][0].id == RUNNING_SUMMARY_ID
    assert values["compaction_log"] == out["compaction_log"]


def test_below_the_trigger_a_step_counts_only_its_new_messages() -> None:
    spy = SpyCounter()
    model = RecordingModel()
    node = CompactionNode(max_context_tokens=4_000, token_counter=spy)
    app = graph(node, model)
    history = [m for i in range(50) for m in (user(i, 5), AIMessage(f"ok {i}"))]
    app.invoke({"messages": history}, CFG)  # the first step reads the whole history once
    steps: list[tuple[int, int]] = []
    for i in range(50, 90):
        before = spy.counted
        out = app.invoke({"messages": [user(i)]}, CFG)
        steps.append((spy.counted - before, len(out["compaction_log"])))
    compacting = {n for _, n in steps}
    assert len(compacting) >= 2, "expected compactions in between"
    quiet = [counted for (counted, n), (_, prev) in zip(steps[1:], steps, strict=False)
             if n == prev]
    assert quiet and max(quiet) <= 4, quiet  # new user + AI reply, plus the empty request


def test_it_reads_context_usage_from_a_budget_node_before_it() -> None:
    from langgraph_ctx.nodes.budget import BudgetNode

    spy = SpyCounter(exact=True)  # the same tokenizer as BudgetNode's
    model = RecordingModel()
    prompt = "You are a meticulous assistant. " * 40  # sent by the model node, not a message
    budget = BudgetNode("fast", model="gpt-4o", system_prompt=prompt)
    node = CompactionNode(token_counter=spy)  # window and reserve come from context_usage
    app = graph(node, model, before=budget)
    for i in range(30):
        out = app.invoke({"messages": [user(i)]}, CFG)
        if not out.get("compaction_log"):
            assert spy.counted == 0, "with context_usage the node counts nothing below the trigger"
    usage = out["context_usage"]
    log = [CompactionRecord.model_validate(r) for r in out["compaction_log"]]
    assert log and all("reserved" in r.reason for r in log)
    overhead = usage.breakdown["system"]  # the prompt: not a message, still sent
    assert overhead > 200
    target = 0.5 * usage.total - usage.reserved_output
    assert all(r.tokens_after + overhead <= target for r in log)
    # After a compaction the node measures the view (plus the prompt), not the history
    # BudgetNode counted, so it does not compact again at every step.
    assert usage.used > 0.8 * usage.total - usage.reserved_output
    assert len(log) <= 3
    assert count_tokens(model.views[-1]) + overhead < 0.8 * usage.total - usage.reserved_output


# -- triggers --------------------------------------------------------------------------------
def state_of(tokens: int) -> dict[str, Any]:
    messages: list[BaseMessage] = []
    i = 0
    while count_tokens_approximately(messages) < tokens:
        messages += [HumanMessage(f"q{i} " + "w " * 40, id=f"u{i}"), AIMessage(f"a{i}", id=f"a{i}")]
        i += 1
    return {"messages": messages}


@pytest.mark.parametrize(
    ("kwargs", "fires_at", "quiet_at", "reason"),
    [
        ({"trigger": 0.8, "max_context_tokens": 2_000}, 1_700, 1_400, "/ 2000 >= 80%"),
        ({"trigger": 0.8, "max_context_tokens": 2_000, "reserved_output": 500}, 1_200, 900,
         "+ 500 reserved"),
        ({"trigger": ("tokens", 1_000), "target": ("tokens", 500)}, 1_100, 800, ">= 1000"),
        ({"trigger": 1_000, "target": 400}, 1_100, 800, "tokens >= 1000"),
        ({"trigger": ("reserved", 500), "max_context_tokens": 2_000}, 1_600, 1_300,
         "+ 500 reserved >= 2000 window"),
        ({"trigger": ("messages", 36), "target": ("tokens", 300)}, 600, 300, "messages >= 36"),
    ],
)
def test_triggers(kwargs: dict[str, Any], fires_at: int, quiet_at: int, reason: str) -> None:
    node = CompactionNode(token_counter="approximate", **kwargs)
    quiet = node.invoke(state_of(quiet_at))
    assert set(quiet) == {"compaction_cursor"}
    fired = node.invoke(state_of(fires_at))
    (record,) = fired["compaction_log"]
    assert reason in record["reason"] and record["compacted"]
    assert fired["llm_input_messages"][-1].id == state_of(fires_at)["messages"][-1].id


def test_trigger_and_target_errors_are_clear() -> None:
    with pytest.raises(CompactionError, match="must be below trigger"):
        CompactionNode(trigger=0.5, target=0.6)
    with pytest.raises(CompactionError, match="trigger="):
        CompactionNode(trigger="soon")  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="target="):
        CompactionNode(target=("messages", 3))  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match=r"\(0, 1\]"):
        CompactionNode(trigger=("fraction", 1.5))
    node = CompactionNode(token_counter="approximate")  # no window, no BudgetNode
    with pytest.raises(CompactionError, match="max_context_tokens"):
        node.invoke(state_of(500))


# -- modes and strategies --------------------------------------------------------------------
def test_rewrite_mode_replaces_messages_but_earlier_checkpoints_keep_them() -> None:
    saver = InMemorySaver()
    model = RecordingModel()
    node = CompactionNode(max_context_tokens=3_000, rewrite_messages=True,
                          token_counter="approximate")
    app = graph(node, model, checkpointer=saver)
    for i in range(30):
        out = app.invoke({"messages": [user(i)]}, CFG)
    assert out["compaction_log"] and "llm_input_messages" not in out
    assert len(out["messages"]) < 60
    marker = next(m for m in out["messages"] if isinstance(m, SystemMessage))
    assert str(marker.content).startswith("CONVERSATION_SUMMARY\n")
    assert "without a model summary" in str(marker.content)
    assert ordering_problems(out["messages"]) == []
    history = list(app.get_state_history(CFG))
    seen = {m.id for snapshot in history for m in snapshot.values.get("messages", [])}
    assert len([i for i in seen if i and not i.startswith("langgraph-ctx")]) >= 60


def test_rewrite_mode_keeps_offloaded_results_readable() -> None:
    big = "\n".join(f"row {i}: value {i * 3}" for i in range(600))
    node = CompactionNode(trigger=("messages", 1), target=("tokens", 4_000),
                          rewrite_messages=True, token_counter="approximate")
    state = {"messages": [
        HumanMessage("dump the table", id="u0"),
        AIMessage("", tool_calls=[{"name": "dump", "args": {}, "id": "c1"}], id="a0"),
        ToolMessage(big, tool_call_id="c1", name="dump", id="t0"),
    ]}
    update = node.invoke(state)
    remove, *messages = update["messages"]
    assert isinstance(remove, RemoveMessage)
    preview = next(m for m in messages if isinstance(m, ToolMessage))
    assert str(preview.content).startswith("TOOL_RESULT_PREVIEW")
    assert preview.artifact["offloaded_content"] == big
    answer = read_tool_result.invoke(
        {"ref": "tool-result/c1", "messages": messages, "limit": 10**6}
    )
    assert answer == big


def test_a_running_summary_across_several_compactions_in_a_graph() -> None:
    extractive = ExtractiveSummaryModel()
    summariser = ScriptedChatModel(script=[lambda msgs: extractive.invoke(msgs)])
    model = RecordingModel(reply_words=10)
    node = CompactionNode(LLMSummary(summariser, retry_delay=0), max_context_tokens=1_800,
                          token_counter="approximate")
    app = graph(node, model)
    for i in range(40):
        out = app.invoke({"messages": [user(i, 30)]}, CFG)

    log = [CompactionRecord.model_validate(r) for r in out["compaction_log"]]
    updates = [r for r in log if r.summary_updated]
    assert len(updates) >= 3 and len(summariser.received) == len(updates)
    summary = RunningSummary.model_validate(out["running_summary"])
    assert summary.updates == len(updates)
    assert summary.covered_messages == sum(len(r.summarized) for r in updates)
    # Each message was folded into the summary once: no prompt repeats an earlier one.
    folded = [str(p[-1].content).split("MESSAGES TO FOLD IN:\n", 1)[1] for p in summariser.received]
    for i in range(40):
        assert sum(f"turn {i}:" in f for f in folded) <= 1
    summaries = [m for m in out["llm_input_messages"] if m.id == RUNNING_SUMMARY_ID]
    assert len(summaries) == 1 and out["llm_input_messages"][0].id == RUNNING_SUMMARY_ID
    assert "/srv/app/part-0.yaml" in json.dumps(out["running_summary"])


def test_a_failing_summary_model_is_recorded_and_the_graph_goes_on() -> None:
    down = ScriptedChatModel(script=[ConnectionError("503 from provider")])
    model = RecordingModel()
    node = CompactionNode(LLMSummary(down, max_retries=1, retry_delay=0),
                          max_context_tokens=2_500, token_counter="approximate")
    app = graph(node, model)
    for i in range(15):
        out = app.invoke({"messages": [user(i)]}, CFG)
    failed = [r for r in out["compaction_log"] if r["error"]]
    assert failed and all(r["fallback"] == "extract" and r["attempts"] == 2 for r in failed)
    assert failed[0]["error"] == "ConnectionError: 503 from provider"
    assert "running_summary" not in out or out["running_summary"] is None
    assert len(model.views) == 15


async def test_async_graph_runs_the_same_steps() -> None:
    def build() -> tuple[Any, RecordingModel]:
        model = RecordingModel()
        node = CompactionNode(LLMSummary(ExtractiveSummaryModel(), retry_delay=0),
                              max_context_tokens=2_500, token_counter="approximate")
        return graph(node, model), model

    sync_app, sync_model = build()
    async_app, async_model = build()
    for i in range(20):
        sync_app.invoke({"messages": [user(i)]}, CFG)
        await async_app.ainvoke({"messages": [user(i)]}, CFG)
    assert [[m.content for m in v] for v in sync_model.views] == [
        [m.content for m in v] for v in async_model.views
    ]


def test_create_react_agent_pre_model_hook_with_read_tool_result() -> None:
    from langgraph.prebuilt import create_react_agent

    big = "\n".join(f"2024-05-01 INFO row {i} value {i * 7}" for i in range(300))

    @tool
    def grep_logs() -> str:
        """Return the nightly job's log."""
        return big

    def after_grep(messages: list[BaseMessage]) -> AIMessage:
        preview = messages[-1]
        assert str(preview.content).startswith("TOOL_RESULT_PREVIEW"), preview.content
        ref = str(preview.content).split("ref=")[1].split()[0]
        return AIMessage("", tool_calls=[{"name": "read_tool_result", "args": {"ref": ref},
                                          "id": "r1"}])

    def after_read(messages: list[BaseMessage]) -> AIMessage:
        assert messages[-1].content == big, "the full text came back, not a new preview"
        return AIMessage("The log has 300 rows.")

    llm = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[{"name": "grep_logs", "args": {}, "id": "g1"}]),
        after_grep,
        after_read,
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(
            llm,
            [grep_logs, read_tool_result],
            pre_model_hook=CompactionNode(trigger=("messages", 1), target=("tokens", 8_000),
                                          token_counter="approximate"),
            state_schema=CompactionAgentState,
        )
    out = agent.invoke({"messages": [HumanMessage("why did the job fail?")]})
    assert out["messages"][-1].content == "The log has 300 rows."
    assert out["messages"][2].content == big, "messages keeps the full tool result"
    assert len(llm.received) == 3


def test_a_state_without_the_view_key_gets_a_warning() -> None:
    model = RecordingModel()
    app = graph(CompactionNode(max_context_tokens=2_000, token_counter="approximate"), model,
                state=MessagesState)
    with pytest.warns(UserWarning, match="compaction_cursor"):
        for i in range(3):
            app.invoke({"messages": [user(i)]}, CFG)


def test_a_rewritten_history_resets_the_cursor() -> None:
    node = CompactionNode(trigger=("tokens", 5_000), target=("tokens", 1_000),
                          token_counter="approximate")
    state = state_of(600)
    first = node.invoke(state)
    assert first["compaction_cursor"]["seen"] == len(state["messages"])
    edited = {"messages": state["messages"][:4], "compaction_cursor": first["compaction_cursor"]}
    second = node.invoke(edited)
    assert second["compaction_cursor"]["seen"] == 4
    assert second["compaction_cursor"]["messages_tokens"] == count_tokens_approximately(
        edited["messages"]
    )


def test_a_summary_model_raising_an_unknown_error_falls_back_to_the_extract() -> None:
    """The summarizer raises only what no retry fixes (a wrong key, model or request); any
    other failure of the summary model, an unknown exception type included, falls back
    to extraction and is recorded: a summary is an extra, and its failure must not stop
    the turn (where the model node itself raises an unknown exception)."""
    from langgraph_ctx.context.compaction import LLMSummary, compact_messages
    from langgraph_ctx.testing import ScriptedChatModel

    history: list[BaseMessage] = []
    for i in range(24):
        history += [user(i), AIMessage(f"reply {i}: " + "fine " * 40, id=f"a{i}")]
    for error in (ValueError({"message": "Provider returned error", "code": 502}),
                  RuntimeError("summary model wrapper broke")):  # fmt: skip
        strategy = LLMSummary(ScriptedChatModel(script=[error]), max_retries=0)
        _, record = compact_messages(history, max_tokens=400, strategy=strategy)
        assert record.fallback == "extract" and type(error).__name__ in (record.error or "")
