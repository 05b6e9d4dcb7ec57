"""The saver's operations as generators of I/O requests, and the two drivers that run them.

`LogSaver`'s logic (the index, the batches, what to read and write) does no I/O of
its own: an operation such as ``put`` is a generator that *yields* what it needs
from storage (`Lock`, `Sync`, `Append`) and receives the answer, and the CPU work
between (`Compute`) is handed to the driver too. `run` drives an operation
against the sync storage; `arun` against its async door (`AsyncLog`), awaiting
each request on the event loop. So there is one ``put``, one ``get_tuple``, one
``list``: the drivers are the only code that differs.

Why generators, and why `Compute`: the writes and the locks are few and known
in advance (a generator says them in order, and the sync driver costs a few
``send`` calls). Reads are not: the index reads lines lazily, deep inside
decoding (`_Index.prefetch`). Making each of those an explicit request would
turn every decoding function into a generator. Instead a `Compute` step runs
plain code; under the async driver a read that cannot be answered without a
round trip (a Redis line that is not cached) raises `_LinesNotReady`, and the
driver awaits those lines and runs the step again (a step must therefore be
safe to repeat: it may fill caches, never half-change the index). JSONL lines
are always ready: a ``pread`` from the page cache costs less than a thread hop.

Locks are held by the driver, from the `Lock` request to the end of the
operation, whatever happens.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_ctx.errors import LangGraphCtxError, LogChangedError
from langgraph_ctx.saver._retry import _CHANGED_RETRIES
from langgraph_ctx.storage.base import AsyncLog, LogStorage, Synced

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Lock:
    """Hold the thread's lock until the operation ends."""

    thread_id: str
    exclusive: bool


@dataclass(frozen=True, slots=True)
class Sync:
    """`LogStorage.sync`: answered with a `Synced`."""

    thread_id: str


@dataclass(frozen=True, slots=True)
class Append:
    """`LogStorage.append`: answered with the first line's number."""

    thread_id: str
    lines: Sequence[bytes]
    durable: bool = True


@dataclass(frozen=True, slots=True)
class Compute:
    """Run ``fn`` (CPU work that may read lines); answered with its result."""

    fn: Callable[[], Any]


Request = Lock | Sync | Append | Compute
Op = Generator[Request, Any, _T]
"""An operation: yields requests, receives their answers, returns its result."""


class _LinesNotReady(LangGraphCtxError):
    """A `Compute` step read lines the async door cannot give without waiting.

    A package error so that decoding passes it through (`decode_value` turns other
    exceptions into `CodecError`), to the driver that awaits the lines."""

    def __init__(self, thread_id: str, lines: list[int]) -> None:
        super().__init__(thread_id, lines)
        self.thread_id = thread_id
        self.lines = lines


@dataclass
class _AsyncReads:
    aio: AsyncLog
    fetched: dict[tuple[str, int], bytes]


# Set by `arun` while a `Compute` step runs (per task: contextvars follow the task).
_ASYNC_READS: contextvars.ContextVar[_AsyncReads | None] = contextvars.ContextVar(
    "langgraph_ctx_async_reads", default=None
)


def read_lines(storage: LogStorage, thread_id: str, lines: list[int]) -> dict[int, bytes]:
    """The index's reader: sync storage, or in an async `Compute` what needs no wait."""
    reads = _ASYNC_READS.get()
    if reads is None:
        reader = getattr(storage, "read_many", None)
        if reader is None:
            return {n: storage.read(thread_id, n) for n in lines}
        return reader(thread_id, lines)  # type: ignore[no-any-return]
    out: dict[int, bytes] = {}
    missing: list[int] = []
    for n in lines:
        raw = reads.fetched.get((thread_id, n))
        if raw is None:
            missing.append(n)
        else:
            out[n] = raw
    if missing:
        ready = reads.aio.read_ready(thread_id, missing)
        if ready is None:
            raise _LinesNotReady(thread_id, missing)
        out.update(ready)
    return out


