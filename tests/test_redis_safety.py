"""Redis storage safety: a lock script whose reply was lost, and keys of the wrong type.

The lost reply is made for real: a TCP proxy between the saver and a real
redis-server forwards the lock script, lets Redis run it, and cuts the connection
instead of passing the reply back. redis-py's retry then sends the same call again,
with the same token, as it does after any network blip.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

import redis

from langgraph_ctx.errors import WrongKeyTypeError
from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage.redis import ForeignKeyWarning

from .backends import RedisBackend
from .cli_scenarios import chat_graph, config


@pytest.fixture
def rb(redis_server) -> Iterator[RedisBackend]:
    made = RedisBackend(redis_server.url)
    yield made
    made.close()


class ReplyDroppingProxy:
    """127.0.0.1 proxy to Redis that, once, runs a command and loses its reply.

    The first client request containing ``marker`` reaches Redis (so it takes
    effect), then the client's connection is closed before the reply is passed back.
    """

    def __init__(self, port: int, marker: bytes) -> None:
        self.upstream = port
        self.marker = marker
        self.dropped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets += [client, server]
            armed = threading.Event()  # this connection's next reply is to be lost
            threading.Thread(target=self._up, args=(client, server, armed), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, armed), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, armed: threading.Event) -> None:
        with _quiet():
            while data := client.recv(65536):
                if self.marker in data and not self.dropped.is_set():
                    armed.set()
                server.sendall(data)

    def _down(self, server: socket.socket, client: socket.socket, armed: threading.Event) -> None:
        with _quiet():
            while data := server.recv(65536):
                if armed.is_set():
                    self.dropped.set()  # Redis ran it; the caller never hears
                    client.shutdown(socket.SHUT_RDWR)
                    client.close()
                    server.close()
                    return
                client.sendall(data)

    def close(self) -> None:
        for s in self.sockets:
            with _quiet():
                s.close()


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


# ------------------------------------------------- 12.12 lost reply to the lock script


def test_the_lock_script_sent_twice_with_one_token_succeeds_at_once(rb: RedisBackend) -> None:
    """What redis-py's retry does after a lost reply: the same call, the same token."""
    saver = rb.saver(lock_timeout=5.0)
    storage = saver.storage
    keys = storage.keys("t")
    call = {"keys": [keys.log, keys.gen, keys.lock], "args": [0, "host:1:tok", 5000]}
    assert storage._snapshot_script(**call)[0] == 1
    start = time.monotonic()
    assert storage._snapshot_script(**call)[0] == 1  # ours already: granted, not refused
    assert time.monotonic() - start < 0.5
    assert rb.client.get(keys.lock) == b"host:1:tok" and 0 < rb.client.pttl(keys.lock) <= 5000
    other = {**call, "args": [0, "host:2:other", 5000]}
    assert storage._snapshot_script(**other) == [0, b"host:1:tok"]  # others still wait


def test_a_lost_reply_to_the_lock_does_not_wait_out_the_lock_timeout(
    rb: RedisBackend, redis_server
) -> None:
    token_prefix = f"{socket.gethostname()}:{os.getpid()}:".encode()  # in every lock token
    proxy = ReplyDroppingProxy(redis_server.port, token_prefix)
    try:
        via_proxy = RedisLogSaver.from_url(
            f"redis://127.0.0.1:{proxy.port}/0", prefix=rb.prefix, lock_timeout=5.0, lock_wait=10
        )
        graph = chat_graph(via_proxy)
        start = time.monotonic()
        graph.invoke({"messages": [("user", "hi")]}, config("t"))
        took = time.monotonic() - start
        via_proxy.close()
    finally:
        proxy.close()
    assert proxy.dropped.is_set()  # the reply really was lost, and the call resent
    assert took < 2.0, f"waited {took:.1f}s for its own lock (lock_timeout 5 s)"
    reader = chat_graph(rb.saver())
    state = reader.get_state(config("t"))
    assert [m.content for m in state.values["messages"]] == ["hi", "you said: hi"]
    assert not rb.client.exists(rb.saver().storage.keys("t").lock)  # released by the write


# ---------------------------------------------------------- 12.13 keys of the wrong type


