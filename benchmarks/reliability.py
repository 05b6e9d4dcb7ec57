"""Reliability: crashes, bit flips, tampered payloads and `verify` time, in one run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reliability.py            # full
    PYTHONPATH=$PWD .venv/bin/python benchmarks/reliability.py --quick    # smoke, < 60 s

Four experiments, each printing one table (issue 12):

1. **kill -9.** A writer process runs chat turns on a `JsonlSaver` thread and prints
   ``ack <n>`` after each ``invoke`` returns; this process kills it with SIGKILL at a
   random moment, reopens the thread and counts acknowledged turns whose user message is
   missing. The next trial continues the same thread (so torn tails are repaired and
   appended after, as in real restarts).
2. **Single-bit flips.** One random bit of one random middle line of a finished thread is
   flipped; a fresh saver reads every checkpoint (``list``, values, metadata, pending
   writes). A flip is *detected* (a named error or a warning from langgraph-ctx),
   *crashed* (some other exception), *harmless* (everything reads back identical) or
   *SILENT* (it reads back different and nothing said so). ``verify`` is run on each
   flipped file too.
3. **Tampered payloads.** (Each tampered line gets a valid checksum, as an attacker would
   write it: the checksum catches accidents, not attacks.) A canary class (its ``__init__``
   writes a file) and commands that touch a marker file (``os.system``, ``subprocess.run`` /
   ``Popen``, ``builtins.eval`` / ``exec``) are written into stored data the way an attacker
   with write access to the store would: for `JsonlSaver` through every tag of its format
   (``{"model": ...}``, ``{"serde": ["msgpack" | "json" | "pickle", ...]}``) in checkpoint
   values, pending writes, metadata and message bodies; for `SqliteSaver` as the blobs its
   default `JsonPlusSerializer` decodes (msgpack ext types naming module + class [+ method],
   ``lc`` constructor JSON, pickle) in the checkpoint and writes tables. A fresh saver then
   reads the thread; we count objects constructed (canary fired), code executed (marker
   written) and errors raised. Only ``touch`` runs, inside a temp dir.
4. **verify time** on threads of 1k / 4k / 16k checkpoints (``langgraph-ctx verify`` in a
   subprocess, a timeout per size), with seconds per 1k checkpoints to show how it
   scales.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import functools
import io
import json
import logging
import os
import pickle
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver, LangGraphCtxError
from langgraph_ctx.codec import dumps_line

THREAD: RunnableConfig = {"configurable": {"thread_id": "rel"}}


class NoteState(MessagesState):
    note: dict[str, Any]


def build_graph(saver: Any, seed: int = 0) -> Any:
    """A chat graph whose model node also writes a small non-message channel (``note``)."""
    rng = random.Random(seed)

    def model(state: NoteState) -> dict[str, Any]:
        n = len(state["messages"])
        text = " ".join(rng.choice(["plan", "trip", "budget", "hotel", "train"]) for _ in range(40))
        return {"messages": [AIMessage(f"reply {n}: {text}")], "note": {"turn": n, "t": text[:40]}}

    builder = StateGraph(NoteState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    return builder.compile(checkpointer=saver)


@contextmanager
def quiet() -> Iterator[list[warnings.WarningMessage]]:
    """Collect warnings; silence LangGraph's serializer logger (it logs each blocked type)."""
    logger = logging.getLogger("langgraph.checkpoint.serde.jsonplus")
    level, logger.level = logger.level, logging.CRITICAL
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
    finally:
        logger.setLevel(level)


# ------------------------------------------------------------------------ 1. kill -9


def writer(root: str) -> None:
    """The child of the kill -9 trials: turns forever, one ``ack <n>`` line per turn."""
    graph = build_graph(JsonlSaver(root))
    state = graph.get_state(THREAD).values
    n = sum(1 for m in state.get("messages", []) if isinstance(m, HumanMessage))
    while True:
        n += 1
        graph.invoke({"messages": [HumanMessage(f"user turn {n}")]}, THREAD)
        print(f"ack {n}", flush=True)


