"""A log you can trust on disk: links out of the root, odd thread ids, read-only roots,
one directory scan for listing, and the ecosystem's manners (``with``, no I/O when
constructed, a clear message when the redis extra is missing).

Read-only roots are tested for real: the tests run as root, which ignores directory
permissions, so the reader runs in a subprocess as ``nobody`` on a tree it can read but
not write, and again on a read-only bind mount (when ``unshare`` may mount here).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app
from langgraph_ctx.errors import (
    CorruptLogError,
    MissingExtraError,
    ReadOnlyLogError,
    SymlinkRefusedError,
)
from langgraph_ctx.storage.jsonl import LOCK_DIR

from .backends import Backend
from .cli_scenarios import chat_graph, config

WORKTREE = Path(__file__).resolve().parents[1]
runner = CliRunner()
NOBODY = 65534


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and mtime: what a write changes."""
    out: dict[str, tuple[int, int]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def messages(graph: Any, thread_id: str) -> list[str]:
    return [m.content for m in graph.get_state(config(thread_id)).values["messages"]]


# ------------------------------------------------------------- 12.3 symlinks


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the root that nothing may write to through the root."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "victim.jsonl").write_bytes(b"precious\n")
    return path


def test_a_link_at_a_thread_file_is_refused_and_the_target_untouched(
    root: Path, outside: Path
) -> None:
    graph = chat_graph(JsonlSaver(root))
    graph.invoke({"messages": [("user", "hi")]}, config("real"))  # makes the root
    (root / "planted.jsonl").symlink_to(outside / "victim.jsonl")
    (root / "dangling.jsonl").symlink_to(outside / "created.jsonl")
    before = tree(outside)

    for thread_id in ("planted", "dangling"):
        with pytest.raises(SymlinkRefusedError, match=f"{thread_id}.jsonl is a symbolic link"):
            graph.invoke({"messages": [("user", "hi")]}, config(thread_id))
        with pytest.raises(SymlinkRefusedError):
            graph.get_state(config(thread_id))
    assert tree(outside) == before  # nothing appended, nothing created
    assert (outside / "victim.jsonl").read_bytes() == b"precious\n"
    assert messages(graph, "real") == ["hi", "you said: hi"]  # other threads still work


def test_a_link_at_the_lock_directory_is_refused(root: Path, outside: Path) -> None:
    root.mkdir()
    (root / LOCK_DIR).symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    graph = chat_graph(JsonlSaver(root))

    with pytest.raises(SymlinkRefusedError, match=r"\.locks is a symbolic link"):
        graph.invoke({"messages": [("user", "hi")]}, config("t"))
    assert tree(outside) == before  # no lock file made out there
    assert not (root / "t.jsonl").exists()


def test_a_link_at_a_lock_file_is_refused(root: Path, outside: Path) -> None:
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "hi")]}, config("t"))
    lock = root / LOCK_DIR / "t.lock"
    lock.unlink()
    lock.symlink_to(outside / "victim.jsonl")
    before = tree(outside)

    with pytest.raises(SymlinkRefusedError, match=r"t\.lock is a symbolic link"):
        chat_graph(JsonlSaver(root)).invoke({"messages": [("user", "again")]}, config("t"))
    with pytest.raises(SymlinkRefusedError):
        JsonlSaver(root).get_tuple(config("t"))  # readers lock it too
    assert tree(outside) == before


def test_readers_outside_the_saver_refuse_links_and_fifos(root: Path, outside: Path) -> None:
    """`verify`, `copy` and the archive index read files with ``open``, following links the
    saver refuses, and a FIFO (or a link to one, or to ``/dev/zero``) blocked them forever.
    Each is named instead: `verify` fails the file, the others raise."""
    from langgraph_ctx.context.archive import ContextArchive
    from langgraph_ctx.errors import ContextArchiveError, NotARegularFileError
    from langgraph_ctx.storage.jsonl import JsonlStorage
    from langgraph_ctx.storage.transfer import copy_thread_between

    saver = JsonlSaver(root)
    chat_graph(saver).invoke({"messages": [("user", "hi")]}, config("chat"))
    os.mkfifo(root / "fifo.jsonl")
    (root / "linked.jsonl").symlink_to(outside / "victim.jsonl")
    os.mkfifo(root / "chat.contexts.json")
    result = runner.invoke(app, ["--dir", str(root), "verify"])
    assert result.exit_code == 1
    for name in ("fifo", "linked"):
        assert f"FAIL  {root / name}.jsonl" in result.stdout
    assert "is not a regular file" in result.stdout and "is a symbolic link" in result.stdout
    with pytest.raises(NotARegularFileError):
        copy_thread_between(JsonlStorage(root), "fifo", JsonlStorage(outside / "copy"))
    with pytest.raises(ContextArchiveError, match="is not a regular file"):
        ContextArchive(saver).entries("chat")
    assert (outside / "victim.jsonl").read_bytes() == b"precious\n"
    # A FIFO named as a long id's log: its header, where the id is, was read to list it.
    from langgraph_ctx.storage.thread_ids import encode_thread_id

    os.mkfifo(root / f"{encode_thread_id('L' * 300)}.jsonl")
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    said = {}
    for command in ("threads", "verify"):
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(root), command],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        said[command] = done.stdout + done.stderr
    assert "chat" in said["threads"] and "left out of listings" in said["threads"]
    assert "4 files checked: 3 errors" in said["verify"]  # the FIFO, failed


