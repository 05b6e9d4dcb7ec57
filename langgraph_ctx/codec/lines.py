"""The lines of a thread log: build, parse and validate.

Every line is one JSON object carrying the format version (``"v"``) and its
kind (``"t"``), and (format 2) ending with its checksum ``"c"``: the CRC-32 of
the line's bytes without that key, in 6 base64url characters (`seal_line`). A line whose
checksum does not match was changed after it was written (a flipped bit, an
edit): every reader refuses it, naming the line. Format-1 lines have no
checksum and still read (``langgraph-ctx verify`` counts them).

``thread``
    The first line of every log: ``{"v":1,"t":"thread","thread_id":...,"created":...}``.
``msg``
    One LangChain message, written once and referenced afterwards by its
    ordinal ``"n"``: ``{"v":1,"t":"msg","n":3,"msg":{"type":"ai","content":...,"id":...}}``.
    A message that differs from an earlier one only by its id (LangGraph gives
    ids to messages after they were first saved) is ``{"n":4,"like":3,"id":...}``.
``ckpt``
    A checkpoint: ids, timestamps, channel versions, metadata, and the values
    of the channels that changed (``"values"``, each ``[version]`` or
    ``[version, encoded]``). What the parent line already says is not
    repeated: versions, versions seen (``seen_delta``) and metadata
    (``meta_delta``) are written as changes from the parent, and a message
    list as "the parent's value, then these" (``append``) or "the first *k*
    messages of the value on line *L*, then these" (``keep`` / ``base``).
``writes``
    The pending writes of one task against one checkpoint.
``snap``
    A snapshot of what a reader needs to know of the lines before it to read
    the latest state (`snapshot_line`), written every `SNAPSHOT_EVERY` lines or
    so: a cold open starts at the last one instead of parsing the whole log.

The builders here and the parsers undo each other; the saver's index and
``langgraph-ctx verify`` both read lines through them. (One module, ~1,000 lines, on
purpose: each kind's builder sits next to its parser, and the envelope and checksum
every line shares next to both, so a change to the grammar is one diff.) Values are in
`langgraph_ctx.codec.values`, message bodies in `langgraph_ctx.codec.messages`.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import operator
import re
import struct
import sys
import uuid
import zlib
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import accumulate, repeat
from typing import Any, cast

import orjson
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.codec.messages import has_nonfinite, json_copy
from langgraph_ctx.codec.values import (
    ListLoader,
    is_plain_json,
    refs_of,
    serde_decode,
    serde_encode,
)
from langgraph_ctx.codec.versions import (
    check_put_versions,
    pack_seen,
    pack_version,
    pack_versions,
    unpack_seen,
    unpack_versions,
)
from langgraph_ctx.errors import CodecError

FORMAT_VERSION = 2
"""Version written on every line but those that need `NEWEST_VERSION`.

1: no checksum. 2: every line ends with its checksum ``"c"`` (`seal_line`). 3: a
``ckpt`` or ``writes`` line whose values hold a message list that begins with a
checkpoint line's list (`based_link`): a line is written in the oldest format that
reads it, so a log stays readable by an older release until it holds such a line."""

NEWEST_VERSION = 3
"""The newest format this package reads and writes. Readers refuse lines from a newer one."""

CHECKSUM_FROM = 2
"""The first format version whose lines must carry a checksum."""

LINE_KINDS = frozenset({"thread", "msg", "ckpt", "writes", "snap"})

DEFAULT_CHECKPOINT_VERSION = 4
"""LangGraph's checkpoint format version; ``"cv"`` is written only when it differs."""

# Checkpoint keys with their own place on a ``ckpt`` line; others go to ``extra``.
KNOWN_CHECKPOINT_KEYS = frozenset(
    {"v", "id", "ts", "channel_values", "channel_versions", "versions_seen", "updated_channels"}
)

# --------------------------------------------------------------------------- JSON


# `,"c":"` + 6 base64url characters + `"}`: the checksum is always the line's last key.
_SUFFIX_LEN = 14


def _crc(raw: bytes | memoryview, crc: int = 0) -> bytes:
    """CRC-32 of ``raw`` (continuing ``crc``) in 6 base64url characters (8 hex digits
    would cost 2 bytes more on every line). ``base64.urlsafe_b64encode``'s result, by
    its two C steps (every line read checks one)."""
    raw64 = binascii.b2a_base64(zlib.crc32(raw, crc).to_bytes(4, "big") + b"\0", newline=False)
    return raw64[:6].translate(_URLSAFE)


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def seal_line(raw: bytes) -> bytes:
    """A JSON object line (no newline, no checksum) with its checksum ``"c"`` added last.

    The checksum is the CRC-32 of ``raw``: the line as it reads without the key.
    It catches accidents (a flipped bit, a truncated edit), not an attacker, who
    can recompute it. Returns the sealed line without a newline.

    >>> seal_line(b'{"v":2,"t":"thread","thread_id":"t"}')
    b'{"v":2,"t":"thread","thread_id":"t","c":"P1b9rA"}'
    """
    return b'%s,"c":"%s"}' % (raw[:-1], _crc(raw))


def line_checksum(raw: bytes) -> bool | None:
    """Whether a line (without its newline) carries a checksum that matches it.

    ``True``: it ends with a checksum that matches; ``False``: it ends with one
    that does not; ``None``: it carries none (a format-1 line, or a line whose
    end was damaged; `loads_line` tells the two apart by the format version).

    >>> line_checksum(seal_line(b'{"v":2,"t":"msg"}'))
    True
    >>> line_checksum(b'{"v":1,"t":"msg"}') is None
    True
    """
    if raw[-_SUFFIX_LEN:-8] != b',"c":"' or raw[-2:] != b'"}':
        return None
    return _crc(b"}", zlib.crc32(memoryview(raw)[:-_SUFFIX_LEN])) == raw[-8:-2]


def check_line(raw: bytes) -> None:
    """Raise `CodecError` unless a line's checksum matches (without parsing the line,
    when it has one), or the line is of format 1, which has none."""
    checked = line_checksum(raw)
    if checked:
        return
    if checked is False:
        raise CodecError(
            "checksum mismatch: the line was changed after it was written "
            "(a damaged disk or an edit)"
        )
    if not raw.startswith(b'{"v":1,'):
        loads_line(raw)  # raises the precise error, or accepts a format-1 line


