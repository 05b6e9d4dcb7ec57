"""RedisLogSaver's cold open from the last snapshot (issue #16, item 4), on a server and a cluster.

A fresh saver reads a long thread with one script call: the header, the ``snap`` lines
and the lines from the last one on (`RedisStorage._whole`); what the head needs before
it is read on demand with plain LRANGEs, and history completes the index lazily
(`_Index.complete`, the same code as for JSONL). A snapshot that does not match the log
is passed over with a warning and the whole log is read.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from langgraph_ctx.codec.lines import SNAP_PREFIX, SNAPSHOT_EVERY, dumps_line, loads_line
from langgraph_ctx.errors import CorruptLineWarning
from langgraph_ctx.storage.base import PartialLines

from .backends import RedisBackend
from .test_cold_open import (
    as_gaps,
    chat,
    late_writes,
    plain_numbers,
    point_head_elsewhere,
    snap_lines,
    swap_messages,
    tuple_view,
)

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage import redis as redis_storage
from langgraph_ctx.storage.redis import RedisStorage

CONFIG = {"configurable": {"thread_id": "t"}}


@pytest.fixture(params=["redis", "redis-cluster"])
def rb(request):
    """A fresh prefix on the session's server, or on its three-master cluster."""
    fixture = "redis_server" if request.param == "redis" else "redis_cluster"
    server = request.getfixturevalue(fixture)
    made = RedisBackend(server.url, name=request.param)
    yield made
    made.close()


