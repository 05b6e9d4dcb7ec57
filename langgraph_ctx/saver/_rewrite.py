"""Rewrites of a thread log: `prune`'s and `delete_for_runs`' new log (`rebuilt_lines`),
the ancestors a kept head's `DeltaChannel`s need (`delta_ancestors`), and the writes a
`revert` or `fork` puts again (`writes_after`).

A rewrite may run where the application's classes are not loaded (the CLI, a cron job):
what that process cannot make is kept as it is stored (`Unresolved` values, the stored
bodies of serialized messages: `keeping_bodies`), never written back as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_ctx.codec.classes import quiet_plain_data
from langgraph_ctx.codec.lines import MetadataAsStored, thread_line
from langgraph_ctx.saver._batch import Bodies, checkpoint_batch, keeping_bodies, writes_batch
from langgraph_ctx.saver._index import CheckpointHead, _Index


def rebuilt_lines(
    index: _Index, thread_id: str, keep: Sequence[CheckpointHead]
) -> list[dict[str, Any]]:
    """The lines of a log holding only ``keep`` (and their writes), for `prune` & co.

    Values stay incremental: a kept checkpoint stores the channels it
    stored before, plus those whose writer is gone. A kept checkpoint whose
    parent is gone gets its `DeltaChannel` history folded in, and no parent.
    """
    # The app's classes may not be loaded here (the CLI): what cannot be made stays as
    # stored. (A serializer of the user's own decodes and encodes every value whole.)
    index.keep_unresolved, index.verbatim = True, {}
    try:
        with keeping_bodies(index.verbatim):
            return _rebuilt_lines(index, thread_id, keep)
    finally:
        index.keep_unresolved, index.verbatim = False, {}


def _rebuilt_lines(
    index: _Index, thread_id: str, keep: Sequence[CheckpointHead]
) -> list[dict[str, Any]]:
    keep = sorted(keep, key=lambda e: e.line)
    kept = {(e.ns, e.id) for e in keep}
    new = _Index(where=index.where, reader=None, serde=index.serde)
    new.parsed.limit = None
    out: list[dict[str, Any]] = [index.header or thread_line(thread_id)]
    new.add(out[0], 1)
    new.parsed.put(1, out[0])
    for entry in keep:
        metadata = _metadata_as_stored(index, entry)
        new_versions: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for channel, version in entry.versions.items():
            writer = index.resolve(entry.ns, channel, version, entry.id)
            if writer is None:
                continue
            if writer[1] != entry.line and (entry.ns, writer[0]) in kept:
                continue
            new_versions[channel] = version
            present, enc = index.value_enc(writer[1], channel)
            if present:
                values[channel] = index.decode(enc, writer[1], channel)
        checkpoint = index.checkpoint(entry, values)
        lost_parent = entry.parent is not None and (entry.ns, entry.parent) not in kept
        folded = None
        counters = delta_counters(index, entry)
        if lost_parent and counters:
            folded = index.delta_history(entry, sorted(counters))
        batch = checkpoint_batch(
            new,
            index.serde,
            entry.ns,
            # A parent the rewrite drops is not named (as `PostgresSaver.prune` sets it
            # to NULL): its `parent_config` would lead to a checkpoint the thread lacks.
            None if lost_parent else entry.parent,
            checkpoint,  # type: ignore[arg-type]
            metadata,
            new_versions,
            folded,
        )
        batch.apply(len(out) + 1)
        out.extend(batch.lines)
        for task_id, task_path, items in _writes_by_task(index, entry):
            wbatch = writes_batch(new, index.serde, entry.ns, entry.id, task_id, task_path, items)
            if wbatch is not None:
                wbatch.apply(len(out) + 1)
                out.extend(wbatch.lines)
    return out


def _metadata_as_stored(index: _Index, entry: CheckpointHead) -> Mapping[str, Any]:
    """A kept checkpoint's metadata: serialized metadata as it is stored (it may hold an
    application's class this process cannot make), readable metadata as read."""
    if entry.meta is None:
        stored = index.line(entry.line).get("meta_serde")
        if stored is not None:
            return MetadataAsStored(stored)
    return index.metadata(entry)


