"""The text of a message's content, for every module that reads it.

A module of its own, below the rest of `langgraph_ctx.context`: the model-call and
error modules read content too, and the compaction package (which imports them) must
not be imported to reach these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def content_text(content: Any) -> str:
    """The text of a message `content` (a string or a list of content blocks).

    Example:
        ```python
        content_text([{"type": "text", "text": "hi"}, {"type": "image_url"}])  # "hi"
        ```
    """
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, Iterable):
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    return "\n".join(parts)


def is_text_block(block: Any) -> bool:
    """Whether a content block is text: a string, or a dict holding a string ``text``."""
    return isinstance(block, str) or (
        isinstance(block, dict) and isinstance(block.get("text"), str)
    )


def non_text_blocks(content: Any) -> int:
    """How many content blocks are not text (images, files, tool_use blocks...)."""
    if isinstance(content, str):
        return 0
    return sum(1 for block in content if not is_text_block(block))
