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
block (`langgraph_ctx.context.llm_error`), and records the failure in `error_notebook`.
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
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID, uuid4

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tracers.context import register_configure_hook
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from langgraph_ctx.context.llm_error import llm_error_message
from langgraph_ctx.context.notebook import ErrorRecord, llm_error_record, tool_error_record
from langgraph_ctx.context.prompt import read_run_context
from langgraph_ctx.errors import ModelTimeoutError, PromptPartError
from langgraph_ctx.nodes.pipeline import graph_step, run_labels, stands_for

__all__ = [
    "Attempt",
    "ModelCallPolicy",
    "ModelNode",
    "arecord_tool_errors",
    "drive_async",
    "drive_sync",
    "record_tool_errors",
    "reply_tags",
    "tag_reply",
]

T = TypeVar("T")

# ---------------------------------------------------------------------------
# Capturing what a model streamed before it failed
# ---------------------------------------------------------------------------


class ModelCallAbandoned(Exception):
    """Raised inside an abandoned (timed-out) sync call at its next token, to stop it
    (LangChain logs it as an error of the `PartialOutputCapture` callback)."""


class PartialOutputCapture(BaseCallbackHandler):
    """Collects the chunks each chat-model run streams, to keep them if the run fails.

    Having `tap_output_iter` / `tap_output_aiter` makes it a streaming handler to
    LangChain (the protocol LangGraph's `stream_mode="messages"` handler uses), so
    `invoke` streams from the provider and the tokens arrive here.
    """

    raise_error = True  # so that raising ModelCallAbandoned reaches (and stops) the model

    def __init__(self) -> None:
        self.chunks: dict[UUID, list[AIMessageChunk]] = {}
        self.order: list[UUID] = []
        self.failed: UUID | None = None
        self.last_output = time.monotonic()
        self.abandoned = False

    def tap_output_aiter(self, run_id: UUID, output: Any) -> Any:
        return output

    def tap_output_iter(self, run_id: UUID, output: Any) -> Any:
        return output

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.chunks.setdefault(run_id, [])
        self.order.append(run_id)

    def on_llm_new_token(
        self, token: str, *, chunk: Any = None, run_id: UUID, **kwargs: Any
    ) -> None:
        if self.abandoned:
            raise ModelCallAbandoned("the call ran past its time limit; stopped here")
        self.last_output = time.monotonic()
        if isinstance(chunk, ChatGenerationChunk) and isinstance(chunk.message, AIMessageChunk):
            self.chunks.setdefault(run_id, []).append(chunk.message)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.failed = run_id

    def partial(self) -> AIMessageChunk | None:
        """The merged chunks of the failed run (else of the newest run), or None."""
        run = self.failed if self.failed in self.chunks else (self.order or [None])[-1]
        chunks = self.chunks.get(run) if run is not None else None
        if not chunks:
            return None
        return add_ai_message_chunks(chunks[0], *chunks[1:]) if len(chunks) > 1 else chunks[0]


_CAPTURE: contextvars.ContextVar[PartialOutputCapture | None] = contextvars.ContextVar(
    "langgraph_ctx_partial_capture", default=None
)
# Every callback manager configured while _CAPTURE is set includes its handler, so the
# model call made deep inside a handler (create_agent's) is captured too.
register_configure_hook(_CAPTURE, inheritable=True)


# ---------------------------------------------------------------------------
# One attempt, and the policy around attempts
# ---------------------------------------------------------------------------


@dataclass
class Attempt:
    """The outcome of one model call: its result, or its error and the partial output."""

    result: Any = None
    error: BaseException | None = None
    partial: AIMessageChunk | None = None


@dataclass(frozen=True)
class _Invoke:
    """Step request: call the model (sync or async door) under the policy's limits."""

    call: Callable[[], Any] | None
    acall: Callable[[], Awaitable[Any]] | None


@dataclass(frozen=True)
class _Wait:
    """Step request: wait before retrying."""

    seconds: float


_Step = _Invoke | _Wait


