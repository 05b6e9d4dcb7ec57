"""`langgraph_ctx.browse` reads through the saver: the same calls on JSONL files and on Redis."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_ctx import browse
from langgraph_ctx.errors import CheckpointNotFoundError, ThreadNotFoundError

from .backends import Backend
from .cli_scenarios import CITIES, chat_graph, config, travel_agent


def build(saver: Any) -> Any:
    """``trip`` (6 turns, compacted), its fork ``trip-retry``, ``chat`` reverted once."""
    agent = travel_agent(saver)
    for city in CITIES[:6]:
        agent.invoke({"messages": [("user", f"What is the weather in {city}?")]}, config("trip"))
    first_turn = next(
        s
        for s in agent.get_state_history(config("trip"))
        if len(s.values.get("messages", [])) == 4 and not s.next
    )
    saver.fork(
        "trip", "trip-retry", checkpoint_id=first_turn.config["configurable"]["checkpoint_id"]
    )
    chat = chat_graph(saver)
    for text in ["hi", "plan a trip", "make it cheaper"]:
        chat.invoke({"messages": [("user", text)]}, config("chat"))
    after_two = next(
        s
        for s in chat.get_state_history(config("chat"))
        if len(s.values["messages"]) == 4 and not s.next
    )
    saver.revert("chat", after_two.config["configurable"]["checkpoint_id"])
    return agent


def test_browse_a_thread_on_either_backend(backend: Backend) -> None:
    saver = backend.saver()
    agent = build(saver)
    reader = backend.saver()  # a second process opening the same store

    summaries = {s.thread_id: s for s in browse.thread_summaries(reader)}
    assert set(summaries) == {"trip", "trip-retry", "chat"}
    trip = summaries["trip"]
    assert trip.error is None
    assert trip.messages == len(agent.get_state(config("trip")).values["messages"]) == 24
    assert trip.checkpoints == len(reader.checkpoint_infos("trip"))
    assert trip.size == len(backend.log_bytes("trip"))
    assert trip.head == agent.get_state(config("trip")).config["configurable"]["checkpoint_id"]
    assert trip.path == reader.storage.describe("trip")
    assert summaries["trip-retry"].forked_from is not None
    assert summaries["trip-retry"].forked_from["thread_id"] == "trip"
    assert summaries["chat"].backups == 1 and summaries["chat"].messages == 4

    rows = browse.history(reader, "trip")
    assert [r["checkpoint_id"] for r in rows] == sorted(
        i.checkpoint_id for i in reader.checkpoint_infos("trip") if not i.checkpoint_ns
    )
    assert [r["head"] for r in rows].count(True) == 1 and rows[-1]["head"]
    assert rows[0]["nodes"] == ["(input)"]

    head = browse.resolve_checkpoint(reader, "trip", "head")
    assert head.checkpoint_id == trip.head
    values = browse.state_values(reader, head)
    shown = browse.transcript(values)
    assert [m["role"] for m in shown.messages[:4]] == ["user", "assistant", "tool", "assistant"]
    assert shown.compactions and shown.running_summary is not None
    assert shown.context_usage is not None

    diff = browse.diff_checkpoints(reader, "trip", "head~1", "head")
    assert diff.relation == "B descends from A" and diff.b["checkpoint_id"] == trip.head

    turns = browse.usage_series(reader, "trip", model="gpt-4o")
    assert [t.turn for t in turns] == [1, 2, 3, 4, 5, 6]
    assert all(t.used > 0 and t.total == turns[0].total for t in turns)

    with pytest.raises(ThreadNotFoundError):
        browse.history(reader, "nobody")
    with pytest.raises(CheckpointNotFoundError):
        browse.resolve_checkpoint(reader, "trip", "head~999")


def test_the_transcript_marks_what_the_model_no_longer_sees() -> None:
    """``show`` marked a message compacted only when a record dropped its own id: a tool
    result offloaded earlier is dropped later as its preview (``<id>~preview``), so the
    call was marked and its result not; and messages a context switch set aside were not
    marked at all, though the model no longer sees them either (trial 6)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    call = {"name": "grep_logs", "args": {"pattern": "E1"}, "id": "c1"}
    messages = [
        SystemMessage("You are Otto.", id="s"),
        HumanMessage("grep E1", id="u1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("120 lines", tool_call_id="c1", id="t1"),
        AIMessage("found them", id="a2"),
        HumanMessage("new topic", id="u2"),
        AIMessage("sure", id="a3"),
    ]
    from langgraph_ctx.context.compaction import CompactionRecord

    ids = ("a1", "t1~preview", "a2~short")
    dropped = [{"id": i, "role": "x", "tokens": 9, "reason": "old"} for i in ids]
    record = CompactionRecord(
        strategy="window", reason="trigger", compacted=True, max_tokens=100,
        tokens_before=200, tokens_after=80, within_budget=True, messages_before=7,
        messages_after=4, dropped=dropped,
    ).model_dump(mode="json")  # fmt: skip
    values = {
        "messages": messages,
        "compaction_log": [record],
        "active_context": {"v": 1, "start_id": "u2"},
    }
    entries = browse.transcript(values).messages
    assert [e["id"] for e in entries if e.get("compacted")] == ["a1", "t1", "a2"]
    assert [e["id"] for e in entries if e.get("outside_context")] == ["u1", "a1", "t1", "a2"]
    plain = browse.transcript({"messages": messages}).messages
    assert not any(e.get("compacted") or e.get("outside_context") for e in plain)
