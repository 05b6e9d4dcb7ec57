"""Encoded values: channel values and writes as JSON, and back.

Plain JSON where that is unambiguous, else a small tagged object whose one key
says what it is:

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

`value_tag` is the one place that reads a tag; `decode_value` and `message_refs`
(the walk that finds every message a value refers to) both go through it.
"""

from __future__ import annotations

import base64
import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from pydantic import BaseModel, ValidationError

from langgraph_ctx.errors import CodecError

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


# ------------------------------------------------------------------------- serde


def serde_encode(value: Any, serde: SerializerProtocol) -> list[str]:
    """``[type, base64]``: a value through LangGraph's serializer."""
    type_, data = serde.dumps_typed(value)
    return [type_, base64.b64encode(data).decode("ascii")]


def serde_decode(payload: Any, serde: SerializerProtocol) -> Any:
    """Inverse of `serde_encode`; never unpickles unless the serializer allows it."""
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

MessageLoader = Callable[[int], BaseMessage]
ListLoader = Callable[[Mapping[str, Any]], list[int]]
"""Resolves the ordinals of a ``msgs`` / ``append`` value (following ``base`` links)."""

ValueTag = Literal["plain", "json", "msgs", "msg", "dict", "snap", "model", "serde"]


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


def value_tag(enc: Any) -> ValueTag:
    """What an encoded value is (``msgs`` covers ``append`` and ``keep``/``base`` lists).

    The one reading of the tags, in the order they take precedence.

    >>> [value_tag(e) for e in ("hi", {"json": {}}, {"append": [1]}, {"msg": 0})]
    ['plain', 'json', 'msgs', 'msg']
    """
    if not isinstance(enc, dict):
        return "plain"  # a bare scalar or list
    if "json" in enc and "model" not in enc:
        return "json"
    if "msgs" in enc or "append" in enc:
        return "msgs"
    if "msg" in enc:
        return "msg"
    if "dict" in enc:
        return "dict"
    if "snap" in enc:
        return "snap"
    if "model" in enc:
        return "model"
    if "serde" in enc:
        return "serde"
    raise CodecError(f"unknown value encoding {sorted(enc)}")


def decode_value(
    enc: Any,
    load_message: MessageLoader,
    load_refs: ListLoader,
    serde: SerializerProtocol,
) -> Any:
    """Inverse of `encode_value`. ``load_refs`` resolves ``msgs``/``append`` lists."""
    tag = value_tag(enc)
    if tag == "plain":
        return enc
    if tag == "json":
        return enc["json"]
    if tag == "msgs":
        return [load_message(n) for n in load_refs(enc)]
    if tag == "msg":
        return load_message(ordinal(enc["msg"]))
    if tag == "dict":
        inner = enc["dict"]
        if not isinstance(inner, dict):
            raise CodecError("'dict' value must be an object")
        return {k: decode_value(v, load_message, load_refs, serde) for k, v in inner.items()}
    if tag == "snap":
        return _DeltaSnapshot(decode_value(enc["snap"], load_message, load_refs, serde))
    if tag == "model":
        return _decode_model(enc["model"], enc.get("json"))
    return serde_decode(enc["serde"], serde)


def message_refs(
    enc: Any, load_refs: ListLoader | None = None, where: str = ""
) -> list[tuple[str, list[int]]]:
    """Every message an encoded value refers to, as ``(where, ordinals)`` groups.

    ``where`` names the value in errors and grows with the keys of nested
    ``dict`` values. ``load_refs`` resolves message lists (default: the
    ordinals the list itself holds, `refs_of`). Raises `CodecError` on a
    malformed value, prefixed with the ``where`` of the part at fault.

    >>> message_refs({"dict": {"a": {"msg": 3}, "b": {"msgs": [1, 2]}}}, where="v")
    [('v.a', [3]), ('v.b', [1, 2])]
    """
    out: list[tuple[str, list[int]]] = []
    _walk(enc, load_refs or refs_of, where, out)
    return out


def _walk(enc: Any, load_refs: ListLoader, where: str, out: list[tuple[str, list[int]]]) -> None:
    try:
        tag = value_tag(enc)
        if tag == "msgs":
            out.append((where, load_refs(enc)))
        elif tag == "msg":
            out.append((where, [ordinal(enc["msg"])]))
        elif tag == "dict" and not isinstance(enc["dict"], dict):
            raise CodecError("'dict' value must be an object")
    except CodecError as exc:
        raise CodecError(f"{where}: {exc}" if where else str(exc), dangling=exc.dangling) from None
    if tag == "dict":
        for key, inner in enc["dict"].items():
            _walk(inner, load_refs, f"{where}.{key}" if where else key, out)
    elif tag == "snap":
        _walk(enc["snap"], load_refs, where, out)


def ordinal(n: Any) -> int:
    """A message ordinal (``CodecError`` unless a non-negative integer)."""
    if type(n) is not int or n < 0:
        raise CodecError(f"message reference must be a non-negative integer, got {n!r}")
    return n


def refs_of(enc: Mapping[str, Any]) -> list[int]:
    """The ordinals a ``msgs`` / ``append`` value lists itself."""
    refs = enc.get("msgs", enc.get("append"))
    if not isinstance(refs, list):
        raise CodecError("a message list must be a list of message ordinals")
    return [ordinal(n) for n in refs]


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
