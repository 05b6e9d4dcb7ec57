"""Tool-result offloading: previews with a reference, and `read_tool_result` in a real graph."""

from __future__ import annotations

from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from langgraph_ctx import ContextBudget, JsonlSaver, ModelNode, context_pipeline
from langgraph_ctx.context.compaction import (
    compact_messages,
    find_tool_result,
    read_tool_result,
    search_history,
    tool_result_ref,
)
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.testing import ScriptedChatModel, ordering_problems

SMALL = ContextBudget(total=6000, output_reserve=500)
"""A budget that makes compaction work: 5,500 tokens a request."""


def documented_graph(
    model: ScriptedChatModel, tools: list[object], root: object, keys: object = None
) -> object:
    """The StateGraph wiring docs/pipeline.md gives: the pipeline before `ModelNode`,
    a `ToolNode` looping back to it, on a `JsonlSaver`."""
    pipeline = context_pipeline(SMALL, model="gpt-4o", tools=tools, mode="agent", keys=keys)
    builder = StateGraph(pipeline.state_schema())
    builder.add_node("model", ModelNode(model, tools=tools, keys=pipeline.keys))
    builder.add_node("tools", ToolNode(tools))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=JsonlSaver(root))

LOG = "\n".join(
    f"2024-05-01 12:00:{i % 60:02d} INFO worker-{i % 7} processed batch {i} in {i % 90} ms"
    for i in range(400)
)
PLANTED = "ERROR: disk quota exceeded on /var/data/shard-17 (limit 5120 MB)"
BIG = "\n".join([*LOG.splitlines()[:200], PLANTED, *LOG.splitlines()[200:]])


def tool_turn(output: str, call_id: str = "call_1", name: str = "grep_logs") -> list[BaseMessage]:
    return [
        HumanMessage("why did the nightly job fail?", id="u0"),
        AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}], id="a0"),
        ToolMessage(output, tool_call_id=call_id, name=name, id="t0"),
    ]


def test_results_over_500_tokens_become_a_preview_with_a_reference() -> None:
    history = tool_turn(BIG)
    assert count_tokens(history[2:]) > 500
    messages, record = compact_messages(history, max_tokens=100_000)

    preview = messages[2]
    assert isinstance(preview, ToolMessage) and preview.id == "t0~preview"
    assert preview.tool_call_id == "call_1" and preview.name == "grep_logs"
    text = str(preview.content)
    lines = text.splitlines()
    assert lines[0].startswith("TOOL_RESULT_PREVIEW tool=grep_logs status=success tokens=")
    assert "ref=tool-result/call_1" in lines[0]
    assert LOG.splitlines()[0] in text and LOG.splitlines()[-1][:40] in text  # head, tail
    assert PLANTED in text  # the key line from the middle
    assert lines[-1] == 'Full output: read_tool_result(ref="tool-result/call_1")'
    assert count_tokens([preview]) <= 200

    (offload,) = record.offloaded
    assert offload.cause == "size" and offload.ref == tool_result_ref("call_1")
    assert offload.tokens > 500 and offload.preview_tokens <= 200
    assert history[2].content == BIG, "the original message is untouched"


def test_small_results_stay_and_the_threshold_can_be_changed_or_disabled() -> None:
    small = tool_turn("3 passed, 0 failed")
    messages, record = compact_messages(small, max_tokens=100_000)
    assert messages == small and record.offloaded == []

    history = tool_turn(BIG)
    messages, record = compact_messages(history, max_tokens=100_000, offload_threshold=None)
    assert messages[2] is history[2] and record.offloaded == []
    messages, record = compact_messages(history, max_tokens=100_000, offload_threshold=20_000)
    assert messages[2] is history[2]


def test_a_read_tool_result_answer_is_not_offloaded_again() -> None:
    history = [
        *tool_turn(BIG),
        AIMessage("", tool_calls=[{"name": "read_tool_result",
                                   "args": {"ref": "tool-result/call_1"}, "id": "r1"}], id="a1"),
        ToolMessage(BIG, tool_call_id="r1", name="read_tool_result", id="t1"),
    ]
    messages, record = compact_messages(history, max_tokens=100_000)
    assert [m.id for m in messages] == ["u0", "a0", "t0~preview", "a1", "t1"]
    assert [o.id for o in record.offloaded] == ["t0"]


