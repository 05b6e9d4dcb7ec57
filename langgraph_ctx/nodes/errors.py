"""Model calls that fail into the conversation, so "continue" can resume from them.

```python
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_ctx.nodes.errors import ModelNode, arecord_tool_errors, record_tool_errors

builder.add_node("model", ModelNode(llm, tools=tools, timeout=60, chunk_timeout=20))
builder.add_node("tools", ToolNode(tools, wrap_tool_call=record_tool_errors,
                                   awrap_tool_call=arecord_tool_errors))
```

`ModelNode` calls the model with what the context pipeline prepared (`llm_input_messages`,
else `messages`) and appends its reply. When the call raises or runs out of time it
appends instead an assistant message with the text streamed so far and an `LLM_ERROR`
block (`langgraph_ctx.context.llm_error`), and records the failure in `error_notebook`,
when "continue" can fix the failure: a timeout, a connection error, a rate limit or server
error after the retries, a stream cut mid-way. Anything else raises, as it would without
the node: a failure no retry fixes (a wrong key, model or request: 400/401/403/404/422,
`AuthenticationError`, ...), a bug in the app's code (`TypeError`, ...), an exception of
the app's own. The app must see those, its end users must not (`is_recoverable_error`;
`recoverable_errors=` changes the split).
The run ends normally; the message is part of the history, so the next request sends it
back and a user's "continue" resumes from it.

What LangGraph users can rely on:

- **Streaming.** The model is invoked as usual; with `stream_mode="messages"` its tokens
  reach the stream as they come. After a failure the stream gets the LLM_ERROR message
  with the same id as the streamed chunks, so a UI can replace the partial bubble.
  Partial text is captured through a callback handler that asks the model to stream
  (models without streaming support have no partial text).
- **Timeouts.** `timeout` bounds one attempt, `chunk_timeout` the wait for the first
  token and between tokens. Async calls are cancelled. A sync call cannot be killed: it
  is abandoned (a daemon thread) and stops at its next token.
- **Retries.** `max_retries` retries failures that happened before any output was
  streamed, with exponential back-off from `retry_delay`; once text has been streamed a
  retry would show it twice, so the failure is recorded instead. A LangGraph
  `RetryPolicy` on the node does not see model failures (they become messages); list in
  `raise_on` the exception types that should propagate to it. Interrupts
  (`GraphBubbleUp`) and cancellation always propagate.
- **Sync and async** run the same steps (`ModelNode.steps`, a generator of calls).

The limits, the retries and the capture of partial output are the model-call driver's
(`langgraph_ctx.context.model_call`), shared with compaction's summarizer; this module
turns its outcome into a reply or an LLM_ERROR message.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any
from uuid import uuid4

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.llm_error import is_recoverable_error, llm_error_message
from langgraph_ctx.context.model_call import ModelCallPolicy, Step, drive_async, drive_sync
from langgraph_ctx.context.notebook import ErrorRecord, llm_error_record, tool_error_record
from langgraph_ctx.context.prompt import read_run_context
from langgraph_ctx.errors import PromptPartError, StateShapeError
from langgraph_ctx.nodes.state import (
    StateKeys,
    graph_step,
    run_labels,
    stands_for,
    state_messages,
    state_value,
)

__all__ = [
    "ModelCallPolicy",  # defined in langgraph_ctx.context.model_call, exported here too
    "ModelNode",
    "arecord_tool_errors",
    "record_tool_errors",
    "reply_tags",
    "tag_reply",
]


def reply_tags(state: Any, default_mode: str | None = None) -> dict[str, Any]:
    """`{"mode", "run_id", "step_id"}` of the state (set values only), to tag replies with.

    Replies carry them in `response_metadata["langgraph_ctx"]`, so the messages of
    several runs in one conversation can be told apart (no mode-switch events needed).
    """
    tags = run_labels(state, default_mode)
    try:
        run = read_run_context(state_value(state, "run_context"))
    except PromptPartError:
        run = None
    active = tags.get("mode") == "run" and run is not None and run.status == "active"
    if active and run is not None and run.step is not None:
        tags["step_id"] = run.step.id
    return {k: v for k, v in tags.items() if v is not None}


def tag_reply(message: AIMessage, tags: Mapping[str, Any]) -> AIMessage:
    """`message` with `tags` in `response_metadata["langgraph_ctx"]` (a copy)."""
    if not tags:
        return message
    metadata = {**(message.response_metadata or {}), "langgraph_ctx": dict(tags)}
    return message.model_copy(update={"response_metadata": metadata})


class ModelNode(Runnable[Any, dict[str, Any]]):
    """Calls the chat model and appends its reply; a failure becomes an LLM_ERROR message.

    Reads `llm_input_messages` (what the context pipeline prepared) when it is current,
    else `messages`. See the module docstring for streaming, timeouts and retries.

    Args:
        model: the chat model (or any runnable taking messages and returning a message).
        tools: tools to bind to the model (`model.bind_tools(tools)`); or bind them yourself.
        timeout / chunk_timeout / max_retries / retry_delay / raise_on: `ModelCallPolicy`.
        recoverable_errors: `error -> bool`: True keeps a failure as an LLM_ERROR message,
            False raises it. Default `is_recoverable_error`; `lambda e: True` keeps all.
        mode: the mode replies are tagged with when the state has none.
        keys: the pipeline's key names in this state (`StateKeys`, or a dict such as
            `{"mode": "ctx_mode"}`): give the same as to `context_pipeline(keys=...)`.

    Example:
        ```python
        builder.add_node("model", ModelNode(llm, tools=[search], timeout=60))
        graph.invoke({"messages": [("user", "hi")]}, config)["messages"][-1]
        # the reply, or: AIMessage("<partial text>\\n\\nLLM_ERROR\\n- kind: timeout ...")
        ```
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        *,
        tools: Sequence[Any] | None = None,
        timeout: float | None = None,
        chunk_timeout: float | None = None,
        max_retries: int = 0,
        retry_delay: float = 1.0,
        raise_on: tuple[type[BaseException], ...] = (),
        recoverable_errors: Callable[[BaseException], bool] | None = None,
        mode: str | None = None,
        keys: StateKeys | Mapping[str, str] | None = None,
    ) -> None:
        self.model: Runnable[Any, Any] = (
            model.bind_tools(list(tools)) if tools else model  # type: ignore[attr-defined]
        )
        self.policy = ModelCallPolicy(
            timeout=timeout,
            chunk_timeout=chunk_timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            raise_on=tuple(raise_on),
            recoverable=recoverable_errors or is_recoverable_error,
        )
        self.mode = mode
        self.keys = StateKeys.of(keys)
        self._warned = False

    def input_messages(self, state: Any) -> list[BaseMessage]:
        """What the model is sent: `llm_input_messages` if it is current, else `messages`."""
        messages = convert_to_messages(state_messages(state))
        prepared = state_value(state, VIEW_KEY)
        if not prepared:
            return messages
        prepared = convert_to_messages(prepared)
        # The newest message the view ends with: the pipeline sends the app's system
        # messages in its one system message first, so a trailing one is not its end.
        newest = next((m for m in reversed(messages) if m.type != "system"), None)
        if newest is not None and not stands_for(prepared[-1], newest):
            # A view that does not end with the newest message is from an earlier step.
            if not self._warned:
                self._warned = True
                warnings.warn(
                    "ModelNode: llm_input_messages does not end with the newest message, "
                    "so it is from an earlier step; sending `messages` instead. Route every "
                    "edge into the model node through the context pipeline.",
                    stacklevel=3,
                )
            return messages
        return prepared

    # -- the one implementation -----------------------------------------------------
    def steps(
        self, state: Any, config: RunnableConfig | None = None
    ) -> Generator[Step, Any, dict[str, Any]]:
        """The node's work as a generator of step requests (see `drive_sync`)."""
        state = self.keys.read(state)
        messages = self.input_messages(state)
        if not messages:  # every provider refuses it (a 400); say why here instead
            raise StateShapeError(state, "messages", empty=True)
        outcome, attempts = yield from self.policy.attempts(
            lambda: self.model.invoke(messages, config),
            lambda: self.model.ainvoke(messages, config),
        )
        tags = reply_tags(state, self.mode)
        if outcome.error is None:
            reply = outcome.result
            if isinstance(reply, AIMessage):
                reply = tag_reply(reply, tags)
            return {"messages": [reply]}  # (messages is never renamed)
        message = llm_error_message(
            outcome.error,
            partial=outcome.partial,
            attempts=attempts,
            response_metadata={"langgraph_ctx": tags} if tags else None,
        )
        record = llm_error_record(
            message, step=graph_step(config), mode=tags.get("mode"), run_id=tags.get("run_id")
        )
        update = {"messages": [message], "error_notebook": [record] if record else []}
        return self.keys.write(update)

    # -- Runnable doors: sync and async share `steps` --------------------------------------
    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return drive_sync(self.steps(input, config))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await drive_async(self.steps(input, config))

    def __repr__(self) -> str:
        return f"ModelNode({self.model!r}, {self.policy})"