def kill_trials(trials: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    acked: set[int] = set()
    lost: set[int] = set()
    reopen_errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(trials):
            child = subprocess.Popen(
                [sys.executable, __file__, "--writer", tmp],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            first = child.stdout.readline()  # the writer is up and has finished one turn
            time.sleep(rng.uniform(0.0, 0.5))
            child.send_signal(signal.SIGKILL)
            rest = child.stdout.read()
            child.wait()
            for line in [first, *rest.splitlines()]:
                if line.startswith("ack "):
                    acked.add(int(line.split()[1]))
            try:
                with quiet():
                    state = build_graph(JsonlSaver(tmp)).get_state(THREAD).values
                present = {
                    int(str(m.content).split()[-1])
                    for m in state.get("messages", [])
                    if isinstance(m, HumanMessage)
                }
            except Exception:
                reopen_errors += 1
                present = set()
            lost |= acked - present
    return {
        "trials": trials,
        "acked": len(acked),
        "lost": len(lost),
        "reopen_errors": reopen_errors,
    }


# --------------------------------------------------------------------- 2. bit flips


def run_verify(directory: Path) -> int:
    """``langgraph-ctx -d <directory> verify``, in this process: its exit code."""
    from langgraph_ctx.cli import main as cli  # the console script's entry point

    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
        quiet(),
    ):
        try:
            cli(["-d", str(directory), "verify"])
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0


def read_all(root: Path) -> tuple[list[Any], list[str]]:
    """Everything a fresh saver reads back: every checkpoint, its metadata and writes."""
    with quiet() as caught:
        saver = JsonlSaver(root)
        rows = [
            (
                t.config["configurable"]["checkpoint_id"],
                t.checkpoint["channel_values"],
                t.checkpoint["channel_versions"],
                t.metadata,
                t.pending_writes,
                (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
            )
            for t in saver.list(THREAD)
        ]
    ours = [
        str(w.message)
        for w in caught
        # langgraph-ctx's own warning classes (torn line, corrupt line skipped, ...)
        if w.category.__module__.startswith("langgraph_ctx")
    ]
    return rows, ours


def line_kind(raw: bytes) -> str:
    try:
        return str(json.loads(raw).get("t"))
    except ValueError:
        return "?"


def bit_flips(trials: int, turns: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    counts = dict.fromkeys(("tried", "named error", "warning", "crashed", "harmless", "SILENT"), 0)
    verify_caught = verify_caught_silent = 0
    crash_types: dict[str, int] = {}
    crash_examples: list[str] = []
    silent_kinds: dict[str, int] = {}  # the kind of line ("ckpt", "msg", ...) flipped
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        graph = build_graph(JsonlSaver(base))
        for n in range(1, turns + 1):
            graph.invoke({"messages": [HumanMessage(f"user turn {n}")]}, THREAD)
        reference, _ = read_all(base)
        (name,) = [p.name for p in base.glob("*.jsonl")]
        lines = (base / name).read_bytes().splitlines(keepends=True)
        for trial in range(trials):
            counts["tried"] += 1
            target = Path(tmp) / f"flip{trial}"
            target.mkdir()
            i = rng.randrange(1, len(lines) - 1)  # a middle line: not the header, not the tail
            line = bytearray(lines[i])
            pos = rng.randrange(len(line) - 1)  # not the newline
            line[pos] ^= 1 << rng.randrange(8)
            (target / name).write_bytes(b"".join([*lines[:i], bytes(line), *lines[i + 1 :]]))
            try:
                rows, ours = read_all(target)
            except LangGraphCtxError:
                outcome = "named error"
            except Exception as exc:
                outcome = "crashed"
                crash_types[type(exc).__name__] = crash_types.get(type(exc).__name__, 0) + 1
                was = lines[i][max(0, pos - 20) : pos + 20].decode("utf-8", "replace")
                crash_examples.append(
                    f"{type(exc).__name__}: {str(exc)[:80]} (line {i + 1}, near {was!r})"
                )
            else:
                if ours:
                    outcome = "warning"
                elif rows == reference:
                    outcome = "harmless"
                else:
                    outcome = "SILENT"
            counts[outcome] += 1
            if outcome == "SILENT":
                kind = line_kind(lines[i])
                silent_kinds[kind] = silent_kinds.get(kind, 0) + 1
            flagged = run_verify(target) != 0
            verify_caught += flagged
            verify_caught_silent += flagged and outcome == "SILENT"
            shutil.rmtree(target)
    counts["detected"] = counts["named error"] + counts["warning"]
    return {
        **counts,
        "verify": verify_caught,
        "verify_silent": verify_caught_silent,
        "crash_types": crash_types,
        "crash_examples": crash_examples,
        "silent_kinds": silent_kinds,
        "lines": len(lines),
    }


# -------------------------------------------------------------- 3. tampered payloads

CANARY_MODULE = '''
from pathlib import Path


class Canary:
    """Constructing one writes a file: proof that stored data built an object."""

    def __init__(self, path="", *args, **kwargs):
        Path(path or kwargs.get("path", "")).write_text("constructed")
'''

Payload = tuple[str, str, Any]
"""(name, kind, body): kind is msgpack (an ``ormsgpack.Ext``), json, pickle or model."""


class _Reduce:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


def ext(code: int, *parts: Any) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(list(parts)))


def payloads(canary: str, marker: str) -> list[Payload]:
    """Every payload, aimed at this trial's canary file and marker file."""
    touch = f"touch {marker}"
    py = f"__import__('os').system({touch!r})"
    lc2 = {"lc": 2, "type": "constructor"}
    return [
        # LangGraph's msgpack ext codes: 0 one arg, 1 args, 2 kwargs, 3 a method, 5 pydantic
        ("msgpack: Canary(path)", "msgpack", ext(0, "bench_canary", "Canary", canary)),
        ("msgpack: Canary(*args)", "msgpack", ext(1, "bench_canary", "Canary", [canary])),
        (
            "msgpack: Canary(**kwargs)",
            "msgpack",
            ext(2, "bench_canary", "Canary", {"path": canary}),
        ),
        ("msgpack: os.system", "msgpack", ext(1, "os", "system", [touch])),
        ("msgpack: subprocess.run", "msgpack", ext(1, "subprocess", "run", [["touch", marker]])),
        ("msgpack: subprocess.Popen", "msgpack", ext(0, "subprocess", "Popen", ["touch", marker])),
        ("msgpack: builtins.eval", "msgpack", ext(0, "builtins", "eval", py)),
        ("msgpack: builtins.exec", "msgpack", ext(0, "builtins", "exec", py)),
        ("msgpack: method eval.__call__", "msgpack", ext(3, "builtins", "eval", py, "__call__")),
        (
            "msgpack: pydantic Canary",
            "msgpack",
            ext(5, "bench_canary", "Canary", {"path": canary}, "model_validate_json"),
        ),
        # LangChain-style constructor JSON ("json" payloads go through `_reviver`)
        ("json lc2: Canary", "json", {**lc2, "id": ["bench_canary", "Canary"], "args": [canary]}),
        ("json lc2: os.system", "json", {**lc2, "id": ["os", "system"], "args": [touch]}),
        ("json lc2: eval", "json", {**lc2, "id": ["builtins", "eval"], "args": [py]}),
        (
            "json lc1: Canary",
            "json",
            {
                "lc": 1,
                "type": "constructor",
                "id": ["bench_canary", "Canary"],
                "kwargs": {"path": canary},
            },
        ),
        ("pickle: os.system", "pickle", _Reduce(touch)),
        # langgraph-ctx's own tag (JsonlSaver only)
        (
            "model tag: Canary",
            "model",
            {"model": ["bench_canary", "Canary"], "json": {"path": canary}},
        ),
        (
            "model tag: via langgraph_ctx prefix",
            "model",
            {"model": ["langgraph_ctx.codec", "importlib.import_module"], "json": "os"},
        ),
    ]


def typed(kind: str, body: Any) -> tuple[str, bytes]:
    """A payload as LangGraph's serializer stores it: (type, bytes)."""
    if kind == "msgpack":
        return "msgpack", ormsgpack.packb(body)
    if kind == "json":
        return "json", json.dumps(body).encode()
    return "pickle", pickle.dumps(body)


def our_encoding(kind: str, body: Any) -> Any:
    if kind == "model":
        return body
    type_, raw = typed(kind, body)
    return {"serde": [type_, base64.b64encode(raw).decode()]}


def tamper_jsonl(lines: list[dict[str, Any]], where: str, kind: str, body: Any) -> bool:
    """Put the payload into the newest line of the kind `where` names; False if none fits."""
    enc = our_encoding(kind, body)
    for obj in reversed(lines):
        if where == "checkpoint value" and obj["t"] == "ckpt" and "note" in obj.get("values", {}):
            obj["values"]["note"][1] = enc
            return True
        if where == "pending write" and obj["t"] == "writes":
            for w in obj["w"]:
                if w[1] == "note":
                    w[2] = enc
                    return True
        if where == "metadata" and obj["t"] == "ckpt":
            obj.pop("meta", None)
            obj.pop("meta_delta", None)
            if kind == "model":
                obj["meta"] = {"source": "loop", "step": 1, "parents": {}, "x": enc}
            else:
                obj["meta_serde"] = enc["serde"]
            return True
        if where == "message body" and obj["t"] == "msg" and "msg" in obj:
            body_ = obj.pop("msg")
            if kind == "model":
                obj["msg"] = {**body_, "additional_kwargs": {"x": enc}}
            else:
                obj.update(type=body_["type"], id=body_.get("id"), serde=enc["serde"])
            return True
    return False


def passthrough(code: int, data: bytes) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, data)


def tamper_sqlite(db: Path, where: str, kind: str, body: Any) -> bool:
    """Replace the newest checkpoint's ``note`` value, or a ``note`` write, by the payload."""
    if kind == "model":
        return False  # not a format SqliteSaver has
    conn = sqlite3.connect(db)
    try:
        if where == "checkpoint value":
            row = conn.execute(
                "SELECT rowid, type, checkpoint FROM checkpoints"
                " ORDER BY checkpoint_id DESC LIMIT 1"
            ).fetchone()
            assert row[1] == "msgpack", row[1]
            if kind == "msgpack":  # the real checkpoint, its ext values kept as they are
                cp = ormsgpack.unpackb(
                    row[2], ext_hook=passthrough, option=ormsgpack.OPT_NON_STR_KEYS
                )
                cp["channel_values"]["note"] = body
                new = ("msgpack", ormsgpack.packb(cp, option=ormsgpack.OPT_NON_STR_KEYS))
            else:  # a whole checkpoint in that format, the payload as a channel value
                cp = {
                    "v": 4,
                    "id": "x",
                    "ts": "2026-01-01T00:00:00+00:00",
                    "channel_values": {"note": body},
                    "channel_versions": {"note": "1"},
                    "versions_seen": {},
                }
                new = typed(kind, cp)
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE rowid = ?", (*new, row[0])
            )
        elif where == "pending write":
            row = conn.execute(
                "SELECT rowid FROM writes WHERE channel = 'note'"
                " ORDER BY checkpoint_id DESC LIMIT 1"
            ).fetchone()
            conn.execute(
                "UPDATE writes SET type = ?, value = ? WHERE rowid = ?",
                (*typed(kind, body), row[0]),
            )
        else:
            return False  # metadata is plain JSON (json.loads), messages live inside values
        conn.commit()
    finally:
        conn.close()
    return True


