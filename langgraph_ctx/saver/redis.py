"""`RedisLogSaver`: the JSONL thread log, kept in Redis for several app servers.

Storage layout (see `langgraph_ctx.storage.redis`)::

    ctx:<prefix>:thread:{<thread>}            LIST    the thread's log, one JSON line per item
    ctx:<prefix>:thread:{<thread>}:gen        STRING  changes whenever the log is rewritten
    ctx:<prefix>:thread:{<thread>}:backup:1   LIST    the log before the last revert (then :2 ...)
    ctx:<prefix>:thread:{<thread>}:lock       STRING  writer lock (token, expires)

The items are exactly the lines of a JSONL thread file (same codec, same
saver logic), so ``redis-cli`` shows the conversation::

    redis-cli --raw LRANGE 'ctx:langgraph:thread:{task-001}' 0 -1 | jq -c 'select(.msg) | .msg'

See docs/redis.md for guarantees, persistence settings and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_ctx.saver.log import (
    DEFAULT_CACHED_LINES,
    DEFAULT_CACHED_THREADS,
    LogSaver,
    OnCorrupt,
)
from langgraph_ctx.storage.redis import (
    DEFAULT_PREFIX,
    RedisClient,
    RedisStorage,
    connect,
    connect_async,
)

if TYPE_CHECKING:
    from langgraph_ctx.storage.redis import AsyncRedisClient


class RedisLogSaver(LogSaver):
    """A LangGraph checkpointer that keeps each thread as a Redis list of log lines.

    The same log as `JsonlSaver` (messages stored once, checkpoints referring
    to them), on plain Redis 6+ without modules, so several processes or
    machines can serve the same threads. Sync and async (``invoke`` and
    ``ainvoke``), plus `fork`, `revert`, `prune`, `copy_thread` and
    `delete_for_runs`. ``ainvoke`` awaits Redis on the event loop through a
    ``redis.asyncio`` client (the saver's own, made from its URL on the first
    async call, or ``async_client``); the same scripts and keys as the sync client.

    Args:
        client: A ``redis.Redis`` or ``redis.cluster.RedisCluster`` client, or a
            URL for which the saver makes and owns one: ``redis://host:6379/0``
            (``rediss://`` for TLS), or ``redis+cluster://host1:7000,host2:7000``
            (``rediss+cluster://``) for a Redis Cluster.
        prefix: Application namespace: keys start with ``ctx:<prefix>:``.
            Savers with different prefixes never see each other's threads.
        ttl: Seconds a thread lives after its last write (each write refreshes
            it); ``None`` keeps threads until deleted.
        lock_timeout: Seconds a writer's lock on a thread lasts if never
            released (how long a crashed writer can block that thread).
        lock_wait: Seconds to wait for another writer before raising
            `LockTimeoutError`.
        wait_for_replicas: Acknowledge a write only once this many replicas
            have it (Redis ``WAIT``); for managed Redis without an append-only
            file (ElastiCache). Raises `StorageUnavailableError` if they do not
            within ``replica_timeout`` seconds.
        replica_timeout: Seconds to wait for replicas.
        cache_bytes: Log lines kept in memory across threads (LRU), so a line
            is fetched from Redis once; ``0`` fetches on every read.
        serde: Serializer for values that are neither plain JSON nor messages.
        allowed_types: Classes your state holds that may be rebuilt from the log.
        on_corrupt: ``"raise"`` (default) or ``"skip"`` corrupt lines with a warning.
        max_cached_threads: Threads whose index stays in memory between calls
            (least recently used go first; an evicted thread reopens from its log).
        max_cached_lines: Bound on the log lines those indexes cover together.
        async_client: A ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``
            on the same server(s) as ``client``, for the async API. Given a URL, the
            saver makes its own, once per event loop, on the first async call. With
            neither (a sync client and no async one), async calls run the sync
            client in a worker thread.

    Raises:
        StorageUnavailableError: (from any call) Redis is down, restarting,
            read-only after a failover, or out of memory. The next call retries.

    Example:
        ```python
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph_ctx import RedisLogSaver

        def chatbot(state: MessagesState):
            return {"messages": [("ai", f"you said: {state['messages'][-1].content}")]}

        builder = StateGraph(MessagesState)
        builder.add_node(chatbot)
        builder.add_edge(START, "chatbot")
        with RedisLogSaver.from_url("redis://localhost:6379/0", prefix="travel") as saver:
            graph = builder.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "task-001"}}
            graph.invoke({"messages": [("user", "hi")]}, config)
            saver.fork("task-001", "task-001-retry")
        ```
    """

    def __init__(
        self,
        client: RedisClient | str,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | None = None,
        lock_timeout: float = 30.0,
        lock_wait: float = 60.0,
        wait_for_replicas: int = 0,
        replica_timeout: float = 1.0,
        cache_bytes: int = 64 << 20,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        on_corrupt: OnCorrupt = "raise",
        max_cached_threads: int | None = DEFAULT_CACHED_THREADS,
        max_cached_lines: int | None = DEFAULT_CACHED_LINES,
        async_client: AsyncRedisClient | None = None,
    ) -> None:
        self._owns_client = isinstance(client, str)
        made: AsyncRedisClient | Callable[[], AsyncRedisClient] | None = async_client
        if isinstance(client, str):
            url = client
            client = connect(url)
            if made is None:
                made = partial(connect_async, url)
        self.storage: RedisStorage
        super().__init__(
            RedisStorage(
                client,
                prefix=prefix,
                ttl=ttl,
                lock_timeout=lock_timeout,
                lock_wait=lock_wait,
                wait_for_replicas=wait_for_replicas,
                replica_timeout=replica_timeout,
                cache_bytes=cache_bytes,
                async_client=made,
            ),
            serde=serde,
            allowed_types=allowed_types,
            on_corrupt=on_corrupt,
            max_cached_threads=max_cached_threads,
            max_cached_lines=max_cached_lines,
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> RedisLogSaver:
        """A saver on its own Redis client for ``url``; `close` it (or use ``with``).

        The client has short timeouts (5 s) and retries a failed command once,
        so a restarted server is reconnected transparently and a dead one fails
        the call quickly with `StorageUnavailableError`. A ``redis+cluster://``
        URL (see `langgraph_ctx.storage.redis.connect`) makes a cluster client.

        Example:
            ```python
            saver = RedisLogSaver.from_url("redis://localhost:6379/0", prefix="travel", ttl=86400)
            on_cluster = RedisLogSaver.from_url("redis+cluster://10.0.0.1:7000,10.0.0.2:7000")
            ```
        """
        return cls(url, **kwargs)

    @property
    def client(self) -> RedisClient:
        """The Redis client the saver uses."""
        return self.storage.client

    @property
    def prefix(self) -> str:
        """The application namespace: keys start with ``ctx:<prefix>:``."""
        return self.storage.prefix

    def key(self, thread_id: str) -> str:
        """The Redis list that holds ``thread_id``'s log (it may not exist yet).

        Example:
            ```python
            first = saver.client.lindex(saver.key("task-001"), 0)  # the header line
            ```
        """
        return self.storage.keys(thread_id).log

    def close(self) -> None:
        """Close the Redis client if the saver made it (from a URL)."""
        if self._owns_client:
            self.storage.client.close()

    def __enter__(self) -> RedisLogSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> RedisLogSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.storage.aclose()  # this loop's async client, if the saver made it
        self.close()  # a sync client: closing it is quick, local socket teardown
