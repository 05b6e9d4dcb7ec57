"""The saver's native async path (saver/_drive.py): JSONL's inline door on the event loop."""

from __future__ import annotations

import asyncio
import fcntl
import os
import tempfile
from pathlib import Path

from langgraph.checkpoint.conformance import checkpointer_test, validate

from langgraph_ctx import JsonlSaver

from .conftest import normalize


def inline_saver(root: Path | str) -> JsonlSaver:
    saver = JsonlSaver(root)
    assert saver.storage.aio() is not None  # the default
    return saver


@checkpointer_test(name="JsonlSaver(inline_async)")
async def jsonl_inline():
    with tempfile.TemporaryDirectory() as root:
        yield inline_saver(root)


async def test_the_inline_async_door_passes_the_conformance_suite():
    report = await validate(jsonl_inline)
    failures = [f for r in report.results.values() for f in r.failures]
    assert failures == []


def _chat(saver):
    from langgraph.graph import START, MessagesState, StateGraph

    def bot(state):
        return {"messages": [("ai", f"echo {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def test_a_writer_waiting_for_another_lock_holder_does_not_block_the_loop(tmp_path):
    saver = inline_saver(tmp_path)
    graph = _chat(saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "hi")]}, config)  # makes the lock file
    lock_file = Path(saver.root_dir) / ".locks" / "t.lock"

    async def main() -> tuple[int, int]:
        fd = os.open(lock_file, os.O_RDWR)  # another open file: flock excludes it like a process
        fcntl.flock(fd, fcntl.LOCK_EX)
        task = asyncio.create_task(graph.ainvoke({"messages": [("user", "again")]}, config))
        ticks = 0
        for _ in range(40):
            await asyncio.sleep(0.005)
            ticks += 1
        done_while_held = task.done()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        state = await task
        return ticks, int(done_while_held) * 100 + len(state["messages"])

    ticks, outcome = asyncio.run(main())
    assert ticks == 40  # the loop kept running while the writer waited
    assert outcome == 4  # not done while the lock was held; then it went through


def test_many_concurrent_threads_end_as_the_sync_path_ends(tmp_path):
    async_graph = _chat(inline_saver(tmp_path / "a"))
    sync_graph = _chat(JsonlSaver(tmp_path / "s"))

    async def talk(t: int) -> None:
        for i in range(5):
            cfg = {"configurable": {"thread_id": f"t{t}"}}
            await async_graph.ainvoke({"messages": [("user", f"{t}-{i}")]}, cfg)

    async def main() -> None:
        await asyncio.gather(*(talk(t) for t in range(20)))

    asyncio.run(main())
    for t in range(20):
        cfg = {"configurable": {"thread_id": f"t{t}"}}
        for i in range(5):
            sync_graph.invoke({"messages": [("user", f"{t}-{i}")]}, cfg)
        fresh = JsonlSaver(tmp_path / "a")  # a fresh process reads what the async path wrote
        got = normalize(_chat(fresh).get_state(cfg).values)
        assert got == normalize(sync_graph.get_state(cfg).values)
        assert len(got["messages"]) == 10
