"""The active context: the part of the conversation the model works with. Pure functions.

The state's `messages` is the user's transcript and is never cut. The *active context* says
where the model's working conversation starts in it, and which archived context (if any)
was loaded in front of it. The context-switching tools (`langgraph_ctx.tools`) write it;
the context pipeline reads it (`active_messages`) before it budgets, compacts and sends.

```python
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph_ctx.context.active_context import active_messages

messages = [SystemMessage("Be brief.", id="s"), HumanMessage("Plan Paris", id="h1"),
            AIMessage("Day 1: Louvre", id="a1"), HumanMessage("New topic: CSV", id="h2")]
[m.id for m in active_messages(messages, None)]                  # ['s', 'h1', 'a1', 'h2']
[m.id for m in active_messages(messages, {"v": 1, "start_id": "h2"})]   # ['s', 'h2']
```

State value (`active_context`, plain JSON as docs/CONTRACTS.md requires)::

    {"v": 1,
     "start_id": "<id of the first message of the context in `messages`>",
     "started_at": "2026-11-22T05:18:12.745+00:00",
     "started_by": "new" | "load" | "clear",
     "archived_as": "c_20261122_3fa91c",        # new: what the previous context became
     "loaded": {"context_id": ..., "title": ..., "archive_thread_id": ..., "mode": ...,
                "messages": 6, "text": "ARCHIVED CONTEXT (for reference only, ...) ..."}}

No value (the key missing, or None) means the whole history is the context, as before any
switch. A loaded archive is shown as one system message (`loaded_context_message`) right
after your own leading system messages, marked with
`additional_kwargs={"langgraph_ctx": "loaded_context"}`; its text starts with
`LOADED_CONTEXT_BANNER`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Final, Literal

from langchain_core.messages import BaseMessage, ChatMessage, HumanMessage, SystemMessage
from typing_extensions import NotRequired, TypedDict

__all__ = [
    "ACTIVE_CONTEXT_VERSION",
    "LOADED_CONTEXT_BANNER",
    "LOADED_CONTEXT_MARKER",
    "ActiveContext",
    "LoadedContext",
    "active_messages",
    "context_start",
    "current_user_index",
    "is_loaded_context_message",
    "leading_system_count",
    "loaded_context_message",
    "new_active_context",
    "read_active_context",
    "replace_active_context",
    "utc_now",
]

ACTIVE_CONTEXT_VERSION: Final[int] = 1

#: First line of every loaded archive the model is shown (the seed's "仅供参考" banner).
LOADED_CONTEXT_BANNER: Final[str] = (
    "ARCHIVED CONTEXT (for reference only, may not match the current question)"
)

#: `additional_kwargs` key and value that mark the loaded-archive system message.
LOADED_CONTEXT_MARKER: Final[tuple[str, str]] = ("langgraph_ctx", "loaded_context")


class LoadedContext(TypedDict):
    """An archived context loaded into the active context (what the model is shown of it)."""

    context_id: str
    title: str
    archive_thread_id: str
    mode: Literal["full", "recent", "summary"]
    messages: int
    """How many of the archive's messages `text` shows."""
    text: str
    """The injected block: `LOADED_CONTEXT_BANNER`, the archive's details, its messages."""


class ActiveContext(TypedDict):
    """The state's `active_context`: where the model's working conversation starts."""

    v: int
    start_id: str | None
    """Id of the first message of the context in `messages` (the user turn it started at)."""
    started_at: NotRequired[str]
    started_by: NotRequired[Literal["new", "load", "clear"]]
    archived_as: NotRequired[str | None]
    loaded: NotRequired[LoadedContext | None]


def replace_active_context(current: Any, update: Any) -> Any:
    """Reducer of `active_context`: the newest write wins.

    A reducer (rather than a plain value) lets several context tools called in one step
    each write it without LangGraph's one-write-per-step error; the last call wins.
    """
    return update


