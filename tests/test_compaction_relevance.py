"""Relevance selection, query-aware previews and the `search_history` tool."""

from __future__ import annotations

import random
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.compaction import (
    KeyMessageExtraction,
    RelevanceSelection,
    compact_messages,
    read_tool_result,
    search_history,
    search_messages,
)
from langgraph_ctx.context.content import content_text
from langgraph_ctx.testing import ordering_problems

SUBJECTS = ["billing", "search", "identity", "media", "reporting"]
CONTACTS = ["Hana Kim", "Omar Haddad", "Lena Petrova", "Raj Malhotra", "Chloe Martin"]


def log(rng: random.Random, lines: int) -> list[str]:
    return [
        f"2024-05-01 12:{i % 60:02d} INFO {rng.choice(SUBJECTS)}-worker must retry batch "
        f"{rng.randint(10, 9999)} at /srv/{rng.choice(SUBJECTS)}/q{i} in {rng.randint(1, 900)} ms"
        for i in range(lines)
    ]


def history(*, fact_in: str, rounds: int = 30, seed: int = 1) -> list[AnyMessage]:
    """An agent transcript full of paths, numbers and "must"; five look-alike facts early."""
    rng = random.Random(seed)
    facts = [
        f"the vendor contact for the {s} invoice is {c}"
        for s, c in zip(SUBJECTS, CONTACTS, strict=True)
    ]
    messages: list[AnyMessage] = [SystemMessage("You are an ops agent.", id="sys")]
    for r in range(rounds):
        messages.append(
            HumanMessage(f"Round {r}: check /var/log/{SUBJECTS[r % 5]}/ now.", id=f"u{r}")
        )
        messages.append(
            AIMessage(
                "Checking; the config must be read first.",
                tool_calls=[{"name": "run_shell", "args": {"cmd": f"tail {r}"}, "id": f"c{r}"}],
                id=f"a{r}",
            )
        )
        lines = log(rng, 150 if r < 5 else 12)
        if r < 5 and fact_in == "tool":
            lines.insert(70, f"ops note: {facts[r]}, per finance.")
        messages.append(
            ToolMessage("\n".join(lines), tool_call_id=f"c{r}", name="run_shell", id=f"t{r}")
        )
        reply = " ".join(
            f"The {rng.choice(SUBJECTS)} job must stay under {rng.randint(100, 999)} MB at "
            f"/srv/app/conf{k}.yaml."
            for k in range(6)
        )
        if r < 5 and fact_in == "reply":
            reply += f" Also: {facts[r]}."
        messages.append(AIMessage(reply, id=f"r{r}"))
    messages.append(HumanMessage("Who was the vendor contact for the billing invoice?", id="q"))
    return messages


def sent_text(messages: list[AnyMessage]) -> str:
    return "\n".join(content_text(m.content) for m in messages)


def test_the_fact_asked_about_survives_compaction() -> None:
    for fact_in in ("reply", "tool"):
        msgs = history(fact_in=fact_in)
        out, record = compact_messages(
            msgs, max_tokens=3_000, strategy=RelevanceSelection(), token_counter="approximate"
        )
        assert record.within_budget and ordering_problems(out) == []
        assert "Hana Kim" in sent_text(out), fact_in
        assert out[-1].id == "q"
        best = max(record.scores, key=lambda s: s.score)
        assert best.id in ("r0", "a0") and best.kept
        # the surface-cue strategy keeps none of it from tool output at the same budget
        if fact_in == "tool":
            old, _ = compact_messages(
                msgs, max_tokens=3_000, strategy=KeyMessageExtraction(), token_counter="approximate"
            )
            assert "Hana Kim" not in sent_text(old)


