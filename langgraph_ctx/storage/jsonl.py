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
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from langgraph_ctx.codec import loads_line
from langgraph_ctx.errors import (
    ReadOnlyLogError,
    SymlinkRefusedError,
    ThreadNotFoundError,
    TornLineWarning,
)
from langgraph_ctx.storage.base import LogStorage, Synced, ThreadLock
from langgraph_ctx.storage.thread_ids import (
    check_thread_id,
    decode_thread_id,
    encode_thread_id,
    is_hashed,
)

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".jsonl"
LOCK_DIR = ".locks"
_READ_CHUNK = 1 << 20
_BACKUP = re.compile(r"\.(\d+)$")
_BACKUP_NAME = re.compile(r"(.+\.jsonl)\.([1-9][0-9]*)")  # .1, .2, ... as _rotate names them
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# errno values meaning "you may not write here" (read-only mount, permissions).
_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


@dataclass
class _FileState:
    ino: int = -1
    offsets: list[int] = field(default_factory=lambda: [0])  # start of line i+1 at [i]
    torn_warned: int = -1

    @property
    def end(self) -> int:
        return self.offsets[-1]

    @property
    def lines(self) -> int:
        return len(self.offsets) - 1


class _ThreadLock(ThreadLock):
    """Re-entrant in-process lock plus an flock on the thread's lock file.

    Writers create the lock file; readers only open an existing one, read-only
    (flock works on any descriptor), so reading needs no write permission and
    reading a missing thread creates nothing. Deleting a thread removes its
    lock file, so after waiting for the flock we check the file we locked is
    still the one at the path, and start over if not.
    """

    def __init__(self, storage: JsonlStorage, name: str) -> None:
        super().__init__()
        self.storage = storage
        self.name = name + ".lock"
        self.path = storage.root / LOCK_DIR / self.name
        self.log = storage.root / (name + SUFFIX)
        self.fd: int | None = None

    def _acquire(self, exclusive: bool) -> None:
        if fcntl is None:  # pragma: no cover - Windows: in-process lock only
            return
        while True:
            fd = self._open(exclusive)
            if fd is None:
                return  # a reader, and the thread has no lock file: nothing to exclude
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                if _same_file(fd, self.path):
                    self.fd = fd
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # the thread was deleted (and its lock file) while we waited

    def _open(self, exclusive: bool) -> int | None:
        if not exclusive:
            with contextlib.suppress(FileNotFoundError):
                return _open_at(self.storage.root / LOCK_DIR, self.name, os.O_RDONLY)
            try:
                os.lstat(self.log)
            except FileNotFoundError:
                return None  # nothing to read, nothing to create
            with contextlib.suppress(ReadOnlyLogError):
                return self._create()  # a log without a lock file (copied in)
            return None  # read-only: no writer can be using this lock file either
        return self._create()

    def _create(self) -> int:
        lock_dir = self.storage.make_dirs("locking")
        with _writing(self.path, "locking"):
            return _open_at(lock_dir, self.name, os.O_RDWR | os.O_CREAT)

    def _release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


