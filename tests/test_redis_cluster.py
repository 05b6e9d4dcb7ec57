"""RedisLogSaver on a real Redis Cluster: what routing keys over several masters changes.

The conformance suite, the graph scenarios, fork/revert and the Redis-specific tests run on
the session's three-master cluster too (``redis-cluster`` in test_redis_saver.py,
test_saver_graphs.py and test_fork_revert.py). This module covers what only a cluster has:
a thread's keys in one slot, threads spread over the masters and listed from all of them,
copies between threads that live on different masters, ``redis+cluster://`` URLs (saver,
server factory, CLI), WAIT on the master of the thread's slot, a slot that moves, and a
master that dies.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app
from langgraph_ctx.errors import StorageUnavailableError
from langgraph_ctx.storage.jsonl import JsonlStorage
from langgraph_ctx.storage.transfer import copy_thread_between

from .backends import RedisBackend
from .conftest import chat, contents, history_view, snapshot_view
from .redis_server import RedisClusterServer, free_port, require_redis_server
from .test_saver_graphs import chat_graph

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage.redis import RedisStorage, connect


@pytest.fixture
def rc(redis_cluster: RedisClusterServer):
    """A fresh prefix on the session's cluster."""
    made = RedisBackend(redis_cluster.url, name="redis-cluster")
    yield made
    made.close()


def after_turns(graph, thread_id: str, turns: int) -> str:
    """The id of the checkpoint that ends the ``turns``-th turn of a chat."""
    for snapshot in graph.get_state_history({"configurable": {"thread_id": thread_id}}):
        if len(snapshot.values.get("messages", [])) == 2 * turns and not snapshot.next:
            return snapshot.config["configurable"]["checkpoint_id"]
    raise AssertionError(f"{thread_id} has no turn {turns}")


def holder(cluster: RedisClusterServer, key: str) -> int:
    """The port of the master that physically holds ``key`` (asked node by node, not routed:
    a master that does not serve the key's slot answers MOVED)."""
    found = []
    for port in cluster.ports:
        node = redis.Redis(port=port)
        try:
            if node.execute_command("EXISTS", key):
                found.append(port)
        except redis.exceptions.MovedError:
            pass
        finally:
            node.close()
    assert len(found) == 1, (key, found)
    return found[0]


def thread_on(saver: RedisLogSaver, port: int, stem: str) -> str:
    """A thread id whose keys hash to a slot ``port``'s master serves."""
    client = saver.client
    assert isinstance(client, RedisCluster)
    for i in range(1000):
        if client.get_node_from_key(saver.key(f"{stem}-{i}")).port == port:
            return f"{stem}-{i}"
    raise AssertionError(f"no thread id on {port}")


# ------------------------------------------------------------ slots and masters


def test_a_threads_keys_share_one_slot_and_threads_spread_over_the_masters(rc, redis_cluster):
    saver = rc.saver()
    graph = chat_graph().compile(checkpointer=saver)
    ids = [f"user-{i}" for i in range(24)] + ["{tag}", "}{", "a*b?c[d]", "crème 🍮"]
    for thread_id in ids:
        chat(graph, thread_id, "hi")
    chat(graph, "user-0", "again")
    saver.revert("user-0", after_turns(graph, "user-0", 1))  # leaves a backup list
    # Every key of a thread (log, generation, lock, backups) is in one slot, on one master.
    for thread_id in ids:
        keys = saver.storage.keys(thread_id)
        names = [keys.log, keys.gen, keys.lock, f"{keys.backup}1"]
        assert len({key_slot(k.encode()) for k in names}) == 1, thread_id
        assert len({rc.client.keyslot(k) for k in names}) == 1, thread_id
    backup = saver.storage.backups("user-0")[0]
    assert holder(redis_cluster, backup) == holder(redis_cluster, saver.key("user-0"))
    # The threads spread over all three masters, and listing them visits every master.
    per_master = Counter(holder(redis_cluster, saver.key(t)) for t in ids)
    assert set(per_master) == set(redis_cluster.ports)
    assert min(per_master.values()) >= 3, per_master
    assert sorted(saver.list_threads()) == sorted(ids)
    assert sorted(rc.saver().storage.thread_ids()) == sorted(ids)
    # A cold saver (a new process) reads each thread from its own master.
    cold = rc.saver()
    assert all(contents(cold, t)[-1] == "you said: hi" for t in ids)


