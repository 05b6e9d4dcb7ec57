"""A log you can trust (issue 12, points 6-10): any changed line is caught, named, and
a bad line the state does not need does not stop the thread; ``verify`` is linear."""

from __future__ import annotations

import json
import random
import threading
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner

from langgraph_ctx import CorruptLogError, JsonlSaver
from langgraph_ctx.cli import verify as verify_module
from langgraph_ctx.cli.app import app
from langgraph_ctx.cli.verify import verify_directory, verify_file
from langgraph_ctx.codec import FORMAT_VERSION, dumps_line
from langgraph_ctx.codec.lines import checkpoint_ts, line_checksum, seal_line
from langgraph_ctx.errors import CorruptLineWarning
from langgraph_ctx.saver import _index as index_module

from .backends import Backend, JsonlBackend
from .test_saver_graphs import chat_graph

CONFIG = {"configurable": {"thread_id": "t"}}


def chat(saver: Any, *texts: str) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    for text in texts:
        graph.invoke({"messages": [HumanMessage(text, id=f"id-{text}")]}, CONFIG)


def contents(saver: Any) -> list[str]:
    tup = saver.get_tuple(CONFIG)
    return [m.content for m in tup.checkpoint["channel_values"]["messages"]]


def lines_of(backend: Backend, thread_id: str = "t") -> list[bytes]:
    return backend.log_bytes(thread_id).splitlines()


def set_lines(backend: Backend, lines: list[bytes], thread_id: str = "t") -> None:
    """Write a whole log back (raw lines, no newlines), as a process with access would."""
    if isinstance(backend, JsonlBackend):
        Path(JsonlSaver(backend.root).path(thread_id)).write_bytes(
            b"".join(line + b"\n" for line in lines)
        )
    else:
        key = backend._key(thread_id)
        backend.client.delete(key)
        backend.client.rpush(key, *lines)


def msg_lines(lines: list[bytes]) -> list[tuple[int, dict[str, Any]]]:
    """``(1-based line, parsed)`` of every message line with its own body."""
    out = []
    for n, raw in enumerate(lines, 1):
        obj = json.loads(raw)
        if obj["t"] == "msg" and "msg" in obj:
            out.append((n, obj))
    return out


def read_everything(saver: Any) -> None:
    for tup in saver.list(CONFIG):
        assert tup.checkpoint is not None


# ------------------------------------------------------------- 6. per-line checksum


def test_every_line_ends_with_its_checksum_and_still_reads_as_json(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "hi", "there")
    lines = lines_of(backend)
    for raw in lines:
        obj = json.loads(raw)  # what jq sees
        assert obj["v"] == FORMAT_VERSION == 2
        assert list(obj)[-1] == "c"
        assert line_checksum(raw) is True
        without = dumps_line({k: v for k, v in obj.items() if k != "c"})[:-1]
        assert without == raw  # the checksum is the CRC of the line without it
    assert seal_line(raw[: raw.rindex(b',"c":')] + b"}") == raw


def test_any_single_bit_flip_is_caught_with_the_file_and_line(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "first question", "second question", "third question")
    lines = lines_of(backend)
    kinds = {json.loads(raw)["t"] for raw in lines[1:-1]}
    assert kinds == {"msg", "ckpt", "writes"}
    rng = random.Random(6)
    tried = 0
    for n in range(2, len(lines)):  # every middle line: messages, checkpoints, writes
        for _ in range(6):
            pos, bit = rng.randrange(len(lines[n - 1])), rng.randrange(8)
            flipped = bytearray(lines[n - 1])
            flipped[pos] ^= 1 << bit
            if b"\n" in flipped:  # a new line break: two lines, both caught (not this test)
                continue
            set_lines(backend, [*lines[: n - 1], bytes(flipped), *lines[n:]])
            with pytest.raises(CorruptLogError) as caught:
                read_everything(backend.saver())
            assert caught.value.line == n, (n, pos, bit, caught.value)
            tried += 1
    assert tried > 60