class ToolState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def tool_graph():  # type: ignore[no-untyped-def]
    builder = StateGraph(ToolState)
    builder.add_node("tools", ToolNode([read_tool_result]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def ask(ref: str, **args: int) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "read_tool_result", "args": {"ref": ref, **args}, "id": "r1"}]
    )


def test_read_tool_result_returns_the_full_text_from_graph_state() -> None:
    graph = tool_graph()
    schema = read_tool_result.tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == {"ref", "offset", "limit"}  # the state stays hidden

    out = graph.invoke({"messages": [*tool_turn(BIG), ask("tool-result/call_1", limit=10**6)]})
    answer = out["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.content == BIG
    assert answer.name == "read_tool_result"

    out = graph.invoke({"messages": [*tool_turn(BIG), ask("tool-result/call_1")]})
    first_page = str(out["messages"][-1].content)
    assert first_page.startswith(BIG[:20_000])  # 20,000 characters by default
    assert first_page.endswith(f"of {len(BIG)}; call again with offset=20000 for more]")

    out = graph.invoke({"messages": [*tool_turn(BIG), ask("call_1", offset=10, limit=50)]})
    page = str(out["messages"][-1].content)
    assert page.startswith(BIG[10:60])
    assert f"[characters 10-60 of {len(BIG)}; call again with offset=60 for more]" in page

    out = graph.invoke({"messages": [*tool_turn(BIG), ask("tool-result/nope")]})
    assert "No tool result 'tool-result/nope'" in str(out["messages"][-1].content)


def test_find_tool_result_reads_a_preview_artifact_in_rewrite_mode() -> None:
    history = tool_turn(BIG)
    messages, _ = compact_messages(history, max_tokens=100_000)
    assert find_tool_result(messages, "tool-result/call_1") is None  # only the preview here
    with_artifact = messages[2].model_copy(update={"artifact": {"offloaded_content": BIG}})
    assert find_tool_result([*messages[:2], with_artifact], "tool-result/call_1") == BIG
    assert find_tool_result(history, "tool-result/call_1") == BIG


def test_previews_keep_the_conversation_valid_for_providers() -> None:
    history = [
        *tool_turn(BIG),
        AIMessage("", tool_calls=[{"name": "grep_logs", "args": {}, "id": f"c{i}"}
                                  for i in range(3)], id="a1"),
        *[ToolMessage(BIG, tool_call_id=f"c{i}", name="grep_logs", id=f"t{i + 1}")
          for i in range(3)],
    ]
    messages, record = compact_messages(history, max_tokens=2_000)
    assert ordering_problems(messages) == []
    assert len(record.offloaded) == 4 and record.within_budget


def test_an_estimated_size_is_shown_and_read_back_as_an_estimate() -> None:
    """A preview made from a partial count states ``tokens=~N`` (two significant digits);
    `shown_tokens` reads back what a header states, an estimate as an estimate, so a
    preview remade for a new request keeps saying the same."""
    from langchain_core.messages import ToolMessage

    from langgraph_ctx.context.compaction.previews import (
        TokenEstimate,
        shown_tokens,
        tool_result_preview,
    )

    full = ToolMessage("\n".join(f"line {i} of the log" for i in range(400)), tool_call_id="c1")
    estimated = tool_result_preview(full, tokens=TokenEstimate.of(6_706), chars=300)
    assert " tokens=~6700 " in str(estimated.content).split("\n", 1)[0]
    stated = shown_tokens(estimated)
    assert isinstance(stated, TokenEstimate) and stated == 6_700
    exact = tool_result_preview(full, tokens=6_706, chars=300)
    assert shown_tokens(exact) == 6_706 and not isinstance(shown_tokens(exact), TokenEstimate)
    assert shown_tokens(ToolMessage("plain text tokens=5 ", tool_call_id="c2")) is None
    assert [int(TokenEstimate.of(n)) for n in (7, 99, 512, 1_769, 66_060)] == [
        7, 99, 510, 1_800, 66_000,
    ]


def test_a_tool_call_whose_arguments_outgrow_the_budget_is_sent_cut_not_dropped(tmp_path) -> None:
    """An agent saves a 30 KB report through a tool's argument: the call alone is over the
    budget. Compaction's last step gave up on the whole round, so the request lost the
    call and its result: `ModelNode` then sent all `messages` (8,730 tokens against
    5,500, no system prompt), `create_agent` the previous request again, and the record
    said ``within_budget=True`` (trial 5). Now the call goes out with its texts cut."""
    import warnings

    from langchain.agents import create_agent
    from langchain_core.tools import tool

    @tool
    def save_report(text: str) -> str:
        """Save a report."""
        return f"saved {len(text)} chars"

    report = "\n".join(f"row {i}: region EMEA amount {i * 37 % 1000} EUR" for i in range(600))

    def script() -> list[object]:
        call = {"name": "save_report", "args": {"text": report}, "id": "call_1"}
        return [AIMessage("", tool_calls=[call]), "Saved."]

    graph_model = ScriptedChatModel(script=script(), model_name="gpt-4o")
    graph = documented_graph(graph_model, [save_report, read_tool_result, search_history],
                             tmp_path / "g")  # fmt: skip
    agent_model = ScriptedChatModel(script=script(), model_name="gpt-4o")
    middleware = [context_pipeline(SMALL, model="gpt-4o").middleware()]
    agent = create_agent(agent_model, [save_report], checkpointer=JsonlSaver(tmp_path / "a"),
                         middleware=middleware)  # fmt: skip

    for app, model in ((graph, graph_model), (agent, agent_model)):
        config = {"configurable": {"thread_id": "t"}}
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # ModelNode's "from an earlier step"
            state = app.invoke({"messages": [HumanMessage("Save the EMEA report.")]}, config)
        sent = model.received[1]
        assert [m.type for m in sent] == ["system", "human", "ai", "tool"]
        assert count_tokens(sent, model="gpt-4o", tools=model.tools) <= 5500
        assert not ordering_problems(sent)
        cut = sent[2].tool_calls[0]
        assert cut["id"] == "call_1" and "cut by compaction" in cut["args"]["text"]
        assert state["compaction_log"][-1]["within_budget"] is True
        saved = app.get_state(config).values["messages"]
        assert saved[1].tool_calls[0]["args"]["text"] == report  # the history keeps it whole


def test_search_historys_answer_reaches_the_model_whole(tmp_path) -> None:
    """`search_history`'s answer (8 passages of log lines, over the 500-token offload
    threshold) was previewed like any tool result: the passages were gone from what the
    model was sent and the last ``open:`` line was cut mid-ref (trial 5). Its answers are
    exempt now, as `read_tool_result`'s are."""
    import re

    from langchain_core.tools import tool

    @tool
    def fetch_logs(service: str) -> str:
        """Fetch a service's logs."""
        rows = [f"2024-05-01 12:{i % 60:02d}:00 INFO {service} processed batch {i} in "
                f"{i * 7 % 900} ms" for i in range(300)]  # fmt: skip
        rows.insert(150, f"ops note: the billing auditor for {service} is Lena Petrova, ticket "
                         f"{service.upper()}-{len(service) * 111}, escalate through the finance "
                         "operations rota and the weekly reconciliation review.")  # fmt: skip
        return "\n".join(rows)

    services = ["api", "auth", "cart", "mail", "geo", "pay", "cdn", "queue", "media"]
    script: list[object] = []
    for i, name in enumerate(services):
        # ids as long as a provider's: the answer's references make it pass the threshold
        call_id = f"call_Qx7Rt2Lm9Vb4Nc8Kp3Ws{i:04d}"
        call = {"name": "fetch_logs", "args": {"service": name}, "id": call_id}
        script += [AIMessage("", tool_calls=[call]), f"{name} ok."]
    search = {"name": "search_history", "args": {"query": "billing auditor"}, "id": "call_search"}
    script += [AIMessage("", tool_calls=[search]), "done"]
    model = ScriptedChatModel(script=script, model_name="gpt-4o")
    graph = documented_graph(model, [fetch_logs, read_tool_result, search_history], tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    for name in services:
        graph.invoke({"messages": [HumanMessage(f"check {name} logs")]}, config)
    graph.invoke({"messages": [HumanMessage("who is the billing auditor?")]}, config)

    (sent,) = [m for m in model.received[-1] if getattr(m, "tool_call_id", None) == "call_search"]
    assert "Lena Petrova" in sent.content
    shown = re.findall(r'open: read_tool_result\(ref="([^"\n]*)"', sent.content)
    messages = graph.get_state(config).values["messages"]
    assert shown and all(find_tool_result(messages, ref) for ref in shown)


@pytest.mark.parametrize("keys", [None, {"context_usage": "ctx_usage"}])
def test_a_search_answer_fits_the_room_and_only_the_packages_tool_is_exempt(
    tmp_path, keys
) -> None:
    """`search_history`'s answers are never previewed, so the tool sizes them: with the
    model's ``limit=200`` the answer was 12,007 tokens, a request of 12,607 against
    5,500 (review 22). It keeps the best passages that fit half the room left, as a
    `read_tool_result` page does (also with the pipeline's keys renamed: the tools find
    the budget's count by its type, review 23). And an app's own tool of that name is
    previewed as any other (the exemption went by the name)."""
    from langchain_core.tools import tool

    @tool
    def fetch_logs(service: str) -> str:
        """Fetch a service's logs."""
        rows = (f"2024-05-01 12:{i % 60:02d}:00 INFO {service} processed batch {i} for "
                f"billing account {i * 13 % 97} in {i * 7 % 900} ms" for i in range(300))
        return "\n".join(rows)

    services = ["api", "auth", "cart", "mail", "geo", "pay", "cdn", "queue", "media"]
    script: list[object] = []
    for i, name in enumerate(services):
        call = {"name": "fetch_logs", "args": {"service": name}, "id": f"c{i}"}
        script += [AIMessage("", tool_calls=[call]), f"{name} ok."]
    query = {"query": "billing account batch", "limit": 200}
    script += [AIMessage("", tool_calls=[{"name": "search_history", "args": query, "id": "cs"}])]
    script += ["done"]
    model = ScriptedChatModel(script=script, model_name="gpt-4o")
    tools = [fetch_logs, read_tool_result, search_history]
    graph = documented_graph(model, tools, tmp_path, keys=keys)
    config = {"configurable": {"thread_id": "t"}}
    for name in services:
        graph.invoke({"messages": [HumanMessage(f"check {name} logs")]}, config)
    graph.invoke({"messages": [HumanMessage("which accounts had slow batches?")]}, config)
    sent = model.received[-1]
    assert count_tokens(sent, model="gpt-4o", tools=model.tools) <= 5500
    (answer,) = [m for m in sent if getattr(m, "tool_call_id", None) == "cs"]
    assert "1. " in answer.content and "TOOL_RESULT_PREVIEW" not in answer.content

    orders = "\n".join(f"order {i}: customer 42 bought item {i * 7 % 500}" for i in range(900))
    own = {"name": "search_history", "args": {"customer_id": 42}, "id": "c1"}
    history = [HumanMessage("What did customer 42 buy?", id="h1"),
               AIMessage("", tool_calls=[own], id="a1"),
               ToolMessage(orders, tool_call_id="c1", name="search_history", id="t1")]  # fmt: skip
    out = compact_messages(history, max_tokens=5500, model="gpt-4o")
    assert len(out.record.offloaded) == 1 and len(out.messages[-1].content) < len(orders)


def test_a_cut_call_is_cut_in_every_form_a_provider_may_send() -> None:
    """`calls_cut` cut only ``tool_calls`` and Anthropic's ``tool_use`` blocks: OpenAI's
    Responses API sends the ``function_call`` block of ``content`` instead, whole, and a
    call cut off mid-stream is in ``invalid_tool_calls`` (review 22)."""
    import json

    from langgraph_ctx.context.compaction.previews import calls_cut

    big = "x" * 5000
    message = AIMessage(
        content=[
            {"type": "function_call", "call_id": "c1", "name": "save",
             "arguments": json.dumps({"text": big})},
            {"type": "tool_use", "id": "c1", "name": "save", "input": {"text": big}},
        ],
        tool_calls=[{"name": "save", "args": {"text": big, "n": 3}, "id": "c1"}],
        invalid_tool_calls=[{"name": "save", "args": '{"text": "' + big, "id": "c2",
                             "error": None, "type": "invalid_tool_call"}],
        id="a1",
    )
    cut = calls_cut(message, chars=100)
    assert cut.tool_calls[0]["id"] == "c1" and cut.tool_calls[0]["args"]["n"] == 3
    assert len(cut.tool_calls[0]["args"]["text"]) < 200
    blocks = cut.content
    assert isinstance(blocks, list) and isinstance(blocks[0], dict) and isinstance(blocks[1], dict)
    assert len(json.loads(blocks[0]["arguments"])["text"]) < 200  # still JSON, cut
    assert len(blocks[1]["input"]["text"]) < 200
    assert len(cut.invalid_tool_calls[0]["args"] or "") < 200
    assert message.tool_calls[0]["args"]["text"] == big  # the original untouched


def test_the_newest_tool_group_gets_a_smaller_preview_before_going_over_the_budget() -> None:
    """Room for the call and a ~60-token preview, not for a 145-token one: the newest tool
    group went out over the budget with the usual preview (the property test found it),
    and, when the result reached compaction as a preview already (a node's view, a
    rewritten history), it could not be made smaller at all (review 23)."""
    from langchain_core.messages import SystemMessage

    from langgraph_ctx.context.compaction import compact_messages
    from langgraph_ctx.context.compaction.conversation import preview_of

    log = "\n".join(f"2024-05-01 12:{i % 60:02d}:00 INFO worker processed batch {i} in "
                    f"{i * 7 % 900} ms" for i in range(400))  # fmt: skip
    call = {"name": "fetch_logs", "args": {"service": "api"}, "id": "call_1"}
    tool = ToolMessage(log, tool_call_id="call_1", name="fetch_logs", id="t1")
    base = [SystemMessage("sys " * 200, id="s"),
            HumanMessage("please check the api logs " + "detail " * 300, id="h"),
            AIMessage("", tool_calls=[call], id="a1")]  # fmt: skip

    def count(messages: list[BaseMessage]) -> int:
        return count_tokens(messages, model="gpt-4o")

    empty = count([])
    full = count([tool]) - empty
    preview, _ = preview_of(tool, tokens=full, preview_tokens=160,
                            count=lambda m: count([m]) - empty)  # fmt: skip
    budget = count(base) + 110
    for last in (tool, preview):
        sent, record = compact_messages([*base, last], max_tokens=budget, model="gpt-4o")
        assert record.within_budget, (record.tokens_after, budget)
        assert sent[-1].tool_call_id == "call_1" and "read_tool_result" in sent[-1].text


def test_a_page_is_sized_by_the_budgets_count_under_any_key() -> None:
    """`read_tool_result` pages and `search_history` answers are sized to half the room
    left, read from ``context_usage``. Renamed (the app has a ``context_usage`` of its
    own) they fell back to 20,000 characters, or took the app's value (review 24). The
    budget's count is found by its type (or its JSON form); with two pipelines in one
    state, the one with the least room."""
    from langgraph_ctx.context.budget import ContextUsage
    from langgraph_ctx.context.compaction.tools import DEFAULT_PAGE_CHARS, page_chars

    def usage(remaining: int) -> ContextUsage:
        return ContextUsage.model_construct(remaining=remaining, total=6000, used=0,
                                            model="gpt-4o")  # fmt: skip

    text = LOG
    plain = page_chars(text, {"context_usage": usage(1500)})
    assert plain < DEFAULT_PAGE_CHARS
    assert page_chars(text, {"ctx_usage": usage(1500)}) == plain
    assert page_chars(text, {"context_usage": {"mine": 1}, "ctx_usage": usage(1500)}) == plain
    json_form = {"remaining": 1500, "total": 6000, "used": 4500, "model": "gpt-4o"}
    assert page_chars(text, {"ctx_usage": json_form}) == plain
    assert page_chars(text, {"a": usage(1500), "b": usage(20_000)}) == plain
    assert page_chars(text, {"messages": []}) == DEFAULT_PAGE_CHARS


def test_compactions_stand_ins_stay_out_of_a_create_agent_apps_message_stream(tmp_path) -> None:
    """With a compacted view active, each new large tool result was streamed a second time
    (``stream_mode="messages"``) as its preview, a `ToolMessage` of the same
    ``tool_call_id`` under the model node, and a user message compaction shortened came
    back as a ``<id>~short`` copy (trial 8): the middleware kept its view in the state as a
    list, whose new messages LangGraph streams; LangGraph's stream handlers are now told
    they are not new. The app streams what it streams without the pipeline, and the view
    still works from a fresh saver."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    @tool
    def fetch(n: int) -> str:
        """Fetch a report."""
        return "\n".join(f"line {i}: value {i * 7} at /data/r{n}/{i}.csv" for i in range(150))

    call = {"name": "fetch", "args": {"n": 1}, "id": "f1"}
    model = ScriptedChatModel(
        script=["Noted.", AIMessage("", tool_calls=[call]), "Report 1 looks fine", "Done."],
        model_name="gpt-4o",
    )
    pipeline = context_pipeline("fast", model="gpt-4o")
    root = tmp_path / "a"

    def build(saver: JsonlSaver):  # type: ignore[no-untyped-def]
        return create_agent(model, [fetch], checkpointer=saver, middleware=[pipeline.middleware()])

    agent = build(JsonlSaver(root))
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [("user", "Notes: " + "keep the notes safe " * 700)]}, config)
    streamed = [
        (message, meta["langgraph_node"])
        for message, meta in agent.stream(
            {"messages": [("user", "fetch report 1")]}, config, stream_mode="messages"
        )
        if message.type != "ai"
    ]
    assert [(m.type, m.id, node) for m, node in streamed] == [
        ("tool", streamed[0][0].id, "tools")
    ], "each tool result once, from the tools node, and no echo of the user's input"
    assert "~" not in (streamed[0][0].id or "")
    values = build(JsonlSaver(root)).get_state(config).values
    view = values["llm_input_messages"]
    assert any((m.id or "").endswith("~preview") for m in view), "the preview is in the view"
    assert values["compaction_log"], "compaction ran: the view is active"
    agent = build(JsonlSaver(root))  # the next turn, from a fresh saver
    agent.invoke({"messages": [("user", "thanks")]}, config)
    sent = model.received[-1]
    assert any((m.id or "").endswith("~preview") for m in sent), "the view was continued"


def test_a_create_agent_thread_stores_its_view_as_what_changed(tmp_path) -> None:
    """The view the middleware keeps for the next step is a message list the saver stores
    as a change from the parent's: a mapping around it was stored whole at every model
    step (4.7 KB a line against 34 bytes at 800 messages; review 25)."""
    import json

    from langchain.agents import create_agent

    model = ScriptedChatModel(script=[lambda m: f"ok {len(m)}"], model_name="gpt-4o")
    pipeline = context_pipeline(model="gpt-4o", context_window=3000, strategy="window")
    saver = JsonlSaver(tmp_path)
    agent = create_agent(model, [], checkpointer=saver, middleware=[pipeline.middleware()])
    config = {"configurable": {"thread_id": "t"}}
    for i in range(80):
        agent.invoke({"messages": [HumanMessage(f"note {i}: the sky is blue today")]}, config)
    values = agent.get_state(config).values
    assert values["compaction_log"] and len(values["llm_input_messages"]) > 40
    with open(saver.path("t")) as log:
        lines = [json.loads(raw) for raw in log]
    written = [
        len(json.dumps(line["values"]["llm_input_messages"]))
        for line in lines
        if "llm_input_messages" in line.get("values", {})
    ]
    assert len(written) > 20 and max(written[-10:]) < 100, written[-10:]


@pytest.mark.parametrize("wrap", ["node", "call"])
def test_an_agent_inside_a_parent_graph_streams_as_without_the_pipeline(wrap: str) -> None:
    """Telling LangGraph's stream that the whole view was not new hid the agent's own tool
    call and tool result from a parent graph streaming with ``subgraphs=False`` (the
    parent had not seen them; review 26): only the stand-ins and the summary are told."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.graph import MessagesState

    @tool
    def fetch(n: int) -> str:
        """Fetch a report."""
        return "\n".join(f"line {i}: value {i * 7}" for i in range(5))

    def streamed(with_pipeline: bool) -> list[tuple[str, str | None]]:
        call = {"name": "fetch", "args": {"n": 1}, "id": "f1"}
        script = [AIMessage("", tool_calls=[call], id="ai-call"), AIMessage("fine", id="ai-end")]
        model = ScriptedChatModel(script=script, model_name="gpt-4o")
        pipeline = context_pipeline("fast", model="gpt-4o")
        middleware = [pipeline.middleware()] if with_pipeline else []
        agent = create_agent(model, [fetch], middleware=middleware)
        parent = StateGraph(MessagesState)
        if wrap == "node":
            parent.add_node("agent", agent)
        else:
            parent.add_node("agent", lambda s: {"messages": agent.invoke(s)["messages"]})
        parent.add_edge(START, "agent")
        big = "Notes: " + "keep the notes safe " * 700  # compaction's view is active
        out: list[tuple[str, str | None]] = []
        stream = parent.compile().stream({"messages": [("user", big)]}, stream_mode="messages")
        for message, _ in stream:
            item = (message.type, message.id if message.type == "ai" else message.tool_call_id)
            if item not in out:
                out.append(item)
        return out

    assert streamed(True) == streamed(False) == [
        ("ai", "ai-call"), ("tool", "f1"), ("ai", "ai-end")
    ]  # fmt: skip
