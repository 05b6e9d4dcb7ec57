"""A message list inside another value is stored as the checkpoint line's list it begins
with plus the rest (format 3): a tool agent's `Send` carries the whole state, and its
ordinals written out made every step's lines as long as the conversation (the log grew
quadratically). The graphs are LangGraph's and LangChain's own tool agents."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app
from langgraph_ctx.codec import dumps_line
from langgraph_ctx.errors import CorruptLogError

from .backends import Backend
from .conftest import history_view, snapshot_view

CONFIG = {"configurable": {"thread_id": "t"}}


class ToolModel(BaseChatModel):
    """Calls ``lookup`` for each user message (``calls`` times at once), then answers
    once the results are back."""

    calls: int = 1

    @property
    def _llm_type(self) -> str:
        return "tool-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"answer {turn}: {messages[-1].content}")
        else:
            queries = [f"q{turn}"] + [f"q{turn}.{i}" for i in range(1, self.calls)]
            calls = [{"name": "lookup", "args": {"query": q}, "id": f"call-{q}"} for q in queries]
            reply = AIMessage("", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(query: str) -> str:
    """Look ``query`` up."""
    return f"found {query}: " + "x" * 200


def agent(host: str, saver: Any, calls: int = 1, **kwargs: Any) -> Any:
    model = ToolModel(calls=calls)
    if host == "create_react_agent":
        with warnings.catch_warnings():  # deprecated in LangGraph 1.x, still widely used
            warnings.simplefilter("ignore")
            from langgraph.prebuilt import create_react_agent

            return create_react_agent(model, [lookup], checkpointer=saver, **kwargs)
    from langchain.agents import create_agent

    return create_agent(model, [lookup], checkpointer=saver, **kwargs)


def ask(graph: Any, turn: int) -> None:
    graph.invoke({"messages": [HumanMessage(f"question {turn:03d}")]}, CONFIG)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


HOSTS = ["create_react_agent", "create_agent"]


@pytest.mark.parametrize("host", HOSTS)
def test_a_tool_agents_log_grows_by_its_turns_not_its_conversation(
    tmp_path: Path, host: str
) -> None:
    saver = JsonlSaver(tmp_path)
    graph = agent(host, saver)
    log = tmp_path / "t.jsonl"
    sizes = [0]
    for turn in range(1, 61):
        ask(graph, turn)
        sizes.append(log.stat().st_size)
    early, late = sizes[20] - sizes[10], sizes[60] - sizes[50]
    # Each turn's messages are the same size: ten turns at the end cost what ten at the
    # start did (a snapshot line or two apart), where a written-out Send's ordinals made
    # the last ten cost half as much again.
    assert late < 1.1 * early, (early, late)
    # LangGraph's agent sends each tool its state; LangChain's sends the call alone.
    based = [o for o in lines(log) if '"ch":' in json.dumps(o)]
    assert bool(based) == (host == "create_react_agent")
    assert all(o["v"] == 3 and o["t"] in ("ckpt", "writes") for o in based)
    assert all(o["v"] == 2 for o in lines(log) if o not in based)


@pytest.mark.parametrize("host", HOSTS)
def test_a_tool_agent_reads_back_as_inmemory_saver_gives_it(tmp_path: Path, host: str) -> None:
    """Every state of the history, the pending `Send` of an agent stopped before its tool
    included, warm and in a fresh saver, is what `InMemorySaver` gives."""
    results = []
    for saver in (InMemorySaver(), JsonlSaver(tmp_path)):
        graph = agent(host, saver, interrupt_before=["tools"])
        for turn in range(1, 4):
            ask(graph, turn)
            graph.invoke(None, CONFIG)  # run the tool the interrupt stopped at
        ask(graph, 4)  # stopped before its tool: the Send is pending
        results.append((snapshot_view(graph.get_state(CONFIG)), history_view(graph, CONFIG)))
    assert results[1] == results[0]
    state, history = results[0]
    assert state[1] == ("tools",) and len(history) > 15
    fresh = agent(host, JsonlSaver(tmp_path), interrupt_before=["tools"])
    assert (snapshot_view(fresh.get_state(CONFIG)), history_view(fresh, CONFIG)) == results[0]
    fresh.invoke(None, CONFIG)  # and the pending tool runs from the fresh saver's state
    assert fresh.get_state(CONFIG).values["messages"][-1].content.startswith("answer 4: found q4")


def test_a_cold_open_from_a_snapshot_reads_lists_based_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a snapshot every few lines, the lists a cold open needs are based on lines
    before the last snapshot: read from the snapshot's lists, or the whole log indexed."""
    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 6)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 6)
    graph = agent("create_react_agent", JsonlSaver(tmp_path), interrupt_before=["tools"])
    expected = []
    for turn in range(1, 9):
        ask(graph, turn)
        expected.append(snapshot_view(graph.get_state(CONFIG)))  # the Send pending
        cold = agent("create_react_agent", JsonlSaver(tmp_path), interrupt_before=["tools"])
        assert snapshot_view(cold.get_state(CONFIG)) == expected[-1]
        graph.invoke(None, CONFIG)
    assert sum(o["t"] == "snap" for o in lines(tmp_path / "t.jsonl")) > 10
    assert history_view(graph, CONFIG) == history_view(
        agent("create_react_agent", JsonlSaver(tmp_path)), CONFIG
    )