def test_a_tool_result_preview_shows_the_lines_the_request_matches() -> None:
    msgs = history(fact_in="tool")
    out, _ = compact_messages(
        msgs, max_tokens=3_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    preview = next(m for m in out if m.id == "t0~preview")
    text = content_text(preview.content)
    assert text.startswith("TOOL_RESULT_PREVIEW tool=run_shell")
    assert "lines matching the request follow" in text and "Hana Kim" in text
    assert 'read_tool_result(ref="tool-result/c0")' in text
    assert msgs[3].content.count("\n") > 100  # the original is untouched
    # another request, another preview of the same result
    msgs2 = [*msgs[:-1], HumanMessage("Which batches must retry for media?", id="q2")]
    out2, _ = compact_messages(
        msgs2, max_tokens=3_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    assert "Hana Kim" not in sent_text(out2)


def test_an_unrelated_early_fact_does_not_crowd_out_recent_rounds() -> None:
    msgs = history(fact_in="reply")
    # a huge early reply about the subject asked about, and nothing else relevant
    huge = AIMessage(
        "The billing invoice vendor contact list: " + "billing invoice " * 2_000, id="r1"
    )
    msgs = [huge if m.id == "r1" else m for m in msgs]
    out, record = compact_messages(
        msgs, max_tokens=3_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    ids = {m.id for m in out}
    assert {"u29", "a29", "r29", "u28", "r28"} <= ids  # the last rounds stay
    assert "r1" not in ids  # it would take the budget of several recent rounds
    assert record.within_budget


def test_unrelated_early_facts_are_not_kept_over_recent_rounds() -> None:
    msgs = history(fact_in="reply")
    msgs[-1] = HumanMessage("Bump the reporting timeout and rerun.", id="q")
    out, _ = compact_messages(
        msgs, max_tokens=3_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    assert "Hana Kim" not in sent_text(out)  # the billing fact is not what was asked
    assert {"u29", "r29", "u28", "r28"} <= {m.id for m in out}


def test_search_messages_ranks_the_passage_and_points_into_the_tool_result() -> None:
    msgs = history(fact_in="tool")
    hits = search_messages(msgs, "vendor contact billing invoice", limit=3)
    assert hits[0].ref == "tool-result/c0" and "Hana Kim" in hits[0].text
    full = content_text(msgs[3].content)
    assert full[hits[0].offset :].startswith("ops note: the vendor contact for the billing")
    assert search_messages(msgs, "zebra unicorn") == []


def test_search_ranks_what_the_model_cannot_see_first() -> None:
    # Two passages name the demo office: one in a reply still in view, a weaker one in
    # an early reply compaction left out. The one out of view comes first; without a
    # view, the score alone ranks.
    msgs: list[AnyMessage] = [
        HumanMessage("Plan the demo.", id="u0"),
        AIMessage("Noted: demo office moved, Lisbon.", id="a0"),
        HumanMessage("And the slides?", id="u1"),
        AIMessage("The demo office is Lisbon; the demo office demo office hosts it.", id="a1"),
        HumanMessage("Which office hosts the demo?", id="u2"),
    ]
    by_score = search_messages(msgs, "demo office")
    assert [h.message_id for h in by_score[:2]] == ["a1", "a0"]
    view = [msgs[2], msgs[3], msgs[4]]  # a0 was left out
    ranked = search_messages(msgs, "demo office", view=view)
    assert [h.message_id for h in ranked] == ["a0", "u0", "a1"]  # u0 was left out too
    # the tool reads the view from the graph state it is given
    answer = search_history.invoke(
        {"query": "demo office", "state": {"messages": msgs, "llm_input_messages": view}}
    )
    assert answer.splitlines()[1].startswith("1. message a0")


def test_search_counts_a_previewed_tool_result_as_out_of_view() -> None:
    msgs = history(fact_in="tool")
    shown = msgs[3].model_copy(update={"id": "t0~preview", "content": "TOOL_RESULT_PREVIEW"})
    view = [msgs[1], msgs[2], shown, *msgs[4:]]
    hits = search_messages(msgs, "vendor contact billing invoice", view=view, limit=3)
    assert hits[0].ref == "tool-result/c0" and "Hana Kim" in hits[0].text


class ToolState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def tools_graph(saver: JsonlSaver):  # type: ignore[no-untyped-def]
    builder = StateGraph(ToolState)
    builder.add_node("tools", ToolNode([read_tool_result, search_history]))
    builder.add_conditional_edges(START, tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


def test_search_history_finds_an_offloaded_line_after_a_cold_reopen(tmp_path) -> None:  # type: ignore[no-untyped-def]
    msgs = history(fact_in="tool")
    config = {"configurable": {"thread_id": "ops"}}
    tools_graph(JsonlSaver(tmp_path)).invoke({"messages": msgs}, config)

    graph = tools_graph(JsonlSaver(tmp_path))  # a new saver reads the thread file
    call = AIMessage(
        "",
        tool_calls=[
            {"name": "search_history", "args": {"query": "billing vendor contact"}, "id": "s1"}
        ],
        id="ask",
    )
    out = graph.invoke({"messages": [call]}, config)
    answer = content_text(out["messages"][-1].content)
    assert answer.startswith("3 passage") or "passage(s) match" in answer
    first = answer.splitlines()[1]
    assert first.startswith("1. tool-result/c0 line 71 (run_shell)") and "Hana Kim" in first
    assert 'open: read_tool_result(ref="tool-result/c0", offset=' in answer
    schema = search_history.tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == {"query", "limit"}  # the state stays hidden

    offset = int(answer.split("offset=")[1].split(")")[0])
    opened = AIMessage(
        "",
        tool_calls=[
            {
                "name": "read_tool_result",
                "args": {"ref": "tool-result/c0", "offset": offset},
                "id": "o1",
            }
        ],
        id="open",
    )
    out = graph.invoke({"messages": [opened]}, config)
    assert content_text(out["messages"][-1].content).startswith("ops note: the vendor contact")


def test_the_pipeline_offers_the_tools_when_compaction_is_on() -> None:
    from langgraph_ctx import context_pipeline

    assert [t.name for t in context_pipeline("fast").tools] == [
        "read_tool_result",
        "search_history",
    ]
    assert context_pipeline("fast", compaction=False).tools == []


def test_the_node_reselects_from_the_whole_history_when_the_request_changes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from langgraph_ctx.nodes.compaction import CompactionNode, CompactionState
    from langgraph_ctx.testing import ScriptedChatModel

    model = ScriptedChatModel(script=["noted"])

    def call_model(state):  # type: ignore[no-untyped-def]
        return {"messages": [model.invoke(state.get("llm_input_messages") or state["messages"])]}

    builder = StateGraph(CompactionState)
    node = CompactionNode(
        RelevanceSelection(reselect_each_request=True),
        trigger=6_000,
        target=3_000,
        token_counter="approximate",
    )
    builder.add_node("compact", node)
    builder.add_node("model", call_model)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "model")
    graph = builder.compile(checkpointer=JsonlSaver(tmp_path))
    config = {"configurable": {"thread_id": "t"}}

    msgs = history(fact_in="reply")
    msgs[-1] = HumanMessage("Bump the reporting timeout and rerun.", id="q")
    out = graph.invoke({"messages": msgs}, config)
    assert out["compaction_log"] and "Hana Kim" not in sent_text(model.received[-1])

    # below the trigger, but a new request: the fact left out before comes back
    graph.invoke(
        {"messages": [HumanMessage("Who was the billing vendor contact?", id="q2")]}, config
    )
    seen = model.received[-1]
    assert "Hana Kim" in sent_text(seen) and seen[-1].id == "q2"
    log = graph.get_state(config).values["compaction_log"]
    assert log[-1]["reason"].startswith("the request changed")
    assert ordering_problems(seen) == []


def test_previews_in_view_follow_a_new_request_below_the_trigger(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from langchain_core.messages.utils import count_tokens_approximately

    from langgraph_ctx.nodes.compaction import CompactionNode, CompactionState
    from langgraph_ctx.testing import ScriptedChatModel

    model = ScriptedChatModel(script=["noted"])

    def call_model(state):  # type: ignore[no-untyped-def]
        return {"messages": [model.invoke(state.get("llm_input_messages") or state["messages"])]}

    builder = StateGraph(CompactionState)
    builder.add_node(
        "compact", CompactionNode(trigger=4_000, target=2_500, token_counter="approximate")
    )
    builder.add_node("model", call_model)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "model")
    graph = builder.compile(checkpointer=JsonlSaver(tmp_path))
    config = {"configurable": {"thread_id": "t"}}

    msgs = history(fact_in="tool", rounds=5)
    msgs[-1] = HumanMessage("Bump the timeout and rerun.", id="q")
    graph.invoke({"messages": msgs}, config)
    before = model.received[-1]
    assert "t4~preview" in [m.id for m in before] and "Chloe Martin" not in sent_text(before)

    # a new request, below the trigger: no compaction, but the preview of t4 now shows
    # the line the request asks about (its full text is in the log)
    ask = HumanMessage("Who is the vendor contact for the reporting invoice?", id="q2")
    graph.invoke({"messages": [ask]}, config)
    seen = model.received[-1]
    values = graph.get_state(config).values
    assert len(values["compaction_log"]) == 1
    assert "Chloe Martin" in sent_text(seen) and seen[-1].id == "q2"
    assert ordering_problems(seen) == []
    # the node's count of the view follows the rebuilt previews
    view = values["llm_input_messages"]
    assert values["compaction_cursor"]["view_tokens"] == count_tokens_approximately(view)


def test_summaries_are_made_from_the_full_tool_output_not_the_preview() -> None:
    from langgraph_ctx.context.compaction import LLMSummary, SlidingWindow
    from langgraph_ctx.testing import ScriptedChatModel

    summariser = ScriptedChatModel(script=['{"text": "ops work so far"}'])
    msgs = history(fact_in="tool", rounds=12)
    strategy = LLMSummary(summariser, keep=SlidingWindow(rounds=2), retry_delay=0)
    _, record = compact_messages(
        msgs, max_tokens=4_000, strategy=strategy, token_counter="approximate"
    )
    assert record.summary_updated and "t0" in record.summarized
    prompts = "\n".join(content_text(p[-1].content) for p in summariser.received)
    assert "ops note: the vendor contact for the billing invoice is Hana Kim" in prompts
    assert "TOOL_RESULT_PREVIEW" not in prompts  # the source, never the previews
    assert prompts.count("[tool result run_shell") >= 10


def test_an_over_long_summary_rewrites_itself_instead_of_losing_its_oldest_part() -> None:
    from langgraph_ctx.context.compaction import LLMSummary, RunningSummary, SlidingWindow
    from langgraph_ctx.context.compaction.summarizer import CONDENSE_NOTE
    from langgraph_ctx.testing import ScriptedChatModel

    long = RunningSummary(decisions_made=[f"decision {i}: " + "detail " * 20 for i in range(40)])
    short = '{"decisions_made": ["decisions 0-39 condensed: keep retries at 3"]}'
    summariser = ScriptedChatModel(script=[long.model_dump_json(), short])
    msgs = history(fact_in="reply", rounds=12)
    strategy = LLMSummary(
        summariser,
        keep=SlidingWindow(rounds=2),
        retry_delay=0,
        summary_tokens=300,
        condense_calls=1,
        input_tokens=100_000,
    )
    _, record = compact_messages(
        msgs, max_tokens=4_000, strategy=strategy, token_counter="approximate"
    )
    assert len(summariser.received) == 2  # the fold, then one rewrite of the summary
    assert CONDENSE_NOTE in content_text(summariser.received[1][-1].content)
    assert record.summary.decisions_made == ["decisions 0-39 condensed: keep retries at 3"]
    assert "summary_clipped" not in record.ladder and record.within_budget

    # without extra calls, the next compaction's fold call rewrites the long summary
    summariser = ScriptedChatModel(script=[short])
    strategy = LLMSummary(
        summariser,
        keep=SlidingWindow(rounds=2),
        retry_delay=0,
        summary_tokens=300,
        input_tokens=100_000,
    )
    compact_messages(
        msgs, max_tokens=4_000, strategy=strategy, token_counter="approximate", summary=long
    )
    assert len(summariser.received) == 1
    assert CONDENSE_NOTE in content_text(summariser.received[0][-1].content)


def test_the_middleware_offers_the_tools_and_the_agent_runs_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from langgraph_ctx import context_pipeline
    from langgraph_ctx.testing import ScriptedChatModel

    @tool
    def run_shell(cmd: str) -> str:
        """Run a shell command."""
        return "ok"

    msgs = history(fact_in="tool")
    ask = AIMessage(
        "",
        tool_calls=[{"name": "search_history", "args": {"query": "billing vendor"}, "id": "s1"}],
    )
    model = ScriptedChatModel(script=[ask, "Hana Kim."])
    pipeline = context_pipeline("fast", tools=[run_shell], mode="agent")
    agent = create_agent(
        model, [run_shell], middleware=[pipeline.middleware()], checkpointer=JsonlSaver(tmp_path)
    )
    state = agent.invoke({"messages": msgs}, {"configurable": {"thread_id": "t"}})
    names = [t["function"]["name"] for t in model.tools]
    assert set(names) == {"run_shell", "read_tool_result", "search_history"}
    found = [m for m in state["messages"] if getattr(m, "tool_call_id", None) == "s1"]
    assert found and "Hana Kim" in content_text(found[0].content)
    # the budget counted the tools the model was given
    assert state["context_usage"].breakdown["tools"] > 0
    # off on request
    quiet = create_agent(model, [run_shell], middleware=[pipeline.middleware(offer_tools=False)])
    assert "search_history" not in quiet.get_graph().nodes["tools"].data.tools_by_name


def test_search_finds_a_result_of_the_current_round_shown_only_as_a_preview() -> None:
    """The current round is in view, so it is not searched, but a large tool result of
    it the view shows only as a preview is not in view: its full text is searched (the
    answer was "Nothing in the conversation history matches" for a fact only there),
    and the round's other messages, the search's own call among them, are still not."""
    result = "grep output\n" + "noise line\n" * 150 + "the vendor contact is Hana Kim\n"
    msgs: list[AnyMessage] = [
        HumanMessage("Find the vendor contact in the logs.", id="u0"),
        AIMessage("", id="a0", tool_calls=[{"name": "grep_logs", "args": {}, "id": "g1"}]),
        ToolMessage(result, tool_call_id="g1", name="grep_logs", id="t0"),
        AIMessage("", id="a1", tool_calls=[
            {"name": "search_history", "args": {"query": "vendor contact"}, "id": "s1"}]),
    ]  # fmt: skip
    shown = msgs[2].model_copy(update={"id": "t0~preview", "content": "TOOL_RESULT_PREVIEW"})
    hits = search_messages(msgs, "vendor contact", view=[msgs[0], msgs[1], shown])
    assert [h.ref for h in hits] == ["tool-result/g1"] and "Hana Kim" in hits[0].text
    assert search_messages(msgs, "vendor contact", view=msgs[:3]) == []  # shown whole
