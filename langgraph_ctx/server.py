"""Checkpointer factories for the LangGraph server (``langgraph dev``, Agent Server).

The server takes a custom checkpointer from ``langgraph.json``::

    {
      "graphs": {"agent": "./graph.py:graph"},
      "checkpointer": {"path": "./checkpointer.py:create_checkpointer"},
      "env": {"LANGGRAPH_CTX_DIR": "./chats"}
    }

``path`` names an object the server calls with no arguments and enters as an
async context manager once per event loop, at start-up; it leaves the context
when it shuts down. Every factory here has that shape, so ``checkpointer.py``
can be a single import::

    from langgraph_ctx.server import create_checkpointer

`create_checkpointer` is configured by environment variables (set them in
``langgraph.json`` ``"env"``, in ``.env``, or in the deployment):

- ``LANGGRAPH_CTX_REDIS_URL``: when set, threads live in Redis (`RedisLogSaver`):
  ``redis://host:6379/0``, or ``redis+cluster://host1:7000,host2:7000`` for a Redis
  Cluster (``rediss://`` and ``rediss+cluster://`` for TLS), with
  ``LANGGRAPH_CTX_REDIS_PREFIX`` (namespace) and ``LANGGRAPH_CTX_REDIS_TTL``
  (seconds a thread lives after its last write) optional;
- otherwise ``LANGGRAPH_CTX_DIR`` (default ``./chats``, relative to the directory
  the server runs in) holds one JSONL file per thread (`JsonlSaver`), and
  ``LANGGRAPH_CTX_FSYNC=1`` flushes each checkpoint to disk (its pending writes with it).

For anything the variables do not cover (``allowed_types``, an existing Redis
client, ...), wrap `jsonl_checkpointer` or `redis_checkpointer` with your own
arguments::

    def create_checkpointer():
        return jsonl_checkpointer("./chats", allowed_types=[Booking], fsync=True)

The server's own thread list (``threads.search``) is kept by the server, not by
the checkpointer; the checkpointer keeps every thread's state and history.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from langgraph_ctx.errors import MissingExtraError, StorageUnavailableError
from langgraph_ctx.saver.jsonl import JsonlSaver
from langgraph_ctx.saver.log import LogSaver

__all__ = [
    "DEFAULT_DIR",
    "ENV_DIR",
    "ENV_FSYNC",
    "ENV_REDIS_PREFIX",
    "ENV_REDIS_TTL",
    "ENV_REDIS_URL",
    "create_checkpointer",
    "jsonl_checkpointer",
    "redis_checkpointer",
]

ENV_DIR = "LANGGRAPH_CTX_DIR"
ENV_FSYNC = "LANGGRAPH_CTX_FSYNC"
ENV_REDIS_URL = "LANGGRAPH_CTX_REDIS_URL"
ENV_REDIS_PREFIX = "LANGGRAPH_CTX_REDIS_PREFIX"
ENV_REDIS_TTL = "LANGGRAPH_CTX_REDIS_TTL"

DEFAULT_DIR = "chats"
"""Where `create_checkpointer` keeps thread files when ``LANGGRAPH_CTX_DIR`` is unset."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


@asynccontextmanager
async def jsonl_checkpointer(
    root_dir: str | os.PathLike[str] | None = None, **kwargs: Any
) -> AsyncIterator[JsonlSaver]:
    """A `JsonlSaver` for the server's lifetime.

    Args:
        root_dir: Directory for the thread files; default ``$LANGGRAPH_CTX_DIR``,
            else ``./chats``.
        **kwargs: Passed to `JsonlSaver` (``fsync``, ``allowed_types``, ``serde``,
            ``on_corrupt``). ``fsync`` defaults to ``$LANGGRAPH_CTX_FSYNC``.
            ``inline_async`` defaults to ``False``: the server's blocking-call
            detector (``langgraph dev``) refuses file calls on the event loop, so
            each async call runs in a worker thread.

    Raises:
        ValueError: ``LANGGRAPH_CTX_FSYNC`` is not a yes/no value.

    Example:
        ```python
        # checkpointer.py, named in langgraph.json "checkpointer": {"path": ...}
        from langgraph_ctx.server import jsonl_checkpointer

        def create_checkpointer():
            return jsonl_checkpointer("/var/lib/chats", fsync=True)
        ```
    """
    root = root_dir if root_dir is not None else os.environ.get(ENV_DIR) or DEFAULT_DIR
    kwargs.setdefault("fsync", _env_flag(os.environ, ENV_FSYNC))
    kwargs.setdefault("inline_async", False)
    # Creating the directory is file I/O: off the event loop, where `langgraph dev`
    # rejects blocking calls.
    saver = await asyncio.to_thread(lambda: JsonlSaver(root, **kwargs))
    try:
        yield saver
    finally:  # shutdown: close the kept files, flushing pending writes (off the loop)
        await asyncio.to_thread(saver.close)


