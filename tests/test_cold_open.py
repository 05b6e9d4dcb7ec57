"""Cold opens: what a fresh process reads, built cheaply and exactly (issue #16, item 2)."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import MessagesState

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.verify import verify_file
from langgraph_ctx.codec.lines import (
    GAPS,
    SNAP_PREFIX,
    _gaps,
    _ungaps,
    dumps_line,
    loads_line,
)
from langgraph_ctx.codec.messages import (
    MESSAGE_CLASSES,
    message_from_json,
    message_to_json,
    message_unvalidated,
)
from langgraph_ctx.errors import CodecError, CorruptLineWarning, CorruptLogError
from langgraph_ctx.saver import _index
from tests.backends import Backend
from tests.graphs import single_node

MESSAGES: list[BaseMessage] = [
    HumanMessage("hi"),
    HumanMessage("hi", id="a1", name="bob"),
    HumanMessage([{"type": "text", "text": "x"}, "y"]),
    SystemMessage("sys", additional_kwargs={"k": {"z": [1, 2]}}),
    AIMessage("", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}], id="x"),
    AIMessage(
        "ok",
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        response_metadata={"model": "m", "finish_reason": "stop"},
    ),
    AIMessage(
        "ok",
        usage_metadata={
            "input_tokens": 1,
            "output_tokens": 2,
            "total_tokens": 3,
            "input_token_details": {"cache_read": 1},
        },
    ),
    AIMessage(
        "x",
        additional_kwargs={
            "tool_calls": [
                {"id": "1", "function": {"name": "f", "arguments": "{}"}, "type": "function"}
            ]
        },
    ),
    AIMessage(
        "x",
        invalid_tool_calls=[
            {"name": "f", "args": "{", "id": "1", "error": None, "type": "invalid_tool_call"}
        ],
    ),
    ToolMessage("res", tool_call_id="c1", name="f"),
    ToolMessage("res", tool_call_id="c1", status="error"),
    ToolMessage("res", tool_call_id="c1", artifact={"a": 1}),
    ChatMessage("x", role="r"),
    FunctionMessage("x", name="f"),
    AIMessageChunk("x", id="1"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_built_messages_equal_validated_ones(message: BaseMessage) -> None:
    """The unvalidated construction returns exactly what validation would: same class,
    fields (in the same order: fingerprints compare them in order), fields set, extras."""
    data = orjson.loads(orjson.dumps(message_to_json(message)))
    cls = MESSAGE_CLASSES[data["type"]]
    validated = cls.model_validate(dict(data))
    built = message_from_json(dict(data))
    assert type(built) is type(validated)
    assert list(built.__dict__.items()) == list(validated.__dict__.items())
    assert built.__pydantic_fields_set__ == validated.__pydantic_fields_set__
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built == validated == message


def test_plain_messages_take_the_cheap_path() -> None:
    """The common shapes (a chat turn, a tool call and its result) are not validated."""
    for message in (
        HumanMessage("hi", id="1"),
        AIMessage("", id="2", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        ToolMessage("r", tool_call_id="c", name="f", id="3"),
    ):
        data = orjson.loads(orjson.dumps(message_to_json(message)))
        assert message_unvalidated(data) is not None


def test_built_message_shares_nothing_with_the_parsed_line() -> None:
    data = {"type": "human", "content": [{"type": "text", "text": "x"}], "additional_kwargs": {}}
    data["additional_kwargs"] = {"k": [1]}
    before = orjson.loads(orjson.dumps(data))
    built = message_from_json(data)
    built.content[0]["text"] = "changed"  # type: ignore[index]
    built.additional_kwargs["k"].append(2)
    assert data == before


@pytest.mark.parametrize(
    "data",
    [
        {"type": "human", "content": 5},
        {"type": "human", "content": "x", "id": 7},
        {"type": "ai", "content": "x", "tool_calls": [{"name": 1, "args": {}}]},
        {"type": "tool", "content": "x"},
    ],
)
def test_unusual_bodies_are_still_validated(data: dict) -> None:
    """A tampered body is not built blindly: it goes through validation, which refuses
    it with a `CodecError` (or coerces it exactly as validation always did)."""
    cls = MESSAGE_CLASSES[data["type"]]
    assert message_unvalidated(dict(data)) is None
    try:
        validated = cls.model_validate(dict(data))
    except Exception:
        with pytest.raises(CodecError):
            message_from_json(dict(data))
    else:
        assert message_from_json(dict(data)) == validated


# ------------------------------------------------------------------ snapshots




WORDS = ["the", "plan", "for", "a", "trip", "to", "museum", "and", "hotel", "by", "train"]


def chat_graph(saver: Any) -> Any:
    rng = random.Random(3)

    def chatbot(state: MessagesState) -> dict:
        return {"messages": [AIMessage(" ".join(rng.choice(WORDS) for _ in range(30)))]}

    return single_node(saver, chatbot)


def chat(saver: Any, thread_id: str, turns: int, start: int = 0) -> Any:
    graph = chat_graph(saver)
    config = {"configurable": {"thread_id": thread_id}}
    for i in range(start, start + turns):
        graph.invoke({"messages": [HumanMessage(f"turn {i}: " + " ".join(WORDS))]}, config)
    return graph


def log_lines(backend: Backend, thread_id: str) -> list[bytes]:
    return backend.log_bytes(thread_id).split(b"\n")[:-1]


def snap_lines(lines: list[bytes]) -> list[int]:
    return [n for n, raw in enumerate(lines, 1) if raw.startswith(SNAP_PREFIX)]


def tuple_view(tup: Any) -> Any:
    return (
        tup.config,
        tup.parent_config,
        tup.metadata,
        {k: v for k, v in tup.checkpoint.items() if k != "channel_values"},
        tup.checkpoint["channel_values"],
        tup.pending_writes,
    )


class ParseCounter:
    """Records which lines of a log the index parses (by their bytes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, lines: list[bytes]) -> None:
        self.number = {raw: n for n, raw in enumerate(lines, 1)}
        self.parsed: list[int] = []
        original = _index.loads_line

        def counting(raw: bytes) -> dict:
            self.parsed.append(self.number.get(bytes(raw), -1))
            return original(raw)

        monkeypatch.setattr(_index, "loads_line", counting)


