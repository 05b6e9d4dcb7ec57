"""What changed between two checkpoints of a thread: messages matched by id, other keys."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langgraph_ctx.browse.checkpoints import require_thread, resolve_checkpoint, state_values
from langgraph_ctx.browse.threads import checkpoint_row
from langgraph_ctx.browse.transcript import message_entry
from langgraph_ctx.browse.values import (
    MESSAGES_KEY,
    find_messages,
    is_internal_channel,
    jsonable,
    messages_channel,
)
from langgraph_ctx.context.tokens import message_role
from langgraph_ctx.saver.log import CheckpointInfo, LogSaver

__all__ = ["ChannelChange", "MessageChange", "StateDiff", "diff_checkpoints", "diff_values"]


@dataclass
class MessageChange:
    """A message added, removed or changed between two checkpoints."""

    kind: Literal["added", "removed", "changed"]
    id: str | None
    role: str
    before: dict[str, Any] | None
    """The message at A (transcript entry), for ``removed`` and ``changed``."""
    after: dict[str, Any] | None
    """The message at B, for ``added`` and ``changed``."""
    fields: list[str] = field(default_factory=list)
    """For ``changed``: which fields differ (``content``, ``tool_calls``, ...)."""


@dataclass
class ChannelChange:
    """A state key whose value differs between two checkpoints."""

    channel: str
    kind: Literal["added", "removed", "changed"]
    before: Any
    after: Any


@dataclass
class StateDiff:
    """What changed from checkpoint A to checkpoint B (see `diff_checkpoints`)."""

    a: dict[str, Any]
    b: dict[str, Any]
    messages: list[MessageChange]
    channels: list[ChannelChange]
    unchanged_messages: int
    relation: str
    """``"B descends from A"``, ``"A descends from B"``, ``"same checkpoint"`` or
    ``"different branches"``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def empty(self) -> bool:
        return not self.messages and not self.channels


def _message_key(message: BaseMessage) -> Any:
    if message.id is not None:
        return ("id", message.id)
    return ("body", json.dumps(jsonable(message), sort_keys=True, default=str))


def _message_change(
    kind: Literal["added", "removed", "changed"],
    at_a: tuple[int, BaseMessage] | None,
    at_b: tuple[int, BaseMessage] | None,
    fields: list[str] | None = None,
) -> MessageChange:
    """The change of one message, given as (index, message) at A and/or at B; its id and
    role are those at B when it is there."""
    where = at_b or at_a
    if where is None:
        raise ValueError("a message change needs the message at A or at B")
    message = where[1]
    return MessageChange(
        kind=kind,
        id=message.id,
        role=message_role(message),
        before=message_entry(*at_a) if at_a else None,
        after=message_entry(*at_b) if at_b else None,
        fields=fields or [],
    )


def diff_values(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    messages_key: str = MESSAGES_KEY,
    include_internal: bool = False,
) -> tuple[list[MessageChange], list[ChannelChange], int]:
    """Compare two states: message changes (matched by id, in order), other channels.

    Returns ``(message_changes, channel_changes, unchanged_message_count)``.
    """
    msgs_a = find_messages(a, messages_key)
    msgs_b = find_messages(b, messages_key)
    keys_a = [_message_key(m) for m in msgs_a]
    keys_b = [_message_key(m) for m in msgs_b]
    changes: list[MessageChange] = []
    unchanged = 0
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                before, after = jsonable(msgs_a[i]), jsonable(msgs_b[j])
                if before == after:
                    unchanged += 1
                    continue
                names = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
                changes.append(_message_change("changed", (i, msgs_a[i]), (j, msgs_b[j]), names))
            continue
        changes += [_message_change("removed", (i, msgs_a[i]), None) for i in range(i1, i2)]
        changes += [_message_change("added", None, (j, msgs_b[j])) for j in range(j1, j2)]
    skip = {messages_channel(a, messages_key), messages_channel(b, messages_key)}
    channels: list[ChannelChange] = []
    for channel in sorted(set(a) | set(b)):
        if channel in skip or (not include_internal and is_internal_channel(channel)):
            continue
        before = jsonable(a[channel]) if channel in a else None
        after = jsonable(b[channel]) if channel in b else None
        if channel not in a:
            channels.append(ChannelChange(channel, "added", None, after))
        elif channel not in b:
            channels.append(ChannelChange(channel, "removed", before, None))
        elif before != after:
            channels.append(ChannelChange(channel, "changed", before, after))
    return changes, channels, unchanged


def _ancestors(info: CheckpointInfo, by_id: Mapping[tuple[str, str], CheckpointInfo]) -> set[str]:
    seen: set[str] = set()
    cur: CheckpointInfo | None = info
    while cur is not None and cur.checkpoint_id not in seen:
        seen.add(cur.checkpoint_id)
        parent = cur.parent_checkpoint_id
        cur = by_id.get((cur.checkpoint_ns, parent)) if parent else None
    return seen


def diff_checkpoints(
    saver: LogSaver,
    thread_id: str,
    a: str,
    b: str,
    *,
    messages_key: str = MESSAGES_KEY,
    include_internal: bool = False,
) -> StateDiff:
    """What changed from checkpoint ``a`` to checkpoint ``b`` of a thread.

    ``a`` and ``b`` are references as `resolve_checkpoint` takes them.

    Example:
        ```python
        d = diff_checkpoints(saver, "task-001", "head~3", "head")
        [(c.kind, c.role) for c in d.messages]   # [('added', 'user'), ('added', 'assistant')]
        ```
    """
    infos = require_thread(saver, thread_id)
    info_a = resolve_checkpoint(saver, thread_id, a, infos=infos)
    info_b = resolve_checkpoint(saver, thread_id, b, infos=infos)
    by_id = {(i.checkpoint_ns, i.checkpoint_id): i for i in infos}
    messages, channels, unchanged = diff_values(
        state_values(saver, info_a),
        state_values(saver, info_b),
        messages_key=messages_key,
        include_internal=include_internal,
    )
    if info_a is info_b:
        relation = "same checkpoint"
    elif info_a.checkpoint_id in _ancestors(info_b, by_id):
        relation = "B descends from A"
    elif info_b.checkpoint_id in _ancestors(info_a, by_id):
        relation = "A descends from B"
    else:
        relation = "different branches"

    def describe(info: CheckpointInfo) -> dict[str, Any]:
        parent = by_id.get((info.checkpoint_ns, info.parent_checkpoint_id or ""))
        return checkpoint_row(info, parent)

    return StateDiff(
        a=describe(info_a),
        b=describe(info_b),
        messages=messages,
        channels=channels,
        unchanged_messages=unchanged,
        relation=relation,
    )