def test_fork_copy_and_delete_across_masters(rc, redis_cluster):
    saver = rc.saver()
    graph = chat_graph().compile(checkpointer=saver)
    one, two = redis_cluster.ports[:2]
    source, target = thread_on(saver, one, "src"), thread_on(saver, two, "fork")
    copy = thread_on(saver, redis_cluster.ports[2], "copy")
    chat(graph, source, "a", "b", "c")
    history = list(graph.get_state_history({"configurable": {"thread_id": source}}))
    early = after_turns(graph, source, 1)
    # Each step touches one thread's slot: a multi-slot script or transaction would be
    # refused by the client (and by Redis: CROSSSLOT) instead of running.
    saver.fork(source, target)
    saver.copy_thread(source, copy)
    assert holder(redis_cluster, saver.key(target)) == two
    assert holder(redis_cluster, saver.key(copy)) == redis_cluster.ports[2]
    source_view = snapshot_view(graph.get_state({"configurable": {"thread_id": source}}))
    for thread_id in (target, copy):
        config = {"configurable": {"thread_id": thread_id}}
        assert snapshot_view(graph.get_state(config)) == source_view
        assert len(history_view(graph, config)) == len(history)
    # A fork up to an earlier checkpoint, onto another master.
    partial = thread_on(saver, two, "partial")
    saver.fork(source, partial, checkpoint_id=early)
    assert contents(saver, partial) == contents(saver, source)[:2]
    chat(graph, target, "only in the fork")
    assert contents(rc.saver(), source)[-1] == "you said: c"
    assert contents(rc.saver(), target)[-1] == "you said: only in the fork"
    saver.delete_thread(source)
    assert not rc.exists(source) and rc.exists(target)
    assert sorted(rc.saver().list_threads()) == sorted([target, copy, partial])


