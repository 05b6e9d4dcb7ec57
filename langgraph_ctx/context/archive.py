"""Archived contexts: what to archive, how to describe it, which one a request means. Pure.

The context-switching tools (`langgraph_ctx.tools`) do the I/O (fork the thread, write the
index); every decision is a function here, testable without a graph or a saver:

- `archive_span`: which messages form the context `chat_context_new` archives;
- `conversation_lines`, `default_title`, `extractive_summary`: its text, title and summary;
- `render_loaded_context`: the block `chat_context_load` shows the model, banner first;
- `select_archive`: the archive a `context_id` or a `query` means, or why none.

The index (`index.json` in the seed) is a list of `ArchivedContext`, written as camelCase
JSON: `{"v": 1, "threadId": ..., "items": [{"contextId": ..., "title": ..., ...}]}`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from langgraph_ctx.context.active_context import (
    LOADED_CONTEXT_BANNER,
    context_start,
    current_user_index,
    is_loaded_context_message,
)
from langgraph_ctx.context.compaction.signals import content_text
from langgraph_ctx.context.search import rank

__all__ = [
    "CONTEXT_TOOL_NAMES",
    "INDEX_VERSION",
    "ArchiveSpan",
    "ArchivedContext",
    "LoadMode",
    "Selection",
    "archive_span",
    "conversation_lines",
    "default_title",
    "extractive_summary",
    "index_document",
    "new_context_id",
    "normalize_title",
    "parse_index_document",
    "render_loaded_context",
    "select_archive",
]

INDEX_VERSION: Final[int] = 1

#: The tools' own calls and results are plumbing: never archived text, never searched.
CONTEXT_TOOL_NAMES: Final[frozenset[str]] = frozenset(
    {"chat_context_new", "chat_context_load", "chat_context_list", "chat_context_clear_active"}
)

LoadMode = Literal["full", "recent", "summary"]

_PREVIEW_CHARS: Final[int] = 160
_MESSAGE_CHARS: Final[int] = 1_500
_TOOL_RESULT_CHARS: Final[int] = 300


class ArchivedContext(BaseModel):
    """One archived context: an entry of the index (the seed's `index.json` item).

    JSON uses the seed's camelCase names (`contextId`, `createdAt`, ...); Python uses
    snake_case. Unknown fields are kept, so an index written by a newer version survives
    a rewrite by this one.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    context_id: str
    """`c_<yyyymmdd>_<6 hex>`, unique within the thread."""
    title: str
    created_at: str | None = None
    """When the context started (ISO 8601, UTC)."""
    archived_at: str
    message_count: int
    """Messages of the context (user, assistant, tool), without the context tools' own."""
    summary_preview: str = ""
    summary: str = ""
    archive_reason: str | None = None
    status: Literal["archived"] = "archived"
    thread_id: str
    """The conversation's thread."""
    archive_thread_id: str
    """The fork holding the archived messages (its own JSONL file with `JsonlSaver`)."""
    checkpoint_id: str
    """The checkpoint of `thread_id` the fork was taken at."""
    start_message_id: str | None = None
    end_message_id: str | None = None
    loaded_from: str | None = None
    """The archive that had been loaded into this context, if one was."""

    def to_json(self) -> dict[str, Any]:
        """The index item, with the seed's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)


def index_document(thread_id: str, items: Sequence[ArchivedContext]) -> dict[str, Any]:
    """The whole index as JSON: `{"v": 1, "threadId": ..., "items": [...]}`, oldest first."""
    return {"v": INDEX_VERSION, "threadId": thread_id, "items": [i.to_json() for i in items]}


def parse_index_document(data: Any, where: str) -> list[ArchivedContext]:
    """The entries of an index document.

    Raises:
        ValueError: the document is not an index (the message names `where` and the item).
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("items"), list):
        raise ValueError(f"{where}: not a context index (expected {{'v': 1, 'items': [...]}})")
    if data.get("v") != INDEX_VERSION:
        raise ValueError(f"{where}: index version {data.get('v')!r}, this code reads 1")
    out = []
    for n, item in enumerate(data["items"]):
        try:
            out.append(ArchivedContext.model_validate(item))
        except ValidationError as err:
            raise ValueError(f"{where}: item {n} is not an archived context: {err}") from err
    return out


