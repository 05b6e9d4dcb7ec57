"""Encoded values: channel values and writes as JSON, and back.

Plain JSON where that is unambiguous, else a small tagged object whose key
says what it is. Every message anywhere in a value (in a list, a dict, a
``Send``, a ``Command``, a model's fields, ...) is stored once, on its own
``msg`` line, and referenced by ordinal:

======================================  ==========================================
``"text"``, ``3``, ``null``, ``[1]``    a string, number, bool, null or list, as is
                                        (tuples in plain JSON come back as lists,
                                        as LangGraph's serializer returns them)
``{"json": {...}}``                     a JSON object (tagged, so it never looks
                                        like one of the tags below)
``{"msgs": [n, ...]}``                  a list of messages, by ordinal
``{"append": [n, ...]}``                the channel's value at the parent
                                        checkpoint, then these messages
``{"msgs": [...], "keep": k,``          the first ``k`` messages of the value
``"base": line}``                       stored on line ``line``, then these
``{"msgs": [...], "keep": k,``          inside a value: the first ``k`` messages
``"base": line, "ch": channel}``        of ``channel``'s list on line ``line``,
                                        then these (format 3)
``{"msg": n}``                          one message
``{"dict": {key: v}}``                  a dict with string keys, some value not
                                        plain JSON
``{"pairs": [[k, v], ...]}``            a dict with some key that is not a string
``{"list": [v, ...]}``                  a list (or tuple) with some item not plain
``{"tuple": [v, ...]}``                 a tuple that stays one: where a validated
                                        class's declared type says tuple (`Shape`),
                                        in a set member, a dict key, an enum value
``{"set": [v, ...]}``                   a set (``"frozenset"``: a frozenset)
``{"datetime": iso}``                   also ``date``, ``uuid``, ``decimal``
``{"send": [node, v]}``                 a LangGraph ``Send`` (``"timeout": v``)
``{"model": [module, qualname],``       a pydantic (v2 or v1) model: its fields as
``"json": {...}}``                      plain JSON, or ``"fields": {name: v}``
``{"dataclass": [module, qualname],``   a dataclass (``"json"`` or ``"fields"``;
``"fields": {name: v}}``                ``Command``, ``Interrupt`` are ones)
``{"namedtuple": [...], "fields": ...}``  a ``NamedTuple``
``{"enum": [module, qualname],``        an ``Enum`` member, by value
``"value": v}``
``{"snap": v}``                         a ``DeltaChannel`` snapshot of a value
``{"serde": [type, base64]}``           anything else, through the serializer
======================================  ==========================================

Which classes a class tag may become is `langgraph_ctx.codec.classes`' rule;
`value_tag` is the one place that reads a tag; `decode_value` and
`message_refs` (the walk that finds every message a value refers to) both go
through it.

One module (a little over 600 lines) because the encoder, the decoder and the walk read
and write the one table above: split, each half would restate it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import functools
import itertools
import json
import math
import re
import sys
import types
import typing
import uuid
from collections import abc
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import typing_extensions
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Send
from pydantic import BaseModel

from langgraph_ctx.codec.classes import (
    CLASS_TAGS,
    DEFAULT_RULES,
    ClassKind,
    cached_by_class,
    declared_fields,
    fits,
    is_dataclass_field,
    is_type_alias,
    kind_of,
    rebuild,
    validated_fields,
)
from langgraph_ctx.codec.classes import (
    PACKAGE_MODELS as PACKAGE_MODELS,
)
from langgraph_ctx.codec.classes import (
    ClassRules as ClassRules,
)
from langgraph_ctx.errors import (
    OTHER_SERIALIZER,
    CodecError,
    CorruptLogError,
    LangGraphCtxError,
)

SAFE_SERDE_TYPES = frozenset({"msgpack", "null", "bytes", "bytearray", "json"})
"""Serializer payload types the codec decodes itself, safely: ``msgpack`` through
LangGraph's strict serializer allowing exactly the registry, ``json`` as plain data
(LangChain's reviver is never called). ``pickle`` is refused unless the serializer
was built with ``pickle_fallback=True``; any other type (an encrypting serializer's)
goes to the configured serializer."""

TRUSTED_MODEL_PREFIX = "langgraph_ctx."
"""This package's modules; their models are on the registry (`PACKAGE_MODELS`)."""

def is_plain_json(value: Any) -> bool:
    """True for values JSON round-trips as LangGraph's serializer would (tuples count:
    LangGraph's serializer also reads them back as lists)."""
    return _json_shaped(value, True)


def _is_exact_json(value: Any) -> bool:
    """`is_plain_json` without tuples: JSON that reads back exactly as it was."""
    return _json_shaped(value, False)


def _json_shaped(value: Any, tuples: bool) -> bool:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        pairs: Any = value.items()
    elif kind is list or (tuples and kind is tuple):
        pairs = zip(itertools.repeat(""), value)
    else:
        return False
    for k, v in pairs:  # a loop, not generators: every put checks its metadata
        if type(k) is not str or not (
            v is None or type(v) in (str, int, bool) or _json_shaped(v, tuples)
        ):
            return False
    return True


# ------------------------------------------------------------------------- serde


class LogSerde(SerializerProtocol):
    """The saver's serializer: the configured one for writing, the codec's rules for reading.

    ``rules`` (`ClassRules`) say which classes stored values may become; they
    travel with the serializer so that every reader of a line (the saver's
    indexes, ``verify``, the browse API) applies the same ones, and `allow`
    (the saver's ``with_allowlist``, what ``compile()`` calls under
    ``LANGGRAPH_STRICT_MSGPACK``) extends them.
    """

    def __init__(self, inner: SerializerProtocol, rules: ClassRules) -> None:
        self.inner = inner
        self.rules = rules

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return _loads_safely(data[0], data[1], self.inner, self.rules)

    def allow(self, extra: Iterable[Any]) -> None:
        """Also allow ``extra`` (classes or ``(module, name)`` pairs), in place.

        In place, because every index of the saver reads through this object.
        """
        extra = list(extra)
        self.rules = self.rules.extended(extra)
        if isinstance(self.inner, JsonPlusSerializer):
            self.inner = self.inner.with_msgpack_allowlist(extra)


def value_rules(serde: SerializerProtocol) -> ClassRules:
    """The class rules a serializer carries (`LogSerde`), else the default ones
    extended by a `JsonPlusSerializer`'s explicit msgpack allowlist."""
    if isinstance(serde, LogSerde):
        return serde.rules
    allowed = getattr(serde, "_allowed_msgpack_modules", None)
    if isinstance(allowed, (set, frozenset)) and allowed:
        return DEFAULT_RULES.extended(allowed)
    return DEFAULT_RULES


def serde_encode(value: Any, serde: SerializerProtocol) -> list[str]:
    """``[type, base64]``: a value through LangGraph's serializer."""
    type_, data = serde.dumps_typed(value)
    return [type_, base64.b64encode(data).decode("ascii")]


def serde_decode(payload: Any, serde: SerializerProtocol) -> Any:
    """Inverse of `serde_encode`, under the rules of `SAFE_SERDE_TYPES`.

    Whatever the payload makes the decoder raise, even a ``BaseException``
    such as ``SystemExit``, comes out as `CodecError` (a real Ctrl-C aside).
    """
    if (
        not isinstance(payload, list)
        or len(payload) != 2
        or not all(isinstance(p, str) for p in payload)
    ):
        raise CodecError("serialized payload must be [type, base64]")
    type_, data = payload
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise CodecError("serialized payload is not valid base64") from None
    if isinstance(serde, LogSerde):
        return _loads_safely(type_, raw, serde.inner, serde.rules)
    return _loads_safely(type_, raw, serde, value_rules(serde))


def _loads_safely(type_: str, raw: bytes, inner: SerializerProtocol, rules: ClassRules) -> Any:
    if type_ == "pickle" and not getattr(inner, "pickle_fallback", False):
        raise CodecError("refusing a pickle payload (pickle runs code on load)")
    try:
        if type_ == "json":  # plain data: LangChain's reviver would build objects
            return json.loads(raw)
        if type_ in SAFE_SERDE_TYPES:
            return rules.serde_for(type_, raw).loads_typed((type_, raw))
        return inner.loads_typed((type_, raw))
    except KeyboardInterrupt:
        raise
    except NotImplementedError:  # LangGraph's serializers, for a type they have no codec of
        raise CodecError(
            f"a value serialized as {type_!r}, {OTHER_SERIALIZER} (written with another, "
            "an EncryptedSerializer?)"
        ) from None
    except BaseException as exc:  # the serializer raises many types on bad bytes
        raise CodecError(
            f"serialized {type_!r} payload does not decode: {type(exc).__name__}: {exc}"
        ) from None


# ------------------------------------------------------------------------ values

MessageRef = Callable[[BaseMessage], int]
"""Stores (or finds) a message and returns its ordinal."""

MessageRefs = Callable[[list[BaseMessage]], list[int]]  # a writer may check a list at once
NestedList = Callable[[list[BaseMessage]], dict[str, Any]]  # a list inside a value, encoded

MessageLoader = Callable[[int], BaseMessage]
ListLoader = Callable[[Mapping[str, Any]], list[int]]
"""Resolves the ordinals of a ``msgs`` / ``append`` value (following ``base`` links)."""

ValueTag = Literal[
    "plain",
    "json",
    "msgs",
    "msg",
    "dict",
    "pairs",
    "list",
    "tuple",
    "set",
    "frozenset",
    "datetime",
    "date",
    "uuid",
    "decimal",
    "send",
    "snap",
    "model",
    "dataclass",
    "namedtuple",
    "enum",
    "serde",
]

_SCALARS: dict[type, str] = {
    dt.datetime: "datetime",
    dt.date: "date",
    uuid.UUID: "uuid",
    decimal.Decimal: "decimal",
}
_PARSE: dict[str, Callable[[str], Any]] = {
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
}


def is_message_list(value: Any) -> bool:
    return type(value) is list and len(value) > 0 and all_messages(value)


def all_messages(items: Iterable[Any]) -> bool:
    """Whether every item is a message (the loop in C: a state's list can be long)."""
    return all(map(isinstance, items, itertools.repeat(BaseMessage)))


def encode_value(
    value: Any,
    ref: MessageRef,
    serde: SerializerProtocol,
    refs: MessageRefs | None = None,
    nested: NestedList | None = None,
) -> Any:
    """Encode a channel value or write; messages become references via ``ref`` / ``refs``,
    and a message list inside the value via ``nested`` (default: ``{"msgs": refs}``)."""
    refs = refs or (lambda messages: [ref(m) for m in messages])
    if isinstance(value, BaseMessage):
        return {"msg": ref(value)}
    if is_message_list(value):
        return {"msgs": refs(value)}
    if isinstance(value, _DeltaSnapshot):
        return {"snap": encode_value(value.value, ref, serde, refs, nested)}
    if is_plain_json(value):
        return {"json": value} if type(value) is dict else value
    nested = nested or (lambda messages: {"msgs": refs(messages)})
    return _Encoder(ref, nested, serde).encode(value, exact=False)


class Declared:
    """Where a value sits in a field LangGraph reads back through pydantic validation
    (`classes.validated_fields`): its declared type, which decides where validation
    makes a tuple of what LangGraph's serializer stored as a list."""

    __slots__ = ("annotation",)

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation


Shape = bool | Declared
"""How `_Encoder.encode` stores the tuples of a value: ``True`` keeps every one (a set
member or a dict key must stay hashable, an enum's value must find its member),
``False`` stores each as a list (LangGraph's serializer reads every tuple back as a
list), a `Declared` keeps those its declared type says are tuples."""


class _Encoder:
    """The walk of `encode_value` through a value that is not plain JSON."""

    def __init__(self, ref: MessageRef, nested: NestedList, serde: SerializerProtocol) -> None:
        self.ref, self.nested, self.serde = ref, nested, serde

    def encode(self, value: Any, exact: Shape) -> Any:
        """One value anywhere inside another, its tuples stored as ``exact`` says (`Shape`)."""
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            return value
        if kind is float and math.isfinite(value):
            return value
        if type(exact) is Declared and (kind is list or kind is tuple or kind is dict):
            if _is_exact_json(value):  # no tuple in it: as it is, whatever its type says
                return {"json": value} if kind is dict else value
            if kind is dict:
                keys = _typeddict_shapes(exact.annotation)
                if keys is not None and all(type(k) is str for k in value):
                    shaped = {k: self.encode(v, keys.get(k, False)) for k, v in value.items()}
                    return {"dict": shaped}
                exact = _shape_of(exact.annotation, "dict", 1)
            elif not (value and all_messages(value)):
                declared = exact.annotation
                made = "tuple" if kind is tuple and _kind_of(declared) == "tuple" else "list"
                if all(type(v) in _SCALARS_OF_JSON for v in value):
                    return {made: list(value)}  # a pair of ints, say: nothing to shape
                items = enumerate(value)
                return {made: [self.encode(v, _shape_of(declared, made, i)) for i, v in items]}
        if kind is list or kind is tuple:
            if exact is True and kind is tuple:
                return {"tuple": [self.encode(v, exact) for v in value]}
            if _is_exact_json(value) if exact is not False else is_plain_json(value):
                return value if kind is list else list(value)
            if value and all_messages(value):
                return self.nested(value if kind is list else list(value))
            return {"list": [self.encode(v, exact) for v in value]}
        if kind is dict:
            if _is_exact_json(value) if exact is not False else is_plain_json(value):
                return {"json": value}
            if all(type(k) is str for k in value):
                return {"dict": {k: self.encode(v, exact) for k, v in value.items()}}
            return {  # keys exact: a tuple key must come back hashable
                "pairs": [[self.encode(k, True), self.encode(v, exact)] for k, v in value.items()]
            }
        if isinstance(value, BaseMessage):
            return {"msg": self.ref(value)}
        if kind is set or kind is frozenset:
            return {kind.__name__: [self.encode(v, True) for v in value]}  # hashable
        scalar = _SCALARS.get(kind)
        if scalar is not None:
            return {scalar: value.isoformat() if scalar in ("datetime", "date") else str(value)}
        if kind is Send:
            out: dict[str, Any] = {"send": [value.node, self.encode(value.arg, exact)]}
            if getattr(value, "timeout", None) is not None:
                out["timeout"] = self.encode(value.timeout, exact)
            return out
        if kind is _DeltaSnapshot:
            return {"snap": self.encode(value.value, exact)}
        tag = kind_of(kind)
        if tag is not None:
            return self.encode_object(value, tag, exact)
        if kind is Unresolved:
            return self.encode_unresolved(value)
        return {"serde": serde_encode(value, self.serde)}

    def encode_unresolved(self, value: Unresolved) -> Any:
        """An `Unresolved` as it was stored: its tag and class name, its fields anew."""
        if value.tag == "serde":
            return {"serde": value.name}
        if value.tag == "enum":
            return {"enum": value.name, "value": self.encode(value.data, exact=True)}
        if _is_exact_json(value.data):
            return {value.tag: value.name, "json": value.data}
        fields = {k: self.encode(v, exact=True) for k, v in value.data.items()}
        return {value.tag: value.name, "fields": fields}

    def encode_object(self, value: Any, tag: ClassKind, exact: Shape) -> Any:
        """An enum member (its value exactly), or a data class's fields, their tuples
        stored as LangGraph reads them back: a model's or a pydantic dataclass's as their
        declared types say (validation rebuilds them); a dataclass's or a NamedTuple's as
        lists, or as their declared types say inside a validated field (validation
        rebuilds them too); every one where ``exact`` is ``True``."""
        cls = type(value)
        name = [cls.__module__, cls.__qualname__]
        if tag == "enum":
            return {"enum": name, "value": self.encode(value.value, exact=True)}
        if tag == "model":
            fields = dict(value.__dict__)
            extra = getattr(value, "__pydantic_extra__", None)
            if extra:
                fields.update(extra)
        elif tag == "namedtuple":
            fields = dict(zip(cls._fields, value, strict=True))
        else:
            declared = cls.__dataclass_fields__
            fields = {f: getattr(value, f) for f in declared if is_dataclass_field(declared[f])}
        if _is_exact_json(fields):  # no tuple in them (most values): as they are
            return {tag: name, "json": fields}
        shapes = _field_shapes(cls, fields, exact)
        if not any(shapes.values()) and is_plain_json(fields):  # its tuples all as lists
            return {tag: name, "json": fields}
        return {tag: name, "fields": {k: self.encode(v, shapes[k]) for k, v in fields.items()}}


def _field_shapes(cls: type, fields: dict[str, Any], exact: Shape) -> dict[str, Shape]:
    """The `Shape` of each field of a data class (`_Encoder.encode_object`)."""
    if exact is True:
        return dict.fromkeys(fields, True)
    shapes = cached_by_class(cls, _validated_shapes)
    if shapes is None and type(exact) is Declared:
        shapes = cached_by_class(cls, _declared_shapes)
    if shapes is None:
        return dict.fromkeys(fields, False)
    return {k: shapes.get(k, False) for k in fields}  # an extra field: as ``Any``


def _validated_shapes(cls: type) -> dict[str, Shape] | None:
    return _shapes(validated_fields(cls))


def _declared_shapes(cls: type) -> dict[str, Shape] | None:
    return _shapes(declared_fields(cls))


def _shapes(declared: dict[str, Any] | None) -> dict[str, Shape] | None:
    return None if declared is None else {k: _shape(a) for k, a in declared.items()}


def _shape(annotation: Any) -> Shape:
    """The `Shape` of a value of declared type ``annotation``. A string (an annotation
    never evaluated: `classes.declared_fields`) keeps every tuple when it names a tuple
    type, none otherwise."""
    annotation = _unwrapped(annotation)
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return _NAMES_TUPLE.search(annotation) is not None
    if annotation is Any or annotation is object or isinstance(annotation, typing.TypeVar):
        return False
    return Declared(annotation)


def _typeddict_shapes(annotation: Any) -> dict[str, Shape] | None:
    """The `Shape` of each key of the TypedDict ``annotation`` names (alone or in a
    union); ``None`` if it names none."""
    annotation = _unwrapped(annotation)
    origin = typing.get_origin(annotation)
    union = origin is typing.Union or origin is types.UnionType
    arms = typing.get_args(annotation) if union else (annotation,)
    for arm in arms:
        arm = _unwrapped(arm)
        if isinstance(arm, type) and typing_extensions.is_typeddict(arm):
            return cached_by_class(arm, _declared_shapes)
    return None


_KEY_QUALIFIERS = frozenset({typing_extensions.Required, typing_extensions.NotRequired})


def _unwrapped(annotation: Any) -> Any:
    """``Annotated[X, ...]``, ``Required[X]``, a type alias (``type X = ...``) or a
    ``NewType`` as ``X``."""
    for _ in range(16):
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated or origin in _KEY_QUALIFIERS:
            annotation = typing.get_args(annotation)[0]
        elif is_type_alias(annotation):
            annotation = annotation.__value__
        elif isinstance(annotation, typing.NewType):
            annotation = annotation.__supertype__
        else:
            break
    return annotation


_LISTS = frozenset(
    {list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection, abc.Reversible}
)
_DICTS = frozenset({dict, abc.Mapping, abc.MutableMapping})


def _sequence_kind(annotation: Any) -> str | None:
    """``"tuple"`` or ``"list"``: what validation makes of a list under ``annotation`` (a
    union: a list where one of its types takes a list as it is, as pydantic's smart mode
    prefers); ``"dict"`` for a mapping type; ``None`` otherwise (``Any``: as stored)."""
    annotation = _unwrapped(annotation)
    origin = typing.get_origin(annotation) or annotation
    if origin is tuple:
        return "tuple"
    if origin in _LISTS:
        return "list"
    if origin in _DICTS:
        return "dict"
    if origin is typing.Union or origin is types.UnionType:
        kinds = {_sequence_kind(a) for a in typing.get_args(annotation)}
        return next((k for k in ("list", "tuple", "dict") if k in kinds), None)
    return None


_SCALARS_OF_JSON = frozenset({str, int, bool, type(None)})
_NAMES_TUPLE = re.compile(r"\b(?:tuple|Tuple)\b")


def _kind_of(annotation: Any) -> str | None:
    """`_sequence_kind`, remembered for a hashable annotation (most are)."""
    try:
        return _sequence_kind_cached(annotation)
    except TypeError:  # unhashable
        return _sequence_kind(annotation)


def _shape_of(annotation: Any, kind: str, index: int) -> Shape:
    """`_item_shape`, remembered for a hashable annotation (most are)."""
    try:
        return _item_shape_cached(annotation, kind, index)
    except TypeError:  # unhashable
        return _item_shape(annotation, kind, index)


def _item_shape(annotation: Any, kind: str, index: int) -> Shape:
    """The `Shape` of item ``index`` of a ``kind`` value under ``annotation`` (a dict's
    values: ``index`` 1)."""
    annotation = _unwrapped(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        arms = [a for a in typing.get_args(annotation) if _sequence_kind(a) == kind]
        if not arms:
            return False
        annotation = _unwrapped(arms[0])
    args = typing.get_args(annotation)
    if not args:
        return False
    if kind == "tuple":
        if len(args) == 2 and args[1] is Ellipsis:
            return _shape(args[0])
        return _shape(args[index]) if index < len(args) and args != ((),) else False
    if kind == "dict":
        return _shape(args[1]) if len(args) == 2 else False
    return _shape(args[0])


def value_tag(enc: Any) -> ValueTag:
    """What an encoded value is (``msgs`` covers ``append`` and ``keep``/``base`` lists).

    The one reading of the tags, in the order they take precedence.

    >>> [value_tag(e) for e in ("hi", {"json": {}}, {"append": [1]}, {"msg": 0})]
    ['plain', 'json', 'msgs', 'msg']
    >>> value_tag({"model": ["app", "Order"], "json": {"id": 1}})
    'model'
    """
    if not isinstance(enc, dict):
        return "plain"  # a bare scalar or list
    for kind in CLASS_TAGS:
        if kind in enc:
            return kind
    if "json" in enc:
        return "json"
    if "msgs" in enc or "append" in enc:
        return "msgs"
    for tag in _TAGS:
        if tag in enc:
            return tag
    raise CodecError(f"unknown value encoding {sorted(enc)}")


_TAGS: tuple[ValueTag, ...] = (
    "msg",
    "dict",
    "pairs",
    "list",
    "tuple",
    "set",
    "frozenset",
    "datetime",
    "date",
    "uuid",
    "decimal",
    "send",
    "snap",
    "serde",
)


class Unresolved:
    """A stored value this process cannot make (its class not loaded or not allowed, a
    serializer's payload), as stored: what `decode_value` gives with ``keep_unresolved``,
    for a rewrite of the log (`prune`, the writes a `revert` carries over) run where
    the application's classes are not, such as the CLI. `encode_value` writes it back
    as it was (its fields encoded anew: they may hold messages), so a rewrite never
    turns an application's object into plain data for good. Never handed to an app.
    """

    __slots__ = ("data", "name", "tag")

    def __init__(self, tag: str, name: Any, data: Any) -> None:
        self.tag, self.name, self.data = tag, name, data


def holds_unresolved(value: Any) -> bool:
    """Whether ``value`` is, or holds anywhere (dicts, lists, tuples, sets, the fields of a
    data class, a model, an `Interrupt`, a `Send`), an `Unresolved`: a value a rewrite
    read that must be written back as it was stored, not through the serializer (which
    cannot encode it).

    >>> holds_unresolved({"a": [1, Unresolved("model", ["app", "Order"], {})]})
    True
    >>> holds_unresolved({"a": [1, (2, 3)]})
    False
    """
    if type(value) is Unresolved:
        return True
    if isinstance(value, dict):
        return any(map(holds_unresolved, value.values())) or any(map(holds_unresolved, value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(map(holds_unresolved, value))
    if isinstance(value, Send):
        return holds_unresolved(value.arg)
    if isinstance(value, _DeltaSnapshot):
        return holds_unresolved(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields: Any = dataclasses.fields(value)
        return any(holds_unresolved(getattr(value, f.name, None)) for f in fields)
    if isinstance(value, BaseModel) or _is_v1_model(value):  # its fields, extra ones too
        parts = (getattr(value, "__dict__", None), getattr(value, "__pydantic_extra__", None))
        return any(type(p) is dict and any(map(holds_unresolved, p.values())) for p in parts)
    return False


def _is_v1_model(value: Any) -> bool:
    """A pydantic v1 model (``pydantic.v1.BaseModel``), if that module is loaded at all."""
    v1 = sys.modules.get("pydantic.v1")
    return v1 is not None and isinstance(value, v1.BaseModel)


def decode_value(
    enc: Any,
    load_message: MessageLoader,
    load_refs: ListLoader,
    serde: SerializerProtocol,
    *,
    keep_unresolved: bool = False,
) -> Any:
    """Inverse of `encode_value`. ``load_refs`` resolves ``msgs``/``append`` lists;
    ``keep_unresolved``: what cannot be made here comes back as an `Unresolved`.

    Raises `CodecError` for a malformed value and what decoding raises (a corrupt message
    line too); storage errors, the async driver's "lines not ready", Ctrl-C pass as is."""
    tag = value_tag(enc)
    if tag == "plain":
        return enc
    if tag == "json":
        return enc["json"]
    if tag == "msgs":
        return [load_message(n) for n in load_refs(enc)]
    try:
        return _Decoder(load_message, load_refs, serde, keep_unresolved).decode(enc)
    except BaseException as exc:
        passes = isinstance(exc, (KeyboardInterrupt, LangGraphCtxError))  # CodecError too
        if passes and not isinstance(exc, CorruptLogError):
            raise
        raise CodecError(f"value does not decode: {type(exc).__name__}: {exc}") from None


class _Decoder:
    def __init__(
        self,
        load_message: MessageLoader,
        load_refs: ListLoader,
        serde: SerializerProtocol,
        keep: bool = False,
    ) -> None:
        self.load_message = load_message
        self.load_refs = load_refs
        self.serde = serde
        self.rules = value_rules(serde)
        self.keep = keep

    def decode(self, enc: Any) -> Any:
        tag = value_tag(enc)
        if tag == "plain":
            return enc
        if tag == "json":
            return enc["json"]
        if tag == "msgs":
            return [self.load_message(n) for n in self.load_refs(enc)]
        if tag == "msg":
            return self.load_message(ordinal(enc["msg"]))
        if tag == "dict":
            return {k: self.decode(v) for k, v in _obj(enc, "dict").items()}
        if tag == "pairs":
            return {self.decode(k): self.decode(v) for k, v in _pairs(enc)}
        if tag == "list":
            return [self.decode(v) for v in _items(enc, tag)]
        if tag == "tuple":
            return tuple(self.decode(v) for v in _items(enc, tag))
        if tag == "set":
            return {self.decode(v) for v in _items(enc, tag)}
        if tag == "frozenset":
            return frozenset(self.decode(v) for v in _items(enc, tag))
        if tag in _PARSE:
            text = enc[tag]
            if not isinstance(text, str):
                raise CodecError(f"a {tag!r} value must be a string")
            try:
                return _PARSE[tag](text)
            except (ValueError, decimal.InvalidOperation):
                raise CodecError(f"invalid {tag} {text!r}") from None
        if tag == "send":
            node, arg = _send(enc)
            timeout = self.decode(enc["timeout"]) if "timeout" in enc else None
            arg = self.decode(arg)
            return Send(node, arg, timeout=timeout) if timeout is not None else Send(node, arg)
        if tag == "snap":
            return _DeltaSnapshot(self.decode(enc["snap"]))
        if tag in CLASS_TAGS:
            return self.decode_object(enc, tag)
        if self.keep:
            return Unresolved("serde", enc["serde"], None)
        return serde_decode(enc["serde"], self.serde)

    def decode_object(self, enc: dict[str, Any], tag: ClassKind) -> Any:
        cls, registered = self.rules.resolve(tag, enc[tag], warn=not self.keep)
        if tag == "enum":
            data = self.decode(enc.get("value"))
        elif "json" in enc:
            data = enc["json"]
            if not isinstance(data, dict):
                raise CodecError(f"the fields of a {tag!r} value must be an object")
        else:
            data = {k: self.decode(v) for k, v in _obj(enc, "fields").items()}
        if cls is None:
            return Unresolved(tag, enc[tag], data) if self.keep else data
        if self.keep and not fits(cls, tag, data, registered):  # another version of the class
            return Unresolved(tag, enc[tag], data)
        return rebuild(cls, tag, data, registered)


def _obj(enc: Mapping[str, Any], key: str) -> dict[str, Any]:
    inner = enc.get(key)
    if not isinstance(inner, dict):
        raise CodecError(f"{key!r} value must be an object")
    return inner


def _items(enc: Mapping[str, Any], key: str) -> list[Any]:
    inner = enc[key]
    if not isinstance(inner, list):
        raise CodecError(f"{key!r} value must be a list")
    return inner


def _pairs(enc: Mapping[str, Any]) -> list[list[Any]]:
    pairs = _items(enc, "pairs")
    if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise CodecError("'pairs' value must be a list of [key, value] pairs")
    return pairs


def _send(enc: Mapping[str, Any]) -> tuple[str, Any]:
    inner = enc["send"]
    if not (isinstance(inner, list) and len(inner) == 2 and isinstance(inner[0], str)):
        raise CodecError("'send' value must be [node, value]")
    return inner[0], inner[1]


def _children(enc: Any, tag: ValueTag) -> Iterator[tuple[str, Any]]:
    """The encoded values inside ``enc``, named for errors (validating the shape)."""
    if tag == "dict":
        yield from _obj(enc, "dict").items()
    elif tag == "pairs":
        for i, (k, v) in enumerate(_pairs(enc)):
            yield f"[{i}].key", k
            yield f"[{i}]", v
    elif tag in ("list", "tuple", "set", "frozenset"):
        for i, v in enumerate(_items(enc, tag)):
            yield f"[{i}]", v
    elif tag == "send":
        yield "arg", _send(enc)[1]
        if "timeout" in enc:
            yield "timeout", enc["timeout"]
    elif tag == "snap":
        yield "", enc["snap"]
    elif tag == "enum":
        yield "value", enc.get("value")
    elif tag in CLASS_TAGS and "json" not in enc:
        yield from _obj(enc, "fields").items()


def message_refs(
    enc: Any, load_refs: ListLoader | None = None, where: str = ""
) -> list[tuple[str, list[int]]]:
    """Every message an encoded value refers to, as ``(where, ordinals)`` groups.

    ``where`` names the value in errors and grows with the keys of nested
    values. ``load_refs`` resolves message lists (default: the ordinals the
    list itself holds, `refs_of`). Raises `CodecError` on a malformed value,
    prefixed with the ``where`` of the part at fault.

    >>> message_refs({"dict": {"a": {"msg": 3}, "b": {"msgs": [1, 2]}}}, where="v")
    [('v.a', [3]), ('v.b', [1, 2])]
    >>> message_refs({"send": ["tools", {"dict": {"messages": {"msgs": [0, 1]}}}]})
    [('arg.messages', [0, 1])]
    """
    out: list[tuple[str, list[int]]] = []
    _walk(enc, load_refs or refs_of, where, out)
    return out


def _walk(enc: Any, load_refs: ListLoader, where: str, out: list[tuple[str, list[int]]]) -> None:
    try:
        tag = value_tag(enc)
        if tag == "msgs":
            out.append((where, load_refs(enc)))
            return
        if tag == "msg":
            out.append((where, [ordinal(enc["msg"])]))
            return
        if tag in ("plain", "json", "serde") or tag in _PARSE:
            return
        children = list(_children(enc, tag))
    except CodecError as exc:
        raise CodecError(f"{where}: {exc}" if where else str(exc), dangling=exc.dangling) from None
    for key, inner in children:
        _walk(inner, load_refs, _join(where, key), out)


def _join(where: str, key: str) -> str:
    if not key:
        return where
    if key.startswith("["):
        return where + key
    return f"{where}.{key}" if where else key


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


_sequence_kind_cached = functools.lru_cache(maxsize=1024)(_sequence_kind)
_item_shape_cached = functools.lru_cache(maxsize=4096)(_item_shape)
