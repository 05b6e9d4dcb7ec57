"""Where each thread's archive index lives: a JSON file, a Redis string, or memory.

- `JsonlSaver`: `<root>/<thread>.contexts.json`, replaced atomically under a lock;
- `RedisLogSaver`: the JSON string `ctx:<prefix>:contexts:{<thread>}` (same TTL as the
  threads);
- any other saver (`InMemorySaver`, ...): in memory, shared by everything bound to that
  saver object.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_ctx.context.archive.entries import (
    ArchivedContext,
    index_document,
    parse_index_document,
)
from langgraph_ctx.errors import (
    ContextArchiveError,
    NotARegularFileError,
    SymlinkRefusedError,
)
from langgraph_ctx.storage.jsonl import JsonlStorage, read_file
from langgraph_ctx.storage.thread_ids import check_thread_id, encode_thread_id

__all__ = [
    "INDEX_SUFFIX",
    "ContextIndex",
    "JsonFileContextIndex",
    "MemoryContextIndex",
    "RedisContextIndex",
    "index_for",
    "index_for_storage",
]

INDEX_SUFFIX = ".contexts.json"


class ContextIndex(ABC):
    """Where the archive index of each thread lives. Updates are atomic read-modify-writes."""

    @abstractmethod
    def read(self, thread_id: str) -> list[ArchivedContext]:
        """The thread's archives, oldest first (`[]` when none).

        Raises:
            ContextArchiveError: the stored index is unreadable (names where it is).
        """

    @abstractmethod
    def update(
        self, thread_id: str, change: Callable[[list[ArchivedContext]], list[ArchivedContext]]
    ) -> list[ArchivedContext]:
        """Replace the thread's archives with `change(archives)`, atomically; returns them."""

    @abstractmethod
    def describe(self, thread_id: str) -> str:
        """Where the index lives (a path, a key), for messages."""

    def delete(self, thread_id: str) -> None:
        """Forget the thread's index (the archived forks are separate threads)."""
        self.update(thread_id, lambda _: [])

    def _parse(self, raw: bytes | str | None, thread_id: str) -> list[ArchivedContext]:
        if raw is None:
            return []
        where = self.describe(thread_id)
        try:
            return parse_index_document(json.loads(raw), where)
        except ValueError as err:  # JSON errors are ValueErrors too
            raise ContextArchiveError(
                f"{where}: the context index is unreadable ({err}); fix or remove the file "
                "(the archived contexts themselves are intact threads)"
            ) from err

    @staticmethod
    def _dump(thread_id: str, items: Sequence[ArchivedContext]) -> bytes:
        return json.dumps(index_document(thread_id, items), ensure_ascii=False, indent=1).encode()


