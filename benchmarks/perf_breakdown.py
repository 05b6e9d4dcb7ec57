"""Where issue 16's open goals spend their time, measured in fresh processes.

* ``cold``: a cold ``get_state`` by stage, for ``JsonlSaver`` and ``SqliteSaver``, on
  ``perf.py``'s 100-turn tool agent and 400-turn chat: medians over ``--runs`` fresh
  processes each, the savers taking turns.
* ``calls``: the CPU each saver's own calls take per turn (``aget_tuple``, ``aput``,
  ``aput_writes``) and what the rest of the turn takes (LangGraph, the model node), in
  ``perf.py``'s 50 threads x 20 turns with ``ainvoke``, with the garbage collector off
  (the saver's code alone) and on (as ``perf.py`` runs it).
* ``bodies``: the agent's message bodies from the log's lines (checksums, JSON; the log
  read and split beforehand, as a cold open reads it for its index either way) against
  the same bodies from one binary record (msgpack, read from its file), both built into
  messages the same way: what a binary cache of a thread's messages would save a cold open.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/perf_breakdown.py [--runs N] [--only PART]

A diagnosis, not a figure of the goals (those are ``perf.py``'s). The stages are timed
by wrapping the functions named in the table (a wrapper costs about 1 us a call), so
they add up to a little more than an unwrapped open; nested stages are indented.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# This folder holds redis.py, which would shadow redis-py: search it last.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

WORKLOADS = {"agent": 100, "chat": 400}
QUICK_WORKLOADS = {"agent": 6, "chat": 40}  # ``--quick``: a smoke test, with 10 x 5 turns
COLD_STAGES = (  # (label, depth): the table's rows, in order
    ("open the saver", 0),
    ("get_tuple", 0),
    ("storage sync (read the log)", 1),
    ("read and split the lines", 2),
    ("index the lines (feed)", 1),
    ("seed from the last snapshot", 2),
    ("build the tuple", 1),
    ("decode the head's messages", 2),
    ("read and parse message lines", 3),
    ("get_tuple (SQLite)", 0),
    ("loads_typed (SQLite)", 1),
    ("whole get_state", 0),
)
SAVER_CALLS = ("aget_tuple", "aput", "aput_writes")


def _timed(acc: dict[str, float], label: str, function: Callable[..., Any]) -> Any:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t0

    return call


def child_stages(spec: dict[str, Any]) -> dict[str, float]:
    """One cold ``get_state`` in this fresh process, by stage (ms)."""
    from perf_process import THREAD, open_saver
    from storage import build, build_agent

    acc: dict[str, float] = {}
    if spec["saver"] == "JsonlSaver":
        import langgraph_ctx.saver._index as index_module
        import langgraph_ctx.saver.log as log_module
        import langgraph_ctx.storage.jsonl as jsonl_module

        Index, Storage, Saver = index_module._Index, jsonl_module.JsonlStorage, log_module.LogSaver
        for owner, name, label in (
            (Storage, "sync", "storage sync (read the log)"),
            (jsonl_module, "_read_lines_from", "read and split the lines"),
            (Index, "feed", "index the lines (feed)"),
            (Index, "_from_snapshot", "seed from the last snapshot"),
            (Saver, "_tuple", "build the tuple"),
            (Index, "values", "decode the head's messages"),
            (Index, "_read_parsed", "read and parse message lines"),
            (Saver, "get_tuple", "get_tuple"),
        ):
            setattr(owner, name, _timed(acc, label, getattr(owner, name)))
    else:
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
        from langgraph.checkpoint.sqlite import SqliteSaver

        SqliteSaver.get_tuple = _timed(acc, "get_tuple (SQLite)", SqliteSaver.get_tuple)
        JsonPlusSerializer.loads_typed = _timed(
            acc, "loads_typed (SQLite)", JsonPlusSerializer.loads_typed
        )
    if spec["workload"] == "agent":
        graph = build_agent("create_react_agent", None)
    else:
        graph = build(False, random.Random(0)).compile()
    gc.collect()
    t0 = time.perf_counter()
    saver, close = open_saver(spec["saver"], spec["target"])
    t1 = time.perf_counter()
    graph.checkpointer = saver
    state = graph.get_state(THREAD)
    t2 = time.perf_counter()
    assert state.values["messages"], "the cold process read an empty thread"
    close()
    acc["open the saver"] = t1 - t0
    acc["whole get_state"] = t2 - t0
    return {label: 1000 * seconds for label, seconds in acc.items()}


def child_calls(spec: dict[str, Any]) -> dict[str, float]:
    """``perf.py``'s concurrency run in this fresh process: CPU ms a turn of each of the
    saver's calls (this OS thread's CPU: the event loop runs them inline), and in all."""
    from langgraph.checkpoint.memory import InMemorySaver
    from perf_process import _concurrent_run

    from langgraph_ctx.saver.log import LogSaver

    cls: Any = InMemorySaver if spec["saver"] == "InMemorySaver" else LogSaver
    acc: dict[str, float] = {}

    def timed(name: str) -> Callable[..., Any]:
        method = getattr(cls, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return await method(*args, **kwargs)
            finally:
                acc[name] = acc.get(name, 0.0) + time.thread_time() - t0

        return call

    for name in SAVER_CALLS:
        setattr(cls, name, timed(name))
    if not spec["gc"]:
        gc.disable()
    turns = spec["threads"] * spec["turns"]
    out = asyncio.run(_concurrent_run(spec))
    per_turn = {name: 1000 * acc.get(name, 0.0) / turns for name in SAVER_CALLS}
    per_turn["the saver's calls"] = sum(per_turn.values())
    per_turn["the whole turn"] = out["cpu_ms"]
    per_turn["the rest of the turn"] = out["cpu_ms"] - per_turn["the saver's calls"]
    return per_turn


def child_bodies(spec: dict[str, Any]) -> dict[str, float]:
    """The message bodies of the log at ``spec["log"]`` read into messages in this fresh
    process, from its lines or from ``spec["record"]`` (ms). The log is read and split
    into lines before the clock starts, from either source: a cold open reads them for
    its index anyway, cache or not (until the fifteenth round this part counted that
    read on the lines' side only, and made a cache look twice as fast as it is)."""
    import orjson
    import ormsgpack

    from langgraph_ctx.codec.lines import checksums_match
    from langgraph_ctx.codec.messages import messages_unvalidated

    with open(spec["log"], "rb") as f:
        lines = f.read().split(b"\n")
    gc.collect()
    t0 = time.perf_counter()
    if spec["source"] == "record":
        with open(spec["record"], "rb") as f:
            bodies = ormsgpack.unpackb(f.read())
    else:
        kept = [raw for raw in lines if raw.startswith(b'{"v":2,"t":"msg"') and b'"msg":' in raw]
        if not checksums_match(kept):
            raise AssertionError("a message line of the log does not match its checksum")
        bodies = [orjson.loads(raw)["msg"] for raw in kept]
    gc.disable()  # as a cold open builds them (`_collector_paused`)
    messages = messages_unvalidated(bodies)
    gc.enable()
    elapsed = time.perf_counter() - t0
    if None in messages:
        raise AssertionError("a body that only validation builds")
    return {"ms": 1000 * elapsed, "messages": len(messages)}


CHILD_TASKS = {"stages": child_stages, "calls": child_calls, "bodies": child_bodies}


def in_child(spec: dict[str, Any]) -> dict[str, float]:
    from perf_process import run_child

    return run_child(__file__, spec)


def make_threads(tmp: Path, sizes: dict[str, int]) -> dict[str, dict[str, str]]:
    """Each workload's thread, written by `perf.py`'s own workload child per saver."""
    targets: dict[str, dict[str, str]] = {}
    for workload, turns in sizes.items():
        targets[workload] = {
            "JsonlSaver": str(tmp / workload / "jsonl"),
            "SqliteSaver": str(tmp / workload / "sqlite.db"),
        }
        (tmp / workload).mkdir()
        for saver, target in targets[workload].items():
            print(f"writing the {turns}-turn {workload} with {saver}", file=sys.stderr)
            spec = {"task": "workload", "workload": workload, "saver": saver, "target": target,
                    "turns": turns, "history_limit": None, "history_runs": 0}  # fmt: skip
            command = [sys.executable, str(HERE / "perf.py"), "--child", json.dumps(spec)]
            subprocess.run(command, check=True, capture_output=True)
    return targets


def cold(targets: dict[str, dict[str, str]], sizes: dict[str, int], runs: int) -> None:
    for workload, turns in sizes.items():
        samples: dict[str, dict[str, list[float]]] = {"JsonlSaver": {}, "SqliteSaver": {}}
        for _ in range(runs):
            for saver, target in targets[workload].items():
                spec = {"workload": workload, "saver": saver, "target": target}
                for label, ms in in_child({"task": "stages", **spec}).items():
                    samples[saver].setdefault(label, []).append(ms)
        print(f"\n**Cold get_state by stage, {turns}-turn {workload}: median ms of {runs} "
              "fresh processes each**\n")  # fmt: skip
        print("| stage | JsonlSaver | SqliteSaver |\n|---|---:|---:|")
        for label, depth in COLD_STAGES:
            cells = [
                f"{statistics.median(samples[s][label]):.2f}" if label in samples[s] else ""
                for s in ("JsonlSaver", "SqliteSaver")
            ]
            if any(cells):
                print(f"| {'&nbsp;&nbsp;' * depth}{label} | {cells[0]} | {cells[1]} |")


def calls(runs: int, threads: int, turns: int) -> None:
    rows = (*SAVER_CALLS, "the saver's calls", "the rest of the turn", "the whole turn")
    for collector in (False, True):
        samples: dict[str, dict[str, list[float]]] = {"InMemorySaver": {}, "JsonlSaver": {}}
        for run in range(runs):
            for saver in samples:
                with tempfile.TemporaryDirectory() as directory:
                    spec = {"task": "calls", "saver": saver, "directory": directory, "run": run,
                            "threads": threads, "turns": turns, "gc": collector}  # fmt: skip
                    for label, ms in in_child(spec).items():
                        samples[saver].setdefault(label, []).append(ms)
        state = "on" if collector else "off"
        print(f"\n**CPU ms a turn, {threads} threads x {turns} turns with ainvoke, garbage "
              f"collector {state}: median of {runs} fresh processes each**\n")  # fmt: skip
        print("| | InMemorySaver | JsonlSaver | JSONL - InMemory |\n|---|---:|---:|---:|")
        for label in rows:
            memory, jsonl = (statistics.median(samples[s][label]) for s in samples)
            print(f"| {label} | {memory:.3f} | {jsonl:.3f} | {jsonl - memory:+.3f} |")
        memory, jsonl = (statistics.median(samples[s]["the whole turn"]) for s in samples)
        print(f"\nCPU a turn, InMemorySaver / JsonlSaver: {memory / jsonl:.3f}")


def bodies(targets: dict[str, dict[str, str]], tmp: Path, runs: int) -> None:
    import orjson
    import ormsgpack

    log = next(Path(targets["agent"]["JsonlSaver"]).glob("*.jsonl"))
    with open(log, "rb") as f:
        parsed = [orjson.loads(raw) for raw in f.read().splitlines()]
    record = tmp / "bodies.msgpack"
    kept = [o["msg"] for o in parsed if o["t"] == "msg" and "msg" in o]
    record.write_bytes(ormsgpack.packb(kept))
    times: dict[str, list[float]] = {"lines": [], "record": []}
    count = 0.0
    for _ in range(runs):
        for source in times:
            spec = {"task": "bodies", "source": source, "log": str(log), "record": str(record)}
            result = in_child(spec)
            times[source].append(result["ms"])
            count = result["messages"]
    lines_ms, record_ms = (statistics.median(v) for v in times.values())
    print(f"\n**The agent's {count:.0f} message bodies into messages, fresh process, median "
          f"of {runs}**\n")  # fmt: skip
    print("| from | ms | bytes |\n|---|---:|---:|")
    print(f"| the log's lines, read beforehand (checksums, JSON) | {lines_ms:.2f} "
          f"| {log.stat().st_size} |")  # fmt: skip
    print(f"| one msgpack record of the bodies, read from its file | {record_ms:.2f} "
          f"| {record.stat().st_size} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    parser.add_argument("--quick", action="store_true", help="smoke test: small, one run each")
    parser.add_argument(
        "--only", action="append", choices=("cold", "calls", "bodies"), metavar="NAME",
        help="run only this part (repeatable): cold, calls, bodies",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILD_TASKS[spec.pop("task")](spec)))
        return
    parts = args.only or ["cold", "calls", "bodies"]
    sizes = QUICK_WORKLOADS if args.quick else WORKLOADS
    runs = 1 if args.quick else args.runs
    threads, turns = (10, 5) if args.quick else (50, 20)
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load:.1f} at start")
    with tempfile.TemporaryDirectory(prefix="langgraph-ctx-breakdown-") as name:
        tmp = Path(name)
        targets = make_threads(tmp, sizes) if {"cold", "bodies"} & set(parts) else {}
        if "cold" in parts:
            cold(targets, sizes, runs)
        if "calls" in parts:
            calls(runs, threads, turns)
        if "bodies" in parts:
            bodies(targets, tmp, runs)


if __name__ == "__main__":
    main()
