"""A cold open's batch paths read as their one-at-a-time forms do.

`messages_unvalidated` builds a batch of message bodies in one loop and
`loads_message_lines` parses a batch of message lines with their checks in one
loop (`langgraph_ctx.saver._index._Index.decode_many`): each must answer what
`message_unvalidated` / `loads_line` answer for every input, good or not.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import (
    checksums_match,
    line_checksum,
    loads_line,
    loads_message_lines,
    parse_snapshot_line,
    peek_message_ordinal,
    seal_line,
)
from langgraph_ctx.codec.messages import (
    OWN_ID,
    like_body,
    message_to_json,
    message_unvalidated,
    messages_unvalidated,
)
from langgraph_ctx.errors import CodecError, CorruptLogError
from langgraph_ctx.storage.jsonl import JsonlStorage
from tests.test_cold_open import chat
from tests.test_cold_read import rewrite_message_line, shapes

ODD_BODIES: list[Any] = [
    {"type": "human", "content": "x", "surprise": 1},
    {"type": "ai", "content": "x", "additional_kwargs": {"tool_calls": []}},
    {"type": "tool", "content": "x", "tool_call_id": "c", "status": "maybe"},
    {"type": "human"},
    {"type": "ai", "content": "x", "usage_metadata": {"input_tokens": 1}},
    {"type": "nope", "content": "x"},
    {"type": ["human"], "content": "x"},
    {"content": "x"},
    "human",
    None,
    {"type": "human", "content": 7},
    {"type": "remove", "id": "r1", "content": ""},
]


def same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return (
        type(a) is type(b)
        and list(a.__dict__.items()) == list(b.__dict__.items())
        and a.__pydantic_fields_set__ == b.__pydantic_fields_set__
        and a.__pydantic_extra__ == b.__pydantic_extra__
        and a.__pydantic_private__ == b.__pydantic_private__
    )


def test_a_batch_builds_what_each_body_builds() -> None:
    rng = random.Random(11)
    bodies = [orjson.loads(orjson.dumps(message_to_json(shapes(rng)))) for _ in range(300)]
    bodies += ODD_BODIES
    rng.shuffle(bodies)
    batch = messages_unvalidated(bodies)
    assert len(batch) == len(bodies)
    assert sum(m is not None for m in batch) >= 300
    for body, built in zip(bodies, batch, strict=True):
        assert same(built, message_unvalidated(body)), body
    assert messages_unvalidated([]) == []


def careful(raw: bytes, ordinal: int) -> dict | None:
    try:
        obj = loads_line(raw)
    except CodecError:
        return None
    return obj if obj.get("t") == "msg" and obj.get("n") == ordinal else None


@pytest.fixture(scope="module")
def message_lines(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[bytes, int]]:
    root = tmp_path_factory.mktemp("log")
    saver = JsonlSaver(root)
    chat(saver, "t", 40)
    raws = Path(saver.path("t")).read_bytes().split(b"\n")[:-1]
    return [(raw, n) for raw in raws if (n := peek_message_ordinal(raw)) is not None]


@pytest.mark.parametrize(
    "odd",
    [
        seal_line(b'{"v":2,"t":"msg","n":5,"like":1,"id":"x"}'),  # another ordinal
        seal_line(b'{"v":2,"t":"ckpt","n":0}'),  # another kind
        seal_line(b'{"v":4,"t":"msg","n":0}'),  # newer format
        seal_line(b'{"v":true,"t":"msg","n":0}'),  # a version that is not an int
        seal_line(b'{"v":2.0,"t":"msg","n":0}'),
        seal_line(b"[0]"),
        b'{"v":1,"t":"msg","n":0,"msg":{"type":"human","content":"old"}}',  # format 1
        seal_line(b'{"v":2,"t":"msg","n":0,"msg":{}}')[:-3] + b'A"}',  # damaged
        seal_line(b'{"v":2,"t":"msg","n":123456789012345678901234567890}'),
    ],
)
def test_message_lines_read_as_each_line_reads(
    message_lines: list[tuple[bytes, int]], odd: bytes
) -> None:
    raws = [raw for raw, _ in message_lines]
    ordinals = [n for _, n in message_lines]
    assert loads_message_lines(raws, ordinals) == [careful(r, n) for r, n in message_lines]
    at = len(raws) // 2
    raws.insert(at, odd)
    ordinals.insert(at, 0)
    expect = [careful(r, n) for r, n in zip(raws, ordinals, strict=True)]
    assert loads_message_lines(raws, ordinals) == expect
    assert loads_message_lines([], []) == []


@pytest.mark.parametrize("kind", [["ai"], {"t": 1}, 3, None])
def test_a_head_message_of_an_odd_type_is_refused_by_line(tmp_path: Path, kind: Any) -> None:
    """A head message whose ``type`` is no string (rewritten with a valid checksum)
    is a `CorruptLogError` naming its line, not a ``TypeError`` of the lookup."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 60)
    n = rewrite_message_line(
        Path(writer.path("t")), b"turn 40:", lambda body: body.update(type=kind)
    )
    with pytest.raises(CorruptLogError, match=f":{n}:.*message type"):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize(
    ("gaps", "lines"),
    [
        ([5, 2, 3], [5, 7, 10]),  # the usual part: increasing
        ([5, None, 3], [5, None, 8]),  # a message skipped as corrupt
        ([7, -2, 4], [7, 5, 9]),  # not increasing: still lines before the snapshot
        ([9, 0, 1], [9, 9, 10]),
    ],
)
def test_snapshot_message_lines_read_in_every_form(gaps: list, lines: list) -> None:
    obj = {"v": 2, "t": "snap", "msgs": [4, "d", gaps], "heads": [], "lists": []}
    snap = parse_snapshot_line(obj, 20)
    assert (snap.first_msg, snap.msg_lines, snap.next_msg) == (4, lines, 4 + len(lines))
    old_form = {**obj, "msgs": [4, lines]}  # numbers, not gaps (written before gaps)
    assert parse_snapshot_line(old_form, 20).msg_lines == lines


