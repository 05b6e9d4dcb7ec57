"""RedisLogSaver on a real redis-server: what only Redis has to get right.

The graph scenarios, fork and revert run on Redis too (``backend`` fixture in
test_saver_graphs.py and test_fork_revert.py); this module covers conformance,
the key layout, TTL, prefixes, concurrent writers and lost locks, readers racing
rewrites, restarts, AOF persistence, and copies between JSONL and Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.types import Command

from langgraph_ctx import (
    CorruptLogError,
    JsonlSaver,
    ThreadExistsError,
    ThreadNotFoundError,
)
from langgraph_ctx.codec import FORMAT_VERSION
from langgraph_ctx.errors import LockTimeoutError, LogChangedError, StorageUnavailableError
from langgraph_ctx.storage.jsonl import JsonlStorage
from langgraph_ctx.storage.transfer import copy_thread_between

from .backends import RedisBackend
from .conftest import chat, contents, history_view, snapshot_view
from .redis_server import RedisServer, free_port, require_redis_server
from .test_saver_graphs import approval_graph, chat_graph, nested_graph

if os.environ.get("LANGGRAPH_CTX_REQUIRE_REDIS") != "1":  # there, a missing extra fails
    pytest.importorskip("redis", reason="the redis extra is not installed")

import redis

from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.storage.redis import LockLostWarning, RedisStorage


@pytest.fixture
def rb(redis_url):
    """A fresh prefix on the session's server, or on its cluster."""
    made = RedisBackend(redis_url, name="redis-cluster" if "+cluster" in redis_url else "redis")
    yield made
    made.close()


@pytest.fixture
def own_server(tmp_path):
    """A server this test may stop and restart (AOF on, fsync on every write)."""
    with RedisServer(tmp_path / "redis", appendonly=True, binary=require_redis_server()) as server:
        yield server


def view(graph, thread_id: str):
    config = {"configurable": {"thread_id": thread_id}}
    return snapshot_view(graph.get_state(config)), history_view(graph, config)


# ---------------------------------------------------------------- conformance


async def test_redis_saver_passes_all_81_conformance_tests(redis_url):
    @checkpointer_test(name="RedisLogSaver")
    async def redis_saver():
        with RedisLogSaver.from_url(redis_url, prefix=f"conf-{uuid.uuid4().hex}") as saver:
            yield saver

    report = await validate(redis_saver)
    assert [f for r in report.results.values() for f in r.failures] == []
    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    assert (passed, failed) == (81, 0)
    assert all(r.passed for r in report.results.values())


# ----------------------------------------------------------- the same log


def test_the_redis_list_holds_the_jsonl_files_lines(tmp_path, rb):
    """Same graph run on both backends: the same lines, item for item."""
    messages = [HumanMessage(content="hello", id="h1"), AIMessage(content="hi!", id="a1")]
    outs = {}
    for saver in (JsonlSaver(tmp_path), rb.saver()):
        from langgraph.checkpoint.base import empty_checkpoint

        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(3):
            cp = empty_checkpoint()
            cp["id"], cp["ts"] = f"cp-{i:04d}", f"2026-01-0{i + 1}T00:00:00+00:00"
            cp["channel_versions"] = {"messages": i + 1}
            cp["channel_values"] = {"messages": messages[: i + 1]}
            config = saver.put(config, cp, {"step": i, "source": "loop"}, {"messages": i + 1})
            saver.put_writes(config, [("messages", [AIMessage(content=f"w{i}", id=f"w{i}")])], "k")
        outs[type(saver).__name__] = saver
    jsonl_lines = Path(outs["JsonlSaver"].path("t")).read_bytes().splitlines()
    redis_lines = rb.client.lrange(outs["RedisLogSaver"].key("t"), 0, -1)
    assert redis_lines[1:] == jsonl_lines[1:]
    headers = [json.loads(lines[0]) for lines in (jsonl_lines, redis_lines)]
    assert [{k: v for k, v in h.items() if k not in ("created", "c")} for h in headers] == [
        {"v": FORMAT_VERSION, "t": "thread", "thread_id": "t", "versions": "langgraph"}
    ] * 2


