"""What an archived context holds: its span of messages, their text, a title, a summary.

Pure: `archive_span` picks the messages `chat_context_new` archives; `conversation_lines`,
`default_title` and `extractive_summary` describe them (the extract is what a summary
falls back to when no summarizer is given, or it fails).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from langgraph_ctx.context.active_context import (
    context_start,
    current_user_index,
    is_loaded_context_message,
)
from langgraph_ctx.context.content import content_text

__all__ = [
    "CONTEXT_TOOL_NAMES",
    "ArchiveSpan",
    "archive_span",
    "conversation_lines",
    "count_messages",
    "default_title",
    "extractive_summary",
    "is_plumbing",
    "preview",
]

#: The tools' own calls and results are plumbing: never archived text, never searched.
CONTEXT_TOOL_NAMES: Final[frozenset[str]] = frozenset(
    {"chat_context_new", "chat_context_load", "chat_context_list", "chat_context_clear_active"}
)


_PREVIEW_CHARS: Final[int] = 160
_MESSAGE_CHARS: Final[int] = 1_500
_TOOL_RESULT_CHARS: Final[int] = 300


@dataclass(frozen=True)
class ArchiveSpan:
    """The messages `chat_context_new` archives: `messages[start : end + 1]`."""

    start: int
    """The first message of the active context."""
    end: int
    """The last assistant message before the current user turn (the archive checkpoint)."""
    current: int
    """The current user message (the new context starts there)."""


def is_plumbing(message: BaseMessage) -> bool:
    """The context tools' own calls and results, and injected blocks: not conversation."""
    if isinstance(message, ToolMessage):
        return message.name in CONTEXT_TOOL_NAMES
    if isinstance(message, AIMessage) and message.tool_calls:
        own = all(c["name"] in CONTEXT_TOOL_NAMES for c in message.tool_calls)
        return own and not _text(message).strip()
    return is_loaded_context_message(message) or isinstance(message, SystemMessage)


def archive_span(messages: Sequence[BaseMessage], active: Any) -> ArchiveSpan | None:
    """Which messages form the active context to archive, or None when there is nothing.

    From the context's start to the last assistant message before the current user
    message: the state as it was at the end of the previous turn. None when that range has
    no assistant message or no conversation (only the context tools' own calls).

    Example:
        ```python
        span = archive_span([HumanMessage("a", id="h1"), AIMessage("b", id="a1"),
                             HumanMessage("new topic", id="h2")], None)
        (span.start, span.end, span.current)   # (0, 1, 2)
        ```
    """
    current = current_user_index(messages)
    if current is None:
        return None
    start = context_start(messages, active)
    if start >= current:
        return None
    end = next(
        (i for i in range(current - 1, start - 1, -1) if isinstance(messages[i], AIMessage)), None
    )
    if end is None or not any(not is_plumbing(m) for m in messages[start : end + 1]):
        return None
    return ArchiveSpan(start=start, end=end, current=current)


def _text(message: BaseMessage) -> str:
    return content_text(message.content)


def clip(text: str, limit: int) -> str:
    """``text`` stripped, cut to ``limit`` characters with an ellipsis."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)


def conversation_lines(messages: Sequence[BaseMessage]) -> list[str]:
    """The context as text lines, one per message: `user: ...`, `assistant: ...`, `tool x: ...`.

    The context tools' own calls and results and system messages are left out; tool calls
    are shown by name and arguments, tool results clipped (they are often long).
    """
    lines = []
    for message in messages:
        if is_plumbing(message):
            continue
        text = _text(message)
        if isinstance(message, ToolMessage):
            lines.append(f"tool {message.name or 'result'}: {_one_line(text, _TOOL_RESULT_CHARS)}")
        elif isinstance(message, AIMessage):
            calls = [
                f"{c['name']}({_one_line(str(c['args']), 120)})"
                for c in message.tool_calls
                if c["name"] not in CONTEXT_TOOL_NAMES
            ]
            said = clip(text, _MESSAGE_CHARS)
            if calls:
                said = (said + "\n" if said else "") + "[called " + ", ".join(calls) + "]"
            if said:
                lines.append(f"assistant: {said}")
        elif message.type == "human" or getattr(message, "role", None) == "user":
            lines.append(f"user: {clip(text, _MESSAGE_CHARS)}")
    return lines


def count_messages(messages: Sequence[BaseMessage]) -> int:
    """Messages of a context, without the context tools' own calls and results."""
    return sum(1 for m in messages if not is_plumbing(m))


def _first_user_text(messages: Sequence[BaseMessage]) -> str:
    for message in messages:
        if message.type == "human" and _text(message).strip():
            return _text(message)
    return ""


def default_title(messages: Sequence[BaseMessage], limit: int = 60) -> str:
    """A title from the context's first user message (its first line, clipped)."""
    first = _first_user_text(messages).strip().splitlines()
    return _one_line(first[0], limit) if first else "untitled context"


_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


def extractive_summary(messages: Sequence[BaseMessage], limit: int = 400) -> str:
    """A short summary without a model: what the user asked first and last, the last answer.

    Example:
        ```python
        extractive_summary([HumanMessage("Plan 3 days in Paris."),
                            AIMessage("Day 1: Louvre. Day 2: Orsay.")])
        # 'Asked: Plan 3 days in Paris. Last answer: Day 1: Louvre.'
        ```
    """
    users = [_one_line(_text(m), 160) for m in messages if m.type == "human" and _text(m).strip()]
    answers = [
        _text(m) for m in messages if isinstance(m, AIMessage) and not is_plumbing(m) and _text(m)
    ]
    parts = []
    if users:
        parts.append(f"Asked: {users[0]}")
        if len(users) > 1:
            parts.append(f"Then: {users[-1]}")
    if answers:
        first_sentence = _SENTENCE.split(" ".join(answers[-1].split()), maxsplit=1)[0]
        parts.append(f"Last answer: {_one_line(first_sentence, 200)}")
    return clip(" ".join(p if p[-1] in ".!?。！？…" else p + "." for p in parts), limit)


def preview(summary: str) -> str:
    """The index's `summaryPreview`: the summary's first 160 characters, on one line."""
    return _one_line(summary, _PREVIEW_CHARS)
