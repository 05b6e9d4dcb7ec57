"""`compact_messages`: the functional core, with the ergonomics of `trim_messages`.

```python
from langgraph_ctx.context.compaction import compact_messages

messages, record = compact_messages(history, max_tokens=8_000)   # relevance selection
llm.invoke(messages)
record.tokens_before, record.tokens_after, record.dropped_ids()
```

Three steps, the first and last pure:

1. `prepare_compaction` reads the messages and asks the strategy for a `CompactionPlan`;
2. if the plan asks for a summary, the strategy's summarizer calls the model (retrying,
   and falling back to key-message extraction if the model keeps failing);
3. the plan and the summary become the message list and a `CompactionRecord`.

The model step is a generator of model-call steps (`langgraph_ctx.context.model_call`);
`compact_messages` answers them with `drive_sync` (`invoke`), `acompact_messages` with
`drive_async` (`await ainvoke`). That is the only difference between the two, so sync
and async cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any, Literal, NamedTuple

from langchain_core.messages import BaseMessage

from langgraph_ctx.context.compaction.conversation import (
    Conversation,
    TokenCounter,
    Unit,
    counter_name,
    resolve_token_counter,
)
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.record import (
    CompactionRecord,
    DroppedMessage,
    RunningSummary,
)
from langgraph_ctx.context.compaction.strategies.base import CompactionPlan, CompactionStrategy
from langgraph_ctx.context.compaction.strategies.extraction import KeyMessageExtraction
from langgraph_ctx.context.compaction.strategies.relevance import RelevanceSelection
from langgraph_ctx.context.compaction.strategies.summary import NO_SUMMARY_ROOM
from langgraph_ctx.context.compaction.strategies.window import SlidingWindow
from langgraph_ctx.context.compaction.summarizer import summary_message_within
from langgraph_ctx.context.model_call import Step, drive_async, drive_sync

StrategyLike = CompactionStrategy | Literal["relevance", "extract", "window"]
CounterLike = TokenCounter | Literal["approximate"] | None


class Compaction(NamedTuple):
    """What `compact_messages` returns: the messages to send and the record of what it did."""

    messages: list[BaseMessage]
    record: CompactionRecord


def resolve_strategy(strategy: StrategyLike) -> CompactionStrategy:
    """A strategy object from a strategy or a name (`"relevance"`, `"extract"`, `"window"`)."""
    if isinstance(strategy, CompactionStrategy):
        return strategy
    if strategy == "relevance":
        return RelevanceSelection()
    if strategy == "extract":
        return KeyMessageExtraction()
    if strategy == "window":
        return SlidingWindow()
    if strategy in ("summary", "hybrid"):
        raise CompactionError(
            f"strategy={strategy!r} needs a chat model: pass LLMSummary(model) or "
            "HybridSummary(model)"
        )
    raise CompactionError(
        f"unknown strategy {strategy!r}; use 'relevance', 'extract', 'window' or a "
        "CompactionStrategy (RelevanceSelection, KeyMessageExtraction, SlidingWindow, "
        "LLMSummary, HybridSummary)"
    )


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def check_arguments(max_tokens: Any, offload_threshold: Any, preview_tokens: Any) -> None:
    """Raise `CompactionError` for a budget, offload threshold or preview size that cannot work."""
    if not _is_int(max_tokens, 1):
        raise CompactionError(f"max_tokens must be a positive int, got {max_tokens!r}")
    if offload_threshold is not None and not _is_int(offload_threshold, 1):
        raise CompactionError(
            f"offload_threshold must be a positive int or None, got {offload_threshold!r}"
        )
    if not _is_int(preview_tokens, 32):
        raise CompactionError(f"preview_tokens must be an int >= 32, got {preview_tokens!r}")


def check_target(max_tokens: int, target_tokens: Any) -> int:
    """The budget a strategy aims at: `target_tokens`, at most `max_tokens` (the hard one)."""
    if target_tokens is None:
        return max_tokens
    if not _is_int(target_tokens, 1):
        raise CompactionError(f"target_tokens must be a positive int, got {target_tokens!r}")
    return min(int(target_tokens), max_tokens)


def read_conversation(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    model: str = "gpt-4o",
    token_counter: CounterLike = None,
    summary: RunningSummary | None = None,
    offload_threshold: int | None = 500,
    preview_tokens: int = 160,
) -> Conversation:
    """Validate the arguments and read `messages` into a `Conversation` (no decisions yet)."""
    check_arguments(max_tokens, offload_threshold, preview_tokens)
    return Conversation.build(
        messages,
        counter=resolve_token_counter(token_counter, model),
        offload_threshold=offload_threshold,
        preview_tokens=preview_tokens,
        summary=summary,
    )


def prepare_compaction(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    strategy: StrategyLike = "relevance",
    model: str = "gpt-4o",
    token_counter: CounterLike = None,
    summary: RunningSummary | None = None,
    offload_threshold: int | None = 500,
    preview_tokens: int = 160,
    target_tokens: int | None = None,
) -> CompactionPlan:
    """Decide what to keep, drop and summarise, without calling any model.

    The pure half of `compact_messages` (the `prepare()` of the reference design): the
    plan says what the model would see and what a summary would have to cover.

    Example:
        ```python
        plan = prepare_compaction(history, max_tokens=4_000, token_counter="approximate")
        plan.reason, plan.dropped_ids(), [s.parts for s in plan.scores[:3]]
        ```
    """
    conv = read_conversation(
        messages,
        max_tokens=max_tokens,
        model=model,
        token_counter=token_counter,
        summary=summary,
        offload_threshold=offload_threshold,
        preview_tokens=preview_tokens,
    )
    goal = check_target(max_tokens, target_tokens)
    return resolve_strategy(strategy).plan(replace(conv, headroom=max_tokens - goal), goal)


def compaction_steps(
    conv: Conversation,
    strategy: CompactionStrategy,
    *,
    max_tokens: int,
    tokenizer: str,
    reason: str | None = None,
    target_tokens: int | None = None,
) -> Generator[Step, Any, Compaction]:
    """The whole compaction as a generator of model calls (see the module docstring).

    `max_tokens` is the hard budget; the strategy aims at `target_tokens` (default: the
    hard budget), and only the current round may use the difference (`headroom`).
    """
    started = time.perf_counter()
    goal = check_target(max_tokens, target_tokens)
    conv = replace(conv, headroom=max_tokens - goal)
    plan = strategy.plan(conv, goal)
    summary = conv.previous_summary
    updated = False
    error: str | None = None
    fallback: str | None = None
    attempts = 0
    summarizer = strategy.summarizer
    if summarizer is not None and plan.reason.endswith(NO_SUMMARY_ROOM):
        # No room for a summary: the strategy gave way to its fallback, without a call;
        # said in the record, as a failed call's fallback is (else history is dropped
        # with nothing to say it was not summarised).
        fallback = plan.strategy
        reason = f"{reason}{NO_SUMMARY_ROOM}" if reason else reason
    if plan.summarize and summarizer is not None:
        outcome = yield from summarizer.run(
            conv.previous_summary, plan.summarize, budget=plan.summary_tokens, count=conv.count
        )
        attempts = outcome.attempts
        if outcome.summary is not None:
            summary, updated = outcome.summary, True
        else:
            error = outcome.error
            plan = strategy.fallback_plan(conv, goal)
            fallback = plan.strategy
    messages, record = _assemble(
        conv, plan, summary if updated else None, max_tokens=goal, requested=strategy
    )
    record = record.model_copy(
        update={
            "reason": reason or record.reason,
            "summary": summary,
            "summary_updated": updated,
            "summarized": [k for u in plan.summarize for k in u.keys] if updated else [],
            "error": error,
            "attempts": attempts,
            "fallback": fallback,
            "tokenizer": tokenizer,
            "max_tokens": max_tokens,
            "target_tokens": goal if goal < max_tokens else None,
            "within_budget": record.tokens_after <= max_tokens,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        }
    )
    return Compaction(messages, record)


def _assemble(
    conv: Conversation,
    plan: CompactionPlan,
    new_summary: RunningSummary | None,
    *,
    max_tokens: int,
    requested: CompactionStrategy,
) -> Compaction:
    """The message list and the record for a plan (and a new summary, if one was made)."""
    head: list[Unit] = [*conv.system, *conv.summaries]
    messages = [m for unit in head for m in unit.messages]
    kept = [k for unit in head for k in unit.keys]
    dropped = list(conv.dropped)
    ladder = list(plan.ladder)
    old = conv.running_summary
    if new_summary is not None:
        # ``max_tokens`` is the goal; the request may use the hard budget (the goal plus
        # `conv.headroom`). The summary gets what the kept messages leave of the goal, at
        # least its reserve, and never more than they leave of the hard budget: less when
        # the newest tool group had to go out larger than its room (`fit_current_round`).
        room = max_tokens - conv.fixed_tokens(with_running_summary=False) - conv.cost(plan.keep)
        hard_room = room + max(0, conv.headroom)
        budget = max(0, min(hard_room, max(room, plan.summary_tokens)))
        message, _, clipped = summary_message_within(new_summary, budget, conv.count)
        messages.append(message)
        kept.append(message.id or "running-summary")
        if clipped:
            ladder.append("summary_clipped")
        if old is not None:
            dropped.append(
                DroppedMessage(
                    id=old.keys[0],
                    role="system",
                    tokens=old.tokens,
                    reason="replaced by the updated running summary",
                )
            )
    elif old is not None:
        messages.extend(old.messages)
        kept.extend(old.keys)
    for unit in plan.keep:
        messages.extend(unit.messages)
        kept.extend(unit.keys)
    for unit, reason in plan.dropped:
        dropped.extend(
            DroppedMessage(id=key, role=message_role, tokens=size, reason=reason)
            for key, size, message_role in zip(unit.keys, unit.sizes, _roles(unit), strict=True)
        )
    tokens_after = conv.counter(messages)
    record = CompactionRecord(
        strategy=requested.name,
        reason=plan.reason,
        compacted=plan.compacted or bool(dropped) or new_summary is not None,
        max_tokens=max_tokens,
        tokens_before=conv.tokens_before,
        tokens_after=tokens_after,
        within_budget=tokens_after <= max_tokens,
        messages_before=conv.messages_before,
        messages_after=len(messages),
        kept=kept,
        dropped=dropped,
        offloaded=[o for unit in plan.keep for o in unit.offloads],
        shortened=[s for unit in plan.keep for s in unit.shortened],
        ladder=ladder,
        repairs=list(conv.repairs),
        scores=plan.scores,
    )
    return Compaction(messages, record)


def _roles(unit: Unit) -> list[str]:
    if unit.kind == "tools":
        return ["assistant", *["tool"] * (len(unit.messages) - 1)]
    return [unit.role] * len(unit.messages)


def _steps(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    strategy: StrategyLike,
    model: str,
    token_counter: CounterLike,
    summary: RunningSummary | None,
    offload_threshold: int | None,
    preview_tokens: int,
    target_tokens: int | None,
) -> Generator[Step, Any, Compaction]:
    resolved = resolve_strategy(strategy)
    conv = read_conversation(
        messages,
        max_tokens=max_tokens,
        model=model,
        token_counter=token_counter,
        summary=summary,
        offload_threshold=offload_threshold,
        preview_tokens=preview_tokens,
    )
    return compaction_steps(
        conv,
        resolved,
        max_tokens=max_tokens,
        tokenizer=counter_name(token_counter, model),
        target_tokens=target_tokens,
    )


def compact_messages(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    strategy: StrategyLike = "relevance",
    model: str = "gpt-4o",
    token_counter: CounterLike = None,
    summary: RunningSummary | None = None,
    offload_threshold: int | None = 500,
    preview_tokens: int = 160,
    target_tokens: int | None = None,
) -> Compaction:
    """Fit `messages` into `max_tokens`: what to send, and a record of what was done.

    Like `trim_messages`, but it keeps what matters instead of only the tail, never
    splits a tool call from its results, and reports everything it changed.

    Args:
        messages: the history (messages, or dicts / tuples / strings LangChain reads).
        max_tokens: the most tokens the returned messages may cost.
        strategy: `"relevance"` (default, `RelevanceSelection()`), `"extract"`
            (`KeyMessageExtraction()`), `"window"`, or a
            strategy object (`SlidingWindow(rounds=5)`, `LLMSummary(model)`, ...).
        model: the tokenizer model for the default token counter.
        token_counter: a `TokenCounter`, or `"approximate"`; default
            `count_tokens(..., model=model)`.
        summary: the running summary from the previous compaction (the node passes it).
            Without it, a summary message already in `messages` is read back.
        offload_threshold: tool results over this many tokens are shown as a preview
            plus a `read_tool_result` reference (None: never for size alone).
        preview_tokens: the size of a preview.
        target_tokens: a goal below `max_tokens`: the strategy compacts to it, but the
            current round (the latest user message and what followed it) may use up to
            `max_tokens`; the latest user message is shortened only when `max_tokens`
            cannot hold it, and then it keeps its start and end and says so.

    Returns:
        `Compaction(messages, record)`; unpack it as `messages, record = ...`.

    Raises:
        CompactionError: a bad argument or a message that cannot be read.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        from langgraph_ctx.context.compaction import compact_messages

        history = [SystemMessage("You are terse.")]
        for i in range(50):
            history += [HumanMessage(f"question {i}: " + "words " * 40), AIMessage("ok")]
        messages, record = compact_messages(
            history, max_tokens=500, token_counter="approximate"
        )
        assert record.tokens_after <= 500 and messages[-2] is history[-2]
        ```
    """
    return drive_sync(
        _steps(
            messages,
            max_tokens=max_tokens,
            strategy=strategy,
            model=model,
            token_counter=token_counter,
            summary=summary,
            offload_threshold=offload_threshold,
            preview_tokens=preview_tokens,
            target_tokens=target_tokens,
        )
    )


async def acompact_messages(
    messages: Sequence[Any],
    *,
    max_tokens: int,
    strategy: StrategyLike = "relevance",
    model: str = "gpt-4o",
    token_counter: CounterLike = None,
    summary: RunningSummary | None = None,
    offload_threshold: int | None = 500,
    preview_tokens: int = 160,
    target_tokens: int | None = None,
) -> Compaction:
    """Async `compact_messages`: the same steps, with `await model.ainvoke` for summaries.

    Example:
        ```python
        messages, record = await acompact_messages(history, max_tokens=8_000,
                                                   strategy=LLMSummary(model))
        ```
    """
    return await drive_async(
        _steps(
            messages,
            max_tokens=max_tokens,
            strategy=strategy,
            model=model,
            token_counter=token_counter,
            summary=summary,
            offload_threshold=offload_threshold,
            preview_tokens=preview_tokens,
            target_tokens=target_tokens,
        )
    )
