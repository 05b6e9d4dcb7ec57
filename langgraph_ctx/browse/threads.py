"""The threads of a store and the checkpoints of one thread (no channel values decoded
for `history`, so it stays fast on long threads)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from langgraph_ctx.browse.checkpoints import head_info, require_thread, state_values
from langgraph_ctx.browse.values import (
    MESSAGES_KEY,
    find_messages,
    format_ts,
    is_internal_channel,
    messages_channel,
)
from langgraph_ctx.codec import CodecError, loads_line
from langgraph_ctx.errors import LangGraphCtxError
from langgraph_ctx.saver.log import CheckpointInfo, LogSaver
from langgraph_ctx.storage.jsonl import JsonlStorage

__all__ = ["ThreadSummary", "checkpoint_row", "history", "thread_summaries"]


@dataclass
class ThreadSummary:
    """One thread of a directory, as `thread_summaries` reports it."""

    thread_id: str
    path: str
    """Where the log is: the file, or the Redis server and key."""
    size: int
    """Bytes of the thread's log."""
    checkpoints: int
    """Checkpoints in every namespace."""
    messages: int | None
    """Messages in the latest state (``None``: the state has no message list)."""
    last_activity: str
    """Timestamp of the latest checkpoint (ISO 8601)."""
    head: str | None
    """Id of the latest checkpoint of the root namespace."""
    backups: int = 0
    """Rotated backups kept by revert."""
    forked_from: dict[str, Any] | None = None
    """For a fork or a copy: where it came from (from the file's header)."""
    error: str | None = None
    """Why the thread could not be read (run ``langgraph-ctx verify``)."""
    archives: int = 0
    """Context archives of this thread (`<thread>.ctx.<id>` threads, hidden unless
    ``include_archives``)."""
    archive_of: str | None = None
    """For a context archive: the thread it belongs to."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _header(saver: LogSaver, thread_id: str) -> dict[str, Any] | None:
    """The log's first line (`fork` and `copy_thread` record their origin there)."""
    try:
        first = saver.storage.read(thread_id, 1)  # lines synced by `checkpoint_infos`
    except (LangGraphCtxError, IndexError, KeyError, OSError):
        return None
    try:
        return loads_line(first)
    except CodecError:
        return None


def _size(saver: LogSaver, thread_id: str) -> int | None:
    """Bytes of the log (newlines included); ``None`` if it is gone."""
    storage = saver.storage
    if isinstance(storage, JsonlStorage):  # a stat instead of reading the whole file
        try:
            return storage.path(thread_id).stat().st_size
        except FileNotFoundError:
            return None
    lines = storage.read_all(thread_id)
    return sum(len(line) + 1 for line in lines) if lines else None


def thread_summaries(
    saver: LogSaver, *, messages_key: str = MESSAGES_KEY, include_archives: bool = False
) -> list[ThreadSummary]:
    """Every thread of the saver's store, most recently active first.

    Context archives (`<thread>.ctx.<id>`, the forks ``chat_context_new`` makes) are
    counted in their thread's ``archives`` and listed only with ``include_archives``.

    Any `LogSaver` works: a `JsonlSaver` directory or a `RedisLogSaver` prefix (``path``
    is then the server and key). A thread that cannot be read is listed with its
    ``error`` instead of stopping the listing.
    """
    from langgraph_ctx.context.archive.forks import archive_owner

    out: list[ThreadSummary] = []
    archives: dict[str, int] = {}
    for thread_id in saver.storage.thread_ids():
        owner = archive_owner(thread_id)
        if owner is not None:
            archives[owner] = archives.get(owner, 0) + 1
            if not include_archives:
                continue
        size = _size(saver, thread_id)
        if size is None:
            continue  # deleted while listing
        summary = ThreadSummary(
            thread_id=thread_id,
            path=saver.storage.describe(thread_id),
            size=size,
            checkpoints=0,
            messages=None,
            last_activity="",
            head=None,
            backups=len(saver.storage.backups(thread_id)),
            archive_of=owner,
        )
        try:
            infos = saver.checkpoint_infos(thread_id)
            header = _header(saver, thread_id) or {}
            origin = header.get("forked_from") or header.get("copied_from")
            summary.forked_from = origin if isinstance(origin, dict) else None
            head = head_info(infos)
            summary.checkpoints = len(infos)
            summary.last_activity = max((i.ts for i in infos), default="")
            if head is not None:
                summary.head = head.checkpoint_id
                values = state_values(saver, head)
                if messages_channel(values, messages_key) is not None:
                    summary.messages = len(find_messages(values, messages_key))
        except LangGraphCtxError as exc:
            summary.error = str(exc)
        out.append(summary)
    for summary in out:
        summary.archives = archives.get(summary.thread_id, 0)
    out.sort(key=lambda s: s.last_activity, reverse=True)
    return out


# ---------------------------------------------------------------------- history


def _nodes(info: CheckpointInfo, parent: CheckpointInfo | None) -> list[str]:
    """Nodes whose ``versions_seen`` changed: the ones that ran in the step that made it.

    An input checkpoint is written by the caller's input: ``(input)``.
    """
    if info.metadata.get("source") == "input":
        return ["(input)"]
    before = parent.versions_seen if parent is not None else {}
    return [
        node
        for node, seen in info.versions_seen.items()
        if before.get(node) != seen and node not in ("__interrupt__", "__input__")
    ]


def _changed(info: CheckpointInfo, parent: CheckpointInfo | None) -> list[str]:
    before = parent.channel_versions if parent is not None else {}
    return [
        ch
        for ch, version in info.channel_versions.items()
        if before.get(ch) != version and not is_internal_channel(ch)
    ]


def checkpoint_row(info: CheckpointInfo, parent: CheckpointInfo | None) -> dict[str, Any]:
    """One checkpoint as a history row (plain JSON)."""
    meta = info.metadata
    return {
        "checkpoint_id": info.checkpoint_id,
        "checkpoint_ns": info.checkpoint_ns,
        "parent_checkpoint_id": info.parent_checkpoint_id,
        "step": meta.get("step"),
        "source": meta.get("source"),
        "nodes": _nodes(info, parent),
        "changed": _changed(info, parent),
        "ts": info.ts,
        "time": format_ts(info.ts),
        "line": info.line,
    }


def history(
    saver: LogSaver,
    thread_id: str,
    *,
    all_namespaces: bool = False,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The thread's checkpoints, oldest first, as rows: id, step, source, the node(s) that
    wrote each one, the channels it changed, its time, and ``head`` for the latest.

    Reads no channel values, so it stays fast on long threads. ``limit`` keeps the
    newest rows.
    """
    infos = require_thread(saver, thread_id)
    by_id = {(i.checkpoint_ns, i.checkpoint_id): i for i in infos}
    head = head_info(infos)
    rows = []
    ordered = sorted(infos, key=lambda i: (i.checkpoint_id, i.checkpoint_ns))
    for info in ordered:
        if not all_namespaces and info.checkpoint_ns:
            continue
        parent = by_id.get((info.checkpoint_ns, info.parent_checkpoint_id or ""))
        row = checkpoint_row(info, parent)
        row["head"] = head is not None and info is head
        rows.append(row)
    if limit is not None:
        rows = rows[-limit:] if limit > 0 else []
    return rows
