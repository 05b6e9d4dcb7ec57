"""The stores a `LogSaver` runs on, as the shared saver tests see them.

A backend makes savers on one store (each new saver is, in effect, a new
process opening it) and shows the raw log, so one scenario runs on JSONL files
and on Redis alike (the ``backend`` fixture in conftest.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_ctx import JsonlSaver
from langgraph_ctx.storage.thread_ids import encode_thread_id


def append_checkpoints(saver: Any, ns: str, n: int) -> None:
    """Put ``n`` growing message-list checkpoints (and a write each) into thread
    ``shared``, namespace ``ns``: what each of two concurrent writer processes does."""
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": "shared", "checkpoint_ns": ns}}
    messages: list[AIMessage] = []
    for i in range(n):
        messages = [*messages, AIMessage(content=f"{ns} says {i} " + "x" * 2000, id=f"{ns}-{i}")]
        cp = empty_checkpoint()
        cp["channel_versions"] = {"messages": i + 1}
        cp["channel_values"] = {"messages": messages}
        config = saver.put(config, cp, {"source": "loop", "step": i}, {"messages": i + 1})
        write = [AIMessage(content="w", id=f"{ns}-w{i}")]
        saver.put_writes(config, [("messages", write)], f"task-{i}")


if TYPE_CHECKING:  # the redis extra: imported only when a Redis backend is made
    from langgraph_ctx.saver.redis import RedisLogSaver


class JsonlBackend:
    name = "jsonl"

    def __init__(self, root: Path) -> None:
        self.root = root

    def saver(self, **kwargs: Any) -> JsonlSaver:
        return JsonlSaver(self.root, **kwargs)

    def saver_code(self) -> str:
        """Python source that opens the same store, for a subprocess."""
        return f"__import__('langgraph_ctx').JsonlSaver({str(self.root)!r})"

    def _path(self, thread_id: str) -> Path:
        return Path(JsonlSaver(self.root).path(thread_id))

    def exists(self, thread_id: str) -> bool:
        return self._path(thread_id).exists()

    def log_bytes(self, thread_id: str) -> bytes:
        return self._path(thread_id).read_bytes()

    def backup_name(self, thread_id: str, number: int) -> str:
        return f"{self._path(thread_id)}.{number}"

    def backup_bytes(self, thread_id: str, number: int) -> bytes:
        return Path(self.backup_name(thread_id, number)).read_bytes()

    def close(self) -> None:
        pass


class RedisBackend:
    """A fresh prefix on a Redis server, or on a Redis Cluster (a ``redis+cluster://`` URL;
    ``client`` is then a ``RedisCluster``, which routes each key to its master)."""

    def __init__(self, url: str, prefix: str | None = None, *, name: str = "redis") -> None:
        from langgraph_ctx.storage.redis import connect

        self.url = url
        self.name = name
        self.prefix = prefix or f"test-{uuid.uuid4().hex[:12]}"
        self.client = connect(url)
        self._savers: list[RedisLogSaver] = []

    def saver(self, **kwargs: Any) -> RedisLogSaver:
        from langgraph_ctx.saver.redis import RedisLogSaver

        saver = RedisLogSaver.from_url(self.url, prefix=self.prefix, **kwargs)
        self._savers.append(saver)
        return saver

    def saver_code(self) -> str:
        return (
            "__import__('langgraph_ctx.saver.redis', fromlist=['x']).RedisLogSaver"
            f".from_url({self.url!r}, prefix={self.prefix!r})"
        )

    def keys(self, pattern: str) -> list[bytes]:
        """Keys matching ``pattern`` on every master (KEYS asks one node of a cluster; SCAN
        through a cluster client visits each master)."""
        return sorted(set(self.client.scan_iter(match=pattern, count=1000)))

    def _key(self, thread_id: str) -> str:
        return f"ctx:{self.prefix}:thread:{{{encode_thread_id(thread_id)}}}"

    def exists(self, thread_id: str) -> bool:
        return bool(self.client.exists(self._key(thread_id)))

    def log_bytes(self, thread_id: str) -> bytes:
        return b"".join(line + b"\n" for line in self.client.lrange(self._key(thread_id), 0, -1))

    def backup_name(self, thread_id: str, number: int) -> str:
        return f"{self._key(thread_id)}:backup:{number}"

    def backup_bytes(self, thread_id: str, number: int) -> bytes:
        lines = self.client.lrange(self.backup_name(thread_id, number), 0, -1)
        return b"".join(line + b"\n" for line in lines)

    def close(self) -> None:
        for saver in self._savers:
            saver.close()
        self.client.close()


Backend = JsonlBackend | RedisBackend
