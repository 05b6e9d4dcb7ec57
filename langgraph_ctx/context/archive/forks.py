"""Archives are forks: where to fork a thread (the checkpoint ending at a message), and
forking any saver (its own `fork`, else a replay of `list()` into `put()`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from langgraph_ctx.errors import (
    CheckpointNotFoundError,
    ThreadExistsError,
)

__all__ = [
    "archive_owner",
    "archive_thread_id",
    "archive_threads_of",
    "find_checkpoint",
    "fork_thread",
    "is_archive_thread",
    "thread_started_at",
]


def archive_thread_id(thread_id: str, context_id: str) -> str:
    """The thread id of the fork holding an archived context: `<thread>.ctx.<contextId>`.

    Readable as a file name (`task-001.ctx.c_20261122_3fa91c.jsonl`) and listed by
    `saver.list_threads()` like any thread.
    """
    return f"{thread_id}.ctx.{context_id}"


_ARCHIVE_THREAD = re.compile(r"(?P<owner>.*)\.ctx\.c_\d{8}_[0-9a-f]{6}", re.DOTALL)
"""`archive_thread_id` of a context id `new_context_id` made (`c_<yyyymmdd>_<6 hex>`):
strict, so a user's own ``notes.ctx.backup`` stays a user thread."""


def archive_owner(thread_id: str) -> str | None:
    """The thread an archive thread belongs to, ``None`` for a user's thread.

    Example:
        >>> archive_owner("task-001.ctx.c_20261122_3fa91c")
        'task-001'
        >>> archive_owner("task-001") is None
        True
    """
    match = _ARCHIVE_THREAD.fullmatch(thread_id)
    return match.group("owner") if match else None


def is_archive_thread(thread_id: str) -> bool:
    """A context archive (`<thread>.ctx.<context id>`), which listings hide by default.

    Example:
        >>> is_archive_thread("task-001.ctx.c_20261122_3fa91c"), is_archive_thread("task-001")
        (True, False)
    """
    return archive_owner(thread_id) is not None


def archive_threads_of(thread_id: str, thread_ids: Iterable[str]) -> list[str]:
    """The archives of `thread_id` among `thread_ids`, archives of archives included:
    what deleting the thread deletes with it.

    Example:
        >>> archive_threads_of("t", ["t", "t.ctx.c_20261122_3fa91c", "tt.ctx.c_20261122_3fa91c"])
        ['t.ctx.c_20261122_3fa91c']
    """
    out = []
    for candidate in thread_ids:
        owner = archive_owner(candidate)
        while owner is not None and owner != thread_id:
            owner = archive_owner(owner)
        if owner == thread_id:
            out.append(candidate)
    return sorted(out)


def root_config(thread_id: str | int, checkpoint_id: str | None = None) -> RunnableConfig:
    """The config of a thread's root namespace (at ``checkpoint_id``, else its head)."""
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
        page = list(saver.list(root_config(thread_id), before=before, limit=8))
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
    for tup in saver.list(root_config(thread_id), filter={"step": -1}):
        first = tup
    ts = first.checkpoint.get("ts") if first is not None else None
    try:  # as the index's other times: UTC, milliseconds
        when = datetime.fromisoformat(ts or "")  # None: ValueError, as any bad time
        return when.astimezone(timezone.utc).isoformat(timespec="milliseconds")
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
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, MessagesState, StateGraph

        from langgraph_ctx.context.archive.forks import fork_thread
        from langgraph_ctx.testing import OfflineChatModel

        model = OfflineChatModel()
        builder = StateGraph(MessagesState)
        builder.add_node("chat", lambda state: {"messages": [model.invoke(state["messages"])]})
        builder.add_edge(START, "chat")
        saver = InMemorySaver()             # has no fork of its own: the thread is replayed
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "task-001"}}
        graph.invoke({"messages": [("user", "I'm planning a trip to Lisbon.")]}, config)
        cp_id = graph.get_state(config).config["configurable"]["checkpoint_id"]  # turn one
        graph.invoke({"messages": [("user", "What should I pack?")]}, config)

        head = fork_thread(saver, "task-001", "task-001-retry", checkpoint_id=cp_id)
        state = graph.invoke({"messages": [("user", "Book a hotel instead.")]}, head)
        [m.content for m in state["messages"]]  # turn one, then the new turn (no packing)
        # ["I'm planning a trip to Lisbon.", '(offline model, turn 1) ...',
        #  'Book a hotel instead.', '(offline model, turn 2) ...']
        ```

    Raises:
        ThreadExistsError: the target has checkpoints.
        CheckpointNotFoundError: `checkpoint_id` is not a root checkpoint of the source.
    """
    fork = getattr(saver, "fork", None)
    if callable(fork):
        return fork(source_thread_id, target_thread_id, checkpoint_id=checkpoint_id)  # type: ignore[no-any-return]
    if saver.get_tuple(root_config(target_thread_id)) is not None:
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
    return head or root_config(target_thread_id)
