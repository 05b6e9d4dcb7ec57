"""Message bodies: a LangChain message as readable JSON (or through the serializer), and back.

A message is stored once, on a ``msg`` line, and referenced by ordinal
afterwards; its body is ``{"msg": {"type": ..., "content": ..., ...}}`` (every
non-default field) or, when some field is not plain JSON (an ``artifact``
holding bytes, say), ``{"type": ..., "id": ..., "serde": [type, base64]}``.
Digests of bodies let a writer find a message it stored before.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

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
from pydantic import ValidationError

from langgraph_ctx.codec.values import is_plain_json, serde_decode, serde_encode
from langgraph_ctx.errors import CodecError

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

BODY_KEYS = ("msg", "type", "id", "serde")
"""The keys of a ``msg`` line that make up a message's own body."""


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
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # LangChain's own validators raise KeyError & co.
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


def like_body(like: dict[str, Any], message_id: Any) -> dict[str, Any]:
    """The readable body of a ``like`` line: the earlier body ``like`` with this id."""
    if message_id is None:
        like.pop("id", None)
    else:
        like["id"] = message_id
    return like