@pytest.fixture
def long_thread(backend: Backend) -> Any:
    """A 100-turn chat (about 700 lines, a few snapshots) and the saver that wrote it."""
    writer = backend.saver()
    chat(writer, "long", 100)
    return writer


def test_a_long_log_carries_snapshots_and_verifies(
    backend: Backend, long_thread: Any, tmp_path: Path
) -> None:
    lines = log_lines(backend, "long")
    snaps = snap_lines(lines)
    assert len(snaps) >= 2
    assert all(b - a >= _index.SNAPSHOT_EVERY for a, b in zip([0, *snaps[:-1]], snaps, strict=True))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(backend.log_bytes("long"))
    report = verify_file(copy)
    assert report.problems == [] and report.snapshots == len(snaps)


def test_cold_open_parses_only_the_tail(
    backend: Backend, long_thread: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh saver reads the latest state from the last snapshot: of the checkpoint
    and writes lines before it, it parses only those the head's values are on."""
    lines = log_lines(backend, "long")
    last_snap = snap_lines(lines)[-1]
    counter = ParseCounter(monkeypatch, lines)
    config = {"configurable": {"thread_id": "long"}}
    cold = backend.saver()
    got = cold.get_tuple(config)
    assert cold._indexes["long"].partial
    before = {
        n for n in counter.parsed
        if 0 < n < last_snap and not lines[n - 1].startswith((b'{"v":2,"t":"msg"', SNAP_PREFIX))
    }
    # The header, and the lines the snapshot names, each checked before it is started
    # from (`_check_head`): its checkpoint's own line, the lines of its channels' values,
    # its pending writes' lines and the writes lines saved before their checkpoint
    # (``early``), as many of those as LangGraph's timing left.
    from langgraph_ctx.codec.lines import parse_snapshot_line

    snap = parse_snapshot_line(loads_line(lines[last_snap - 1]), last_snap)
    (head,) = snap.heads
    named = {1, head.head.line, *(w[1] for w in head.writers.values())}
    assert before <= named | {w[4] for w in head.writes} | set(snap.early or ()), before
    assert len(named) <= 4
    assert tuple_view(got) == tuple_view(long_thread.get_tuple(config))


def test_history_and_old_checkpoints_after_a_cold_open(backend: Backend, long_thread: Any) -> None:
    config = {"configurable": {"thread_id": "long"}}
    expected = [tuple_view(t) for t in long_thread.list(config)]
    oldest = expected[-1][0]
    cold = backend.saver()
    cold.get_tuple(config)
    assert tuple_view(cold.get_tuple(oldest)) == expected[-1]  # before every snapshot
    assert not cold._indexes["long"].partial
    assert [tuple_view(t) for t in backend.saver().list(config)] == expected


def test_writing_after_a_cold_open(backend: Backend, long_thread: Any, tmp_path: Path) -> None:
    """A saver opened from a snapshot keeps writing, and snapshotting, correctly: a fresh
    process reads what it wrote and `verify` finds every snapshot exact."""
    cold = backend.saver()
    chat(cold, "long", 40, start=100)
    assert cold._indexes["long"].partial  # the turns never needed the lines before
    config = {"configurable": {"thread_id": "long"}}
    expected = [tuple_view(t) for t in cold.list(config)]
    assert len(expected) == 3 * 140
    assert [tuple_view(t) for t in backend.saver().list(config)] == expected
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(backend.log_bytes("long"))
    report = verify_file(copy)
    assert report.problems == [] and report.snapshots >= 3


def late_writes(saver: Any, thread_id: str) -> dict:
    """Append writes to the checkpoint two before the last snapshot's head, as LangGraph's
    background ``put_writes`` does when a step's writes land after the next checkpoints
    (and the snapshot written with them): returns the older checkpoint's config."""
    config = {"configurable": {"thread_id": thread_id}}
    index = saver._indexes[thread_id]
    last = index.snap_line

    def line_of(tup: Any) -> int:
        return index.named("", tup.config["configurable"]["checkpoint_id"]).line

    before = [t.config for t in saver.list(config) if line_of(t) < last]
    older = before[2]  # [0] is the snapshot's head
    saver.put_writes(older, [("messages", [AIMessage("late", id="late")])], "late-task")
    return older


def test_late_writes_to_a_checkpoint_before_the_snapshot(
    backend: Backend, long_thread: Any
) -> None:
    """Writes naming a checkpoint the snapshot left out, after it: a cold open still
    starts from the snapshot (the head needs none of them), and reading the older
    checkpoint or the history then finds them."""
    config = {"configurable": {"thread_id": "long"}}
    older = late_writes(long_thread, "long")
    lines = log_lines(backend, "long")
    assert loads_line(lines[-1])["t"] == "writes"
    assert loads_line(lines[-1])["ckpt"] < snap_lines(lines)[-1]
    head = tuple_view(long_thread.get_tuple(config))
    history = [tuple_view(t) for t in long_thread.list(config)]
    cold = backend.saver()
    assert tuple_view(cold.get_tuple(config)) == head
    assert cold._indexes["long"].partial  # the late writes wait for the lines before
    got = cold.get_tuple(older)
    assert ("late-task", "messages") in [(w[0], w[1]) for w in got.pending_writes]
    assert tuple_view(got) == tuple_view(long_thread.get_tuple(older))
    assert not cold._indexes["long"].partial
    assert [tuple_view(t) for t in backend.saver().list(config)] == history


def test_late_writes_naming_a_line_that_is_no_checkpoint(tmp_path: Path) -> None:
    """A late writes line whose checkpoint line is not one is corrupt, as without a
    snapshot: the cold open reads the whole log and names the line."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    late_writes(writer, "t")
    path = Path(writer.path("t"))
    lines = path.read_bytes().split(b"\n")[:-1]
    obj = loads_line(lines[-1])
    obj["ckpt"] -= 1
    while loads_line(lines[obj["ckpt"] - 1])["t"] != "msg":
        obj["ckpt"] -= 1
    lines[-1] = dumps_line(obj)[:-1]
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(CorruptLogError, match=f":{len(lines)}: writes refer to line"):
        JsonlSaver(tmp_path).get_tuple(config)
    with pytest.warns(CorruptLineWarning, match=f":{len(lines)}: writes refer to line"):
        got = JsonlSaver(tmp_path, on_corrupt="skip").get_tuple(config)
    assert tuple_view(got) == tuple_view(writer.get_tuple(config))


@pytest.mark.parametrize("where", ["whole", "early", "late"])
def test_fork_carries_the_snapshots(backend: Backend, long_thread: Any, where: str) -> None:
    source = {"configurable": {"thread_id": "long"}}
    history = list(long_thread.list(source))
    at = {"whole": None, "early": history[-5], "late": history[10]}[where]
    checkpoint_id = at.config["configurable"]["checkpoint_id"] if at else None
    head = long_thread.fork("long", "copy", checkpoint_id=checkpoint_id)
    expected = tuple_view(long_thread.get_tuple(head))
    cold = backend.saver()
    got = cold.get_tuple({"configurable": {"thread_id": "copy"}})
    assert cold._indexes["copy"].partial == (where != "early")
    assert tuple_view(got) == expected
    assert got.checkpoint["id"] == (at or history[0]).checkpoint["id"]


def test_revert_and_prune_read_back_from_snapshots(backend: Backend, long_thread: Any) -> None:
    config = {"configurable": {"thread_id": "long"}}
    target = list(long_thread.list(config))[30]
    long_thread.revert("long", target.config["configurable"]["checkpoint_id"])
    cold = backend.saver()
    assert tuple_view(cold.get_tuple(config)) == tuple_view(target)
    assert cold._indexes["long"].partial
    chat(cold, "other", 100)
    expected = tuple_view(cold.get_tuple({"configurable": {"thread_id": "other"}}))
    cold.prune(["other"])
    fresh = backend.saver().get_tuple({"configurable": {"thread_id": "other"}})
    assert tuple_view(fresh)[2:] == expected[2:]  # the latest checkpoint, now alone


def test_a_log_without_snapshots_still_reads(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph_ctx.saver import _batch

    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 10**9)  # as an older version wrote it
    writer = backend.saver()
    chat(writer, "old", 60)
    assert snap_lines(log_lines(backend, "old")) == []
    config = {"configurable": {"thread_id": "old"}}
    cold = backend.saver()
    assert tuple_view(cold.get_tuple(config)) == tuple_view(writer.get_tuple(config))
    assert not cold._indexes["old"].partial


def plain_numbers(obj: dict) -> dict:
    """A ``snap`` line with its gaps (``"d"``) turned into the numbers, for a change."""
    msgs = obj["msgs"]
    if len(msgs) == 3:
        obj["msgs"] = [msgs[0], _ungaps(msgs[2])]
    obj["lists"] = [[*x[:4], _ungaps(x[5])] if len(x) == 6 else x for x in obj["lists"]]
    return obj


def as_gaps(obj: dict) -> dict:
    """The numbers of `plain_numbers` written as gaps again, as a snapshot is written."""
    obj["msgs"] = [obj["msgs"][0], GAPS, _gaps(obj["msgs"][1])]
    obj["lists"] = [[*x[:4], GAPS, _gaps(x[4])] for x in obj["lists"]]
    return obj


def rewrite_last_snapshot(path: Path, change: Any) -> int:
    """Change the last snapshot (its numbers plain while ``change`` sees them) and write
    it back, as gaps, with a valid checksum."""
    lines = path.read_bytes().split(b"\n")[:-1]
    n = snap_lines(lines)[-1]
    obj = plain_numbers(loads_line(lines[n - 1]))
    change(obj)
    as_gaps(obj)
    lines[n - 1] = dumps_line(obj)[:-1]  # a valid checksum: tampered, not damaged
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    return n


def swap_messages(obj: dict) -> None:
    msgs = obj["msgs"][1]
    msgs[0], msgs[1] = msgs[1], msgs[0]


def point_head_elsewhere(obj: dict) -> None:
    obj["heads"][0]["line"] = obj["msgs"][1][0]


def test_a_tampered_snapshot_is_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a snapshot holds is read as JSON data: a LangChain constructor or a
    serializer's payload in it is never imported or called, only returned as written."""
    import os

    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    called: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    evil = {"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {"x": "id"}}

    def plant(obj: dict) -> None:
        obj["heads"][0]["meta"]["evil"] = evil

    path = Path(writer.path("t"))
    n = rewrite_last_snapshot(path, plant)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tup = JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})
    assert called == []
    assert tup.metadata["evil"] == json.loads(json.dumps(evil))
    assert [p.line for p in verify_file(path).problems] == [n]


