"""Storage and speed: one 400-turn chat on InMemory-, Sqlite-, Postgres- and JsonlSaver.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/storage.py [--turns 400] [--agent-turns 60]
    PYTHONPATH=$PWD .venv/bin/python benchmarks/storage.py --quick     # smoke test, < 60 s

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

then the same figures as ratios against SqliteSaver. ``PostgresSaver`` runs on a
throwaway PostgreSQL cluster on loopback (``postgres_server.py``; its stored bytes are
its tables with their indexes and TOAST); when the cluster cannot start, a line says
why and the row is left out (``--quick`` leaves it out unless ``--postgres``).
Rows with ``DeltaChannel`` and with dict inputs (``{"role": "user", ...}`` instead
of ``HumanMessage``) show the two variants the README discusses.

A second workload is a tool-calling agent on both hosts, LangGraph's
``create_react_agent`` and LangChain's ``create_agent``: a scripted, deterministic
chat model calls one tool per turn, the tool returns ~6 KB of seeded, varied text,
then the model answers (user -> tool call -> tool result -> answer), 60 turns by
default. ``JsonlSaver`` and ``SqliteSaver`` are run in the same process; the table
gives bytes stored per byte of raw message text for each saver and host, and the
ratio between the savers. The goal of issue 11: JsonlSaver at most 3x the raw
message bytes on both hosts.
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
from postgres_server import PostgresServer, connect_kwargs, postgres_unavailable
from scripted_agent import ScriptedToolModel, raw_message_bytes, tool_output, user_text

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


def chatbot_node(rng: random.Random, *, asynchronous: bool = False) -> Callable[..., Any]:
    """The model node: answers every turn with ~340 bytes of seeded text.

    ``asynchronous``: an ``async def`` node, as in an app served with ``ainvoke``
    (a sync node would run in LangGraph's thread pool).
    """

    def chatbot(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(content=text(rng))]}

    async def achatbot(state: Any) -> dict[str, Any]:
        return chatbot(state)

    return achatbot if asynchronous else chatbot


def build(delta: bool, rng: random.Random, *, asynchronous: bool = False):
    builder = StateGraph(DeltaState if delta else MessagesState)
    builder.add_node("chatbot", chatbot_node(rng, asynchronous=asynchronous))
    builder.add_edge(START, "chatbot")
    return builder


def cold_get_state(kind: str, target: str, delta: bool) -> float:
    """Run in a fresh interpreter: ms from opening the saver to the first state.

    Imports are done and collected first (``gc.collect()``), for both savers: the
    first full collection after importing LangGraph costs tens of milliseconds and
    would otherwise land on whichever code allocates first.
    """
    graph_builder = build(delta, random.Random(0))
    if kind == "postgres":  # imported before the clock, like the other savers
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
    gc.collect()
    t0 = time.perf_counter()
    if kind == "jsonl":
        saver: Any = JsonlSaver(target)
    elif kind == "postgres":
        saver = PostgresSaver(psycopg.connect(target, **connect_kwargs()))
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
    cold: bool = True,
) -> dict[str, Any]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        saver, size, cold_kind = make(Path(tmp))
        cold_kind = cold_kind if cold else None
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
        if cold_kind is not None:
            command = [sys.executable, __file__, "--cold", cold_kind, cold_target(saver, tmp)]
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
    if isinstance(saver, JsonlSaver):
        return saver.root_dir
    return getattr(saver, "bench_url", None) or str(Path(tmp) / "bench.db")


POSTGRES: list[PostgresServer] = []
"""The cluster of this run, once started (`main` starts it when it can)."""

POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


def postgres(tmp: Path):
    """PostgresSaver on a fresh database; stored bytes: its tables, indexes and TOAST."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    (server,) = POSTGRES
    name = f"storage_{tmp.name}".lower()
    url = server.create_database(name)
    conn = psycopg.connect(url, **connect_kwargs())
    saver = PostgresSaver(conn)
    saver.setup()
    saver.bench_url = url  # type: ignore[attr-defined]  # for the cold-process column

    def size() -> int:
        query = "SELECT sum(pg_total_relation_size(t)) FROM unnest(%s::regclass[]) AS t"
        row = conn.execute(query, (list(POSTGRES_TABLES),)).fetchone()
        assert row is not None
        return int(next(iter(row.values())))

    return saver, size, "postgres"


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


AGENT_HOSTS = ("create_react_agent", "create_agent")
TOOL_RESULT_CHARS = 6000


def build_agent(host: str, saver: Any) -> Any:
    """The tool-calling agent of `host` with the scripted model and a ~6 KB tool."""
    from langchain_core.tools import tool

    @tool
    def lookup(query: str) -> str:
        """Look `query` up and return everything found."""
        return tool_output(11, query, TOOL_RESULT_CHARS)

    model = ScriptedToolModel(tool_name="lookup", seed=11)
    if host == "create_react_agent":
        import warnings

        with warnings.catch_warnings():  # deprecated in LangGraph 1.x, still widely used
            warnings.simplefilter("ignore")
            from langgraph.prebuilt import create_react_agent

            return create_react_agent(model, [lookup], checkpointer=saver)
    from langchain.agents import create_agent

    return create_agent(model, [lookup], checkpointer=saver)


def run_agent(host: str, saver_name: str, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        saver, size, _ = (jsonl if saver_name == "JsonlSaver" else sqlite)(Path(tmp))
        agent = build_agent(host, saver)
        config = {"configurable": {"thread_id": "bench"}}
        sizes, elapsed = [size()], 0.0
        for turn in range(1, turns + 1):
            t0 = time.perf_counter()
            out = agent.invoke({"messages": [HumanMessage(user_text(11, turn))]}, config)
            elapsed += time.perf_counter() - t0
            sizes.append(size())  # outside the timing
        messages = out["messages"]
        assert len(messages) == 4 * turns, (host, len(messages))
        tenth = max(turns // 10, 1)
        return {
            "host": host,
            "saver": saver_name,
            "raw": raw_message_bytes(messages),
            "stored": sizes[-1],
            "messages": len(messages),
            "ms_turn": 1000 * elapsed / turns,
            # Bytes stored by the last tenth of the turns against the second tenth (the
            # first holds the file's own start): 1.0 when the store grows by each turn's
            # messages, more when every turn stores the conversation again.
            "growth": (sizes[-1] - sizes[-1 - tenth]) / (sizes[2 * tenth] - sizes[tenth]),
        }


def agent_table(turns: int) -> None:
    rows = [
        run_agent(host, saver, turns)
        for host in AGENT_HOSTS
        for saver in ("JsonlSaver", "SqliteSaver")
    ]
    print(
        f"Tool-calling agent, {turns} turns (user -> tool call -> "
        f"~{TOOL_RESULT_CHARS // 1000} KB tool result -> answer), "
        f"{rows[0]['messages']} messages, {rows[0]['raw'] / 1000:.0f} KB of raw message text\n"
    )
    print(
        "| host | saver | raw message bytes | stored bytes | stored / raw "
        "| vs SqliteSaver | bytes a turn, last tenth / second tenth | ms/turn | goal <= 3x |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    by = {(r["host"], r["saver"]): r for r in rows}
    for r in rows:
        ratio = r["stored"] / r["raw"]
        ref = by[(r["host"], "SqliteSaver")]
        goal = ("met" if ratio <= 3 else "MISSED") if r["saver"] == "JsonlSaver" else "-"
        print(
            f"| {r['host']} | {r['saver']} | {r['raw']:,} | {r['stored']:,} | {ratio:.2f}x "
            f"| {r['stored'] / ref['stored']:.3f} | {r['growth']:.2f} | {r['ms_turn']:.1f} "
            f"| {goal} |"
        )


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=None, help="chat turns (default 400)")
    parser.add_argument(
        "--agent-turns", type=int, default=None, help="tool-agent turns (default 60)"
    )
    parser.add_argument(
        "--workload",
        choices=("all", "chat", "agent"),
        default="all",
        help="run only the chat workload or only the tool-agent workload",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 50 chat turns without the cold-process column, 12 agent turns",
    )
    parser.add_argument("--no-postgres", action="store_true", help="leave PostgresSaver out")
    parser.add_argument(
        "--postgres", action="store_true", help="with --quick: run PostgresSaver too"
    )
    parser.add_argument("--cold", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--delta", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold:
        print(cold_get_state(args.cold[0], args.cold[1], args.delta))
        return
    if args.turns is None:
        args.turns = 50 if args.quick else 400
    if args.agent_turns is None:
        args.agent_turns = 12 if args.quick else 60
    if args.workload in ("all", "chat"):
        skipped = postgres_unavailable()
        if args.no_postgres or (args.quick and not args.postgres):
            skipped = "--no-postgres" if args.no_postgres else "--quick (add --postgres)"
        if skipped is None:
            try:
                POSTGRES.append(PostgresServer().start())
            except RuntimeError as exc:
                skipped = str(exc)
        if skipped is not None:
            print(f"PostgresSaver row skipped: {skipped}\n")
        try:
            chat_table(args.turns, cold=not args.quick)
        finally:
            for server in POSTGRES:
                server.stop()
    if args.workload in ("all", "agent"):
        if args.workload == "all":
            print()
        agent_table(args.agent_turns)


def chat_table(turns: int, *, cold: bool) -> None:
    kw: dict[str, Any] = {"turns": turns, "cold": cold}
    rows = [
        run("InMemorySaver", memory, **kw),
        run("SqliteSaver", sqlite, **kw),
        run("JsonlSaver", jsonl, **kw),
        *([run("PostgresSaver", postgres, **kw)] if POSTGRES else []),
        run("SqliteSaver + DeltaChannel", sqlite, delta=True, **kw),
        run("JsonlSaver + DeltaChannel", jsonl, delta=True, **kw),
        run("JsonlSaver, dict inputs", jsonl, dict_input=True, **kw),
    ]
    raw = rows[0]["raw"]
    print(
        f"{turns}-turn chat, {raw / 1000:.0f} KB of message text, "
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
