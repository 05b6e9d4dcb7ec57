"""How an application's classes come back when the reader cannot simply set their stored
fields (trial 11): a registered model whose validation refuses its own fields, private
attributes and fields with default factories, classes that gained fields between two
deployments, frozen slotted dataclasses, and the warning's fix when the module is loaded.
Each checked against what `InMemorySaver` / `SqliteSaver` return, on every backend."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel, Field, PrivateAttr, field_validator

from langgraph_ctx.codec import classes


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