# ------------------------------------------------------- the tail a cold open reads


def point_message_past_the_end(obj: dict) -> None:
    obj["msgs"][1][-1] = 10**6  # an earlier line as the grammar goes, past the file's end


def point_message_at_a_checkpoint(obj: dict) -> None:
    obj["msgs"][1][-1] = obj["heads"][0]["line"]


@pytest.mark.parametrize(
    "change",
    [
        swap_messages,
        point_head_elsewhere,
        point_message_past_the_end,
        point_message_at_a_checkpoint,
    ],
)
def test_a_snapshot_that_does_not_match_is_passed_over(tmp_path: Path, change: Any) -> None:
    """A snapshot that does not say what the lines say (messages swapped, a head on
    another line, message lines checked when read: one past the end of the file, or a
    line that is not that message) is passed over with a warning naming it, the state
    is read from the whole log, and `verify` reports that line."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    config = {"configurable": {"thread_id": "t"}}
    expected = tuple_view(writer.get_tuple(config))
    path = Path(writer.path("t"))
    n = rewrite_last_snapshot(path, change)
    cold = JsonlSaver(tmp_path)
    with pytest.warns(CorruptLineWarning, match=f":{n}: snapshot"):
        got = cold.get_tuple(config)
    assert tuple_view(got) == expected
    assert not cold._indexes["t"].partial
    report = verify_file(path)
    assert [p.line for p in report.problems] == [n]
    assert "snapshot" in report.problems[0].message
    chat(cold, "t", 3, start=100)  # writing goes on, and what it writes reads back
    with warnings.catch_warnings():  # against a snapshot before the bad one: a fresh one
        warnings.simplefilter("error")
        again = JsonlSaver(tmp_path).get_tuple(config)
    assert tuple_view(again) == tuple_view(cold.get_tuple(config))


def test_a_torn_tail_after_the_last_snapshot(tmp_path: Path) -> None:
    """A crash that cut the last line short: the cold open reads from the snapshot up
    to the last whole line, warns of the torn one, and the next write removes it."""
    from langgraph_ctx.errors import TornLineWarning

    writer = JsonlSaver(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    path = Path(writer.path("t"))
    turns = 100
    chat(writer, "t", turns)
    while True:  # where the last snapshot falls depends on when background writes land
        data = path.read_bytes()
        lines = data.split(b"\n")[:-1]
        if snap_lines(lines)[-1] < len(lines) - 3:
            break
        chat(writer, "t", 1, start=turns)
        turns += 1
    whole = JsonlSaver(tmp_path / "whole")
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / path.name).write_bytes(b"".join(r + b"\n" for r in lines[:-1]))
    expected = tuple_view(whole.get_tuple(config))
    path.write_bytes(data[:-20])  # the last line loses its end
    cold = JsonlSaver(tmp_path)
    with pytest.warns(TornLineWarning):
        got = cold.get_tuple(config)
    assert tuple_view(got) == expected
    assert cold._indexes["t"].partial  # read from the snapshot all the same
    with pytest.warns(TornLineWarning, match="removed a torn last line"):
        chat(cold, "t", 2, start=turns)
    assert tuple_view(JsonlSaver(tmp_path).get_tuple(config)) == tuple_view(cold.get_tuple(config))


def test_a_tampered_message_line_under_a_snapshot_names_its_line(tmp_path: Path) -> None:
    """A message line changed after it was written fails its checksum when the cold open
    reads it (one batch for the whole message list): the error names that line."""
    from langgraph_ctx.errors import CorruptLogError

    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    path = Path(writer.path("t"))
    lines = path.read_bytes().split(b"\n")[:-1]
    first_snap = snap_lines(lines)[0]
    victim = next(
        n for n in range(first_snap - 1, 0, -1) if lines[n - 1].startswith(b'{"v":2,"t":"msg"')
        and b'"msg":' in lines[n - 1] and b'"type":"ai"' in lines[n - 1]
    )
    lines[victim - 1] = lines[victim - 1].replace(b'"content":"', b'"content":"X', 1)
    path.write_bytes(b"".join(r + b"\n" for r in lines))
    with pytest.raises(CorruptLogError, match=f":{victim}:.*checksum"):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


def test_a_cold_open_reads_the_message_list_in_few_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's messages are read in one storage call (plus one for the bodies that
    ``like`` lines repeat), in spans of the file, not one ``pread`` a line."""
    import os

    from langgraph_ctx.storage import jsonl as jsonl_module

    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    calls = {"pread": 0}
    original = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        calls["pread"] += 1
        return original(fd, n, offset)

    monkeypatch.setattr(jsonl_module.os, "pread", counting)
    config = {"configurable": {"thread_id": "t"}}
    got = JsonlSaver(tmp_path).get_tuple(config)
    assert len(got.checkpoint["channel_values"]["messages"]) == 200
    assert calls["pread"] <= 12, calls
    assert tuple_view(got) == tuple_view(writer.get_tuple(config))


