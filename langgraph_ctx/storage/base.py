"""What a saver needs from storage: one append-only log of lines per thread.

Lines are addressed by their 1-based line number, which never changes while
the log is only appended to. Rewrites (prune, revert, delete_for_runs) replace
a log as a whole and atomically; `sync` then reports a reset so readers rebuild
their index.

A backend may also offer an async door (`LogStorage.aio`, an `AsyncLog`): the
few calls a saver's hot path makes (lock, sync, read, append) without blocking
the event loop. Both doors share the backend's state and its `ThreadLock`s, so
sync and async callers of one saver exclude each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import NamedTuple, overload

from langgraph_ctx.errors import AbandonedLockError


class Synced(NamedTuple):
    """New complete lines since the previous `LogStorage.sync` of a thread."""

    reset: bool
    """The log was replaced or removed: forget what was indexed, start over."""
    first_line: int
    """Line number of ``lines[0]``."""
    lines: Sequence[bytes]
    """Complete lines, without their trailing newline (a `PartialLines` when the backend
    read a long log from its last snapshot)."""


_HOLDER_CHECK = 0.1
"""Seconds a sync caller waits for a thread's lock between looks at its holder
(`ThreadLock._take_rlock`): a task whose event loop was closed never releases it."""

LineReader = Callable[[list[int]], dict[int, bytes]]
"""Reads lines by number (1-based) from a log already synced: ``{number: line}``."""


class PartialLines(Sequence[bytes]):
    """A whole log of which only some lines are in hand: the rest are read when indexed.

    What `RedisStorage.sync` reports on a cold open of a long log: the header, the
    ``snap`` lines and the lines from the last one on (one round trip); a reader that
    starts from the snapshot (`langgraph_ctx.saver._index`) never touches the others,
    and the first line it does need is read through ``read``. Indexing is 0-based as
    for a list (item ``i`` is line ``i + 1``); slices are not supported.

    Example:
        >>> lines = PartialLines(3, {1: b"a", 3: b"c"}, lambda ns: {n: b"?" for n in ns})
        >>> len(lines), lines[0], lines[1], lines[-1]
        (3, b'a', b'?', b'c')
    """

    __slots__ = ("known", "read", "total")

    NEAR = 16
    """A line read on demand brings this many on each side (a round trip each saved)."""

    def __init__(self, total: int, known: dict[int, bytes], read: LineReader) -> None:
        self.total = total
        self.known = known
        self.read = read

    def reading_with(self, read: LineReader) -> PartialLines:
        """The same lines, the missing ones read through ``read`` (the saver's own reader,
        which knows whether it may wait for a round trip)."""
        return PartialLines(self.total, self.known, read)

    def __len__(self) -> int:
        return self.total

    def whole(self) -> list[bytes]:
        """Every line, the missing ones read in one call (a reader that indexes them all).

        >>> PartialLines(3, {1: b"a", 3: b"c"}, lambda ns: {n: b"?" for n in ns}).whole()
        [b'a', b'?', b'c']
        """
        known = self.known
        read = self.read([n for n in range(1, self.total + 1) if n not in known])
        return [known[n] if n in known else read[n] for n in range(1, self.total + 1)]

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(i, slice):
            raise TypeError("PartialLines cannot be sliced")
        n = i + 1 if i >= 0 else self.total + i + 1
        if not 1 <= n <= self.total:
            raise IndexError(f"line {n} out of range 1..{self.total}")
        line = self.known.get(n)
        if line is None:  # its neighbours too: what a snapshot names is often close by
            near = range(max(1, n - self.NEAR), min(self.total, n + self.NEAR) + 1)
            line = self.read([m for m in near if m not in self.known])[n]
        return line


class ThreadLock(ABC):
    """One thread log's lock: re-entrant within a process, plus a lock other processes
    see, taken by `_acquire` on entering the outermost `hold` and dropped by `_release`
    on leaving it. A shared hold cannot be upgraded to an exclusive one.

    `ahold` is the same lock for a coroutine: its holder is the asyncio task
    (re-entrant within it), other tasks and OS threads wait, and waiting never
    blocks the event loop (a task parks on a future that the releasing holder,
    sync or async, resolves). While a task holds it, the lock's `rlock` is held by
    the loop's OS thread, so sync callers on other OS threads wait as before.
    """

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0
        self.exclusive = False
        self.owner: int | None = None  # the OS thread inside the outermost ``hold``
        self.task: asyncio.Task[object] | None = None  # the task inside an ``ahold``
        self._mutex = threading.Lock()  # guards _waiters against a lost wake-up
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        try:
            self._take_rlock()
            try:
                if self.depth == 0:
                    self._acquire(exclusive)
                    self.exclusive = exclusive
                    self.owner = threading.get_ident()
                else:
                    if self.task is not None and _current_task() is not self.task:
                        self._check_abandoned()  # (this OS thread's id reused: not its task)
                        raise RuntimeError(
                            "a sync saver call on the event loop's thread while a coroutine "
                            "of the same loop holds this thread's lock: await the a* method"
                        )
                    if exclusive and not self.exclusive:
                        raise RuntimeError("cannot upgrade a shared thread lock to exclusive")
                self.depth += 1
                try:
                    yield
                finally:
                    self.depth -= 1
                    if self.depth == 0:
                        self.owner = None
                        self._release()
            finally:
                self.rlock.release()
        finally:
            self._wake()  # also when the body or the release raised: waiters get in now

    def _take_rlock(self) -> None:
        """Take `rlock`, waiting for its holder; raise `AbandonedLockError` rather than
        wait forever for a task whose event loop was closed under it."""
        if self.rlock.acquire(blocking=False):
            return
        while not self.rlock.acquire(timeout=_HOLDER_CHECK):
            self._check_abandoned()

    def _check_abandoned(self) -> None:
        """Raise `AbandonedLockError` if the lock's holder is a task of a closed loop: the
        call it is in never ends (nor releases the lock), its loop being gone."""
        task = self.task
        if task is not None and task.get_loop().is_closed() and not task.done():
            raise AbandonedLockError(self.describe())

    def describe(self) -> str:
        """The thread, for error messages (backends name their file or key)."""
        return "this thread"

    def ahold(self, exclusive: bool) -> AbstractAsyncContextManager[None]:
        """`hold` for a coroutine (see the class docstring)."""
        return _AsyncHold(self, exclusive)

    async def _enter(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take `rlock` with nobody inside, parking on a future while anyone is."""
        while True:
            with self._mutex:
                if self.rlock.acquire(blocking=False):
                    if self.depth == 0:
                        return
                    self.rlock.release()  # held by another task of this loop's OS thread
                self._check_abandoned()  # a holder that never leaves: raise, not wait forever
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            # The releasing holder, sync or async, resolves it (`_wake`); the timer is
            # only a safety net, never the way a waiter normally gets in.
            timer = loop.call_later(0.05, _resolve, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                with self._mutex, contextlib.suppress(ValueError):
                    self._waiters.remove((loop, waiter))

    def _wake(self) -> None:
        with self._mutex:  # a waiter registers under it after failing to take rlock:
            if not self._waiters:  # either it is seen here or its retry finds rlock free
                return
            waiters, self._waiters = self._waiters, []
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, waiter in waiters:
            if loop is running:
                loop.call_soon(_resolve, waiter)  # no self-pipe write for our own loop
                continue
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, waiter)

    async def _aacquire(self, exclusive: bool) -> None:
        """`_acquire` for a coroutine; backends override it to wait without a thread."""
        await asyncio.to_thread(self._acquire, exclusive)

    def _acquire_now(self, exclusive: bool) -> bool:
        """Take the cross-process lock if that needs no wait (``False``: nothing taken,
        `_aacquire` waits for it). Backends whose lock is a quick local call override it."""
        return False

    async def _arelease(self, cancelled: bool = False) -> None:
        """`_release` for a coroutine (default: the sync one, which must not block).

        ``cancelled``: the operation inside was cancelled, so a write it queued may or
        may not have committed (and released a lock it held): nothing to warn about.
        """
        self._release()

    @abstractmethod
    def _acquire(self, exclusive: bool) -> None:
        """Take the cross-process lock (shared or exclusive)."""

    @abstractmethod
    def _release(self) -> None:
        """Drop the cross-process lock taken by `_acquire`."""


