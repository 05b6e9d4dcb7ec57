"""What a cold open does cheaply, checked against the careful path it replaces.

- Message lines are checked and parsed in bulk (`loads_lines`, `checksums_match`): the
  same answer as `loads_line`, line by line, for good, damaged and unusual lines.
- Messages are built unvalidated in one pass (`message_unvalidated`): equal to validation.
- The head's message lines come from the lines the cold scan just read (`_Index.scan`),
  only for a storage whose lines a lock keeps (JSONL), only until the next call, and
  for one index at a time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import (
    checksums_match,
    dumps_line,
    line_checksum,
    loads_line,
    loads_lines,
    seal_line,
)
from langgraph_ctx.codec.messages import MESSAGE_CLASSES, message_to_json, message_unvalidated
from langgraph_ctx.errors import CodecError, CorruptLogError
from langgraph_ctx.saver import _index
from tests.backends import Backend
from tests.test_cold_open import chat, tuple_view

CONFIG = {"configurable": {"thread_id": "t"}}


def careful(raw: bytes) -> dict | None:
    try:
        return loads_line(raw)
    except CodecError:
        return None


@pytest.fixture(scope="module")
def real_lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Every line of a 100-turn chat log (messages, checkpoints, writes, snapshots)."""
    root = tmp_path_factory.mktemp("log")
    saver = JsonlSaver(root)
    chat(saver, "t", 100)
    return Path(saver.path("t")).read_bytes().split(b"\n")[:-1]


# ------------------------------------------------------------- bulk line parsing


def test_bulk_parse_equals_line_by_line(real_lines: list[bytes]) -> None:
    assert checksums_match(real_lines)
    assert loads_lines(real_lines) == [loads_line(raw) for raw in real_lines]
    assert loads_lines([]) == []


def test_bulk_checksums_agree_with_each_line_on_damage(real_lines: list[bytes]) -> None:
    """One byte changed anywhere (the body, the checksum, its quotes): the bulk check
    says what `line_checksum` says, and a batch with one damaged line fails as a whole."""
    rng = random.Random(16)
    for _ in range(400):
        raw = bytearray(rng.choice(real_lines))
        at = rng.randrange(len(raw)) if rng.random() < 0.7 else len(raw) - rng.randrange(1, 15)
        raw[at] = rng.randrange(256)
        damaged = bytes(raw)
        alone = line_checksum(damaged) is True
        assert checksums_match([damaged]) == alone
        batch = [*real_lines[:5], damaged, *real_lines[5:9]]
        assert checksums_match(batch) == alone


@pytest.mark.parametrize(
    "raw",
    [
        b'{"v":1,"t":"msg","n":0,"msg":{"type":"human","content":"old"}}',  # format 1
        seal_line(b'{"v":2,"t":"msg","n":0}')[:-3] + b'+"}',  # not base64url
        seal_line(b'{"v":2,"t":"msg","n":0}')[:-8] + b'AAAA=="}',  # padding inside
        seal_line(b'{"v":2,"t":"msg","n":0}')[:-8] + b'AA!A A"}',  # what decoding skips
        seal_line(b'[1,2]'),  # not an object
        seal_line(b'{"v":4,"t":"msg","n":0}'),  # newer format
        seal_line(b'{"v":2,"t":"nope","n":0}'),  # unknown kind
        seal_line(b'{"v":true,"t":"msg","n":0}'),  # a version that is not an int
        seal_line(b'{"v":2,"t":"msg","n":123456789012345678901234567890}'),  # past orjson
        seal_line(b'{"v":2,"t":"msg",'),  # not JSON
        b"",
        b'"}',
    ],
)
def test_unusual_lines_read_as_loads_line_reads_them(real_lines: list[bytes], raw: bytes) -> None:
    """Each line gets the answer `loads_line` gives it (``None`` where it raises),
    alone or among good lines."""
    assert loads_lines([raw]) == [careful(raw)]
    batch = [real_lines[1], raw, real_lines[2]]
    assert loads_lines(batch) == [careful(r) for r in batch]


# ------------------------------------------------------------ one-pass building


