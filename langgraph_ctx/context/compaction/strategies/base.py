"""The strategy interface: a strategy *decides*, a separate step calls a model if asked.

A strategy implements one pure method, `select(conv, avail)`: which history units to send
within `avail` tokens (the budget minus the system prompt and summary messages). The
shared `plan` turns that into a `CompactionPlan`: kept, dropped (with reasons), what to
summarise, the ladder steps and the scores. Nothing here calls a model, so every
decision is testable with a plain message list:

```python
from langgraph_ctx.context.compaction import SlidingWindow, prepare_compaction

plan = prepare_compaction(messages, max_tokens=2_000, strategy=SlidingWindow(),
                          token_counter="approximate")
[u.keys for u in plan.keep], plan.dropped_ids()
```

A strategy that wants a model summary exposes a `summarizer`; `compact_messages` runs it
on `plan.summarize` and, if it fails, falls back to `fallback_plan`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from langgraph_ctx.context.compaction.conversation import Conversation, Unit
from langgraph_ctx.context.compaction.record import ScoredMessage

if TYPE_CHECKING:
    from langgraph_ctx.context.compaction.summarizer import Summarizer


@dataclass
class Selection:
    """What `select` chose: units to send (in conversation order) and why others were not."""

    keep: list[Unit]
    ladder: list[str] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    """Position -> why that unit was left out (a default reason is used otherwise)."""
    scores: list[ScoredMessage] = field(default_factory=list)


@dataclass
class CompactionPlan:
    """A complete, model-free decision: what the model will see and what happens to the rest."""

    strategy: str
    keep: list[Unit]
    """History units to send, in order, as they will be sent (previews, shortened texts)."""
    dropped: list[tuple[Unit, str]]
    """History units left out, each with the reason."""
    reason: str
    summarize: list[Unit] = field(default_factory=list)
    """Dropped units to fold into the running summary (asks for a model call)."""
    summary_tokens: int = 0
    """Tokens the summary message may take."""
    ladder: list[str] = field(default_factory=list)
    scores: list[ScoredMessage] = field(default_factory=list)

    @property
    def compacted(self) -> bool:
        return bool(self.dropped) or any(u.shortened or u.offloads for u in self.keep)

    def dropped_ids(self) -> list[str]:
        """Ids of the dropped messages (tool groups contribute every message)."""
        return [key for unit, _ in self.dropped for key in unit.keys]

    @classmethod
    def from_selection(
        cls, strategy: str, conv: Conversation, selection: Selection, *, reason: str
    ) -> CompactionPlan:
        kept = {unit.position for unit in selection.keep}
        default = "not selected within the budget"
        dropped = [
            (unit, selection.reasons.get(unit.position, default))
            for unit in conv.units
            if unit.position not in kept
        ]
        return cls(
            strategy=strategy,
            keep=sorted(selection.keep, key=lambda u: u.position),
            dropped=dropped,
            reason=reason,
            ladder=selection.ladder,
            scores=selection.scores,
        )


def over_budget(conv: Conversation, total: int, max_tokens: int) -> str:
    """The reason a plan gives when the messages do not fit."""
    reason = f"over budget: {conv.tokens_before} tokens"
    if total < conv.tokens_before:
        reason += f" ({total} with large tool results as previews)"
    return f"{reason} > {max_tokens}"


class CompactionStrategy(ABC):
    """Decides which messages the model sees within a token budget.

    Subclasses implement `select`. Override `plan` only to reserve room for something
    the strategy adds (as the summary strategies do for the summary message).
    """

    name: ClassVar[str] = "custom"

    @property
    def summarizer(self) -> Summarizer | None:
        """The model step this strategy asks for, if any."""
        return None

    @abstractmethod
    def select(self, conv: Conversation, avail: int) -> Selection:
        """Choose the history units to send within `avail` tokens. Pure: no I/O, no model."""

    def plan(self, conv: Conversation, max_tokens: int) -> CompactionPlan:
        """The full decision for a request of at most `max_tokens` tokens."""
        fixed = conv.fixed_tokens()
        total = fixed + conv.cost(conv.units)
        if total <= max_tokens:
            return CompactionPlan.from_selection(
                self.name,
                conv,
                Selection(keep=list(conv.units)),
                reason=f"fits: {total} <= {max_tokens} tokens",
            )
        selection = self.select(conv, max_tokens - fixed)
        return CompactionPlan.from_selection(
            self.name, conv, selection, reason=over_budget(conv, total, max_tokens)
        )

    def fallback_plan(self, conv: Conversation, max_tokens: int) -> CompactionPlan:
        """The plan used when this strategy's model step fails (see `LLMSummary`)."""
        return self.plan(conv, max_tokens)
