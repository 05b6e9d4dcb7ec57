"""State values as people read them: message text, JSON views, timestamps, channel names.

Pure helpers the other browse modules share; nothing here reads a saver.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from langgraph_ctx.codec import message_to_json

__all__ = [
    "MESSAGES_KEY",
    "content_text",
    "find_messages",
    "format_ts",
    "is_internal_channel",
    "jsonable",
    "messages_channel",
]

MESSAGES_KEY = "messages"
"""The state key that holds the conversation (LangGraph's `MessagesState`)."""

_INTERNAL_PREFIXES = ("branch:", "join:", "split:", "start:")


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