def test_a_checkpoint_saved_out_of_id_order_just_before_a_snapshot(backend: Backend) -> None:
    """Two runs on one thread at once each make their checkpoint's id, then save: a
    checkpoint with an older id lands after a newer one. When that one is the line
    right before a snapshot and the next checkpoint builds on it, the snapshot (whose
    head is the newest id) leaves it out, and a cold open indexes the lines before the
    snapshot to take it. That read only the header (the header, fed again first, made
    the count of indexed lines 1): every new saver raised CorruptLogError, and
    on_corrupt="skip" read the thread as empty. As SqliteSaver, it reopens whole."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    def checkpoint(checkpoint_id: str, k: int) -> Any:
        c = empty_checkpoint()
        c["id"] = checkpoint_id
        c["channel_values"] = {"k": k}
        c["channel_versions"] = {"k": f"{k + 1:032}.0"}
        return c

    writer = backend.saver()
    start = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    head = writer.put(start, checkpoint(str(uuid6()), 0), {"step": 0}, {})
    k = 1
    for _ in range(100):  # past a snapshot, whichever line it falls on
        early = str(uuid6())  # the second run makes its id first ...
        head = writer.put(head, checkpoint(str(uuid6()), k), {"step": k}, {})  # ... the first saves
        side = writer.put(head, checkpoint(early, k + 1), {"step": k + 1}, {})  # then the second
        head = writer.put(side, checkpoint(str(uuid6()), k + 2), {"step": k + 2}, {})
        k += 3
    lines = log_lines(backend, "t")
    assert snap_lines(lines), "the thread is long enough to carry a snapshot"
    config = {"configurable": {"thread_id": "t"}}
    expected = [tuple_view(t) for t in writer.list(config)]
    assert len(expected) == 301
    for cold in (backend.saver(), backend.saver(on_corrupt="skip")):
        assert tuple_view(cold.get_tuple(config)) == expected[0]
        assert [tuple_view(t) for t in cold.list(config)] == expected


def _early_writes_thread(saver: Any, ids: list[str]) -> None:
    """Each checkpoint's writes saved before the checkpoint, as LangGraph's background
    puts may land: ``put_writes`` for ``B``, then ``put(B)``."""
    from langgraph.checkpoint.base import empty_checkpoint

    parent = None
    for i, cid in enumerate(ids):
        checkpoint = empty_checkpoint()
        checkpoint.update(id=cid, channel_values={"x": i}, channel_versions={"x": i + 1})
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        saver.put_writes(
            {"configurable": {**config["configurable"], "checkpoint_id": cid}},
            [("x", f"w{i}")],
            f"task{i}",
        )
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        saver.put(config, checkpoint, {"step": i, "source": "loop"}, {"x": i + 1})
        parent = cid


def test_writes_saved_before_their_checkpoint_survive_a_snapshot_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot written at the start of ``B``'s append sits between ``B``'s early writes
    and ``B``: it names them (``early``), and a cold open finds them when ``B`` comes, as
    `InMemorySaver` and the whole log give them (they were lost: the step ran again)."""
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.memory import InMemorySaver

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 4)
    ids = [str(uuid6(clock_seq=i)) for i in range(8)]
    memory = InMemorySaver()
    _early_writes_thread(memory, ids)
    _early_writes_thread(JsonlSaver(tmp_path), ids)
    snaps = [loads_line(raw) for raw in (tmp_path / "t.jsonl").read_bytes().splitlines()]
    assert any("early" in obj for obj in snaps if obj["t"] == "snap")
    for cid in ids:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}
        want = memory.get_tuple(config).pending_writes  # type: ignore[union-attr]
        assert JsonlSaver(tmp_path).get_tuple(config).pending_writes == want  # type: ignore[union-attr]
    head = {"configurable": {"thread_id": "t"}}
    assert JsonlSaver(tmp_path).get_tuple(head).pending_writes == [("task7", "x", "w7")]  # type: ignore[union-attr]
    assert not verify_file(tmp_path / "t.jsonl").problems