def _current_task() -> asyncio.Task[object] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop running in this OS thread
        return None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _AsyncHold:
    """`ThreadLock.ahold`: a class rather than a generator, as it is on every async call.

    `enter_now` and `exit_now` are the same steps as ``__aenter__`` and ``__aexit__``
    when none of them has to wait (the lock free in this process, a backend lock taken
    and dropped by a quick local call: JSONL's ``flock``): an async saver call that
    finds its thread free then takes and drops the lock without a coroutine for each
    step (`langgraph_ctx.saver._drive`). Otherwise they do nothing, say so, and the
    caller awaits the coroutine methods.
    """

    __slots__ = ("acquired", "exclusive", "lock", "reentered")

    def __init__(self, lock: ThreadLock, exclusive: bool) -> None:
        self.lock = lock
        self.exclusive = exclusive
        self.reentered = False
        self.acquired = False

    def enter_now(self) -> bool:
        """``__aenter__`` if it needs no wait; ``False``: nothing done, await it."""
        lock = self.lock
        if type(lock)._acquire_now is ThreadLock._acquire_now:
            return False  # a backend whose lock is always awaited
        task = asyncio.current_task()
        if lock.depth and task is not None and lock.task is task:
            return False  # re-entered by its holder: ``__aenter__`` checks the upgrade
        if not lock.rlock.acquire(blocking=False):
            return False
        if lock.depth:  # another task of this loop's OS thread holds it
            lock.rlock.release()
            return False
        try:
            taken = lock._acquire_now(self.exclusive)
        except BaseException:
            lock.rlock.release()
            lock._wake()
            raise
        if not taken:
            lock.rlock.release()
            lock._wake()  # nobody could have queued meanwhile, but the check is cheap
            return False
        lock.exclusive = self.exclusive
        lock.owner = threading.get_ident()
        lock.task = task
        lock.depth = 1
        self.acquired = True
        return True

    def exit_now(self) -> bool:
        """``__aexit__`` run here, when it cannot wait: a re-entered hold, or a backend
        that drops its lock with its sync `_release` (`ThreadLock._arelease` not
        overridden); ``False``: nothing done, await ``__aexit__``."""
        lock = self.lock
        if self.reentered:
            lock.depth -= 1
            return True
        if self.acquired and type(lock)._arelease is not ThreadLock._arelease:
            return False
        # `_leave` with the sync `_release` its default `_arelease` would call (no
        # coroutine to create and run to its end on every call).
        lock.depth = 0
        lock.owner = None
        lock.task = None
        try:
            if self.acquired:
                lock._release()
        finally:
            lock.rlock.release()
            lock._wake()
        return True

    async def __aenter__(self) -> None:
        lock = self.lock
        task = asyncio.current_task()
        if lock.depth and task is not None and lock.task is task:  # re-entered by its holder
            if self.exclusive and not lock.exclusive:
                raise RuntimeError("cannot upgrade a shared thread lock to exclusive")
            lock.depth += 1
            self.reentered = True
            return
        await lock._enter(asyncio.get_running_loop())
        # Taken before the cross-process lock is awaited: another task of this loop
        # (the rlock lets it in, same OS thread) must see it held meanwhile.
        lock.exclusive = self.exclusive
        lock.owner = threading.get_ident()
        lock.task = task
        lock.depth = 1
        try:
            await lock._aacquire(self.exclusive)
        except BaseException:
            await self._leave()
            raise
        self.acquired = True

    async def __aexit__(self, *exc: object) -> None:
        if self.reentered:
            self.lock.depth -= 1
            return
        await self._leave(isinstance(exc[1], asyncio.CancelledError))

    async def _leave(self, cancelled: bool = False) -> None:
        lock = self.lock
        lock.depth = 0
        lock.owner = None
        try:
            if self.acquired:
                await lock._arelease(cancelled)
        finally:
            # Only now (a loop closed during the release is still seen), and only if no
            # other task of this loop's OS thread took the lock meanwhile.
            if lock.depth == 0:
                lock.task = None
            lock.rlock.release()
            lock._wake()