def test_the_root_itself_may_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    graph = chat_graph(JsonlSaver(tmp_path / "link"))
    graph.invoke({"messages": [("user", "hi")]}, config("t"))
    assert (real / "t.jsonl").is_file()
    assert messages(chat_graph(JsonlSaver(real)), "t") == ["hi", "you said: hi"]


# ------------------------------------------------------- 12.4 lone surrogates


def test_a_thread_id_with_a_lone_surrogate_is_a_clear_value_error(backend: Backend) -> None:
    saver = backend.saver()
    graph = chat_graph(saver)
    for bad in ("\ud800", "ok\udfffok"):
        with pytest.raises(ValueError, match="thread_id must be valid Unicode text"):
            graph.invoke({"messages": [("user", "hi")]}, config(bad))
        with pytest.raises(ValueError, match="lone surrogate"):
            saver.get_tuple(config(bad))
        with pytest.raises(ValueError, match="thread_id"):
            list(saver.list(config(bad)))
        with pytest.raises(ValueError, match="thread_id"):
            saver.delete_thread(bad)
    graph.invoke({"messages": [("user", "hi")]}, config("src"))
    with pytest.raises(ValueError, match="lone surrogate"):
        saver.fork("src", "\ud800")
    assert list(saver.list_threads()) == ["src"]


# ----------------------------------------------------------- 12.5 read-only roots

READER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from langgraph_ctx import JsonlSaver
    from langgraph_ctx.errors import ReadOnlyLogError
    from tests.cli_scenarios import chat_graph, config

    root = Path(sys.argv[1])
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    out = {
        "uid": os.getuid(),
        "messages": [m.content for m in graph.get_state(config("chat")).values["messages"]],
        "history": len(list(graph.get_state_history(config("chat")))),
        "list": len(list(saver.list(config("chat")))),
        "threads": sorted(saver.list_threads()),
        "ghost": graph.get_state(config("ghost")).values,
        "fork_backups": len(saver.storage.backups("chat-2")),
    }
    writes = {
        "invoke": lambda: graph.invoke({"messages": [("user", "more")]}, config("chat")),
        "new_thread": lambda: graph.invoke({"messages": [("user", "hi")]}, config("new")),
        "fork": lambda: saver.fork("chat", "chat-3"),
        "delete": lambda: saver.delete_thread("chat"),
    }
    for name, write in writes.items():
        try:
            write()
            out[name] = "written"
        except ReadOnlyLogError as exc:
            out[name] = str(exc)
    print(json.dumps(out))
    """
)


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A root ``nobody`` can read but not write (pytest's tmp_path is private to root)."""
    top = Path(tempfile.mkdtemp(prefix="lgctx-ro-"))
    try:
        top.chmod(0o755)
        root = top / "chats"
        saver = JsonlSaver(root)
        graph = chat_graph(saver)
        for text in ("hello", "again"):
            graph.invoke({"messages": [("user", text)]}, config("chat"))
        saver.fork("chat", "chat-2")
        graph.invoke({"messages": [("user", "more")]}, config("chat-2"))
        first = list(saver.list(config("chat-2")))[-1].config["configurable"]["checkpoint_id"]
        saver.revert("chat-2", first)  # leaves chat-2.jsonl.1
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        shutil.rmtree(top)


