"""An event loop closed while one of its tasks is inside a saver call (trial 13): the call
never ends, so its thread's lock is never released. Every later call on that thread id
raises `AbandonedLockError` at once, sync or async, from any OS thread, where it hung for
good (or, on the dead loop's own OS thread, raised a misleading "sync call on the event
loop's thread"). Other threads carry on."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langgraph_ctx import AbandonedLockError, JsonlSaver

from .cli_scenarios import chat_graph, config


def _closed_mid_call(graph: Any, entered: threading.Event) -> None:
    """Start ``ainvoke`` on thread "t" in a loop of its own, wait until the saver call
    is suspended (``entered``), then close the loop under it without cancelling it."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(graph.ainvoke({"messages": [("user", "pending")]}, config("t")))

    async def until_entered() -> None:
        while not entered.is_set():
            await asyncio.sleep(0.001)

    loop.run_until_complete(until_entered())
    assert not task.done()
    for pending in asyncio.all_tasks(loop):  # abandoned on purpose: no "destroyed" log
        pending._log_destroy_pending = False
    loop.close()  # the task pending


def _outcome(call: Callable[[], Any]) -> str:
    """What ``call`` does within 5 s on a thread of its own: its error's name, or "hangs"."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            call()
            out["done"] = "returned"
        except BaseException as exc:  # reported, not swallowed
            out["done"] = type(exc).__name__

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(5)
    return out.get("done", "hangs")


def _later_calls(graph: Any) -> None:
    start = time.monotonic()
    with pytest.raises(AbandonedLockError, match="event loop was closed"):
        graph.get_state(config("t"))  # on the dead loop's own OS thread
    assert _outcome(lambda: graph.get_state(config("t"))) == "AbandonedLockError"
    assert _outcome(lambda: graph.invoke({"messages": [("user", "x")]}, config("t"))) == (
        "AbandonedLockError"
    )
    ainvoke = graph.ainvoke({"messages": [("user", "y")]}, config("t"))
    assert _outcome(lambda: asyncio.run(ainvoke)) == "AbandonedLockError"
    assert time.monotonic() - start < 3
    graph.invoke({"messages": [("user", "hi")]}, config("other"))  # other threads: as before
    assert [m.content for m in graph.get_state(config("other")).values["messages"]] == [
        "hi", "you said: hi"
    ]  # fmt: skip


CLOSED_LOOP_NOISE = pytest.mark.filterwarnings(
    "ignore::RuntimeWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)
"""What the abandoned coroutines leave behind ("never awaited", a closed loop's callbacks)."""


@pytest.fixture
def blocked_fdatasync(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """``os.fdatasync`` whose first call signals it was entered, then waits until the
    test ends (later calls flush at once)."""
    entered, done = threading.Event(), threading.Event()
    real = os.fdatasync

    def waiting(fd: int) -> None:
        if not entered.is_set():
            entered.set()
            done.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", waiting)
    yield entered
    done.set()


@CLOSED_LOOP_NOISE
def test_jsonl_fsync_thread_of_a_closed_loop_raises_instead_of_hanging(
    tmp_path: Path, blocked_fdatasync: threading.Event
) -> None:
    saver = JsonlSaver(tmp_path / "chats", fsync=True)
    graph = chat_graph(saver)
    _closed_mid_call(graph, blocked_fdatasync)  # suspended in the put's fdatasync
    _later_calls(graph)


@CLOSED_LOOP_NOISE
def test_redis_thread_of_a_closed_loop_raises_instead_of_hanging(redis_server, monkeypatch):
    pytest.importorskip("redis")
    from langgraph_ctx.saver.redis import RedisLogSaver
    from langgraph_ctx.storage.redis import _RedisAio

    saver = RedisLogSaver.from_url(redis_server.url, prefix="closed-loop")
    graph = chat_graph(saver)
    entered = threading.Event()
    exchange = _RedisAio._exchange

    async def stalled(door: _RedisAio, batch: list[Any]) -> list[Any]:
        if not entered.is_set():  # the first round trip: suspended until the loop is gone
            entered.set()
            await asyncio.sleep(30)
        return await exchange(door, batch)

    monkeypatch.setattr(_RedisAio, "_exchange", stalled)
    _closed_mid_call(graph, entered)
    monkeypatch.setattr(_RedisAio, "_exchange", exchange)
    _later_calls(graph)
    saver.close()
