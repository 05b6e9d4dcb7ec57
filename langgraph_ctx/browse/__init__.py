"""Browse saved conversations: threads, checkpoints, transcripts, diffs, token usage.

Plain functions and dataclasses with no terminal code, shared by the command line
(``langgraph-ctx``) and notebooks. They read through the saver (`LogSaver`), so the same
calls work on a `JsonlSaver` directory and on a `RedisLogSaver`:

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx import browse

saver = JsonlSaver("./chats")
browse.thread_summaries(saver)                       # one ThreadSummary per thread
browse.history(saver, "task-001")                    # checkpoints, oldest first, no decoding
info = browse.resolve_checkpoint(saver, "task-001", "head~2")
values = browse.state_values(saver, info)
browse.transcript(values)                            # messages, compactions, running summary
browse.diff_checkpoints(saver, "task-001", "head~2", "head")
browse.export_messages(values["messages"], "openai")  # OpenAI-style JSON for evals
browse.usage_series(saver, "task-001", model="gpt-4o")  # tokens per component per turn
```

Checkpoint references accept a full id, a unique prefix of one, ``head`` (the
thread's latest checkpoint) and ``head~N`` (N parents back from it).

Modules, one concept each: `values` (state values as text and JSON), `checkpoints`
(resolving references, decoding a checkpoint's state), `threads` (the store's threads,
a thread's history), `transcript` (a state as a transcript, OpenAI export), `diff` (two
checkpoints compared), `usage` (token usage per turn).
"""

from __future__ import annotations

from langgraph_ctx.browse.checkpoints import (
    checkpoint_state,
    head_info,
    require_thread,
    resolve_checkpoint,
    state_values,
)
from langgraph_ctx.browse.diff import (
    ChannelChange,
    MessageChange,
    StateDiff,
    diff_checkpoints,
    diff_values,
)
from langgraph_ctx.browse.threads import ThreadSummary, checkpoint_row, history, thread_summaries
from langgraph_ctx.browse.transcript import (
    ExportFormat,
    Transcript,
    export_messages,
    to_openai_messages,
    transcript,
)
from langgraph_ctx.browse.usage import VIEW_KEY, TurnUsage, usage_at, usage_series
from langgraph_ctx.browse.values import (
    MESSAGES_KEY,
    content_text,
    find_messages,
    format_ts,
    is_internal_channel,
    jsonable,
    messages_channel,
)
from langgraph_ctx.errors import CheckpointRefError

__all__ = [
    "MESSAGES_KEY",
    "VIEW_KEY",
    "ChannelChange",
    "CheckpointRefError",
    "ExportFormat",
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
