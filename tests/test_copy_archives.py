"""`copy_thread` and `fork` take the thread's context archives along, as ``langgraph-ctx
copy`` does.

They copied the thread's log only: the copy's transcript and `active_context` named an
archive (``archived_as``) its ``chat_context_load`` could not find ("no archived contexts
yet"), on JSONL and Redis alike, while ``langgraph-ctx copy`` took the archives and their
index. All of them now use one implementation (`langgraph_ctx.context.archive.copies`):
each archive is copied as ``<copy>.ctx.<context id>`` and listed in the copy's own index.

The graph is the README's "Context-switching tools" graph (StateGraph, the context
pipeline, `ModelNode`, `ToolNode`, `OfflineChatModel`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typer.testing import CliRunner

from langgraph_ctx import ContextState, JsonlSaver, ModelNode, context_pipeline, context_tools
from langgraph_ctx.cli.app import app
from langgraph_ctx.context.archive import ContextArchive, archive_threads_of
from langgraph_ctx.errors import ContextArchiveError, ThreadExistsError
from langgraph_ctx.testing import OfflineChatModel

from .backends import Backend

ON_REDIS_CLUSTER = True

HOW = ["copy_thread", "fork", "acopy_thread", "afork"]


def readme_graph(saver: Any) -> Any:
    """README, "Context-switching tools", verbatim."""
    tools = context_tools(saver)
    model = OfflineChatModel()
    pipeline = context_pipeline("personalized", model=model, tools=tools)
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=tools))
    builder.add_node("tools", ToolNode(tools))
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=saver)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def say(graph: Any, thread_id: str, text: str) -> Any:
    return graph.invoke({"messages": [("user", text)]}, config(thread_id))


def trip(graph: Any, saver: Any) -> list[str]:
    """Thread ``trip`` with two archived contexts; their ids, oldest first."""
    say(graph, "trip", "Plan three days in Lisbon in May.")
    say(graph, "trip", "chat_context_new new topic")
    say(graph, "trip", "Which wines go with grilled sardines?")
    say(graph, "trip", "chat_context_new wines")
    return [e.context_id for e in reversed(ContextArchive(saver).entries("trip"))]


def load(graph: Any, thread_id: str, context_id: str, *, aio: bool = False) -> str:
    """What ``chat_context_load`` answered on the thread."""
    inputs = {"messages": [("user", f"chat_context_load {context_id}")]}
    if aio:
        out = asyncio.run(graph.ainvoke(inputs, config(thread_id)))
    else:
        out = graph.invoke(inputs, config(thread_id))
    results = [m for m in out["messages"] if m.type == "tool"]
    return str(results[-1].content)


def copy(saver: Any, how: str, source: str, target: str, **kwargs: Any) -> None:
    method = getattr(saver, how)
    if how.startswith("a"):
        asyncio.run(method(source, target, **kwargs))
    else:
        method(source, target, **kwargs)


@pytest.mark.parametrize("how", HOW)
def test_a_copy_loads_the_archives_its_state_names(backend: Backend, how: str) -> None:
    """The trial's scenario: the copy's ``active_context`` says the last context was
    archived as ``c_...``; loading it on the copy found nothing. It loads there now, from
    the copy's own archive thread, listed in the copy's own index."""
    saver = backend.saver()
    graph = readme_graph(saver)
    first, second = trip(graph, saver)

    copy(saver, how, "trip", "trip-copy")

    state = graph.get_state(config("trip-copy")).values
    assert state["active_context"]["archived_as"] == second  # what the copy names
    for context_id in (first, second):
        answer = load(graph, "trip-copy", context_id, aio=how.startswith("a"))
        assert answer.startswith(f"Loaded {context_id} "), answer  # "Nothing was loaded"
    entries = ContextArchive(saver).entries("trip-copy")
    assert [(e.context_id, e.thread_id, e.archive_thread_id) for e in entries] == [
        (second, "trip-copy", f"trip-copy.ctx.{second}"),
        (first, "trip-copy", f"trip-copy.ctx.{first}"),
    ]
    source = ContextArchive(saver).entries("trip")
    assert [e.title for e in entries] == [e.title for e in source]
    # Archiving forks the thread into its own archive name: that fork takes no archives.
    assert sorted(saver.list_threads(include_archives=True)) == sorted(
        [
            "trip",
            "trip-copy",
            *(f"{t}.ctx.{c}" for t in ("trip", "trip-copy") for c in (first, second)),
        ]
    )


@pytest.mark.parametrize("how", HOW)
def test_deleting_the_copy_leaves_the_sources_archives(backend: Backend, how: str) -> None:
    saver = backend.saver()
    graph = readme_graph(saver)
    first, second = trip(graph, saver)
    copy(saver, how, "trip", "trip-copy")
    assert ContextArchive(saver).entries("trip-copy")

    if how.startswith("a"):
        asyncio.run(saver.adelete_thread("trip-copy"))
    else:
        saver.delete_thread("trip-copy")

    every = saver.list_threads(include_archives=True)
    assert archive_threads_of("trip-copy", every) == []
    assert sorted(archive_threads_of("trip", every)) == sorted(
        f"trip.ctx.{c}" for c in (first, second)
    )
    assert [e.context_id for e in ContextArchive(saver).entries("trip")] == [second, first]
    assert load(graph, "trip", first).startswith(f"Loaded {first} ")


@pytest.mark.parametrize("aio", [False, True], ids=["fork", "afork"])
def test_a_fork_at_an_older_checkpoint_lists_every_archive_of_the_source(
    backend: Backend, aio: bool
) -> None:
    """A fork at a checkpoint carries the archives the source's index lists, also those
    made after that checkpoint, as `revert` keeps the index whole (documented in `fork`).
    A fork made between the two archives loads the first one, which its state names, and
    what it archives itself is its own."""
    saver = backend.saver()
    graph = readme_graph(saver)
    first, second = trip(graph, saver)
    between = next(  # the end of the turn after the first archive
        s
        for s in graph.get_state_history(config("trip"))
        if (s.values.get("active_context") or {}).get("archived_as") == first and not s.next
    )
    checkpoint_id = between.config["configurable"]["checkpoint_id"]

    copy(saver, "afork" if aio else "fork", "trip", "trip-b", checkpoint_id=checkpoint_id)

    fork_state = graph.get_state(config("trip-b"))
    assert fork_state.config["configurable"]["checkpoint_id"] == checkpoint_id
    assert fork_state.values["active_context"]["archived_as"] == first
    entries = ContextArchive(saver).entries("trip-b")
    assert [e.context_id for e in entries] == [second, first]
    assert load(graph, "trip-b", first, aio=aio).startswith(f"Loaded {first} ")
    say(graph, "trip-b", "chat_context_new on the fork")
    own = ContextArchive(saver).entries("trip-b")[0]
    assert own.context_id not in (first, second)
    assert own.archive_thread_id == f"trip-b.ctx.{own.context_id}"
    assert [e.context_id for e in ContextArchive(saver).entries("trip")] == [second, first]


def test_what_the_target_already_has_is_kept(backend: Backend) -> None:
    """Leftovers of a thread that had the target's id (its log deleted, its archive and
    index left, as a failed cleanup leaves them) are neither deleted nor overwritten: the
    copy's archives join them."""
    saver = backend.saver()
    graph = readme_graph(saver)
    first, second = trip(graph, saver)
    say(graph, "old", "Book a table for two.")
    say(graph, "old", "chat_context_new dinner")
    (old,) = ContextArchive(saver).entries("old")
    saver.copy_thread(old.archive_thread_id, f"target.ctx.{old.context_id}")
    ContextArchive(saver).index.update(
        "target",
        lambda _: [
            old.model_copy(
                update={"thread_id": "target", "archive_thread_id": f"target.ctx.{old.context_id}"}
            )
        ],
    )
    # ... and the archive thread a half-done earlier copy of trip left behind
    saver.copy_thread(f"trip.ctx.{first}", f"target.ctx.{first}")
    before = {
        t: backend.log_bytes(t) for t in (f"target.ctx.{old.context_id}", f"target.ctx.{first}")
    }

    saver.copy_thread("trip", "target")

    entries = ContextArchive(saver).entries("target")
    assert [e.context_id for e in entries] == [second, first, old.context_id]
    assert {t: backend.log_bytes(t) for t in before} == before  # kept, byte for byte
    assert load(graph, "target", second).startswith(f"Loaded {second} ")
    assert load(graph, "target", old.context_id).startswith(f"Loaded {old.context_id} ")
    with pytest.raises(ThreadExistsError):  # the thread itself is never overwritten
        saver.copy_thread("trip", "target")


