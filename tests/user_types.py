"""An application's own types in graph state, as a module an app (or a cold process) imports.

Used by tests/test_user_types.py in-process and from a fresh interpreter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from typing import Annotated, Any, NamedTuple

import pydantic.v1
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


class Perm(enum.IntFlag):
    """Its combinations (``Perm.R | Perm.W``) are members made on first use."""

    R = 4
    W = 2


class Style(enum.Flag):
    BOLD = 1
    ITALIC = 2


HOOKS_RAN: list[str] = []


class Tracked(enum.Flag):
    """A flag with code of its own in what making a combination calls."""

    R = 4
    W = 2

    def __setattr__(self, name: str, value: Any) -> None:
        HOOKS_RAN.append(name)
        object.__setattr__(self, name, value)


class Compared(enum.Flag):
    """A flag whose ``__eq__`` is its own (``Flag._missing_`` compares members)."""

    A = 1
    BC = 6
    B = 2

    def __eq__(self, other: object) -> bool:
        HOOKS_RAN.append("__eq__")
        return self is other

    __hash__ = enum.Flag.__hash__


class Item(BaseModel):
    sku: str
    size: Size = Size.SMALL


class Order(BaseModel):
    """A pydantic v2 model with nested models, an enum, a datetime and a tuple."""

    id: int
    color: Color
    items: list[Item] = []
    placed: dt.datetime | None = None
    dims: tuple[int, int] = (0, 0)


class Loose(BaseModel):
    """Keeps fields it does not declare (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")
    name: str


class LegacyProfile(pydantic.v1.BaseModel):
    name: str
    visits: int = 0


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


class Pair(NamedTuple):
    left: str
    right: int = 0


class Stamp(dt.datetime):
    """A datetime subclass: LangGraph stores it as a ``fromisoformat`` call it refuses to
    make again for any class but ``datetime``, so `SqliteSaver` reads its ISO text."""


class Outer:
    """Holds an enum LangGraph's serializer names by its bare name (``Inner``), which it
    then cannot find in the module: `SqliteSaver` reads a member as its value."""

    class Inner(enum.Enum):
        X = "x"


class Envelope(BaseModel):
    """A model holding a message: the message is stored once and referenced.

    (Typed ``AIMessage``: with ``BaseMessage`` LangGraph's serializer, re-validating
    the dumped dict, returns a bare ``BaseMessage``; the log returns the message.)
    """

    note: str
    message: AIMessage | None = None


class State(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    order: Order
    profile: LegacyProfile
    point: Point
    color: Color
    pair: Pair
    tags: set[str]
    frozen: frozenset[int]
    when: dt.datetime
    ident: uuid.UUID
    nested: dict[str, Any]
    envelope: Envelope


WHEN = dt.datetime(2026, 1, 28, 10, 0, tzinfo=dt.timezone.utc)
IDENT = uuid.UUID("12345678-1234-5678-1234-567812345678")


def first_input() -> dict[str, Any]:
    return {
        "messages": [HumanMessage("hello", id="h-0")],
        "order": Order(id=1, color=Color.RED, items=[Item(sku="a")], placed=WHEN, dims=(2, 3)),
        "profile": LegacyProfile(name="Ada"),
        "point": Point(1.5, 2.0),
        "color": Color.BLUE,
        "pair": Pair("x", 1),
        "tags": {"a", "b"},
        "frozen": frozenset({1, 2}),
        "when": WHEN,
        "ident": IDENT,
    }


def step(state: State) -> dict[str, Any]:
    """Reads every value as its own type (a dict would raise AttributeError)."""
    turn = len(state["messages"]) // 2
    order = state["order"]
    reply = AIMessage(f"order {order.id} is {order.color.value}", id=f"ai-{turn}")
    return {
        "messages": [reply],
        "order": order.model_copy(
            update={
                "id": order.id + 1,
                "items": [*order.items, Item(sku=f"s{turn}", size=Size.LARGE)],
                "dims": (order.dims[0] + 1, order.dims[1]),
            }
        ),
        "profile": state["profile"].copy(update={"visits": state["profile"].visits + 1}),
        "point": Point(state["point"].x + 1, state["point"].y),
        "color": Color.RED if state["color"] is Color.BLUE else Color.BLUE,
        "pair": state["pair"]._replace(right=state["pair"].right + 1),
        "tags": state["tags"] | {f"t{turn}"},
        "frozen": state["frozen"] | {turn + 10},
        "when": state["when"] + dt.timedelta(days=1),
        "ident": state["ident"],
        "nested": {
            "replies": [reply, HumanMessage("quoted", id=f"q-{turn}")],
            "pair": (reply, turn),
            3: "int key",
            "model": Envelope(note="inner", message=reply),
        },
        "envelope": Envelope(note=f"turn {turn}", message=reply),
    }


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    return builder


def run(graph: Any, config: dict[str, Any]) -> None:
    """Two turns, the second reading what the first stored."""
    graph.invoke(first_input(), config)
    graph.invoke({"messages": [HumanMessage("again", id="h-1")]}, config)


def canonical(value: Any) -> Any:
    """A JSON-able picture of a value that keeps every type: equal pictures, equal values."""
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, BaseMessage):
        return ["message", name, value.model_dump()]
    if isinstance(value, BaseModel):
        return [name, {k: canonical(getattr(value, k)) for k in type(value).model_fields}]
    if isinstance(value, pydantic.v1.BaseModel):
        return [name, {k: canonical(getattr(value, k)) for k in value.__fields__}]
    if isinstance(value, enum.Enum):
        return [name, value.value]
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        return [name, {f.name: canonical(getattr(value, f.name)) for f in fields}]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [name, {k: canonical(v) for k, v in zip(value._fields, value, strict=True)}]
    if kind in (list, tuple):
        return [name, [canonical(v) for v in value]]
    if kind in (set, frozenset):
        return [name, sorted((canonical(v) for v in value), key=repr)]
    if kind is dict:
        return [name, sorted(([repr(k), canonical(v)] for k, v in value.items()), key=repr)]
    if kind in (dt.datetime, uuid.UUID):
        return [name, str(value)]
    return value
