"""`ContextArchive`: a thread's archived contexts, as forks of the thread with an index.

Archiving a context forks the conversation's thread at the checkpoint of its last
assistant message, so every archived message stays readable where the saver keeps
threads, and the transcript is never touched (see `forks`); the index lists the archives
of one thread (see `index`).

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.archive import ContextArchive

archive = ContextArchive(JsonlSaver("./chats"))
for entry in archive.entries("task-001"):          # newest first
    print(entry.context_id, entry.title, entry.message_count, entry.summary_preview)
archive.messages(entry)                            # the archived context's messages
```
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_ctx.context.active_context import read_active_context, utc_now
from langgraph_ctx.context.archive.contents import (
    archive_span,
    conversation_lines,
    count_messages,
    default_title,
    extractive_summary,
    preview,
)
from langgraph_ctx.context.archive.entries import ArchivedContext, new_context_id, normalize_title
from langgraph_ctx.context.archive.forks import (
    archive_thread_id,
    archive_threads_of,
    find_checkpoint,
    fork_thread,
    root_config,
    thread_started_at,
)
from langgraph_ctx.context.archive.index import ContextIndex, index_for
from langgraph_ctx.errors import (
    ContextArchiveError,
    ThreadExistsError,
)

__all__ = [
    "ArchiveOutcome",
    "ArchiveSummarizer",
    "ContextArchive",
    "delete_archives",
]

_log = logging.getLogger(__name__)

ArchiveSummarizer = Callable[[Sequence[BaseMessage]], str]
"""Makes the short summary of an archived context from its messages (may call a model)."""


@dataclass(frozen=True)
class ArchiveOutcome:
    """What `ContextArchive.archive` did."""

    status: Literal["archived", "nothing_to_archive", "already_archived"]
    entry: ArchivedContext | None = None
    """The new archive (archived), or the existing one (already_archived)."""
    same_title: tuple[ArchivedContext, ...] = field(default_factory=tuple)
    """Earlier archives with the same title (the new one is told apart by its id)."""
    summary_error: str | None = None
    """Why the summarizer failed, when the extractive summary stood in for it."""


class ContextArchive:
    """Archives of a thread's contexts, on `saver`, with their index.

    Args:
        saver: the graph's checkpointer (the conversation's threads live there).
        index: where the index lives; default: beside the threads (see the module).

    Example:
        ```python
        archive = ContextArchive(saver)
        archive.entries("task-001")[0].title      # the newest archive
        ```
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], *, index: ContextIndex | None = None):
        self.saver = saver
        self.index = index if index is not None else index_for(saver)
        self._messages: OrderedDict[str, list[BaseMessage]] = OrderedDict()
        self._guard = threading.Lock()

    def entries(self, thread_id: str | int) -> list[ArchivedContext]:
        """The thread's archives, newest first."""
        return list(reversed(self.index.read(str(thread_id))))

    def messages(self, entry: ArchivedContext, *, cached: bool = False) -> list[BaseMessage]:
        """The archived context's messages, read from its fork.

        With `cached`, a copy read earlier may be returned (an archive never changes, but
        its fork can be deleted since): search uses it, loading does not.

        Raises:
            ContextArchiveError: the fork is gone (deleted, or expired with a Redis TTL).
        """
        key = entry.archive_thread_id
        with self._guard:
            if cached and key in self._messages:
                self._messages.move_to_end(key)
                return self._messages[key]
        tup = self.saver.get_tuple(root_config(key))
        if tup is None:
            raise ContextArchiveError(
                f"archived context {entry.context_id}: its thread {key!r} is gone (deleted or "
                "expired); the index still lists it"
            )
        values = tup.checkpoint.get("channel_values", {})
        messages = list(values.get("messages") or [])
        start = next(
            (i for i, m in enumerate(messages) if m.id == entry.start_message_id),
            0,
        )
        end = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].id == entry.end_message_id),
            len(messages) - 1,
        )
        span = messages[start : end + 1]
        with self._guard:
            self._messages[key] = span
            while len(self._messages) > 256:
                self._messages.popitem(last=False)
        return span

    def search_text(self, entry: ArchivedContext) -> list[str]:
        """The archive's messages as search text (`[]` when its fork is gone)."""
        try:
            return conversation_lines(self.messages(entry, cached=True))
        except ContextArchiveError:
            return []

    def archive(
        self,
        thread_id: str | int,
        messages: Sequence[BaseMessage],
        active: Any,
        *,
        title: str | None = None,
        reason: str | None = None,
        summarizer: ArchiveSummarizer | None = None,
    ) -> ArchiveOutcome:
        """Archive the active context of `thread_id` as it was before the current user turn.

        `messages` and `active` are the graph state's `messages` and `active_context`. The
        thread is forked at the checkpoint whose messages end with the context's last
        assistant message (`archive_span`), and the index gets the new entry.

        Raises:
            ContextArchiveError: no saved checkpoint ends at that message (is the archive
                bound to the graph's checkpointer?), or the index is unreadable.
        """
        span = archive_span(messages, active)
        if span is None:
            return ArchiveOutcome(status="nothing_to_archive")
        first, last = messages[span.start], messages[span.end]
        thread_id = key = str(thread_id)  # LangGraph saves checkpoints under str(thread_id)
        existing = self.index.read(key)
        for entry in existing:
            if entry.end_message_id == last.id and entry.start_message_id == first.id:
                return ArchiveOutcome(status="already_archived", entry=entry)
        if last.id is None:
            raise ContextArchiveError(
                f"thread {thread_id!r}: the last assistant message has no id, so no checkpoint "
                "can be found for it; run the tools inside a graph with a checkpointer"
            )
        tup = find_checkpoint(self.saver, thread_id, last.id)
        if tup is None:
            raise ContextArchiveError(
                f"thread {thread_id!r} has no saved checkpoint ending at message {last.id!r}; "
                "bind context_tools to the checkpointer the graph was compiled with"
            )
        archived = list(messages[span.start : span.end + 1])
        summary, summary_error = extractive_summary(archived), None
        if summarizer is not None:
            try:
                summary = str(summarizer(archived)).strip() or summary
            except Exception as err:  # the summary is optional: keep the extractive one
                summary_error = f"{type(err).__name__}: {err}"
        value = read_active_context(active)
        loaded: Mapping[str, Any] = (value.get("loaded") if value else None) or {}
        created_at = (value.get("started_at") if value else None) or thread_started_at(
            self.saver, thread_id
        )
        title = " ".join((title or "").split())[:120] or default_title(archived)
        taken = {e.context_id for e in existing}
        for _attempt in range(5):
            context_id = new_context_id(lambda c: c in taken)
            fork_id = archive_thread_id(key, context_id)
            try:
                fork_thread(self.saver, thread_id, fork_id, checkpoint_id=tup.checkpoint["id"])
                break
            except ThreadExistsError:
                taken.add(context_id)
        else:  # pragma: no cover - five random collisions in a row
            raise ContextArchiveError(f"thread {thread_id!r}: no free archive id after 5 tries")
        entry = ArchivedContext(
            context_id=context_id,
            title=title,
            created_at=created_at,
            archived_at=utc_now(),
            message_count=count_messages(archived),
            summary_preview=preview(summary),
            summary=summary,
            archive_reason=(reason or "").strip() or None,
            thread_id=key,
            archive_thread_id=fork_id,
            checkpoint_id=tup.checkpoint["id"],
            start_message_id=first.id,
            end_message_id=last.id,
            loaded_from=loaded.get("context_id") if isinstance(loaded, Mapping) else None,
        )
        try:
            items = self.index.update(key, lambda items: [*items, entry])
        except BaseException:
            with contextlib.suppress(Exception):  # leave no fork the index does not list
                self.saver.delete_thread(fork_id)
            raise
        same = tuple(
            e
            for e in reversed(items)
            if e.context_id != context_id and normalize_title(e.title) == normalize_title(title)
        )
        return ArchiveOutcome(
            status="archived", entry=entry, same_title=same, summary_error=summary_error
        )


