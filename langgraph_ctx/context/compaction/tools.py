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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState

from langgraph_ctx.context.compaction.previews import is_preview, tool_call_id_from_ref
from langgraph_ctx.context.compaction.signals import content_text

OFFLOADED_KEY = "offloaded_content"
"""Key in a preview's `artifact` that holds the full content (rewrite mode only)."""


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


@tool
def read_tool_result(
    ref: str,
    messages: Annotated[list[BaseMessage], InjectedState("messages")],
    offset: int = 0,
    limit: int = 20_000,
) -> str:
    """Read the full output of an earlier tool call shown only as a TOOL_RESULT_PREVIEW.

    Args:
        ref: the reference printed in the preview, e.g. "tool-result/call_abc123".
        offset: first character to return (to page through very long outputs).
        limit: most characters to return.
    """
    text = find_tool_result(messages, ref)
    if text is None:
        return (
            f"No tool result {ref!r} in this conversation. Pass the ref exactly as the "
            "TOOL_RESULT_PREVIEW line shows it (tool-result/<tool_call_id>)."
        )
    offset = max(0, offset)
    limit = max(1, limit)
    part = text[offset : offset + limit]
    end = offset + len(part)
    if offset or end < len(text):
        more = f"; call again with offset={end} for more" if end < len(text) else ""
        part += f"\n[characters {offset}-{end} of {len(text)}{more}]"
    return part
