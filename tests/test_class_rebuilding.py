"""How an application's classes come back when the reader cannot simply set their stored
fields (trial 11): a registered model whose validation refuses its own fields, private
attributes and fields with default factories, classes that gained fields between two
deployments, frozen slotted dataclasses, and the warning's fix when the module is loaded.
Each checked against what `InMemorySaver` / `SqliteSaver` return, on every backend."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import sys
import types
from collections.abc import Iterator
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel, Field, PrivateAttr, field_validator

from langgraph_ctx.codec import classes

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(classes, "_warned", set())  # one warning per class and process


class _State(TypedDict):
    v: Any


def _save(saver: Any, value: Any, thread: str = "t") -> dict[str, Any]:
    """``value`` put into channel ``v`` by a one-node graph; its config."""
    graph = StateGraph(_State).add_node("n", lambda s: {"v": value}).add_edge(START, "n")
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    graph.compile(checkpointer=saver).invoke({"v": None}, config)
    return config


def _read(saver: Any, config: dict[str, Any]) -> Any:
    tup = saver.get_tuple(config)
    assert tup is not None
    return tup.checkpoint["channel_values"]["v"]


def _sqlite(serde: Any = None) -> SqliteSaver:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    return SqliteSaver(conn, serde=serde) if serde else SqliteSaver(conn)


# ------------------------------------------------- 1. registered models validation refuses


class User(BaseModel):  # aliases without populate_by_name: pydantic's default
    user_id: int = Field(alias="userId")
    display_name: str = Field(alias="displayName")


class Tags(BaseModel):  # a "before" validator that does not take its own output
    tags: list[str]

    @field_validator("tags", mode="before")
    @classmethod
    def split(cls, v: Any) -> Any:
        return v.split(",")


def test_a_registered_model_its_validation_refuses_comes_back_assembled(backend, caplog):
    """``allowed_types=[User]`` validated the stored fields (by name, not alias; a "before"
    validator given its own output), which the model refuses: the checkpoint was a
    `CorruptLogError`. LangGraph's decoder falls back to ``model_construct``; the model
    is assembled from its stored fields, no warning."""
    value = [User(userId=7, displayName="Ann"), Tags(tags="a,b")]  # type: ignore[arg-type]
    allow = JsonPlusSerializer(allowed_msgpack_modules=[User, Tags])
    memory = InMemorySaver(serde=allow)
    expected = repr(_read(memory, _save(memory, value)))
    sqlite = _sqlite(allow)
    assert repr(_read(sqlite, _save(sqlite, value))) == expected
    assert expected == "[User(user_id=7, display_name='Ann'), Tags(tags=['a', 'b'])]"
    config = _save(backend.saver(allowed_types=[User, Tags]), value)
    with caplog.at_level(logging.WARNING):
        got = _read(backend.saver(allowed_types=[User, Tags]), config)
    assert repr(got) == expected and [type(v) for v in got] == [User, Tags]
    assert got[0].model_fields_set == {"user_id", "display_name"}
    assert "langgraph_ctx" not in caplog.text
    # and under LANGGRAPH_STRICT_MSGPACK, where compile() registers the schema's types
    strict = backend.saver().with_allowlist([(c.__module__, c.__qualname__) for c in (User, Tags)])
    assert repr(_read(strict, config)) == expected


# ------------------------------------------- 2. private attributes with a default factory


class Cart(BaseModel):
    owner: str
    _seen: set[str] = PrivateAttr(default_factory=set)  # a cache the model fills as it runs
    _hits: int = PrivateAttr(default=0)

    def remember(self, sku: str) -> bool:
        new = sku not in self._seen
        self._seen.add(sku)
        return new


class Meter(BaseModel):  # a factory of the application's: only its constructor runs it
    owner: str
    _log: list[str] = PrivateAttr(default_factory=lambda: ["opened"])


def test_private_attributes_with_a_builtin_factory_are_made(backend):
    """``PrivateAttr(default_factory=set)`` was missing after every read: the first use
    raised AttributeError. A builtin factory runs no application code: it is called."""
    expected = []
    for saver in (InMemorySaver(), _sqlite()):
        got = _read(saver, _save(saver, Cart(owner="ann")))
        expected.append((repr(got), got.__pydantic_private__))
    assert expected[0] == expected[1] == ("Cart(owner='ann')", {"_seen": set(), "_hits": 0})
    config = _save(backend.saver(), Cart(owner="ann"))
    for saver in (backend.saver(), backend.saver(allowed_types=[Cart])):
        got = _read(saver, config)
        assert (repr(got), got.__pydantic_private__) == expected[0]
        assert got.remember("x") and not got.remember("x")


def test_a_private_attribute_with_a_factory_of_the_apps_needs_the_registry(
    backend, caplog
):
    """Another factory is the application's code: not called. The model comes back as its
    fields with the warning naming the fix (``allowed_types``, whose constructor runs the
    factory); a rewrite keeps it as stored."""
    config = _save(backend.saver(), Meter(owner="ann"))
    with caplog.at_level(logging.WARNING):
        got = _read(backend.saver(), config)
    assert got == {"owner": "ann"}
    assert "Meter comes back as plain data (private attribute _log is not stored" in caplog.text
    assert "pass allowed_types=[Meter]" in caplog.text
    allowed = _read(backend.saver(allowed_types=[Meter]), config)
    assert type(allowed) is Meter and allowed._log == ["opened"]
    backend.saver().prune(["t"], strategy="keep_latest")
    assert type(_read(backend.saver(allowed_types=[Meter]), config)) is Meter


# ------------------------------------------ 3. classes that gained fields since they were saved

EVOLVING = "tests._evolving_types"

V1 = """
from dataclasses import dataclass, field
from typing import NamedTuple
from pydantic import BaseModel, Field