def test_key_layout(rb):
    saver = rb.saver()
    chat(chat_graph().compile(checkpointer=saver), "task-001", "hi")
    base = f"ctx:{rb.prefix}:thread:{{task-001}}"
    assert saver.key("task-001") == base
    assert sorted(k.decode() for k in rb.keys(f"ctx:{rb.prefix}:*")) == [base, base + ":gen"]
    assert rb.client.type(base) == b"list"  # and no lock is left behind
    header = json.loads(rb.client.lindex(base, 0))
    assert header["t"] == "thread" and header["thread_id"] == "task-001"
    kinds = [json.loads(line)["t"] for line in rb.client.lrange(base, 0, -1)]
    assert set(kinds) == {"thread", "msg", "ckpt", "writes"}
    if rb.name == "redis-cluster":
        assert saver.storage.describe("task-001").startswith("redis+cluster://127.0.0.1:")
    else:
        assert "redis://127.0.0.1" in saver.storage.describe("task-001")


# -------------------------------------------------------------- namespaces


def test_prefixes_do_not_see_each_other(redis_server):
    travel = RedisBackend(redis_server.url, prefix=f"travel-{uuid.uuid4().hex[:6]}")
    travel_sub = RedisBackend(redis_server.url, prefix=travel.prefix + ":sub")
    support = RedisBackend(redis_server.url, prefix=f"support-{uuid.uuid4().hex[:6]}")
    try:
        savers = [b.saver() for b in (travel, travel_sub, support)]
        for saver, text in zip(savers, ["plan Tokyo", "sub", "refund"], strict=True):
            chat(chat_graph().compile(checkpointer=saver), "123", text)
        assert [contents(s, "123")[0] for s in savers] == ["plan Tokyo", "sub", "refund"]
        assert [s.list_threads() for s in savers] == [["123"]] * 3
        savers[0].delete_thread("123")
        assert contents(savers[0], "123") == []
        assert contents(savers[1], "123")[0] == "sub"
        assert contents(savers[2], "123")[0] == "refund"
        assert len(list(savers[2].list(None))) == 3
    finally:
        for b in (travel, travel_sub, support):
            b.close()


HOSTILE_IDS = [
    "../../etc/passwd",
    "a*b?c[d]",
    "{tag}",
    "}{",
    "back\\slash",
    "nul\x00byte",
    "crème brûlée 🍮",
    "x" * 1000,
    " spaced ",
    "line\nbreak",
    42,
]


def test_any_thread_id_stays_inside_the_namespace(rb):
    saver = rb.saver()
    graph = chat_graph().compile(checkpointer=saver)
    for thread_id in HOSTILE_IDS:
        graph.invoke(
            {"messages": [("user", f"for {thread_id!r}")]},
            {"configurable": {"thread_id": thread_id}},
        )
    keys = [k.decode() for k in rb.keys("*") if f":{rb.prefix}:".encode() in k]
    assert len(keys) == 2 * len(HOSTILE_IDS)  # a log and a generation each
    assert all(k.startswith(f"ctx:{rb.prefix}:thread:{{") for k in keys)
    assert sorted(saver.list_threads()) == sorted(str(t) for t in HOSTILE_IDS)
    fresh = rb.saver()
    for thread_id in HOSTILE_IDS:
        assert contents(fresh, thread_id)[0] == f"for {thread_id!r}"
    # a glob in one thread id never reaches another thread
    fresh.delete_thread("a*b?c[d]")
    assert len(fresh.list_threads()) == len(HOSTILE_IDS) - 1


def test_bad_configuration_is_refused(redis_server):
    with pytest.raises(ValueError, match="decode"):
        RedisLogSaver(redis.Redis.from_url(redis_server.url, decode_responses=True))
    for prefix in ["", "a b", "x{y}", "star*"]:
        with pytest.raises(ValueError, match="prefix"):
            RedisLogSaver.from_url(redis_server.url, prefix=prefix)
    with pytest.raises(ValueError, match="ttl"):
        RedisLogSaver.from_url(redis_server.url, ttl=0)


# --------------------------------------------------------------------- TTL


