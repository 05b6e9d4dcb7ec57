"""`LogSaver`: a LangGraph checkpointer over append-only thread logs.

The storage backend (`langgraph_ctx.storage`) moves lines; this module decides
what the lines say (through `langgraph_ctx.codec`) and keeps, per thread, an
in-memory index of them: where each message, checkpoint and write is, which
line holds each channel value. A log is read once; after that a call reads only
what other processes appended since.

One implementation serves both APIs: the async methods run the sync ones in a
worker thread (`asyncio.to_thread`), like file I/O has to anyway.

Storage costs what a step adds:

* a message is written once (content-addressed) and referenced by ordinal;
* a channel value is written only when its version changes (``new_versions``);
* a message list is written as "the first *k* messages of the value on line
  *L*, then these", so appending one message writes one reference.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import functools
import re
import warnings
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.codec import (
    DEFAULT_CHECKPOINT_VERSION,
    FORMAT_VERSION,
    PACKAGE_MODELS,
    CodecError,
    decode_value,
    dumps_line,
    encode_value,
    extra_fields,
    extra_from_fields,
    loads_line,
    message_body,
    message_digest,
    message_digest_without_id,
    message_from_body,
    message_from_json,
    metadata_fields,
    metadata_from_fields,
    refs_of,
)
from langgraph_ctx.errors import (
    CheckpointNotFoundError,
    CorruptLogError,
    LogChangedError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from langgraph_ctx.storage.base import LogStorage
from langgraph_ctx.storage.thread_ids import check_thread_id

if TYPE_CHECKING:
    from langgraph_ctx.saver.retention import SweepReport

OnCorrupt = Literal["raise", "skip"]

_MSG_PREFIX = re.compile(rb'\{"v":%d,"t":"msg","n":(\d+),' % FORMAT_VERSION)


class CorruptLineWarning(UserWarning):
    """A corrupt line was skipped because the saver was opened with ``on_corrupt="skip"``."""


_P = ParamSpec("_P")
_T = TypeVar("_T")
_CHANGED_RETRIES = 5


def _retry_on_change(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run the call again when storage reports that a log changed under it.

    Only storage without reader locks (Redis) raises `LogChangedError`: a read
    found the log rewritten since it was indexed, or a conditional append found
    lines it had not read (a writer whose lock expired). Nothing was applied,
    and the next attempt re-reads the log first. JSONL never raises it.
    """

    @functools.wraps(method)
    def retrying(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        for _ in range(_CHANGED_RETRIES - 1):
            try:
                return method(*args, **kwargs)
            except LogChangedError:
                continue
        return method(*args, **kwargs)

    return retrying


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint as `LogSaver.checkpoint_infos` lists it: everything but its values."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    ts: str
    metadata: dict[str, Any]
    channel_versions: dict[str, Any]
    versions_seen: dict[str, dict[str, Any]]
    line: int
    """The checkpoint's 1-based line in the thread's log."""

    @property
    def config(self) -> RunnableConfig:
        """The config that names this checkpoint (for `get_tuple`, `graph.get_state`)."""
        return _config(self.thread_id, self.checkpoint_ns, self.checkpoint_id)


class _LRU(OrderedDict):  # type: ignore[type-arg]
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
class _Ckpt:
    """What the index keeps of one checkpoint line."""

    ns: str
    id: str
    line: int
    parent: str | None
    run_id: str | None
    versions: dict[str, Any]  # channel_versions, derived from the parent line if not stored
    seen: dict[str, Any]  # versions_seen, likewise (dicts shared with the parent when unchanged)
    meta: dict[str, Any] | None  # metadata when plain JSON (derived like the above), else None
    stored: dict[str, Any]  # channel -> the version its value on this line is stored under
    counters: frozenset[str]  # DeltaChannels that need their history at this checkpoint
    delta_base: frozenset[str]  # DeltaChannels whose history is folded into this line


@dataclass(slots=True)
class _Write:
    path: str
    channel: str
    line: int
    pos: int  # index in the line's "w" list


def _fresh_copy(message: BaseMessage) -> BaseMessage:
    """A copy that shares nothing mutable with ``message`` (cheaper than re-validating)."""
    fresh = copy.copy(message)
    for key, value in message.__dict__.items():
        if isinstance(value, (dict, list)) and value:
            fresh.__dict__[key] = copy.deepcopy(value)
    return fresh


def _fingerprint(m: BaseMessage) -> tuple[Any, ...]:
    """Cheap identity check that a cached message object was not changed since."""
    content = m.content
    return (
        m.id,
        content if type(content) is str else id(content),
        id(m.additional_kwargs),
        id(m.response_metadata),
        id(getattr(m, "tool_calls", None)),
    )


@dataclass
class _Index:
    """Everything known about one thread's log, by line number."""

    where: str
    reader: Callable[[list[int]], dict[int, bytes]] | None
    lines: int = 0
    header: dict[str, Any] | None = None
    next_msg: int = 0
    msg_lines: dict[int, int] = field(default_factory=dict)
    # Content addresses for de-duplication, computed lazily: only writers need them.
    msg_digest: dict[bytes, int] = field(default_factory=dict)
    msg_noid: dict[bytes, int] = field(default_factory=dict)
    undigested: list[int] = field(default_factory=list)
    ckpts: dict[tuple[str, str], _Ckpt] = field(default_factory=dict)
    ckpt_at: dict[int, _Ckpt] = field(default_factory=dict)
    append_base: dict[tuple[int, str], int] = field(default_factory=dict)
    by_ns: dict[str, list[str]] = field(default_factory=dict)
    blobs: dict[tuple[str, str, Any], list[tuple[str, int]]] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    error: CorruptLogError | None = None
    parsed: _LRU = field(default_factory=lambda: _LRU(16384))
    refs: _LRU = field(default_factory=lambda: _LRU(512))
    templates: _LRU = field(default_factory=lambda: _LRU(16384))
    # (line, channel) -> the message objects of that list value (a copy of the list):
    # the next step's list shares them, and is compared with it by identity.
    list_objs: _LRU = field(default_factory=lambda: _LRU(32))
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
        for n, raw in self.reader(missing).items():
            try:
                self.parsed.put(n, loads_line(raw))
            except CodecError as exc:
                raise self.corrupt(n, str(exc)) from None

    def add(self, obj: dict[str, Any], n: int) -> None:
        """Index one parsed line; raises `CodecError` (or Key/Type errors) if malformed."""
        kind = obj["t"]
        if (kind == "thread") != (n == 1):
            raise CodecError(
                "the first line must be the thread header"
                if n == 1
                else "a thread header may only be the first line"
            )
        if kind == "thread":
            self.header = obj
        elif kind == "msg":
            ordinal = obj["n"]
            if type(ordinal) is not int or ordinal < 0:
                raise CodecError("message line needs a non-negative integer 'n'")
            if "like" in obj:
                like = obj["like"]
                if type(like) is not int or like not in self.msg_lines or like >= ordinal:
                    raise CodecError(f"'like' must name an earlier message, got {like!r}")
            elif "msg" not in obj and "serde" not in obj:
                raise CodecError("message line has neither 'msg' nor 'serde'")
            self.add_message_line(ordinal, n)
        elif kind == "ckpt":
            self._add_ckpt(obj, n)
        else:
            self._add_writes(obj, n)
        self.lines = n

    def add_message_line(self, ordinal: int, n: int) -> None:
        self.msg_lines[ordinal] = n
        self.next_msg = max(self.next_msg, ordinal + 1)
        self.undigested.append(ordinal)
        self.lines = n

    def ensure_digests(self) -> None:
        """Content addresses of every message, for a writer to de-duplicate against."""
        if not self.undigested:
            return
        pending, self.undigested = self.undigested, []
        self.prefetch(self.msg_lines[o] for o in pending)
        for ordinal in pending:
            line_no = self.msg_lines[ordinal]
            obj = self.line(line_no)
            if "like" in obj:
                body: dict[str, Any] = {"msg": self.message_json(ordinal)}
            else:
                body = {k: obj[k] for k in ("msg", "type", "id", "serde") if k in obj}
                noid = message_digest_without_id(body)
                if noid is not None:
                    self.msg_noid.setdefault(noid, ordinal)
            self.msg_digest.setdefault(message_digest(body), ordinal)

    def _add_ckpt(self, obj: dict[str, Any], n: int) -> None:
        ns, cid, parent_ref = obj.get("ns", ""), obj["id"], obj.get("parent")
        if not (isinstance(ns, str) and isinstance(cid, str) and cid):
            raise CodecError("checkpoint line needs string 'id' and 'ns'")
        parent: _Ckpt | None = None
        if type(parent_ref) is int:
            parent = self.ckpt_at.get(parent_ref)
            if parent is None or parent.ns != ns or parent_ref >= n:
                raise CodecError(f"'parent' line {parent_ref} is not an earlier checkpoint")
            parent_id: str | None = parent.id
        elif parent_ref is None or isinstance(parent_ref, str):
            parent_id = parent_ref
        else:
            raise CodecError("checkpoint 'parent' must be a line number or an id")
        values = obj.get("values", {})
        if not isinstance(values, dict) or not all(
            isinstance(e, list) and len(e) in (1, 2) for e in values.values()
        ):
            raise CodecError(
                "checkpoint 'values' must map channels to [version] or [version, value]"
            )
        stored = {ch: e[0] for ch, e in values.items()}
        if "versions" in obj:
            versions = obj["versions"]
        else:
            versions = {**parent.versions, **stored} if parent else dict(stored)
        if "seen" in obj:
            seen = obj["seen"]
        else:
            delta = obj.get("seen_delta") or {}
            base = parent.seen if parent else {}
            seen = {**base, **delta} if delta else base
        if not isinstance(versions, dict) or not isinstance(seen, dict):
            raise CodecError("checkpoint 'versions' and 'seen' must be objects")
        meta = _derive_meta(obj, parent)
        counters = (meta or {}).get("counters_since_delta_snapshot") or {}
        run_id = (meta or {}).get("run_id")
        entry = _Ckpt(
            ns=ns,
            id=cid,
            line=n,
            parent=parent_id,
            run_id=run_id if isinstance(run_id, str) else None,
            versions=versions,
            seen=seen,
            meta=meta,
            stored=stored,
            counters=frozenset(counters) if isinstance(counters, dict) else frozenset(),
            delta_base=frozenset(obj.get("delta_base") or ()),
        )
        for ch, e in values.items():
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
        for ch, ver in stored.items():
            self.blobs.setdefault((ns, ch, ver), []).append((cid, n))

    def _add_writes(self, obj: dict[str, Any], n: int) -> None:
        ns, cid, task = obj.get("ns", ""), obj["ckpt"], obj["task"]
        if type(cid) is int:
            target = self.ckpt_at.get(cid)
            if target is None or cid >= n:
                raise CodecError(f"writes refer to line {cid}, which is not an earlier checkpoint")
            ns, cid = target.ns, target.id
        path, items = obj.get("path", ""), obj["w"]
        if not (isinstance(cid, str) and isinstance(task, str) and isinstance(path, str)):
            raise CodecError("writes line needs string 'ckpt', 'task' and 'path'")
        if not isinstance(items, list):
            raise CodecError("writes line needs a list 'w'")
        stored = self.writes.setdefault((ns, cid), {})
        for pos, item in enumerate(items):
            if not (
                isinstance(item, list)
                and len(item) == 3
                and type(item[0]) is int
                and isinstance(item[1], str)
            ):
                raise CodecError("each write must be [index, channel, value]")
            key = (task, item[0])
            if item[0] >= 0 and key in stored:
                continue  # the first write of a (task, index) wins, as in put_writes
            stored[key] = _Write(path, item[1], n, pos)

    # -------------------------------------------------------------- queries

    def named(self, ns: str, checkpoint_id: str | None) -> _Ckpt | None:
        """The checkpoint a config names, or the latest of the namespace."""
        return self.ckpts.get((ns, checkpoint_id)) if checkpoint_id else self.latest(ns)

    def latest(self, ns: str) -> _Ckpt | None:
        ids = self.by_ns.get(ns)
        return self.ckpts[(ns, ids[-1])] if ids else None

    def find(self, checkpoint_id: str, ns: str | None = "") -> _Ckpt | None:
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
            except (CodecError, AttributeError) as exc:
                raise self.corrupt(cur, f"channel {channel!r}: {exc}") from None
            if "append" in enc:
                steps.append((cur, None, refs))
                cur = self.append_base[(cur, channel)]
                continue
            base = enc.get("base")
            if base is None:
                value = list(refs)
                break
            keep = enc.get("keep")
            if type(base) is not int or not 1 <= base < cur or type(keep) is not int or keep < 0:
                raise self.corrupt(cur, f"channel {channel!r}: bad 'base'/'keep' reference")
            steps.append((cur, keep, refs))
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

    def body_line(self, ordinal: int) -> int:
        """The line holding a message's body (following ``like`` lines)."""
        line_no = self.msg_lines[ordinal]
        obj = self.line(line_no)
        return self.body_line(obj["like"]) if "like" in obj else line_no

    def message_json(self, ordinal: int) -> dict[str, Any]:
        """The readable body of a message (``like`` lines resolved), as a fresh dict."""
        line_no = self.msg_lines.get(ordinal)
        if line_no is None:
            raise self.corrupt(None, f"message #{ordinal} is referenced but not in the file")
        obj = self.line(line_no)
        if "like" in obj:
            body = self.message_json(obj["like"])
            if obj.get("id") is None:
                body.pop("id", None)
            else:
                body["id"] = obj["id"]
            return body
        if not isinstance(obj.get("msg"), dict):
            raise self.corrupt(line_no, "a 'like' line must point to a readable message")
        return dict(obj["msg"])

    def message(self, ordinal: int, serde: SerializerProtocol) -> BaseMessage:
        """A fresh message object for an ordinal (validated once, then copied)."""
        template = self.templates.get_hit(ordinal)
        if template is None:
            line_no = self.msg_lines.get(ordinal)
            if line_no is None:
                raise self.corrupt(None, f"message #{ordinal} is referenced but not in the file")
            obj = self.line(line_no)
            body_line = line_no
            try:
                if "like" in obj:
                    body_line = self.body_line(ordinal)
                    template = message_from_json(self.message_json(ordinal))
                else:
                    template = message_from_body(obj, serde)
            except CodecError as exc:
                note = (
                    f" (the body of message #{ordinal}, line {line_no})"
                    if body_line != line_no
                    else ""
                )
                raise self.corrupt(body_line, f"{exc}{note}") from None
            self.templates.put(ordinal, template)
        # Not remembered by identity: a decoded list is matched as a whole next time
        # (`list_objs`); a weakref per message would cost every read O(history).
        return _fresh_copy(template)

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


class _Batch:
    """Lines one call will append: new messages first, then the line itself."""

    def __init__(self, index: _Index, serde: SerializerProtocol) -> None:
        self.index = index
        self.serde = serde
        self.lines: list[dict[str, Any]] = []
        self.new_digests: dict[bytes, int] = {}
        self.new_noids: dict[bytes, int] = {}
        self._new_msgs = 0
        self.seen: list[tuple[BaseMessage, tuple[Any, ...], int]] = []
        self.list_memo: dict[str, list[int]] = {}
        self.list_objs: dict[str | None, list[BaseMessage]] = {}

    def ref(self, msg: BaseMessage) -> int:
        fingerprint = _fingerprint(msg)
        hit = self.index.ident.get(id(msg))
        if hit is not None and hit[0]() is msg and hit[1] == fingerprint:
            return hit[2]  # type: ignore[no-any-return]
        # LangGraph's reducer may give the message an id while a background put
        # serializes it: keep the fingerprint of exactly what was serialized.
        while True:
            body = message_body(msg, self.serde)
            after = _fingerprint(msg)
            if after == fingerprint:
                break
            fingerprint = after
        digest = message_digest(body)
        self.index.ensure_digests()
        ordinal = self.index.msg_digest.get(digest)
        if ordinal is None:
            ordinal = self.new_digests.get(digest)
        if ordinal is None:
            ordinal = self.index.next_msg + self._new_msgs
            self._new_msgs += 1
            self.new_digests[digest] = ordinal
            line: dict[str, Any] = {"v": FORMAT_VERSION, "t": "msg", "n": ordinal}
            noid = message_digest_without_id(body)
            like = None
            if noid is not None:
                like = self.index.msg_noid.get(noid)
                if like is None:
                    like = self.new_noids.get(noid)
                    if like is None:
                        self.new_noids[noid] = ordinal
            if like is not None:  # the same message again, with the id LangGraph gave it
                line.update(like=like, id=msg.id)
            else:
                line.update(body)
            self.lines.append(line)
        self.seen.append((msg, fingerprint, ordinal))
        return ordinal

    def value(
        self, value: Any, base: tuple[int, list[int]] | None = None, channel: str | None = None
    ) -> tuple[Any, Any]:
        """``(encoded, refs)``; ``refs`` are the message ordinals of a message list.

        With a ``base`` (the channel's value at the parent, as ``(line, refs)``),
        the messages the list shares with the parent's list object by identity
        are taken from it unread: a C-level list comparison, then Python work
        only for the new messages. Saved messages are treated as immutable, as
        LangGraph's reducers treat them.
        """
        if not (type(value) is list and value and isinstance(value[0], BaseMessage)):
            return encode_value(value, self.ref, self.serde), None
        shared = 0
        if base is not None:
            known = self.index.list_objs.get_hit((base[0], channel))
            if known is not None:
                limit = min(len(known), len(value), len(base[1]))
                if value[:limit] == known[:limit]:  # identical objects compare in C
                    shared = limit
                else:
                    while shared < limit and value[shared] is known[shared]:
                        shared += 1
        rest = value[shared:]
        if not all(isinstance(m, BaseMessage) for m in rest):
            return encode_value(value, self.ref, self.serde), None
        refs = base[1][:shared] if base is not None else []
        refs.extend([self.ref(m) for m in rest])
        self.list_objs[channel] = value.copy()
        if base is None:
            return {"msgs": refs}, refs
        base_line, base_refs = base
        keep = shared
        limit = min(len(base_refs), len(refs))
        while keep < limit and base_refs[keep] == refs[keep]:
            keep += 1
        if keep == len(base_refs):
            return {"append": refs[keep:]}, refs
        if keep:
            return {"msgs": refs[keep:], "keep": keep, "base": base_line}, refs
        return {"msgs": refs}, refs


class LogSaver(BaseCheckpointSaver[int]):
    """LangGraph checkpointer over a `LogStorage` backend (see `JsonlSaver`).

    Args:
        storage: Where thread logs live.
        serde: Serializer for values that are not plain JSON or messages.
            Defaults to LangGraph's `JsonPlusSerializer` in strict mode: only
            its safe-type allowlist (plus ``allowed_types``) is ever rebuilt
            from a file, so a tampered log cannot construct arbitrary objects.
        allowed_types: Extra classes (or ``(module, name)`` pairs) your state
            holds that the serializer may rebuild.
        on_corrupt: ``"raise"`` (default) raises `CorruptLogError` naming the
            file and line; ``"skip"`` skips the line with a warning.
    """

    def __init__(
        self,
        storage: LogStorage,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        on_corrupt: OnCorrupt = "raise",
    ) -> None:
        if serde is None:
            allowed = [*PACKAGE_MODELS, *allowed_types]
            serde = JsonPlusSerializer(allowed_msgpack_modules=allowed)
        super().__init__(serde=serde)
        if on_corrupt not in ("raise", "skip"):
            raise ValueError("on_corrupt must be 'raise' or 'skip'")
        self.storage = storage
        self.on_corrupt = on_corrupt
        self._indexes: dict[str, _Index] = {}

    # ------------------------------------------------------------- indexing

    @contextmanager
    def _view(self, thread_id: str, *, exclusive: bool = False) -> Iterator[_Index]:
        with self.storage.locked(thread_id, exclusive=exclusive):
            yield self._sync(thread_id)

    def _sync(self, thread_id: str) -> _Index:
        synced = self.storage.sync(thread_id)
        index = self._indexes.get(thread_id)
        if index is None or synced.reset:
            index = self._new_index(thread_id)
        if index.error is not None:
            raise index.error
        # A cold scan of a long log keeps no parsed lines: thousands of live dicts
        # would make every garbage collection walk them (and LangGraph's heap) again.
        fresh_tail = len(synced.lines) <= 64
        for offset, raw in enumerate(synced.lines):
            n = synced.first_line + offset
            match = _MSG_PREFIX.match(raw)
            if match is not None and n > 1:
                # A message line is parsed when it is first read, not to index it.
                index.add_message_line(int(match.group(1)), n)
                continue
            try:
                obj = loads_line(raw)
                index.add(obj, n)
            except (CodecError, KeyError, TypeError, ValueError) as exc:
                reason = exc.args[0] if isinstance(exc, CodecError) else f"malformed line ({exc!r})"
                err = CorruptLogError(index.where, n, str(reason))
                if self.on_corrupt == "skip":
                    warnings.warn(f"skipping: {err}", CorruptLineWarning, stacklevel=4)
                    index.lines = n
                    continue
                index.error = err
                raise err from None
            if fresh_tail:  # lines appended since our last look are likely read next
                index.parsed.put(n, obj)
        return index

    def _new_index(self, thread_id: str) -> _Index:
        reader = getattr(self.storage, "read_many", None)
        if reader is None:

            def read_each(lines: list[int]) -> dict[int, bytes]:
                return {n: self.storage.read(thread_id, n) for n in lines}

            read = read_each
        else:

            def read(lines: list[int]) -> dict[int, bytes]:
                return reader(thread_id, lines)  # type: ignore[no-any-return]

        index = _Index(where=self.storage.describe(thread_id), reader=read)
        self._indexes[thread_id] = index
        return index

    def _commit(self, thread_id: str, index: _Index, batch: _Batch) -> int:
        """Append a batch (with the header if the log is new); return the last line."""
        lines = list(batch.lines)
        if index.lines == 0:
            lines.insert(0, _header(thread_id))
        first = self.storage.append(thread_id, [dumps_line(obj) for obj in lines])
        return _apply(index, batch, lines, first)

    # ----------------------------------------------------------- decoding

    def _decode(self, index: _Index, enc: Any, line: int, channel: str) -> Any:
        """Decode one encoded value found on ``line`` (for ``channel``)."""

        def load_refs(e: Mapping[str, Any]) -> list[int]:
            if e is enc and ("base" in e or "append" in e):
                return index.materialize(line, channel)
            if "base" in e or "append" in e:
                raise CodecError("only a channel value may refer to an earlier value")
            return refs_of(e)

        try:
            ordinals = _ordinals(enc, load_refs)
            index.prefetch(index.msg_lines[o] for o in ordinals if o in index.msg_lines)
            return decode_value(enc, lambda o: index.message(o, self.serde), load_refs, self.serde)
        except CodecError as exc:
            raise index.corrupt(line, f"channel {channel!r}: {exc}") from None

    def _values(self, index: _Index, entry: _Ckpt) -> dict[str, Any]:
        found: list[tuple[str, int]] = []
        for channel, version in entry.versions.items():
            writer = index.resolve(entry.ns, channel, version, entry.id)
            if writer is not None:
                found.append((channel, writer[1]))
        index.prefetch(line for _, line in found)
        values: dict[str, Any] = {}
        for channel, line in found:
            present, enc = index.value_enc(line, channel)
            if present:
                value = values[channel] = self._decode(index, enc, line, channel)
                if isinstance(enc, dict) and ("msgs" in enc or "append" in enc):
                    index.list_objs.put((line, channel), value.copy())
        return values

    def _pending_writes(
        self, index: _Index, entry: _Ckpt, channels: set[str] | None = None
    ) -> list[PendingWrite]:
        """The checkpoint's writes in `writes_sort_key` order (only ``channels`` if given)."""
        stored = index.writes.get((entry.ns, entry.id))
        if not stored:
            return []
        ordered = sorted(
            ((key, w) for key, w in stored.items() if channels is None or w.channel in channels),
            key=lambda kv: writes_sort_key(kv[1].path, *kv[0]),
        )
        index.prefetch(w.line for _, w in ordered)
        out: list[PendingWrite] = []
        for (task_id, _), w in ordered:
            enc = index.line(w.line)["w"][w.pos][2]
            out.append((task_id, w.channel, self._decode(index, enc, w.line, w.channel)))
        return out

    def _tuple(self, thread_id: Any, index: _Index, entry: _Ckpt) -> CheckpointTuple:
        line = index.line(entry.line)
        try:
            metadata = self._metadata(entry, line)
            checkpoint = self._checkpoint(index, entry, line, self._values(index, entry))
        except CodecError as exc:
            raise index.corrupt(entry.line, str(exc)) from None
        return CheckpointTuple(
            config=_config(thread_id, entry.ns, entry.id),
            checkpoint=checkpoint,
            metadata=metadata,  # type: ignore[arg-type]
            parent_config=_config(thread_id, entry.ns, entry.parent) if entry.parent else None,
            pending_writes=self._pending_writes(index, entry),
        )

    def _metadata(self, entry: _Ckpt, line: Mapping[str, Any]) -> dict[str, Any]:
        if entry.meta is not None:
            return copy.deepcopy(entry.meta)
        return metadata_from_fields(line, self.serde)

    def _checkpoint(
        self, index: _Index, entry: _Ckpt, line: Mapping[str, Any], values: dict[str, Any]
    ) -> Checkpoint:
        if "updated" in line:
            updated = line["updated"]
        else:
            updated = sorted(ch for ch, e in line.get("values", {}).items() if len(e) == 2)
        checkpoint: dict[str, Any] = {
            "v": line.get("cv", DEFAULT_CHECKPOINT_VERSION),
            "id": entry.id,
            "ts": line.get("ts", ""),
            "channel_values": values,
            "channel_versions": dict(entry.versions),
            "versions_seen": {k: dict(v) for k, v in entry.seen.items()},
            "updated_channels": updated,
        }
        for key, value in extra_from_fields(line, self.serde).items():
            checkpoint.setdefault(key, value)
        return checkpoint  # type: ignore[return-value]

    # --------------------------------------------------------- encoding

    def _checkpoint_batch(
        self,
        index: _Index,
        ns: str,
        parent_id: str | None,
        checkpoint: Checkpoint,
        metadata: Mapping[str, Any],
        new_versions: ChannelVersions,
        delta_base: Mapping[str, DeltaChannelHistory] | None = None,
    ) -> _Batch:
        """The lines of one checkpoint: new messages, then the ``ckpt`` line.

        Versions and versions-seen are written as changes from the parent line
        when the parent is in this log; the reader derives the rest.
        """
        batch = _Batch(index, self.serde)
        parent = index.ckpts.get((ns, parent_id)) if parent_id else None
        values = checkpoint["channel_values"]
        encoded: dict[str, list[Any]] = {}
        for channel, version in new_versions.items():
            if channel not in values:
                encoded[channel] = [version]
                continue
            value = values[channel]
            base = (
                self._list_base(index, parent, channel)
                if type(value) is list and value and isinstance(value[0], BaseMessage)
                else None
            )
            enc, refs = batch.value(value, base, channel)
            encoded[channel] = [version, enc]
            if refs is not None:
                batch.list_memo[channel] = refs
        line: dict[str, Any] = {"v": FORMAT_VERSION, "t": "ckpt"}
        if ns:
            line["ns"] = ns
        line["id"] = checkpoint["id"]
        if parent is not None:
            line["parent"] = parent.line
        elif parent_id:
            line["parent"] = parent_id
        if checkpoint.get("v", DEFAULT_CHECKPOINT_VERSION) != DEFAULT_CHECKPOINT_VERSION:
            line["cv"] = checkpoint["v"]
        line["ts"] = checkpoint["ts"]
        versions = dict(checkpoint.get("channel_versions") or {})
        derived = {**parent.versions, **new_versions} if parent else dict(new_versions)
        if versions != derived:
            line["versions"] = versions
        seen = checkpoint.get("versions_seen") or {}
        if parent is None or not set(parent.seen) <= set(seen):
            line["seen"] = seen
        else:
            delta = {node: vs for node, vs in seen.items() if parent.seen.get(node) != vs}
            if delta:
                line["seen_delta"] = delta
        updated = checkpoint.get("updated_channels")
        if updated != sorted(ch for ch, e in encoded.items() if len(e) == 2):
            line["updated"] = updated
        line.update(_meta_fields(metadata, parent, self.serde))
        line.update(extra_fields(checkpoint, self.serde))
        line["values"] = encoded
        if delta_base:
            line["delta_base"] = {
                ch: {
                    **({"seed": batch.value(h["seed"])[0]} if "seed" in h else {}),
                    "writes": [[task, batch.value(v)[0]] for task, _, v in h["writes"]],
                }
                for ch, h in delta_base.items()
            }
        batch.lines.append(line)
        return batch

    def _list_base(
        self, index: _Index, parent: _Ckpt | None, channel: str
    ) -> tuple[int, list[int]] | None:
        if parent is None or channel not in parent.versions:
            return None
        writer = index.resolve(parent.ns, channel, parent.versions[channel], parent.id)
        if writer is None:
            return None
        present, enc = index.value_enc(writer[1], channel)
        if not present or not isinstance(enc, dict) or not ("msgs" in enc or "append" in enc):
            return None
        return writer[1], index.materialize(writer[1], channel)

    def _writes_batch(
        self,
        index: _Index,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        items: Iterable[tuple[int, str, Any]],
    ) -> _Batch | None:
        batch = _Batch(index, self.serde)
        encoded = [[idx, channel, batch.value(value)[0]] for idx, channel, value in items]
        if not encoded:
            return None
        line: dict[str, Any] = {"v": FORMAT_VERSION, "t": "writes"}
        target = index.ckpts.get((ns, checkpoint_id))
        if target is not None:
            line["ckpt"] = target.line
        else:
            if ns:
                line["ns"] = ns
            line["ckpt"] = checkpoint_id
        line["task"] = task_id
        if task_path:
            line["path"] = task_path
        line["w"] = encoded
        batch.lines.append(line)
        return batch

    # ------------------------------------------------- BaseCheckpointSaver

    @_retry_on_change
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's latest.

        Example:
            ```python
            tup = saver.get_tuple({"configurable": {"thread_id": "task-001"}})
            tup.checkpoint["channel_values"]["messages"]
            ```
        """
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self._view(thread_id) as index:
            entry = index.named(ns, get_checkpoint_id(config))
            if entry is None:
                return None
            return self._tuple(conf["thread_id"], index, entry)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, optionally of one thread / namespace, filtered.

        Example:
            ```python
            for tup in saver.list({"configurable": {"thread_id": "task-001"}}, limit=5):
                print(tup.checkpoint["id"], tup.metadata["step"])
            ```
        """
        if config is not None:
            conf = config["configurable"]
            threads: Iterable[Any] = [conf["thread_id"]]
            ns_filter = conf.get("checkpoint_ns")
            id_filter = get_checkpoint_id(config)
        else:
            threads, ns_filter, id_filter = list(self.storage.thread_ids()), None, None
        before_id = get_checkpoint_id(before) if before else None
        remaining = limit
        for thread in threads:
            if remaining is not None and remaining <= 0:
                return
            found = self._list_thread(thread, ns_filter, id_filter, before_id, filter, remaining)
            if remaining is not None:
                remaining -= len(found)
            yield from found

    @_retry_on_change
    def _list_thread(
        self,
        thread: Any,
        ns_filter: str | None,
        id_filter: str | None,
        before_id: str | None,
        meta_filter: dict[str, Any] | None,
        limit: int | None,
    ) -> list[CheckpointTuple]:
        thread_id = check_thread_id(thread)
        out: list[CheckpointTuple] = []
        with self._view(thread_id) as index:
            entries = [
                e
                for e in index.ckpts.values()
                if (ns_filter is None or e.ns == ns_filter)
                and (id_filter is None or e.id == id_filter)
                and (before_id is None or e.id < before_id)
            ]
            entries.sort(key=lambda e: (e.id, e.ns), reverse=True)
            for entry in entries:
                if limit is not None and len(out) >= limit:
                    break
                if meta_filter:
                    try:
                        meta = self._metadata(entry, index.line(entry.line))
                    except CodecError as exc:
                        raise index.corrupt(entry.line, str(exc)) from None
                    if not all(meta.get(k) == v for k, v in meta_filter.items()):
                        continue
                out.append(self._tuple(thread, index, entry))
        return out

    @_retry_on_change
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append a checkpoint: new messages once, changed channels only."""
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self._view(thread_id, exclusive=True) as index:
            batch = self._checkpoint_batch(
                index,
                ns,
                conf.get("checkpoint_id"),
                checkpoint,
                get_checkpoint_metadata(config, metadata),
                new_versions,
            )
            self._commit(thread_id, index, batch)
        return _config(conf["thread_id"], ns, checkpoint["id"])

    @_retry_on_change
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append the writes of one task against a checkpoint."""
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns, checkpoint_id = conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        with self._view(thread_id, exclusive=True) as index:
            stored = index.writes.get((ns, checkpoint_id), {})
            items = []
            for idx, (channel, value) in enumerate(writes):
                widx = WRITES_IDX_MAP.get(channel, idx)
                if widx >= 0 and (task_id, widx) in stored:
                    continue
                items.append((widx, channel, value))
            batch = self._writes_batch(index, ns, checkpoint_id, task_id, task_path, items)
            if batch is not None:
                self._commit(thread_id, index, batch)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's log, its revert backups and its context archives
        (``<thread>.ctx.<id>`` threads, with their index)."""
        thread_id = check_thread_id(thread_id)
        with self.storage.locked(thread_id, exclusive=True):
            self.storage.delete(thread_id)
            self._indexes.pop(thread_id, None)
        from langgraph_ctx.context.archive.store import delete_archives

        delete_archives(self, thread_id)

    @_retry_on_change
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) made by these runs, in every thread.

        Checkpoints that survive keep working: a `DeltaChannel` history that ran
        through a deleted checkpoint is folded into the survivor first.
        """
        runs = set(run_ids)
        if not runs:
            return
        for thread_id in list(self.storage.thread_ids()):
            with self._view(thread_id, exclusive=True) as index:
                if not any(e.run_id in runs for e in index.ckpts.values()):
                    continue
                keep = [e for e in index.ckpts.values() if e.run_id not in runs]
                if keep:
                    self._rebuild(thread_id, index, keep)
                else:
                    self.storage.delete(thread_id)
                    self._indexes.pop(thread_id, None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to a new thread id."""
        self.fork(source_thread_id, target_thread_id)

    @_retry_on_change
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep the latest checkpoint of each namespace (with its
        writes; `DeltaChannel` history folded in). ``"delete"``: delete the threads."""
        if strategy == "delete":
            for thread_id in thread_ids:
                self.delete_thread(thread_id)
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread in thread_ids:
            thread_id = check_thread_id(thread)
            with self._view(thread_id, exclusive=True) as index:
                keep = [index.latest(ns) for ns in index.by_ns]
                keep_ids = {(e.ns, e.id) for e in keep if e}
                dropped_writes = any(key not in keep_ids for key in index.writes)
                if len(keep_ids) < len(index.ckpts) or dropped_writes:
                    self._rebuild(thread_id, index, [e for e in keep if e])

    @_retry_on_change
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of `DeltaChannel`s along the checkpoint's ancestors,
        read straight from the index (no `get_tuple` per ancestor)."""
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id = check_thread_id(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self._view(thread_id) as index:
            return self._history(index, index.named(ns, get_checkpoint_id(config)), channels)

    def _history(
        self, index: _Index, target: _Ckpt | None, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        newest_first: dict[str, list[PendingWrite]] = {ch: [] for ch in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        cur = target
        visited: set[str] = set()
        while cur is not None and remaining and cur.id not in visited:
            visited.add(cur.id)
            for channel in sorted(remaining & cur.delta_base):
                folded = index.line(cur.line)["delta_base"][channel]
                for task, enc in reversed(folded.get("writes", [])):
                    value = self._decode(index, enc, cur.line, channel)
                    newest_first[channel].append((task, channel, value))
                if "seed" in folded:
                    seeds[channel] = self._decode(index, folded["seed"], cur.line, channel)
                remaining.discard(channel)
            parent = index.ckpts.get((cur.ns, cur.parent)) if cur.parent else None
            if parent is None or not remaining:
                break
            parent_writes = self._pending_writes(index, parent, remaining)
            for task_id, channel, value in reversed(parent_writes):
                newest_first[channel].append((task_id, channel, value))
            for channel in sorted(remaining):
                version = parent.versions.get(channel)
                if version is None:
                    continue
                writer = index.resolve(parent.ns, channel, version, parent.id)
                if writer is None:
                    continue
                present, enc = index.value_enc(writer[1], channel)
                if present:
                    seeds[channel] = self._decode(index, enc, writer[1], channel)
                    remaining.discard(channel)
            cur = parent
        result: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(newest_first[channel]))}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            result[channel] = entry
        return result

    # ----------------------------------------------------------- rewrites

    def _rebuild(self, thread_id: str, index: _Index, keep: Sequence[_Ckpt]) -> None:
        """Rewrite the log with only ``keep`` (and their writes), atomically.

        Values stay incremental: a kept checkpoint stores the channels it
        stored before, plus those whose writer is gone. A kept checkpoint whose
        parent is gone gets its `DeltaChannel` history folded in.
        """
        keep = sorted(keep, key=lambda e: e.line)
        kept = {(e.ns, e.id) for e in keep}
        new = _Index(where=index.where, reader=None)
        new.parsed.limit = None
        out: list[dict[str, Any]] = [index.header or _header(thread_id)]
        new.add(out[0], 1)
        new.parsed.put(1, out[0])
        for entry in keep:
            line = index.line(entry.line)
            try:
                metadata = self._metadata(entry, line)
            except CodecError as exc:
                raise index.corrupt(entry.line, str(exc)) from None
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
                    values[channel] = self._decode(index, enc, writer[1], channel)
            checkpoint = self._checkpoint(index, entry, line, values)
            lost_parent = entry.parent is not None and (entry.ns, entry.parent) not in kept
            folded = None
            if lost_parent and entry.counters:
                folded = self._history(index, entry, sorted(entry.counters))
            batch = self._checkpoint_batch(
                new,
                entry.ns,
                entry.parent,
                checkpoint,
                metadata,
                new_versions,
                folded,  # type: ignore[arg-type]
            )
            _apply(new, batch, batch.lines, len(out) + 1)
            out.extend(batch.lines)
            for task_id, task_path, items in self._writes_by_task(index, entry):
                wbatch = self._writes_batch(new, entry.ns, entry.id, task_id, task_path, items)
                if wbatch is not None:
                    _apply(new, wbatch, wbatch.lines, len(out) + 1)
                    out.extend(wbatch.lines)
        self.storage.replace(thread_id, (dumps_line(obj) for obj in out), backup=False)
        self._indexes.pop(thread_id, None)

    def _writes_by_task(
        self, index: _Index, entry: _Ckpt
    ) -> list[tuple[str, str, list[tuple[int, str, Any]]]]:
        stored = index.writes.get((entry.ns, entry.id), {})
        groups: dict[tuple[int, str], tuple[str, list[tuple[int, str, Any]]]] = {}
        for (task_id, idx), w in sorted(stored.items(), key=lambda kv: (kv[1].line, kv[1].pos)):
            enc = index.line(w.line)["w"][w.pos][2]
            value = self._decode(index, enc, w.line, w.channel)
            groups.setdefault((w.line, task_id), (w.path, []))[1].append((idx, w.channel, value))
        return [(task, path, items) for (_, task), (path, items) in groups.items()]

    # --------------------------------------------------------- fork/revert

    @_retry_on_change
    def fork(
        self,
        source_thread_id: str,
        target_thread_id: str,
        *,
        checkpoint_id: str | None = None,
    ) -> RunnableConfig:
        """Copy a thread to a new thread id, whole or as it was at ``checkpoint_id``.

        The fork is an independent log: later changes to either thread do not
        show in the other. Returns the config of the fork's latest checkpoint.

        Example:
            ```python
            head = saver.fork("task-001", "task-001-retry")
            graph.invoke({"messages": [("user", "try again")]}, head)
            ```

        Raises:
            ThreadNotFoundError: the source has no log.
            ThreadExistsError: the target already has one.
            CheckpointNotFoundError: ``checkpoint_id`` is not in the source.
        """
        source = check_thread_id(source_thread_id)
        target = check_thread_id(target_thread_id)
        if source == target:
            raise ValueError("source and target thread ids are the same")
        first, second = sorted([source, target])
        with (
            self.storage.locked(first, exclusive=True),
            self.storage.locked(second, exclusive=True),
        ):
            index = self._sync(source)
            if index.lines == 0:
                raise ThreadNotFoundError(source)
            if self._sync(target).lines > 0:
                raise ThreadExistsError(target)
            n_lines = None
            if checkpoint_id is not None:
                entry = index.find(checkpoint_id, ns=None)
                if entry is None:
                    raise CheckpointNotFoundError(source, checkpoint_id)
                n_lines = entry.line
            header = _header(
                target, forked_from={"thread_id": source, "checkpoint_id": checkpoint_id}
            )
            self.storage.copy(source, target, n_lines, dumps_line(header))
            self._indexes.pop(target, None)
            return self._head_config(target_thread_id, self._sync(target))

    @_retry_on_change
    def revert(self, thread_id: str, checkpoint_id: str) -> RunnableConfig:
        """Roll a thread back to a checkpoint, keeping the old log as a backup.

        The thread becomes exactly what it was when ``checkpoint_id`` was
        saved. The previous log is kept as ``<thread>.jsonl.1`` (older backups
        shift to ``.2``, ``.3``, ...). Returns the config of the new head.

        Example:
            ```python
            history = list(graph.get_state_history(config))
            saver.revert("task-001", history[3].config["configurable"]["checkpoint_id"])
            ```
        """
        tid = check_thread_id(thread_id)
        with self._view(tid, exclusive=True) as index:
            if index.lines == 0:
                raise ThreadNotFoundError(tid)
            entry = index.find(checkpoint_id, ns=None)
            if entry is None:
                raise CheckpointNotFoundError(tid, checkpoint_id)
            self.storage.truncate(tid, entry.line, backup=True)
            self._indexes.pop(tid, None)
            return self._head_config(thread_id, self._sync(tid))

    @_retry_on_change
    def checkpoint_infos(self, thread_id: str) -> list[CheckpointInfo]:
        """Every checkpoint of a thread (all namespaces) in log order, without its values.

        Ids, parents, timestamps, metadata and channel versions come from the
        saver's index, so this costs one read of the checkpoint lines and no
        message is rebuilt: use it to show a long history, where `list` would
        decode every state. ``[]`` when the thread has no log.

        Example:
            ```python
            for info in saver.checkpoint_infos("task-001"):
                print(info.checkpoint_id, info.metadata.get("step"), info.ts)
            ```
        """
        tid = check_thread_id(thread_id)
        out: list[CheckpointInfo] = []
        with self._view(tid) as index:
            entries = sorted(index.ckpts.values(), key=lambda e: e.line)
            for start in range(0, len(entries), 1024):
                chunk = entries[start : start + 1024]
                index.prefetch(e.line for e in chunk)
                for entry in chunk:
                    line = index.line(entry.line)
                    try:
                        metadata = self._metadata(entry, line)
                    except CodecError as exc:
                        raise index.corrupt(entry.line, str(exc)) from None
                    out.append(
                        CheckpointInfo(
                            thread_id=thread_id,
                            checkpoint_ns=entry.ns,
                            checkpoint_id=entry.id,
                            parent_checkpoint_id=entry.parent,
                            ts=str(line.get("ts", "")),
                            metadata=metadata,
                            channel_versions=dict(entry.versions),
                            versions_seen={k: dict(v) for k, v in entry.seen.items()},
                            line=entry.line,
                        )
                    )
        return out

    def list_threads(self, *, include_archives: bool = False) -> list[str]:
        """Every thread id that has a log; context archives (``<thread>.ctx.<id>``, the
        forks ``chat_context_new`` makes) only with ``include_archives``.

        Example:
            ```python
            for thread_id in saver.list_threads():
                print(thread_id)
            ```
        """
        from langgraph_ctx.context.archive.forks import is_archive_thread

        ids = self.storage.thread_ids()
        return [t for t in ids if include_archives or not is_archive_thread(t)]

    @staticmethod
    def _head_config(thread_id: Any, index: _Index) -> RunnableConfig:
        head = index.latest("")
        return _config(thread_id, "", head.id if head else None)

    # -------------------------------------------------------------- async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    async def afork(
        self,
        source_thread_id: str,
        target_thread_id: str,
        *,
        checkpoint_id: str | None = None,
    ) -> RunnableConfig:
        """Async `fork`."""
        return await asyncio.to_thread(
            lambda: self.fork(source_thread_id, target_thread_id, checkpoint_id=checkpoint_id)
        )

    async def arevert(self, thread_id: str, checkpoint_id: str) -> RunnableConfig:
        """Async `revert`."""
        return await asyncio.to_thread(self.revert, thread_id, checkpoint_id)

    def sweep(
        self,
        *,
        older_than: str | timedelta,
        keep_latest: bool = False,
        dry_run: bool = False,
        include_archives: bool = False,
    ) -> SweepReport:
        """Delete (or, with ``keep_latest``, trim) threads idle longer than ``older_than``
        (``"30d"``, a `timedelta`): `langgraph_ctx.saver.retention.sweep` on this saver.

        Example:
            ```python
            saver.sweep(older_than="30d", dry_run=True).deleted   # what would go
            ```
        """
        from langgraph_ctx.saver.retention import sweep

        return sweep(
            self,
            older_than=older_than,
            keep_latest=keep_latest,
            dry_run=dry_run,
            include_archives=include_archives,
        )


# ------------------------------------------------------------------- helpers


def _config(thread_id: Any, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _header(thread_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "v": FORMAT_VERSION,
        "t": "thread",
        "thread_id": thread_id,
        "created": datetime.now(timezone.utc).isoformat(),
        **extra,
    }


def _apply(index: _Index, batch: _Batch, lines: Sequence[dict[str, Any]], first: int) -> int:
    """Index lines that now sit at ``first``, ``first + 1``, ... of the log."""
    n = first
    for obj in lines:
        index.add(obj, n)
        index.parsed.put(n, obj)
        n += 1
    last = n - 1
    if batch.new_digests:  # digests the batch already computed need no second pass
        index.msg_digest.update(batch.new_digests)
        for noid, ordinal in batch.new_noids.items():
            index.msg_noid.setdefault(noid, ordinal)
        fresh = set(batch.new_digests.values())
        index.undigested = [o for o in index.undigested if o not in fresh]
    for channel, refs in batch.list_memo.items():
        index.refs.put((last, channel), refs)
        objs = batch.list_objs.get(channel)
        if objs is not None:
            index.list_objs.put((last, channel), objs)
    for msg, fingerprint, ordinal in batch.seen:
        index.remember(msg, ordinal, fingerprint)
    return last


def _meta_fields(
    metadata: Mapping[str, Any], parent: _Ckpt | None, serde: SerializerProtocol
) -> dict[str, Any]:
    """``meta`` in full, or ``meta_delta``: the keys that differ from the parent's
    (``step`` left out when it is the parent's plus one)."""
    fields = metadata_fields(metadata, serde)
    base = parent.meta if parent is not None else None
    if "meta" not in fields or base is None or not set(base) <= set(metadata):
        return fields
    delta = {k: v for k, v in metadata.items() if k == "step" or base.get(k) != v}
    step = base.get("step")
    if type(step) is int and delta.get("step") == step + 1 and type(delta["step"]) is int:
        del delta["step"]
    elif "step" not in metadata:
        delta.pop("step", None)
    return {"meta_delta": delta} if delta else {}


def _derive_meta(obj: Mapping[str, Any], parent: _Ckpt | None) -> dict[str, Any] | None:
    """The metadata of a ``ckpt`` line as the index keeps it (``None``: serialized)."""
    if "meta_serde" in obj:
        return None
    if "meta" in obj or parent is None or parent.meta is None:
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            raise CodecError("checkpoint 'meta' must be an object")
        return meta
    delta = obj.get("meta_delta") or {}
    if not isinstance(delta, dict):
        raise CodecError("checkpoint 'meta_delta' must be an object")
    meta = {**parent.meta, **delta}
    step = parent.meta.get("step")
    if "step" not in delta and type(step) is int:
        meta["step"] = step + 1
    return meta


def _ordinals(enc: Any, load_refs: Callable[[Mapping[str, Any]], list[int]]) -> list[int]:
    """Every message ordinal an encoded value references (to prefetch their lines)."""
    if not isinstance(enc, dict):
        return []
    if "msgs" in enc or "append" in enc:
        return load_refs(enc)
    if "msg" in enc:
        return [enc["msg"]] if type(enc["msg"]) is int else []
    if "dict" in enc and isinstance(enc["dict"], dict):
        return [o for v in enc["dict"].values() for o in _ordinals(v, load_refs)]
    if "snap" in enc:
        return _ordinals(enc["snap"], load_refs)
    return []