class M(BaseModel):
    a: int

@dataclass
class D:
    a: int

class N(NamedTuple):
    a: int

@dataclass
class DR:
    a: int

class MR(BaseModel):
    a: int

class MF(BaseModel):
    a: int
"""

V2 = """
from dataclasses import dataclass, field
from typing import NamedTuple
from pydantic import BaseModel, Field

class M(BaseModel):
    a: int
    tags: list[str] = Field(default_factory=list)
    note: str = "n"

@dataclass
class D:
    a: int
    tags: list[str] = field(default_factory=list)
    note: str = "n"

class N(NamedTuple):
    a: int
    b: int

@dataclass
class DR:
    a: int
    b: int

class MR(BaseModel):
    a: int
    b: int

class MF(BaseModel):
    a: int
    seen: list[str] = Field(default_factory=lambda: ["new"])
"""


def _version(source: str) -> types.ModuleType:
    """Module ``EVOLVING`` as one deployment of the application defines it."""
    module = types.ModuleType(EVOLVING)
    sys.modules[EVOLVING] = module
    exec(compile(source, EVOLVING, "exec"), module.__dict__)
    return module


@pytest.fixture
def evolving() -> Iterator[None]:
    yield
    sys.modules.pop(EVOLVING, None)


def _evolving_values(saver: Any) -> dict[str, Any]:
    """Each class's value written with version 1, read by a new saver with version 2."""
    v1 = _version(V1)
    value = {"m": v1.M(a=1), "d": v1.D(a=1), "dr": v1.DR(a=1), "mr": v1.MR(a=1), "mf": v1.MF(a=1)}
    configs = {"t": _save(saver(), value), "nt": _save(saver(), v1.N(a=1), "nt")}
    _version(V2)
    return {**_read(saver(), configs["t"]), "nt": _read(saver(), configs["nt"])}


def _picture(values: dict[str, Any]) -> dict[str, str]:
    return {k: f"{type(v).__name__} {v!r}" for k, v in sorted(values.items())}


