"""The saver's native async path (saver/_drive.py): JSONL's inline door on the event loop,
Redis on ``redis.asyncio``; the same operations as the sync path, the same results."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.server import jsonl_checkpointer

from .backends import Backend
from .conftest import normalize
from .redis_server import RedisClusterServer, RedisServer

ON_REDIS_CLUSTER = True  # the backend tests run on a Redis Cluster too


def inline_saver(root: Path | str) -> JsonlSaver:
    saver = JsonlSaver(root)
    assert saver.storage.aio() is not None  # the default
    return saver


@checkpointer_test(name="JsonlSaver(inline_async)")
async def jsonl_inline() -> Any:
    with tempfile.TemporaryDirectory() as root:
        yield inline_saver(root)


async def test_the_inline_async_door_passes_the_conformance_suite() -> None:
    report = await validate(jsonl_inline)
    failures = [f for r in report.results.values() for f in r.failures]
    assert failures == []


def _chat(saver: Any) -> Any:
    async def bot(state: MessagesState) -> dict[str, Any]:  # no executor under ainvoke
        return {"messages": [("ai", f"echo {state['messages'][-1].content}")]}

    def sync_bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"echo {state['messages'][-1].content}")]}

    from langchain_core.runnables import RunnableLambda

    builder = StateGraph(MessagesState)
    builder.add_node("bot", RunnableLambda(sync_bot, afunc=bot))
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


@pytest.fixture
def no_thread_hop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any `asyncio.to_thread` (the old async API, and the fallback without a door)."""

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"asyncio.to_thread called with {args[:1]}")

    monkeypatch.setattr(asyncio, "to_thread", refused)


# ------------------------------------------------------------------ JSONL


def test_a_writer_waiting_on_another_process_lock_does_not_block_the_loop(
    tmp_path: Path,
) -> None:
    saver = inline_saver(tmp_path)
    graph = _chat(saver)
    config = _config("t")
    graph.invoke({"messages": [("user", "hi")]}, config)  # makes the lock file
    lock_file = Path(saver.root_dir) / ".locks" / "t.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock_file)!r}, os.O_RDWR)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"

        async def main() -> tuple[int, bool, int]:
            task = asyncio.create_task(graph.ainvoke({"messages": [("user", "again")]}, config))
            ticks = 0
            for _ in range(40):  # 0.2 s of a loop that keeps running
                await asyncio.sleep(0.005)
                ticks += 1
            done_while_held = task.done()
            assert holder.stdin is not None
            holder.stdin.write("\n")  # the other process lets go
            holder.stdin.flush()
            state = await task
            return ticks, done_while_held, len(state["messages"])

        ticks, done_while_held, n_messages = asyncio.run(main())
    finally:
        holder.kill()
        holder.wait()
    assert ticks == 40
    assert not done_while_held
    assert n_messages == 4


def test_fsync_flushes_off_the_loop_once_per_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import langgraph_ctx.storage.jsonl as jsonl

    flushes: list[bool] = []
    real = jsonl._datasync

    def counted(fd: int) -> None:
        flushes.append(threading.current_thread() is threading.main_thread())
        real(fd)

    monkeypatch.setattr(jsonl, "_datasync", counted)
    graph = _chat(JsonlSaver(tmp_path, fsync=True))
    state = asyncio.run(graph.ainvoke({"messages": [("user", "hi")]}, _config("t")))
    assert len(state["messages"]) == 2
    checkpoints = len(list(graph.get_state_history(_config("t"))))
    assert len(flushes) == checkpoints  # one fdatasync per checkpoint ...
    assert not any(flushes)  # ... none of them on the event loop's thread


def test_the_server_factory_uses_the_thread_door(tmp_path: Path) -> None:
    async def main() -> Any:
        async with jsonl_checkpointer(tmp_path) as saver:
            assert saver.storage.aio() is None  # blocking-call detectors refuse file calls
            graph = _chat(saver)
            return await graph.ainvoke({"messages": [("user", "hi")]}, _config("t"))

    assert len(asyncio.run(main())["messages"]) == 2
    assert JsonlSaver(tmp_path, inline_async=False).storage.aio() is None


# ------------------------------------------------------- both backends


def _talk_concurrently(graph: Any, threads: int, turns: int) -> None:
    async def talk(t: int) -> None:
        for i in range(turns):
            await graph.ainvoke({"messages": [("user", f"{t}-{i}")]}, _config(f"t{t}"))

    async def main() -> None:
        await asyncio.gather(*(talk(t) for t in range(threads)))

    asyncio.run(main())