def test_ttl_is_refreshed_by_every_write_and_covers_backups(rb):
    saver = rb.saver(ttl=60)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "t", "a", "b")
    log, gen = saver.key("t"), saver.key("t") + ":gen"
    assert 59_000 < rb.client.pttl(log) <= 60_000 and 59_000 < rb.client.pttl(gen) <= 60_000
    rb.client.pexpire(log, 5_000)
    chat(graph, "t", "c")
    assert rb.client.pttl(log) > 59_000  # refreshed by the append
    first = list(graph.get_state_history({"configurable": {"thread_id": "t"}}))[-1]
    saver.revert("t", first.config["configurable"]["checkpoint_id"])
    assert 59_000 < rb.client.pttl(log + ":backup:1") <= 60_000
    # without a ttl nothing expires
    forever = rb.saver()
    chat(chat_graph().compile(checkpointer=forever), "kept", "a")
    assert rb.client.pttl(forever.key("kept")) == -1


def test_a_thread_expires_after_its_ttl(rb):
    saver = rb.saver(ttl=0.3)
    chat(chat_graph().compile(checkpointer=saver), "short", "a")
    assert saver.list_threads() == ["short"]
    time.sleep(0.45)
    assert saver.get_tuple({"configurable": {"thread_id": "short"}}) is None
    assert saver.list_threads() == []
    chat(chat_graph().compile(checkpointer=saver), "short", "again")  # starts afresh
    assert contents(saver, "short") == ["again", "you said: again"]


# ------------------------------------------------------------- concurrency

WRITER = textwrap.dedent(
    """
    import sys
    from langgraph_ctx.saver.redis import RedisLogSaver
    from tests.backends import append_checkpoints

    url, prefix, ns, n, lock_timeout = sys.argv[1:4] + [int(sys.argv[4]), float(sys.argv[5])]
    saver = RedisLogSaver.from_url(url, prefix=prefix, lock_timeout=lock_timeout)
    append_checkpoints(saver, ns, n)
    """
)


@pytest.mark.parametrize(
    ("redis_url", "lock_timeout"),
    [("redis", 30.0), ("redis", 0.001), ("redis-cluster", 0.001)],  # the cluster: the harder
    ids=["locked", "locks-expire", "cluster-locks-expire"],  # case only (4 s a run)
    indirect=["redis_url"],
)
def test_two_processes_writing_one_thread_keep_one_order(rb, lock_timeout):
    """With a 1 ms lock timeout locks expire mid-write: the conditional append alone orders."""
    args = [rb.url, rb.prefix, "30", str(lock_timeout)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", WRITER, *args[:2], ns, *args[2:]],
            cwd=Path(__file__).parent.parent,
        )
        for ns in ("p1", "p2")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    saver = rb.saver()
    lines = rb.client.lrange(saver.key("shared"), 0, -1)
    assert all(json.loads(line)["v"] == FORMAT_VERSION for line in lines)
    assert sum(json.loads(line)["t"] == "ckpt" for line in lines) == 60  # nothing twice
    for ns in ("p1", "p2"):
        history = list(saver.list({"configurable": {"thread_id": "shared", "checkpoint_ns": ns}}))
        assert len(history) == 30
        assert [t.metadata["step"] for t in history] == list(range(29, -1, -1))
        head = history[0].checkpoint["channel_values"]["messages"]
        assert [m.id for m in head] == [f"{ns}-{i}" for i in range(30)]
        assert history[0].pending_writes[0][2][0].id == f"{ns}-w29"


def test_a_writer_whose_lock_expired_re_reads_and_retries(rb):
    """The lock is only a courtesy: the conditional append keeps line numbers right."""
    slow, fast = rb.saver(lock_timeout=0.05), rb.saver()
    chat(chat_graph().compile(checkpointer=slow), "t", "first")
    appends = []
    real_append = slow.storage.append

    def append_after_a_pause(thread_id, lines, **kwargs):
        if not appends:  # the first attempt stalls past its lock; another writer gets in
            worker = threading.Thread(target=chat, args=(chat_graph().compile(fast), "t", "other"))
            worker.start()
            worker.join()
        appends.append(len(lines))
        return real_append(thread_id, lines, **kwargs)

    slow.storage.append = append_after_a_pause
    with pytest.warns(LockLostWarning, match="expired before it was released"):
        chat(chat_graph().compile(checkpointer=slow), "t", "late")
    assert len(appends) >= 2  # the first append was refused, then re-encoded and retried
    cold = rb.saver()
    history = list(cold.list({"configurable": {"thread_id": "t"}}))
    assert len({t.checkpoint["id"] for t in history}) == len(history) == 9
    states = [[m.content for m in t.checkpoint["channel_values"]["messages"]] for t in history[:-1]]
    finals = {tuple(s) for s in states if s and s[-1].startswith("you said")}
    # both runs branch from "first", each complete (LangGraph orders heads by checkpoint id)
    assert finals == {
        ("first", "you said: first"),
        ("first", "you said: first", "other", "you said: other"),
        ("first", "you said: first", "late", "you said: late"),
    }


