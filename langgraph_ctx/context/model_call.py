"""One driver for model calls: time limits, retries with back-off, partial output.

Both callers of a chat model use it: the model node (`langgraph_ctx.nodes.errors.ModelNode`
and the agent middleware) and the summarizer of compaction
(`langgraph_ctx.context.compaction.summarizer`). Each writes its work as a generator of
step requests (`Invoke`: call the model; `Wait`: back off before a retry), usually through
`ModelCallPolicy.attempts`, and one of two drivers answers them:

```python
from langgraph_ctx.context.model_call import ModelCallPolicy, drive_sync, drive_async

policy = ModelCallPolicy(timeout=60, max_retries=2, retry_delay=0.5)
outcome, attempts = drive_sync(policy.attempts(call=lambda: llm.invoke(messages)))
outcome, attempts = await drive_async(policy.attempts(acall=lambda: llm.ainvoke(messages)))
outcome.result, outcome.error, outcome.partial   # the reply, or what failed and what streamed
```

`drive_sync` sleeps and calls in the thread (or a worker thread under a time limit);
`drive_async` awaits. That is the only difference, so sync and async cannot drift apart.
The retry rule lives in `ModelCallPolicy.attempts` alone: retry a failure (or a reply the
caller's `check` rejects) `max_retries` times, waiting `retry_delay * 2**n`, unless output
was already streamed (a retry would show it twice); interrupts (`GraphBubbleUp`), the
`raise_on` types and the failures `recoverable` rejects (before any output) propagate.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tracers.context import register_configure_hook
from langgraph.errors import GraphBubbleUp

from langgraph_ctx.errors import ModelCallAbandoned, ModelTimeoutError

__all__ = [
    "Attempt",
    "Invoke",
    "ModelCallPolicy",
    "Step",
    "Wait",
    "drive_async",
    "drive_sync",
    "not_new_to_streams",
]

T = TypeVar("T")

# ---------------------------------------------------------------------------
# Capturing what a model streamed before it failed
# ---------------------------------------------------------------------------


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
        self.ended: set[UUID] = set()
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
        self, token: Any, *, chunk: Any = None, run_id: UUID, **kwargs: Any
    ) -> None:
        if self.abandoned:
            raise ModelCallAbandoned("the call ran past its time limit; stopped here")
        self.last_output = time.monotonic()
        if isinstance(chunk, ChatGenerationChunk) and isinstance(chunk.message, AIMessageChunk):
            self.chunks.setdefault(run_id, []).append(chunk.message)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.failed = run_id

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.ended.add(run_id)

    def cut(self) -> bool:
        """Whether the newest run stopped before its end (it failed, or never reached it):
        with a fallback or a retry that finished the reply after a cut one, an error
        raised after it (a later middleware's) is no cut stream."""
        newest = self.order[-1] if self.order else None
        return newest is not None and newest not in self.ended

    def partial(self) -> AIMessageChunk | None:
        """The merged chunks of the failed run (else of the newest run), or None."""
        newest = self.order[-1] if self.order else None
        run = self.failed if self.failed in self.chunks else newest
        chunks = self.chunks.get(run) if run is not None else None
        if not chunks:
            return None
        return add_ai_message_chunks(chunks[0], *chunks[1:]) if len(chunks) > 1 else chunks[0]


def _message_streams() -> list[Any]:
    """LangGraph's ``stream_mode="messages"`` handlers of the graph node this runs in ([]
    outside a graph, or when the app does not stream messages)."""
    try:
        from langgraph.config import get_config
        from langgraph.pregel._messages import StreamMessagesHandler

        callbacks = get_config().get("callbacks")
    except (ImportError, RuntimeError):  # outside a graph; another LangGraph layout
        return []
    if isinstance(callbacks, BaseCallbackManager):
        handlers = [*callbacks.handlers, *callbacks.inheritable_handlers]
    else:
        handlers = list(callbacks or [])
    found = {id(h): h for h in handlers if isinstance(h, StreamMessagesHandler)}
    return list(found.values())


def _end_streams(capture: PartialOutputCapture) -> None:
    """Tell LangGraph's ``stream_mode="messages"`` handlers that the model runs a sync call
    abandons are over (as if they failed), so a token the abandoned thread still gets from
    the provider is not streamed after the ``LLM_ERROR`` reply: LangChain calls that
    handler before the capture, whose error stops the run at that token."""
    running = [r for r in capture.order if r not in capture.ended and r != capture.failed]
    ended = ModelCallAbandoned("the call ran past its time limit")
    for handler in _message_streams():
        for run_id in running:
            handler.on_llm_error(ended, run_id=run_id)


def not_new_to_streams(messages: Iterable[Any]) -> None:
    """Tell LangGraph's ``stream_mode="messages"`` handlers of the running node that
    ``messages`` are not new, so that a node update holding them does not send them to
    the app (LangGraph sends every message of a node's update whose id it has not seen).

    For the state the pipeline keeps for itself in the `create_agent` model node:
    compaction's view, whose stand-ins (a tool result's preview ``<id>~preview``, a
    shortened message ``<id>~short``) and summary would reach the app's stream as
    messages of the model. Give only those: the handlers' record is run-wide, and a
    message of the conversation marked so would not reach a parent graph's stream.
    Outside a graph, or without such a stream, nothing happens.
    """
    streams = _message_streams()
    if not streams:
        return
    ids = [m.id for m in messages if getattr(m, "id", None) is not None]
    for handler in streams:
        seen = getattr(handler, "seen", None)
        if isinstance(seen, set):
            seen.update(ids)


class _QuietAbandon(logging.Filter):
    """Drop LangChain's warning for the `ModelCallAbandoned` our capture raises to stop a
    call past its time limit: the time-out was handled (the reply kept what came), and
    LangChain logs every callback error before raising it, this expected one included."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (
            isinstance(args, tuple)
            and len(args) == 3
            and args[0] == PartialOutputCapture.__name__
            and str(args[2]).startswith(ModelCallAbandoned.__name__)
        )


logging.getLogger("langchain_core.callbacks.manager").addFilter(_QuietAbandon())

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
    cut: bool = False
    """Whether the newest model run was cut (it failed or never ended,
    `PartialOutputCapture.cut`): an error raised after the model finished its reply (a
    later middleware's, the agent's structured-output parsing) is not a cut stream."""
    rejected: str | None = None
    """Why the caller's `check` rejected `result` (a reply that counts as a failure)."""

    @property
    def failed(self) -> bool:
        return self.error is not None or self.rejected is not None


def _failed(error: BaseException, capture: PartialOutputCapture) -> Attempt:
    """A failed attempt, with what the model streamed before and whether it was cut."""
    return Attempt(error=error, partial=capture.partial(), cut=capture.cut())


@dataclass(frozen=True)
class Invoke:
    """Step request: call the model (sync or async door) under `policy`'s limits."""

    call: Callable[[], Any] | None
    acall: Callable[[], Awaitable[Any]] | None
    policy: ModelCallPolicy


@dataclass(frozen=True)
class Wait:
    """Step request: wait before retrying."""

    seconds: float


Step = Invoke | Wait
"""What a model-calling generator yields; `drive_sync` / `drive_async` answer it."""


@dataclass(frozen=True)
class ModelCallPolicy:
    """Time limits and retries of a model call (the model node, the middleware, summaries).

    Args:
        timeout: seconds one attempt may take, from the request to the last token.
        chunk_timeout: seconds to wait for the first token, and between tokens.
        max_retries: retries of a failure that happened before any output was streamed.
        retry_delay: seconds before the first retry; doubles for each further one.
        raise_on: exception types that propagate instead of becoming an LLM_ERROR message.
        recoverable: which failures the caller keeps (as an LLM_ERROR message, or a
            fallback): `recoverable(error)` False raises the error at once, without
            retries. None keeps every failure. Failures after streamed output are always
            kept (the partial reply is worth keeping; "continue" resumes from it). The
            model node and the middleware use `is_recoverable_error`
            (`langgraph_ctx.context.llm_error`): wrong keys, models and requests raise.
        partial_output: capture what the model streams before it fails (this makes
            LangChain stream the call); summaries, which keep nothing partial, turn it off.
    """

    timeout: float | None = None
    chunk_timeout: float | None = None
    max_retries: int = 0
    retry_delay: float = 1.0
    raise_on: tuple[type[BaseException], ...] = field(default=())
    partial_output: bool = True
    recoverable: Callable[[BaseException], bool] | None = None

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
        *,
        check: Callable[[Any], str | None] | None = None,
    ) -> Generator[Step, Any, tuple[Attempt, int]]:
        """Attempt the call, retrying as the policy says; returns the last outcome and count.

        `call` is used by `drive_sync`, `acall` by `drive_async`. `check(result)` returns
        why a reply is unusable (it is then retried like a failure), or None.
        """
        count = 0
        while True:
            count += 1
            outcome: Attempt = yield Invoke(call, acall, self)
            error = outcome.error
            if error is None and check is not None:
                outcome.rejected = check(outcome.result)
            if not outcome.failed:
                return outcome, count
            streamed = outcome.partial is not None and bool(
                outcome.partial.content or outcome.partial.tool_call_chunks
            )
            if isinstance(error, GraphBubbleUp) or (
                error is not None and self.raise_on and isinstance(error, self.raise_on)
            ):
                raise error
            recoverable = self.recoverable
            cut = streamed and outcome.cut  # a stream cut mid-way: kept, whatever the error
            if error is not None and recoverable and not cut and not recoverable(error):
                raise error  # no retry and no "continue" fixes it: the app must see it
            if count > self.max_retries or streamed:
                return outcome, count
            yield Wait(self.retry_delay * 2 ** (count - 1))

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
        token = _CAPTURE.set(capture if self.partial_output else None)
        try:
            if self.timeout is None and self.chunk_timeout is None:
                try:
                    return Attempt(result=call())
                except Exception as err:  # the model failed: keep what it streamed
                    return _failed(err, capture)
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
                    _end_streams(capture)
                    return _failed(expired, capture)
            if "error" in box:
                error = box["error"]
                if not isinstance(error, Exception):
                    raise error
                return _failed(error, capture)
            return Attempt(result=box["result"])
        finally:
            _CAPTURE.reset(token)

    async def call_async(self, acall: Callable[[], Awaitable[Any]]) -> Attempt:
        """Run `acall` once under the limits, capturing what it streams."""
        capture = PartialOutputCapture()
        token = _CAPTURE.set(capture if self.partial_output else None)
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
                        return _failed(expired, capture)
            except BaseException:
                task.cancel()  # we are cancelled ourselves: do not leave the call running
                raise
            error = task.exception()
            if error is None:
                return Attempt(result=task.result())
            if not isinstance(error, Exception):
                raise error
            return _failed(error, capture)
        finally:
            _CAPTURE.reset(token)


def drive_sync(steps: Generator[Step, Any, T]) -> T:
    """Answer the step requests of `steps` synchronously (sleep, call in the thread)."""
    try:
        request = next(steps)
        while True:
            if isinstance(request, Wait):
                time.sleep(request.seconds)
                reply: Any = None
            else:
                if request.call is None:
                    raise RuntimeError("this call has no sync door; run it with drive_async")
                reply = request.policy.call_sync(request.call)
            request = steps.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def drive_async(steps: Generator[Step, Any, T]) -> T:
    """Answer the step requests of `steps` asynchronously (asyncio sleep, a task)."""
    try:
        request = next(steps)
        while True:
            if isinstance(request, Wait):
                await asyncio.sleep(request.seconds)
                reply: Any = None
            else:
                if request.acall is None:
                    raise RuntimeError("this call has no async door; run it with drive_sync")
                reply = await request.policy.call_async(request.acall)
            request = steps.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