class AsyncLog(ABC):
    """The async door into a `LogStorage`: the calls of a saver's hot path.

    Same contract as the sync methods of the same names, on the same state:
    `locked` excludes sync holders too; `read_ready` never waits (``None`` when
    a line would need a round trip: then the caller awaits `read_many`).
    """

    reads_wait: bool = True
    """Whether `read_ready` can ever answer ``None`` (``False``: lines are always ready,
    so the saver's CPU steps need no retry bookkeeping)."""

    @abstractmethod
    def locked(self, thread_id: str, *, exclusive: bool) -> AbstractAsyncContextManager[None]:
        """Hold the thread's lock from a coroutine (waiting without blocking the loop)."""

    @abstractmethod
    async def sync(self, thread_id: str) -> Synced:
        """`LogStorage.sync`."""

    @abstractmethod
    def read_ready(self, thread_id: str, lines: Sequence[int]) -> dict[int, bytes] | None:
        """Lines already reported by `sync`, if they can be had without waiting."""

    @abstractmethod
    async def read_many(self, thread_id: str, lines: Sequence[int]) -> dict[int, bytes]:
        """Lines already reported by `sync`."""

    @abstractmethod
    async def append(
        self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True
    ) -> int:
        """`LogStorage.append`."""


class LogStorage(ABC):
    """Append-only logs of JSON lines, one per thread id.

    Callers hold `locked` around every other call: shared for `sync` and
    `read`, exclusive for anything that writes. Locks are re-entrant within a
    thread of one process and exclude other processes too.

    A backend whose readers take no cross-process lock (Redis) may raise
    `LogChangedError` from `read`, `append` or a rewrite when the log changed
    since the caller's `sync`; nothing was applied, and the caller re-syncs
    and tries again (`LogSaver` does). JSONL never raises it.
    """

    reads_from_sync: bool = False
    """Whether a line `sync` reported may be taken from that report instead of `read`
    while the caller still holds the lock it synced under (a cold open then reads the
    head's messages from the lines it just scanned). ``True`` for a file, whose lines
    a lock keeps as they are; not for Redis, whose `read` checks that the log was not
    rewritten since the `sync`."""

    @abstractmethod
    def locked(self, thread_id: str, *, exclusive: bool) -> AbstractContextManager[None]:
        """Hold the thread's lock (shared for reading, exclusive for writing)."""

    @abstractmethod
    def sync(self, thread_id: str) -> Synced:
        """Lines appended since the last sync (by anyone), or a reset."""

    @abstractmethod
    def read(self, thread_id: str, line: int) -> bytes:
        """One line already reported by `sync`, without its newline."""

    @abstractmethod
    def append(self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True) -> int:
        """Append complete lines (each ending in a newline); return the first's number.

        The caller has synced under the exclusive lock. A torn last line left by
        a crashed writer is removed first, with a warning.

        ``durable=False`` (a checkpoint's pending writes) lets a backend that
        flushes to disk (`JsonlStorage` with ``fsync``) flush these lines with the
        thread's next durable append (the checkpoint), or at `evict` / `close`,
        instead of now: one flush per checkpoint. The lines are written at once
        either way; only a power loss can lose them before that flush.
        """

    @abstractmethod
    def replace(self, thread_id: str, lines: Iterable[bytes], *, backup: bool) -> None:
        """Atomically replace the log with ``lines``; keep a rotated backup if asked."""

    @abstractmethod
    def truncate(self, thread_id: str, n_lines: int, *, backup: bool) -> None:
        """Atomically keep only the first ``n_lines`` lines (revert)."""

    @abstractmethod
    def copy(self, source_id: str, target_id: str, n_lines: int | None, header: bytes) -> None:
        """Make ``target_id`` a copy of the first ``n_lines`` of ``source_id``
        (all when ``None``), with line 1 replaced by ``header``."""

    @abstractmethod
    def delete(self, thread_id: str) -> None:
        """Remove the log and its backups; a missing log is not an error."""

    @abstractmethod
    def exists(self, thread_id: str) -> bool:
        """Whether the thread has a log."""

    @abstractmethod
    def thread_ids(self) -> Iterator[str]:
        """Every thread id with a log."""

    @abstractmethod
    def describe(self, thread_id: str) -> str:
        """Where the log lives, for error messages (a path, a key)."""

    @abstractmethod
    def evict(self, thread_id: str) -> None:
        """Forget what was synced of the thread and release what it holds open.

        For a saver that drops its index of the thread: the next `sync` reads
        the log from its first line. Lines appended without ``durable`` are
        flushed first. A thread whose lock is held is left alone.
        """

    def close(self) -> None:
        """Release every descriptor or connection held for threads (flushing
        lines appended without ``durable``). The storage stays usable: the next
        call opens what it needs again."""
        return None  # the default holds nothing between calls

    def backups(self, thread_id: str) -> list[str]:
        """Rotated backups kept by revert, newest first."""
        return []

    def listing(self) -> AbstractContextManager[None]:
        """Inside the block, `thread_ids` and `backups` may answer from one scan.

        Listing every thread with its backups costs one pass over the store
        (`JsonlStorage` scans its directory once); the default does nothing.
        """
        return contextlib.nullcontext()

    def aio(self) -> AsyncLog | None:
        """The async door for the running event loop; ``None``: this backend has none
        (the saver then runs its sync methods in a worker thread)."""
        return None

    def read_all(self, thread_id: str) -> list[bytes]:
        """Every complete line of the log as it is now, without newlines (``[]``: no log).

        Unlike `sync`, this leaves what the next `sync` reports untouched, so
        it is safe on a storage a saver is using (export, copies between
        backends). The caller holds the thread's lock (shared is enough).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot read a whole log")