# ---------------------------------------------------------------------------
# Tool calls
# ---------------------------------------------------------------------------


def _tool_failed(
    request: Any, error: Exception, default_mode: str | None, keys: StateKeys
) -> Command[Any]:
    call = request.tool_call
    message = ToolMessage(
        id=str(uuid4()),
        content=f"Error: {type(error).__name__}: {error}\nFix the arguments or take another route.",
        tool_call_id=call["id"],
        name=call.get("name"),
        status="error",
    )
    record = tool_error_record(message, error=error, **_tool_context(request, default_mode, keys))
    return Command(update=keys.write({"messages": [message], "error_notebook": [record]}))


def _tool_checked(request: Any, result: Any, default_mode: str | None, keys: StateKeys) -> Any:
    if isinstance(result, ToolMessage) and result.status == "error":
        context = _tool_context(request, default_mode, keys)
        record: ErrorRecord = tool_error_record(result, **context)
        return Command(update=keys.write({"messages": [result], "error_notebook": [record]}))
    return result


def _tool_context(request: Any, default_mode: str | None, keys: StateKeys) -> dict[str, Any]:
    state = getattr(request, "state", None)
    if state is None:
        return {"step": graph_step(None), "mode": default_mode}
    return {"step": graph_step(None), **run_labels(keys.read(state), default_mode)}