def test_copy_between_jsonl_and_a_cluster_and_the_cli(tmp_path, rc):
    jsonl = JsonlSaver(tmp_path / "chats")
    chat(chat_graph().compile(checkpointer=jsonl), "chat", "a", "b")
    on_cluster = RedisStorage.from_url(rc.url, prefix=rc.prefix)
    assert on_cluster.cluster and isinstance(on_cluster.client, RedisCluster)
    n = copy_thread_between(JsonlStorage(tmp_path / "chats"), "chat", on_cluster, "moved")
    assert n == len(Path(jsonl.path("chat")).read_bytes().splitlines())
    config = {"configurable": {"thread_id": "chat"}}
    moved = {"configurable": {"thread_id": "moved"}}
    local = chat_graph().compile(checkpointer=jsonl)
    remote = chat_graph().compile(checkpointer=rc.saver())
    assert snapshot_view(remote.get_state(moved)) == snapshot_view(local.get_state(config))
    on_cluster.client.close()
    # The command line takes the same URL.
    result = CliRunner().invoke(
        app,
        ["--dir", str(tmp_path / "chats"), "copy", "chat", "--to", rc.url, "--prefix", rc.prefix],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("copied chat -> redis+cluster://127.0.0.1:")
    assert sorted(rc.saver().list_threads()) == ["chat", "moved"]
    back = CliRunner().invoke(
        app,
        ["--dir", str(tmp_path / "back"), "copy", "--all", "--from", rc.url, "--prefix", rc.prefix],
    )
    assert back.exit_code == 0, back.output
    assert sorted(JsonlSaver(tmp_path / "back").list_threads()) == ["chat", "moved"]


async def test_the_server_factory_takes_a_cluster_url(redis_cluster, monkeypatch):
    from langgraph_ctx.server import ENV_REDIS_PREFIX, ENV_REDIS_URL, create_checkpointer

    prefix = f"server-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(ENV_REDIS_URL, redis_cluster.url)
    monkeypatch.setenv(ENV_REDIS_PREFIX, prefix)
    async with create_checkpointer() as saver:
        assert isinstance(saver, RedisLogSaver) and isinstance(saver.client, RedisCluster)
        graph = chat_graph().compile(checkpointer=saver)
        for i in range(6):
            config = {"configurable": {"thread_id": f"t{i}"}}
            await graph.ainvoke({"messages": [HumanMessage("hi")]}, config)
    with RedisLogSaver.from_url(redis_cluster.url, prefix=prefix) as again:
        assert sorted(again.list_threads()) == [f"t{i}" for i in range(6)]
        assert contents(again, "t5") == ["hi", "you said: hi"]


# --------------------------------------------------------------------- URLs


def test_cluster_urls_name_the_start_up_nodes(redis_cluster):
    one, two, three = redis_cluster.ports
    # Any node is enough to start from: the client discovers the others.
    client = connect(f"redis+cluster://127.0.0.1:{two}")
    try:
        assert isinstance(client, RedisCluster)
        assert sorted(n.port for n in client.get_primaries()) == sorted(redis_cluster.ports)
    finally:
        client.close()
    saver = RedisLogSaver.from_url(
        f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{three}/0?socket_timeout=2"
    )
    with saver:  # the first node is down: the client starts from the next one
        assert isinstance(saver.client, RedisCluster)
        assert saver.storage.server.startswith("redis+cluster://127.0.0.1:")
        assert f"127.0.0.1:{one}" in saver.storage.server
        chat(chat_graph().compile(checkpointer=saver), "t", "hi")
    with pytest.raises(ValueError, match="only database 0"):
        connect(f"redis+cluster://127.0.0.1:{one}/2")
    with pytest.raises(ValueError, match="at least one host"):
        connect("redis+cluster://")
    with pytest.raises(ValueError, match=r"'127\.0\.0\.1:x' is not host:port"):
        connect(f"redis+cluster://127.0.0.1:{one},127.0.0.1:x")
    with pytest.raises(ValueError, match="decode"):
        RedisLogSaver(RedisCluster("127.0.0.1", one, decode_responses=True))


def test_an_unreachable_cluster_fails_with_a_clear_error_and_no_password():
    dead = free_port()
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError) as err:
        RedisLogSaver.from_url(f"redis+cluster://app:s3cret@127.0.0.1:{dead}")
    assert time.monotonic() - started < 5
    message = str(err.value)
    assert f"redis+cluster://app:***@127.0.0.1:{dead}" in message
    assert "connecting to the cluster" in message and "s3cret" not in message


# ------------------------------------------- replicas, a moving slot, a dead master


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    """Two masters; the first has a replica. Its own cluster: tests here move a slot
    and kill a master."""
    binary = require_redis_server()
    directory = tmp_path_factory.mktemp("replicated")
    with RedisClusterServer(directory, masters=2, replicas=[0], binary=binary) as cluster:
        yield cluster


def test_wait_for_replicas_waits_on_the_master_of_the_threads_slot(replicated):
    with_replica, without = replicated.ports
    saver = RedisLogSaver.from_url(
        replicated.url, prefix=f"w-{uuid.uuid4().hex[:6]}", wait_for_replicas=1,
        replica_timeout=0.2,
    )  # fmt: skip
    with saver:
        graph = chat_graph().compile(checkpointer=saver)
        kept = thread_on(saver, with_replica, "kept")
        chat(graph, kept, "a", "b")  # every write waited for the first master's replica
        replica = redis.Redis(port=replicated.replicas[0].port)
        replica.execute_command("READONLY")
        assert replica.lrange(saver.key(kept), 0, -1) == saver.client.lrange(saver.key(kept), 0, -1)
        replica.close()
        lonely = thread_on(saver, without, "lonely")
        with pytest.raises(StorageUnavailableError, match="only 0 of 1 replicas"):
            chat(graph, lonely, "a")


