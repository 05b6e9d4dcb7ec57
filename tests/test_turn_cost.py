"""A warm turn's write path costs what the turn adds, and saves exactly what it did.

Three shortcuts of the put (issue 16, concurrency and `BudgetNode` goals), each with
what it must not change:

* `dumps_line` encodes a line once with orjson; a ``null`` in it (a ``None``, on most
  lines) no longer sends it through `json.dumps` again. Bytes on disk are the same, and
  a NaN or an infinity is still refused.
* A read hands the graph the objects of the list the last put saw: the fingerprints
  that put kept stay with them (`_Index._kept_fps`), so the next put fingerprints only
  the messages the read decoded anew. An edit in place is still seen and saved.
* ``writes`` lines are not kept parsed after a put (a checkpoint's pending writes are
  read again from the log when asked for); what a reader gets is unchanged.

And one of the read: the head's messages read before come back in one C-level pass
(`_Index.messages`); only the messages appended or edited since are decoded, and what
comes back is what a fresh process reads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt

import langgraph_ctx.saver._batch as batch_module
from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import dumps_line, loads_sealed
from langgraph_ctx.codec.messages import has_nonfinite, message_digest
from tests.graphs import single_node

CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


@pytest.mark.parametrize(
    "obj",
    [
        {"v": 2, "t": "writes", "w": [[0, "branch:to:chat", None]]},
        {"a": None, "b": [None, 1.5, {"c": None}], "d": "null", "e": (None, 2)},
        {"text": "no null here", "n": 3},
        {"ünïcode": "東京", "x": None, "big": 2**63 + 1},
    ],
)
def test_a_line_with_nulls_is_the_bytes_json_writes(obj: dict[str, Any]) -> None:
    expected = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    line = dumps_line(obj)
    assert loads_sealed(line[:-1]) == json.loads(expected)
    assert line.startswith(expected[:-1].encode("utf-8"))  # the same bytes, then "c"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_nan_or_infinity_anywhere_is_still_refused(bad: float) -> None:
    ordinals = list(range(300))  # a message list's refs: scalars only, passed over in C
    for obj in (
        {"x": bad},
        {"x": [1, {"y": (None, bad)}]},
        {"msgs": [*ordinals, bad]},
        {"w": [[0, "messages", {"msgs": ordinals}], [1, "c", None], [2, "d", [[bad]]]]},
    ):
        assert has_nonfinite(obj)
        with pytest.raises(ValueError):
            dumps_line(obj)
    assert not has_nonfinite({"x": [None, 1.0, "nan", {"y": -0.0}]})
    assert not has_nonfinite({"msgs": ordinals, "w": [[1, "c", None, True]]})


def test_message_digests_tell_bodies_apart_as_their_json_does() -> None:
    body = {"msg": {"type": "ai", "content": "hi", "id": "a", "response_metadata": {"n": 1}}}
    reordered = {"msg": dict(reversed(list(body["msg"].items())))}
    assert message_digest(body) == message_digest(reordered)  # canonical: keys sorted
    inner = {"msg": {**body["msg"], "response_metadata": {"m": 2, "n": 1}}}
    inner_reordered = {"msg": {**body["msg"], "response_metadata": {"n": 1, "m": 2}}}
    assert message_digest(inner) != message_digest(inner_reordered)  # kept in its order
    call = {"name": "f", "args": {"b": 1, "a": 2}, "id": "c", "type": "tool_call"}
    rebuilt = {"type": "tool_call", "id": "c", "args": {"a": 2, "b": 1}, "name": "f"}
    calls, calls_rebuilt = ({"msg": {**body["msg"], "tool_calls": [c]}} for c in (call, rebuilt))
    assert message_digest(calls) == message_digest(calls_rebuilt)  # validation's order
    others = [
        {"msg": {**body["msg"], "content": "hi!"}},
        {"msg": {**body["msg"], "response_metadata": {"n": None}}},
        {"msg": {**body["msg"], "response_metadata": {"n": math.nan}}},  # a lenient read
        {"msg": {**body["msg"], "response_metadata": {"n": 2**70}}},  # beyond orjson
    ]
    digests = {message_digest(b) for b in [body, *others]}
    assert len(digests) == 5
    assert message_digest(others[3]) == message_digest(json.loads(json.dumps(others[3])))


def _put_next(saver: JsonlSaver, config: Any, step: int, message: Any) -> Any:
    """Read the head back, as LangGraph does at a turn's start, append one message, put."""
    tup = saver.get_tuple(config)
    value = [*tup.checkpoint["channel_values"]["messages"], message]
    checkpoint = create_checkpoint(tup.checkpoint, None, step)
    checkpoint["channel_values"] = {"messages": value}
    checkpoint["channel_versions"] = {"messages": step + 1}
    return saver.put(tup.config, checkpoint, {"step": step}, {"messages": step + 1}), value