def new_context_id(
    taken: Callable[[str], bool] = lambda _: False, *, now: datetime | None = None
) -> str:
    """A fresh context id, `c_<yyyymmdd>_<6 hex>` (the seed's form), not `taken`."""
    day = (now or datetime.now(timezone.utc)).strftime("%Y%m%d")
    while True:
        candidate = f"c_{day}_{secrets.token_hex(3)}"
        if not taken(candidate):
            return candidate


def normalize_title(title: str) -> str:
    """A title as compared for duplicates: case and spacing ignored."""
    return " ".join(title.casefold().split())


# ---------------------------------------------------------------------------
# What a context holds
# ---------------------------------------------------------------------------


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


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str, limit: int) -> str:
    return _clip(" ".join(text.split()), limit)


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
            said = _clip(text, _MESSAGE_CHARS)
            if calls:
                said = (said + "\n" if said else "") + "[called " + ", ".join(calls) + "]"
            if said:
                lines.append(f"assistant: {said}")
        elif message.type == "human" or getattr(message, "role", None) == "user":
            lines.append(f"user: {_clip(text, _MESSAGE_CHARS)}")
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
    return _clip(" ".join(p if p[-1] in ".!?。！？…" else p + "." for p in parts), limit)


def preview(summary: str) -> str:
    """The index's `summaryPreview`: the summary's first 160 characters, on one line."""
    return _one_line(summary, _PREVIEW_CHARS)


# ---------------------------------------------------------------------------
# What the model is shown of a loaded archive
# ---------------------------------------------------------------------------


def _rounds_from(lines: Sequence[str], rounds: int) -> int:
    """Index of the first line of the last `rounds` rounds (a round starts at a user line)."""
    starts = [i for i, line in enumerate(lines) if line.startswith("user: ")]
    return starts[-rounds] if len(starts) >= rounds else 0


def render_loaded_context(
    entry: ArchivedContext,
    messages: Sequence[BaseMessage],
    *,
    mode: LoadMode = "full",
    max_tokens: int = 2_000,
    count_tokens: Callable[[str], int],
    recent_rounds: int = 3,
) -> tuple[str, int]:
    """The block a loaded archive injects, and how many of its messages it shows.

    The block starts with `LOADED_CONTEXT_BANNER` (for reference only, may not match the
    current question), then the archive's id, title, date, mode and summary, then its
    messages (`conversation_lines`): all of them (`full`), the last `recent_rounds` rounds
    (`recent`) or none (`summary`). The block stays within `max_tokens`
    (`count_tokens(text)`): the oldest lines are left out first, and it says so.

    Example:
        ```python
        count = lambda text: count_tokens([SystemMessage(text)], model="gpt-4o")
        text, shown = render_loaded_context(entry, messages, max_tokens=800, count_tokens=count)
        text.splitlines()[0]
        # 'ARCHIVED CONTEXT (for reference only, may not match the current question)'
        ```
    """
    lines = conversation_lines(messages)
    if mode == "summary":
        chosen: list[str] = []
    elif mode == "recent":
        chosen = lines[_rounds_from(lines, recent_rounds) :]
    else:
        chosen = list(lines)

    def block(shown: list[str], summary: str) -> str:
        left_out = len(lines) - len(shown)
        head = [
            LOADED_CONTEXT_BANNER,
            f"- contextId: {entry.context_id}",
            f"- title: {entry.title}",
            f"- archivedAt: {entry.archived_at}",
            f"- mode: {mode}, {len(shown)} of {len(lines)} messages shown"
            + (f" (the {left_out} earlier ones are left out)" if left_out else ""),
        ]
        if entry.loaded_from:
            head.append(f"- continues: {entry.loaded_from} (load it for what came before)")
        if summary:
            head.append(f"- summary: {summary}")
        head.append(
            "- note: the user's latest message and the current instructions win over "
            "anything below."
        )
        return "\n".join(head) + ("\n\n" + "\n".join(shown) if shown else "")

    summary = entry.summary
    if count_tokens(block([], summary)) > max_tokens:
        summary = _clip(summary, 200)
    # Keep the newest lines that fit: fewer lines never cost more tokens (binary search).
    low, high = 0, len(chosen)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(block(chosen[len(chosen) - mid :], summary)) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    shown = chosen[len(chosen) - low :]
    return block(shown, summary), len(shown)