@dataclass(frozen=True)
class ModelCallPolicy:
    """Time limits and retries of a model call (shared by `ModelNode` and the middleware).

    Args:
        timeout: seconds one attempt may take, from the request to the last token.
        chunk_timeout: seconds to wait for the first token, and between tokens.
        max_retries: retries of a failure that happened before any output was streamed.
        retry_delay: seconds before the first retry; doubles for each further one.
        raise_on: exception types that propagate instead of becoming an LLM_ERROR message.
    """

    timeout: float | None = None
    chunk_timeout: float | None = None
    max_retries: int = 0
    retry_delay: float = 1.0
    raise_on: tuple[type[BaseException], ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("timeout", "chunk_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.max_retries < 0 or self.retry_delay < 0:
            raise ValueError("max_retries and retry_delay must not be negative")

    def attempts(
        self,
        call: Callable[[], Any] | None = None,
        acall: Callable[[], Awaitable[Any]] | None = None,
    ) -> Generator[_Step, Any, tuple[Attempt, int]]:
        """Attempt the call, retrying as the policy says; returns the last outcome and count.

        `call` is used by `drive_sync`, `acall` by `drive_async`.
        """
        count = 0
        while True:
            count += 1
            outcome: Attempt = yield _Invoke(call, acall)
            error = outcome.error
            if error is None:
                return outcome, count
            if isinstance(error, GraphBubbleUp) or (
                self.raise_on and isinstance(error, self.raise_on)
            ):
                raise error
            streamed = outcome.partial is not None and (
                outcome.partial.content or outcome.partial.tool_call_chunks
            )
            if count > self.max_retries or streamed:
                return outcome, count
            yield _Wait(self.retry_delay * 2 ** (count - 1))

    # -- limits -------------------------------------------------------------------
    def _expired(self, started: float, capture: PartialOutputCapture) -> ModelTimeoutError | None:
        now = time.monotonic()
        if self.timeout is not None and now - started >= self.timeout:
            return ModelTimeoutError(self.timeout, "complete reply")
        if self.chunk_timeout is not None and now - capture.last_output >= self.chunk_timeout:
            return ModelTimeoutError(self.chunk_timeout, "output")
        return None

    def _until_limit(self, started: float, capture: PartialOutputCapture) -> float | None:
        now = time.monotonic()
        waits = []
        if self.timeout is not None:
            waits.append(started + self.timeout - now)
        if self.chunk_timeout is not None:
            waits.append(capture.last_output + self.chunk_timeout - now)
        return max(0.001, min(waits)) if waits else None

    # -- the two doors: the same limits, sync (a thread) or async (a task) ---------------
    def call_sync(self, call: Callable[[], Any]) -> Attempt:
        """Run `call` once under the limits, capturing what it streams."""
        capture = PartialOutputCapture()
        token = _CAPTURE.set(capture)
        try:
            if self.timeout is None and self.chunk_timeout is None:
                try:
                    return Attempt(result=call())
                except Exception as err:  # the model failed: keep what it streamed
                    return Attempt(error=err, partial=capture.partial())
            box: dict[str, Any] = {}
            done = threading.Event()

            def work() -> None:
                try:
                    box["result"] = call()
                except BaseException as err:  # handed to the caller below
                    box["error"] = err
                finally:
                    done.set()

            context = contextvars.copy_context()  # LangGraph's config and the capture
            capture.last_output = started = time.monotonic()
            threading.Thread(
                target=context.run, args=(work,), daemon=True, name="langgraph-ctx-model-call"
            ).start()
            while not done.wait(self._until_limit(started, capture)):
                expired = self._expired(started, capture)
                if expired is not None:
                    capture.abandoned = True
                    return Attempt(error=expired, partial=capture.partial())
            if "error" in box:
                error = box["error"]
                if not isinstance(error, Exception):
                    raise error
                return Attempt(error=error, partial=capture.partial())
            return Attempt(result=box["result"])
        finally:
            _CAPTURE.reset(token)

    async def call_async(self, acall: Callable[[], Awaitable[Any]]) -> Attempt:
        """Run `acall` once under the limits, capturing what it streams."""
        capture = PartialOutputCapture()
        token = _CAPTURE.set(capture)
        try:
            capture.last_output = started = time.monotonic()
            task = asyncio.ensure_future(acall())  # the task copies the context: capture set
            try:
                while True:
                    done, _ = await asyncio.wait(
                        {task}, timeout=self._until_limit(started, capture)
                    )
                    if done:
                        break
                    expired = self._expired(started, capture)
                    if expired is not None:
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                        return Attempt(error=expired, partial=capture.partial())
            except BaseException:
                task.cancel()  # we are cancelled ourselves: do not leave the call running
                raise
            error = task.exception()
            if error is None:
                return Attempt(result=task.result())
            if not isinstance(error, Exception):
                raise error
            return Attempt(error=error, partial=capture.partial())
        finally:
            _CAPTURE.reset(token)


def drive_sync(steps: Generator[_Step, Any, T], policy: ModelCallPolicy) -> T:
    """Answer the step requests of `steps` synchronously (sleep, call in a thread)."""
    try:
        request = next(steps)
        while True:
            if isinstance(request, _Wait):
                time.sleep(request.seconds)
                reply: Any = None
            else:
                if request.call is None:
                    raise RuntimeError("this call has no sync door; run it with drive_async")
                reply = policy.call_sync(request.call)
            request = steps.send(reply)
    except StopIteration as stop:
        return stop.value


async def drive_async(steps: Generator[_Step, Any, T], policy: ModelCallPolicy) -> T:
    """Answer the step requests of `steps` asynchronously (asyncio sleep, a task)."""
    try:
        request = next(steps)
        while True:
            if isinstance(request, _Wait):
                await asyncio.sleep(request.seconds)
                reply: Any = None
            else:
                if request.acall is None:
                    raise RuntimeError("this call has no async door; run it with drive_sync")
                reply = await policy.call_async(request.acall)
            request = steps.send(reply)
    except StopIteration as stop:
        return stop.value


# ---------------------------------------------------------------------------
# The model node
# ---------------------------------------------------------------------------


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def reply_tags(state: Any, default_mode: str | None = None) -> dict[str, Any]:
    """`{"mode", "run_id", "step_id"}` of the state (set values only), to tag replies with.

    Replies carry them in `response_metadata["langgraph_ctx"]`, so the messages of
    several runs in one conversation can be told apart (no mode-switch events needed).
    """
    tags = run_labels(state, default_mode)
    try:
        run = read_run_context(_get(state, "run_context"))
    except PromptPartError:
        run = None
    if run is not None and run.step is not None and run.status == "active":
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
        mode: the mode replies are tagged with when the state has none.

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
        mode: str | None = None,
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
        )
        self.mode = mode
        self._warned = False

    def input_messages(self, state: Any) -> list[BaseMessage]:
        """What the model is sent: `llm_input_messages` if it is current, else `messages`."""
        messages = convert_to_messages(_get(state, "messages") or [])
        prepared = _get(state, "llm_input_messages")
        if not prepared:
            return messages
        prepared = convert_to_messages(prepared)
        if messages and not stands_for(prepared[-1], messages[-1]):
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
    ) -> Generator[_Step, Any, dict[str, Any]]:
        """The node's work as a generator of step requests (see `drive_sync`)."""
        messages = self.input_messages(state)
        outcome, attempts = yield from self.policy.attempts(
            lambda: self.model.invoke(messages, config),
            lambda: self.model.ainvoke(messages, config),
        )
        tags = reply_tags(state, self.mode)
        if outcome.error is None:
            reply = outcome.result
            if isinstance(reply, AIMessage):
                reply = tag_reply(reply, tags)
            return {"messages": [reply]}
        message = llm_error_message(
            outcome.error,
            partial=outcome.partial,
            attempts=attempts,
            response_metadata={"langgraph_ctx": tags} if tags else None,
        )
        record = llm_error_record(
            message, step=graph_step(config), mode=tags.get("mode"), run_id=tags.get("run_id")
        )
        return {"messages": [message], "error_notebook": [record] if record else []}

    # -- Runnable doors: sync and async share `steps` --------------------------------------
    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return drive_sync(self.steps(input, config), self.policy)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await drive_async(self.steps(input, config), self.policy)

    def __repr__(self) -> str:
        return f"ModelNode({self.model!r}, {self.policy})"


