"""Redis misbehaving as production Redis does, on a real redis-server of each test's own
(trial 12): a lock whose reply never came, an unlock that got no answer, another client's
long script (``BUSY``), refused credentials and ACLs. Each gets the documented error, and
the next call on the thread goes through at once."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

import redis
import redis.exceptions

from langgraph_ctx.errors import (
    LockLostWarning,
    LockTimeoutError,
    StorageConfigError,
    StorageUnavailableError,
)
from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage.redis import RedisStorage, _RedisAio

from .cli_scenarios import chat_graph, config
from .redis_server import RedisServer, require_redis_server

SPIN = """
local t0 = redis.call('TIME')
local start = t0[1] + t0[2] / 1e6
while true do
  local t = redis.call('TIME')
  if t[1] + t[2] / 1e6 - start > tonumber(ARGV[1]) then return 1 end
end
"""
"""A script that keeps Redis busy for ARGV[1] seconds: every other client waits (or,
past ``busy-reply-threshold``, gets ``BUSY``), as behind any application's long script."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path / "redis", binary=require_redis_server()) as made:
        yield made


def _stall(url: str, seconds: float) -> threading.Thread:
    """Another client keeps Redis busy for ``seconds``, starting now."""
    admin = redis.Redis.from_url(url)
    stalling = threading.Thread(target=admin.eval, args=(SPIN, 0, str(seconds)), daemon=True)
    stalling.start()
    time.sleep(0.1)  # the script runs: commands sent from now on wait behind it
    return stalling


def _messages(graph, thread: str) -> list[str]:
    return [m.content for m in graph.get_state(config(thread)).values["messages"]]


def test_a_lock_taken_after_its_caller_gave_up_is_taken_over_by_the_next_call(server):
    """The lock script reaches Redis while Redis is busy; the client times out and
    gives up (`StorageUnavailableError`), then Redis runs it: the lock holds a token the
    process no longer holds. The next call on the thread takes it over from that token and
    gets in at once, rather than waiting the lock out (``lock_timeout``): before, it waited
    ``lock_wait`` and raised `LockTimeoutError` (or, with the defaults, stalled 30 s)."""
    saver = RedisLogSaver.from_url(
        server.url + "?socket_timeout=0.3", prefix="orphan", lock_timeout=20, lock_wait=2
    )
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    stalling = _stall(server.url, 1.2)
    with pytest.raises(StorageUnavailableError):
        saver.delete_thread("t")  # takes the lock first: the lock's reply never comes
    stalling.join()
    lock = redis.Redis.from_url(server.url).get("ctx:orphan:thread:{t}:lock")
    assert lock is not None  # Redis ran the lock script once the client had given up
    start = time.monotonic()
    graph.invoke({"messages": [("user", "two")]}, config("t"))
    assert time.monotonic() - start < 1.0
    assert _messages(graph, "t") == ["one", "you said: one", "two", "you said: two"]
    saver.close()


def test_an_async_lock_whose_reply_was_lost_is_taken_over(server, monkeypatch):
    """The async door likewise (a coroutine's first write to a thread takes the lock):
    here its lock script runs and its reply is lost on the way back."""
    saver = RedisLogSaver.from_url(server.url, prefix="aorphan", lock_timeout=20, lock_wait=2)
    graph = chat_graph(saver)
    owner = saver.storage._owner  # each lock token starts with it
    exchange = _RedisAio._exchange
    lost: list[bool] = []

    async def losing_a_lock_reply(door: _RedisAio, batch: list[Any]) -> list[Any]:
        results = await exchange(door, batch)
        if not lost and any(str(args[1]).startswith(owner) for _, _, args, _ in batch):
            lost.append(True)  # the lock script ran (asking with a token): its reply is lost
            raise redis.exceptions.TimeoutError("Timeout reading from socket")
        return results

    monkeypatch.setattr(_RedisAio, "_exchange", losing_a_lock_reply)

    async def run() -> None:
        with pytest.raises(StorageUnavailableError):
            await graph.ainvoke({"messages": [("user", "one")]}, config("t"))
        assert lost
        start = time.monotonic()
        await graph.ainvoke({"messages": [("user", "two")]}, config("t"))
        assert time.monotonic() - start < 1.0
        await saver.storage.aclose()

    asyncio.run(run())
    assert _messages(graph, "t")[-2:] == ["two", "you said: two"]
    saver.close()