def _first_put(saver: JsonlSaver, n: int) -> Any:
    checkpoint = empty_checkpoint()
    messages = [HumanMessage(f"question {i}", id=f"m{i}") for i in range(n)]
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": 1}
    return saver.put(CONFIG, checkpoint, {"step": 0}, {"messages": 1})


def test_a_put_after_a_read_fingerprints_only_what_the_read_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = JsonlSaver(tmp_path)
    config = _first_put(saver, 200)
    config, _ = _put_next(saver, config, 1, AIMessage("answer 1"))
    built: list[int] = []
    template_fps = batch_module._template_fps

    def counted(index: Any, refs: list[int]) -> Any:
        built.append(len(refs))
        return template_fps(index, refs)

    monkeypatch.setattr(batch_module, "_template_fps", counted)
    for step in range(2, 6):
        config, _ = _put_next(saver, config, step, HumanMessage(f"question {step}"))
    # Each put fingerprinted the one message its read decoded (the previous put's new
    # one, a fresh object now), never the 200 the previous put had checked.
    assert built and max(built) <= 1, built
    messages = JsonlSaver(tmp_path).get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert [m.content for m in messages[-5:]] == [
        "answer 1", "question 2", "question 3", "question 4", "question 5",
    ]


def test_an_edit_in_place_after_a_read_is_still_saved(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path)
    config = _first_put(saver, 50)
    config, _ = _put_next(saver, config, 1, AIMessage("answer 1"))
    tup = saver.get_tuple(config)
    value = list(tup.checkpoint["channel_values"]["messages"])
    value[3].content = "edited in place"  # an object the read handed out, kept fps
    value[7].additional_kwargs["flag"] = "set"
    checkpoint = create_checkpoint(tup.checkpoint, None, 2)
    checkpoint["channel_values"] = {"messages": [*value, HumanMessage("next")]}
    checkpoint["channel_versions"] = {"messages": 3}
    saver.put(tup.config, checkpoint, {"step": 2}, {"messages": 3})
    read = JsonlSaver(tmp_path).get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert read[3].content == "edited in place"
    assert read[7].additional_kwargs == {"flag": "set"}
    assert [m.content for m in read[-2:]] == ["answer 1", "next"]


def test_pending_writes_are_read_back_after_the_put(tmp_path: Path) -> None:
    """A ``writes`` line is not kept parsed: an interrupted step's writes come from the log."""

    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"messages": [AIMessage(f"approved: {answer}")]}

    def note(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("noted")]}

    builder = StateGraph(MessagesState)
    builder.add_node(ask)
    builder.add_node(note)
    builder.add_edge(START, "ask")
    builder.add_edge(START, "note")
    saver = JsonlSaver(tmp_path)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage("go")]}, CONFIG)
    index = saver._indexes["t"]
    kinds = {obj.get("t") for obj in index.parsed.values()}
    assert "writes" not in kinds
    warm = saver.get_tuple(CONFIG)
    cold = JsonlSaver(tmp_path).get_tuple(CONFIG)
    assert warm.pending_writes == cold.pending_writes
    assert {w[1] for w in warm.pending_writes} >= {"messages", "__interrupt__"}
    state = graph.get_state(CONFIG)
    assert state.tasks and state.tasks[0].interrupts


def _chat(saver: Any) -> Any:
    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    return single_node(saver, chat)


def test_a_put_lets_go_of_the_lines_its_checkpoint_supersedes(tmp_path: Path) -> None:
    """The parsed lines a warm thread keeps do not grow with its turns; history reads
    parse the older lines again and return what a fresh process returns."""
    saver = JsonlSaver(tmp_path)
    graph = _chat(saver)
    kept = []
    for turn in range(12):
        graph.invoke({"messages": [HumanMessage(f"question {turn}")]}, CONFIG)
        parsed = saver._indexes["t"].parsed
        kept.append(sum(1 for obj in parsed.values() if obj.get("t") == "ckpt"))
    assert max(kept[4:]) <= 4 and kept[-1] == kept[4], kept  # the head's lines only
    head = saver.get_tuple(CONFIG)
    assert [m.content for m in head.checkpoint["channel_values"]["messages"][-2:]] == [
        "question 11", "answer 23",
    ]
    fresh = JsonlSaver(tmp_path)
    warm_history = [(t.config, t.checkpoint, t.metadata) for t in saver.list(CONFIG)]
    cold_history = [(t.config, t.checkpoint, t.metadata) for t in fresh.list(CONFIG)]
    assert warm_history == cold_history and len(warm_history) == 12 * 3
    state = graph.get_state(CONFIG)
    assert len(state.values["messages"]) == 24