# ---------------------------------------------------------------------------
# Tool calls
# ---------------------------------------------------------------------------


def _tool_failed(request: Any, error: Exception, default_mode: str | None) -> Command[Any]:
    call = request.tool_call
    message = ToolMessage(
        id=str(uuid4()),
        content=f"Error: {type(error).__name__}: {error}\nFix the arguments or take another route.",
        tool_call_id=call["id"],
        name=call.get("name"),
        status="error",
    )
    record = tool_error_record(message, error=error, **_tool_context(request, default_mode))
    return Command(update={"messages": [message], "error_notebook": [record]})


def _tool_checked(request: Any, result: Any, default_mode: str | None) -> Any:
    if isinstance(result, ToolMessage) and result.status == "error":
        record: ErrorRecord = tool_error_record(result, **_tool_context(request, default_mode))
        return Command(update={"messages": [result], "error_notebook": [record]})
    return result


def _tool_context(request: Any, default_mode: str | None) -> dict[str, Any]:
    state = getattr(request, "state", None)
    labels = run_labels(state, default_mode) if state is not None else {"mode": default_mode}
    return {"step": graph_step(None), **labels}


def record_tool_errors(
    request: Any, execute: Callable[[Any], Any], *, default_mode: str | None = None
) -> Any:
    """`ToolNode(wrap_tool_call=...)`: a failing tool call becomes an error result, recorded.

    A tool that raises gives the model a `ToolMessage(status="error")` naming the error
    (instead of failing the run), and the failure goes to `error_notebook`, as does an
    error result `ToolNode` produced itself. Interrupts propagate. `default_mode` names
    the mode in records when the state has none.

    Example:
        ```python
        ToolNode(tools, wrap_tool_call=record_tool_errors, awrap_tool_call=arecord_tool_errors)
        ```
    """
    try:
        result = execute(request)
    except GraphBubbleUp:
        raise
    except Exception as err:  # the tool failed: the model gets to see it
        return _tool_failed(request, err, default_mode)
    return _tool_checked(request, result, default_mode)


async def arecord_tool_errors(
    request: Any, execute: Callable[[Any], Awaitable[Any]], *, default_mode: str | None = None
) -> Any:
    """Async `record_tool_errors` (`ToolNode(awrap_tool_call=...)`)."""
    try:
        result = await execute(request)
    except GraphBubbleUp:
        raise
    except Exception as err:  # the tool failed: the model gets to see it
        return _tool_failed(request, err, default_mode)
    return _tool_checked(request, result, default_mode)