def test_a_thread_key_of_another_type_names_the_key_and_what_to_do(rb: RedisBackend) -> None:
    saver = rb.saver()
    graph = chat_graph(saver)
    log_key = saver.key("foreign")
    rb.client.hset(log_key, "field", "value")  # another application's hash

    with pytest.raises(WrongKeyTypeError) as err:
        graph.invoke({"messages": [("user", "hi")]}, config("foreign"))
    assert err.value.key == log_key and err.value.found == "hash"
    text = str(err.value)
    assert f"key {log_key!r} is a hash, not the list" in text
    assert f"redis-cli DEL '{log_key}'" in text and "prefix of its own" in text
    assert "script" not in text.lower()
    with pytest.raises(WrongKeyTypeError, match="is a hash, not the list"):
        saver.get_tuple(config("foreign"))
    with pytest.raises(WrongKeyTypeError):
        list(saver.list(config("foreign")))
    assert rb.client.type(log_key) == b"hash"  # left alone


def test_a_generation_key_of_another_type_is_named(rb: RedisBackend) -> None:
    saver = rb.saver()
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "hi")]}, config("t"))
    gen_key = saver.storage.keys("t").gen
    rb.client.delete(gen_key)
    rb.client.rpush(gen_key, "x")
    with pytest.raises(WrongKeyTypeError, match=r":gen' is a list, not the string"):
        chat_graph(rb.saver()).invoke({"messages": [("user", "again")]}, config("t"))


def test_list_threads_warns_about_a_key_of_another_type(rb: RedisBackend) -> None:
    saver = rb.saver()
    graph = chat_graph(saver)
    graph.invoke({"messages": [("user", "hi")]}, config("real"))
    foreign = saver.key("foreign")
    rb.client.set(foreign, "not a log")
    with pytest.warns(ForeignKeyWarning) as caught:
        threads = list(saver.list_threads())
    assert threads == ["real"]
    message = str(caught[0].message)
    assert f"skipped key {foreign!r}: it is a string, not a thread log" in message
    assert f"redis-cli DEL '{foreign}'" in message


def test_list_threads_skips_a_key_not_in_utf8_and_names_an_unreadable_long_id(
    rb: RedisBackend,
) -> None:
    """A list key under the prefix whose name is not UTF-8 raised a bare
    `UnicodeDecodeError` from `list_threads` (and `sweep`, `copy --all --from`); a long id's
    log (named by its hash, the id in its header) whose header does not read was left out
    of every listing silently."""
    from langgraph_ctx.errors import CorruptLineWarning

    saver = rb.saver()
    graph = chat_graph(saver)
    long_id = "L" * 300
    for tid in ["real", long_id]:
        graph.invoke({"messages": [("user", "hi")]}, config(tid))
    rb.client.rpush(f"ctx:{rb.prefix}:thread:{{".encode() + b"\xff}", b"x")
    rb.client.lset(saver.key(long_id), 0, b"garbage")
    with (
        pytest.warns(ForeignKeyWarning, match="not in UTF-8"),
        pytest.warns(CorruptLineWarning, match="its header .line 1. does not read"),
    ):
        threads = list(saver.list_threads())
    assert threads == ["real"]


# -------------------------------------------------------------- lone surrogates on keys


def test_a_lone_surrogate_never_reaches_redis(rb: RedisBackend) -> None:
    saver = rb.saver()
    with pytest.raises(ValueError, match="lone surrogate"):
        saver.key("\ud800")
    assert not list(rb.client.scan_iter(match=f"ctx:{rb.prefix}:*"))


def test_async_with_closes_a_client_the_saver_made(redis_server) -> None:
    import asyncio

    prefix = f"test-{uuid.uuid4().hex[:8]}"

    async def run() -> RedisLogSaver:
        async with RedisLogSaver.from_url(redis_server.url, prefix=prefix) as saver:
            await chat_graph(saver).ainvoke({"messages": [("user", "hi")]}, config("t"))
        return saver

    saver = asyncio.run(run())
    pool = saver.client.connection_pool
    assert not pool._in_use_connections
    assert all(c._sock is None for c in pool._available_connections)  # disconnected
    assert isinstance(saver.client, redis.Redis)