def delete_archives(
    saver: BaseCheckpointSaver[Any], thread_id: str, *, thread_ids: Sequence[str] | None = None
) -> list[str]:
    """Delete the context archives of `thread_id` (archives of archives too) and their
    indexes: what goes with a thread when it is deleted. Returns the archive threads.

    Which archives: the thread's index (one read, no listing of the store), or, given the
    store's listing in `thread_ids`, every `<thread>.ctx.<id>` thread in it (orphans
    included). Deepest first, each with ``saver.delete_thread``, so a saver whose
    ``delete_thread`` also deletes archives finds nothing left below. An unreadable index
    is left as it is, with its archives (`ContextArchiveError` is logged, not raised):
    deleting the thread must not fail on it.
    """
    index = index_for(saver)
    if thread_ids is not None:
        archives = archive_threads_of(thread_id, thread_ids)
    else:
        try:
            named = [e.archive_thread_id for e in index.read(thread_id)]
        except ContextArchiveError as exc:
            _log.warning("kept the context archives of %r: %s", thread_id, exc)
            return []
        # Only archives of this thread, by their name: an index naming another thread
        # (hand-edited, tampered) must not make deleting one thread delete that one.
        archives = archive_threads_of(thread_id, named)
        for other in sorted(set(named).difference(archives)):
            _log.warning("%r's archive index names %r, not an archive of it", thread_id, other)
    for archive in sorted(archives, key=len, reverse=True):
        saver.delete_thread(archive)
        with contextlib.suppress(ContextArchiveError):
            index.delete(archive)
    with contextlib.suppress(ContextArchiveError):
        index.delete(thread_id)
    return archives
