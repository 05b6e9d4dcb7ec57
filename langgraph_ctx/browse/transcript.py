"""A state as a transcript (messages, compactions, running summary) and as OpenAI-style
messages for evals."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from pydantic import BaseModel, ValidationError

from langgraph_ctx.browse.values import (
    MESSAGES_KEY,
    content_text,
    find_messages,
    is_internal_channel,
    jsonable,
    messages_channel,
)
from langgraph_ctx.context.active_context import (
    context_start,
    leading_system_count,
    read_active_context,
)
from langgraph_ctx.context.compaction.previews import original_id
from langgraph_ctx.context.compaction.record import CompactionRecord, RunningSummary
from langgraph_ctx.context.tokens import message_role

__all__ = ["ExportFormat", "Transcript", "export_messages", "to_openai_messages", "transcript"]


@dataclass
class Transcript:
    """A state as people read it (see `transcript`)."""

    messages: list[dict[str, Any]]
    """One entry per message: ``role``, ``content`` (text), ``tool_calls``, ``tool_call_id``,
    ``name``, ``id``, and ``summary`` / ``compacted`` flags."""
    compactions: list[dict[str, Any]] = field(default_factory=list)
    """The records of ``compaction_log`` (`CompactionRecord` as JSON), oldest first."""
    running_summary: dict[str, Any] | None = None
    """``running_summary`` (`RunningSummary` as JSON), when present."""
    context_usage: dict[str, Any] | None = None
    """``context_usage`` as a `BudgetNode` recorded it, when present."""
    interrupts: list[Any] = field(default_factory=list)
    """Values of interrupts waiting for ``Command(resume=...)``."""
    state: dict[str, Any] = field(default_factory=dict)
    """The other keys of the state (as JSON), LangGraph's internal channels left out."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# State keys `transcript` shows in their own sections, or that only repeat the messages.
_SHOWN_KEYS = frozenset(
    {"compaction_log", "running_summary", "context_usage", "llm_input_messages",
     "compaction_cursor"}
)  # fmt: skip


def message_entry(index: int, message: BaseMessage) -> dict[str, Any]:
    """One message as a transcript entry (also the before/after of a `MessageChange`)."""
    entry: dict[str, Any] = {
        "index": index,
        "id": message.id,
        "role": message_role(message),
        "content": content_text(message.content),
    }
    if message.name:
        entry["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        entry["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "args": jsonable(c.get("args"))}
            for c in message.tool_calls
        ]
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        entry["invalid_tool_calls"] = jsonable(message.invalid_tool_calls)
    tool_call_id = getattr(message, "tool_call_id", None)
    if tool_call_id:
        entry["tool_call_id"] = tool_call_id
    status = getattr(message, "status", None)
    if status and status != "success":
        entry["status"] = status
    extra = message.additional_kwargs or {}
    if extra.get("langgraph_ctx") == "summary" or (
        message.type == "system"
        and isinstance(message.content, str)
        and message.content.startswith(("SUMMARY", "CONVERSATION_SUMMARY"))
    ):
        entry["summary"] = True
    return entry


def _records(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
        try:
            out.append(CompactionRecord.model_validate(data).model_dump(mode="json"))
        except ValidationError:
            out.append({"raw": jsonable(data)})
    return out


def _summary(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    try:
        return RunningSummary.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return {"raw": jsonable(data)}


def transcript(
    values: Mapping[str, Any],
    *,
    messages_key: str = MESSAGES_KEY,
    pending_writes: Iterable[tuple[str, str, Any]] = (),
) -> Transcript:
    """The conversation of a state: messages in order (roles, text, tool calls and
    results), the compaction records, the running summary, the recorded usage, and the
    state's other keys.

    Messages a compaction left out of the model's view are flagged ``compacted`` (also
    when it dropped their stand-in, a tool result's preview), and those before the active
    context (a switch of the context tools set them aside) ``outside_context``.
    ``pending_writes`` (from the checkpoint tuple) adds waiting interrupts.
    """
    messages = find_messages(values, messages_key)
    compactions = _records(values.get("compaction_log"))
    dropped = {
        original_id(d.get("id"))
        for record in compactions
        for d in record.get("dropped", [])
        if isinstance(d, Mapping)
    }
    active = values.get("active_context")
    start = context_start(messages, active) if read_active_context(active) is not None else 0
    lead = leading_system_count(messages)
    entries = []
    for i, message in enumerate(messages):
        entry = message_entry(i, message)
        if message.id is not None and message.id in dropped:
            entry["compacted"] = True
        if lead <= i < start:
            entry["outside_context"] = True
        entries.append(entry)
    usage = values.get("context_usage")
    if isinstance(usage, BaseModel):
        usage_json: dict[str, Any] | None = usage.model_dump(mode="json")
    else:
        usage_json = usage if isinstance(usage, dict) else None
    interrupts = []
    for _, channel, value in pending_writes:
        if channel == "__interrupt__":
            for item in value if isinstance(value, (list, tuple)) else [value]:
                interrupts.append(jsonable(getattr(item, "value", item)))
    shown = _SHOWN_KEYS | {messages_channel(values, messages_key)}
    state = {
        key: jsonable(value)
        for key, value in values.items()
        if key not in shown and not is_internal_channel(key)
    }
    return Transcript(
        messages=entries,
        compactions=compactions,
        running_summary=_summary(values.get("running_summary")),
        context_usage=usage_json,
        interrupts=interrupts,
        state=state,
    )


def to_openai_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages in OpenAI's chat format: ``role``, ``content``, ``tool_calls`` (with JSON
    ``arguments``), ``tool_call_id``, ``name``; what evals and fine-tuning files use.

    Example:
        ```python
        to_openai_messages([HumanMessage("hi"), AIMessage("hello")])
        # [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'hello'}]
        ```
    """
    if not messages:
        return []
    converted = convert_to_openai_messages(list(messages))
    return [dict(m) for m in converted]


ExportFormat = Literal["openai", "jsonl"]


def export_messages(messages: Sequence[BaseMessage], fmt: ExportFormat = "openai") -> str:
    """Messages as text: ``openai`` is one JSON list, ``jsonl`` one message per line."""
    converted = to_openai_messages(messages)
    if fmt == "openai":
        return json.dumps(converted, ensure_ascii=False, indent=2) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in converted)
    raise ValueError(f"unknown export format {fmt!r}; use 'openai' or 'jsonl'")
