"""State schemas with every key the context nodes read and write.

```python
from langgraph.graph import StateGraph
from langgraph_ctx.nodes.state import ContextState

class State(ContextState):          # add your own keys
    user_name: str

builder = StateGraph(State)
```

LangGraph silently drops writes to keys a state schema does not declare, so a graph with
the context pipeline needs these keys (all values are plain JSON or pydantic models of
this package, as docs/CONTRACTS.md requires):

| key | written by | what it holds |
|---|---|---|
| `messages` | you, the model node | the full history (never trimmed by the pipeline) |
| `mode` | you | `"chat"`, `"agent"` or `"run"`: the system prompt to compose |
| `run_context` | you | the workflow run in run mode (`RunContext` or its dict) |
| `system_prompt` | prompt | the composed system prompt (text) |
| `llm_input_messages` | pipeline | what the model is sent: system prompt, summary, history |
| `context_usage` | budget | `ContextUsage` of that request |
| `running_summary` | compaction | the running summary (JSON) |
| `compaction_log` | compaction | one record per compaction (appended) |
| `compaction_cursor` | compaction | where compaction stopped reading |
| `error_notebook` | model node, pipeline, tools | the last 50 failures (appended, sliding window) |
| `active_context` | context tools, you | where the model's conversation starts; a loaded archive |
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph import MessagesState
from langgraph.prebuilt.chat_agent_executor import AgentState
from typing_extensions import NotRequired, TypedDict

from langgraph_ctx.context.active_context import ActiveContext, replace_active_context
from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.notebook import ErrorRecord, add_errors
from langgraph_ctx.context.prompt import Mode, RunContext

__all__ = ["ContextAgentState", "ContextKeys", "ContextState"]


class ContextKeys(TypedDict):
    """The keys of the context pipeline, the model node, the notebook and the context tools.

    A mixin: add it to your own state (`class MyState(MessagesState, ContextKeys)`).
    """

    mode: NotRequired[Mode]
    run_context: NotRequired[RunContext | dict[str, Any] | None]
    system_prompt: NotRequired[str | None]
    llm_input_messages: NotRequired[list[AnyMessage]]
    context_usage: NotRequired[ContextUsage]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: Annotated[list[dict[str, Any]], operator.add]
    compaction_cursor: NotRequired[dict[str, Any]]
    error_notebook: Annotated[list[ErrorRecord], add_errors]
    active_context: Annotated[ActiveContext | None, replace_active_context]


class ContextState(MessagesState, ContextKeys):
    """`MessagesState` plus the keys of the context pipeline, the model node and the notebook."""


class ContextAgentState(AgentState, ContextKeys):
    """`create_react_agent`'s `AgentState` plus the same keys as `ContextState`."""