def test_a_snapshot_without_early_writes_is_not_started_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot without ``early`` (an earlier release's) may leave out the head's
    writes saved before it: a cold open reads the whole log instead, and the writes come
    back (from the snapshot they were lost, and `verify` said so)."""
    from langgraph.checkpoint.base.id import uuid6

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 4)
    _early_writes_thread(JsonlSaver(tmp_path), [str(uuid6(clock_seq=i)) for i in range(8)])
    path = tmp_path / "t.jsonl"
    raws = path.read_bytes().splitlines()
    last = max(n for n, raw in enumerate(raws) if raw.startswith(SNAP_PREFIX))
    obj = loads_line(raws[last])
    assert obj["early"] != ["d", []] and last == len(raws) - 2  # the snapshot, then the head
    del obj["early"]
    raws[last] = dumps_line(obj)[:-1]
    path.write_bytes(b"\n".join(raws) + b"\n")
    head = {"configurable": {"thread_id": "t"}}
    assert JsonlSaver(tmp_path).get_tuple(head).pending_writes == [("task7", "x", "w7")]  # type: ignore[union-attr]
    assert not verify_file(path).problems


def test_verify_takes_a_fork_and_a_revert_at_a_checkpoint_with_early_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork or revert at ``B`` empties the writes ``B``'s step made before ``B`` (the
    step runs again); the snapshot before ``B`` still names that line, which holds
    nothing now: the log reads the same from it, and `verify` passes it."""
    from langgraph.checkpoint.base.id import uuid6

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 4)
    ids = [str(uuid6(clock_seq=i)) for i in range(4)]
    saver = JsonlSaver(tmp_path)
    _early_writes_thread(saver, ids)
    saver.fork("t", "fork", checkpoint_id=ids[-1])
    saver.revert("t", ids[-1])
    for thread in ("t", "fork"):
        config = {"configurable": {"thread_id": thread}}
        assert JsonlSaver(tmp_path).get_tuple(config).pending_writes == []  # type: ignore[union-attr]
        assert not verify_file(tmp_path / f"{thread}.jsonl").problems, thread