def shapes(rng: random.Random) -> BaseMessage:
    """A message of a common shape with a random choice of its optional fields."""
    kind = rng.choice(["human", "ai", "tool"])
    extra: dict[str, Any] = {}
    if rng.random() < 0.5:
        extra["id"] = f"id-{rng.randrange(99)}"
    if rng.random() < 0.3:
        extra["name"] = "bob"
    if rng.random() < 0.3:
        extra["additional_kwargs"] = {"k": [1, {"z": "y"}]}
    if rng.random() < 0.3:
        extra["response_metadata"] = {"model": "m", "stop": None}
    content: Any = rng.choice(["text", "", [{"type": "text", "text": "x"}, "y"]])
    if kind == "human":
        return HumanMessage(content, **extra)
    if kind == "tool":
        return ToolMessage(
            content, tool_call_id="c1", status=rng.choice(["success", "error"]), **extra
        )
    if rng.random() < 0.5:
        extra["tool_calls"] = [
            {"name": "f", "args": {"q": rng.randrange(5), "deep": {"a": [1]}}, "id": "c1"}
        ]
    if rng.random() < 0.4:
        extra["usage_metadata"] = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    return AIMessage(content, **extra)


def test_one_pass_building_equals_validation() -> None:
    """Same class, fields in the same order, fields set and extras, and nothing shared
    with the parsed body, for 300 messages of the shapes a cold open meets."""
    rng = random.Random(7)
    for _ in range(300):
        message = shapes(rng)
        data = orjson.loads(orjson.dumps(message_to_json(message)))
        cls = MESSAGE_CLASSES[data["type"]]
        validated = cls.model_validate(orjson.loads(orjson.dumps(data)))
        built = message_unvalidated(data)
        assert built is not None, data
        assert type(built) is type(validated)
        assert list(built.__dict__.items()) == list(validated.__dict__.items())
        assert built.__pydantic_fields_set__ == validated.__pydantic_fields_set__
        assert built.__pydantic_extra__ == validated.__pydantic_extra__ == {}
        for key, value in built.__dict__.items():
            if isinstance(value, (dict, list)) and value:
                assert value is not data.get(key), key


@pytest.mark.parametrize(
    "data",
    [
        {"type": "human", "content": "x", "surprise": 1},  # not a field: validation keeps it
        {"type": "ai", "content": "x", "additional_kwargs": {"tool_calls": []}},
        {"type": "tool", "content": "x", "tool_call_id": "c", "status": "maybe"},
        {"type": "human"},  # no content
        {"type": "ai", "content": "x", "usage_metadata": {"input_tokens": 1}},
    ],
)
def test_bodies_validation_would_change_are_not_built(data: dict) -> None:
    assert message_unvalidated(dict(data)) is None


# ------------------------------------------------------- the cold scan's lines


