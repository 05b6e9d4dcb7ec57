"""``langgraph-ctx verify`` on sound files and on torn, corrupt and dangling lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app
from langgraph_ctx.cli.verify import verify_directory, verify_file
from langgraph_ctx.codec import dumps_line

from .cli_scenarios import build_directory, chat_graph, config

runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("verify") / "chats"
    build_directory(root, turns=6)
    return root


@pytest.fixture
def root(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "chats"
    shutil.copytree(built, copy)
    return copy


def verify(root: Path, *args: str) -> Any:
    return runner.invoke(app, ["--dir", str(root), "verify", *args])


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def rewrite(path: Path, n: int, obj: dict[str, Any] | bytes) -> None:
    """Replace line ``n`` (1-based) with ``obj`` (a dict gets a valid checksum: the
    tests below are about what a line says, not about damaged bytes)."""
    raw = path.read_bytes().splitlines(keepends=True)
    raw[n - 1] = obj if isinstance(obj, bytes) else dumps_line(obj)
    path.write_bytes(b"".join(raw))


def find(path: Path, pred: Any, after: int = 0) -> tuple[int, dict[str, Any]]:
    for n, obj in enumerate(lines_of(path), 1):
        if n > after and pred(obj):
            return n, obj
    raise AssertionError("no such line")


def test_clean_directory(built: Path) -> None:
    result = verify(built)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert [line.split()[0] for line in out[:-1]] == ["ok"] * 5
    assert out[-1] == "5 files checked: 0 errors, 0 warnings"
    data = json.loads(verify(built, "--json").stdout)
    assert data["ok"] is True and data["exit_code"] == 0 and data["problems"] == []
    trip = next(f for f in data["files"] if f["thread_id"] == "trip")
    assert trip["decoded"] == trip["checkpoints"] == len(JsonlSaver(built).checkpoint_infos("trip"))
    assert trip["lines"] == len(Path(trip["path"]).read_bytes().splitlines())


def test_torn_last_line(root: Path) -> None:
    path = root / "chat.jsonl"
    n_lines = len(path.read_bytes().splitlines())
    with open(path, "ab") as f:
        f.write(b'{"v":1,"t":"ckpt","id":"1f0-half-writ')
    result = verify(root)
    assert result.exit_code == 3, result.output
    assert (
        f"  {path}:{n_lines + 1}: torn: torn last line (37 bytes, no newline): a write cut "
        "short by a crash; the saver ignores it and removes it before the next append"
    ) in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "5 files checked: 0 errors, 1 warning"
    data = json.loads(verify(root, "--json").stdout)
    assert data["exit_code"] == 3
    assert [(p["line"], p["kind"], p["severity"]) for p in data["problems"]] == [
        (n_lines + 1, "torn", "warning")
    ]
    chat = next(f for f in data["files"] if f["thread_id"] == "chat")
    assert chat["decoded"] == chat["checkpoints"] == 6  # what precedes a torn line is read


def test_corrupt_line(root: Path) -> None:
    path = root / "trip.jsonl"
    n, _ = find(path, lambda o: o["t"] == "writes", after=20)
    rewrite(path, n, b'{"v":1,"t":' + b"garbage\n")
    result = verify(root)
    assert result.exit_code == 1
    assert f"  {path}:{n}: corrupt: not valid JSON" in result.stdout
    assert "FAIL  " + str(path) in result.stdout
    report = verify_directory(root, threads=["trip"])
    assert [(p.line, p.kind) for p in report.problems] == [(n, "corrupt")]
    assert report.files[0].decoded is None  # the saver would refuse it: not decoded
    assert report.exit_code == 1


def test_dangling_message_reference(root: Path) -> None:
    path = root / "trip.jsonl"
    n, obj = find(path, lambda o: o["t"] == "ckpt" and "append" in str(o["values"]), after=30)
    channel = next(ch for ch, e in obj["values"].items() if len(e) == 2 and "append" in str(e[1]))
    obj["values"][channel][1] = {"append": [999]}
    rewrite(path, n, obj)
    result = verify(root, "trip")
    assert result.exit_code == 1
    assert f"{path}:{n}: dangling: channel 'messages' refers to message #999, not in the file" in (
        result.stdout
    )
    assert result.stdout.splitlines()[-1] == "1 file checked: 1 error, 0 warnings"


def test_dangling_parent_and_writes_lines(root: Path) -> None:
    path = root / "chat.jsonl"
    n, obj = find(path, lambda o: o["t"] == "ckpt" and isinstance(o.get("parent"), int), after=5)
    obj["parent"] = 1  # the header, not a checkpoint
    rewrite(path, n, obj)
    w, wobj = find(path, lambda o: o["t"] == "writes" and isinstance(o["ckpt"], int))
    wobj["ckpt"] = 10_000
    rewrite(path, w, wobj)
    report = verify_directory(root, threads=["chat"])
    # the checkpoint's own lines still count: no cascade through later references
    assert sorted((p.line, p.kind, p.message) for p in report.problems) == sorted(
        [
            (n, "dangling", "'parent' is line 1, not an earlier checkpoint"),
            (w, "dangling", "writes refer to line 10000, not an earlier checkpoint"),
        ]
    )


def test_dangling_base_and_like(root: Path) -> None:
    path = root / "trip.jsonl"
    n, obj = find(path, lambda o: o["t"] == "ckpt" and "append" in str(o["values"]), after=30)
    obj["values"]["messages"][1] = {"msgs": [0], "keep": 2, "base": 2}
    rewrite(path, n, obj)
    m, mobj = find(path, lambda o: o["t"] == "msg" and "msg" in o, after=n)
    rewrite(path, m, {"v": 1, "t": "msg", "n": mobj["n"], "like": mobj["n"] + 5, "id": "x"})
    report = verify_file(path)
    assert sorted((p.line, p.kind) for p in report.problems) == sorted(
        [(m, "dangling"), (n, "dangling")]
    )
    by_line = {p.line: p.message for p in report.problems}
    assert by_line[n] == "channel 'messages': 'base' line 2 does not store 'messages' as messages"
    assert by_line[m].startswith("'like' must name an earlier message")


def test_a_checkpoint_that_does_not_decode(root: Path) -> None:
    """Lines that parse and whose references resolve, but whose value the saver refuses."""
    path = root / "hitl.jsonl"
    n, obj = find(path, lambda o: o["t"] == "ckpt" and "request" in o["values"])
    obj["values"]["request"][1] = {"serde": ["msgpack", "not base64!"]}
    rewrite(path, n, obj)
    result = verify(root, "hitl")
    assert result.exit_code == 1
    assert (
        f"{path}:{n}: undecodable: channel 'request': serialized payload is not valid base64"
        in result.stdout
    )
    skipped = json.loads(verify(root, "hitl", "--no-decode", "--json").stdout)
    assert skipped["ok"] is True and skipped["files"][0]["decoded"] is None


def test_bad_message_body_and_header(root: Path) -> None:
    """A corrupt body is one problem, on its line: a ``like`` line repeating that message
    (which the generated thread may or may not hold) is not reported again, since fixing
    the body fixes it. The test adds one, so the outcome never depends on the run."""
    path = root / "chat.jsonl"
    n, obj = find(path, lambda o: o["t"] == "msg" and "msg" in o)
    obj["msg"]["type"] = "alien"
    rewrite(path, n, obj)
    rewrite(path, 1, {"v": 1, "t": "msg", "n": 99, "msg": {"type": "human", "content": "x"}})
    last = max(o["n"] for o in lines_of(path) if o["t"] == "msg")
    with open(path, "ab") as f:
        f.write(dumps_line({"v": 2, "t": "msg", "n": last + 1, "like": obj["n"], "id": "again"}))
    report = verify_file(path)
    assert [(p.line, p.kind, p.message) for p in report.problems] == [
        (1, "corrupt", "the first line must be the thread header"),
        (n, "corrupt", f"message #{obj['n']}: unknown message type 'alien'"),
    ]


def test_backups_empty_files_and_unknown_threads(root: Path) -> None:
    data = json.loads(verify(root, "--backups", "--json").stdout)
    assert [Path(f["path"]).name for f in data["files"]].count("chat.jsonl.1") == 1
    (root / "chat.jsonl.1").write_bytes(b'{"v":1,"t":"thread","thread_id":"chat"}\n{"v":2')
    result = verify(root, "chat", "--backups")
    assert result.exit_code == 3 and "chat.jsonl.1:2: torn" in result.stdout
    (root / "empty.jsonl").write_bytes(b"")
    empty = verify(root, "empty")
    assert empty.exit_code == 3
    assert f"{root / 'empty.jsonl'}: empty: empty file (no header)" in empty.stdout
    unknown = verify(root, "ghost")
    assert unknown.exit_code == 1
    assert unknown.stderr.startswith("error: thread 'ghost' does not exist in")
    missing = runner.invoke(app, ["--dir", str(root / "nope"), "verify"])
    assert missing.exit_code == 1 and "no such directory" in missing.stderr


def test_an_integer_beyond_64_bits_written_before_they_were_refused(root: Path) -> None:
    """Earlier versions wrote such integers into the file exactly, but the reader's orjson
    gives a float for them, another number: verify names the line (a warning, as the
    saver reads it without an error) so the value can be fixed."""
    from langgraph_ctx.codec.lines import seal_line

    path = root / "chat.jsonl"
    n, obj = find(path, lambda o: o["t"] == "msg" and o.get("msg", {}).get("type") == "ai")
    obj.pop("c")
    obj["msg"]["additional_kwargs"] = {"user_id": 2**64 + 5}
    rewrite(path, n, seal_line(json.dumps(obj, separators=(",", ":")).encode()) + b"\n")
    result = verify(root, "chat")
    assert result.exit_code == 3, result.output
    assert (
        f"  {path}:{n}: warning: holds the integer 18446744073709551621, beyond 64 bits: the "
        "saver reads it back as a float, another number (store such values as strings)"
    ) in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "1 file checked: 0 errors, 1 warning"


def test_verify_names_a_long_id_log_whose_header_does_not_read(tmp_path: Path) -> None:
    """A long thread id is kept only in its log's header (the file is named by its hash):
    with that line damaged the log was in no listing, so `verify` said "0 errors" and
    `copy --all` left it behind, silently. `verify` checks every log file; listings warn."""
    from langgraph_ctx.errors import CorruptLineWarning

    saver = JsonlSaver(tmp_path)
    graph = chat_graph(saver)
    long_id = "L" * 300
    for tid in ["chat", long_id, long_id]:
        graph.invoke({"messages": [("user", "hi")]}, config(tid))
    first = list(saver.list(config(long_id)))[-1].config["configurable"]["checkpoint_id"]
    saver.revert(long_id, first)  # a backup, <log>.1
    log = Path(saver.path(long_id))
    data = bytearray(log.read_bytes())
    data[10] ^= 0x01  # one flipped bit in the header
    log.write_bytes(bytes(data))
    result = runner.invoke(app, ["--dir", str(tmp_path), "verify", "--backups"])
    assert result.exit_code == 1 and f"FAIL  {log}" in result.stdout
    assert f"ok    {log}.1" in result.stdout and "3 files checked: 1 error" in result.stdout
    with pytest.warns(CorruptLineWarning, match="left out of listings"):
        assert JsonlSaver(tmp_path).list_threads() == ["chat"]
    copied = runner.invoke(app, ["--dir", str(tmp_path), "copy", "--all", "--to",
                                 str(tmp_path / "backup")])  # fmt: skip
    assert copied.exit_code == 1 and "1 log(s) not copied" in copied.output


def test_a_long_id_log_whose_header_names_another_thread_is_not_taken_for_it(
    tmp_path: Path,
) -> None:
    """A log named by a long id's hash whose header (intact) names another thread was
    listed as that thread: the long thread was in no listing, `copy --all` exited 0
    without it, `verify --backups` checked the other thread's backups in its place."""
    from langgraph_ctx.errors import CorruptLineWarning
    from langgraph_ctx.storage.thread_ids import encode_thread_id

    saver = JsonlSaver(tmp_path)
    chat_graph(saver).invoke({"messages": [("user", "hi")]}, config("chat"))
    stray = tmp_path / f"{encode_thread_id('M' * 300)}.jsonl"
    shutil.copyfile(saver.path("chat"), stray)  # its header says "chat"
    with pytest.warns(CorruptLineWarning, match="names another thread"):
        assert JsonlSaver(tmp_path).list_threads() == ["chat"]
    copied = runner.invoke(app, ["--dir", str(tmp_path), "copy", "--all", "--to",
                                 str(tmp_path / "backup")])  # fmt: skip
    assert copied.exit_code == 1 and "1 log(s) not copied" in copied.output
    for named in ([], ["M" * 300]):  # every log, or that thread by its id
        verified = runner.invoke(app, ["--dir", str(tmp_path), "verify", *named])
        assert verified.exit_code == 1 and f"FAIL  {stray}" in verified.output
        assert "its header names a thread whose log is not this file" in verified.output


def test_verify_opens_a_long_log_as_a_new_saver_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log each line of which is right could still fail a new saver's cold open from
    its last snapshot (a thread whose checkpoints were saved out of id order did, and
    verify said "ok"). Verify now opens each log that carries a snapshot that way too
    and compares the heads with the whole file's; a cold open that fails is named."""
    from langgraph_ctx.errors import CodecError
    from langgraph_ctx.saver._index import _Index

    saver = JsonlSaver(tmp_path / "chats")
    graph = chat_graph(saver)
    for turn in range(90):  # past a snapshot
        graph.invoke({"messages": [("user", f"turn {turn}")]}, config("long"))
    path = Path(saver.path("long"))
    assert b'"t":"snap"' in path.read_bytes()
    assert verify_file(path).problems == []

    def broken(self: _Index, lines: Any) -> int:
        raise CodecError("snapshot: a fault of the cold-open code")

    monkeypatch.setattr(_Index, "_from_snapshot", broken)
    [problem] = verify_file(path).problems
    assert problem.kind == "undecodable" and problem.severity == "error"
    assert "a new saver opening it from its last snapshot" in problem.message
    assert "a fault of the cold-open code" in problem.message
