"""Message bodies: a LangChain message as readable JSON (or through the serializer), and back.

A message is stored once, on a ``msg`` line, and referenced by ordinal
afterwards; its body is ``{"msg": {"type": ..., "content": ..., ...}}`` (every
non-default field) or, when some field is not plain JSON (an ``artifact``
holding bytes, say), ``{"type": ..., "id": ..., "serde": [type, base64]}``.
Digests of bodies let a writer find a message it stored before.

It is one module (about 620 lines) because building a message without validation
(`messages_unvalidated`, what a cold open spends most on), checking that validation
would build the same, and fingerprinting a built body share one plan per message
class (`_construct_plan`); split, each part would import the others' internals.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import types
from collections.abc import Mapping
from itertools import repeat
from typing import Any, NamedTuple

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
from pydantic import BaseModel, ValidationError

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
    """The readable form of a message: its type, content, every non-default field and
    its extra fields (the message classes allow them; validation rebuilds them).

    Returns ``None`` when some field is not plain JSON; the caller then stores
    the message body through the serializer.
    """
    out: dict[str, Any] = {"type": message.type, "content": message.content}
    for name, required, default in _field_defaults(type(message)):
        value = getattr(message, name, None)
        if not required and value == default:
            continue
        out[name] = value
    extra = message.__pydantic_extra__
    if extra:  # fields of its own (``HumanMessage("hi", source="ui")``): kept, as LangGraph does
        for name, value in extra.items():
            out.setdefault(name, value)
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
    """Rebuild a message; only LangChain's message classes.

    A body whose every field is of the plain shape validation would keep as it
    is (`messages_unvalidated`: text or text/dict blocks, string ids, tool calls as
    `create_tool_call` makes them, ...) is built without validation
    (``model_construct``, about 5x cheaper: what a cold open pays per message);
    anything else is validated, so what comes back is the same either way
    (tests/test_file_format.py compares the two). Neither path imports or calls
    anything the data names: the class is one of `MESSAGE_CLASSES`.
    """
    return _from_json(data)[0]


def message_from_json_owned(data: Any) -> BaseMessage:
    """`message_from_json`, sharing no dict or list with ``data`` (a parsed line a
    cache keeps): the unvalidated build copies what it takes already; a validated
    message gets its containers copied after."""
    message, built = _from_json(data)
    if not built:
        fields = message.__dict__
        for key, value in fields.items():
            if value and type(value) in _CONTAINERS:
                fields[key] = json_copy(value)
    return message


def _from_json(data: Any) -> tuple[BaseMessage, bool]:
    """The message, and whether it was built unvalidated (from copies of ``data``'s parts)."""
    if not isinstance(data, dict):
        raise CodecError("message must be a JSON object")
    kind = data.get("type")
    cls = MESSAGE_CLASSES.get(kind) if type(kind) is str else None
    if cls is None:
        raise CodecError(f"unknown message type {kind!r}")
    built = message_unvalidated(data)
    if built is not None:
        return built, True
    return _validated(cls, data), False


_CONTAINERS = (dict, list)


def json_copy(value: Any) -> Any:
    """A copy of the dicts and lists in JSON-shaped ``value`` (leaves shared; several
    times cheaper than ``copy.deepcopy``, which it equals on parsed JSON).

    >>> src = {"a": [1, {"b": 2}]}
    >>> out = json_copy(src)
    >>> out == src and out["a"] is not src["a"] and out["a"][1] is not src["a"][1]
    True
    """
    kind = type(value)
    if kind is dict:
        if _LEAVES.issuperset(map(type, value.values())):  # flat (tool call args): in C
            return value.copy()
        return {k: json_copy(v) for k, v in value.items()}
    if kind is list:
        if _LEAVES.issuperset(map(type, value)):
            return value.copy()
        return [json_copy(v) for v in value]
    return value


_LEAVES = frozenset({str, int, float, bool, type(None)})
"""The types of JSON's leaves: a container holding only these is copied in one step."""


def _validated(cls: type[BaseMessage], data: dict[str, Any]) -> BaseMessage:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise CodecError(f"invalid {cls.__name__}: {where}: {first.get('msg')}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # LangChain's own validators raise TypeError, KeyError & co.
        kept = _with_own_call_keys(cls, data) if isinstance(exc, Exception) else None
        if kept is None:
            raise CodecError(f"invalid {cls.__name__}: {type(exc).__name__}: {exc}") from None
        return kept


def _with_own_call_keys(cls: type[BaseMessage], data: dict[str, Any]) -> BaseMessage | None:
    """A message whose tool calls carry keys of their own (``index``, which a node may add
    in place after LangChain made the call), which LangChain's validator refuses:
    validated without those keys, then given them back, as LangGraph's serializer reads
    it back (``model_construct``). ``None`` if that is not the only thing wrong."""
    calls = data.get("tool_calls")
    if type(calls) is not list or not all(type(c) is dict for c in calls):
        return None
    own = [{k: v for k, v in c.items() if k not in _TOOL_CALL_KEYS} for c in calls]
    if not any(own):
        return None
    plain = [{k: v for k, v in c.items() if k in _TOOL_CALL_KEYS} for c in calls]
    try:
        message = cls.model_validate({**data, "tool_calls": plain})
    except Exception:
        return None
    made = getattr(message, "tool_calls", None)
    if type(made) is not list or len(made) != len(calls):
        return None
    message.__dict__["tool_calls"] = [{**m, **o} for m, o in zip(made, own, strict=True)]
    return message


def _plain_dict(value: Any) -> bool:
    return type(value) is dict and _TEXT_ONLY.issuperset(map(type, value))  # str keys, in C


def _text_or_blocks(value: Any) -> bool:
    if type(value) is str:
        return True
    return type(value) is list and all(
        type(b) is str or (type(b) is dict and _TEXT_ONLY.issuperset(map(type, b)))
        for b in value
    )


def _optional_str(value: Any) -> bool:
    return value is None or type(value) is str


def _text(value: Any) -> bool:
    return type(value) is str


_TOOL_CALL_KEYS = frozenset({"name", "args", "id", "type"})


def _tool_calls(value: Any) -> list[dict[str, Any]] | None:
    """Tool calls as `_backwards_compat_tool_calls` rebuilds them (new dicts, ``args``
    copied: nothing shared with ``value``), or ``None`` if unusual."""
    if type(value) is not list:
        return None
    out = []
    for tc in value:
        if type(tc) is not dict or not tc.keys() <= _TOOL_CALL_KEYS:
            return None
        name, args, call_id = tc.get("name"), tc.get("args"), tc.get("id")
        if (
            type(name) is not str
            or type(args) is not dict
            or not _TEXT_ONLY.issuperset(map(type, args))  # `_plain_dict`, inline
            or (call_id is not None and type(call_id) is not str)
            or tc.get("type", "tool_call") != "tool_call"
        ):
            return None
        out.append({"name": name, "args": json_copy(args), "id": call_id, "type": "tool_call"})
    return out


_USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")  # `UsageMetadata`'s order


def _plain_usage(value: Any) -> bool:
    """Usage validation keeps as it is: three ints, in `UsageMetadata`'s order (one put
    in another order is rebuilt by validation, in that order)."""
    return (
        type(value) is dict
        and tuple(value) == _USAGE_KEYS
        and all(type(x) is int for x in value.values())
    )

# Fields (beyond type/content) whose plain values validation keeps unchanged, by check.
_PLAIN_FIELDS: dict[str, Any] = {
    "id": _optional_str,
    "name": _optional_str,
    "additional_kwargs": _plain_dict,
    "response_metadata": _plain_dict,
}
_CLASS_FIELDS: dict[type[BaseMessage], dict[str, Any]] = {
    ToolMessage: {
        "tool_call_id": _text,
        "status": lambda v: v in ("success", "error"),
    },
    ChatMessage: {"role": _text},
    FunctionMessage: {"name": _text},
    AIMessage: {
        "usage_metadata": lambda v: v is None or _plain_usage(v),
        "invalid_tool_calls": lambda v: v == [],
    },
}


def message_unvalidated(data: Any) -> BaseMessage | None:
    """The message of a body built without validation (`messages_unvalidated`: every field of
    its plain shape, most messages), as `message_from_json_owned` builds it; ``None``
    for a body only validation builds (build that one with `message_from_json_owned`).

    Such a message holds no dict or list of the body's (copies, or fresh empty ones),
    so what it held when built can be told again later from the body alone
    (`body_fingerprint`), however the message was changed since, while the body was not.

    >>> m = message_unvalidated({"type": "human", "content": "hi", "id": "1"})
    >>> type(m).__name__, m.content, m.id
    ('HumanMessage', 'hi', '1')
    >>> message_unvalidated({"type": "human", "content": "hi", "surprise": 1}) is None
    True
    """
    return messages_unvalidated([data])[0]


_NO_PLAN = (None, None)

OWN_ID: Any = object()
"""In the ``ids`` of `messages_unvalidated`: the body keeps its own id (not a ``like``)."""

_ID_KEY = frozenset({"id"})


def messages_unvalidated(
    bodies: list[Any], ids: list[Any] | None = None
) -> list[BaseMessage | None]:
    """`message_unvalidated` of each body, in one loop: a cold open builds hundreds of
    messages at once, and a Python call per step of a message's build cost a third of
    it. Each class's plan is looked up once.

    ``ids``: for each body, `OWN_ID`, or the id of a ``like`` line that repeats it: the
    message of ``like_body(body, id)``, built without making that body (a chat's head is
    half ``like`` lines).

    Only bodies validation would keep unchanged are built: every field known and of its
    plain type (`_checked_fields`), containers copied (the parsed line may be cached). A
    body of text fields only (most messages of a chat: type, content, id) is checked and
    taken in a few C-level steps (`_is_text_body`, inline). The message is made as
    ``model_construct`` makes it: ``__dict__``, the fields set, no extra, no private.

    >>> [type(m).__name__ if m else m for m in messages_unvalidated(
    ...     [{"type": "ai", "content": "a"}, {"type": "human", "content": "b", "x": 1}, 7])]
    ['AIMessage', None, None]
    """
    plans: dict[Any, Any] = {}
    out: list[BaseMessage | None] = []
    append = out.append
    text_only, set_dict, set_fields = _TEXT_ONLY, _SET_DICT, _SET_FIELDS_SET
    set_extra, set_private, own, new_object = _SET_EXTRA, _SET_PRIVATE, OWN_ID, object.__new__
    if ids is not None and len(ids) != len(bodies):
        raise ValueError("one id (or OWN_ID) per body")
    for data, new_id in zip(bodies, repeat(own) if ids is None else ids, strict=False):
        if type(data) is not dict:
            append(None)
            continue
        if new_id is not own and type(new_id) is not str:
            data, new_id = like_body(data, new_id), own  # the body as the line reads
        kind = data.get("type")
        found = plans.get(kind) if type(kind) is str else _NO_PLAN
        if found is None:
            cls = MESSAGE_CLASSES.get(kind)
            found = plans[kind] = (cls, None if cls is None else _construct_plan(cls))
        cls, plan = found
        if plan is None or cls is None:
            append(None)
            continue
        keys = data.keys()
        if (
            keys <= plan.text_keys
            and text_only.issuperset(map(type, data.values()))
            and "content" in keys
            and plan.required <= keys
        ):  # `_is_text_body`, inline
            fields = plan.template.copy()  # every field in declaration order, its default
            fields.update(data)  # in that order still: every key is a field
            for name, factory in plan.factories:  # none of them is in ``data``
                fields[name] = factory()
            if new_id is not own:  # a string id, in its place: still a text body
                fields["id"] = new_id
        else:
            if new_id is not own:
                data, new_id = like_body(data, new_id), own
                keys = data.keys()
            checked = _checked_fields(plan, data)
            if checked is None:
                append(None)
                continue
            fields = checked
        m = new_object(cls)  # what ``cls.__new__`` is (`_construct_plan`), not looked up
        set_dict(m, fields)
        set_fields(m, set(keys) if new_id is own else keys | _ID_KEY)
        set_extra(m, {})
        set_private(m, None)
        append(m)
    return out


def body_fingerprint(data: dict[str, Any]) -> tuple[Any, ...]:
    """The field values `message_unvalidated` gave the message of ``data`` (a body it
    built), in order, each dict or list an equal one of the fingerprint's own (an
    empty one of a text-only body: a stand-in of `EMPTY_STANDINS`): what
    ``tuple(message.__dict__.values())`` equals while nobody changed the message.

    >>> body = {"type": "ai", "content": "ok", "tool_calls": [{"name": "f", "args": {}}]}
    >>> tuple(message_unvalidated(body).__dict__.values()) == body_fingerprint(body)
    True
    """
    plan = _construct_plan(MESSAGE_CLASSES[data["type"]])
    assert plan is not None
    if _is_text_body(plan, data):
        fields = plan.template.copy()
        fields.update(data)
        fields.update(plan.standins)
    else:
        checked = _checked_fields(plan, data)
        assert checked is not None, "not a body message_unvalidated built"
        fields = checked
    return tuple(fields.values())


EMPTY_STANDINS: dict[type, Any] = {dict: {}, list: []}
"""What a fingerprint holds for an empty dict or list: an empty one of its own (never
handed out, never changed), not the message's, so that a later fill-in of the
message's is unequal."""


def _is_text_body(plan: _Plan, data: dict[str, Any]) -> bool:
    """Whether ``data`` is a whole body of text fields only: its class's required
    fields and content, and fields any string is a plain value of (in C-level steps)."""
    keys = data.keys()
    return (
        keys <= plan.text_keys
        and _TEXT_ONLY.issuperset(map(type, data.values()))
        and "content" in keys
        and plan.required <= keys
    )


def _checked_fields(plan: _Plan, data: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a message built from ``data`` by `messages_unvalidated`, field by field
    (``None``: validate it)."""
    checks = plan.checks
    fields = plan.template.copy()
    for key, value in data.items():
        check = checks.get(key)
        if check is None:
            return None  # not a field of the class: validation keeps it in extras
        if check is _AS_IS:  # "type", in the fields set as validation records it
            fields[key] = value
        elif check is _CONTENT:
            if type(value) is str:
                fields[key] = value
            elif _text_or_blocks(value):
                fields[key] = json_copy(value)
            else:
                return None
        elif check is _TOOL_CALLS:
            calls = _tool_calls(value)
            if calls is None:
                return None
            fields[key] = calls
        elif not check(value):
            return None
        elif type(value) is dict:
            fields[key] = json_copy(value) if value else {}
        else:
            fields[key] = value
    keys = data.keys()
    if "content" not in keys or not plan.required <= keys:
        return None
    for name, factory in plan.factories:
        if name not in keys:
            fields[name] = factory()
    extra = fields["additional_kwargs"] if plan.parses_tool_calls else None
    if extra and "tool_calls" in extra and "tool_calls" not in keys:
        return None  # validation would parse these into tool calls
    return fields


_TEXT_ONLY = frozenset({str})
_set = object.__setattr__  # what pydantic's own construction uses (BaseModel's is guarded)


def _slot_setter(name: str) -> Any:
    """The setter of one of `BaseModel`'s slots, as ``_set(m, name, v)`` does it without
    looking the slot up on every call (a cold open sets four per message)."""
    slot: Any = BaseModel.__dict__.get(name)
    if type(slot) in (types.MemberDescriptorType, types.GetSetDescriptorType):
        return slot.__set__
    return lambda m, value: _set(m, name, value)  # a pydantic laid out otherwise


_SET_DICT = _slot_setter("__dict__")
_SET_FIELDS_SET = _slot_setter("__pydantic_fields_set__")
_SET_EXTRA = _slot_setter("__pydantic_extra__")
_SET_PRIVATE = _slot_setter("__pydantic_private__")


_AS_IS, _CONTENT, _TOOL_CALLS = object(), object(), object()  # checks `_checked_fields` inlines


@functools.cache
def _field_checks(cls: type[BaseMessage]) -> dict[str, Any] | None:
    """The check of each field a body of ``cls`` may hold to be built unvalidated
    (``None``: always validate the class)."""
    if cls not in _CLASS_FIELDS and cls not in _PLAIN_CLASSES:
        return None
    checks: dict[str, Any] = {"type": _AS_IS, "content": _CONTENT, **_PLAIN_FIELDS}
    checks.update(_CLASS_FIELDS.get(cls, {}))
    if cls is AIMessage:
        checks["tool_calls"] = _TOOL_CALLS
    return {key: check for key, check in checks.items() if key in cls.model_fields}


_PLAIN_CLASSES = frozenset({HumanMessage, SystemMessage})


@functools.cache
def _construct_plan(cls: type[BaseMessage]) -> _Plan | None:
    """How `messages_unvalidated` builds ``cls``; ``None`` when the class has what it does not
    reproduce (aliases, a post-init hook, an unusual default factory). Building directly:
    pydantic's ``model_construct`` inspects each default factory's signature on every
    call, which costs more than validating."""
    checks = _field_checks(cls)
    if (
        checks is None
        or cls.__pydantic_post_init__
        or cls.__new__ is not object.__new__
        or cls.model_config.get("extra") != "allow"
    ):
        return None
    template: dict[str, Any] = {}
    required: set[str] = set()
    factories: list[tuple[str, Any]] = []
    for name, f in cls.model_fields.items():
        if f.alias not in (None, name) or f.validation_alias not in (None, name):
            return None
        factory = f.default_factory
        if factory is not None and factory not in (dict, list):
            return None
        if f.is_required():
            required.add(name)
        elif factory is not None:
            factories.append((name, factory))
        template[name] = None if factory is not None or f.is_required() else f.default
    text_keys = frozenset(
        key for key, check in checks.items() if check in (_AS_IS, _CONTENT, _optional_str, _text)
    )
    return _Plan(
        template,
        frozenset(template),
        frozenset(required),
        tuple(factories),
        checks,
        text_keys,
        cls is AIMessage,
        {name: EMPTY_STANDINS[factory] for name, factory in factories},
    )


class _Plan(NamedTuple):
    template: dict[str, Any]
    """Every field in declaration order (the order validation fills ``__dict__`` in),
    with its default (immutable ones: shared, as validation shares them)."""
    names: frozenset[str]
    required: frozenset[str]
    factories: tuple[tuple[str, Any], ...]
    """The fields whose default is a fresh ``dict()`` / ``list()`` per message."""
    checks: dict[str, Any]
    """`_field_checks` of the class."""
    text_keys: frozenset[str]
    """The fields any string is a plain value of (type, content, id, name, ...)."""
    parses_tool_calls: bool
    """Whether validation turns ``additional_kwargs["tool_calls"]`` into tool calls."""
    standins: dict[str, Any]
    """The `EMPTY_STANDINS` of the fields ``factories`` fills (`body_fingerprint`)."""


def message_digest(body: Mapping[str, Any]) -> bytes:
    """Content address of a message line body (its ``msg`` or ``serde`` part).

    The body as canonical JSON (sorted keys), by orjson (four times faster than
    `json.dumps`, the same bytes for the same body): the message as a put makes it and
    as it is read back name their fields, and validation rebuilds tool calls and usage,
    in different orders. Then its free-form dicts (`ORDERED_FIELDS`) in their own key
    order, which validation keeps: two messages whose ``response_metadata`` differ only
    in key order are two messages, each read back in its order, as LangGraph's savers
    keep it. What orjson refuses (an integer over 64 bits) or would write as ``null``
    (a NaN a lenient parse let in) by `json.dumps`, whose text never equals orjson's.
    Digests live in memory only (`_Index.msg_digest`), computed by this one function on
    both sides.
    """
    readable = body.get("msg")
    ordered = (
        {name: readable[name] for name in ORDERED_FIELDS if name in readable}
        if type(readable) is dict
        else None
    )
    canonical: bytes | None
    try:
        canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        if ordered is not None:
            canonical += orjson.dumps(ordered)
    except (TypeError, orjson.JSONEncodeError):
        canonical = None
    if canonical is None or (b"null" in canonical and has_nonfinite(body)):
        text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        if ordered is not None:
            text += json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
        canonical = text.encode("utf-8", "surrogatepass")  # a lone surrogate: its bytes
    return hashlib.blake2b(canonical, digest_size=16).digest()


ORDERED_FIELDS = ("response_metadata", "additional_kwargs")
"""A message's dicts of any keys, which validation keeps in their order (a provider's
metadata, mostly): told apart by their key order (`message_digest`)."""


def has_nonfinite(value: Any) -> bool:
    """Whether a float NaN or infinity sits anywhere in ``value`` (dicts, lists, tuples:
    what orjson writes as JSON containers, and writes such a float in as ``null``)."""
    kind = type(value)
    if kind is float:
        return not math.isfinite(value)
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return False
    # A container of scalars only (a message list's ordinals, most often) is passed
    # over in C, without a call per item.
    if _SCALARS.issuperset(map(type, items)):
        return False
    return any(map(has_nonfinite, items))


# What can hold no float (exact types: a float subclass is not JSON to orjson either).
_SCALARS = frozenset({int, str, bool, type(None)})


def message_digest_without_id(body: Mapping[str, Any]) -> bytes | None:
    """Content address ignoring the id, for readable bodies (``None`` otherwise)."""
    readable = body.get("msg")
    if not isinstance(readable, dict):
        return None
    return message_digest({"msg": {k: v for k, v in readable.items() if k != "id"}})


def message_body(message: BaseMessage, serde: SerializerProtocol) -> dict[str, Any]:
    """The part of a ``msg`` line that holds the message: ``msg`` or ``type/id/serde``.

    A message of an app's own subclass (``class Tagged(HumanMessage)``) is serialized
    whole, its class named inside (a readable body names only its ``type``): it comes
    back as that class where the rules allow it (``allowed_types``), else as LangChain's
    class for its type with its own fields (`message_from_body`).
    """
    readable = message_to_json(message) if _own_class(message) else None
    if readable is not None:
        return {"msg": readable}
    return {"type": message.type, "id": message.id, "serde": serde_encode(message, serde)}


def _own_class(message: BaseMessage) -> bool:
    """Whether ``message`` is of LangChain's own class for its ``type``."""
    return type(message) is MESSAGE_CLASSES.get(message.type)


def message_from_body(line: Mapping[str, Any], serde: SerializerProtocol) -> BaseMessage:
    """Rebuild the message of a ``msg`` line that has its own body (not ``like``)."""
    if "msg" in line:
        return message_from_json(line["msg"])
    if "serde" in line:
        value = serde_decode(line["serde"], serde)
        if isinstance(value, BaseMessage):
            return value
        if type(value) is dict and type(value.get("type")) is str:
            # An app's own message class the rules do not rebuild (`class
            # Tagged(HumanMessage)` with a datetime field, not in ``allowed_types``):
            # LangGraph's decoder gives its fields, built here as LangChain's class
            # for their type, its own fields kept, as from a readable body.
            if value["type"] not in MESSAGE_CLASSES:
                raise CodecError(
                    f"a message of type {value['type']!r}, a class of the app's own, reads "
                    "back only where the saver allows its class: allowed_types=[...]"
                )
            return message_from_json(value)
        raise CodecError("serialized message payload is not a LangChain message")
    raise CodecError("message line has neither 'msg' nor 'serde'")


def like_body(like: Mapping[str, Any], message_id: Any) -> dict[str, Any]:
    """The readable body of a ``like`` line: a new dict, the earlier body ``like`` with
    this line's id (none: without one); ``like`` is left as it is.

    >>> like_body({"type": "human", "content": "hi"}, "m1")
    {'type': 'human', 'content': 'hi', 'id': 'm1'}
    """
    if message_id is None:
        body = dict(like)
        body.pop("id", None)
        return body
    return {**like, "id": message_id}
