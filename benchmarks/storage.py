"""Storage and speed: the same 400-turn chat on InMemorySaver, SqliteSaver and JsonlSaver.

    .venv/bin/python benchmarks/storage.py [--turns 400]

A chat graph with ``add_messages`` (``MessagesState``), one model node that
answers with ~340 bytes of text, user messages of ~340 bytes: 273 KB of
message text over 400 turns, the shape quoted in the issue. Prints, per saver:

* bytes stored per byte of raw message text (the file on disk; for
  InMemorySaver the serialized bytes it holds);
* mean wall time per turn (``invoke``) over the first and the last 50 turns, and the
  CPU time the saver itself spent in ``put`` / ``put_writes`` per turn (what a step
  costs the saver, without LangGraph's own work);
* ``get_state`` (warm, median of 9), a full ``get_state_history``, and ``get_state`` in a
  cold process (open + read + first state, measured inside a fresh interpreter);

then the same figures as ratios against SqliteSaver. Rows with ``DeltaChannel``
and with dict inputs (``{"role": "user", ...}`` instead of ``HumanMessage``)
show the two variants the README discusses.
"""

from __future__ import annotations

import argparse
import gc
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer

from langgraph_ctx import JsonlSaver

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "at",
    "from",
    "or",
    "an",
    "have",
    "not",
    "but",
    "which",
    "trip",
    "plan",
    "packing",
    "budget",
    "hotel",
    "train",
    "museum",
    "dinner",
    "weather",
]


def text(rng: random.Random, n: int = 340) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:n]


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(_messages_delta_reducer)]


