"""Compaction strategies: objects that decide what the model sees within a budget."""

from langgraph_ctx.context.compaction.strategies.base import (
    CompactionPlan,
    CompactionStrategy,
    Selection,
)
from langgraph_ctx.context.compaction.strategies.extraction import (
    DEFAULT_WEIGHTS,
    KeyMessageExtraction,
)
from langgraph_ctx.context.compaction.strategies.relevance import RelevanceSelection
from langgraph_ctx.context.compaction.strategies.summary import HybridSummary, LLMSummary
from langgraph_ctx.context.compaction.strategies.window import SlidingWindow

__all__ = [
    "DEFAULT_WEIGHTS",
    "CompactionPlan",
    "CompactionStrategy",
    "HybridSummary",
    "KeyMessageExtraction",
    "LLMSummary",
    "RelevanceSelection",
    "Selection",
    "SlidingWindow",
]
