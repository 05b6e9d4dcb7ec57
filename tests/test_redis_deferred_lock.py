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

from .redis_server import RedisClusterServer, RedisServer
from .test_async_path import _chat, _config


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    server: RedisServer | RedisClusterServer = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "redis_cluster"
    )
    return server.url


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
        assert sorted((task, value) for task, _, value in again.pending_writes) == [
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