# ---------------------------------------------------------------------------
# Which archive a request means
# ---------------------------------------------------------------------------

Problem = Literal[
    "nothing_archived", "no_input", "empty_query", "unknown_id", "ambiguous", "no_match"
]


@dataclass(frozen=True)
class Selection:
    """The archive `chat_context_load` should load, or why there is none.

    `chosen` is set exactly when `problem` is None. `candidates` are, depending on the
    case: the other close matches (chosen), the archives sharing the title or tied
    (ambiguous), titles resembling an unknown id, or the newest archives (no match).
    """

    chosen: ArchivedContext | None = None
    problem: Problem | None = None
    how: Literal["id", "title", "search"] | None = None
    score: float | None = None
    terms: tuple[str, ...] = ()
    candidates: tuple[ArchivedContext, ...] = field(default_factory=tuple)


def select_archive(
    entries: Sequence[ArchivedContext],
    *,
    context_id: str | None = None,
    query: str | None = None,
    documents: Callable[[ArchivedContext], Sequence[str]] | None = None,
    runner_up_ratio: float = 0.8,
) -> Selection:
    """Pick the archive meant by `context_id` (exact) or `query` (title, then BM25).

    Rules, in order:

    1. no archives: `nothing_archived`;
    2. a `context_id`: that archive (case and spaces ignored), else `unknown_id`;
    3. no `context_id` and no `query`: `no_input`; a blank `query`: `empty_query`;
    4. a `query` that is an archive's id: that archive (models often put the id there);
       equal to one title: that archive; to several: `ambiguous`;
    5. BM25 over title (counted twice), summary and `documents(entry)` (its messages):
       the best match, with the others scoring at least `runner_up_ratio` of it as
       candidates; an exact tie at the top: `ambiguous`; nothing: `no_match`.

    `entries` are newest first; candidates keep that order.

    Example:
        ```python
        selection = select_archive(entries, query="museums in Paris",
                                   documents=lambda e: [e.summary])
        selection.chosen.context_id if selection.chosen else selection.problem
        ```
    """
    if not entries:
        return Selection(problem="nothing_archived")
    if context_id is not None and context_id.strip():
        wanted = context_id.strip().casefold()
        for entry in entries:
            if entry.context_id.casefold() == wanted:
                return Selection(chosen=entry, how="id")
        by_title = tuple(e for e in entries if normalize_title(e.title) == normalize_title(wanted))
        return Selection(problem="unknown_id", candidates=by_title or tuple(entries[:5]))
    if query is None:
        return Selection(problem="no_input", candidates=tuple(entries[:5]))
    if not query.strip():
        return Selection(problem="empty_query", candidates=tuple(entries[:5]))

    by_id = [e for e in entries if e.context_id.casefold() == query.strip().casefold()]
    if by_id:
        return Selection(chosen=by_id[0], how="id")
    same_title = tuple(e for e in entries if normalize_title(e.title) == normalize_title(query))
    if len(same_title) == 1:
        return Selection(chosen=same_title[0], how="title")
    if len(same_title) > 1:
        return Selection(problem="ambiguous", how="title", candidates=same_title)

    fields = [
        [entry.title, entry.summary, *(documents(entry) if documents is not None else ())]
        for entry in entries
    ]
    ranked = rank(query, fields, weights=[2, 1])
    if not ranked:
        return Selection(problem="no_match", candidates=tuple(entries[:5]))
    best = ranked[0]
    tied = [r for r in ranked if abs(r.score - best.score) <= 1e-9 * max(1.0, best.score)]
    if len(tied) > 1:
        return Selection(
            problem="ambiguous",
            how="search",
            score=best.score,
            candidates=tuple(entries[r.index] for r in tied),
        )
    close = tuple(entries[r.index] for r in ranked[1:4] if r.score >= runner_up_ratio * best.score)
    return Selection(
        chosen=entries[best.index],
        how="search",
        score=best.score,
        terms=best.terms,
        candidates=close,
    )
