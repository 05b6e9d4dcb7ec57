"""put / get / history on Redis: RedisLogSaver vs langgraph-checkpoint-plainredis vs JsonlSaver.

    .venv/bin/python benchmarks/redis.py [--turns 400] [--aof]

The workload of benchmarks/storage.py (imported from it, not copied): a
``MessagesState`` chat, one model node answering ~340 bytes, user messages of
~340 bytes, ``--turns`` turns on one thread. It starts its own redis-server on
a free loopback port (``--aof``: with ``appendonly yes`` + ``appendfsync
always``, the setting docs/redis.md asks for) and runs, in one process:

* ``JsonlSaver`` on a temporary directory;
* ``RedisLogSaver`` (this package);
* ``RedisSaver`` from ``langgraph-checkpoint-plainredis``, a published
  LangGraph saver for plain Redis (strings, hashes, sorted sets; no modules).

Per saver: stored bytes (JSONL: file size; Redis: ``MEMORY USAGE`` of its
keys), ms per turn (``invoke``, end to end), the put cost per turn, ``get_state``
warm (median of 9), a full ``get_state_history``, and ``get_state`` from a cold process (a
fresh interpreter: open the saver, read the first state). Then the same as
ratios against plainredis.

The put cost is measured by replay: the ``put`` / ``put_writes`` calls of the
first run are recorded and replayed, one after the other, into a new thread of
each saver, timed by wall clock (round trips included). Timing them inside the
live graph would mostly measure their wait for the GIL while LangGraph works
on the state in the foreground.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# This file is named redis.py: search its directory last so that `import redis`
# finds redis-py (storage.py's own imports, scripted_agent, still resolve), and import
# the shared workload and the test server helper from the repository root.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
sys.path.insert(0, str(HERE.parent))

import redis  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph_checkpoint_plainredis import RedisSaver  # noqa: E402

from benchmarks.storage import build, fmt, text  # noqa: E402
from langgraph_ctx import JsonlSaver  # noqa: E402
from langgraph_ctx.saver.redis import RedisLogSaver  # noqa: E402
from tests.redis_server import RedisServer, redis_server_binary  # noqa: E402

THREAD = {"configurable": {"thread_id": "bench"}}


def open_saver(kind: str, target: str, prefix: str) -> Any:
    if kind == "jsonl":
        return JsonlSaver(target)
    if kind == "ctx":
        return RedisLogSaver.from_url(target, prefix=prefix)
    return RedisSaver(url=target, prefix=prefix)


def cold_get_state(kind: str, target: str, prefix: str) -> float:
    """In a fresh interpreter: ms from opening the saver to the first state."""
    graph_builder = build(False, random.Random(0))
    gc.collect()
    t0 = time.perf_counter()
    saver = open_saver(kind, target, prefix)
    state = graph_builder.compile(checkpointer=saver).get_state(THREAD)
    elapsed = time.perf_counter() - t0
    assert state.values["messages"]
    return elapsed * 1000


def redis_bytes(client: redis.Redis, pattern: str) -> int:
    """What the keys take in Redis's memory (``MEMORY USAGE``, exact)."""
    return sum(
        client.memory_usage(key, samples=0) or 0
        for key in client.scan_iter(match=pattern, count=1000)
    )


Call = tuple[str, tuple[Any, ...]]


def record_calls(saver: Any, turns: list[list[Call]]) -> None:
    """Record the arguments of every ``put`` / ``put_writes`` into ``turns[-1]``.

    Arguments are copied as the saver saw them (lists copied, message objects
    shared, as LangGraph shares them between consecutive checkpoints).
    """
    lock = threading.Lock()
    for name in ("put", "put_writes"):
        original = getattr(saver, name)

        def recording(*args: Any, _name: str = name, _original: Any = original) -> Any:
            with lock:
                turns[-1].append((_name, _copy(_name, args)))
            return _original(*args)

        setattr(saver, name, recording)


