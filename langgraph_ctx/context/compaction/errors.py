"""Errors raised by compaction."""

from __future__ import annotations

from langgraph_ctx.errors import LangGraphCtxError


class CompactionError(LangGraphCtxError, ValueError):
    """Compaction was called with something it cannot work with.

    The message says what was wrong and what to pass instead, for example a budget
    that is not a positive number, a message that cannot be read, or a summary
    strategy without a chat model.

    Example:
        ```python
        try:
            compact_messages(messages, max_tokens=0)
        except CompactionError as err:
            print(err)  # max_tokens must be a positive int, got 0
        ```
    """