def test_savers_whose_reads_are_round_trips_keep_their_lines() -> None:
    from langgraph_ctx.saver.log import LogSaver
    from langgraph_ctx.saver.redis import RedisLogSaver

    assert JsonlSaver._release_lines and not LogSaver._release_lines
    assert not RedisLogSaver._release_lines


def test_branches_from_one_parent_keep_their_own_messages(tmp_path: Path) -> None:
    """Puts share the parent's fingerprint list and append to it; a second child of the
    same parent, and an edit in place on one branch, still save exactly their lists."""
    saver = JsonlSaver(tmp_path)
    parent = _first_put(saver, 20)

    def child(config: Any, step: int, message: Any, edit: bool = False) -> Any:
        tup = saver.get_tuple(config)
        value = list(tup.checkpoint["channel_values"]["messages"])
        if edit:
            value[2].content = "edited on this branch"
        checkpoint = create_checkpoint(tup.checkpoint, None, step)
        checkpoint["channel_values"] = {"messages": [*value, message]}
        checkpoint["channel_versions"] = {"messages": step + 1}
        return saver.put(tup.config, checkpoint, {"step": step}, {"messages": step + 1})

    first = child(parent, 1, AIMessage("first branch"))
    second = child(parent, 1, AIMessage("second branch"), edit=True)
    third = child(first, 2, HumanMessage("after the first"))
    fresh = JsonlSaver(tmp_path)

    def contents(config: Any) -> list[str]:
        return [m.content for m in fresh.get_tuple(config).checkpoint["channel_values"]["messages"]]

    base = [f"question {i}" for i in range(20)]
    assert contents(first) == [*base, "first branch"]
    edited = [*base[:2], "edited on this branch", *base[3:]]
    assert contents(second) == [*edited, "second branch"]
    assert contents(third) == [*base, "first branch", "after the first"]


def test_a_warm_read_decodes_only_what_was_appended_or_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm read of the head takes the messages read before in one pass
    (`_Index.messages`): `_Index.message` runs for the new and the edited ones only,
    and what comes back is what a fresh process reads."""
    from langgraph_ctx.saver._index import _Index

    saver = JsonlSaver(tmp_path)
    config = _first_put(saver, 300)
    config, _ = _put_next(saver, config, 1, AIMessage("answer 1"))
    first = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    config, _ = _put_next(saver, config, 2, HumanMessage("question 2"))
    one_by_one: list[int] = []
    message = _Index.message

    def counted(self: Any, ordinal: int, checked: Any = None) -> Any:
        one_by_one.append(ordinal)
        return message(self, ordinal, checked)

    monkeypatch.setattr(_Index, "message", counted)
    read = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert len(one_by_one) == 1  # the message put since the last read
    assert all(x is y for x, y in zip(first, read[:-1], strict=True))
    read[5].content = "edited in place"
    read[9].additional_kwargs["flag"] = "set"
    again = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    cold = JsonlSaver(tmp_path).get_tuple(config).checkpoint["channel_values"]["messages"]
    assert [m.model_dump() for m in again] == [m.model_dump() for m in cold]
    assert again[5] is not read[5] and again[5].content == "question 5"
    assert again[9] is not read[9] and again[9].additional_kwargs == {}
    assert all(again[i] is read[i] for i in range(len(read)) if i not in (5, 9))


def test_a_template_evicted_during_a_read_costs_only_its_next_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers share the lock: another one's decoding may evict a template between this
    read's lookup and its touch of the LRU. The read still returns its messages; the
    evicted one is decoded again by the next read."""
    import langgraph_ctx.saver._index as index_module

    saver = JsonlSaver(tmp_path)
    config = _first_put(saver, 40)
    first = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    index = saver._indexes["t"]
    real = index_module._all_unchanged

    def another_reader_evicts(messages: Any, fps: Any) -> bool:
        index.templates.pop(7)
        return real(messages, fps)

    monkeypatch.setattr(index_module, "_all_unchanged", another_reader_evicts)
    read = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert all(x is y for x, y in zip(first, read, strict=True))
    monkeypatch.setattr(index_module, "_all_unchanged", real)
    again = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert again[7] is not first[7] and again[7].content == "question 7"
    assert all(again[i] is first[i] for i in range(40) if i != 7)