def test_verify_names_a_flipped_line_and_counts_lines_without_checksum(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path)
    chat(saver, "hi", "there")
    path = Path(saver.path("t"))
    lines = path.read_bytes().splitlines()
    n = len(lines) // 2
    flipped = bytearray(lines[n - 1])
    flipped[len(flipped) // 2] ^= 0x04
    path.write_bytes(b"".join(x + b"\n" for x in [*lines[: n - 1], bytes(flipped), *lines[n:]]))
    problems = [(p.line, p.kind) for p in verify_file(path).problems]
    assert (n, "corrupt") in problems
    assert any("checksum" in p.message for p in verify_file(path).problems if p.line == n)


def test_format_1_lines_still_read_and_verify_lists_them(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "hi", "there")
    expected = contents(saver)
    old = []
    for raw in lines_of(backend):  # the same log as langgraph-ctx 0.x wrote it
        obj = json.loads(raw)
        obj.pop("c")
        obj["v"] = 1
        if obj["t"] == "ckpt":
            obj["ts"] = checkpoint_ts(obj, obj["id"])
        old.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())
    set_lines(backend, old)
    reopened = backend.saver()
    assert contents(reopened) == expected
    chat(reopened, "and more")  # new lines (format 2) append to the old ones
    assert contents(backend.saver())[-2:] == ["and more", "you said: and more"]
    if isinstance(backend, JsonlBackend):
        report = verify_file(Path(JsonlSaver(backend.root).path("t")))
        assert report.ok and report.unchecked == [[1, len(old)]]
        assert report.unchecked_count == len(old)
        shown = CliRunner().invoke(app, ["--dir", str(backend.root), "verify"])
        assert shown.exit_code == 0  # old lines are not an error
        assert f"{len(old)} lines without a checksum (format 1): 1-{len(old)}" in shown.stdout


# ----------------------------------------------------- 7. an ordinal defined twice


def test_a_second_line_for_an_ordinal_is_corruption_not_a_replacement(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "transfer approved: $10")
    lines = lines_of(backend)
    _, first = msg_lines(lines)[0]
    assert first["msg"]["content"] == "transfer approved: $10"
    forged = {**first, "msg": {**first["msg"], "content": "transfer approved: $10,000"}}
    set_lines(backend, [*lines, dumps_line(forged)[:-1]])  # a valid checksum: not a flip
    with pytest.raises(CorruptLogError, match="already defined on line") as caught:
        backend.saver().get_tuple(CONFIG)
    assert caught.value.line == len(lines) + 1
    with pytest.warns(CorruptLineWarning, match="already defined"):
        lenient = backend.saver(on_corrupt="skip")
        assert "transfer approved: $10" in contents(lenient)
    assert "transfer approved: $10,000" not in contents(lenient)


# ------------------------------------------- 8. bad 'like' lines, errors with lines