def test_a_class_that_gained_fields_comes_back_whole_or_as_its_data(
    backend, caplog, evolving
):
    """A field added with ``default_factory=list`` was left unset (AttributeError on first
    use); a dataclass with a new required field came back an object whose repr raised,
    with no warning; a NamedTuple with one made the checkpoint a CorruptLogError. Builtin
    factories are called; a class the stored fields cannot make whole comes back as them
    with one warning, as from SqliteSaver."""
    sqlite = _sqlite()
    reference = _picture(_evolving_values(lambda: sqlite))
    with caplog.at_level(logging.WARNING):
        got = _picture(_evolving_values(backend.saver))
    for k in ("m", "d", "dr", "nt"):
        assert got[k] == reference[k], k
    assert got["m"] == "M M(a=1, tags=[], note='n')" and got["d"] == "D D(a=1, tags=[], note='n')"
    assert got["dr"] == got["nt"] == "dict {'a': 1}"
    # a model lacking a required field: SqliteSaver's model_construct leaves it unset (the
    # object raises AttributeError on .b); here it is its fields, as for a dataclass
    assert reference["mr"] == "MR MR(a=1)" and got["mr"] == "dict {'a': 1}"
    # a factory of the application's is not called: its fields, and the fix
    assert reference["mf"] == "MF MF(a=1, seen=['new'])" and got["mf"] == "dict {'a': 1}"
    for name in ("DR", "N", "MR"):
        assert f"{EVOLVING}.{name} comes back as plain data (the stored value has no b" in (
            caplog.text
        )
    assert "give b a default" in caplog.text
    assert f"{EVOLVING}.MF comes back as plain data (field seen is not stored" in caplog.text
    assert "pass allowed_types=[MF]" in caplog.text
    # allowed, the constructor runs the factory
    allow = [sys.modules[EVOLVING].MF]
    allowed = _read(backend.saver(allowed_types=allow), {"configurable": {"thread_id": "t"}})
    assert repr(allowed["mf"]) == "MF(a=1, seen=['new'])"
    # registered, whose constructor refuses them: their fields too, never CorruptLogError
    v2 = sys.modules[EVOLVING]
    config = {"configurable": {"thread_id": "t"}}
    allowed = _read(backend.saver(allowed_types=[v2.DR, v2.MR]), config)
    assert allowed["dr"] == allowed["mr"] == {"a": 1}
    config = {"configurable": {"thread_id": "nt"}}
    assert _read(backend.saver(allowed_types=[v2.N]), config) == {"a": 1}


def test_a_rewrite_keeps_what_a_class_that_gained_fields_cannot_make(backend, evolving):
    """A prune run where version 2 is loaded keeps the values it gives back as data as
    they are stored: version 1 reads its objects back after it."""
    _evolving_values(backend.saver)
    for thread in ("t", "nt"):
        backend.saver().prune([thread], strategy="keep_latest")
    v1 = _version(V1)
    values = _read(backend.saver(), {"configurable": {"thread_id": "t"}})
    assert {k: type(v) for k, v in values.items()} == {
        "m": v1.M, "d": v1.D, "dr": v1.DR, "mr": v1.MR, "mf": v1.MF
    }  # fmt: skip
    assert _read(backend.saver(), {"configurable": {"thread_id": "nt"}}) == v1.N(a=1)


# ------------------------------------------------------- 4. frozen dataclasses with slots


@dataclasses.dataclass(frozen=True, slots=True)
class Money:  # dataclass gives it __getstate__ / __setstate__ of its own module's
    amount: int
    currency: str
    rates: list[int] = dataclasses.field(default_factory=list)


class Wallet(NamedTuple):
    cash: Money


