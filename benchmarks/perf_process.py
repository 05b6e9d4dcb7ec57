"""What one measured process of ``perf.py`` runs: a workload, a cold open, idle-thread memory,
a concurrency run.

Each figure of the chat, agent and concurrency sections comes from a fresh interpreter
(``perf.py --child SPEC``) on fresh storage, so that resident memory, caches and
the garbage collector's state are those of that saver alone. ``perf.py`` starts
these processes and reads the JSON object each prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from postgres_server import connect_kwargs
from scripted_agent import user_text
from storage import build, build_agent, text

from langgraph_ctx import JsonlSaver

THREAD = {"configurable": {"thread_id": "bench"}}


def run_child(script: str | Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``script --child SPEC`` in a fresh interpreter and return the JSON object it
    prints last (`perf.py` and `perf_breakdown.py` measure in such processes)."""
    command = [sys.executable, str(script), "--child", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"child {spec} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def rss_bytes() -> int:
    """Resident set size of this process now (not the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- the savers ------------------------------------------------------------------


def open_saver(kind: str, target: str | None) -> tuple[Any, Callable[[], None]]:
    """A sync saver of `kind` on `target` (directory, file or URL), and how to close it.

    ``RedisLogSaver``'s target is the server's URL (default prefix): `perf.py` empties
    the database before each workload run, so each starts on fresh storage.
    """
    if kind == "JsonlSaver":
        assert target is not None
        return JsonlSaver(target), lambda: None
    if kind == "SqliteSaver":
        from langgraph.checkpoint.sqlite import SqliteSaver

        assert target is not None
        conn = sqlite3.connect(target, check_same_thread=False)
        return SqliteSaver(conn), conn.close
    if kind == "PostgresSaver":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver

        assert target is not None
        pg_conn = psycopg.connect(target, **connect_kwargs())
        return PostgresSaver(pg_conn), pg_conn.close
    if kind == "RedisLogSaver":
        from langgraph_ctx import RedisLogSaver

        assert target is not None
        redis_saver = RedisLogSaver.from_url(target)
        return redis_saver, redis_saver.close
    from langgraph.checkpoint.memory import InMemorySaver

    return InMemorySaver(), lambda: None


def workload_graph(workload: str, saver: Any) -> tuple[Any, Callable[[int], dict[str, Any]]]:
    """The compiled graph of `workload` on `saver`, and the input of turn ``1..n``."""
    if workload == "agent":
        agent = build_agent("create_react_agent", saver)
        return agent, lambda turn: {"messages": [HumanMessage(user_text(11, turn))]}
    rng = random.Random(7)
    graph = build(False, rng).compile(checkpointer=saver)
    return graph, lambda turn: {"messages": [HumanMessage(text(rng))]}


# -- child processes ---------------------------------------------------------------


def child_workload(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one workload on one saver: per-turn times, RSS growth, history reads."""
    saver, close = open_saver(spec["saver"], spec.get("target"))
    if spec["saver"] == "PostgresSaver":
        saver.setup()
    graph, make_input = workload_graph(spec["workload"], saver)
    times: list[float] = []
    rss_first = 0
    for turn in range(1, spec["turns"] + 1):
        payload = make_input(turn)
        t0 = time.perf_counter()
        graph.invoke(payload, THREAD)
        times.append(time.perf_counter() - t0)
        if turn == 1:
            gc.collect()
            rss_first = rss_bytes()
    gc.collect()
    rss_growth = rss_bytes() - rss_first
    history: list[float] = []
    states = 0
    for _ in range(spec["history_runs"]):
        t0 = time.perf_counter()
        states = sum(1 for _ in graph.get_state_history(THREAD, limit=spec["history_limit"]))
        history.append(time.perf_counter() - t0)
    close()
    return {
        "turn_ms": [1000 * t for t in times],
        "rss_growth": rss_growth,
        "history_ms": [1000 * t for t in history],
        "states": states,
    }


def child_cold(spec: dict[str, Any]) -> dict[str, Any]:
    """In a fresh interpreter: ms from opening the saver to the first state.

    The graph is built (without a checkpointer) and the imports collected first, for
    every saver alike: what is timed is the saver's open and the first ``get_state``.
    """
    if spec["workload"] == "agent":
        graph = build_agent("create_react_agent", None)
    else:
        graph = build(False, random.Random(0)).compile()
    if spec["saver"] == "PostgresSaver":
        import psycopg  # noqa: F401
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401
    elif spec["saver"] == "SqliteSaver":
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401
    elif spec["saver"] == "RedisLogSaver":
        import redis  # noqa: F401

        from langgraph_ctx import RedisLogSaver  # noqa: F401
    gc.collect()
    t0 = time.perf_counter()
    saver, close = open_saver(spec["saver"], spec["target"])
    graph.checkpointer = saver
    state = graph.get_state(THREAD)
    elapsed = time.perf_counter() - t0
    assert state.values["messages"], "the cold process read an empty thread"
    close()
    return {"ms": 1000 * elapsed}


def child_memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Threads x turns on one saver, then the Python objects still held per idle thread."""
    root = Path(spec["target"])
    saver, close = open_saver(
        spec["saver"], str(root / ("chats" if spec["saver"] == "JsonlSaver" else "bench.db"))
    )
    rng = random.Random(7)
    graph = build(False, rng).compile(checkpointer=saver)

    def thread(thread_id: str) -> None:
        config = {"configurable": {"thread_id": thread_id}}
        for _ in range(spec["turns"]):
            graph.invoke({"messages": [HumanMessage(text(rng))]}, config)

    tracemalloc.start()
    thread("warm-up")  # lazy imports and caches that any first thread fills
    gc.collect()
    baseline = tracemalloc.get_traced_memory()[0]
    for i in range(spec["threads"]):
        thread(f"thread-{i}")
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    close()
    return {"per_thread": retained / spec["threads"], "retained": retained}


def child_concurrency(spec: dict[str, Any]) -> dict[str, Any]:
    """In a fresh interpreter: ``threads`` x ``turns`` at once with ``ainvoke`` (an async
    model node) on one saver; turns per second, and this process's CPU ms a turn."""
    return asyncio.run(_concurrent_run(spec))


async def _concurrent_run(spec: dict[str, Any]) -> dict[str, Any]:
    threads, turns = spec["threads"], spec["turns"]
    async with _async_saver(spec) as saver:
        graph = build(False, random.Random(7), asynchronous=True).compile(checkpointer=saver)
        rng = random.Random(spec["run"])
        inputs = [text(rng) for _ in range(threads * turns)]

        async def thread(i: int) -> None:
            config = {"configurable": {"thread_id": f"thread-{i}"}}
            for t in range(turns):
                message = HumanMessage(inputs[i * turns + t])
                await graph.ainvoke({"messages": [message]}, config)

        warm_up = {"configurable": {"thread_id": "warm-up"}}  # lazy setup, first queries
        await graph.ainvoke({"messages": [HumanMessage("hello")]}, warm_up)
        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(thread(i) for i in range(threads)))
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        state = await graph.aget_state({"configurable": {"thread_id": "thread-0"}})
        assert len(state.values["messages"]) == 2 * turns
    return {"turns_per_s": threads * turns / elapsed, "cpu_ms": cpu * 1000 / (threads * turns)}


@contextlib.asynccontextmanager
async def _async_saver(spec: dict[str, Any]) -> AsyncIterator[Any]:
    kind, directory = spec["saver"], Path(spec["directory"])
    if kind == "InMemorySaver":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif kind == "JsonlSaver":
        yield JsonlSaver(directory / "chats")
    elif kind == "AsyncSqliteSaver":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(directory / "bench.db")) as sqlite:
            yield sqlite
    elif kind == "AsyncPostgresSaver":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool

        async with AsyncConnectionPool(
            spec["url"], min_size=10, max_size=10, kwargs=connect_kwargs(), open=False
        ) as pool:
            await pool.wait()  # all 10 connections open before the clock starts
            postgres = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await postgres.setup()
            yield postgres
    else:
        from langgraph_ctx.saver.redis import RedisLogSaver

        saver = RedisLogSaver.from_url(spec["url"], prefix=f"perf-{spec['run']}")
        try:
            yield saver
        finally:
            saver.close()


CHILD_TASKS = {
    "workload": child_workload,
    "cold": child_cold,
    "memory": child_memory,
    "concurrency": child_concurrency,
}
