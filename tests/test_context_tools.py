"""The context tools through a real graph: context pipeline, ModelNode, ToolNode, a scripted model.

Every scenario runs on JsonlSaver, InMemorySaver and RedisLogSaver (a real redis-server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.active_context import (
    LOADED_CONTEXT_BANNER,
    active_messages,
    is_loaded_context_message,
)
from langgraph_ctx.context.archive import (
    ArchivedContext,
    archive_span,
    extractive_summary,
    render_loaded_context,
    select_archive,
)
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.prompt import is_system_prompt_message
from langgraph_ctx.context.search import rank, tokenize
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import context_pipeline
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.testing import StreamingScript
from langgraph_ctx.tools import ContextArchive, context_tools, fork_thread

THREAD = "trip/1"  # a thread id that is not a plain file name


def call(name: str, **args: Any) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": name, "args": args, "id": f"c-{uuid.uuid4().hex[:8]}"}]
    )


def texts(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


class Chat:
    """A graph with the context pipeline and tools; each turn scripts the model's replies."""

    def __init__(
        self,
        saver: Any,
        *,
        thread: str | int = THREAD,
        checkpointer: bool = True,
        budget: ContextBudget | str = "planning",
        **options: Any,
    ) -> None:
        """`options` go to `context_tools`; `budget` to the pipeline."""
        self.saver = saver
        self.tools = context_tools(saver, **options)
        self.model = StreamingScript(script=[])
        pipeline = context_pipeline(budget, tools=self.tools)
        builder = StateGraph(ContextState)
        builder.add_node("model", ModelNode(self.model, tools=self.tools))
        builder.add_node("tools", ToolNode(self.tools))
        entry = pipeline.add_to(builder, before="model")
        builder.add_edge(START, entry)
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", entry)
        self.graph = builder.compile(checkpointer=saver if checkpointer else None)
        self.config = {"configurable": {"thread_id": thread}}
        self.history: list[BaseMessage] = []

    def turn(self, text: str, *replies: Any) -> tuple[dict[str, Any], list[list[BaseMessage]]]:
        """One user turn; returns the final state and every request the model got."""
        self.model.script.extend(replies)
        before = len(self.model.received)
        out = self.graph.invoke({"messages": [("user", text)]}, self.config)
        # The transcript only ever grows: every earlier message is still there, unchanged.
        assert texts(out["messages"][: len(self.history)]) == texts(self.history)
        assert [m.id for m in out["messages"][: len(self.history)]] == [m.id for m in self.history]
        self.history = list(out["messages"])
        return out, self.model.received[before:]

    def tool_result(self, out: dict[str, Any]) -> Any:
        return next(m for m in reversed(out["messages"]) if m.type == "tool")


def conversation(request: list[BaseMessage]) -> list[tuple[str, str]]:
    """A request without the composed system prompt."""
    return texts([m for m in request if not is_system_prompt_message(m)])


