"""langgraph-ctx: durable, inspectable conversation context for LangGraph.

```python
from langgraph.graph import START, MessagesState, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.testing import chat_model

model = chat_model()                   # offline unless OPENAI_API_KEY is set
builder = StateGraph(MessagesState)
builder.add_node("chat", lambda state: {"messages": [model.invoke(state["messages"])]})
builder.add_edge(START, "chat")

saver = JsonlSaver("./chats")          # one readable JSONL file per thread
graph = builder.compile(checkpointer=saver)
graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "task-001"}})
```

Public names are imported lazily, so `import langgraph_ctx` stays cheap and an
optional extra that is not installed only fails when its name is used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    # errors
    "LangGraphCtxError": "langgraph_ctx.errors",
    "CorruptLogError": "langgraph_ctx.errors",
    "ThreadNotFoundError": "langgraph_ctx.errors",
    "CheckpointNotFoundError": "langgraph_ctx.errors",
    "ThreadExistsError": "langgraph_ctx.errors",
    "TokenizerDataError": "langgraph_ctx.errors",
    "UnknownContextWindowError": "langgraph_ctx.errors",
    "CheckpointRefError": "langgraph_ctx.errors",
    "SqliteSourceError": "langgraph_ctx.errors",
    "ClassUnavailableError": "langgraph_ctx.errors",
    "PlotUnavailableError": "langgraph_ctx.errors",
    "StorageUnavailableError": "langgraph_ctx.errors",
    "StorageConfigError": "langgraph_ctx.errors",
    "DroppedWritesWarning": "langgraph_ctx.errors",
    "StateShapeError": "langgraph_ctx.errors",
    "LockTimeoutError": "langgraph_ctx.errors",
    "AbandonedLockError": "langgraph_ctx.errors",
    "LogChangedError": "langgraph_ctx.errors",
    "LogWriteError": "langgraph_ctx.errors",
    "LogWriteWarning": "langgraph_ctx.errors",
    "MissingGraphStateError": "langgraph_ctx.errors",
    # savers
    "JsonlSaver": "langgraph_ctx.saver.jsonl",
    "RedisLogSaver": "langgraph_ctx.saver.redis",
    "CheckpointInfo": "langgraph_ctx.saver.log",
    "copy_thread_between": "langgraph_ctx.storage.transfer",
    # token budgets
    "count_tokens": "langgraph_ctx.context.tokens",
    "MessageTokenCounter": "langgraph_ctx.context.tokens",
    "ContextBudget": "langgraph_ctx.context.budget",
    "ContextUsage": "langgraph_ctx.context.budget",
    "BudgetNode": "langgraph_ctx.nodes.budget",
    "BudgetState": "langgraph_ctx.nodes.budget",
    "BudgetAgentState": "langgraph_ctx.nodes.budget",
    # compaction
    "compact_messages": "langgraph_ctx.context.compaction",
    "acompact_messages": "langgraph_ctx.context.compaction",
    "prepare_compaction": "langgraph_ctx.context.compaction",
    "CompactionRecord": "langgraph_ctx.context.compaction",
    "RunningSummary": "langgraph_ctx.context.compaction",
    "CompactionStrategy": "langgraph_ctx.context.compaction",
    "KeyMessageExtraction": "langgraph_ctx.context.compaction",
    "SlidingWindow": "langgraph_ctx.context.compaction",
    "LLMSummary": "langgraph_ctx.context.compaction",
    "HybridSummary": "langgraph_ctx.context.compaction",
    "read_tool_result": "langgraph_ctx.context.compaction",
    "RelevanceSelection": "langgraph_ctx.context.compaction",
    "search_history": "langgraph_ctx.context.compaction",
    "CompactionError": "langgraph_ctx.context.compaction",
    "CompactionNode": "langgraph_ctx.nodes.compaction",
    "CompactionState": "langgraph_ctx.nodes.compaction",
    # system prompt, pipeline, errors
    "compose_system_prompt": "langgraph_ctx.context.prompt",
    "PromptParts": "langgraph_ctx.context.prompt",
    "RunContext": "langgraph_ctx.context.prompt",
    "WorkflowStep": "langgraph_ctx.context.prompt",
    "SystemPromptNode": "langgraph_ctx.nodes.prompt",
    "context_pipeline": "langgraph_ctx.nodes.pipeline",
    "ContextPipeline": "langgraph_ctx.nodes.pipeline",
    "ContextState": "langgraph_ctx.nodes.state",
    "ContextAgentState": "langgraph_ctx.nodes.state",
    "ContextKeys": "langgraph_ctx.nodes.state",
    "StateKeys": "langgraph_ctx.nodes.state",
    "compaction_history": "langgraph_ctx.nodes.state",
    "ModelNode": "langgraph_ctx.nodes.errors",
    "ModelCallPolicy": "langgraph_ctx.nodes.errors",
    "record_tool_errors": "langgraph_ctx.nodes.errors",
    "arecord_tool_errors": "langgraph_ctx.nodes.errors",
    "ContextMiddleware": "langgraph_ctx.nodes.middleware",
    "LLMError": "langgraph_ctx.context.llm_error",
    "is_llm_error": "langgraph_ctx.context.llm_error",
    "is_recoverable_error": "langgraph_ctx.context.llm_error",
    "ErrorRecord": "langgraph_ctx.context.notebook",
    # context-switching tools
    "context_tools": "langgraph_ctx.tools.context",
    "ContextTools": "langgraph_ctx.tools.context",
    "ContextArchive": "langgraph_ctx.context.archive",
    "ContextArchiveError": "langgraph_ctx.errors",
    "ActiveContext": "langgraph_ctx.context.active_context",
    "PromptPartError": "langgraph_ctx.errors",
    "ModelTimeoutError": "langgraph_ctx.errors",
    "StateKeyConflictError": "langgraph_ctx.errors",
    "PersonaDroppedWarning": "langgraph_ctx.errors",
    "CorruptLineWarning": "langgraph_ctx.errors",
    "TornLineWarning": "langgraph_ctx.errors",
    "SymlinkRefusedError": "langgraph_ctx.errors",
    "NotARegularFileError": "langgraph_ctx.errors",
}

# Optional extras: a missing package named here raises `MissingExtraError`
# (what to pip install) instead of a bare ModuleNotFoundError.
_EXTRAS: dict[str, str] = {"redis": "redis"}  # top-level package -> extra

__all__ = [  # a literal, so that type checkers read the exports (a test keeps it = _EXPORTS)
    "AbandonedLockError",
    "ActiveContext",
    "BudgetAgentState",
    "BudgetNode",
    "BudgetState",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CheckpointRefError",
    "ClassUnavailableError",
    "CompactionError",
    "CompactionNode",
    "CompactionRecord",
    "CompactionState",
    "CompactionStrategy",
    "ContextAgentState",
    "ContextArchive",
    "ContextArchiveError",
    "ContextBudget",
    "ContextKeys",
    "ContextMiddleware",
    "ContextPipeline",
    "ContextState",
    "ContextTools",
    "ContextUsage",
    "CorruptLineWarning",
    "CorruptLogError",
    "DroppedWritesWarning",
    "ErrorRecord",
    "HybridSummary",
    "JsonlSaver",
    "KeyMessageExtraction",
    "LLMError",
    "LLMSummary",
    "LangGraphCtxError",
    "LockTimeoutError",
    "LogChangedError",
    "LogWriteError",
    "LogWriteWarning",
    "MessageTokenCounter",
    "MissingGraphStateError",
    "ModelCallPolicy",
    "ModelNode",
    "ModelTimeoutError",
    "NotARegularFileError",
    "PersonaDroppedWarning",
    "PlotUnavailableError",
    "PromptPartError",
    "PromptParts",
    "RedisLogSaver",
    "RelevanceSelection",
    "RunContext",
    "RunningSummary",
    "SlidingWindow",
    "SqliteSourceError",
    "StateKeyConflictError",
    "StateKeys",
    "StateShapeError",
    "StorageConfigError",
    "StorageUnavailableError",
    "SymlinkRefusedError",
    "SystemPromptNode",
    "ThreadExistsError",
    "ThreadNotFoundError",
    "TokenizerDataError",
    "TornLineWarning",
    "UnknownContextWindowError",
    "WorkflowStep",
    "acompact_messages",
    "arecord_tool_errors",
    "compact_messages",
    "compaction_history",
    "compose_system_prompt",
    "context_pipeline",
    "context_tools",
    "copy_thread_between",
    "count_tokens",
    "is_llm_error",
    "is_recoverable_error",
    "prepare_compaction",
    "read_tool_result",
    "record_tool_errors",
    "search_history",
]

if TYPE_CHECKING:
    from langgraph_ctx.context.active_context import ActiveContext
    from langgraph_ctx.context.archive import ContextArchive
    from langgraph_ctx.context.budget import ContextBudget, ContextUsage
    from langgraph_ctx.context.compaction import (
        CompactionError,
        CompactionRecord,
        CompactionStrategy,
        HybridSummary,
        KeyMessageExtraction,
        LLMSummary,
        RelevanceSelection,
        RunningSummary,
        SlidingWindow,
        acompact_messages,
        compact_messages,
        prepare_compaction,
        read_tool_result,
        search_history,
    )
    from langgraph_ctx.context.llm_error import LLMError, is_llm_error, is_recoverable_error
    from langgraph_ctx.context.notebook import ErrorRecord
    from langgraph_ctx.context.prompt import (
        PromptParts,
        RunContext,
        WorkflowStep,
        compose_system_prompt,
    )
    from langgraph_ctx.context.tokens import MessageTokenCounter, count_tokens
    from langgraph_ctx.errors import (
        AbandonedLockError,
        CheckpointNotFoundError,
        CheckpointRefError,
        ClassUnavailableError,
        ContextArchiveError,
        CorruptLineWarning,
        CorruptLogError,
        DroppedWritesWarning,
        LangGraphCtxError,
        LockTimeoutError,
        LogChangedError,
        LogWriteError,
        LogWriteWarning,
        MissingGraphStateError,
        ModelTimeoutError,
        NotARegularFileError,
        PersonaDroppedWarning,
        PlotUnavailableError,
        PromptPartError,
        SqliteSourceError,
        StateKeyConflictError,
        StateShapeError,
        StorageConfigError,
        StorageUnavailableError,
        SymlinkRefusedError,
        ThreadExistsError,
        ThreadNotFoundError,
        TokenizerDataError,
        TornLineWarning,
        UnknownContextWindowError,
    )
    from langgraph_ctx.nodes.budget import BudgetAgentState, BudgetNode, BudgetState
    from langgraph_ctx.nodes.compaction import CompactionNode, CompactionState
    from langgraph_ctx.nodes.errors import (
        ModelCallPolicy,
        ModelNode,
        arecord_tool_errors,
        record_tool_errors,
    )
    from langgraph_ctx.nodes.middleware import ContextMiddleware
    from langgraph_ctx.nodes.pipeline import ContextPipeline, context_pipeline
    from langgraph_ctx.nodes.prompt import SystemPromptNode
    from langgraph_ctx.nodes.state import (
        ContextAgentState,
        ContextKeys,
        ContextState,
        StateKeys,
        compaction_history,
    )
    from langgraph_ctx.saver.jsonl import JsonlSaver
    from langgraph_ctx.saver.log import CheckpointInfo
    from langgraph_ctx.saver.redis import RedisLogSaver
    from langgraph_ctx.storage.transfer import copy_thread_between
    from langgraph_ctx.tools.context import ContextTools, context_tools


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'langgraph_ctx' has no attribute {name!r}")
    try:
        imported = import_module(module)
    except ModuleNotFoundError as exc:
        package = (exc.name or "").partition(".")[0]
        if package not in _EXTRAS:
            raise
        from langgraph_ctx.errors import MissingExtraError

        raise MissingExtraError(name, _EXTRAS[package], package) from exc
    value = getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