def delta_counters(index: _Index, entry: CheckpointHead) -> frozenset[str]:
    """The `DeltaChannel`s that need their history at a checkpoint: from its metadata,
    which the index reads when it is plain; serialized metadata (an `EncryptedSerializer`'s)
    is decoded for it (a rewrite then kept no ancestors and folded no history: the
    channels read as empty)."""
    if entry.counters or entry.meta is not None:
        return entry.counters
    with quiet_plain_data():  # read for its counters only; written again as stored
        counters = index.metadata(entry).get("counters_since_delta_snapshot")
    return frozenset(counters) if isinstance(counters, dict) else frozenset()


def delta_ancestors(index: _Index, head: CheckpointHead) -> list[CheckpointHead]:
    """The ancestors ``head``'s `DeltaChannel`s are rebuilt from: its parent chain, up to
    and including, for each channel, the nearest checkpoint whose values hold it.

    What `prune(strategy="keep_latest")` keeps besides the head, as LangGraph's `prune`
    contract asks: its default `get_delta_channel_history` (what the LangGraph server
    calls through its adapter, which does not forward ours) walks that chain, and a
    head without it reads such a channel as empty. The history folded into a head's
    own line (``delta_base``) serves only this saver's own walk.
    """
    out: list[CheckpointHead] = []
    remaining = set(delta_counters(index, head))
    cur = head
    while remaining and cur.parent is not None:
        parent = index.ckpts.get((cur.ns, cur.parent))
        if parent is None:
            break
        out.append(parent)
        for channel in sorted(remaining):
            version = parent.versions.get(channel)
            writer = index.resolve(parent.ns, channel, version, parent.id) if version else None
            if writer is not None and index.value_enc(writer[1], channel)[0]:
                remaining.discard(channel)  # `get_tuple` gives its value here: the seed
        cur = parent
    return out


def writes_after(index: _Index, line: int) -> tuple[list[Any], Bodies]:
    """The writes of the checkpoints before line ``line`` that the log holds after it,
    decoded and grouped as they were put: ``(ns, checkpoint id, task, path, items)``;
    and the stored bodies of the serialized messages among them (`keeping_bodies`).

    LangGraph saves a step's writes in the background, so a checkpoint's writes may land
    after its child's line: a `revert` or `fork` at that child keeps the checkpoint and
    puts these again (`LogSaver.revert`). What this process cannot make is kept as stored
    (`Unresolved`, the message bodies), as in `rebuilt_lines`.
    """
    out: list[Any] = []
    bodies: Bodies = {}
    ckpts = index.ckpts
    for key, stored in index.writes.items():
        entry = ckpts.get(key)
        if entry is None or entry.line >= line or all(w[2] <= line for w in stored.values()):
            continue  # most checkpoints: none of their writes past the cut, nothing to sort
        index.keep_unresolved, index.verbatim = True, bodies
        try:
            for task_id, path, items in _writes_by_task(index, entry, after=line):
                out.append((entry.ns, entry.id, task_id, path, items))
        finally:
            index.keep_unresolved, index.verbatim = False, {}
    return out, bodies


def _writes_by_task(
    index: _Index, entry: CheckpointHead, *, after: int = 0
) -> list[tuple[str, str, list[tuple[int, str, Any]]]]:
    """A checkpoint's writes (those on lines after ``after``), decoded, grouped as they
    were put: ``(task, path, items)``."""
    stored = index.writes.get((entry.ns, entry.id), {})
    groups: dict[tuple[int, str], tuple[str, list[tuple[int, str, Any]]]] = {}
    for (task_id, idx), (path, channel, line, pos) in sorted(
        stored.items(), key=lambda kv: (kv[1][2], kv[1][3])
    ):
        if line <= after:
            continue
        enc = index.line(line)["w"][pos][2]
        value = index.decode(enc, line, channel)
        groups.setdefault((line, task_id), (path, []))[1].append((idx, channel, value))
    return [(task, path, items) for (_, task), (path, items) in groups.items()]