@pytest.fixture(autouse=True)
def short_logs_open_from_their_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The saver reads a log of fewer than ``4 * SNAPSHOT_EVERY`` lines whole (one round
    trip); these tests' threads are shorter, so the bar is lowered to one snapshot."""
    cold = list(redis_storage._COLD)
    cold[1] = SNAPSHOT_EVERY
    monkeypatch.setattr(redis_storage, "_COLD", cold)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each whole-log sync handed the saver: a `PartialLines` (from a snapshot)
    or a list (every line)."""
    seen: list[Any] = []
    whole = RedisStorage._whole

    def spy(self: RedisStorage, thread_id: str, reply: list[Any]) -> Any:
        result = yield from whole(self, thread_id, reply)
        seen.append(result[0])
        return result

    monkeypatch.setattr(RedisStorage, "_whole", spy)
    return seen


def full_read(rb: RedisBackend, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    """The head and the history as a saver reads them from every line (no snapshot)."""
    with monkeypatch.context() as m:
        m.setattr(redis_storage, "_COLD", [0, 10**9, SNAP_PREFIX, 0])
        saver = rb.saver()
        head = tuple_view(saver.get_tuple(CONFIG))
        history = [tuple_view(t) for t in saver.list(CONFIG)]
        assert not saver._indexes["t"].partial
    return head, history


def last_snapshot(rb: RedisBackend, thread_id: str) -> int:
    key = rb._key(thread_id)
    return snap_lines(rb.client.lrange(key, 0, -1))[-1]


def tamper(rb: RedisBackend, thread_id: str, change: Any) -> int:
    """Rewrite the thread's last snapshot line with ``change`` (a valid checksum: the line
    is well formed, what it says is wrong); returns its line number."""
    key = rb._key(thread_id)
    n = last_snapshot(rb, thread_id)
    obj = plain_numbers(loads_line(rb.client.lindex(key, n - 1)))
    change(obj)
    as_gaps(obj)
    rb.client.lset(key, n - 1, dumps_line(obj)[:-1])
    return n


def test_a_cold_open_from_the_snapshot_equals_a_full_read(
    rb: RedisBackend, reads: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = rb.saver()
    chat(writer, "t", 120)
    total = rb.client.llen(rb._key("t"))
    assert len(snap_lines(rb.client.lrange(rb._key("t"), 0, -1))) >= 3
    head, history = full_read(rb, monkeypatch)
    assert head == tuple_view(writer.get_tuple(CONFIG))
    reads.clear()

    cold = rb.saver()
    got = tuple_view(cold.get_tuple(CONFIG))
    assert isinstance(reads[0], PartialLines) and len(reads[0]) == total
    # one script call brought the header, the snapshot chain and the tail: not the log
    assert len(reads[0].known) < total / 2
    assert cold._indexes["t"].partial  # the lines before the snapshot are not indexed yet
    assert got == head
    assert [tuple_view(t) for t in cold.list(CONFIG)] == history  # completes the index
    assert not cold._indexes["t"].partial
    chat(cold, "t", 2, start=120)  # writing goes on from a cold open, and reads back
    assert tuple_view(rb.saver().get_tuple(CONFIG)) == tuple_view(cold.get_tuple(CONFIG))


async def test_the_async_door_opens_from_the_snapshot_too(
    rb: RedisBackend, reads: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = rb.saver()
    chat(writer, "t", 80)
    head, history = full_read(rb, monkeypatch)
    reads.clear()
    async with RedisLogSaver.from_url(rb.url, prefix=rb.prefix) as cold:
        assert cold.storage.aio() is not None
        got = tuple_view(await cold.aget_tuple(CONFIG))
        assert isinstance(reads[0], PartialLines)
        assert got == head
        assert [tuple_view(t) async for t in cold.alist(CONFIG)] == history


def test_only_the_lines_the_head_needs_are_read(rb: RedisBackend, reads: list[Any]) -> None:
    """Checkpoint metadata and ids need no message line: nothing before the snapshot
    is read beyond what its checks name, and the cache keeps the holes."""
    writer = rb.saver(cache_bytes=64 << 20)
    chat(writer, "t", 120)
    cold = rb.saver()
    with cold.storage.locked("t", exclusive=False):
        cold._sync("t")
    entry = cold.storage._cache.entries["t"]
    assert None in entry  # lines never fetched
    assert entry.count(None) > len(entry) / 2
    assert cold.get_tuple(CONFIG) is not None  # then the messages are read, all at once
    assert None not in cold.storage._cache.entries["t"]


def point_prev_past_the_end(obj: dict) -> None:
    obj["prev"] = 10**6


def forget_prev(obj: dict) -> None:
    del obj["prev"]


@pytest.mark.parametrize(
    ("change", "late"),
    [
        (swap_messages, False),
        (point_head_elsewhere, False),
        (point_prev_past_the_end, False),
        (forget_prev, False),
        (swap_messages, True),
    ],
)
def test_a_snapshot_that_does_not_match_is_passed_over(
    rb: RedisBackend, reads: list[Any], change: Any, late: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages swapped, a head on another line, a ``prev`` pointing past the end of the
    list or missing: a warning names the snapshot line and the whole list is read.

    ``late``: writes after the snapshot to a checkpoint it left out (LangGraph's
    background ``put_writes`` landing late, which depends on thread timing) wait for the
    lines before: the cold open still reads the head from the snapshot, so messages
    swapped in it are still caught when the head's messages are read."""
    writer = rb.saver()
    chat(writer, "t", 100)
    if late:
        late_writes(writer, "t")
    head, history = full_read(rb, monkeypatch)
    n = tamper(rb, "t", change)
    reads.clear()
    cold = rb.saver()
    with pytest.warns(CorruptLineWarning, match=f":{n}: snapshot"):
        got = tuple_view(cold.get_tuple(CONFIG))
    if late:
        assert isinstance(reads[0], PartialLines)
    assert got == head
    assert not cold._indexes["t"].partial
    assert [tuple_view(t) for t in cold.list(CONFIG)] == history


