"""JSONL descriptors: one lock and one log descriptor per thread in use, kept open.

A turn then costs no ``open``; the descriptors are bounded (an LRU), released by
`JsonlSaver.close` and by dropping the saver, never shared with a forked child,
and a log another process deleted, replaced or tore is noticed as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import seal_line
from langgraph_ctx.saver.log import LogSaver
from langgraph_ctx.storage.jsonl import LOCK_DIR, JsonlStorage, TornLineWarning

from .test_crash_and_corruption import chat, contents
from .test_saver_graphs import chat_graph

CONFIG = {"configurable": {"thread_id": "t"}}

linux_only = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc/self/fd"
)


def open_fds(root: Path) -> int:
    """Descriptors this process has open on files under ``root``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(root))
    return count


class Calls:
    """Counts calls of some ``os`` / ``fcntl`` functions (wrapping the real ones)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.counts = dict.fromkeys(names, 0)
        for name in names:
            module = fcntl if name == "flock" else os
            real = getattr(module, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                self.counts[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(module, name, counted)

    def take(self) -> dict[str, int]:
        out, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        return out


def test_a_turn_opens_no_file_once_the_thread_is_open(root, monkeypatch):
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "first")  # opens the thread's lock file and log once
    calls = Calls(monkeypatch, "open", "mkdir", "close", "lstat", "fstat", "write", "flock")
    locked = []
    real_locked = saver.storage.locked

    def count_locked(thread_id, *, exclusive):
        locked.append(exclusive)
        return real_locked(thread_id, exclusive=exclusive)

    monkeypatch.setattr(saver.storage, "locked", count_locked)
    chat(graph, "second", "third")
    counts = calls.take()
    assert counts["open"] == counts["mkdir"] == counts["close"] == counts["fstat"] == 0
    assert counts["flock"] == 2 * len(locked)  # take and drop, per saver call
    # per call: the lock file still the one we hold? the log changed?
    assert counts["lstat"] == 2 * len(locked)
    assert counts["write"] == locked.count(True) == 10  # one write per put / put_writes
    assert contents(saver)[-2:] == ["third", "you said: third"]


@linux_only
def test_open_descriptors_are_bounded_and_threads_reopen(root):
    saver = LogSaver(JsonlStorage(root, max_open_threads=4))
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(30):
        chat(graph, f"hi {i}", config={"configurable": {"thread_id": f"t{i}"}})
        assert open_fds(root) <= 2 * 4
    for i in range(30):  # every thread reopens, reads, and writes after its eviction
        config = {"configurable": {"thread_id": f"t{i}"}}
        chat(graph, f"again {i}", config=config)
        assert contents(saver, config) == [
            f"hi {i}",
            f"you said: hi {i}",
            f"again {i}",
            f"you said: again {i}",
        ]
    assert open_fds(root) <= 2 * 4


@linux_only
def test_close_and_dropping_the_saver_release_descriptors(root):
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    for i in range(5):
        chat(graph, "hi", config={"configurable": {"thread_id": f"t{i}"}})
    assert open_fds(root) == 10
    saver.close()
    assert open_fds(root) == 0
    chat(graph, "again", config={"configurable": {"thread_id": "t0"}})  # still usable
    assert open_fds(root) == 2
    with saver:
        pass
    assert open_fds(root) == 0
    chat(graph, "once more", config={"configurable": {"thread_id": "t1"}})
    del graph, saver
    gc.collect()  # LangGraph's compiled graph may sit in a cycle; the storage does not
    assert open_fds(root) == 0


def test_a_thread_deleted_and_remade_elsewhere_is_read_and_locked_anew(root):
    """Our descriptors of a deleted log and lock file are never used again: the new
    log is read, and its new lock file is the one that excludes us."""
    ours = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=ours)
    chat(graph, "old")
    theirs = JsonlSaver(root)  # another process, for all the files know
    theirs.delete_thread("t")
    chat(chat_graph().compile(checkpointer=theirs), "new")
    assert contents(ours) == ["new", "you said: new"]
    chat(graph, "ours")
    assert contents(theirs)[-2:] == ["ours", "you said: ours"]

    theirs.delete_thread("t")
    chat(chat_graph().compile(checkpointer=theirs), "newer")
    entered = threading.Event()

    def writer() -> None:
        with ours.storage.locked("t", exclusive=True):
            entered.set()

    held = os.open(root / LOCK_DIR / "t.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # the new lock file, held by its writer
    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.2)
    assert not entered.is_set()
    os.close(held)
    thread.join(5)
    assert entered.is_set()
    assert contents(ours) == ["newer", "you said: newer"]


def made_again(log: bytes) -> bytes:
    """``log`` as another process making its thread again could write it, to the byte as
    long: another creation time, "new" where it says "old", each line sealed anew."""
    lines = []
    for raw in log.splitlines():
        body = raw[: -len(b',"c":"ABCDEF"}')] + b"}"
        body = body.replace(b"old", b"new").replace(b'"created":"20', b'"created":"19')
        lines.append(seal_line(body) + b"\n")
    return b"".join(lines)


@pytest.mark.parametrize("longer", [False, True], ids=["same size", "longer"])
def test_a_thread_remade_on_the_old_inode_after_our_descriptors_closed_is_read_anew(
    root, tmp_path, longer
):
    """Once our descriptors of a log are closed (past ``max_open_threads``), nothing keeps
    its inode number from going to the next file made: a thread another process deleted
    and made again can come back with the old inode number, even the old size. Writing the
    new log's bytes over the old file makes exactly that (the kernel's reuse does not come
    on cue). The log is told apart by its first line, whose creation time no other log
    shares; before, the stale state was served (same size) or lines were read from the old
    end of another file (longer)."""
    ours = LogSaver(JsonlStorage(root, max_open_threads=1))
    graph = chat_graph().compile(checkpointer=ours)
    chat(graph, "old")
    assert contents(ours) == ["old", "you said: old"]
    chat(graph, "u", config={"configurable": {"thread_id": "u"}})  # closes t's descriptors
    path = ours.storage.path("t")
    assert open_fds(path) == 0
    before = path.stat()
    turns = ["new", "more"] if longer else ["new"]
    if longer:
        elsewhere = tmp_path / "elsewhere"
        chat(chat_graph().compile(checkpointer=LogSaver(JsonlStorage(elsewhere))), *turns)
        remade = (elsewhere / "t.jsonl").read_bytes()
        assert len(remade) > before.st_size
    else:
        remade = made_again(path.read_bytes())
        assert len(remade) == before.st_size and remade != path.read_bytes()
    with open(path, "r+b") as f:  # the same inode, the other log's bytes
        f.write(remade)
    assert path.stat().st_ino == before.st_ino
    expected = [text for turn in turns for text in (turn, f"you said: {turn}")]
    assert contents(ours) == expected
    chat(graph, "ours")  # and it goes on from there, as another saver reads it
    assert contents(JsonlSaver(root)) == [*expected, "ours", "you said: ours"]


def test_a_log_rewritten_whole_keeps_its_header_but_is_read_anew(root, tmp_path):
    """`prune` (and `delete_for_runs`) rewrite a log whole and keep its first line: on our
    old inode number (our descriptor closed), the header check alone passed, and the saver
    read on from its old end in another file (a false `CorruptLogError`; with
    ``on_corrupt="skip"`` a stale state, then lines pointing at wrong line numbers). The
    end of the last line we know is checked too. The rewrite is written over our inode
    here, as the kernel's reuse does not come on cue."""
    import shutil

    ours = LogSaver(JsonlStorage(root, max_open_threads=1))
    graph = chat_graph().compile(checkpointer=ours)
    chat(graph, "a")
    chat(graph, "u", config={"configurable": {"thread_id": "u"}})  # closes t's descriptors
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(root, elsewhere)
    other = JsonlSaver(elsewhere)  # another process: prunes, chats on, prunes again
    other.prune(["t"])
    chat(chat_graph().compile(checkpointer=other), "b", "c", "d", "e")
    other.prune(["t"])
    path = ours.storage.path("t")
    remade = (elsewhere / "t.jsonl").read_bytes()
    assert remade.split(b"\n")[0] == path.read_bytes().split(b"\n")[0]  # the same header
    assert len(remade) > path.stat().st_size  # read on from our old end, before
    ino = path.stat().st_ino
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(remade)
    assert path.stat().st_ino == ino
    assert contents(ours) == contents(JsonlSaver(root)) == contents(other)
    chat(graph, "f")
    assert contents(JsonlSaver(root))[-2:] == ["f", "you said: f"]


