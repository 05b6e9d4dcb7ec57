"""Which classes a stored value may become, and how they come back without running their code.

The rule (README, "Your objects stay yours"): stored data never makes the reader
import a module or call a function it names. A class tag ``[module, qualname]``
is looked up in the modules the application has already loaded (`sys.modules`,
then the namespaces along the qualname: no import, no ``getattr``, no
descriptor, no ``__getattr__`` hook) and the class is rebuilt only when it is

(a) on the registry (`ClassRules.names` / `ClassRules.classes`): this
    package's models (`PACKAGE_MODELS`), LangGraph's safe types
    (``SAFE_MSGPACK_TYPES``: ``Command``, ``Interrupt``, ``Document``, ...), the
    saver's ``allowed_types=`` and what ``with_allowlist`` adds (``compile()``
    passes the state schema's types under ``LANGGRAPH_STRICT_MSGPACK``). These
    are rebuilt through their constructor, as LangGraph rebuilds them; the
    module of a registered ``(module, name)`` pair is imported if it is not
    yet (the registry is the application's word, never the file's);
(b) or, unless ``LANGGRAPH_STRICT_MSGPACK`` is set, a plain data class of the
    application (`plain_data_class`): a pydantic v2 or v1 model, a dataclass,
    an ``Enum`` or a ``NamedTuple``, defined outside the ``langchain*`` /
    ``langgraph*`` / ``pydantic*`` modules, overriding none of the methods that
    run when an object is made or unpickled. These are rebuilt without running
    any of their code: fields set on a bare instance, enum members looked up.

Anything else found comes back as its plain data (a dict of fields, the enum's
value) with one warning naming the class and the fix. Messages, runnables,
tools, language models and exceptions are never rebuilt from a class tag,
whatever the allowlist says (messages have their own lines).

One module (about 700 lines): the rule, the registry and the rebuilding all read
a class through the same namespace-only lookups (`_lookup`, `_home`, `find_class`), and the
msgpack payloads LangGraph's serializer makes are judged by the same rule.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import enum
import importlib
import logging
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import ormsgpack
import typing_extensions
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES, STRICT_MSGPACK_ENABLED
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from pydantic import BaseModel

from langgraph_ctx.errors import ClassElsewhereError, CodecError

logger = logging.getLogger("langgraph_ctx.codec")

ClassKind = Literal["model", "dataclass", "namedtuple", "enum"]
"""The class tags of a value, by the kind of class they rebuild."""

CLASS_TAGS: tuple[ClassKind, ...] = ("model", "dataclass", "namedtuple", "enum")

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
"""This package's pydantic models that graph state may hold: on every registry."""

LANGCHAIN_DATA_TYPES: tuple[tuple[str, str], ...] = (
    ("langchain_core.agents", "AgentAction"),
    ("langchain_core.agents", "AgentActionMessageLog"),
    ("langchain_core.agents", "AgentFinish"),
    ("langchain_core.agents", "AgentStep"),
)
"""LangChain classes that are plain data (an agent's decisions) and that apps keep in
state, as LangGraph's own tests do. Framework classes are otherwise registry-only; these
join the registry unless ``LANGGRAPH_STRICT_MSGPACK`` is set, where, as for
`SqliteSaver`, only what ``compile()`` allowlists from the state schema is rebuilt."""

FRAMEWORK_PREFIXES = ("langchain", "langgraph", "pydantic")
"""Classes from these modules (``langgraph_ctx`` included) are rebuilt only from the
registry: a framework's classes are not the application's plain data."""

NEVER_REBUILT: tuple[tuple[str, str], ...] = (
    ("langchain_core.messages.base", "BaseMessage"),
    ("langchain_core.runnables.base", "Runnable"),
    ("langchain_core.tools.base", "BaseTool"),
    ("langchain_core.language_models.base", "BaseLanguageModel"),
)
"""Bases whose subclasses a class tag never names (nor exceptions): they act, they are
not data. Checked through `sys.modules`, so checking never imports them."""

NOT_PLAIN = (
    "__init__",
    "__new__",
    "__post_init__",
    "__setstate__",
    "__reduce__",
    "__reduce_ex__",
    "__init_subclass__",
    "model_post_init",
)
"""Methods a plain data class does not define itself (generated ones aside): a class
that does has invariants only its own code keeps, so it needs the registry."""

_TYPE_DICT: Any = vars(type)["__dict__"]
_TYPE_MRO: Any = vars(type)["__mro__"]
_TYPE_QUALNAME: Any = vars(type)["__qualname__"]
_TYPE_MODULE: Any = vars(type)["__module__"]
_MODULE_DICT: Any = vars(types.ModuleType)["__dict__"]


def _ns(cls: type) -> Mapping[str, Any]:
    """A class's own namespace, read without any metaclass hook."""
    return _TYPE_DICT.__get__(cls)  # type: ignore[no-any-return]


def _mro(cls: type) -> tuple[type, ...]:
    return _TYPE_MRO.__get__(cls)  # type: ignore[no-any-return]


def _derives(cls: type, base: type) -> bool:
    """``base`` in ``cls``'s MRO, by identity: ``in`` would compare with ``==``, which
    runs a metaclass's own ``__eq__`` (a loaded class a tampered line names)."""
    return any(c is base for c in _mro(cls))


def _lookup(cls: type, name: str, default: Any = None) -> Any:
    """``cls.name`` along the MRO, from the namespaces only (no descriptor runs)."""
    for klass in _mro(cls):
        ns = _ns(klass)
        if name in ns:
            return ns[name]
    return default


