"""The error notebook: the last 50 failures of a thread (model calls and tool calls).

A sliding window kept in the graph state under `error_notebook`, one `ErrorRecord` (a
plain dict) per failure, oldest first. Declare the key with the `add_errors` reducer
(`ContextState` does), and every node may append to it:

```python
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from langgraph_ctx.context.notebook import ErrorRecord, add_errors, errors_in

class State(MessagesState):
    error_notebook: Annotated[list[ErrorRecord], add_errors]

class SoldOut(Exception):
    pass

@tool
def book_flight(flight: str) -> str:
    "Book a flight by its number."
    raise SoldOut(f"flight {flight} is sold out")

def record_errors(state: State) -> dict[str, Any]:
    return {"error_notebook": errors_in(state["messages"])}

builder = StateGraph(State)
builder.add_node("tools", ToolNode([book_flight], handle_tool_errors=True))
builder.add_node("record_errors", record_errors)
builder.add_edge(START, "tools")
builder.add_edge("tools", "record_errors")
graph = builder.compile()

call = {"name": "book_flight", "args": {"flight": "LH123"}, "id": "call_7"}
state = graph.invoke({"messages": [("user", "Book LH123."), AIMessage("", tool_calls=[call])]})
state["error_notebook"][-1]
# {'id': 'tool:call_7', 'kind': 'tool_error', 'error_type': 'SoldOut',
#  'message': "Error: SoldOut('flight LH123 is sold out') Please fix your mistakes.",
#  'at': '2026-11-23T15:40:14.226+00:00', 'tool_name': 'book_flight', ...}
```

Records are found in the messages themselves: `LLM_ERROR` assistant messages and tool
results with `status="error"` (`errors_in`). Each has an `id` derived from the message
(`llm:<message id>`, `tool:<tool call id>`), so recording the same failure twice keeps one
record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from typing_extensions import NotRequired, TypedDict

from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.llm_error import is_llm_error, read_llm_error, utc_now

__all__ = [
    "NOTEBOOK_SIZE",
    "ErrorRecord",
    "add_errors",
    "errors_in",
    "llm_error_record",
    "notebook_reducer",
    "tool_error_record",
]

#: How many records the notebook keeps (the newest).
NOTEBOOK_SIZE: Final[int] = 50
_MESSAGE_CLIP = 500


class ErrorRecord(TypedDict):
    """One failure in the notebook (plain JSON)."""

    id: str
    """`llm:<message id>` or `tool:<tool call id>`: the same failure is recorded once."""
    kind: Literal["llm_error", "tool_error"]
    error_type: str
    """Exception class name (`ModelTimeoutError`, `ValueError`, ...), `ToolError` if unknown."""
    message: str
    at: str
    """When it was recorded (ISO-8601, UTC)."""
    step: NotRequired[int | None]
    """The LangGraph step of the node that recorded it."""
    tool_name: NotRequired[str | None]
    tool_call_id: NotRequired[str | None]
    message_id: NotRequired[str | None]
    error_kind: NotRequired[str | None]
    """For model calls: `timeout`, `network` or `error`."""
    partial_chars: NotRequired[int]
    attempts: NotRequired[int]
    mode: NotRequired[str | None]
    run_id: NotRequired[str | None]


def notebook_reducer(
    size: int = NOTEBOOK_SIZE,
) -> Callable[[Sequence[ErrorRecord] | None, Any], list[ErrorRecord]]:
    """A reducer that appends records, skips ids already present, and keeps the last `size`.

    Example:
        ```python
        from typing import Annotated

        from langgraph.graph import MessagesState

        from langgraph_ctx.context.notebook import ErrorRecord, notebook_reducer

        class State(MessagesState):
            error_notebook: Annotated[list[ErrorRecord], notebook_reducer(200)]
        ```
    """
    if size < 1:
        raise ValueError(f"the notebook must keep at least one record, got size={size}")

    def add(left: Sequence[ErrorRecord] | None, right: Any) -> list[ErrorRecord]:
        records = list(left or [])
        new: Iterable[Any] = [right] if isinstance(right, Mapping) else (right or [])
        seen: set[Any] = {r.get("id") for r in records}
        for record in new:
            if not isinstance(record, Mapping):
                raise TypeError(f"error_notebook takes ErrorRecord dicts, got {record!r}")
            if record.get("id") in seen:
                continue
            seen.add(record.get("id"))
            records.append(dict(record))  # type: ignore[arg-type]
        return records[-size:]

    add.__name__ = f"add_errors_last_{size}"
    return add


add_errors = notebook_reducer(NOTEBOOK_SIZE)
"""The default reducer of `error_notebook`: the 50 newest records."""


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CLIP else text[: _MESSAGE_CLIP - 1] + "…"


def llm_error_record(message: BaseMessage, **context: Any) -> ErrorRecord | None:
    """The record of an LLM_ERROR message (None for any other message).

    `context` adds `step`, `mode`, `run_id`.
    """
    info = read_llm_error(message)
    if info is None:
        return None
    record: ErrorRecord = ErrorRecord(
        id=f"llm:{message.id}",
        kind="llm_error",
        error_type=info.error_type,
        message=info.message,
        at=info.at,
        message_id=message.id,
        error_kind=info.kind,
        partial_chars=info.partial_chars,
        attempts=info.attempts,
        **context,  # type: ignore[typeddict-item]  # step, mode, run_id: ErrorRecord keys
    )
    return record


_TOOLNODE_ERROR = re.compile(r"^Error:\s*(?P<type>[A-Za-z_][\w.]*)\(")


def tool_error_record(
    message: ToolMessage, *, error: BaseException | None = None, **context: Any
) -> ErrorRecord:
    """The record of a failed tool call (`status="error"` tool result, or its exception).

    `ToolNode` writes errors as `Error: ValueError('...')\\n Please fix your mistakes.`;
    the exception's class is read back from that when `error` is not given.
    """
    text = content_text(message.content)
    if error is not None:
        error_type, detail = type(error).__name__, str(error) or text
    else:
        match = _TOOLNODE_ERROR.match(text)
        error_type = match.group("type").rsplit(".", 1)[-1] if match else "ToolError"
        detail = text
    record: ErrorRecord = ErrorRecord(
        id=f"tool:{message.tool_call_id}",
        kind="tool_error",
        error_type=error_type,
        message=_clip(detail),
        at=utc_now(),
        tool_name=message.name,
        tool_call_id=message.tool_call_id,
        message_id=message.id,
        **context,  # type: ignore[typeddict-item]  # step, mode, run_id: ErrorRecord keys
    )
    return record


def errors_in(messages: Sequence[BaseMessage], **context: Any) -> list[ErrorRecord]:
    """Failures in the newest part of a conversation: from the last assistant message on.

    That part is what is new since the model was last called (its reply and the tool
    results that answer it), so a node calling this before every model call records each
    failure once, and costs only the new messages. `context` adds `step`, `mode`, `run_id`.

    Example:
        ```python
        errors_in([HumanMessage("book it"), AIMessage("", tool_calls=[call]),
                   ToolMessage("Error: SoldOut('LH123')", tool_call_id="c1", status="error")])
        # [{'id': 'tool:c1', 'kind': 'tool_error', 'error_type': 'SoldOut', ...}]
        ```
    """
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        start = i
        if isinstance(messages[i], AIMessage):
            break
    records: list[ErrorRecord] = []
    for message in messages[start:]:
        if is_llm_error(message):
            record = llm_error_record(message, **context)
            if record is not None:
                records.append(record)
        elif isinstance(message, ToolMessage) and message.status == "error":
            records.append(tool_error_record(message, **context))
    return records
