"""Torn writes, corrupt lines, concurrent processes, fsync."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from langgraph_ctx import CorruptLogError, JsonlSaver
from langgraph_ctx.codec import FORMAT_VERSION, dumps_line
from langgraph_ctx.saver.log import CorruptLineWarning
from langgraph_ctx.storage.jsonl import TornLineWarning

from .test_saver_graphs import chat_graph

CONFIG = {"configurable": {"thread_id": "t"}}


def chat(graph, *texts: str, config=CONFIG) -> None:
    for text in texts:
        graph.invoke({"messages": [("user", text)]}, config)


def contents(saver, config=CONFIG) -> list[str]:
    tup = saver.get_tuple(config)
    return [m.content for m in tup.checkpoint["channel_values"]["messages"]]


# ------------------------------------------------------------ torn tail


def test_torn_last_line_is_ignored_then_repaired(root):
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "a", "b")
    path = Path(saver.path("t"))
    intact = path.read_bytes()
    with open(path, "ab") as f:  # what a process killed mid-write leaves behind
        f.write(b'{"v":1,"t":"ckpt","id":"1f0-half-writ')

    fresh = JsonlSaver(root)
    with pytest.warns(TornLineWarning, match=r"t\.jsonl:\d+: torn last line"):
        assert contents(fresh)[-1] == "you said: b"
    graph2 = chat_graph().compile(checkpointer=fresh)
    with pytest.warns(TornLineWarning, match="removed a torn last line"):
        chat(graph2, "c")
    data = path.read_bytes()
    assert data.startswith(intact)
    assert b"half-writ" not in data
    assert all(json.loads(line)["v"] == FORMAT_VERSION for line in data.splitlines())
    assert contents(fresh)[-2:] == ["c", "you said: c"]


def test_process_killed_mid_append_loses_only_the_unfinished_write(root):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "before the crash")
    script = textwrap.dedent(
        f"""
        import os
        import langgraph_ctx.storage.jsonl as storage
        from langgraph_ctx import JsonlSaver
        from tests.test_saver_graphs import chat_graph

        real_write = os.write
        def dying_write(fd, data):
            real_write(fd, bytes(data[: len(data) // 2]))  # half of the batch reaches the disk
            os._exit(9)
        storage.os.write = dying_write
        graph = chat_graph().compile(checkpointer=JsonlSaver({str(root)!r}))
        graph.invoke({{"messages": [("user", "lost")]}}, {{"configurable": {{"thread_id": "t"}}}})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    assert proc.returncode == 9
    raw = Path(saver.path("t")).read_bytes()
    assert not raw.endswith(b"\n")  # the crash left a torn line
    fresh = JsonlSaver(root)
    with pytest.warns(TornLineWarning):
        assert contents(fresh) == ["before the crash", "you said: before the crash"]
    with pytest.warns(TornLineWarning):
        chat(chat_graph().compile(checkpointer=fresh), "after")
    assert contents(fresh)[-2:] == ["after", "you said: after"]


# ------------------------------------------------------------ corruption


def corrupt_line(path: Path, kind: str) -> int:
    lines = path.read_bytes().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if json.loads(line)["t"] == kind)
    lines[n] = b'{"v":1,"t":' + b"garbage\n"
    path.write_bytes(b"".join(lines))
    return n + 1


def test_corrupt_line_raises_naming_file_and_line(root):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a", "b")
    path = Path(saver.path("t"))
    line = corrupt_line(path, "writes")
    fresh = JsonlSaver(root)
    with pytest.raises(CorruptLogError) as err:
        fresh.get_tuple(CONFIG)
    assert err.value.path == str(path)
    assert err.value.line == line
    assert f"t.jsonl:{line}" in str(err.value)
    assert "not valid JSON" in str(err.value)
    # the error sticks: it is not silently skipped on the next call
    with pytest.raises(CorruptLogError):
        fresh.get_tuple(CONFIG)


def test_skip_mode_reads_past_a_bad_line_with_a_warning(root):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a", "b")
    corrupt_line(Path(saver.path("t")), "writes")
    lenient = JsonlSaver(root, on_corrupt="skip")
    with pytest.warns(CorruptLineWarning, match="skipping"):
        assert contents(lenient)[-1] == "you said: b"


def test_skip_mode_cannot_leave_out_a_message_the_state_holds_and_says_how_out(root):
    """``on_corrupt="skip"`` reads past lines the state does not need. A bad message the
    asked state holds still raises (leaving it out would change the conversation the
    model sees, and the next turn would save it so), and the error no longer sends the
    reader to ``on_corrupt="skip"``: it says to fix the line or revert before it."""
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "a")
    before = saver.get_tuple(CONFIG).config["configurable"]["checkpoint_id"]
    chat(graph, "b")
    path = Path(saver.path("t"))
    lines = path.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if '"content":"b"' in line)
    obj = json.loads(lines[n])
    obj["msg"]["content"] = {"not": "a valid content"}
    lines[n] = dumps_line(obj).decode().rstrip("\n")  # a valid checksum: the body is bad
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptLogError) as strict:
        JsonlSaver(root).get_tuple(CONFIG)
    assert "open the saver with on_corrupt='skip'" in str(strict.value)
    lenient = JsonlSaver(root, on_corrupt="skip")
    with pytest.raises(CorruptLogError) as err:
        lenient.get_tuple(CONFIG)
    assert err.value.line == n + 1
    assert "on_corrupt='skip' cannot leave it out" in str(err.value)
    assert "revert the thread to a checkpoint before it" in str(err.value)
    assert "open the saver with on_corrupt='skip'" not in str(err.value)
    lenient.revert("t", before)  # the way out it names
    assert contents(lenient) == ["a", "you said: a"]
    chat(chat_graph().compile(checkpointer=lenient), "c")
    assert contents(JsonlSaver(root)) == ["a", "you said: a", "c", "you said: c"]


