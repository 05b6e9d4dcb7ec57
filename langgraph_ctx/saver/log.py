"""`LogSaver`: a LangGraph checkpointer over append-only thread logs.

The storage backend (`langgraph_ctx.storage`) moves lines; the codec
(`langgraph_ctx.codec`) says what a line means; this module is the saver API.
Per thread it keeps an index of the log (`langgraph_ctx.saver._index`, the
reader): where each message, checkpoint and write is, which line holds each
channel value. A log is read once; after that a call reads only what other
processes appended since. Each write is one batch of lines
(`langgraph_ctx.saver._batch`, the writer).

One implementation serves both APIs: ``get_tuple``, ``list``, ``put`` and
``put_writes`` are operations that yield their I/O requests
(`langgraph_ctx.saver._drive`); the sync methods run them on the storage, the
async ones on its async door (`LogStorage.aio`: JSONL inline on the event loop,
Redis on ``redis.asyncio``). The rarer calls (fork, revert, prune, delete) run
their sync method in a worker thread, as does everything on a backend without
an async door.

Storage costs what a step adds:

* a message is written once (content-addressed) and referenced by ordinal;
* a channel value is written only when its version changes (``new_versions``);
* a message list is written as "the first *k* messages of the value on line
  *L*, then these", so appending one message writes one reference.

One module (a little over 600 lines) because it is one class, `LogSaver`, whose methods
follow `BaseCheckpointSaver`'s order so that it reads side by side with LangGraph's own
savers; the reader and the writer are already their own modules.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.codec.classes import DEFAULT_RULES
from langgraph_ctx.codec.lines import (
    copied_thread_ids,
    dumps_line,
    has_legacy_versions,
    loads_sealed,
    thread_line,
    writes_past,
)
from langgraph_ctx.codec.values import PACKAGE_MODELS, LogSerde, value_rules
from langgraph_ctx.codec.versions import next_version
from langgraph_ctx.errors import (
    CheckpointNotFoundError,
    CorruptLineWarning,
    CorruptLogError,
    LangGraphCtxError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from langgraph_ctx.saver._batch import (
    Bodies,
    _Batch,
    checkpoint_batch,
    keeping_bodies,
    release_superseded,
    writes_batch,
)
from langgraph_ctx.saver._drive import (
    Append,
    Compute,
    Lock,
    Op,
    Sync,
    arun,
    read_lines,
    run,
)
from langgraph_ctx.saver._index import CheckpointHead, _Index
from langgraph_ctx.saver._retry import _retry_on_change
from langgraph_ctx.saver._rewrite import delta_ancestors, rebuilt_lines, writes_after
from langgraph_ctx.storage.base import LogStorage, Synced
from langgraph_ctx.storage.thread_ids import check_thread_id, id_list

__all__ = ["CheckpointInfo", "CorruptLineWarning", "LogSaver", "OnCorrupt"]

if TYPE_CHECKING:
    from langgraph_ctx.saver.retention import SweepReport

OnCorrupt = Literal["raise", "skip"]

DEFAULT_CACHED_THREADS = 64
"""Threads whose index `LogSaver` keeps between calls, by default: 1,000 idle 10-turn
threads then keep about 16 KB each in memory (an index of one is about 250 KB), where
LangGraph's `SqliteSaver` keeps 1 KB; 64 threads served at once still never reopen."""

DEFAULT_CACHED_LINES = 1_000_000
"""Log lines the cached indexes cover together, by default (about 1-4 GB at most,
a bound for many long threads; one 2,000-turn chat is about 14,000 lines)."""

@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint as `LogSaver.checkpoint_infos` lists it: everything but its values."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    ts: str
    metadata: dict[str, Any]
    channel_versions: dict[str, Any]
    versions_seen: dict[str, dict[str, Any]]
    line: int
    """The checkpoint's 1-based line in the thread's log."""

    @property
    def config(self) -> RunnableConfig:
        """The config that names this checkpoint (for `get_tuple`, `graph.get_state`)."""
        return _config(self.thread_id, self.checkpoint_ns, self.checkpoint_id)



class LogSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpointer over a `LogStorage` backend (see `JsonlSaver`, `RedisLogSaver`).

    Example:
        ```python
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph_ctx.saver.log import LogSaver
        from langgraph_ctx.storage.jsonl import JsonlStorage

        def chatbot(state: MessagesState):
            return {"messages": [("ai", f"you said: {state['messages'][-1].content}")]}

        builder = StateGraph(MessagesState)
        builder.add_node(chatbot)
        builder.add_edge(START, "chatbot")
        saver = LogSaver(JsonlStorage("./chats"))
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "task-001"}}
        graph.invoke({"messages": [("user", "hi")]}, config)

        saver.fork("task-001", "task-001-retry")
        ```

    Args:
        storage: Where thread logs live.
        serde: Serializer for the values the log does not store as readable
            JSON (a numpy array, say) and for message fields that are not
            JSON. Defaults to LangGraph's `JsonPlusSerializer` in strict mode.
            Whatever it is, reading follows the codec's rule (README, "Your
            objects stay yours"): a file never makes the reader import a module
            or call a function it names; your own plain data classes (pydantic
            models, dataclasses, enums, NamedTuples) come back as themselves,
            other classes only from the allowlist.
            Any other serializer (an `EncryptedSerializer`, your own) gets
            every value, message and metadata field whole: nothing is written
            in the clear, and the file is no longer readable JSON.
        allowed_types: Extra classes (or ``(module, name)`` pairs) your state
            holds that may be rebuilt through their constructor (classes that
            define their own ``__init__``, ``__post_init__``, ...; everything,
            under ``LANGGRAPH_STRICT_MSGPACK``). ``with_allowlist`` (what
            ``compile()`` calls in strict mode) adds to it.
        on_corrupt: ``"raise"`` (default) raises `CorruptLogError` naming the
            file and line; ``"skip"`` skips the line with a warning.
        max_cached_threads: How many threads' indexes stay in memory between
            calls (least recently used go first; ``None``: no bound). An
            evicted thread reopens from its log on its next call, as in a fresh
            process. Keep it above the number of threads served at once.
        max_cached_lines: Bound on the log lines those indexes cover together
            (an index costs about 1-4 KB a line, with the parsed lines and message
            objects it keeps); checked when a thread is opened, the thread being
            opened always stays. ``None``: no bound.
    """

    _release_lines = False
    """Whether a put lets go of the parsed lines its checkpoint supersedes
    (`release_superseded`): where reading a line again is a ``pread`` (`JsonlSaver`),
    not a round trip."""

    def __init__(
        self,
        storage: LogStorage,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        on_corrupt: OnCorrupt = "raise",
        max_cached_threads: int | None = DEFAULT_CACHED_THREADS,
        max_cached_lines: int | None = DEFAULT_CACHED_LINES,
    ) -> None:
        allowed = builtins.list(allowed_types)
        if serde is None:  # ours: typed methods, and rules known without asking it
            inner = JsonPlusSerializer(allowed_msgpack_modules=[*PACKAGE_MODELS, *allowed])
            serde = LogSerde(inner, DEFAULT_RULES.extended(allowed))
        else:
            serde = maybe_add_typed_methods(serde)
            if not isinstance(serde, LogSerde):
                serde = LogSerde(serde, value_rules(serde).extended(allowed))
            elif allowed:
                serde = LogSerde(serde.inner, serde.rules.extended(allowed))
        super().__init__(serde=serde)
        if on_corrupt not in ("raise", "skip"):
            raise ValueError("on_corrupt must be 'raise' or 'skip'")
        for name, bound in (
            ("max_cached_threads", max_cached_threads),
            ("max_cached_lines", max_cached_lines),
        ):
            if bound is not None and (type(bound) is not int or bound < 1):
                raise ValueError(f"{name} must be a positive int or None, got {bound!r}")
        self.storage = storage
        self.on_corrupt = on_corrupt
        self.max_cached_threads = max_cached_threads
        self.max_cached_lines = max_cached_lines
        # thread id -> index, least recently used first (see `_sync`, `_evict`)
        self._indexes: OrderedDict[str, _Index] = OrderedDict()
        self._scanned: _Index | None = None  # the index holding its cold scan (`_sync`)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> LogSaver:
        """Also rebuild these ``(module, name)`` classes from the log; returns this saver.

        ``compile()`` calls it under ``LANGGRAPH_STRICT_MSGPACK`` with the types
        of the graph's state schema; they join the codec's registry (and the
        serializer's allowlist). Unlike LangGraph's savers this widens the
        saver itself rather than a copy: a copy would share the storage's
        record of what was read but not the indexes built from it. Every graph
        compiled on the saver adds its own schema's types, never a file's.
        """
        assert isinstance(self.serde, LogSerde)
        self.serde.allow(extra_allowlist)
        return self

    # ------------------------------------------------- BaseCheckpointSaver

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's latest.

        Example:
            ```python
            tup = saver.get_tuple({"configurable": {"thread_id": "task-001"}})
            tup.checkpoint["channel_values"]["messages"]
            ```
        """
        return run(self.storage, lambda: self._get_tuple(config))

    def _get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        index = yield from self._open(thread_id)

        def found() -> CheckpointTuple | None:
            entry = index.named(ns, get_checkpoint_id(config))
            if entry is None:
                return None
            return self._tuple(conf["thread_id"], index, entry)

        tup: CheckpointTuple | None = yield Compute(found)
        return tup

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, optionally of one thread / namespace, filtered.

        Example:
            ```python
            for tup in saver.list({"configurable": {"thread_id": "task-001"}}, limit=5):
                print(tup.checkpoint["id"], tup.metadata["step"])
            ```
        """
        threads, ns_filter, id_filter, before_id = _list_plan(config, before)
        if threads is None:
            threads = builtins.list(self.storage.thread_ids())
        remaining = limit
        for thread in threads:
            if remaining is not None and remaining <= 0:
                return
            op = partial(
                self._list_thread, thread, ns_filter, id_filter, before_id, filter, remaining
            )
            found = run(self.storage, op)
            if remaining is not None:
                remaining -= len(found)
            yield from found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append a checkpoint: new messages once, changed channels only."""
        return run(self.storage, lambda: self._put(config, checkpoint, metadata, new_versions))

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        index = yield from self._open(thread_id, exclusive=True)
        batch = yield Compute(
            lambda: checkpoint_batch(
                index,
                self.serde,
                ns,
                conf.get("checkpoint_id"),
                checkpoint,
                get_checkpoint_metadata(config, metadata),
                new_versions,
            )
        )
        yield from self._commit(thread_id, index, batch)
        return _config(conf["thread_id"], ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append the writes of one task against a checkpoint."""
        run(self.storage, lambda: self._put_writes(config, writes, task_id, task_path))

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Op[None]:
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns, checkpoint_id = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        items = [
            (WRITES_IDX_MAP.get(channel, idx), channel, value)
            for idx, (channel, value) in enumerate(writes)
        ]
        yield from self._put_items(thread_id, ns, checkpoint_id, task_id, task_path, items)

    def _put_items(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        items: builtins.list[tuple[int, str, Any]],
    ) -> Op[None]:
        """`put_writes` of ``(index, channel, value)`` items (a revert's carried writes
        keep their indexes)."""
        index = yield from self._open(thread_id, exclusive=True)

        def built() -> _Batch | None:
            stored = index.writes_of(ns, checkpoint_id)
            fresh = [item for item in items if item[0] < 0 or (task_id, item[0]) not in stored]
            return writes_batch(index, self.serde, ns, checkpoint_id, task_id, task_path, fresh)

        batch = yield Compute(built)
        if batch is not None:
            # Flushed to disk (fsync) with the next checkpoint: a step that never
            # reached its checkpoint is run again, pending writes or not.
            yield from self._commit(thread_id, index, batch, durable=False)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's log and its revert backups."""
        thread_id = check_thread_id(thread_id)
        with self.storage.locked(thread_id, exclusive=True):
            self.storage.delete(thread_id)
            self._indexes.pop(thread_id, None)
        from langgraph_ctx.context.archive.store import delete_archives

        delete_archives(self, thread_id)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """The version after ``current``, in LangGraph's string format.

        The format `InMemorySaver`, `SqliteSaver` and the LangGraph server use
        (``"<counter, 32 digits>.<random>"``), so a thread moves freely between
        them and this saver. An integer ``current`` (a checkpoint put with integer
        versions by hand, or an older log's) continues as an integer, unlike
        `InMemorySaver`, which turns it into a string: LangGraph takes the highest of a
        checkpoint's versions, and a thread mixing ints and strings cannot be compared
        (see `langgraph_ctx.codec.versions.next_version`).
        """
        # An integer only continues a thread the caller put integer versions into.
        return cast(str, next_version(current))

    # ------------------------------------ optional methods, then fork/revert

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) made by these runs, in every thread.

        Checkpoints that survive keep working: a `DeltaChannel` history that ran
        through a deleted checkpoint is folded into the survivor first.
        """
        runs = set(id_list("run_ids", run_ids))  # taken once: a retry sees them all
        if runs:
            self._delete_for_runs(runs)

    @_retry_on_change
    def _delete_for_runs(self, runs: set[str]) -> None:
        for thread_id in list(self.storage.thread_ids()):
            with self._view(thread_id, exclusive=True) as index:
                run_of = {key: _run_id(index, e) for key, e in index.ckpts.items()}
                if not any(run in runs for run in run_of.values()):
                    continue
                keep = [e for key, e in index.ckpts.items() if run_of[key] not in runs]
                if keep:
                    self._rebuild(thread_id, index, keep)
                else:
                    self.storage.delete(thread_id)
                    self._indexes.pop(thread_id, None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread, and its context archives, to a new
        thread id: ``fork(source_thread_id, target_thread_id)`` (see `fork`). The LangGraph
        server calls it for ``threads.copy``.

        Raises:
            ThreadNotFoundError: the source has no log.
            ThreadExistsError: the target already has one.
        """
        self.fork(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep the latest checkpoint of each namespace (with its
        writes, and the ancestors its `DeltaChannel`s need: `delta_ancestors`).
        ``"delete"``: delete the threads.

        ``thread_ids`` is a list of ids: a string raises `TypeError` (it would be read as
        its characters, each another thread's id).
        """
        self._prune(id_list("thread_ids", thread_ids), strategy)  # a retry: all again

    @_retry_on_change
    def _prune(self, thread_ids: builtins.list[str], strategy: str) -> None:
        if strategy == "delete":
            for thread_id in thread_ids:
                self.delete_thread(thread_id)
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread in thread_ids:
            thread_id = check_thread_id(thread)
            with self._view(thread_id, exclusive=True) as index:
                keep = _kept_latest(index)
                keep_ids = {(e.ns, e.id) for e in keep}
                dropped_writes = any(key not in keep_ids for key in index.writes)
                if len(keep_ids) < len(index.ckpts) or dropped_writes:
                    self._rebuild(thread_id, index, keep)

    @_retry_on_change
    def kept_by_keep_latest(self, thread_id: str) -> int:
        """How many checkpoints ``prune([thread_id], strategy="keep_latest")`` would keep
        (each namespace's latest, and the ancestors its `DeltaChannel`s need): a sweep
        plans a thread only when that trims it."""
        with self._view(check_thread_id(thread_id)) as index:
            return len(_kept_latest(index))

    @_retry_on_change
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of `DeltaChannel`s along the checkpoint's ancestors,
        read straight from the index (no `get_tuple` per ancestor)."""
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self._view(thread_id) as index:
            return index.delta_history(index.named(ns, get_checkpoint_id(config)), channels)

    @_retry_on_change
    def fork(
        self,
        source_thread_id: str,
        target_thread_id: str,
        *,
        checkpoint_id: str | None = None,
    ) -> RunnableConfig:
        """Copy a thread to a new thread id, whole or as it was at ``checkpoint_id``.

        The fork is an independent log: later changes to either thread do not
        show in the other. Its checkpoints' metadata says ``thread_id`` is the
        fork's (as LangGraph's server's own checkpointer does on ``threads.copy``).
        Returns the config of the fork's latest checkpoint.

        The thread's context archives come along (`copy_archives`, as
        ``langgraph-ctx copy`` takes them): each archive thread is copied as
        ``<target>.ctx.<context id>`` and listed in the fork's own index, so the
        fork's context tools load the archives its transcript and ``active_context``
        name, and deleting the fork leaves the source's archives alone. A fork at
        ``checkpoint_id`` carries every archive the source's index lists, made before
        or after that checkpoint, as `revert` keeps the index whole: a fork at a
        checkpoint is the same thread as a copy reverted to it, and the index does not
        record the checkpoint an archive was made at (an entry's ``checkpoint_id`` is
        where the archived context ended, before the step that archived it). An
        archive thread or index entry the target already has is kept as it is; if
        copying the archives fails, nothing of the fork is left. Forking a thread into
        its own archive name (``<source>.ctx.<id>``, what ``chat_context_new`` does)
        copies no archives.

        Example:
            ```python
            head = saver.fork("task-001", "task-001-retry")
            graph.invoke({"messages": [("user", "try again")]}, head)
            ```

        Raises:
            ThreadNotFoundError: the source has no log.
            ThreadExistsError: the target already has one.
            CheckpointNotFoundError: ``checkpoint_id`` is not in the source.
            ContextArchiveError: an archive index cannot be read or written (nothing of
                the fork is left).
        """
        from langgraph_ctx.context.archive.copies import copy_archives
        from langgraph_ctx.context.archive.forks import archive_threads_of
        from langgraph_ctx.context.archive.index import index_for

        source = check_thread_id(source_thread_id)
        target = check_thread_id(target_thread_id)
        if source == target:
            raise ValueError("source and target thread ids are the same")
        first, second = sorted([source, target])
        with (
            self.storage.locked(first, exclusive=True),
            self.storage.locked(second, exclusive=True),
        ):
            index = self._sync(source)
            if index.lines == 0:
                raise ThreadNotFoundError(source)
            if self._sync(target).lines > 0:
                raise ThreadExistsError(target)
            n_lines = None
            late: builtins.list[Any] = []
            bodies: Bodies = {}
            if checkpoint_id is not None:
                entry = index.find(checkpoint_id, ns=None)
                if entry is None:
                    raise CheckpointNotFoundError(source, checkpoint_id)
                n_lines = entry.line
                late, bodies = writes_after(index, entry.line)
            header = dumps_line(
                thread_line(
                    target,
                    legacy_versions=has_legacy_versions(index.header),
                    forked_from={"thread_id": source, "checkpoint_id": checkpoint_id},
                    copied_thread_ids=copied_thread_ids(index.header, source),
                )
            )
            lines = None if n_lines is None else self._prefix(source, n_lines)
            archives = index_for(self)
            try:
                with copy_archives(
                    self.storage,
                    source,
                    self.storage,
                    target,
                    source_index=archives,
                    target_index=archives,
                ):
                    if lines is None:
                        self.storage.copy(source, target, n_lines, header)
                    else:
                        self.storage.replace(target, [header, *lines[1:]], backup=False)
            finally:  # threads the storage wrote (or deleted again) behind our indexes
                for written in [target, *archive_threads_of(target, list(self._indexes))]:
                    self._indexes.pop(written, None)
            self._carry(target, late, bodies)
            return self._head_config(target_thread_id, self._sync(target))

    @_retry_on_change
    def revert(self, thread_id: str, checkpoint_id: str) -> RunnableConfig:
        """Roll a thread back to a checkpoint, keeping the old log as a backup.

        The thread becomes exactly what it was when ``checkpoint_id`` was
        saved. The previous log is kept as ``<thread>.jsonl.1`` (older backups
        shift to ``.2``, ``.3``, ...). Returns the config of the new head.

        Example:
            ```python
            history = list(graph.get_state_history(config))
            saver.revert("task-001", history[3].config["configurable"]["checkpoint_id"])
            ```
        """
        tid = check_thread_id(thread_id)
        with self._view(tid, exclusive=True) as index:
            if index.lines == 0:
                raise ThreadNotFoundError(tid)
            entry = index.find(checkpoint_id, ns=None)
            if entry is None:
                raise CheckpointNotFoundError(tid, checkpoint_id)
            late, bodies = writes_after(index, entry.line)
            lines = self._prefix(tid, entry.line)
            if lines is None:
                self.storage.truncate(tid, entry.line, backup=True)
            else:
                self.storage.replace(tid, lines, backup=True)
            self._indexes.pop(tid, None)
            self._carry(tid, late, bodies)
            return self._head_config(thread_id, self._sync(tid))

    def _carry(self, thread_id: str, late: builtins.list[Any], bodies: Bodies) -> None:
        """Put again the writes a revert or fork cut off though their checkpoint stays: a
        kept checkpoint's writes that LangGraph saved after its child's line
        (`writes_after`), their serialized messages with the bodies read before the cut.
        Under the thread's lock, which is re-entrant."""
        with keeping_bodies(bodies):
            for group in late:
                run(self.storage, functools.partial(self._put_items, thread_id, *group))

    def _prefix(self, thread_id: str, n_lines: int) -> builtins.list[bytes] | None:
        """The first ``n_lines`` lines of a thread (a `revert` or `fork` at the checkpoint
        on line ``n_lines``), newlines included, with the writes of that checkpoint or a
        later one emptied (`writes_past`); ``None`` when there are none: the prefix as it
        is, which the storage copies without reading it here. Under the thread's lock."""
        raws = self.storage.read_all(thread_id)[:n_lines]
        emptied = writes_past(raws)
        if not emptied:
            return None
        return [emptied.get(n) or raw + b"\n" for n, raw in enumerate(raws, 1)]

    @_retry_on_change
    def checkpoint_infos(self, thread_id: str) -> builtins.list[CheckpointInfo]:
        """Every checkpoint of a thread (all namespaces) in log order, without its values.

        Ids, parents, timestamps, metadata and channel versions come from the
        saver's index, so this costs one read of the checkpoint lines and no
        message is rebuilt: use it to show a long history, where `list` would
        decode every state. ``[]`` when the thread has no log.

        Example:
            ```python
            for info in saver.checkpoint_infos("task-001"):
                print(info.checkpoint_id, info.metadata.get("step"), info.ts)
            ```
        """
        tid = check_thread_id(thread_id)
        out: builtins.list[CheckpointInfo] = []
        with self._view(tid) as index:
            entries = sorted(index.ckpts.values(), key=lambda e: e.line)
            for start in range(0, len(entries), 1024):
                chunk = entries[start : start + 1024]
                index.prefetch(e.line for e in chunk)
                for entry in chunk:
                    metadata = index.metadata(entry)
                    out.append(
                        CheckpointInfo(
                            thread_id=thread_id,
                            checkpoint_ns=entry.ns,
                            checkpoint_id=entry.id,
                            parent_checkpoint_id=entry.parent,
                            ts=index.checkpoint_ts(entry),
                            metadata=metadata,
                            channel_versions=dict(entry.versions),
                            versions_seen={k: dict(v) for k, v in entry.seen.items()},
                            line=entry.line,
                        )
                    )
        return out

    def list_threads(self, *, include_archives: bool = False) -> builtins.list[str]:
        """Every thread id that has a log; context archives (``<thread>.ctx.<id>``, the
        forks ``chat_context_new`` makes) only with ``include_archives``.

        Example:
            ```python
            for thread_id in saver.list_threads():
                print(thread_id)
            ```
        """
        from langgraph_ctx.context.archive.forks import is_archive_thread

        ids = self.storage.thread_ids()
        return [t for t in ids if include_archives or not is_archive_thread(t)]

    # -------------------------------------------------------------- async

    # get_tuple, list, put and put_writes: the same operations on the async door;
    # the rest (and every call on a backend without one) in a worker thread.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        aio = self.storage.aio()
        if aio is None:
            return await asyncio.to_thread(self.get_tuple, config)
        return await arun(aio, lambda: self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        aio = self.storage.aio()
        if aio is None:
            found = await asyncio.to_thread(
                lambda: list(self.list(config, filter=filter, before=before, limit=limit))
            )
            for item in found:
                yield item
            return
        planned, ns_filter, id_filter, before_id = _list_plan(config, before)
        threads: builtins.list[Any] = (
            planned
            if planned is not None
            else await asyncio.to_thread(lambda: builtins.list(self.storage.thread_ids()))
        )
        remaining = limit
        for thread in threads:
            if remaining is not None and remaining <= 0:
                return
            op = partial(
                self._list_thread, thread, ns_filter, id_filter, before_id, filter, remaining
            )
            found = await arun(aio, op)
            if remaining is not None:
                remaining -= len(found)
            for item in found:
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        aio = self.storage.aio()
        if aio is None:
            return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)
        return await arun(aio, lambda: self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        aio = self.storage.aio()
        if aio is None:
            await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)
            return
        await arun(aio, lambda: self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async `copy_thread` (its context archives come along)."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    async def afork(
        self,
        source_thread_id: str,
        target_thread_id: str,
        *,
        checkpoint_id: str | None = None,
    ) -> RunnableConfig:
        """Async `fork` (its context archives come along)."""
        return await asyncio.to_thread(
            lambda: self.fork(source_thread_id, target_thread_id, checkpoint_id=checkpoint_id)
        )

    async def arevert(self, thread_id: str, checkpoint_id: str) -> RunnableConfig:
        """Async `revert`."""
        return await asyncio.to_thread(self.revert, thread_id, checkpoint_id)


    def sweep(
        self,
        *,
        older_than: str | timedelta,
        keep_latest: bool = False,
        dry_run: bool = False,
        include_archives: bool = False,
        threads: Iterable[str] | None = None,
    ) -> SweepReport:
        """Delete (or, with ``keep_latest``, trim) threads idle longer than ``older_than``
        (``"30d"``, a `timedelta`): `langgraph_ctx.saver.retention.sweep` on this saver
        (``threads``: only these).

        Example:
            ```python
            saver.sweep(older_than="30d", dry_run=True).deleted   # what would go
            ```
        """
        from langgraph_ctx.saver.retention import sweep

        return sweep(
            self,
            older_than=older_than,
            keep_latest=keep_latest,
            dry_run=dry_run,
            include_archives=include_archives,
            threads=threads,
        )

    # ------------------------------------------------------------ internals

    @contextmanager
    def _view(self, thread_id: str, *, exclusive: bool = False) -> Iterator[_Index]:
        with self.storage.locked(thread_id, exclusive=exclusive):
            yield self._sync(thread_id)

    def _open(self, thread_id: str, *, exclusive: bool = False) -> Op[_Index]:
        """`_view` as requests: the lock (held to the operation's end), then `_sync`."""
        yield Lock(thread_id, exclusive)
        synced = yield Sync(thread_id)
        # Safe to run again (`Compute`): a read that must wait (`_LinesNotReady`) drops
        # the index, as any read that fails half-way (`_sync`), and the next run
        # rebuilds it from the log.
        index: _Index = yield Compute(lambda: self._sync(thread_id, synced))
        return index

    def _sync(self, thread_id: str, synced: Synced | None = None) -> _Index:
        """The thread's index, with whatever was appended since the last call read in.

        A read that fails half-way (the storage unreachable while a cold open reads the
        lines its first read did not bring) drops the index: the storage counts those
        lines as reported, and a half-built index kept would take them as indexed (an
        empty thread, whose next put wrote a second header). The next call rebuilds it
        from the log, as after an eviction. A corrupt line is the index's own error,
        kept (`_Index.error`)."""
        synced = self.storage.sync(thread_id) if synced is None else synced
        try:
            return self._synced(thread_id, synced)
        except CorruptLogError:
            raise
        except BaseException:
            index = self._indexes.get(thread_id)
            if index is not None and index.error is None:
                self._indexes.pop(thread_id, None)
                if index is self._scanned:
                    self._scanned = index.scan = None
            raise

    def _synced(self, thread_id: str, synced: Synced) -> _Index:
        index = self._indexes.get(thread_id)
        if index is None or synced.reset:
            if index is not None and index is self._scanned:
                self._scanned = index.scan = None
            index = self._new_index(thread_id)
            if not synced.reset and synced.first_line > 1:
                # Evicted (`_evict`): the lines the storage reported before, read again.
                known = range(1, synced.first_line)
                assert index.reader is not None
                lines = index.reader(builtins.list(known))
                index.feed(1, [lines[n] for n in known], skip_corrupt=self.on_corrupt == "skip")
        else:
            try:  # (not `contextlib.suppress`: an object a call, on every call)  # noqa: SIM105
                self._indexes.move_to_end(thread_id)
            except KeyError:  # evicted meanwhile by another thread
                pass
        if index.error is not None:
            raise index.error
        index.feed(synced.first_line, synced.lines, skip_corrupt=self.on_corrupt == "skip")
        if index.scan is not None:  # a cold scan's lines: one index keeps them at a time
            held, self._scanned = self._scanned, index
            if held is not None and held is not index:
                held.scan = None
        return index

    def _new_index(self, thread_id: str) -> _Index:
        storage = self.storage

        def read(lines: builtins.list[int]) -> dict[int, bytes]:
            return read_lines(storage, thread_id, lines)

        index = _Index(
            where=storage.describe(thread_id),
            reader=read,
            serde=self.serde,
            keep_scan=storage.reads_from_sync,
        )
        self._indexes[thread_id] = index
        self._evict(thread_id)
        return index

    def _evict(self, keep: str) -> None:
        """Drop the least recently used indexes beyond the bounds, except ``keep``'s.

        Only memory goes: a call in flight keeps the index it holds, and the
        next call on an evicted thread rebuilds it from the log (`_sync`).
        """
        indexes = self._indexes
        max_threads, max_lines = self.max_cached_threads, self.max_cached_lines
        lines = sum(i.lines for i in builtins.list(indexes.values())) if max_lines else 0
        while len(indexes) > 1 and (
            (max_threads is not None and len(indexes) > max_threads)
            or (max_lines is not None and lines > max_lines)
        ):
            try:
                thread_id, index = indexes.popitem(last=False)
            except KeyError:  # emptied by another thread
                return
            if thread_id == keep:
                indexes[thread_id] = index
                if len(indexes) == 1:
                    return
                continue
            lines -= index.lines
            if index is self._scanned:
                self._scanned = index.scan = None

    def _commit(
        self, thread_id: str, index: _Index, batch: _Batch, *, durable: bool = True
    ) -> Op[int]:
        """Append a batch (with the header if the log is new); return the last line.

        The index learns the lines as a cold read parses them, not the dicts
        built from the caller's objects: a warm read then returns exactly what
        a fresh process reads (a tuple the caller put comes back a list, as
        from `SqliteSaver`), and never an object the caller may still change.
        Parsing the bytes just written is the cheapest way to that (`loads_sealed`:
        one ``orjson.loads`` a line, less than copying the dicts in Python would cost).
        ``durable``: see `LogStorage.append`.
        """
        lines = batch.lines
        if index.lines == 0:
            lines = [thread_line(thread_id), *lines]
        raw = [dumps_line(obj) for obj in lines]
        # The dicts are bytes now: not kept while the storage answers (a Redis append
        # waits for a round trip, and at 50 threads the collector's passes grow with
        # every container alive across it).
        del lines
        batch.lines = []
        first = yield Append(thread_id, raw, durable)
        last = batch.apply(first, [loads_sealed(r) for r in raw])
        if self._release_lines:
            release_superseded(index, batch)
        return last

    def _tuple(
        self,
        thread_id: Any,
        index: _Index,
        entry: CheckpointHead,
        checked: set[int] | None = None,
    ) -> CheckpointTuple:
        """The tuple of one checkpoint; its messages are the index's shared objects
        (``checked``: those this read already verified, see `_Index.message`)."""
        try:
            metadata = index.metadata(entry)
            checkpoint = index.checkpoint(entry, index.values(entry, checked))
            writes = index.pending_writes(entry, checked=checked)
        except LangGraphCtxError:
            raise
        except (KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            # The index names the line of what it finds wrong; this is the net under it:
            # a malformed file never escapes as a bare Python error.
            raise index.corrupt(
                entry.line, f"checkpoint {entry.id} cannot be read ({exc!r})"
            ) from None
        return CheckpointTuple(
            config=_config(thread_id, entry.ns, entry.id),
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=metadata,  # type: ignore[arg-type]
            parent_config=_config(thread_id, entry.ns, entry.parent) if entry.parent else None,
            pending_writes=writes,
        )

    def _list_thread(
        self,
        thread: Any,
        ns_filter: str | None,
        id_filter: str | None,
        before_id: str | None,
        meta_filter: dict[str, Any] | None,
        limit: int | None,
    ) -> Op[builtins.list[CheckpointTuple]]:
        thread_id = check_thread_id(thread)
        index = yield from self._open(thread_id)

        def listed() -> builtins.list[CheckpointTuple]:
            out: builtins.list[CheckpointTuple] = []
            checked: set[int] = set()  # one object per message across the tuples, checked once
            entries = [
                e
                for e in index.ckpts.values()
                if (ns_filter is None or e.ns == ns_filter)
                and (id_filter is None or e.id == id_filter)
                and (before_id is None or e.id < before_id)
            ]
            entries.sort(key=lambda e: (e.id, e.ns), reverse=True)
            for entry in entries:
                if limit is not None and len(out) >= limit:
                    break
                if meta_filter:
                    meta = index.metadata(entry)
                    if not all(meta.get(k) == v for k, v in meta_filter.items()):
                        continue
                out.append(self._tuple(thread, index, entry, checked))
            return out

        tuples: builtins.list[CheckpointTuple] = yield Compute(listed)
        return tuples

    def _rebuild(self, thread_id: str, index: _Index, keep: Sequence[CheckpointHead]) -> None:
        """Rewrite the log with only ``keep`` (and their writes), atomically."""
        lines = rebuilt_lines(index, thread_id, keep)
        self.storage.replace(thread_id, (dumps_line(obj) for obj in lines), backup=False)
        self._indexes.pop(thread_id, None)

    @staticmethod
    def _head_config(thread_id: Any, index: _Index) -> RunnableConfig:
        head = index.latest("")
        return _config(thread_id, "", head.id if head else None)


def _kept_latest(index: _Index) -> builtins.list[CheckpointHead]:
    """What ``prune(strategy="keep_latest")`` keeps: each namespace's latest checkpoint
    and its `DeltaChannel` ancestors (`delta_ancestors`), each once."""
    heads = [e for e in (index.latest(ns) for ns in index.by_ns) if e]
    keep = heads + [a for h in heads for a in delta_ancestors(index, h)]
    return builtins.list({(e.ns, e.id): e for e in keep}.values())


def _list_plan(
    config: RunnableConfig | None, before: RunnableConfig | None
) -> tuple[builtins.list[Any] | None, str | None, str | None, str | None]:
    """``(threads, ns, checkpoint id, before id)`` of a `list` call; threads ``None``: all.
    An empty checkpoint id filters nothing, as in LangGraph's savers (``get_state`` of such
    a config is the latest checkpoint)."""
    before_id = (get_checkpoint_id(before) or None) if before else None
    if config is None:
        return None, None, None, before_id
    conf = config["configurable"]
    ckpt_id = get_checkpoint_id(config) or None
    return [conf["thread_id"]], conf.get("checkpoint_ns"), ckpt_id, before_id




def _run_id(index: _Index, entry: CheckpointHead) -> Any:
    """The run that made a checkpoint (from the index, or its serialized metadata)."""
    if entry.meta is not None:
        return entry.run_id
    return index.metadata(entry).get("run_id")


def _config(thread_id: Any, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
