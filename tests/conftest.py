"""Shared fixtures: savers under test and helpers to compare graph runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from langgraph_ctx import JsonlSaver

from .backends import Backend, JsonlBackend, RedisBackend
from .redis_server import RedisClusterServer, RedisServer, require_redis_server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "chats"


@pytest.fixture
def saver(root: Path) -> JsonlSaver:
    return JsonlSaver(root)


@pytest.fixture
def fingerprinted(monkeypatch: pytest.MonkeyPatch) -> list[BaseMessage]:
    """Every message the token counters fingerprint from now on, in order.

    A fingerprint (the message's fields hashed) is what a count costs beyond a lookup by
    id, so a test of the count cache clears this list before a step and asserts which
    messages the step really read.
    """
    from langgraph_ctx.context.tokens import counter

    seen: list[BaseMessage] = []
    fingerprint = counter.message_fingerprint

    def recording(message: BaseMessage) -> int:
        seen.append(message)
        return fingerprint(message)

    monkeypatch.setattr(counter, "message_fingerprint", recording)
    return seen


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session; tests keep apart by key prefix."""
    binary = require_redis_server()
    with RedisServer(tmp_path_factory.mktemp("redis"), binary=binary) as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServer]:
    """A Redis Cluster of three masters for the session; tests keep apart by key prefix."""
    binary = require_redis_server()
    with RedisClusterServer(tmp_path_factory.mktemp("redis-cluster"), binary=binary) as cluster:
        yield cluster


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    """The session's redis-server, then the session's Redis Cluster (three masters)."""
    server: RedisServer | RedisClusterServer = request.getfixturevalue(
        "redis_server" if request.param == "redis" else "redis_cluster"
    )
    return server.url


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run ``backend`` tests on JSONL and Redis, and on a Redis Cluster where the module
    sets ``ON_REDIS_CLUSTER = True`` (the saver's own scenarios: the cluster changes
    routing, not what the rest of the suite exercises, and costs a second run)."""
    if "backend" in metafunc.fixturenames:
        names = ["jsonl", "redis"]
        if getattr(metafunc.module, "ON_REDIS_CLUSTER", False):
            names.append("redis-cluster")
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The store under test: a JSONL directory, or a fresh prefix on the Redis server
    (``redis``) or on the Redis Cluster (``redis-cluster``)."""
    made: Backend
    if request.param == "jsonl":
        made = JsonlBackend(tmp_path / "chats")
    elif request.param == "redis-cluster":
        made = RedisBackend(request.getfixturevalue("redis_cluster").url, name="redis-cluster")
    else:
        made = RedisBackend(request.getfixturevalue("redis_server").url)
    yield made
    made.close()


def normalize(value: Any) -> Any:
    """Messages as comparable tuples (ids left out: reducers assign random ones)."""
    if isinstance(value, BaseMessage):
        calls = tuple((c["name"], repr(c["args"])) for c in getattr(value, "tool_calls", []))
        return (value.type, repr(value.content), calls, getattr(value, "tool_call_id", None))
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    return value


def snapshot_view(snapshot: Any) -> Any:
    """The parts of a StateSnapshot a user observes, normalised."""
    return (
        normalize(snapshot.values),
        tuple(snapshot.next),
        snapshot.metadata.get("source") if snapshot.metadata else None,
        snapshot.metadata.get("step") if snapshot.metadata else None,
        tuple((t.name, normalize(t.result)) for t in snapshot.tasks),
        tuple(repr(i.value) for i in snapshot.interrupts),
    )


def history_view(graph: Any, config: dict) -> list[Any]:
    return [snapshot_view(s) for s in graph.get_state_history(config)]


def chat(graph: Any, thread_id: str, *texts: str) -> None:
    """One graph turn per text, each a user message, in thread `thread_id`."""
    for text in texts:
        graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread_id}})


def contents(saver: Any, thread_id: str) -> list[str]:
    """The message texts of the thread's head checkpoint, read from the saver itself."""
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    return [m.content for m in tup.checkpoint["channel_values"]["messages"]] if tup else []


SaverFactory = Callable[[], Any]
