"""The reader of a thread log: `_Index`, what the saver knows of one thread's lines.

Where each message, checkpoint and write is, which line holds each channel
value; built by reading the log once, then kept up to date with what is
appended. Lines are parsed through `langgraph_ctx.codec.lines` and values
decoded through `langgraph_ctx.codec.values`: this module only keeps the
results and decides what to read. The writer is `langgraph_ctx.saver._batch`.
It is one module (about 1,400 lines) because indexing, snapshots (where a cold open
starts), queries and decoding share the index's structures and caches.

Cold opens: a long log carries ``snap`` lines (`langgraph_ctx.codec.lines.snapshot_line`).
A snapshot line *in the log* rather than a sidecar index file: it is written in the same
append as the checkpoint it precedes (no extra write, lock or file; no cache to go stale
or be trusted over the log), it is checksummed like every line, ``verify`` checks it,
forks, copies and reverts carry it along with the lines, and Redis holds it like any
line. A reader starts at the last snapshot (`_Index._from_snapshot`) after checking
the lines it names against the raw log (a message line when it is first read: a cold
open reads only the head's messages, in one batch, `_Index.decode_many`); one that does
not match is passed over with a warning, and a query that needs a line before it indexes
the whole log (`complete`).

What a cold ``get_state`` costs is mostly the head's messages: every one of them is
on its own line, spread over the whole file, so the scan reads the file once and the
head's lines are taken from that read (`_Index.scan`), checked and parsed in bulk
(`langgraph_ctx.codec.lines.loads_message_lines`) and built in one loop without
validation where that returns the same object
(`langgraph_ctx.codec.messages.messages_unvalidated`); a message built so keeps the
body it was built from, and its fingerprint is made from that body when a later read
or put first needs one (`_built_many`). The lines after the snapshot are checked
and parsed in bulk too (`_bulk_checked`), and of the snapshot chain only the last
snapshot's heads are parsed.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import functools
import gc
import itertools
import json
import operator
import sys
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_ctx.codec.classes import quiet_plain_data
from langgraph_ctx.codec.lines import (
    NEWEST_VERSION,
    SNAP_PREFIX,
    SNAPSHOT_EVERY,
    CheckpointHead,
    Snapshot,
    SnapshotHead,
    based_link,
    based_refs_checked,
    check_line,
    check_position,
    checkpoint_from_line,
    checkpoint_metadata,
    checkpoint_ts,
    checksums_match,
    has_legacy_versions,
    is_list_value,
    line_kind_at,
    line_values,
    list_link,
    loads_line,
    loads_lines,
    loads_message_lines,
    message_like,
    message_ordinal,
    own_thread_id,
    parse_checkpoint_line,
    parse_snapshot_line,
    parse_writes_line,
    peek_message_ordinal,
    peek_message_ordinals,
    snapshot_line,
)
from langgraph_ctx.codec.messages import (
    BODY_KEYS,
    EMPTY_STANDINS,
    OWN_ID,
    body_fingerprint,
    json_copy,
    like_body,
    message_digest,
    message_digest_without_id,
    message_from_body,
    message_from_json_owned,
    messages_unvalidated,
)
from langgraph_ctx.codec.values import decode_value, message_refs, refs_of
from langgraph_ctx.errors import CodecError, CorruptLineWarning, CorruptLogError
from langgraph_ctx.storage.base import PartialLines

_FIRST = operator.itemgetter(0)


_dict_get = dict.get  # what `OrderedDict.get` is


class _LRU(OrderedDict[Any, Any]):
    """Least recently used first; bounded by ``limit`` entries, or with ``weigh`` by
    the sum of ``weigh(value)`` (a message list by its length: a thread's lists grow
    with it, so a bound by count would hold a quadratic number of ordinals)."""

    def __init__(self, limit: int | None, weigh: Callable[[Any], int] | None = None) -> None:
        super().__init__()
        self.limit = limit
        self.weigh = weigh
        self.weight = 0

    def get_hit(self, key: Any) -> Any:
        value = _dict_get(self, key)  # `OrderedDict.get`, without a `super()` a call
        if value is not None:
            try:
                self.move_to_end(key)
            except KeyError:  # evicted meanwhile by another reader (readers share the lock)
                return value
        return value

    def put(self, key: Any, value: Any, *, trim: bool = True) -> None:
        """Store ``value`` as the most recent; ``trim=False`` leaves the bound to the next
        put that trims (a batch read by `_Index.prefetch`, used right after, stays whole)."""
        weigh = self.weigh
        if weigh is not None:
            old = _dict_get(self, key)
            if old is not None:
                self.weight -= weigh(old)
            self.weight += weigh(value)
        self[key] = value
        self.move_to_end(key)
        if trim:
            limit = self.limit
            if limit is not None and (weigh is not None or len(self) > limit):
                self.trim()  # (a call only when there may be something to let go of)

    def put_many(self, items: list[tuple[Any, Any]]) -> None:
        """`put` each ``(key, value)`` in order (one trim at the end)."""
        if self.weigh is not None:
            for key, value in items:
                self.put(key, value, trim=False)
        else:
            if self and not self.keys().isdisjoint(map(_FIRST, items)):
                for key, _ in items:
                    if key in self:
                        del self[key]  # a new key goes last, as `put` moves it
            self.update(items)
        self.trim()

    def trim(self) -> None:
        limit = self.limit
        if limit is None:
            return
        if self.weigh is None:
            while len(self) > limit:
                self.popitem(last=False)
            return
        while self.weight > limit and len(self) > 1:
            _, old = self.popitem(last=False)
            self.weight -= self.weigh(old)

    def pop(self, key: Any, default: Any = None) -> Any:
        value = super().pop(key, default)
        if value is not None and self.weigh is not None:
            self.weight -= self.weigh(value)
        return value


_gc_guard = threading.Lock()
_gc_pauses = [0, False]  # pauses in progress; whether the collector was on before the first


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (re-entrant, any thread).

    A cold open builds thousands of objects that stay (messages, parsed lines, heads)
    and hold no cycles; each collection the allocations trigger walks them again, and a
    full one walks the application's whole heap: in a fresh process that cost more than
    the decoding itself. The collector is back on (if it was) when the last block ends,
    and what was built meanwhile goes straight to the oldest generation (`_promoted`).
    """
    with _gc_guard:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _gc_guard:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                _promoted()
                gc.enable()