def test_a_list_based_on_a_line_the_snapshot_left_out_indexes_the_whole_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list may name any earlier checkpoint line's (the writer takes the best of the
    lists it holds): a cold open that meets one the snapshot did not carry indexes the
    lines before the snapshot, and reads the state the log says."""
    import langgraph_ctx.saver._batch as batch_module
    import langgraph_ctx.saver._index as index_module

    monkeypatch.setattr(batch_module, "SNAPSHOT_EVERY", 6)
    monkeypatch.setattr(index_module, "SNAPSHOT_EVERY", 6)
    saver = JsonlSaver(tmp_path)
    graph = agent("create_react_agent", saver, interrupt_before=["tools"])
    for turn in range(1, 6):
        ask(graph, turn)
        graph.invoke(None, CONFIG)
    ask(graph, 6)
    expected = snapshot_view(graph.get_state(CONFIG))
    path = tmp_path / "t.jsonl"
    n, obj, based = _based_line(path)
    objs = lines(path)
    with saver._view("t") as index:
        full = index.materialize(based["base"], "messages")[: based["keep"]] + based["msgs"]
        old = next(  # an early checkpoint's list, well before the last snapshot
            (m, refs)
            for m, o in enumerate(objs[:20], 1)
            if o["t"] == "ckpt"
            and "messages" in o["values"]
            and len(refs := index.materialize(m, "messages")) >= 2
        )
    assert full[: len(old[1])] == old[1]
    based.update(base=old[0], keep=len(old[1]), msgs=full[len(old[1]) :])  # the same list
    raw = path.read_bytes().splitlines(keepends=True)
    raw[n - 1] = dumps_line(obj)
    path.write_bytes(b"".join(raw))
    last_snapshot = max(m for m, o in enumerate(objs, 1) if o["t"] == "snap")
    assert old[0] < last_snapshot < n
    cold = agent("create_react_agent", JsonlSaver(tmp_path), interrupt_before=["tools"])
    assert snapshot_view(cold.get_state(CONFIG)) == expected
    result = CliRunner().invoke(app, ["--dir", str(tmp_path), "verify", "t"])
    assert result.exit_code == 0, result.stdout


def test_lists_based_on_lines_carry_over_fork_copy_revert_and_prune(tmp_path: Path) -> None:
    """Each rewrite stores the lists again against its own lines: every thread reads
    back as it was, and goes on."""
    saver = JsonlSaver(tmp_path)
    graph = agent("create_react_agent", saver, interrupt_before=["tools"])
    for turn in range(1, 6):
        ask(graph, turn)
        graph.invoke(None, CONFIG)
    ask(graph, 6)  # the Send pending
    history = list(graph.get_state_history(CONFIG))
    expected = history_view(graph, CONFIG)
    half = len(history) // 2
    saver.fork("t", "forked", checkpoint_id=history[half].config["configurable"]["checkpoint_id"])
    saver.copy_thread("t", "copied")
    saver.copy_thread("t", "reverted")
    saver.revert("reverted", history[3].config["configurable"]["checkpoint_id"])
    saver.prune(["t"], strategy="keep_latest")
    view = agent("create_react_agent", JsonlSaver(tmp_path), interrupt_before=["tools"])

    def of(thread: str) -> list[Any]:
        return history_view(view, {"configurable": {"thread_id": thread}})

    assert of("copied") == expected
    for thread, at in (("forked", half), ("reverted", 3)):
        # The head as it was saved: its step's results, written after it, are not its.
        got = of(thread)
        assert got[1:] == expected[at + 1 :] and got[0][:4] == expected[at][:4], thread
    assert of("t") == expected[:1]
    for thread in ("t", "forked", "copied", "reverted"):
        config = {"configurable": {"thread_id": thread}}
        view.invoke(None, config)  # each head's pending tool (or nothing) runs on
        view.invoke({"messages": [HumanMessage("question 007")]}, config)
        view.invoke(None, config)
        messages = view.get_state(config).values["messages"]
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        assert messages[-1].content == f"answer {turn}: found q{turn}: " + "x" * 200, thread


def _based_line(path: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """The last checkpoint line holding a list based on a checkpoint line's (the head's,
    whose pending `Send` holds it; LangGraph may write a step's writes after its
    checkpoint), and that list."""
    found = None
    for n, obj in enumerate(lines(path), 1):
        if obj["v"] == 3 and obj["t"] == "ckpt":
            found = n, obj
    assert found is not None
    n, obj = found

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if "ch" in value:
                return value
            return next((f for f in map(walk, value.values()) if f is not None), None)
        if isinstance(value, list):
            return next((f for f in map(walk, value) if f is not None), None)
        return None

    return n, obj, walk(obj)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda lst, n: lst.update(base=2), "'base' line 2 does not store 'messages' as messages"),
        (lambda lst, n: lst.update(keep=10_000), "'keep' 10000 is longer than the list of line"),
        (lambda lst, n: lst.update(base=n), "'base' .* is not an earlier line"),
        (lambda lst, n: lst.update(ch=None), "'ch' None is not a channel name"),
    ],
)
def test_a_tampered_based_list_is_a_corrupt_log_naming_its_line(
    tmp_path: Path, change: Any, reason: str
) -> None:
    graph = agent("create_react_agent", JsonlSaver(tmp_path), interrupt_before=["tools"])
    for turn in range(1, 4):
        ask(graph, turn)
        graph.invoke(None, CONFIG)
    ask(graph, 4)  # stopped before its tool: the head holds the pending Send
    path = tmp_path / "t.jsonl"
    n, obj, based = _based_line(path)
    change(based, n)
    raw = path.read_bytes().splitlines(keepends=True)
    raw[n - 1] = dumps_line(obj)
    path.write_bytes(b"".join(raw))
    with pytest.raises(CorruptLogError, match=reason) as caught:
        JsonlSaver(tmp_path).get_tuple(CONFIG)
    assert caught.value.line == n
    result = CliRunner().invoke(app, ["--dir", str(tmp_path), "verify", "t"])
    assert result.exit_code == 1 and f"t.jsonl:{n}: " in result.stdout


def _bases(value: Any) -> list[int]:
    """The base lines of every list inside an encoded value."""
    if isinstance(value, dict):
        own = [value["base"]] if "ch" in value else []
        return own + [b for v in value.values() for b in _bases(v)]
    if isinstance(value, list):
        return [b for v in value for b in _bases(v)]
    return []


def _late_writes_log(saver: Any) -> list[Any]:
    """Checkpoint ``a``, its child ``b``, then ``a``'s writes (LangGraph may save a step's
    writes after the checkpoint that follows it): a `Send` of ``b``'s very list."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.types import Send

    messages: list[BaseMessage] = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(12)]
    configs, parent = [], None
    for cid, size in (
        ("1f0a0000-0000-6000-8000-00000000000a", 11),
        ("1f0a0000-0000-6000-8000-00000000000b", 12),
    ):
        checkpoint = empty_checkpoint()
        checkpoint.update(
            id=cid,
            channel_values={"messages": messages[:size]},
            channel_versions={"messages": size},
        )
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        if parent:
            config["configurable"]["checkpoint_id"] = parent
        configs.append(
            saver.put(config, checkpoint, {"source": "loop", "step": size}, {"messages": size})
        )
        parent = cid
    saver.put_writes(
        configs[0], [("__pregel_tasks", Send("tools", {"messages": messages}))], "task"
    )
    return configs