def test_an_unlock_that_got_no_answer_leaves_the_thread_to_this_process(server, monkeypatch):
    """An unlock whose reply is lost (here the call fails before it is sent, so the lock
    stays held, as when Redis never ran it) warns that other processes wait for the lock
    to expire; this process takes the lock over from that token and carries on at once."""
    saver = RedisLogSaver.from_url(server.url, prefix="unlock", lock_timeout=20, lock_wait=2)
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    storage = saver.storage
    unlock = storage._scripts["unlock"]
    failures = [redis.exceptions.TimeoutError("Timeout reading from socket")]

    def lost(*args, **kwargs):
        if failures:
            raise failures.pop()
        return unlock(*args, **kwargs)

    monkeypatch.setitem(storage._scripts, "unlock", lost)
    expiring = pytest.warns(LockLostWarning, match="other processes wait for it to expire")
    with expiring, storage.locked("t", exclusive=True):
        pass  # a locked section that wrote nothing: it unlocks on leaving
    assert redis.Redis.from_url(server.url).get("ctx:unlock:thread:{t}:lock") is not None
    start = time.monotonic()
    graph.invoke({"messages": [("user", "two")]}, config("t"))
    assert time.monotonic() - start < 1.0
    assert _messages(graph, "t")[-1] == "you said: two"
    saver.close()


def test_busy_redis_is_unavailable_not_a_raw_redis_error(server):
    """``BUSY`` (another client's script past ``busy-reply-threshold``) is "not now", as
    ``LOADING`` is: `StorageUnavailableError`, sync and async; the thread is whole after."""
    admin = redis.Redis.from_url(server.url)
    admin.config_set("busy-reply-threshold", 100)
    saver = RedisLogSaver.from_url(server.url, prefix="busy")
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    fresh = RedisLogSaver.from_url(server.url, prefix="busy")  # must read from Redis
    stalling = _stall(server.url, 1.5)
    with pytest.raises(StorageUnavailableError, match="BUSY"):
        chat_graph(fresh).get_state(config("t"))
    with pytest.raises(StorageUnavailableError, match="BUSY"):
        asyncio.run(graph.ainvoke({"messages": [("user", "two")]}, config("t")))
    stalling.join()
    graph.invoke({"messages": [("user", "three")]}, config("t"))
    assert _messages(chat_graph(RedisLogSaver.from_url(server.url, prefix="busy")), "t") == [
        "one", "you said: one", "three", "you said: three"
    ]  # fmt: skip
    saver.close()
    fresh.close()