def _promoted() -> None:
    """Move every object the collector tracks to its oldest generation, unwalked.

    What a paused block built is long-lived (an index, its messages); left in the
    youngest generation, the next collection would walk all of it at once, and the
    one after that again (about 0.5 ms of a 400-turn chat's cold ``get_state`` in a
    fresh process, tests/test_cold_gc.py). The oldest generation is where the collector
    would move it,
    and it is walked, as ever, by full collections. Done only when the application
    froze nothing itself (``gc.freeze``: a pre-fork server's shared pages stay frozen).
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()  # every generation to the permanent one (constant time)
        gc.unfreeze()  # and all of it to the oldest generation


_Write = tuple[str, str, int, int]
"""Where one pending write sits: ``(path, channel, line, pos)`` (``pos``: its index in the
line's "w" list). A plain tuple of strings and numbers, which the garbage collector stops
tracking at its first pass: a checkpoint's writes are kept for the thread's life, and an
object of a class of ours (the dataclass this was) stays tracked, for every full
collection to walk (three a turn in a chat)."""


_CONTAINERS = (dict, list)
_JSON_SCALARS = frozenset({str, int, float, bool})  # a parsed line's values that hold nothing


def _fingerprint(m: BaseMessage) -> tuple[Any, ...]:
    """What a message holds, to tell later whether it was changed in place.

    Every field by reference (a reassigned ``content`` or ``id`` is another
    object), its dicts and lists (``response_metadata``, ``additional_kwargs``,
    ``tool_calls``, list ``content``), which a node may edit in place, as copies
    of their own (`json_copy`, leaves shared). The saver compares a step's whole
    message list with these (`_unchanged`, `_all_unchanged`: one C-level
    comparison, the copies equal to the message's containers exactly while
    nobody changed them), so an edited message is saved again (as a new message
    line) and a fresh process reads the edit.
    """
    return tuple(
        [
            (json_copy(v) if v else _EMPTY[type(v)]) if type(v) in _CONTAINERS else v
            for v in m.__dict__.values()
        ]
    )


# What a fingerprint holds for an empty dict or list (see there).
_EMPTY = EMPTY_STANDINS
_FIELDS = operator.attrgetter("__dict__")
_TEMPLATE_MSG = operator.itemgetter(0)  # of a `_Index.templates` entry: (message, fingerprint)
_TEMPLATE_FP = operator.itemgetter(1)
_BEFORE = (-1).__add__  # a line number's index in a list of lines
# ``x is None`` in C: ``None in messages`` calls each message's (pydantic) ``__eq__``.
_IS_NONE = functools.partial(operator.is_, None)


def _unchanged(m: BaseMessage, fp: tuple[Any, ...]) -> bool:
    """``_fingerprint(m) == fp``, compared in C: the message's fields as they are
    equal ``fp`` exactly while its containers equal the copies ``fp`` holds."""
    return tuple(m.__dict__.values()) == fp


def _all_unchanged(messages: list[BaseMessage], fps: list[tuple[Any, ...]]) -> bool:
    """`_unchanged` for each of the first ``len(fps)`` messages and its fingerprint, in
    one C-level pass: each message's values made a tuple, compared and freed at once (a
    list of them all would wake the garbage collector, which then walks them and the
    messages again), and no slice of ``messages`` taken."""
    return len(messages) >= len(fps) and all(
        map(operator.eq, map(tuple, map(dict.values, map(_FIELDS, messages))), fps)
    )


def _built_many(
    bodies: list[Any], ids: list[Any], first_like: int
) -> list[tuple[Any, ...] | None]:
    """The `_Index.templates` entries of message bodies a batch decodes (``None``: the
    body does not build; `_Index.message` reads it again and names why). ``ids``: of
    each body, `OWN_ID` or the id of the ``like`` line that repeats it (`like_body`):
    those from ``first_like`` on are likes.

    A body built without validation (`messages_unvalidated`, most) gives
    ``(message, None, body)``, or ``(message, None, body, id)`` for a ``like``: its
    fingerprint is made from the body when first needed (`_Index._fingerprinted`; a cold
    ``get_state`` never needs it), so the body is kept, the caller's own. A validated
    one gives ``(message, fingerprint)``.
    """
    built = messages_unvalidated(bodies, ids)
    if not any(map(_IS_NONE, built)):  # every one built unvalidated (a cold open's, mostly)
        k, nones = first_like, itertools.repeat(None)
        out: list[tuple[Any, ...] | None] = list(zip(built[:k], nones, bodies[:k], strict=False))
        out += zip(built[k:], nones, bodies[k:], ids[k:], strict=False)
        return out
    out = []
    for body, msg, new_id in zip(bodies, built, ids, strict=True):
        if msg is not None:
            out.append((msg, None, body) if new_id is OWN_ID else (msg, None, body, new_id))
            continue
        if new_id is not OWN_ID:
            body = like_body(body, new_id)
        try:
            msg = message_from_json_owned(body)
        except CodecError:
            out.append(None)
            continue
        out.append((msg, _fingerprint(msg)))
    return out


def _forgetter(ident: dict[int, Any]) -> Callable[[Any], None]:
    """The callback that drops an `_Index.ident` entry when its message is freed (unless
    the key was taken meanwhile by another object at the same address)."""

    def forget(ref: Any) -> None:
        key = ref.key
        entry = ident.get(key)
        if entry is not None and entry[0] is ref:
            ident.pop(key, None)

    return forget


_BULK_LINES = 256
"""Lines `_bulk_checked` checks and parses at a time (a long scan holds no more parsed)."""


def _bulk_checked(
    lines: Sequence[bytes], order: Iterable[int], first_line: int
) -> Iterator[tuple[int, Any]]:
    """``(offset, pre)`` for each offset of ``order``, as `_Index._feed_line` takes it:
    checksums and parses in bulk (`checksums_match`, `loads_lines`), a few hundred lines
    at a time. A line that does not pass, or whose chunk of message lines does not, gets
    ``None``: `_Index._feed_line` reads it alone and names what is wrong with it."""
    offsets = list(order)
    if len(offsets) < 16:
        yield from zip(offsets, itertools.repeat(None))
        return
    for i in range(0, len(offsets), _BULK_LINES):
        chunk = offsets[i : i + _BULK_LINES]
        raws = list(map(lines.__getitem__, chunk))
        ordinals = peek_message_ordinals(raws)
        if first_line + chunk[0] == 1:  # the header (offsets ascend): parsed, whatever it says
            ordinals[0] = None
        is_msg = list(map(operator.is_not, ordinals, itertools.repeat(None)))
        msgs_ok = checksums_match(list(itertools.compress(raws, is_msg)))
        parsed = iter(loads_lines(list(itertools.compress(raws, map(operator.not_, is_msg)))))
        for offset, ordinal in zip(chunk, ordinals, strict=True):
            if ordinal is None:
                yield offset, next(parsed)
            else:
                yield offset, ordinal if msgs_ok else None


def _fold_chain(chain: Sequence[Snapshot]) -> list[tuple[int, str, list[int]]]:
    """The message lists of the newest snapshot of ``chain`` (newest first, each one's
    ``prev`` the next), each ``(line, channel, ordinals)``, as folding every snapshot
    onto the one before it (`_Index._fold_snapshot`) gives them, with its checks.

    Every list of every snapshot is checked against the lengths of the lists before it,
    but only the newest snapshot's lists are built, each once from the parts the chain
    holds of it: a chain of ``k`` snapshots costs its own size plus the latest lists',
    where folding copied each snapshot's lists (``k`` times a message list).
    """
    sizes: list[int] | None = None
    for snap in reversed(chain):
        known = sizes
        sizes = []
        for _, _, base, keep, refs in snap.lists:
            if base >= 0:
                if known is None or base >= len(known):
                    raise CodecError(f"snapshot: list {base} of the previous snapshot is unknown")
                if keep > known[base]:
                    raise CodecError("snapshot: 'keep' is longer than the base list")
                sizes.append(keep + len(refs))
            else:
                sizes.append(len(refs))
    lists: list[tuple[int, str, list[int]]] = []
    for i, (line_no, channel, *_) in enumerate(chain[0].lists):
        assert sizes is not None
        want, level, at = sizes[i], 0, i
        parts: list[list[int]] = []  # the list's tails, the newest snapshot's first
        while want:
            _, _, base, keep, refs = chain[level].lists[at]
            kept = keep if base >= 0 else 0
            if want > kept:
                parts.append(refs[: want - kept])
                want = kept
            level, at = level + 1, base
        ordinals: list[int] = []
        for part in reversed(parts):
            ordinals += part
        lists.append((line_no, channel, ordinals))
    return lists


_DECODE_BATCH = 128
"""Messages `_Index.decode_many` parses and builds at a time (see there)."""

PARSED_LINES = 256
"""Parsed lines an index keeps between calls (the head's lines and what was appended last;
a long history or a cold open reads more, in batches, and lets them go)."""

REF_ORDINALS = 1 << 15
"""Message ordinals the memo of materialized lists holds in all (about 256 KB): the latest
lists for the next step, and the memo points a walk of the history leaves behind it."""


# What `_Index.complete` takes over from a full scan (the rest are caches by line/ordinal).
_STRUCTURE = (
    "header", "next_msg", "msg_lines", "_ckpts", "_ckpt_at", "_by_ns", "blobs", "_writes",
    "links", "snap_line", "snap_next", "snap_lists", "skipped_msgs",
)


class _LinesByNumber(Sequence[bytes]):
    """Lines read by number (``{line: raw}``) where a sequence of a log's lines is
    expected (``lines[n - 1]``): `_Index._check_head` on the lines a snapshot names."""

    def __init__(self, raws: dict[int, bytes]) -> None:
        self.raws = raws

    def __getitem__(self, i: Any) -> Any:
        return self.raws[i + 1]

    def __len__(self) -> int:
        return max(self.raws, default=0)


def _readable(raw: bytes, line_no: int) -> None:
    """`loads_line` of a line a snapshot names, its error naming that line."""
    try:
        loads_line(raw)
    except CodecError as exc:
        raise CodecError(f"snapshot: line {line_no} it names cannot be read ({exc})") from None


def _candidates(entry: Any) -> tuple[tuple[str, int], ...]:
    """The ``(checkpoint id, line)`` pairs of an `_Index.blobs` entry (``None``: none)."""
    if entry is None:
        return ()
    return (entry,) if type(entry[0]) is str else entry


def _blobs_entry(pairs: tuple[tuple[str, int], ...]) -> Any:
    """The `_Index.blobs` entry of ``pairs`` (the inverse of `_candidates`): ``None`` for
    none, a pair alone, several in a tuple."""
    if not pairs:
        return None
    return pairs[0] if len(pairs) == 1 else pairs


def _with_candidate(entry: Any, pair: tuple[str, int]) -> Any:
    """An `_Index.blobs` entry with one more ``(checkpoint id, line)`` pair."""
    return _blobs_entry((*_candidates(entry), pair))


Bodies = dict[int, tuple[Any, dict[str, Any]]]
"""Stored bodies of serialized messages, by the id of the message read from them
(`_Index.verbatim`, `langgraph_ctx.saver._batch.keeping_bodies`)."""


@dataclass
class _Index:
    """Everything known about one thread's log, by line number.

    ``reader`` reads lines by number (``None``: every line is in ``parsed``);
    ``serde`` decodes what is not plain JSON.
    """

    where: str
    reader: Callable[[list[int]], dict[int, bytes]] | None
    serde: SerializerProtocol
    lines: int = 0
    header: dict[str, Any] | None = None
    next_msg: int = 0
    msg_lines: dict[int, int] = field(default_factory=dict)
    # Content addresses for de-duplication, computed lazily: only writers need them.
    msg_digest: dict[bytes, int] = field(default_factory=dict)
    msg_noid: dict[bytes, int] = field(default_factory=dict)
    undigested: list[int] = field(default_factory=list)
    # The checkpoints, by (ns, id) and by line; read through the `ckpts` / `ckpt_at`
    # properties, which first index what a snapshot left out (`complete`).
    _ckpts: dict[tuple[str, str], CheckpointHead] = field(default_factory=dict)
    _ckpt_at: dict[int, CheckpointHead] = field(default_factory=dict)
    # (line, channel) -> (base line or None, keep or None: append, ordinals) of each
    # message-list value: `materialize` walks these instead of re-reading lines.
    links: dict[tuple[int, str], tuple[int | None, int | None, Sequence[int]]] = field(
        default_factory=dict
    )
    _by_ns: dict[str, list[str]] = field(default_factory=dict)
    # (ns, channel, version) -> the (checkpoint id, line) that stored it, most often one:
    # then that pair alone, several in a tuple (`_candidates`; a tuple around each pair
    # cost a 2,000-turn chat 0.7 MB). Tuples, not lists, where a put adds them: a tuple
    # of strings and numbers is one the garbage collector stops tracking, so the index a
    # thread keeps grows the collector's work (and the count that starts a full
    # collection) less per step.
    blobs: dict[tuple[str, str, Any], Any] = field(default_factory=dict)
    _writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    # Opened from a snapshot (`_from_snapshot`): the lines before it are not indexed
    # until something needs them (`complete`).
    partial: bool = False
    # The last snapshot line: its line, the next ordinal it knew, its message lists
    # (line, channel, ordinals): what the next snapshot is written against.
    snap_line: int | None = None
    snap_next: int = 0
    snap_lists: list[tuple[int, str, list[int]]] = field(default_factory=list)
    # A snapshot a cold open passed over (`_from_snapshot`): the scan that follows does not
    # take it as the base of the next one, which is then written against an earlier one.
    passed_over: int | None = None
    # The latest checkpoint id of each namespace in the snapshot a partial index
    # was opened from: older ids may be in the lines it left out.
    snap_heads: dict[str, str] = field(default_factory=dict)
    error: CorruptLogError | None = None
    # The saver's on_corrupt="skip": a bad line a read or write does not need is left out.
    skip_corrupt: bool = False
    # Message lines so left out, by the ordinal their first bytes name: a read that needs
    # one names that line and why, not the line that refers to it (review 41).
    skipped_msgs: dict[int, CorruptLogError] = field(default_factory=dict)
    # Parsed lines: a message line leaves when its message is decoded (`message`); what
    # one call reads (`prefetch`) stays for the call, trimmed by the next (`feed`).
    parsed: _LRU = field(default_factory=lambda: _LRU(PARSED_LINES))
    # (line, channel) -> the ordinals of a message list (`materialize`), bounded by
    # ordinals held in all (``REF_ORDINALS``), not lists.
    refs: _LRU = field(default_factory=lambda: _LRU(REF_ORDINALS, len))
    # ordinal -> (the message object every read returns, its fingerprint as decoded).
    templates: _LRU = field(default_factory=lambda: _LRU(16384))
    # (line, channel) -> (the message objects of that list value (a copy of the list),
    # their fingerprints when saved, or None when read: then the templates' apply).
    # The next step's list shares them: compared by identity, then by fingerprint.
    # Only the latest few are ever a base (each holds a fingerprint per message).
    list_objs: _LRU = field(default_factory=lambda: _LRU(8))
    ident: dict[int, tuple[Any, tuple[Any, ...], int]] = field(default_factory=dict)
    # The callback of `ident`'s weak references (`_forgetter`), one for the index.
    _forget: Callable[[Any], None] | None = None
    # The raw lines of the cold scan that built this index, kept until the next `feed`:
    # the read that follows a cold open (the head's messages, `decode_many`) takes its
    # lines from here rather than reading the log again (`read_lines`). A saver keeps
    # one index's at a time (`LogSaver._sync`): at most one log's bytes. Only for a
    # storage whose synced lines read the same under its lock (`keep_scan`).
    scan: Sequence[bytes] | None = None
    keep_scan: bool = False
    # While a rewrite reads values to write them again (`rebuilt_lines`, `writes_after`):
    # what this process cannot make stays as stored (`Unresolved`), not plain data.
    keep_unresolved: bool = False
    # And the serialized bodies of the messages it read (by the message's id): written
    # again as they are, not from a message this process could not make whole.
    verbatim: Bodies = field(default_factory=dict)

    # ---------------------------------------------------------------- lines

    def corrupt(self, line: int | None, reason: str) -> CorruptLogError:
        return CorruptLogError(self.where, line, reason, skipping=self.skip_corrupt)

    def read_lines(self, lines: list[int]) -> dict[int, bytes]:
        """Raw lines by number: from the cold scan while it is kept (`scan`), else the
        reader (which the caller has checked is there)."""
        scan = self.scan
        assert self.reader is not None
        if scan is None:
            return self.reader(lines)
        size = len(scan)
        out = {n: scan[n - 1] for n in lines if 0 < n <= size}
        if len(out) < len(lines):  # appended since: not in the scan
            out.update(self.reader([n for n in lines if not 0 < n <= size]))
        return out

    def line(self, n: int) -> dict[str, Any]:
        obj = self.parsed.get_hit(n)
        if obj is None:
            self.prefetch([n])
            obj = self.parsed.get_hit(n)
        return obj  # type: ignore[no-any-return]

    def prefetch(self, lines: Iterable[int]) -> None:
        """Read and parse the lines not cached yet, in one storage call; message lines
        that repeat another (``like``) bring the body's line along, in the next call."""
        parsed = self.parsed
        missing = sorted({n for n in lines if n not in parsed})
        first_error: CorruptLogError | None = None
        while missing:
            if self.reader is None:
                raise self.corrupt(missing[0], "line is referenced but was never written")
            bodies: set[int] = set()
            read = self.read_lines(missing)
            # Checked and parsed in bulk (`loads_lines`): a writer's first step after a
            # cold open reads every message line for its digests (`ensure_digests`).
            raws = list(read.values())
            for n, raw, obj in zip(read, raws, loads_lines(raws), strict=True):
                if obj is None:
                    try:
                        obj = loads_line(raw)  # names what is wrong
                    except CodecError as exc:  # the good lines are kept; the first bad
                        first_error = first_error or self.corrupt(n, str(exc))  # one raises
                        continue
                parsed.put(n, obj, trim=False)  # used by this call: trimmed by the next
                like = obj.get("like") if obj.get("t") == "msg" else None
                if type(like) is int and like in self.msg_lines:
                    bodies.add(self.msg_lines[like])
            missing = sorted(n for n in bodies if n not in self.parsed)
        if first_error is not None:
            raise first_error

    def feed(
        self,
        first_line: int,
        lines: Sequence[bytes],
        *,
        skip_corrupt: bool,
        snapshots: bool = True,
    ) -> None:
        """Index lines read from the log, the first of them being line ``first_line``.

        A corrupt line raises `CorruptLogError` (and the index keeps refusing
        reads), or with ``skip_corrupt`` is skipped with a `CorruptLineWarning`.
        A whole log (a cold open) is indexed from its last ``snap`` line when it has
        one (``snapshots``): the header, the snapshot chain and the lines after it;
        the lines before wait until something needs them (`complete`). Those lines may
        not even be in hand: a `PartialLines` (Redis) reads them through `reader`.
        """
        self.skip_corrupt = skip_corrupt
        if isinstance(lines, PartialLines) and self.reader is not None:
            lines = lines.reading_with(self.reader)  # a line it lacks is read as any other
        cold = first_line == 1 and self.lines == 0
        self.scan = lines if cold and self.keep_scan and self.reader is not None else None
        if not lines:  # nothing appended since the last call (every warm call, mostly)
            self.parsed.trim()
            return
        # A cold scan builds what stays: see `_collector_paused`.
        with _collector_paused() if len(lines) > 64 else contextlib.nullcontext():
            self.parsed.trim()  # what the previous call read beyond the bound (`prefetch`)
            order: Iterable[int] = range(len(lines))
            start = 0
            if snapshots and cold and len(lines) > SNAPSHOT_EVERY:
                start = self._from_snapshot(lines)
                if start:
                    order = itertools.chain([0], range(start, len(lines)))
            if not start and isinstance(lines, PartialLines):
                # Every line is indexed after all (no snapshot to start from, or one not
                # to trust): read the missing ones at once, not a few at a time.
                lines = lines.whole()
                self.scan = lines if cold and self.keep_scan and self.reader is not None else None
            # A cold scan of a long log keeps no parsed lines: thousands of live dicts
            # would make every garbage collection walk them (and LangGraph's heap) again.
            fresh_tail = len(lines) <= 64
            for offset, pre in _bulk_checked(lines, order, first_line):
                raw = lines[offset]
                n = first_line + offset
                try:
                    try:
                        obj = self._feed_line(raw, n, pre)
                    except (CodecError, KeyError, TypeError, ValueError) as exc:
                        if not self.partial:
                            raise
                        if self._late_writes(exc, raw, n):
                            self.lines = n
                            continue
                        # The line builds on one the snapshot left out: index those, retry.
                        self.complete()
                        obj = self._feed_line(raw, n)
                except (CodecError, CorruptLogError, KeyError, TypeError, ValueError) as exc:
                    if isinstance(exc, CorruptLogError):
                        if self.error is not None:  # the whole log read again (`complete`)
                            raise
                        reason: Any = exc.reason  # a check deeper down: this line's, too
                    else:
                        reason = (
                            exc.args[0] if isinstance(exc, CodecError)
                            else f"malformed line ({exc!r})"
                        )  # fmt: skip
                    err = self.corrupt(n, str(reason))
                    if skip_corrupt:
                        ordinal = peek_message_ordinal(raw) if n > 1 else None
                        if ordinal is not None and ordinal not in self.msg_lines:
                            self.skipped_msgs.setdefault(ordinal, err)
                        warnings.warn(
                            f"skipping: {err.where}: {err.reason}", CorruptLineWarning, stacklevel=5
                        )
                        self.lines = n
                        continue
                    self.error = err
                    raise err from None
                if fresh_tail and obj is not None:  # lines appended since our last look
                    self.parsed.put(n, obj)  # are likely read next

    def _late_writes(self, exc: Exception, raw: bytes, n: int) -> bool:
        """Whether line ``n``, which the index opened from a snapshot could not take, is
        writes to a checkpoint on a line the snapshot left out: then it waits for `complete`.

        LangGraph saves a step's writes in the background, so they may land after a later
        checkpoint and the snapshot written with it (the snapshot holds the latest
        checkpoint only). The head needs none of them, and any query of an older
        checkpoint completes the index first (`named`, `list`), which scans this line
        again; reading the whole log for them instead would undo the cold open, on a
        layout that depends on thread timing. The line is checked as any other, the
        checkpoint line it names read (one line) to be sure it is one.
        """
        if not (
            isinstance(exc, CodecError)
            and exc.dangling
            and self.snap_line is not None
            and self.reader is not None
            and self._ckpt_at
            and line_kind_at(raw) == "writes"
        ):
            return False
        obj = loads_line(raw)
        target = obj.get("ckpt")
        if type(target) is not int or not 1 < target < self.snap_line or target in self._ckpt_at:
            return False
        stand_in = next(iter(self._ckpt_at.values()))  # the rest of the line checked as usual
        parse_writes_line(obj, n, {target: stand_in})
        return line_kind_at(self.reader([target])[target]) == "ckpt"

    def _feed_line(self, raw: bytes, n: int, pre: Any = None) -> dict[str, Any] | None:
        """Index one raw line; returns it parsed (``None``: a message line, unparsed).

        ``pre``: what `_bulk_checked` found, the line parsed or, for a message line whose
        checksum matched, its ordinal (``None``: check and parse it here)."""
        if pre is not None:
            if type(pre) is int:
                self.add_message_line(pre, n)
                return None
            self.add(pre, n)
            return pre  # type: ignore[no-any-return]
        ordinal = peek_message_ordinal(raw) if n > 1 else None
        if ordinal is not None:
            # A message line is parsed when it is first read, not to index it;
            # its checksum (a byte operation) is checked now.
            check_line(raw)
            self.add_message_line(ordinal, n)
            return None
        obj = loads_line(raw)
        self.add(obj, n)
        return obj

    def add(self, obj: dict[str, Any], n: int) -> None:
        """Index one parsed line; raises `CodecError` (or Key/Type errors) if malformed."""
        kind = obj["t"]
        check_position(kind, n)
        if obj["v"] == NEWEST_VERSION:
            self._check_based(obj, n)
        if kind == "thread":
            self.header = obj
        elif kind == "msg":
            ordinal = message_ordinal(obj)
            message_like(obj, ordinal, self.msg_lines)
            self.add_message_line(ordinal, n)
        elif kind == "ckpt":
            self._add_ckpt(obj, n)
        elif kind == "snap":
            self._add_snapshot(obj, n)
        else:
            self._add_writes(obj, n)
        # The header is fed again after a snapshot seeded the index (`feed`): it does not
        # make the lines indexed so far one (`complete` reads those, a tail line needing it).
        self.lines = max(self.lines, n)

    def _check_based(self, obj: dict[str, Any], n: int) -> None:
        """Each list a format-3 line bases on a checkpoint line's names one that stores
        that channel as messages, known to the index (`based_link`): else the line is
        refused, or skipped with the lines built on it, as any other dangling line.
        An index opened from a snapshot checks a line it left out when it is read
        (`_based_refs`)."""

        known = based_refs_checked(n, lambda base, ch: self.partial or (base, ch) in self.links)
        for where, enc in line_values(obj):
            message_refs(enc, known, where)

    # ------------------------------------------------------------ snapshots

    def _add_snapshot(self, obj: dict[str, Any], n: int) -> None:
        """Follow a ``snap`` line met in a scan: the next snapshot builds on it.

        A full scan does not need what it says (it read every line before it);
        one that does not fold onto the previous snapshot is passed over: the
        next snapshot is then written against the last one that did.
        """
        if n == self.passed_over:
            return
        try:
            snap = parse_snapshot_line(obj, n)
            self._fold_snapshot(snap, self.snap_lists if snap.prev == self.snap_line else None)
        except CodecError:
            return
        if self.skip_corrupt:
            self._recover_at(snap)

    def _fold_snapshot(
        self, snap: Snapshot, prev_lists: list[tuple[int, str, list[int]]] | None
    ) -> None:
        lists: list[tuple[int, str, list[int]]] = []
        for line_no, channel, base, keep, refs in snap.lists:
            if base >= 0:
                if prev_lists is None or base >= len(prev_lists):
                    raise CodecError(f"snapshot: list {base} of the previous snapshot is unknown")
                known = prev_lists[base][2]
                if keep > len(known):
                    raise CodecError("snapshot: 'keep' is longer than the base list")
                lists.append((line_no, channel, known[:keep] + refs))
            else:
                lists.append((line_no, channel, list(refs)))
        self.snap_line, self.snap_next, self.snap_lists = snap.line, snap.next_msg, lists

    def _from_snapshot(self, lines: Sequence[bytes]) -> int:
        """Seed the index from the log's last snapshot; returns the offset of the first
        line after it (``0``: no usable snapshot, scan every line).

        What the snapshot says is checked against the raw lines it names (each
        message line holds its ordinal, each head, writer and writes line is a
        line of that kind) before anything is taken from it; a snapshot that
        does not match is passed over with a `CorruptLineWarning`.
        """
        last = len(lines) - 1
        while last > 0 and not lines[last].startswith(SNAP_PREFIX):
            last -= 1
        if last <= 0:
            return 0
        chain: list[Snapshot] = []
        at: int | None = last + 1
        try:
            while at is not None:
                if chain and at >= chain[-1].line:
                    raise CodecError("snapshot: 'prev' is not an earlier snapshot")
                obj = loads_line(lines[at - 1])
                if obj["t"] != "snap":
                    raise CodecError(f"snapshot: 'prev' line {at} is not a snapshot")
                chain.append(parse_snapshot_line(obj, at, heads=not chain))
                at = chain[-1].prev
            msg_lines: dict[int, int] = {}
            expected = 0
            for snap in reversed(chain):
                if snap.first_msg != expected:
                    raise CodecError("snapshot: its messages do not follow the previous one's")
                # Each message line is checked when it is first read (`_message_line`):
                # a cold open reads only the head's messages, not every line named here.
                first = snap.first_msg
                ordinals: Sequence[int] = range(first, first + len(snap.msg_lines))
                named: list[Any] = snap.msg_lines  # each before it (`parse_snapshot_line`)
                if None in named:  # a message skipped as corrupt: left out
                    ordinals = [o for o, m in zip(ordinals, named, strict=True) if m]
                    named = [m for m in named if m is not None]
                msg_lines.update(zip(ordinals, named, strict=True))
                expected = snap.next_msg
            top = chain[0]
            if top.early is None:  # an earlier release's: it may leave early writes out
                return 0
            self.snap_line, self.snap_next = chain[0].line, chain[0].next_msg
            self.snap_lists = _fold_chain(chain)
            self._check_snapshot(top.heads, lines)
            # In the log's order: a later write of a task's index replaces an earlier one.
            early = [(line_no, loads_line(lines[line_no - 1])) for line_no in sorted(top.early)]
            for line_no, obj in early:
                if obj["t"] != "writes" or type(obj.get("ckpt")) is not str:
                    raise CodecError(f"snapshot: line {line_no} is not early writes")
                parse_writes_line(obj, line_no, {})
        except (CodecError, KeyError, TypeError, IndexError) as exc:
            self.snap_line, self.snap_next, self.snap_lists = None, 0, []
            self.passed_over = last + 1
            reason = exc.args[0] if isinstance(exc, CodecError) else repr(exc)
            self._warn_passed_over(last + 1, str(reason), stacklevel=7)
            return 0
        self.msg_lines = msg_lines
        self.next_msg = top.next_msg
        self.undigested = sorted(msg_lines)
        self._take_snapshot(top.heads)
        for line_no, obj in early:  # (their values are checked when read: `_based_refs`)
            self._add_writes(obj, line_no)
        for ns, ids in self._by_ns.items():
            self.snap_heads[ns] = ids[-1]
        self.partial = True
        self.lines = last + 1
        return last + 1

    def _warn_passed_over(self, snap_line: int | None, reason: str, *, stacklevel: int) -> None:
        """A `CorruptLineWarning` that the snapshot on ``snap_line`` is not started from.
        Not a `CorruptLogError`'s text, whose way out (fix the line; ``on_corrupt``) is not
        this one's: a snapshot only caches what the log holds (review 41)."""
        where = self.where if snap_line is None else f"{self.where}:{snap_line}"
        warnings.warn(
            f"{where}: {reason}; reading the whole log instead (a snapshot only caches what "
            "the lines before it hold)",
            CorruptLineWarning,
            stacklevel=stacklevel,
        )

    def _seed_head(self, h: SnapshotHead) -> None:
        """Take a checkpoint as a snapshot carries it: its head, where its channels'
        values are, its pending writes."""
        head = h.head
        self._ckpts[(head.ns, head.id)] = head
        self._ckpt_at[head.line] = head
        bisect.insort(self._by_ns.setdefault(head.ns, []), head.id)
        for channel, (cid, line_no) in h.writers.items():
            version = head.versions.get(channel)
            if version is not None:
                key = (head.ns, channel, version)
                entry = self.blobs.get(key)
                if (cid, line_no) not in _candidates(entry):
                    self.blobs[key] = _with_candidate(entry, (cid, line_no))
        stored = self._writes.setdefault((head.ns, head.id), {})
        for task, idx, path, channel, line_no, pos in h.writes:
            stored.setdefault((task, idx), (path, channel, line_no, pos))

    def _recover_at(self, snap: Snapshot) -> None:
        """A scan skipping corrupt lines (``on_corrupt="skip"``) that meets a snapshot whose
        checkpoints it lost (a skipped line broke the chain they build on) takes them
        from the snapshot, as a cold open from it does, once their lines are checked the
        same way (`_check_head`): the lines after it are then indexed again. Otherwise a
        whole-log read (a history call: `complete`) moved the saver's latest checkpoint
        back to the one before the bad line, where a cold open answered the snapshot's,
        and the next step continued the shorter conversation (review 39)."""
        lost = [h for h in snap.heads if (h.head.ns, h.head.id) not in self._ckpts]
        if not lost or self.reader is None:
            return
        named = {h.head.line for h in lost} | {line for line, _, _ in self.snap_lists}
        for h in lost:
            named.update(line for _, line in h.writers.values())
            named.update(w[4] for w in h.writes)
        try:
            self._check_snapshot(lost, _LinesByNumber(self.read_lines(sorted(named))))
        except (CodecError, KeyError):
            return  # it does not match the log: the scan goes on without it
        self._take_snapshot(lost)

    def _check_snapshot(self, heads: list[SnapshotHead], lines: Sequence[bytes]) -> None:
        """Raise `CodecError` unless the lines the snapshot just folded (`snap_lists`)
        names for ``heads`` and for its message lists are what it says (`_check_head`)."""
        for h in heads:
            self._check_head(h, lines)
        for line_no, _, _ in self.snap_lists:
            if line_kind_at(lines[line_no - 1]) != "ckpt":
                raise CodecError(f"snapshot: list line {line_no} is not a checkpoint")

    def _take_snapshot(self, heads: list[SnapshotHead]) -> None:
        """Take ``heads`` (`_seed_head`) and the message lists of the snapshot just folded
        (`snap_lists`), where the index has none of its own for their lines."""
        for h in heads:
            self._seed_head(h)
        for line_no, channel, refs in self.snap_lists:
            self.links.setdefault((line_no, channel), (None, None, refs))

    @staticmethod
    def _check_head(h: SnapshotHead, lines: Sequence[bytes]) -> None:
        """Whether the lines a snapshot names for a checkpoint are what it says and read
        (checksum, JSON: `loads_line`), as a read of it will read them: its own line, the
        lines of its values, its pending writes' lines (review 41). A snapshot
        naming a damaged one is not started from (nor taken up at, `_recover_at`): the
        checkpoint it carries could not be read (review 40)."""
        head = h.head
        raw = lines[head.line - 1]
        quoted = json.dumps(head.id, ensure_ascii=False)
        if line_kind_at(raw) != "ckpt" or f'"id":{quoted}'.encode() not in raw:
            raise CodecError(f"snapshot: line {head.line} is not checkpoint {head.id}")
        _readable(raw, head.line)
        for line_no in {line_no for _, line_no in h.writers.values()} - {head.line}:
            if line_kind_at(lines[line_no - 1]) != "ckpt":
                raise CodecError(f"snapshot: writer line {line_no} is not a checkpoint")
            _readable(lines[line_no - 1], line_no)
        for line_no in {w[4] for w in h.writes}:
            if line_kind_at(lines[line_no - 1]) != "writes":
                raise CodecError(f"snapshot: line {line_no} is not a writes line")
            _readable(lines[line_no - 1], line_no)

    def complete(self) -> None:
        """Index the lines a snapshot left out (a query needs the whole log).

        The log is scanned again from its first line, ignoring snapshots; what
        was cached by line or ordinal (parsed lines, messages) stays valid.
        """
        if not self.partial:
            return
        if self.reader is None:
            raise self.corrupt(None, "the lines before the snapshot cannot be read")
        total = self.lines
        raw = self.read_lines(list(range(1, total + 1)))
        full = _Index(where=self.where, reader=self.reader, serde=self.serde)
        self.partial = False  # whatever happens below, this is tried once
        try:
            full.feed(
                1, [raw[n] for n in range(1, total + 1)], skip_corrupt=self.skip_corrupt,
                snapshots=False,
            )
        except CorruptLogError as err:
            self.error = err  # refused from now on, as by a scan of the whole log
            raise
        except BaseException:
            self.partial = True  # not read (storage, Ctrl-C): the next query tries again
            raise
        new_messages = sorted(set(full.msg_lines) - set(self.msg_lines))
        for name in _STRUCTURE:
            setattr(self, name, getattr(full, name))
        self.undigested.extend(new_messages)

    def snapshot(self) -> dict[str, Any] | None:
        """The ``snap`` line for the log as indexed now (``None``: nothing to snapshot).

        Written at the start of a checkpoint's batch, so every line it names
        is already in the log (see `langgraph_ctx.codec.lines.snapshot_line`).
        """
        if not self.lines or self.error is not None:
            return None
        heads: list[SnapshotHead] = []
        lists: list[tuple[int, str, int, int, list[int]]] = []
        prev_by_channel: dict[str, list[int]] = {}
        for i, (_, channel, _refs) in enumerate(self.snap_lists):
            prev_by_channel.setdefault(channel, []).append(i)
        for ns in sorted(self._by_ns):
            head = self.latest(ns)
            if head is None:
                continue
            writers: dict[str, tuple[str, int]] = {}
            for channel, version in head.versions.items():
                writer = self.resolve(ns, channel, version, head.id)
                if writer is None:
                    continue
                writers[channel] = writer
                if (writer[1], channel) in self.links:
                    refs = self.materialize(writer[1], channel)
                    lists.append(self._snapshot_list(writer[1], channel, refs, prev_by_channel))
            writes = sorted(
                ((task, idx, *w) for (task, idx), w in self._writes.get((ns, head.id), {}).items()),
                key=lambda w: (w[4], w[5]),
            )
            heads.append(SnapshotHead(head, writers, writes))
        first = self.snap_next if self.snap_line is not None else 0
        msg_lines = [self.msg_lines.get(o) for o in range(first, self.next_msg)]
        early = sorted(  # writes whose checkpoint's line is not in the log yet
            {w[2] for key, stored in self._writes.items() if key not in self._ckpts
             for w in stored.values()}
        )  # fmt: skip
        return snapshot_line(self.snap_line, first, msg_lines, heads, lists, early)

    def _snapshot_list(
        self, line: int, channel: str, refs: list[int], prev_by_channel: dict[str, list[int]]
    ) -> tuple[int, str, int, int, list[int]]:
        """A list for the next snapshot, against the previous snapshot's list of the same
        channel it shares the longest start with (what keeps snapshots small)."""
        best, best_keep = -1, 0
        for i in prev_by_channel.get(channel, ()):
            known = self.snap_lists[i][2]
            keep = 0
            limit = min(len(known), len(refs))
            if known[:limit] == refs[:limit]:
                keep = limit
            else:
                while keep < limit and known[keep] == refs[keep]:
                    keep += 1
            if keep > best_keep:
                best, best_keep = i, keep
        return line, channel, best, best_keep, refs[best_keep:]

    def add_message_line(self, ordinal: int, n: int) -> None:
        first = self.msg_lines.get(ordinal)
        if first is not None and first != n:
            # Taking it would silently replace the message in every checkpoint.
            raise CodecError(
                f"message #{ordinal} is already defined on line {first}; "
                "a second definition is refused"
            )
        self.msg_lines[ordinal] = n
        self.next_msg = max(self.next_msg, ordinal + 1)
        self.undigested.append(ordinal)
        self.lines = n

    def ensure_digests(self) -> None:
        """Content addresses of every message, for a writer to de-duplicate against.

        A message line that cannot be read is left out with a `CorruptLineWarning`
        when the saver skips corrupt lines (a new message is then stored anew);
        otherwise it raises `CorruptLogError` naming it, and the next write tries again.
        """
        if not self.undigested:
            return
        pending = self.undigested
        with contextlib.suppress(CorruptLogError):  # each bad line raises below, by itself
            # before taking them: an async read that must wait raises, and is run again
            self.prefetch(self.msg_lines[o] for o in pending)
        self.undigested = []
        for i, ordinal in enumerate(pending):
            try:
                self._digest(ordinal)
            except CorruptLogError as err:
                if not self.skip_corrupt:
                    self.undigested = pending[i:] + self.undigested
                    raise self.corrupt(
                        err.line,
                        f"{err.reason} (a write compares new messages with every stored "
                        "one, so it needs this line even when no checkpoint does)",
                    ) from None
                warnings.warn(
                    f"skipping: {err.where}: {err.reason}", CorruptLineWarning, stacklevel=5
                )
            except BaseException:  # e.g. an async read that must wait: run again later
                self.undigested = pending[i:] + self.undigested
                raise

    def _digest(self, ordinal: int) -> None:
        line_no, obj = self._message_line(ordinal)
        if "like" in obj:
            body: dict[str, Any] = {"msg": self.message_json(ordinal)}
        else:
            if "msg" not in obj and "serde" not in obj:
                raise self.corrupt(line_no, f"message #{ordinal} has neither 'msg' nor 'serde'")
            body = {k: obj[k] for k in BODY_KEYS if k in obj}
            noid = message_digest_without_id(body)
            if noid is not None:
                self.msg_noid.setdefault(noid, ordinal)
        try:
            digest = message_digest(body)
        except (TypeError, ValueError) as exc:
            raise self.corrupt(line_no, f"message #{ordinal}: {exc}") from None
        self.msg_digest.setdefault(digest, ordinal)

    def _add_ckpt(self, obj: dict[str, Any], n: int) -> None:
        entry = parse_checkpoint_line(
            obj, n, self._ckpt_at, legacy_versions=has_legacy_versions(self.header)
        )
        ns, cid = entry.ns, entry.id
        parent = self._ckpt_at[obj["parent"]] if type(obj.get("parent")) is int else None
        for ch, e in obj.get("values", {}).items():
            if len(e) != 2 or not is_list_value(e[1]):
                continue
            enc = e[1]
            base: int | None = None
            if "append" in enc:
                writer = None
                if parent is not None and ch in parent.versions:
                    writer = self.resolve(ns, ch, parent.versions[ch], parent.id)
                if writer is None:
                    raise CodecError(f"channel {ch!r} appends to a value the parent does not have")
                base = writer[1]
            try:  # the line is parsed now, once: its list link is kept, not re-read later
                refs = refs_of(enc)
                link, linked = list_link(enc, n)
            except (CodecError, AttributeError, TypeError):
                continue  # `materialize` reads the line and names what is wrong, if asked
            if link == "base":
                base = linked
            # Tuples of numbers: the collector stops tracking them (see `blobs`).
            self.links[(n, ch)] = (base, enc["keep"] if link == "base" else None, tuple(refs))
        blobs = self.blobs
        old = self._ckpts.get((ns, cid))
        if old is None:
            ids = self._by_ns.setdefault(ns, [])
            if not ids or ids[-1] < cid:
                ids.append(cid)
            else:
                bisect.insort(ids, cid)
        else:  # a re-put of the same checkpoint supersedes the old line
            gone = (cid, old.line)
            for ch, ver in old.stored.items():
                cands = _candidates(blobs.get((ns, ch, ver)))
                if gone in cands:
                    rest = _blobs_entry(tuple(c for c in cands if c != gone))
                    if rest is None:
                        del blobs[(ns, ch, ver)]
                    else:
                        blobs[(ns, ch, ver)] = rest
        self._ckpts[(ns, cid)] = entry
        self._ckpt_at[n] = entry
        for ch, ver in entry.stored.items():
            key = (ns, ch, ver)
            found = blobs.get(key)
            blobs[key] = (cid, n) if found is None else _with_candidate(found, (cid, n))

    def _add_writes(self, obj: dict[str, Any], n: int) -> None:
        ns, cid, task, path, items = parse_writes_line(obj, n, self._ckpt_at)
        stored = self._writes.setdefault((ns, cid), {})
        path = sys.intern(path)  # a step's task path and channels: one string each, not
        for pos, item in enumerate(items):  # one a line (a 2,000-turn chat kept 12,000)
            key = (task, item[0])
            if item[0] >= 0 and key in stored:
                continue  # the first write of a (task, index) wins, as in put_writes
            stored[key] = (path, sys.intern(item[1]), n, pos)

    # -------------------------------------------------------------- queries

    def named(self, ns: str, checkpoint_id: str | None) -> CheckpointHead | None:
        """The checkpoint a config names, or the latest of the namespace."""
        if not checkpoint_id:
            return self.latest(ns)
        found = self._ckpts.get((ns, checkpoint_id))
        if found is None and self._maybe_before(ns, checkpoint_id):
            self.complete()
            found = self._ckpts.get((ns, checkpoint_id))
        return found

    def _maybe_before(self, ns: str, checkpoint_id: str) -> bool:
        """Whether an unknown checkpoint may be on a line a snapshot left out: the
        snapshot holds each namespace's latest, so only an older id of one of them may.
        (A newer one is not in the log yet: LangGraph may write a step's writes
        before the checkpoint they follow.)"""
        if not self.partial:
            return False
        latest = self.snap_heads.get(ns)
        return latest is not None and checkpoint_id < latest

    def latest(self, ns: str) -> CheckpointHead | None:
        """The namespace's latest checkpoint (a snapshot carries each namespace's)."""
        ids = self._by_ns.get(ns)
        return self._ckpts[(ns, ids[-1])] if ids else None

    def find(self, checkpoint_id: str, ns: str | None = "") -> CheckpointHead | None:
        """A checkpoint by id, in ``ns`` (``None``: the root namespace first, then any)."""
        self.complete()
        if ns is not None:
            return self._ckpts.get((ns, checkpoint_id))
        found = self._ckpts.get(("", checkpoint_id))
        if found is None:
            for (_, cid), entry in self._ckpts.items():
                if cid == checkpoint_id:
                    return entry
        return found

    def writes_of(self, ns: str, checkpoint_id: str) -> dict[tuple[str, int], _Write]:
        """The writes stored against a checkpoint, by ``(task, index)`` (do not change it)."""
        if (ns, checkpoint_id) not in self._ckpts and self._maybe_before(ns, checkpoint_id):
            self.complete()
        return self._writes.get((ns, checkpoint_id), {})

    # The whole index: what a snapshot left out is indexed first.

    @property
    def ckpts(self) -> dict[tuple[str, str], CheckpointHead]:
        self.complete()
        return self._ckpts

    @property
    def ckpt_at(self) -> dict[int, CheckpointHead]:
        self.complete()
        return self._ckpt_at

    @property
    def by_ns(self) -> dict[str, list[str]]:
        self.complete()
        return self._by_ns

    @property
    def writes(self) -> dict[tuple[str, str], dict[tuple[str, int], _Write]]:
        self.complete()
        return self._writes

    def resolve(self, ns: str, channel: str, version: Any, at: str) -> tuple[str, int] | None:
        """The line holding ``channel`` at ``version`` as seen from checkpoint ``at``.

        Versions are unique along one branch; when two branches reuse a
        version, the writer that is an ancestor of ``at`` wins.
        """
        try:
            cands = _candidates(self.blobs.get((ns, channel, version)))
        except TypeError:  # an unhashable version from a tampered file
            raise self.corrupt(None, f"channel {channel!r} has an invalid version") from None
        if self.partial and (not cands or len(cands) > 1):
            self.complete()  # the writer, or the ancestry that picks one, may be before it
            cands = _candidates(self.blobs.get((ns, channel, version)))
        if not cands:
            return None
        if len(cands) == 1:
            return cands[0]
        by_id = {cid: line for cid, line in cands}
        seen: set[str] = set()
        cur: str | None = at
        while cur is not None and cur not in seen:
            if cur in by_id:
                return cur, by_id[cur]
            seen.add(cur)
            entry = self._ckpts.get((ns, cur))
            cur = entry.parent if entry else None
        return cands[-1]

    def value_enc(self, line: int, channel: str) -> tuple[bool, Any]:
        """``(present, encoded)`` of a channel stored on a checkpoint line."""
        values = self.line(line).get("values")
        if not isinstance(values, dict) or channel not in values:
            raise self.corrupt(line, f"channel {channel!r} is referenced but not stored here")
        entry = values[channel]
        return (True, entry[1]) if len(entry) == 2 else (False, None)

    def materialize(self, line: int, channel: str) -> list[int]:
        """Message ordinals of a message-list value, following ``append``/``base`` links.

        The links were kept when the lines were indexed (`links`), so the walk
        reads nothing; memo points every 32 links bound later walks over long chains.
        """
        memo = self.refs.get_hit((line, channel))
        if memo is not None:
            return memo  # type: ignore[no-any-return]
        steps: list[tuple[int, int | None, Sequence[int]]] = []  # (line, keep or None=append, refs)
        cur = line
        while True:
            hit = self.refs.get_hit((cur, channel))
            if hit is not None:
                value = list(hit)
                break
            base, keep, refs = self._link(cur, channel)
            if base is None:
                value = list(refs)
                break
            steps.append((cur, keep, refs))
            cur = base
        for i, (at, keep, refs) in enumerate(reversed(steps), 1):
            if keep is not None:
                if keep > len(value):
                    raise self.corrupt(at, f"channel {channel!r}: base value shorter than 'keep'")
                del value[keep:]
            value.extend(refs)
            if i % 32 == 0:
                self.refs.put((at, channel), list(value))
        self.refs.put((line, channel), value)
        return value

    def _link(self, line: int, channel: str) -> tuple[int | None, int | None, Sequence[int]]:
        """``(base line or None, keep or None for append, refs)`` of a list value."""
        link = self.links.get((line, channel))
        if link is not None:
            return link
        _, enc = self.value_enc(line, channel)  # not indexed as a list: say what is wrong
        try:
            refs = refs_of(enc)
            kind, base = list_link(enc, line)
        except (CodecError, AttributeError) as exc:
            raise self.corrupt(line, f"channel {channel!r}: {exc}") from None
        if kind == "append":
            raise self.corrupt(
                line, f"channel {channel!r} appends to a value the parent does not have"
            )
        return base, enc["keep"] if kind == "base" else None, refs

    def _message_line(self, ordinal: int) -> tuple[int, dict[str, Any]]:
        """``(line, parsed line)`` of a message ordinal."""
        line_no = self.msg_lines.get(ordinal)
        if line_no is None:
            raise self._missing_message(
                ordinal, None, f"message #{ordinal} is referenced but not in the file"
            )
        obj = self.line(line_no)
        if obj.get("t") != "msg" or obj.get("n") != ordinal:
            if self.partial and self.snap_line is not None:
                # Only a snapshot names a message line unread: it does not match the log.
                self._pass_over_snapshot(f"snapshot: line {line_no} is not message #{ordinal}")
                return self._message_line(ordinal)
            raise self.corrupt(line_no, f"line is indexed as message #{ordinal} but is not")
        return line_no, obj

    def _missing_message(self, ordinal: int, line: int | None, reason: str) -> CorruptLogError:
        """The error of a message the log does not hold (referred to from ``line``): the
        error of its line when a scan left that out as corrupt (`skipped_msgs`)."""
        skipped = self.skipped_msgs.get(ordinal)
        if skipped is not None:
            return self.corrupt(skipped.line, f"message #{ordinal}: {skipped.reason}")
        return self.corrupt(line, reason)

    def _pass_over_snapshot(self, reason: str) -> None:
        """A snapshot the index was opened from names a line that says otherwise: warn,
        naming the snapshot line, and index the whole log instead (`complete`)."""
        self._warn_passed_over(self.snap_line, reason, stacklevel=5)
        self.complete()
        self.snap_line, self.snap_next, self.snap_lists = None, 0, []

    def body_line(self, ordinal: int) -> int:
        """The line holding a message's body (following ``like`` lines, each to an
        earlier message, so the walk ends)."""
        line_no, obj = self._message_line(ordinal)
        while "like" in obj:
            try:
                ordinal = message_like(obj, ordinal, self.msg_lines)  # type: ignore[assignment]
            except CodecError as exc:
                like = obj.get("like")
                if type(like) is int and 0 <= like < ordinal:
                    reason = f"message #{obj.get('n')} repeats message #{like}, which is not in "
                    reason += "the file"
                    raise self._missing_message(like, line_no, reason) from None
                raise self.corrupt(line_no, f"message #{obj.get('n')}: {exc}") from None
            line_no, obj = self._message_line(ordinal)
        return line_no

    def message_json(self, ordinal: int) -> dict[str, Any]:
        """The readable body of a message (``like`` lines resolved), as a fresh dict."""
        line_no, obj = self._message_line(ordinal)
        body_obj = self.line(self.body_line(ordinal)) if "like" in obj else obj
        if not isinstance(body_obj.get("msg"), dict):
            raise self.corrupt(line_no, "a 'like' line must point to a readable message")
        body = body_obj["msg"]
        return like_body(body, obj.get("id")) if "like" in obj else dict(body)

    def message(self, ordinal: int, checked: set[int] | None = None) -> BaseMessage:
        """`_message`; during a rewrite, the message's stored body is kept (`verbatim`)."""
        msg = self._message(ordinal, checked)
        if self.keep_unresolved:
            self._keep_body(msg, ordinal)
        return msg

    def _keep_body(self, msg: BaseMessage, ordinal: int) -> None:
        """Keep the serialized body a message was read from, for the rewrite to write it
        as it is: the object may lack what this process could not make (an app's enum in
        its fields). Whoever decoded the message first, this read or an earlier one."""
        if id(msg) in self.verbatim:
            return
        obj = self._message_line(ordinal)[1]
        if "serde" in obj and "like" not in obj:
            self.verbatim[id(msg)] = (msg, {k: obj[k] for k in BODY_KEYS if k in obj})

    def _message(self, ordinal: int, checked: set[int] | None = None) -> BaseMessage:
        """The message object of an ordinal, the same object for every read.

        Decoded (and validated) once; later reads return that object after a
        fingerprint check (`_fingerprint`, about half a microsecond, where a copy
        cost seven): a graph gets back the very objects it saw, so identity caches
        (`BudgetNode`'s token counts, the next put's shared prefix) hit. An object
        its holder changed in place is left to them and the message is decoded
        again from its line, so a read still returns what a fresh process reads;
        an edit made inside a graph step is saved by the next put as a new message
        (`_Batch.value`). ``checked``: ordinals already verified by this read (a
        `list` of many checkpoints verifies each message once).
        """
        if checked is not None and ordinal in checked:
            # Verified by this read (decoded by it, or checked once): recent already.
            entry = self.templates.get(ordinal)
            if entry is not None:
                return entry[0]  # type: ignore[no-any-return]
        entry = self.templates.get_hit(ordinal)
        if entry is not None:
            msg, fp = entry[0], entry[1]
            if fp is None:
                fp = self._fingerprinted(ordinal, entry)
            if _unchanged(msg, fp):
                if checked is not None:
                    checked.add(ordinal)
                return msg  # type: ignore[no-any-return]
        msg = self._decode_message(ordinal)
        self.templates.put(ordinal, (msg, _fingerprint(msg)))
        # The object stands for its line now (read again if the object is changed).
        self.parsed.pop(self.msg_lines[ordinal], None)
        if checked is not None:
            checked.add(ordinal)
        return msg

    def messages(self, ordinals: list[int], checked: set[int] | None = None) -> list[BaseMessage]:
        """`_messages`; during a rewrite, their stored bodies are kept (`message`)."""
        msgs = self._messages(ordinals, checked)
        if self.keep_unresolved:
            for msg, ordinal in zip(msgs, ordinals, strict=True):
                self._keep_body(msg, ordinal)
        return msgs

    def _messages(
        self, ordinals: list[int], checked: set[int] | None = None
    ) -> list[BaseMessage]:
        """``[self.message(o, checked) for o in ordinals]``, in C for the messages decoded
        before: one lookup of their templates, one comparison with their fingerprints
        (`_all_unchanged`), one touch of the LRU. A warm read of the head is then linear
        in C (0.2-0.8 µs a message, as much a matter of cache misses as of work) rather
        than a Python call of `message` each (1-2 µs); only the messages appended since
        the last read are decoded, as `message` would.
        Any template missing (the bound) or changed in place: `message` one by one.
        """
        templates = self.templates
        entries: list[Any] = list(map(templates.get, ordinals)) if templates else []
        done: set[int] = set() if checked is None else checked  # verified by this read
        if not templates or None in entries:  # (none decoded yet: a cold read)
            missing = (
                list(itertools.compress(ordinals, map(operator.not_, entries)))
                if templates
                else ordinals
            )
            fresh = self.decode_many(missing)
            if len(fresh) < len(missing):
                for o in missing:
                    if o not in fresh:
                        self.message(o, checked)
            done.update(fresh)  # built just now: nobody can have changed them
            entries = list(map(templates.get, ordinals))
        if None not in entries:
            msgs: list[BaseMessage] = list(map(_TEMPLATE_MSG, entries))
            if done.issuperset(ordinals):
                # Verified by this read already (a `list` of many checkpoints), or decoded
                # by it (a cold read: their fingerprints are left to when needed).
                return msgs
            fps = list(map(_TEMPLATE_FP, entries))
            if None in fps:  # decoded by an earlier read, fingerprint not made yet
                for k in [k for k, fp in enumerate(fps) if fp is None]:
                    o = ordinals[k]
                    fps[k] = (
                        tuple(msgs[k].__dict__.values())  # decoded by this call: as it is
                        if o in done
                        else self._fingerprinted(o, entries[k])
                    )
            if _all_unchanged(msgs, fps):
                # Their recency, for the LRU's bound: only once the cache is past half of
                # it (below, nothing is evicted before the order is kept again, and a
                # thread's messages are in it in their order, the head's last).
                limit = templates.limit
                if limit is not None and 2 * len(templates) > limit:
                    # One is gone if another reader's decoding evicted it meanwhile (readers
                    # share the lock): only the LRU's order is at stake, not what is returned.
                    with contextlib.suppress(KeyError):
                        collections.deque(map(templates.move_to_end, ordinals), maxlen=0)
                if checked is not None:
                    checked.update(ordinals)
                return msgs
        return [self.message(o, checked) for o in ordinals]

    def _decode_message(self, ordinal: int) -> BaseMessage:
        line_no, obj = self._message_line(ordinal)
        body_line = line_no
        try:
            if "like" not in obj:
                if "msg" in obj:
                    return message_from_json_owned(obj["msg"])
                # A serialized body is decoded from bytes: nothing shared with the line.
                if not self.keep_unresolved:
                    return message_from_body(obj, self.serde)
                with quiet_plain_data():  # written again as it is stored: see `verbatim`
                    return message_from_body(obj, self.serde)
            body_line = self.body_line(ordinal)
            body = self.line(body_line).get("msg")
            if not isinstance(body, dict):
                raise self.corrupt(line_no, "a 'like' line must point to a readable message")
            return message_from_json_owned(like_body(body, obj.get("id")))
        except CodecError as exc:
            note = (
                f" (the body of message #{ordinal}, line {line_no})" if body_line != line_no else ""
            )
            raise self.corrupt(body_line, f"{exc}{note}") from None

    def decode_many(self, ordinals: Iterable[int]) -> set[int]:
        """Decode the messages of ``ordinals`` not decoded yet, in one pass (a cold open
        reads a whole message list): their lines read in one storage call, parsed, checked
        (the line holds that ordinal; a ``like`` its earlier body) and built, straight into
        the shared objects `message` returns, without caching the parsed lines.

        A message whose line is not exactly as expected is left to `message`, which reads
        it again and names what is wrong (or passes over a snapshot that does not match).
        Returns the ordinals it decoded.
        """
        known, lines_of = self.templates, self.msg_lines
        if known:
            wanted = {o for o in ordinals if o not in known and o in lines_of}
        else:  # a cold read: in C while every ordinal has its line
            wanted = set(ordinals)
            if not lines_of.keys() >= wanted:
                wanted = {o for o in wanted if o in lines_of}
        if len(wanted) < 16 or self.reader is None:
            self.prefetch(lines_of[o] for o in wanted)
            return set()
        order = sorted(wanted)
        decoded: set[int] = set()
        if not self.keep_scan and len(order) > _DECODE_BATCH:
            # A storage without a file under its lock (Redis) reads the lines of every
            # batch at once: one round trip, then the batches find them in its cache.
            self.reader([lines_of[o] for o in order])
        with _collector_paused():
            # In batches: the parsed lines of one are freed before the next is parsed,
            # and the memory they held is reused for the next batch's messages.
            for i in range(0, len(order), _DECODE_BATCH):
                decoded |= self._decode_many(order[i : i + _DECODE_BATCH])
        return decoded

    def _decode_many(self, wanted: list[int]) -> set[int]:
        lines_of = self.msg_lines
        objs, owned = self._read_parsed(list(map(lines_of.__getitem__, wanted)), wanted)
        done: list[int] = []
        bodies: list[Any] = []
        likes: list[tuple[int, dict[str, Any]]] = []
        for o, obj in zip(wanted, objs, strict=True):
            if obj is None:
                continue
            if "like" in obj:
                likes.append((o, obj))
                continue
            body = obj.get("msg")
            if body is None:
                continue  # a serialized body: `message` decodes it
            done.append(o)
            bodies.append(body if owned else dict(body))  # a cached line's: kept, copied
        first_like = len(bodies)
        ids = [OWN_ID] * first_like
        if likes:
            by_ordinal = dict(zip(wanted, objs, strict=True))
            self._decode_likes(likes, by_ordinal, done, bodies, ids, owned)
        built = _built_many(bodies, ids, first_like)
        if None in built:
            done = [o for o, b in zip(done, built, strict=True) if b is not None]
            built = [b for b in built if b is not None]
        self.templates.put_many(list(zip(done, built, strict=True)))
        return set(done)

    def _decode_likes(
        self,
        likes: list[tuple[int, dict[str, Any]]],
        by_ordinal: dict[int, dict[str, Any] | None],
        done: list[int],
        bodies: list[Any],
        ids: list[Any],
        owned: bool,
    ) -> None:
        """The bodies of the ``like`` lines of a batch, each the earlier body it repeats
        (those not in the batch read in one call) and its own id, appended to ``done`` /
        ``bodies`` / ``ids``. A like whose body line is not exactly that message is left
        out. ``owned``: the batch's lines were parsed for it (a body from the parsed-line
        cache is copied, as `_decode_many` copies its own)."""
        lines_of = self.msg_lines
        found: list[int] = []  # the likes naming an earlier message, what they name
        named: list[int] = []  # and their own ids
        own_ids: list[Any] = []
        for o, obj in likes:
            like = obj["like"]
            if type(like) is int and like < o and like in lines_of:
                found.append(o)
                named.append(like)
                own_ids.append(obj.get("id"))
        unread = sorted(set(named).difference(by_ordinal))
        if unread:
            objs, fresh = self._read_parsed(list(map(lines_of.__getitem__, unread)), unread)
            by_ordinal.update(zip(unread, objs, strict=True))
            owned = owned and fresh
        for o, body_obj, new_id in zip(found, map(by_ordinal.get, named), own_ids, strict=True):
            if body_obj is None or "like" in body_obj:
                continue
            body = body_obj.get("msg")
            if type(body) is not dict:
                continue
            done.append(o)
            bodies.append(body if owned else dict(body))  # likes of one body share it
            ids.append(new_id)

    def _read_parsed(
        self, lines: list[int], ordinals: list[int]
    ) -> tuple[list[dict[str, Any] | None], bool]:
        """The message lines ``lines`` (distinct), holding ``ordinals``, parsed: from the
        parsed-line cache or read in one call; ``None`` for a line that does not parse or
        is not that message's (`message` reads it again, naming why). And whether every
        one was parsed just now (nothing the cache holds: the caller's own)."""
        parsed, scan = self.parsed, self.scan
        cached: list[Any] = list(map(parsed.get, lines)) if parsed else [None] * len(lines)
        if not any(cached):
            if scan is not None and lines and min(lines) > 0 and max(lines) <= len(scan):
                # A cold read: every line is in the scan, none parsed yet.
                scanned = list(map(scan.__getitem__, map(_BEFORE, lines)))
                return loads_message_lines(scanned, ordinals), True
        elif None not in cached:
            return [
                obj if obj.get("t") == "msg" and obj.get("n") == o else None
                for obj, o in zip(cached, ordinals, strict=True)
            ], False
        missing = [(n, o) for n, o, obj in zip(lines, ordinals, cached, strict=True) if obj is None]
        raws = self.read_lines([n for n, _ in missing])
        fresh = dict(
            zip(
                [n for n, _ in missing],
                loads_message_lines([raws[n] for n, _ in missing], [o for _, o in missing]),
                strict=True,
            )
        )
        return [
            fresh.get(n) if obj is None else obj if obj.get("t") == "msg" and obj.get("n") == o
            else None
            for n, o, obj in zip(lines, ordinals, cached, strict=True)
        ], not any(cached)

    def template_fingerprint(self, ordinal: int) -> tuple[Any, ...]:
        """The fingerprint of a message as stored (what `message` returns, unedited)."""
        entry = self.templates.get_hit(ordinal)
        if entry is None:
            self.message(ordinal)
            entry = self.templates.get_hit(ordinal)
        if entry[1] is None:
            return self._fingerprinted(ordinal, entry)
        return entry[1]  # type: ignore[no-any-return]

    def _fingerprinted(self, ordinal: int, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """The fingerprint of a template decoded without one (`_built_many`), made from the
        body it was built from and kept in its place."""
        body = entry[2] if len(entry) == 3 else like_body(entry[2], entry[3])
        fp = body_fingerprint(body)
        self.templates[ordinal] = (entry[0], fp)
        return fp

    def remember(
        self, msg: BaseMessage, ordinal: int, fingerprint: tuple[Any, ...] | None = None
    ) -> None:
        """Let the next put recognise this very object without re-serialising it.

        ``fingerprint`` is the object's state when it was serialized; by now
        another thread may have changed it, and then it must not match.
        """
        key = id(msg)
        forget = self._forget
        if forget is None:
            forget = self._forget = _forgetter(self.ident)
        if fingerprint is None:
            fingerprint = _fingerprint(msg)
        # The key rides on the reference (`weakref.KeyedRef`): one callback for the index,
        # not a closure a message (a function, a cell and a tuple, each tracked by the
        # garbage collector while the message lives: at 50 threads, past the young
        # collections, into the count that starts a full one).
        self.ident[key] = (weakref.KeyedRef(msg, forget, key), fingerprint, ordinal)


    # ------------------------------------------------------------ decoding

    def decode(
        self, enc: Any, line: int, channel: str, checked: set[int] | None = None
    ) -> Any:
        """Decode one encoded value found on ``line`` (for ``channel``).

        Messages are the index's shared objects (`message`; ``checked`` as there);
        everything else is the caller's own: JSON parts are copied out of the
        parsed line, which later reads decode again.
        """
        if enc is None or type(enc) in _JSON_SCALARS:
            return enc  # what the walk below returns for it (a branch's ``None``, most)
        if not is_list_value(enc):
            enc = json_copy(enc)

        def load_refs(e: Mapping[str, Any]) -> list[int]:
            if e is enc and ("base" in e or "append" in e):
                return self.materialize(line, channel)
            if "ch" in e:
                return self._based_refs(e, line)
            if "base" in e or "append" in e:
                raise CodecError("only a channel value may refer to an earlier value")
            return refs_of(e)

        where = f"channel {channel!r}"
        try:
            groups = message_refs(enc, load_refs, where)
        except CodecError as exc:
            raise self.corrupt(line, str(exc)) from None
        fresh = self.decode_many([o for _, refs in groups for o in refs])
        if fresh:  # built just now: no holder can have changed them yet
            if checked is None:
                checked = fresh
            else:
                checked.update(fresh)
        try:
            load = self.message if checked is None else lambda o: self.message(o, checked)
            keep = self.keep_unresolved
            return decode_value(enc, load, load_refs, self.serde, keep_unresolved=keep)
        except CodecError as exc:
            raise self.corrupt(line, f"{where}: {exc}") from None
        except CorruptLogError as exc:
            if exc.line is not None:
                raise
            raise self.corrupt(line, f"{where}: {exc.reason}") from None

    def _based_refs(self, enc: Mapping[str, Any], line: int) -> list[int]:
        """The ordinals of a list inside a value on ``line`` that begins with a checkpoint
        line's list (`langgraph_ctx.codec.lines.based_link`)."""
        base, keep, channel = based_link(enc, line)
        if (base, channel) not in self.links and self.refs.get_hit((base, channel)) is None:
            self.complete()  # a line the snapshot left out (else: nothing to do)
            if (base, channel) not in self.links:
                raise CodecError(f"'base' line {base} does not store {channel!r} as messages")
        known = self.materialize(base, channel)
        if keep > len(known):
            raise CodecError(f"'keep' {keep} is longer than the list of line {base}")
        return known[:keep] + refs_of(enc)

    def values(self, entry: CheckpointHead, checked: set[int] | None = None) -> dict[str, Any]:
        """The channel values of a checkpoint (messages shared: see `message`)."""
        found: list[tuple[str, int]] = []
        for channel, version in entry.versions.items():
            try:
                writer = self.resolve(entry.ns, channel, version, entry.id)
            except CorruptLogError as exc:
                raise self.corrupt(entry.line, exc.reason) from None
            if writer is not None:
                found.append((channel, writer[1]))
        self.prefetch(line for _, line in found)
        values: dict[str, Any] = {}
        for channel, line in found:
            present, enc = self.value_enc(line, channel)
            if not present:
                continue
            if is_list_value(enc):
                value = values[channel] = self._message_list(line, channel, checked)
                kept = self._kept_fps(value, line, channel)
                self.list_objs.put((line, channel), (value.copy(), kept))
            else:
                values[channel] = self.decode(enc, line, channel, checked)
        return values

    def _message_list(self, line: int, channel: str, checked: set[int] | None) -> list[Any]:
        """The message list stored on ``line`` for ``channel`` (`messages`; what `decode`
        returns for it), an error naming no line named by this one, as `decode` does."""
        try:
            return self.messages(self.materialize(line, channel), checked)
        except CorruptLogError as exc:
            if exc.line is not None:
                raise
            raise self.corrupt(line, f"channel {channel!r}: {exc.reason}") from None

    def _kept_fps(
        self, value: list[Any], line: int, channel: str
    ) -> list[tuple[Any, ...]] | None:
        """The fingerprints a put kept for the list on ``line`` (`_Batch.value`), as far
        as ``value``, the list just read, holds the same objects: the next put then
        compares the shared messages without building their fingerprints again (the
        entry of the read replaces the put's)."""
        old = self.list_objs.get((line, channel))
        if old is None or old[1] is None:
            return None
        objs: list[Any] = old[0]
        fps: list[tuple[Any, ...]] = old[1]
        limit = min(len(value), len(objs), len(fps))
        shared = 0
        if all(map(operator.is_, value[:limit], objs[:limit])):
            shared = limit
        else:
            while shared < limit and value[shared] is objs[shared]:
                shared += 1
        if not shared:
            return None
        return fps if shared == len(fps) else fps[:shared]  # only ever appended to

    def pending_writes(
        self,
        entry: CheckpointHead,
        channels: set[str] | None = None,
        checked: set[int] | None = None,
    ) -> list[PendingWrite]:
        """The checkpoint's writes in `writes_sort_key` order (only ``channels`` if given)."""
        stored = self._writes.get((entry.ns, entry.id))
        if not stored:
            return []
        ordered = sorted(
            ((key, w) for key, w in stored.items() if channels is None or w[1] in channels),
            key=lambda kv: writes_sort_key(kv[1][0], *kv[0]),
        )
        self.prefetch(w[2] for _, w in ordered)
        out: list[PendingWrite] = []
        for (task_id, _), (_, channel, line, pos) in ordered:
            enc = self.line(line)["w"][pos][2]
            out.append((task_id, channel, self.decode(enc, line, channel, checked)))
        return out

    def metadata(self, entry: CheckpointHead) -> dict[str, Any]:
        """A checkpoint's metadata (a fresh copy)."""
        try:
            meta = checkpoint_metadata(entry, self.line(entry.line), self.serde)
            return own_thread_id(meta, self.header)
        except CodecError as exc:
            raise self.corrupt(entry.line, str(exc)) from None

    def checkpoint_ts(self, entry: CheckpointHead) -> str:
        """A checkpoint's ``ts``, read from its line."""
        try:
            return checkpoint_ts(self.line(entry.line), entry.id)
        except CodecError as exc:
            raise self.corrupt(entry.line, str(exc)) from None

    def checkpoint(self, entry: CheckpointHead, values: dict[str, Any]) -> dict[str, Any]:
        """LangGraph's `Checkpoint` dict of an entry, with these channel values."""
        try:
            line, keep = self.line(entry.line), self.keep_unresolved
            return checkpoint_from_line(line, entry, values, self.serde, as_stored=keep)
        except CodecError as exc:
            raise self.corrupt(entry.line, str(exc)) from None

    def delta_history(
        self, target: CheckpointHead | None, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """Writes and seed of `DeltaChannel`s along ``target``'s ancestors."""
        newest_first: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        cur = target
        visited: set[str] = set()
        while cur is not None and remaining and cur.id not in visited:
            visited.add(cur.id)
            for channel in sorted(remaining & cur.delta_base):
                folded = self.line(cur.line)["delta_base"][channel]
                for task, enc in reversed(folded.get("writes", [])):
                    value = self.decode(enc, cur.line, channel)
                    newest_first[channel].append((task, channel, value))
                if "seed" in folded:
                    seeds[channel] = self.decode(folded["seed"], cur.line, channel)
                remaining.discard(channel)
            parent = self.ckpts.get((cur.ns, cur.parent)) if cur.parent else None
            if parent is None or not remaining:
                break
            parent_writes = self.pending_writes(parent, remaining)
            for task_id, channel, value in reversed(parent_writes):
                newest_first[channel].append((task_id, channel, value))
            for channel in sorted(remaining):
                version = parent.versions.get(channel)
                if version is None:
                    continue
                writer = self.resolve(parent.ns, channel, version, parent.id)
                if writer is None:
                    continue
                present, enc = self.value_enc(writer[1], channel)
                if present:
                    seeds[channel] = self.decode(enc, writer[1], channel)
                    remaining.discard(channel)
            cur = parent
        result: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(newest_first[channel]))}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            result[channel] = entry
        return result