def test_writes_base_their_lists_on_lines_up_to_their_checkpoints(tmp_path: Path) -> None:
    """The late writes take ``a``'s list and add the last message, not ``b``'s whole
    list (which would make ``a``'s writes depend on a later line): damaged, ``b``'s
    line costs ``a`` nothing with ``on_corrupt="skip"``."""
    configs = _late_writes_log(JsonlSaver(tmp_path))
    path = tmp_path / "t.jsonl"
    objs = lines(path)
    writes = objs[-1]
    assert writes["t"] == "writes" and writes["v"] == 3
    assert _bases(writes["w"]) == [writes["ckpt"]]  # a's line, not b's
    b_line = next(n for n, o in enumerate(objs, 1) if o["t"] == "ckpt" and o.get("parent"))
    raws = path.read_bytes().splitlines(keepends=True)
    raws[b_line - 1] = raws[b_line - 1].replace(b'"ts":"', b'"ts":"X', 1)
    path.write_bytes(b"".join(raws))
    with pytest.warns(Warning, match=f"t.jsonl:{b_line}: "):
        found = JsonlSaver(tmp_path, on_corrupt="skip").get_tuple(configs[0])
    assert found is not None
    ((_, channel, send),) = found.pending_writes
    assert channel == "__pregel_tasks"
    assert [m.content for m in send.arg["messages"]] == [f"m{i}" for i in range(12)]


