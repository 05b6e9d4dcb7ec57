"""What goes with a thread when it is copied: its context archives and their index.

A thread's archives are threads named after it (`<thread>.ctx.<context id>`, see
`forks`) listed in its index (see `index`). A copy of the thread under another id gets
copies of them named after the copy (`<copy>.ctx.<context id>`), and an index listing
those, so the copy's context tools list and load the archives its transcript and
`active_context` name, and deleting the copy (which deletes the archives its index
lists) leaves the source's archives alone. A copy under the same id in another store
(``langgraph-ctx copy --to``) keeps the names.

`copy_archives` is the one implementation: `LogSaver.fork` and `copy_thread` (the same
store, a new id) and ``langgraph-ctx copy`` (another store, the same id or ``--as``)
copy the thread's own log inside its block.

```python
from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.archive import ContextArchive
from langgraph_ctx.context.archive.copies import copy_archives
from langgraph_ctx.storage.jsonl import JsonlStorage
from langgraph_ctx.storage.transfer import copy_thread_between

backup = JsonlStorage("./backup")       # another directory, or a RedisStorage
with copy_archives(storage, "task-001", backup, "task-001") as archives:
    copy_thread_between(storage, "task-001", backup)     # the thread's own log
archives.copied        # [('task-001.ctx.c_20261122_3fa91c', 'task-001.ctx.c_...', 9)]
ContextArchive(JsonlSaver("./backup")).entries("task-001")   # listed there too
```
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from langgraph_ctx.context.archive.entries import ArchivedContext
from langgraph_ctx.context.archive.forks import archive_owner, archive_threads_of
from langgraph_ctx.context.archive.index import ContextIndex, index_for_storage
from langgraph_ctx.errors import ThreadExistsError, ThreadNotFoundError
from langgraph_ctx.storage.base import LogStorage
from langgraph_ctx.storage.thread_ids import check_thread_id
from langgraph_ctx.storage.transfer import copy_thread_between

__all__ = ["CopiedArchives", "copy_archives"]

_log = logging.getLogger(__name__)


@dataclass
class CopiedArchives:
    """What `copy_archives` copied, in the target's names."""

    copied: list[tuple[str, str, int]] = field(default_factory=list)
    """``(source archive, target archive, lines)`` of each archive thread copied."""
    kept: list[str] = field(default_factory=list)
    """Archive threads the target already had: left as they were, never overwritten."""
    missing: list[str] = field(default_factory=list)
    """Archives an index lists whose thread is gone at the source (deleted, expired): their
    entries are copied all the same, as the source lists them."""
    indexed: dict[str, list[str]] = field(default_factory=dict)
    """Target thread -> the context ids its index got (entries it had are kept as they
    were; an id it already listed is not added again)."""


@contextlib.contextmanager
def copy_archives(
    source: LogStorage,
    source_id: str,
    target: LogStorage,
    target_id: str,
    *,
    thread_ids: Sequence[str] | None = None,
    source_index: ContextIndex | None = None,
    target_index: ContextIndex | None = None,
) -> Iterator[CopiedArchives]:
    """Copy the context archives of `source_id` for a copy of it, `target_id`, that the
    block makes: the archive threads, renamed after the copy, then their index entries.

    Which archives: those the thread's index lists (and those their own indexes list), or,
    given the source store's listing in `thread_ids`, every `<thread>.ctx.<id>` thread in
    it (orphans included), as `delete_archives` chooses what to delete. An index entry
    naming a thread that is not an archive of the source by its name is left out (logged),
    as `delete_archives` leaves such a thread alone. A fork of the thread into its own
    archive name (what ``chat_context_new`` makes) copies none: an archive holds one
    context, not the conversation's archives.

    Nothing of the target's is overwritten or deleted: an archive thread it already has is
    kept (`CopiedArchives.kept`) and an index entry it already has is not replaced.

    The index is read under the source's lock, held through the block: an archive is
    indexed before any checkpoint names it, so while no checkpoint is appended every
    archive the copied log can name is copied. `LogSaver.fork` holds the lock exclusively;
    here it is shared (a read-only directory can be copied), which on JSONL keeps writers
    out too, and on Redis does not: a context archived by another process while
    ``langgraph-ctx copy`` runs may be left out.

    If copying an archive or an index fails, or the block raises, the archive threads and
    index entries made here are deleted again and the error propagates: the target then
    holds neither the copy nor its archives, and whatever it had before is still there.

    Args:
        source, target: The stores (the same one for a copy under a new id).
        source_id, target_id: The thread and its copy.
        thread_ids: The source store's thread ids, to copy orphaned archives too.
        source_index, target_index: Where the indexes live (default: beside the threads,
            `index_for_storage`; a store without one copies the archive threads only).

    Raises:
        ThreadNotFoundError: the source has no such thread (nothing copied).
        ThreadExistsError: the target already has `target_id` (nothing copied).
        ContextArchiveError: an index cannot be read or written (what was copied is
            deleted again).
    """
    source_id, target_id = check_thread_id(source_id), check_thread_id(target_id)
    if source is target and source_id == target_id:
        raise ValueError("source and target are the same thread")
    done = CopiedArchives()
    if archive_owner(target_id) == source_id:  # an archive being made: see above
        yield done
        return
    with source.locked(source_id, exclusive=False):
        if not source.exists(source_id):
            raise ThreadNotFoundError(source_id)
        if target.exists(target_id):
            raise ThreadExistsError(target_id)
        here = source_index if source_index is not None else index_for_storage(source)
        there = target_index if target_index is not None else index_for_storage(target)
        try:
            _copy(source, source_id, target, target_id, thread_ids, here, there, done)
            yield done
        except BaseException:
            _undo(target, there, done)
            raise