@pytest.fixture(params=["jsonl", "memory", "redis"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "jsonl":
        yield JsonlSaver(tmp_path / "chats")
    elif request.param == "memory":
        yield InMemorySaver()
    else:
        server = request.getfixturevalue("redis_server")
        made = RedisLogSaver.from_url(server.url, prefix=f"ctx-tools-{uuid.uuid4().hex[:10]}")
        yield made
        made.close()


def paris_then_csv(chat: Chat) -> tuple[dict[str, Any], list[list[BaseMessage]]]:
    chat.turn("Plan three days in Paris", "Day 1: Louvre. Day 2: Orsay and the food markets.")
    chat.turn("I prefer museums with fewer crowds", "Orsay opens at 9:30; go early.")
    return chat.turn(
        "New topic: a Python CSV parser",
        call("chat_context_new", title="Paris trip", reason="new topic"),
        "Use csv.reader with newline=''.",
    )


# -- the four tools through a graph -----------------------------------------------------------


def test_new_list_load_and_clear_switch_what_the_model_sees(saver: Any) -> None:
    chat = Chat(saver)
    out, requests = paris_then_csv(chat)

    # new: archived, and the next request holds only the prompt and the current turn.
    result = chat.tool_result(out)
    assert result.status == "success" and '"Paris trip" (4 messages)' in result.content
    entry = result.artifact["context"]
    assert {
        "contextId",
        "title",
        "createdAt",
        "archivedAt",
        "messageCount",
        "summaryPreview",
    } <= set(entry)
    assert entry["title"] == "Paris trip" and entry["archiveReason"] == "new topic"
    assert entry["createdAt"] < entry["archivedAt"]  # the thread's start, then the archive
    assert is_system_prompt_message(requests[-1][0])
    assert [t for t, _ in conversation(requests[-1])] == ["human", "ai", "tool"]
    assert conversation(requests[-1])[0] == ("human", "New topic: a Python CSV parser")
    assert not out["context_usage"].calibrated  # the provider measured the old context
    assert out["context_usage"].used == count_tokens(
        out["llm_input_messages"], model="gpt-4o", tools=chat.tools
    )
    assert out["active_context"]["archived_as"] == entry["contextId"]

    # The archive is a fork: its messages stay readable, and the index lists it.
    archive = ContextArchive(saver)
    [listed] = archive.entries(THREAD)
    assert listed.context_id == entry["contextId"]
    assert texts(archive.messages(listed)) == [
        ("human", "Plan three days in Paris"),
        ("ai", "Day 1: Louvre. Day 2: Orsay and the food markets."),
        ("human", "I prefer museums with fewer crowds"),
        ("ai", "Orsay opens at 9:30; go early."),
    ]
    if hasattr(saver, "list_threads"):  # JsonlSaver, RedisLogSaver: a thread like any other
        assert listed.archive_thread_id in saver.list_threads(include_archives=True)

    # The next turn continues the fresh context.
    out, requests = chat.turn("Can it read gzip files?", "Yes: open it with gzip.open first.")
    assert conversation(requests[0])[0] == ("human", "New topic: a Python CSV parser")
    assert out["context_usage"].calibrated  # same context: the provider's count applies again

    # list
    out, _ = chat.turn("Which contexts do we have?", call("chat_context_list"), "One: Paris.")
    listing = chat.tool_result(out)
    assert listing.status == "success"
    assert f'{listed.context_id} "Paris trip": 4 messages' in listing.content
    assert listing.artifact["contexts"][0]["contextId"] == listed.context_id

    # load by query: the archive is injected with the banner, the CSV context is gone.
    out, requests = chat.turn(
        "Back to the museums in Paris",
        call("chat_context_load", query="museums Orsay"),
        "Orsay first, at 9:30.",
    )
    loaded = chat.tool_result(out)
    assert loaded.status == "success" and "by search" in loaded.content
    sent = requests[-1]
    block = [m for m in sent if is_loaded_context_message(m)]
    assert len(block) == 1 and sent.index(block[0]) == 1  # right after the composed prompt
    assert block[0].content.startswith(LOADED_CONTEXT_BANNER)
    assert "for reference only, may not match the current question" in block[0].content
    assert "user: Plan three days in Paris" in block[0].content
    assert not any("csv" in str(m.content).lower() for m in sent if m.type != "system")
    assert conversation(sent)[1] == ("human", "Back to the museums in Paris")

    # The loaded context continues on the next turn (block still there, plus the turn).
    out, requests = chat.turn("And the Louvre?", "Louvre on day 2.")
    assert any(is_loaded_context_message(m) for m in requests[0])

    # clear: the loaded archive and the earlier turns leave the model's view.
    out, requests = chat.turn(
        "Forget all that.", call("chat_context_clear_active"), "Cleared; what next?"
    )
    assert chat.tool_result(out).status == "success"
    assert not any(is_loaded_context_message(m) for m in requests[-1])
    assert [t for t, _ in conversation(requests[-1])] == ["human", "ai", "tool"]

    # load by id
    out, requests = chat.turn(
        "Show me the Paris plan again",
        call("chat_context_load", context_id=listed.context_id, mode="recent"),
        "Here it is.",
    )
    assert "by its id" in chat.tool_result(out).content
    assert any(is_loaded_context_message(m) for m in requests[-1])

    # The transcript holds every message of every turn, in order (checked each turn too).
    users = [m.content for m in out["messages"] if m.type == "human"]
    assert users == [
        "Plan three days in Paris",
        "I prefer museums with fewer crowds",
        "New topic: a Python CSV parser",
        "Can it read gzip files?",
        "Which contexts do we have?",
        "Back to the museums in Paris",
        "And the Louvre?",
        "Forget all that.",
        "Show me the Paris plan again",
    ]


def test_the_jsonl_archive_is_its_own_file_with_the_index_beside_it(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    saver = JsonlSaver(root)
    out, _ = paris_then_csv(Chat(saver))
    entry = out["messages"][-2].artifact["context"]

    fork = Path(saver.path(entry["archiveThreadId"]))
    assert fork.parent == root and fork.name == f"trip%2F1.ctx.{entry['contextId']}.jsonl"
    lines = [json.loads(line) for line in fork.read_text().splitlines()]
    assert lines[0]["forked_from"] == {"thread_id": THREAD, "checkpoint_id": entry["checkpointId"]}
    said = [line["msg"]["content"] for line in lines if "msg" in line]  # not "like" lines
    assert "Plan three days in Paris" in said and "Orsay opens at 9:30; go early." in said
    assert "New topic: a Python CSV parser" not in said  # forked before the current turn

    index = json.loads((root / "trip%2F1.contexts.json").read_text())
    assert index["v"] == 1 and index["threadId"] == THREAD
    assert index["items"][0]["contextId"] == entry["contextId"]
    assert index["items"][0]["messageCount"] == 4
    assert index["items"][0]["summaryPreview"].startswith("Asked: Plan three days in Paris.")
    assert not list(root.glob(".tmp-*"))  # written atomically, nothing left behind
    assert sorted(saver.list_threads(include_archives=True)) == sorted(
        [THREAD, entry["archiveThreadId"]]
    )


@pytest.mark.parametrize("store", ["redis_server", "redis_cluster"])
def test_the_redis_index_is_a_key_beside_the_thread(
    store: str, request: pytest.FixtureRequest
) -> None:
    # On a cluster too: the index's WATCH/MULTI update stays in the thread's slot, and the
    # archive fork lands on whichever master serves its own slot.
    url = request.getfixturevalue(store).url
    saver = RedisLogSaver.from_url(url, prefix=f"ctx-tools-{uuid.uuid4().hex[:10]}")
    out, _ = paris_then_csv(Chat(saver))
    entry = out["messages"][-2].artifact["context"]
    raw = saver.client.get(f"ctx:{saver.prefix}:contexts:{{trip%2F1}}")
    assert json.loads(raw)["items"][0]["contextId"] == entry["contextId"]
    assert saver.client.llen(saver.key(entry["archiveThreadId"])) > 0
    saver.close()


async def test_the_tools_work_in_an_async_graph(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    chat.model.script.extend(["Louvre first.", call("chat_context_new", title="Paris"), "CSV: ok."])
    await chat.graph.ainvoke({"messages": [("user", "Plan Paris")]}, chat.config)
    out = await chat.graph.ainvoke({"messages": [("user", "New topic: CSV")]}, chat.config)
    assert chat.tool_result(out).status == "success"
    assert conversation(chat.model.received[-1])[0] == ("human", "New topic: CSV")


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_int_thread_ids_work(kind: str, tmp_path: Path) -> None:
    chat = Chat(InMemorySaver() if kind == "memory" else JsonlSaver(tmp_path), thread=7)
    paris_then_csv(chat)
    result = one_call(chat, "Back to Paris", "chat_context_load", query="Paris")
    assert result.status == "success"
    assert [e.thread_id for e in ContextArchive(chat.saver).entries(7)] == ["7"]


def test_new_resets_the_running_summary_of_the_old_context(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    chat.turn("Plan Paris", "Louvre first.")
    chat.graph.update_state(chat.config, {"running_summary": {"intent": "Paris"}})
    out, _ = chat.turn("New topic: CSV", call("chat_context_new"), "ok")
    assert out["running_summary"] is None
    assert out["messages"][-2].artifact["context"]["title"] == "Plan Paris"  # default title


@pytest.mark.filterwarnings("error::UserWarning")  # e.g. ModelNode finding a stale view
def test_compaction_works_inside_the_active_context(tmp_path: Path) -> None:
    budget = ContextBudget(total=3_000, output_reserve=200, name="tiny")
    chat = Chat(JsonlSaver(tmp_path / "chats"), budget=budget, max_loaded_tokens=600)

    for i in range(8):
        out, _ = chat.turn(
            f"Paris question {i}: " + "museum details " * 40, f"Answer {i}: " + "Orsay " * 80
        )
    assert out["compaction_log"] and out["compaction_cursor"]["view_tokens"] is not None

    out, requests = chat.turn("New topic: CSV", call("chat_context_new", title="Paris"), "ok")
    assert [t for t, _ in conversation(requests[-1])] == ["human", "ai", "tool"]
    assert out["compaction_cursor"]["view_tokens"] is None  # the old compacted view is gone

    out, requests = chat.turn(
        "Back to the Paris museums", call("chat_context_load", query="Paris museums"), "Orsay."
    )
    assert [t for t, _ in conversation(requests[-1])] == ["system", "human", "ai", "tool"]
    for i in range(5):
        out, requests = chat.turn(f"More on Paris {i}: " + "museum details " * 40, "Yes. " * 80)
        assert is_loaded_context_message(requests[-1][1])  # compaction keeps the block
        assert conversation(requests[-1])[-1][1].startswith(f"More on Paris {i}")
    assert len(out["compaction_log"]) >= 2


def test_several_context_calls_in_one_step_do_not_break_the_run(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    paris_then_csv(chat)
    both = AIMessage(
        "",
        tool_calls=[
            {"name": "chat_context_list", "args": {}, "id": "c-1"},
            {"name": "chat_context_load", "args": {"query": "Paris"}, "id": "c-2"},
        ],
    )
    out, requests = chat.turn("Back to Paris", both, "Paris it is.")
    assert [m.status for m in out["messages"] if m.type == "tool"][-2:] == ["success", "success"]
    assert out["active_context"]["started_by"] == "load"
    assert is_loaded_context_message(requests[-1][1])


# -- bad input: a clear result, the run goes on, nothing changes ---------------------------------


def one_call(chat: Chat, text: str, name: str, **args: Any) -> Any:
    before = chat.graph.get_state(chat.config).values.get("active_context")
    out, _ = chat.turn(text, call(name, **args), "Understood.")
    assert out["messages"][-1].content == "Understood."  # the run went on to the model
    result = chat.tool_result(out)
    if result.status == "error":
        assert out.get("active_context") == before  # nothing changed
    return result


def test_loading_while_nothing_is_archived(saver: Any) -> None:
    result = one_call(Chat(saver), "Back to Paris", "chat_context_load", query="Paris")
    assert result.status == "error"
    assert "no archived contexts yet" in result.content
    assert "chat_context_new" in result.content


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"context_id": "c_19990101_000000"}, "No archived context has the id 'c_19990101_000000'"),
        ({"query": ""}, "The query is empty"),
        ({"query": "   "}, "The query is empty"),
        ({}, "Give context_id (see chat_context_list) or query"),
        ({"query": "zebra quantum chromodynamics"}, "No archived context matches"),
        ({"query": "the and of please"}, "No archived context matches"),  # only stop words
    ],
)
def test_bad_load_requests_get_an_error_result_naming_what_to_do(
    tmp_path: Path, args: dict[str, Any], expected: str
) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    out, _ = paris_then_csv(chat)
    known = out["messages"][-2].artifact["context"]["contextId"]
    result = one_call(chat, "Back to it", "chat_context_load", **args)
    assert result.status == "error" and result.content.startswith("Nothing was loaded")
    assert expected in result.content
    assert known in result.content  # the archives it could have meant, by id


def test_an_id_that_is_a_title_points_to_the_right_id(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    out, _ = paris_then_csv(chat)
    known = out["messages"][-2].artifact["context"]["contextId"]
    result = one_call(chat, "Back to it", "chat_context_load", context_id="Paris trip")
    assert result.status == "error" and "It is the title of" in result.content
    assert known in result.content


def test_two_archives_with_one_title(saver: Any) -> None:
    chat = Chat(saver)
    chat.turn("Notes on the budget", "Budget: 1,200 EUR.")
    out, _ = chat.turn("Next", call("chat_context_new", title="Notes"), "Fresh.")
    first = out["messages"][-2].artifact["context"]["contextId"]
    chat.turn("Notes on the hotel", "Hotel: near Bastille.")
    out, _ = chat.turn("Next again", call("chat_context_new", title="notes "), "Fresh again.")
    second = chat.tool_result(out)
    assert second.status == "success" and first in second.content
    assert "have the same title" in second.content

    result = one_call(chat, "Back to the notes", "chat_context_load", query="Notes")
    assert (
        result.status == "error" and "2 archived contexts have the title 'Notes'" in result.content
    )
    assert first in result.content and second.artifact["context"]["contextId"] in result.content

    # Words from one of them pick it; its id always does.
    result = one_call(chat, "The hotel notes", "chat_context_load", query="hotel Bastille")
    assert result.status == "success" and second.artifact["context"]["contextId"] in result.content
    result = one_call(chat, "The budget notes", "chat_context_load", context_id=first)
    assert result.status == "success" and "by its id" in result.content


def test_new_with_nothing_to_archive_still_starts_fresh(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    result = one_call(chat, "Hello", "chat_context_new", title="x")
    assert result.status == "success" and "Nothing to archive" in result.content
    assert ContextArchive(chat.saver).entries(THREAD) == []
    # Twice in one turn: the second has nothing new either.
    out, _ = chat.turn("Plan Paris", "Louvre.")
    out, _ = chat.turn("New", call("chat_context_new"), call("chat_context_new"), "ok")
    results = [m for m in out["messages"] if m.type == "tool"][-2:]
    assert "Archived the previous context" in results[0].content
    assert "Nothing to archive" in results[1].content
    assert len(ContextArchive(chat.saver).entries(THREAD)) == 1


def test_list_limit_and_an_empty_list(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    result = one_call(chat, "List them", "chat_context_list")
    assert result.status == "success" and "No archived contexts yet" in result.content
    result = one_call(chat, "List them", "chat_context_list", limit=0)
    assert result.status == "error" and "limit must be at least 1" in result.content


def test_an_archive_whose_thread_is_gone(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    out, _ = paris_then_csv(chat)
    entry = out["messages"][-2].artifact["context"]
    chat.saver.delete_thread(entry["archiveThreadId"])
    result = one_call(chat, "Back to Paris", "chat_context_load", context_id=entry["contextId"])
    assert result.status == "error" and "is gone" in result.content


def test_an_unreadable_index_is_reported_not_raised(tmp_path: Path) -> None:
    chat = Chat(JsonlSaver(tmp_path / "chats"))
    paris_then_csv(chat)
    (tmp_path / "chats" / "trip%2F1.contexts.json").write_text("{not json")
    result = one_call(chat, "Back to Paris", "chat_context_load", query="Paris")
    assert result.status == "error" and "trip%2F1.contexts.json" in result.content
    assert "the context index is unreadable" in result.content


def test_without_a_checkpointer_the_tools_say_so(tmp_path: Path) -> None:
    chat = Chat(InMemorySaver(), checkpointer=False)
    chat.model.script.extend([call("chat_context_new"), "ok"])
    out = chat.graph.invoke({"messages": [("user", "hi")]})
    result = chat.tool_result(out)
    assert result.status == "error" and "need a thread" in result.content


def test_a_failing_summarizer_keeps_the_extract(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path / "chats")

    def broken(messages: Any) -> str:
        raise RuntimeError("summary model is down")

    chat = Chat(saver, summarizer=broken)
    out, _ = paris_then_csv(chat)
    result = chat.tool_result(out)
    assert result.status == "success" and "summarizer failed" in result.content
    assert result.artifact["context"]["summary"].startswith("Asked: Plan three days in Paris.")


def test_on_a_state_without_active_context_the_tools_still_answer(tmp_path: Path) -> None:
    """On MessagesState the run goes on; the switch itself needs ContextState's key."""
    saver = JsonlSaver(tmp_path / "chats")
    tools = context_tools(saver)
    model = StreamingScript(script=["a", call("chat_context_new"), "b"])
    builder = StateGraph(MessagesState)
    builder.add_node("model", ModelNode(model, tools=tools))
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "plain"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    out = graph.invoke({"messages": [("user", "list")]}, config)
    assert out["messages"][-2].status == "success"


# -- the generic fork ---------------------------------------------------------------------------


def test_fork_thread_replays_a_saver_without_fork() -> None:
    saver = InMemorySaver()
    chat = Chat(saver)
    chat.turn("one", "1")
    chat.turn("two", "2")
    history = list(chat.graph.get_state_history(chat.config))
    middle = next(s for s in history if [m.content for m in s.values["messages"]] == ["one", "1"])
    at = middle.config["configurable"]["checkpoint_id"]
    head = fork_thread(saver, THREAD, "copy", checkpoint_id=at)
    copy = chat.graph.get_state(head)
    assert texts(copy.values["messages"]) == texts(middle.values["messages"])
    assert copy.next == middle.next
    copied = list(chat.graph.get_state_history({"configurable": {"thread_id": "copy"}}))
    assert len(copied) == len(
        [s for s in history if s.config["configurable"]["checkpoint_id"] <= at]
    )
    # The copy is independent: a new turn there leaves the source alone.
    chat.model.script.append("3")
    chat.graph.invoke({"messages": [("user", "three")]}, {"configurable": {"thread_id": "copy"}})
    assert [m.content for m in chat.graph.get_state(chat.config).values["messages"]] == [
        "one",
        "1",
        "two",
        "2",
    ]


# -- the pure pieces ------------------------------------------------------------------------------


def msgs() -> list[BaseMessage]:
    return [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("Plan Paris", id="h1"),
        AIMessage("Day 1: Louvre.", id="a1"),
        HumanMessage("New topic: CSV", id="h2"),
    ]


def test_active_messages_keep_your_system_prompt_and_put_the_archive_after_it() -> None:
    history = msgs()
    assert active_messages(history, None) is history
    assert [m.id for m in active_messages(history, {"v": 1, "start_id": "h2"})] == ["s", "h2"]
    loaded = {"context_id": "c_1", "text": f"{LOADED_CONTEXT_BANNER}\nuser: Paris"}
    view = active_messages(history, {"v": 1, "start_id": "h2", "loaded": loaded})
    assert [m.id for m in view][::2] == ["s", "h2"] and is_loaded_context_message(view[1])
    # A start that is gone (rewritten history) falls back to the whole history.
    assert [m.id for m in active_messages(history, {"v": 1, "start_id": "zz"})] == [
        "s",
        "h1",
        "a1",
        "h2",
    ]
    assert history == msgs()  # never changed


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 6), st.integers(0, 8), st.booleans())
def test_active_messages_is_a_suffix_behind_the_leading_system_messages(
    n_system: int, start: int, with_block: bool
) -> None:
    history = [SystemMessage(f"s{i}", id=f"s{i}") for i in range(n_system)] + [
        (HumanMessage if i % 2 == 0 else AIMessage)(f"m{i}", id=f"m{i}") for i in range(8)
    ]
    loaded = {"context_id": "c", "text": "ARCHIVED"} if with_block else None
    view = active_messages(history, {"v": 1, "start_id": f"m{start}", "loaded": loaded})
    lead = view[:n_system]
    assert [m.id for m in lead] == [f"s{i}" for i in range(n_system)]
    rest = view[n_system + int(with_block) :]
    assert [m.id for m in rest] == [f"m{i}" for i in range(start if start < 8 else 0, 8)]


def test_archive_span_is_the_context_up_to_the_last_answer() -> None:
    span = archive_span(msgs(), None)
    assert span is not None and (span.start, span.end, span.current) == (1, 2, 3)
    assert archive_span(msgs(), {"v": 1, "start_id": "h2"}) is None  # started this turn
    assert archive_span(msgs()[:2], None) is None  # no answer yet


def test_rank_bm25_scores_matches_only_and_handles_cjk_and_plurals() -> None:
    docs = [["Paris trip", "Day 1: Louvre; day 2: Orsay museum"], ["CSV parser", "csv.reader"]]
    assert [r.index for r in rank("museums in Paris", docs)] == [0]
    assert rank("zebra", docs) == [] and rank("", docs) == [] and rank("the of", docs) == []
    one = rank("Louvre", [["Paris trip", "Louvre"]])  # one archive: a match scores > 0
    assert len(one) == 1 and one[0].score > 0
    assert tokenize("修复跨轮 context 保持") == ["修复", "复跨", "跨轮", "保持"]
    assert rank("跨轮", [["CSV"], ["修复跨轮 context 保持"]])[0].index == 1
    # The title counts twice: a title match beats the same words in a longer body.
    docs = [["Budget", "hotel hotel near the station, the hotel is fine"], ["Hotel", "Bastille"]]
    assert rank("hotel", docs, weights=[2, 1])[0].index == 1


def entry(context_id: str, title: str, summary: str = "") -> ArchivedContext:
    return ArchivedContext(
        context_id=context_id,
        title=title,
        archived_at="2026-11-22T05:00:00.000+00:00",
        message_count=2,
        summary=summary,
        thread_id="t",
        archive_thread_id=f"t.ctx.{context_id}",
        checkpoint_id="x",
    )


def test_select_archive_rules() -> None:
    a, b, c = (
        entry("c_a", "Paris trip", "Louvre"),
        entry("c_b", "CSV", "reader"),
        entry("c_c", "csv"),
    )
    assert select_archive([], query="x").problem == "nothing_archived"
    assert select_archive([a, b], context_id=" C_A ").chosen == a
    assert select_archive([a, b], context_id="c_zz").problem == "unknown_id"
    assert select_archive([a, b], context_id="paris trip").candidates == (a,)
    assert select_archive([a, b]).problem == "no_input"
    assert select_archive([a, b], query=" ").problem == "empty_query"
    assert select_archive([a, b], query="paris  TRIP").how == "title"
    assert select_archive([a, b], query="c_b").chosen == b  # an id given as the query
    assert select_archive([a, b, c], query="CSV").problem == "ambiguous"
    assert select_archive([a, b], query="louvre").chosen == a
    assert select_archive([a, b], query="dragons").problem == "no_match"
    tie = select_archive(
        [entry("c_1", "x", "same words"), entry("c_2", "y", "same words")], query="words"
    )
    assert tie.problem == "ambiguous" and len(tie.candidates) == 2


def test_the_loaded_block_has_the_banner_and_stays_within_its_tokens() -> None:
    history = []
    for i in range(40):
        history += [
            HumanMessage(f"question {i} " + "word " * 30),
            AIMessage(f"answer {i} " + "x " * 30),
        ]
    count = lambda text: count_tokens([SystemMessage(text)], model="gpt-4o")  # noqa: E731
    text, shown = render_loaded_context(
        entry("c_a", "Long"), history, max_tokens=500, count_tokens=count
    )
    assert text.startswith(LOADED_CONTEXT_BANNER) and count(text) <= 500
    assert 0 < shown < 80 and "answer 39" in text and "question 0 " not in text
    assert f"{shown} of 80 messages shown (the {80 - shown} earlier ones are left out)" in text
    text, shown = render_loaded_context(
        entry("c_a", "Long"), history, mode="recent", count_tokens=count
    )
    assert shown == 6 and "question 37" in text and "question 36" not in text
    text, shown = render_loaded_context(
        entry("c_a", "L", "the gist"), history, mode="summary", count_tokens=count
    )
    assert shown == 0 and "- summary: the gist" in text


def test_extractive_summary() -> None:
    summary = extractive_summary(
        [HumanMessage("Plan 3 days in Paris"), AIMessage("Day 1: Louvre. Day 2: Orsay.")]
    )
    assert summary == "Asked: Plan 3 days in Paris. Last answer: Day 1: Louvre."


# -- the example ----------------------------------------------------------------------------------


def test_the_example_switches_context_and_comes_back_offline() -> None:
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # always offline
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "context_switching.py")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for expected in [
        "model: offline (deterministic)",
        "Archived the previous context as c_",
        "model was sent (4): [system prompt] | human: Different topic",
        "Loaded c_",
        "[system prompt] | [ARCHIVED CONTEXT block] | human: Back to my trip",
        "ARCHIVED CONTEXT (for reference only, may not match the current question)",
        "2 archived context(s), newest first",
        "by its id",
        "model was sent (4): [system prompt] | human: Forget all of that.",
        "4 messages (all in the file)",
        "the index (2 items)",
        "10 user messages",
    ]:
        assert expected in out, f"{expected!r} missing from:\n{out}"


def test_an_archived_context_in_the_state_reads_back_under_its_stored_path(tmp_path: Path) -> None:
    """Stored data names `ArchivedContext` by `langgraph_ctx.context.archive` (the package
    it is re-exported from), at the top of a value and nested in a serialized one."""
    from langgraph.checkpoint.base import empty_checkpoint

    e = entry("c_a", "Paris trip")
    assert type(e).__module__ == "langgraph_ctx.context.archive"
    cp = empty_checkpoint()
    cp["channel_versions"] = {"top": 1, "nested": 1}
    cp["channel_values"] = {"top": e, "nested": {1: e}}  # int keys: through the serializer
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    JsonlSaver(tmp_path).put(config, cp, {}, {"top": 1, "nested": 1})
    got = JsonlSaver(tmp_path).get_tuple(config).checkpoint["channel_values"]
    assert got == {"top": e, "nested": {1: e}}
