"""Read a `JsonlSaver` directory the way people look at conversations.

Plain functions and dataclasses with no terminal code, shared by the command line
(``langgraph-ctx``) and notebooks:

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli import inspect as ctx

saver = JsonlSaver("./chats")
ctx.thread_summaries(saver)                       # one ThreadSummary per thread
ctx.history(saver, "task-001")                    # checkpoints, oldest first, no decoding
info = ctx.resolve_checkpoint(saver, "task-001", "head~2")
values = ctx.state_values(saver, info)
ctx.transcript(values)                            # messages, compactions, running summary
ctx.diff_checkpoints(saver, "task-001", "head~2", "head")
ctx.export_messages(values["messages"], "openai")  # OpenAI-style JSON for evals
ctx.usage_series(saver, "task-001", model="gpt-4o")  # tokens per component per turn
```

Checkpoint references accept a full id, a unique prefix of one, ``head`` (the
thread's latest checkpoint) and ``head~N`` (N parents back from it).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ValidationError

from langgraph_ctx.codec import CodecError, loads_line, message_to_json
from langgraph_ctx.context.budget import ContextBudget, ContextUsage, compute_usage
from langgraph_ctx.context.compaction.record import CompactionRecord, RunningSummary
from langgraph_ctx.context.prompt import is_system_prompt_message
from langgraph_ctx.context.tokens import MessageTokenCounter, message_role
from langgraph_ctx.errors import (
    CheckpointNotFoundError,
    LangGraphCtxError,
    ThreadNotFoundError,
)
from langgraph_ctx.saver.jsonl import JsonlSaver
from langgraph_ctx.saver.log import CheckpointInfo, LogSaver

__all__ = [
    "MESSAGES_KEY",
    "VIEW_KEY",
    "ChannelChange",
    "CheckpointRefError",
    "MessageChange",
    "StateDiff",
    "ThreadSummary",
    "Transcript",
    "TurnUsage",
    "checkpoint_row",
    "checkpoint_state",
    "content_text",
    "diff_checkpoints",
    "diff_values",
    "export_messages",
    "find_messages",
    "format_ts",
    "head_info",
    "history",
    "is_internal_channel",
    "jsonable",
    "messages_channel",
    "require_thread",
    "resolve_checkpoint",
    "state_values",
    "thread_summaries",
    "to_openai_messages",
    "transcript",
    "usage_at",
    "usage_series",
]

MESSAGES_KEY = "messages"
"""The state key that holds the conversation (LangGraph's `MessagesState`)."""

_INTERNAL_PREFIXES = ("branch:", "join:", "split:", "start:")


class CheckpointRefError(LangGraphCtxError, ValueError):
    """A checkpoint reference is ambiguous or malformed (``head~x``, a short prefix)."""


# --------------------------------------------------------------------- helpers


def is_internal_channel(channel: str) -> bool:
    """Channels LangGraph uses for its own bookkeeping (``branch:to:node``, ``__start__``).

    Example:
        ```python
        is_internal_channel("branch:to:chatbot"), is_internal_channel("messages")  # True, False
        ```
    """
    if channel == "__root__":  # the state itself, for graphs whose state is not a dict
        return False
    return channel.startswith("__") or channel.startswith(_INTERNAL_PREFIXES)


def content_text(content: Any) -> str:
    """A message's content as text: text blocks joined, other blocks as ``[type]``.

    Tool-use blocks are left out (they show as the message's tool calls).
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind in ("tool_use", "tool_call", "function_call", "tool_call_chunk"):
                continue
            if "text" in block and kind in (None, "text", "output_text"):
                parts.append(str(block["text"]))
            else:
                parts.append(f"[{kind or 'block'}]")
        else:
            parts.append(str(block))
    return "\n".join(p for p in parts if p)


def jsonable(value: Any) -> Any:
    """A JSON-ready view of a state value (messages as their readable form, models dumped)."""
    if isinstance(value, BaseMessage):
        return message_to_json(value) or {"type": value.type, "content": repr(value.content)}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    return repr(value)


def messages_channel(values: Mapping[str, Any], key: str = MESSAGES_KEY) -> str | None:
    """The state key holding the conversation: ``key`` if present, else (for the default
    key only) the first channel whose value is a list of messages."""
    if key in values:
        return key
    if key == MESSAGES_KEY:
        for channel, value in values.items():
            if isinstance(value, list) and value and isinstance(value[0], BaseMessage):
                return channel
    return None


def find_messages(values: Mapping[str, Any], key: str = MESSAGES_KEY) -> list[BaseMessage]:
    """The message list of a state: ``values[key]``, else the first channel holding messages."""
    channel = messages_channel(values, key)
    found = values.get(channel) if channel is not None else None
    if not isinstance(found, list):
        return []
    return [m for m in found if isinstance(m, BaseMessage)]


def format_ts(ts: str) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM:SS`` in UTC (unchanged if it does not parse)."""
    try:
        when = datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return ts
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S")


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
        value = add_messages(value, write)  # type: ignore[arg-type]
    return value


def state_values(saver: LogSaver, info: CheckpointInfo) -> dict[str, Any]:
    """The channel values of one checkpoint (decoded); see `checkpoint_state`."""
    return checkpoint_state(saver, info)[0]


# ---------------------------------------------------------------------- threads


@dataclass
class ThreadSummary:
    """One thread of a directory, as `thread_summaries` reports it."""

    thread_id: str
    path: str
    size: int
    """Bytes of the thread's file."""
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _header(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            first = f.readline()
    except OSError:
        return None
    if not first.endswith(b"\n"):
        return None
    try:
        return loads_line(first[:-1])
    except CodecError:
        return None


def thread_summaries(saver: JsonlSaver, *, messages_key: str = MESSAGES_KEY) -> list[ThreadSummary]:
    """Every thread of the saver's directory, most recently active first.

    A thread that cannot be read is listed with its ``error`` instead of stopping
    the listing.
    """
    out: list[ThreadSummary] = []
    for thread_id in saver.list_threads():
        path = Path(saver.path(thread_id))
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue  # deleted while listing
        header = _header(path) or {}
        origin = header.get("forked_from") or header.get("copied_from")
        summary = ThreadSummary(
            thread_id=thread_id,
            path=str(path),
            size=size,
            checkpoints=0,
            messages=None,
            last_activity="",
            head=None,
            backups=len(saver.storage.backups(thread_id)),
            forked_from=origin if isinstance(origin, dict) else None,
        )
        try:
            infos = saver.checkpoint_infos(thread_id)
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


# ------------------------------------------------------------------- transcript


@dataclass
class Transcript:
    """A state as people read it (see `transcript`)."""

    messages: list[dict[str, Any]]
    """One entry per message: ``role``, ``content`` (text), ``tool_calls``, ``tool_call_id``,
    ``name``, ``id``, and ``summary`` / ``compacted`` flags."""
    compactions: list[dict[str, Any]] = field(default_factory=list)
    """The records of ``compaction_log`` (`CompactionRecord` as JSON), oldest first."""
    running_summary: dict[str, Any] | None = None
    """``running_summary`` (`RunningSummary` as JSON), when present."""
    context_usage: dict[str, Any] | None = None
    """``context_usage`` as a `BudgetNode` recorded it, when present."""
    interrupts: list[Any] = field(default_factory=list)
    """Values of interrupts waiting for ``Command(resume=...)``."""
    state: dict[str, Any] = field(default_factory=dict)
    """The other keys of the state (as JSON), LangGraph's internal channels left out."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# State keys `transcript` shows in their own sections, or that only repeat the messages.
_SHOWN_KEYS = frozenset(
    {"compaction_log", "running_summary", "context_usage", "llm_input_messages",
     "compaction_cursor"}
)  # fmt: skip


def _message_entry(index: int, message: BaseMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "index": index,
        "id": message.id,
        "role": message_role(message),
        "content": content_text(message.content),
    }
    if message.name:
        entry["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "args": jsonable(c.get("args"))}
            for c in message.tool_calls
        ]
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        entry["invalid_tool_calls"] = jsonable(message.invalid_tool_calls)
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        entry["tool_call_id"] = tool_call_id
    status = getattr(message, "status", None)
    if status and status != "success":
        entry["status"] = status
    extra = message.additional_kwargs or {}
    if extra.get("langgraph_ctx") == "summary" or (
        message.type == "system"
        and isinstance(message.content, str)
        and message.content.startswith(("SUMMARY", "CONVERSATION_SUMMARY"))
    ):
        entry["summary"] = True
    return entry


def _records(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        try:
            out.append(CompactionRecord.model_validate(data).model_dump(mode="json"))
        except ValidationError:
            out.append({"raw": jsonable(data)})
    return out


def _summary(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    try:
        return RunningSummary.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return {"raw": jsonable(data)}


def transcript(
    values: Mapping[str, Any],
    *,
    messages_key: str = MESSAGES_KEY,
    pending_writes: Iterable[tuple[str, str, Any]] = (),
) -> Transcript:
    """The conversation of a state: messages in order (roles, text, tool calls and
    results), the compaction records, the running summary, the recorded usage, and the
    state's other keys.

    Messages a compaction left out of the model's view are flagged ``compacted``.
    ``pending_writes`` (from the checkpoint tuple) adds waiting interrupts.
    """
    messages = find_messages(values, messages_key)
    compactions = _records(values.get("compaction_log"))
    dropped = {
        d.get("id")
        for record in compactions
        for d in record.get("dropped", [])
        if isinstance(d, Mapping)
    }
    entries = []
    for i, message in enumerate(messages):
        entry = _message_entry(i, message)
        if message.id is not None and message.id in dropped:
            entry["compacted"] = True
        entries.append(entry)
    usage = values.get("context_usage")
    if isinstance(usage, BaseModel):
        usage_json: dict[str, Any] | None = usage.model_dump(mode="json")
    else:
        usage_json = usage if isinstance(usage, dict) else None
    interrupts = []
    for _, channel, value in pending_writes:
        if channel == "__interrupt__":
            for item in value if isinstance(value, (list, tuple)) else [value]:
                interrupts.append(jsonable(getattr(item, "value", item)))
    shown = _SHOWN_KEYS | {messages_channel(values, messages_key)}
    state = {
        key: jsonable(value)
        for key, value in values.items()
        if key not in shown and not is_internal_channel(key)
    }
    return Transcript(
        messages=entries,
        compactions=compactions,
        running_summary=_summary(values.get("running_summary")),
        context_usage=usage_json,
        interrupts=interrupts,
        state=state,
    )


# ------------------------------------------------------------------------- diff


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
                changes.append(
                    MessageChange(
                        kind="changed",
                        id=msgs_b[j].id,
                        role=message_role(msgs_b[j]),
                        before=_message_entry(i, msgs_a[i]),
                        after=_message_entry(j, msgs_b[j]),
                        fields=names,
                    )
                )
            continue
        for i in range(i1, i2):
            changes.append(
                MessageChange(
                    kind="removed",
                    id=msgs_a[i].id,
                    role=message_role(msgs_a[i]),
                    before=_message_entry(i, msgs_a[i]),
                    after=None,
                )
            )
        for j in range(j1, j2):
            changes.append(
                MessageChange(
                    kind="added",
                    id=msgs_b[j].id,
                    role=message_role(msgs_b[j]),
                    before=None,
                    after=_message_entry(j, msgs_b[j]),
                )
            )
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


# ----------------------------------------------------------------------- export


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages in OpenAI's chat format: ``role``, ``content``, ``tool_calls`` (with JSON
    ``arguments``), ``tool_call_id``, ``name``; what evals and fine-tuning files use.

    Example:
        ```python
        to_openai_messages([HumanMessage("hi"), AIMessage("hello")])
        # [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}]
        ```
    """
    if not messages:
        return []
    converted = convert_to_openai_messages(list(messages))
    return [dict(m) for m in converted]


ExportFormat = Literal["openai", "jsonl"]


def export_messages(messages: Sequence[BaseMessage], fmt: ExportFormat = "openai") -> str:
    """Messages as text: ``openai`` is one JSON list, ``jsonl`` one message per line."""
    converted = to_openai_messages(messages)
    if fmt == "openai":
        return json.dumps(converted, ensure_ascii=False, indent=2) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in converted)
    raise ValueError(f"unknown export format {fmt!r}; use 'openai' or 'jsonl'")


# ------------------------------------------------------------------------ usage


def _budget(model: str, budget: ContextBudget | str | None) -> ContextBudget:
    if isinstance(budget, ContextBudget):
        return budget
    if isinstance(budget, str):
        return ContextBudget.preset(budget)
    return ContextBudget.for_model(model)


def usage_at(
    values: Mapping[str, Any],
    *,
    model: str,
    budget: ContextBudget | str | None = None,
    messages_key: str = MESSAGES_KEY,
    counter: MessageTokenCounter | None = None,
    system_prompt: str | None = None,
    calibrate: bool = True,
) -> ContextUsage:
    """Token usage of a state's messages against a budget, as `BudgetNode` computes it.

    ``budget`` is a `ContextBudget`, a preset name, or ``None`` for the model's whole
    context window. A ``system_prompt`` string and a ``tools`` list in the state are
    counted too, as the node does (the state's ``system_prompt`` wins over the argument),
    unless the measured messages already start with the composed prompt (a pipeline's
    ``llm_input_messages``). ``calibrate`` anchors the count on the provider's
    ``usage_metadata`` (right for the request the provider saw, wrong for a history
    longer than a compacted request).
    """
    messages = find_messages(values, messages_key)
    stored_prompt = values.get("system_prompt")
    if isinstance(stored_prompt, str):
        system_prompt = stored_prompt
    if messages and is_system_prompt_message(messages[0]):
        system_prompt = None  # already in the messages
    tools = values.get("tools")
    return compute_usage(
        messages,
        _budget(model, budget),
        counter=counter or MessageTokenCounter(model),
        system_prompt=system_prompt or None,
        tools=tools if isinstance(tools, list) else None,
        calibrate=calibrate,
        model=model,
    )


@dataclass
class TurnUsage:
    """Usage of the model's last request in one turn of a thread (see `usage_series`)."""

    turn: int
    """1 for the first input, 2 for the second, ..."""
    checkpoint_id: str
    """The turn's last checkpoint."""
    step: int | None
    ts: str
    messages: int
    """Messages sent in the request."""
    used: int
    total: int
    percent: float
    breakdown: dict[str, int]
    compactions: int
    """Compaction records in the state so far (``compaction_log``)."""
    view_used: int | None = None
    """Tokens of what the model was shown when a `CompactionNode` made a view
    (``llm_input_messages``); ``used`` for turns before the first view; ``None`` when
    the thread has no view at all (or another ``messages_key`` was measured)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


VIEW_KEY = "llm_input_messages"
"""Where a `CompactionNode` puts what the model sees (the ``pre_model_hook`` convention)."""


def _request_view(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What the model received for its last call of a turn: the state without its reply."""
    if messages and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
        return messages[:-1]
    return messages


def usage_series(
    saver: LogSaver,
    thread_id: str,
    *,
    model: str,
    budget: ContextBudget | str | None = None,
    messages_key: str = MESSAGES_KEY,
    system_prompt: str | None = None,
) -> list[TurnUsage]:
    """Tokens per component for every turn of a thread, from its saved checkpoints.

    A turn starts at each input checkpoint (``source == "input"``) on the path from the
    first checkpoint to the head (time-travel branches the head does not descend from
    are left out). Each turn is measured at its last checkpoint, on the messages of the
    model's last request: the state without the final assistant reply. When a
    `CompactionNode` showed the model a compacted view (``llm_input_messages``), its
    size is in ``view_used``.

    Example:
        ```python
        for turn in usage_series(saver, "task-001", model="gpt-4o"):
            print(turn.turn, turn.used, turn.breakdown["history"])
        ```
    """
    infos = require_thread(saver, thread_id)
    by_id = {i.checkpoint_id: i for i in infos if not i.checkpoint_ns}
    head = head_info(infos)
    chain: list[CheckpointInfo] = []
    seen: set[str] = set()
    cur = head
    while cur is not None and cur.checkpoint_id not in seen:
        seen.add(cur.checkpoint_id)
        chain.append(cur)
        cur = by_id.get(cur.parent_checkpoint_id or "")
    chain.reverse()
    turns: list[list[CheckpointInfo]] = []
    for info in chain:
        if info.metadata.get("source") == "input" or not turns:
            turns.append([])
        turns[-1].append(info)
    if turns and turns[0][0].metadata.get("source") != "input" and len(turns) > 1:
        turns = turns[1:]  # what came before the first input (an update_state) is no turn
    chosen = _budget(model, budget)
    counter = MessageTokenCounter(model)
    out: list[TurnUsage] = []
    for number, span in enumerate(turns, 1):
        last = span[-1]
        values = state_values(saver, last)
        request = _request_view(find_messages(values, messages_key))
        # The whole history, counted: the provider's usage measured the (possibly
        # compacted) request, so it must not calibrate a count of the history.
        usage = usage_at(
            {**values, messages_key: request},
            model=model,
            budget=chosen,
            messages_key=messages_key,
            counter=counter,
            system_prompt=system_prompt,
            calibrate=False,
        )
        view_used = None
        if messages_key == MESSAGES_KEY and find_messages(values, VIEW_KEY):
            view = usage_at(
                values,
                model=model,
                budget=chosen,
                messages_key=VIEW_KEY,
                counter=counter,
                system_prompt=system_prompt,
                calibrate=False,
            )
            view_used = view.used
        log = values.get("compaction_log")
        out.append(
            TurnUsage(
                turn=number,
                checkpoint_id=last.checkpoint_id,
                step=last.metadata.get("step"),
                ts=last.ts,
                messages=len(request),
                used=usage.used,
                total=usage.total,
                percent=usage.percent,
                breakdown=dict(usage.breakdown),
                compactions=len(log) if isinstance(log, list) else 0,
                view_used=view_used,
            )
        )
    if any(t.view_used is not None for t in out):
        for t in out:
            if t.view_used is None:
                t.view_used = t.used  # no view yet: the model saw the messages themselves
    return out