def test_a_thread_whose_slot_moves_to_another_master_keeps_working(replicated, monkeypatch):
    source_port, target_port = replicated.ports[1], replicated.ports[0]
    prefix = f"m-{uuid.uuid4().hex[:6]}"
    plain = RedisLogSaver.from_url(replicated.url, prefix=prefix)
    waiting = RedisLogSaver.from_url(
        replicated.url, prefix=prefix, wait_for_replicas=1, replica_timeout=1.0
    )
    thread_id = thread_on(plain, source_port, "moving")
    chat(chat_graph().compile(checkpointer=plain), thread_id, "before")
    assert contents(waiting, thread_id) == ["before", "you said: before"]  # layout learnt
    _move_slot(replicated, key_slot(plain.key(thread_id).encode()), source_port, target_port)
    assert holder(replicated, plain.key(thread_id)) == target_port
    # Both savers still route the slot to its old master: the cluster answers MOVED and
    # the client learns the new layout. A write with WAIT goes to the master's own
    # connection: on MOVED the saver refreshes the layout and sends script and WAIT again.
    refreshed = []
    learn = waiting.client.nodes_manager.initialize
    monkeypatch.setattr(
        waiting.client.nodes_manager, "initialize", lambda: refreshed.append(1) or learn()
    )
    direct = redis.Redis(port=target_port)
    lines = direct.llen(plain.key(thread_id))  # asked without the saver's client
    direct.close()
    waiting.storage.truncate(thread_id, lines, backup=False)  # a rewrite: same lines, new gen
    assert refreshed and holder(replicated, plain.key(thread_id)) == target_port
    chat(chat_graph().compile(checkpointer=waiting), thread_id, "after")  # needs the replica
    chat(chat_graph().compile(checkpointer=plain), thread_id, "later")
    assert contents(RedisLogSaver.from_url(replicated.url, prefix=prefix), thread_id) == [
        "before", "you said: before", "after", "you said: after", "later", "you said: later"
    ]  # fmt: skip
    plain.close()
    waiting.close()


def test_a_dead_master_makes_its_threads_unavailable_not_the_others(replicated):
    """Then the whole cluster dies, and comes back (empty: no AOF)."""
    alive, dying = replicated.ports
    with RedisLogSaver.from_url(replicated.url, prefix=f"d-{uuid.uuid4().hex[:6]}") as saver:
        graph = chat_graph().compile(checkpointer=saver)
        safe, lost = thread_on(saver, alive, "safe"), thread_on(saver, dying, "lost")
        chat(graph, safe, "a")
        chat(graph, lost, "a")
        replicated.nodes[1].stop(kill=True)  # a crash: no AOF, its data is gone
        try:
            started = time.monotonic()
            with pytest.raises(StorageUnavailableError, match=r"ConnectionError") as err:
                chat(graph, lost, "b")
            assert time.monotonic() - started < 5
            assert saver.key(lost) in str(err.value)
            assert f"on 127.0.0.1:{dying})" in str(err.value)  # names the master to look at
            chat(graph, safe, "b")  # the other master still serves its threads
            assert contents(saver, safe)[-1] == "you said: b"
            for node in [*replicated.nodes, *replicated.replicas]:  # the whole cluster down
                node.stop(kill=True)
            for thread_id in (safe, lost):
                with pytest.raises(StorageUnavailableError, match="cannot be connected"):
                    chat(graph, thread_id, "c")
            with pytest.raises(StorageUnavailableError, match="listing threads"):
                saver.list_threads()
        finally:
            replicated.start()  # the node again, from its nodes.conf: the cluster heals
        chat(graph, lost, "c")  # and its threads are served again
        assert contents(saver, lost)[-2:] == ["c", "you said: c"]
        chat(graph, safe, "c")
        assert contents(saver, safe)[-2:] == ["c", "you said: c"]


def _move_slot(cluster: RedisClusterServer, slot: int, source: int, target: int) -> None:
    """Reshard ``slot`` from the master on port ``source`` to the one on ``target``
    (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE its keys, SETSLOT NODE)."""
    src, dst = redis.Redis(port=source), redis.Redis(port=target)
    try:
        src_id = src.execute_command("CLUSTER MYID").decode()
        dst_id = dst.execute_command("CLUSTER MYID").decode()
        dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
        while keys := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
            src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
        for client in (dst, src):
            client.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    finally:
        src.close()
        dst.close()
