"""`RedisLogSaver` never draws from `uuid.uuid4`.

LangGraph's own tests (``deterministic_uuids``) and apps that seed their ids patch
``uuid.uuid4``; a saver drawing from it shifts every message id after it
(test_large_cases.py::test_root_graph[redis] in LangGraph's suite).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.backends import RedisBackend


def test_redis_saver_draws_no_uuid4(redis_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = RedisBackend(redis_server.url)
    try:
        saver = backend.saver()
        calls: list[int] = []
        real = uuid.uuid4

        def counted() -> uuid.UUID:
            calls.append(1)
            return real()

        monkeypatch.setattr(uuid, "uuid4", counted)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(3):
            cp = empty_checkpoint()
            cp["id"] = f"cp-{i}"
            cp["channel_values"] = {"x": i}
            cp["channel_versions"] = {"x": f"{i + 1:032}"}
            config = saver.put(config, cp, {"step": i}, {"x": f"{i + 1:032}"})
            saver.put_writes(config, [("x", i)], "task")
        assert saver.get_tuple(config) is not None
        saver.fork("t", "t2")
        saver.revert("t", "cp-1")
        saver.prune(["t2"])
        saver.delete_thread("t2")
        assert calls == []
    finally:
        backend.close()