def test_an_append_applied_twice_is_applied_once(rb):
    """A retried append (its first reply was lost) must not duplicate lines."""
    storage = RedisStorage.from_url(rb.url, prefix=rb.prefix)
    lines = [b'{"v":1,"t":"thread","thread_id":"t"}\n', b'{"v":1,"t":"msg","n":0,"msg":{}}\n']
    with storage.locked("t", exclusive=True):
        storage.sync("t")
        before = storage._states["t"]
        assert storage.append("t", lines) == 1
        storage._states["t"] = before  # as if the reply had never arrived
        assert storage.append("t", lines) == 1
        assert storage.client.llen(storage.keys("t").log) == 2
        storage._states["t"] = before  # a different batch on the same stale view is refused
        with pytest.raises(LogChangedError, match="another writer changed the log"):
            storage.append("t", [b'{"v":1,"t":"msg","n":1,"msg":{}}\n'])


def test_large_appends_and_rewrites_are_single_atomic_steps(rb):
    """Thousands of lines in one append, truncate and replace (Lua pushes in chunks)."""
    storage = RedisStorage.from_url(rb.url, prefix=rb.prefix)
    lines = [b'{"v":1,"t":"thread","thread_id":"big"}\n']
    lines += [
        b'{"v":1,"t":"msg","n":%d,"msg":{"content":"%s"}}\n' % (i, b"x" * 50) for i in range(4999)
    ]
    log = storage.keys("big").log
    with storage.locked("big", exclusive=True):
        storage.sync("big")
        assert storage.append("big", lines) == 1
        assert storage.sync("big") == (False, 5001, [])
        storage.truncate("big", 2500, backup=True)
        assert rb.client.llen(log) == 2500 and rb.client.llen(log + ":backup:1") == 5000
        synced = storage.sync("big")
        assert synced.reset and synced.lines == [x[:-1] for x in lines[:2500]]
        storage.replace("big", lines[:4000], backup=False)
        assert rb.client.lrange(log, 0, -1) == [x[:-1] for x in lines[:4000]]
        with pytest.raises(LogChangedError, match="rewritten since it was read"):
            storage.read_many("big", [1, 2])  # line numbers of a log this process has not read
        synced = storage.sync("big")
        assert synced.reset and len(synced.lines) == 4000
        got = storage.read_many("big", [1, 2, 3, 3999, 4000])
        assert got == {n: lines[n - 1][:-1] for n in (1, 2, 3, 3999, 4000)}


def test_a_lock_held_elsewhere_times_out_with_a_clear_error(rb):
    saver = rb.saver(lock_wait=0.2)
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "t", "a")
    lock = saver.key("t") + ":lock"
    rb.client.set(lock, "other-host:4242:1:abc", px=10_000)
    with pytest.raises(LockTimeoutError, match="locked by other-host:4242") as err:
        chat(graph, "t", "b")
    assert err.value.key == lock
    assert contents(saver, "t") == ["a", "you said: a"]  # readers take no lock
    rb.client.delete(lock)
    chat(graph, "t", "b")
    assert contents(saver, "t")[-1] == "you said: b"


def test_a_reader_retries_when_the_log_is_rewritten_under_it(rb):
    writer = rb.saver()
    graph = chat_graph().compile(checkpointer=writer)
    chat(graph, "t", "a", "b", "c")
    reader = rb.saver(cache_bytes=0)  # every read goes to Redis, as past the cache's budget
    changed: list[LogChangedError] = []
    real_sync, real_read = reader.storage.sync, reader.storage.read_many

    def sync_then_prune(thread_id):
        synced = real_sync(thread_id)
        if not changed:  # between the reader's sync and its reads, another process prunes
            writer.prune(["t"])
        return synced

    def read_many(thread_id, lines):
        try:
            return real_read(thread_id, lines)
        except LogChangedError as exc:
            changed.append(exc)
            raise

    reader.storage.sync, reader.storage.read_many = sync_then_prune, read_many
    tup = reader.get_tuple({"configurable": {"thread_id": "t"}})
    assert len(changed) == 1 and "rewritten since it was read" in str(changed[0])
    assert [m.content for m in tup.checkpoint["channel_values"]["messages"]] == [
        "a",
        "you said: a",
        "b",
        "you said: b",
        "c",
        "you said: c",
    ]
    assert len(list(reader.list({"configurable": {"thread_id": "t"}}))) == 1