def build(delta: bool, rng: random.Random):
    def chatbot(state):
        return {"messages": [AIMessage(content=text(rng))]}

    builder = StateGraph(DeltaState if delta else MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    return builder


def cold_get_state(kind: str, target: str, delta: bool) -> float:
    """Run in a fresh interpreter: ms from opening the saver to the first state.

    Imports are done and collected first (``gc.collect()``), for both savers: the
    first full collection after importing LangGraph costs tens of milliseconds and
    would otherwise land on whichever code allocates first.
    """
    graph_builder = build(delta, random.Random(0))
    gc.collect()
    t0 = time.perf_counter()
    if kind == "jsonl":
        saver: Any = JsonlSaver(target)
    else:
        saver = SqliteSaver(sqlite3.connect(target, check_same_thread=False))
    state = graph_builder.compile(checkpointer=saver).get_state(
        {"configurable": {"thread_id": "bench"}}
    )
    elapsed = time.perf_counter() - t0
    assert state.values["messages"]
    return elapsed * 1000


def memory_bytes(saver: InMemorySaver) -> int:
    total = 0
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for (_, cp), (_, meta), _ in checkpoints.values():
                total += len(cp) + len(meta)
    total += sum(len(v[1]) for v in saver.blobs.values())
    total += sum(len(w[2][1]) for writes in saver.writes.values() for w in writes.values())
    return total


def run(
    name: str,
    make: Callable[[Path], tuple[Any, Callable[[], int], str | None]],
    *,
    turns: int,
    delta: bool = False,
    dict_input: bool = False,
) -> dict[str, Any]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        saver, size, cold = make(Path(tmp))
        write_time = instrument_writes(saver)
        graph = build(delta, rng).compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "bench"}}
        raw = 0
        times, writes = [], []
        for _ in range(turns):
            user = text(rng)
            message: Any = {"role": "user", "content": user} if dict_input else HumanMessage(user)
            t0 = time.perf_counter()
            out = graph.invoke({"messages": [message]}, config)
            times.append(time.perf_counter() - t0)
            writes.append(write_time.pop())
            raw += len(user.encode()) + len(out["messages"][-1].content.encode())
        samples = []
        for _ in range(9):  # the median: one garbage collection can triple a single call
            t0 = time.perf_counter()
            graph.get_state(config)
            samples.append(time.perf_counter() - t0)
        get_state = statistics.median(samples)
        t0 = time.perf_counter()
        n_history = sum(1 for _ in graph.get_state_history(config))
        history = time.perf_counter() - t0
        cold_ms = None
        if cold is not None:
            command = [sys.executable, __file__, "--cold", cold, cold_target(saver, tmp)]
            command += ["--delta"] if delta else []
            runs = [
                float(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
                for _ in range(3)
            ]
            cold_ms = statistics.median(runs)
        stored = size()
    return {
        "name": name,
        "raw": raw,
        "stored": stored,
        "first50": 1000 * statistics.mean(times[:50]),
        "last50": 1000 * statistics.mean(times[-50:]),
        "write_first50": 1000 * statistics.mean(writes[:50]),
        "write_last50": 1000 * statistics.mean(writes[-50:]),
        "get_state": 1000 * get_state,
        "history": 1000 * history,
        "n_history": n_history,
        "cold": cold_ms,
    }


def instrument_writes(saver: Any) -> list[float]:
    """CPU time spent inside ``put`` / ``put_writes`` (background threads included).

    Returns a one-slot list whose value is reset each time it is popped.
    """
    acc = [0.0]
    lock = threading.Lock()
    for name in ("put", "put_writes"):
        original = getattr(saver, name)

        def timed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            t0 = time.thread_time()  # CPU time of this thread: not waiting for the GIL
            try:
                return _original(*args, **kwargs)
            finally:
                with lock:
                    acc[0] += time.thread_time() - t0

        setattr(saver, name, timed)

    class Slot(list):
        def pop(self, index: int = -1) -> float:  # type: ignore[override]
            with lock:
                value, acc[0] = acc[0], 0.0
            return value

    return Slot()


def cold_target(saver: Any, tmp: str) -> str:
    return saver.root_dir if isinstance(saver, JsonlSaver) else str(Path(tmp) / "bench.db")


def sqlite(tmp: Path):
    conn = sqlite3.connect(tmp / "bench.db", check_same_thread=False)
    saver = SqliteSaver(conn)

    def size() -> int:
        conn.commit()
        return sum(p.stat().st_size for p in tmp.glob("bench.db*"))

    return saver, size, "sqlite"


def jsonl(tmp: Path):
    saver = JsonlSaver(tmp / "chats")
    return saver, lambda: sum(p.stat().st_size for p in (tmp / "chats").glob("*.jsonl")), "jsonl"


def memory(tmp: Path):
    saver = InMemorySaver()
    return saver, lambda: memory_bytes(saver), None


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--cold", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--delta", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold:
        print(cold_get_state(args.cold[0], args.cold[1], args.delta))
        return
    rows = [
        run("InMemorySaver", memory, turns=args.turns),
        run("SqliteSaver", sqlite, turns=args.turns),
        run("JsonlSaver", jsonl, turns=args.turns),
        run("SqliteSaver + DeltaChannel", sqlite, turns=args.turns, delta=True),
        run("JsonlSaver + DeltaChannel", jsonl, turns=args.turns, delta=True),
        run("JsonlSaver, dict inputs", jsonl, turns=args.turns, dict_input=True),
    ]
    raw = rows[0]["raw"]
    print(
        f"{args.turns}-turn chat, {raw / 1000:.0f} KB of message text, "
        f"{rows[0]['n_history']} checkpoints\n"
    )
    print(
        "| saver | stored bytes | per raw byte | ms/turn, first 50 | ms/turn, last 50 "
        "| saver write CPU ms/turn, first 50 | last 50 "
        "| get_state ms | get_state_history ms | cold get_state ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['name']} | {r['stored']:,} | {r['stored'] / r['raw']:.2f}x "
            f"| {fmt(r['first50'])} | {fmt(r['last50'])} "
            f"| {fmt(r['write_first50'], '.2f')} | {fmt(r['write_last50'], '.2f')} "
            f"| {fmt(r['get_state'])} | {fmt(r['history'])} | {fmt(r['cold'])} |"
        )
    base = {r["name"]: r for r in rows}
    print("\nRatios against SqliteSaver (lower is better):\n")
    print(
        "| saver | storage | ms/turn, last 50 | saver write CPU, last 50 | get_state "
        "| get_state_history | cold get_state |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ref = base["SqliteSaver + DeltaChannel" if "DeltaChannel" in r["name"] else "SqliteSaver"]

        def ratio(key: str, r=r, ref=ref) -> str:
            if r[key] is None or ref[key] is None:
                return "n/a"
            return f"{r[key] / ref[key]:.3f}"

        print(
            f"| {r['name']} | {ratio('stored')} | {ratio('last50')} | {ratio('write_last50')} "
            f"| {ratio('get_state')} "
            f"| {ratio('history')} | {ratio('cold')} |"
        )


if __name__ == "__main__":
    main()
