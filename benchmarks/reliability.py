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
import contextlib
import copy
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from tampering import THREAD, build_graph, quiet, tampered

from langgraph_ctx import JsonlSaver, LangGraphCtxError

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