def run(storage: LogStorage, make: Callable[[], Op[_T]]) -> _T:
    """Run an operation on sync storage (again, if the log changed under it)."""
    for attempt in range(_CHANGED_RETRIES):
        try:
            return _run_once(storage, make())
        except LogChangedError:
            if attempt == _CHANGED_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _run_once(storage: LogStorage, op: Op[_T]) -> _T:
    with ExitStack() as locks:
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(answer) if error is None else op.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer, error = None, None
            try:  # the four request classes, not subclassed: see `_arun_once`
                if type(request) is Compute:
                    answer = request.fn()
                elif type(request) is Sync:
                    answer = storage.sync(request.thread_id)
                elif type(request) is Append:
                    answer = storage.append(
                        request.thread_id, request.lines, durable=request.durable
                    )
                elif type(request) is Lock:
                    locks.enter_context(
                        storage.locked(request.thread_id, exclusive=request.exclusive)
                    )
                else:
                    raise TypeError(f"not a request: {request!r}")
            except Exception as exc:  # handed to the operation, which may handle it
                error = exc


async def arun(aio: AsyncLog, make: Callable[[], Op[_T]]) -> _T:
    """Run an operation on the async door (again, if the log changed under it)."""
    for attempt in range(_CHANGED_RETRIES):
        try:
            return await _arun_once(aio, make())
        except LogChangedError:
            if attempt == _CHANGED_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


async def _arun_once(aio: AsyncLog, op: Op[_T]) -> _T:
    held: list[AbstractAsyncContextManager[None]] = []
    ending: BaseException | None = None  # what ends the operation, for the locks' exits
    inline = not aio.reads_wait  # a `Compute` step is a plain call (see `_compute`)
    try:
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(answer) if error is None else op.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            answer, error = None, None
            # Dispatched on the exact class (a ``match`` of class patterns costs an
            # ``isinstance`` a case, on a loop that runs five times a saver call).
            try:
                if type(request) is Compute:
                    answer = request.fn() if inline else await _compute(aio, request.fn)
                elif type(request) is Sync:
                    answer = await aio.sync(request.thread_id)
                elif type(request) is Append:
                    answer = await aio.append(
                        request.thread_id, request.lines, durable=request.durable
                    )
                elif type(request) is Lock:
                    hold = aio.locked(request.thread_id, exclusive=request.exclusive)
                    # A lock free at once is taken without a coroutine a step
                    # (`storage.base._AsyncHold.enter_now`); else it is awaited.
                    enter_now = getattr(hold, "enter_now", None)
                    if enter_now is None or not enter_now():
                        await hold.__aenter__()
                    held.append(hold)
                else:
                    raise TypeError(f"not a request: {request!r}")
            except Exception as exc:
                error = exc
    except BaseException as exc:  # a cancellation among them: the lock's exit is told
        ending = exc
        raise
    finally:
        while held:  # an operation's locks, released in reverse whatever happened
            hold = held.pop()
            exit_now = getattr(hold, "exit_now", None)
            if exit_now is None or not exit_now():
                await hold.__aexit__(type(ending) if ending else None, ending, None)


async def _compute(aio: AsyncLog, fn: Callable[[], _T]) -> _T:
    if not aio.reads_wait:  # JSONL: a line is a pread away, read where it is needed
        return fn()
    reads = _AsyncReads(aio, {})
    while True:
        token = _ASYNC_READS.set(reads)
        try:
            return fn()
        except _LinesNotReady as signal:
            need = signal
        finally:
            _ASYNC_READS.reset(token)
        got = await aio.read_many(need.thread_id, need.lines)
        reads.fetched.update(((need.thread_id, n), raw) for n, raw in got.items())


__all__ = ["Append", "Compute", "Lock", "Op", "Sync", "Synced", "arun", "read_lines", "run"]
