"""A disk that fails under a running app (trial 14): a flush that fails with
``fsync=True`` (the kernel may then drop the unflushed lines and report it only once, so
a later flush succeeds over lines that are not on disk), a write cut short by a full
disk, a file made immutable under an open descriptor. Each gets a named error naming
the log, the log is left as it was before the call, and the next turns build on what is
on disk, in the same saver and in a fresh one.

The failures are injected into ``os.fdatasync`` / ``os.write`` for the log's descriptor
only (a real failing device needs root and a loop mount: trial 14 ran it, on ext4 over a
full tmpfs; `/tmp/hp/s15/trial14/fsyncgate.sh`)."""

from __future__ import annotations

import asyncio
import errno
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langgraph_ctx import JsonlSaver, LogWriteError, LogWriteWarning
from langgraph_ctx.errors import ReadOnlyLogError, TornLineWarning

from .cli_scenarios import chat_graph, config


def _is_log(fd: int, name: str = "t.jsonl") -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(name)
    except OSError:
        return False


def _fail_once(
    monkeypatch: pytest.MonkeyPatch, name: str, code: int, partial: bool = False
) -> list[int]:
    """``os.<name>`` fails once with ``code`` on the log's descriptor, when armed
    (append anything to the returned list); ``partial``: ``os.write`` writes half first."""
    real: Callable[..., Any] = getattr(os, name)
    armed: list[int] = []

    def failing(fd: int, *args: Any) -> Any:
        if armed and _is_log(fd):
            armed.clear()
            if partial:
                data = bytes(args[0])
                real(fd, data[: len(data) // 2])
            raise OSError(code, os.strerror(code))
        return real(fd, *args)

    monkeypatch.setattr(os, name, failing)
    return armed


def _checkpoint_lines(root: Path) -> list[bytes]:
    return [x for x in (root / "t.jsonl").read_bytes().splitlines() if b'"t":"ckpt"' in x]


def _contents(graph: Any, thread: str = "t") -> list[str]:
    return [m.content for m in graph.get_state(config(thread)).values["messages"]]


def _turn(graph: Any, text: str, use_async: bool) -> None:
    payload = {"messages": [("user", text)]}
    if use_async:
        asyncio.run(graph.ainvoke(payload, config("t")))
    else:
        graph.invoke(payload, config("t"))


def _acknowledged(*texts: str) -> list[str]:
    return [part for text in texts for part in (text, f"you said: {text}")]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_failed_flush_cuts_the_log_back_to_what_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    """Before, the failed turn's lines stayed (the same saver showed its input as the
    head) and the next turns built on them: after a power cut a fresh process found the
    thread damaged from the lost lines on (trial 14, finding 1)."""
    root = tmp_path / "chats"
    saver = JsonlSaver(root, fsync=True)
    graph = chat_graph(saver)
    for text in ("one", "two", "three"):
        _turn(graph, text, use_async)
    checkpoints = _checkpoint_lines(root)
    armed = _fail_once(monkeypatch, "fdatasync", errno.EIO)
    armed.append(1)
    with pytest.raises(LogWriteError, match=r"t\.jsonl while flushing .* cut off") as err:
        _turn(graph, "lost", use_async)
    assert err.value.errno == errno.EIO
    # The failed checkpoint's line is gone, and nothing unflushed before it. (LangGraph
    # saves a step's writes without waiting for its checkpoint: those of the step the
    # failed checkpoint started may follow, naming its id; as in SqliteSaver's table,
    # they are kept and never read.)
    assert _checkpoint_lines(root) == checkpoints
    assert _contents(graph) == _acknowledged("one", "two", "three")  # not its input
    for text in ("four", "five"):
        _turn(graph, text, use_async)
    everything = _acknowledged("one", "two", "three", "four", "five")
    assert _contents(graph) == everything
    fresh = chat_graph(JsonlSaver(root))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no corrupt or torn line anywhere
        assert _contents(fresh) == everything
        history = list(fresh.get_state_history(config("t")))
    assert len(history) == 5 * 3  # three checkpoints a turn
    assert [s.config["configurable"]["checkpoint_id"] for s in history[1:]] == [
        s.parent_config["configurable"]["checkpoint_id"] for s in history[:-1]
    ]
    saver.close()  # now: a saver collected later would flush under another test's failure


def test_a_write_cut_short_by_a_full_disk_is_taken_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after half a write: `LogWriteError` naming the log, its partial line
    removed at once, and no "torn line left by an interrupted write" warnings on the
    next turns, where this process's own partial line was reported as a crash's
    (trial 14, finding 3)."""
    root = tmp_path / "chats"
    graph = chat_graph(JsonlSaver(root))
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    checkpoints = _checkpoint_lines(root)
    armed = _fail_once(monkeypatch, "write", errno.ENOSPC, partial=True)
    armed.append(1)
    with pytest.raises(LogWriteError, match=r"t\.jsonl while appending .* nothing of this"):
        graph.invoke({"messages": [("user", "full")]}, config("t"))
    assert (root / "t.jsonl").read_bytes().endswith(b"\n")  # no partial line left
    assert _checkpoint_lines(root) == checkpoints
    with warnings.catch_warnings():
        warnings.simplefilter("error", TornLineWarning)
        graph.invoke({"messages": [("user", "two")]}, config("t"))
    assert _contents(graph) == _acknowledged("one", "two")
    assert _contents(chat_graph(JsonlSaver(root))) == _acknowledged("one", "two")


def test_a_log_made_read_only_under_an_open_descriptor_is_a_read_only_log_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EPERM on the saver's open descriptor (``chattr +i`` / ``+a`` after it opened the
    file) is `ReadOnlyLogError` naming the file, as from a fresh saver, not a bare
    ``PermissionError`` without a path (trial 14, finding 2)."""
    root = tmp_path / "chats"
    graph = chat_graph(JsonlSaver(root))
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    armed = _fail_once(monkeypatch, "write", errno.EPERM)
    armed.append(1)
    with pytest.raises(ReadOnlyLogError, match=r"t\.jsonl while appending .* file or its"):
        graph.invoke({"messages": [("user", "refused")]}, config("t"))
    graph.invoke({"messages": [("user", "two")]}, config("t"))
    assert _contents(graph) == _acknowledged("one", "two")


def _pending_write(saver: JsonlSaver, graph: Any) -> None:
    """A pending write on the thread's last checkpoint, as LangGraph saves a failed
    task's error (appended, flushed with the next checkpoint: none follows here)."""
    saver.put_writes(graph.get_state(config("t")).config, [("note", "x")], task_id="failed")
    assert saver.storage._lock_of["t"].unflushed


def test_a_failed_flush_never_cuts_what_another_writer_saved_after_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saver A has an unflushed pending write; saver B (another process, as far as the
    lock goes) saves two turns after it; A's next flush fails. Only what A wrote in its
    own call is cut: B's acknowledged turns stay (review 32: A cut back to before its
    pending write, and B's turns were gone)."""
    root = tmp_path / "chats"
    first, second = JsonlSaver(root, fsync=True), JsonlSaver(root, fsync=True)
    a = chat_graph(first)
    a.invoke({"messages": [("user", "one")]}, config("t"))
    _pending_write(first, a)
    b = chat_graph(second)
    for text in ("two", "three"):
        b.invoke({"messages": [("user", text)]}, config("t"))
    armed = _fail_once(monkeypatch, "fdatasync", errno.EIO)
    armed.append(1)
    with pytest.raises(LogWriteError, match="cut off"):
        a.invoke({"messages": [("user", "four")]}, config("t"))
    saved = _acknowledged("one", "two", "three")
    assert _contents(chat_graph(JsonlSaver(root))) == saved
    a.invoke({"messages": [("user", "five")]}, config("t"))
    assert _contents(chat_graph(JsonlSaver(root))) == [*saved, *_acknowledged("five")]
    first.close()
    second.close()


def test_a_flush_failing_while_an_idle_log_is_closed_warns_and_cuts_only_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing an idle thread's log (eviction, the open-file limit: inside another call)
    flushes its pending writes: a failure there is a `LogWriteWarning`, not that call's
    error, the saver reads the log afresh, and a second failure on the next turn cuts
    only that turn's lines (review 32: the first left the state forgotten and the second
    cut the log to byte 0)."""
    root = tmp_path / "chats"
    saver = JsonlSaver(root, fsync=True)
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    _pending_write(saver, graph)
    armed = _fail_once(monkeypatch, "fdatasync", errno.EIO)
    armed.append(1)
    with pytest.warns(LogWriteWarning, match=r"t\.jsonl while flushing"):
        saver.storage.evict("t")
    assert _contents(graph) == _acknowledged("one")
    armed.append(1)
    with pytest.raises(LogWriteError, match="cut off"):
        graph.invoke({"messages": [("user", "two")]}, config("t"))
    assert _contents(chat_graph(JsonlSaver(root))) == _acknowledged("one")
    graph.invoke({"messages": [("user", "three")]}, config("t"))
    assert _contents(chat_graph(JsonlSaver(root))) == _acknowledged("one", "three")
    saver.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_closing_its_saver_leaves_the_parents_lines_and_lock(
    tmp_path: Path,
) -> None:
    """A child closing the saver it inherited neither flushes nor cuts the parent's
    unflushed lines (its flush failing), nor unlocks the lock file whose open file it
    shares with the parent (review 33: it cut the parent's pending write and dropped the
    parent's lock while the parent was inside it)."""
    import fcntl

    root = tmp_path / "chats"
    saver = JsonlSaver(root, fsync=True)
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "one")]}, config("t"))
    _pending_write(saver, graph)
    size = (root / "t.jsonl").stat().st_size
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: every flush of the log fails
        code = 1
        try:
            os.read(go_r, 1)
            real = os.fdatasync

            def failing(fd: int) -> None:
                if _is_log(fd):
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                real(fd)

            os.fdatasync = failing
            saver.close()
            code = 0
        finally:
            os.write(done_w, b"x")
            os._exit(code)
    with saver.storage.locked("t", exclusive=True):  # the parent inside a saver call
        os.write(go_w, b"x")
        os.read(done_r, 1)
        _, status = os.waitpid(pid, 0)
        other = os.open(saver.storage._lock_of["t"].path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # still the parent's
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (root / "t.jsonl").stat().st_size == size
    pending = JsonlSaver(root).get_tuple(config("t"))
    assert pending is not None and [w[1:] for w in pending.pending_writes] == [("note", "x")]
    saver.close()


@pytest.mark.parametrize("change", ["delete", "prune"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_read_failing_on_a_log_another_process_replaced_reads_the_new_log_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str, use_async: bool
) -> None:
    """Another process deletes and restarts, or prunes, the thread; this saver's next
    read of the new file fails (``EIO``). The call raises, and the next reads the new
    log as new: it took its lines for the old log's continuation (the deleted turns came
    back; a pruned log read as corrupt)."""
    writer = chat_graph(JsonlSaver(tmp_path))
    for text in ("a", "b", "c"):
        _turn(writer, text, False)
    reader = chat_graph(JsonlSaver(tmp_path))
    assert _contents(reader) == _acknowledged("a", "b", "c")
    if change == "delete":
        writer.checkpointer.delete_thread("t")
        _turn(writer, "new", False)
    else:
        writer.checkpointer.prune(["t"], strategy="keep_latest")
    _fail_once(monkeypatch, "pread", errno.EIO).append(1)
    with pytest.raises(OSError, match="Input/output error"):
        if use_async:
            asyncio.run(reader.aget_state(config("t")))
        else:
            reader.get_state(config("t"))
    fresh = chat_graph(JsonlSaver(tmp_path))
    assert _contents(reader) == _contents(fresh)
    history = [s.config for s in fresh.get_state_history(config("t"))]
    assert [s.config for s in reader.get_state_history(config("t"))] == history
    _turn(reader, "after", use_async)
    assert _contents(chat_graph(JsonlSaver(tmp_path))) == _contents(reader)
    assert _contents(reader)[-2:] == _acknowledged("after")
