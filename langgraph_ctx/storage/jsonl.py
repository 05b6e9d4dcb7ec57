"""JSONL files: one ``<thread>.jsonl`` per thread under a root directory.

Layout::

    root/
      task-001.jsonl          the thread's log, one JSON object per line
      task-001.jsonl.1        newest backup kept by revert, then .2, .3, ...
      .locks/task-001.lock    advisory lock file (flock), never holds data

Appends go through one ``write`` of whole lines under an exclusive lock, so
two processes never interleave. A crash can still cut the last line short:
such a torn tail is ignored by readers and truncated, with a warning, before
the next append. Rewrites go to a temporary file that replaces the log with
``os.replace``, so a log is always either the old or the new one.

Nothing inside the root is followed if it is a symbolic link (thread files,
backups, ``.locks`` and the lock files are opened with ``O_NOFOLLOW``): a
planted link raises `SymlinkRefusedError` instead of letting a write or a lock
land outside the root. Creating the storage does no I/O; the root and
``.locks`` are made by the first write. Readers never create anything: on a
root they may only read (a snapshot, a read-only mount, another user's
directory) they take a shared lock through a read-only descriptor, or no lock
when the thread has no lock file, and writes raise `ReadOnlyLogError`.

Descriptors stay open between calls: one on the lock file and one on the log
per thread in use (an LRU of at most ``max_open_threads`` threads; the rest are
closed and reopened when used again), so a call costs a ``flock``, an ``lstat``
of the lock file (was it deleted while we waited?), an ``lstat`` of the log (did
another process append, or replace it?) and, to write, one ``write``. A log
replaced by another process (revert, the CLI) has another inode: it is reopened
and re-read, as before.

With ``fsync``, a checkpoint is one ``fdatasync``: the pending writes appended
before it (``append(..., durable=False)``) are written at once and flushed with it.

The async door (`JsonlStorage.aio`) makes the same calls inline on the event loop:
appending a few lines to the page cache, an ``lstat`` and a ``pread`` cost
microseconds, less than handing them to a worker thread. Only what can take
long leaves the loop: the ``fdatasync`` of a checkpoint with ``fsync``, and a
first read of more than `_INLINE_READ` bytes (a cold open), run in a worker
thread; a lock another process holds is polled with a non-blocking ``flock``
between ``asyncio.sleep`` calls. With ``inline_async=False`` there is no door:
the saver runs each async call in a worker thread, which blocking-call
detectors (the LangGraph server's, under ``langgraph dev``) require, since
they refuse any file call on the loop.

One module (about 1,100 lines) on purpose: a thread's lock, its open
descriptors and its line offsets are one piece of state, and every safety property
above (a replaced log, a deleted lock file, a torn tail, a forked child, a planted
link) is a check across all three, so they are read and changed side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import operator
import os
import re
import stat
import tempfile
import threading
import warnings
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from langgraph_ctx.codec import loads_line
from langgraph_ctx.errors import (
    CorruptLineWarning,
    LogWriteError,
    LogWriteWarning,
    NotARegularFileError,
    ReadOnlyLogError,
    SymlinkRefusedError,
    ThreadNotFoundError,
    TornLineWarning,
)
from langgraph_ctx.storage.base import AsyncLog, LogStorage, Synced, ThreadLock
from langgraph_ctx.storage.thread_ids import (
    check_thread_id,
    decode_thread_id,
    encode_thread_id,
    hashed_thread_id,
    is_hashed,
)

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".jsonl"
LOCK_DIR = ".locks"
_READ_CHUNK = 1 << 20
_INLINE_READ = 1 << 20  # bytes an async sync reads on the event loop; more: in a thread
MAX_OPEN_THREADS = 128
"""Default of ``max_open_threads``: threads whose two descriptors stay open."""
_BACKUP = re.compile(r"\.(\d+)$")
_BACKUP_NAME = re.compile(r"(.+\.jsonl)\.([1-9][0-9]*)")  # .1, .2, ... as _rotate names them
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# errno values meaning "you may not write here" (read-only mount, permissions).
_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


_DATA_OPENS = itertools.count(1)
"""Numbers each opening of a log by a `_ThreadLock` (`_ThreadLock.data_gen`)."""


@dataclass
class _FileState:
    ino: int = -1
    # The log's first line, the end of its last, and the opening of it
    # (`_ThreadLock.data_gen`; -1: none) through which we have known it since: `_same_log`.
    header: bytes = b""
    tail: bytes = b""
    pinned: int = -1
    # Start of line i+1 at [i]; an array: 8 bytes a line, where a list of ints costs 36.
    offsets: array[int] = field(default_factory=lambda: array("q", [0]))
    torn_warned: int = -1
    # A replaced log found by a `sync` whose read then failed: the next one says so.
    reset_pending: bool = False

    @property
    def end(self) -> int:
        return self.offsets[-1]

    @property
    def lines(self) -> int:
        return len(self.offsets) - 1


class _ThreadLock(ThreadLock):
    """Re-entrant in-process lock plus an flock on the thread's lock file; also the
    thread's open descriptors (lock file, log), kept from one hold to the next.

    Writers create the lock file; readers only open an existing one, read-only
    (flock works on any descriptor), so reading needs no write permission and
    reading a missing thread creates nothing. Deleting a thread removes its
    lock file, so after each flock we check the file we locked is still the one
    at the path, and reopen it if not. Our descriptor keeps its inode alive, so
    another file at the path never has the same inode number.
    """

    def __init__(self, root: Path, name: str, open_fds: _OpenFds) -> None:
        super().__init__()
        self.root = root
        self.name = name + ".lock"
        # Strings, not Paths: a lock lives as long as its storage, one per thread used.
        self.path = os.path.join(root, LOCK_DIR, self.name)
        self.log = os.path.join(root, name + SUFFIX)
        self.open_fds = open_fds
        self.fd: int | None = None  # the lock file: flocked while held, open in between
        self.ino = -1
        self.data: int | None = None  # the log, O_APPEND (read-only on a read-only root)
        self.data_ino = -1
        self.data_gen = 0  # which opening of the log `data` is (0: closed)
        self.writable = False
        self.forks = _FORKS[0]  # descriptors opened before a fork are the parent's
        self.seen: tuple[int, int] | None = None  # (inode, size) of the log, this hold
        self.unflushed = False  # lines appended with durable=False, not yet flushed
        self.dir_unflushed = False  # the log was created, its directory not yet flushed
        # Our unflushed lines run from byte `tail_from` to `tail_end`, the log's end
        # (None: none, or another process appended after them): what a failed flush cuts.
        self.tail_from: int | None = None
        self.tail_end = 0

    def describe(self) -> str:
        return self.log

    def mine(self) -> bool:
        """Whether the calling OS thread holds this lock (then it may use the
        descriptors: nobody closes them while the lock is held)."""
        return self.depth > 0 and self.owner == threading.get_ident()

    def _acquire(self, exclusive: bool) -> None:
        self._lock_file(exclusive, blocking=True)

    async def _aacquire(self, exclusive: bool) -> None:
        # Another process holds it: poll, so that the event loop never blocks on it.
        delay = 0.0005
        while not self._lock_file(exclusive, blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)

    def _acquire_now(self, exclusive: bool) -> bool:
        return self._lock_file(exclusive, blocking=False)

    def _lock_file(self, exclusive: bool, *, blocking: bool) -> bool:
        """Take the flock; ``False`` if not ``blocking`` and another process holds it."""
        self._leave_parents()
        if fcntl is None:  # pragma: no cover - Windows: in-process lock only
            return True
        how = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if not blocking:
            how |= fcntl.LOCK_NB
        while True:
            if self.fd is None:
                fd = self._open(exclusive)
                if fd is None:
                    return True  # a reader, and the thread has no lock file: nothing to exclude
                self.fd, self.ino = fd, os.fstat(fd).st_ino
            self.open_fds.touch(self)
            try:
                fcntl.flock(self.fd, how)
            except BlockingIOError:
                return False
            except BaseException:
                self.close_lock()
                raise
            if _inode(self.path) == self.ino:
                return True
            self.close_lock()  # the thread was deleted (and its lock file): closing unlocks

    def _open(self, exclusive: bool) -> int | None:
        if not exclusive:
            with contextlib.suppress(FileNotFoundError):
                return _open_at(self.root / LOCK_DIR, self.name, os.O_RDONLY)
            try:
                os.lstat(self.log)
            except FileNotFoundError:
                return None  # nothing to read, nothing to create
            with contextlib.suppress(ReadOnlyLogError):
                return self._create()  # a log without a lock file (copied in)
            return None  # read-only: no writer can be using this lock file either
        return self._create()

    def _create(self) -> int:
        lock_dir = _make_dirs(self.root, "locking")
        with _writing(self.path, "locking"):
            return _open_at(lock_dir, self.name, os.O_RDWR | os.O_CREAT)

    def _release(self) -> None:
        self.seen = None
        fd = self.fd
        if fd is not None and fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)

    # ------------------------------------------------------------ descriptors

    def data_fd(self, ino: int) -> int | None:
        """The open log if it is inode ``ino``, else the log opened anew if that is
        ``ino`` (``None``: the path holds another file by now)."""
        if self.data is not None and self.data_ino == ino:
            return self.data
        self.close_data()
        try:
            fd = _open_nofollow(self.log, os.O_RDWR | os.O_APPEND)
            writable = True
        except OSError as exc:
            if exc.errno not in _READ_ONLY:
                raise
            fd, writable = _open_nofollow(self.log, os.O_RDONLY), False
        if os.fstat(fd).st_ino != ino:
            os.close(fd)
            return None
        self.data, self.data_ino, self.writable = fd, ino, writable
        self.data_gen = next(_DATA_OPENS)
        self.open_fds.touch(self)
        return fd

    def append_fd(self, ino: int) -> int:
        """The log open for appending (created if missing); ``ino`` as in `data_fd`."""
        if self.data is not None and self.data_ino == ino and self.writable:
            return self.data
        self.close_data()
        with _writing(self.log, "appending"):
            fd = _open_nofollow(self.log, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        self.data, self.data_ino, self.writable = fd, os.fstat(fd).st_ino, True
        self.data_gen = next(_DATA_OPENS)
        self.open_fds.touch(self)
        return fd

    def _leave_parents(self) -> None:
        """In a forked child, drop what the parent opened: its descriptors (closing ours
        keeps the parent's flock: never unlocked here, its open file is shared) and its
        unflushed lines (the parent's to flush, or to cut)."""
        if self.forks == _FORKS[0]:
            return
        for fd in (self.fd, self.data):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.data = None
        self.data_gen = 0  # the log as the parent knew it: checked again (`_same_log`)
        self.forks = _FORKS[0]
        self.unflushed, self.tail_from = False, None

    def flush(self) -> None:
        """Flush lines appended with ``durable=False`` (and a new log's directory entry).

        Raises `LogWriteError` if the flush fails, having cut our unflushed lines off
        (`_flush_failed`)."""
        self._leave_parents()  # (a forked child closing what it inherited)
        if self.unflushed and self.data is not None:
            try:
                _datasync(self.data)
            except OSError as exc:
                raise self._flush_failed(exc) from exc
        self.unflushed, self.tail_from = False, None
        if self.dir_unflushed:
            _fsync_dir(self.root)
            self.dir_unflushed = False

    def _flush_failed(self, exc: OSError) -> LogWriteError:
        """A flush failed: our lines since the last one may never reach the disk (the
        kernel may drop them and report it only once: a later flush succeeds over them).
        Cut them off if they are still the log's last lines (the next `sync` finds the
        log shorter, a reset: nothing builds on them), and retire the descriptor."""
        fd, cut, end = self.data, self.tail_from, self.tail_end
        self.unflushed, self.tail_from, self.seen = False, None, None
        locked = self.depth > 0 and self.exclusive
        outcome, step = _LEFT_AS_THEY_ARE, "cutting them off"
        try:
            if fd is not None and cut is not None and self.fd is not None and fcntl is not None:
                if not locked:  # closing an idle log: cut only with the lock, never waiting
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                try:
                    if os.fstat(fd).st_size == end:  # nobody wrote after them since
                        os.ftruncate(fd, cut)
                        step = "flushing the cut log"
                        _datasync(fd)
                        outcome = (
                            "the lines this process wrote since its last flush may not be on "
                            f"disk, so they were cut off (from byte {cut}): the call that "
                            "wrote them saved nothing, what was saved before is whole. Check "
                            "the disk, then retry"
                        )
                finally:
                    if not locked:
                        fcntl.flock(self.fd, fcntl.LOCK_UN)
        except OSError as again:
            outcome = (
                f"the lines written since its last flush (from byte {cut}) may not be on "
                f"disk, and {step} failed too ({again.strerror or again}): after a power "
                "cut they may read as damaged. Check the disk"
            )
        finally:
            self.close_data()  # the descriptor that saw the error is not written again
        return LogWriteError(self.log, "flushing", exc, outcome)

    def close_data(self) -> None:
        if self.data is not None:
            fd, self.data, self.data_gen = self.data, None, 0
            try:
                if self.unflushed:
                    # Only a log replaced or removed meanwhile gets here unflushed (its
                    # lines moot); `close` flushes first, through `flush`.
                    with contextlib.suppress(OSError):
                        _datasync(fd)
            finally:
                self.unflushed, self.tail_from = False, None
                os.close(fd)

    def close_lock(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing drops a flock

    def close(self) -> None:
        """Close both descriptors (the caller holds `rlock`, and nobody the lock).
        Raises `LogWriteError` if flushing failed (`flush`), once both are closed."""
        failed: LogWriteError | None = None
        try:
            try:
                self.flush()
            except LogWriteError as err:
                failed = err
            self.close_data()
        finally:
            self.close_lock()
            self.open_fds.forget(self)
        if failed is not None:
            raise failed


_LEFT_AS_THEY_ARE = (
    "the lines written since its last flush may not be on disk, and other lines follow "
    "them, so they were left as they are: after a power cut the log may read as damaged "
    "there. Check the disk"
)
"""What a failed flush says when it cannot cut this process's lines off (`_flush_failed`)."""


class _OpenFds:
    """The threads whose descriptors are open, least recently used first, at most
    ``limit`` of them: a process with 10,000 threads stays far from its fd limit.

    Held by the storage and its locks (not the storage itself, so that dropping
    the storage closes everything at once, without waiting for the garbage collector).
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.locks: OrderedDict[_ThreadLock, None] = OrderedDict()
        self.guard = threading.Lock()

    def touch(self, lock: _ThreadLock) -> None:
        locks = self.locks
        if len(locks) < self.limit:  # nothing to close: only the order to keep
            try:
                locks.move_to_end(lock)  # one C call, atomic as `guard` would make it
                return
            except KeyError:
                pass  # new (or forgotten meanwhile): added under the guard
        with self.guard:
            self.locks[lock] = None
            self.locks.move_to_end(lock)
            over = len(self.locks) - self.limit
            if over <= 0:
                return
            # Taken in one C call: `touch`'s unguarded move_to_end cannot cut into it.
            oldest = list(itertools.islice(self.locks, over + 9))
            idle = [lk for lk in oldest if lk is not lock][: over + 8]
        for other in idle:  # not under the guard: closing may flush
            try:
                _close_if_idle(other)
            except LogWriteError as err:  # another thread's log: not this call's error
                warnings.warn(str(err), LogWriteWarning, stacklevel=2)

    def forget(self, lock: _ThreadLock) -> None:
        with self.guard:
            self.locks.pop(lock, None)

    def close_all(self) -> None:
        """Close every idle log; raises the first `LogWriteError` once all are closed."""
        with self.guard:
            locks = list(self.locks)
        failed: LogWriteError | None = None
        for lock in locks:
            try:
                _close_if_idle(lock)
            except LogWriteError as err:
                failed = failed or err
        if failed is not None:
            raise failed


def _close_if_idle(lock: _ThreadLock) -> None:
    """Close a thread's descriptors unless someone holds its lock (then it stays open)."""
    if not lock.rlock.acquire(blocking=False):
        return
    try:
        if lock.depth == 0:
            lock.close()
    finally:
        lock.rlock.release()


# Bumped in a forked child: descriptors opened before are shared with the parent.
_FORKS = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


class JsonlStorage(LogStorage):
    """Thread logs as JSONL files under ``root``.

    Args:
        root: Directory holding one file per thread (created by the first write).
        fsync: Flush to disk before a checkpoint's append returns (``fdatasync``
            where the OS has it), so an acknowledged checkpoint survives a power
            loss, not only a crash. Pending writes (``append(..., durable=False)``)
            are written at once and flushed with the thread's next checkpoint: a
            power loss can lose the pending writes of a step whose checkpoint was
            not yet saved, and LangGraph runs such a step again. Rewrites (revert,
            prune, fork) are flushed before they replace a file.
        max_open_threads: Threads whose descriptors (two each) stay open between
            calls; the least recently used beyond this are closed.
        inline_async: Serve the async API on the event loop itself (see the
            module docstring): file calls of microseconds inline, ``fdatasync``,
            large first reads and lock waits off the loop. ``False``: every async
            call runs in a worker thread (what a blocking-call detector, such as
            the LangGraph server's in development, needs).
    """

    reads_from_sync = True  # a file's lines stay as they are under its lock

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = False,
        max_open_threads: int = MAX_OPEN_THREADS,
        inline_async: bool = True,
    ) -> None:
        # Anchored now: a relative directory must not follow a later `os.chdir` (as an
        # open SQLite connection stays with its file). No file I/O here: async apps build
        # savers inside event loops.
        self.root = Path(root).absolute()
        self.fsync = fsync
        self.inline_async = inline_async
        self._states: dict[str, _FileState] = {}
        self._paths: dict[str, Path] = {}
        self._locks: dict[str, _ThreadLock] = {}
        self._lock_of: dict[str, _ThreadLock] = {}  # by thread id: no encoding per call
        self._guard = threading.Lock()
        self._listings = threading.local()
        self._open_fds = _OpenFds(max_open_threads)
        weakref.finalize(self, self._open_fds.close_all)

    def make_dirs(self, action: str) -> Path:
        """Create the root and its ``.locks`` directory if missing; return ``.locks``.

        Raises:
            ReadOnlyLogError: The root cannot be written to.
            SymlinkRefusedError: ``.locks`` is a symbolic link.
        """
        return _make_dirs(self.root, action)

    # ------------------------------------------------------------------ paths

    def path(self, thread_id: str) -> Path:
        """The file holding ``thread_id``'s log (it may not exist yet)."""
        path = self._paths.get(thread_id)
        if path is None:
            path = self.root / (encode_thread_id(check_thread_id(thread_id)) + SUFFIX)
            if len(self._paths) < 65536:
                self._paths[thread_id] = path
        return path

    def describe(self, thread_id: str) -> str:
        return str(self.path(thread_id))  # only used for error messages

    def exists(self, thread_id: str) -> bool:
        try:
            return os.lstat(self.path(thread_id)).st_size > 0
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def listing(self) -> Iterator[None]:
        """Answer `thread_ids` and `backups` from one directory scan inside the block.

        For listing every thread with its backups (``langgraph-ctx threads``):
        one scan of the root instead of one per thread. The answers are as of
        entering the block, and only for the calling OS thread.

        Example:
            ```python
            with storage.listing():
                rows = [(t, storage.backups(t)) for t in storage.thread_ids()]
            ```
        """
        if getattr(self._listings, "current", None) is not None:
            yield  # nested: keep the outer scan
            return
        self._listings.current = self.scan()
        try:
            yield
        finally:
            self._listings.current = None

    def scan(self) -> tuple[list[str], dict[str, list[str]]]:
        """One pass over the root: the log file names (sorted) and each one's backups.

        Returns ``(names, backups)``: ``names`` are the ``*.jsonl`` file names;
        ``backups`` maps such a name to the paths of its backups, newest first
        (whether or not the log itself still exists).
        """
        names: list[str] = []
        found: dict[str, list[tuple[int, str]]] = {}
        try:
            entries = os.scandir(self.root)
        except FileNotFoundError:
            return [], {}
        with entries:
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue  # .locks, temporary files; encoded ids never start with "."
                if name.endswith(SUFFIX):
                    names.append(name)
                elif match := _BACKUP_NAME.fullmatch(name):
                    found.setdefault(match.group(1), []).append(
                        (int(match.group(2)), entry.path)
                    )
        names.sort()
        return names, {log: [p for _, p in sorted(b)] for log, b in found.items()}

    def thread_ids(self) -> Iterator[str]:
        for thread_id, file_name in self.logs():
            if thread_id is not None:
                try:
                    empty = os.lstat(self.root / file_name).st_size == 0
                except FileNotFoundError:  # deleted since the scan
                    continue
                if not empty:  # an empty log (created, never written: a crash between the
                    yield thread_id  # two) holds no thread, as a read finds (verify names it)
                continue
            warnings.warn(
                f"{self.root / file_name}: its header (line 1) does not read or names another "
                "thread, and the thread id of a long id is only there: the thread is left out "
                "of listings (`langgraph-ctx verify` names what is wrong)",
                CorruptLineWarning,
                stacklevel=2,
            )

    def logs(self) -> Iterator[tuple[str | None, str]]:
        """``(thread id, file name)`` of each log in the directory; the thread id ``None``
        for a log named by its id's hash whose header, where the id is, does not read or
        names another thread (`hashed_thread_id`)."""
        listing = getattr(self._listings, "current", None)
        names = listing[0] if listing is not None else self.scan()[0]
        for file_name in names:
            name = file_name[: -len(SUFFIX)]
            if is_hashed(name):
                yield hashed_thread_id(_first_line(self.root / file_name), name), file_name
                continue
            try:
                yield decode_thread_id(name), file_name
            except ValueError:
                continue  # not one of ours (a user's own file)

    def backups(self, thread_id: str) -> list[str]:
        listing = getattr(self._listings, "current", None)
        if listing is not None:
            return list(listing[1].get(self.path(thread_id).name, []))
        return [str(p) for p in self.backup_paths(self.path(thread_id))]

    @staticmethod
    def backup_paths(path: Path) -> list[Path]:
        """The revert backups of the log at ``path`` (``<log>.1``, ...), oldest first."""
        found = []
        for candidate in path.parent.glob(path.name + ".*"):
            match = _BACKUP_NAME.fullmatch(candidate.name)
            if match and match.group(1) == path.name:
                found.append((int(match.group(2)), candidate))
        return [p for _, p in sorted(found)]

    # ------------------------------------------------------------------ locks

    def locked(self, thread_id: str, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return self._lock(thread_id).hold(exclusive)

    def _lock(self, thread_id: str) -> _ThreadLock:
        lock = self._lock_of.get(thread_id)
        if lock is not None:
            return lock
        name = encode_thread_id(check_thread_id(thread_id))
        with self._guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = _ThreadLock(self.root, name, self._open_fds)
            if len(self._lock_of) >= 65536:
                self._lock_of.clear()
            self._lock_of[thread_id] = lock
        return lock

    def aio(self) -> AsyncLog | None:
        """With ``inline_async``, the async door: the calls inline on the loop (see the
        module docstring); otherwise ``None``: async calls run in a worker thread."""
        # A door per call (a few attributes), not one kept: storage -> door -> storage
        # would be a cycle, and the storage's descriptors wait for the collector.
        return _JsonlAio(self) if self.inline_async else None

    def _held(self, thread_id: str) -> _ThreadLock | None:
        """The thread's lock if the calling OS thread holds it: then its descriptors
        may be used. Otherwise (a caller outside `locked`) files are opened per call."""
        lock = self._lock_of.get(thread_id)
        return lock if lock is not None and lock.mine() else None

    def evict(self, thread_id: str) -> None:
        lock = self._lock_of.get(thread_id)
        if lock is None:
            self._states.pop(thread_id, None)
            return
        if not lock.rlock.acquire(blocking=False):
            return  # another OS thread holds it: in use, not idle
        try:
            self._states.pop(thread_id, None)
            if lock.depth == 0:
                lock.close()
            else:  # the caller holds it: the lock file stays locked, the log reopens
                lock.close_data()
        except LogWriteError as err:  # an idle thread's log, evicted from another's call
            # Its flush failed and lines may be cut: the next sync reads it afresh and
            # says so (a reset), for a saver that still indexes it.
            self._states[thread_id] = _FileState()
            warnings.warn(str(err), LogWriteWarning, stacklevel=2)
        finally:
            lock.rlock.release()

    def close(self) -> None:
        self._open_fds.close_all()

    # ------------------------------------------------------------------ reads

    def sync(self, thread_id: str) -> Synced:
        state = self._states.get(thread_id)
        lock = self._held(thread_id)
        if state is not None and lock is not None:
            # The warm call (most): under our lock, the log we know, nothing appended.
            # The same checks as below; anything else is left to them.
            st: os.stat_result | None
            try:
                st = os.lstat(lock.log)
            except OSError:  # the checks below say what is wrong
                st = None
            if (
                st is not None
                and st.st_ino == state.ino
                and st.st_size == state.offsets[-1]
                and state.pinned == lock.data_gen  # our descriptor open since: `_same_log`
                and not stat.S_ISLNK(st.st_mode)
                and not state.reset_pending
            ):
                lock.seen = (st.st_ino, st.st_size)
                return Synced(False, len(state.offsets), _NO_LINES)
        try:
            synced = self._sync_read(thread_id, state, lock)
        except BaseException:
            # A replaced log found, then the read failed: the fresh state would take the
            # new log for the old one's continuation (the saver kept its old index).
            fresh = self._states.get(thread_id)
            if fresh is not None and fresh is not state:
                fresh.reset_pending = True
            raise
        done = self._states.get(thread_id)
        if done is not None:
            done.reset_pending = False  # said now (``synced.reset``)
        return synced

    def _sync_read(
        self, thread_id: str, state: _FileState | None, lock: _ThreadLock | None
    ) -> Synced:
        path = self.path(thread_id)
        reset = state is not None and state.reset_pending
        while True:  # once, unless the log is replaced between our lstat and our open
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                reset = reset or (state is not None and state.lines > 0)
                self._states[thread_id] = _FileState()
                if lock is not None:
                    lock.seen = None
                    lock.close_data()
                return Synced(reset, 1, [])
            if stat.S_ISLNK(st.st_mode):
                raise SymlinkRefusedError(path)
            if state is None or st.st_ino != state.ino or st.st_size < state.end:
                reset = reset or state is not None
                state = self._states[thread_id] = _FileState(ino=st.st_ino)
            if lock is not None:
                lock.seen = (st.st_ino, st.st_size)
            if state.lines and (lock is None or state.pinned != lock.data_gen):
                same = _same_log(path, lock, st.st_ino, state)
                if same is None:
                    continue  # replaced since the lstat: look again
                if not same:
                    reset = True
                    state = self._states[thread_id] = _FileState(ino=st.st_ino)
            if lock is not None:
                state.pinned = lock.data_gen or -1  # 0: no descriptor of ours holds it
            if st.st_size == state.end:
                return Synced(reset, state.lines + 1, [])
            if lock is None:
                with _open_read(path) as f:
                    if os.fstat(f.fileno()).st_ino != st.st_ino:
                        continue  # replaced since the lstat: look again
                    lines, pending = _read_lines_from(f.fileno(), state.end)
                break
            fd = lock.data_fd(st.st_ino)
            if fd is not None:
                lines, pending = _read_lines_from(fd, state.end, st.st_size)
                state.pinned = lock.data_gen
                break
        first = state.lines + 1
        if lines:
            state.tail = lines[-1][-_TAIL:]
            if first == 1:
                state.header = lines[0]
        # Each line's end offset (its newline's included) as a running sum from the old
        # end, in C: one addition a line fewer than summing the lengths and the newlines
        # apart (a cold open of a long log sums thousands). Into a list, then the array,
        # which an iterator extends item by item: 1.14 ms against 1.36 for the 16,049
        # lines of a 2,000-turn chat, summed again in one process (in a fresh process,
        # where memory first touched dominates, the two are within noise of each other).
        with_newlines = map(operator.add, map(len, lines), itertools.repeat(1))
        ends = list(itertools.accumulate(with_newlines, initial=state.end))
        del ends[0]  # not the old end again
        state.offsets.fromlist(ends)
        if lines and lock is not None:
            lock.tail_from = None  # our unflushed lines, if any, are not the last ones now
        if pending and state.torn_warned != state.end:
            # We hold at least a shared lock, so no writer is mid-append: this
            # is a line a crashed process left unfinished.
            state.torn_warned = state.end
            warnings.warn(
                f"{path}:{state.lines + 1}: torn last line ({len(pending)} bytes, no newline) "
                "ignored; it is removed before the next append",
                TornLineWarning,
                stacklevel=4,
            )
        return Synced(reset, first, lines)

    def read(self, thread_id: str, line: int) -> bytes:
        state = self._states.get(thread_id)
        if state is None or not 1 <= line <= state.lines:
            raise ThreadNotFoundError(thread_id) if state is None else IndexError(line)
        return self.read_many(thread_id, [line])[line]

    def read_many(self, thread_id: str, lines: Iterable[int]) -> dict[int, bytes]:
        """Several lines (already reported by `sync`) with one open file (the saver's hot path)."""
        state = self._states[thread_id]
        lock = self._held(thread_id)
        fd = lock.data_fd(state.ino) if lock is not None else None
        if fd is None:
            with _open_read(self.path(thread_id)) as f:
                return _pread_lines(f.fileno(), state.offsets, lines)
        return _pread_lines(fd, state.offsets, lines)

    def read_all(self, thread_id: str) -> list[bytes]:
        try:
            data = read_file(self.path(thread_id))
        except FileNotFoundError:
            return []
        return data.split(b"\n")[:-1]  # the last piece is empty, or a torn line

    # ----------------------------------------------------------------- writes

    def append(self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True) -> int:
        state = self._states.get(thread_id) or self._states.setdefault(thread_id, _FileState())
        data = b"".join(lines)
        lock = self._held(thread_id)
        if lock is not None:
            fd = lock.append_fd(state.ino)
            seen = lock.seen if lock.seen is not None and lock.seen[0] == lock.data_ino else None
            self._append_at(lock.log, fd, state, data, seen)  # the log's path, as a string
            lock.seen = (state.ino, state.offsets[-1] + len(data))
        else:  # not under `locked`: a descriptor of our own, flushed now
            path = self.path(thread_id)
            with _writing(path, "appending"):
                fd = _open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                self._append_at(path, fd, state, data, None)
                if self.fsync:
                    try:
                        _datasync(fd)
                    except OSError as exc:  # this call's own lines: cut them off
                        with contextlib.suppress(OSError):
                            os.ftruncate(fd, state.end)
                        raise LogWriteError(
                            path, "flushing", exc, "this call's lines were cut off, as they "
                            "may not be on disk: it saved nothing. Check the disk, then retry",
                        ) from exc  # fmt: skip
            finally:
                os.close(fd)
        offsets = state.offsets
        first = len(offsets)  # the line after the last one: `state.lines + 1`
        if lines:
            state.tail = lines[-1][:-1][-_TAIL:]
        if first == 1 and lines:  # a new log, ours from its first line
            state.header = lines[0][:-1]
            state.pinned = -1 if lock is None else lock.data_gen
        pos = end = offsets[-1]
        for line in lines:
            pos += len(line)
            offsets.append(pos)
        if lock is not None and self.fsync:
            if lock.tail_from is None:  # a run of ours begins (a flush, or others' lines, before)
                lock.tail_from = end
            lock.tail_end = pos
            lock.unflushed = True
            lock.dir_unflushed |= first == 1
            if durable:
                lock.flush()
        elif self.fsync and first == 1:
            _fsync_dir(self.root)
        return first

    def _append_at(
        self,
        path: str | Path,
        fd: int,
        state: _FileState,
        data: bytes,
        seen: tuple[int, int] | None,
    ) -> None:
        """Write ``data`` at the end of the log open as ``fd``, after its last complete line."""
        if seen is None or seen[0] != state.ino or not state.lines:
            st = os.fstat(fd)
            seen = (st.st_ino, st.st_size)
        ino, size = seen
        if state.ino != ino:
            if state.lines:
                raise RuntimeError(f"{path} was replaced since it was synced")
            state.ino = ino
        try:
            if size > state.end:
                os.ftruncate(fd, state.end)
                warnings.warn(
                    f"{path}:{state.lines + 1}: removed a torn last line "
                    f"({size - state.end} bytes) left by an interrupted write",
                    TornLineWarning,
                    stacklevel=5,
                )
            written = os.write(fd, data)  # whole, but for a signal or a full disk
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
        except OSError as exc:
            # Our own partial line (a full disk) is taken back now, not left for the next
            # append to report as a crashed writer's.
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size > state.end:
                    os.ftruncate(fd, state.end)
            if exc.errno in _READ_ONLY:
                raise ReadOnlyLogError(path, "appending", os.strerror(exc.errno)) from None
            raise LogWriteError(
                path, "appending", exc, "nothing of this call was kept. Free space or fix "
                "the disk, then retry",
            ) from exc  # fmt: skip

    def replace(self, thread_id: str, lines: Iterable[bytes], *, backup: bool) -> None:
        path = self.path(thread_id)

        def write(out: BinaryIO) -> None:
            for line in lines:
                out.write(line)

        self._atomic_write(path, write, backup=backup)
        self._forget_file(thread_id)

    def truncate(self, thread_id: str, n_lines: int, *, backup: bool) -> None:
        path = self.path(thread_id)
        state = self._states[thread_id]
        end = state.offsets[n_lines]

        def write(out: BinaryIO) -> None:
            _copy_range(path, out, 0, end)

        self._atomic_write(path, write, backup=backup)
        self._forget_file(thread_id)

    def copy(self, source_id: str, target_id: str, n_lines: int | None, header: bytes) -> None:
        source = self.path(source_id)
        state = self._states.get(source_id)
        if state is None or state.lines == 0:
            raise ThreadNotFoundError(source_id)
        start = state.offsets[1]
        end = state.offsets[state.lines if n_lines is None else n_lines]

        def write(out: BinaryIO) -> None:
            out.write(header)
            _copy_range(source, out, start, end)

        self._atomic_write(self.path(target_id), write, backup=False)
        self._forget_file(target_id)

    def delete(self, thread_id: str) -> None:
        path = self.path(thread_id)
        lock_file = self.root / LOCK_DIR / (path.name[: -len(SUFFIX)] + ".lock")
        # The lock file last: a process waiting on it re-checks it after its flock.
        for p in [path, *self.backup_paths(path), lock_file]:
            with contextlib.suppress(FileNotFoundError), _writing(p, "deleting"):
                p.unlink()
        self._forget_file(thread_id)

    def _forget_file(self, thread_id: str) -> None:
        """The log was rewritten or removed: forget its offsets, close it if ours.

        (Another OS thread's descriptor of the old file is never used for the new
        one: `_ThreadLock.data_fd` compares inodes. It is closed when reopened.)
        """
        self._states.pop(thread_id, None)
        lock = self._held(thread_id)
        if lock is not None:
            lock.seen = None
            lock.close_data()

    def _atomic_write(self, path: Path, write: Callable[[BinaryIO], None], *, backup: bool) -> None:
        with _writing(path, "rewriting"):
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=self.root)
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)
                out.flush()
                if self.fsync:
                    _datasync(out.fileno())
            os.chmod(tmp, 0o644)
            if backup and path.exists():
                self._rotate(path)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if self.fsync:
            _fsync_dir(self.root)

    def _rotate(self, path: Path) -> None:
        """Shift ``.1`` -> ``.2`` ... and hard-link the current log as ``.1``."""
        for old in reversed(self.backup_paths(path)):
            n = int(_BACKUP.search(old.name).group(1))  # type: ignore[union-attr]
            os.replace(old, old.with_name(f"{path.name}.{n + 1}"))
        newest = path.with_name(path.name + ".1")
        try:
            os.link(path, newest)  # the live log stays in place until os.replace
        except OSError:
            import shutil

            shutil.copy2(path, newest)


class _JsonlAio(AsyncLog):
    """`JsonlStorage`'s async door: inline on the event loop, long waits elsewhere."""

    reads_wait = False

    def __init__(self, storage: JsonlStorage) -> None:
        self.storage = storage

    def locked(
        self, thread_id: str, *, exclusive: bool
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return self.storage._lock(thread_id).ahold(exclusive)

    async def sync(self, thread_id: str) -> Synced:
        if thread_id not in self.storage._states and self._unread(thread_id) > _INLINE_READ:
            return await asyncio.to_thread(self.storage.sync, thread_id)
        return self.storage.sync(thread_id)

    def _unread(self, thread_id: str) -> int:
        """Bytes the first `sync` of a thread would read (0 if unknown: `sync` says why).
        Later syncs read what other processes appended since, inline."""
        state = self.storage._states.get(thread_id)
        try:
            st = os.lstat(self.storage.path(thread_id))
        except (OSError, ValueError):
            return 0
        if state is None or state.ino != st.st_ino:
            return st.st_size
        return st.st_size - state.end

    def read_ready(self, thread_id: str, lines: Sequence[int]) -> dict[int, bytes]:
        return self.storage.read_many(thread_id, lines)

    async def read_many(self, thread_id: str, lines: Sequence[int]) -> dict[int, bytes]:
        return self.storage.read_many(thread_id, lines)

    async def append(
        self, thread_id: str, lines: Sequence[bytes], *, durable: bool = True
    ) -> int:
        storage = self.storage
        lock = storage._held(thread_id)
        if not storage.fsync or lock is None:
            return storage.append(thread_id, lines, durable=durable)
        # Written now (page cache); the flush to disk, milliseconds, off the loop.
        first = storage.append(thread_id, lines, durable=False)
        if durable:
            flushing = asyncio.ensure_future(asyncio.to_thread(lock.flush))
            try:
                await asyncio.shield(flushing)
            except asyncio.CancelledError:
                await flushing  # the lock (and its descriptor) stay ours until it ends
                raise
        return first


def _make_dirs(root: Path, action: str) -> Path:
    """`JsonlStorage.make_dirs` (a function: locks use it without the storage)."""
    lock_dir = root / LOCK_DIR
    with _writing(root, action):
        root.mkdir(parents=True, exist_ok=True)
        if os.path.islink(lock_dir):
            raise SymlinkRefusedError(lock_dir)
        lock_dir.mkdir(exist_ok=True)
    return lock_dir


def _inode(path: str | Path) -> int:
    """The inode at ``path`` (not following a link), -1 if nothing is there."""
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return -1


_NO_LINES: tuple[bytes, ...] = ()  # what a `sync` that found nothing new reports

_SPLIT_CHUNK = 1 << 16
"""Bytes `_read_lines_from` reads and splits at a time: a cold open of a long log never
holds its whole text besides its lines (in a fresh process, memory first touched costs
a page fault per 4 KB), and each chunk's buffer is reused for the next."""


def _same_log(path: Path, lock: _ThreadLock | None, ino: int, state: _FileState) -> bool | None:
    """Whether the log at ``path``, inode ``ino``, is the one ``state`` describes: its first
    line is the one we read (``None``: the path holds another inode by now).

    While our descriptor of a log is open its inode number is taken; once it is closed
    (past ``max_open_threads``, reading outside `JsonlStorage.locked`, a forked child), a
    log another process deleted and made again may get the same number, even the same size.
    The first line (the header, its creation time to the microsecond) tells them apart; a
    log rewritten whole keeps its header (`prune`, `delete_for_runs`), so the end of the
    last line we know (its checksum) must be where we left it too: two ``pread``s when a
    log is first used again.
    """
    if lock is not None:
        fd = lock.data_fd(ino)
        return None if fd is None else _known_ends(fd, state)
    with _open_read(path) as f:
        if os.fstat(f.fileno()).st_ino != ino:
            return None
        return _known_ends(f.fileno(), state)


_TAIL = 8
"""Bytes of the last line `_FileState.tail` keeps: a sealed line's checksum and brace."""


def _known_ends(fd: int, state: _FileState) -> bool:
    """Whether ``fd`` begins with our first line and has our last line's end at our end."""
    tail = state.tail + b"\n"
    return (
        os.pread(fd, state.offsets[1], 0)[:-1] == state.header
        and os.pread(fd, len(tail), state.end - len(tail)) == tail
    )


def _read_lines_from(fd: int, start: int, stop: int | None = None) -> tuple[list[bytes], bytes]:
    """The complete lines of ``fd`` from ``start`` to ``stop`` (or its end), without their
    newlines, split in C chunk by chunk; and what follows the last newline (``b""``, or a
    torn line)."""
    lines: list[bytes] = []
    pending = b""
    pos = start
    while stop is None or pos < stop:
        want = _SPLIT_CHUNK if stop is None else min(_SPLIT_CHUNK, stop - pos)
        chunk = os.pread(fd, want, pos)
        if not chunk:
            break
        pos += len(chunk)
        parts = chunk.split(b"\n")
        if pending:
            parts[0] = pending + parts[0]
        pending = parts.pop()
        lines.extend(parts)
    return lines, pending


_SPAN_GAP = 1 << 16
"""Unasked bytes `_pread_lines` reads between two asked lines rather than make a second
call: a cold open reads most message lines of a log, one ``pread`` a span is cheaper."""


def _pread_lines(fd: int, offsets: array[int], lines: Iterable[int]) -> dict[int, bytes]:
    """The asked lines, reading each span of lines close together with one ``pread``."""
    out: dict[int, bytes] = {}
    wanted = sorted(set(lines))
    i = 0
    while i < len(wanted):
        j = i
        while (
            j + 1 < len(wanted)
            and offsets[wanted[j + 1] - 1] - offsets[wanted[j]] <= _SPAN_GAP
        ):
            j += 1
        start = offsets[wanted[i] - 1]
        if i == j:
            out[wanted[i]] = os.pread(fd, offsets[wanted[i]] - start - 1, start)
        else:
            span = memoryview(os.pread(fd, offsets[wanted[j]] - start, start))
            for line in wanted[i : j + 1]:
                out[line] = bytes(span[offsets[line - 1] - start : offsets[line] - start - 1])
        i = j + 1
    return out


def _datasync(fd: int) -> None:
    """Flush a file's data (and the size that reaches it), not its times: what a
    reader needs. ``fdatasync`` where the OS has it (looked up per call: tests count it)."""
    getattr(os, "fdatasync", os.fsync)(fd)


def _open_at(directory: Path, name: str, flags: int) -> int:
    """Open ``directory/name`` following neither ``name`` nor ``directory`` if a link."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(directory):
            raise SymlinkRefusedError(directory) from None
        raise
    try:
        return os.open(name, flags | _NOFOLLOW, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SymlinkRefusedError(directory / name) from None
        raise
    finally:
        os.close(dir_fd)


def _open_nofollow(path: str | Path, flags: int) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (the root may be one)."""
    try:
        return os.open(path, flags | _NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SymlinkRefusedError(path) from None
        raise


def _open_read(path: Path) -> BinaryIO:
    """``open(path, "rb")`` that refuses a symbolic link."""
    return open(path, "rb", opener=lambda p, flags: _open_nofollow(path, flags))


def read_file(path: str | Path) -> bytes:
    """The bytes of a file inside the root, for a reader outside the saver (`verify`, an
    archive index): a symbolic link is refused (`SymlinkRefusedError`), as the saver
    refuses one, and so is anything but a regular file (`NotARegularFileError`: a FIFO
    would block the reader, ``/dev/zero`` never end)."""
    with _open_regular(path) as f:
        return f.read()


@contextlib.contextmanager
def _open_regular(path: str | Path) -> Iterator[BinaryIO]:
    """``path`` open for reading, refused if a link or not a regular file (`read_file`)."""
    fd = _open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO: no wait
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFileError(path)
        yield f


@contextlib.contextmanager
def _writing(path: str | Path, action: str) -> Iterator[None]:
    """Turn "not allowed to write here" into `ReadOnlyLogError` naming ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _READ_ONLY and not isinstance(exc, SymlinkRefusedError):
            raise ReadOnlyLogError(path, action, os.strerror(exc.errno)) from None
        raise


def _copy_range(path: Path, out: BinaryIO, start: int, end: int) -> None:
    with _open_read(path) as f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, _READ_CHUNK))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)


def _first_line(path: Path) -> dict | None:
    """The header of the log at ``path``, parsed (``None``: a link, not a regular file,
    no complete first line, or one that does not read)."""
    try:
        with _open_regular(path) as f:
            raw = f.readline()
    except OSError:  # a link, not a regular file (`NotARegularFileError` is one), gone
        return None
    if not raw.endswith(b"\n"):
        return None
    try:
        return loads_line(raw[:-1])
    except ValueError:
        return None


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