@pytest.mark.parametrize(
    "gaps",
    [[5, 2, 13], [20], [0, 1], [3, True], [3, 1.0], [-1, 2], [5, None, 15], "5", [[5]]],
)
def test_snapshot_message_lines_not_before_it_are_refused(gaps: Any) -> None:
    obj = {"v": 2, "t": "snap", "msgs": [0, "d", gaps], "heads": [], "lists": []}
    with pytest.raises(CodecError, match="snapshot"):
        parse_snapshot_line(obj, 20)


@pytest.mark.parametrize("scan", [True, False])
def test_a_batch_with_some_lines_parsed_already_reads_the_same(
    tmp_path: Path, scan: bool
) -> None:
    """Some of the head's message lines parsed and cached by an earlier read, the rest
    read now (from the cold scan, or from the file): the messages are the warm ones,
    and nothing the cache holds is handed out as a message's body."""
    writer = JsonlSaver(tmp_path)
    chat(writer, "t", 60)
    config: Any = {"configurable": {"thread_id": "t"}}

    def head_messages(saver: JsonlSaver) -> list[Any]:
        tup = saver.get_tuple(config)
        assert tup is not None
        return tup.checkpoint["channel_values"]["messages"]  # type: ignore[no-any-return]

    warm = head_messages(writer)
    cold = JsonlSaver(tmp_path)
    index = cold._sync("t")
    head = index.latest("")
    assert head is not None
    writer_line = index.resolve("", "messages", head.versions["messages"], head.id)
    assert writer_line is not None
    ordinals = index.materialize(writer_line[1], "messages")
    index.prefetch(index.msg_lines[o] for o in ordinals[::3])  # a third parsed already
    cached = {n: dict(index.parsed[n]) for n in list(index.parsed)}
    if not scan:
        index.scan = None
    messages = index.messages(ordinals)
    assert messages == warm
    for n, obj in cached.items():  # the cached lines are as they were
        if n in index.parsed:
            assert index.parsed[n] == obj
    again = head_messages(cold)
    assert all(a is b for a, b in zip(messages, again, strict=True))