def _copy(
    source: LogStorage,
    source_id: str,
    target: LogStorage,
    target_id: str,
    thread_ids: Sequence[str] | None,
    here: ContextIndex | None,
    there: ContextIndex | None,
    done: CopiedArchives,
) -> None:
    def renamed(thread_id: str) -> str:  # the source or one of its archives, by name
        return target_id + thread_id[len(source_id) :]

    indexes = _indexes(source_id, thread_ids, here)
    named = [e.archive_thread_id for entries in indexes.values() for e in entries]
    archives = sorted({*archive_threads_of(source_id, thread_ids or []), *named})
    for archive in archives:
        try:
            lines = copy_thread_between(source, archive, target, renamed(archive))
        except ThreadExistsError:
            done.kept.append(renamed(archive))
        except ThreadNotFoundError:
            done.missing.append(archive)
        else:
            done.copied.append((archive, renamed(archive), lines))
    if there is None:
        return
    for owner, entries in indexes.items():
        if not entries:
            continue
        copies = [
            e.model_copy(
                update={
                    "thread_id": renamed(owner),
                    "archive_thread_id": renamed(e.archive_thread_id),
                }
            )
            for e in entries
        ]
        added: list[str] = []

        def merged(
            existing: list[ArchivedContext],
            copies: list[ArchivedContext] = copies,
            added: list[str] = added,
        ) -> list[ArchivedContext]:
            listed = {e.context_id for e in existing}
            new = [e for e in copies if e.context_id not in listed]
            added[:] = [e.context_id for e in new]  # (a retried update computes it again)
            return [*existing, *new]

        there.update(renamed(owner), merged)
        if added:
            done.indexed[renamed(owner)] = added


def _indexes(
    source_id: str, thread_ids: Sequence[str] | None, here: ContextIndex | None
) -> dict[str, list[ArchivedContext]]:
    """The source's index and its archives' indexes, each thread's entries that name an
    archive of the source; following the indexes, or the listing's archives."""
    if here is None:
        return {}
    found: dict[str, list[ArchivedContext]] = {}
    todo = [source_id, *archive_threads_of(source_id, thread_ids or [])]
    while todo:
        owner = todo.pop(0)
        if owner in found:
            continue
        entries = []
        for entry in here.read(owner):
            if not archive_threads_of(source_id, [entry.archive_thread_id]):
                _log.warning(
                    "%r's archive index names %r, not an archive of %r: not copied",
                    owner,
                    entry.archive_thread_id,
                    source_id,
                )
                continue
            entries.append(entry)
            if thread_ids is None:
                todo.append(entry.archive_thread_id)
        found[owner] = entries
    return found


def _undo(target: LogStorage, there: ContextIndex | None, done: CopiedArchives) -> None:
    """Delete what `_copy` made (its archive threads, its index entries), nothing else."""
    for owner, added in done.indexed.items():
        assert there is not None

        def without(
            items: list[ArchivedContext], added: list[str] = added
        ) -> list[ArchivedContext]:
            return [e for e in items if e.context_id not in added]

        try:
            there.update(owner, without)
        except Exception as exc:  # the error being raised matters more
            _log.warning("could not take the copied entries out of %s: %s", owner, exc)
    for _, archive, _ in reversed(done.copied):
        try:
            with target.locked(archive, exclusive=True):
                target.delete(archive)
        except Exception as exc:
            _log.warning("could not delete the copied archive %r: %s", archive, exc)