def test_a_frozen_dataclass_with_slots_comes_back_as_itself(backend, caplog):
    """``dataclass(frozen=True, slots=True)`` generates ``__getstate__`` / ``__setstate__``
    (functions of the ``dataclasses`` module, not compiled from a string): the class was
    taken for one with code of its own and came back as a dict."""
    assert "__setstate__" in vars(Money)
    value = {"money": Money(5, "EUR"), "wallet": Wallet(Money(1, "USD", [2]))}
    expected = []
    for saver in (InMemorySaver(), _sqlite()):
        expected.append(repr(_read(saver, _save(saver, value))))
    assert expected[0] == expected[1]
    config = _save(backend.saver(), value)
    with caplog.at_level(logging.WARNING):
        got = _read(backend.saver(), config)
    assert repr(got) == expected[0] and type(got["money"]) is Money
    assert got["wallet"].cash == Money(1, "USD", [2]) and got["money"] == Money(5, "EUR")
    assert "comes back as plain data" not in caplog.text
    with pytest.raises(dataclasses.FrozenInstanceError):
        got["money"].amount = 6  # type: ignore[misc]


def test_only_the_dataclasses_modules_own_setstate_counts_as_generated():
    def __setstate__(self: Any, state: Any) -> None:  # a class's own, named alike
        pass

    __setstate__.__module__ = "dataclasses"
    __setstate__.__qualname__ = "_dataclass_setstate"
    mimic = type("Mimic", (Money,), {"__setstate__": __setstate__, "__slots__": ()})
    assert classes.plain_data_class(Money, "dataclass")
    assert not classes.plain_data_class(mimic, "dataclass")


# ------------------------------- 5. the warning's fix when the class's module is loaded


class Item(BaseModel):
    name: str


class Page(BaseModel, Generic[T]):
    items: list[T]


def _warned_for(backend: Any, value: Any, caplog: Any, thread: str) -> tuple[Any, str]:
    config = _save(backend.saver(), value, thread)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        got = _read(backend.saver(), config)
    return got, caplog.text


def test_the_warning_names_a_fix_that_applies_when_the_module_is_loaded(
    backend, caplog, evolving
):
    """"import X before reading" was the fix even where X was imported: a renamed class, a
    class defined in a function, a parametrized generic model, another script's
    ``__main__`` class. Each now says why it is not found, and the fix that works."""
    assert _version(V1).__name__ in sys.modules  # the module stays loaded throughout
    v1 = sys.modules[EVOLVING]
    config = _save(backend.saver(), v1.M(a=1), "gone")
    del v1.M  # renamed or moved: the module no longer has it
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert _read(backend.saver(), config) == {"a": 1}
    assert f"{EVOLVING}.M comes back as plain data ({EVOLVING} is loaded but has no M)" in (
        caplog.text
    )
    assert "renamed or moved" in caplog.text and "import " not in caplog.text

    def make() -> type[BaseModel]:
        class Local(BaseModel):
            a: int

        return Local

    local = make()
    got, text = _warned_for(backend, local(a=1), caplog, "local")
    assert got == {"a": 1} and "defined inside a function" in text
    assert "allowed_types=[Local]" in text and "import " not in text
    assert type(_read(backend.saver(allowed_types=[local]), _cfg("local"))) is local

    got, text = _warned_for(backend, Page[Item](items=[Item(name="z")]), caplog, "page")
    assert got == {"items": [Item(name="z")]}
    assert "a parametrized generic class" in text and "allowed_types=[Page[Item]]" in text
    assert "import " not in text
    assert type(_read(backend.saver(allowed_types=[Page[Item]]), _cfg("page"))) is Page[Item]

    namespace = {"__module__": "__main__", "__annotations__": {"a": int}}
    script = type("Script", (BaseModel,), namespace)
    got, text = _warned_for(backend, script(a=1), caplog, "main")
    assert got == {"a": 1} and "__main__ has no Script: another script stored it" in text
    assert "define the class in a module both scripts import" in text
    assert "import __main__" not in text


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# ------------------------------------------- annotations are never evaluated (review 28)


