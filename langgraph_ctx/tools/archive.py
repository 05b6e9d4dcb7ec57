"""`ContextArchive`: archived contexts as forks of the thread, with an index beside them.

Archiving a context forks the conversation's thread at the checkpoint of its last
assistant message, so every archived message stays readable where the saver keeps
threads, and the transcript is never touched. The index (the seed's `index.json`) lists
the archives of one thread:

- `JsonlSaver`: the fork is `<root>/<thread>.ctx.<contextId>.jsonl`; the index is
  `<root>/<thread>.contexts.json`, replaced atomically under a lock.
- `RedisLogSaver`: the fork is a thread key like any other; the index is the JSON string
  `ctx:<prefix>:contexts:{<thread>}` (same TTL as the threads).
- any other saver (`InMemorySaver`, ...): the fork replays `list()` into `put()` /
  `put_writes()`; the index is in memory, shared by everything bound to that saver object.

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx.tools.archive import ContextArchive

archive = ContextArchive(JsonlSaver("./chats"))
for entry in archive.entries("task-001"):          # newest first
    print(entry.context_id, entry.title, entry.message_count, entry.summary_preview)
archive.messages(entry)                            # the archived context's messages
```

`<thread>` is the thread id encoded as in thread file names (`storage.thread_ids`), so
any thread id is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from langgraph_ctx.context.active_context import read_active_context, utc_now
from langgraph_ctx.context.archive import (
    ArchivedContext,
    archive_span,
    conversation_lines,
    count_messages,
    default_title,
    extractive_summary,
    index_document,
    new_context_id,
    normalize_title,
    parse_index_document,
    preview,
)
from langgraph_ctx.errors import (
    CheckpointNotFoundError,
    LangGraphCtxError,
    ThreadExistsError,
)
from langgraph_ctx.storage.jsonl import JsonlStorage
from langgraph_ctx.storage.thread_ids import check_thread_id, encode_thread_id

__all__ = [
    "ArchiveOutcome",
    "ContextArchive",
    "ContextArchiveError",
    "ContextIndex",
    "JsonFileContextIndex",
    "MemoryContextIndex",
    "RedisContextIndex",
    "Summarizer",
    "archive_thread_id",
    "fork_thread",
]

Summarizer = Callable[[Sequence[BaseMessage]], str]
"""Makes the short summary of an archived context from its messages (may call a model)."""

INDEX_SUFFIX = ".contexts.json"


class ContextArchiveError(LangGraphCtxError):
    """An archive or its index cannot be read or written; the message says which and why."""


def archive_thread_id(thread_id: str, context_id: str) -> str:
    """The thread id of the fork holding an archived context: `<thread>.ctx.<contextId>`.

    Readable as a file name (`task-001.ctx.c_20261122_3fa91c.jsonl`) and listed by
    `saver.list_threads()` like any thread.
    """
    return f"{thread_id}.ctx.{context_id}"


# ---------------------------------------------------------------------------
# The index: one JSON document per thread
# ---------------------------------------------------------------------------


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
        self.root = Path(root)
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
            raw = self.path(thread_id).read_bytes()
        except FileNotFoundError:
            raw = None
        return self._parse(raw, thread_id)

    def read(self, thread_id: str) -> list[ArchivedContext]:
        with self._lock(thread_id, exclusive=False):
            return self._load(thread_id)

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


def index_for(saver: BaseCheckpointSaver[Any]) -> ContextIndex:
    """The natural index home of `saver` (see the module's table)."""
    storage = getattr(saver, "storage", None)
    if isinstance(storage, JsonlStorage):
        return JsonFileContextIndex(storage.root, fsync=storage.fsync, locks=storage)
    try:
        from langgraph_ctx.storage.redis import RedisStorage
    except ImportError:  # the redis extra is not installed
        RedisStorage = None  # type: ignore[assignment,misc]
    if RedisStorage is not None and isinstance(storage, RedisStorage):
        return RedisContextIndex(storage.client, prefix=storage.prefix, ttl=storage.ttl)
    with _MEMORY_GUARD:
        try:
            index = _MEMORY_INDEXES.get(saver)
            if index is None:
                index = _MEMORY_INDEXES[saver] = MemoryContextIndex()
        except TypeError:  # not weak-referenceable: an index for this archive only
            index = MemoryContextIndex()
    return index


# ---------------------------------------------------------------------------
# Checkpoints: where to fork, and forking any saver
# ---------------------------------------------------------------------------


def _root(thread_id: str | int, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _newest_first(
    saver: BaseCheckpointSaver[Any], thread_id: str | int
) -> Iterator[CheckpointTuple]:
    """The thread's root checkpoints, newest first, a page at a time (savers decode states)."""
    before: RunnableConfig | None = None
    while True:
        page = list(saver.list(_root(thread_id), before=before, limit=8))
        yield from page
        if len(page) < 8:
            return
        before = page[-1].config


def find_checkpoint(
    saver: BaseCheckpointSaver[Any], thread_id: str | int, message_id: str
) -> CheckpointTuple | None:
    """The newest checkpoint whose `messages` end with `message_id` (not an input checkpoint).

    That is the state right after the message was added, before the next user turn. The
    search stops at the first checkpoint older than the message.
    """
    for tup in _newest_first(saver, thread_id):
        messages = tup.checkpoint.get("channel_values", {}).get("messages") or []
        ids = [getattr(m, "id", None) for m in messages]
        if message_id not in ids:
            return None  # older than the message
        if ids[-1] == message_id and (tup.metadata or {}).get("source") != "input":
            return tup
    return None


def thread_started_at(saver: BaseCheckpointSaver[Any], thread_id: str | int) -> str | None:
    """When the thread's first checkpoint was saved (its `step == -1` input checkpoint)."""
    first = None
    for tup in saver.list(_root(thread_id), filter={"step": -1}):
        first = tup
    ts = first.checkpoint.get("ts") if first is not None else None
    try:  # as the index's other times: UTC, milliseconds
        return (
            datetime.fromisoformat(ts).astimezone(timezone.utc).isoformat(timespec="milliseconds")
        )
    except (TypeError, ValueError):
        return ts


def fork_thread(
    saver: BaseCheckpointSaver[Any],
    source_thread_id: str | int,
    target_thread_id: str,
    *,
    checkpoint_id: str | None = None,
) -> RunnableConfig:
    """Copy a thread as it was at `checkpoint_id` (whole if None); the fork's head config.

    Uses `saver.fork` when the saver has one (`JsonlSaver`, `RedisLogSaver`). Otherwise
    replays the source: every checkpoint up to `checkpoint_id` (all namespaces, ids are
    time-ordered), oldest first, into `put()`, and the pending writes of each copied
    checkpoint but the last into `put_writes()`, as a file fork copies the log up to that
    checkpoint.

    Example:
        ```python
        saver = InMemorySaver()             # has no fork of its own
        head = fork_thread(saver, "task-001", "task-001-copy", checkpoint_id=cp_id)
        graph.invoke({"messages": [("user", "try another way")]}, head)
        ```

    Raises:
        ThreadExistsError: the target has checkpoints.
        CheckpointNotFoundError: `checkpoint_id` is not a root checkpoint of the source.
    """
    fork = getattr(saver, "fork", None)
    if callable(fork):
        return fork(source_thread_id, target_thread_id, checkpoint_id=checkpoint_id)  # type: ignore[no-any-return]
    if saver.get_tuple(_root(target_thread_id)) is not None:
        raise ThreadExistsError(target_thread_id)
    tuples = sorted(
        saver.list({"configurable": {"thread_id": source_thread_id}}),
        key=lambda t: t.checkpoint["id"],
    )
    if checkpoint_id is not None:
        roots = [t for t in tuples if not t.config["configurable"].get("checkpoint_ns")]
        if not any(t.checkpoint["id"] == checkpoint_id for t in roots):
            raise CheckpointNotFoundError(source_thread_id, checkpoint_id)
        tuples = [t for t in tuples if t.checkpoint["id"] <= checkpoint_id]
    head: RunnableConfig | None = None
    for tup in tuples:
        ns = tup.config["configurable"].get("checkpoint_ns", "")
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        config: RunnableConfig = {
            "configurable": {"thread_id": target_thread_id, "checkpoint_ns": ns}
        }
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        saved = saver.put(
            config, tup.checkpoint, tup.metadata, dict(tup.checkpoint["channel_versions"])
        )
        if tup.checkpoint["id"] != checkpoint_id:
            by_task: dict[str, list[tuple[str, Any]]] = {}
            for task_id, channel, value in tup.pending_writes or []:
                by_task.setdefault(task_id, []).append((channel, value))
            for task_id, writes in by_task.items():
                saver.put_writes(saved, writes, task_id)
        if ns == "":
            head = saved
    return head or _root(target_thread_id)


# ---------------------------------------------------------------------------
# The archive
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveOutcome:
    """What `ContextArchive.archive` did."""

    status: Literal["archived", "nothing_to_archive", "already_archived"]
    entry: ArchivedContext | None = None
    """The new archive (archived), or the existing one (already_archived)."""
    same_title: tuple[ArchivedContext, ...] = field(default_factory=tuple)
    """Earlier archives with the same title (the new one is told apart by its id)."""
    summary_error: str | None = None
    """Why the summarizer failed, when the extractive summary stood in for it."""


class ContextArchive:
    """Archives of a thread's contexts, on `saver`, with their index.

    Args:
        saver: the graph's checkpointer (the conversation's threads live there).
        index: where the index lives; default: beside the threads (see the module).

    Example:
        ```python
        archive = ContextArchive(saver)
        archive.entries("task-001")[0].title      # the newest archive
        ```
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], *, index: ContextIndex | None = None):
        self.saver = saver
        self.index = index if index is not None else index_for(saver)
        self._messages: OrderedDict[str, list[BaseMessage]] = OrderedDict()
        self._guard = threading.Lock()

    def entries(self, thread_id: str | int) -> list[ArchivedContext]:
        """The thread's archives, newest first."""
        return list(reversed(self.index.read(str(thread_id))))

    def messages(self, entry: ArchivedContext, *, cached: bool = False) -> list[BaseMessage]:
        """The archived context's messages, read from its fork.

        With `cached`, a copy read earlier may be returned (an archive never changes, but
        its fork can be deleted since): search uses it, loading does not.

        Raises:
            ContextArchiveError: the fork is gone (deleted, or expired with a Redis TTL).
        """
        key = entry.archive_thread_id
        with self._guard:
            if cached and key in self._messages:
                self._messages.move_to_end(key)
                return self._messages[key]
        tup = self.saver.get_tuple(_root(key))
        if tup is None:
            raise ContextArchiveError(
                f"archived context {entry.context_id}: its thread {key!r} is gone (deleted or "
                "expired); the index still lists it"
            )
        values = tup.checkpoint.get("channel_values", {})
        messages = list(values.get("messages") or [])
        start = next(
            (i for i, m in enumerate(messages) if m.id == entry.start_message_id),
            0,
        )
        end = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].id == entry.end_message_id),
            len(messages) - 1,
        )
        span = messages[start : end + 1]
        with self._guard:
            self._messages[key] = span
            while len(self._messages) > 256:
                self._messages.popitem(last=False)
        return span

    def search_text(self, entry: ArchivedContext) -> list[str]:
        """The archive's messages as search text (`[]` when its fork is gone)."""
        try:
            return conversation_lines(self.messages(entry, cached=True))
        except ContextArchiveError:
            return []

    def archive(
        self,
        thread_id: str | int,
        messages: Sequence[BaseMessage],
        active: Any,
        *,
        title: str | None = None,
        reason: str | None = None,
        summarizer: Summarizer | None = None,
    ) -> ArchiveOutcome:
        """Archive the active context of `thread_id` as it was before the current user turn.

        `messages` and `active` are the graph state's `messages` and `active_context`. The
        thread is forked at the checkpoint whose messages end with the context's last
        assistant message (`archive_span`), and the index gets the new entry.

        Raises:
            ContextArchiveError: no saved checkpoint ends at that message (is the archive
                bound to the graph's checkpointer?), or the index is unreadable.
        """
        span = archive_span(messages, active)
        if span is None:
            return ArchiveOutcome(status="nothing_to_archive")
        first, last = messages[span.start], messages[span.end]
        thread_id = key = str(thread_id)  # LangGraph saves checkpoints under str(thread_id)
        existing = self.index.read(key)
        for entry in existing:
            if entry.end_message_id == last.id and entry.start_message_id == first.id:
                return ArchiveOutcome(status="already_archived", entry=entry)
        if last.id is None:
            raise ContextArchiveError(
                f"thread {thread_id!r}: the last assistant message has no id, so no checkpoint "
                "can be found for it; run the tools inside a graph with a checkpointer"
            )
        tup = find_checkpoint(self.saver, thread_id, last.id)
        if tup is None:
            raise ContextArchiveError(
                f"thread {thread_id!r} has no saved checkpoint ending at message {last.id!r}; "
                "bind context_tools to the checkpointer the graph was compiled with"
            )
        archived = list(messages[span.start : span.end + 1])
        summary, summary_error = extractive_summary(archived), None
        if summarizer is not None:
            try:
                summary = str(summarizer(archived)).strip() or summary
            except Exception as err:  # the summary is optional: keep the extractive one
                summary_error = f"{type(err).__name__}: {err}"
        value = read_active_context(active)
        loaded = (value or {}).get("loaded") or {}
        created_at = (value or {}).get("started_at") or thread_started_at(self.saver, thread_id)
        title = " ".join((title or "").split())[:120] or default_title(archived)
        taken = {e.context_id for e in existing}
        for _attempt in range(5):
            context_id = new_context_id(lambda c: c in taken)
            fork_id = archive_thread_id(key, context_id)
            try:
                fork_thread(self.saver, thread_id, fork_id, checkpoint_id=tup.checkpoint["id"])
                break
            except ThreadExistsError:
                taken.add(context_id)
        else:  # pragma: no cover - five random collisions in a row
            raise ContextArchiveError(f"thread {thread_id!r}: no free archive id after 5 tries")
        entry = ArchivedContext(
            context_id=context_id,
            title=title,
            created_at=created_at,
            archived_at=utc_now(),
            message_count=count_messages(archived),
            summary_preview=preview(summary),
            summary=summary,
            archive_reason=(reason or "").strip() or None,
            thread_id=key,
            archive_thread_id=fork_id,
            checkpoint_id=tup.checkpoint["id"],
            start_message_id=first.id,
            end_message_id=last.id,
            loaded_from=loaded.get("context_id") if isinstance(loaded, Mapping) else None,
        )
        try:
            items = self.index.update(key, lambda items: [*items, entry])
        except BaseException:
            with contextlib.suppress(Exception):  # leave no fork the index does not list
                self.saver.delete_thread(fork_id)
            raise
        same = tuple(
            e
            for e in reversed(items)
            if e.context_id != context_id and normalize_title(e.title) == normalize_title(title)
        )
        return ArchiveOutcome(
            status="archived", entry=entry, same_title=same, summary_error=summary_error
        )
