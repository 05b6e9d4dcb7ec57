"""The fallback ladder: what gets cut, in order, when what must be kept does not fit.

1. `tool_previews`: tool results become previews (largest first) until the units fit;
2. `shorten_texts`: long user and assistant texts are cut to their first paragraph and
   key lines (longest first), never the latest user message;
3. the strategies then narrow what is mandatory to the most recent rounds
   (`recent_rounds:4`, then `recent_rounds:1`) and run steps 1-2 again;
4. last of all, inside the current round, `current_round_tail` keeps the latest user
   message and the most recent units that fit, and `shorten_latest_user` cuts the user
   message itself if it alone is larger than the *hard* budget.

The budget a strategy is given may be a target below the hard budget (a compaction node
compacts to half the window so that it need not compact again at once). The target is a
goal: the current round, which the model needs, may use the hard budget
(`Conversation.headroom`), and the latest user message is shortened only when even that
cannot hold it; then it keeps its start and its end and says that it was shortened.

Each step only ever replaces messages by stand-ins or leaves units out; it never splits a
tool call from its results.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import ToolMessage

from langgraph_ctx.context.compaction.conversation import Conversation, Unit


def fit(
    conv: Conversation, units: Sequence[Unit], avail: int, *, protect: int | None = None
) -> tuple[list[Unit], list[str]]:
    """Steps 1 and 2 of the ladder over `units`, stopping as soon as they fit `avail`.

    `protect` is the position of a unit never shortened (the latest user message).
    Returns the (possibly shortened) units in order and the steps taken; the caller
    checks `conv.cost(units) <= avail` to see whether they fit.
    """
    result = list(units)
    steps: list[str] = []
    largest_first = sorted(range(len(result)), key=lambda i: -result[i].tokens)
    for step in ("tool_previews", "shorten_texts"):
        changed = False
        for i in largest_first:
            if conv.cost(result) <= avail:
                break
            unit = result[i]
            if step == "tool_previews":
                new = conv.previewed(unit, threshold=conv.preview_tokens, cause="budget")
            elif unit.position != protect:
                new = conv.shortened(unit, budget=conv.shorten_tokens)
            else:
                continue
            if new is not unit:
                result[i] = new
                changed = True
        if changed:
            steps.append(step)
    return result, steps


def fit_current_round(
    conv: Conversation, units: Sequence[Unit], avail: int
) -> tuple[list[Unit], list[str]]:
    """Step 4: the latest user message plus the most recent units of its round that fit.

    `units` is the current round (starting with its user message, when there is one).
    The round may use the hard budget, `avail + conv.headroom`. The user message is
    always kept; if it alone is larger than the hard budget it is shortened to fit (as
    far as a message can be), keeping its start and its end.
    """
    steps = ["current_round_tail"]
    hard = avail + max(0, conv.headroom)
    kept: list[Unit] = []
    rest = list(units)
    if rest and rest[0].kind == "user":
        user = rest.pop(0)
        if user.tokens > hard:
            user = conv.shortened_to_fit(user, budget=max(hard, 1))
            steps.append("shorten_latest_user")
        kept.append(user)
    room = hard - conv.cost(kept)
    tail: list[Unit] = []
    for unit in reversed(rest):
        candidate, cut = _fitted(conv, unit, room, conv.preview_tokens)
        newest_group = not tail and unit.kind == "tools"
        if candidate.tokens > room and newest_group:
            # The newest tool group goes out whatever it costs: a request without the
            # round's last message cannot be answered (the model would call again). Smaller
            # previews first; what is still over is sent, and the record says so.
            results = sum(isinstance(m, ToolMessage) for m in unit.messages) or 1
            candidate, cut = _fitted(conv, unit, room, max(24, room // (2 * results)))
        if candidate.tokens > room and not newest_group:
            break
        if cut and "shorten_tool_call_args" not in steps:
            steps.append("shorten_tool_call_args")
        tail.insert(0, candidate)
        room -= candidate.tokens
        if room < 0:
            break
    return kept + tail, steps


def _fitted(conv: Conversation, unit: Unit, room: int, preview: int) -> tuple[Unit, bool]:
    """`unit` with its tool results previewed (over `preview` tokens, to about that), then
    its text shortened and its tool calls' arguments cut while over `room`; and whether
    the arguments were cut."""
    candidate = conv.previewed(unit, threshold=preview, cause="budget", preview_tokens=preview)
    if candidate.tokens > room:
        candidate = conv.shortened(candidate, budget=conv.shorten_tokens)
    if candidate.tokens > room and candidate.kind == "tools":
        cut = conv.calls_shortened(candidate, budget=max(room, 0))
        return cut, cut is not candidate
    return candidate, False
