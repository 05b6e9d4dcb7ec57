"""Edges of the saver API where an app meets LangGraph's own savers' behaviour, found by
trying the package as users would: each test runs the same calls on `InMemorySaver` and
on ours (JSONL and Redis: the ``backend`` fixture), warm and from a fresh saver.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx.codec import classes

from .backends import Backend
from .graphs import single_node

CONFIG = {"configurable": {"thread_id": "t"}}


class Value(TypedDict):
    v: Any


def value_graph(checkpointer: Any, produce: Any) -> Any:
    """One node that returns ``{"v": produce(state)}``."""
    builder = StateGraph(Value)
    builder.add_node("n", lambda state: {"v": produce(state)})
    builder.add_edge(START, "n")
    return builder.compile(checkpointer=checkpointer)


def message_graph(checkpointer: Any, reply: AIMessage) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", lambda state: {"messages": [reply]})
    builder.add_edge(START, "model")
    return builder.compile(checkpointer=checkpointer)


def history(graph: Any, config: dict[str, Any]) -> list[Any]:
    return [(s.values, s.next) for s in graph.get_state_history(config)]


# ---------------------------------------------------------------- thread id lists


@pytest.mark.parametrize("strategy", ["keep_latest", "delete"])
def test_prune_refuses_one_string_rather_than_prune_its_characters(
    backend: Backend, strategy: str
) -> None:
    """``prune("ab")`` pruned (or deleted) threads ``a`` and ``b``, a string being a
    sequence of one-letter ids; `PostgresSaver.prune` raises `TypeError` for it."""
    saver = backend.saver()
    for thread in ("a", "b", "ab"):
        graph = value_graph(saver, lambda s: s["v"] + 1)
        for _ in range(2):
            graph.invoke({"v": 0}, {"configurable": {"thread_id": thread}})

    def counts() -> dict[str, int]:
        threads = ("a", "b", "ab")
        return {t: len(list(saver.list({"configurable": {"thread_id": t}}))) for t in threads}

    before = counts()
    with pytest.raises(TypeError, match=r"not one string: pass \['ab'\]"):
        saver.prune("ab", strategy=strategy)
    with pytest.raises(TypeError, match="not one string"):
        saver.delete_for_runs("run-1")
    assert counts() == before
    saver.prune(["ab"], strategy=strategy)  # the list form works
    pruned = len(list(saver.list({"configurable": {"thread_id": "ab"}})))
    assert pruned == (0 if strategy == "delete" else 1)


# ---------------------------------------------------------------- integers


@pytest.mark.parametrize("wide", [2**64, -(2**63) - 1, 10**30])
def test_an_integer_beyond_64_bits_is_refused_as_in_langgraphs_savers(
    backend: Backend, wide: int
) -> None:
    """The file could hold it, but it read back as a float (2**64 became
    1.8446744073709552e+19): another number, silently. `InMemorySaver` and `SqliteSaver`
    refuse it when the run saves it; so do ours, and the thread keeps what it had."""
    ours, theirs = backend.saver(), InMemorySaver()
    for saver in (theirs, ours):
        graph = value_graph(saver, lambda s: s["v"] + 1)
        graph.invoke({"v": 1}, CONFIG)
        with pytest.raises(TypeError, match="Integer exceeds 64-bit range"):
            value_graph(saver, lambda s: wide).invoke({"v": 5}, CONFIG)
    assert history(value_graph(ours, None), CONFIG) == history(value_graph(theirs, None), CONFIG)
    fresh = backend.saver()
    assert value_graph(fresh, None).get_state(CONFIG).values == {"v": 5}  # the input's
    edge = 2**64 - 1  # 64 bits still: kept exactly
    value_graph(ours, lambda s: edge).invoke({"v": 5}, CONFIG)
    assert value_graph(backend.saver(), None).get_state(CONFIG).values == {"v": edge}


def test_a_tool_calls_integer_beyond_64_bits_is_refused_as_in_langgraphs_savers(
    backend: Backend,
) -> None:
    call = {"name": "lookup", "args": {"user_id": 2**64 + 5}, "id": "c1"}
    reply = AIMessage("", id="a1", tool_calls=[call])
    with pytest.raises(TypeError):  # msgpack's: "Type is not msgpack serializable: AIMessage"
        message_graph(InMemorySaver(), reply).invoke({"messages": [HumanMessage("hi")]}, CONFIG)
    with pytest.raises(TypeError, match="Integer exceeds 64-bit range"):
        message_graph(backend.saver(), reply).invoke({"messages": [HumanMessage("hi")]}, CONFIG)


# ---------------------------------------------------------------- strings


def test_a_lone_surrogate_comes_back_as_it_was_put(backend: Backend) -> None:
    """Text decoded with ``surrogateescape`` holds a lone surrogate, which UTF-8 cannot
    hold: the run raised a bare `UnicodeEncodeError` from the saver. The line is now
    written with the string escaped, and read back exact (LangGraph's savers store
    ``?`` for it and finish the run; ours finish it too)."""
    text = b"caf\xff".decode("utf-8", "surrogateescape")
    reply = AIMessage(f"said {text}", id="a1")
    saver = backend.saver()
    value_graph(saver, lambda s: {"text": text, "list": [text, "ok"]}).invoke({"v": 1}, CONFIG)
    message_graph(saver, reply).invoke(
        {"messages": [HumanMessage(text, id="h1")]}, {"configurable": {"thread_id": "m"}}
    )
    for reader in (saver, backend.saver()):  # warm, then a fresh process
        assert value_graph(reader, None).get_state(CONFIG).values == {
            "v": {"text": text, "list": [text, "ok"]}
        }
        state = message_graph(reader, reply).get_state({"configurable": {"thread_id": "m"}})
        assert [m.content for m in state.values["messages"]] == [text, f"said {text}"]


# ---------------------------------------------------------------- configs


def test_the_empty_thread_id_is_a_thread_as_in_langgraphs_savers(backend: Backend) -> None:
    """``thread_id: ""`` (an app's empty form field, say): `InMemorySaver` and
    `SqliteSaver` keep it as a thread; ours raised `ValueError`. It is its own thread,
    apart from the others, warm and from a fresh saver, and listed, forked and deleted."""
    empty = {"configurable": {"thread_id": ""}}
    seen = {}
    for name, saver in (("memory", InMemorySaver()), ("ours", backend.saver())):
        graph = value_graph(saver, lambda s: s["v"] + 1)
        graph.invoke({"v": 0}, empty)
        graph.invoke({"v": 10}, empty)
        graph.invoke({"v": 100}, CONFIG)
        seen[name] = (
            graph.get_state(empty).values,
            history(graph, empty),
            sorted({c.config["configurable"]["thread_id"] for c in saver.list(None)}),
        )
    assert seen["ours"] == seen["memory"]
    assert seen["ours"][0] == {"v": 11} and seen["ours"][2] == ["", "t"]
    fresh = backend.saver()
    assert value_graph(fresh, lambda s: s).get_state(empty).values == {"v": 11}
    assert sorted(fresh.list_threads()) == ["", "t"]
    fresh.fork("", "copy")
    fresh.delete_thread("")
    assert fresh.get_tuple(empty) is None
    assert value_graph(fresh, lambda s: s).get_state(
        {"configurable": {"thread_id": "copy"}}
    ).values == {"v": 11}


def test_an_empty_checkpoint_id_filters_nothing_as_in_langgraphs_savers(
    backend: Backend,
) -> None:
    """``checkpoint_id: ""`` in a config: ``get_state`` gave the latest checkpoint, but
    ``get_state_history`` and ``list`` gave nothing (the empty id was a filter)."""
    empty = {"configurable": {"thread_id": "t", "checkpoint_id": ""}}
    seen = {}
    for name, saver in (("memory", InMemorySaver()), ("ours", backend.saver())):
        graph = value_graph(saver, lambda s: s["v"] + 1)
        graph.invoke({"v": 0}, CONFIG)
        graph.invoke({"v": 10}, CONFIG)
        seen[name] = (
            graph.get_state(empty).values,
            history(graph, empty),
            len(list(saver.list(empty))),
            len(list(saver.list(CONFIG, before=empty))),
        )
    assert seen["ours"] == seen["memory"]
    assert seen["ours"][2] == 6


def test_the_empty_threads_archived_context_is_its_archive(backend: Backend) -> None:
    """The empty thread's context archive (``.ctx.<id>``) was listed as a user thread and
    left behind when the thread was deleted (an archive's owner had to be non-empty)."""
    from langgraph_ctx.context.archive import ContextArchive
    from langgraph_ctx.context.archive.forks import archive_thread_id
    from langgraph_ctx.context.archive.store import delete_archives

    saver = backend.saver()
    empty = {"configurable": {"thread_id": ""}}
    graph = message_graph(saver, AIMessage("ok", id="a1"))
    graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, empty)
    graph.invoke({"messages": [HumanMessage("something else", id="h2")]}, empty)
    messages = graph.get_state(empty).values["messages"]
    outcome = ContextArchive(saver).archive("", messages, None, title="first")
    assert outcome.entry is not None
    archive = archive_thread_id("", outcome.entry.context_id)  # ".ctx.c_..."
    assert saver.list_threads() == [""]
    assert saver.list_threads(include_archives=True) == ["", archive]
    saver.delete_thread("")
    delete_archives(saver, "", thread_ids=saver.list_threads(include_archives=True))
    assert saver.list_threads(include_archives=True) == []


def test_a_uuid_thread_id_is_deleted_by_the_uuid_as_sqlite_saver_does(backend: Backend) -> None:
    """An app that keys threads by `uuid.UUID`: `invoke` and `get_state` take it (LangGraph
    writes its text into the run's config), and `delete_thread(the_uuid)` deletes that
    thread, as `SqliteSaver` (``str(thread_id)``) does; ours raised `ValueError`."""
    import uuid

    thread = uuid.UUID("9b0c5f0e-0000-4000-8000-000000000001")
    config = {"configurable": {"thread_id": thread}}
    saver = backend.saver()
    graph = value_graph(saver, lambda s: s["v"] + 1)
    graph.invoke({"v": 0}, config)
    assert graph.get_state(config).values == {"v": 1}
    assert str(thread) in saver.list_threads()
    saver.delete_thread(thread)
    assert saver.get_tuple(config) is None and str(thread) not in backend.saver().list_threads()


# ------------------------------------------------------------ an app's message class


class Tagged(HumanMessage):
    """An app's own message class, with fields of its own (one not plain JSON)."""

    priority: int = 0
    when: datetime.datetime | None = None


WHEN = datetime.datetime(2026, 1, 1, 12, 30)


def tagged_messages() -> list[HumanMessage]:
    return [Tagged("dated", priority=3, when=WHEN), Tagged("plain", priority=2)]


def tagged_state(saver: Any) -> list[Any]:
    graph = message_graph(saver, AIMessage("ok"))
    return [
        (type(m).__name__, m.content, getattr(m, "priority", None), getattr(m, "when", None))
        for m in graph.get_state(CONFIG).values["messages"]
    ]


def test_an_apps_message_class_comes_back_where_allowed_and_never_breaks_the_thread(
    backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``class Tagged(HumanMessage)`` with a datetime field: the thread could not be read
    at all (`CorruptLogError`, "serialized message payload is not a LangChain message"),
    warm or fresh; and with ``allowed_types=[Tagged]`` a Tagged of plain fields came back
    a HumanMessage. Now, as `InMemorySaver` gives every one back as Tagged: ours does
    where the app allows the class, else gives LangChain's class with its own fields, and
    says how to get the class back. A prune by a saver without the class keeps it."""
    reference = message_graph(InMemorySaver(), AIMessage("ok"))
    reference.invoke({"messages": tagged_messages()}, CONFIG)
    expected = [
        ("Tagged", "dated", 3, WHEN),
        ("Tagged", "plain", 2, None),
        ("AIMessage", "ok", None, None),
    ]
    assert [
        (type(m).__name__, m.content, getattr(m, "priority", None), getattr(m, "when", None))
        for m in reference.get_state(CONFIG).values["messages"]
    ] == expected

    allowed = backend.saver(allowed_types=[Tagged])
    message_graph(allowed, AIMessage("ok")).invoke({"messages": tagged_messages()}, CONFIG)
    assert tagged_state(allowed) == expected
    assert tagged_state(backend.saver(allowed_types=[Tagged])) == expected

    plain = [("HumanMessage", *row[1:]) if row[0] == "Tagged" else row for row in expected]
    monkeypatch.setattr(classes, "_warned", set())  # one warning per class and process
    with caplog.at_level(logging.WARNING):
        assert tagged_state(backend.saver()) == plain
    assert "pass allowed_types=[Tagged] to the saver" in caplog.text

    backend.saver().prune(["t"], strategy="keep_latest")  # a saver without the class
    assert tagged_state(backend.saver(allowed_types=[Tagged])) == expected


class Thought(AIMessage):
    """An app's message class with a ``type`` of its own: no LangChain class is its."""

    type: str = "thought"  # type: ignore[assignment]


def test_an_apps_message_type_of_its_own_reads_back_where_allowed_and_names_the_fix(
    backend: Backend,
) -> None:
    """Without ``allowed_types`` no LangChain class can stand in for it: the read names the
    fix (it said "unknown message type"); with it, the class comes back."""
    from langgraph_ctx.errors import CorruptLogError

    message_graph(backend.saver(allowed_types=[Thought]), AIMessage("ok")).invoke(
        {"messages": [Thought("hmm", id="t1")]}, CONFIG
    )
    allowed = message_graph(backend.saver(allowed_types=[Thought]), AIMessage("ok"))
    assert [type(m) for m in allowed.get_state(CONFIG).values["messages"]] == [Thought, AIMessage]
    with pytest.raises(CorruptLogError, match=r"allowed_types"):
        message_graph(backend.saver(), AIMessage("ok")).get_state(CONFIG)


def test_a_messages_dicts_come_back_in_their_own_key_order(backend: Backend) -> None:
    """Answers equal but for the order of their metadata's keys (and their ids; or not
    even that, a later turn replacing one by its id): each is read back in its own
    order, as `InMemorySaver` keeps it, not as the one stored first (a message's digest
    sorts its own fields only, not what they hold)."""
    turns = [
        [
            AIMessage("same", id="a1", response_metadata={"model": "m", "finish": "stop"}),
            AIMessage("same", id="a2", response_metadata={"finish": "stop", "model": "m"}),
        ],
        [AIMessage("same", id="a1", response_metadata={"finish": "stop", "model": "m"})],
    ]

    def run(saver: Any) -> None:
        for question, replies in zip(["q", "again"], turns, strict=True):

            def model(state: MessagesState, replies: list[AIMessage] = replies) -> Any:
                return {"messages": [r.model_copy() for r in replies]}

            single_node(saver, model).invoke({"messages": [("user", question)]}, CONFIG)

    def orders(saver: Any) -> list[list[str]]:
        tup = saver.get_tuple(CONFIG)
        return [list(m.response_metadata) for m in tup.checkpoint["channel_values"]["messages"]]

    memory = InMemorySaver()
    run(memory)
    expected = orders(memory)
    assert expected == [[], ["finish", "model"], ["finish", "model"], []]
    saver = backend.saver()
    run(saver)
    assert orders(saver) == expected
    assert orders(backend.saver()) == expected  # a fresh process reads the same


def test_a_trimmed_history_is_not_stored_again(backend: Backend) -> None:
    """Tool calls a node assigned in place, in an order of its own, read back in
    LangChain's (as `InMemorySaver` gives them); after a `RemoveMessage` the history is
    put from what was read back, and its messages are still the ones the log holds, not
    new lines (a digest that kept a tool call's key order stored them twice)."""

    def node(state: MessagesState) -> dict[str, Any]:
        humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        if len(humans) == 3:
            return {"messages": [RemoveMessage(id="h0")]}
        reply = AIMessage("calling", id=f"a{len(humans)}")
        reply.tool_calls = [
            {"id": f"c{len(humans)}", "args": {"x": 1}, "name": "f", "type": "tool_call"}
        ]
        return {"messages": [reply]}

    for turn in range(3):
        graph = single_node(backend.saver(), node)
        graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)
    lines = backend.log_bytes("t").decode().splitlines()
    assert sum('"t":"msg"' in line for line in lines) == 6  # h0 a1 h1 a2 h2, the removal
    messages = backend.saver().get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert [m.id for m in messages] == ["a1", "h1", "a2", "h2"]
    assert list(messages[0].tool_calls[0]) == ["name", "args", "id", "type"]


def test_usage_assigned_in_place_reads_back_in_langchains_order(backend: Backend) -> None:
    """Usage a node assigned in its own key order comes back as validation rebuilds it,
    in `UsageMetadata`'s order, as from `InMemorySaver`; and after a trim the message
    is still the one the log holds."""

    def node(state: MessagesState) -> dict[str, Any]:
        if len(state["messages"]) > 2:
            return {"messages": [RemoveMessage(id=state["messages"][0].id)]}
        reply = AIMessage("ok", id="a1")
        reply.usage_metadata = {"total_tokens": 3, "output_tokens": 2, "input_tokens": 1}
        return {"messages": [reply]}

    def run(saver: Any) -> list[list[str]]:
        for question in ["q1", "q2"]:
            single_node(saver, node).invoke({"messages": [("user", question)]}, CONFIG)
        tup = saver.get_tuple(CONFIG)
        messages = tup.checkpoint["channel_values"]["messages"]
        return [list(getattr(m, "usage_metadata", None) or {}) for m in messages]

    expected = run(InMemorySaver())
    assert expected == [["input_tokens", "output_tokens", "total_tokens"], []]
    assert run(backend.saver()) == expected
    fresh = backend.saver().get_tuple(CONFIG).checkpoint["channel_values"]["messages"]
    assert [list(getattr(m, "usage_metadata", None) or {}) for m in fresh] == expected
    assert backend.log_bytes("t").decode().count('"t":"msg"') == 4  # q1 a1 q2, the removal