def test_refused_credentials_and_acls_are_config_errors(server):
    """A wrong password, and a user the ACL does not let run the saver's scripts, are
    `StorageConfigError`s naming the fix, not "unavailable, retry once the server is back"."""
    admin = redis.Redis.from_url(server.url)
    admin.acl_setuser("app", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"])
    admin.acl_setuser("reader", enabled=True, passwords=["+r3ad"], keys=["*"], commands=["+get"])
    port = server.port
    wrong = RedisLogSaver.from_url(f"redis://app:nope@127.0.0.1:{port}/0", prefix="acl")
    with pytest.raises(StorageConfigError, match="check the user and password") as err:
        chat_graph(wrong).invoke({"messages": [("user", "hi")]}, config("t"))
    assert "nope" not in str(err.value)  # the URL's password is not repeated
    limited = RedisLogSaver.from_url(f"redis://reader:r3ad@127.0.0.1:{port}/0", prefix="acl")
    with pytest.raises(StorageConfigError, match=r"scripting .* on the keys ctx:acl:thread:\*"):
        chat_graph(limited).invoke({"messages": [("user", "hi")]}, config("t"))
    with pytest.raises(StorageConfigError, match="check the user and password"):
        asyncio.run(chat_graph(wrong).ainvoke({"messages": [("user", "hi")]}, config("t")))
    right = RedisLogSaver.from_url(f"redis://app:s3cret@127.0.0.1:{port}/0", prefix="acl")
    chat_graph(right).invoke({"messages": [("user", "hi")]}, config("t"))
    assert _messages(chat_graph(right), "t") == ["hi", "you said: hi"]
    for saver in (wrong, limited, right):
        saver.close()


def test_a_tls_url_to_a_server_without_tls_says_so(server):
    """``rediss://`` to a plain port: redis-py reports a connect timeout, the handshake
    only in the chain; the error names the handshake and what to check."""
    url = (
        f"rediss://127.0.0.1:{server.port}/0"
        "?socket_timeout=0.4&socket_connect_timeout=0.4&ssl_cert_reqs=none"
    )
    saver = RedisLogSaver.from_url(url, prefix="tls")
    with pytest.raises(StorageUnavailableError, match=r"TLS handshake .* does that port serve TLS"):
        chat_graph(saver).get_state(config("t"))
    saver.close()


def test_a_late_unlock_of_a_cancelled_lock_call_never_frees_the_next_holders_lock(server):
    """A coroutine's lock call is cancelled after its script took the lock: its unlock is
    sent in the background, and the next holder (a sync caller on another OS thread)
    takes the lock over from that token with one of its own, so the unlock, arriving
    late, no longer matches (review 31: reusing the token, it freed the next holder's
    lock, and another process got in beside it)."""
    saver = RedisLogSaver.from_url(server.url, prefix="late", lock_wait=0.3)
    storage = saver.storage  # with an async client, made per loop
    other = RedisStorage.from_url(server.url, prefix="late", lock_wait=0.3)  # a process
    admin = redis.Redis.from_url(server.url)
    exchange = _RedisAio._exchange
    locked = threading.Event()

    async def slow_replies(door: _RedisAio, batch: list[Any]) -> list[Any]:
        unlock = any(script is door.scripts["unlock"] for script, *_ in batch)
        if unlock:
            await asyncio.sleep(0.3)  # the unlock is slow on its way to Redis
        results = await exchange(door, batch)
        if not unlock:
            locked.set()  # the lock script ran: its reply is slow to come back
            await asyncio.sleep(5)
        return results

    seen: list[str] = []

    def next_holder() -> None:
        with storage.locked("t", exclusive=True):
            time.sleep(0.8)  # the late unlock arrives meanwhile
            seen.append(repr(admin.get("ctx:late:thread:{t}:lock")))
            try:
                with other.locked("t", exclusive=True):
                    seen.append("another process got in")
            except LockTimeoutError:
                seen.append("another process waits")

    async def run() -> None:
        async def hold() -> None:
            async with storage._door().locked("t", exclusive=True):
                await asyncio.sleep(10)

        task = asyncio.create_task(hold())
        while not locked.is_set():
            assert not task.done(), task
            await asyncio.sleep(0.005)
        waiting = threading.Thread(target=next_holder)
        waiting.start()
        await asyncio.sleep(0.05)  # it waits for the thread's lock
        task.cancel()
        await asyncio.to_thread(waiting.join)
        await storage.aclose()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_RedisAio, "_exchange", slow_replies)
        asyncio.run(run())
    assert seen[0] != "None" and seen[1] == "another process waits"
    saver.close()
    other.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_share_its_parents_unanswered_lock(server, monkeypatch):
    """An unlock that got no answer leaves its token to be taken over; a process forked
    then has it too. Each takes the lock over with a token of its own, so only the first
    gets in (review 31: both asked with the same token, and both were let in)."""
    storage = RedisStorage.from_url(server.url, prefix="fork", lock_timeout=20, lock_wait=0.5)
    unlock = storage._scripts["unlock"]
    failures = [redis.exceptions.TimeoutError("Timeout reading from socket")]

    def lost(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return unlock(*args, **kwargs)

    monkeypatch.setitem(storage._scripts, "unlock", lost)
    with pytest.warns(LockLostWarning), storage.locked("t", exclusive=True):
        pass  # its unlock gets no answer: the lock stays held
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: waits until the parent holds the lock, then asks for it
        code = 2
        try:
            os.read(ready_r, 1)
            with storage.locked("t", exclusive=True):
                code = 1
        except LockTimeoutError:
            code = 0
        finally:
            os._exit(code)
    with storage.locked("t", exclusive=True):
        os.write(ready_w, b"x")
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # the child waited, and gave up
    storage.close()


def test_refused_cluster_credentials_are_config_errors_and_no_message_shows_a_password(server):
    """A cluster client wraps its nodes' refusals in an error of its own (by their text):
    still `StorageConfigError`; and a password in the URL's query (where docs/redis.md
    puts client options) is masked in messages as one in its user info (review 31)."""
    redis.Redis.from_url(server.url).config_set("requirepass", "s3cret")
    port = server.port
    for url in (
        f"redis+cluster://127.0.0.1:{port}?password=WRONG-ONE",
        f"redis+cluster://app:WRONG-ONE@127.0.0.1:{port}",
    ):
        with pytest.raises(StorageConfigError, match="check the user and password") as err:
            RedisLogSaver.from_url(url, prefix="cluster-auth")
        assert "WRONG-ONE" not in str(err.value)
    with pytest.raises(StorageConfigError, match=r"password=\*\*\*") as err:
        RedisLogSaver.from_url(f"redis://127.0.0.1:{port}/abc?password=WRONG-ONE")
    assert "WRONG-ONE" not in str(err.value)
