"""langgraph-ctx as the LangGraph server's checkpointer, driven the way users drive it.

The factories in `langgraph_ctx.server` are checked on their own first (no server
needed). Then a real ``langgraph dev`` (from the ``server`` extra) serves a copy of
``examples/server/`` on 127.0.0.1 and `langgraph_sdk` runs a thread through it: a
run, an interrupt and its resume, ``threads.copy``, delete, and restarts (clean and
``kill -9``) on the same directory with the state intact; and once more with
``LANGGRAPH_CTX_REDIS_URL`` set, on a real redis-server. Those tests are skipped,
with the reason, only when the server package cannot be imported.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver, RedisLogSaver, StorageUnavailableError
from langgraph_ctx.cli import main as cli_main
from langgraph_ctx.server import (
    ENV_DIR,
    ENV_FSYNC,
    ENV_REDIS_PREFIX,
    ENV_REDIS_TTL,
    ENV_REDIS_URL,
    create_checkpointer,
    jsonl_checkpointer,
    redis_checkpointer,
)

from .redis_server import RedisServer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "server"
STARTUP_TIMEOUT = 60.0


@pytest.fixture(autouse=True)
def _no_ctx_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_DIR, ENV_FSYNC, ENV_REDIS_URL, ENV_REDIS_PREFIX, ENV_REDIS_TTL):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------- the factories


def _echo_graph(saver: Any) -> Any:
    def echo(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=saver)


async def test_create_checkpointer_keeps_threads_in_the_env_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "chats"))
    async with create_checkpointer() as saver:
        assert isinstance(saver, JsonlSaver)
        assert saver.storage.fsync is False
        graph = _echo_graph(saver)
        config = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, config)
    assert Path(JsonlSaver(tmp_path / "chats").path("t1")).is_file()
    state = _echo_graph(JsonlSaver(tmp_path / "chats")).get_state(config)
    assert [m.content for m in state.values["messages"]] == ["hi", "echo: hi"]


async def test_jsonl_checkpointer_defaults_to_chats_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_FSYNC, "yes")
    async with jsonl_checkpointer() as saver:
        assert Path(saver.root_dir).resolve() == (tmp_path / "chats").resolve()
        assert saver.storage.fsync is True


async def test_jsonl_checkpointer_arguments_win_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "from-env"))
    monkeypatch.setenv(ENV_FSYNC, "1")
    async with jsonl_checkpointer(tmp_path / "mine", fsync=False) as saver:
        assert Path(saver.root_dir) == tmp_path / "mine"
        assert saver.storage.fsync is False


async def test_jsonl_checkpointer_closes_its_files_at_shutdown(tmp_path: Path) -> None:
    """`redis_checkpointer` closed its client at shutdown; `jsonl_checkpointer` left its
    thread files open (and a step's unflushed writes with ``fsync``) for the process."""
    config = {"configurable": {"thread_id": "t1"}}
    async with jsonl_checkpointer(tmp_path, fsync=True) as saver:
        await _echo_graph(saver).ainvoke({"messages": [("user", "hi")]}, config)
        assert saver.storage._open_fds.locks  # files kept open while serving
    assert not saver.storage._open_fds.locks


async def test_a_bad_fsync_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_FSYNC, "sometimes")
    with pytest.raises(ValueError, match="LANGGRAPH_CTX_FSYNC='sometimes'"):
        async with jsonl_checkpointer():
            pass


async def test_create_checkpointer_uses_redis_when_its_url_is_set(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_REDIS_URL, redis_server.url)
    monkeypatch.setenv(ENV_REDIS_PREFIX, "server-factory")
    monkeypatch.setenv(ENV_REDIS_TTL, "3600")
    config = {"configurable": {"thread_id": "t1"}}
    async with create_checkpointer() as saver:
        assert isinstance(saver, RedisLogSaver)
        assert saver.prefix == "server-factory"
        await _echo_graph(saver).ainvoke({"messages": [HumanMessage("hi")]}, config)
        assert 0 < saver.client.ttl(saver.key("t1")) <= 3600
    # closed on exit: the saver owned its client
    with RedisLogSaver.from_url(redis_server.url, prefix="server-factory") as again:
        state = _echo_graph(again).get_state(config)
    assert [m.content for m in state.values["messages"]] == ["hi", "echo: hi"]


