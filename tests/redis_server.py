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
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from .local_server import LocalServer, free_port

if TYPE_CHECKING:
    import redis

__all__ = [
    "INSTALL_HINT",
    "RedisClusterServer",
    "RedisServer",
    "free_port",
    "redis_server_binary",
    "require_redis_server",
]

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


class RedisServer(LocalServer):
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

    def start(self, timeout: float = 10.0) -> Self:
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


class RedisClusterServer(LocalServer):
    """A Redis Cluster of ``masters`` primaries on 127.0.0.1, with optional replicas.

    Each node is a `RedisServer` with ``cluster-enabled yes`` in its own
    directory. The slots are split evenly among the masters (CLUSTER
    ADDSLOTSRANGE), the nodes meet (CLUSTER MEET), each replica follows its
    master (CLUSTER REPLICATE), and `start` returns once every node reports
    ``cluster_state:ok`` and sees every master's slots, and every replica has
    its master's writes: the state in which a `redis.cluster.RedisCluster`
    client can route any key.

        with RedisClusterServer(tmp_dir) as cluster:
            saver = RedisLogSaver.from_url(cluster.url)   # redis+cluster://127.0.0.1:<port>,...

    Args:
        directory: One sub-directory per node.
        masters: How many primaries share the 16384 slots.
        replicas: For each replica, the index of its master (``[0]``: one replica,
            of the first master).
        binary: The ``redis-server`` to run (default: found on PATH).
    """

    SLOTS = 16384

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        masters: int = 3,
        replicas: Sequence[int] = (),
        binary: str | None = None,
    ) -> None:
        if masters < 1:
            raise ValueError("a cluster needs at least one master")
        if any(not 0 <= m < masters for m in replicas):
            raise ValueError(f"replicas name masters 0..{masters - 1}: {list(replicas)}")
        self.directory = Path(directory)
        self.nodes = [
            RedisServer(self.directory / f"node-{i}", binary=binary, cluster=True)
            for i in range(masters)
        ]
        self.replica_of = list(replicas)
        self.replicas = [
            RedisServer(self.directory / f"replica-{i}", binary=binary, cluster=True)
            for i in range(len(replicas))
        ]

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every master as a start-up node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def ports(self) -> list[int]:
        """The masters' ports, in slot order (the first master serves slots from 0)."""
        return [n.port for n in self.nodes]

    def start(self, timeout: float = 20.0) -> Self:
        """Start every node (again) and return once the cluster is ready (see the class).

        If it does not come up, every node is stopped before the error propagates
        (``with`` never reaches ``__exit__`` when ``__enter__`` fails).
        """
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> Self:
        import redis

        every = [*self.nodes, *self.replicas]
        for node in every:
            node.start(timeout)
        clients = [redis.Redis(port=n.port, socket_timeout=2) for n in every]
        masters = clients[: len(self.nodes)]
        try:
            if not any(int(c.cluster("info")["cluster_known_nodes"]) > 1 for c in clients):
                share = self.SLOTS // len(self.nodes)  # new: not restarted from nodes.conf
                for i, client in enumerate(masters):
                    last = self.SLOTS - 1 if i == len(masters) - 1 else (i + 1) * share - 1
                    client.execute_command("CLUSTER ADDSLOTSRANGE", i * share, last)
                for node in every[1:]:
                    meet = ("CLUSTER MEET", "127.0.0.1", node.port, node.bus_port)
                    masters[0].execute_command(*meet)
                self._replicate(clients[len(self.nodes) :], masters, timeout)
            deadline = time.monotonic() + timeout
            while not all(self._ready(c) for c in clients) or not self._synced(masters):
                if time.monotonic() > deadline:
                    states = [c.cluster("info").get("cluster_state") for c in clients]
                    raise RuntimeError(f"the cluster did not come up within {timeout}s: {states}")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()
        return self

    def _replicate(
        self, replicas: list[redis.Redis], masters: list[redis.Redis], timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        for replica, master in zip(replicas, self.replica_of, strict=True):
            master_id = masters[master].execute_command("CLUSTER MYID").decode()
            while master_id not in {n["node_id"] for n in replica.cluster("nodes").values()}:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a replica did not meet master {master}")
                time.sleep(0.02)
            replica.execute_command("CLUSTER REPLICATE", master_id)

    def _ready(self, client: redis.Redis) -> bool:
        info = client.cluster("info")
        return (
            info.get("cluster_state") == "ok"
            and int(info.get("cluster_known_nodes", 0)) == len(self.nodes) + len(self.replicas)
            and self._covered(client.cluster("slots"))
        )

    def _covered(self, slots: list[list[Any]]) -> bool:
        """Every slot is served, by the masters (a slot moved by a test splits a range)."""
        served = sum(int(r[1]) - int(r[0]) + 1 for r in slots)
        return served == self.SLOTS and {r[2][1] for r in slots} == set(self.ports)

    def _synced(self, masters: list[redis.Redis]) -> bool:
        """Each master with replicas has them online: a write it owns, then WAIT, counts
        them (a replica still loading the master's data counts for a WAIT after no write)."""
        from redis.crc import key_slot

        for index, client in enumerate(masters):
            wanted = self.replica_of.count(index)
            if not wanted:
                continue
            port = self.nodes[index].port
            owned = next(r for r in client.cluster("slots") if r[2][1] == port)
            probe = next(
                f"replicas-ready-{i}"
                for i in itertools.count()
                if owned[0] <= key_slot(f"replicas-ready-{i}".encode()) <= owned[1]
            )
            pipe = client.pipeline(transaction=False)
            pipe.set(probe, port)
            pipe.wait(wanted, 100)
            if pipe.execute()[1] < wanted:
                return False
        return True

    def stop(self) -> None:
        for node in [*self.replicas, *self.nodes]:
            node.stop()