# setpriv rather than os.setuid in a preexec_fn: the interpreter lives under /root
# (mode 700) here, and only setpriv's exec reaches it once the ids are dropped.
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _run(args: list[str], *, as_nobody: bool = True, wrap: list[str] | None = None) -> Any:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(WORKTREE),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/tmp",
        "NO_COLOR": "1",
    }
    if as_nobody and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run the reader as nobody")
    return subprocess.run(
        [*(wrap or []), *(AS_NOBODY if as_nobody else []), *args],
        capture_output=True,
        text=True,
        cwd=WORKTREE,
        env=env,
        timeout=120,
    )


def _checkpoints(root: Path, thread_id: str) -> int:
    return len(list(JsonlSaver(root).list(config(thread_id))))


def _check_reader(
    root: Path, proc: Any, before: dict[str, tuple[int, int]], why: str, uid: int
) -> None:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["uid"] == uid
    assert out["messages"] == ["hello", "you said: hello", "again", "you said: again"]
    history, listed = out["history"], out["list"]
    assert out["threads"] == ["chat", "chat-2"]
    assert out["ghost"] == {}
    assert out["fork_backups"] == 1
    for name in ("invoke", "new_thread", "fork", "delete"):
        assert out[name].startswith("cannot write to "), (name, out[name])
        assert why in out[name] and "the file or its directory is read-only" in out[name]
    assert tree(root) == before  # no lock file, no temporary file, nothing changed
    assert history == listed == _checkpoints(root, "chat") >= 4  # (this read may lock)


@pytest.mark.parametrize("locks", ["with .locks", "without .locks (a copy of the files)"])
def test_a_root_nobody_may_write_reads_fully_and_refuses_writes(
    shared_root: Path, locks: str
) -> None:
    if locks.startswith("without"):
        shutil.rmtree(shared_root / LOCK_DIR)
    before = tree(shared_root)
    proc = _run([sys.executable, "-c", READER, str(shared_root)])
    _check_reader(shared_root, proc, before, "Permission denied", NOBODY)


def test_the_cli_reads_a_root_nobody_may_write(shared_root: Path) -> None:
    before = tree(shared_root)
    cli = [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(shared_root)]
    show = _run([*cli, "show", "chat"])
    assert show.returncode == 0, show.stderr
    assert "you said: again" in show.stdout
    threads = _run([*cli, "threads", "--json"])
    assert threads.returncode == 0, threads.stderr
    rows = {t["thread_id"]: t for t in json.loads(threads.stdout)}
    assert rows["chat-2"]["backups"] == 1 and rows["chat"]["backups"] == 0
    history = _run([*cli, "history", "chat", "--json"])
    assert history.returncode == 0 and len(json.loads(history.stdout)) == _checkpoints(
        shared_root, "chat"
    )
    assert tree(shared_root) == before


def _unshare_mount_works() -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare/mount are not installed"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind / /mnt && mount -o remount,bind,ro /mnt"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"cannot make a read-only bind mount here ({probe.stderr.strip()})"
    return None


def test_a_read_only_mount_reads_fully_and_refuses_writes(shared_root: Path) -> None:
    reason = _unshare_mount_works()
    if reason is not None:
        pytest.skip(reason)
    before = tree(shared_root)
    mount = f"mount --bind {shared_root} {shared_root} && mount -o remount,bind,ro {shared_root}"
    # As root (who may write anywhere) on a read-only mount: EROFS, not permissions.
    wrap = ["unshare", "-m", "sh", "-c", f'{mount} && exec "$@"', "sh"]
    proc = _run([sys.executable, "-c", READER, str(shared_root)], as_nobody=False, wrap=wrap)
    _check_reader(shared_root, proc, before, "Read-only file system", 0)
    cli = [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(shared_root), "show", "chat"]
    show = _run(cli, as_nobody=False, wrap=wrap)
    assert show.returncode == 0 and "you said: again" in show.stdout, show.stderr
    assert tree(shared_root) == before


def test_reading_a_missing_thread_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    assert saver.get_tuple(config("ghost")) is None
    assert graph.get_state(config("ghost")).values == {}
    assert list(saver.list(config("ghost"))) == []
    assert not root.exists()  # not even the root
    graph.invoke({"messages": [("user", "hi")]}, config("real"))
    assert saver.get_tuple(config("ghost")) is None
    assert sorted(p.name for p in (root / LOCK_DIR).iterdir()) == ["real.lock"]