# orjson for speed, with everything json.dumps would not write left to json.dumps.
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _not_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def dumps_line(obj: Mapping[str, Any]) -> bytes:
    """One compact JSON line with its checksum, newline included, UTF-8 (non-ASCII kept
    readable). A ``"c"`` key in ``obj`` (the checksum of a line read before) is replaced.

    ``orjson`` writes it (several times faster than ``json``); what it refuses or would
    write wrong (NaN as ``null``, subclasses, lone surrogates) goes through ``json.dumps``
    (`_dumps_by_json`), which decides as before.

    >>> dumps_line({"v": 2, "t": "thread", "thread_id": "t"})
    b'{"v":2,"t":"thread","thread_id":"t","c":"P1b9rA"}\\n'
    >>> dumps_line({"v": 2, "t": "msg", "n": 2**64})
    Traceback (most recent call last):
    TypeError: Integer exceeds 64-bit range (18446744073709551616), as LangGraph's savers \
say too: store it as a string
    """
    if "c" in obj:
        obj = {k: v for k, v in obj.items() if k != "c"}
    try:
        raw: bytes | None = orjson.dumps(obj, default=_not_json, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        raw = None
    # orjson writes a NaN or an infinity as null: let json refuse those (a None, the
    # usual null, needs no second encoding).
    if raw is None or (b"null" in raw and has_nonfinite(obj)):
        raw = _dumps_by_json(obj)
    return seal_line(raw) + b"\n"


def _dumps_by_json(obj: Mapping[str, Any]) -> bytes:
    """``obj`` as ``json.dumps`` writes it, for what orjson refuses.

    An integer beyond 64 bits raises `TypeError`, as in LangGraph's savers (msgpack): the
    file could hold it, but orjson reads it back as a float, silently another number. A
    string with a lone surrogate (``"caf\\udcff"``, from ``surrogateescape``) is written
    escaped, the line in ASCII: `loads_line` gives back that very string (LangGraph's
    savers write ``?`` for it).
    """
    wide = wide_int(obj)
    if wide is not None:
        raise TypeError(
            f"Integer exceeds 64-bit range ({wide}), as LangGraph's savers say too: "
            "store it as a string"
        )
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot hold: escaped
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")


def wide_int(value: Any) -> int | None:
    """The first integer in ``value`` (or its dicts, lists and tuples) that 64 bits
    do not hold, signed or not: what orjson refuses to write and reads as a float.
    (A log written before such integers were refused may hold some: `langgraph-ctx
    verify` names their lines, `wide_int_in_line`.)"""
    if isinstance(value, int):
        return None if -(2**63) <= value < 2**64 else value
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return None
    for item in items:
        found = wide_int(item)
        if found is not None:
            return found
    return None


def loads_line(raw: bytes) -> dict[str, Any]:
    """Parse and check one line (without its newline): checksum, format version, kind.

    The returned dict does not hold the checksum.
    """
    checked = line_checksum(raw)
    if checked is False:
        check_line(raw)  # raises
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # orjson refuses some valid JSON (an escaped lone surrogate)
            obj = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CodecError(f"not valid JSON ({exc})") from None
        except RecursionError:  # nested deeper than any value of LangGraph's (orjson: 1024)
            raise CodecError("nested too deep to read (over 1,024 levels)") from None
    if not isinstance(obj, dict):
        raise CodecError("a line must be a JSON object")
    version = obj.get("v")
    if type(version) is not int or version < 1:
        raise CodecError(f"line has no format version 'v' (got {version!r})")
    if version > NEWEST_VERSION:
        raise CodecError(
            f"line has format version {version}, newer than this langgraph-ctx reads "
            f"({NEWEST_VERSION}); upgrade langgraph-ctx"
        )
    if checked is None and version >= CHECKSUM_FROM:
        raise CodecError(
            f"line of format {version} has no checksum 'c' at its end "
            "(it was changed after it was written)"
        )
    obj.pop("c", None)
    if obj.get("t") not in LINE_KINDS:
        raise CodecError(f"unknown line kind {obj.get('t')!r}")
    return obj


def loads_lines(raws: Sequence[bytes]) -> list[dict[str, Any] | None]:
    """`loads_line` for many lines (a cold open reads hundreds of message lines).

    Each line gets the checks `loads_line` makes (checksum, JSON object, format
    version, kind), the checksums in a few C-level passes over all the lines
    (`checksums_match`) rather than a Python call each. A line that does not pass
    is ``None``: the caller reads it with `loads_line`, which names what is wrong.

    >>> good = seal_line(b'{"v":2,"t":"msg","n":0}')
    >>> loads_lines([good, good[:-3] + b'x"}'])
    [{'v': 2, 't': 'msg', 'n': 0}, None]
    """
    objs = _parsed_all(raws)
    if objs is None:
        out: list[dict[str, Any] | None] = []
        for raw in raws:
            try:
                out.append(loads_line(raw))
            except CodecError:
                out.append(None)
        return out
    kinds = LINE_KINDS
    for i, obj in enumerate(objs):
        if type(obj) is dict:
            version = obj.get("v")
            if type(version) is int and 0 < version <= NEWEST_VERSION and obj.get("t") in kinds:
                obj.pop("c", None)
                continue
        objs[i] = None
    return objs


def loads_message_lines(raws: Sequence[bytes], ordinals: Sequence[int]) -> list[Any]:
    """`loads_lines` for ``msg`` lines, each expected to hold the ordinal at its place in
    ``ordinals``: a line that is not exactly that message's is ``None`` too, and the
    checks are one loop with the parse's (a cold open reads its head's messages so).

    >>> ok = seal_line(b'{"v":2,"t":"msg","n":3,"like":1,"id":"x"}')
    >>> loads_message_lines([ok, ok], [3, 4])
    [{'v': 2, 't': 'msg', 'n': 3, 'like': 1, 'id': 'x'}, None]
    """
    objs = _parsed_all(raws)
    if objs is None:
        return [
            obj if obj is not None and obj.get("t") == "msg" and obj.get("n") == o else None
            for obj, o in zip(loads_lines(raws), ordinals, strict=True)
        ]
    versions = _READ_VERSIONS
    for i, (obj, o) in enumerate(zip(objs, ordinals, strict=True)):
        if (
            type(obj) is dict
            and obj.get("n") == o
            and obj.get("t") == "msg"
            and obj.get("v") in versions
            and type(obj["v"]) is int
        ):
            obj.pop("c", None)
        else:
            objs[i] = None
    return objs


def _parsed_all(raws: Sequence[bytes]) -> list[Any] | None:
    """Every line parsed in one C-level pass if all their checksums match and all parse;
    ``None`` otherwise (the caller then reads line by line, to name what is wrong)."""
    if not raws or not checksums_match(raws):
        return None
    try:
        return list(map(orjson.loads, raws))
    except orjson.JSONDecodeError:  # one bad line (or an escaped lone surrogate)
        return None


_READ_VERSIONS = tuple(range(1, NEWEST_VERSION + 1))
"""The format versions a reader takes (an int among them: `loads_line`'s check)."""

_CHECKED_PART = operator.itemgetter(slice(None, -_SUFFIX_LEN))
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_BASE64URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def checksums_match(raws: Sequence[bytes]) -> bool:
    """Whether `line_checksum` is ``True`` for every line, in C-level passes.

    Each stored checksum (6 base64url characters: 4 CRC bytes and 4 zero bits) is
    padded to a full 8-character group and all are decoded at once, then
    compared with the CRC-32 of each line as `line_checksum` computes it. The
    suffixes are checked and the checksums gathered as columns of the lines' last
    14 bytes (strided slices), not a slice of each line apiece.

    >>> checksums_match([seal_line(b'{"v":2,"t":"msg"}'), seal_line(b'{"v":2}')])
    True
    >>> checksums_match([seal_line(b'{"v":2,"t":"msg"}')[:-3] + b'A"}'])
    False
    """
    n = len(raws)
    if not n:
        return True
    # Each line's last 14 bytes, side by side: the fixed bytes of the suffix are
    # compared column by column, the checksums taken out as columns.
    tails = b"".join(map(_SUFFIX, raws))
    if len(tails) != _SUFFIX_LEN * n:  # a line shorter than a checksum's suffix
        return False
    for at, byte in _SUFFIX_FRAME:
        if tails[at::_SUFFIX_LEN] != byte * n:
            return False
    stored = bytearray(8 * n)  # each checksum padded to an 8-character group
    for k in range(6):
        stored[k::8] = tails[6 + k :: _SUFFIX_LEN]
    stored[6::8] = stored[7::8] = b"A" * n
    if stored.translate(None, _BASE64URL):  # a character base64url has not (which
        return False  # decoding would skip): unequal, as `line_checksum` finds it
    try:
        decoded = binascii.a2b_base64(stored.translate(_FROM_URLSAFE))
    except binascii.Error:
        return False
    if decoded[4::6] != bytes(n) or decoded[5::6] != bytes(n):  # the 4 + 12 zero bits
        return False
    found = bytearray(4 * n)
    for k in range(4):
        found[k::4] = decoded[k::6]
    crcs = map(zlib.crc32, repeat(b"}"), map(zlib.crc32, map(_CHECKED_PART, raws)))
    return struct.pack(f">{n}I", *crcs) == found


_SUFFIX = operator.itemgetter(slice(-_SUFFIX_LEN, None))
_SUFFIX_FRAME = [(at, b',"c":"XXXXXX"}'[at : at + 1]) for at in (0, 1, 2, 3, 4, 5, 12, 13)]
"""The fixed bytes of a checksum's suffix, by position (the 6 others are the checksum)."""


def loads_sealed(raw: bytes) -> dict[str, Any]:
    """A line `dumps_line` just made (newline included), as `loads_line` reads it.

    For the writer, which must index what any later reader will parse: the same
    parse, without the checks `dumps_line` already guarantees (checksum, format
    version, kind).

    >>> loads_sealed(dumps_line({"v": 2, "t": "msg", "pair": (1, 2)}))
    {'v': 2, 't': 'msg', 'pair': [1, 2]}
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:  # as in loads_line: an escaped lone surrogate
        obj = json.loads(raw)
    del obj["c"]
    return obj  # type: ignore[no-any-return]


def check_position(kind: str, n: int) -> None:
    """A thread header is the first line, and only the first."""
    if (kind == "thread") != (n == 1):
        raise CodecError(
            "the first line must be the thread header"
            if n == 1
            else "a thread header may only be the first line"
        )


# ------------------------------------------------------------------ thread, msg


VERSIONS_AS_PUT = "langgraph"
"""The header's ``"versions"`` in logs begun since the saver numbers versions as
LangGraph does: channel versions read back exactly as they were put. A log
without it is older: its integer versions are the saver's own numbering and read
as LangGraph's strings (`langgraph_ctx.codec.versions`)."""


def thread_line(thread_id: str, *, legacy_versions: bool = False, **extra: Any) -> dict[str, Any]:
    """The header of a new log (``extra``: e.g. ``forked_from``).

    ``legacy_versions``: the log continues an older one (a fork of it) whose
    integer versions must still read as strings, so the header leaves out
    ``"versions"``.
    """
    line: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "t": "thread",
        "thread_id": thread_id,
        "created": datetime.now(timezone.utc).isoformat(),
    }
    if not legacy_versions:
        line["versions"] = VERSIONS_AS_PUT
    line.update(extra)
    return line


