"""Log codec: checkpoints, writes and messages as JSON lines, and back.

Pure functions, no I/O. The storage layer moves the bytes; the saver decides
what to write. Every line is one JSON object carrying the format version
(``"v"``) and its kind (``"t"``):

``thread``
    The first line of every log: ``{"v":1,"t":"thread","thread_id":...,"created":...}``.
``msg``
    One LangChain message, written once and referenced afterwards by its
    ordinal ``"n"``: ``{"v":1,"t":"msg","n":3,"msg":{"type":"ai","content":...,"id":...}}``.
    A message that differs from an earlier one only by its id (LangGraph gives
    ids to messages after they were first saved) is ``{"n":4,"like":3,"id":...}``.
    A message that is not plain JSON (an ``artifact`` holding bytes, say)
    keeps its readable header and stores the body with LangGraph's
    serializer under ``"serde"``.
``ckpt``
    A checkpoint: ids, timestamps, channel versions, metadata, and the values
    of the channels that changed (``"values"``), each as an encoded value.
``writes``
    The pending writes of one task against one checkpoint.

Encoded values are plain JSON where that is unambiguous, else small tagged
objects whose one key says what they are:

===================================  =============================================
``"text"``, ``3``, ``null``, ``[1]``  a string, number, bool, null or list, as is
``{"json": {...}}``                  a JSON object (tagged, so it never looks
                                     like one of the tags below)
``{"msgs": [n, ...]}``               a list of messages, by ordinal
``{"append": [n, ...]}``             the channel's value at the parent checkpoint,
                                     then these messages
``{"msgs": [...], "keep": k,``       the first ``k`` messages of the value stored
``"base": line}``                    on line ``line``, then these
``{"msg": n}``                       one message
``{"dict": {key: encoded}}``         a dict some of whose values hold messages
``{"snap": encoded}``                a ``DeltaChannel`` snapshot of a value
``{"model": [mod, name],``           a pydantic model defined in ``langgraph_ctx``
``"json": {...}}``
``{"serde": [type, base64]}``        anything else, through LangGraph's serializer
===================================  =============================================
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from pydantic import BaseModel, ValidationError

FORMAT_VERSION = 1
"""Version written on every line. Readers refuse lines from a newer format."""

LINE_KINDS = frozenset({"thread", "msg", "ckpt", "writes"})

# The only classes a message line can become: LangChain's own message types.
MESSAGE_CLASSES: dict[str, type[BaseMessage]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        AIMessage,
        AIMessageChunk,
        ChatMessage,
        ChatMessageChunk,
        FunctionMessage,
        FunctionMessageChunk,
        HumanMessage,
        HumanMessageChunk,
        RemoveMessage,
        SystemMessage,
        SystemMessageChunk,
        ToolMessage,
        ToolMessageChunk,
    )
}

# Payload types LangGraph's serializer writes that are safe to read back.
SAFE_SERDE_TYPES = frozenset({"msgpack", "null", "bytes", "bytearray"})

TRUSTED_MODEL_PREFIX = "langgraph_ctx."

PACKAGE_MODELS: tuple[tuple[str, str], ...] = (
    ("langgraph_ctx.context.archive", "ArchivedContext"),
    ("langgraph_ctx.context.budget", "ContextBudget"),
    ("langgraph_ctx.context.budget", "ContextUsage"),
    ("langgraph_ctx.context.budget", "DegradationLevel"),
    ("langgraph_ctx.context.compaction.record", "CompactionRecord"),
    ("langgraph_ctx.context.compaction.record", "DroppedMessage"),
    ("langgraph_ctx.context.compaction.record", "OffloadedResult"),
    ("langgraph_ctx.context.compaction.record", "RunningSummary"),
    ("langgraph_ctx.context.compaction.record", "ScoredMessage"),
    ("langgraph_ctx.context.compaction.record", "ShortenedMessage"),
    ("langgraph_ctx.context.llm_error", "LLMError"),
    ("langgraph_ctx.context.prompt", "PromptParts"),
    ("langgraph_ctx.context.prompt", "RunContext"),
    ("langgraph_ctx.context.prompt", "WorkflowStep"),
)
"""This package's pydantic models that graph state may hold. Stored readably at the
top of a value (``{"model": ...}``); when nested inside a value that goes through
LangGraph's serializer, the savers' strict allowlist includes them too."""


class CodecError(ValueError):
    """A line or value does not decode; the saver adds the file and line."""


# --------------------------------------------------------------------------- JSON


def dumps_line(obj: Mapping[str, Any]) -> bytes:
    """One compact JSON line, newline included, UTF-8 (non-ASCII kept readable)."""
    return (
        json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
    ).encode("utf-8")


def loads_line(raw: bytes) -> dict[str, Any]:
    """Parse and check the envelope of one line (without its newline)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # orjson refuses some valid JSON (integers over 64 bits)
            obj = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CodecError(f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise CodecError("a line must be a JSON object")
    version = obj.get("v")
    if type(version) is not int:
        raise CodecError("line has no format version 'v'")
    if version > FORMAT_VERSION:
        raise CodecError(
            f"line has format version {version}, newer than this langgraph-ctx reads "
            f"({FORMAT_VERSION}); upgrade langgraph-ctx"
        )
    if obj.get("t") not in LINE_KINDS:
        raise CodecError(f"unknown line kind {obj.get('t')!r}")
    return obj


def is_plain_json(value: Any) -> bool:
    """True for values JSON round-trips as LangGraph's serializer would.

    Tuples count: LangGraph's serializer also reads them back as lists.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list or kind is tuple:
        return all(is_plain_json(v) for v in value)
    if kind is dict:
        return all(type(k) is str and is_plain_json(v) for k, v in value.items())
    return False


# ----------------------------------------------------------------------- messages


def message_to_json(message: BaseMessage) -> dict[str, Any] | None:
    """The readable form of a message: its type, content and every non-default field.

    Returns ``None`` when some field is not plain JSON; the caller then stores
    the message body through the serializer.
    """
    out: dict[str, Any] = {"type": message.type, "content": message.content}
    for name, required, default in _field_defaults(type(message)):
        value = getattr(message, name, None)
        if not required and value == default:
            continue
        out[name] = value
    return out if is_plain_json(out) else None


@functools.cache
def _field_defaults(cls: type[BaseMessage]) -> tuple[tuple[str, bool, Any], ...]:
    """(name, required, default) of every field but type/content, computed once per class."""
    return tuple(
        (
            name,
            field.is_required(),
            None if field.is_required() else field.get_default(call_default_factory=True),
        )
        for name, field in cls.model_fields.items()
        if name not in ("type", "content")
    )


def message_from_json(data: Any) -> BaseMessage:
    """Rebuild a message; only LangChain's message classes, always validated."""
    if not isinstance(data, dict):
        raise CodecError("message must be a JSON object")
    cls = MESSAGE_CLASSES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise CodecError(f"unknown message type {data.get('type')!r}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise CodecError(f"invalid {cls.__name__}: {where}: {first.get('msg')}") from None
    except Exception as exc:  # LangChain's own validators raise KeyError & co.
        raise CodecError(f"invalid {cls.__name__}: {type(exc).__name__}: {exc}") from None


def message_digest(body: Mapping[str, Any]) -> bytes:
    """Content address of a message line body (its ``msg`` or ``serde`` part)."""
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).digest()


def message_digest_without_id(body: Mapping[str, Any]) -> bytes | None:
    """Content address ignoring the id, for readable bodies (``None`` otherwise)."""
    readable = body.get("msg")
    if not isinstance(readable, dict):
        return None
    return message_digest({k: v for k, v in readable.items() if k != "id"})


def message_body(message: BaseMessage, serde: SerializerProtocol) -> dict[str, Any]:
    """The part of a ``msg`` line that holds the message: ``msg`` or ``type/id/serde``."""
    readable = message_to_json(message)
    if readable is not None:
        return {"msg": readable}
    return {"type": message.type, "id": message.id, "serde": serde_encode(message, serde)}


def message_from_body(line: Mapping[str, Any], serde: SerializerProtocol) -> BaseMessage:
    """Rebuild the message of a ``msg`` line that has its own body (not ``like``)."""
    if "msg" in line:
        return message_from_json(line["msg"])
    if "serde" in line:
        value = serde_decode(line["serde"], serde)
        if not isinstance(value, BaseMessage):
            raise CodecError("serialized message payload is not a LangChain message")
        return value
    raise CodecError("message line has neither 'msg' nor 'serde'")


# ------------------------------------------------------------------------- serde


def serde_encode(value: Any, serde: SerializerProtocol) -> list[str]:
    type_, data = serde.dumps_typed(value)
    return [type_, base64.b64encode(data).decode("ascii")]


def serde_decode(payload: Any, serde: SerializerProtocol) -> Any:
    if (
        not isinstance(payload, list)
        or len(payload) != 2
        or not all(isinstance(p, str) for p in payload)
    ):
        raise CodecError("serialized payload must be [type, base64]")
    type_, data = payload
    if type_ == "pickle" and not getattr(serde, "pickle_fallback", False):
        raise CodecError("refusing a pickle payload (pickle runs code on load)")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise CodecError("serialized payload is not valid base64") from None
    try:
        return serde.loads_typed((type_, raw))
    except Exception as exc:  # the serializer raises many types on bad bytes
        raise CodecError(f"serialized {type_!r} payload does not decode: {exc}") from None


# ------------------------------------------------------------------------ values

MessageRef = Callable[[BaseMessage], int]
"""Stores (or finds) a message and returns its ordinal."""


def is_message_list(value: Any) -> bool:
    return type(value) is list and len(value) > 0 and all(isinstance(m, BaseMessage) for m in value)


def _contains_messages(value: Any) -> bool:
    if isinstance(value, BaseMessage):
        return True
    if type(value) is list:
        return any(isinstance(v, BaseMessage) for v in value)
    if type(value) is dict:
        return any(_contains_messages(v) for v in value.values())
    return False


def encode_value(value: Any, ref: MessageRef, serde: SerializerProtocol) -> Any:
    """Encode a channel value or write; messages become references via ``ref``."""
    if isinstance(value, BaseMessage):
        return {"msg": ref(value)}
    if is_message_list(value):
        return {"msgs": [ref(m) for m in value]}
    if isinstance(value, _DeltaSnapshot):
        return {"snap": encode_value(value.value, ref, serde)}
    if is_plain_json(value):
        return {"json": value} if type(value) is dict else value
    if type(value) is dict and all(type(k) is str for k in value) and _contains_messages(value):
        return {"dict": {k: encode_value(v, ref, serde) for k, v in value.items()}}
    if isinstance(value, BaseModel) and type(value).__module__.startswith(TRUSTED_MODEL_PREFIX):
        dumped = value.model_dump(mode="json")
        if is_plain_json(dumped):
            return {"model": [type(value).__module__, type(value).__qualname__], "json": dumped}
    return {"serde": serde_encode(value, serde)}


MessageLoader = Callable[[int], BaseMessage]
ListLoader = Callable[[Mapping[str, Any]], list[int]]


def decode_value(
    enc: Any,
    load_message: MessageLoader,
    load_refs: ListLoader,
    serde: SerializerProtocol,
) -> Any:
    """Inverse of `encode_value`. ``load_refs`` resolves ``msgs``/``append`` lists."""
    if not isinstance(enc, dict):
        return enc  # a bare scalar or list
    if "json" in enc and "model" not in enc:
        return enc["json"]
    if "msgs" in enc or "append" in enc:
        return [load_message(n) for n in load_refs(enc)]
    if "msg" in enc:
        return load_message(_ordinal(enc["msg"]))
    if "dict" in enc:
        inner = enc["dict"]
        if not isinstance(inner, dict):
            raise CodecError("'dict' value must be an object")
        return {k: decode_value(v, load_message, load_refs, serde) for k, v in inner.items()}
    if "snap" in enc:
        return _DeltaSnapshot(decode_value(enc["snap"], load_message, load_refs, serde))
    if "model" in enc:
        return _decode_model(enc["model"], enc.get("json"))
    if "serde" in enc:
        return serde_decode(enc["serde"], serde)
    raise CodecError(f"unknown value encoding {sorted(enc)}")


def _ordinal(n: Any) -> int:
    if type(n) is not int or n < 0:
        raise CodecError(f"message reference must be a non-negative integer, got {n!r}")
    return n


def refs_of(enc: Mapping[str, Any]) -> list[int]:
    refs = enc.get("msgs", enc.get("append"))
    if not isinstance(refs, list):
        raise CodecError("a message list must be a list of message ordinals")
    return [_ordinal(n) for n in refs]


def _decode_model(name: Any, data: Any) -> BaseModel:
    if (
        not isinstance(name, list)
        or len(name) != 2
        or not all(isinstance(p, str) for p in name)
        or not name[0].startswith(TRUSTED_MODEL_PREFIX)
    ):
        raise CodecError(f"refusing model {name!r}: only langgraph_ctx models are rebuilt")
    module, qualname = name
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise CodecError(f"model {module}.{qualname} no longer exists") from None
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        raise CodecError(f"{module}.{qualname} is not a pydantic model")
    try:
        return obj.model_validate(data)
    except ValidationError as exc:
        raise CodecError(f"invalid {qualname}: {exc.errors()[0].get('msg')}") from None


# ---------------------------------------------------------------- checkpoint lines

DEFAULT_CHECKPOINT_VERSION = 4
"""LangGraph's checkpoint format version; ``"cv"`` is written only when it differs."""

# Checkpoint keys with their own place on a ``ckpt`` line; others go to ``extra``.
KNOWN_CHECKPOINT_KEYS = frozenset(
    {"v", "id", "ts", "channel_values", "channel_versions", "versions_seen", "updated_channels"}
)


def extra_fields(checkpoint: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    """Checkpoint keys LangGraph may add later, kept under ``extra`` / ``extra_serde``."""
    extra = {
        k: v
        for k, v in checkpoint.items()
        if k not in KNOWN_CHECKPOINT_KEYS and not (k == "pending_sends" and not v)
    }
    if not extra:
        return {}
    if is_plain_json(extra):
        return {"extra": extra}
    return {"extra_serde": serde_encode(extra, serde)}


def extra_from_fields(line: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    extra = serde_decode(line["extra_serde"], serde) if "extra_serde" in line else line.get("extra")
    return extra if isinstance(extra, dict) else {}


def metadata_fields(metadata: Mapping[str, Any], serde: SerializerProtocol) -> dict[str, Any]:
    """``meta`` (readable) or ``meta_serde`` when some value is not plain JSON."""
    meta = dict(metadata)
    if is_plain_json(meta):
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