def test_a_database_the_server_lacks_or_not_a_number_is_a_one_line_error(
    redis_server, tmp_path
) -> None:
    """``redis://host:port/99`` on a server with 16 databases, or ``/abc`` (which
    redis-py took for database 0, silently): `StorageConfigError`, from the saver (sync
    and async) and from ``langgraph-ctx copy`` (one line, exit 1), not a traceback."""
    import asyncio
    import subprocess
    import sys

    from langgraph_ctx import JsonlSaver
    from langgraph_ctx.errors import StorageConfigError

    base = redis_server.url.rsplit("/", 1)[0]  # redis://127.0.0.1:<port>
    with pytest.raises(StorageConfigError, match="no such database"):
        RedisLogSaver.from_url(f"{base}/99").list_threads()
    with pytest.raises(StorageConfigError, match="no such database"):
        saver = RedisLogSaver.from_url(f"{base}/99")
        asyncio.run(chat_graph(saver).ainvoke({"messages": [("user", "hi")]}, config("t")))
    with pytest.raises(StorageConfigError, match="'abc' is not a number"):
        RedisLogSaver.from_url(f"{base}/abc")
    chats = tmp_path / "chats"
    chat_graph(JsonlSaver(chats)).invoke({"messages": [("user", "hi")]}, config("t"))
    for target in (f"{base}/99", f"{base}/abc"):
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(chats), "copy", "t",
             "--to", target],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
        assert "Traceback" not in done.stderr


# ------------------------------------------- 12.5 on Redis: a read-only replica reads fully


def test_a_read_only_replica_reads_fully_and_refuses_writes_clearly(tmp_path) -> None:
    from langgraph_ctx.errors import StorageUnavailableError

    from .redis_server import RedisServer, require_redis_server

    binary = require_redis_server()
    with RedisServer(tmp_path / "primary", binary=binary) as primary:
        replica = RedisServer(tmp_path / "replica", replica_of=primary, binary=binary).start()
        try:
            with RedisLogSaver.from_url(primary.url, prefix="app", wait_for_replicas=1) as saver:
                graph = chat_graph(saver)
                for text in ("hello", "again"):
                    graph.invoke({"messages": [("user", text)]}, config("chat"))
                saver.fork("chat", "chat-2")
            with RedisLogSaver.from_url(replica.url, prefix="app") as on_replica:
                graph = chat_graph(on_replica)
                state = graph.get_state(config("chat"))
                assert [m.content for m in state.values["messages"]][-1] == "you said: again"
                history = list(graph.get_state_history(config("chat")))
                assert len(history) == len(list(on_replica.list(config("chat")))) >= 4
                assert sorted(on_replica.list_threads()) == ["chat", "chat-2"]
                assert on_replica.get_tuple(config("ghost")) is None
                with pytest.raises(StorageUnavailableError, match=r"ReadOnlyError|READONLY"):
                    graph.invoke({"messages": [("user", "more")]}, config("chat"))
            assert not redis.Redis.from_url(primary.url).exists("ctx:app:thread:{chat}:lock")
        finally:
            replica.stop()


def test_a_tls_url_is_named_as_tls_in_messages(redis_server) -> None:
    """``rediss://`` to a server without TLS: the error names the store as the user wrote
    it, ``rediss://`` (it said ``redis://``, the TLS left out)."""
    from langgraph_ctx.errors import StorageUnavailableError
    from langgraph_ctx.storage.redis import connect

    tls = "rediss://" + redis_server.url.split("://", 1)[1]
    saver = RedisLogSaver(connect(tls, socket_timeout=0.5, socket_connect_timeout=0.5))
    try:
        assert saver.storage.server.startswith("rediss://127.0.0.1:")
        with pytest.raises(StorageUnavailableError, match=r"rediss://127\.0\.0\.1:"):
            saver.list_threads()
    finally:
        saver.close()


def test_the_langgraph_suite_plugin_starts_our_redis_server() -> None:
    """``tests/langgraph_suite/run.py --savers ...,redis`` errored on every redis test: its
    plugin loaded tests/redis_server.py as a lone module, which cannot import its
    neighbour ``local_server`` (relative import). Run where ``tests`` is another package,
    as in LangGraph's suite."""
    import subprocess
    import sys
    from pathlib import Path

    from .redis_server import require_redis_server

    require_redis_server()
    root = Path(__file__).resolve().parent.parent
    script = (
        "import importlib.util, sys, types\n"
        "sys.modules['tests'] = types.ModuleType('tests')  # LangGraph's, in its suite\n"
        "spec = importlib.util.spec_from_file_location('plugin', sys.argv[1])\n"
        "plugin = importlib.util.module_from_spec(spec); spec.loader.exec_module(plugin)\n"
        "url = plugin._Redis.url()\n"
        "import redis; assert redis.Redis.from_url(url).ping()\n"
        "plugin._Redis.stop(); print('ok')\n"
    )
    plugin = root / "tests" / "langgraph_suite" / "lgctx_suite_plugin.py"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(plugin)],
        capture_output=True, text=True, cwd=root, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
