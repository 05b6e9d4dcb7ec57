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
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from langgraph_ctx.codec import loads_line
from langgraph_ctx.errors import ThreadNotFoundError
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


class TornLineWarning(UserWarning):
    """The last line of a log was cut short by a crash; it is ignored and repaired."""


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
    """Re-entrant in-process lock plus an flock on the thread's lock file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.fd: int | None = None

    def _acquire(self, exclusive: bool) -> None:
        if fcntl is None:  # pragma: no cover - Windows: in-process lock only
            return
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the lock directory was removed under us
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except BaseException:
            os.close(self.fd)
            self.fd = None
            raise

    def _release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


class JsonlStorage(LogStorage):
    """Thread logs as JSONL files under ``root``.

    Args:
        root: Directory holding one file per thread (created if missing).
        fsync: ``os.fsync`` every append and rewrite before returning, so an
            acknowledged checkpoint survives a power loss, not only a crash.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.root = Path(root)
        (self.root / LOCK_DIR).mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._states: dict[str, _FileState] = {}
        self._paths: dict[str, Path] = {}
        self._locks: dict[str, _ThreadLock] = {}
        self._guard = threading.Lock()

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
            return self.path(thread_id).stat().st_size > 0
        except FileNotFoundError:
            return False

    def thread_ids(self) -> Iterator[str]:
        for entry in sorted(self.root.glob("*" + SUFFIX)):
            name = entry.name[: -len(SUFFIX)]
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
        return [str(p) for p in self._backup_paths(self.path(thread_id))]

    @staticmethod
    def _backup_paths(path: Path) -> list[Path]:
        found = []
        for candidate in path.parent.glob(path.name + ".*"):
            match = _BACKUP.search(candidate.name)
            if match and candidate.name == f"{path.name}.{match.group(1)}":
                found.append((int(match.group(1)), candidate))
        return [p for _, p in sorted(found)]

    # ------------------------------------------------------------------ locks

    def locked(self, thread_id: str, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        name = encode_thread_id(check_thread_id(thread_id))
        with self._guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = _ThreadLock(self.root / LOCK_DIR / (name + ".lock"))
        return lock.hold(exclusive)

    # ------------------------------------------------------------------ reads

    def sync(self, thread_id: str) -> Synced:
        path = self.path(thread_id)
        state = self._states.get(thread_id)
        try:
            st = path.stat()
        except FileNotFoundError:
            reset = state is not None and state.lines > 0
            self._states[thread_id] = _FileState()
            return Synced(reset, 1, [])
        reset = False
        if state is None or st.st_ino != state.ino or st.st_size < state.end:
            reset = state is not None
            state = self._states[thread_id] = _FileState(ino=st.st_ino)
        if st.st_size == state.end:
            return Synced(reset, state.lines + 1, [])
        first = state.lines + 1
        lines: list[bytes] = []
        with open(path, "rb") as f:
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
        with open(self.path(thread_id), "rb") as f:
            return os.pread(f.fileno(), stop - start - 1, start)

    def read_many(self, thread_id: str, lines: Iterable[int]) -> dict[int, bytes]:
        """Several lines with one open file (the saver's hot path)."""
        state = self._states[thread_id]
        out: dict[int, bytes] = {}
        with open(self.path(thread_id), "rb") as f:
            fd = f.fileno()
            for line in lines:
                start, stop = state.offsets[line - 1], state.offsets[line]
                out[line] = os.pread(fd, stop - start - 1, start)
        return out

    def read_all(self, thread_id: str) -> list[bytes]:
        try:
            data = self.path(thread_id).read_bytes()
        except FileNotFoundError:
            return []
        return data.split(b"\n")[:-1]  # the last piece is empty, or a torn line

    # ----------------------------------------------------------------- writes

    def append(self, thread_id: str, lines: Sequence[bytes]) -> int:
        path = self.path(thread_id)
        state = self._states.setdefault(thread_id, _FileState())
        data = b"".join(lines)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
        for p in [path, *self._backup_paths(path)]:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        self._states.pop(thread_id, None)

    def _atomic_write(self, path: Path, write: Callable[[BinaryIO], None], *, backup: bool) -> None:
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


def _copy_range(path: Path, out: BinaryIO, start: int, end: int) -> None:
    with open(path, "rb") as f:
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
        with open(path, "rb") as f:
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