def test_a_failed_read_of_the_lines_before_a_snapshot_keeps_refusing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saver opened from a snapshot reads the lines before it when a query needs them:
    a damaged one there raises, and keeps raising (it answered from part of the log)."""
    from langgraph.checkpoint.base.id import uuid6

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module
    from langgraph_ctx.errors import CorruptLogError

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 4)
    ids = [str(uuid6(clock_seq=i)) for i in range(10)]
    _early_writes_thread(JsonlSaver(tmp_path), ids)
    path = tmp_path / "t.jsonl"
    raws = path.read_bytes().splitlines(keepends=True)
    assert b'"t":"ckpt"' in raws[2]
    raws[2] = raws[2].replace(b'"x"', b'"y"', 1)  # line 3: its checksum no longer matches
    path.write_bytes(b"".join(raws))
    cold = JsonlSaver(tmp_path)
    assert cold.get_tuple({"configurable": {"thread_id": "t"}}) is not None  # from the snapshot
    for _ in range(2):
        with pytest.raises(CorruptLogError, match=r"t\.jsonl:3: checksum mismatch"):
            list(cold.list({"configurable": {"thread_id": "t"}}))
    old = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": ids[3]}}
    with pytest.raises(CorruptLogError, match=r"t\.jsonl:3: "):
        cold.get_tuple(old)


def test_early_writes_apply_in_the_logs_order_whatever_the_snapshot_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task's later error write replaces its earlier one: the cold open applies the
    early lines in the log's order even where a (hand-edited) snapshot lists them
    otherwise, and `verify` then has nothing to say."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.memory import InMemorySaver

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 4)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 4)
    ids = [str(uuid6(clock_seq=i)) for i in range(4)]

    def build(saver: Any) -> None:
        _early_writes_thread(saver, ids[:3])
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": ids[3]}}
        saver.put_writes(config, [("__error__", "first error")], "T")
        saver.put_writes(config, [("__error__", "second error")], "T")
        checkpoint = empty_checkpoint()
        checkpoint.update(id=ids[3], channel_values={"x": 3}, channel_versions={"x": 4})
        parent = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": ids[2]}}
        saver.put(parent, checkpoint, {"step": 3, "source": "loop"}, {"x": 4})

    memory = InMemorySaver()
    build(memory)
    build(JsonlSaver(tmp_path))
    path = tmp_path / "t.jsonl"
    raws = path.read_bytes().splitlines()
    obj = loads_line(raws[-2])
    first, second = (
        next(n for n, raw in enumerate(raws, 1) if text in raw) for text in (b"first", b"second")
    )
    assert _ungaps(obj["early"][1]) == [second]  # the line whose write stands
    obj["early"] = [GAPS, _gaps([second, first])]  # the replaced line after its replacement
    raws[-2] = dumps_line(obj)[:-1]
    path.write_bytes(b"\n".join(raws) + b"\n")
    head = {"configurable": {"thread_id": "t"}}
    want = memory.get_tuple(head).pending_writes  # type: ignore[union-attr]
    assert want == [("T", "__error__", "second error")]
    assert JsonlSaver(tmp_path).get_tuple(head).pending_writes == want  # type: ignore[union-attr]
    assert not verify_file(path).problems


def test_a_partial_scan_that_reads_every_line_reads_the_missing_ones_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Redis hands a cold open (`PartialLines`: the snapshot and the lines after it)
    with a last snapshot not to start from (an earlier release's, without ``early``): the
    lines it lacks are read in one call, where each was read with a few neighbours (an
    existing Redis thread's cold open took 159 ms sync and 8 s async at 1,105 lines)."""
    from langgraph.checkpoint.base.id import uuid6

    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module
    from langgraph_ctx.saver._index import _Index
    from langgraph_ctx.storage.base import PartialLines

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 16)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 16)
    saver = JsonlSaver(tmp_path)
    _early_writes_thread(saver, [str(uuid6(clock_seq=i)) for i in range(60)])
    raws = (tmp_path / "t.jsonl").read_bytes().splitlines()
    last = max(n for n, raw in enumerate(raws) if raw.startswith(SNAP_PREFIX))
    obj = loads_line(raws[last])
    del obj["early"]  # as an earlier release wrote it
    raws[last] = dumps_line(obj)[:-1]
    calls: list[list[int]] = []

    def read(numbers: list[int]) -> dict[int, bytes]:
        calls.append(numbers)
        return {n: raws[n - 1] for n in numbers}

    known = {n: raws[n - 1] for n in range(last + 1, len(raws) + 1)} | {1: raws[0]}
    known |= {n: raw for n, raw in enumerate(raws, 1) if raw.startswith(SNAP_PREFIX)}
    index = _Index(where="t", reader=read, serde=saver.serde)
    index.feed(1, PartialLines(len(raws), known, read), skip_corrupt=False)
    assert len(calls) == 1 and len(calls[0]) == len(raws) - len(known)
    whole = _Index(where="t", reader=read, serde=saver.serde)
    whole.feed(1, raws, skip_corrupt=False, snapshots=False)
    head = whole.latest("")
    assert head is not None and index.latest("") == head
    assert index._writes == whole._writes