def test_an_async_cold_open_in_a_worker_thread_checks_the_log_when_used_again(root):
    """A first async read of a log over 1 MB runs in a worker thread, which keeps no
    descriptor: the state it built passed for one our descriptor held ever since, and a
    log made again on its inode was served stale (or read from the old end)."""
    import asyncio

    chat(chat_graph().compile(checkpointer=JsonlSaver(root)), "old " * 150_000, "old")
    path = JsonlSaver(root).storage.path("t")
    assert path.stat().st_size > 1 << 20

    async def main() -> list[str]:
        ours = JsonlSaver(root)
        first = await ours.aget_tuple(CONFIG)
        assert first.checkpoint["channel_values"]["messages"][-1].content == "you said: old"
        remade = made_again(path.read_bytes())
        with open(path, "r+b") as f:  # the same inode, another log of the same size
            f.write(remade)
        again = await ours.aget_tuple(CONFIG)
        return [m.content[:4] for m in again.checkpoint["channel_values"]["messages"]]

    assert asyncio.run(main()) == ["new ", "you ", "new", "you "]


def test_a_torn_line_left_by_another_writer_is_repaired_by_a_saver_in_use(root):
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "a")
    path = Path(saver.path("t"))
    intact = path.read_bytes()
    with open(path, "ab") as f:  # a process killed mid-write, while ours stays open
        f.write(b'{"v":2,"t":"ckpt","id":"1f0-half')
    with pytest.warns(TornLineWarning, match="torn last line"):
        assert contents(saver) == ["a", "you said: a"]
    with pytest.warns(TornLineWarning, match="removed a torn last line"):
        chat(graph, "b")
    data = path.read_bytes()
    assert data.startswith(intact) and b"half" not in data
    assert contents(JsonlSaver(root)) == ["a", "you said: a", "b", "you said: b"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_a_forked_child_does_not_share_the_parents_lock(root):
    """flock belongs to the open file: a child using the parent's descriptor would
    hold the very same lock as the parent, and exclude nothing."""
    saver = JsonlSaver(root)
    chat(chat_graph().compile(checkpointer=saver), "a")  # the parent's descriptors are open
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            with saver.storage.locked("t", exclusive=True):
                os.write(ready_w, b"x")
                time.sleep(0.5)
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"x"
    t0 = time.monotonic()
    with saver.storage.locked("t", exclusive=True):
        waited = time.monotonic() - t0
    os.waitpid(pid, 0)
    os.close(ready_r)
    assert waited > 0.3
    assert contents(saver) == ["a", "you said: a"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_reader_descriptor_becomes_a_writer(root):
    """A thread first read (its log open read-write when allowed) is then written
    through the same descriptor; a log opened read-only is reopened to write."""
    chat(chat_graph().compile(checkpointer=JsonlSaver(root)), "a")
    saver = JsonlSaver(root)
    assert contents(saver) == ["a", "you said: a"]
    lock = saver.storage._lock("t")
    assert lock.data is not None and lock.writable
    os.close(lock.data)  # as if the root had been read-only when it was opened
    lock.data = os.open(saver.path("t"), os.O_RDONLY)
    lock.writable = False
    chat(chat_graph().compile(checkpointer=saver), "b")
    assert lock.writable
    assert contents(JsonlSaver(root))[-2:] == ["b", "you said: b"]


@linux_only
def test_many_os_threads_share_few_descriptors_without_losing_a_line(root):
    """Eviction closes only idle threads' descriptors: appends from 8 OS threads to 6
    logs through at most 2 open threads' descriptors all land, each line whole."""
    storage = JsonlStorage(root, max_open_threads=2)
    ids = [f"t{i}" for i in range(6)]
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(60):
                thread_id = ids[(worker + n) % len(ids)]
                with storage.locked(thread_id, exclusive=True):
                    synced = storage.sync(thread_id)
                    line = f"{worker}:{n}".encode()
                    first = storage.append(thread_id, [line + b"\n"])
                    assert first == synced.first_line + len(synced.lines)
                    assert storage.read(thread_id, first) == line
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert errors == []
    assert open_fds(root) <= 2 * 2
    fresh = JsonlStorage(root)
    written = []
    for thread_id in ids:
        with fresh.locked(thread_id, exclusive=False):
            written += fresh.sync(thread_id).lines
    assert sorted(written) == sorted(f"{w}:{n}".encode() for w in range(8) for n in range(60))


async def _achat(graph, *texts: str, config=CONFIG) -> None:
    for text in texts:
        await graph.ainvoke({"messages": [("user", text)]}, config)


def test_an_async_turn_makes_the_sync_calls_checks(root, monkeypatch):
    """The async door's warm hold makes the sync `hold`'s checks, no more: per saver call
    a flock and an unlock, an lstat of the lock file (still ours?) and one of the log
    (changed?), and no open, close or fstat."""
    saver = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=saver)
    asyncio.run(_achat(graph, "first"))  # opens the thread's lock file and log once
    calls = Calls(monkeypatch, "open", "close", "lstat", "fstat", "write", "flock")
    locked = []
    real_locked = saver.storage._lock

    def count_lock(thread_id):
        locked.append(thread_id)
        return real_locked(thread_id)

    monkeypatch.setattr(saver.storage, "_lock", count_lock)
    asyncio.run(_achat(graph, "second", "third"))
    counts = calls.take()
    assert counts["open"] == counts["close"] == counts["fstat"] == 0
    assert counts["flock"] == 2 * len(locked)  # take and drop, per saver call
    assert counts["lstat"] == 2 * len(locked)  # the lock file still ours? the log changed?
    assert counts["write"] == 10
    assert contents(saver)[-2:] == ["third", "you said: third"]


def test_an_async_saver_notices_a_thread_deleted_and_remade_elsewhere(root):
    """The check through the log does not hide a delete: the log at the path is then
    another file, so the lock file is checked (and reopened), and the new one excludes us."""
    ours = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=ours)
    asyncio.run(_achat(graph, "old"))
    theirs = JsonlSaver(root)  # another process, for all the files know
    theirs.delete_thread("t")
    chat(chat_graph().compile(checkpointer=theirs), "new")
    asyncio.run(_achat(graph, "ours"))
    assert contents(theirs) == ["new", "you said: new", "ours", "you said: ours"]

    theirs.delete_thread("t")
    chat(chat_graph().compile(checkpointer=theirs), "newer")
    held = os.open(root / LOCK_DIR / "t.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # the new lock file, held by its writer

    async def write_while_held() -> bool:
        task = asyncio.ensure_future(_achat(graph, "after"))
        await asyncio.sleep(0.2)
        waited = not task.done()
        os.close(held)  # the writer lets go: ours gets in
        await asyncio.wait_for(task, 5)
        return waited

    assert asyncio.run(write_while_held())
    assert contents(theirs) == ["newer", "you said: newer", "after", "you said: after"]


def test_an_async_saver_notices_its_lock_file_removed_by_hand(root):
    """A lock file removed while the log stays (someone cleaned ``.locks``): the next
    warm async call sees the path hold another file, opens the new one, and waits while
    another writer holds it (the log's inode alone would not have told)."""
    ours = JsonlSaver(root)
    graph = chat_graph().compile(checkpointer=ours)
    asyncio.run(_achat(graph, "before"))
    os.unlink(root / LOCK_DIR / "t.lock")
    held = os.open(root / LOCK_DIR / "t.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # another writer's, on the lock file now at the path

    async def write_while_held() -> bool:
        task = asyncio.ensure_future(_achat(graph, "after"))
        await asyncio.sleep(0.2)
        waited = not task.done()
        os.close(held)
        await asyncio.wait_for(task, 5)
        return waited

    assert asyncio.run(write_while_held())
    assert contents(JsonlSaver(root))[-2:] == ["after", "you said: after"]