async def test_redis_checkpointer_without_a_url_says_which_variable_to_set() -> None:
    with pytest.raises(ValueError, match=ENV_REDIS_URL):
        async with redis_checkpointer():
            pass


async def test_a_bad_redis_ttl_is_named(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_REDIS_TTL, "a week")
    with pytest.raises(ValueError, match="LANGGRAPH_CTX_REDIS_TTL='a week'"):
        async with redis_checkpointer(redis_server.url):
            pass


async def test_an_unreachable_redis_fails_at_startup() -> None:
    port = _free_port()  # nothing listens there
    with pytest.raises(StorageUnavailableError, match="starting the LangGraph server"):
        async with redis_checkpointer(f"redis://127.0.0.1:{port}/0"):
            pass


def test_the_example_checkpointer_follows_the_server_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``langgraph.json`` names is called with no arguments and entered as an
    async context manager yielding a `BaseCheckpointSaver` (langgraph_api's loader)."""
    import importlib.util
    import json

    from langgraph.checkpoint.base import BaseCheckpointSaver

    config = json.loads((EXAMPLE / "langgraph.json").read_text())
    file, name = config["checkpointer"]["path"].rsplit(":", 1)
    spec = importlib.util.spec_from_file_location("example_checkpointer", EXAMPLE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "chats"))

    async def enter() -> BaseCheckpointSaver:
        async with getattr(module, name)() as saver:
            return saver

    assert isinstance(asyncio.run(enter()), BaseCheckpointSaver)
    assert config["env"][ENV_DIR] == "./chats"


