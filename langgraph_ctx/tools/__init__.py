"""Tools for the model: explicit context switching (`context_tools`).

```python
from langgraph_ctx.tools import context_tools

tools = context_tools(saver)   # chat_context_new, chat_context_load, chat_context_list,
                               # chat_context_clear_active: for ToolNode and bind_tools
```

The archives behind them (`ContextArchive`, its index, forks) live in
`langgraph_ctx.context.archive`; they are re-exported here. See docs/context_tools.md.
"""

from __future__ import annotations

from langgraph_ctx.context.archive import (
    ArchiveOutcome,
    ArchiveSummarizer,
    ContextArchive,
    ContextArchiveError,
    ContextIndex,
    JsonFileContextIndex,
    MemoryContextIndex,
    RedisContextIndex,
    archive_thread_id,
    fork_thread,
)
from langgraph_ctx.tools.context import ContextTools, ToolResult, context_tools

__all__ = [
    "ArchiveOutcome",
    "ArchiveSummarizer",
    "ContextArchive",
    "ContextArchiveError",
    "ContextIndex",
    "ContextTools",
    "JsonFileContextIndex",
    "MemoryContextIndex",
    "RedisContextIndex",
    "ToolResult",
    "archive_thread_id",
    "context_tools",
    "fork_thread",
]
