"""Relevance selection (the default): what the current request needs, then the recent rounds.

The latest user message (and the tool calls made after it) is the query; every unit of
the history is scored against it with BM25 over its full text (see
`langgraph_ctx.context.compaction.relevance`). The budget is then spent in this order:

1. the current round (mandatory; the fallback ladder shortens it if it alone is too big);
2. the units most relevant to the request, best first, within `relevance_share` of the
   room left, each with the user message that opened its round (so the result still
   starts with a user message and the model sees what the unit answered);
3. the user messages, newest first, while they fit (what was asked frames the rest);
4. the `recent_rounds` rounds before the current one, whole, when they fit, and more
   recent rounds while they fit in `recent_share` of the budget;
5. whatever still fits, by key-message score (`KeyMessageExtraction.score`: kind,
   signals, recency) plus relevance.

Tool groups stay whole. Large tool results keep their previews, rebuilt to show the lines
that match the request (head, matching lines, tail, and the `read_tool_result` ref).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from langgraph_ctx.context.compaction.conversation import Conversation, Unit
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.ladder import fit, fit_current_round
from langgraph_ctx.context.compaction.record import ScoredMessage
from langgraph_ctx.context.compaction.relevance import (
    UnitRelevance,
    query_of,
    score_units,
    with_query_previews,
)
from langgraph_ctx.context.compaction.strategies.base import CompactionStrategy, Selection
from langgraph_ctx.context.compaction.strategies.extraction import KeyMessageExtraction


@dataclass(frozen=True)
class RelevanceSelection(CompactionStrategy):
    """Keep what the current request needs, the recent rounds, and the rest by relevance.

    Args:
        relevance_share: most of the room (after the current round) that relevant older
            units may take; the rest goes to the recent rounds first.
        min_relative: a unit counts as relevant when it scores at least this share of
            the best-scoring unit.
        recent_rounds: the rounds before the current one kept whole whenever they fit.
        recent_share: most of the budget further recent whole rounds take before the
            best-scoring rest gets the room left.
        relevance_weight: what relevance adds to the key-message score of the last fill
            (the best-scoring unit gets all of it).
        reselect_each_request: see the attribute.

    Example:
        ```python
        from langgraph_ctx.context.compaction import RelevanceSelection, compact_messages

        messages, record = compact_messages(history, max_tokens=8_000,
                                            strategy=RelevanceSelection())
        [s for s in record.scores if "relevance" in s.parts][:3]
        ```
    """

    name: ClassVar[str] = "relevance"
    relevance_share: float = 0.4
    recent_share: float = 0.05
    recent_rounds: int = 2
    min_relative: float = 0.3
    relevance_weight: float = 6.0
    reselect_each_request: bool = False
    """In a `CompactionNode`: select again at each new user message, below the trigger
    too (previews and relevant messages follow the request; each request then costs a
    scoring of the whole history, ~30 ms for 200 messages, instead of only its new
    messages)."""
    full_history: ClassVar[bool] = True
    """A node compacts the whole history with it, not its last view: what an earlier
    compaction left out can become relevant again."""

    def __post_init__(self) -> None:
        shares = (self.relevance_share, self.recent_share, self.min_relative)
        if not all(0 <= share <= 1 for share in shares) or self.relevance_weight < 0:
            raise CompactionError(
                "RelevanceSelection: relevance_share, recent_share and min_relative must be "
                "within [0, 1], relevance_weight >= 0"
            )

    def select(self, conv: Conversation, avail: int) -> Selection:
        if not conv.units:
            return Selection(keep=[])
        query = query_of(conv)
        last, latest = conv.rounds, conv.latest_user
        # the current round is sent anyway: score the rest of the history
        relevance = score_units(conv, query, units=[u for u in conv.units if u.round < last])
        top = max((r.score for r in relevance.values()), default=0.0)
        relevant = {p for p, r in relevance.items() if r.score >= top * self.min_relative}
        # previews of the relevant tool results show the lines the request matches
        units = [
            with_query_previews(conv, u, query) if u.position in relevant else u for u in conv.units
        ]
        current = [u for u in units if u.round == last]
        core, ladder = fit(conv, current, avail, protect=latest)
        if conv.cost(core) > avail:
            core, steps = fit_current_round(conv, current, avail)
            ladder += steps
        kept = {u.position: u for u in core}
        room = avail - conv.cost(core)
        opener = {u.round: u for u in units if u.kind == "user"}

        # 2. relevant units, best first, within their share
        share = int(room * self.relevance_share)
        for position in sorted(relevance, key=lambda p: (-relevance[p].score, -p)):
            if relevance[position].score < top * self.min_relative:
                break
            if position in kept:
                continue
            unit = units[position]
            group = [unit]
            user = opener.get(unit.round)
            if user is not None and user.position not in kept and user is not unit:
                group.insert(0, user)
            cost = conv.cost(group)
            if cost > share or (user is None and not _after_user(kept, position)):
                continue
            for u in group:
                kept[u.position] = u
            share -= cost
            room -= cost

        # 3. the user messages, newest first: what was asked frames everything else
        for unit in reversed(units):
            if unit.kind == "user" and unit.position not in kept and unit.tokens <= room:
                kept[unit.position] = unit
                room -= unit.tokens

        # 4. the most recent whole rounds, newest first, within their share
        recent = int(avail * self.recent_share)
        for number in range(last - 1, 0, -1):
            rest = [u for u in units if u.round == number and u.position not in kept]
            cost = conv.cost(rest)
            previous = number > last - 1 - self.recent_rounds  # taken whenever it fits
            if cost > (room if previous else min(recent, room)):
                break
            for u in rest:
                kept[u.position] = u
            recent -= cost
            room -= cost

        # 5. what still fits, by key-message score plus relevance
        scores = {
            u.position: self._score(u, relevance, top, last)
            for u in units
            if u.position not in kept
        }
        KeyMessageExtraction._fill(kept, [units[p] for p in scores], scores, room)
        scored = [
            ScoredMessage(
                id=units[p].keys[0],
                score=r.score,
                parts={"relevance": r.score},
                kept=p in kept,
            )
            for p, r in sorted(relevance.items())
        ]
        return Selection(
            keep=list(kept.values()),
            ladder=ladder,
            scores=scored,
            reasons={
                u.position: (
                    f"relevance {relevance[u.position].score:g} to the request did not make "
                    "the cut within the budget"
                    if u.position in relevance
                    else "not relevant to the request and older than the rounds that fit"
                )
                for u in units
                if u.position not in kept
            },
        )

    def _score(
        self, unit: Unit, relevance: dict[int, UnitRelevance], top: float, last: int
    ) -> ScoredMessage:
        """The key-message score (signals, kind, recency), plus relevance scaled to 0..weight."""
        score = _KEY.score(unit, last_round=last)
        rel = relevance.get(unit.position)
        if rel is not None and top > 0:
            part = round(self.relevance_weight * rel.score / top, 3)
            score = score.model_copy(
                update={
                    "score": round(score.score + part, 3),
                    "parts": {**score.parts, "relevance": part},
                }
            )
        return score


_KEY = KeyMessageExtraction()


def _after_user(kept: dict[int, Unit], position: int) -> bool:
    return any(u.kind == "user" and p < position for p, u in kept.items())