def open_sqlite(db: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(db, check_same_thread=False))


def read_everything(saver: Any) -> None:
    for t in saver.list(THREAD):
        repr(t.checkpoint["channel_values"])
        repr(t.pending_writes)
        repr(t.metadata)


def jsonl_text(lines: list[dict[str, Any]]) -> str:
    """Lines written back as the saver writes them (compact, UTF-8, each with its checksum
    recomputed by the codec's own `dumps_line`): untouched lines keep their exact bytes.

    A per-line checksum is not a MAC: an attacker with write access rewrites it. So the
    tampered lines carry a valid one, and this experiment measures what decoding does
    with hostile content, not the checksum. (The bit flips above do not recompute it.)"""
    return b"".join(dumps_line(x) for x in lines).decode("utf-8")


def tampered(seed: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    where_all = ("checkpoint value", "pending write", "metadata", "message body")
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        (tmp / "mods").mkdir()
        (tmp / "mods" / "bench_canary.py").write_text(CANARY_MODULE)
        sys.path.insert(0, str(tmp / "mods"))
        # the two clean threads the payloads are written into
        jsonl_base = tmp / "jsonl"
        sqlite_base = tmp / "base.db"
        for saver in (
            JsonlSaver(jsonl_base),
            SqliteSaver(sqlite3.connect(sqlite_base, check_same_thread=False)),
        ):
            graph = build_graph(saver, seed)
            for n in range(1, 4):
                graph.invoke({"messages": [HumanMessage(f"user turn {n}")]}, THREAD)
            if isinstance(saver, SqliteSaver):
                saver.conn.commit()
                saver.conn.close()
        (name,) = [p.name for p in jsonl_base.glob("*.jsonl")]
        clean = [json.loads(x) for x in (jsonl_base / name).read_text().splitlines()]
        # control: the clean thread written back the way tampered ones are must read fine
        control = tmp / "control"
        control.mkdir()
        (control / name).write_text(jsonl_text(clean), encoding="utf-8")
        try:
            with quiet():
                read_everything(JsonlSaver(control))
            control_error = None
        except Exception as exc:
            control_error = f"{type(exc).__name__}: {exc}"
        trial = 0
        for saver_name in ("JsonlSaver", "SqliteSaver"):
            row = results[saver_name] = {
                "tried": 0,
                "constructed": 0,
                "executed": 0,
                "errors": 0,
                "accepted": 0,
                "hits": [],
                "by_place": {},
            }
            for where in where_all:
                for pname, kind, _ in payloads("", ""):
                    trial += 1
                    canary = tmp / f"canary{trial}"
                    marker = tmp / f"marker{trial}"
                    body = next(b for n, _, b in payloads(str(canary), str(marker)) if n == pname)
                    if saver_name == "JsonlSaver":
                        lines = copy.deepcopy(clean)
                        if not tamper_jsonl(lines, where, kind, body):
                            continue
                        root = tmp / f"j{trial}"
                        root.mkdir()
                        (root / name).write_text(jsonl_text(lines), encoding="utf-8")
                        open_saver: Callable[[], Any] = functools.partial(JsonlSaver, root)
                    else:
                        db = tmp / f"s{trial}.db"
                        shutil.copy(sqlite_base, db)
                        if not tamper_sqlite(db, where, kind, body):
                            db.unlink()
                            continue
                        open_saver = functools.partial(open_sqlite, db)
                    row["tried"] += 1
                    error = False
                    try:
                        with quiet():
                            read_everything(open_saver())
                    except Exception:
                        error = True
                    deadline = time.monotonic() + 1.0  # Popen runs touch in the background
                    while "Popen" in pname and not marker.exists() and time.monotonic() < deadline:
                        time.sleep(0.02)
                    fired, ran = canary.exists(), marker.exists()
                    row["constructed"] += fired
                    row["executed"] += ran
                    row["errors"] += error
                    row["accepted"] += not (fired or ran or error)
                    place = row["by_place"].setdefault((kind, where), [0, 0, 0, 0])
                    place[0] += 1
                    place[1] += fired
                    place[2] += ran
                    place[3] += error
                    if fired or ran:
                        row["hits"].append(f"{pname} in {where}")
        sys.path.remove(str(tmp / "mods"))
        results["JsonlSaver"]["control"] = control_error
        results["JsonlSaver"]["control_identical"] = (control / name).read_bytes() == (
            jsonl_base / name
        ).read_bytes()
    return results


# ------------------------------------------------------------------ 4. verify time


def build_checkpoints(root: Path, n: int) -> None:
    """A thread of `n` checkpoints written with ``put`` (a message every 4th checkpoint)."""
    saver = JsonlSaver(root)
    config: Any = {"configurable": {"thread_id": "rel", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    messages: list[Any] = []
    for i in range(n):
        checkpoint = copy.copy(checkpoint)
        checkpoint["id"] = str(uuid.UUID(int=(int(time.time() * 1e6) << 64) | i))
        changed: dict[str, str | int | float] = {"counter": f"{i + 1:08d}"}
        values = {"counter": i}
        if i % 4 == 0:
            messages = [*messages, HumanMessage(f"message {i}", id=f"m{i}")]
            values["messages"] = messages  # type: ignore[assignment]
            changed["messages"] = f"{i + 1:08d}"
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = {**checkpoint["channel_versions"], **changed}
        config = saver.put(config, checkpoint, {"source": "loop", "step": i}, changed)


def verify_child(root: str) -> None:
    """Run ``langgraph-ctx verify`` in this process, after a warm-up on an empty directory
    (interpreter start and imports are not verify's work), and print the seconds and the
    exit code of the real run."""
    with tempfile.TemporaryDirectory() as empty:
        run_verify(Path(empty))
    t0 = time.perf_counter()
    code = run_verify(Path(root))
    print(f"{time.perf_counter() - t0} {code}")


def verify_times(sizes: list[int], timeout: float) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            root = Path(tmp) / f"n{n}"
            t0 = time.perf_counter()
            build_checkpoints(root, n)
            built = time.perf_counter() - t0
            size = sum(p.stat().st_size for p in root.glob("*.jsonl"))
            try:
                done = subprocess.run(
                    [sys.executable, __file__, "--verify-child", str(root)],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=True,
                )
                elapsed, code = done.stdout.split()
                seconds: float | None = float(elapsed)
                status = "ok" if code == "0" else f"exit {code}"
            except subprocess.TimeoutExpired:
                seconds, status = None, f"timeout ({timeout:.0f} s)"
            rows.append(
                {"n": n, "size": size, "built": built, "seconds": seconds, "status": status}
            )
    return rows


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: small counts, < 60 s")
    parser.add_argument("--trials", type=int, default=None, help="kill -9 trials (50; quick 10)")
    parser.add_argument("--flips", type=int, default=None, help="bit flips (1000; quick 100)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="verify sizes")
    parser.add_argument("--timeout", type=float, default=120.0, help="verify timeout per size (s)")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--writer", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--verify-child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(args.writer)
        return
    if args.verify_child:
        verify_child(args.verify_child)
        return
    trials = args.trials or (10 if args.quick else 50)
    flips = args.flips or (100 if args.quick else 1000)
    sizes = args.sizes or ([200, 800] if args.quick else [1000, 4000, 16000])

    k = kill_trials(trials, args.seed)
    print(f"## kill -9 during turns (JsonlSaver, {trials} trials on one thread)\n")
    print(
        "| trials | acknowledged turns | acknowledged turns lost | lost / acknowledged "
        "| reopen errors |"
    )
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {k['trials']} | {k['acked']} | {k['lost']} | {k['lost'] / max(k['acked'], 1):.3f} "
        f"| {k['reopen_errors']} |"
    )

    b = bit_flips(flips, 20, args.seed)
    print(f"\n## Single-bit flips (JsonlSaver, a {b['lines']}-line thread, one flip per trial)\n")
    print(
        "| tried | detected | of which named error | of which warning | crashed, other exception "
        "| harmless | SILENT | silent / tried | verify flagged | verify flagged, of the SILENT |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {b['tried']} | {b['detected']} | {b['named error']} | {b['warning']} | {b['crashed']} "
        f"| {b['harmless']} | {b['SILENT']} | {b['SILENT'] / b['tried']:.3f} | {b['verify']} "
        f"| {b['verify_silent']} of {b['SILENT']} |"
    )
    if b["crash_types"]:
        print(
            "\nOther exceptions: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(b["crash_types"].items()))
        )
        for example in b["crash_examples"][:5]:
            print(f"  {example}")
    if b["silent_kinds"]:
        print(
            "SILENT flips by the kind of line flipped: "
            + ", ".join(f"{k} {v}" for k, v in sorted(b["silent_kinds"].items()))
        )

    t = tampered(args.seed)
    print("\n## Tampered payloads (read back by a fresh saver: list, values, metadata, writes)\n")
    strict = os.environ.get("LANGGRAPH_STRICT_MSGPACK", "")
    print(
        "SqliteSaver uses its default JsonPlusSerializer; LANGGRAPH_STRICT_MSGPACK="
        f"{strict or '(unset: LangGraph default, permissive)'}\n"
    )
    print(
        "| saver | payloads tried | objects constructed | code executed | errors raised "
        "| read without effect | constructed+executed / tried |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for saver_name, r in t.items():
        print(
            f"| {saver_name} | {r['tried']} | {r['constructed']} | {r['executed']} | {r['errors']} "
            f"| {r['accepted']} | {(r['constructed'] + r['executed']) / max(r['tried'], 1):.3f} |"
        )
    print("\nBy payload kind and place (tried / constructed / executed / errors):\n")
    print("| saver | payload kind | place | tried | constructed | executed | errors |")
    print("|---|---|---|---:|---:|---:|---:|")
    for saver_name, r in t.items():
        for (kind, where), (n, fired, ran, err) in r["by_place"].items():
            print(f"| {saver_name} | {kind} | {where} | {n} | {fired} | {ran} | {err} |")
    control = t["JsonlSaver"]
    if control["control"] is None:
        same = "byte-identical to" if control["control_identical"] else "re-encoded from"
        print(
            f"\nControl: the untampered JSONL thread, written back the same way ({same} the "
            "original), reads without error."
        )
    else:
        print(
            "\nCONTROL FAILED: the untampered JSONL thread written back does not read "
            f"({control['control']}); the JsonlSaver counts above say little."
        )
    for saver_name, r in t.items():
        if r["hits"]:
            print(f"\n{saver_name} ran or built: " + "; ".join(r["hits"]))

    v = verify_times(sizes, args.timeout)
    print("\n## `langgraph-ctx verify` time (one thread, checkpoints written with put)\n")
    print("(the command run in a subprocess after a warm-up; interpreter start excluded)\n")
    print(
        "| checkpoints | file bytes | build s (put) | verify s | s per 1k checkpoints "
        "| per 1k vs smallest | status |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    first = None
    for r in v:
        if r["seconds"] is None:
            print(
                f"| {r['n']:,} | {r['size']:,} | {r['built']:.1f} | timeout | n/a | n/a "
                f"| {r['status']} |"
            )
            continue
        per_k = r["seconds"] / (r["n"] / 1000)
        first = first or per_k
        print(
            f"| {r['n']:,} | {r['size']:,} | {r['built']:.1f} | {r['seconds']:.2f} | {per_k:.3f} "
            f"| {per_k / first:.2f}x | {r['status']} |"
        )


if __name__ == "__main__":
    main()