def test_bulk_checksums_answer_as_each_line_on_odd_lines(
    message_lines: list[tuple[bytes, int]],
) -> None:
    """Lines too short to hold a checksum, a checksum whose last character sets the
    padding bits, a suffix one byte off: the batch answers what `line_checksum` does
    for each, alone and among good lines."""
    good = message_lines[0][0]
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    sixth = alphabet.index(good[-3]) ^ 1  # the checksum's last character, a zero bit set
    odd = [
        b"",
        b'"}',
        b"x" * 13,
        b',"c":"AAAAAA"}',
        good[:-3] + alphabet[sixth : sixth + 1] + b'"}',  # a padding bit set
        good[:-14] + b';"c":"' + good[-8:],
        good[:-1] + b"]",
        good + b" ",
    ]
    goods = [raw for raw, _ in message_lines[:6]]
    assert checksums_match(goods)
    for raw in odd:
        alone = line_checksum(raw) is True
        assert checksums_match([raw]) is alone, raw
        assert checksums_match([*goods[:3], raw, *goods[3:]]) is alone, raw


LIKE_IDS: list[Any] = [OWN_ID, "id-new", "id-new", None, 7, ""]


def test_a_batch_of_likes_builds_what_their_like_bodies_build() -> None:
    """A ``like`` built from the body it repeats and its own id (`messages_unvalidated`
    with ``ids``) is the message of the like body `like_body` makes, for every shape and
    id (a string, none, not a string), and the repeated body is left as it was."""
    rng = random.Random(12)
    bodies = [orjson.loads(orjson.dumps(message_to_json(shapes(rng)))) for _ in range(300)]
    bodies += ODD_BODIES
    rng.shuffle(bodies)
    ids = [rng.choice(LIKE_IDS) for _ in bodies]
    before = repr(bodies)
    batch = messages_unvalidated(bodies, ids)
    assert repr(bodies) == before
    built = 0
    for body, new_id, msg in zip(bodies, ids, batch, strict=True):
        if new_id is OWN_ID or not isinstance(body, dict):
            expect = message_unvalidated(body)
        else:
            expect = message_unvalidated(like_body(body, new_id))
        assert same(msg, expect), (body, new_id)
        built += msg is not None and new_id == "id-new"
    assert built >= 50
    with pytest.raises(ValueError):
        messages_unvalidated(bodies, ids[:-1])


def test_a_like_message_changed_in_place_reads_as_stored(tmp_path: Path) -> None:
    """A cold read keeps a like's repeated body and id for its fingerprint: an edit made
    in place to that message is seen, and the next read gives the message as stored."""
    chat(JsonlSaver(tmp_path), "t", 30)
    cold = JsonlSaver(tmp_path)
    config: Any = {"configurable": {"thread_id": "t"}}

    def head_messages() -> list[Any]:
        tup = cold.get_tuple(config)
        assert tup is not None
        return tup.checkpoint["channel_values"]["messages"]  # type: ignore[no-any-return]

    first = head_messages()
    index = cold._indexes["t"]
    likes = [o for o, entry in index.templates.items() if len(entry) == 4]
    assert likes, "the chat's head holds like lines"
    at = next(i for i, m in enumerate(first) if m is index.templates[likes[0]][0])
    stored = first[at].content
    first[at].content = "changed in place"
    again = head_messages()
    assert again[at] is not first[at]
    assert again[at].content == stored
    assert again[at].id == first[at].id
    fresh = JsonlSaver(tmp_path)
    tup = fresh.get_tuple(config)
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"][at] == again[at]


def test_line_offsets_are_the_ends_of_the_lines(tmp_path: Path) -> None:
    """`JsonlStorage.sync` records where each line ends, for a cold read and after an
    append; a line read back by number is that line."""
    storage = JsonlStorage(tmp_path)
    rng = random.Random(5)
    first = [b"x" * rng.randrange(0, 300) + b"%d" % i for i in range(500)]
    path = storage.path("t")
    path.write_bytes(b"".join(line + b"\n" for line in first))
    with storage.locked("t", exclusive=False):
        synced = storage.sync("t")
    assert list(synced.lines) == first
    more = [b"y" * rng.randrange(0, 300) for _ in range(50)]
    with path.open("ab") as f:
        f.write(b"".join(line + b"\n" for line in more))
    with storage.locked("t", exclusive=False):
        synced = storage.sync("t")
        assert synced.first_line == 501 and list(synced.lines) == more
        every = first + more
        ends = list(itertools.accumulate(len(line) + 1 for line in every))
        assert list(storage._states["t"].offsets) == [0, *ends]
        picked = [1, 2, 250, 500, 501, 550]
        assert storage.read_many("t", picked) == {n: every[n - 1] for n in picked}
