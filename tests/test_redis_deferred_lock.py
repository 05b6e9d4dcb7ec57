"""Redis async writes that skip the writer lock: one round trip a put, never a wrong log.

On the async door, a write to a thread this process has read takes no Redis lock
(`_ThreadLock`'s ``deferred`` hold): its append runs only if the log is still what was
read and nobody holds the lock. These tests make the other cases happen for real (another
saver's writes, a lock held elsewhere) on a real server and on a Redis Cluster.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

from langgraph_ctx.errors import LockTimeoutError
from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage import redis as storage_redis

from .redis_server import RedisServer
from .test_async_path import _chat, _config


@pytest.fixture
def prefix() -> str:
    return f"deferred-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The async door's script calls, in order: ``append`` (with the lock token),
    ``append?`` (deferred: no lock), ``lock`` (the snapshot script taking the lock),
    ``read`` (the snapshot script reading), ``unlock``."""
    calls: list[str] = []
    real_call = storage_redis._RedisAio._call

    async def counted(self: Any, run: Any) -> Any:
        if run.name == "append":
            calls.append("append?" if run.args[0] == "?" else "append")
        elif run.name == "snapshot":
            calls.append("lock" if run.args[1] else "read")
        else:
            calls.append(run.name)
        return await real_call(self, run)

    monkeypatch.setattr(storage_redis._RedisAio, "_call", counted)
    yield calls


def _texts(state: Any) -> list[str]:
    return [m.content for m in state["messages"]]


def test_a_warm_async_turn_takes_no_lock(redis_url: str, prefix: str, scripts: list[str]) -> None:
    """A thread's first write takes the lock (nothing read yet); after that each write is
    one script call, and each turn reads once (its ``get_tuple``)."""

    async def main() -> list[str]:
        async with RedisLogSaver.from_url(redis_url, prefix=prefix) as saver:
            graph = _chat(saver)
            await graph.ainvoke({"messages": [("user", "one")]}, _config("t"))
            scripts.clear()
            state = await graph.ainvoke({"messages": [("user", "two")]}, _config("t"))
            return _texts(state)

    assert asyncio.run(main()) == ["one", "echo one", "two", "echo two"]
    assert scripts[0] == "read"
    assert "lock" not in scripts and "unlock" not in scripts
    assert scripts.count("append?") == len(scripts) - 1 >= 3  # 3 checkpoints + writes
    with RedisLogSaver.from_url(redis_url, prefix=prefix) as fresh:  # a cold reader agrees
        assert _texts(_chat(fresh).get_state(_config("t")).values) == [
            "one", "echo one", "two", "echo two"
        ]  # fmt: skip


def test_lines_another_writer_appended_make_the_write_retry_under_the_lock(
    redis_url: str, prefix: str, scripts: list[str]
) -> None:
    """Another process appends between this one's read and its write: the write finds the
    log changed, reads the new lines under the lock and appends after them, once."""
    other = RedisLogSaver.from_url(redis_url, prefix=prefix)

    async def main() -> Any:
        async with RedisLogSaver.from_url(redis_url, prefix=prefix) as saver:
            graph = _chat(saver)
            await graph.ainvoke({"messages": [("user", "a")]}, _config("t"))
            head = await saver.aget_tuple(_config("t"))
            assert head is not None
            _chat(other).invoke({"messages": [("user", "b")]}, _config("t"))  # sync, elsewhere
            scripts.clear()
            await saver.aput_writes(head.config, [("notes", "late")], "task-1")
            assert scripts == ["append?", "lock", "append"]
            scripts.clear()  # the next write skips the lock again
            await saver.aput_writes(head.config, [("notes", "later")], "task-2")
            assert scripts == ["append?"]
            return head.config

    config = asyncio.run(main())
    with other:
        again = other.get_tuple(config)
        assert again is not None
        assert sorted((task, value) for task, _, value in again.pending_writes or []) == [
            ("task-1", "late"), ("task-2", "later")
        ]  # fmt: skip
        assert _texts(_chat(other).get_state(_config("t")).values) == ["a", "echo a", "b", "echo b"]
        lines = other.storage.read_all("t")
        assert len(lines) == len(set(lines))  # nothing appended twice


def test_a_lock_held_elsewhere_stops_a_write_that_skipped_it(
    redis_url: str, prefix: str, scripts: list[str]
) -> None:
    """The deferred append refuses while another writer holds the lock; the retry waits
    for it as any writer does (here past ``lock_wait``: `LockTimeoutError`, log unchanged)."""
    admin = storage_redis.connect(redis_url)

    async def main() -> list[str]:
        async with RedisLogSaver.from_url(redis_url, prefix=prefix, lock_wait=0.2) as saver:
            graph = _chat(saver)
            await graph.ainvoke({"messages": [("user", "a")]}, _config("t"))
            lock = saver.key("t") + ":lock"
            admin.set(lock, "other-host:4242:1:abc", px=10_000)
            scripts.clear()
            with pytest.raises(LockTimeoutError, match="locked by other-host:4242"):
                await graph.ainvoke({"messages": [("user", "b")]}, _config("t"))
            assert scripts[:3] == ["read", "append?", "lock"]
            assert set(scripts[3:]) == {"lock"}  # waited, never wrote
            assert _texts((await graph.aget_state(_config("t"))).values) == ["a", "echo a"]
            admin.delete(lock)
            state = await graph.ainvoke({"messages": [("user", "b")]}, _config("t"))
            return _texts(state)

    try:
        assert asyncio.run(main()) == ["a", "echo a", "b", "echo b"]
    finally:
        admin.close()


