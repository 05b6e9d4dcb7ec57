"""The reader of a thread log: `_Index`, what the saver knows of one thread's lines.

Where each message, checkpoint and write is, which line holds each channel
value; built by reading the log once, then kept up to date with what is
appended. Lines are parsed through `langgraph_ctx.codec.lines` and values
decoded through `langgraph_ctx.codec.values`: this module only keeps the
results and decides what to read. The writer is `langgraph_ctx.saver._batch`.
It is one module (just over 600 lines) because indexing, queries and decoding share
the index's caches.
"""

from __future__ import annotations

import bisect
import contextlib
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_ctx.codec.lines import (
    CheckpointHead,
    check_line,
    check_position,
    checkpoint_from_line,
    checkpoint_metadata,
    checkpoint_ts,
    has_legacy_versions,
    is_list_value,
    list_link,
    loads_line,
    message_like,
    message_ordinal,
    own_thread_id,
    parse_checkpoint_line,
    parse_writes_line,
    peek_message_ordinal,
)
from langgraph_ctx.codec.messages import (
    BODY_KEYS,
    like_body,
    message_digest,
    message_digest_without_id,
    message_from_body,
    message_from_json,
)
from langgraph_ctx.codec.values import decode_value, message_refs, refs_of
from langgraph_ctx.errors import CodecError, CorruptLineWarning, CorruptLogError


class _LRU(OrderedDict[Any, Any]):
    def __init__(self, limit: int | None) -> None:
        super().__init__()
        self.limit = limit

    def get_hit(self, key: Any) -> Any:
        value = super().get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if self.limit is not None and len(self) > self.limit:
            self.popitem(last=False)



@dataclass(slots=True)
class _Write:
    path: str
    channel: str
    line: int
    pos: int  # index in the line's "w" list


_CONTAINERS = (dict, list)


def _owned(value: Any) -> Any:
    """A copy of the dicts and lists in ``value`` (leaves shared): JSON-shaped data."""
    kind = type(value)
    if kind is dict:
        return {k: _owned(v) for k, v in value.items()}
    if kind is list:
        return [_owned(v) for v in value]
    return value


def _detach(message: BaseMessage) -> BaseMessage:
    """``message`` with its own dicts and lists, none shared with the parsed line.

    Reads hand the message out: an edit made by its holder must not reach the
    line cache (a later decode, a content digest of the line).
    """
    fields = message.__dict__
    for key, value in fields.items():
        if value and type(value) in _CONTAINERS:
            fields[key] = _owned(value)
    return message


def _frozen(value: Any) -> Any:
    """A container's contents as nested tuples (leaves by reference), to compare later."""
    kind = type(value)
    if kind is dict:
        return tuple([(k, _frozen(v)) for k, v in value.items()]) if value else ()
    if kind is list:
        return tuple([_frozen(v) for v in value]) if value else ()
    return value