def utc_now() -> str:
    """The current UTC time as ISO 8601 with milliseconds (as in thread file headers)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_active_context(
    start_id: str | None,
    started_by: Literal["new", "load", "clear"],
    *,
    archived_as: str | None = None,
    loaded: LoadedContext | None = None,
    started_at: str | None = None,
) -> ActiveContext:
    """A fresh `active_context` value starting at message `start_id`."""
    value: ActiveContext = {
        "v": ACTIVE_CONTEXT_VERSION,
        "start_id": start_id,
        "started_at": started_at or utc_now(),
        "started_by": started_by,
    }
    if archived_as is not None:
        value["archived_as"] = archived_as
    if loaded is not None:
        value["loaded"] = loaded
    return value


def read_active_context(value: Any) -> ActiveContext | None:
    """The state's `active_context` as a dict, or None when no context is active.

    Anything that is not a mapping with a `start_id` or a `loaded` archive counts as no
    active context (the whole history), so a hand-edited or foreign value never breaks a
    model call.
    """
    if not isinstance(value, Mapping):
        return None
    if value.get("start_id") is None and not isinstance(value.get("loaded"), Mapping):
        return None
    return value  # type: ignore[return-value]


def _is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) or (
        isinstance(message, ChatMessage) and message.role in ("system", "developer")
    )


def is_loaded_context_message(message: BaseMessage) -> bool:
    """True for the system message that shows a loaded archive (`loaded_context_message`)."""
    key, value = LOADED_CONTEXT_MARKER
    return (message.additional_kwargs or {}).get(key) == value


def loaded_context_message(loaded: Mapping[str, Any]) -> SystemMessage:
    """The loaded archive as the system message the model is shown.

    Its id is derived from the archive id and the text, so the same block is the same
    message on every step (a checkpointer stores it once).
    """
    text = str(loaded.get("text") or "")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    key, value = LOADED_CONTEXT_MARKER
    return SystemMessage(
        content=text,
        id=f"langgraph-ctx-loaded-{loaded.get('context_id', 'context')}-{digest}",
        additional_kwargs={key: value},
    )


def leading_system_count(messages: Sequence[BaseMessage]) -> int:
    """How many system messages open `messages` (your own system prompt, kept in the history)."""
    n = 0
    while n < len(messages) and _is_system(messages[n]):
        n += 1
    return n


def current_user_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the newest user message (the turn being answered), or None."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) or (
            isinstance(messages[i], ChatMessage) and messages[i].role == "user"  # type: ignore[attr-defined]
        ):
            return i
    return None


def context_start(messages: Sequence[BaseMessage], active: Any) -> int:
    """Index in `messages` of the first message of the active context.

    Without an active context: the first message after the leading system messages.
    When the start message is not in `messages` (a compaction with `rewrite_messages=True`
    replaced them), the same: the whole (already rewritten) history.
    """
    lead = leading_system_count(messages)
    value = read_active_context(active)
    start_id = value.get("start_id") if value is not None else None
    if start_id is None:
        return lead
    for i in range(len(messages) - 1, lead - 1, -1):  # the start is usually recent
        if messages[i].id == start_id:
            return i
    return lead


def active_messages(messages: list[BaseMessage], active: Any) -> list[BaseMessage]:
    """The conversation the model works with: the active context, not the whole history.

    Returns `messages` itself when no context is active. Otherwise, in order:

    1. the leading system messages of `messages` (a system prompt kept in the history);
    2. the loaded archive, if any, as one system message (`loaded_context_message`);
    3. `messages` from the context's start on.

    `messages` is never changed. A copy of the loaded block found in `messages` (written
    there by a compaction with `rewrite_messages=True`) is not repeated.

    Example:
        ```python
        active = {"v": 1, "start_id": "h2",
                  "loaded": {"context_id": "c_1", "text": "ARCHIVED CONTEXT (...)\\n..."}}
        [m.type for m in active_messages(messages, active)]   # ['system', 'system', 'human']
        ```
    """
    value = read_active_context(active)
    if value is None:
        return messages
    lead = leading_system_count(messages)
    start = context_start(messages, value)
    loaded = value.get("loaded")
    block = (
        [loaded_context_message(loaded)]
        if isinstance(loaded, Mapping) and loaded.get("text")
        else []
    )
    kept = [
        m
        for m in [*messages[:lead], *messages[max(start, lead) :]]
        if not is_loaded_context_message(m)
    ]
    lead = leading_system_count(kept)
    return [*kept[:lead], *block, *kept[lead:]]