@pytest.mark.parametrize("target", ["itself", "forward", "missing"])
@pytest.mark.parametrize("on_corrupt", ["raise", "skip"])
def test_a_like_line_that_names_no_earlier_message(
    backend: Backend, target: str, on_corrupt: str
) -> None:
    saver = backend.saver()
    chat(saver, "hi", "there")
    lines = lines_of(backend)
    n, obj = msg_lines(lines)[-1]  # a message the latest checkpoint shows
    ordinal = obj["n"]
    like = {"itself": ordinal, "forward": ordinal + 1, "missing": 10_000}[target]
    if target == "forward":  # a later message that exists
        later = max(json.loads(x).get("n", -1) for x in lines if json.loads(x)["t"] == "msg")
        like = later if later > ordinal else ordinal + 1
    forged = dumps_line({"v": 2, "t": "msg", "n": ordinal, "like": like, "id": "x"})[:-1]
    set_lines(backend, [*lines[: n - 1], forged, *lines[n:]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptLineWarning)
        fresh = backend.saver(on_corrupt=on_corrupt)
        with pytest.raises(CorruptLogError, match="'like' must name an earlier message") as caught:
            read_everything(fresh)
    assert caught.value.line == n
    assert caught.value.path == fresh.storage.describe("t")


def test_a_message_missing_from_the_file_is_named_with_a_line(backend: Backend) -> None:
    saver = backend.saver()
    chat(saver, "hi", "there")
    lines = lines_of(backend)
    n, _ = msg_lines(lines)[-1]
    lines[n - 1] = dumps_line({"v": 2, "t": "thread", "thread_id": "t"})[:-1]  # not a message
    set_lines(backend, lines)
    with pytest.warns(CorruptLineWarning, match="first line"):
        lenient = backend.saver(on_corrupt="skip")
        # Which line notices depends on the message ids (uuid4): a later message stored
        # as a 'like' of the missing one names it first, otherwise the list that refers
        # to it does. Either way the error is named and points past the removed line.
        with pytest.raises(
            CorruptLogError, match=r"not in the file|'like' must name an earlier message"
        ) as caught:
            read_everything(lenient)
    assert isinstance(caught.value.line, int) and caught.value.line > n


def test_random_flips_in_skip_mode_give_named_errors_or_warnings_only(tmp_path: Path) -> None:
    """With ``on_corrupt="skip"``, a flip anywhere is a warning or a `CorruptLogError`:
    never a bare KeyError (issue 12: five flips of 1000 did that)."""
    base = tmp_path / "base"
    saver = JsonlSaver(base)
    chat(saver, *(f"turn {i}" for i in range(6)))
    path = Path(saver.path("t"))
    lines = path.read_bytes().splitlines(keepends=True)
    rng = random.Random(8)
    outcomes: dict[str, int] = {}
    for trial in range(150):
        i = rng.randrange(1, len(lines) - 1)
        line = bytearray(lines[i])
        line[rng.randrange(len(line) - 1)] ^= 1 << rng.randrange(8)
        root = tmp_path / f"f{trial}"
        root.mkdir()
        (root / path.name).write_bytes(b"".join([*lines[:i], bytes(line), *lines[i + 1 :]]))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                read_everything(JsonlSaver(root, on_corrupt="skip"))
                outcome = "warned" if caught else "read"
            except CorruptLogError as exc:
                assert exc.line is not None, exc
                outcome = "named error"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("read", 0) == 0, outcomes  # every flip is noticed


# ------------------------------------ 9. a bad line no checkpoint needs blocks nothing


def _orphan(backend: Backend, raw: bytes) -> int:
    lines = lines_of(backend)
    set_lines(backend, [*lines, raw])
    return len(lines) + 1


@pytest.mark.parametrize("where", [30, -12], ids=["body", "checksum key"])
def test_a_damaged_message_line_nothing_needs_does_not_stop_writes(
    backend: Backend, where: int
) -> None:
    saver = backend.saver()
    chat(saver, "hi")
    last = max(o["n"] for o in map(json.loads, lines_of(backend)) if o["t"] == "msg")
    good = dumps_line({"v": 2, "t": "msg", "n": last + 1, "msg": {"type": "human", "content": "x"}})
    damaged = bytearray(good[:-1])
    damaged[where] ^= 0x01  # a flipped bit: the checksum no longer matches, or is gone
    n = _orphan(backend, bytes(damaged))
    with pytest.raises(CorruptLogError, match="on_corrupt='skip'") as caught:
        chat(backend.saver(), "blocked?")
    assert caught.value.line == n
    with pytest.warns(CorruptLineWarning, match="checksum"):
        lenient = backend.saver(on_corrupt="skip")
        chat(lenient, "not blocked", "still not")
        assert contents(backend.saver(on_corrupt="skip"))[-2:] == [
            "still not",
            "you said: still not",
        ]


def test_an_unreadable_message_line_with_a_valid_checksum(backend: Backend) -> None:
    """Sealed but not JSON: found only when a write reads every message to de-duplicate."""
    saver = backend.saver()
    chat(saver, "hi")
    last = max(o["n"] for o in map(json.loads, lines_of(backend)) if o["t"] == "msg")
    n = _orphan(backend, seal_line(b'{"v":2,"t":"msg","n":%d,"msg":{"type":"human"}' % (last + 1)))
    strict = backend.saver()
    assert contents(strict) == ["hi", "you said: hi"]  # reading does not need the line
    with pytest.raises(CorruptLogError, match="compares new messages") as caught:
        chat(strict, "blocked")
    assert caught.value.line == n and "on_corrupt='skip'" in str(caught.value)
    with pytest.warns(CorruptLineWarning, match=f":{n}:"):
        lenient = backend.saver(on_corrupt="skip")
        chat(lenient, "written anyway")
    assert contents(backend.saver())[-1] == "you said: written anyway"


# ----------------------------------------------------------------- 10. verify is linear


def build_checkpoints(root: Path, n: int) -> Path:
    saver = JsonlSaver(root)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    messages: list[Any] = []
    for i in range(n):
        checkpoint = {**checkpoint, "id": str(uuid.UUID(int=(1 << 100) | i))}
        changed: dict[str, Any] = {"counter": i + 1}
        values: dict[str, Any] = {"counter": {"i": i}}
        if i % 2 == 0:
            messages = [*messages, HumanMessage(f"message {i}", id=f"m{i}")]
            values["messages"] = messages
            changed["messages"] = i + 1
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = {**checkpoint["channel_versions"], **changed}
        config = saver.put(config, checkpoint, {"source": "loop", "step": i}, changed)
        saver.put_writes(config, [("counter", i)], f"task-{i}")
    return Path(saver.path("t"))


def test_verify_parses_each_line_once_and_decodes_each_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = {"parse": 0, "message": 0}
    # `verify` runs on this thread; a worker thread an earlier test left running (an
    # `asyncio.to_thread` call outliving its cancelled task) must not add to the counts.
    this_thread = threading.get_ident()

    def counting(module: Any, name: str, key: str) -> None:
        original = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == this_thread:
                counts[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    # The line and decode passes; the new saver's open verify also makes (one index fed
    # from the last snapshot, one fed whole) is tested on its own (test_cli_verify).
    monkeypatch.setattr(verify_module, "_check_cold_open", lambda *args: None)
    counting(verify_module, "loads_line", "parse")
    counting(index_module, "loads_line", "parse")
    counting(verify_module, "message_from_body", "message")
    counting(index_module, "message_from_body", "message")
    counting(index_module, "message_from_json_owned", "message")
    seen = []
    for size in (100, 400):
        path = build_checkpoints(tmp_path / f"n{size}", size)
        counts.update(parse=0, message=0)
        report = verify_file(path)
        assert report.ok and report.decoded == report.checkpoints == size
        assert counts["parse"] == report.lines  # one parse per line, whatever the history
        assert counts["message"] == 2 * report.messages  # the scan's check, the decode
        seen.append(counts["parse"])
    assert seen[1] < 4.2 * seen[0]


def test_verify_reports_progress_in_lines(tmp_path: Path) -> None:
    path = build_checkpoints(tmp_path, 30)
    total_lines = len(path.read_bytes().splitlines())
    got: list[int] = []
    steps: list[int] = []

    def start(total: int) -> Any:
        got.append(total)
        return steps.append

    report = verify_directory(tmp_path, progress=start)
    assert report.ok and got == [total_lines] and sum(steps) == total_lines


def test_verify_finds_a_keep_longer_than_its_base(tmp_path: Path) -> None:
    saver = JsonlSaver(tmp_path)
    chat(saver, "one", "two", "three")
    path = Path(saver.path("t"))
    lines = path.read_bytes().splitlines()
    base = None
    for i, raw in enumerate(lines):
        obj = json.loads(raw)
        values = obj.get("values", {}) if obj["t"] == "ckpt" else {}
        enc = values.get("messages", [None, None])
        if not (len(enc) == 2 and isinstance(enc[1], dict)):
            continue
        if base is not None and "append" in enc[1]:
            enc[1] = {"msgs": enc[1]["append"], "keep": 999, "base": base}
            lines[i] = dumps_line(obj)[:-1]
            break
        base = i + 1
    else:
        pytest.fail("no appended message list")
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    problems = verify_file(path).problems
    assert [(p.line, p.kind) for p in problems][:1] == [(i + 1, "undecodable")], problems
    with pytest.raises(CorruptLogError, match="shorter than 'keep'"):
        read_everything(JsonlSaver(tmp_path))