def record_tool_errors(
    request: Any,
    execute: Callable[[Any], Any],
    *,
    default_mode: str | None = None,
    catch: bool = True,
    keys: StateKeys | None = None,
) -> Any:
    """`ToolNode(wrap_tool_call=...)`: a failing tool call becomes an error result, recorded.

    A tool that raises gives the model a `ToolMessage(status="error")` naming the error
    (instead of failing the run), and the failure goes to `error_notebook`, as does an
    error result `ToolNode` produced itself. Interrupts propagate. `default_mode` names
    the mode in records when the state has none. `catch=False` records error results
    only and lets exceptions propagate (the tool node's own handling decides);
    `keys`: the pipeline's key names in this state.

    Example:
        ```python
        ToolNode(tools, wrap_tool_call=record_tool_errors, awrap_tool_call=arecord_tool_errors)
        ```
    """
    keys = keys or StateKeys()
    try:
        result = execute(request)
    except GraphBubbleUp:
        raise
    except Exception as err:  # the tool failed: the model gets to see it
        if not catch:
            raise
        return _tool_failed(request, err, default_mode, keys)
    return _tool_checked(request, result, default_mode, keys)


async def arecord_tool_errors(
    request: Any,
    execute: Callable[[Any], Awaitable[Any]],
    *,
    default_mode: str | None = None,
    catch: bool = True,
    keys: StateKeys | None = None,
) -> Any:
    """Async `record_tool_errors` (`ToolNode(awrap_tool_call=...)`)."""
    keys = keys or StateKeys()
    try:
        result = await execute(request)
    except GraphBubbleUp:
        raise
    except Exception as err:  # the tool failed: the model gets to see it
        if not catch:
            raise
        return _tool_failed(request, err, default_mode, keys)
    return _tool_checked(request, result, default_mode, keys)
