"""The async lock's fast path (`_AsyncHold.enter_now` / `exit_now`): a free thread lock is
taken and dropped without awaiting, and anything that would have to wait is left to the
awaited path, having taken nothing."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from pathlib import Path

import pytest

from langgraph_ctx.saver._index import _LRU
from langgraph_ctx.storage.base import ThreadLock, _AsyncHold
from langgraph_ctx.storage.jsonl import JsonlStorage


def _ahold(storage: JsonlStorage, thread_id: str, *, exclusive: bool = True) -> _AsyncHold:
    aio = storage.aio()
    assert aio is not None
    hold = aio.locked(thread_id, exclusive=exclusive)
    assert isinstance(hold, _AsyncHold)
    return hold


def _own(hold: object) -> _AsyncHold:
    assert isinstance(hold, _AsyncHold)
    return hold


def _lock_file(storage: JsonlStorage, thread_id: str) -> str:
    return storage._lock(thread_id).path


def _free_to_others(path: str) -> bool:
    """Whether another open file description could take the flock now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_free_lock_is_taken_and_dropped_without_awaiting(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path)
    storage.append("t", [b'{"x":1}\n'])  # the thread exists (and its lock file, when taken)

    async def main() -> None:
        hold = _ahold(storage, "t")
        assert hold.enter_now()
        lock = storage._lock("t")
        assert lock.depth == 1 and lock.task is asyncio.current_task()
        assert not _free_to_others(lock.path)  # the flock other processes see is held
        # Re-entered by its holder: the awaited path (it checks the upgrade)
        inner = _ahold(storage, "t", exclusive=False)
        assert not inner.enter_now()
        async with inner:
            assert lock.depth == 2
        assert hold.exit_now()
        assert lock.depth == 0 and lock.task is None and lock.owner is None
        assert _free_to_others(lock.path)
        assert lock.rlock.acquire(blocking=False)  # nobody holds it in this process either
        lock.rlock.release()

    asyncio.run(main())


def test_a_lock_another_task_holds_is_left_to_the_awaited_path(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path)
    aio = storage.aio()
    assert aio is not None
    order: list[str] = []

    async def holder(taken: asyncio.Event, release: asyncio.Event) -> None:
        async with aio.locked("t", exclusive=True):
            taken.set()
            await release.wait()
            order.append("holder out")

    async def main() -> None:
        taken, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(holder(taken, release))
        await taken.wait()
        hold = _ahold(storage, "t")
        assert not hold.enter_now()
        assert storage._lock("t").depth == 1  # the holder's, untouched
        release.set()
        await hold.__aenter__()  # waits for the holder, as before
        order.append("waiter in")
        await hold.__aexit__(None, None, None)
        await task

    asyncio.run(main())
    assert order == ["holder out", "waiter in"]


def test_a_lock_another_os_thread_holds_is_left_to_the_awaited_path(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path)
    taken, release = threading.Event(), threading.Event()

    def sync_holder() -> None:
        with storage.locked("t", exclusive=True):
            taken.set()
            release.wait(5)

    worker = threading.Thread(target=sync_holder)
    worker.start()
    taken.wait(5)

    async def main() -> None:
        hold = _ahold(storage, "t")
        assert not hold.enter_now()
        release.set()
        async with hold:
            assert storage._lock("t").task is asyncio.current_task()

    try:
        asyncio.run(main())
    finally:
        release.set()
        worker.join()


def test_a_lock_another_process_holds_takes_nothing_and_is_polled(tmp_path: Path) -> None:
    storage = JsonlStorage(tmp_path)
    storage.append("t", [b'{"x":1}\n'])
    with storage.locked("t", exclusive=True):  # creates the lock file
        pass
    other = os.open(_lock_file(storage, "t"), os.O_RDONLY)  # "another process"
    fcntl.flock(other, fcntl.LOCK_EX)

    async def main() -> None:
        hold = _ahold(storage, "t")
        assert not hold.enter_now()
        lock = storage._lock("t")
        assert lock.depth == 0 and lock.task is None
        assert lock.rlock.acquire(blocking=False)  # released again, not kept
        lock.rlock.release()
        asyncio.get_running_loop().call_later(0.01, fcntl.flock, other, fcntl.LOCK_UN)
        async with hold:  # the awaited path polls until the other one lets go
            assert not _free_to_others(lock.path)

    try:
        asyncio.run(main())
    finally:
        os.close(other)


class _AwaitedRelease(ThreadLock):
    """A backend whose release must be awaited (as Redis's is)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def _acquire(self, exclusive: bool) -> None:
        self.events.append("acquire")

    def _acquire_now(self, exclusive: bool) -> bool:
        self.events.append("acquire now")
        return True

    def _release(self) -> None:
        self.events.append("sync release")

    async def _arelease(self, cancelled: bool = False) -> None:
        await asyncio.sleep(0)
        self.events.append("async release")


def test_a_release_that_must_be_awaited_is_left_to_the_awaited_exit() -> None:
    lock = _AwaitedRelease()

    async def main() -> None:
        hold = _own(lock.ahold(True))
        assert hold.enter_now()
        assert not hold.exit_now()
        assert lock.depth == 1  # still held: nothing was done
        await hold.__aexit__(None, None, None)
        assert lock.depth == 0

    asyncio.run(main())
    assert lock.events == ["acquire now", "async release"]


def test_a_backend_without_a_quick_lock_is_taken_the_awaited_way() -> None:
    class Slow(ThreadLock):
        def _acquire(self, exclusive: bool) -> None:
            pass

        def _release(self) -> None:
            pass

    lock = Slow()

    async def main() -> None:
        hold = _own(lock.ahold(False))
        assert not hold.enter_now()
        assert lock.depth == 0 and lock.rlock.acquire(blocking=False)
        lock.rlock.release()
        async with hold:
            assert lock.depth == 1

    asyncio.run(main())


def test_an_lru_entry_evicted_between_lookup_and_touch_is_still_returned() -> None:
    class Racing(_LRU):
        """Another reader evicts the entry between `get_hit`'s lookup and its touch."""

        racing = False

        def move_to_end(self, key: object, last: bool = True) -> None:
            if self.racing:
                self.pop(key)
            super().move_to_end(key, last)

    lru = Racing(4)
    lru.put("a", 1)
    lru.racing = True
    assert lru.get_hit("a") == 1
    assert "a" not in lru
    with pytest.raises(KeyError):  # what get_hit used to let through
        _LRU.move_to_end(lru, "a")
