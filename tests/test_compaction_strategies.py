"""Each compaction strategy, the fallback ladder, the running summary, model failure, bad input."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_ctx.context.compaction import (
    RUNNING_SUMMARY_ID,
    SUMMARY_MARKER,
    CompactionError,
    CompactionStrategy,
    Conversation,
    HybridSummary,
    LLMSummary,
    RunningSummary,
    Selection,
    SlidingWindow,
    acompact_messages,
    compact_messages,
    prepare_compaction,
)
from langgraph_ctx.testing import (
    ExtractiveSummaryModel,
    ScriptedChatModel,
    ordering_problems,
)

APPROX = "approximate"
FILLER = "This paragraph only restates things we already went over in some detail. "


def call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"name": name, "args": {"q": call_id}, "id": call_id, "type": "tool_call"}


def chat(rounds: int, *, answer: str = "ok, noted.", user_words: int = 30) -> list[BaseMessage]:
    """System prompt plus `rounds` user/assistant pairs with ids u<i> / a<i>."""
    history: list[BaseMessage] = [SystemMessage("You are a coding agent.", id="sys")]
    for i in range(rounds):
        history.append(HumanMessage(f"step {i}: " + "word " * user_words, id=f"u{i}"))
        history.append(AIMessage(f"{answer} ({i})", id=f"a{i}"))
    return history


def ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def summary_json(**fields: Any) -> str:
    base = {"user_intent": "", "key_entities": {}, "decisions_made": [],
            "pending_questions": [], "text": ""}
    return json.dumps({**base, **fields})


def folded_section(prompt: list[BaseMessage]) -> str:
    return str(prompt[-1].content).split("MESSAGES TO FOLD IN:\n", 1)[1]


# -- key-message extraction -----------------------------------------------------------------
def test_extraction_keeps_every_user_message_and_the_current_round() -> None:
    history = chat(12, answer="Fine, nothing new here, moving on")
    history += [
        HumanMessage("now run the tests", id="u12"),
        AIMessage("", tool_calls=[call("c1")], id="a12"),
        ToolMessage("3 passed", tool_call_id="c1", id="t12"),
    ]
    total = count_tokens_approximately(history)
    messages, record = compact_messages(
        history, max_tokens=total - 60, token_counter=APPROX, strategy="extract"
    )

    assert record.compacted and record.within_budget and record.strategy == "extract"
    kept = ids(messages)
    assert all(f"u{i}" in kept for i in range(13))
    assert kept[-3:] == ["u12", "a12", "t12"]
    assert record.dropped and all(d.role == "assistant" for d in record.dropped)
    assert all(d.reason.startswith("score") for d in record.dropped)
    assert ordering_problems(messages) == []


def test_scores_are_explainable_and_pick_the_better_message() -> None:
    history = [
        HumanMessage("let's plan", id="u0"),
        AIMessage("Decided: we must deploy /srv/app/release-42.yaml at 09:30.", id="keep"),
        HumanMessage("and then?", id="u1"),
        AIMessage("Sure, sounds good to me, happy to help with it.", id="lose"),
        HumanMessage("go", id="u2"),
    ]
    full = count_tokens_approximately(history)
    cheap = count_tokens_approximately([history[3]])
    messages, record = compact_messages(
        history, max_tokens=full - cheap, token_counter=APPROX, strategy="extract"
    )

    assert "keep" in ids(messages) and "lose" not in ids(messages)
    by_id = {s.id: s for s in record.scores}
    assert {"decision", "constraint", "path", "number"} <= set(by_id["keep"].parts)
    assert by_id["keep"].score == pytest.approx(sum(by_id["keep"].parts.values()), abs=0.01)
    assert by_id["keep"].kept and not by_id["lose"].kept
    assert by_id["keep"].score > by_id["lose"].score


def test_large_tool_results_are_penalised_in_the_score() -> None:
    big = "\n".join(f"row {i}" for i in range(2000))
    history = [
        HumanMessage("q", id="u0"),
        AIMessage("", tool_calls=[call("c1")], id="a0"),
        ToolMessage(big, tool_call_id="c1", id="t0"),
        HumanMessage("next", id="u1"),
    ]
    plan = prepare_compaction(
        history, max_tokens=60, token_counter=APPROX, offload_threshold=None, strategy="extract"
    )
    (score,) = [s for s in plan.scores if s.id == "a0"]
    assert score.parts["large_tool_result"] == -3.0


# -- the fallback ladder ----------------------------------------------------------------------
def test_ladder_step_one_turns_tool_results_into_previews() -> None:
    output = "\n".join(f"line {i}" for i in range(600))
    history = [
        HumanMessage("scan the repo", id="u0"),
        AIMessage("", tool_calls=[call("c1")], id="a0"),
        ToolMessage(output, tool_call_id="c1", name="search", id="t0"),
    ]
    messages, record = compact_messages(
        history, max_tokens=400, token_counter=APPROX, offload_threshold=None
    )
    assert record.ladder == ["tool_previews"] and record.within_budget
    (offload,) = record.offloaded
    assert offload.cause == "budget" and offload.ref == "tool-result/c1" and offload.id == "t0"
    assert ids(messages) == ["u0", "a0", "t0~preview"]


def test_ladder_step_two_shortens_long_texts_to_first_paragraph_and_key_lines() -> None:
    long_text = (
        "Here is the background for the migration.\n\n"
        + FILLER * 30
        + "\n- you must never deploy on Fridays\n"
        + FILLER * 30
    )
    history = [
        HumanMessage(long_text, id="u0"),
        AIMessage("noted", id="a0"),
        HumanMessage(long_text, id="u1"),
        AIMessage("noted", id="a1"),
        HumanMessage("what now?", id="u2"),
    ]
    messages, record = compact_messages(
        history, max_tokens=700, token_counter=APPROX, strategy="extract"
    )
    assert "shorten_texts" in record.ladder and record.within_budget
    short = next(m for m in messages if m.id == "u0~short")
    assert str(short.content).startswith("Here is the background for the migration.")
    assert "you must never deploy on Fridays" in str(short.content)
    assert "shortened by compaction" in str(short.content)
    assert {s.id for s in record.shortened} >= {"u0"}
    assert messages[-1].id == "u2", "the latest user message is never shortened by step 2"


def test_ladder_last_step_keeps_only_the_recent_rounds() -> None:
    history = chat(30, user_words=60)
    messages, record = compact_messages(
        history, max_tokens=500, token_counter=APPROX, strategy="extract"
    )
    assert record.ladder[0] == "recent_rounds:4" and record.within_budget
    kept = ids(messages)
    assert all(f"u{i}" in kept for i in range(26, 30))
    assert "u0" not in kept
    assert ordering_problems(messages) == []


def test_ladder_shortens_even_the_latest_user_message_when_it_alone_is_too_big() -> None:
    huge = "Please refactor the whole module.\n\n" + "lorem ipsum dolor sit amet " * 4000
    history = [SystemMessage("sys", id="sys"), HumanMessage(huge, id="u0")]
    messages, record = compact_messages(history, max_tokens=300, token_counter=APPROX)
    assert record.ladder[-1] == "shorten_latest_user" and record.within_budget
    assert ids(messages) == ["sys", "u0~short"]
    assert str(messages[1].content).startswith("Please refactor the whole module.")


# -- sliding window ---------------------------------------------------------------------------
def test_sliding_window_keeps_the_last_rounds_that_fit() -> None:
    history = chat(20)
    messages, record = compact_messages(
        history, max_tokens=400, strategy=SlidingWindow(), token_counter=APPROX
    )
    kept = ids(messages)
    assert kept[0] == "sys" and kept[-2:] == ["u19", "a19"]
    first = int(str(kept[1])[1:])
    assert kept[1:] == [x for i in range(first, 20) for x in (f"u{i}", f"a{i}")]
    assert record.within_budget
    assert {d.reason for d in record.dropped} == {"outside the window that fits"}


def test_sliding_window_round_and_token_limits() -> None:
    history = chat(20)
    total = count_tokens_approximately(history)
    messages, _ = compact_messages(
        history, max_tokens=total - 1, strategy=SlidingWindow(rounds=2), token_counter=APPROX
    )
    assert ids(messages) == ["sys", "u18", "a18", "u19", "a19"]
    per_round = count_tokens_approximately(history[1:3])
    messages, _ = compact_messages(
        history,
        max_tokens=total - 1,
        strategy=SlidingWindow(tokens=3 * per_round),
        token_counter=APPROX,
    )
    assert ids(messages) == ["sys", "u17", "a17", "u18", "a18", "u19", "a19"]
    with pytest.raises(CompactionError, match="rounds"):
        SlidingWindow(rounds=0)


# -- LLM summary ------------------------------------------------------------------------------
def test_llm_summary_folds_the_dropped_messages_into_a_structured_summary() -> None:
    model = ScriptedChatModel(
        script=[
            summary_json(
                user_intent="migrate the store",
                key_entities={"config": "/srv/app/conf.yaml"},
                decisions_made=["use PostgreSQL 16"],
                pending_questions=["which region?"],
                text="Early steps covered setup.",
            )
        ]
    )
    history = chat(20)
    messages, record = compact_messages(
        history, max_tokens=600, strategy=LLMSummary(model), token_counter=APPROX
    )
    assert record.summary_updated and record.attempts == 1 and record.error is None
    assert ids(messages)[:2] == ["sys", RUNNING_SUMMARY_ID]
    text = str(messages[1].content)
    assert text.startswith("CONVERSATION_SUMMARY")
    for fragment in ("migrate the store", "/srv/app/conf.yaml", "PostgreSQL 16", "which region?"):
        assert fragment in text
    assert messages[1].additional_kwargs == {SUMMARY_MARKER[0]: SUMMARY_MARKER[1]}
    assert record.summary is not None and record.summary.decisions_made == ["use PostgreSQL 16"]
    assert record.summary.covered_messages == len(record.summarized) > 0
    # The model saw exactly the dropped messages, none of the kept ones.
    (prompt,) = model.received
    section = folded_section(prompt)
    kept = set(ids(messages))
    for message in history[1:]:
        marker = str(message.content)
        assert (marker in section) == (message.id not in kept), message.id
    assert set(record.summarized) == {m.id for m in history[1:]} - kept
    assert record.within_budget


def test_running_summary_each_compaction_folds_only_what_it_drops() -> None:
    model = ExtractiveSummaryModel()
    view: list[BaseMessage] = [SystemMessage("You are a coding agent.", id="sys")]
    summary: RunningSummary | None = None
    prompts: list[str] = []
    folded_before = 0
    for i in range(40):
        new = [
            HumanMessage(f"step {i}: we must keep port {8000 + i} open. " + "word " * 20,
                         id=f"u{i}"),
            AIMessage(f"Decided: port {8000 + i} stays open ({i}).", id=f"a{i}"),
        ]
        recorder = ScriptedChatModel(script=[lambda msgs: model.invoke(msgs)])
        strategy = LLMSummary(recorder, retry_delay=0)
        view, record = compact_messages(
            [*view, *new], max_tokens=700, strategy=strategy, token_counter=APPROX,
            summary=summary,
        )
        summary = record.summary
        if record.summary_updated:
            assert summary is not None
            prompts.append(folded_section(recorder.received[-1]))
            assert summary.covered_messages == folded_before + len(record.summarized)
            folded_before = summary.covered_messages
    assert len(prompts) >= 3, "expected several compactions"
    assert summary is not None and summary.updates == len(prompts)
    for i in range(40):
        holding = [p for p in prompts if f"step {i}:" in p]
        assert len(holding) <= 1, f"step {i} was summarised {len(holding)} times"
    # The facts of early steps live on in the summary, not in the view.
    assert "port 8000" in summary.model_dump_json()
    assert not any("step 0:" in str(m.content) for m in view[2:])
    assert sum(m.id == RUNNING_SUMMARY_ID for m in view) == 1


def test_model_failure_retries_then_falls_back_to_extraction() -> None:
    previous = RunningSummary(user_intent="ship v2", text="earlier work")
    model = ScriptedChatModel(script=[ConnectionError("provider down")])
    history = chat(20)
    messages, record = compact_messages(
        history,
        max_tokens=600,
        strategy=LLMSummary(model, max_retries=2, retry_delay=0),
        token_counter=APPROX,
        summary=previous,
    )
    assert record.attempts == 3 == len(model.received)
    assert record.error == "ConnectionError: provider down"
    assert record.fallback == "extract" and record.strategy == "summary"
    assert not record.summary_updated and record.summary == previous
    assert RUNNING_SUMMARY_ID not in ids(messages), "no summary is made up"
    assert record.within_budget and ordering_problems(messages) == []


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_summary_model_with_a_wrong_key_raises_at_once(status: int) -> None:
    """A 401 from the summary model was retried and then hidden behind the extraction
    fallback, every compaction; as for the model node, a wrong key raises, untried again."""

    class APIStatusError(Exception):
        status_code = status

    for run in (compact_messages, lambda *a, **k: asyncio.run(acompact_messages(*a, **k))):
        model = ScriptedChatModel(script=[APIStatusError("invalid api key")])
        with pytest.raises(APIStatusError, match="invalid api key"):
            run(
                chat(20),
                max_tokens=600,
                strategy=LLMSummary(model, max_retries=2, retry_delay=0),
                token_counter=APPROX,
            )
        assert len(model.received) == 1


def test_no_room_for_a_summary_is_said_in_the_record() -> None:
    """With too little room for a summary message the strategy falls back to extraction
    without calling the model. The record said nothing of it (``fallback=None``, a reason
    the node overwrote): history was dropped, unsummarised, with no trace of why."""
    model = ScriptedChatModel(script=[summary_json(text="never asked")])
    _, record = compact_messages(
        chat(20),
        max_tokens=120,
        strategy=LLMSummary(model, retry_delay=0),
        token_counter=APPROX,
    )
    assert model.received == []
    assert record.fallback == "extract" and not record.summary_updated
    assert record.reason.endswith("; no room for a summary message")
    assert record.dropped


def test_a_retry_that_succeeds_counts_its_attempts() -> None:
    model = ScriptedChatModel(
        script=[TimeoutError("slow"), "", summary_json(text="the facts")]
    )
    _, record = compact_messages(
        chat(20), max_tokens=600, strategy=LLMSummary(model, retry_delay=0), token_counter=APPROX
    )
    assert record.attempts == 3 and record.summary_updated and record.error is None
    assert record.summary is not None and record.summary.text == "the facts"


def test_a_reply_that_is_not_json_is_kept_as_free_text() -> None:
    model = ScriptedChatModel(script=["The user set up the repo and chose uv."])
    _, record = compact_messages(
        chat(20), max_tokens=600, strategy=LLMSummary(model), token_counter=APPROX
    )
    assert record.summary is not None
    assert record.summary.text == "The user set up the repo and chose uv."


def test_hybrid_summarises_exactly_what_extraction_drops() -> None:
    history = chat(20, answer="Decided: keep going with plan B", user_words=5)
    users = count_tokens_approximately([m for m in history if isinstance(m, HumanMessage)])
    budget = int((users + 40) * 1.5) + 20  # extraction gets 2/3, enough for every user message
    assert budget < count_tokens_approximately(history)
    strategy = HybridSummary(ScriptedChatModel(script=[summary_json(text="earlier")]))
    plan = prepare_compaction(history, max_tokens=budget, strategy=strategy, token_counter=APPROX)
    messages, record = compact_messages(
        history, max_tokens=budget, strategy=strategy, token_counter=APPROX
    )
    assert plan.ladder == [] and plan.dropped
    assert record.strategy == "hybrid" and record.summary_updated
    assert set(record.summarized) == set(plan.dropped_ids())
    assert [m.id for m in messages if m.id != RUNNING_SUMMARY_ID][1:] == [
        k for unit in plan.keep for k in unit.keys
    ]
    # All user messages are still there: extraction keeps them, the summary covers the rest.
    assert all(f"u{i}" in ids(messages) for i in range(20))


def test_prepare_compaction_decides_without_calling_the_model() -> None:
    model = ScriptedChatModel(script=[AssertionError("must not be called")])
    plan = prepare_compaction(
        chat(20), max_tokens=600, strategy=LLMSummary(model), token_counter=APPROX
    )
    assert plan.summarize and plan.summary_tokens > 0 and model.received == []


async def test_async_compaction_matches_sync() -> None:
    history = chat(25)

    def run() -> LLMSummary:
        return LLMSummary(ExtractiveSummaryModel(), retry_delay=0)

    sync_messages, sync_record = compact_messages(
        history, max_tokens=700, strategy=run(), token_counter=APPROX
    )
    async_messages, async_record = await acompact_messages(
        history, max_tokens=700, strategy=run(), token_counter=APPROX
    )
    volatile = {"duration_ms", "created_at", "summary"}
    assert [(m.id, m.content) for m in sync_messages] == [
        (m.id, m.content) for m in async_messages
    ]
    assert sync_record.model_dump(exclude=volatile) == async_record.model_dump(exclude=volatile)


def test_a_custom_strategy_plugs_in() -> None:
    class UsersOnly(CompactionStrategy):
        name = "users-only"

        def select(self, conv: Conversation, avail: int) -> Selection:
            return Selection(keep=[u for u in conv.units if u.kind == "user"])

    messages, record = compact_messages(
        chat(5), max_tokens=100, strategy=UsersOnly(), token_counter=APPROX
    )
    assert record.strategy == "users-only"
    assert all(isinstance(m, (SystemMessage, HumanMessage)) for m in messages)


# -- system messages --------------------------------------------------------------------------
def test_historical_system_messages_go_summary_class_ones_stay_at_the_front() -> None:
    history = [
        SystemMessage("prompt", id="sys"),
        HumanMessage("a", id="u0"),
        SystemMessage("MODE\n- active: run", id="mode"),
        AIMessage("b", id="a0"),
        SystemMessage("SUMMARY of the last session: tests were green", id="old-summary"),
        HumanMessage("c", id="u1"),
    ]
    messages, record = compact_messages(history, max_tokens=10_000, token_counter=APPROX)
    assert ids(messages) == ["sys", "old-summary", "u0", "a0", "u1"]
    assert [(d.id, d.reason) for d in record.dropped] == [("mode", "historical system message")]


# -- bad input ----------------------------------------------------------------------------------
def test_empty_history_and_only_system_messages() -> None:
    messages, record = compact_messages([], max_tokens=100, token_counter=APPROX)
    assert messages == [] and not record.compacted and record.tokens_after == 0
    system = [SystemMessage("a", id="s1"), SystemMessage("b", id="s2")]
    messages, record = compact_messages(system, max_tokens=100, token_counter=APPROX)
    assert messages == system and not record.compacted


def test_a_system_prompt_larger_than_the_budget_is_reported_not_hidden() -> None:
    history = [SystemMessage("rules " * 500, id="sys"), HumanMessage("hi", id="u0")]
    messages, record = compact_messages(history, max_tokens=50, token_counter=APPROX)
    assert ids(messages)[0] == "sys" and not record.within_budget
    assert record.tokens_after > record.max_tokens


def test_orphans_unanswered_and_malformed_tool_calls_are_repaired_and_recorded() -> None:
    history = [
        ToolMessage("stray", tool_call_id="ghost", id="orphan"),
        HumanMessage("q", id="u0"),
        AIMessage("", tool_calls=[call("c1"), call("c2")], id="a0"),
        ToolMessage("r1", tool_call_id="c1", id="t1"),
        AIMessage("let me try", tool_calls=[{"name": "f", "args": {}, "id": None}], id="a1"),
        HumanMessage("and?", id="u1"),
        AIMessage("", tool_calls=[call("c3")], id="a2"),
        HumanMessage("hurry", id="u2"),
        ToolMessage("r3", tool_call_id="c3", id="t3"),
    ]
    messages, record = compact_messages(history, max_tokens=10_000, token_counter=APPROX)
    assert ordering_problems(messages) == []
    assert ids(messages) == ["u0", "a0~repaired", "t1", "a1~repaired", "u1", "a2", "t3", "u2"]
    assert messages[1].tool_calls == [call("c1")]  # type: ignore[attr-defined]
    assert messages[3].tool_calls == []  # type: ignore[attr-defined]
    assert ("orphan", "orphan tool result (no matching tool call)") in [
        (d.id, d.reason) for d in record.dropped
    ]
    repairs = " | ".join(record.repairs)
    for fragment in ("orphan tool result orphan", "unanswered tool call(s) ['c2']",
                     "without a unique id", "moved tool result t3"):
        assert fragment in repairs


def test_messages_before_the_first_user_message_are_left_out() -> None:
    history = [SystemMessage("s", id="sys"), AIMessage("Hi! How can I help?", id="hello"),
               HumanMessage("fix the bug", id="u0")]
    messages, record = compact_messages(history, max_tokens=10_000, token_counter=APPROX)
    assert ids(messages) == ["sys", "u0"]
    assert record.dropped[0].reason == "before the first user message"


def test_bad_arguments_raise_clear_errors() -> None:
    history = chat(2)
    with pytest.raises(CompactionError, match="list of messages"):
        compact_messages("hello", max_tokens=10, token_counter=APPROX)  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match=r"messages\[1\] cannot be read"):
        compact_messages([("user", "hi"), {"oops": 1}], max_tokens=10, token_counter=APPROX)
    for bad in (0, -5, 1.5, True):
        with pytest.raises(CompactionError, match="max_tokens"):
            compact_messages(history, max_tokens=bad, token_counter=APPROX)  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="needs a chat model"):
        compact_messages(history, max_tokens=10, strategy="summary")  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="unknown strategy"):
        compact_messages(history, max_tokens=10, strategy="magic")  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="needs a chat model"):
        LLMSummary("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="token_counter"):
        compact_messages(history, max_tokens=10, token_counter=42)  # type: ignore[arg-type]

    def broken(messages: list[BaseMessage]) -> int:
        raise RuntimeError("tokenizer exploded")

    with pytest.raises(CompactionError, match="token counter failed"):
        compact_messages(history, max_tokens=10, token_counter=broken)


def test_dicts_and_tuples_are_read_like_trim_messages_does() -> None:
    history = [
        {"role": "system", "content": "s"},
        ("user", "hello"),
        {"role": "assistant", "content": "hi"},
        "what next?",
    ]
    messages, record = compact_messages(history, max_tokens=1_000, token_counter=APPROX)
    assert [m.type for m in messages] == ["system", "human", "ai", "human"]
    assert record.kept == ["#0", "#1", "#2", "#3"]


def test_the_default_counter_is_count_tokens_for_the_model() -> None:
    from langgraph_ctx.context.tokens import count_tokens

    history = chat(30)
    messages, record = compact_messages(history, max_tokens=800, model="gpt-4o")
    assert record.tokenizer == "gpt-4o"
    assert record.tokens_before == count_tokens(history)
    assert record.tokens_after == count_tokens(messages) <= 800


def test_the_summary_marker_matches_budget_and_budget_counts_it_as_summary() -> None:
    from langgraph_ctx.context import budget

    assert budget.SUMMARY_MARKER == SUMMARY_MARKER
    model = ScriptedChatModel(script=[summary_json(text="earlier steps")])
    messages, _ = compact_messages(
        chat(20), max_tokens=600, strategy=LLMSummary(model), token_counter=APPROX
    )
    assert budget.split_components(messages)[1] == "summary"


# -- the target is a goal, max_tokens the limit --------------------------------------------------
def test_a_target_below_max_tokens_never_cuts_a_latest_message_that_fits() -> None:
    history = chat(6, user_words=40)
    long = "Here is the log:\n" + "\n".join(f"line {i}: step ok" for i in range(200))
    history.append(HumanMessage(long + "\nERROR: disk full on /var/data", id="paste"))
    messages, record = compact_messages(
        history, max_tokens=2_000, target_tokens=500, token_counter=APPROX
    )
    assert messages[-1] is history[-1], "it fits the hard budget: sent as written"
    assert record.target_tokens == 500 and record.max_tokens == 2_000
    assert record.tokens_after > 500 and record.within_budget
    plan = prepare_compaction(history, max_tokens=2_000, target_tokens=500, token_counter=APPROX)
    assert [k for u in plan.keep for k in u.keys][-1] == "paste"

    messages, record = compact_messages(
        history, max_tokens=300, target_tokens=200, token_counter=APPROX
    )
    short = str(messages[-1].content)
    assert messages[-1].id == "paste~short" and record.ladder[-1] == "shorten_latest_user"
    assert short.startswith("Here is the log:") and "ERROR: disk full on /var/data" in short
    assert "shortened by compaction" in short and record.within_budget
    with pytest.raises(CompactionError, match="target_tokens"):
        compact_messages(history, max_tokens=300, target_tokens=0)


def test_head_and_tail_keep_both_ends_of_a_single_long_line() -> None:
    from langgraph_ctx.context.compaction.previews import head_and_tail_text

    line = "BEGIN " + "x" * 5_000 + " Traceback: KeyError('user_id') END"
    short = head_and_tail_text(line, 400)
    assert short.startswith("BEGIN ") and short.endswith("KeyError('user_id') END")
    assert "characters omitted" in short and len(short) < 500


@pytest.mark.parametrize(
    ("text", "signals"),
    [
        ("Do not touch the replica", ["constraint"]),  # a listed word pair
        ("undo notes later", []),  # "do" only inside a word: no pair
        ("we're going with plan b", ["decision"]),
        ("We will ship; the deploy failed", ["decision", "error"]),
        ("see main.py and x-.md", ["path"]),
        ("a file called .py alone", []),  # a file name needs a name before the dot
        ("/var/log/app", ["path"]),
        ("C:\\data\\x", ["path"]),
        ("```\ncode\n```", ["code"]),
        ("took 300 ms", ["number"]),
        ("请务必检查，已解决", ["decision", "constraint"]),
        ("Ünïcode must stay", ["constraint"]),
    ],
)
def test_text_signals_find_words_pairs_paths_and_numbers(text: str, signals: list[str]) -> None:
    from langgraph_ctx.context.compaction.signals import SIGNALS, line_weight, text_signals

    assert text_signals(text) == signals
    assert line_weight(text) == sum(SIGNALS[name] for name in signals)


def test_line_weights_equal_line_weight_line_by_line() -> None:
    from langgraph_ctx.context.compaction.signals import line_weight, line_weights

    text = "\n".join(
        [
            "ok",
            "",
            "   ",
            "Do not retry: the deploy failed after 300 ms",
            "we will keep /etc/app.yaml and main.py",
            "7\n%",  # a unit on the next line is not this number's unit
            "a 5 ms wait, v1.2.3, id_42, x2",
            "必须检查 the result",
            "İstanbul must wait; Ünïcode 12 k",
            "```python",
        ]
    )
    assert line_weights(text) == tuple(
        line_weight(line) if line.strip() else 0.0 for line in text.split("\n")
    )
    assert line_weights(text)[3] == 1.5 + 1.0 + 1.0  # constraint, number, error


def test_shortening_the_latest_user_message_keeps_its_image_when_it_fits() -> None:
    """A long pasted text with a screenshot: the text is shortened to fit, and the image
    is still sent after it when the shortened text leaves room for it (it was dropped,
    and the model asked about an image it never got). When even the shortest text with
    the image does not fit, the image is left out and the note says so."""
    import base64
    import struct

    from langgraph_ctx.context.tokens import count_tokens

    ihdr = struct.pack(">IIBBBBB", 1024, 1024, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 64
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    image = {"type": "image_url", "image_url": {"url": url}}
    text = "What does this screenshot show? Context: " + "describe the chart " * 2000
    history = [HumanMessage([{"type": "text", "text": text}, image], id="u0")]
    image_cost = count_tokens([HumanMessage([image])]) - count_tokens([HumanMessage("")])
    assert image_cost >= 765  # 1024 x 1024, detail auto

    messages, record = compact_messages(history, max_tokens=3000, model="gpt-4o")
    assert record.ladder[-1] == "shorten_latest_user" and record.within_budget
    [sent] = messages
    assert isinstance(sent.content, list) and sent.content[-1] == image
    assert sent.content[0]["text"].startswith("What does this screenshot show?")
    assert "non-text" not in sent.content[0]["text"]

    messages, record = compact_messages(history, max_tokens=600, model="gpt-4o")
    [sent] = messages
    assert isinstance(sent.content, str) and record.within_budget
    assert "the rest and 1 non-text block(s) is left out" in sent.content


def test_shortening_keeps_an_image_placed_ahead_of_the_text_ahead_of_it() -> None:
    """An image before the question (as Anthropic recommends) stays before the shortened
    text; one after the text stays after it."""
    first = {"type": "image_url", "image_url": {"url": "https://example.com/before.png"}}
    last = {"type": "image_url", "image_url": {"url": "https://example.com/after.png"}}
    text = "Compare the two photos. Log: " + "entry " * 4000
    history = [HumanMessage([first, {"type": "text", "text": text}, last], id="u0")]
    messages, record = compact_messages(history, max_tokens=2500, model="gpt-4o")
    [sent] = messages
    assert record.ladder[-1] == "shorten_latest_user"
    assert sent.content[0] == first and sent.content[-1] == last
    assert sent.content[1]["text"].startswith("Compare the two photos.")


def test_a_summary_leaves_room_for_the_newest_tool_group() -> None:
    """An LLM summary was clipped only down to its reserve: with the newest tool group
    kept beyond the strategy's room, the request ended at 947 tokens against 900
    (review 23). The summary is clipped to what the kept messages leave."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from langgraph_ctx.context.compaction import LLMSummary, compact_messages
    from langgraph_ctx.testing import ExtractiveSummaryModel

    history: list[BaseMessage] = []
    for i in range(12):
        text = " ".join(f"Decided: use PostgreSQL 16.{i}{j} for store {j}. The budget is "
                        f"{i}{j}00 USD per month." for j in range(4))  # fmt: skip
        history += [HumanMessage(text, id=f"u{i}"), AIMessage(f"Noted {i}.", id=f"r{i}")]
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    history += [
        HumanMessage("Please look at the failing test. " * 70, id="u_last"),
        AIMessage("", tool_calls=[call], id="a_last"),
        ToolMessage("12:00:01 INFO batch 7 in 91 ms\n" * 3, tool_call_id="c1", id="t_last"),
    ]
    for max_tokens in (900, 1000):
        sent, record = compact_messages(
            history, max_tokens=max_tokens, token_counter="approximate",
            strategy=LLMSummary(ExtractiveSummaryModel(), retry_delay=0),
        )  # fmt: skip
        assert record.within_budget, (record.tokens_after, max_tokens)
        assert [m.id for m in sent[-2:]] == ["a_last", "t_last"]