def _home(cls: type) -> tuple[str, str]:
    """``(__module__, __qualname__)`` through ``type``'s own descriptors (no metaclass hook)."""
    return str(_TYPE_MODULE.__get__(cls)), _TYPE_QUALNAME.__get__(cls)


def find_class(module: str, qualname: str) -> type | None:
    """The class ``module.qualname`` if the application has loaded it, never importing.

    Only a class found at its own home (its ``__module__`` and ``__qualname__``
    are the tag's) counts, so an alias cannot smuggle in another module's class.
    Raises `CodecError` when the name is loaded but is not such a class:
    `ClassElsewhereError` when it is a class whose home is elsewhere (a class moved,
    and re-exported where it was).

    >>> find_class("collections", "OrderedDict").__name__
    'OrderedDict'
    >>> find_class("no.such.module", "X") is None
    True
    """
    obj: Any = sys.modules.get(module)
    if not isinstance(obj, types.ModuleType):
        return None
    ns: Mapping[str, Any] = _MODULE_DICT.__get__(obj)
    for i, part in enumerate(qualname.split(".")):
        if i:
            if not issubclass(type(obj), type):
                return None  # a function's local class, say: not reachable by name
            ns = _ns(obj)  # type: ignore[arg-type]
        obj = ns.get(part)
        if obj is None:
            return None
    if not issubclass(type(obj), type):
        raise CodecError(f"{module}.{qualname} is not a class defined there")
    if _home(obj) != (module, qualname):
        raise ClassElsewhereError(f"{module}.{qualname}", obj, ".".join(_home(obj)))
    return obj  # type: ignore[no-any-return]


def _loaded_base(module: str, name: str) -> type | None:
    mod = sys.modules.get(module)
    if not isinstance(mod, types.ModuleType):
        return None
    base = _MODULE_DICT.__get__(mod).get(name)
    return base if issubclass(type(base), type) else None


def _has_base(cls: type, module: str, name: str) -> bool:
    base = _loaded_base(module, name)
    return base is not None and _derives(cls, base)


def kind_of(cls: type) -> ClassKind | None:
    """Which class tag stores instances of ``cls`` (``None``: none does).

    >>> import enum
    >>> class Color(enum.Enum):
    ...     RED = "red"
    >>> kind_of(Color), kind_of(dict)
    ('enum', None)
    """
    if _derives(cls, BaseException) or any(_has_base(cls, m, n) for m, n in NEVER_REBUILT):
        return None
    if _derives(cls, BaseModel) or _has_base(cls, "pydantic.v1.main", "BaseModel"):
        return "model"
    if _derives(cls, enum.Enum):
        return "enum"
    # type() checks, not isinstance(): nothing of the class's own runs while we look
    if _derives(cls, tuple) and issubclass(type(_lookup(cls, "_fields")), tuple):
        return "namedtuple"
    if issubclass(type(_lookup(cls, "__dataclass_fields__")), dict):
        return "dataclass"
    return None


_DATACLASS_METHODS: tuple[Any, ...] = tuple(
    f
    for f in (vars(dataclasses).get(n) for n in ("_dataclass_getstate", "_dataclass_setstate"))
    if type(f) is types.FunctionType
)
"""The ``__getstate__`` / ``__setstate__`` ``dataclass`` gives a frozen class with
``slots=True``: functions of the ``dataclasses`` module itself, not compiled ones."""


def _generated(fn: Any) -> bool:
    """A method ``dataclass`` / ``namedtuple`` / pydantic generated, not one the class wrote."""
    if type(fn) in (staticmethod, classmethod):
        fn = fn.__func__
    if type(fn) is not types.FunctionType:
        return False  # a builtin or some object: not something these generate
    if any(fn is f for f in _DATACLASS_METHODS):
        return True
    return fn.__code__.co_filename == "<string>" or str(fn.__module__).startswith("pydantic")


def plain_data_class(cls: type, kind: ClassKind) -> bool:
    """Rule (b): an application data class that is rebuilt without being asked.

    >>> from langgraph_ctx.context.budget import ContextUsage
    >>> plain_data_class(ContextUsage, "model")  # a framework's model: the registry's
    False
    """
    cached = _plain_cache.get(id(cls))
    if cached is not None and cached[0] is cls:
        return cached[1]
    module = _home(cls)[0]
    verdict = kind_of(cls) == kind and not module.startswith(FRAMEWORK_PREFIXES)
    if verdict and _has_base(cls, "langchain_core.load.serializable", "Serializable"):
        verdict = False
    if verdict and kind != "enum":  # an enum member is looked up, nothing is made
        for klass in _mro(cls):
            if _home(klass)[0].startswith(_BASES):
                continue
            ns = _ns(klass)
            if any(name in ns and not _generated(ns[name]) for name in NOT_PLAIN):
                verdict = False
                break
    _plain_cache[id(cls)] = (cls, verdict)
    return verdict


_BASES = (*FRAMEWORK_PREFIXES, "builtins", "abc", "typing", "enum")
"""Modules whose classes may sit in a plain data class's MRO (``Generic``, ``ABC``, ...)."""

_plain_cache: dict[int, tuple[type, bool]] = {}
_warned: set[tuple[str, str, str]] = set()


_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("quiet_plain_data", default=False)