def _chat_log(root: Path, turns: int) -> tuple[Path, list[bytes]]:
    """Thread ``t`` of a chat graph after ``turns`` turns ("hi 0", ...) on a `JsonlSaver`
    at ``root``: its log and the log's lines."""
    from .test_saver_graphs import chat_graph

    graph = chat_graph().compile(checkpointer=JsonlSaver(root))
    for i in range(turns):
        graph.invoke({"messages": [HumanMessage(f"hi {i}")]}, {"configurable": {"thread_id": "t"}})
    log = root / "t.jsonl"
    return log, log.read_bytes().splitlines()


@pytest.mark.parametrize(
    ("where", "damage"),
    [
        ("a plain line", "checksum"),
        ("a plain line", "version"),
        ("the last snapshot's head", "checksum"),
        ("an earlier snapshot's head", "checksum"),
    ],
)
def test_skipping_a_bad_line_before_the_snapshot_keeps_one_latest_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, damage: str
) -> None:
    """With ``on_corrupt="skip"``, a bad checkpoint line before the last snapshot: a cold
    open answered the snapshot's head; a history call then read the whole log, skipped
    every checkpoint built on the bad line, and the same saver's latest state became the
    one before it (90 messages -> 61), which the next step continued (review 39). A
    snapshot is now where a skipping scan takes the thread up again, unless a line it
    names for its checkpoint is the damaged one (review 40: that made every history call
    raise): then neither a cold open starts from it nor a scan takes up there. Every read,
    of the same saver or a fresh one, gives one latest state, and the next step
    continues it."""
    from langgraph_ctx.codec.lines import parse_snapshot_line

    from .test_saver_graphs import chat_graph

    monkeypatch.setattr(_index, "SNAPSHOT_EVERY", 16)
    import langgraph_ctx.saver._batch as batch_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 16)
    config = {"configurable": {"thread_id": "t"}}
    log, lines = _chat_log(tmp_path, 12)
    objs = [json.loads(raw) for raw in lines]
    snaps = [i for i, o in enumerate(objs) if o["t"] == "snap"]
    at = snaps[-1]
    snap = parse_snapshot_line(loads_line(lines[at]), at + 1)
    named = {line for line, *_ in snap.lists}
    for h in snap.heads:
        named |= {h.head.line, *(w[1] for w in h.writers.values())}
    if where == "a plain line":
        bad = next(
            i for i in range(at - 1, 0, -1)
            if objs[i]["t"] == "ckpt" and i + 1 not in named
            and any(o.get("parent") == i + 1 for o in objs[i + 1 : at])
        )  # fmt: skip
    else:
        at = at if where == "the last snapshot's head" else snaps[-2]
        bad = parse_snapshot_line(loads_line(lines[at]), at + 1).heads[0].head.line - 1
    if damage == "checksum":
        lines[bad] = lines[bad].replace(b'"ts":"', b'"ts":"x', 1)
    else:
        obj = dict(objs[bad])
        del obj["c"]
        obj["versions"] = {"messages": {"not": "a version"}}
        lines[bad] = dumps_line(obj).rstrip(b"\n")
    log.write_bytes(b"\n".join(lines) + b"\n")

    def messages(app: Any) -> int:
        return len(app.get_state(config).values["messages"])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptLineWarning)
        app = chat_graph().compile(checkpointer=JsonlSaver(tmp_path, on_corrupt="skip"))
        latest = messages(app)
        if where == "the last snapshot's head":
            assert latest < 24  # the checkpoint before it: the snapshot cannot be read
        else:
            assert latest == 24  # the last snapshot's head: the whole conversation
        assert len(list(app.get_state_history(config))) > 1
        assert messages(app) == latest
        fresh = chat_graph().compile(checkpointer=JsonlSaver(tmp_path, on_corrupt="skip"))
        assert messages(fresh) == latest
        assert len(list(fresh.get_state_history(config))) > 1
        out = app.invoke({"messages": [HumanMessage("next")]}, config)
        assert len(out["messages"]) > latest
        assert out["messages"][:latest] == app.get_state(config).values["messages"][:latest]
        fresh = chat_graph().compile(checkpointer=JsonlSaver(tmp_path, on_corrupt="skip"))
        assert messages(fresh) == len(out["messages"])


