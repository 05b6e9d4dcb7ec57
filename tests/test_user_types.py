"""The application's own types in state come back as themselves, as SqliteSaver returns them
(issue 11, points 1 and 3): in the same process and in a fresh one, on both backends,
without ``allowed_types``; and every message inside a value is stored once."""

from __future__ import annotations

import dataclasses
import json
import logging
import operator
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypedDict

import pydantic.dataclasses
import pytest
import typing_extensions
from langchain_core.agents import AgentAction, AgentFinish
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel
from typing_extensions import TypeAliasType

from langgraph_ctx.codec import classes

from . import user_types
from .backends import Backend

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"configurable": {"thread_id": "types"}}


def reference_state() -> Any:
    """What LangGraph's own savers return for the same two turns."""
    pictures = []
    sqlite = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    for saver in (InMemorySaver(), sqlite):
        graph = user_types.build().compile(checkpointer=saver)
        user_types.run(graph, CONFIG)
        pictures.append(user_types.canonical(graph.get_state(CONFIG).values))
    sqlite.conn.close()
    assert pictures[0] == pictures[1]
    return pictures[0]


def cold_state(backend: Backend, thread: str = "types") -> Any:
    """``get_state`` in a fresh interpreter that imports the app's types module, as an app does."""
    script = textwrap.dedent(
        f"""
        import json
        from tests import user_types
        saver = {backend.saver_code()}
        graph = user_types.build().compile(checkpointer=saver)
        state = graph.get_state({{"configurable": {{"thread_id": {thread!r}}}}})
        print(json.dumps(user_types.canonical(state.values)))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_app_types_come_back_as_themselves(backend, caplog):
    graph = user_types.build().compile(checkpointer=backend.saver())
    with caplog.at_level(logging.WARNING):
        user_types.run(graph, CONFIG)  # turn 2 reads turn 1's values as their types
        warm = user_types.canonical(graph.get_state(CONFIG).values)
    expected = json.loads(json.dumps(reference_state()))
    assert json.loads(json.dumps(warm)) == expected
    assert "comes back as plain data" not in caplog.text
    state = graph.get_state(CONFIG).values
    assert isinstance(state["order"], user_types.Order) and state["order"].dims == (4, 3)
    assert state["order"].items[-1].size is user_types.Size.LARGE
    assert isinstance(state["profile"], user_types.LegacyProfile) and state["profile"].visits == 2
    assert state["pair"] == user_types.Pair("x", 3) and type(state["pair"]) is user_types.Pair
    assert state["tags"] == {"a", "b", "t0", "t1"} and type(state["frozen"]) is frozenset


def test_app_types_come_back_in_a_cold_process(backend):
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    assert cold_state(backend) == json.loads(json.dumps(reference_state()))


def test_values_are_readable_json(backend):
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    values: dict[str, Any] = {}
    for line in backend.log_bytes("types").splitlines():
        obj = json.loads(line)
        if obj["t"] == "ckpt":
            values.update({ch: e[1] for ch, e in obj["values"].items() if len(e) == 2})
    assert values["color"] == {"enum": ["tests.user_types", "Color"], "value": "blue"}
    assert values["point"] == {
        "dataclass": ["tests.user_types", "Point"],
        "json": {"x": 3.5, "y": 2.0},
    }
    assert values["pair"] == {
        "namedtuple": ["tests.user_types", "Pair"],
        "json": {"left": "x", "right": 3},
    }
    assert values["ident"] == {"uuid": "12345678-1234-5678-1234-567812345678"}
    assert values["order"]["model"] == ["tests.user_types", "Order"]
    assert values["order"]["fields"]["dims"] == {"tuple": [4, 3]}
    assert values["envelope"]["fields"]["message"].keys() == {"msg"}
    assert "serde" not in json.dumps(values)


def test_messages_inside_values_are_stored_once(backend):
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    lines = [json.loads(line) for line in backend.log_bytes("types").splitlines()]
    ids = [o["id"] if "like" in o else o["msg"]["id"] for o in lines if o["t"] == "msg"]
    assert len(ids) == len(set(ids))  # ai-0 sits in messages, nested (3 places) and envelope
    assert {"ai-0", "ai-1", "q-0", "q-1", "h-0", "h-1"} == set(ids)  # fmt: skip


def test_strict_mode_honours_the_allowlist_compile_passes(backend):
    """Under LANGGRAPH_STRICT_MSGPACK only the registry is rebuilt: what ``compile()``
    derives from the state schema (``with_allowlist``); other classes stay data."""
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    script = textwrap.dedent(
        f"""
        import json
        from tests import user_types
        saver = {backend.saver_code()}
        config = {{"configurable": {{"thread_id": "types"}}}}
        compiled = user_types.build().compile(checkpointer=saver)
        values = compiled.get_state(config).values
        raw = saver.get_tuple(config).checkpoint["channel_values"]
        print(json.dumps([type(values["order"]).__name__, type(values["point"]).__name__,
                          type(values["pair"]).__name__, type(raw["nested"][3]).__name__]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANGGRAPH_STRICT_MSGPACK": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    # the schema's types via compile's allowlist; LangGraph's schema walk leaves out
    # NamedTuples, so Pair stays data (as SqliteSaver returns it in strict mode)
    assert json.loads(proc.stdout) == ["Order", "Point", "dict", "str"]
    assert "Pair comes back as plain data (not on the allowlist)" in proc.stderr


def test_allowed_types_rebuild_classes_with_their_own_code(backend):
    from langgraph.checkpoint.base import empty_checkpoint

    class Counted(BaseModel):
        n: int
        doubled: int = 0

        def __init__(self, **data: Any) -> None:
            super().__init__(**data)
            self.doubled = 2 * self.n

    cp = empty_checkpoint()
    cp["channel_versions"] = {"c": 1}
    cp["channel_values"] = {"c": Counted(n=2)}
    config = {"configurable": {"thread_id": "c", "checkpoint_ns": ""}}
    backend.saver().put(config, cp, {}, {"c": 1})
    # its own __init__: not plain data, so only from the allowlist (through the constructor)
    assert backend.saver().get_tuple(config).checkpoint["channel_values"]["c"] == {
        "n": 2,
        "doubled": 4,
    }
    allowed = backend.saver(allowed_types=[Counted]).get_tuple(config)
    assert allowed.checkpoint["channel_values"]["c"] == Counted(n=2)


def test_a_cold_reader_imports_only_what_the_registry_names(backend):
    """A process that never imported the app's types: plain data and a warning, no
    import; with the class on ``allowed_types`` (as a pair), its module is imported."""
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    script = textwrap.dedent(
        f"""
        import json, sys
        kwargs = {{k: [tuple(p) for p in v] for k, v in json.loads(sys.argv[1]).items()}}
        saver = {backend.saver_code()[:-1] + ", **kwargs)"}
        values = saver.get_tuple({{"configurable": {{"thread_id": "types"}}}})
        values = values.checkpoint["channel_values"]
        print(json.dumps([type(values["order"]).__name__, "tests.user_types" in sys.modules]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    stderr = []
    for kwargs, expected in [
        ({}, ["dict", False]),
        ({"allowed_types": [["tests.user_types", "Order"]]}, ["Order", True]),
    ]:
        proc = subprocess.run(
            [sys.executable, "-c", script, json.dumps(kwargs)],
            capture_output=True, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == expected
        stderr.append(proc.stderr)
    assert "tests.user_types.Order comes back as plain data (not loaded)" in stderr[0]
    assert "import tests.user_types before reading" in stderr[0]


# ----------------------------------------------------------------- functional API


class Tally(BaseModel):
    count: int
    history: list[int] = []


def test_functional_api_with_a_pydantic_state(backend):
    @entrypoint(checkpointer=backend.saver())
    def tally(step: int, *, previous: Tally | None = None) -> entrypoint.final[Tally, Tally]:
        current = previous or Tally(count=0)
        new = Tally(count=current.count + step, history=[*current.history, step])
        return entrypoint.final(value=new, save=new)

    config = {"configurable": {"thread_id": "func"}}
    assert tally.invoke(2, config) == Tally(count=2, history=[2])
    assert tally.invoke(3, config) == Tally(count=5, history=[2, 3])  # read previous as Tally
    state = backend.saver().get_tuple(config).checkpoint["channel_values"]["__previous__"]
    assert type(state) is Tally and state == Tally(count=5, history=[2, 3])


# ----------------------------------------------------------- agents: Send packets


@tool
def fetch(query: str) -> str:
    """Fetch a document."""
    return f"document for {query}: " + "lorem ipsum " * 500


class ScriptedModel(BaseChatModel):
    """Calls ``fetch`` once per user message, then answers."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"done: {len(last.content)} bytes")
        else:
            n = sum(isinstance(m, HumanMessage) for m in messages)
            call = {"name": "fetch", "args": {"query": f"q{n}"}, "id": f"call-{n}"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("kind", ["create_react_agent", "create_agent"])
def test_agent_messages_are_stored_once(backend, kind):
    if kind == "create_react_agent":
        from langgraph.prebuilt import create_react_agent as make
    else:
        from langchain.agents import create_agent as make
    agent = make(ScriptedModel(), [fetch], checkpointer=backend.saver())
    config = {"configurable": {"thread_id": "agent"}}
    turns = 12
    for i in range(turns):
        agent.invoke({"messages": [("user", f"question {i}")]}, config)
    messages = agent.get_state(config).values["messages"]
    assert len(messages) == 4 * turns
    log = backend.log_bytes("agent")
    lines = [o for o in map(json.loads, log.splitlines()) if o["t"] == "msg"]
    # one line per message (a "like" line: the same body again with the id LangGraph
    # assigned later, or an identical reply); before, every Send packet held them all
    assert len([o for o in lines if "like" not in o]) <= len(messages)
    assert len(lines) <= len(messages) + turns
    raw = sum(len(json.dumps(m.content)) for m in messages)
    assert len(log) < 3 * raw, (len(log), raw)
    assert b'"serde"' not in log
    cold = backend.saver().get_tuple(config).checkpoint["channel_values"]["messages"]
    assert [m.content for m in cold] == [m.content for m in messages]


def test_odd_values_round_trip(backend):
    """Keys that are not strings (tuples stay hashable), sets of tuples, NaN, bytes, and
    LangGraph's own Send / Command / Interrupt holding messages."""
    import math

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.types import Command, Interrupt, Send

    hello = HumanMessage("hello", id="h")
    value = {
        (1, 2): "tuple key",
        3: {(4, "x")},
        "nan": float("nan"),
        "bytes": b"\x00\xff",
        "frozen": frozenset({(1, (2, 3))}),
        "send": Send("tools", {"messages": [hello], "n": 1}),
        "command": Command(goto=[Send("a", {"m": hello})], update={"messages": [hello]}),
        "interrupt": Interrupt(value={"ask": hello}, id="i-1"),
    }
    cp = empty_checkpoint()
    cp["channel_versions"] = {"v": 1}
    cp["channel_values"] = {"v": value}
    config = {"configurable": {"thread_id": "odd", "checkpoint_ns": ""}}
    backend.saver().put(config, cp, {}, {"v": 1})
    got = backend.saver().get_tuple(config).checkpoint["channel_values"]["v"]
    assert math.isnan(got.pop("nan")) and math.isnan(value.pop("nan"))
    assert got == value
    assert type(got["command"]) is Command and type(got["interrupt"]) is Interrupt
    log = backend.log_bytes("odd")
    assert log.count(b'"t":"msg"') == 1  # hello, referenced four times



class _AgentState(TypedDict):
    agent_outcome: AgentAction | AgentFinish | None
    steps: Annotated[list[Any], operator.add]


def test_langchain_agent_actions_in_state_come_back_as_themselves(backend):
    """LangGraph's own tests keep an `AgentAction` in state; `SqliteSaver` returns it."""

    def agent(state: _AgentState) -> dict[str, Any]:
        return {"agent_outcome": AgentAction(tool="search", tool_input="query", log="go")}

    builder = StateGraph(_AgentState)
    builder.add_node(agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    builder.compile(checkpointer=backend.saver()).invoke({"steps": []}, CONFIG)
    cold = builder.compile(checkpointer=backend.saver()).get_state(CONFIG).values
    expected = AgentAction(tool="search", tool_input="query", log="go")
    assert type(cold["agent_outcome"]) is AgentAction and cold["agent_outcome"] == expected


def test_a_messages_extra_fields_come_back_as_in_langgraphs_savers(backend, tmp_path):
    """LangChain's message classes allow fields of their own (``HumanMessage("hi",
    source="ui")``): kept through a save, warm and in a fresh saver, as SqliteSaver and
    InMemorySaver keep them; and two messages differing only there are not stored as one."""
    config = {"configurable": {"thread_id": "t"}}

    def bot(state):
        return {"messages": [AIMessage("ok", id=f"a{len(state['messages'])}", trace="t-1")]}

    def run(saver):
        builder = StateGraph(MessagesState)
        builder.add_node(bot)
        builder.add_edge(START, "bot")
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h1", source="ui")]}, config)
        graph.invoke({"messages": [HumanMessage("hi", id="h2", source="api")]}, config)
        return [(m.id, m.__pydantic_extra__) for m in graph.get_state(config).values["messages"]]

    with sqlite3.connect(tmp_path / "ref.db", check_same_thread=False) as conn:
        expected = run(SqliteSaver(conn))
    assert run(InMemorySaver()) == expected
    assert expected == [
        ("h1", {"source": "ui"}), ("a1", {"trace": "t-1"}),
        ("h2", {"source": "api"}), ("a3", {"trace": "t-1"}),
    ]  # fmt: skip
    assert run(backend.saver()) == expected
    fresh = backend.saver().get_tuple(config).checkpoint["channel_values"]["messages"]
    assert [(m.id, m.__pydantic_extra__) for m in fresh] == expected


class _Lenient(user_types.enum.Enum):
    """An enum with a ``_missing_`` of its own: ``cls(value)`` would run its code."""

    ON = "on"

    @classmethod
    def _missing_(cls, value: object) -> Any:
        return cls.ON


def test_an_enum_inside_a_messages_fields_comes_back_as_in_langgraphs_savers(
    backend, caplog, monkeypatch
):
    """A message whose fields hold an application's enum (``additional_kwargs``, a tool's
    ``artifact``) goes through LangGraph's serializer: the enum member comes back as
    SqliteSaver and InMemorySaver return it (pydantic dumps a model there to a dict, in
    all of them), warm and from a fresh saver; an enum whose lookup would run its own
    code (``_missing_``) comes back as its value, with a warning naming the fix."""
    monkeypatch.setattr(classes, "_warned", set())  # one warning per class and process
    config = {"configurable": {"thread_id": "t"}}
    color = user_types.Color.RED
    artifact = user_types.Order(id=1, color=color, items=[user_types.Item(sku="s")])

    def node(state):
        return {
            "messages": [
                AIMessage("x", id="a", additional_kwargs={"c": color, "l": _Lenient.ON}),
                ToolMessage("found", id="t", tool_call_id="c1", artifact={"hit": artifact}),
            ]
        }

    def picture(messages):
        return [
            (repr(m.additional_kwargs), repr(getattr(m, "artifact", None))) for m in messages[1:]
        ]

    builder = StateGraph(MessagesState)
    builder.add_node(node)
    builder.add_edge(START, "node")
    refs = []
    sqlite = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    for saver in (InMemorySaver(), sqlite, backend.saver()):
        graph = builder.compile(checkpointer=saver)
        with caplog.at_level(logging.WARNING, logger="langgraph_ctx.codec"):
            graph.invoke({"messages": [HumanMessage("hi", id="h")]}, config)
            refs.append(picture(graph.get_state(config).values["messages"]))
    sqlite.conn.close()
    mem, lite, ours = refs
    assert mem == lite
    assert "<Color.RED: 'red'>" in lite[0][0] and "<Size.SMALL: 1>" in lite[1][1]
    expected = [(lite[0][0].replace("<_Lenient.ON: 'on'>", "'on'"), lite[0][1]), lite[1]]
    assert ours == expected
    fresh = backend.saver().get_tuple(config).checkpoint["channel_values"]["messages"]
    assert picture(fresh) == expected
    assert "_Lenient comes back as plain data (not a plain data class)" in caplog.text
    assert "Color comes back as plain data" not in caplog.text


def _without_the_app(backend: Backend, code: str, *, reads: bool = False) -> None:
    """Run ``code`` (``saver`` bound) in a fresh interpreter that never imports the app's
    types module, as the CLI or a cron job would (``reads``: it also reads for itself,
    and is told what comes back as plain data)."""
    script = f"import sys\nsaver = {backend.saver_code()}\n{code}\n"
    script += "assert 'tests.user_types' not in sys.modules\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    if not reads:
        assert "comes back as plain data" not in proc.stderr  # nothing came back to anyone


def test_a_prune_where_the_apps_types_are_not_loaded_keeps_them(backend):
    """`prune(strategy="keep_latest")` (``langgraph-ctx prune --keep-latest``, a sweep) in a
    process without the application's types decoded its values to plain data and wrote
    them back so: the app's objects were dicts for good. A rewrite keeps what it cannot
    make as it is stored (`Unresolved`)."""
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    before = user_types.canonical(graph.get_state(CONFIG).values)
    _without_the_app(backend, "saver.prune(['types'], strategy='keep_latest')")
    fresh = backend.saver()
    assert len(list(fresh.list(CONFIG))) == 1  # pruned
    state = user_types.build().compile(checkpointer=fresh).get_state(CONFIG).values
    assert user_types.canonical(state) == before
    assert isinstance(state["order"], user_types.Order) and state["color"] is user_types.Color.BLUE


def test_a_prune_where_another_version_of_the_apps_types_is_loaded_keeps_them(backend):
    """A rewrite run by another deployment of the app (a maintenance job of an older one),
    whose enum lacks a member and whose model lacks fields, stored what those classes made
    of the values: the enum's bare value, the model without its fields, for good. A value
    its class cannot make whole is kept as it is stored, as where the class is not loaded."""
    graph = user_types.build().compile(checkpointer=backend.saver())
    user_types.run(graph, CONFIG)
    before = user_types.canonical(graph.get_state(CONFIG).values)
    older = (
        "import sys, types\n"
        "older = types.ModuleType('tests.user_types')\n"
        "exec('import enum\\nfrom pydantic import BaseModel\\n'\n"
        "     'class Color(enum.Enum):\\n    RED = \"red\"\\n'\n"
        "     'class Order(BaseModel):\\n    id: int\\n', older.__dict__)\n"
        "sys.modules['tests.user_types'] = older\n"
        f"saver = {backend.saver_code()}\n"
        "saver.prune(['types'], strategy='keep_latest')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", older], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    fresh = backend.saver()
    assert len(list(fresh.list(CONFIG))) == 1  # pruned
    state = user_types.build().compile(checkpointer=fresh).get_state(CONFIG).values
    assert user_types.canonical(state) == before
    assert isinstance(state["order"], user_types.Order) and state["color"] is user_types.Color.BLUE


def test_writes_a_revert_carries_where_the_apps_types_are_not_loaded_keep_them(backend):
    """A revert puts again a kept checkpoint's writes saved after the cut (`writes_after`),
    decoded and encoded anew: in a process without the app's types they became plain data."""
    saver = backend.saver()
    graph = user_types.build().compile(checkpointer=saver)
    user_types.run(graph, CONFIG)
    parent = saver.get_tuple(CONFIG).config
    order = user_types.Order(id=9, color=user_types.Color.BLUE, dims=(1, 1))
    checkpoint = {**saver.get_tuple(parent).checkpoint, "id": str(uuid6())}
    child = saver.put(parent, checkpoint, {"source": "loop", "step": 9}, {})
    late = AIMessage("late", id="late-1", additional_kwargs={"c": user_types.Color.RED})
    written = [("order", order), ("color", user_types.Color.RED), ("said", [late])]
    saver.put_writes(parent, written, "late-task")
    child_id = child["configurable"]["checkpoint_id"]
    # read first (its messages then come from the cache, not decoded by the revert)
    code = f"saver.get_tuple({parent!r})\nsaver.revert('types', {child_id!r})"
    _without_the_app(backend, code, reads=True)
    writes = backend.saver().get_tuple(parent).pending_writes
    assert [(w[1], w[2]) for w in writes if w[0] == "late-task"] == written
    said = next(w[2] for w in writes if w[1] == "said")
    assert said[0].additional_kwargs == {"c": user_types.Color.RED}  # a serialized body


def test_a_prune_where_the_apps_types_are_not_loaded_keeps_enums_in_message_fields(backend):
    """A rewrite re-encoded every kept message from the object it read: an enum in a
    message's fields, which a process without the app's module reads as its value, was
    stored as that value for good (also when a read before the prune had decoded it). A
    serialized message body is written as it is."""
    config = {"configurable": {"thread_id": "fields"}}

    def node(state):
        n, fields = len(state["messages"]), {"c": user_types.Color.RED}
        return {"messages": [AIMessage(f"a{n}", id=f"a{n}", additional_kwargs=fields)]}

    builder = StateGraph(MessagesState)
    builder.add_node(node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=backend.saver())
    for i in range(2):
        graph.invoke({"messages": [HumanMessage(f"h{i}", id=f"h{i}")]}, config)
    read_then_prune = "saver.get_tuple({'configurable': {'thread_id': 'fields'}})\n"
    prune = read_then_prune + "saver.prune(['fields'], strategy='keep_latest')"
    _without_the_app(backend, prune, reads=True)
    fresh = builder.compile(checkpointer=backend.saver()).get_state(config).values["messages"]
    assert len(list(backend.saver().list(config))) == 1
    assert [m.additional_kwargs for m in fresh if m.type == "ai"] == [
        {"c": user_types.Color.RED}, {"c": user_types.Color.RED}
    ]


def test_a_prune_where_the_apps_types_are_not_loaded_keeps_them_in_metadata(backend):
    """Serialized metadata (an app's class in a checkpoint's metadata) was decoded and
    encoded again by a rewrite: where the app's module does not import, as plain data."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = backend.saver()
    head: Any = {"configurable": {"thread_id": "meta"}}
    for step in range(3):
        checkpoint: Any = {**empty_checkpoint(), "channel_values": {"n": step}}
        checkpoint["channel_versions"] = {"n": step + 1}
        meta = {"source": "loop", "step": step, "color": user_types.Color.RED}
        head = saver.put(head, checkpoint, meta, {"n": step + 1})
    _without_the_app(backend, "saver.prune(['meta'], strategy='keep_latest')")
    kept = list(backend.saver().list({"configurable": {"thread_id": "meta"}}))
    assert len(kept) == 1 and kept[0].metadata["color"] is user_types.Color.RED


def test_a_prune_where_the_apps_types_are_not_loaded_keeps_them_in_checkpoint_extras(backend):
    """A checkpoint's keys beyond LangGraph's known ones (kept serialized, ``extra_serde``,
    when they hold a class) were decoded and encoded again by a rewrite: where the app's
    module does not import, as plain data for good. (Read through LangGraph's serializer:
    an app's model there comes back only where it is allowed, ``allowed_types``.)"""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = backend.saver(allowed_types=[user_types.Order])
    head: Any = {"configurable": {"thread_id": "extra"}}
    order = user_types.Order(id=3, color=user_types.Color.BLUE, dims=(2, 2))
    for step in range(3):
        checkpoint: Any = {**empty_checkpoint(), "channel_values": {"n": step}, "app": order}
        checkpoint["channel_versions"] = {"n": step + 1}
        head = saver.put(head, checkpoint, {"source": "loop", "step": step}, {"n": step + 1})
    _without_the_app(backend, "saver.prune(['extra'], strategy='keep_latest')")
    reader = backend.saver(allowed_types=[user_types.Order])
    kept = list(reader.list({"configurable": {"thread_id": "extra"}}))
    assert len(kept) == 1 and kept[0].checkpoint["app"] == order
    assert isinstance(kept[0].checkpoint["app"], user_types.Order)


def test_a_combination_of_flags_comes_back_as_the_flag(backend):
    """``Perm.R | Perm.W`` was looked up among the flag's members by value, where a fresh
    process has none for 6 (Flag makes it on first use): it came back as ``6``;
    LangGraph's savers give the flag, calling ``Perm(6)``. Flag's own code makes it, for a
    flag whose code that runs is all the standard library's (not `Tracked`'s)."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = backend.saver()
    checkpoint: Any = {**empty_checkpoint(), "channel_values": {
        "p": user_types.Perm.R | user_types.Perm.W,
        "s": user_types.Style.BOLD | user_types.Style.ITALIC,
        "t": user_types.Tracked.R | user_types.Tracked.W,
        "c": user_types.Compared.A | user_types.Compared.BC,
    }}  # fmt: skip
    versions = {"p": 1, "s": 1, "t": 1, "c": 1}
    checkpoint["channel_versions"] = versions
    head: Any = {"configurable": {"thread_id": "flags", "checkpoint_ns": ""}}
    saver.put(head, checkpoint, {"source": "input", "step": -1}, versions)
    code = (
        "import sys\nfrom tests import user_types\n"
        f"saver = {backend.saver_code()}\n"
        "user_types.HOOKS_RAN.clear()\n"
        "head = saver.get_tuple({'configurable': {'thread_id': 'flags'}})\n"
        "v = head.checkpoint['channel_values']\n"
        "assert v['p'] is user_types.Perm(6) and type(v['p']) is user_types.Perm, repr(v)\n"
        "assert v['s'] == user_types.Style(3) and type(v['s']) is user_types.Style, repr(v)\n"
        "assert v['t'] == 6 and v['c'] == 7, v\n"
        "assert user_types.HOOKS_RAN == [], user_types.HOOKS_RAN\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr


@dataclasses.dataclass
class Ballot:
    pair: Any
    keyed: dict[Any, Any] = dataclasses.field(default_factory=dict)


class Choice(BaseModel):
    loose: Any
    pair: tuple[int, int]
    rows: list[tuple[str, str]] = []


class Span(NamedTuple):
    pair: Any


Corner = tuple[int, int]  # a plain alias: this module's annotations are strings


@dataclasses.dataclass
class Sized:
    dims: tuple[int, int]
    note: Any = None
    corners: list[Corner] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Grown(Sized):
    """Its inherited fields are declared in `Sized` (not in its own annotations)."""

    extra: tuple[int, int] = (0, 0)


@pydantic.dataclasses.dataclass
class Checked:
    dims: tuple[int, int]
    note: Any = None


Dims = TypeAliasType("Dims", tuple[int, int])


class Pairing(typing_extensions.TypedDict):
    pair: tuple[int, int]
    note: Any


class Survey(BaseModel):
    """Validation rebuilds tuples where the declared types say so, at every depth."""

    sized: Sized
    span: Span
    alias: Dims
    seq: Sequence[tuple[int, int]]
    loose: tuple[Any, ...]
    maybe: list[int] | tuple[int, ...] | None = None
    keyed: dict[str, Pairing] = {}
    grown: Grown | None = None


class Polls(TypedDict, total=False):
    ballot: Any
    choice: Any
    span: Any
    survey: Any
    checked: Any
    answer: Any


def _ask_with_tuples(state: Polls) -> dict[str, Any]:
    return {"answer": interrupt({"options": ("approve", "reject"), "span": Span((1, 2))})}


def _tuple_pictures(saver: Any) -> list[str]:
    """``repr``s (a tuple and a list differ there) of a state holding tuples in a
    dataclass, a model and a NamedTuple, and of the interrupt asking with tuples, before
    and after the resume."""
    builder = StateGraph(Polls)
    builder.add_node("ask", _ask_with_tuples)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "tuples"}}
    graph.invoke(
        {
            "ballot": Ballot((1, 2), {(3, 4): (5, 6)}),
            "choice": Choice(loose=(1, 2), pair=(3, 4), rows=[("a", "b")]),
            "span": Span((7, (8, 9))),
            "survey": Survey(
                sized=Sized((1, 2), (3, 4), [(5, 6)]),
                span=Span((5, 6)),
                alias=(7, 8),
                seq=[(1, 2)],
                loose=((1, 2), [3]),
                maybe=(4, 5),
                keyed={"k": {"pair": (1, 2), "note": (3, 4)}},
                grown=Grown((1, 2), (3, 4), [(5, 6)], (7, 8)),
            ),
            "checked": Checked((1, 2), (3, 4)),
        },
        config,
    )
    paused = graph.get_state(config)
    graph.invoke(Command(resume=("yes", 1)), config)
    done = graph.get_state(config)
    return [
        repr(sorted(paused.values.items())),
        repr([i.value for i in paused.interrupts]),
        repr(sorted(done.values.items())),
    ]


def test_tuples_come_back_where_langgraphs_savers_return_lists(backend):
    """A tuple in a dataclass's or a NamedTuple's fields, in an interrupt's value, or in a
    model's ``Any`` field reads back a list, as LangGraph's serializer returns it; where a
    model's or a pydantic dataclass's declared types say tuple (at any depth, through
    aliases, nested dataclasses and NamedTuples), and in a dict key, it stays a tuple, as
    validation makes it (trial 9, review 27)."""
    sqlite = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    expected = _tuple_pictures(InMemorySaver())
    assert _tuple_pictures(sqlite) == expected
    sqlite.conn.close()
    assert "Ballot(pair=[1, 2], keyed={(3, 4): [5, 6]})" in expected[0]
    assert "pair=(3, 4), rows=[('a', 'b')]" in expected[0]  # validation made them tuples
    assert "Grown(dims=(1, 2), note=[3, 4], corners=[(5, 6)], extra=(7, 8))" in expected[0]
    assert _tuple_pictures(backend.saver()) == expected
    saver = backend.saver()  # a fresh saver reads the thread back from storage
    graph = StateGraph(Polls).add_node("ask", _ask_with_tuples).add_edge(START, "ask")
    state = graph.compile(checkpointer=saver).get_state({"configurable": {"thread_id": "tuples"}})
    assert repr(sorted(state.values.items())) == expected[2]