@contextlib.contextmanager
def quiet_plain_data() -> Iterator[None]:
    """No `warn_plain_data` inside: a rewrite that writes what it read as it was stored
    hands nothing back as plain data."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def warn_plain_data(module: str, qualname: str, why: str, fix: str | None = None) -> None:
    """One warning per class: what came back as plain data, and how to get the class."""
    key = (module, qualname, why)
    if key in _warned or len(_warned) >= 1000 or _QUIET.get():
        return
    _warned.add(key)
    if fix is None:
        fix = (
            f"import {module} before reading, or pass allowed_types=[{qualname}]"
            if why == "not loaded"
            else f"pass allowed_types=[{qualname}] to the saver if you trust it"
        )
    logger.warning(
        "%s.%s comes back as plain data (%s): %s.", module, qualname, why, fix
    )


def warn_not_found(module: str, qualname: str) -> None:
    """`warn_plain_data` for a class `find_class` does not find: its module not loaded
    (import it), or loaded without a class at that name, and why that may be."""
    mod = sys.modules.get(module)
    if not isinstance(mod, types.ModuleType):
        warn_plain_data(module, qualname, "not loaded")
        return
    name = qualname.rsplit(".", 1)[-1]
    if ".<locals>." in qualname:
        why = f"defined inside a function, it cannot be found in {module} by its name"
        fix = f"pass the class itself to the saver, allowed_types=[{name}]"
    elif "[" in qualname:
        why = f"a parametrized generic class, it cannot be found in {module} by its name"
        fix = f"pass the class itself to the saver, allowed_types=[{qualname}]"
    elif module == "__main__":
        why = f"this process's __main__ has no {qualname}: another script stored it"
        fix = "define the class in a module both scripts import"
    else:
        why = f"{module} is loaded but has no {qualname}"
        fix = (
            "was the class renamed or moved since it was stored? Its values read back "
            "as plain data, and rewrites keep them as stored, until a class is there again"
        )
    warn_plain_data(module, qualname, why, fix)


# ------------------------------------------------------------------- the registry


def _pair(item: Any) -> tuple[str, str]:
    if isinstance(item, type):
        return _home(item)
    if isinstance(item, (tuple, list)) and len(item) >= 2:
        return str(item[0]), ".".join(str(p) for p in item[1:])
    raise TypeError(f"an allowed type is a class or a (module, name) pair, not {item!r}")


@dataclasses.dataclass(frozen=True)
class ClassRules:
    """The classes stored values may become (see the module docstring).

    ``classes``: exact class objects (``allowed_types=[MyModel]``); ``names``:
    ``(module, qualname)`` pairs, resolved through `find_class` when read;
    ``loaded_data_classes``: rule (b), off under ``LANGGRAPH_STRICT_MSGPACK``.
    """

    classes: frozenset[type] = frozenset()
    names: frozenset[tuple[str, str]] = frozenset()
    loaded_data_classes: bool = True
    _cache: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(
        cls, allowed: Iterable[Any] = (), *, strict: bool | None = None
    ) -> ClassRules:
        """The default registry plus ``allowed`` (classes or ``(module, name)`` pairs)."""
        allowed = list(allowed)
        classes = frozenset(a for a in allowed if isinstance(a, type))
        names = {tuple(p) for p in SAFE_MSGPACK_TYPES if len(p) == 2}
        names.update(PACKAGE_MODELS)
        names.update(_pair(a) for a in allowed)
        strict = STRICT_MSGPACK_ENABLED if strict is None else strict
        if not strict:
            names.update(LANGCHAIN_DATA_TYPES)
        return cls(
            classes=classes,
            names=frozenset(names),  # type: ignore[arg-type]
            loaded_data_classes=not strict,
        )

    def extended(self, extra: Iterable[Any]) -> ClassRules:
        """These rules plus ``extra`` (what ``with_allowlist`` passes)."""
        extra = list(extra)
        classes = self.classes | {a for a in extra if isinstance(a, type)}
        names = self.names | {_pair(a) for a in extra}
        if classes == self.classes and names == self.names:
            return self
        return ClassRules(classes, names, self.loaded_data_classes)

    def _exact(self) -> dict[tuple[str, str], type]:
        """The exact classes by name (a local class is found only this way)."""
        if "exact" not in self._cache:
            self._cache["exact"] = {_home(c): c for c in self.classes}
        return self._cache["exact"]  # type: ignore[no-any-return]

    def serde(self) -> JsonPlusSerializer:
        """LangGraph's serializer in strict mode allowing exactly the registry (``serde``)."""
        if "serde" not in self._cache:
            allowed: list[Any] = [*self.names, *self.classes]
            self._cache["serde"] = JsonPlusSerializer(allowed_msgpack_modules=allowed)
        return self._cache["serde"]  # type: ignore[no-any-return]

    def serde_for(self, type_: str, raw: bytes) -> JsonPlusSerializer:
        """`serde` for a payload, allowing too the loaded plain enums a msgpack ``raw`` holds.

        A message whose fields are not plain JSON (an enum in ``additional_kwargs``, a
        tool's ``artifact``) is stored through LangGraph's serializer: pydantic dumps
        the application's models and dataclasses in it to dicts, and keeps an enum
        member, which LangGraph's savers rebuild. So do we, by rule (b): an enum of the
        application's, loaded, whose members ``Enum``'s own code looks up by value (no
        ``_missing_``, no metaclass of its own). Anything else off the registry stays
        blocked, with one warning naming the fix.
        """
        named, odd = scan_msgpack(raw) if type_ == "msgpack" else ([], False)
        if odd:  # a class named otherwise than by plain strings: admit nothing
            return self.serde()
        # The allowlist admits a name for every way LangGraph makes a value: an enum named
        # by any other (a call with more arguments makes a new enum class) is not admitted.
        other_calls = {(m, n) for code, m, n in named if code != EXT_CONSTRUCTOR_SINGLE_ARG}
        extra: set[type] = set()
        for code, module, name in named:
            key = (module, name)
            if key in self.names or key in self._exact():
                continue
            if code == EXT_PYDANTIC_V2:
                _warn_message_class(module, name)
            if code != EXT_CONSTRUCTOR_SINGLE_ARG:
                continue
            try:
                found = find_class(module, name)
            except CodecError:  # not a class: LangGraph's decoder blocks it, and says so
                continue
            if (
                found is not None
                and key not in other_calls
                and self.loaded_data_classes
                and _looked_up_enum(found, name)
            ):
                extra.add(found)
            elif key not in SAFE_MSGPACK_TYPES:
                if not self.loaded_data_classes:
                    warn_plain_data(module, name, _STRICT)
                elif found is None:
                    warn_not_found(module, name)
                else:
                    warn_plain_data(module, name, "not a plain data class")
        if not extra:
            return self.serde()
        cache: dict[frozenset[type], Any] = self._cache.setdefault("serde_for", {})
        enums = frozenset(extra)
        serde = cache.get(enums)
        if serde is None:  # a few sets of an application's enums: kept, within a bound
            serde = JsonPlusSerializer(allowed_msgpack_modules=[*self.names, *self.classes, *enums])
            cache.update({enums: serde} if len(cache) < 64 else {})
        return serde

    def resolve(self, kind: ClassKind, name: Any, *, warn: bool = True) -> tuple[type | None, bool]:
        """``(class, registered)`` for a tag, or ``(None, False)`` with a warning (unless
        not ``warn``: a rewrite keeps the value as it is stored).

        Raises `CodecError` when the tag names something a class tag never
        rebuilds (not a class of its kind, a message, a runnable, ...): the
        writer never stores such a tag, so the line was tampered with.
        """
        if (
            not isinstance(name, list)
            or len(name) != 2
            or not all(isinstance(p, str) for p in name)
        ):
            raise CodecError(f"a {kind!r} tag names a class as [module, qualname], got {name!r}")
        module, qualname = name
        key = (module, qualname)
        if key in self.names and module not in sys.modules:
            # a module the registry names (yours, this package's, LangGraph's safe list):
            # imported as LangGraph's serializer would; a file cannot add to the registry
            importlib.import_module(module)
        exact = self._exact().get(key)
        if exact is not None:
            if kind_of(exact) != kind:
                raise CodecError(f"refusing {kind} {module}.{qualname}: {_ONLY}")
            return exact, True
        try:
            found = find_class(module, qualname)
        except ClassElsewhereError as moved:  # never rebuilt unless you allowed that class
            if any(c is moved.found for c in self.classes) and kind_of(moved.found) == kind:
                return moved.found, True
            if warn:
                name = moved.home.rsplit(".", 1)[-1]
                warn_plain_data(
                    module,
                    qualname,
                    f"it is {moved.home} now, which {module} imports",
                    f"pass that class to the saver, allowed_types=[{name}], to rebuild "
                    "the values stored under its old name",
                )
            return None, False
        except CodecError:
            raise CodecError(f"refusing {kind} {module}.{qualname}: {_ONLY}") from None
        if found is None:
            if warn:
                warn_not_found(module, qualname)
            return None, False
        if kind_of(found) != kind:
            raise CodecError(f"refusing {kind} {module}.{qualname}: {_ONLY}")
        if found in self.classes or key in self.names:
            return found, True
        if self.loaded_data_classes and plain_data_class(found, kind):
            return found, False
        if not warn:
            return None, False
        warn_plain_data(
            module,
            qualname,
            _STRICT if not self.loaded_data_classes else "not a plain data class",
        )
        return None, False


