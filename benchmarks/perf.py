"""Issue 16's "Must show", measured in one run: JsonlSaver against LangGraph's own savers.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/perf.py               # full run, ~30 min
    PYTHONPATH=$PWD .venv/bin/python benchmarks/perf.py --quick       # smoke test, < 60 s
    PYTHONPATH=$PWD .venv/bin/python benchmarks/perf.py --only chat400 --only fsync
    ... --markdown          # the tables as Markdown (the README's performance section)
    ... --json [PATH]       # machine-readable results (to stdout, or to PATH as well)

Sections (``--only NAME``, repeatable):

* ``chat400``, ``chat2000``: the chat graph of ``storage.py`` (``MessagesState``, one model
  node, ~340-byte messages); ``agent``: the 100-turn tool agent (``create_react_agent``
  with the scripted model of ``scripted_agent.py``, a ~6 KB tool result per turn). Per
  saver (``InMemorySaver``, ``SqliteSaver``, ``PostgresSaver``, ``JsonlSaver``,
  ``RedisLogSaver`` on a redis-server started on a free loopback port without persistence,
  its database emptied before each run), each run in its own process on fresh storage,
  the savers taking turns (run 1 of each, then run 2, ...):
  ms per turn (``invoke``, mean of the last 50 turns),
  RSS growth (resident memory after the last turn minus after the first, both after a
  garbage collection), ``get_state_history`` (newest 300 states at 2,000 turns, where
  SQLite's full history would take many minutes), and cold ``get_state``: a fresh
  interpreter, imports done and collected, then open the saver and read the first state
  (a row gives Redis's cold ``get_state`` against SQLite's too).
* ``concurrency``: 50 threads x 20 turns, all at once with ``ainvoke`` (an async model
  node): turns per second for ``InMemorySaver``, ``JsonlSaver``, ``AsyncSqliteSaver``,
  ``AsyncPostgresSaver`` (a pool of 10 connections) and ``RedisLogSaver`` (a
  redis-server started on a free loopback port, without persistence, stopped after); each
  run in its own process, the savers taking turns.
* ``memory``: 1,000 threads x 10 turns, then idle: Python objects still allocated
  (``tracemalloc`` after ``gc.collect()``, against a baseline taken after one warm-up
  thread) per thread, ``JsonlSaver`` and ``SqliteSaver``, each in its own process.
* ``budget``: a ``BudgetNode`` in a checkpointed graph (``JsonlSaver``) on a 2,000-message
  thread: the node's step on the state LangGraph read back through the saver, against
  ``count_tokens_approximately`` on the same messages, in alternating order (medians over
  the steps of the CPU time of the node's thread; wall time alongside). The graph and the
  timing are ``benchmarks/budget.py``'s ``measure``.
* ``fsync``: the 400-turn chat's first 200 turns on ``JsonlSaver(fsync=True)`` and
  ``fsync=False``: ``os.fsync`` / ``os.fdatasync`` calls per checkpoint (the functions are
  wrapped before ``langgraph_ctx`` is imported) and ms per turn.

Every figure is the median of 3 (runs of a workload in fresh processes on fresh storage;
three cold processes; three history reads; three concurrency runs), except the
2,000-turn chat's turns, run once (``--long-runs 3`` for three), and the cold opens of
``JsonlSaver`` and ``SqliteSaver``: five processes each, taking turns once every saver's
runs are done (`COLD_PAIR`), so that the load of the machine changing between two
savers' runs is not read as a difference between them. Ratios compare figures of
this one run. PostgreSQL is a throwaway cluster of Debian's binaries on loopback
(``postgres_server.py``); when it cannot start, one line says why and its columns read
"skipped". ``--quick`` shrinks every workload, runs each once and leaves out ``chat2000``
and PostgreSQL.

One module of ~650 lines: one method per section of the issue's list, each building
its table and goals, reads top to bottom; what runs inside the measured child
processes is in ``perf_process.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from time import perf_counter as _perf_counter

HERE = Path(__file__).resolve().parent
# This folder holds redis.py, which would shadow redis-py: search it last.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

FSYNC_CALLS = [0]
FSYNC_SECONDS = [0.0]  # wall time inside those calls


def _counted(function):  # type: ignore[no-untyped-def]
    def call(fd: int) -> None:
        FSYNC_CALLS[0] += 1
        t0 = _perf_counter()
        try:
            function(fd)
        finally:
            FSYNC_SECONDS[0] += _perf_counter() - t0

    return call


# Wrapped before langgraph_ctx is imported, so `from os import fsync` is counted too.
os.fsync = _counted(os.fsync)
if hasattr(os, "fdatasync"):
    os.fdatasync = _counted(os.fdatasync)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from perf_process import CHILD_TASKS, THREAD, run_child, workload_graph  # noqa: E402
from postgres_server import PostgresServer, postgres_unavailable  # noqa: E402

from langgraph_ctx import JsonlSaver  # noqa: E402

SAVERS = ("JsonlSaver", "SqliteSaver", "PostgresSaver", "InMemorySaver", "RedisLogSaver")
COLD_SAVERS = ("JsonlSaver", "SqliteSaver", "PostgresSaver", "RedisLogSaver")
COLD_PAIR = ("JsonlSaver", "SqliteSaver")
"""The savers of the cold goal: their cold processes alternate, after every saver's runs
(`Perf.cold_pair`), so that a change of the machine's load between two savers' runs
does not pass for a difference between them."""

FULL: dict[str, dict[str, Any]] = {
    "chat400": {"workload": "chat", "turns": 400, "history_limit": None},
    "chat2000": {"workload": "chat", "turns": 2000, "history_limit": 300, "long": True},
    "agent": {"workload": "agent", "turns": 100, "history_limit": None},
    "concurrency": {"threads": 50, "turns": 20},
    "memory": {"threads": 1000, "turns": 10},
    "budget": {"messages": 2000, "steps": 15},
    "fsync": {"turns": 200},
}
QUICK: dict[str, dict[str, Any]] = {
    "chat400": {"workload": "chat", "turns": 40, "history_limit": None},
    "agent": {"workload": "agent", "turns": 6, "history_limit": None},
    "concurrency": {"threads": 10, "turns": 5},
    "memory": {"threads": 20, "turns": 5},
    "budget": {"messages": 2000, "steps": 5},
    "fsync": {"turns": 20},
}
SECTIONS = tuple(FULL)

# The goals of issue 16 (ratios JSONL / reference; "max": at most, "min": at least).
GOALS: dict[str, tuple[str, float]] = {
    "ms_turn": ("max", 0.3),
    "cold": ("max", 1.0),
    "history": ("max", 0.2),
    "rss": ("max", 1.5),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def in_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run `spec` in a fresh ``perf.py --child`` process and return what it reports."""
    return run_child(__file__, spec)


