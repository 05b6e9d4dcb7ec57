"""Sliding window: the most recent whole rounds that fit (optionally at most N of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from langgraph_ctx.context.compaction.conversation import Conversation, Unit
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.ladder import fit, fit_current_round
from langgraph_ctx.context.compaction.strategies.base import CompactionStrategy, Selection


@dataclass(frozen=True)
class SlidingWindow(CompactionStrategy):
    """Keep the last rounds that fit; a round is a user message and what follows it.

    Args:
        rounds: keep at most this many rounds (None: as many as fit).
        tokens: give the history at most this many tokens (None: the whole budget).

    The current round is always kept; if it alone is too large, the fallback ladder
    shortens it (previews, shortened texts, then only its most recent units).

    Example:
        ```python
        from langgraph_ctx.context.compaction import SlidingWindow, compact_messages

        messages, record = compact_messages(history, max_tokens=8_000,
                                            strategy=SlidingWindow(rounds=5))
        ```
    """

    name: ClassVar[str] = "window"
    rounds: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        for label, value in (("rounds", self.rounds), ("tokens", self.tokens)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise CompactionError(
                    f"SlidingWindow({label}=...) must be a positive int, got {value!r}"
                )

    def select(self, conv: Conversation, avail: int) -> Selection:
        if self.tokens is not None:
            avail = min(avail, self.tokens)
        by_round: dict[int, list[Unit]] = {}
        for unit in conv.units:
            by_round.setdefault(unit.round, []).append(unit)
        kept: list[Unit] = []
        ladder: list[str] = []
        reasons: dict[int, str] = {}
        closed = False
        for count, number in enumerate(sorted(by_round, reverse=True)):
            units = by_round[number]
            if count == 0:
                # The current round: always kept, shortened if it alone does not fit.
                kept, ladder = fit(conv, units, avail, protect=conv.latest_user)
                if conv.cost(kept) > avail:
                    kept, steps = fit_current_round(conv, units, avail)
                    ladder += steps
                continue
            if self.rounds is not None and count >= self.rounds:
                reason = f"older than the last {self.rounds} rounds"
            elif closed or conv.cost(kept) + conv.cost(units) > avail:
                closed = True
                reason = "outside the window that fits"
            else:
                kept = units + kept
                continue
            reasons.update({u.position: reason for u in units})
        return Selection(keep=kept, ladder=ladder, reasons=reasons)