def test_a_damaged_line_a_snapshot_names_is_named_and_never_taken_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each checkpoint with pending writes; a plain checkpoint line before the last
    snapshot damaged (the chain breaks there) and the line of the snapshot head's pending
    writes too. With ``on_corrupt="skip"`` a skipping scan took the snapshot up again and
    every history call raised on that writes line (review 41); the warning of a cold
    open passing over the snapshot named the snapshot's intact line with the damaged
    line's reason. Now: one latest state and one history for every reader, and the
    warning names the damaged line."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    import langgraph_ctx.saver._batch as batch_module
    from langgraph_ctx.codec.lines import parse_snapshot_line

    monkeypatch.setattr(_index, "SNAPSHOT_EVERY", 8)
    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 8)
    saver = JsonlSaver(tmp_path)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for i in range(1, 16):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        cp["channel_versions"] = {"x": i}
        cp["channel_values"] = {"x": f"value {i}"}
        config = saver.put(config, cp, {"step": i}, {"x": i})
        saver.put_writes(config, [("x", f"pending {i}")], f"task{i}")
    log = tmp_path / "t.jsonl"
    lines = log.read_bytes().splitlines()
    objs = [json.loads(raw) for raw in lines]
    at = max(i for i, o in enumerate(objs) if o["t"] == "snap")
    snap = parse_snapshot_line(loads_line(lines[at]), at + 1)
    (head,) = snap.heads
    named = {head.head.line, *(w[1] for w in head.writers.values()), *(w[4] for w in head.writes)}
    assert head.writes
    plain = next(
        i for i in range(at - 1, 0, -1) if objs[i]["t"] == "ckpt" and i + 1 not in named
    )
    lines[plain] = lines[plain].replace(b'"ts":"', b'"ts":"x', 1)  # its checksum fails
    writes = head.writes[0][4] - 1
    lines[writes] = lines[writes].replace(b'"task', b'"Task', 1)
    log.write_bytes(b"\n".join(lines) + b"\n")
    thread = {"configurable": {"thread_id": "t"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = JsonlSaver(tmp_path, on_corrupt="skip")
        latest = reader.get_tuple(thread)
    passed = [str(w.message) for w in caught if "reading the whole log instead" in str(w.message)]
    assert passed and f"line {head.writes[0][4]} it names cannot be read" in passed[0]
    assert "cannot leave it out" not in passed[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptLineWarning)
        history = [t.checkpoint["id"] for t in reader.list(thread)]
        assert reader.get_tuple(thread).checkpoint["id"] == latest.checkpoint["id"]  # type: ignore[union-attr]
        fresh = JsonlSaver(tmp_path, on_corrupt="skip")
        assert fresh.get_tuple(thread).checkpoint["id"] == latest.checkpoint["id"]  # type: ignore[union-attr]
        assert [t.checkpoint["id"] for t in fresh.list(thread)] == history


def test_a_skipped_message_line_is_the_one_named_when_a_read_needs_it(tmp_path: Path) -> None:
    """With ``on_corrupt="skip"``, a damaged message line the latest state holds raises
    (leaving it out would change the conversation); after a whole-log read, the error
    named the line that refers to it (a ``like`` line, the checkpoint's list) and said to
    fix that intact line (review 41). It names the damaged line, on every read."""
    config = {"configurable": {"thread_id": "t"}}
    log, lines = _chat_log(tmp_path, 4)
    bad = next(i for i, raw in enumerate(lines) if b'"content":"hi 2"' in raw)
    lines[bad] = lines[bad].replace(b'"content":"hi 2"', b'"content":"hi 2!"', 1)
    log.write_bytes(b"\n".join(lines) + b"\n")
    reader = JsonlSaver(tmp_path, on_corrupt="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptLineWarning)
        for read in (
            lambda: reader.get_tuple(config),
            lambda: list(reader.list(config)),
            lambda: reader.get_tuple(config),
            lambda: list(JsonlSaver(tmp_path, on_corrupt="skip").list(config)),
        ):
            with pytest.raises(CorruptLogError) as info:
                read()
            assert info.value.line == bad + 1, str(info.value)