@pytest.mark.parametrize("fails", ["index", "log"])
def test_a_copy_that_fails_midway_leaves_nothing_half_done(
    backend: Backend, fails: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the copy's index fails (an unwritable file, Redis gone), or copying the
    log itself does: the error propagates, the archive threads and index entries made for
    the copy are deleted again, what the target had stays, and the copy can be retried."""
    saver = backend.saver()
    graph = readme_graph(saver)
    first, second = trip(graph, saver)
    saver.copy_thread(f"trip.ctx.{first}", f"trip-copy.ctx.{first}")  # the target's own
    kept = backend.log_bytes(f"trip-copy.ctx.{first}")
    everything = sorted(saver.list_threads(include_archives=True))
    index = type(ContextArchive(saver).index)
    if fails == "index":
        real_update = index.update

        def update(self: Any, thread_id: str, change: Any) -> Any:
            if thread_id == "trip-copy":
                raise ContextArchiveError(f"cannot write {self.describe(thread_id)}")
            return real_update(self, thread_id, change)

        monkeypatch.setattr(index, "update", update)
        expected: type[Exception] = ContextArchiveError
    else:

        def broken(*args: Any, **kwargs: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(saver.storage, "copy", broken)
        expected = OSError

    with pytest.raises(expected):
        saver.copy_thread("trip", "trip-copy")

    assert sorted(saver.list_threads(include_archives=True)) == everything
    assert backend.log_bytes(f"trip-copy.ctx.{first}") == kept
    assert ContextArchive(saver).entries("trip-copy") == []
    monkeypatch.undo()
    saver.copy_thread("trip", "trip-copy")
    assert load(graph, "trip-copy", second).startswith(f"Loaded {second} ")


def test_the_cli_copy_as_a_new_id_takes_the_archives_too(tmp_path: Path) -> None:
    """``langgraph-ctx copy --as`` left the archives behind (they are named after their
    thread); it renames them now, as `copy_thread` does, through the same code."""
    root, other = tmp_path / "chats", tmp_path / "other"
    saver = JsonlSaver(root)
    graph = readme_graph(saver)
    first, second = trip(graph, saver)
    result = CliRunner().invoke(
        app, ["--dir", str(root), "copy", "trip", "--to", str(other), "--as", "trip-2", "--json"]
    )
    assert result.exit_code == 0, result.output
    copied = [c["target_id"] for c in json.loads(result.stdout)]
    assert copied[0] == "trip-2"
    assert sorted(copied[1:]) == sorted([f"trip-2.ctx.{first}", f"trip-2.ctx.{second}"])
    there = JsonlSaver(other)
    entries = ContextArchive(there).entries("trip-2")
    assert [(e.context_id, e.archive_thread_id) for e in entries] == [
        (second, f"trip-2.ctx.{second}"),
        (first, f"trip-2.ctx.{first}"),
    ]
    assert load(readme_graph(there), "trip-2", first).startswith(f"Loaded {first} ")


def test_the_archives_of_an_archive_come_along(backend: Backend) -> None:
    """An archive continued as a conversation has archives of its own (its own index):
    they are copied too, named after the copy's archive, and deleted with the copy."""
    saver = backend.saver()
    graph = readme_graph(saver)
    first, _ = trip(graph, saver)
    say(graph, f"trip.ctx.{first}", "Tell me about the trams.")
    say(graph, f"trip.ctx.{first}", "chat_context_new trams")
    (sub,) = ContextArchive(saver).entries(f"trip.ctx.{first}")

    saver.copy_thread("trip", "trip-copy")

    (copied,) = ContextArchive(saver).entries(f"trip-copy.ctx.{first}")
    assert copied.archive_thread_id == f"trip-copy.ctx.{first}.ctx.{sub.context_id}"
    answer = load(graph, f"trip-copy.ctx.{first}", sub.context_id)
    assert answer.startswith(f"Loaded {sub.context_id} "), answer
    before = sorted(archive_threads_of("trip", saver.list_threads(include_archives=True)))
    saver.delete_thread("trip-copy")
    every = saver.list_threads(include_archives=True)
    assert archive_threads_of("trip-copy", every) == []
    assert sorted(archive_threads_of("trip", every)) == before