def test_on_corrupt_skip_reads_past_any_corrupt_checkpoint_line(tmp_path: Path) -> None:
    """Each ``ckpt`` line damaged in turn: ``on_corrupt="skip"`` reads the head and the
    history past it, the lines built on it skipped with it (a list based on it too),
    where a list based on it raised."""
    graph = agent(
        "create_react_agent", JsonlSaver(tmp_path / "whole"), calls=2, interrupt_before=["tools"]
    )
    for turn in range(1, 6):
        ask(graph, turn)
        if turn < 5:
            graph.invoke(None, CONFIG)
    raws = (tmp_path / "whole" / "t.jsonl").read_bytes().splitlines(keepends=True)
    damaged = 0
    for n, raw in enumerate(raws, 1):
        if not raw.startswith((b'{"v":2,"t":"ckpt"', b'{"v":3,"t":"ckpt"')):
            continue
        root = tmp_path / f"line{n}"
        root.mkdir()
        copy = list(raws)
        copy[n - 1] = raw.replace(b'"ts":"', b'"ts":"X', 1)  # the checksum no longer matches
        (root / "t.jsonl").write_bytes(b"".join(copy))
        with pytest.raises(CorruptLogError) as caught:
            JsonlSaver(root).get_tuple(CONFIG)
        assert caught.value.line == n
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            saver = JsonlSaver(root, on_corrupt="skip")
            saver.get_tuple(CONFIG)  # the head, or None: every checkpoint built on the line
            list(saver.list(CONFIG))
        assert any(f"t.jsonl:{n}:" in str(w.message) for w in seen)
        damaged += 1
    assert damaged > 20


def test_on_every_backend(backend: Backend) -> None:
    """The same lists on Redis (one log format): a fresh saver reads the agent back."""
    graph = agent("create_react_agent", backend.saver())
    for turn in range(1, 4):
        ask(graph, turn)
    expected = history_view(graph, CONFIG)
    assert history_view(agent("create_react_agent", backend.saver()), CONFIG) == expected
    assert b'"v":3,"t":"writes"' in backend.log_bytes("t")