def test_a_corrupt_item_names_the_key_and_line(rb):
    saver = rb.saver()
    chat(chat_graph().compile(checkpointer=saver), "t", "a")
    kinds = [json.loads(x)["t"] for x in rb.client.lrange(saver.key("t"), 0, -1)]
    line = kinds.index("writes") + 1
    rb.client.lset(saver.key("t"), line - 1, b'{"v":1,"t":garbage')
    with pytest.raises(CorruptLogError, match="not valid JSON") as err:
        rb.saver().get_tuple({"configurable": {"thread_id": "t"}})
    assert err.value.line == line
    assert saver.key("t") in err.value.path


# ------------------------------------------------------ outages and restarts


def test_an_unreachable_server_fails_fast_with_a_clear_error():
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    saver = RedisLogSaver.from_url(url)
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailableError) as err:
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert str(err.value).startswith(f"{url} is unavailable (ConnectionError: ")
    assert "while reading ctx:langgraph:thread:{t}." in str(err.value)
    assert time.monotonic() - t0 < 2
    with pytest.raises(StorageUnavailableError, match="listing threads"):
        saver.list_threads()


async def test_a_redis_restart_fails_calls_then_recovers(own_server):
    saver = RedisLogSaver.from_url(own_server.url, prefix="app")
    graph = chat_graph().compile(checkpointer=saver)
    chat(graph, "t", "before")
    own_server.stop(kill=True)
    with pytest.raises(StorageUnavailableError, match="unavailable") as err:
        chat(graph, "t", "while down")
    assert own_server.url.rsplit("/", 1)[0] in err.value.where
    with pytest.raises(StorageUnavailableError):
        await graph.ainvoke({"messages": [("user", "down")]}, {"configurable": {"thread_id": "t"}})
    own_server.start()
    chat(graph, "t", "after")  # the same saver and client, reconnected
    assert contents(saver, "t") == ["before", "you said: before", "after", "you said: after"]
    await graph.ainvoke({"messages": [("user", "async")]}, {"configurable": {"thread_id": "t"}})
    assert contents(RedisLogSaver.from_url(own_server.url, prefix="app"), "t")[-1] == (
        "you said: async"
    )


def test_acknowledged_checkpoints_survive_a_crash_with_aof_always(own_server):
    saver = RedisLogSaver.from_url(own_server.url, prefix="app")
    graph = approval_graph().compile(checkpointer=saver)
    chat_g = chat_graph().compile(checkpointer=saver)
    chat(chat_g, "chat", *[f"q{i}" for i in range(10)])
    graph.invoke({"request": "refund"}, {"configurable": {"thread_id": "hitl"}})
    before = {t: view(g, t) for t, g in (("chat", chat_g), ("hitl", graph))}
    own_server.stop(kill=True)  # SIGKILL: no shutdown, no final save
    own_server.start()
    fresh = RedisLogSaver.from_url(own_server.url, prefix="app")
    after_chat = chat_graph().compile(checkpointer=fresh)
    after_hitl = approval_graph().compile(checkpointer=fresh)
    assert view(after_chat, "chat") == before["chat"]
    assert view(after_hitl, "hitl") == before["hitl"]
    # the interrupted run resumes on the restarted server
    resumed = after_hitl.invoke(Command(resume="yes"), {"configurable": {"thread_id": "hitl"}})
    assert resumed == {"request": "refund", "decision": "yes"}


def test_without_aof_a_crash_loses_everything(tmp_path):
    """Why docs/redis.md insists on appendonly: the same crash, default persistence."""
    with RedisServer(tmp_path / "plain", binary=require_redis_server()) as server:
        saver = RedisLogSaver.from_url(server.url, prefix="app")
        chat(chat_graph().compile(checkpointer=saver), "t", "a")
        server.stop(kill=True)
        server.start()
        assert RedisLogSaver.from_url(server.url, prefix="app").list_threads() == []


