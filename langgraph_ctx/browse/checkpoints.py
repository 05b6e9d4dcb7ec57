"""Find a thread's checkpoints and decode their state, through any `LogSaver`.

Works the same on a `JsonlSaver` directory and a `RedisLogSaver` prefix: everything is
read with the saver's `checkpoint_infos`, `get_tuple` and `get_delta_channel_history`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.message import add_messages

from langgraph_ctx.browse.values import is_internal_channel
from langgraph_ctx.errors import CheckpointNotFoundError, CheckpointRefError, ThreadNotFoundError
from langgraph_ctx.saver.log import CheckpointInfo, LogSaver

__all__ = [
    "CheckpointRefError",
    "checkpoint_state",
    "head_info",
    "require_thread",
    "resolve_checkpoint",
    "state_values",
]


def require_thread(saver: LogSaver, thread_id: str) -> list[CheckpointInfo]:
    """The thread's checkpoints (`LogSaver.checkpoint_infos`); `ThreadNotFoundError` if none."""
    infos = saver.checkpoint_infos(thread_id)
    if not infos:
        raise ThreadNotFoundError(thread_id)
    return infos


def head_info(infos: Sequence[CheckpointInfo], ns: str = "") -> CheckpointInfo | None:
    """The latest checkpoint of a namespace, as ``get_tuple`` without an id picks it."""
    in_ns = [i for i in infos if i.checkpoint_ns == ns]
    return max(in_ns, key=lambda i: i.checkpoint_id) if in_ns else None


_HEAD_REF = re.compile(r"^head(?:~(\d+))?$", re.IGNORECASE)


def resolve_checkpoint(
    saver: LogSaver,
    thread_id: str,
    ref: str | None,
    *,
    infos: Sequence[CheckpointInfo] | None = None,
) -> CheckpointInfo:
    """The checkpoint ``ref`` names: a full id, a unique id prefix, ``head`` or ``head~N``.

    ``None`` is ``head``. Ids are looked up in the root namespace first, then in
    subgraph namespaces.

    Raises:
        ThreadNotFoundError: the thread has no log.
        CheckpointNotFoundError: nothing matches.
        CheckpointRefError: a prefix matches several checkpoints.
    """
    if infos is None:
        infos = require_thread(saver, thread_id)
    ref = (ref or "head").strip()
    by_id = {(i.checkpoint_ns, i.checkpoint_id): i for i in infos}
    match = _HEAD_REF.match(ref)
    if match:
        cur = head_info(infos)
        if cur is None:
            raise CheckpointNotFoundError(thread_id, ref)
        for _ in range(int(match.group(1) or 0)):
            parent = cur.parent_checkpoint_id
            cur = by_id.get((cur.checkpoint_ns, parent)) if parent else None
            if cur is None:
                raise CheckpointNotFoundError(thread_id, ref)
        return cur
    exact = [i for i in infos if i.checkpoint_id == ref]
    if exact:
        return min(exact, key=lambda i: (i.checkpoint_ns != "", i.checkpoint_ns))
    candidates = {i.checkpoint_id for i in infos if i.checkpoint_id.startswith(ref)}
    if len(candidates) == 1:
        only = candidates.pop()
        return min(
            (i for i in infos if i.checkpoint_id == only),
            key=lambda i: (i.checkpoint_ns != "", i.checkpoint_ns),
        )
    if candidates:
        raise CheckpointRefError(
            f"checkpoint {ref!r} is ambiguous in thread {thread_id!r}: it starts "
            f"{len(candidates)} checkpoint ids; give more characters"
        )
    raise CheckpointNotFoundError(thread_id, ref)


def checkpoint_state(
    saver: LogSaver, info: CheckpointInfo
) -> tuple[dict[str, Any], list[tuple[str, str, Any]]]:
    """The channel values of one checkpoint (decoded) and its pending writes.

    A `DeltaChannel` of messages stores its value only every few steps: where a
    checkpoint holds none, the value is rebuilt from the saver's
    `get_delta_channel_history` with `add_messages`, as the graph would (the graph's own
    reducer is not known here, so other delta channels are left as stored).
    """
    tup = saver.get_tuple(info.config)
    if tup is None:  # the log changed since it was listed
        raise CheckpointNotFoundError(info.thread_id, info.checkpoint_id, info.checkpoint_ns)
    values = dict(tup.checkpoint["channel_values"])
    for channel, value in list(values.items()):
        if isinstance(value, _DeltaSnapshot):
            values[channel] = value.value
    missing = [
        ch
        for ch in tup.checkpoint["channel_versions"]
        if ch not in values and not is_internal_channel(ch)
    ]
    if missing:
        histories = saver.get_delta_channel_history(config=tup.config, channels=missing)
        for channel, history in histories.items():
            rebuilt = _replay_messages(history)
            if rebuilt is not None:
                values[channel] = rebuilt
    return values, list(tup.pending_writes or [])


def _has_messages(value: Any) -> bool:
    if isinstance(value, BaseMessage):
        return True
    return isinstance(value, list) and any(isinstance(v, BaseMessage) for v in value)


def _replay_messages(history: Mapping[str, Any]) -> list[BaseMessage] | None:
    """A message list from a `DeltaChannel` history (seed, then writes), or ``None``."""
    seed = history.get("seed", [])
    if isinstance(seed, _DeltaSnapshot):
        seed = seed.value
    writes = [value for _, _, value in history.get("writes", [])]
    if not (_has_messages(seed) or any(_has_messages(w) for w in writes)):
        return None
    value: list[BaseMessage] = list(seed) if isinstance(seed, list) else []
    for write in writes:
        value = add_messages(value, write)  # type: ignore[arg-type,assignment]
    return value


def state_values(saver: LogSaver, info: CheckpointInfo) -> dict[str, Any]:
    """The channel values of one checkpoint (decoded); see `checkpoint_state`."""
    return checkpoint_state(saver, info)[0]