def count_reads(saver: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line numbers the saver's storage is asked for by `read_many` / `read`."""
    asked: list[int] = []
    storage = saver.storage
    real_many, real_one = storage.read_many, storage.read

    def read_many(thread_id: str, lines: Any) -> dict[int, bytes]:
        lines = list(lines)
        asked.extend(lines)
        return real_many(thread_id, lines)  # type: ignore[no-any-return]

    def read(thread_id: str, line: int) -> bytes:
        asked.append(line)
        return real_one(thread_id, line)  # type: ignore[no-any-return]

    monkeypatch.setattr(storage, "read_many", read_many)
    monkeypatch.setattr(storage, "read", read)
    return asked


def test_a_cold_open_reads_the_log_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head's 200 messages come from the lines the scan read: the storage is asked
    for none of them again; the state, the history and the next turn are what a warm
    saver has."""
    writer = JsonlSaver(tmp_path)
    graph = chat(writer, "t", 100)
    cold = JsonlSaver(tmp_path)
    asked = count_reads(cold, monkeypatch)
    got = cold.get_tuple(CONFIG)
    assert asked == []
    assert len(got.checkpoint["channel_values"]["messages"]) == 200
    assert tuple_view(got) == tuple_view(writer.get_tuple(CONFIG))
    assert [tuple_view(t) for t in cold.list(CONFIG)] == [
        tuple_view(t) for t in writer.list(CONFIG)
    ]
    state = graph.get_state(CONFIG)
    graph.checkpointer = cold
    assert graph.get_state(CONFIG).values == state.values


def test_the_scan_is_let_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept only until the thread's next call (which reads what was appended meanwhile
    from the log), and by one index at a time."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 60)
    chat(writer, "u", 60)
    cold = JsonlSaver(tmp_path)
    cold.get_tuple(CONFIG)
    first = cold._indexes["t"]
    assert first.scan is not None
    cold.get_tuple({"configurable": {"thread_id": "u"}})
    assert first.scan is None and cold._indexes["u"].scan is not None
    chat(writer, "u", 2, start=60)  # another process appends
    asked = count_reads(cold, monkeypatch)
    got = cold.get_tuple({"configurable": {"thread_id": "u"}})
    assert cold._indexes["u"].scan is None
    assert asked  # the new turns' lines come from the log
    assert tuple_view(got) == tuple_view(writer.get_tuple({"configurable": {"thread_id": "u"}}))


def test_an_evicted_index_lets_its_scan_go(tmp_path: Path) -> None:
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 60)
    chat(writer, "u", 5)
    cold = JsonlSaver(tmp_path, max_cached_threads=1)
    cold.get_tuple(CONFIG)
    index = cold._indexes["t"]
    cold.get_tuple({"configurable": {"thread_id": "u"}})
    assert "t" not in cold._indexes and index.scan is None
    assert cold._scanned is cold._indexes["u"]


def test_redis_lines_are_read_from_redis(backend: Backend) -> None:
    """A storage whose reads check the log was not rewritten since the sync (Redis)
    keeps no scan: every read still goes through that check."""
    writer = backend.saver()
    chat(writer, "t", 60)
    cold = backend.saver()
    assert tuple_view(cold.get_tuple(CONFIG)) == tuple_view(writer.get_tuple(CONFIG))
    assert (cold._indexes["t"].scan is not None) == cold.storage.reads_from_sync


def test_a_damaged_head_message_in_the_scan(tmp_path: Path) -> None:
    """A head message line changed on disk is refused by name, as before: the bulk
    check fails and the line is read again and named."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)
    path = Path(writer.path("t"))
    lines = path.read_bytes().split(b"\n")[:-1]
    n = next(
        i for i, raw in enumerate(lines, 1) if b'"t":"msg"' in raw and b"turn 40:" in raw
    )
    lines[n - 1] = lines[n - 1].replace(b"turn 40:", b"turn 41:")
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    with pytest.raises(CorruptLogError, match=f":{n}:.*checksum"):
        JsonlSaver(tmp_path).get_tuple(CONFIG)
    skipping = JsonlSaver(tmp_path, on_corrupt="skip")
    with pytest.raises(CorruptLogError, match=f":{n}:"):  # the head needs it: no silent gap
        skipping.get_tuple(CONFIG)


def rewrite_message_line(path: Path, marker: bytes, edit: Callable[[dict[str, Any]], None]) -> int:
    """Rewrite the first ``msg`` line of the log at ``path`` holding ``marker``: its body
    changed by ``edit``, sealed with a valid checksum (an edit, not damage). Its number."""
    lines = path.read_bytes().split(b"\n")[:-1]
    n = next(i for i, raw in enumerate(lines, 1) if b'"t":"msg"' in raw and marker in raw)
    obj = loads_line(lines[n - 1])
    edit(obj["msg"])
    lines[n - 1] = dumps_line(obj)[:-1]
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    return n


def test_a_retyped_message_line_is_read_as_written(tmp_path: Path) -> None:
    """A head message rewritten with a valid checksum (an edit, not damage) is what a
    reader gets: the bulk path checks lines, it does not second-guess their content."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 100)

    def edit(body: dict[str, Any]) -> None:
        body["content"] = body["content"].replace("turn 40:", "turn 40 (edited):")

    rewrite_message_line(Path(writer.path("t")), b"turn 40:", edit)
    messages = JsonlSaver(tmp_path).get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert sum("turn 40 (edited):" in m.content for m in messages) == 1


def test_decoding_in_batches_keeps_order_and_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_index, "_DECODE_BATCH", 7)
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 60)
    cold = JsonlSaver(tmp_path)
    first = cold.get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    again = cold.get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert first == writer.get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert all(a is b for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_a_log_split_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """`sync` splits the log as it reads it, whatever the chunk size against the lines
    (lines longer than a chunk, a newline at a chunk's end, a torn last line)."""
    from langgraph_ctx.errors import TornLineWarning
    from langgraph_ctx.storage import jsonl

    monkeypatch.setattr(jsonl, "_SPLIT_CHUNK", chunk)
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 3)
    path = Path(writer.path("t"))
    data = path.read_bytes()
    expected = data.split(b"\n")[:-1]
    storage = jsonl.JsonlStorage(tmp_path)
    with storage.locked("t", exclusive=False):
        synced = storage.sync("t")
    assert synced.first_line == 1 and synced.lines == expected
    assert storage.read_many("t", range(1, len(expected) + 1)) == dict(
        enumerate(expected, 1)
    )
    path.write_bytes(data + b'{"v":2,"t":"ms')  # a crash in the middle of a line
    torn = jsonl.JsonlStorage(tmp_path)
    with torn.locked("t", exclusive=False), pytest.warns(TornLineWarning):
        assert torn.sync("t").lines == expected
