"""`read_tool_result`: the tool that gives the model back a result it only saw as a preview.

Add it to the agent's tools next to a compacting node. It reads the graph state's
`messages` (injected by `ToolNode`, invisible to the model), where the full result still
is: compaction only changes what the model sees. In `rewrite_messages` mode, where
`messages` itself holds the preview, the full text travels in the preview's `artifact`.

```python
from langgraph.prebuilt import ToolNode
from langgraph_ctx.context.compaction import read_tool_result

tools = [search, read_tool_result]
builder.add_node("tools", ToolNode(tools))
model = model.bind_tools(tools)
```

Its answers never loop. Each is marked (`artifact` carries `TOOL_RESULT_PAGE`, and the
tool's name is `read_tool_result`), and compaction never previews or offloads a marked
answer again: the model asked for the full text. A result too large for the budget comes
in pages instead: by default a page is what half the room left in the request holds
(`context_usage.remaining`, in the text's own tokens), and its last line names the
offset of the next page (`read_tool_result(ref, offset=..., limit=...)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState

from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.compaction.previews import (
    TOOL_RESULT_PAGE,
    is_preview,
    tool_call_id_from_ref,
)
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.tokens import count_message_tokens
from langgraph_ctx.errors import MissingGraphStateError

OFFLOADED_KEY = "offloaded_content"
"""Key in a preview's `artifact` that holds the full content (rewrite mode only)."""

DEFAULT_PAGE_CHARS = 20_000
"""A page's characters when the state has no `context_usage` to size it by."""
MIN_PAGE_TOKENS = 256
MAX_PAGE_TOKENS = 8_000


def find_tool_result(messages: Sequence[BaseMessage], ref: str) -> str | None:
    """The full text of the tool result `ref` points to, or None if `messages` lacks it.

    Example:
        ```python
        find_tool_result(state["messages"], "tool-result/call_1")
        ```
    """
    tool_call_id = tool_call_id_from_ref(ref)
    for message in reversed(messages):
        if not isinstance(message, ToolMessage) or message.tool_call_id != tool_call_id:
            continue
        if not is_preview(message):
            return content_text(message.content)
        artifact: Any = message.artifact
        if isinstance(artifact, dict) and OFFLOADED_KEY in artifact:
            return content_text(artifact[OFFLOADED_KEY])
    return None


def _field(value: Any, key: str) -> Any:
    """`value[key]` of a dict, or the attribute of a state object (None when absent)."""
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


def _is_usage(value: Any) -> bool:
    """A budget node's count: a `ContextUsage`, or its JSON form (a thread read as dicts)."""
    if isinstance(value, ContextUsage):
        return True
    return (
        isinstance(value, dict)
        and type(value.get("remaining")) is int
        and type(value.get("total")) is int
        and "used" in value
    )


def _usage_of(state: Any) -> Any:
    """The state's `context_usage`; under a renamed key (`StateKeys`, when the app has a
    `context_usage` of its own) found by its type, the one with the least room left when
    there are several (two pipelines in one state)."""
    if state is None:
        return None
    fields = state if isinstance(state, dict) else getattr(state, "__dict__", {})
    if not isinstance(fields, dict):
        return None
    usage = fields.get("context_usage")
    if _is_usage(usage):
        return usage
    found = [v for v in fields.values() if _is_usage(v)]
    return min(found, key=lambda u: _field(u, "remaining")) if found else None


def page_chars(text: str, state: Any) -> int:
    """Characters of a default page: what half the room left in the request holds.

    The room is the state's `context_usage.remaining` (the budget node's count of the
    request that called the tool); half of it, between `MIN_PAGE_TOKENS` and
    `MAX_PAGE_TOKENS`, converted with this text's own characters per token (counted with
    the model's tokenizer). Without a `context_usage`, `DEFAULT_PAGE_CHARS`.
    """
    usage = _usage_of(state)
    if usage is None:
        return DEFAULT_PAGE_CHARS
    remaining = _field(usage, "remaining")
    tokens = max(MIN_PAGE_TOKENS, min(MAX_PAGE_TOKENS, remaining // 2))
    model = _field(usage, "model") or "gpt-4o"
    sample = text[:200_000]
    counted = max(1, count_message_tokens(("tool", sample), model=str(model)) - 3)
    return max(200, int(tokens * len(sample) / counted))


def require_state(value: Any, tool: str, needs: str, example: str) -> Any:
    """`value`, an argument the graph injects (`InjectedState`); `MissingGraphStateError`
    saying how to pass it when it is missing (the tool was called outside a graph).

    The injected arguments default to None so that a direct call reaches this check
    instead of pydantic's "Field required"; `ToolNode` injects them all the same.
    """
    if value is None:
        raise MissingGraphStateError(tool, needs, example)
    return value


@tool(response_format="content_and_artifact")
def read_tool_result(
    ref: str,
    messages: Annotated[list[BaseMessage] | None, InjectedState("messages")] = None,
    offset: int = 0,
    limit: int | None = None,
    state: Annotated[Any, InjectedState] = None,
) -> tuple[str, dict[str, Any]]:
    """Read the full output of an earlier tool call shown only as a TOOL_RESULT_PREVIEW.

    Long outputs come in pages; the last line of a page says which offset reads the next.

    Args:
        ref: the reference printed in the preview, e.g. "tool-result/call_abc123".
        offset: first character to return (to page through very long outputs).
        limit: most characters to return (default: a page that fits the context).
    """
    messages = require_state(
        messages,
        "read_tool_result",
        "the graph state's messages",
        'read_tool_result.invoke({"ref": "tool-result/call_1", "messages": state["messages"]})',
    )
    text = find_tool_result(messages, ref)
    if text is None:
        answer = (
            f"No tool result {ref!r} in this conversation. Pass the ref exactly as the "
            "TOOL_RESULT_PREVIEW line shows it (tool-result/<tool_call_id>)."
        )
        return answer, _page_marker(ref, 0, 0, 0)
    offset = max(0, offset)
    limit = max(1, limit) if limit is not None else page_chars(text, state)
    part = text[offset : offset + limit]
    end = offset + len(part)
    if offset or end < len(text):
        more = f"; call again with offset={end} for more" if end < len(text) else ""
        part += f"\n[characters {offset}-{end} of {len(text)}{more}]"
    return part, _page_marker(ref, offset, end, len(text))


def _page_marker(ref: str, offset: int, end: int, total: int) -> dict[str, Any]:
    key, value = TOOL_RESULT_PAGE
    return {key: value, "ref": ref, "offset": offset, "end": end, "total": total}