def test_a_log_without_a_snapshot_near_its_end_is_read_whole(
    rb: RedisBackend, reads: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written before snapshots existed: the script finds none and the saver reads every
    line with plain LRANGEs."""
    from langgraph_ctx.saver import _batch

    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 10**9)
    writer = rb.saver()
    chat(writer, "t", 60)
    assert snap_lines(rb.client.lrange(rb._key("t"), 0, -1)) == []
    reads.clear()
    cold = rb.saver()
    assert tuple_view(cold.get_tuple(CONFIG)) == tuple_view(writer.get_tuple(CONFIG))
    assert isinstance(reads[0], list) and len(reads[0]) == rb.client.llen(rb._key("t"))


def test_a_short_log_is_read_whole_in_one_round_trip(
    rb: RedisBackend, reads: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_storage, "_COLD", [4 * SNAPSHOT_EVERY, 10**6, SNAP_PREFIX, 64])
    writer = rb.saver()
    chat(writer, "t", 60)
    assert snap_lines(rb.client.lrange(rb._key("t"), 0, -1))
    reads.clear()
    cold = rb.saver()
    assert tuple_view(cold.get_tuple(CONFIG)) == tuple_view(writer.get_tuple(CONFIG))
    assert isinstance(reads[0], list) and len(reads[0]) == rb.client.llen(rb._key("t"))


def test_a_rewrite_between_the_script_and_the_reads_is_retried(
    rb: RedisBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines before the snapshot are read after the script: if the log was rewritten
    in between (here: reverted by another process), the read says so and the saver
    reads the new log from the start."""
    writer = rb.saver()
    chat(writer, "t", 100)
    target = [t for t in writer.list(CONFIG)][40].config["configurable"]["checkpoint_id"]
    cold = rb.saver()
    ranges = RedisStorage._ranges
    done: list[bool] = []

    def rewrite_first(self: RedisStorage, thread_id: str, state: Any, runs: Any) -> Any:
        if not done:
            done.append(True)
            rb.saver().revert("t", target)
        return (yield from ranges(self, thread_id, state, runs))

    monkeypatch.setattr(RedisStorage, "_ranges", rewrite_first)
    got = cold.get_tuple(CONFIG)
    assert done and got.config["configurable"]["checkpoint_id"] == target
    assert tuple_view(got) == tuple_view(rb.saver().get_tuple(CONFIG))


def test_thread_ids_stay_in_their_slot(rb: RedisBackend) -> None:
    """The script names only the thread's own keys (one slot): any id opens cold."""
    tid = f"slot-{uuid.uuid4().hex}:{{x}}"
    config = {"configurable": {"thread_id": tid}}
    writer = rb.saver()
    chat(writer, tid, 70)
    assert tuple_view(rb.saver().get_tuple(config)) == tuple_view(writer.get_tuple(config))


def test_a_write_as_the_first_call_opens_from_the_snapshot(
    rb: RedisBackend, reads: list[Any]
) -> None:
    """A writer's first call on a thread reads it in the script that takes the lock:
    the same cold read from the snapshot, then the write lands after the last line."""
    from langchain_core.messages import AIMessage

    writer = rb.saver()
    chat(writer, "t", 100)
    head = writer.get_tuple(CONFIG)
    reads.clear()
    cold = rb.saver()
    cold.put_writes(head.config, [("messages", [AIMessage("late", id="late")])], "task-1")
    assert isinstance(reads[0], PartialLines)
    got = rb.saver().get_tuple(CONFIG)
    assert got.checkpoint["id"] == head.checkpoint["id"]
    assert [(w[0], w[1], [m.content for m in w[2]]) for w in got.pending_writes][-1] == (
        "task-1",
        "messages",
        ["late"],
    )


def test_a_read_that_fails_half_way_leaves_no_half_built_index(
    rb: RedisBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis unreachable while a cold open reads the lines its first read did not bring
    (here: a last snapshot without ``early``, an earlier release's, so every line is
    read): the call raises, and the same saver then reads the thread whole, where it
    took the lines as indexed (an empty thread, whose next put wrote a second header:
    every reader refused the log after)."""
    from langgraph_ctx.errors import StorageUnavailableError

    writer = rb.saver()
    chat(writer, "t", 60)
    key = rb._key("t")
    for i, raw in enumerate(rb.client.lrange(key, 0, -1)):
        if raw.startswith(SNAP_PREFIX):
            obj = loads_line(raw)
            del obj["early"]
            rb.client.lset(key, i, dumps_line(obj)[:-1])
    want = tuple_view(rb.saver().get_tuple(CONFIG))
    cold = rb.saver()
    real = cold.storage.read_many
    failed: list[int] = []

    def read_many(thread_id: str, lines: Any) -> Any:
        lines = list(lines)
        if len(lines) > 16 and not failed:
            failed.append(len(lines))
            raise StorageUnavailableError("redis", "read", "stopped answering", write=False)
        return real(thread_id, lines)

    monkeypatch.setattr(cold.storage, "read_many", read_many)
    with pytest.raises(StorageUnavailableError):
        cold.get_tuple(CONFIG)
    assert failed  # the whole read of the lines the snapshot leaves out
    assert tuple_view(cold.get_tuple(CONFIG)) == want
    chat(cold, "t", 1, start=60)
    assert tuple_view(rb.saver().get_tuple(CONFIG)) == tuple_view(cold.get_tuple(CONFIG))