class JsonFileContextIndex(ContextIndex):
    """`<root>/<thread>.contexts.json` next to the thread files; replaced atomically.

    Writers of one thread's index take the same kind of lock as the thread files
    (`root/.locks/`), so several processes can archive into one thread safely.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = False,
        locks: JsonlStorage | None = None,
    ) -> None:
        self.root = Path(root).absolute()  # as the saver's: not following an `os.chdir`
        self.fsync = fsync
        # Only the storage's locks are used (flock files in root/.locks, re-entrant in
        # one process); pass the saver's storage to share its in-process locks.
        self._locks = locks if locks is not None else JsonlStorage(self.root)

    def path(self, thread_id: str) -> Path:
        """The index file of `thread_id`."""
        return self.root / (encode_thread_id(check_thread_id(thread_id)) + INDEX_SUFFIX)

    def describe(self, thread_id: str) -> str:
        return str(self.path(thread_id))

    def _lock(self, thread_id: str, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return self._locks.locked(f"{thread_id}\x00contexts", exclusive=exclusive)

    def _load(self, thread_id: str) -> list[ArchivedContext]:
        try:
            raw = read_file(self.path(thread_id))
        except FileNotFoundError:
            raw = None
        except (SymlinkRefusedError, NotARegularFileError) as exc:
            raise ContextArchiveError(f"the context index is unreadable: {exc}") from None
        return self._parse(raw, thread_id)

    def read(self, thread_id: str) -> list[ArchivedContext]:
        with self._lock(thread_id, exclusive=False):
            return self._load(thread_id)

    def delete(self, thread_id: str) -> None:
        """Remove the index file and its lock file; with no index, touch nothing."""
        if not self.path(thread_id).exists():
            return  # deleting a thread that never archived creates no lock file
        with self._lock(thread_id, exclusive=True):
            self.path(thread_id).unlink(missing_ok=True)
            # The lock file last, as for thread logs: a waiter re-checks it after its flock.
            self._locks.delete(f"{thread_id}\x00contexts")

    def update(
        self, thread_id: str, change: Callable[[list[ArchivedContext]], list[ArchivedContext]]
    ) -> list[ArchivedContext]:
        path = self.path(thread_id)
        with self._lock(thread_id, exclusive=True):
            items = change(self._load(thread_id))
            if not items:
                path.unlink(missing_ok=True)
                return items
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=INDEX_SUFFIX, dir=self.root)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(self._dump(thread_id, items))
                    out.flush()
                    if self.fsync:
                        os.fsync(out.fileno())
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            return items


class RedisContextIndex(ContextIndex):
    """`ctx:<prefix>:contexts:{<thread>}`: the index as one JSON string (WATCH/MULTI updates).

    With a `ttl`, the key expires like the thread logs (each update refreshes it).
    """

    def __init__(self, client: Any, *, prefix: str = "langgraph", ttl: float | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl = ttl

    def key(self, thread_id: str) -> str:
        """The Redis key of `thread_id`'s index."""
        return f"ctx:{self.prefix}:contexts:{{{encode_thread_id(check_thread_id(thread_id))}}}"

    def describe(self, thread_id: str) -> str:
        return f"redis key {self.key(thread_id)}"

    def read(self, thread_id: str) -> list[ArchivedContext]:
        return self._parse(self.client.get(self.key(thread_id)), thread_id)

    def update(
        self, thread_id: str, change: Callable[[list[ArchivedContext]], list[ArchivedContext]]
    ) -> list[ArchivedContext]:
        key = self.key(thread_id)
        result: list[list[ArchivedContext]] = []

        def apply(pipe: Any) -> None:
            items = change(self._parse(pipe.get(key), thread_id))
            pipe.multi()
            if not items:
                pipe.delete(key)
            elif self.ttl:
                pipe.set(key, self._dump(thread_id, items), px=max(1, round(self.ttl * 1000)))
            else:
                pipe.set(key, self._dump(thread_id, items))
            result[:] = [items]

        self.client.transaction(apply, key)  # retried when another writer changed the key
        return result[0]


class MemoryContextIndex(ContextIndex):
    """The index in this process's memory (for `InMemorySaver` and savers without a home)."""

    def __init__(self) -> None:
        self._items: dict[str, list[dict[str, Any]]] = {}
        self._guard = threading.Lock()

    def describe(self, thread_id: str) -> str:
        return f"in-memory context index of thread {thread_id!r}"

    def read(self, thread_id: str) -> list[ArchivedContext]:
        with self._guard:
            return [ArchivedContext.model_validate(i) for i in self._items.get(thread_id, [])]

    def update(
        self, thread_id: str, change: Callable[[list[ArchivedContext]], list[ArchivedContext]]
    ) -> list[ArchivedContext]:
        with self._guard:
            current = [ArchivedContext.model_validate(i) for i in self._items.get(thread_id, [])]
            items = change(current)
            self._items[thread_id] = [i.to_json() for i in items]
            return items


_MEMORY_INDEXES: weakref.WeakKeyDictionary[Any, MemoryContextIndex] = weakref.WeakKeyDictionary()
_MEMORY_GUARD = threading.Lock()


def index_for_storage(storage: Any) -> ContextIndex | None:
    """The index home next to a storage's threads (``None``: a storage without one)."""
    if isinstance(storage, JsonlStorage):
        return JsonFileContextIndex(storage.root, fsync=storage.fsync, locks=storage)
    try:
        from langgraph_ctx.storage.redis import RedisStorage
    except ImportError:  # the redis extra is not installed
        RedisStorage = None  # type: ignore[assignment,misc]
    if RedisStorage is not None and isinstance(storage, RedisStorage):
        return RedisContextIndex(storage.client, prefix=storage.prefix, ttl=storage.ttl)
    return None


def index_for(saver: BaseCheckpointSaver[Any]) -> ContextIndex:
    """The natural index home of `saver` (see the module's table)."""
    found = index_for_storage(getattr(saver, "storage", None))
    if found is not None:
        return found
    with _MEMORY_GUARD:
        try:
            index = _MEMORY_INDEXES.get(saver)
            if index is None:
                index = _MEMORY_INDEXES[saver] = MemoryContextIndex()
        except TypeError:  # not weak-referenceable: an index for this archive only
            index = MemoryContextIndex()
    return index
