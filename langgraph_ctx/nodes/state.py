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

This module is the one home of that contract: the keys (`ContextKeys`, `PIPELINE_KEYS`),
the smaller schemas of single nodes (`BudgetState`, `CompactionState`, ...), and the
helpers every node uses to read a state (`state_value`, `view_active`, `run_labels`,
`graph_step`, `thread_id_of`, `stands_for`). The nodes, the pipeline and the middleware
import them from here.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypeGuard

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from langgraph.prebuilt.chat_agent_executor import AgentState
from typing_extensions import NotRequired, TypedDict

from langgraph_ctx.context.active_context import ActiveContext, replace_active_context
from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.notebook import ErrorRecord, add_errors
from langgraph_ctx.context.prompt import Mode, RunContext, read_run_context
from langgraph_ctx.errors import PromptPartError

__all__ = [
    "PIPELINE_KEYS",
    "BudgetAgentState",
    "BudgetState",
    "CompactionAgentState",
    "CompactionState",
    "ContextAgentState",
    "ContextKeys",
    "ContextState",
    "cursor_has_view",
    "graph_step",
    "run_labels",
    "stands_for",
    "state_value",
    "thread_id_of",
    "view_active",
]


class ContextKeys(TypedDict):
    """The keys of the context pipeline, the model node, the notebook and the context tools.

    A mixin: add it to your own state (`class MyState(MessagesState, ContextKeys)`).
    """

    mode: NotRequired[Mode]
    run_context: NotRequired[RunContext | dict[str, Any] | None]
    llm_input_messages: NotRequired[list[AnyMessage]]
    context_usage: NotRequired[ContextUsage]
    system_prompt: NotRequired[str | None]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: Annotated[list[dict[str, Any]], operator.add]
    compaction_cursor: NotRequired[dict[str, Any]]
    error_notebook: Annotated[list[ErrorRecord], add_errors]
    active_context: Annotated[ActiveContext | None, replace_active_context]


class ContextState(MessagesState, ContextKeys):
    """`MessagesState` plus the keys of the context pipeline, the model node and the notebook."""


class ContextAgentState(AgentState, ContextKeys):
    """`create_react_agent`'s `AgentState` plus the same keys as `ContextState`."""


#: Keys the host writes and the pipeline only reads.
_HOST_KEYS = ("mode", "run_context", "active_context")

#: State keys the pipeline writes; a graph state must declare them (see `ContextState`).
PIPELINE_KEYS: tuple[str, ...] = tuple(
    key for key in ContextKeys.__annotations__ if key not in _HOST_KEYS
)


class BudgetState(TypedDict):
    """Smallest state for a graph with a `BudgetNode`; extend it with your own keys."""

    messages: Annotated[list[AnyMessage], add_messages]
    context_usage: NotRequired[ContextUsage]


class BudgetAgentState(AgentState):
    """`create_react_agent`'s `AgentState` plus `context_usage`."""

    context_usage: NotRequired[ContextUsage]


class CompactionState(TypedDict):
    """Smallest state for a graph with a `CompactionNode`; extend it with your own keys."""

    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: NotRequired[list[AnyMessage]]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: Annotated[list[dict[str, Any]], operator.add]
    compaction_cursor: NotRequired[dict[str, Any]]
    context_usage: NotRequired[Any]


class CompactionAgentState(AgentState):
    """`create_react_agent`'s `AgentState` plus the keys `CompactionNode` writes."""

    llm_input_messages: NotRequired[list[AnyMessage]]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: Annotated[list[dict[str, Any]], operator.add]
    compaction_cursor: NotRequired[dict[str, Any]]
    context_usage: NotRequired[Any]


# -- reading a state ------------------------------------------------------------------


def state_value(state: Any, key: str) -> Any:
    """`state[key]` of a dict state, or the attribute of an object state; None if absent.

    Example:
        ```python
        state_value({"mode": "chat"}, "mode"), state_value({}, "mode")  # ('chat', None)
        ```
    """
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def view_active(state: Any) -> bool:
    """Whether a compacted view is active in `state` (see `cursor_has_view`).

    While it is, `llm_input_messages` is compaction's view of the conversation (plus the
    prompt in front of it); otherwise that key is the previous step's request and stale.
    """
    return cursor_has_view(state_value(state, "compaction_cursor"))


def cursor_has_view(cursor: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether a `compaction_cursor` value counts a compacted view (`view_tokens`)."""
    return isinstance(cursor, Mapping) and cursor.get("view_tokens") is not None


def stands_for(view_message: BaseMessage, message: BaseMessage) -> bool:
    """Whether a view message is `message` or compaction's stand-in for it (`<id>~...`)."""
    a, b = view_message.id, message.id
    return a is not None and b is not None and (a == b or a.startswith(f"{b}~"))


def thread_id_of(config: RunnableConfig | None) -> str | None:
    """The `thread_id` of a run's config, as a string (None outside a thread)."""
    value = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(value) if value is not None else None


def graph_step(config: RunnableConfig | None) -> int | None:
    """The LangGraph step of the running node (from `config`, else the current context)."""
    if config is None:
        try:
            from langgraph.config import get_config

            config = get_config()
        except RuntimeError:  # not inside a graph
            return None
    step = ((config or {}).get("metadata") or {}).get("langgraph_step")
    return step if isinstance(step, int) else None


def run_labels(state: Any, default_mode: str | None = None) -> dict[str, Any]:
    """`mode` and `run_id` of the state, for records and reply tags (never raises)."""
    mode = state_value(state, "mode") or default_mode
    try:
        run = read_run_context(state_value(state, "run_context"))
    except PromptPartError:
        run = None
    return {"mode": mode, "run_id": run.run_id if run is not None else None}
