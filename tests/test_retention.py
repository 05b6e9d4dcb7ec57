"""Retention: `saver.retention.sweep` / `plan_sweep` and ``langgraph-ctx prune --older-than``.

The interrupt test is the one that matters: a `create_agent` step with three tool calls
in flight (one waiting at `interrupt()`, two finished), a ``keep_latest`` sweep, then the
resume; it must go exactly as on an unswept copy, without running a finished tool again.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app
from langgraph_ctx.context.archive import ContextArchive
from langgraph_ctx.saver.retention import (
    ThreadActivity,
    parse_age,
    plan_sweep,
    sweep,
)
from langgraph_ctx.testing import ScriptedChatModel

from .cli_scenarios import chat_graph, config
from .conftest import snapshot_view

runner = CliRunner()
LATER = datetime.now(timezone.utc) + timedelta(days=31)

# ------------------------------------------------------------------ the pure plan


def test_parse_age() -> None:
    assert parse_age("30d") == timedelta(days=30)
    assert parse_age(" 12h ") == timedelta(hours=12)
    assert parse_age("2w") == timedelta(weeks=2)
    assert parse_age("90m") == timedelta(minutes=90)
    assert parse_age(timedelta(seconds=5)) == timedelta(seconds=5)
    for bad in ["30", "d", "30 days", "-3d", ""]:
        with pytest.raises(ValueError, match="age"):
            parse_age(bad)
    with pytest.raises(ValueError, match="negative"):
        parse_age(timedelta(days=-1))


def test_plan_sweep_ages_archives_and_strategies() -> None:
    cutoff = datetime(2026, 3, 1, tzinfo=timezone.utc)
    old, new = "2026-01-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00"
    arch = "a.ctx.c_20260101_0a1b2c"
    threads = [
        ThreadActivity("a", old, 5, 1),
        ThreadActivity(arch, old, 3, 1),
        ThreadActivity(arch + ".ctx.c_20260102_aaaaaa", old, 2, 1),  # archive of an archive
        ThreadActivity("b", new, 9, 1),
        ThreadActivity("b.ctx.c_20260101_bbbbbb", old, 4, 1),  # old archive, young thread
        ThreadActivity("c", old, 2, 2),  # already one checkpoint per namespace
        ThreadActivity("undated", "", 4, 1),
        ThreadActivity("naive", "2026-01-01T00:00:00", 4, 1),  # no zone: UTC
    ]
    plan = plan_sweep(threads, cutoff=cutoff)
    assert [(a.thread_id, a.action) for a in plan] == [
        ("a", "delete"),
        ("c", "delete"),
        ("naive", "delete"),
    ]
    assert plan[0].archives == (arch, arch + ".ctx.c_20260102_aaaaaa")
    assert plan[0].checkpoints_before == 5 and plan[0].checkpoints_after == 0
    # archives swept on their own age only when asked; an archive going with its thread
    # is not listed twice
    with_archives = plan_sweep(threads, cutoff=cutoff, include_archives=True)
    assert [a.thread_id for a in with_archives] == ["a", "b.ctx.c_20260101_bbbbbb", "c", "naive"]
    trimmed = plan_sweep(threads, cutoff=cutoff, keep_latest=True)
    assert [(a.thread_id, a.action, a.checkpoints_after) for a in trimmed] == [
        ("a", "keep_latest", 1),
        ("naive", "keep_latest", 1),
    ]
    assert all(not a.archives for a in trimmed)
    assert plan_sweep(threads, cutoff=datetime(2025, 1, 1, tzinfo=timezone.utc)) == []


# ------------------------------------------------------------- sweeping real threads


def _chats(root: Path, threads: list[str]) -> JsonlSaver:
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    for tid in threads:
        for text in ["hi", "plan a trip", "somewhere warm"]:
            graph.invoke({"messages": [("user", text)]}, config(tid))
    return saver


def _archive(saver: JsonlSaver, thread_id: str) -> str:
    """Archive the thread's earlier context, as ``chat_context_new`` does: a fork
    ``<thread>.ctx.<id>`` and an index file beside the threads."""
    values = chat_graph(saver).get_state(config(thread_id)).values
    outcome = ContextArchive(saver).archive(
        thread_id, values["messages"], values.get("active_context"), title="the first plan"
    )
    assert outcome.status == "archived" and outcome.entry is not None
    return outcome.entry.archive_thread_id


def test_sweep_deletes_idle_threads_with_their_archives(tmp_path: Path) -> None:
    saver = _chats(tmp_path / "chats", ["old", "other"])
    fork = _archive(saver, "old")
    index_file = tmp_path / "chats" / "old.contexts.json"
    assert index_file.exists()

    assert sweep(saver, older_than="30d").actions == []  # everything is fresh
    dry = sweep(saver, older_than="30d", now=LATER, dry_run=True, threads=["old"])
    assert dry.dry_run and dry.deleted == ["old"] and dry.actions[0].archives == (fork,)
    assert fork in saver.storage.thread_ids()  # a dry run changes nothing
    report = sweep(saver, older_than="30d", now=LATER, threads=["old"])
    assert report.deleted == ["old"] and not report.dry_run
    assert sorted(saver.storage.thread_ids()) == ["other"]
    assert not index_file.exists()  # the archive index went too
    data = json.loads(json.dumps(report.to_dict()))
    assert data["actions"][0]["archives"] == [fork]


def test_sweep_keep_latest_trims_and_keeps_the_head(tmp_path: Path) -> None:
    saver = _chats(tmp_path / "chats", ["t"])
    graph = chat_graph(saver)
    before = snapshot_view(graph.get_state(config("t")))
    report = sweep(saver, older_than=timedelta(days=30), keep_latest=True, now=LATER)
    assert report.pruned == ["t"] and report.actions[0].checkpoints_before > 1
    assert len(saver.checkpoint_infos("t")) == 1
    assert snapshot_view(graph.get_state(config("t"))) == before
    again = sweep(saver, older_than="30d", keep_latest=True, now=LATER)
    assert again.actions == []  # nothing left to trim


def test_sweep_skips_unreadable_threads(tmp_path: Path) -> None:
    saver = _chats(tmp_path / "chats", ["good", "bad"])
    path = Path(saver.path("bad"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"v":1,"t":"ckpt",broken\n'
    path.write_bytes(b"".join(lines))
    report = sweep(JsonlSaver(tmp_path / "chats"), older_than="1d", now=LATER)
    assert report.deleted == ["good"]
    assert "bad" in report.errors and "bad.jsonl:3" in report.errors["bad"]
    assert path.exists()  # what cannot be dated is never deleted


# ---------------------------------------- keep_latest and tool calls waiting at an interrupt

CALLS: Counter[str] = Counter()


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    CALLS[f"weather:{city}"] += 1
    return f"{city}: sunny, 24 C"


@tool
def book(hotel: str) -> str:
    """Book a hotel, once a person approves."""
    CALLS[f"book:{hotel}"] += 1
    answer = interrupt({"approve": hotel})
    return f"booked {hotel}" if answer == "yes" else f"not booked ({answer})"


def _agent(saver: JsonlSaver, script: list[Any]) -> Any:
    from langchain.agents import create_agent

    return create_agent(ScriptedChatModel(script=script), [weather, book], checkpointer=saver)


def _waiting_agent_thread(saver: JsonlSaver) -> None:
    calls = [
        {"name": "weather", "args": {"city": "Lisbon"}, "id": "w1"},
        {"name": "book", "args": {"hotel": "Ritz"}, "id": "b1"},
        {"name": "weather", "args": {"city": "Porto"}, "id": "w2"},
    ]
    agent = _agent(saver, ["Hello! Where to?", AIMessage("", tool_calls=calls)])
    agent.invoke({"messages": [("user", "hi")]}, config("trip"))
    agent.invoke({"messages": [("user", "weather and a hotel, please")]}, config("trip"))


def test_keep_latest_keeps_tool_calls_in_flight_at_an_interrupt(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path / "chats")
    CALLS.clear()
    _waiting_agent_thread(saver)
    assert CALLS == {"weather:Lisbon": 1, "weather:Porto": 1, "book:Ritz": 1}
    saver.fork("trip", "trip-copy")  # the unswept twin
    waiting = snapshot_view(_agent(saver, ["x"]).get_state(config("trip")))
    assert waiting[5] and len(waiting[4]) == 3  # an interrupt; three tool tasks
    head = saver.get_tuple(config("trip"))
    assert head is not None and len(head.pending_writes or []) >= 3

    report = sweep(saver, older_than="30d", keep_latest=True, now=LATER, threads=["trip"])
    assert report.pruned == ["trip"] and len(saver.checkpoint_infos("trip")) == 1
    pruned_head = saver.get_tuple(config("trip"))
    assert pruned_head is not None
    assert pruned_head.pending_writes == head.pending_writes  # interrupt + finished results
    assert snapshot_view(_agent(saver, ["x"]).get_state(config("trip"))) == waiting

    results = {}
    for tid in ["trip", "trip-copy"]:
        CALLS.clear()
        agent = _agent(saver, ["Booked the Ritz; sunny in Lisbon and Porto."])
        out = agent.invoke(Command(resume="yes"), config(tid))
        # only the interrupted tool runs again; the finished ones are read from the log
        assert CALLS == {"book:Ritz": 1}, tid
        results[tid] = [
            (m.type, m.content, getattr(m, "tool_call_id", None)) for m in out["messages"]
        ]
    assert results["trip"] == results["trip-copy"]
    assert ("tool", "booked Ritz", "b1") in results["trip"]
    assert ("tool", "Lisbon: sunny, 24 C", "w1") in results["trip"]
    assert results["trip"][-1] == ("ai", "Booked the Ritz; sunny in Lisbon and Porto.", None)


# ------------------------------------------------------------------ the command line


def _run(root: Path, *args: str, input: str | None = None) -> Any:
    return runner.invoke(app, ["prune", "--dir", str(root), *args], input=input)


def test_prune_older_than_on_the_command_line(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    saver = _chats(root, ["a", "b"])
    fork = _archive(saver, "a")

    fresh = _run(root, "--older-than", "30d")
    assert fresh.exit_code == 0 and fresh.stdout.startswith("nothing to prune: no thread idle")

    dry = _run(root, "--older-than", "0s", "--dry-run")
    assert dry.exit_code == 0, dry.output
    lines = dry.stdout.splitlines()
    assert lines[0].startswith("would delete ") and len(lines) == 2
    assert any(
        line.startswith("would delete a: 9 checkpoints, 1 context archive(s)") for line in lines
    )
    assert sorted(saver.storage.thread_ids()) == sorted(["a", "b", fork])

    data = json.loads(
        _run(root, "--older-than", "0s", "--keep-latest", "--dry-run", "--json").stdout
    )
    assert data["strategy"] == "keep_latest" and data["dry_run"] is True
    assert {a["thread_id"] for a in data["actions"]} == {"a", "b"}

    declined = _run(root, "--older-than", "0s", "b", input="n\n")
    assert declined.exit_code == 1 and "would delete b" in declined.stderr
    assert "b" in saver.storage.thread_ids()

    done = _run(root, "--older-than", "0s", "a", "--yes", "--json")
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    assert [a["thread_id"] for a in out["actions"]] == ["a"] and out["actions"][0]["archives"] == [
        fork
    ]
    assert sorted(saver.storage.thread_ids()) == ["b"]

    trimmed = _run(root, "--older-than", "0s", "--keep-latest", "-y")
    assert trimmed.exit_code == 0 and trimmed.stdout.startswith("pruned b: 9 -> 1 checkpoints")


def test_prune_usage_errors(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    _chats(root, ["a"])
    bad_age = _run(root, "--older-than", "3x")
    assert bad_age.exit_code == 2
    assert bad_age.stderr.splitlines() == [
        "error: Invalid value for --older-than: cannot read the age '3x': use a number and a "
        "unit, s, m, h, d or w (30d, 12h, 2w) (see 'langgraph-ctx prune --help')"
    ]
    nothing = _run(root)
    assert nothing.exit_code == 2 and "pass --older-than" in nothing.stderr
    both = _run(root, "a", "--keep-latest", "--strategy", "delete")
    assert both.exit_code == 2 and "not both" in both.stderr


def test_prune_strategy_delete_takes_the_archives(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    saver = _chats(root, ["a"])
    fork = _archive(saver, "a")
    result = _run(root, "a", "--strategy", "delete", "-y")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "deleted a (9 checkpoints, 1 context archive(s))"
    assert list(saver.storage.thread_ids()) == []
    assert fork not in saver.storage.thread_ids()


# ------------------------------------------------- the saver: list, delete and sweep


def test_saver_hides_deletes_and_sweeps_archives(backend: Any) -> None:
    """`list_threads` hides context archives, `delete_thread` (and ``prune(strategy=
    "delete")``) takes them along, `saver.sweep` is the retention API: JSONL and Redis."""
    saver = backend.saver()
    graph = chat_graph(saver)
    for tid in ["a", "b"]:
        for text in ["hi", "plan a trip", "somewhere warm"]:
            graph.invoke({"messages": [("user", text)]}, config(tid))
    fork_a, fork_b = _archive(saver, "a"), _archive(saver, "b")
    nested = _archive(saver, fork_a)  # an archive of an archive

    assert sorted(saver.list_threads()) == ["a", "b"]
    assert sorted(saver.list_threads(include_archives=True)) == sorted(
        ["a", "b", fork_a, fork_b, nested]
    )
    saver.delete_thread("a")
    assert sorted(saver.list_threads(include_archives=True)) == sorted(["b", fork_b])
    assert ContextArchive(saver).entries("a") == []  # its index is gone too

    dry = saver.sweep(older_than="1d", dry_run=True)
    assert dry.deleted == [] and dry.dry_run
    saver.prune(["b"], strategy="delete")
    assert saver.list_threads(include_archives=True) == []


def test_delete_thread_deletes_only_the_archives_named_after_the_thread(backend: Any) -> None:
    """`delete_thread` (what the LangGraph server calls) deleted every thread the archive
    index named: an index naming another thread (hand-edited, tampered) deleted that thread
    too, and one naming the thread itself recursed without end. Only archives of the
    thread, by their name (``<thread>.ctx.<context id>``), are deleted with it."""
    from langgraph_ctx.context.archive.entries import ArchivedContext
    from langgraph_ctx.context.archive.index import index_for

    saver = backend.saver()
    graph = chat_graph(saver)
    for tid in ["chat", "important"]:
        for text in ["hi", "plan a trip", "somewhere warm"]:
            graph.invoke({"messages": [("user", text)]}, config(tid))
    own = _archive(saver, "chat")

    def named(archive: str) -> ArchivedContext:
        return ArchivedContext(context_id="c_20261124_abcdef", title="t", archived_at="x",
                               message_count=1, thread_id="chat", archive_thread_id=archive,
                               checkpoint_id="x")  # fmt: skip

    index_for(saver).update("chat", lambda items: [*items, named("important"), named("chat")])
    saver.delete_thread("chat")
    assert sorted(saver.list_threads(include_archives=True)) == ["important"]
    assert own not in saver.list_threads(include_archives=True)


def test_saver_sweep_keeps_what_an_interrupt_needs(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path / "chats")
    CALLS.clear()
    _waiting_agent_thread(saver)
    before = saver.get_tuple(config("trip"))
    assert saver.sweep(older_than="0s", keep_latest=True).pruned == ["trip"]
    after = saver.get_tuple(config("trip"))
    assert after is not None and before is not None
    assert after.pending_writes == before.pending_writes
    assert after.checkpoint["id"] == before.checkpoint["id"]


def _items(current: Any, writes: Any) -> list[Any]:
    return [*(current or []), *[x for w in writes for x in w]]


class _DeltaState(MessagesState):
    items: Annotated[list, DeltaChannel(_items, snapshot_frequency=3)]


class _AsTheServerSeesIt(BaseCheckpointSaver):
    """What langgraph-api's `_CustomCheckpointerAdapter` forwards (no delta history)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.list(*args, **kwargs)

    def put(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.put_writes(*args, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.inner.get_next_version(current, channel)


def _delta_node(state: _DeltaState) -> dict[str, Any]:
    return {"items": [state["messages"][-1].content], "messages": [AIMessage("ok")]}


def _delta_thread(backend: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Five turns of a graph with a `DeltaChannel` (snapshots every 3) on thread ``t``."""
    builder = StateGraph(_DeltaState)
    builder.add_node("node", _delta_node)
    builder.add_edge(START, "node")
    saver = backend.saver()
    cfg = {"configurable": {"thread_id": "t"}}
    for i in range(5):
        builder.compile(checkpointer=saver).invoke({"messages": [("user", f"t{i}")]}, cfg)
    return builder, saver, cfg


def test_keep_latest_keeps_what_a_delta_channel_is_rebuilt_from(backend: Any) -> None:
    """``keep_latest`` folded a `DeltaChannel`'s history into the kept head, which only this
    saver's own `get_delta_channel_history` reads. The LangGraph server wraps a custom
    checkpointer in an adapter that does not forward it, so the server ran LangGraph's
    default walk (``get_tuple`` + ``parent_config``): the head's parent was gone and the
    channel read as empty, and the next run went on from empty. The head keeps its
    ancestors up to the channel's stored value, as LangGraph's `prune` contract asks."""
    builder, saver, cfg = _delta_thread(backend)
    before = len(list(saver.list(cfg)))
    saver.prune(["t"], strategy="keep_latest")
    assert len(list(saver.list(cfg))) < before  # still a prune
    expected = [f"t{i}" for i in range(5)]
    for reader in (saver, _AsTheServerSeesIt(saver), _AsTheServerSeesIt(backend.saver())):
        assert builder.compile(checkpointer=reader).get_state(cfg).values["items"] == expected
    server = builder.compile(checkpointer=_AsTheServerSeesIt(backend.saver()))
    server.invoke({"messages": [("user", "t5")]}, cfg)
    assert server.get_state(cfg).values["items"] == [*expected, "t5"]


def test_a_sweep_plans_a_delta_thread_once(backend: Any) -> None:
    """After ``keep_latest`` a `DeltaChannel` thread keeps its ancestors, so it has more
    checkpoints than namespaces for good: every later sweep planned it again, reported it
    pruned and rewrote it for nothing. A sweep plans what ``keep_latest`` would trim."""
    _, saver, cfg = _delta_thread(backend)
    first = sweep(saver, older_than="0s", keep_latest=True)
    kept = len(list(saver.list(cfg)))
    assert first.pruned == ["t"] and first.actions[0].checkpoints_after == kept > 1
    again = sweep(saver, older_than="0s", keep_latest=True)
    assert again.pruned == [] and len(list(saver.list(cfg))) == kept


@pytest.mark.parametrize("delta", [False, True])
def test_keep_latest_leaves_no_parent_config_to_a_dropped_checkpoint(
    backend: Any, delta: bool
) -> None:
    """``keep_latest`` kept the head's ``parent_config`` naming the checkpoint it deleted:
    ``get_state(parent_config)`` then answered empty values for an id the history no longer
    lists. A kept checkpoint whose parent is dropped has no parent, as `PostgresSaver.prune`
    leaves it (``parent_checkpoint_id = NULL``); the ancestors a `DeltaChannel` keeps
    keep theirs."""
    if delta:
        _, saver, cfg = _delta_thread(backend)
    else:
        saver = backend.saver()
        cfg = config("t")
        graph = chat_graph(saver)
        for i in range(3):
            graph.invoke({"messages": [("user", f"hi {i}")]}, cfg)
    saver.prune(["t"], strategy="keep_latest")
    for reader in (saver, backend.saver()):
        kept = list(reader.list(cfg))
        ids = {t.config["configurable"]["checkpoint_id"] for t in kept}
        assert len(kept) > 1 if delta else len(kept) == 1
        assert kept[-1].parent_config is None
        for tup in kept[:-1]:
            assert tup.parent_config is not None
            assert tup.parent_config["configurable"]["checkpoint_id"] in ids


def test_the_saver_method_sweeps_only_the_threads_named(tmp_path: Path) -> None:
    """`retention.sweep` takes ``threads=``; the saver's ``sweep``, "the same, as a saver
    method" (README), did not (trial 6)."""
    saver = JsonlSaver(tmp_path / "chats")
    graph = chat_graph(saver)
    for thread in ("a", "b"):
        graph.invoke({"messages": [("user", "hi")]}, config(thread))
    with pytest.raises(TypeError, match="not one string"):  # "ab" is no list of "a", "b"
        saver.sweep(older_than="0s", threads="ab")
    assert saver.list_threads() == ["a", "b"]
    report = saver.sweep(older_than="0s", threads=(t for t in ["a"]))  # read once
    assert report.deleted == ["a"] and saver.list_threads() == ["b"]