def _copy(name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    config = {"configurable": {**args[0]["configurable"], "thread_id": "replay"}}
    if name == "put_writes":
        return (config, list(args[1]), *args[2:])
    checkpoint, metadata, versions = args[1:4]
    values = {
        k: list(v) if isinstance(v, list) else v for k, v in checkpoint["channel_values"].items()
    }
    return (config, {**checkpoint, "channel_values": values}, dict(metadata), dict(versions))


def replay(saver: Any, turns: list[list[Call]]) -> list[float]:
    """Wall seconds per turn to make the recorded calls, one after the other."""
    out = []
    for calls in turns:
        t0 = time.perf_counter()
        for name, args in calls:
            getattr(saver, name)(*args)
        out.append(time.perf_counter() - t0)
    return out


def measure(
    name: str,
    kind: str,
    target: str,
    prefix: str,
    size: Any,
    turns: int,
    recorded: list[list[Call]],
) -> dict:
    """benchmarks/storage.py's chat (same builder, texts and seed) on one saver."""
    rng = random.Random(7)
    saver = open_saver(kind, target, prefix)
    record = not recorded
    if record:
        record_calls(saver, recorded)
    graph = build(False, rng).compile(checkpointer=saver)
    raw, times = 0, []
    for _ in range(turns):
        user = text(rng)
        if record:
            recorded.append([])
        t0 = time.perf_counter()
        out = graph.invoke({"messages": [HumanMessage(user)]}, THREAD)
        times.append(time.perf_counter() - t0)
        raw += len(user.encode()) + len(out["messages"][-1].content.encode())
    stored = size()
    puts = replay(open_saver(kind, target, prefix), recorded)
    samples = []
    for _ in range(9):  # the median: one full garbage collection would swamp a mean
        t0 = time.perf_counter()
        graph.get_state(THREAD)
        samples.append(time.perf_counter() - t0)
    get_state = statistics.median(samples)
    t0 = time.perf_counter()
    n_history = sum(1 for _ in graph.get_state_history(THREAD))
    history = time.perf_counter() - t0
    row = {
        "name": name,
        "raw": raw,
        "stored": stored,
        "first50": 1000 * statistics.mean(times[:50]),
        "last50": 1000 * statistics.mean(times[-50:]),
        "put_first50": 1000 * statistics.mean(puts[:50]),
        "put_last50": 1000 * statistics.mean(puts[-50:]),
        "get_state": 1000 * get_state,
        "history": 1000 * history,
        "n_history": n_history,
    }
    command = [sys.executable, __file__, "--cold", kind, target, prefix]
    runs = [
        float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        for _ in range(3)
    ]
    row["cold"] = statistics.median(runs)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--aof", action="store_true", help="appendonly yes, appendfsync always")
    parser.add_argument("--cold", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold:
        print(cold_get_state(*args.cold))
        return
    if redis_server_binary() is None:
        sys.exit("redis-server is not installed (Debian/Ubuntu: apt-get install -y redis-server)")
    with (
        tempfile.TemporaryDirectory() as tmp,
        RedisServer(Path(tmp) / "redis", appendonly=args.aof) as server,
    ):
        client = redis.Redis.from_url(server.url)
        chats = Path(tmp) / "chats"
        version = client.info("server")["redis_version"]
        recorded: list[list[Call]] = []  # the first run's puts, replayed into every saver
        rows = [
            measure(
                "JsonlSaver",
                "jsonl",
                str(chats),
                "",
                lambda: sum(p.stat().st_size for p in chats.glob("*.jsonl")),
                args.turns,
                recorded,
            ),
            measure(
                "RedisLogSaver",
                "ctx",
                server.url,
                "bench",
                lambda: redis_bytes(client, "ctx:bench:*"),
                args.turns,
                recorded,
            ),
            measure(
                "plainredis RedisSaver",
                "plain",
                server.url,
                "plain",
                lambda: redis_bytes(client, "plain:*"),
                args.turns,
                recorded,
            ),
        ]
        client.close()
    raw = rows[0]["raw"]
    persistence = "appendonly yes, appendfsync always" if args.aof else "no persistence"
    print(
        f"{args.turns}-turn chat, {raw / 1000:.0f} KB of message text, "
        f"{rows[0]['n_history']} checkpoints; redis-server {version} on loopback "
        f"({persistence})\n"
    )
    print(
        "| saver | stored bytes | per raw byte | ms/turn, first 50 | ms/turn, last 50 "
        "| put ms/turn (replay), first 50 | last 50 "
        "| get_state ms | get_state_history ms | cold get_state ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['name']} | {r['stored']:,} | {r['stored'] / r['raw']:.2f}x "
            f"| {fmt(r['first50'])} | {fmt(r['last50'])} "
            f"| {fmt(r['put_first50'], '.2f')} | {fmt(r['put_last50'], '.2f')} "
            f"| {fmt(r['get_state'])} | {fmt(r['history'])} | {fmt(r['cold'])} |"
        )
    ref = rows[2]
    print("\nRatios against plainredis RedisSaver (lower is better):\n")
    print(
        "| saver | storage | ms/turn, last 50 | put, last 50 | get_state "
        "| get_state_history | cold get_state |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        keys = ["stored", "last50", "put_last50", "get_state", "history", "cold"]
        ratios = " | ".join(f"{r[k] / ref[k]:.3f}" for k in keys)
        print(f"| {r['name']} | {ratios} |")


if __name__ == "__main__":
    main()
