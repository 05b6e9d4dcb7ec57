"""Errors raised by compaction: `CompactionError`, whose home is `langgraph_ctx.errors`."""

from __future__ import annotations

from langgraph_ctx.errors import CompactionError

__all__ = ["CompactionError"]