def _fingerprint(m: BaseMessage) -> tuple[Any, ...]:
    """What a message holds, to tell later whether it was changed in place.

    Every field by reference (a reassigned ``content`` or ``id`` is another
    object), and the contents of its dicts and lists (``response_metadata``,
    ``additional_kwargs``, ``tool_calls``, list ``content``), which a node may
    edit in place. About 0.4 us for a plain message, 1.5 us for one with
    metadata: the saver compares a step's whole message list with it, so an
    edited message is saved again (as a new message line) and a fresh process
    reads the edit.
    """
    return tuple(
        [_frozen(v) if v and type(v) in _CONTAINERS else v for v in m.__dict__.values()]
    )


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
    ckpts: dict[tuple[str, str], CheckpointHead] = field(default_factory=dict)
    ckpt_at: dict[int, CheckpointHead] = field(default_factory=dict)
    append_base: dict[tuple[int, str], int] = field(default_factory=dict)
    by_ns: dict[str, list[str]] = field(default_factory=dict)
    blobs: dict[tuple[str, str, Any], list[tuple[str, int]]] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    error: CorruptLogError | None = None
    # The saver's on_corrupt="skip": a bad line a read or write does not need is left out.
    skip_corrupt: bool = False
    parsed: _LRU = field(default_factory=lambda: _LRU(16384))
    refs: _LRU = field(default_factory=lambda: _LRU(512))
    # ordinal -> (the message object every read returns, its fingerprint as decoded).
    templates: _LRU = field(default_factory=lambda: _LRU(16384))
    # (line, channel) -> (the message objects of that list value (a copy of the list),
    # their fingerprints when saved, or None when read: then the templates' apply).
    # The next step's list shares them: compared by identity, then by fingerprint.
    # Only the latest few are ever a base (each holds a fingerprint per message).
    list_objs: _LRU = field(default_factory=lambda: _LRU(8))
    ident: dict[int, tuple[Any, tuple[Any, ...], int]] = field(default_factory=dict)

    # ---------------------------------------------------------------- lines

    def corrupt(self, line: int | None, reason: str) -> CorruptLogError:
        return CorruptLogError(self.where, line, reason)

    def line(self, n: int) -> dict[str, Any]:
        obj = self.parsed.get_hit(n)
        if obj is None:
            self.prefetch([n])
            obj = self.parsed.get_hit(n)
        return obj  # type: ignore[no-any-return]

    def prefetch(self, lines: Iterable[int]) -> None:
        missing = sorted({n for n in lines if n not in self.parsed})
        if not missing:
            return
        if self.reader is None:
            raise self.corrupt(missing[0], "line is referenced but was never written")
        first_error: CorruptLogError | None = None
        for n, raw in self.reader(missing).items():
            try:
                self.parsed.put(n, loads_line(raw))
            except CodecError as exc:  # the good lines are kept; the first bad one raises
                first_error = first_error or self.corrupt(n, str(exc))
        if first_error is not None:
            raise first_error

    def feed(self, first_line: int, lines: Sequence[bytes], *, skip_corrupt: bool) -> None:
        """Index lines read from the log, the first of them being line ``first_line``.

        A corrupt line raises `CorruptLogError` (and the index keeps refusing
        reads), or with ``skip_corrupt`` is skipped with a `CorruptLineWarning`.
        """
        # A cold scan of a long log keeps no parsed lines: thousands of live dicts
        # would make every garbage collection walk them (and LangGraph's heap) again.
        fresh_tail = len(lines) <= 64
        self.skip_corrupt = skip_corrupt
        for offset, raw in enumerate(lines):
            n = first_line + offset
            try:
                ordinal = peek_message_ordinal(raw) if n > 1 else None
                if ordinal is not None:
                    # A message line is parsed when it is first read, not to index it;
                    # its checksum (a byte operation) is checked now.
                    check_line(raw)
                    self.add_message_line(ordinal, n)
                    continue
                obj = loads_line(raw)
                self.add(obj, n)
            except (CodecError, KeyError, TypeError, ValueError) as exc:
                reason = exc.args[0] if isinstance(exc, CodecError) else f"malformed line ({exc!r})"
                err = self.corrupt(n, str(reason))
                if skip_corrupt:
                    warnings.warn(f"skipping: {err}", CorruptLineWarning, stacklevel=5)
                    self.lines = n
                    continue
                self.error = err
                raise err from None
            if fresh_tail:  # lines appended since our last look are likely read next
                self.parsed.put(n, obj)

    def add(self, obj: dict[str, Any], n: int) -> None:
        """Index one parsed line; raises `CodecError` (or Key/Type errors) if malformed."""
        kind = obj["t"]
        check_position(kind, n)
        if kind == "thread":
            self.header = obj
        elif kind == "msg":
            ordinal = message_ordinal(obj)
            message_like(obj, ordinal, self.msg_lines)
            self.add_message_line(ordinal, n)
        elif kind == "ckpt":
            self._add_ckpt(obj, n)
        else:
            self._add_writes(obj, n)
        self.lines = n

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
        pending, self.undigested = self.undigested, []
        with contextlib.suppress(CorruptLogError):  # each bad line raises below, by itself
            self.prefetch(self.msg_lines[o] for o in pending)
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
                warnings.warn(f"skipping: {err}", CorruptLineWarning, stacklevel=5)

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
            obj, n, self.ckpt_at, legacy_versions=has_legacy_versions(self.header)
        )
        ns, cid = entry.ns, entry.id
        parent = self.ckpt_at[obj["parent"]] if type(obj.get("parent")) is int else None
        for ch, e in obj.get("values", {}).items():
            if len(e) == 2 and isinstance(e[1], dict) and "append" in e[1]:
                writer = None
                if parent is not None and ch in parent.versions:
                    writer = self.resolve(ns, ch, parent.versions[ch], parent.id)
                if writer is None:
                    raise CodecError(f"channel {ch!r} appends to a value the parent does not have")
                self.append_base[(n, ch)] = writer[1]
        old = self.ckpts.get((ns, cid))
        if old is None:
            ids = self.by_ns.setdefault(ns, [])
            if not ids or ids[-1] < cid:
                ids.append(cid)
            else:
                bisect.insort(ids, cid)
        else:  # a re-put of the same checkpoint supersedes the old line
            for ch, ver in old.stored.items():
                cands = self.blobs.get((ns, ch, ver), [])
                if (cid, old.line) in cands:
                    cands.remove((cid, old.line))
        self.ckpts[(ns, cid)] = entry
        self.ckpt_at[n] = entry
        for ch, ver in entry.stored.items():
            self.blobs.setdefault((ns, ch, ver), []).append((cid, n))

    def _add_writes(self, obj: dict[str, Any], n: int) -> None:
        ns, cid, task, path, items = parse_writes_line(obj, n, self.ckpt_at)
        stored = self.writes.setdefault((ns, cid), {})
        for pos, item in enumerate(items):
            key = (task, item[0])
            if item[0] >= 0 and key in stored:
                continue  # the first write of a (task, index) wins, as in put_writes
            stored[key] = _Write(path, item[1], n, pos)

    # -------------------------------------------------------------- queries

    def named(self, ns: str, checkpoint_id: str | None) -> CheckpointHead | None:
        """The checkpoint a config names, or the latest of the namespace."""
        return self.ckpts.get((ns, checkpoint_id)) if checkpoint_id else self.latest(ns)

    def latest(self, ns: str) -> CheckpointHead | None:
        ids = self.by_ns.get(ns)
        return self.ckpts[(ns, ids[-1])] if ids else None

    def find(self, checkpoint_id: str, ns: str | None = "") -> CheckpointHead | None:
        """A checkpoint by id, in ``ns`` (``None``: the root namespace first, then any)."""
        if ns is not None:
            return self.ckpts.get((ns, checkpoint_id))
        found = self.ckpts.get(("", checkpoint_id))
        if found is None:
            for (_, cid), entry in self.ckpts.items():
                if cid == checkpoint_id:
                    return entry
        return found

    def resolve(self, ns: str, channel: str, version: Any, at: str) -> tuple[str, int] | None:
        """The line holding ``channel`` at ``version`` as seen from checkpoint ``at``.

        Versions are unique along one branch; when two branches reuse a
        version, the writer that is an ancestor of ``at`` wins.
        """
        try:
            cands = self.blobs.get((ns, channel, version))
        except TypeError:  # an unhashable version from a tampered file
            raise self.corrupt(None, f"channel {channel!r} has an invalid version") from None
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
            entry = self.ckpts.get((ns, cur))
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
        """Message ordinals of a message-list value, following ``append``/``base`` links."""
        memo = self.refs.get_hit((line, channel))
        if memo is not None:
            return memo  # type: ignore[no-any-return]
        steps: list[tuple[int, int | None, list[int]]] = []  # (line, keep or None=append, refs)
        cur = line
        while True:
            hit = self.refs.get_hit((cur, channel))
            if hit is not None:
                value = list(hit)
                break
            _, enc = self.value_enc(cur, channel)
            try:
                refs = refs_of(enc)
                link, base = list_link(enc, cur)
            except (CodecError, AttributeError) as exc:
                raise self.corrupt(cur, f"channel {channel!r}: {exc}") from None
            if link == "append":
                steps.append((cur, None, refs))
                prev = self.append_base.get((cur, channel))
                if prev is None:  # the line was skipped as corrupt, or is not a checkpoint
                    raise self.corrupt(
                        cur, f"channel {channel!r} appends to a value the parent does not have"
                    )
                cur = prev
                continue
            if base is None:
                value = list(refs)
                break
            steps.append((cur, enc["keep"], refs))
            cur = base
        for i, (at, keep, refs) in enumerate(reversed(steps), 1):
            if keep is not None:
                if keep > len(value):
                    raise self.corrupt(at, f"channel {channel!r}: base value shorter than 'keep'")
                del value[keep:]
            value.extend(refs)
            if i % 32 == 0:  # memo points bound later walks over long chains
                self.refs.put((at, channel), list(value))
        self.refs.put((line, channel), value)
        return value

    def _message_line(self, ordinal: int) -> tuple[int, dict[str, Any]]:
        """``(line, parsed line)`` of a message ordinal."""
        line_no = self.msg_lines.get(ordinal)
        if line_no is None:
            raise self.corrupt(None, f"message #{ordinal} is referenced but not in the file")
        obj = self.line(line_no)
        if obj.get("t") != "msg" or obj.get("n") != ordinal:
            raise self.corrupt(line_no, f"line is indexed as message #{ordinal} but is not")
        return line_no, obj

    def body_line(self, ordinal: int) -> int:
        """The line holding a message's body (following ``like`` lines, each to an
        earlier message, so the walk ends)."""
        line_no, obj = self._message_line(ordinal)
        while "like" in obj:
            try:
                ordinal = message_like(obj, ordinal, self.msg_lines)  # type: ignore[assignment]
            except CodecError as exc:
                raise self.corrupt(line_no, f"message #{obj.get('n')}: {exc}") from None
            line_no, obj = self._message_line(ordinal)
        return line_no

    def message_json(self, ordinal: int) -> dict[str, Any]:
        """The readable body of a message (``like`` lines resolved), as a fresh dict."""
        line_no, obj = self._message_line(ordinal)
        body_obj = self.line(self.body_line(ordinal)) if "like" in obj else obj
        if not isinstance(body_obj.get("msg"), dict):
            raise self.corrupt(line_no, "a 'like' line must point to a readable message")
        body = dict(body_obj["msg"])
        return like_body(body, obj.get("id")) if "like" in obj else body

    def message(self, ordinal: int, checked: set[int] | None = None) -> BaseMessage:
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
        entry = self.templates.get_hit(ordinal)
        if entry is not None:
            msg, fp = entry
            if checked is not None and ordinal in checked:
                return msg  # type: ignore[no-any-return]
            if _fingerprint(msg) == fp:
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

    def _decode_message(self, ordinal: int) -> BaseMessage:
        line_no, obj = self._message_line(ordinal)
        body_line = line_no
        try:
            if "like" in obj:
                body_line = self.body_line(ordinal)
                return _detach(message_from_json(self.message_json(ordinal)))
            return _detach(message_from_body(obj, self.serde))
        except CodecError as exc:
            note = (
                f" (the body of message #{ordinal}, line {line_no})" if body_line != line_no else ""
            )
            raise self.corrupt(body_line, f"{exc}{note}") from None

    def template_fingerprint(self, ordinal: int) -> tuple[Any, ...]:
        """The fingerprint of a message as stored (what `message` returns, unedited)."""
        entry = self.templates.get_hit(ordinal)
        if entry is None:
            self.message(ordinal)
            entry = self.templates.get_hit(ordinal)
        return entry[1]  # type: ignore[no-any-return]

    def remember(
        self, msg: BaseMessage, ordinal: int, fingerprint: tuple[Any, ...] | None = None
    ) -> None:
        """Let the next put recognise this very object without re-serialising it.

        ``fingerprint`` is the object's state when it was serialized; by now
        another thread may have changed it, and then it must not match.
        """
        key = id(msg)
        ident = self.ident

        def forget(ref: Any, key: int = key) -> None:
            entry = ident.get(key)
            if entry is not None and entry[0] is ref:
                ident.pop(key, None)

        if fingerprint is None:
            fingerprint = _fingerprint(msg)
        ident[key] = (weakref.ref(msg, forget), fingerprint, ordinal)


    # ------------------------------------------------------------ decoding

    def decode(
        self, enc: Any, line: int, channel: str, checked: set[int] | None = None
    ) -> Any:
        """Decode one encoded value found on ``line`` (for ``channel``).

        Messages are the index's shared objects (`message`; ``checked`` as there);
        everything else is the caller's own: JSON parts are copied out of the
        parsed line, which later reads decode again.
        """
        if not is_list_value(enc):
            enc = _owned(enc)

        def load_refs(e: Mapping[str, Any]) -> list[int]:
            if e is enc and ("base" in e or "append" in e):
                return self.materialize(line, channel)
            if "base" in e or "append" in e:
                raise CodecError("only a channel value may refer to an earlier value")
            return refs_of(e)

        where = f"channel {channel!r}"
        try:
            groups = message_refs(enc, load_refs, where)
        except CodecError as exc:
            raise self.corrupt(line, str(exc)) from None
        lines, known = self.msg_lines, self.templates  # decoded messages need no line
        self.prefetch(lines[o] for _, refs in groups for o in refs if o not in known and o in lines)
        try:
            load = self.message if checked is None else lambda o: self.message(o, checked)
            return decode_value(enc, load, load_refs, self.serde)
        except CodecError as exc:
            raise self.corrupt(line, f"{where}: {exc}") from None
        except CorruptLogError as exc:
            if exc.line is not None:
                raise
            raise self.corrupt(line, f"{where}: {exc.reason}") from None

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
            if present:
                value = values[channel] = self.decode(enc, line, channel, checked)
                if is_list_value(enc):
                    self.list_objs.put((line, channel), (value.copy(), None))
        return values

    def pending_writes(
        self,
        entry: CheckpointHead,
        channels: set[str] | None = None,
        checked: set[int] | None = None,
    ) -> list[PendingWrite]:
        """The checkpoint's writes in `writes_sort_key` order (only ``channels`` if given)."""
        stored = self.writes.get((entry.ns, entry.id))
        if not stored:
            return []
        ordered = sorted(
            ((key, w) for key, w in stored.items() if channels is None or w.channel in channels),
            key=lambda kv: writes_sort_key(kv[1].path, *kv[0]),
        )
        self.prefetch(w.line for _, w in ordered)
        out: list[PendingWrite] = []
        for (task_id, _), w in ordered:
            enc = self.line(w.line)["w"][w.pos][2]
            out.append((task_id, w.channel, self.decode(enc, w.line, w.channel, checked)))
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
            return checkpoint_from_line(self.line(entry.line), entry, values, self.serde)
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