def test_the_example_graph_books_only_after_a_yes(tmp_path: Path) -> None:
    """The example app's graph on its own: a plain turn, then an interrupt and resume."""
    import importlib.util

    from langgraph.types import Command

    spec = importlib.util.spec_from_file_location("example_graph", EXAMPLE / "graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = module.builder.compile(checkpointer=JsonlSaver(tmp_path / "chats"))
    config = {"configurable": {"thread_id": "example"}}
    graph.invoke({"messages": [HumanMessage("hello")]}, config)
    paused = graph.invoke({"messages": [HumanMessage("book a table")]}, config)
    assert paused["__interrupt__"][0].value == {"question": "Book a table?"}
    done = graph.invoke(Command(resume="yes"), config)
    assert done["bookings"] == ["a table"]
    assert [m.content for m in done["messages"]] == BOOKED


# ------------------------------------------------------ a real langgraph dev


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_server_packages() -> None:
    for module in ("langgraph_api", "langgraph_cli", "langgraph_sdk"):
        pytest.importorskip(
            module,
            reason=f"{module} cannot be imported: the LangGraph server test needs the "
            "`server` extra, pip install 'langgraph-ctx[server]' (`make test` installs it; "
            "its langgraph-api needs Python 3.11+)",
        )


class DevServer:
    """``langgraph dev`` on a loopback port, serving one app directory.

    Stopping it and starting it again keeps the directory (the JSONL threads and
    the server's own ``.langgraph_api`` records) and the port.
    """

    def __init__(self, app_dir: Path, env: dict[str, str] | None = None) -> None:
        self.app_dir = app_dir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = app_dir / "server.log"
        self.env = {
            # the app's langgraph.json decides where threads go, not the test's shell
            **{k: v for k, v in os.environ.items() if not k.startswith("LANGGRAPH_CTX_")},
            # offline and quiet: no analytics, version check, tracing or browser
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DevServer:
        command = [
            sys.executable,
            "-m",
            "langgraph_cli",
            "dev",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-browser",
            "--no-reload",
        ]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                cwd=self.app_dir,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, stopped as one
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"langgraph dev exited:\n{self.tail()}")
            with (
                contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                urllib.request.urlopen(f"{self.url}/ok", timeout=2) as answer,
            ):
                if answer.status == 200:
                    return self
            time.sleep(0.2)
        self.stop(kill=True)
        raise AssertionError(
            f"langgraph dev did not answer in {STARTUP_TIMEOUT:g}s:\n{self.tail()}"
        )

    def stop(self, *, kill: bool = False) -> None:
        """Ctrl-C (the server shuts down cleanly), or ``kill -9`` (a crash)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if kill:  # a crash leaves no time for a goodbye: the group goes too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def client(self) -> Any:
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.url, timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    _require_server_packages()
    app = tmp_path_factory.mktemp("server") / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("chats", ".langgraph_api"))
    dev = DevServer(app)
    try:
        yield dev.start()
    finally:
        dev.stop()


def _contents(state: dict[str, Any]) -> list[str]:
    return [m["content"] for m in state["values"]["messages"]]


def _say(client: Any, thread_id: str, text: str) -> dict[str, Any]:
    return client.runs.wait(
        thread_id, "assistant", input={"messages": [{"role": "user", "content": text}]}
    )


def _booked_thread(client: Any) -> str:
    """A thread with a plain turn, then a booking interrupted and confirmed."""
    thread_id = client.threads.create()["thread_id"]
    _say(client, thread_id, "hello")
    paused = _say(client, thread_id, "book a table")
    assert paused["__interrupt__"][0]["value"] == {"question": "Book a table?"}
    done = client.runs.wait(thread_id, "assistant", command={"resume": "yes"})
    assert done["bookings"] == ["a table"]
    return thread_id


BOOKED = ["hello", "noted: hello", "book a table", "noted: book a table", "booked: a table"]


def test_a_run_lands_in_the_thread_file(server: DevServer) -> None:
    client = server.client()
    thread_id = client.threads.create()["thread_id"]
    result = _say(client, thread_id, "hello")
    assert [m["content"] for m in result["messages"]] == ["hello", "noted: hello"]
    assert _contents(client.threads.get_state(thread_id)) == ["hello", "noted: hello"]
    # the server stored it through JsonlSaver, in the directory langgraph.json names
    stored = JsonlSaver(server.app_dir / "chats").get_tuple(
        {"configurable": {"thread_id": thread_id}}
    )
    assert stored is not None
    messages = stored.checkpoint["channel_values"]["messages"]
    assert [m.content for m in messages] == ["hello", "noted: hello"]

    # a streamed turn goes to the same file; the thread is found by search
    chunks = list(
        client.runs.stream(
            thread_id,
            "assistant",
            input={"messages": [{"role": "user", "content": "again"}]},
            stream_mode="values",
        )
    )
    values = [c.data for c in chunks if c.event == "values"]
    assert [m["content"] for m in values[-1]["messages"]][-2:] == ["again", "noted: again"]
    assert _contents(client.threads.get_state(thread_id))[-1] == "noted: again"
    found = client.threads.search(metadata={"graph_id": "assistant"}, limit=100)
    assert thread_id in [t["thread_id"] for t in found]


def test_an_interrupt_pauses_and_a_command_resumes(server: DevServer) -> None:
    client = server.client()
    thread_id = client.threads.create()["thread_id"]
    _say(client, thread_id, "book a room")
    waiting = client.threads.get_state(thread_id)
    assert waiting["next"] == ["confirm"]
    assert waiting["interrupts"][0]["value"] == {"question": "Book a room?"}
    assert client.threads.get(thread_id)["status"] == "interrupted"

    done = client.runs.wait(thread_id, "assistant", command={"resume": "no"})
    assert done["messages"][-1]["content"] == "not booked: a room"
    after = client.threads.get_state(thread_id)
    assert after["next"] == []
    assert client.threads.get(thread_id)["status"] == "idle"
    # every step is in the history, newest first, interrupted one included
    history = client.threads.get_history(thread_id, limit=50)
    assert [h["next"] for h in history][:2] == [[], ["confirm"]]


def test_copy_then_delete(server: DevServer) -> None:
    client = server.client()
    source = _booked_thread(client)
    copy = client.threads.copy(source)["thread_id"]
    assert copy != source
    assert _contents(client.threads.get_state(copy)) == BOOKED
    assert len(client.threads.get_history(copy, limit=100)) == len(
        client.threads.get_history(source, limit=100)
    )
    # the copy goes on alone
    _say(client, copy, "only in the copy")
    assert _contents(client.threads.get_state(source)) == BOOKED

    copy_file = Path(JsonlSaver(server.app_dir / "chats").path(copy))
    assert copy_file.is_file()
    client.threads.delete(copy)
    from langgraph_sdk.errors import NotFoundError

    with pytest.raises(NotFoundError):
        client.threads.get_state(copy)
    assert not copy_file.exists()
    assert _contents(client.threads.get_state(source)) == BOOKED


def test_a_thread_moved_in_as_the_readme_says_is_served_before_any_run(
    server: DevServer,
) -> None:
    """README "Moving threads in": copy a thread under a UUID with the CLI, register it
    with the README's own call; its state and history come from the file at once."""
    client = server.client()
    source = _booked_thread(client)
    moved = str(uuid.uuid4())
    chats = server.app_dir / "chats"
    with pytest.raises(SystemExit) as copied:  # the console script, as a user runs it
        cli_main(["--dir", str(chats), "copy", source, "--to", str(chats), "--as", moved])
    assert copied.value.code == 0
    client.threads.create(thread_id=moved, **_readme_register_arguments())
    assert _contents(client.threads.get_state(moved)) == BOOKED
    assert len(client.threads.get_history(moved, limit=100)) == len(
        client.threads.get_history(source, limit=100)
    )
    client.threads.update_state(moved, {"messages": [{"role": "user", "content": "added"}]})
    assert _contents(client.threads.get_state(moved))[-1] == "added"


def _readme_register_arguments() -> dict[str, Any]:
    """The keyword arguments (but ``thread_id``) of every ``threads.create`` call of the
    README's server section, which must all be the same call."""
    readme = (EXAMPLE.parent.parent / "README.md").read_text()
    calls = set(re.findall(r"client\.threads\.create\(thread_id=\.\.\., ([^)]*)\)", readme))
    assert len(calls) == 1, calls
    call = ast.parse(f"f({calls.pop()})", mode="eval").body
    assert isinstance(call, ast.Call)
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}