# ------------------------------------------------- the batched sender (`_RedisAio._exchange`)


@pytest.mark.parametrize("native", [True, False], ids=["hiredis", "python"])
def test_the_batched_evalshas_are_what_redis_py_would_send(native: bool) -> None:
    """`_pack_evalshas` writes the wire form redis-py's own packer writes, for every kind
    of argument a script call carries (str keys and tokens, bytes lines, ints, floats),
    with hiredis's packer and without."""
    from redis.asyncio.connection import Connection

    class Script:
        sha = "a" * 40

    calls: list[tuple[Any, list[str], list[Any]]] = [
        (Script(), ["ctx:{t}", "ctx:{t}:gen"], ["", 0, 17, b"", b"\x00\xff", 1.5]),
        (Script(), ["k\u00e9y"], ["?", 30000, b'{"msg":"h\\u00e9llo"}' * 500, -1]),
    ]
    batch = [(script, keys, args, None) for script, keys, args in calls]
    connection = Connection()
    expected = b"".join(
        b"".join(connection.pack_command("EVALSHA", script.sha, len(keys), *keys, *args))
        for script, keys, args in calls
    )
    packed = storage_redis._pack_evalshas(batch, connection.encoder, native=native)  # type: ignore[arg-type]
    assert packed == expected


def test_a_server_that_stops_answering_fails_the_batch_then_recovers(tmp_path: Any) -> None:
    """Replies that never come: every call of the batch fails with
    `StorageUnavailableError` after the socket timeout (the batch is sent once more on a
    new connection first), and once the server answers again so do the calls."""
    import signal
    import time

    from langgraph_ctx.errors import StorageUnavailableError

    with RedisServer(tmp_path) as server:
        assert server.process is not None
        pid = server.process.pid

        async def main() -> list[list[str]]:
            aclient = storage_redis.connect_async(server.url, socket_timeout=0.5)
            with RedisLogSaver(server.url, prefix="frozen", async_client=aclient) as saver:
                graph = _chat(saver)
                for t in range(4):
                    await graph.ainvoke({"messages": [("user", "hi")]}, _config(f"t{t}"))
                os.kill(pid, signal.SIGSTOP)
                try:
                    started = time.monotonic()
                    with pytest.raises(StorageUnavailableError, match="Timeout"):
                        await asyncio.gather(
                            *(graph.ainvoke({"messages": [("user", "x")]}, _config(f"t{t}"))
                              for t in range(4))
                        )  # fmt: skip
                    assert time.monotonic() - started < 4.0  # two 0.5 s waits, not 5 s ones
                finally:
                    os.kill(pid, signal.SIGCONT)
                states = await asyncio.gather(
                    *(graph.ainvoke({"messages": [("user", "after")]}, _config(f"t{t}"))
                      for t in range(4))
                )  # fmt: skip
                await aclient.aclose()
            return [_texts(state)[-2:] for state in states]

        assert asyncio.run(main()) == [["after", "echo after"]] * 4


def test_a_deferred_write_that_appends_nothing_checks_the_log(redis_url: str, prefix: str) -> None:
    """`aput_writes` finding its writes stored appends nothing, so no append script checks
    the log: the release checks it, and a log reverted elsewhere meanwhile runs the call
    again under the lock, which stores the writes the revert dropped."""
    from langgraph.checkpoint.base import empty_checkpoint

    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    ours = RedisLogSaver.from_url(redis_url, prefix=prefix)
    other = RedisLogSaver.from_url(redis_url, prefix=prefix)
    reader = RedisLogSaver.from_url(redis_url, prefix=prefix)

    async def main() -> None:
        first = await ours.aput(config, empty_checkpoint(), {}, {})
        await ours.aput_writes(first, [("x", 1)], "task-1")
        await ours.aput(first, empty_checkpoint(), {}, {})
        other.revert("t", first["configurable"]["checkpoint_id"])
        dropped = reader.get_tuple(first)
        assert dropped is not None and dropped.pending_writes == []
        await ours.aput_writes(first, [("x", 1)], "task-1")
        saved = RedisLogSaver.from_url(redis_url, prefix=prefix).get_tuple(first)
        assert saved is not None and saved.pending_writes == [("task-1", "x", 1)]
        await ours.aput_writes(first, [("x", 1)], "task-1")  # unchanged now: kept once
        again = RedisLogSaver.from_url(redis_url, prefix=prefix).get_tuple(first)
        assert again is not None and again.pending_writes == [("task-1", "x", 1)]

    try:
        asyncio.run(main())
    finally:
        for saver in (ours, other, reader):
            saver.close()