class JsonlStorage(LogStorage):
    """Thread logs as JSONL files under ``root``.

    Args:
        root: Directory holding one file per thread (created by the first write).
        fsync: ``os.fsync`` every append and rewrite before returning, so an
            acknowledged checkpoint survives a power loss, not only a crash.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.root = Path(root)  # no I/O here: async apps build savers inside event loops
        self.fsync = fsync
        self._states: dict[str, _FileState] = {}
        self._paths: dict[str, Path] = {}
        self._locks: dict[str, _ThreadLock] = {}
        self._guard = threading.Lock()
        self._listings = threading.local()

    def make_dirs(self, action: str) -> Path:
        """Create the root and its ``.locks`` directory if missing; return ``.locks``.

        Raises:
            ReadOnlyLogError: The root cannot be written to.
            SymlinkRefusedError: ``.locks`` is a symbolic link.
        """
        lock_dir = self.root / LOCK_DIR
        with _writing(self.root, action):
            self.root.mkdir(parents=True, exist_ok=True)
            if os.path.islink(lock_dir):
                raise SymlinkRefusedError(lock_dir)
            lock_dir.mkdir(exist_ok=True)
        return lock_dir

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
        listing = getattr(self._listings, "current", None)
        names = listing[0] if listing is not None else self.scan()[0]
        for file_name in names:
            entry = self.root / file_name
            name = file_name[: -len(SUFFIX)]
            if is_hashed(name):
                header = _first_line(entry)
                if header is not None and isinstance(header.get("thread_id"), str):
                    yield header["thread_id"]
                continue
            try:
                yield decode_thread_id(name)
            except ValueError:
                continue  # not one of ours (a user's own file)

    def backups(self, thread_id: str) -> list[str]:
        listing = getattr(self._listings, "current", None)
        if listing is not None:
            return list(listing[1].get(self.path(thread_id).name, []))
        return [str(p) for p in self._backup_paths(self.path(thread_id))]

    @staticmethod
    def _backup_paths(path: Path) -> list[Path]:
        found = []
        for candidate in path.parent.glob(path.name + ".*"):
            match = _BACKUP_NAME.fullmatch(candidate.name)
            if match and match.group(1) == path.name:
                found.append((int(match.group(2)), candidate))
        return [p for _, p in sorted(found)]

    # ------------------------------------------------------------------ locks

    def locked(self, thread_id: str, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        name = encode_thread_id(check_thread_id(thread_id))
        with self._guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = _ThreadLock(self, name)
        return lock.hold(exclusive)

    # ------------------------------------------------------------------ reads

    def sync(self, thread_id: str) -> Synced:
        path = self.path(thread_id)
        state = self._states.get(thread_id)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            reset = state is not None and state.lines > 0
            self._states[thread_id] = _FileState()
            return Synced(reset, 1, [])
        if stat.S_ISLNK(st.st_mode):
            raise SymlinkRefusedError(path)
        reset = False
        if state is None or st.st_ino != state.ino or st.st_size < state.end:
            reset = state is not None
            state = self._states[thread_id] = _FileState(ino=st.st_ino)
        if st.st_size == state.end:
            return Synced(reset, state.lines + 1, [])
        first = state.lines + 1
        lines: list[bytes] = []
        with _open_read(path) as f:
            f.seek(state.end)
            pending = b""
            pos = state.end
            while True:
                chunk = f.read(_READ_CHUNK)
                if not chunk:
                    break
                data = pending + chunk
                start = 0
                while (nl := data.find(b"\n", start)) != -1:
                    lines.append(data[start:nl])
                    pos += nl + 1 - start
                    state.offsets.append(pos)
                    start = nl + 1
                pending = data[start:]
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
        start, stop = state.offsets[line - 1], state.offsets[line]
        with _open_read(self.path(thread_id)) as f:
            return os.pread(f.fileno(), stop - start - 1, start)

    def read_many(self, thread_id: str, lines: Iterable[int]) -> dict[int, bytes]:
        """Several lines with one open file (the saver's hot path)."""
        state = self._states[thread_id]
        out: dict[int, bytes] = {}
        with _open_read(self.path(thread_id)) as f:
            fd = f.fileno()
            for line in lines:
                start, stop = state.offsets[line - 1], state.offsets[line]
                out[line] = os.pread(fd, stop - start - 1, start)
        return out

    def read_all(self, thread_id: str) -> list[bytes]:
        try:
            with _open_read(self.path(thread_id)) as f:
                data = f.read()
        except FileNotFoundError:
            return []
        return data.split(b"\n")[:-1]  # the last piece is empty, or a torn line

    # ----------------------------------------------------------------- writes

    def append(self, thread_id: str, lines: Sequence[bytes]) -> int:
        path = self.path(thread_id)
        state = self._states.setdefault(thread_id, _FileState())
        data = b"".join(lines)
        with _writing(path, "appending"):
            fd = _open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            st = os.fstat(fd)
            if state.ino != st.st_ino:
                if state.lines:
                    raise RuntimeError(f"{path} was replaced since it was synced")
                state.ino = st.st_ino
            if st.st_size > state.end:
                warnings.warn(
                    f"{path}:{state.lines + 1}: removing a torn last line "
                    f"({st.st_size - state.end} bytes) left by an interrupted write",
                    TornLineWarning,
                    stacklevel=4,
                )
                os.ftruncate(fd, state.end)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        first = state.lines + 1
        pos = state.end
        for line in lines:
            pos += len(line)
            state.offsets.append(pos)
        if self.fsync and first == 1:
            _fsync_dir(self.root)
        return first

    def replace(self, thread_id: str, lines: Iterable[bytes], *, backup: bool) -> None:
        path = self.path(thread_id)

        def write(out: BinaryIO) -> None:
            for line in lines:
                out.write(line)

        self._atomic_write(path, write, backup=backup)
        self._states.pop(thread_id, None)

    def truncate(self, thread_id: str, n_lines: int, *, backup: bool) -> None:
        path = self.path(thread_id)
        state = self._states[thread_id]
        end = state.offsets[n_lines]

        def write(out: BinaryIO) -> None:
            _copy_range(path, out, 0, end)

        self._atomic_write(path, write, backup=backup)
        self._states.pop(thread_id, None)

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
        self._states.pop(target_id, None)

    def delete(self, thread_id: str) -> None:
        path = self.path(thread_id)
        lock_file = self.root / LOCK_DIR / (path.name[: -len(SUFFIX)] + ".lock")
        # The lock file last: a process waiting on it re-checks it after its flock.
        for p in [path, *self._backup_paths(path), lock_file]:
            with contextlib.suppress(FileNotFoundError), _writing(p, "deleting"):
                p.unlink()
        self._states.pop(thread_id, None)

    def _atomic_write(self, path: Path, write: Callable[[BinaryIO], None], *, backup: bool) -> None:
        with _writing(path, "rewriting"):
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=self.root)
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)
                out.flush()
                if self.fsync:
                    os.fsync(out.fileno())
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
        for old in reversed(self._backup_paths(path)):
            n = int(_BACKUP.search(old.name).group(1))  # type: ignore[union-attr]
            os.replace(old, old.with_name(f"{path.name}.{n + 1}"))
        newest = path.with_name(path.name + ".1")
        try:
            os.link(path, newest)  # the live log stays in place until os.replace
        except OSError:
            import shutil

            shutil.copy2(path, newest)


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


def _open_nofollow(path: Path, flags: int) -> int:
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


@contextlib.contextmanager
def _writing(path: Path, action: str) -> Iterator[None]:
    """Turn "not allowed to write here" into `ReadOnlyLogError` naming ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _READ_ONLY and not isinstance(exc, SymlinkRefusedError):
            raise ReadOnlyLogError(path, action, os.strerror(exc.errno)) from None
        raise


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.lstat(path).st_ino
    except FileNotFoundError:
        return False


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
    try:
        with _open_read(path) as f:
            raw = f.readline()
    except OSError:
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
