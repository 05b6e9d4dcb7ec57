"""Key-message extraction: explainable scores and greedy selection, no model.

Mandatory: every user message and the whole current round (the latest user message
and everything after it). The rest is scored and picked greedily, best score first,
while it fits. When the mandatory part alone does not fit, the fallback ladder runs:
tool results become previews, long texts are shortened, and last of all only the most
recent K rounds (K=4, then 1) stay mandatory, the room left filled by score again.

A score is a sum of named parts, kept in the record so a person can see why a message
stayed or went:

```python
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_ctx.context.compaction import KeyMessageExtraction, compact_messages

history = [
    HumanMessage("Plan a week in Lisbon for May.", id="u1"),
    AIMessage("Sounds lovely, Lisbon is great in spring.", id="a1"),
    HumanMessage("Keep the hotel under 120 EUR a night.", id="u2"),
    AIMessage("Decided: Hotel Alfama at 110 EUR, saved to /trips/lisbon.md.", id="a2"),
    HumanMessage("What should I pack?", id="u3"),
]
_, record = compact_messages(history, max_tokens=70, strategy=KeyMessageExtraction())
record.scores  # the user messages are mandatory; the assistant replies were scored
# [ScoredMessage(id='a1', score=2.414, parts={'assistant': 1.0, 'recency': 1.414},
#                kept=False),
#  ScoredMessage(id='a2', score=7.182, parts={'assistant': 1.0, 'decision': 2.0,
#                'path': 1.5, 'number': 1.0, 'recency': 1.682}, kept=True)]
```
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar

from langgraph_ctx.context.compaction.conversation import Conversation, Unit
from langgraph_ctx.context.compaction.ladder import fit, fit_current_round
from langgraph_ctx.context.compaction.record import ScoredMessage
from langgraph_ctx.context.compaction.signals import SIGNALS, text_signals
from langgraph_ctx.context.compaction.strategies.base import CompactionStrategy, Selection


@functools.lru_cache(maxsize=8192)
def _signals(text: str) -> tuple[str, ...]:
    """`text_signals`, remembered by text: each compaction scores the same units again."""
    return tuple(text_signals(text))


DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        # what kind of message it is
        "user": 3.0,
        "assistant": 1.0,
        "tools": 0.5,
        # what it says (see signals.py)
        **SIGNALS,
        # recent rounds count more: weight * 0.5 ** (rounds ago / half life)
        "recency": 2.0,
        # a large tool result costs much and says little per token: weight per 500 tokens
        "large_tool_result": -1.0,
    }
)


@dataclass(frozen=True)
class KeyMessageExtraction(CompactionStrategy):
    """Keep user messages, the current round and the best-scoring rest; no model call.

    Args:
        recent_rounds: rounds at the end that are always kept (1 = the current round).
        fallback_rounds: K, the rounds still kept when the mandatory part cannot fit.
        weights: score weights by part name (see `DEFAULT_WEIGHTS`).
        half_life: rounds after which the recency part halves.

    Example:
        ```python
        from langgraph_ctx.context.compaction import KeyMessageExtraction, compact_messages

        messages, record = compact_messages(
            history, max_tokens=4_000, strategy=KeyMessageExtraction(fallback_rounds=4)
        )
        ```
    """

    name: ClassVar[str] = "extract"
    recent_rounds: int = 1
    fallback_rounds: int = 4
    weights: Mapping[str, float] = field(default_factory=lambda: DEFAULT_WEIGHTS)
    half_life: float = 4.0

    def score(self, unit: Unit, *, last_round: int) -> ScoredMessage:
        """The explainable score of one unit: named parts and their sum."""
        w = self.weights
        parts: dict[str, float] = {unit.kind: w.get(unit.kind, 0.0)}
        for name in _signals(unit.text):
            parts[name] = w.get(name, 0.0)
        age = max(0, last_round - unit.round)
        parts["recency"] = round(w.get("recency", 0.0) * 0.5 ** (age / self.half_life), 3)
        if unit.kind == "tools" and unit.tokens > 500:
            parts["large_tool_result"] = round(
                max(-3.0, w.get("large_tool_result", 0.0) * unit.tokens / 500), 3
            )
        parts = {k: v for k, v in parts.items() if v}
        return ScoredMessage(
            id=unit.keys[0], score=round(sum(parts.values()), 3), parts=parts, kept=False
        )

    def select(self, conv: Conversation, avail: int) -> Selection:
        units = conv.units
        if not units:
            return Selection(keep=[])
        last = conv.rounds
        latest = conv.latest_user
        recent_from = last - self.recent_rounds + 1
        mandatory = [u for u in units if u.kind == "user" or u.round >= recent_from]
        core, ladder = fit(conv, mandatory, avail, protect=latest)
        if conv.cost(core) > avail:
            core = []
            for k in sorted({max(1, self.fallback_rounds), 1}, reverse=True):
                recent = [u for u in units if u.round > last - k or last == 0]
                fitted, steps = fit(conv, recent, avail, protect=latest)
                ladder += [f"recent_rounds:{k}", *steps]
                if conv.cost(fitted) <= avail:
                    core = fitted
                    break
            else:
                current = [u for u in units if u.round == last]
                core, steps = fit_current_round(conv, current, avail)
                ladder += steps

        kept = {u.position: u for u in core}
        scores = {
            u.position: self.score(u, last_round=last) for u in units if u.position not in kept
        }
        candidates = [u for u in units if u.position in scores]
        self._fill(kept, candidates, scores, avail - conv.cost(core))
        return Selection(
            keep=list(kept.values()),
            ladder=ladder,
            scores=[
                s.model_copy(update={"kept": pos in kept}) for pos, s in sorted(scores.items())
            ],
            reasons={
                pos: f"score {s.score:g} did not make the cut within the budget"
                for pos, s in scores.items()
                if pos not in kept
            },
        )

    @staticmethod
    def _fill(
        kept: dict[int, Unit], candidates: list[Unit], scores: dict[int, ScoredMessage], room: int
    ) -> None:
        """Greedy: best score first (newer first on ties), each unit if it still fits.

        A non-user unit is only taken after some kept user message, so the result still
        starts with a user message; taking an earlier user message can unlock units, so
        the pass repeats until nothing more is added.
        """
        order = sorted(candidates, key=lambda u: (-scores[u.position].score, -u.position))
        users = [p for p, u in kept.items() if u.kind == "user"]
        first_user = min(users) if users else None
        added = True
        while added:
            added = False
            for unit in order:
                if unit.position in kept or unit.tokens > room:
                    continue
                if unit.kind != "user" and (first_user is None or unit.position < first_user):
                    continue
                kept[unit.position] = unit
                room -= unit.tokens
                added = True
                if unit.kind == "user" and (first_user is None or unit.position < first_user):
                    first_user = unit.position
                    break