def _warn_message_class(module: str, qualname: str) -> None:
    """One warning per class: an app's own message class off the registry, whose message
    LangGraph's decoder gives as fields, comes back as LangChain's class for its type
    (`langgraph_ctx.codec.messages.message_from_body`)."""
    try:
        found = find_class(module, qualname)
    except CodecError:
        return
    if found is None or not _derives(found, BaseMessage):
        return
    key = (module, qualname, "message")
    if key in _warned or len(_warned) >= 1000 or _QUIET.get():
        return
    _warned.add(key)
    from langgraph_ctx.codec.messages import MESSAGE_CLASSES  # (that module imports this one)

    field = (_lookup(found, "__pydantic_fields__") or {}).get("type")
    kind = getattr(field, "default", None)
    if type(kind) is str and kind in MESSAGE_CLASSES:
        logger.warning(
            "%s.%s comes back as LangChain's %s with its own fields: pass "
            "allowed_types=[%s] to the saver to get your class back.",
            module, qualname, MESSAGE_CLASSES[kind].__name__, qualname,
        )
    else:  # a type of its own: no LangChain class is its
        logger.warning(
            "%s.%s, of a message type of its own, reads back only where the saver "
            "allows it: pass allowed_types=[%s] to the saver.",
            module, qualname, qualname,
        )


_ONLY = "a class tag rebuilds only data classes the application loaded, or allowed types"
_STRICT = "not on the allowlist"