def test_a_copy_history_filters_by_its_own_thread_id(server: DevServer) -> None:
    client = server.client()
    source = _booked_thread(client)
    copy = client.threads.copy(source)["thread_id"]
    mine = client.threads.get_history(copy, metadata={"thread_id": copy}, limit=100)
    assert len(mine) == len(client.threads.get_history(source, limit=100))


def test_state_survives_a_restart_and_a_kill(server: DevServer) -> None:
    client = server.client()
    thread_id = _booked_thread(client)
    history = len(client.threads.get_history(thread_id, limit=100))

    server.stop()  # Ctrl-C
    server.start()
    client = server.client()
    assert client.threads.get(thread_id)["status"] == "idle"
    assert _contents(client.threads.get_state(thread_id)) == BOOKED
    assert len(client.threads.get_history(thread_id, limit=100)) == history
    _say(client, thread_id, "after the restart")

    crashed = client.threads.create()["thread_id"]
    _say(client, crashed, "remember me")
    server.stop(kill=True)  # kill -9: no shutdown at all
    server.start()
    client = server.client()
    assert _contents(client.threads.get_state(thread_id))[-2:] == [
        "after the restart",
        "noted: after the restart",
    ]
    # The dev server's own thread list may not have been flushed before the kill;
    # registering the id again finds every turn the JSONL file kept.
    client.threads.create(thread_id=crashed, if_exists="do_nothing", graph_id="assistant")
    assert _contents(client.threads.get_state(crashed)) == ["remember me", "noted: remember me"]
    _say(client, crashed, "still here")
    assert _contents(client.threads.get_state(crashed))[-1] == "noted: still here"


def test_the_server_keeps_threads_in_redis_when_its_url_is_set(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    _require_server_packages()
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns("chats", ".langgraph_api"))
    dev = DevServer(app, env={ENV_REDIS_URL: redis_server.url, ENV_REDIS_PREFIX: "dev-server"})
    try:
        client = dev.start().client()
        thread_id = _booked_thread(client)
        copy = client.threads.copy(thread_id)["thread_id"]
        dev.stop()
        client = dev.start().client()
        assert _contents(client.threads.get_state(thread_id)) == BOOKED
        assert _contents(client.threads.get_state(copy)) == BOOKED
    finally:
        dev.stop()
    assert not (app / "chats").exists()  # nothing went to the directory
    with RedisLogSaver.from_url(redis_server.url, prefix="dev-server") as saver:
        stored = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert stored is not None
    assert [m.content for m in stored.checkpoint["channel_values"]["messages"]] == BOOKED
