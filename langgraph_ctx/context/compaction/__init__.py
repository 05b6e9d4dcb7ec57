"""Compaction: fit a long conversation into a token budget without losing it.

```python
from langgraph_ctx.context.compaction import compact_messages

messages, record = compact_messages(history, max_tokens=8_000)        # no model needed
messages, record = compact_messages(history, max_tokens=8_000,
                                    strategy=HybridSummary(chat_model))  # + running summary
```

`compact_messages` returns what to send and a `CompactionRecord` of what was kept,
dropped, summarised and offloaded. The history you pass in is never changed.
Strategies decide (pure, see `prepare_compaction`); a separate step calls the model when
a strategy asks for a summary. `CompactionNode` (langgraph_ctx.nodes.compaction) runs
this inside a graph when the context passes a trigger.
"""

from langgraph_ctx.context.compaction.conversation import (
    RUNNING_SUMMARY_ID,
    SUMMARY_MARKER,
    Conversation,
    Unit,
    is_summary_class_message,
)
from langgraph_ctx.context.compaction.core import (
    Compaction,
    acompact_messages,
    compact_messages,
    prepare_compaction,
)
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.history_search import search_history, search_messages
from langgraph_ctx.context.compaction.previews import tool_result_ref
from langgraph_ctx.context.compaction.record import (
    CompactionRecord,
    DroppedMessage,
    OffloadedResult,
    RunningSummary,
    ScoredMessage,
    ShortenedMessage,
)
from langgraph_ctx.context.compaction.strategies import (
    CompactionPlan,
    CompactionStrategy,
    HybridSummary,
    KeyMessageExtraction,
    LLMSummary,
    RelevanceSelection,
    Selection,
    SlidingWindow,
)
from langgraph_ctx.context.compaction.summarizer import Summarizer
from langgraph_ctx.context.compaction.tools import find_tool_result, read_tool_result

__all__ = [
    "RUNNING_SUMMARY_ID",
    "SUMMARY_MARKER",
    "Compaction",
    "CompactionError",
    "CompactionPlan",
    "CompactionRecord",
    "CompactionStrategy",
    "Conversation",
    "DroppedMessage",
    "HybridSummary",
    "KeyMessageExtraction",
    "LLMSummary",
    "OffloadedResult",
    "RelevanceSelection",
    "RunningSummary",
    "ScoredMessage",
    "Selection",
    "ShortenedMessage",
    "SlidingWindow",
    "Summarizer",
    "Unit",
    "acompact_messages",
    "compact_messages",
    "find_tool_result",
    "is_summary_class_message",
    "prepare_compaction",
    "read_tool_result",
    "search_history",
    "search_messages",
    "tool_result_ref",
]