def test_many_concurrent_threads_end_as_the_sync_path_ends(backend: Backend) -> None:
    async_graph = _chat(backend.saver())
    threads, turns = 20, 4
    _talk_concurrently(async_graph, threads, turns)
    sync_graph = _chat(backend.saver())
    for t in range(threads):
        for i in range(turns):
            sync_graph.invoke({"messages": [("user", f"{t}-{i}")]}, _config(f"s{t}"))
    fresh = _chat(backend.saver())  # a fresh process reads what the async path wrote
    for t in range(threads):
        got = normalize(fresh.get_state(_config(f"t{t}")).values)
        assert got == normalize(sync_graph.get_state(_config(f"s{t}")).values)
        assert len(got["messages"]) == 2 * turns
        history = list(fresh.get_state_history(_config(f"t{t}")))
        assert len(history) == len(list(sync_graph.get_state_history(_config(f"s{t}"))))


def test_async_and_sync_writers_interleave_on_one_thread(backend: Backend) -> None:
    """One process writes through the async door, another through the sync one: each
    reads what the other appended (a sync step, or a Redis retry) before writing."""
    async_graph = _chat(backend.saver())
    sync_graph = _chat(backend.saver())
    config = _config("shared")
    for i in range(4):
        asyncio.run(async_graph.ainvoke({"messages": [("user", f"a{i}")]}, config))
        sync_graph.invoke({"messages": [("user", f"s{i}")]}, config)
    contents = [m.content for m in _chat(backend.saver()).get_state(config).values["messages"]]
    expected = [x for i in range(4) for x in (f"a{i}", f"echo a{i}", f"s{i}", f"echo s{i}")]
    assert contents == expected


# ------------------------------------------------------------------ Redis


@pytest.fixture
def redis_saver(redis_url: str) -> Iterator[Any]:
    from langgraph_ctx.saver.redis import RedisLogSaver

    saver = RedisLogSaver.from_url(redis_url, prefix=f"aio-{uuid.uuid4().hex[:8]}")
    yield saver
    saver.close()