def test_line_from_a_newer_format_is_refused(root):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a")
    with open(saver.path("t"), "ab") as f:
        f.write(b'{"v":99,"t":"ckpt","id":"x"}\n')
    with pytest.raises(CorruptLogError, match="newer than this langgraph-ctx reads"):
        JsonlSaver(root).get_tuple(CONFIG)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'["not", "an", "object"]', "must be a JSON object"),
        (b'{"t":"msg","n":9}', "no format version"),
        (b'{"v":1,"t":"mystery"}', "unknown line kind"),
        (b'{"v":1,"t":"msg","n":-1,"msg":{}}', "non-negative"),
        (b'{"v":1,"t":"ckpt","id":"x","parent":99999,"ts":"","values":{}}', "earlier checkpoint"),
        (b'{"v":1,"t":"writes","ckpt":99999,"task":"t","w":[]}', "not an earlier checkpoint"),
        (b'{"v":1,"t":"writes","ckpt":"x","task":"t","w":[["bad"]]}', "index, channel, value"),
        (b'{"v":1,"t":"thread","thread_id":"again"}', "only be the first line"),
    ],
)
def test_malformed_lines_are_reported(root, line, reason):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a")
    with open(saver.path("t"), "ab") as f:
        f.write(line + b"\n")
    with pytest.raises(CorruptLogError, match=reason):
        JsonlSaver(root).get_tuple(CONFIG)


def test_corrupt_message_body_is_reported_when_read(root):
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a")
    path = Path(saver.path("t"))
    lines = path.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line)["t"] == "msg")
    obj = json.loads(lines[n])
    obj["msg"]["content"] = {"not": "a valid content"}
    lines[n] = dumps_line(obj).decode().rstrip("\n")  # a valid checksum: the body is bad
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptLogError, match=rf"t\.jsonl:{n + 1}: invalid (Human|AI)Message"):
        JsonlSaver(root).get_tuple(CONFIG)


# ------------------------------------------------------------ concurrency

WRITER = textwrap.dedent(
    """
    import sys
    from langgraph_ctx import JsonlSaver
    from tests.backends import append_checkpoints

    append_checkpoints(JsonlSaver(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
    """
)


def test_two_processes_appending_to_one_thread_never_interleave(root):
    root.mkdir(parents=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), ns, "40"], cwd=Path(__file__).parent.parent
        )
        for ns in ("p1", "p2")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    saver = JsonlSaver(root)
    raw = Path(saver.path("shared")).read_bytes()
    # no torn or mixed lines
    assert all(json.loads(line)["v"] == FORMAT_VERSION for line in raw.splitlines())
    for ns in ("p1", "p2"):
        config = {"configurable": {"thread_id": "shared", "checkpoint_ns": ns}}
        history = list(saver.list(config))
        assert len(history) == 40
        head = history[0].checkpoint["channel_values"]["messages"]
        assert [m.id for m in head] == [f"{ns}-{i}" for i in range(40)]
        assert history[0].pending_writes[0][2][0].id == f"{ns}-w39"


def test_a_saver_sees_appends_made_by_another_process(root):
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "mine")
    assert len(contents(saver)) == 2
    script = textwrap.dedent(
        f"""
        from langgraph_ctx import JsonlSaver
        from tests.test_saver_graphs import chat_graph
        graph = chat_graph().compile(checkpointer=JsonlSaver({str(root)!r}))
        graph.invoke({{"messages": [("user", "theirs")]}}, {{"configurable": {{"thread_id": "t"}}}})
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parent.parent)
    assert contents(saver)[-2:] == ["theirs", "you said: theirs"]  # same saver, no reopen
    chat(graph, "mine again")
    assert contents(saver)[-4:] == [
        "theirs",
        "you said: theirs",
        "mine again",
        "you said: mine again",
    ]


def _count_flushes(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is not None:
            monkeypatch.setattr(
                os, name, lambda fd, _real=real, _name=name: calls.append(_name) or _real(fd)
            )
    return calls


def test_fsync_flushes_once_per_checkpoint(root, monkeypatch):
    """One flush per checkpoint (its step's pending writes ride along), plus the
    directory of a new file once; none without ``fsync``."""
    calls = _count_flushes(monkeypatch)
    saver = JsonlSaver(root, fsync=True)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "a")
    checkpoints = len(list(saver.list(CONFIG)))
    assert len(calls) == checkpoints + 1  # + the directory entry of the new file
    assert calls.count("fsync") == 1 and calls.count("fdatasync") == checkpoints
    for turn in range(3):
        calls.clear()
        chat(graph, f"more {turn}")
        new = len(list(saver.list(CONFIG))) - checkpoints
        checkpoints += new
        assert calls == ["fdatasync"] * new  # put_writes (one per step) flushed nothing
    assert Path(saver.path("t")).read_bytes().count(b'"t":"writes"') >= 4  # writes happened
    calls.clear()
    chat(chat_graph().compile(checkpointer=JsonlSaver(root / "plain")), "a")
    assert calls == []


def test_fsync_flushes_pending_writes_when_closed(root, monkeypatch):
    saver = JsonlSaver(root, fsync=True)
    chat(chat_graph().compile(checkpointer=saver), "a")
    head = saver.get_tuple(CONFIG).config
    calls = _count_flushes(monkeypatch)
    saver.put_writes(head, [("messages", "pending")], "task-1")
    assert calls == []  # written, not yet flushed: the next checkpoint will
    assert JsonlSaver(root).get_tuple(CONFIG).pending_writes[-1][2] == "pending"
    saver.close()
    assert calls == ["fdatasync"]
