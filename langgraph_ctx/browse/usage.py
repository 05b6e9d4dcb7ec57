"""Token usage of saved states, per component and per turn (what `BudgetNode` measures)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langgraph_ctx.browse.checkpoints import head_info, require_thread, state_values
from langgraph_ctx.browse.values import MESSAGES_KEY, find_messages
from langgraph_ctx.context.budget import ContextBudget, ContextUsage, compute_usage
from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.prompt import is_system_prompt_message
from langgraph_ctx.context.tokens import MessageTokenCounter
from langgraph_ctx.saver.log import CheckpointInfo, LogSaver

__all__ = ["VIEW_KEY", "TurnUsage", "usage_at", "usage_series"]


def _budget(model: str, budget: ContextBudget | str | None) -> ContextBudget:
    if isinstance(budget, ContextBudget):
        return budget
    if isinstance(budget, str):
        return ContextBudget.preset(budget)
    return ContextBudget.for_model(model)


def usage_at(
    values: Mapping[str, Any],
    *,
    model: str,
    budget: ContextBudget | str | None = None,
    messages_key: str = MESSAGES_KEY,
    counter: MessageTokenCounter | None = None,
    system_prompt: str | None = None,
    calibrate: bool = True,
) -> ContextUsage:
    """Token usage of a state's messages against a budget, as `BudgetNode` computes it.

    ``budget`` is a `ContextBudget`, a preset name, or ``None`` for the model's whole
    context window. A ``system_prompt`` string and a ``tools`` list in the state are
    counted too, as the node does (the state's ``system_prompt`` wins over the argument),
    unless the measured messages already start with the composed prompt (a pipeline's
    ``llm_input_messages``). ``calibrate`` anchors the count on the provider's
    ``usage_metadata`` (right for the request the provider saw, wrong for a history
    longer than a compacted request).
    """
    messages = find_messages(values, messages_key)
    stored_prompt = values.get("system_prompt")
    if isinstance(stored_prompt, str):
        system_prompt = stored_prompt
    if messages and is_system_prompt_message(messages[0]):
        system_prompt = None  # already in the messages
    tools = values.get("tools")
    return compute_usage(
        messages,
        _budget(model, budget),
        counter=counter or MessageTokenCounter(model),
        system_prompt=system_prompt or None,
        tools=tools if isinstance(tools, list) else None,
        calibrate=calibrate,
        model=model,
    )


@dataclass
class TurnUsage:
    """Usage of the model's last request in one turn of a thread (see `usage_series`)."""

    turn: int
    """1 for the first input, 2 for the second, ..."""
    checkpoint_id: str
    """The turn's last checkpoint."""
    step: int | None
    ts: str
    messages: int
    """Messages sent in the request."""
    used: int
    total: int
    percent: float
    breakdown: dict[str, int]
    compactions: int
    """Compaction records in the state so far (``compaction_log``)."""
    view_used: int | None = None
    """Tokens of what the model was shown when a `CompactionNode` made a view
    (``llm_input_messages``); ``used`` for turns before the first view; ``None`` when
    the thread has no view at all (or another ``messages_key`` was measured)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _request_view(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What the model received for its last call of a turn: the state without its reply."""
    if messages and isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
        return messages[:-1]
    return messages


def _recorded_tools(values: Mapping[str, Any]) -> int:
    """Tokens of the tool schemas in the state's recorded ``context_usage`` (what
    `BudgetNode` counted with the tools bound to the model), 0 if none."""
    recorded = values.get("context_usage")
    breakdown = getattr(recorded, "breakdown", None)
    if breakdown is None and isinstance(recorded, Mapping):
        breakdown = recorded.get("breakdown")
    tools = breakdown.get("tools") if isinstance(breakdown, Mapping) else None
    return tools if isinstance(tools, int) and not isinstance(tools, bool) and tools > 0 else 0


def usage_series(
    saver: LogSaver,
    thread_id: str,
    *,
    model: str,
    budget: ContextBudget | str | None = None,
    messages_key: str = MESSAGES_KEY,
    system_prompt: str | None = None,
) -> list[TurnUsage]:
    """Tokens per component for every turn of a thread, from its saved checkpoints.

    A turn starts at each input checkpoint (``source == "input"``) on the path from the
    first checkpoint to the head (time-travel branches the head does not descend from
    are left out). Each turn is measured at its last checkpoint, on the messages of the
    model's last request: the state without the final assistant reply. When a
    `CompactionNode` showed the model a compacted view (``llm_input_messages``), its
    size is in ``view_used``. Tool schemas are not in the state: their tokens come from
    the ``context_usage`` a `BudgetNode` recorded with the tools bound to the model.

    Example:
        ```python
        for turn in usage_series(saver, "task-001", model="gpt-4o"):
            print(turn.turn, turn.used, turn.breakdown["history"])
        ```
    """
    infos = require_thread(saver, thread_id)
    by_id = {i.checkpoint_id: i for i in infos if not i.checkpoint_ns}
    head = head_info(infos)
    chain: list[CheckpointInfo] = []
    seen: set[str] = set()
    cur = head
    while cur is not None and cur.checkpoint_id not in seen:
        seen.add(cur.checkpoint_id)
        chain.append(cur)
        cur = by_id.get(cur.parent_checkpoint_id or "")
    chain.reverse()
    turns: list[list[CheckpointInfo]] = []
    for info in chain:
        if info.metadata.get("source") == "input" or not turns:
            turns.append([])
        turns[-1].append(info)
    if turns and turns[0][0].metadata.get("source") != "input" and len(turns) > 1:
        turns = turns[1:]  # what came before the first input (an update_state) is no turn
    chosen = _budget(model, budget)
    counter = MessageTokenCounter(model)
    out: list[TurnUsage] = []
    for number, span in enumerate(turns, 1):
        last = span[-1]
        values = state_values(saver, last)
        request = _request_view(find_messages(values, messages_key))
        # The whole history, counted: the provider's usage measured the (possibly
        # compacted) request, so it must not calibrate a count of the history.
        usage = usage_at(
            {**values, messages_key: request},
            model=model,
            budget=chosen,
            messages_key=messages_key,
            counter=counter,
            system_prompt=system_prompt,
            calibrate=False,
        )
        view_used = None
        if messages_key == MESSAGES_KEY and find_messages(values, VIEW_KEY):
            view = usage_at(
                values,
                model=model,
                budget=chosen,
                messages_key=VIEW_KEY,
                counter=counter,
                system_prompt=system_prompt,
                calibrate=False,
            )
            view_used = view.used
        log = values.get("compaction_log")
        breakdown = dict(usage.breakdown)
        used = usage.used
        tools = 0 if breakdown.get("tools") else _recorded_tools(values)
        if tools:  # tool schemas the BudgetNode counted; the state does not hold them
            breakdown["tools"] = tools
            used += tools
            view_used = view_used + tools if view_used is not None else None
        out.append(
            TurnUsage(
                turn=number,
                checkpoint_id=last.checkpoint_id,
                step=last.metadata.get("step"),
                ts=last.ts,
                messages=len(request),
                used=used,
                total=usage.total,
                percent=round(100 * (used + usage.reserved_output) / max(usage.total, 1), 2)
                if tools
                else usage.percent,
                breakdown=breakdown,
                compactions=len(log) if isinstance(log, list) else 0,
                view_used=view_used,
            )
        )
    if any(t.view_used is not None for t in out):
        for t in out:
            if t.view_used is None:
                t.view_used = t.used  # no view yet: the model saw the messages themselves
    return out
