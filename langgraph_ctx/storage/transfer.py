"""Copy threads between storage backends (a JSONL directory, Redis, ...).

Every backend holds the same lines, so a copy moves them verbatim: no
decoding, no re-encoding, nothing about checkpoints needs to be understood.
"""

from __future__ import annotations

from langgraph_ctx.codec import CodecError, dumps_line, loads_line
from langgraph_ctx.codec.lines import copied_thread_ids
from langgraph_ctx.errors import CorruptLogError, ThreadExistsError, ThreadNotFoundError
from langgraph_ctx.storage.base import LogStorage
from langgraph_ctx.storage.thread_ids import check_thread_id


def copy_thread_between(
    source: LogStorage,
    source_id: str,
    target: LogStorage,
    target_id: str | None = None,
) -> int:
    """Copy one thread's log from one storage to another, line for line.

    Copies a thread between a JSONL directory and Redis, in either direction
    (or between two directories, or two Redis prefixes). The target thread
    must not exist: nothing is ever overwritten. The source is read as it is
    at one instant (a thread being written to meanwhile is copied up to that
    instant) and left unchanged; revert backups are not copied. The copy is
    atomic on the target: it holds the whole thread or nothing.

    Lines are copied verbatim, except the first (the thread header) when the
    target id differs from the source id: it then names the new id and
    records ``"copied_from": {"thread_id": <source id>}``.

    Args:
        source: Storage holding the thread, e.g. ``JsonlStorage("./chats")``.
        source_id: The thread to copy.
        target: Storage to copy into, e.g. ``RedisStorage.from_url("redis://...")``.
        target_id: The thread id in the target (default: the same id).

    Returns:
        The number of lines copied.

    Raises:
        ThreadNotFoundError: the source has no such thread.
        ThreadExistsError: the target already has ``target_id``; delete it
            first or choose another id.
        CorruptLogError: the source's first line is not a thread header.
        StorageUnavailableError: Redis could not be reached (nothing copied).

    Example:
        ```python
        from langgraph_ctx.storage.jsonl import JsonlStorage
        from langgraph_ctx.storage.redis import RedisStorage
        from langgraph_ctx.storage.transfer import copy_thread_between

        files = JsonlStorage("./chats")
        redis = RedisStorage.from_url("redis://localhost:6379/0", prefix="travel")
        copy_thread_between(files, "task-001", redis)              # JSONL -> Redis
        copy_thread_between(redis, "task-001", files, "task-001-copy")  # and back
        ```
    """
    source_id = check_thread_id(source_id)
    target_id = source_id if target_id is None else check_thread_id(target_id)
    if source is target and source_id == target_id:
        raise ValueError("source and target are the same thread")
    with source.locked(source_id, exclusive=False):
        lines = source.read_all(source_id)
    if not lines:
        raise ThreadNotFoundError(source_id)
    try:
        header = loads_line(lines[0])
    except CodecError as exc:
        raise CorruptLogError(source.describe(source_id), 1, str(exc)) from None
    if header.get("t") != "thread":
        raise CorruptLogError(source.describe(source_id), 1, "the first line must be a header")
    if target_id != source_id:
        # The copied checkpoints' metadata then reads the new id, as after `fork`.
        header["copied_thread_ids"] = copied_thread_ids(header, source_id)
        header["thread_id"] = target_id
        header["copied_from"] = {"thread_id": source_id}
        lines[0] = dumps_line(header)[:-1]
    with target.locked(target_id, exclusive=True):
        if target.exists(target_id):
            raise ThreadExistsError(target_id)
        target.replace(target_id, (line + b"\n" for line in lines), backup=False)
    return len(lines)
