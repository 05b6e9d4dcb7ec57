"""What a saver needs from storage: one append-only log of lines per thread.

Lines are addressed by their 1-based line number, which never changes while
the log is only appended to. Rewrites (prune, revert, delete_for_runs) replace
a log as a whole and atomically; `sync` then reports a reset so readers rebuild
their index.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple


class Synced(NamedTuple):
    """New complete lines since the previous `LogStorage.sync` of a thread."""

    reset: bool
    """The log was replaced or removed: forget what was indexed, start over."""
    first_line: int
    """Line number of ``lines[0]``."""
    lines: list[bytes]
    """Complete lines, without their trailing newline."""


class ThreadLock(ABC):
    """One thread log's lock: re-entrant within a process, plus a lock other processes
    see, taken by `_acquire` on entering the outermost `hold` and dropped by `_release`
    on leaving it. A shared hold cannot be upgraded to an exclusive one."""

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0
        self.exclusive = False
        self.owner: int | None = None  # the OS thread inside the outermost ``hold``

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        with self.rlock:
            if self.depth == 0:
                self._acquire(exclusive)
                self.exclusive = exclusive
                self.owner = threading.get_ident()
            elif exclusive and not self.exclusive:
                raise RuntimeError("cannot upgrade a shared thread lock to exclusive")
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.owner = None
                    self._release()

    @abstractmethod
    def _acquire(self, exclusive: bool) -> None:
        """Take the cross-process lock (shared or exclusive)."""

    @abstractmethod
    def _release(self) -> None:
        """Drop the cross-process lock taken by `_acquire`."""


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

    def read_all(self, thread_id: str) -> list[bytes]:
        """Every complete line of the log as it is now, without newlines (``[]``: no log).

        Unlike `sync`, this leaves what the next `sync` reports untouched, so
        it is safe on a storage a saver is using (export, copies between
        backends). The caller holds the thread's lock (shared is enough).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot read a whole log")
