"""The tampered-payloads experiment of ``reliability.py`` (experiment 3), and the graph it shares.

``reliability.py`` runs it and prints its table; this module holds it so that each
file stays a readable size. Nothing here runs on import.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import logging
import os
import pickle
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
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