@asynccontextmanager
async def redis_checkpointer(url: str | None = None, **kwargs: Any) -> AsyncIterator[LogSaver]:
    """A `RedisLogSaver` on its own client for the server's lifetime, closed on shutdown.

    The server is pinged at start-up, so a wrong URL stops the server from
    starting instead of failing its first run.

    Args:
        url: ``redis://host:6379/0`` (``rediss://`` for TLS), or
            ``redis+cluster://host1:7000,host2:7000`` for a Redis Cluster (any
            nodes of it: the client discovers the rest); default
            ``$LANGGRAPH_CTX_REDIS_URL``.
        **kwargs: Passed to `RedisLogSaver` (``prefix``, ``ttl``, ``lock_timeout``,
            ``allowed_types``, ...). ``prefix`` and ``ttl`` default to
            ``$LANGGRAPH_CTX_REDIS_PREFIX`` and ``$LANGGRAPH_CTX_REDIS_TTL``.

    Raises:
        MissingExtraError: The redis package is not installed (the ``server`` extra does
            not bring it): ``pip install 'langgraph-ctx[redis]'``.
        ValueError: No URL was given and ``LANGGRAPH_CTX_REDIS_URL`` is unset, or
            ``LANGGRAPH_CTX_REDIS_TTL`` is not a number.
        StorageUnavailableError: Redis does not answer at start-up.

    Example:
        ```python
        from langgraph_ctx.server import redis_checkpointer

        def create_checkpointer():
            return redis_checkpointer("redis://cache:6379/0", prefix="support", ttl=7 * 86400)
        ```
    """
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ModuleNotFoundError as exc:  # the `server` extra does not bring redis
        if (exc.name or "").partition(".")[0] != "redis":
            raise
        raise MissingExtraError(
            f"redis_checkpointer (create_checkpointer's choice when {ENV_REDIS_URL} is set)",
            "redis",
            "redis",
        ) from exc

    from langgraph_ctx.saver.redis import RedisLogSaver
    from langgraph_ctx.storage.redis import REFUSED, refused_error

    url = url or os.environ.get(ENV_REDIS_URL)
    if not url:
        raise ValueError(
            f"redis_checkpointer needs a URL: pass one, or set {ENV_REDIS_URL} "
            "(for example redis://localhost:6379/0)"
        )
    kwargs = {**_redis_env(os.environ), **kwargs}
    # Off the event loop: a cluster client asks a node for the slot layout when it is
    # made, and `langgraph dev` rejects blocking calls on the loop.
    saver = await asyncio.to_thread(RedisLogSaver.from_url, url, **kwargs)
    try:
        try:
            await asyncio.to_thread(saver.client.ping)
        except REFUSED as exc:  # credentials or an ACL: no retry helps
            raise refused_error(
                saver.storage.server,
                "starting the LangGraph server's checkpointer",
                exc,
                saver.storage.namespace,
            ) from exc
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise StorageUnavailableError(
                saver.storage.server,
                "starting the LangGraph server's checkpointer",
                f"{type(exc).__name__}: {exc}",
                write=False,
            ) from exc
        yield saver
    finally:
        await saver.storage.aclose()  # the async client of this loop (asyncio sockets)
        await asyncio.to_thread(saver.close)


def create_checkpointer() -> AbstractAsyncContextManager[LogSaver]:
    """The checkpointer ``langgraph.json`` points at, chosen by environment variables.

    ``LANGGRAPH_CTX_REDIS_URL`` set: `redis_checkpointer`; otherwise
    `jsonl_checkpointer` in ``LANGGRAPH_CTX_DIR`` (default ``./chats``). The
    server calls it with no arguments and enters what it returns (an async
    context manager yielding the saver).

    Example:
        ```python
        # checkpointer.py, named in langgraph.json:
        #   "checkpointer": {"path": "./checkpointer.py:create_checkpointer"}
        from langgraph_ctx.server import create_checkpointer
        ```
    """
    if os.environ.get(ENV_REDIS_URL):
        return redis_checkpointer()
    return jsonl_checkpointer()


def _env_flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={env[name]!r}: expected 1/0, true/false, yes/no or on/off")


def _redis_env(env: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if env.get(ENV_REDIS_PREFIX):
        found["prefix"] = env[ENV_REDIS_PREFIX]
    if env.get(ENV_REDIS_TTL):
        try:
            found["ttl"] = float(env[ENV_REDIS_TTL])
        except ValueError:
            raise ValueError(
                f"{ENV_REDIS_TTL}={env[ENV_REDIS_TTL]!r}: expected a number of seconds"
            ) from None
    return found
