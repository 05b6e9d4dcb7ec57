"""Archived contexts: what to archive, how to describe it, which one a request means, and
where the archives live (forks of the thread, with an index beside them).

The context-switching tools (`langgraph_ctx.tools`) are thin over this package. Two kinds
of module, so the decisions stay testable without a graph or a saver:

- pure decisions over message lists and index entries:
  `entries` (`ArchivedContext`, the index document, ids and titles),
  `contents` (`archive_span`: which messages `chat_context_new` archives; their text,
  default title and extractive summary), `loaded` (`render_loaded_context`: the block
  `chat_context_load` shows the model, banner first), `selection` (`select_archive`: the
  archive a `context_id` or a `query` means, as an `ArchiveSelection`, or why none);
- storage-backed, through the saver's public API only: `index` (`ContextIndex`: a JSON
  file beside the threads, a Redis string, or memory), `forks` (`fork_thread` on any
  saver, `find_checkpoint`), `store` (`ContextArchive`, which ties them together);
  `copies` (`copy_archives`: what a thread's copy takes along) works on the stores
  themselves, as ``langgraph-ctx copy`` moves threads between them.

Why here and not under `tools/`: `ArchivedContext`'s import path,
``langgraph_ctx.context.archive``, is part of stored data (`codec.PACKAGE_MODELS`).

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.archive import ContextArchive

archive = ContextArchive(JsonlSaver("./chats"))
for entry in archive.entries("task-001"):          # newest first
    print(entry.context_id, entry.title, entry.message_count, entry.summary_preview)
```
"""

from __future__ import annotations

from langgraph_ctx.context.archive.contents import (
    CONTEXT_TOOL_NAMES,
    ArchiveSpan,
    archive_span,
    conversation_lines,
    count_messages,
    default_title,
    extractive_summary,
    is_plumbing,
    preview,
)
from langgraph_ctx.context.archive.copies import CopiedArchives, copy_archives
from langgraph_ctx.context.archive.entries import (
    INDEX_VERSION,
    ArchivedContext,
    index_document,
    new_context_id,
    normalize_title,
    parse_index_document,
)
from langgraph_ctx.context.archive.forks import (
    archive_owner,
    archive_thread_id,
    archive_threads_of,
    find_checkpoint,
    fork_thread,
    is_archive_thread,
    thread_started_at,
)
from langgraph_ctx.context.archive.index import (
    INDEX_SUFFIX,
    ContextIndex,
    JsonFileContextIndex,
    MemoryContextIndex,
    RedisContextIndex,
    index_for,
)
from langgraph_ctx.context.archive.loaded import LoadMode, render_loaded_context
from langgraph_ctx.context.archive.selection import ArchiveSelection, select_archive
from langgraph_ctx.context.archive.store import (
    ArchiveOutcome,
    ArchiveSummarizer,
    ContextArchive,
    delete_archives,
)
from langgraph_ctx.errors import ContextArchiveError

__all__ = [
    "CONTEXT_TOOL_NAMES",
    "INDEX_SUFFIX",
    "INDEX_VERSION",
    "ArchiveOutcome",
    "ArchiveSelection",
    "ArchiveSpan",
    "ArchiveSummarizer",
    "ArchivedContext",
    "ContextArchive",
    "ContextArchiveError",
    "ContextIndex",
    "CopiedArchives",
    "JsonFileContextIndex",
    "LoadMode",
    "MemoryContextIndex",
    "RedisContextIndex",
    "archive_owner",
    "archive_span",
    "archive_thread_id",
    "archive_threads_of",
    "conversation_lines",
    "copy_archives",
    "count_messages",
    "default_title",
    "delete_archives",
    "extractive_summary",
    "find_checkpoint",
    "fork_thread",
    "index_document",
    "index_for",
    "is_archive_thread",
    "is_plumbing",
    "new_context_id",
    "normalize_title",
    "parse_index_document",
    "preview",
    "render_loaded_context",
    "select_archive",
    "thread_started_at",
]
