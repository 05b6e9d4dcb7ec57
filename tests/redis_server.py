"""A real ``redis-server`` on a free loopback port, for tests and benchmarks.

    with RedisServer(tmp_dir) as server:          # started, and stopped after
        saver = RedisLogSaver.from_url(server.url)
        server.stop(kill=True)                     # a crash (SIGKILL), or a clean stop
        server.start()                             # same port, same data directory

When the binary is missing, tests are skipped with a message saying how to
install it, unless ``LANGGRAPH_CTX_REQUIRE_REDIS=1`` (set by ``make test`` and
CI), which turns the skip into a failure: CI must run these tests.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

INSTALL_HINT = (
    "redis-server is not installed; `make test` installs it "
    "(Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis)"
)


def redis_server_binary() -> str | None:
    """Path of ``redis-server`` (``$REDIS_SERVER`` overrides the search)."""
    return os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


def require_redis_server() -> str:
    """The binary, or skip the test (fail it when ``LANGGRAPH_CTX_REQUIRE_REDIS=1``).

    The ``redis`` Python package (the ``redis`` extra) is required the same way.
    """
    import pytest

    binary = redis_server_binary()
    missing = None if binary else INSTALL_HINT
    try:
        import redis  # noqa: F401
    except ImportError:
        missing = "the redis package is not installed: pip install -e '.[dev]' (or '.[redis]')"
    if missing is not None:
        if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") == "1":
            pytest.fail(missing + " (LANGGRAPH_CTX_REQUIRE_REDIS=1: not skipping)")
        pytest.skip(missing)
    assert binary is not None
    return binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process bound to 127.0.0.1, its data in ``directory``.

    Args:
        directory: Data directory (AOF / RDB files, log).
        appendonly: Persist every write to an append-only file, fsynced before
            Redis replies (``appendfsync always``): what docs/redis.md asks for.
        replica_of: Run as a replica of this server.
        binary: The ``redis-server`` to run (default: found on PATH).
        cluster: Run as a Redis Cluster node (``cluster-enabled yes``; its bus on
            `bus_port`); `RedisClusterServer` assigns the slots.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        appendonly: bool = False,
        replica_of: RedisServer | None = None,
        binary: str | None = None,
        cluster: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.appendonly = appendonly
        self.replica_of = replica_of
        self.binary = binary or redis_server_binary() or "redis-server"
        self.port = free_port()
        self.cluster = cluster
        self.bus_port = 0
        while cluster and self.bus_port in (0, self.port):
            self.bus_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
            "--daemonize", "no",
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--repl-diskless-sync-delay", "0",  # replicas sync at once, not after 5 s
        ]  # fmt: skip
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-port", str(self.bus_port),
                "--cluster-config-file", str(self.directory / "nodes.conf"),
                "--cluster-node-timeout", "5000",
            ]  # fmt: skip
        if self.replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of.port)]
        return args

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start the server (again) on the same port and wait until it answers PING."""
        if self.process is not None and self.process.poll() is None:
            return self
        import redis

        self.process = subprocess.Popen(  # it logs to --logfile
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.process.poll() is not None:
                    log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server exited ({self.process.returncode}):\n{log}")
                try:
                    if client.ping() and self._synced(client):
                        return self
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # not listening yet, or still loading its data
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not answer within {timeout}s")
                time.sleep(0.01)
        finally:
            client.close()

    def _synced(self, client: redis.Redis) -> bool:
        """A replica is ready once a write on the primary reaches it (what WAIT counts).

        Its own link status, and even the primary's ``state=online``, come up to
        a second before the primary streams writes to it.
        """
        if self.replica_of is None:
            return True
        if client.info("replication").get("master_link_status") != "up":
            return False
        import redis

        primary = redis.Redis(port=self.replica_of.port, socket_timeout=1)
        try:
            pipe = primary.pipeline(transaction=False)
            pipe.set("redis-server-helper:replica-ready", self.port)
            pipe.wait(1, 100)
            return bool(pipe.execute()[1] >= 1)
        finally:
            primary.close()

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGTERM (a clean shutdown), or SIGKILL (a crash)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisClusterServer:
    """A Redis Cluster of ``masters`` primaries on 127.0.0.1, no replicas.

    Each node is a `RedisServer` with ``cluster-enabled yes`` in its own
    directory. The slots are split evenly (CLUSTER ADDSLOTSRANGE), the nodes
    meet each other (CLUSTER MEET), and `start` returns once every node reports
    ``cluster_state:ok`` and sees every node's slots: the state in which a
    `redis.cluster.RedisCluster` client can route any key.

        with RedisClusterServer(tmp_dir) as cluster:
            saver = RedisLogSaver.from_url(cluster.url)   # redis+cluster://127.0.0.1:<port>
    """

    SLOTS = 16384

    def __init__(
        self, directory: str | os.PathLike[str], *, masters: int = 3, binary: str | None = None
    ) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        self.directory = Path(directory)
        self.binary = binary
        self.nodes = [
            RedisServer(self.directory / f"node-{i}", binary=binary, cluster=True)
            for i in range(masters)
        ]
        self.replicas: list[RedisServer] = []

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every node as a start-up node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    def start(self, timeout: float = 20.0) -> RedisClusterServer:
        import redis

        for node in self.nodes:
            node.start(timeout)
        clients = [redis.Redis(port=n.port, socket_timeout=2) for n in self.nodes]
        try:
            share = self.SLOTS // len(self.nodes)
            for i, client in enumerate(clients):
                if int(client.cluster("info").get("cluster_slots_assigned", 0)):
                    continue  # restarted from its nodes.conf: already configured
                last = self.SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
                client.execute_command("CLUSTER ADDSLOTSRANGE", i * share, last)
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port, node.bus_port)
            deadline = time.monotonic() + timeout
            while not all(self._ready(c) for c in clients):
                if time.monotonic() > deadline:
                    states = [c.cluster("info").get("cluster_state") for c in clients]
                    raise RuntimeError(f"the cluster did not come up within {timeout}s: {states}")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()
        return self

    def _ready(self, client: redis.Redis) -> bool:
        info = client.cluster("info")
        return (
            info.get("cluster_state") == "ok"
            and int(info.get("cluster_known_nodes", 0)) == len(self.nodes)
            and len(client.cluster("slots")) == len(self.nodes)
        )

    def add_replica(self, master: int, timeout: float = 20.0) -> RedisServer:
        """Start one more node as a replica of ``nodes[master]``; return once it has the
        master's writes (a ``WAIT 1`` on the master counts it) and knows every slot."""
        import redis
        from redis.crc import key_slot

        primary_node = self.nodes[master]
        node = RedisServer(
            self.directory / f"replica-{len(self.replicas)}", binary=self.binary, cluster=True
        )
        self.replicas.append(node)
        node.start(timeout)
        me = redis.Redis(port=node.port, socket_timeout=2)
        primary = redis.Redis(port=primary_node.port, socket_timeout=2)
        try:
            master_id = primary.execute_command("CLUSTER MYID").decode()
            me.execute_command(
                "CLUSTER MEET", "127.0.0.1", primary_node.port, primary_node.bus_port
            )
            deadline = time.monotonic() + timeout
            while master_id not in {n["node_id"] for n in me.cluster("nodes").values()}:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the new node did not meet {primary_node.port}")
                time.sleep(0.05)
            me.execute_command("CLUSTER REPLICATE", master_id)
            # A write the master owns, then WAIT: a replica still loading the master's
            # data counts for a WAIT that follows no write.
            owned = next(  # [first slot, last slot, [host, port, id], replicas...]
                r for r in primary.cluster("slots") if r[2][1] == primary_node.port
            )
            probe = next(
                f"replica-ready-{i}"
                for i in itertools.count()
                if owned[0] <= key_slot(f"replica-ready-{i}".encode()) <= owned[1]
            )
            while True:
                pipe = primary.pipeline(transaction=False)
                pipe.set(probe, node.port)
                pipe.wait(1, 100)
                if pipe.execute()[1] >= 1 and me.cluster("info")["cluster_state"] == "ok":
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the replica of {primary_node.port} did not sync")
        finally:
            me.close()
            primary.close()
        return node

    def stop(self) -> None:
        for node in [*self.replicas, *self.nodes]:
            node.stop()

    def __enter__(self) -> RedisClusterServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