def _looked_up_enum(cls: type, name: str) -> bool:
    """Whether ``cls(value)``, how LangGraph's decoder makes an enum member, runs only
    ``Enum``'s code, a lookup by value: an application's plain enum (`plain_data_class`)
    defined at its module's top level under ``name`` (LangGraph finds it by that name),
    with members (a member-less enum's call makes a new class), ``Enum``'s own metaclass
    and no ``_missing_`` of its own."""
    return (
        kind_of(cls) == "enum"
        and plain_data_class(cls, "enum")
        and type(cls) is enum.EnumMeta
        and _home(cls)[1] == name
        and bool(_lookup(cls, "_member_map_"))
        and _lookup(cls, "_missing_") is _lookup(enum.Enum, "_missing_")
    )


def scan_msgpack(raw: bytes) -> tuple[list[tuple[int, str, str]], bool]:
    """``(ext code, module, name)`` of each value of the msgpack payload ``raw`` that
    LangGraph's decoder makes from a class it names (code 0: called with one argument,
    how it stores an enum member), read without making anything; and whether some value
    may hide a name from this scan (a class named otherwise than by two plain strings, a
    value that does not unpack: ``[], True`` for a whole payload that does not).

    >>> from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    >>> scan_msgpack(JsonPlusSerializer().dumps_typed({"c": enum.Enum("C", "A").A})[1])
    ([(0, 'langgraph_ctx.codec.classes', 'C')], False)
    """
    found: list[tuple[int, str, str]] = []
    odd = [False]

    def hook(code: int, data: bytes) -> None:
        try:
            tup = ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception:  # not LangGraph's layout, or too deep to read: may hide a name
            odd[0] = True
            return None
        if code not in _CLASS_EXTS:
            return None
        named = isinstance(tup, (list, tuple)) and len(tup) >= 2
        if named and type(tup[0]) is str and type(tup[1]) is str:
            found.append((code, tup[0], tup[1]))
            return None
        odd[0] = True
        return None

    try:
        ormsgpack.unpackb(raw, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    except Exception:
        return [], True
    return found, odd[0]


_CLASS_EXTS = frozenset(range(6))
"""LangGraph's msgpack ext codes whose payload starts with ``(module, name)``: constructor
calls (one, positional, keyword arguments), a class method, pydantic v1 and v2 models."""

DEFAULT_RULES = ClassRules.build()


# ------------------------------------------------------------------- rebuilding


def rebuild(cls: type, kind: ClassKind, data: Any, registered: bool) -> Any:
    """An instance of ``cls`` from decoded fields (or, for an enum, its value).

    Registered classes go through their constructor, as LangGraph's serializer
    builds them; plain data classes are assembled without running their code. A class
    the stored fields do not make whole without running its code (a field the value
    lacks that has no default, or a default factory of the application's: `_fillers`)
    comes back as those fields, with one warning naming the class and the fix.
    """
    if kind == "enum":
        return _enum_member(cls, data)
    if not isinstance(data, dict):
        raise CodecError(f"the fields of {cls.__qualname__} must be an object")
    try:
        if registered:
            try:
                return _construct(cls, kind, data)
            except CodecError as exc:
                if kind != "model":  # LangGraph's decoder gives the fields back, and warns
                    _fillers(cls, kind, data, trusted=True)  # a missing field says so
                    fix = f"{exc}; LangGraph's savers give its fields back too"
                    raise _Incomplete(_REFUSED, fix) from None
                # as LangGraph's decoder falls back to ``model_construct``: the stored fields
                # are the model's own, already validated (by name, where validation may want
                # aliases; a "before" validator may not take its own output): not corrupt
                logger.debug("%s; assembling it from its stored fields", exc)
        if kind == "model":
            return _bare_model(cls, data, registered)
        if kind == "dataclass":
            return _bare_dataclass(cls, data, registered)
        return _bare_namedtuple(cls, data, registered)
    except _Incomplete as exc:
        module, qualname = _home(cls)
        warn_plain_data(module, qualname, exc.why, exc.fix)
        return data


def fits(cls: type, kind: ClassKind, data: Any, registered: bool) -> bool:
    """Whether `rebuild` makes of ``data`` an object that keeps all of it: an enum member of
    that value; a data class with a field for each stored one, made whole (`_fillers`).
    Another version of the application's class (a maintenance job of an older deployment)
    may lack a member or a field, or have one the value lacks: a rewrite keeps such a
    value as it is stored (`Unresolved`), not what this class makes of it, registered or
    not (a registered model's validation would drop a field it lacks). A registered
    dataclass or NamedTuple whose constructor refuses the fields does not fit either: it
    comes back as them, as from LangGraph's savers."""
    if kind != "enum" and not isinstance(data, dict):
        return True
    if kind == "enum":
        return registered or _member_of(cls, data) is not None
    try:
        _fillers(cls, kind, data, trusted=registered)
    except _Incomplete:
        return False
    if not _holds_every_key(cls, kind, data):  # registered or not: nothing is dropped
        return False
    if registered and kind != "model":
        try:
            _construct(cls, kind, data)
        except CodecError:
            return False
    return True


def _holds_every_key(cls: type, kind: ClassKind, data: dict[str, Any]) -> bool:
    """Whether ``cls`` has a field for every stored one (a model with ``extra="allow"``
    keeps any)."""
    if kind == "model":
        if _derives(cls, BaseModel):
            config = _lookup(cls, "model_config") or {}
            fields = _lookup(cls, "__pydantic_fields__") or {}
            return config.get("extra") == "allow" or bool(data.keys() <= fields.keys())
        return bool(data.keys() <= (_lookup(cls, "__fields__") or {}).keys())  # pydantic v1
    if kind == "dataclass":
        fields = _lookup(cls, "__dataclass_fields__") or {}
        return all(is_dataclass_field(fields.get(k)) for k in data)
    return bool(data.keys() <= set(_lookup(cls, "_fields") or ()))


def _construct(cls: type, kind: ClassKind, data: dict[str, Any]) -> Any:
    try:
        if kind == "model" and _derives(cls, BaseModel):
            return cls.model_validate(data)  # type: ignore[attr-defined]
        if kind == "dataclass":
            fields = _lookup(cls, "__dataclass_fields__")
            unknown = [k for k in data if k not in fields]
            if unknown:  # the constructor would refuse them, as LangGraph's serializer finds
                raise TypeError(f"no field {unknown[0]!r}")
            init = {k: v for k, v in data.items() if fields[k].init}
            obj = cls(**init)
            for k, v in data.items():
                if k in fields and not fields[k].init:
                    object.__setattr__(obj, k, v)
            return obj
        return cls(**data)
    except Exception as exc:
        raise CodecError(f"invalid {cls.__qualname__}: {_first_error(exc)}") from None


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return str(errors()[0].get("msg"))
        except Exception:
            pass
    return f"{type(exc).__name__}: {exc}"


class _Incomplete(Exception):
    """What keeps a class from being made whole of its stored fields: why, and the fix."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(why)
        self.why, self.fix = why, fix


_REFUSED = "its constructor refused its stored fields"

BUILTIN_FACTORIES: tuple[type, ...] = (
    list, dict, set, frozenset, tuple, str, int, float, bool, bytes, bytearray,
)  # fmt: skip
"""Default factories a bare assembly calls: builtins, which run no application code.
Any other factory is the application's code: only its constructor runs it (the registry)."""

_ABSENT: Any = object()
"""A field's default when it declares none."""

Filler = Callable[[dict[str, Any]], Any]
"""A field's value where the stored data lacks it, given the fields made so far."""


def _filler(
    cls: type, name: str, default: Any, factory: Any, trusted: bool, what: str = "field"
) -> Filler:
    """How field ``name`` the stored data lacks gets a value: its declared default (a
    copy), or its default factory when that is a builtin (`BUILTIN_FACTORIES`) or
    ``trusted`` (a registered class, whose constructor would have called it). Raises
    `_Incomplete` otherwise: a factory of the application's, no default at all."""
    if factory is not None:
        if trusted or any(factory is f for f in BUILTIN_FACTORIES):
            return lambda values: factory()
        raise _Incomplete(
            f"{what} {name} is not stored and its default_factory is code of yours",
            f"pass allowed_types=[{_home(cls)[1]}] to the saver if you trust it "
            "(its constructor runs the factory)",
        )
    if default is not _ABSENT:
        return lambda values: _default(default)
    raise _Incomplete(
        f"the stored value has no {name}, a field without a default",
        f"give {name} a default for the values stored before it was added",
    )


def _fillers(
    cls: type, kind: ClassKind, data: Mapping[str, Any], trusted: bool
) -> tuple[dict[str, Filler], dict[str, Filler]]:
    """``(fields, private attributes)``: how each field ``data`` lacks, and each private
    attribute of a model with a default, gets its value (`_filler`; a field the class no
    longer has is `fits`' concern). Raises `_Incomplete` when one cannot without running
    the application's code (unless ``trusted``) or has no default."""
    fields: dict[str, Filler] = {}
    private: dict[str, Filler] = {}
    if kind == "model" and _derives(cls, BaseModel):
        from pydantic_core import PydanticUndefined

        for name, info in (_lookup(cls, "__pydantic_fields__") or {}).items():
            if name in data:
                continue
            factory = info.default_factory
            if factory is not None and trusted and info.default_factory_takes_data:
                fields[name] = factory  # a registered model's, given the fields made so far
                continue
            default = _ABSENT if info.default is PydanticUndefined else info.default
            fields[name] = _filler(cls, name, default, factory, trusted)
        for name, attr in (_lookup(cls, "__private_attributes__") or {}).items():
            if attr.default is not PydanticUndefined or attr.default_factory is not None:
                default = _ABSENT if attr.default is PydanticUndefined else attr.default
                factory = attr.default_factory
                private[name] = _filler(cls, name, default, factory, trusted, "private attribute")
    elif kind == "model":  # pydantic v1
        from pydantic.v1.fields import Undefined

        for name, info in (_lookup(cls, "__fields__") or {}).items():
            if name not in data:
                default = _ABSENT if info.required else info.default
                fields[name] = _filler(cls, name, default, info.default_factory, trusted)
        for name, attr in (_lookup(cls, "__private_attributes__") or {}).items():
            if attr.default is not Undefined or attr.default_factory is not None:
                default = _ABSENT if attr.default is Undefined else attr.default
                factory = attr.default_factory
                private[name] = _filler(cls, name, default, factory, trusted, "private attribute")
    elif kind == "dataclass":
        for name, f in (_lookup(cls, "__dataclass_fields__") or {}).items():
            if name not in data and is_dataclass_field(f):  # not a ClassVar / InitVar pseudo-field
                default = _ABSENT if f.default is dataclasses.MISSING else f.default
                factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
                fields[name] = _filler(cls, name, default, factory, trusted)
    else:
        defaults = _lookup(cls, "_field_defaults") or {}
        for name in _lookup(cls, "_fields") or ():
            if name not in data:
                fields[name] = _filler(cls, name, defaults.get(name, _ABSENT), None, trusted)
    return fields, private


def is_dataclass_field(f: Any) -> bool:
    """A dataclass field proper (not a ``ClassVar`` or ``InitVar`` pseudo-field)."""
    return getattr(f, "_field_type", None) is dataclasses._FIELD  # type: ignore[attr-defined]


def _default(field_default: Any) -> Any:
    """A field's declared default, copied where it is a mutable builtin container."""
    if isinstance(field_default, (list, dict, set)):
        return copy.deepcopy(field_default)
    return field_default


def _bare_model(cls: type, data: dict[str, Any], trusted: bool = False) -> Any:
    missing, private = _fillers(cls, "model", data, trusted)
    obj: Any = object.__new__(cls)
    if _derives(cls, BaseModel):
        fields = _lookup(cls, "__pydantic_fields__") or {}
        values: dict[str, Any] = {}
        for name in fields:  # in the class's order, as validation makes them
            values[name] = data[name] if name in data else missing[name](values)
        config = _lookup(cls, "model_config") or {}
        extra = {k: v for k, v in data.items() if k not in fields}
        object.__setattr__(obj, "__dict__", values)
        object.__setattr__(obj, "__pydantic_fields_set__", {k for k in data if k in fields})
        object.__setattr__(
            obj, "__pydantic_extra__", extra if config.get("extra") == "allow" else None
        )
        has_private = bool(_lookup(cls, "__private_attributes__"))
        attrs = {name: fill(values) for name, fill in private.items()}
        object.__setattr__(obj, "__pydantic_private__", attrs if has_private else None)
        return obj
    fields = _lookup(cls, "__fields__") or {}  # pydantic v1
    values = {}
    for name in fields:
        values[name] = data[name] if name in data else missing[name](values)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__fields_set__", {k for k in data if k in fields})
    for name, fill in private.items():
        object.__setattr__(obj, name, fill(values))
    return obj


def _bare_dataclass(cls: type, data: dict[str, Any], trusted: bool = False) -> Any:
    missing, _ = _fillers(cls, "dataclass", data, trusted)
    obj: Any = object.__new__(cls)
    values: dict[str, Any] = {}
    for name, f in (_lookup(cls, "__dataclass_fields__") or {}).items():
        if is_dataclass_field(f):
            values[name] = data[name] if name in data else missing[name](values)
            object.__setattr__(obj, name, values[name])  # frozen, slots: object's own
    return obj


def _bare_namedtuple(cls: type, data: dict[str, Any], trusted: bool = False) -> Any:
    missing, _ = _fillers(cls, "namedtuple", data, trusted)
    names = _lookup(cls, "_fields")
    return tuple.__new__(cls, [data[n] if n in data else missing[n]({}) for n in names])


def _enum_member(cls: type, value: Any) -> Any:
    member = _member_of(cls, value)
    if member is None:
        module, qualname = _home(cls)
        warn_plain_data(module, qualname, f"no member has the value {value!r}")
        return value
    return member


def _member_of(cls: type, value: Any) -> Any:
    """The member of enum ``cls`` with ``value`` (``None``: none has it)."""
    by_value = _lookup(cls, "_value2member_map_") or {}
    try:
        member = by_value.get(value)
    except TypeError:  # an unhashable value: compare with every member
        member = None
    if member is None:
        for candidate in (_lookup(cls, "_member_map_") or {}).values():
            if candidate._value_ == value:
                return candidate
    if member is None and type(value) is int and _plain_flag(cls):
        try:  # a combination of members (``Perm.R | Perm.W``): Flag's own code makes it
            return cls(value)
        except ValueError:
            return None
    return member


def _func(attribute: Any) -> Any:
    """The function under a ``staticmethod`` / ``classmethod`` (what it is otherwise)."""
    return getattr(attribute, "__func__", attribute)


_FLAG_HOOKS = (
    "_missing_", "__new__", "_numeric_repr_", "__setattr__", "__getattr__", "__getattribute__",
    "__eq__", "__ne__", "__hash__", "_name_", "_value_", "_sort_order_",
)  # fmt: skip
"""What ``Flag._missing_`` calls or sets making a combination of members (Python 3.11):
each must be the standard one (the attributes: no descriptor of a mixin's), besides
``_iter_member_``: one of Flag's two (`_FLAG_ITERS`), as the metaclass sets it."""

_FLAG_ITERS = tuple(
    _func(_lookup(enum.Flag, name)) for name in ("_iter_member_by_value_", "_iter_member_by_def_")
)


def _plain_flag(cls: type) -> bool:
    """An `enum.Flag` whose call with a combination of its members runs only the standard
    library's code, as LangGraph's savers call it (``Perm(6)``; a fresh process has no
    such member yet): `Enum`'s metaclass, int or object members, and every method
    ``Flag._missing_`` calls the standard one (`_FLAG_HOOKS`)."""
    member_type = _lookup(cls, "_member_type_")
    base = enum.IntFlag if member_type is int else enum.Flag
    return (
        _derives(cls, enum.Flag)
        and type(cls) is enum.EnumMeta
        and (member_type is int or member_type is object)
        and all(_func(_lookup(cls, h)) is _func(_lookup(base, h)) for h in _FLAG_HOOKS)
        and _func(_lookup(cls, "_iter_member_")) in _FLAG_ITERS
    )


DeclaredFields = dict[str, Any]
"""A class's fields and their declared types (an unresolved annotation: its string)."""

_BY_CLASS: dict[tuple[int, Any], tuple[weakref.ref[type], Any]] = {}


def validated_fields(cls: type) -> DeclaredFields | None:
    """The fields and declared types of a class LangGraph's serializer reads back through
    pydantic validation: a pydantic model (v2 or v1) or a pydantic dataclass. ``None``
    for any other class. Validation makes a tuple of a stored list where, and only where,
    the declared type says ``tuple``: the codec stores those tuples exactly (and keeps
    what it makes of them per class: `cached_by_class`).

    >>> from typing import Any
    >>> class Span(BaseModel):
    ...     pair: tuple[int, int]
    ...     note: Any = None
    >>> validated_fields(Span)
    {'pair': tuple[int, int], 'note': typing.Any}
    >>> validated_fields(int) is None
    True
    """
    declared = _lookup(cls, "__pydantic_fields__")
    if isinstance(declared, dict):  # a v2 model, or a pydantic dataclass
        return {k: getattr(f, "annotation", Any) for k, f in declared.items()}
    if _has_base(cls, "pydantic.v1.main", "BaseModel"):
        v1 = _lookup(cls, "__fields__")
        if isinstance(v1, dict):
            return {k: getattr(f, "outer_type_", Any) for k, f in v1.items()}
    return None


def declared_fields(cls: type) -> DeclaredFields | None:
    """The fields and declared types of a dataclass, a NamedTuple or a TypedDict's keys
    (``None`` for another class): what validation follows when such a value sits in a
    validated class's field."""
    fields = _lookup(cls, "__dataclass_fields__")
    if isinstance(fields, dict):
        names: Iterable[str] = fields
    elif _derives(cls, tuple) and isinstance(_lookup(cls, "_fields"), tuple):
        names = _lookup(cls, "_fields")
    elif typing_extensions.is_typeddict(cls):  # its keys: validation follows their types
        names = _lookup(cls, "__annotations__") or {}
    else:
        return None
    written = _written_annotations(cls)
    return {k: _named(*written.get(k, (Any, {}))) for k in names}


def _written_annotations(cls: type) -> dict[str, tuple[Any, Mapping[str, Any]]]:
    """Each annotation along ``cls``'s MRO (a subclass's over its bases': a dataclass's
    inherited fields are declared in its bases), with the namespace of the module that
    wrote it, where its string names are looked up."""
    written: dict[str, tuple[Any, Mapping[str, Any]]] = {}
    for klass in reversed(_mro(cls)):
        own = _ns(klass).get("__annotations__")
        if not isinstance(own, dict) or not own:
            continue
        home = sys.modules.get(_home(klass)[0])
        scope = _MODULE_DICT.__get__(home) if isinstance(home, types.ModuleType) else {}
        for name, annotation in own.items():
            written[name] = (annotation, scope)
    return written


_T = typing.TypeVar("_T")


def cached_by_class(cls: type, find: Callable[[type], _T]) -> _T:
    """``find(cls)``, computed once per class and function: keyed by the class's
    identity (a metaclass's ``__eq__`` or ``__hash__`` never runs), forgotten with it."""
    key = (id(cls), find)
    entry = _BY_CLASS.get(key)
    if entry is not None and entry[0]() is cls:
        return entry[1]  # type: ignore[no-any-return]
    found = find(cls)

    def forget(ref: weakref.ref[type], key: tuple[int, Any] = key) -> None:
        if _BY_CLASS.get(key, (None,))[0] is ref:
            del _BY_CLASS[key]

    _BY_CLASS[key] = (weakref.ref(cls, forget), found)
    return found


def _named(annotation: Any, scope: Mapping[str, Any]) -> Any:
    """A string annotation (``from __future__ import annotations``) that is one name, as
    the object its module binds to that name (a dict lookup: nothing is evaluated, so no
    annotation's code runs, whatever class a stored value names); any other annotation
    as it is."""
    if isinstance(annotation, typing.ForwardRef):  # a TypedDict's, say
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str) and annotation.isidentifier():
        found = scope.get(annotation, _BUILTIN_NAMES.get(annotation, annotation))
        return Any if found is typing.Any else found
    if isinstance(annotation, str) and any(  # names outside quoted strings (a Literal's)
        _names_tuple(scope.get(name))
        for name in _IDENTIFIER.findall(_QUOTED.sub("", annotation))
    ):
        return "tuple"  # a name in it is a tuple type (``list[Pair]``): keep its tuples
    return annotation


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _names_tuple(obj: Any) -> bool:
    """Whether a module's binding is a tuple type (``Pair = tuple[int, int]``, a
    ``TypeAliasType`` of one), judged by its exact type alone: no attribute of an object
    of another type is read, so none of the application's code runs."""
    for _ in range(8):
        if obj is tuple:
            return True
        kind = type(obj)
        if any(kind is k for k in _GENERIC_ALIASES):
            return object.__getattribute__(obj, "__origin__") is tuple
        if not is_type_alias(obj):
            return False
        obj = object.__getattribute__(obj, "__value__")
    return False


_GENERIC_ALIASES = (types.GenericAlias, getattr(typing, "_GenericAlias"))  # noqa: B009


def is_type_alias(obj: Any) -> bool:
    """Whether ``obj`` is a type alias (``type X = ...``, ``TypeAliasType("X", ...)``),
    told by its type's own name and module: nothing of ``obj`` runs."""
    kind = type(obj)
    return kind.__name__ == "TypeAliasType" and kind.__module__ in ("typing", "typing_extensions")


_BUILTIN_NAMES: dict[str, Any] = {"Any": typing.Any, "object": object, "tuple": tuple}
