"""The writer of a thread log: `_Batch`, the lines one call appends.

A batch encodes a checkpoint or a task's writes into lines (new messages
first, then the ``ckpt`` / ``writes`` line) through `langgraph_ctx.codec`,
storing each message once: a message the log already holds (by content, or
the very object a read returned) becomes a reference to it. `_Batch.apply`
then tells the index (`langgraph_ctx.saver._index`) what now sits where.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import Checkpoint, DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_ctx.codec.lines import (
    NEWEST_VERSION,
    SNAPSHOT_EVERY,
    checkpoint_line,
    is_list_value,
    like_line,
    list_value,
    message_line,
    snapshot_due,
    writes_line,
    writes_readable,
)
from langgraph_ctx.codec.messages import message_body, message_digest, message_digest_without_id
from langgraph_ctx.codec.values import (
    Unresolved,
    all_messages,
    encode_value,
    holds_unresolved,
    serde_encode,
)
from langgraph_ctx.saver._index import (
    Bodies,
    CheckpointHead,
    _all_unchanged,
    _candidates,
    _fingerprint,
    _Index,
    _unchanged,
)

# Lines whose parsed form `apply` does not keep in the index's cache: a ``writes`` line
# is read again only for a checkpoint's pending writes (an interrupted step), and each
# kept line is a handful of containers the garbage collector walks on every full pass.
_NOT_KEPT = frozenset({"writes"})


class _Batch:
    """Lines one call will append: new messages first, then the line itself."""

    def __init__(self, index: _Index, serde: SerializerProtocol) -> None:
        self.index = index
        self.serde = serde
        # A serializer of the user's own (encryption, ...) gets every value whole.
        self.readable = writes_readable(serde)
        self.lines: list[dict[str, Any]] = []
        self.new_digests: dict[bytes, int] = {}
        self.new_noids: dict[bytes, int] = {}
        self._new_msgs = 0
        # Messages serialized (or re-serialized) by this batch: the index learns them.
        self.seen: list[tuple[BaseMessage, tuple[Any, ...], int]] = []
        self.list_memo: dict[str, list[int]] = {}
        self.list_objs: dict[str | None, tuple[list[BaseMessage], list[tuple[Any, ...]]]] = {}
        # (objects, fingerprints, ordinals) of the message lists this batch stored: a
        # list nested in another value (a `Send`'s state) is compared with them.
        self._lists: list[tuple[list[BaseMessage], list[tuple[Any, ...]], list[int]]] = []
        # (ns, id) of the checkpoint this batch writes, and the lines a warm read of its
        # parent needed that it may no longer need (`release_superseded`).
        self.head: tuple[str, str] | None = None
        self.superseded: set[int] = set()
        # Whether a list in a value begins with a checkpoint line's list (`nested`): the
        # batch's ``ckpt`` / ``writes`` line is then of format 3.
        self.based = False
        # The last line a nested list may base on: the line of the checkpoint this
        # batch's line builds on (its parent, its writes' target), so that the line
        # depends on no later line (`_line_base`).
        self.base_limit: int | None = None

    def ref(self, msg: BaseMessage) -> int:
        """The ordinal of a message, adding its line if the log does not hold it yet."""
        return self._ref(msg)[0]

    def _ref(self, msg: BaseMessage) -> tuple[int, tuple[Any, ...]]:
        """``(ordinal, fingerprint)``: the fingerprint of exactly what was saved."""
        hit = self.index.ident.get(id(msg))
        if hit is not None and hit[0]() is msg and _unchanged(msg, hit[1]):
            return hit[2], hit[1]  # saved before, unchanged since: the index knows it
        # LangGraph's reducer may give the message an id while a background put
        # serializes it: keep the fingerprint of exactly what was serialized.
        fingerprint = _fingerprint(msg)
        bodies = _VERBATIM.get()
        kept = bodies.get(id(msg)) if bodies else None
        while kept is None or kept[0] is not msg:  # (a rewrite's stored body: as it is)
            body = message_body(msg, self.serde)
            if _unchanged(msg, fingerprint):  # `_fingerprint(msg) == fingerprint`, in C
                break
            fingerprint = _fingerprint(msg)
        else:
            body = kept[1]
        digest = message_digest(body)
        self.index.ensure_digests()
        ordinal = self.index.msg_digest.get(digest)
        if ordinal is None:
            ordinal = self.new_digests.get(digest)
        if ordinal is None:
            ordinal = self.index.next_msg + self._new_msgs
            self._new_msgs += 1
            self.new_digests[digest] = ordinal
            noid = message_digest_without_id(body)
            like = None
            if noid is not None:
                like = self.index.msg_noid.get(noid)
                if like is None:
                    like = self.new_noids.get(noid)
                    if like is None:
                        self.new_noids[noid] = ordinal
            if like is not None:  # the same message again, with the id LangGraph gave it
                self.lines.append(like_line(ordinal, like, msg.id))
            else:
                self.lines.append(message_line(ordinal, body))
        self.seen.append((msg, fingerprint, ordinal))
        return ordinal, fingerprint

    def refs(self, messages: list[BaseMessage]) -> list[int]:
        """The ordinals of a message list inside another value (a `Send`'s state, ...).

        Such a list is most often the state's message list (or its first part):
        the messages it shares with a list this batch or the index knows are
        checked in one C-level comparison (`_shared`), not one by one.
        """
        known, checked = self._known_list(messages)
        refs, _, _ = self._shared(messages, known, checked=checked)
        return refs

    def nested(self, messages: list[BaseMessage]) -> dict[str, Any]:
        """A message list inside another value (a `Send`'s state, ...), encoded.

        When it begins with the list a checkpoint line of the log holds (most often the
        state's own messages at the step), it names that line and adds the rest
        (`langgraph_ctx.codec.lines.based_link`): written out, a tool agent's `Send`
        would make every step's lines as long as the conversation.
        """
        refs = self.refs(messages)
        found = self._line_base(messages[0], refs)
        if found is None:
            return {"msgs": refs}
        line, channel, keep = found
        self.based = True
        return {"msgs": refs[keep:], "keep": keep, "base": line, "ch": channel}

    def _line_base(self, first: BaseMessage, refs: list[int]) -> tuple[int, str, int] | None:
        """``(line, channel, keep)``: of the lists the index holds as objects (the latest
        a put wrote or a read built), the one whose ordinals ``refs`` begins with the most
        of (its first message the very object ``first``), if that is `_BASED_FROM` or more."""
        index, limit = self.index, self.base_limit
        best: tuple[int, str, int] | None = None
        for (line, channel), (objs, _) in reversed(list(index.list_objs.items())):
            if len(objs) < _BASED_FROM or objs[0] is not first:
                continue
            if limit is not None and line > limit:
                continue
            keep = _common_start(refs, index.materialize(line, channel))
            if best is None or keep > best[2]:
                best = (line, channel, keep)
                if keep == len(refs):
                    break
        return best if best is not None and best[2] >= _BASED_FROM else None

    def _known_list(
        self, messages: list[BaseMessage]
    ) -> tuple[tuple[list[BaseMessage], list[tuple[Any, ...]], list[int]] | None, bool]:
        """The known list sharing the longest first part with ``messages``, by identity,
        and whether it is one of this batch's, its messages checked a moment ago."""
        first = messages[0]
        best, best_shared = None, 0
        for objs, fps, refs in reversed(self._lists):
            if objs and objs[0] is first:
                shared = _prefix(messages, objs)
                if shared > best_shared:
                    best, best_shared = (objs, fps, refs), shared
        if best_shared == len(messages):
            return best, True
        if best_shared < len(messages):
            index = self.index
            for (line, channel), (objs, fps) in reversed(list(index.list_objs.items())):
                if not objs or objs[0] is not first or len(objs) <= best_shared:
                    continue
                shared = _prefix(messages, objs)
                if shared > best_shared:
                    refs = index.materialize(line, channel)
                    if fps is None or len(fps) < shared:
                        fps = _fps_up_to(index, fps, refs, shared)
                        index.list_objs.put((line, channel), (objs, fps))
                    best, best_shared = (objs, fps, refs), shared
                    if shared == len(messages):
                        break
        return best, False

    def _shared(
        self,
        value: list[BaseMessage],
        known: tuple[list[BaseMessage], list[tuple[Any, ...]] | None, list[int]] | None,
        *,
        checked: bool = False,
        prefix: int | None = None,
    ) -> tuple[list[int], list[tuple[Any, ...]], int]:
        """``(ordinals, fingerprints, keep)`` of a message list; ``keep``: how many
        leading messages are, unchanged, those of ``known`` (objects, their
        fingerprints when saved or read, their ordinals).

        The messages ``value`` shares with ``known`` by identity are taken from it
        unread: a C-level identity comparison, then one C-level comparison of
        every shared message with its fingerprint (`_all_unchanged`) to catch a
        message a node changed in place. An edited message is saved again, as a
        new message line (the old one stays in the log); the others cost nothing new.
        ``checked``: ``known`` is a list of this batch, checked a moment ago;
        ``prefix``: `_prefix` of ``value`` and ``known``'s objects, when the caller has it.
        """
        shared = 0
        fps: list[tuple[Any, ...]] = []
        refs: list[int] = []
        if known is not None:
            objs, known_fps, known_refs = known
            shared = min(_prefix(value, objs) if prefix is None else prefix, len(known_refs))
            # The parent's fingerprint objects, not equal new ones: the lists of
            # successive steps share them (freeing a list of fresh tuples per
            # step cost as much as building it). When the parent's list holds
            # exactly the shared ones, it is taken as it is and grows by this step's
            # (a list of fingerprints is only ever appended to, and copied before an
            # edit): at 2,000 messages each copy was a list the collector walked.
            if known_fps is None or len(known_fps) < shared:  # read from the log:
                fps = _fps_up_to(self.index, known_fps, known_refs, shared)
            elif len(known_fps) == shared:
                fps = known_fps
            else:
                fps = known_fps[:shared]
            refs = known_refs[:shared]
        keep = shared
        if shared and not checked and not _all_unchanged(value, fps):
            fps = fps[:shared]  # its own, for the edits
            for i, m in enumerate(value[:shared]):
                if not _unchanged(m, fps[i]):  # edited in place since saved or read
                    keep = min(keep, i)
                    refs[i], fps[i] = self._ref(m)
        for m in value[shared:]:
            ordinal, fp = self._ref(m)
            refs.append(ordinal)
            fps.append(fp)
        self._lists.append((value, fps, refs))
        return refs, fps, keep

    def value(
        self, value: Any, base: tuple[int, list[int]] | None = None, channel: str | None = None
    ) -> tuple[Any, Any]:
        """``(encoded, refs)``; ``refs`` are the message ordinals of a message list.

        With a ``base`` (the channel's value at the parent, as ``(line, refs)``),
        the messages the list shares with the parent's list object are taken
        from it unread (`_shared`).
        """
        if not self.readable:
            if type(value) is Unresolved and value.tag == "serde":
                return {"serde": value.name}, None  # a rewrite's value: the serializer's payload
            if _VERBATIM.get() is not None and holds_unresolved(value):
                # A rewrite's value read from a line written before the serializer was
                # (a thread begun unencrypted): as it was stored, which it cannot encode.
                return encode_value(value, self.ref, self.serde, self.refs, self.nested), None
            return {"serde": serde_encode(value, self.serde)}, None
        if not (type(value) is list and value and isinstance(value[0], BaseMessage)):
            return encode_value(value, self.ref, self.serde, self.refs, self.nested), None
        known = None
        if base is not None:
            entry = self.index.list_objs.get_hit((base[0], channel))
            if entry is not None:
                known = (entry[0], entry[1], base[1])
        prefix = _prefix(value, known[0]) if known else 0
        if not all_messages(value[prefix:]):
            return encode_value(value, self.ref, self.serde, self.refs, self.nested), None
        refs, fps, keep = self._shared(value, known, prefix=prefix)
        self.list_objs[channel] = (value.copy(), fps)
        return list_value(refs, base, keep), refs

    def apply(self, first: int, lines: Sequence[dict[str, Any]] | None = None) -> int:
        """Index the lines (default: the batch's) that now sit at ``first``, ``first + 1``, ...

        Returns the last line's number.
        """
        index = self.index
        n = first
        parsed = index.parsed
        for obj in self.lines if lines is None else lines:
            index.add(obj, n)
            if obj.get("t") not in _NOT_KEPT:
                parsed.put(n, obj, trim=False)
            n += 1
        parsed.trim()
        last = n - 1
        if self.new_digests:  # digests the batch already computed need no second pass
            index.msg_digest.update(self.new_digests)
            for noid, ordinal in self.new_noids.items():
                index.msg_noid.setdefault(noid, ordinal)
            fresh = set(self.new_digests.values())
            index.undigested = [o for o in index.undigested if o not in fresh]
        for channel, refs in self.list_memo.items():
            index.refs.put((last, channel), refs)
            objs = self.list_objs.get(channel)
            if objs is not None:
                index.list_objs.put((last, channel), objs)
        for msg, fingerprint, ordinal in self.seen:
            index.remember(msg, ordinal, fingerprint)
        return last


def checkpoint_batch(
    index: _Index,
    serde: SerializerProtocol,
    ns: str,
    parent_id: str | None,
    checkpoint: Checkpoint,
    metadata: Mapping[str, Any],
    new_versions: Mapping[str, Any],
    delta_base: Mapping[str, DeltaChannelHistory] | None = None,
) -> _Batch:
    """The lines of one checkpoint: new messages, then the ``ckpt`` line.

    Only the channels in ``new_versions`` are stored (every channel with a value when
    ``parent_id`` names a checkpoint this log no longer holds); a message list as a
    change from the channel's value at the parent when the parent is in this
    log. ``delta_base``: `DeltaChannel` histories to fold into the line.
    """
    batch = _Batch(index, serde)
    if snapshot_due(index.lines, index.snap_line, SNAPSHOT_EVERY):
        snap = index.snapshot()  # first: every line it names is already written
        if snap is not None:
            batch.lines.append(snap)
    parent = index.named(ns, parent_id) if parent_id else None
    batch.base_limit = parent.line if parent is not None else None
    values = checkpoint["channel_values"]
    stored = new_versions
    if parent_id and parent is None:
        # The parent is not in this log: another process reverted, deleted or pruned
        # the thread while this run went on. The channels this step did not change
        # have no line left to be read from, so this line holds them too (as
        # `SqliteSaver` keeps every value of a checkpoint with it).
        versions = checkpoint.get("channel_versions") or {}
        stored = {**{ch: versions[ch] for ch in values if ch in versions}, **new_versions}
    encoded: dict[str, list[Any]] = {}
    for channel, version in stored.items():
        if channel not in values:
            encoded[channel] = [version]
            continue
        value = values[channel]
        base = (
            _list_base(index, parent, channel)
            if type(value) is list and value and isinstance(value[0], BaseMessage)
            else None
        )
        enc, refs = batch.value(value, base, channel)
        encoded[channel] = [version, enc]
        if refs is not None:
            batch.list_memo[channel] = refs
    folded = None
    if delta_base:
        folded = {
            ch: {
                **({"seed": batch.value(h["seed"])[0]} if "seed" in h else {}),
                "writes": [[task, batch.value(v)[0]] for task, _, v in h["writes"]],
            }
            for ch, h in delta_base.items()
        }
    ckpt = checkpoint_line(
        ns, checkpoint, parent, parent_id, encoded, metadata, new_versions, serde, folded
    )
    if batch.based:
        ckpt["v"] = NEWEST_VERSION
    batch.lines.append(ckpt)
    if parent is not None:
        batch.head = (ns, checkpoint["id"])
        batch.superseded = {parent.line} | {
            line
            for channel in new_versions
            if channel in parent.versions
            and (line := _writer_line(index, ns, channel, parent.versions[channel]))
        }
    return batch


def _writer_line(index: _Index, ns: str, channel: str, version: Any) -> int | None:
    """The line holding ``channel`` at ``version`` when the index knows only one
    (`_Index.resolve` without its walk of the ancestry, or the full scan a snapshot's
    index would need: a cache is let go of, or kept, on what is known)."""
    try:
        entry = index.blobs.get((ns, channel, version))
    except TypeError:  # an unhashable version: `resolve` names it when it matters
        return None
    cands = _candidates(entry)
    return cands[0][1] if len(cands) == 1 else None


def release_superseded(index: _Index, batch: _Batch) -> None:
    """Drop from the index's cache of parsed lines (after `_Batch.apply`) the lines a
    warm read of the new checkpoint no longer needs: its parent's, and those holding the
    parent's values of the channels it wrote anew, unless they still hold one of its own.

    A warm turn reads the head and the lines of its values; the lines of the
    checkpoints before it stay in the log (a history read parses them again), not in
    memory, where each is a handful of containers the garbage collector walks on every
    full pass (at 50 threads this halved the collector's time per turn).
    """
    if batch.head is None or not batch.superseded:
        return
    head = index.named(*batch.head)
    if head is None:
        return
    keep = {head.line}
    stored = head.stored  # on the head's own line, kept already
    for channel, version in head.versions.items():
        if channel in stored:
            continue
        line = _writer_line(index, head.ns, channel, version)
        if line is not None:  # else a line read again if needed: a cache, not the log
            keep.add(line)
    parsed = index.parsed
    dropped = batch.superseded - keep
    for line in dropped:
        parsed.pop(line, None)
    # So are the ordinals of the parent's message lists (`_Index.materialize`'s memo, of
    # lines the new checkpoint's lists replace): the next put builds on the new ones,
    # and a history read walks the links (the memo is a cache, as above).
    if batch.list_memo:
        refs = index.refs
        for channel in batch.list_memo:
            for line in dropped:
                refs.pop((line, channel), None)


def _list_base(
    index: _Index, parent: CheckpointHead | None, channel: str
) -> tuple[int, list[int]] | None:
    """The channel's message list at ``parent``, as ``(line, ordinals)``."""
    if parent is None or channel not in parent.versions:
        return None
    writer = index.resolve(parent.ns, channel, parent.versions[channel], parent.id)
    if writer is None:
        return None
    present, enc = index.value_enc(writer[1], channel)
    if not present or not is_list_value(enc):
        return None
    return writer[1], index.materialize(writer[1], channel)


def writes_batch(
    index: _Index,
    serde: SerializerProtocol,
    ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    items: Iterable[tuple[int, str, Any]],
) -> _Batch | None:
    """The lines of one task's writes (``None`` when there are none)."""
    batch = _Batch(index, serde)
    target = index.named(ns, checkpoint_id)
    batch.base_limit = target.line if target is not None else None
    encoded = [[idx, channel, batch.value(value)[0]] for idx, channel, value in items]
    if not encoded:
        return None
    writes = writes_line(ns, target, checkpoint_id, task_id, task_path, encoded)
    if batch.based:
        writes["v"] = NEWEST_VERSION
    batch.lines.append(writes)
    return batch


_VERBATIM: contextvars.ContextVar[Bodies | None] = contextvars.ContextVar(
    "verbatim", default=None
)


@contextlib.contextmanager
def keeping_bodies(bodies: Bodies) -> Iterator[None]:
    """Inside, a batch stores a message read from a serialized body with that body as it
    is (a rewrite, a revert's carried writes): the message object may lack what this
    process could not make, an app's enum in its fields."""
    token = _VERBATIM.set(bodies)
    try:
        yield
    finally:
        _VERBATIM.reset(token)


_BASED_FROM = 8
"""The fewest leading messages a nested list takes from a checkpoint line's list
(`_Batch.nested`): below, its ordinals cost fewer bytes than naming the line."""


def _common_start(refs: list[int], known: list[int]) -> int:
    """How many leading ordinals ``refs`` and ``known`` share (one C-level comparison
    when one begins the other, as a state's list begins the next step's)."""
    limit = min(len(refs), len(known))
    if refs[:limit] == known[:limit]:
        return limit
    shared = 0
    while refs[shared] == known[shared]:
        shared += 1
    return shared


def _prefix(value: list[Any], objs: list[Any]) -> int:
    """How many leading items of ``value`` are those of ``objs``, the very objects
    (compared in C by identity: no ``__eq__`` called, no slice of either list taken)."""
    limit = min(len(value), len(objs))
    if all(map(operator.is_, value, objs)):  # stops at the shorter list; no slices
        return limit
    shared = 0
    while shared < limit and value[shared] is objs[shared]:
        shared += 1
    return shared


def _fps_up_to(
    index: _Index, fps: list[tuple[Any, ...]] | None, refs: list[int], shared: int
) -> list[tuple[Any, ...]]:
    """The fingerprints of the first ``shared`` messages of a list: ``fps`` (those of
    its first part, kept from a put, see `_Index.values`) and, for the rest, the
    messages as read."""
    if fps is None:
        return _template_fps(index, refs[:shared])
    return fps + _template_fps(index, refs[len(fps) : shared])


def _template_fps(index: _Index, refs: list[int]) -> list[tuple[Any, ...]]:
    """The fingerprints of messages as read (`_Index.template_fingerprint`), in C when
    every one is decoded already."""
    entries: list[Any] = list(map(index.templates.get, refs))
    if None in entries:
        return [index.template_fingerprint(o) for o in refs]
    fps = [e[1] for e in entries]
    if None in fps:  # decoded by a cold read, fingerprinted when first needed
        return [index.template_fingerprint(o) for o in refs]
    return fps