def copied_thread_ids(source_header: Mapping[str, Any] | None, source_id: str) -> list[str]:
    """The header's ``copied_thread_ids`` for a copy of a log: the ids whose
    checkpoints the copy holds (the source's, and those its source copied).

    A copy is the source's lines, byte for byte; its checkpoints' metadata still
    names an earlier ``thread_id``, which reads as the copy's own (`own_thread_id`).
    """
    earlier = (source_header or {}).get("copied_thread_ids")
    ids = [i for i in earlier if isinstance(i, str)] if isinstance(earlier, list) else []
    return [*ids, source_id] if source_id not in ids else ids


def own_thread_id(metadata: dict[str, Any], header: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` with a copied checkpoint's ``thread_id`` made the log's own (in place)."""
    if header and "thread_id" in metadata:
        copied = header.get("copied_thread_ids")
        own = header.get("thread_id")
        if isinstance(copied, list) and isinstance(own, str) and metadata["thread_id"] in copied:
            metadata["thread_id"] = own
    return metadata


def has_legacy_versions(header: Mapping[str, Any] | None) -> bool:
    """True when a log's integer versions are the old saver's numbering (see `thread_line`)."""
    return header is None or header.get("versions") != VERSIONS_AS_PUT


def message_line(ordinal: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """A ``msg`` line holding its own body (see `langgraph_ctx.codec.messages`)."""
    return {"v": FORMAT_VERSION, "t": "msg", "n": ordinal, **body}


def like_line(ordinal: int, like: int, message_id: Any) -> dict[str, Any]:
    """A ``msg`` line: message ``like`` again, with another id."""
    return {"v": FORMAT_VERSION, "t": "msg", "n": ordinal, "like": like, "id": message_id}


_MSG_PREFIX = re.compile(rb'\{"v":[12],"t":"msg","n":(\d+),')


def peek_message_ordinal(raw: bytes) -> int | None:
    """The ordinal of a ``msg`` line as `dumps_line` writes it, without parsing the line.

    ``None`` for any other line (parse it). A reader indexes a message line by
    this and parses its body only when the message is first read.

    >>> peek_message_ordinal(b'{"v":2,"t":"msg","n":12,"msg":{"type":"ai","content":""}}')
    12

    The line's checksum is not checked here (see `check_line`).
    """
    match = _MSG_PREFIX.match(raw)
    return None if match is None else int(match.group(1))


def peek_message_ordinals(raws: Sequence[bytes]) -> list[int | None]:
    """`peek_message_ordinal` of each line, the prefixes matched in one C-level pass
    (a cold open peeks at every line after its snapshot).

    >>> peek_message_ordinals([b'{"v":2,"t":"msg","n":0,"like":1}', b'{"v":2,"t":"ckpt"}'])
    [0, None]
    """
    return [None if m is None else int(m[1]) for m in map(_MSG_PREFIX.match, raws)]


def message_ordinal(obj: Mapping[str, Any]) -> int:
    """The ordinal ``n`` of a ``msg`` line."""
    n = obj.get("n")
    if type(n) is not int or n < 0:
        raise CodecError(f"message line's 'n' must be a non-negative integer, got {n!r}")
    return n


def message_like(obj: Mapping[str, Any], ordinal: int, known: Container[int]) -> int | None:
    """The earlier message a ``like`` line repeats (``None``: the line has its own body).

    ``known``: the ordinals defined on earlier lines.
    """
    if "like" in obj:
        like = obj["like"]
        if type(like) is not int or like >= ordinal or like not in known:
            raise CodecError(f"'like' must name an earlier message, got {like!r}", dangling=True)
        return like
    if "msg" not in obj and "serde" not in obj:
        raise CodecError(f"message #{ordinal} has neither 'msg' nor 'serde'")
    return None


# ------------------------------------------------------------------------- ckpt


@dataclass(slots=True)
class CheckpointHead:
    """What a ``ckpt`` line says once its parent is known: everything but its values."""

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


def checkpoint_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(ns, id)`` of a ``ckpt`` line."""
    ns, cid = obj.get("ns", ""), obj.get("id")
    if not (isinstance(ns, str) and isinstance(cid, str) and cid):
        raise CodecError("checkpoint line needs string 'id' and 'ns'")
    return ns, cid


def checkpoint_parent(
    obj: Mapping[str, Any], n: int, ckpt_at: Mapping[int, CheckpointHead]
) -> tuple[CheckpointHead | None, str | None]:
    """The parent of the ``ckpt`` line ``n``: ``(its head if on an earlier line, its id)``.

    ``ckpt_at``: the heads of the earlier checkpoint lines, by line.
    """
    ref = obj.get("parent")
    if type(ref) is int:
        parent = ckpt_at.get(ref)
        if parent is None or ref >= n:
            raise CodecError(f"'parent' is line {ref}, not an earlier checkpoint", dangling=True)
        if parent.ns != obj.get("ns", ""):
            raise CodecError(
                f"'parent' line {ref} is a checkpoint of another namespace", dangling=True
            )
        return parent, parent.id
    if ref is None or isinstance(ref, str):
        return None, ref
    raise CodecError("checkpoint 'parent' must be a line number or an id")


def checkpoint_values(obj: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The ``values`` of a ``ckpt`` line: channel -> ``[version]`` or ``[version, encoded]``."""
    values = obj.get("values", {})
    if not isinstance(values, dict):
        raise CodecError("checkpoint 'values' must be an object")
    for channel, item in values.items():
        if not (isinstance(item, list) and len(item) in (1, 2)):
            raise CodecError(f"channel {channel!r} must be [version] or [version, value]")
    return values


def check_checkpoint_fields(obj: Mapping[str, Any]) -> None:
    """The fields of a ``ckpt`` line that must be objects are (the deltas may be empty)."""
    for key in ("meta", "versions", "seen"):
        if key in obj and not isinstance(obj[key], dict):
            raise CodecError(f"checkpoint {key!r} must be an object")
    for key in ("meta_delta", "seen_delta", "delta_base"):
        if obj.get(key) and not isinstance(obj[key], dict):
            raise CodecError(f"checkpoint {key!r} must be an object")


def parse_checkpoint_line(
    obj: Mapping[str, Any],
    n: int,
    ckpt_at: Mapping[int, CheckpointHead],
    *,
    legacy_versions: bool = False,
) -> CheckpointHead:
    """The head of the ``ckpt`` line ``n``, with what it leaves to its parent filled in.

    ``legacy_versions``: the log is older than string versions (`has_legacy_versions`);
    its integer versions read as LangGraph's strings (see `langgraph_ctx.codec.versions`).
    """
    ns, cid = checkpoint_key(obj)
    parent, parent_id = checkpoint_parent(obj, n, ckpt_at)
    values = checkpoint_values(obj)
    check_checkpoint_fields(obj)
    # Versions are packed in the line (`codec.versions.pack_version`); a legacy
    # log's integers read as strings.
    legacy = legacy_versions
    stored: Any = unpack_versions({ch: e[0] for ch, e in values.items()}, legacy=legacy)
    versions_line: Any = obj.get("versions")
    if versions_line is not None:
        versions_line = dict(unpack_versions(versions_line, legacy=legacy))
    seen_line: Any = obj.get("seen")
    if seen_line is not None:
        seen_line = unpack_seen(seen_line, legacy=legacy)
    seen_delta: Any = unpack_seen(obj.get("seen_delta") or {}, legacy=legacy)
    if "versions" in obj:
        versions = versions_line
    else:
        versions = {**parent.versions, **stored} if parent else dict(stored)
    if "seen" in obj:
        seen = seen_line
    else:
        delta = seen_delta
        base = parent.seen if parent else {}
        seen = {**base, **delta} if delta else base
    meta = _derive_meta(obj, parent)
    counters = (meta or {}).get("counters_since_delta_snapshot") or {}
    run_id = (meta or {}).get("run_id")
    return CheckpointHead(  # by position (a cold open makes one per line after a snapshot)
        ns,
        cid,
        n,
        parent_id,
        run_id if isinstance(run_id, str) else None,
        versions,
        seen,
        meta,
        stored,
        frozenset(counters) if counters and isinstance(counters, dict) else NO_CHANNELS,
        frozenset(obj["delta_base"]) if obj.get("delta_base") else NO_CHANNELS,
    )


# One empty set for every checkpoint that names no channel (most): each ``frozenset()``
# is an object of its own (216 bytes), and a long thread indexes thousands of heads.
NO_CHANNELS: frozenset[str] = frozenset()


def checkpoint_line(
    ns: str,
    checkpoint: Mapping[str, Any],
    parent: CheckpointHead | None,
    parent_id: str | None,
    values: dict[str, list[Any]],
    metadata: Mapping[str, Any],
    new_versions: Mapping[str, Any],
    serde: SerializerProtocol,
    delta_base: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``ckpt`` line of a checkpoint whose changed channels are encoded in ``values``.

    Versions, versions-seen and metadata are written as changes from
    ``parent`` (the head of the parent line, when it is in this log); the
    reader (`parse_checkpoint_line`) derives the rest.
    """
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
    line["ts"] = _short_ts(checkpoint["ts"], checkpoint["id"])
    versions = checkpoint.get("channel_versions") or {}
    if type(versions) is not dict:
        versions = dict(versions)
    seen = checkpoint.get("versions_seen") or {}
    check_put_versions(versions, new_versions, seen)  # refused before anything is written
    derived = {**parent.versions, **new_versions} if parent else dict(new_versions)
    if versions != derived:
        line["versions"] = pack_versions(versions)
    if parent is None or not parent.seen.keys() <= seen.keys():
        line["seen"] = pack_seen(seen)
    else:
        delta = {node: vs for node, vs in seen.items() if parent.seen.get(node) != vs}
        if delta:
            line["seen_delta"] = pack_seen(delta)
    updated = checkpoint.get("updated_channels")
    if updated != _updated(values):
        line["updated"] = updated
    line.update(_meta_fields(metadata, parent, serde))
    line.update(extra_fields(checkpoint, serde))
    line["values"] = {ch: [pack_version(e[0]), *e[1:]] for ch, e in values.items()}
    if delta_base:
        line["delta_base"] = delta_base
    return line


def checkpoint_from_line(
    line: Mapping[str, Any],
    head: CheckpointHead,
    values: dict[str, Any],
    serde: SerializerProtocol,
    *,
    as_stored: bool = False,
) -> dict[str, Any]:
    """LangGraph's `Checkpoint` for a ``ckpt`` line, given its decoded channel ``values``.

    ``as_stored``: for a rewrite, which writes the checkpoint again (`checkpoint_line`):
    serialized extra keys stay as stored (`EXTRA_AS_STORED`), not decoded (the process
    may lack an application class they hold)."""
    updated = line["updated"] if "updated" in line else _updated(line.get("values", {}))
    checkpoint: dict[str, Any] = {
        "v": line.get("cv", DEFAULT_CHECKPOINT_VERSION),
        "id": head.id,
        "ts": checkpoint_ts(line, head.id),
        "channel_values": values,
        "channel_versions": dict(head.versions),
        "versions_seen": {k: dict(v) for k, v in head.seen.items()},
        "updated_channels": updated,
    }
    if as_stored and "extra_serde" in line:
        checkpoint[EXTRA_AS_STORED] = line["extra_serde"]
        return checkpoint
    for key, value in extra_from_fields(line, serde).items():
        checkpoint.setdefault(key, value)
    return checkpoint


def checkpoint_metadata(
    head: CheckpointHead, line: Mapping[str, Any], serde: SerializerProtocol
) -> dict[str, Any]:
    """The metadata of a ``ckpt`` line (a fresh copy when the head holds it)."""
    if head.meta is not None:
        return cast(dict[str, Any], json_copy(head.meta))  # parsed JSON: as deepcopy, faster
    return metadata_from_fields(line, serde)


_UTC_TS = re.compile(r"(\d{4}-\d\d-\d\d)(T\d\d:\d\d:\d\d(?:\.\d+)?)\+00:00")
# 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH = 0x01B21DD213814000


# A canonical version-6 UUID (RFC 4122 variant): `_id_date` reads its time without `uuid.UUID`.
_V6_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-6[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_DAY_TICKS = 86_400 * 10_000_000
# The day `_id_date` found last: ``[first tick, end tick, date]``, a second inside its bounds
# (the division by 1e7 that `datetime` is given rounds; a second is far beyond its error).
_LAST_DAY: list[Any] = [0, 0, None]


def _id_date(checkpoint_id: str) -> str | None:
    """The UTC date in a LangGraph checkpoint id (a version-6 UUID holds its time).

    Every put and every read of a ``ts`` asks; the ids of one day share the answer, so a
    canonical id of the day found last costs a match and a comparison.
    """
    if type(checkpoint_id) is str and _V6_ID.fullmatch(checkpoint_id):
        ticks = int(checkpoint_id[0:8] + checkpoint_id[9:13] + checkpoint_id[15:18], 16)
        day = _LAST_DAY
        if day[0] <= ticks < day[1]:
            return day[2]  # type: ignore[no-any-return]
        date = _id_date_of(checkpoint_id)
        start = (ticks - _UUID_EPOCH) // _DAY_TICKS * _DAY_TICKS + _UUID_EPOCH
        first, end = start + 10_000_000, start + _DAY_TICKS - 10_000_000
        if date is not None and first <= ticks < end:
            _LAST_DAY[:] = [first, end, date]
        return date
    return _id_date_of(checkpoint_id)


def _id_date_of(checkpoint_id: str) -> str | None:
    try:
        u = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if u.version != 6:
        return None
    ticks = ((u.int >> 80) << 12) | ((u.int >> 64) & 0xFFF)
    try:
        when = datetime.fromtimestamp((ticks - _UUID_EPOCH) / 1e7, timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None
    return when.date().isoformat()


def _short_ts(ts: Any, checkpoint_id: str) -> Any:
    """``ts`` without its date and zone when the id holds the same UTC date (``T12:00:01.5``).

    LangGraph's timestamps are UTC and its ids carry their time, so the date on
    every ``ckpt`` line is the id's; dropping it pays for the line's checksum.
    Undone by `checkpoint_ts`.

    >>> _short_ts("2026-11-23T11:04:13.963241+00:00", "1f1e72d9-e3e6-6fd7-8004-66189353ea14")
    'T11:04:13.963241'
    >>> _short_ts("2026-11-23T11:04:13+01:00", "1f1e72d9-e3e6-6fd7-8004-66189353ea14")
    '2026-11-23T11:04:13+01:00'
    """
    if not isinstance(ts, str):
        return ts
    match = _UTC_TS.fullmatch(ts)
    if match is None or _id_date(checkpoint_id) != match.group(1):
        return ts
    return match.group(2)


def checkpoint_ts(line: Mapping[str, Any], checkpoint_id: str) -> str:
    """The checkpoint's ``ts`` as LangGraph wrote it (see `_short_ts`)."""
    ts = line.get("ts", "")
    if isinstance(ts, str) and ts.startswith("T"):
        date = _id_date(checkpoint_id)
        if date is None:
            raise CodecError("checkpoint 'ts' holds only a time, and its id no date")
        return f"{date}{ts}+00:00"
    return str(ts)


def _updated(values: Mapping[str, Sequence[Any]]) -> list[str]:
    """``updated_channels`` as the reader assumes it: the channels with a stored value."""
    return sorted(ch for ch, e in values.items() if len(e) == 2)


def delta_base_values(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(channel, encoded)`` of every value folded into a ``ckpt`` line's ``delta_base``."""
    out: list[tuple[str, Any]] = []
    for channel, folded in (obj.get("delta_base") or {}).items():
        if not isinstance(folded, dict) or not isinstance(folded.get("writes", []), list):
            raise CodecError(f"delta_base of {channel!r} must hold a list of 'writes'")
        out.extend(
            (channel, w[1]) for w in folded.get("writes", []) if isinstance(w, list) and len(w) == 2
        )
        if "seed" in folded:
            out.append((channel, folded["seed"]))
    return out


# ------------------------------------------------------------ metadata, extra


def writes_readable(serde: SerializerProtocol) -> bool:
    """True when values may be written as readable JSON: the serializer is LangGraph's
    plain `JsonPlusSerializer`. Any other (an `EncryptedSerializer`, your own) gets
    every value, message and metadata field, so the file holds only what it writes."""
    inner = getattr(serde, "inner", serde)  # the saver's `LogSerde` wraps the configured one
    return type(inner) is JsonPlusSerializer


def extra_fields(checkpoint: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    """Checkpoint keys LangGraph may add later, kept under ``extra`` / ``extra_serde``."""
    if KNOWN_CHECKPOINT_KEYS.issuperset(checkpoint):  # LangGraph's own keys only (most)
        return {}
    if EXTRA_AS_STORED in checkpoint:
        return {"extra_serde": checkpoint[EXTRA_AS_STORED]}
    extra = {
        k: v
        for k, v in checkpoint.items()
        if k not in KNOWN_CHECKPOINT_KEYS and not (k == "pending_sends" and not v)
    }
    if not extra:
        return {}
    if is_plain_json(extra) and writes_readable(serde):
        return {"extra": extra}
    return {"extra_serde": serde_encode(extra, serde)}



EXTRA_AS_STORED: Any = object()
"""The key of a rewrite's checkpoint (`checkpoint_from_line` with ``as_stored``) holding its
serialized extra keys as stored: no string, so no checkpoint put or read has it."""


def extra_from_fields(line: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    extra = serde_decode(line["extra_serde"], serde) if "extra_serde" in line else line.get("extra")
    return extra if isinstance(extra, dict) else {}


class MetadataAsStored(dict[str, Any]):
    """Serialized metadata a rewrite writes again as it is stored (`payload`), not decoded:
    the process may lack an application class it holds."""

    def __init__(self, payload: Any) -> None:
        super().__init__()
        self.payload = payload


def metadata_fields(metadata: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    """``meta`` (readable) or ``meta_serde`` when some value is not plain JSON (or the
    serializer is not `writes_readable`)."""
    if isinstance(metadata, MetadataAsStored):
        return {"meta_serde": metadata.payload}
    meta = dict(metadata)
    if is_plain_json(meta) and writes_readable(serde):
        return {"meta": meta}
    return {"meta_serde": serde_encode(meta, serde)}


def metadata_from_fields(line: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    if "meta_serde" in line:
        meta = serde_decode(line["meta_serde"], serde)
    else:
        meta = line.get("meta", {})
    if not isinstance(meta, dict):
        raise CodecError("checkpoint metadata must be an object")
    return meta


def _meta_fields(
    metadata: Mapping[str, Any], parent: CheckpointHead | None, serde: SerializerProtocol
) -> dict[str, Any]:
    """``meta`` in full, or ``meta_delta``: the keys that differ from the parent's
    (``step`` left out when it is the parent's plus one). Undone by `_derive_meta`."""
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


def _derive_meta(obj: Mapping[str, Any], parent: CheckpointHead | None) -> dict[str, Any] | None:
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
    source = delta.get("source")
    if type(source) is str:  # "loop" / "input": one string, not one a checkpoint
        meta["source"] = sys.intern(source)
    step = parent.meta.get("step")
    if "step" not in delta and type(step) is int:
        meta["step"] = step + 1
    return meta


# ------------------------------------------------------------- message lists


def is_list_value(enc: Any) -> bool:
    """True for an encoded message list (``msgs``, ``append`` or ``keep``/``base``)."""
    return isinstance(enc, dict) and ("msgs" in enc or "append" in enc)


def list_value(
    refs: list[int], base: tuple[int, list[int]] | None, shared: int = 0
) -> dict[str, Any]:
    """Encode a message list (``refs``) against the channel's value at the parent.

    ``base`` is that value as ``(line, refs)``; ``shared`` how many leading
    refs are already known to be the same. Undone by `list_link`.

    >>> list_value([1, 2, 3], (7, [1, 2]))
    {'append': [3]}
    >>> list_value([1, 9], (7, [1, 2]))
    {'msgs': [9], 'keep': 1, 'base': 7}
    """
    if base is None:
        return {"msgs": refs}
    base_line, base_refs = base
    keep = shared
    limit = min(len(base_refs), len(refs))
    while keep < limit and base_refs[keep] == refs[keep]:
        keep += 1
    if keep == len(base_refs):
        return {"append": refs[keep:]}
    if keep:
        return {"msgs": refs[keep:], "keep": keep, "base": base_line}
    return {"msgs": refs}


def list_link(enc: Mapping[str, Any], n: int) -> tuple[str, int | None]:
    """How a message list on line ``n`` builds on an earlier value.

    ``("append", None)``: after the parent's value; ``("base", line)``: after
    the first ``keep`` messages of the value on ``line``; ``("msgs", None)``:
    on nothing.
    """
    if "append" in enc:
        return "append", None
    if "base" not in enc and "keep" not in enc:
        return "msgs", None
    base, keep = enc.get("base"), enc.get("keep")
    if type(keep) is not int or keep < 0:
        raise CodecError("'keep' must be a count")
    if type(base) is not int or not 1 <= base < n:
        raise CodecError(f"'base' {base!r} is not an earlier line", dangling=True)
    return "base", base


def line_values(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(where, encoded)`` of every value a ``ckpt`` line (its channels, its
    ``delta_base``) or a ``writes`` line (its writes) holds, named for errors."""
    if obj.get("t") == "ckpt":
        out = [(f"channel {ch!r}", e[1]) for ch, e in checkpoint_values(obj).items() if len(e) == 2]
        out += [(f"delta_base of {ch!r}", enc) for ch, enc in delta_base_values(obj)]
        return out
    items = obj.get("w")
    if not isinstance(items, list):
        raise CodecError("'w' must be a list of writes")
    return [
        (f"write to {w[1]!r}", w[2]) for w in items if isinstance(w, list) and len(w) == 3
    ]


def based_link(enc: Mapping[str, Any], n: int) -> tuple[int, int, str]:
    """``(line, keep, channel)`` of a message list inside a value on line ``n`` (a
    ``Send``'s state, say) that begins with the first ``keep`` messages of
    ``channel``'s list on the earlier checkpoint line ``line``, then holds its own
    ``msgs`` (format 3: ``{"msgs": [...], "keep": k, "base": line, "ch": channel}``).

    A tool agent's ``Send`` carries the whole state: its list written out would make
    every step's line as long as the conversation, and the log quadratic.

    >>> based_link({"msgs": [9], "keep": 40, "base": 7, "ch": "messages"}, 12)
    (7, 40, 'messages')
    """
    if "append" in enc:
        raise CodecError("only a channel value may append to its parent's")
    base, keep, channel = enc.get("base"), enc.get("keep"), enc.get("ch")
    if type(channel) is not str:
        raise CodecError(f"'ch' {channel!r} is not a channel name")
    if type(keep) is not int or keep < 0:
        raise CodecError("'keep' must be a count")
    if type(base) is not int or not 1 <= base < n:
        raise CodecError(f"'base' {base!r} is not an earlier line", dangling=True)
    return base, keep, channel


def based_refs_checked(n: int, stores_list: Callable[[int, str], bool]) -> ListLoader:
    """A `message_refs` loader for the values on line ``n`` that checks each list based
    on a checkpoint line's (`based_link`) names one that stores that channel as messages
    (``stores_list(line, channel)``): else a dangling `CodecError`.

    >>> load = based_refs_checked(12, lambda line, channel: line == 7)
    >>> load({"msgs": [9], "keep": 4, "base": 7, "ch": "messages"}), load({"msgs": [1]})
    ([9], [1])
    """

    def load(enc: Mapping[str, Any]) -> list[int]:
        if "ch" in enc:
            base, _, channel = based_link(enc, n)
            if not stores_list(base, channel):
                raise CodecError(
                    f"'base' line {base} does not store {channel!r} as messages", dangling=True
                )
        return refs_of(enc)

    return load


# ------------------------------------------------------------------------ snap

SNAPSHOT_EVERY = 256
"""A checkpoint's batch starts with a ``snap`` line when this many lines were written
since the last one (twice that in a long log: `snapshot_due`). A cold open parses the
last snapshot, the snapshots before it (small: each holds what changed since its
predecessor) and at most about this many lines after it; each snapshot costs about 1 KB
(its numbers written as gaps), so storage grows by ~1%. (128 halved the lines a cold
open indexes after the snapshot, but its snapshots cost a 120-turn chat about 1.5% more
bytes, past `tests/test_file_format.py`'s 3.1x bound.)"""


def snapshot_due(lines: int, snap_line: int | None, every: int = SNAPSHOT_EVERY) -> bool:
    """Whether the next checkpoint's batch starts with a ``snap`` line: ``every`` lines
    since the last one, twice that once the log is ``32 * every`` lines long.

    A cold open indexes the lines after the last snapshot (about 4 us each, half the
    interval on average) and parses every snapshot of the chain (about 15 us each, one
    per interval of the log): the shorter interval wins on a short log, the longer one
    on a long log, whose chain it keeps from growing twice as fast.

    >>> snapshot_due(300, 40), snapshot_due(9000, 8700), snapshot_due(9000, 8400)
    (True, False, True)
    """
    if lines >= 32 * every:
        every *= 2
    return lines - (snap_line or 0) >= every


SNAP_PREFIX = b'{"v":2,"t":"snap",'
"""How every ``snap`` line begins (`dumps_line` keeps key order): a reader finds the
last one by looking at the lines' first bytes, from the end, without parsing."""

_KIND_PREFIX = re.compile(rb'\{"v":[123],"t":"(ckpt|writes)",')


@dataclass(slots=True)
class SnapshotHead:
    """A checkpoint as a snapshot carries it: its head, where each channel's value
    at it is written (``writers``: channel -> (writer id, line)) and its pending
    writes (``(task, index, path, channel, line, position in the line's "w")``)."""

    head: CheckpointHead
    writers: dict[str, tuple[str, int]]
    writes: list[tuple[str, int, str, str, int, int]]


@dataclass(slots=True)
class Snapshot:
    """A parsed ``snap`` line (see `snapshot_line`)."""

    line: int
    prev: int | None
    first_msg: int
    msg_lines: list[int | None]
    heads: list[SnapshotHead]
    # (line, channel, index of the base list in the previous snapshot or -1, keep, ordinals)
    lists: list[tuple[int, str, int, int, list[int]]]
    # The ``writes`` lines of checkpoints not yet in the log when it was written
    # (``None``: a snapshot of a release before ``early``, which did not name them).
    early: list[int] | None = None

    @property
    def next_msg(self) -> int:
        return self.first_msg + len(self.msg_lines)


def snapshot_line(
    prev: int | None,
    first_msg: int,
    msg_lines: Sequence[int | None],
    heads: Sequence[SnapshotHead],
    lists: Sequence[tuple[int, str, int, int, Sequence[int]]],
    early: Sequence[int] = (),
) -> dict[str, Any]:
    """A ``snap`` line: what the lines before it say that reading the latest state needs.

    * ``prev``: the line of the previous snapshot (snapshots form a chain);
    * ``msgs``: ``[first ordinal, "d", [gap, ...]]``, the lines of the messages defined
      since the previous snapshot (``null`` for one that was skipped as corrupt);
    * ``heads``: the latest checkpoint of each namespace, in full (`SnapshotHead`);
    * ``lists``: the message lists those checkpoints hold, each
      ``[line, channel, base, keep, "d", [gap, ...]]``: the first ``keep`` ordinals of
      list number ``base`` of the previous snapshot (``-1``: none), then these;
    * ``early``: ``["d", [gap, ...]]``, the ``writes`` lines of checkpoints whose own
      line is not in the log yet (LangGraph may save a step's writes before the
      checkpoint it saves in the background): a reader starting here finds them when the
      checkpoint's line comes. A snapshot without it (an earlier release's) may have
      left some out: a reader does not start from it.

    Line numbers and ordinals are written as gaps (``"d"``, `_gaps`): each the
    difference from the one before (the first from 0), a digit or two where the
    number takes five. Snapshots written before that hold the numbers themselves
    (``[first ordinal, [line, ...]]``, ``[line, channel, base, keep, [ordinal, ...]]``)
    and read as before.

    Every part is a change from the previous snapshot or bounded by the latest
    state's own size (heads, their writes), so the snapshots of a log grow with it
    linearly. Undone by `parse_snapshot_line`.
    """
    line: dict[str, Any] = {"v": FORMAT_VERSION, "t": "snap"}
    if prev is not None:
        line["prev"] = prev
    line["msgs"] = [first_msg, GAPS, _gaps(msg_lines)]
    line["heads"] = [_snapshot_head(h) for h in heads]
    line["lists"] = [[n, ch, base, keep, GAPS, _gaps(refs)] for n, ch, base, keep, refs in lists]
    line["early"] = [GAPS, _gaps(early)]
    return line


GAPS = "d"
"""The mark of a snapshot part written as gaps (`_gaps`) rather than the numbers."""


def _gaps(values: Sequence[int | None]) -> list[int | None]:
    """``values`` as differences, each from the number before it (the first from 0;
    a ``None`` stays ``None`` and the next differs from the number before it).

    >>> _gaps([16006, 16009, None, 16011]), _ungaps([16006, 3, None, 2])
    ([16006, 3, None, 2], [16006, 16009, None, 16011])
    """
    if None not in values:
        return list(map(operator.sub, values, [0, *values[:-1]]))
    out: list[int | None] = []
    last = 0
    for v in values:
        if v is None:
            out.append(None)
        else:
            out.append(v - last)
            last = v
    return out


def snapshot_as_gaps(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ``snap`` line as `snapshot_line` writes it now: the numbers of one written
    before the gaps turned into gaps (what `verify` compares with the line it expects);
    anything else as it is."""
    out = dict(obj)
    msgs = out.get("msgs")
    if type(msgs) is list and len(msgs) == 2 and type(msgs[1]) is list:
        with contextlib.suppress(TypeError):
            out["msgs"] = [msgs[0], GAPS, _gaps(msgs[1])]
    lists = out.get("lists")
    if type(lists) is list:
        out["lists"] = [
            [*x[:4], GAPS, _gaps(x[4])]
            if type(x) is list and len(x) == 5 and type(x[4]) is list
            and set(map(type, x[4])) <= {int}
            else x
            for x in lists
        ]
    return out


def _ungaps(gaps: Any) -> list[Any]:
    """The numbers of `_gaps` (in C for a part without ``None``); raises `CodecError`
    unless ``gaps`` is a list of integers (and ``None``)."""
    if type(gaps) is not list:
        raise CodecError("snapshot: gaps must be a list")
    if not gaps:
        return []
    kinds = set(map(type, gaps))
    if kinds == {int}:
        return list(accumulate(gaps))
    if not kinds <= {int, type(None)}:
        raise CodecError("snapshot: gaps must be integers")
    out: list[Any] = []
    last = 0
    for g in gaps:
        if g is None:
            out.append(None)
        else:
            last += g
            out.append(last)
    return out


def _snapshot_head(h: SnapshotHead) -> dict[str, Any]:
    head = h.head
    out: dict[str, Any] = {"id": head.id, "line": head.line}
    if head.ns:
        out["ns"] = head.ns
    if head.parent is not None:
        out["parent"] = head.parent
    out["versions"] = pack_versions(head.versions)
    out["seen"] = pack_seen(head.seen)
    if head.meta is not None:
        out["meta"] = head.meta
    out["stored"] = pack_versions(head.stored)
    if head.counters:
        out["counters"] = sorted(head.counters)
    if head.delta_base:
        out["delta_base"] = sorted(head.delta_base)
    out["writers"] = {ch: [cid, n] for ch, (cid, n) in h.writers.items()}
    if h.writes:
        out["writes"] = [list(w) for w in h.writes]
    return out


def _line_no(value: Any, below: int, what: str) -> int:
    if type(value) is not int or not 1 <= value < below:
        raise CodecError(f"snapshot: {what} {value!r} is not an earlier line")
    return value


def _ordinals(value: Any) -> list[int]:
    if type(value) is not list or not (
        not value or (set(map(type, value)) == {int} and min(value) >= 0)
    ):
        raise CodecError("snapshot: a message list must be a list of ordinals")
    return value


_INTS = {int}


def _all_lines_before(values: list[Any], n: int) -> bool:
    """Whether every item is ``None`` or a line number before ``n`` (in C-level passes:
    a snapshot names every message line written since the previous one)."""
    lines = [v for v in values if v is not None] if None in values else values
    return not lines or (set(map(type, lines)) == {int} and min(lines) >= 1 and max(lines) < n)


def parse_snapshot_line(obj: Mapping[str, Any], n: int, *, heads: bool = True) -> Snapshot:
    """The parts of the ``snap`` line ``n``; raises `CodecError` when one is malformed.

    Only shapes are checked here; whether the lines it names say what it says is
    the reader's to check (`langgraph_ctx.saver._index`), against the log.
    ``heads=False``: its heads are left out (``[]``), unparsed: a reader needs only the
    last snapshot's, the earlier ones of its chain give their messages and lists.
    """
    prev = obj.get("prev")
    if prev is not None:
        prev = _line_no(prev, n, "'prev'")
    msgs = obj.get("msgs")
    checked = False  # every message line known to be before this one
    if type(msgs) is list and len(msgs) == 3 and msgs[1] == GAPS:
        gaps = msgs[2]
        if type(gaps) is list and gaps and set(map(type, gaps)) == _INTS and min(gaps) >= 1:
            # The usual part (a chain of snapshots costs one per interval): increasing
            # from a first line >= 1, so its last line is its largest.
            msgs = [msgs[0], list(accumulate(gaps))]
            checked = msgs[1][-1] < n
        else:
            msgs = [msgs[0], _ungaps(gaps)]
    if not (
        type(msgs) is list
        and len(msgs) == 2
        and type(msgs[0]) is int
        and msgs[0] >= 0
        and type(msgs[1]) is list
    ):
        raise CodecError("snapshot: 'msgs' must be [first ordinal, \"d\", [gap, ...]]")
    msg_lines = msgs[1]
    if not checked and not _all_lines_before(msg_lines, n):  # say which one
        msg_lines = [None if m is None else _line_no(m, n, "message line") for m in msg_lines]
    heads_raw, lists_raw = obj.get("heads"), obj.get("lists")
    if type(heads_raw) is not list or type(lists_raw) is not list:
        raise CodecError("snapshot: 'heads' and 'lists' must be lists")
    heads_of = [_parse_snapshot_head(h, n) for h in heads_raw] if heads else []
    lists = []
    for item in lists_raw:
        if type(item) is list and len(item) == 6 and item[4] == GAPS:
            item = [*item[:4], _ungaps(item[5])]
        if not (type(item) is list and len(item) == 5 and isinstance(item[1], str)):
            raise CodecError("snapshot: each list must be [line, channel, base, keep, ordinals]")
        line_no = _line_no(item[0], n, "list line")
        base, keep = item[2], item[3]
        if type(base) is not int or type(keep) is not int or base < -1 or keep < 0:
            raise CodecError("snapshot: a list's base and keep must be counts")
        lists.append((line_no, item[1], base, keep, _ordinals(item[4])))
    early_raw, early = obj.get("early"), None
    if early_raw is not None:
        if not (type(early_raw) is list and len(early_raw) == 2 and early_raw[0] == GAPS):
            raise CodecError("snapshot: 'early' must be [\"d\", [gap, ...]]")
        early = [_line_no(line, n, "early writes line") for line in _ungaps(early_raw[1])]
    return Snapshot(n, prev, msgs[0], msg_lines, heads_of, lists, early)


def _parse_snapshot_head(h: Any, n: int) -> SnapshotHead:
    if not isinstance(h, dict):
        raise CodecError("snapshot: each head must be an object")
    ns, cid = checkpoint_key(h)
    line_no = _line_no(h.get("line"), n, "checkpoint line")
    parent = h.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise CodecError("snapshot: a head's 'parent' must be an id")
    for key in ("versions", "seen", "stored", "writers"):
        if not isinstance(h.get(key), dict):
            raise CodecError(f"snapshot: a head's {key!r} must be an object")
    meta = h.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise CodecError("snapshot: a head's 'meta' must be an object")
    counters, delta_base = h.get("counters", []), h.get("delta_base", [])
    if not (
        type(counters) is list
        and type(delta_base) is list
        and all(isinstance(c, str) for c in [*counters, *delta_base])
    ):
        raise CodecError("snapshot: 'counters' and 'delta_base' must list channels")
    writers: dict[str, tuple[str, int]] = {}
    for ch, w in h["writers"].items():
        if not (type(w) is list and len(w) == 2 and isinstance(w[0], str)):
            raise CodecError("snapshot: each writer must be [checkpoint id, line]")
        writers[ch] = (w[0], _line_no(w[1], n, "writer line"))
    writes = []
    for w in h.get("writes", []):
        if not (
            type(w) is list
            and len(w) == 6
            and all(isinstance(x, str) for x in (w[0], w[2], w[3]))
            and type(w[1]) is int
            and type(w[5]) is int
        ):
            raise CodecError("snapshot: each write must be [task, index, path, channel, line, pos]")
        writes.append((w[0], w[1], w[2], w[3], _line_no(w[4], n, "writes line"), w[5]))
    run_id = (meta or {}).get("run_id")
    head = CheckpointHead(
        ns=ns,
        id=cid,
        line=line_no,
        parent=parent,
        run_id=run_id if isinstance(run_id, str) else None,
        versions=dict(unpack_versions(h["versions"])),
        seen=dict(unpack_seen(h["seen"])),
        meta=meta,
        stored=dict(unpack_versions(h["stored"])),
        counters=frozenset(counters) if counters else NO_CHANNELS,
        delta_base=frozenset(delta_base) if delta_base else NO_CHANNELS,
    )
    return SnapshotHead(head, writers, writes)


def line_kind_at(raw: bytes) -> str | None:
    """``"ckpt"`` or ``"writes"`` when a line as `dumps_line` writes it is one (by its
    first bytes, unparsed); ``None`` otherwise."""
    match = _KIND_PREFIX.match(raw)
    return None if match is None else match.group(1).decode()


_LONG_NUMBER = re.compile(rb"[-:,\[]\d{19}")
"""Where a line may hold an integer beyond 64 bits: 19 digits or more after what can
start a JSON number (a string holding such digits passes too, and is then parsed)."""


def wide_int_in_line(raw: bytes) -> int | None:
    """The first integer beyond 64 bits a line holds (`wide_int`), read exactly: the
    reader's orjson gives a float for it, another number. ``None``: none (or no JSON)."""
    if _LONG_NUMBER.search(raw) is None:
        return None
    try:
        return wide_int(json.loads(raw))
    except ValueError:
        return None


# ----------------------------------------------------------------------- writes


_CKPT_KEY = re.compile(rb'\{"v":\d+,"t":"ckpt",(?:"ns":"([^"\\]*)",)?"id":"([^"\\]*)"')
"""``(ns, id)`` at the start of a ``ckpt`` line as `dumps_line` writes it (an escaped
namespace is read by `loads_line` instead: `writes_past`)."""


def writes_past(raws: Sequence[bytes]) -> dict[int, bytes]:
    """The lines a `revert` or `fork` at a checkpoint must empty: ``raws`` are the log's
    lines up to that checkpoint's, which is the last; returns the ``writes`` lines among
    them that belong to it or to a checkpoint not among them, each as it reads holding no
    writes: ``{line number: line, newline included}``.

    LangGraph saves a step's writes in the background, so they may reach the log before
    the line of the checkpoint they belong to (named then by its id, not its line). Kept,
    the writes of the checkpoint reverted to would make the new head the state after its
    step, where the step must run again. They are emptied rather than dropped: every line
    keeps its number, which later lines refer to. Lines that do not read are left as they
    are (`langgraph-ctx verify` names them).

    >>> early = dumps_line({"v": 2, "t": "writes", "ckpt": "x1", "task": "t", "w": [[0, "a", 1]]})
    >>> ckpt = dumps_line({"v": 2, "t": "ckpt", "id": "x1", "ts": "", "values": {}})
    >>> writes_past([b"", early[:-1], ckpt[:-1]])
    {2: b'{"v":2,"t":"writes","ckpt":"x1","task":"t","w":[],"c":"1yDceQ"}\\n'}
    """
    held: set[tuple[str, str]] = set()
    named: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(raws[:-1], 1):  # the last: the checkpoint reverted to
        kind = line_kind_at(raw)
        if kind == "ckpt":  # its key read in place: a long log has thousands
            found = _CKPT_KEY.match(raw)
            if found is not None:
                held.add(((found.group(1) or b"").decode(), found.group(2).decode()))
                continue
        elif kind == "writes" and b'"ckpt":"' not in raw:
            continue  # names its checkpoint by line: an earlier one
        elif kind is None and b'"t":"ckpt"' not in raw and b'"t":"writes"' not in raw:
            continue
        try:
            obj = loads_line(raw)
            if obj.get("t") == "ckpt":
                held.add(checkpoint_key(obj))
            elif obj.get("t") == "writes" and isinstance(obj.get("ckpt"), str):
                named.append((n, obj))
        except CodecError:
            continue
    return {
        n: dumps_line({**obj, "v": min(obj["v"], FORMAT_VERSION), "w": []})  # no value left
        for n, obj in named
        if (obj.get("ns", ""), obj["ckpt"]) not in held
    }


def writes_line(
    ns: str,
    target: CheckpointHead | None,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    encoded: list[list[Any]],
) -> dict[str, Any]:
    """The ``writes`` line of one task: ``encoded`` is ``[[index, channel, value], ...]``.

    The checkpoint is named by its line when it is in this log (``target``).
    """
    line: dict[str, Any] = {"v": FORMAT_VERSION, "t": "writes"}
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
    return line


def parse_writes_line(
    obj: Mapping[str, Any], n: int, ckpt_at: Mapping[int, CheckpointHead]
) -> tuple[str, str, str, str, list[list[Any]]]:
    """``(ns, checkpoint_id, task, path, items)`` of the ``writes`` line ``n``."""
    ns, cid, task = obj.get("ns", ""), obj.get("ckpt"), obj.get("task")
    if type(cid) is int:
        target = ckpt_at.get(cid)
        if target is None or cid >= n:
            raise CodecError(
                f"writes refer to line {cid}, not an earlier checkpoint", dangling=True
            )
        ns, cid = target.ns, target.id
    path, items = obj.get("path", ""), obj.get("w")
    if not isinstance(cid, str):
        raise CodecError("writes line needs 'ckpt' (a line number or an id)")
    if not (isinstance(ns, str) and isinstance(task, str) and isinstance(path, str)):
        raise CodecError("writes line needs string 'task' and 'path'")
    if not isinstance(items, list):
        raise CodecError("writes line needs a list 'w'")
    for item in items:
        if not (
            isinstance(item, list)
            and len(item) == 3
            and type(item[0]) is int
            and isinstance(item[1], str)
        ):
            raise CodecError("each write must be [index, channel, value]")
    return ns, cid, task, path, items