def test_a_rewrite_never_evaluates_the_annotations_of_a_class_a_line_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A tampered line may put any loaded dataclass under a model's field; storing it
    again (a prune) looks up its declared types by name, never evaluating a string
    annotation (``y: Positive()`` would call ``Positive``)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_ctx import JsonlSaver
    from langgraph_ctx.codec.lines import dumps_line, loads_line

    calls: list[str] = []
    victim = types.ModuleType("lgctx_victim")
    victim.__dict__["calls"] = calls
    monkeypatch.setitem(sys.modules, "lgctx_victim", victim)
    exec(
        "from __future__ import annotations\n"
        "import dataclasses\n"
        "def Positive():\n"
        "    calls.append('evaluated')\n"
        "    return int\n"
        "@dataclasses.dataclass\n"
        "class D:\n"
        "    y: Positive()\n",
        victim.__dict__,
    )
    saver = JsonlSaver(tmp_path)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(2):
        checkpoint: Any = {**empty_checkpoint(), "channel_values": {"v": Wrapper(inner=1)}}
        checkpoint["channel_versions"] = {"v": step + 1}
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"v": step + 1})
    path = tmp_path / "t.jsonl"
    lines = path.read_bytes().splitlines()
    tampered = []
    for raw in lines:
        obj = loads_line(raw)
        if obj and obj.get("t") == "ckpt" and "v" in obj.get("values", {}):
            obj["values"]["v"][1] = {
                "model": [__name__, "Wrapper"],
                "fields": {"inner": {"dataclass": ["lgctx_victim", "D"], "json": {"y": 1}}},
            }
            raw = dumps_line(obj)[:-1]
        tampered.append(raw)
    path.write_bytes(b"\n".join(tampered) + b"\n")
    fresh = JsonlSaver(tmp_path)
    value = fresh.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["channel_values"]
    assert type(value["v"].inner).__name__ == "D"
    fresh.prune(["t"])
    assert calls == []
    assert type(_read(JsonlSaver(tmp_path), {"configurable": {"thread_id": "t"}}).inner) is victim.D


class Wrapper(BaseModel):
    inner: int  # typed: what sits in it is stored by its declared types


# ------------------------------- an allowed class that lost a field (review 28, F2 and F3)

SHRINKING = "lgctx_shrinking"
SHRINK_V1 = """
import dataclasses
from pydantic import BaseModel, ConfigDict
class RM(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    old: int = 0
class RI(BaseModel):
    a: int
    old: int = 0
@dataclasses.dataclass
class RD:
    a: int
    old: int = 0
"""
SHRINK_V2 = """
import dataclasses
from pydantic import BaseModel, ConfigDict
class RM(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
class RI(BaseModel):
    a: int
@dataclasses.dataclass
class RD:
    a: int
"""


def _shrinking(source: str) -> Any:
    module = types.ModuleType(SHRINKING)
    sys.modules[SHRINKING] = module
    exec(compile(source, SHRINKING, "exec"), module.__dict__)
    return module


def test_an_allowed_class_that_lost_a_field_reads_as_langgraph_and_a_rewrite_keeps_it(
    backend, caplog
):
    """Read with the newer class: what `SqliteSaver` returns (the models without the
    field, the dataclass as its data with a warning). A prune by that newer version keeps
    the field, which the older class reads back."""
    try:
        v1 = _shrinking(SHRINK_V1)
        value = {"rm": v1.RM(a=1, old=5), "ri": v1.RI(a=1, old=5), "rd": v1.RD(1, 5)}
        allowed = [v1.RM, v1.RI, v1.RD]
        config = _save(backend.saver(allowed_types=allowed), value)
        sqlite = _sqlite(JsonPlusSerializer(allowed_msgpack_modules=allowed))
        reference_config = _save(sqlite, value)
        v2 = _shrinking(SHRINK_V2)
        allowed = [v2.RM, v2.RI, v2.RD]
        sqlite.serde = JsonPlusSerializer(allowed_msgpack_modules=allowed)
        expected = {k: repr(v) for k, v in _read(sqlite, reference_config).items()}
        assert expected == {"rd": "{'a': 1, 'old': 5}", "ri": "RI(a=1)", "rm": "RM(a=1)"}
        newer = backend.saver(allowed_types=allowed)
        with caplog.at_level(logging.WARNING, logger="langgraph_ctx"):
            assert {k: repr(v) for k, v in _read(newer, config).items()} == expected
        assert "RD comes back as plain data" in caplog.text
        newer.prune(["t"])
        v1 = _shrinking(SHRINK_V1)
        older = backend.saver(allowed_types=[v1.RM, v1.RI, v1.RD])
        assert {k: repr(v) for k, v in _read(older, config).items()} == {
            "rd": "RD(a=1, old=5)", "ri": "RI(a=1, old=5)", "rm": "RM(a=1, old=5)"
        }
    finally:
        sys.modules.pop(SHRINKING, None)