def test_wait_for_replicas_acknowledges_only_replicated_writes(tmp_path):
    binary = require_redis_server()
    with RedisServer(tmp_path / "primary", binary=binary) as primary:
        replica = RedisServer(tmp_path / "replica", replica_of=primary, binary=binary).start()
        try:
            saver = RedisLogSaver.from_url(
                primary.url, prefix="app", wait_for_replicas=1, replica_timeout=0.3
            )
            graph = chat_graph().compile(checkpointer=saver)
            chat(graph, "t", "replicated")
            on_replica = RedisLogSaver.from_url(replica.url, prefix="app")
            assert contents(on_replica, "t") == ["replicated", "you said: replicated"]
            replica.stop()
            with pytest.raises(StorageUnavailableError, match="only 0 of 1 replicas"):
                chat(graph, "t", "unreplicated")
            replica.start()  # it catches up, and writes are acknowledged again
            chat(graph, "t", "again")
            assert contents(saver, "t")[-2:] == ["again", "you said: again"]
            assert contents(on_replica, "t") == contents(saver, "t")
        finally:
            replica.stop()


# ------------------------------------------------------------ JSONL <-> Redis


def test_copy_between_jsonl_and_redis_round_trips(tmp_path, rb):
    files = JsonlStorage(tmp_path / "chats")
    jsonl = JsonlSaver(tmp_path / "chats")
    chat(chat_graph().compile(checkpointer=jsonl), "chat", "a", "b")
    nested_graph().compile(checkpointer=jsonl).invoke(
        {"log": []}, {"configurable": {"thread_id": "nested"}}
    )
    approval_graph().compile(checkpointer=jsonl).invoke(
        {"request": "x"}, {"configurable": {"thread_id": "hitl"}}
    )
    builders = {"chat": chat_graph(), "nested": nested_graph(), "hitl": approval_graph()}
    redis_storage = RedisStorage.from_url(rb.url, prefix=rb.prefix)
    for thread_id, builder in builders.items():
        n = copy_thread_between(files, thread_id, redis_storage)
        original = Path(jsonl.path(thread_id)).read_bytes().splitlines()
        assert n == len(original)
        assert rb.client.lrange(f"ctx:{rb.prefix}:thread:{{{thread_id}}}", 0, -1) == original
        on_redis = builder.compile(checkpointer=rb.saver())
        assert view(on_redis, thread_id) == view(builder.compile(checkpointer=jsonl), thread_id)
        # and back, under a new id: only the header changes
        copy_thread_between(redis_storage, thread_id, files, f"{thread_id}-back")
        back = Path(jsonl.path(f"{thread_id}-back")).read_bytes().splitlines()
        assert back[1:] == original[1:]
        header = json.loads(back[0])
        assert header["thread_id"] == f"{thread_id}-back"
        assert header["copied_from"] == {"thread_id": thread_id}
        cold = builder.compile(checkpointer=JsonlSaver(tmp_path / "chats"))
        assert view(cold, f"{thread_id}-back") == view(on_redis, thread_id)
    # the copies are live threads: the chat continues on Redis
    chat(chat_graph().compile(checkpointer=rb.saver()), "chat", "c")
    assert contents(rb.saver(), "chat")[-1] == "you said: c"
    assert contents(jsonl, "chat")[-1] == "you said: b"


def test_copy_refuses_to_overwrite_and_names_missing_threads(tmp_path, rb):
    files = JsonlStorage(tmp_path)
    redis_storage = RedisStorage.from_url(rb.url, prefix=rb.prefix)
    chat(chat_graph().compile(checkpointer=JsonlSaver(tmp_path)), "t", "from files")
    chat(chat_graph().compile(checkpointer=rb.saver()), "t", "already in redis")
    with pytest.raises(ThreadExistsError, match="'t'"):
        copy_thread_between(files, "t", redis_storage)
    assert contents(rb.saver(), "t")[0] == "already in redis"
    with pytest.raises(ThreadExistsError):
        copy_thread_between(redis_storage, "t", files)
    assert contents(JsonlSaver(tmp_path), "t")[0] == "from files"
    with pytest.raises(ThreadNotFoundError, match="'nope'"):
        copy_thread_between(files, "nope", redis_storage)
    with pytest.raises(ValueError, match="same thread"):
        copy_thread_between(files, "t", files)
