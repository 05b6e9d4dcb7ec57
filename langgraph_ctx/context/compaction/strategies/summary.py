"""LLM summary and hybrid: keep what a model-free strategy keeps, summarise the rest.

`LLMSummary` keeps a sliding window and folds everything older into the running summary;
`HybridSummary` keeps what key-message extraction picks and folds in what it drops.
Both reserve room for the summary message in the budget. The strategy only *decides*
(`plan` is pure); `compact_messages` runs the model step, and when the model keeps
failing it uses `fallback_plan` (key-message extraction) and records the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.runnables import Runnable

from langgraph_ctx.context.compaction.conversation import Conversation
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.strategies.base import (
    CompactionPlan,
    CompactionStrategy,
    Selection,
    over_budget,
)
from langgraph_ctx.context.compaction.strategies.extraction import KeyMessageExtraction
from langgraph_ctx.context.compaction.strategies.window import SlidingWindow
from langgraph_ctx.context.compaction.summarizer import SUMMARY_INSTRUCTIONS, Summarizer

MIN_SUMMARY_TOKENS = 48  # below this a summary message says too little to be worth a call
NO_SUMMARY_ROOM = "; no room for a summary message"
"""What a summarizing strategy's plan adds to its reason when it gives way to its fallback
because the budget leaves a summary under `MIN_SUMMARY_TOKENS` (the record then says
``fallback``)."""


@dataclass(frozen=True)
class LLMSummary(CompactionStrategy):
    """Keep the recent messages, fold the dropped ones into a running summary with a model.

    Args:
        model: any LangChain chat model (`BaseChatModel`), used for summaries only.
        keep: the model-free strategy that picks what stays (default: `SlidingWindow()`).
        summary_tokens: most tokens the summary message may take (at most a third of
            what the history may use).
        max_retries, retry_delay: retries after a failed model call, and the first
            back-off in seconds (doubling).
        input_tokens: tokens of dropped messages per summarizer call (the model reads
            the original messages, full tool outputs included, not their previews).
        condense_calls: extra calls that rewrite a summary still over `summary_tokens`
            shorter (0: the next compaction's call rewrites it, this request clips it).
        fallback: the strategy used when the model still fails (key-message extraction).

    Example:
        ```python
        from langchain_openai import ChatOpenAI
        from langgraph_ctx.context.compaction import LLMSummary, compact_messages

        strategy = LLMSummary(ChatOpenAI(model="gpt-4o-mini"))
        messages, record = compact_messages(history, max_tokens=8_000, strategy=strategy)
        record.summary.decisions_made
        ```
    """

    name: ClassVar[str] = "summary"
    model: Runnable[Any, Any]
    keep: CompactionStrategy = field(default_factory=SlidingWindow)
    summary_tokens: int = 800
    max_retries: int = 2
    retry_delay: float = 0.5
    input_tokens: int = 8_000
    instructions: str = SUMMARY_INSTRUCTIONS
    condense_calls: int = 0
    fallback: CompactionStrategy = field(default_factory=KeyMessageExtraction)

    def __post_init__(self) -> None:
        if not isinstance(self.model, Runnable):
            raise CompactionError(
                f"{type(self).__name__} needs a chat model (a BaseChatModel or Runnable), "
                f"got {type(self.model).__name__}"
            )
        if self.max_retries < 0 or self.summary_tokens < 1 or self.input_tokens < 1:
            raise CompactionError(
                "max_retries must be >= 0, summary_tokens and input_tokens positive"
            )

    @property
    def summarizer(self) -> Summarizer:
        return Summarizer(
            self.model,
            max_retries=self.max_retries,
            retry_delay=self.retry_delay,
            input_tokens=self.input_tokens,
            instructions=self.instructions,
            condense_calls=self.condense_calls,
        )

    def select(self, conv: Conversation, avail: int) -> Selection:
        return self.keep.select(conv, avail)

    def plan(self, conv: Conversation, max_tokens: int) -> CompactionPlan:
        total = conv.fixed_tokens() + conv.cost(conv.units)
        fixed = conv.fixed_tokens(with_running_summary=False)
        reserve = min(self.summary_tokens, max(0, (max_tokens - fixed) // 3))
        if total <= max_tokens:
            return super().plan(conv, max_tokens)
        if reserve < MIN_SUMMARY_TOKENS:
            plan = self.fallback_plan(conv, max_tokens)
            plan.reason += NO_SUMMARY_ROOM
            return plan
        selection = self.keep.select(conv, max_tokens - fixed - reserve)
        plan = CompactionPlan.from_selection(
            self.name, conv, selection, reason=over_budget(conv, total, max_tokens)
        )
        plan.summarize = [unit for unit, _ in plan.dropped]
        plan.dropped = [(unit, "folded into the running summary") for unit in plan.summarize]
        plan.summary_tokens = reserve
        return plan

    def fallback_plan(self, conv: Conversation, max_tokens: int) -> CompactionPlan:
        return self.fallback.plan(conv, max_tokens)


@dataclass(frozen=True)
class HybridSummary(LLMSummary):
    """Key-message extraction, plus a running summary of what extraction drops.

    Example:
        ```python
        strategy = HybridSummary(chat_model)          # keep=KeyMessageExtraction()
        messages, record = compact_messages(history, max_tokens=8_000, strategy=strategy)
        ```
    """

    name: ClassVar[str] = "hybrid"
    keep: CompactionStrategy = field(default_factory=KeyMessageExtraction)
