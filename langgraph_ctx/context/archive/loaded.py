"""What the model is shown of a loaded archive: the banner, its details, its messages. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from langchain_core.messages import BaseMessage

from langgraph_ctx.context.active_context import (
    LOADED_CONTEXT_BANNER,
)
from langgraph_ctx.context.archive.contents import clip, conversation_lines
from langgraph_ctx.context.archive.entries import ArchivedContext

__all__ = [
    "LoadMode",
    "render_loaded_context",
]

LoadMode = Literal["full", "recent", "summary"]


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
        summary = clip(summary, 200)
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