# ------------------------------------ a class moved and re-exported (review 28, F6)


def test_a_class_moved_and_re_exported_where_it_was_reads_back_as_its_data(backend, caplog):
    """The usual shim after a move (``from app_items import Item`` in the old module): the
    stored name is no longer the class's home, so its values come back as plain data with
    the warning (an alias never smuggles a class in), not as a corrupt line; with the
    class allowed, as that class."""
    try:
        old = types.ModuleType("lgctx_models")
        sys.modules["lgctx_models"] = old
        exec("import dataclasses\n@dataclasses.dataclass\nclass Item:\n    a: int\n", old.__dict__)
        config = _save(backend.saver(), old.Item(1))
        new = types.ModuleType("lgctx_items")
        sys.modules["lgctx_items"] = new
        exec("import dataclasses\n@dataclasses.dataclass\nclass Item:\n    a: int\n", new.__dict__)
        old.__dict__["Item"] = new.Item  # the old module re-exports the moved class
        with caplog.at_level(logging.WARNING, logger="langgraph_ctx"):
            assert _read(backend.saver(), config) == {"a": 1}
        assert "lgctx_models.Item comes back as plain data" in caplog.text
        assert "allowed_types=[Item]" in caplog.text
        allowed = _read(backend.saver(allowed_types=[new.Item]), config)  # the way back
        assert type(allowed) is new.Item and allowed.a == 1
    finally:
        sys.modules.pop("lgctx_models", None)
        sys.modules.pop("lgctx_items", None)


def test_reading_a_classs_declared_types_runs_none_of_its_modules_objects(tmp_path: Any) -> None:
    """Review 30: the names in a string annotation are looked up in the class's module,
    and an object found there is judged by its exact type: a lazy object whose
    ``__class__`` runs code (Django's settings) is never touched, and a word inside a
    ``Literal`` is no name at all."""
    from langgraph_ctx import JsonlSaver

    lazy = types.ModuleType("lgctx_lazy")
    sys.modules["lgctx_lazy"] = lazy
    try:
        exec(
            "from __future__ import annotations\n"
            "import dataclasses\n"
            "from typing import Literal\n"
            "class _Lazy:\n"
            "    @property\n"
            "    def __class__(self):\n"
            "        raise RuntimeError('lazy setup ran')\n"
            "settings = _Lazy()\n"
            "@dataclasses.dataclass\n"
            "class Cfg:\n"
            "    mode: Literal['settings', 'x']\n"
            "    pair: tuple\n"
            "from pydantic import BaseModel\n"
            "class Holder(BaseModel):\n"
            "    cfg: Cfg\n",
            lazy.__dict__,
        )
        value = lazy.Holder(cfg=lazy.Cfg("x", (1, 2)))
        saver = JsonlSaver(tmp_path)
        config = _save(saver, value)
        assert _read(JsonlSaver(tmp_path), config).cfg.pair == (1, 2)
    finally:
        sys.modules.pop("lgctx_lazy", None)
