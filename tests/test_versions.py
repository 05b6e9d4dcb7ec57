"""Channel versions move both ways between LangGraph's savers and ours (issue 11 point 2).

LangGraph's savers and the LangGraph server number versions as zero-padded
strings (``"<32 digits>.<random>"``); logs begun before this saver did the same
hold integers. A thread written by either continues under the other.
"""

from __future__ import annotations

import functools
import json
import random
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

import langgraph_ctx.saver.log as saver_log
from langgraph_ctx.codec.lines import thread_line
from langgraph_ctx.codec.versions import next_version, pack_version, unpack_version
from tests.backends import Backend
from tests.conftest import normalize


def _graph(saver: BaseCheckpointSaver) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"heard {len(state['messages'])}")]}

    def tail(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", "tail")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_node(tail)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", "tail")
    return builder.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t"}}


def _turns(saver: BaseCheckpointSaver, texts: list[str]) -> list[Any]:
    graph = _graph(saver)
    for text in texts:
        graph.invoke({"messages": [("user", text)]}, CONFIG)
    return normalize(graph.get_state(CONFIG).values["messages"])


def _copy(src: BaseCheckpointSaver, dst: BaseCheckpointSaver, thread_id: str = "t") -> None:
    """Every checkpoint and write of a thread, oldest first, through put / put_writes."""
    tuples = list(src.list({"configurable": {"thread_id": thread_id}}))[::-1]
    seen: dict[str, dict[str, Any]] = {}
    for tup in tuples:
        cp = tup.checkpoint
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        before = seen.get(parent, {}) if parent else {}
        new_versions = {
            ch: v for ch, v in cp["channel_versions"].items() if before.get(ch) != v
        }
        ns = tup.config["configurable"].get("checkpoint_ns", "")
        config = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}
        }
        stored = dst.put(config, cp, tup.metadata, new_versions)
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            dst.put_writes(stored, writes, task_id)
        seen[cp["id"]] = dict(cp["channel_versions"])


class ServerLike(InMemorySaver):
    """Versions as the LangGraph server's checkpointer adapter makes them."""

    def get_next_version(self, current: Any, channel: None = None) -> str:
        counter = 0 if current is None else int(str(current).split(".")[0])
        return f"{counter + 1:032}.{random.random():.16f}"


def _versions(saver: BaseCheckpointSaver) -> list[Any]:
    tup = saver.get_tuple(CONFIG)
    assert tup is not None
    cp = tup.checkpoint
    return [*cp["channel_versions"].values()] + [
        v for seen in cp["versions_seen"].values() for v in seen.values()
    ]


def test_pack_round_trips_and_is_never_a_version() -> None:
    for v in [f"{5:032}.0.7916507770116351", f"{7:032}", f"{3:032}.{0:016}", "x", 4, 2.5]:
        assert unpack_version(json.loads(json.dumps(pack_version(v)))) == v
    assert next_version(None) == f"{1:032}"
    assert next_version(f"{9:032}.0.5") == f"{10:032}"
    assert next_version(3) == 4  # a thread put with integers continues with integers


def test_a_thread_with_langgraph_string_versions_continues_here(backend: Backend) -> None:
    memory = InMemorySaver()
    _turns(memory, ["one", "two"])
    assert all(isinstance(v, str) and "." in v for v in _versions(memory))
    ours = backend.saver()
    _copy(memory, ours)
    expected = _turns(memory, ["three"])
    assert _turns(backend.saver(), ["three"]) == expected
    versions = _versions(backend.saver())
    assert all(isinstance(v, str) for v in versions)
    assert max(versions) == max(_versions(ours))


@pytest.mark.parametrize("other", [InMemorySaver, ServerLike])
def test_a_thread_of_ours_continues_under_a_string_version_saver(
    backend: Backend, other: type[InMemorySaver]
) -> None:
    ours = backend.saver()
    _turns(ours, ["one", "two"])
    theirs = other()
    _copy(backend.saver(), theirs)
    got = _turns(theirs, ["three", "four"])
    assert got == _turns(backend.saver(), ["three", "four"])
    assert len(got) == 12


def _legacy_thread(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A thread as the saver wrote it before string versions: integers, old header."""
    with monkeypatch.context() as patch:
        legacy_header = functools.partial(thread_line, legacy_versions=True)
        patch.setattr(saver_log, "thread_line", legacy_header)
        old = backend.saver()
        patch.setattr(old, "get_next_version", lambda current, channel=None: (current or 0) + 1)
        result = _turns(old, ["one"])  # one invoke: read back only once it is done
    raw = backend.log_bytes("t").decode()
    header = json.loads(raw.splitlines()[0])
    assert "versions" not in header
    ckpts = [json.loads(line) for line in raw.splitlines() if '"t":"ckpt"' in line]
    assert all(type(e[0]) is int for c in ckpts for e in c["values"].values())
    return result


def test_an_integer_version_log_reads_as_strings_and_continues(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _legacy_thread(backend, monkeypatch)
    saver = backend.saver()
    versions = _versions(saver)
    assert versions and all(isinstance(v, str) and len(v) >= 32 for v in versions)
    assert normalize(_graph(saver).get_state(CONFIG).values["messages"]) == before
    after = _turns(saver, ["three"])
    assert after[: len(before)] == before and len(after) == len(before) + 3
    # and the server's own numbering continues it too
    server = ServerLike()
    _copy(backend.saver(), server)
    assert _turns(server, ["four"]) == _turns(backend.saver(), ["four"])


def test_a_fork_of_an_integer_log_keeps_reading_its_integers_as_strings(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    _legacy_thread(backend, monkeypatch)
    saver = backend.saver()
    saver.fork("t", "t2")
    tup = saver.get_tuple({"configurable": {"thread_id": "t2"}})
    assert tup is not None
    assert all(isinstance(v, str) for v in tup.checkpoint["channel_versions"].values())
    graph = _graph(saver)
    graph.invoke({"messages": [("user", "x")]}, {"configurable": {"thread_id": "t2"}})


def test_versions_put_read_back_as_put_in_a_new_log(backend: Backend) -> None:
    """As in LangGraph's savers (and its conformance suite): what is put is returned."""
    from langgraph.checkpoint.base import empty_checkpoint

    ours = backend.saver()
    _turns(ours, ["one"])
    raw = backend.log_bytes("t").decode()
    assert json.loads(raw.splitlines()[0])["versions"] == "langgraph"
    ckpt = json.loads([line for line in raw.splitlines() if '"t":"ckpt"' in line][-1])
    assert all(type(e[0]) is list for e in ckpt["values"].values())  # packed: [n]
    cp = empty_checkpoint()
    cp["channel_versions"] = {"a": 1, "b": f"{2:032}.0.5"}
    cp["channel_values"] = {"a": "x", "b": "y"}
    config = {"configurable": {"thread_id": "ints", "checkpoint_ns": ""}}
    stored = ours.put(config, cp, {}, dict(cp["channel_versions"]))
    tup = backend.saver().get_tuple(stored)
    assert tup is not None and tup.checkpoint["channel_versions"] == {"a": 1, "b": f"{2:032}.0.5"}