def test_deleting_a_thread_removes_its_lock_file(root: Path) -> None:
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    for thread_id in ("a", "b"):
        graph.invoke({"messages": [("user", "hi")]}, config(thread_id))
    saver.delete_thread("a")
    assert sorted(p.name for p in (root / LOCK_DIR).iterdir()) == ["b.lock"]
    assert sorted(p.name for p in root.iterdir()) == [LOCK_DIR, "b.jsonl"]
    graph.invoke({"messages": [("user", "back")]}, config("a"))  # a new lock file is made
    assert messages(graph, "a") == ["back", "you said: back"]


def test_a_writer_waiting_on_a_deleted_threads_lock_takes_the_new_one(root: Path) -> None:
    """Deleting unlinks the lock file: a writer that was waiting on the old file's flock
    must not write while another holds the new file (it re-checks the path)."""
    import fcntl
    import threading

    saver = JsonlSaver(root)
    chat_graph(saver).invoke({"messages": [("user", "hi")]}, config("t"))
    lock_path = root / LOCK_DIR / "t.lock"
    held = os.open(lock_path, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # another process's writer, mid-delete
    other = JsonlSaver(root)
    entered = threading.Event()

    def writer() -> None:
        with other.storage.locked("t", exclusive=True):
            entered.set()

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.2)
    assert not entered.is_set()  # waiting on the old file's flock
    lock_path.unlink()  # the delete removes the lock file, then lets go
    newer = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(newer, fcntl.LOCK_EX)  # and a third writer takes the new one
    os.close(held)
    time.sleep(0.2)
    assert not entered.is_set()  # it noticed its file was gone and waits on the new one
    os.close(newer)
    thread.join(5)
    assert entered.is_set()


# --------------------------------------------- 12.11 one directory scan for listing


def _many_threads(root: Path, n: int) -> JsonlSaver:
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "hi")]}, config("t-0000"))
    for i in range(1, n):
        saver.fork("t-0000", f"t-{i:04d}")
    for thread_id in ("t-0003", "t-0003", "t-0007"):  # backups: two of t-0003, one of t-0007
        graph.invoke({"messages": [("user", "more")]}, config(thread_id))
        saver.revert(thread_id, _first_id(saver, thread_id))
    return saver


def _first_id(saver: JsonlSaver, thread_id: str) -> str:
    return list(saver.list(config(thread_id)))[-1].config["configurable"]["checkpoint_id"]


def test_threads_lists_a_thousand_threads_with_one_directory_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "chats"
    _many_threads(root, 1000)
    scans: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path: Any = ".") -> Any:
        scans.append(os.fspath(path))
        return real_scandir(path)

    def listdir(path: Any = ".") -> Any:
        scans.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    result = CliRunner().invoke(app, ["--dir", str(root), "threads", "--json"])
    monkeypatch.undo()

    assert result.exit_code == 0, result.output
    rows = {t["thread_id"]: t for t in json.loads(result.stdout)}
    assert len(rows) == 1000
    assert rows["t-0003"]["backups"] == 2 and rows["t-0007"]["backups"] == 1
    assert sum(row["backups"] for row in rows.values()) == 3
    assert scans == [str(root)]  # one scan, not one per thread