def test_a_summary_under_a_target_keeps_its_reserve_while_the_hard_budget_has_room() -> None:
    """With a target below the hard budget (`CompactionNode`'s default ``target=0.5``) and a
    current round larger than the target's room, the summary was clipped to its header
    (155 characters for 60 messages, every decision gone) although the request had room
    under the hard budget (review 24 of the fix above)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from langgraph_ctx.context.compaction import LLMSummary, compact_messages
    from langgraph_ctx.testing import ExtractiveSummaryModel

    history: list[BaseMessage] = []
    for i in range(30):
        text = " ".join(f"Decided: use PostgreSQL 16.{i}{j} for store {j}. The budget is "
                        f"{i}{j}00 USD per month." for j in range(4))  # fmt: skip
        history += [HumanMessage(text, id=f"u{i}"), AIMessage(f"Noted {i}.", id=f"r{i}")]
    log = "ERROR migration 0042 failed on table orders\n" * 170
    history.append(HumanMessage("Fix what fails. The failing log:\n" + log, id="u_last"))
    for k in range(2):
        call = {"name": "run_check", "args": {"n": k}, "id": f"c{k}"}
        history += [AIMessage("", tool_calls=[call], id=f"a{k}"),
                    ToolMessage(f"check {k}: " + "ok step " * 110, tool_call_id=f"c{k}",
                                id=f"t{k}")]  # fmt: skip
    sent, record = compact_messages(
        history, max_tokens=4000, target_tokens=2000, token_counter="approximate",
        strategy=LLMSummary(ExtractiveSummaryModel(), retry_delay=0),
    )  # fmt: skip
    summary = next(m for m in sent if m.type == "system")
    assert record.within_budget and "Decisions made" in summary.text
    assert len(summary.text) > 1000