def test_redis_async_calls_use_the_async_client_only(
    redis_saver: Any, no_thread_hop: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_commands: list[Any] = []
    client = redis_saver.client
    real = client.execute_command

    def counted(*args: Any, **kwargs: Any) -> Any:
        sync_commands.append(args[:1])
        return real(*args, **kwargs)

    monkeypatch.setattr(client, "execute_command", counted)
    graph = _chat(redis_saver)

    async def main() -> list[Any]:
        for i in range(3):
            await graph.ainvoke({"messages": [("user", f"hi {i}")]}, _config("t"))
        history = [s async for s in graph.aget_state_history(_config("t"))]
        await redis_saver.storage.aclose()
        return history

    history = asyncio.run(main())
    assert sync_commands == []  # no command went through the sync client
    assert len(history) == 9  # input, loop and bot checkpoints of three turns
    monkeypatch.setattr(client, "execute_command", real)
    sync_graph = _chat(redis_saver)  # and the sync path reads exactly what it wrote
    assert normalize(sync_graph.get_state(_config("t")).values) == normalize(
        history[0].values
    )


def test_redis_async_cold_reads_wait_for_lines_not_cached(redis_url: str) -> None:
    """With no line cache, decoding a state needs round trips the async door awaits
    (`_LinesNotReady`): the results are those of the sync path."""
    from langgraph_ctx.saver.redis import RedisLogSaver

    prefix = f"aio-{uuid.uuid4().hex[:8]}"
    with RedisLogSaver.from_url(redis_url, prefix=prefix) as writer:
        graph = _chat(writer)
        for i in range(6):
            graph.invoke({"messages": [("user", f"hi {i}")]}, _config("t"))
        expected = normalize(graph.get_state(_config("t")).values)
        expected_history = len(list(graph.get_state_history(_config("t"))))

    async def cold() -> tuple[Any, int]:
        async with RedisLogSaver.from_url(redis_url, prefix=prefix, cache_bytes=0) as reader:
            graph = _chat(reader)
            state = await graph.aget_state(_config("t"))
            history = [s async for s in graph.aget_state_history(_config("t"))]
            await graph.ainvoke({"messages": [("user", "more")]}, _config("t"))
            return normalize(state.values), len(history)

    got, n_history = asyncio.run(cold())
    assert got == expected
    assert n_history == expected_history
    with RedisLogSaver.from_url(redis_url, prefix=prefix) as again:
        assert len(_chat(again).get_state(_config("t")).values["messages"]) == 14


def test_redis_takes_an_async_client_of_its_own(redis_server: RedisServer) -> None:
    import redis
    import redis.asyncio

    from langgraph_ctx.saver.redis import RedisLogSaver

    prefix = f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> int:
        aclient = redis.asyncio.Redis.from_url(redis_server.url)
        saver = RedisLogSaver(redis.Redis.from_url(redis_server.url), prefix=prefix,
                              async_client=aclient)
        try:
            state = await _chat(saver).ainvoke({"messages": [("user", "hi")]}, _config("t"))
            return len(state["messages"])
        finally:
            await aclient.aclose()
            saver.client.close()

    assert asyncio.run(main()) == 2
    # A sync client and no async one: no door, the async API runs in a worker thread.
    plain = RedisLogSaver(redis.Redis.from_url(redis_server.url), prefix=prefix)
    assert plain.storage.aio() is None
    state = asyncio.run(_chat(plain).ainvoke({"messages": [("user", "again")]}, _config("t")))
    assert len(state["messages"]) == 4
    plain.client.close()


def test_redis_async_decode_responses_is_refused(redis_server: RedisServer) -> None:
    import redis.asyncio

    from langgraph_ctx.saver.redis import RedisLogSaver

    async def main() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
        saver = RedisLogSaver(redis_server.url, async_client=aclient)
        try:
            with pytest.raises(ValueError, match="decode_responses"):
                await saver.aget_tuple(_config("t"))
        finally:
            await aclient.aclose()
            saver.close()

    asyncio.run(main())


def test_redis_async_batches_survive_a_script_flush(redis_server: RedisServer) -> None:
    """Concurrent calls go out as one pipeline of EVALSHAs: after SCRIPT FLUSH (a
    restarted server) each call loads its script again and gets its own reply."""
    import redis

    from langgraph_ctx.saver.redis import RedisLogSaver

    prefix = f"aio-{uuid.uuid4().hex[:8]}"
    admin = redis.Redis.from_url(redis_server.url)

    async def main() -> list[int]:
        async with RedisLogSaver.from_url(redis_server.url, prefix=prefix) as saver:
            graph = _chat(saver)

            async def turn(t: int, text: str) -> int:
                state = await graph.ainvoke({"messages": [("user", text)]}, _config(f"t{t}"))
                return len(state["messages"])

            await asyncio.gather(*(turn(t, "hi") for t in range(8)))
            admin.script_flush()
            return await asyncio.gather(*(turn(t, "again") for t in range(8)))

    try:
        assert asyncio.run(main()) == [4] * 8
    finally:
        admin.close()


def test_redis_async_reports_a_server_that_is_gone(tmp_path: Path) -> None:
    from langgraph_ctx.errors import StorageUnavailableError
    from langgraph_ctx.saver.redis import RedisLogSaver

    with RedisServer(tmp_path) as server:
        url = server.url

        async def main() -> None:
            async with RedisLogSaver.from_url(url, prefix="gone") as saver:
                graph = _chat(saver)
                await graph.ainvoke({"messages": [("user", "hi")]}, _config("t"))
                server.stop(kill=True)
                with pytest.raises(StorageUnavailableError, match="unavailable"):
                    await asyncio.gather(
                        *(graph.ainvoke({"messages": [("user", "x")]}, _config(f"t{t}"))
                          for t in range(4))
                    )

        asyncio.run(main())


def test_redis_async_writes_wait_for_replicas(tmp_path: Path) -> None:
    """``wait_for_replicas`` on the async door: script and WAIT on one connection (on a
    cluster, the master of the thread's slot), and the same error when replicas lag."""
    from langgraph_ctx.errors import StorageUnavailableError
    from langgraph_ctx.saver.redis import RedisLogSaver

    from .test_redis_cluster import thread_on

    with RedisServer(tmp_path / "primary") as primary:
        replica = RedisServer(tmp_path / "replica", replica_of=primary).start()
        try:

            async def on_one_server() -> list[str]:
                async with RedisLogSaver.from_url(
                    primary.url, prefix="w", wait_for_replicas=1, replica_timeout=0.3
                ) as saver:
                    graph = _chat(saver)
                    await graph.ainvoke({"messages": [("user", "replicated")]}, _config("t"))
                    replica.stop()
                    with pytest.raises(StorageUnavailableError, match="only 0 of 1 replicas"):
                        await graph.ainvoke({"messages": [("user", "lost")]}, _config("t"))
                with RedisLogSaver.from_url(primary.url, prefix="w") as plain:
                    values = _chat(plain).get_state(_config("t")).values
                return [m.content for m in values["messages"]]

            contents = asyncio.run(on_one_server())
            assert contents[:2] == ["replicated", "echo replicated"]
        finally:
            replica.stop()

    with RedisClusterServer(tmp_path / "cluster", masters=2, replicas=[0]) as cluster:
        with_replica, without = cluster.ports

        async def on_a_cluster() -> int:
            async with RedisLogSaver.from_url(
                cluster.url, prefix="w", wait_for_replicas=1, replica_timeout=0.2
            ) as saver:
                graph = _chat(saver)
                kept = thread_on(saver, with_replica, "kept")
                state = await graph.ainvoke({"messages": [("user", "a")]}, _config(kept))
                lonely = thread_on(saver, without, "lonely")
                with pytest.raises(StorageUnavailableError, match="only 0 of 1 replicas"):
                    await graph.ainvoke({"messages": [("user", "a")]}, _config(lonely))
                return len(state["messages"])

        assert asyncio.run(on_a_cluster()) == 2


def test_a_cancelled_async_write_leaves_no_lock_behind(backend: Backend) -> None:
    """Cancelling ``ainvoke`` at any point (a server's request timeout) releases the
    thread's lock: the next writer, here another process's sync one, gets in at once."""
    import random

    kwargs = {"lock_wait": 2.0} if backend.name != "jsonl" else {}
    graph = _chat(backend.saver(**kwargs))
    rng = random.Random(5)

    async def main() -> None:
        for i in range(25):
            task = asyncio.create_task(
                graph.ainvoke({"messages": [("user", f"c{i}")]}, _config("t"))
            )
            await asyncio.sleep(rng.random() * 0.004)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.sleep(0.05)  # the releases of cancelled lock takes have run

    asyncio.run(main())
    other = _chat(backend.saver(**kwargs))
    started = time.monotonic()
    state = other.invoke({"messages": [("user", "after")]}, _config("t"))
    assert time.monotonic() - started < 1.5
    assert [m.content for m in state["messages"]][-2:] == ["after", "echo after"]


def test_a_write_cancelled_as_it_takes_the_redis_lock_releases_it(
    redis_saver: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worst moment: the lock script ran (the lock is ours in Redis), and the task is
    cancelled before it learns so. The lock is dropped at once, not after lock_timeout.
    (A write takes the lock once its first try, without it, found another writer's lines.)"""
    from langgraph_ctx.saver.redis import RedisLogSaver
    from langgraph_ctx.storage import redis as storage_redis

    graph = _chat(redis_saver)
    asyncio.run(graph.ainvoke({"messages": [("user", "hi")]}, _config("t")))
    real_run = storage_redis._RedisAio.run
    other_writer = RedisLogSaver.from_url(redis_url, prefix=redis_saver.prefix)

    async def cancelled_after_locking(self: Any, steps: Any) -> Any:
        result = await real_run(self, steps)
        if steps.__name__ == "_acquire_steps":
            raise asyncio.CancelledError  # as if task.cancel() arrived with the reply
        return result

    monkeypatch.setattr(storage_redis._RedisAio, "run", cancelled_after_locking)

    async def main() -> None:
        head = await redis_saver.aget_tuple(_config("t"))
        with other_writer:  # another process appends after this one read the log
            _chat(other_writer).invoke({"messages": [("user", "between")]}, _config("t"))
        with pytest.raises(asyncio.CancelledError):
            await redis_saver.aput_writes(head.config, [("messages", [])], "task-1")
        await asyncio.sleep(0.05)  # the release runs in a task of its own
        await redis_saver.storage.aclose()

    asyncio.run(main())
    monkeypatch.setattr(storage_redis._RedisAio, "run", real_run)
    with RedisLogSaver.from_url(redis_url, prefix=redis_saver.prefix, lock_wait=1.0) as other:
        state = _chat(other).invoke({"messages": [("user", "after")]}, _config("t"))
    assert [m.content for m in state["messages"]][-2:] == ["after", "echo after"]


def test_redis_async_nested_messages_wait_for_lines_not_cached(redis_url: str) -> None:
    """Messages nested in a value (a dict of lists) decoded on the async door with no
    line cache: when a read needs a line again (a message edited in place by its
    holder), the driver fetches it and runs the step again; never a 'corrupt log'."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_ctx.saver.redis import RedisLogSaver

    prefix = f"aio-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {
        "notes": {"kept": [HumanMessage(f"m{i}", id=f"id{i}") for i in range(20)]}
    }
    checkpoint["channel_versions"] = {"notes": "1"}

    async def main() -> list[str]:
        async with RedisLogSaver.from_url(redis_url, prefix=prefix, cache_bytes=0) as saver:
            meta: Any = {"step": 0, "source": "input", "parents": {}}
            await saver.aput(config, checkpoint, meta, {"notes": "1"})
        async with RedisLogSaver.from_url(redis_url, prefix=prefix, cache_bytes=0) as saver:
            first = await saver.aget_tuple(config)
            assert first is not None
            first.checkpoint["channel_values"]["notes"]["kept"][0].content = "edited in place"
            seen = []
            for _ in range(2):
                again = await saver.aget_tuple(config)
                assert again is not None
                seen.append(again.checkpoint["channel_values"]["notes"]["kept"][0].content)
            return seen

    assert asyncio.run(main()) == ["m0", "m0"]


def test_a_cancelled_redis_append_that_committed_warns_of_no_lost_lock(
    redis_saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled once its append went out (in the loop's pipeline), a write still commits
    and that releases the lock: the exit finds it gone, which is no ``LockLostWarning``."""
    import warnings

    from langgraph_ctx.errors import LockLostWarning
    from langgraph_ctx.storage import redis as storage_redis

    graph = _chat(redis_saver)
    asyncio.run(graph.ainvoke({"messages": [("user", "hi")]}, _config("t")))
    real_script = storage_redis._RedisAio._script
    armed = [True]

    def cancel_after_queuing(self: Any, script: Any, keys: Any, args: Any) -> Any:
        queued = real_script(self, script, keys, args)
        if armed[0] and script is self.scripts["append"]:
            armed[0] = False
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().call_soon(task.cancel)
        return queued

    monkeypatch.setattr(storage_redis._RedisAio, "_script", cancel_after_queuing)

    async def main() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.suppress(asyncio.CancelledError):
                await graph.ainvoke({"messages": [("user", "cancelled")]}, _config("t"))
            await asyncio.sleep(0.05)
        assert not armed[0], "the append was never queued"
        assert not [w for w in caught if issubclass(w.category, LockLostWarning)]

    asyncio.run(main())
    monkeypatch.setattr(storage_redis._RedisAio, "_script", real_script)
    state = graph.invoke({"messages": [("user", "after")]}, _config("t"))
    assert [m.content for m in state["messages"]][-2:] == ["after", "echo after"]


def test_async_waiters_are_woken_when_a_sync_holder_raises(tmp_path: Path) -> None:
    """A sync holder that leaves by an exception wakes the coroutines waiting on the
    thread's lock at once, as one that leaves normally does (not after the 50 ms net)."""
    from langgraph_ctx.storage.jsonl import JsonlStorage

    lock = JsonlStorage(tmp_path)._lock("t1")
    real_wake, wakes = lock._wake, []

    def wake() -> None:
        wakes.append(lock.depth)
        real_wake()

    lock._wake = wake  # type: ignore[method-assign]
    with contextlib.suppress(ValueError), lock.hold(True):
        raise ValueError("the node failed")
    with lock.hold(True):
        pass
    assert wakes == [0, 0]


@pytest.mark.parametrize("cluster", [False, True])
def test_asyncio_run_again_and_again_leaves_no_redis_connection_open(
    redis_server: RedisServer, redis_cluster: RedisClusterServer, cluster: bool
) -> None:
    """One saver, ``asyncio.run(graph.ainvoke(...))`` per turn (a script, the README's
    tour): each loop got its own ``redis.asyncio`` client, never closed, and held by the
    saver for good: 60 runs, 60 connections left on the server. The client made for a
    loop is closed when that loop shuts down."""
    from langgraph_ctx import RedisLogSaver
    from langgraph_ctx.storage.redis import connect

    url = redis_cluster.url if cluster else redis_server.url
    admin = connect(url)

    def clients() -> int:
        if cluster:  # every node's
            nodes = admin.get_nodes()  # type: ignore[attr-defined]
            return sum(
                int(admin.info("clients", target_nodes=n)["connected_clients"]) for n in nodes
            )
        return int(admin.info("clients")["connected_clients"])

    saver = RedisLogSaver.from_url(url, prefix=f"loops-{uuid.uuid4().hex[:8]}")
    graph = _chat(saver)
    asyncio.run(graph.ainvoke({"messages": [("user", "0")]}, _config("t")))
    before = clients()
    for i in range(1, 8):
        asyncio.run(graph.ainvoke({"messages": [("user", f"{i}")]}, _config("t")))
    assert clients() <= before
    assert len(saver.get_tuple(_config("t")).checkpoint["channel_values"]["messages"]) == 16
    assert len(saver.storage._doors) == 0
    saver.close()
    admin.close()