def test_listing_scan_matches_the_per_thread_answers(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    saver = _many_threads(root, 20)
    (root / "notes.txt").write_text("a user's own file")
    (root / "t-0003.jsonl.01").write_text("not a backup name (leading zero)")
    storage = saver.storage
    plain = {t: storage.backups(t) for t in storage.thread_ids()}
    with storage.listing():
        listed = {t: storage.backups(t) for t in storage.thread_ids()}
    assert listed == plain and len(listed) == 20
    assert listed["t-0003"] == [f"{root}/t-0003.jsonl.1", f"{root}/t-0003.jsonl.2"]


# --------------------------------------------------------- 11.6 ecosystem manners


NO_IO = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from langgraph_ctx import JsonlSaver

    seen = []
    watching = False
    FS = ("open", "os.mkdir", "os.makedirs", "os.scandir", "os.listdir", "os.chmod",
          "os.rename", "os.replace", "os.remove", "os.link", "os.symlink", "os.truncate")

    def hook(event, args):
        if watching and event in FS:
            seen.append((event, str(args[0]) if args else ""))

    sys.addaudithook(hook)

    async def main():
        global watching
        watching = True
        saver = JsonlSaver(Path(sys.argv[1]) / "chats")
        watching = False
        return saver

    saver = asyncio.run(main())
    print(seen, Path(saver.root_dir).exists())
    """
)


def test_constructing_a_jsonl_saver_does_no_io(tmp_path: Path) -> None:
    """What blocking-call detectors (blockbuster, used by LangChain's tests) flag:
    file system calls made inside the event loop. Audit hooks see every one."""
    proc = subprocess.run(
        [sys.executable, "-c", NO_IO, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=WORKTREE,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] False"
    assert not (tmp_path / "chats").exists()


def test_the_first_write_makes_the_root(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "chats"
    graph = chat_graph(JsonlSaver(root))
    assert not root.exists()
    graph.invoke({"messages": [("user", "hi")]}, config("t"))
    assert sorted(p.name for p in root.iterdir()) == [LOCK_DIR, "t.jsonl"]


def test_savers_work_as_context_managers(backend: Backend) -> None:
    with backend.saver() as saver:
        chat_graph(saver).invoke({"messages": [("user", "hi")]}, config("t"))
    assert backend.exists("t")

    async def run() -> list[str]:
        async with backend.saver() as saver:
            graph = chat_graph(saver)
            await graph.ainvoke({"messages": [("user", "again")]}, config("t"))
            state = await graph.aget_state(config("t"))
            return [m.content for m in state.values["messages"]]

    assert asyncio.run(run()) == ["hi", "you said: hi", "again", "you said: again"]


HIDE_REDIS = textwrap.dedent(
    """
    import subprocess, sys

    class HideRedis:  # as if the redis extra were not installed
        def find_spec(self, name, path=None, target=None):
            if name == "redis" or name.startswith("redis."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, HideRedis())
    import langgraph_ctx
    from langgraph_ctx.errors import MissingExtraError

    langgraph_ctx.JsonlSaver  # the rest of the package works
    for how in ("from langgraph_ctx import RedisLogSaver",
                "from langgraph_ctx.saver.redis import RedisLogSaver",
                "import langgraph_ctx.storage.redis"):
        try:
            exec(how)
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError) and exc.name == "redis"
            print(type(exc).__name__, exc)
    """
)


def test_redis_log_saver_without_redis_says_what_to_install() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", HIDE_REDIS],
        capture_output=True,
        text=True,
        cwd=WORKTREE,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
    )
    assert proc.returncode == 0, proc.stderr
    expected = (
        "MissingExtraError RedisLogSaver needs the redis package, which is not installed: "
        "pip install 'langgraph-ctx[redis]'"
    )
    assert proc.stdout.strip().splitlines() == [expected] * 3
    assert issubclass(MissingExtraError, ImportError)


def test_new_errors_are_picklable(tmp_path: Path) -> None:
    import pickle

    for err in (
        SymlinkRefusedError(tmp_path / "x.jsonl"),
        ReadOnlyLogError(tmp_path, "appending", "Permission denied"),
        MissingExtraError("RedisLogSaver", "redis", "redis"),
        CorruptLogError(tmp_path / "t.jsonl", 3, "checksum mismatch"),
        CorruptLogError(tmp_path / "t.jsonl", None, "bad message", skipping=True),
    ):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)


def test_a_relative_directory_stays_where_it_was_when_the_saver_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``JsonlSaver("chats")`` resolved its directory on every call: after an ``os.chdir``
    the graph wrote a second, empty thread under the new directory and lost its history
    without a word. It is anchored when the saver is made (an open SQLite connection stays
    with its file)."""
    from langgraph.graph import START, MessagesState, StateGraph

    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"you said: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    saver = JsonlSaver("chats")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "r"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    monkeypatch.chdir(tmp_path / "elsewhere")
    graph.invoke({"messages": [("user", "again")]}, config)
    contents = [m.content for m in graph.get_state(config).values["messages"]]
    assert contents == ["hi", "you said: hi", "again", "you said: again"]
    assert saver.root_dir == str(tmp_path / "chats")
    assert not (tmp_path / "elsewhere" / "chats").exists()
    # The archive index beside the threads too (its locks were anchored, its files not).
    from langgraph_ctx.context.archive import ArchivedContext, JsonFileContextIndex

    monkeypatch.chdir(tmp_path)
    index = JsonFileContextIndex("chats")
    entry = ArchivedContext(
        context_id="c_1", title="t", archived_at="2026-11-24T00:00:00Z", message_count=1,
        thread_id="r", archive_thread_id="r.ctx.c_1", checkpoint_id="x",
    )  # fmt: skip
    index.update("r", lambda entries: [*entries, entry])
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert [e.context_id for e in index.read("r")] == ["c_1"]