# -- sections ------------------------------------------------------------------


class Run:
    """One invocation of perf.py: its options, the Postgres cluster and the results."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.quick: bool = args.quick
        self.repeats = 1 if args.quick else 3
        self.cold_repeats = 1 if args.quick else 5
        self.sizes = QUICK if args.quick else FULL
        self.pg: PostgresServer | None = None
        self.pg_skipped: str | None = None
        self.redis_server: Any = None
        self.redis_skipped: str | None = None
        self.results: dict[str, Any] = {}
        self.goals: list[dict[str, Any]] = []
        self.tables: list[dict[str, Any]] = []
        self._databases = 0

    def postgres(self) -> PostgresServer | None:
        """The cluster (started on first use), or None with `pg_skipped` saying why."""
        if self.pg is not None or self.pg_skipped is not None:
            return self.pg
        if self.args.no_postgres:
            self.pg_skipped = (
                "--quick (add --postgres to include it)" if self.quick else "--no-postgres"
            )
        else:
            self.pg_skipped = postgres_unavailable()
        if self.pg_skipped is None:
            try:
                self.pg = PostgresServer().start()
            except RuntimeError as exc:
                self.pg_skipped = str(exc)
        if self.pg_skipped is not None:
            log(f"PostgreSQL columns skipped: {self.pg_skipped}")
        return self.pg

    def redis(self) -> Any:
        """The workloads' redis-server (started on first use, loopback, no persistence),
        or None with `redis_skipped` saying why."""
        if self.redis_server is not None or self.redis_skipped is not None:
            return self.redis_server
        from tests.redis_server import RedisServer, redis_server_binary

        if redis_server_binary() is None:
            self.redis_skipped = "redis-server is not installed"
        else:
            try:
                self.redis_server = RedisServer(self.tmp / "redis-workloads").start()
            except RuntimeError as exc:
                self.redis_skipped = str(exc)
        if self.redis_skipped is not None:
            log(f"RedisLogSaver columns skipped: {self.redis_skipped}")
        return self.redis_server

    def database(self, label: str) -> str:
        assert self.pg is not None
        self._databases += 1
        return self.pg.create_database(f"perf_{self._databases}_{label.lower()}")

    def goal(self, name: str, value: float | None, kind: str, target: float, unit: str) -> None:
        met = None if value is None else (value <= target if kind == "max" else value >= target)
        self.goals.append(
            {
                "goal": name,
                "value": value,
                "target": f"{'<=' if kind == 'max' else '>='} {target:g}{unit}",
                "pass": met,
            }
        )

    def cold_pair(self, specs: dict[str, dict[str, Any]]) -> dict[str, list[float]]:
        """Cold ``get_state`` ms of each of `COLD_PAIR`, in fresh processes taking turns
        (JSONL, SQLite, JSONL, ...), ``self.cold_repeats`` each."""
        cold: dict[str, list[float]] = {saver: [] for saver in specs}
        for i in range(self.cold_repeats):
            for saver, spec in specs.items():
                log(f"cold get_state: {saver}, {i + 1}/{self.cold_repeats}")
                cold[saver].append(in_child({"task": "cold", **spec})["ms"])
        return cold

    # -- chat and agent workloads ----------------------------------------------
    def workload(self, section: str) -> None:
        size = self.sizes[section]
        runs = self.args.long_runs if size.get("long") else self.repeats
        savers = [
            s
            for s in SAVERS
            if (s != "PostgresSaver" or self.postgres() is not None)
            and (s != "RedisLogSaver" or self.redis() is not None)
        ]
        if size.get("long"):  # InMemorySaver would hold ~4 GB of states at 2,000 turns
            savers.remove("InMemorySaver")
        figures: dict[str, dict[str, Any]] = {}
        paired: dict[str, dict[str, Any]] = {}  # COLD_PAIR's cold specs, timed after the loop
        per_run: dict[str, list[dict[str, Any]]] = {saver: [] for saver in savers}
        history: dict[str, list[float]] = {}
        cold: dict[str, list[float]] = {}
        # The savers take turns (run 1 of each, then run 2, ...): the machine's speed
        # drifting over the minutes a section takes then reaches every saver's median alike.
        for run in range(runs):
            for saver in savers:
                target = self.target(saver, f"{section}-{run}")
                log(f"{section}: {saver}, run {run + 1}/{runs}, {size['turns']} turns")
                spec = {
                    "workload": size["workload"],
                    "saver": saver,
                    "target": target,
                    "turns": size["turns"],
                    "history_limit": size["history_limit"],
                    "history_runs": self.repeats if run == 0 else 0,
                }
                result = in_child({"task": "workload", **spec})
                per_run[saver].append(result)
                if run == 0:
                    history[saver] = result["history_ms"]
                    if saver in COLD_PAIR:
                        paired[saver] = spec  # its files stay: each run has its own
                    elif saver in COLD_SAVERS:  # a server's data: before the next run empties it
                        cold[saver] = [
                            in_child({"task": "cold", **spec})["ms"] for _ in range(self.repeats)
                        ]
        for saver in savers:
            runs_of = per_run[saver]
            figures[saver] = {
                "ms_turn": median([statistics.mean(r["turn_ms"][-50:]) for r in runs_of]),
                "rss": median([r["rss_growth"] / 2**20 for r in runs_of]),
                "history": median(history[saver]),
                "cold": median(cold[saver]) if saver in cold else None,
                "states": runs_of[0]["states"],
            }
        for saver, cold_ms in self.cold_pair(paired).items():
            figures[saver]["cold"] = median(cold_ms)
        turns = size["turns"]
        title = {
            "chat400": f"{turns}-turn chat",
            "chat2000": f"{turns}-turn chat",
            "agent": f"Tool agent (create_react_agent), {turns} turns",
        }[section]
        states = figures["JsonlSaver"]["states"]
        limit = size["history_limit"]
        history_label = f"get_state_history ms, newest {limit}" if limit else "get_state_history ms"
        metrics = [
            ("ms_turn", "ms per turn, last 50", ".2f"),
            ("cold", "cold get_state ms (fresh process)", ".1f"),
            ("history", history_label, ".0f"),
            ("rss", "RSS growth MB", ".1f"),
        ]
        rows = []
        for key, label, spec_fmt in metrics:
            row = [label]
            for saver in SAVERS:
                value = figures.get(saver, {}).get(key)
                row.append(cell(value, spec_fmt, saver in figures))
            jsonl = figures["JsonlSaver"][key]
            ratios = {ref: ratio(jsonl, figures.get(ref, {}).get(key)) for ref in SAVERS[1:3]}
            row += [cell(ratios["SqliteSaver"], ".2f"), cell(ratios["PostgresSaver"], ".2f")]
            goal_kind, goal = GOALS[key]
            row.append(f"{'<=' if goal_kind == 'max' else '>='} {goal:g}")
            met = None if ratios["SqliteSaver"] is None else ratios["SqliteSaver"] <= goal
            row.append(verdict(met))
            rows.append(row)
            self.goal(
                f"{section}: {label}, JSONL / SQLite", ratios["SqliteSaver"], goal_kind, goal, "x"
            )
        # Issue 16 item 4 (Redis's cold open from its last snapshot) sets no figure: the
        # ratio is shown for comparison, not counted among the goals.
        redis_cold = ratio(
            figures.get("RedisLogSaver", {}).get("cold"), figures.get("SqliteSaver", {}).get("cold")
        )
        cold_row = ["cold get_state, Redis / SQLite", *[""] * len(SAVERS)]
        cold_row += [cell(redis_cold, ".2f"), "", "", ""]
        rows.append(cold_row)
        self.tables.append(
            {
                "title": f"{title} ({states} states in the history)",
                "header": [
                    "metric",
                    *SAVERS,
                    "JSONL / SQLite",
                    "JSONL / Postgres",
                    "goal (JSONL / SQLite)",
                    "result",
                ],
                "rows": rows,
                "notes": (
                    [f"RedisLogSaver skipped: {self.redis_skipped}"] if self.redis_skipped else []
                ),
            }
        )
        self.results[section] = {"turns": turns, "savers": figures}

    def target(self, saver: str, label: str) -> str | None:
        directory = self.tmp / label
        directory.mkdir(exist_ok=True)
        if saver == "JsonlSaver":
            return str(directory / "chats")
        if saver == "SqliteSaver":
            return str(directory / "bench.db")
        if saver == "PostgresSaver":
            return self.database(f"{label}_{saver}")
        if saver == "RedisLogSaver":  # one thread id ("bench") per run: start empty
            import redis

            server = self.redis()
            client = redis.Redis.from_url(server.url)
            try:
                client.flushdb()
            finally:
                client.close()
            return str(server.url)
        return None

    # -- concurrency -----------------------------------------------------------
    def concurrency(self) -> None:
        size = self.sizes["concurrency"]
        threads, turns = size["threads"], size["turns"]
        from tests.redis_server import RedisServer, redis_server_binary

        kinds = ["InMemorySaver", "JsonlSaver", "AsyncSqliteSaver"]
        if self.postgres() is not None:
            kinds.append("AsyncPostgresSaver")
        redis_dir = self.tmp / "redis"
        server = None
        redis_skipped = None
        if redis_server_binary() is None:
            redis_skipped = "redis-server is not installed"
            log(f"RedisLogSaver column skipped: {redis_skipped}")
        else:
            server = RedisServer(redis_dir).start()
            kinds.append("RedisLogSaver")
        samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        self.cpu_ms: dict[str, list[float]] = {kind: [] for kind in kinds}
        try:
            # Each run in a fresh interpreter, the savers taking turns (as the cold opens):
            # a run in the process of another saver's runs inherited its heap and the
            # garbage collector's state (JSONL measured ~5% less after three InMemorySaver
            # runs than in a process of its own).
            for run in range(self.repeats):
                for kind in kinds:
                    log(f"concurrency: {kind}, run {run + 1}/{self.repeats}")
                    directory = self.tmp / f"concurrency-{kind}-{run}"
                    directory.mkdir()
                    spec = {"task": "concurrency", "saver": kind, "directory": str(directory),
                            "run": run, "threads": threads, "turns": turns}  # fmt: skip
                    if kind == "AsyncPostgresSaver":
                        spec["url"] = self.database(f"concurrency_{run}")
                    elif kind == "RedisLogSaver":
                        spec["url"] = server.url
                    result = in_child(spec)
                    samples[kind].append(result["turns_per_s"])
                    self.cpu_ms[kind].append(result["cpu_ms"])
        finally:
            if server is not None:
                server.stop()
        rates = {kind: median(values) for kind, values in samples.items()}
        memory = rates["InMemorySaver"]
        rows = []
        for kind in (
            "InMemorySaver",
            "JsonlSaver",
            "AsyncSqliteSaver",
            "AsyncPostgresSaver",
            "RedisLogSaver",
        ):
            rate = rates.get(kind)
            cpu = median(self.cpu_ms[kind]) if kind in self.cpu_ms else None
            rows.append(
                [
                    kind,
                    cell(rate, ".0f", kind in rates),
                    cell(ratio(rate, memory), ".2f", kind in rates),
                    cell(ratio(rate, rates.get("AsyncPostgresSaver")), ".2f", kind in rates),
                    cell(cpu, ".2f", kind in rates),
                ]
            )
        jsonl_ratio = ratio(rates["JsonlSaver"], memory)
        redis_ratio = ratio(rates.get("RedisLogSaver"), rates.get("AsyncPostgresSaver"))
        self.goal("ainvoke concurrency: JsonlSaver / InMemorySaver", jsonl_ratio, "min", 0.8, "x")
        self.goal(
            "ainvoke concurrency: RedisLogSaver / AsyncPostgresSaver", redis_ratio, "min", 2, "x"
        )
        self.tables.append(
            {
                "title": (
                    f"{threads} threads x {turns} turns at once with ainvoke "
                    f"({threads * turns} turns per run)"
                ),
                "header": [
                    "saver",
                    "turns/s",
                    "vs InMemorySaver",
                    "vs AsyncPostgresSaver",
                    "CPU ms/turn",
                ],
                "rows": rows,
                "notes": [
                    f"JsonlSaver / InMemorySaver: {cell(jsonl_ratio, '.2f')} (goal >= 0.8: "
                    f"{verdict(None if jsonl_ratio is None else jsonl_ratio >= 0.8)}); "
                    f"RedisLogSaver / AsyncPostgresSaver: {cell(redis_ratio, '.2f')} "
                    f"(goal >= 2: {verdict(None if redis_ratio is None else redis_ratio >= 2)})",
                    "CPU ms/turn: this process's CPU time over the run per turn (the graph, "
                    "the saver and its client; not the database server's): on a loaded "
                    "machine, where a single-threaded event loop gets less of the CPU than "
                    "a pool of threads, it compares the savers' cost where turns/s cannot.",
                ],
            }
        )
        self.results["concurrency"] = {
            "threads": threads,
            "turns": turns,
            "turns_per_s": rates,
            "cpu_ms_per_turn": {k: median(v) for k, v in self.cpu_ms.items()},
        }

    # -- idle-thread memory ------------------------------------------------------
    def memory(self) -> None:
        size = self.sizes["memory"]
        per: dict[str, float] = {}
        for saver in ("JsonlSaver", "SqliteSaver"):
            directory = self.tmp / f"memory-{saver}"
            directory.mkdir()
            log(f"memory: {saver}, {size['threads']} threads x {size['turns']} turns")
            spec = {"task": "memory", "saver": saver, "target": str(directory), **size}
            per[saver] = in_child(spec)["per_thread"] / 1024
        rows = [[saver, f"{kb:.1f}"] for saver, kb in per.items()]
        met = per["JsonlSaver"] <= 20
        rows[0] += ["<= 20", verdict(met)]
        rows[1] += ["", ""]
        self.goal("idle threads: JsonlSaver KB of Python objects per thread", per["JsonlSaver"],
                  "max", 20, " KB")  # fmt: skip
        self.tables.append(
            {
                "title": (
                    f"{size['threads']:,} threads x {size['turns']} turns, then idle: "
                    "Python objects retained per thread (tracemalloc)"
                ),
                "header": ["saver", "KB per thread", "goal", "result"],
                "rows": rows,
            }
        )
        self.results["memory"] = {**size, "kb_per_thread": per}

    # -- BudgetNode on a checkpointed thread ---------------------------------------
    def budget(self) -> None:
        from budget import measure

        size = self.sizes["budget"]
        r = measure(
            JsonlSaver(self.tmp / "budget"),
            messages=size["messages"],
            steps=size["steps"],
            log=log,
        )
        seen = r["messages"]
        value = r["ratio"]
        self.goal("BudgetNode step / count_tokens_approximately", value, "max", 1.5, "x")
        self.tables.append(
            {
                "title": (
                    f"BudgetNode in a checkpointed graph (JsonlSaver), {seen[0]:,} to "
                    f"{seen[-1]:,} messages, median of {len(seen)} steps; CPU time of the "
                    "node's thread, and wall time (LangGraph's background checkpoint write "
                    "no longer lands in it: see benchmarks/budget.py)"
                ),
                "header": ["step", "CPU ms", "ratio", "wall ms", "ratio (wall)", "goal", "result"],
                "rows": [
                    [
                        "BudgetNode",
                        f"{r['node_ms']:.2f}",
                        f"{value:.2f}",
                        f"{r['node_wall_ms']:.2f}",
                        f"{r['ratio_wall']:.2f}",
                        "<= 1.5",
                        verdict(value <= 1.5),
                    ],
                    [
                        "count_tokens_approximately",
                        f"{r['approx_ms']:.2f}",
                        "1.00",
                        f"{r['approx_wall_ms']:.2f}",
                        "1.00",
                        "",
                        "",
                    ],
                ],
            }
        )
        self.results["budget"] = r

    # -- fsync -----------------------------------------------------------------
    def fsync(self) -> None:
        turns = self.sizes["fsync"]["turns"]
        ms: dict[bool, list[float]] = {False: [], True: []}
        per_checkpoint: list[float] = []
        sync_ms: list[float] = []  # per turn, inside fdatasync
        syncs: list[float] = []  # fdatasyncs per turn
        floor: list[float] = []  # one write + fdatasync, ms (mean of a loop)
        for run in range(self.repeats):
            for fsync in (False, True):
                log(f"fsync: fsync={fsync}, run {run + 1}/{self.repeats}, {turns} turns")
                saver = JsonlSaver(self.tmp / f"fsync-{fsync}-{run}", fsync=fsync)
                puts = [0]

                def counted_put(
                    *args: Any, _put: Any = saver.put, _puts: list[int] = puts, **kwargs: Any
                ) -> Any:
                    _puts[0] += 1
                    return _put(*args, **kwargs)

                saver.put = counted_put  # type: ignore[method-assign]
                graph, make_input = workload_graph("chat", saver)
                graph.invoke(make_input(1), THREAD)  # creates the file (and fsyncs its folder)
                puts[0] = FSYNC_CALLS[0] = 0
                FSYNC_SECONDS[0] = 0.0
                t0 = time.perf_counter()
                for turn in range(2, turns + 1):
                    graph.invoke(make_input(turn), THREAD)
                ms[fsync].append(1000 * (time.perf_counter() - t0) / (turns - 1))
                calls_now = FSYNC_CALLS[0]
                # A step's pending writes may land after its checkpoint (LangGraph does not
                # order them): flushed on close, here, not in the next run's figures.
                saver.close()
                FSYNC_CALLS[0] = calls_now
                if fsync:
                    per_checkpoint.append(FSYNC_CALLS[0] / puts[0])
                    sync_ms.append(1000 * FSYNC_SECONDS[0] / (turns - 1))
                    syncs.append(FSYNC_CALLS[0] / (turns - 1))
                    floor.append(fdatasync_ms(self.tmp / f"fsync-floor-{run}", FSYNC_CALLS[0]))
                else:
                    assert FSYNC_CALLS[0] == 0, "fsync=False called fsync"
        off, on = median(ms[False]), median(ms[True])
        calls = median(per_checkpoint)
        slowdown = on / off
        in_sync = median(sync_ms)
        one_sync = median(floor)
        # What fsync=True cannot go below while every put returns durable: LangGraph
        # chains a turn's puts (each waits for the previous), so their fdatasyncs add up.
        per_turn = median(syncs)
        bound = (off + per_turn * one_sync) / off
        self.goal("fsync=True: fsyncs per checkpoint", calls, "max", 1, "")
        self.goal("fsync=True: ms per turn / fsync=False", slowdown, "max", 1.2, "x")
        self.tables.append(
            {
                "title": f"JsonlSaver fsync=True, chat turns 2 to {turns}",
                "header": ["figure", "fsync=False", "fsync=True", "ratio", "goal", "result"],
                "rows": [
                    ["ms per turn", f"{off:.2f}", f"{on:.2f}", f"{slowdown:.3f}", "<= 1.2",
                     verdict(slowdown <= 1.2)],
                    ["fsyncs per checkpoint", "0", f"{calls:.2f}", "", "<= 1", verdict(calls <= 1)],
                    ["ms per turn inside fdatasync", "0", f"{in_sync:.2f}", "", "", ""],
                    ["one write + fdatasync, mean ms (a loop, same file system)", "",
                     f"{one_sync:.2f}", "", "", ""],
                    [f"floor: fsync=False + {per_turn:.1f} fdatasyncs a turn", f"{off:.2f}",
                     f"{off + per_turn * one_sync:.2f}", f"{bound:.3f}", "", ""],
                ],
            }
        )  # fmt: skip
        self.results["fsync"] = {
            "turns": turns,
            "ms_off": off,
            "ms_on": on,
            "fsyncs": calls,
            "ms_in_fdatasync": in_sync,
            "fdatasync_ms": one_sync,
            "floor_ratio": bound,
        }


def fdatasync_ms(folder: Path, count: int) -> float:
    """Mean ms of one append of a ~700-byte line and its ``fdatasync``, ``count`` times on
    a fresh file in ``folder``: what the disk asks of every durable append (the loop
    is system calls only, as a C loop would be; the mean, as a turn's fdatasyncs add up)."""
    folder.mkdir(parents=True, exist_ok=True)
    sync = getattr(os, "fdatasync", os.fsync)
    line = b"x" * 699 + b"\n"
    fd = os.open(folder / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for _ in range(max(count, 20)):
            os.write(fd, line)
            t0 = time.perf_counter()
            sync(fd)
            times.append(1000 * (time.perf_counter() - t0))
    finally:
        os.close(fd)
    FSYNC_CALLS[0] = 0
    return statistics.mean(times)


def ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def cell(value: float | None, spec: str, present: bool = True) -> str:
    if not present:
        return "skipped"
    return "n/a" if value is None else format(value, spec)


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("PASS" if met else "FAIL")


# -- output ------------------------------------------------------------------------


def render(table: dict[str, Any], markdown: bool) -> str:
    header, rows = table["header"], table["rows"]
    lines = [f"**{table['title']}**" if markdown else table["title"], ""]
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        fmt_row = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
        lines.append(fmt_row.format(*header))
        lines.append("  ".join("-" * w for w in widths))
        lines += [fmt_row.format(*row) for row in rows]
    for note in table.get("notes", []):
        lines += ["", note]
    return "\n".join(lines)


def summary(goals: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [
        [g["goal"], "n/a" if g["value"] is None else f"{g['value']:.3f}", g["target"],
         verdict(g["pass"])]
        for g in goals
    ]  # fmt: skip
    return {"title": "Issue 16 goals", "header": ["goal", "measured", "target", "result"],
            "rows": rows}  # fmt: skip


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load {load:.1f} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: small, < 60 s")
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, metavar="NAME",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )  # fmt: skip
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH",
        help="machine-readable results: to stdout (instead of tables), or to PATH as well",
    )  # fmt: skip
    parser.add_argument("--no-postgres", action="store_true", help="leave PostgreSQL out")
    parser.add_argument("--postgres", action="store_true", help="with --quick: run PostgreSQL too")
    parser.add_argument(
        "--long-runs", type=int, default=1, help="runs of the 2,000-turn chat (default 1)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILD_TASKS[spec["task"]](spec)))
        return
    if args.quick and not args.postgres:
        args.no_postgres = True
    sections = [s for s in (args.only or SECTIONS) if s in (QUICK if args.quick else FULL)]
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="langgraph-ctx-perf-"))
    run = Run(args, tmp)
    try:
        for section in sections:
            method = getattr(run, section if section in ("concurrency", "memory", "budget",
                                                          "fsync") else "workload")  # fmt: skip
            method(*(() if method.__name__ != "workload" else (section,)))
    finally:
        if run.pg is not None:
            run.pg.stop()
        if run.redis_server is not None:
            run.redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    results = {
        "machine": machine(),
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "postgres_skipped": run.pg_skipped,
        "sections": run.results,
        "goals": run.goals,
    }
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps(results, indent=2))
    if args.json == "-":
        print(json.dumps(results, indent=2))
        return
    flags = (["--quick"] if args.quick else []) + [f"--only {s}" for s in args.only or ()]
    flags += ["--no-postgres"] if args.no_postgres and not args.quick else []
    command = " ".join(["benchmarks/perf.py", *flags])
    print(f"`{command}`: {machine()}; {results['seconds']:.0f} s.")
    if run.pg_skipped:
        print(f"\nPostgreSQL columns skipped: {run.pg_skipped}.")
    for table in [*run.tables, summary(run.goals)]:
        print()
        print(render(table, args.markdown))


if __name__ == "__main__":
    main()
