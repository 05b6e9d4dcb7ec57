"""`ContextMiddleware`: the context pipeline as LangChain agent middleware (`create_agent`).

Needs the `agents` extra: `pip install 'langgraph-ctx[agents]'` (langchain >= 1.2.9).

```python
from langchain.agents import create_agent
from langgraph_ctx import JsonlSaver, context_pipeline

pipeline = context_pipeline("personalized", model="gpt-4o", prompt=parts, mode="agent")
agent = create_agent(llm, tools, middleware=[pipeline.middleware(timeout=60)],
                     checkpointer=JsonlSaver("./chats"))
agent.invoke({"messages": [("user", "hi")], "mode": "run", "run_context": {...}}, config)
```

Around every model call (`wrap_model_call`) it runs the pipeline on the agent state, with
the tools the request really sends: the system prompt of the state's `mode` replaces the
request's system message (unless the pipeline was built with `prompt=False`), compaction
replaces the messages the model sees, and `context_usage`, the compaction record and the
running summary are written to the agent state (`ExtendedModelResponse`). The state's
`messages` keep the whole history.

The model call itself runs under a `ModelCallPolicy`: a failure or a timeout becomes an
assistant message with the partial reply and an `LLM_ERROR` block (the agent run ends
with it; "continue" resumes from it), recorded in `error_notebook`. With
`tool_errors=True` (default) a tool that raises gives the model an error result instead
of failing the run, and is recorded too.

Do not also pass `system_prompt=` to `create_agent` while the pipeline composes one: the
composed prompt replaces it.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        PrivateStateAttr,
    )
except ImportError as err:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ContextMiddleware needs LangChain's agent middleware (langchain >= 1.2.9): "
        "pip install 'langgraph-ctx[agents]'"
    ) from err

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from typing_extensions import NotRequired

from langgraph_ctx.context.active_context import ActiveContext, replace_active_context
from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.llm_error import llm_error_message
from langgraph_ctx.context.model_call import Attempt, ModelCallPolicy, drive_async, drive_sync
from langgraph_ctx.context.notebook import ErrorRecord, add_errors, llm_error_record
from langgraph_ctx.context.prompt import Mode, RunContext
from langgraph_ctx.nodes.errors import (
    arecord_tool_errors,
    record_tool_errors,
    reply_tags,
    tag_reply,
)
from langgraph_ctx.nodes.pipeline import ContextPipeline, PreparedRequest
from langgraph_ctx.nodes.state import cursor_has_view, graph_step

__all__ = ["ContextMiddleware", "ContextMiddlewareState"]


class ContextMiddlewareState(AgentState):
    """The agent state plus the keys of the context pipeline (merged by `create_agent`).

    The keys of `langgraph_ctx.nodes.state.ContextKeys` (a test checks they match), with
    the pipeline's private ones marked `PrivateStateAttr` (kept out of the agent's output).
    """

    mode: NotRequired[Mode]
    run_context: NotRequired[RunContext | dict[str, Any] | None]
    system_prompt: NotRequired[str | None]
    llm_input_messages: NotRequired[Annotated[list[AnyMessage], PrivateStateAttr]]
    context_usage: NotRequired[ContextUsage]
    running_summary: NotRequired[dict[str, Any] | None]
    compaction_log: NotRequired[Annotated[list[dict[str, Any]], operator.add]]
    compaction_cursor: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]
    error_notebook: NotRequired[Annotated[list[ErrorRecord], add_errors]]
    active_context: NotRequired[Annotated[ActiveContext | None, replace_active_context]]


def _current_config() -> RunnableConfig | None:
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return None


class ContextMiddleware(AgentMiddleware[ContextMiddlewareState]):  # type: ignore[type-var]
    """The context pipeline around each model call of a `create_agent` agent.

    Build it with `pipeline.middleware(...)`.

    Args:
        pipeline: the `ContextPipeline` to run before each model call.
        timeout / chunk_timeout / max_retries / retry_delay / raise_on: the model call's
            `ModelCallPolicy` (see `langgraph_ctx.context.model_call`).
        tool_errors: turn tools that raise into error results, recorded in the notebook.

    Example:
        ```python
        agent = create_agent(llm, tools, middleware=[pipeline.middleware(timeout=60)])
        ```
    """

    state_schema = ContextMiddlewareState

    def __init__(
        self,
        pipeline: ContextPipeline,
        *,
        timeout: float | None = None,
        chunk_timeout: float | None = None,
        max_retries: int = 0,
        retry_delay: float = 1.0,
        raise_on: tuple[type[BaseException], ...] = (),
        tool_errors: bool = True,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.policy = ModelCallPolicy(
            timeout=timeout,
            chunk_timeout=chunk_timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            raise_on=tuple(raise_on),
        )
        self.tool_errors = tool_errors

    # -- shared by both doors ---------------------------------------------------------
    def _state(self, request: ModelRequest) -> dict[str, Any]:
        state = {**dict(request.state or {}), "messages": list(request.messages)}
        if self.pipeline.prompt is None and request.system_message is not None:
            state["system_prompt"] = request.system_message.text  # the host's prompt, counted
        return state

    def _request(self, request: ModelRequest, prepared: PreparedRequest) -> ModelRequest:
        if prepared.system_prompt is None:
            return request.override(messages=prepared.conversation)
        head, *rest = prepared.messages
        return request.override(system_message=head, messages=rest)  # type: ignore[arg-type]

    def _response(
        self,
        state: dict[str, Any],
        prepared: PreparedRequest,
        outcome: Attempt,
        attempts: int,
    ) -> ExtendedModelResponse:
        update = dict(prepared.update)
        # The model gets its input through the request; the state keeps only compaction's
        # view, while one is active, for the next step. (Messages in a node's update also
        # reach `stream_mode="messages"`: keep that to what is needed.)
        update.pop("llm_input_messages", None)
        if cursor_has_view(update.get("compaction_cursor")):
            update["llm_input_messages"] = prepared.conversation
        tags = reply_tags(state, self._default_mode)
        if outcome.error is None:
            response = outcome.result
            if isinstance(response, AIMessage):
                response = ModelResponse(result=[response])
            if tags and isinstance(response, ModelResponse):
                response = ModelResponse(
                    result=[
                        tag_reply(m, tags) if isinstance(m, AIMessage) else m
                        for m in response.result
                    ],
                    structured_response=response.structured_response,
                )
        else:
            message = llm_error_message(
                outcome.error,
                partial=outcome.partial,
                attempts=attempts,
                response_metadata={"langgraph_ctx": tags} if tags else None,
            )
            record = llm_error_record(
                message,
                step=graph_step(None),
                mode=tags.get("mode"),
                run_id=tags.get("run_id"),
            )
            if record is not None:
                update["error_notebook"] = [*update.get("error_notebook", []), record]
            response = ModelResponse(result=[message])
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- the model call: sync and async doors over the same steps -----------------------
    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ExtendedModelResponse:
        state = self._state(request)
        prepared = drive_sync(self.pipeline.steps(state, _current_config(), tools=request.tools))
        ready = self._request(request, prepared)
        outcome, attempts = drive_sync(self.policy.attempts(call=lambda: handler(ready)))
        return self._response(state, prepared, outcome, attempts)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ExtendedModelResponse:
        state = self._state(request)
        await self.pipeline.load_tokenizer()
        prepared = await drive_async(
            self.pipeline.steps(state, _current_config(), tools=request.tools)
        )
        ready = self._request(request, prepared)
        outcome, attempts = await drive_async(self.policy.attempts(acall=lambda: handler(ready)))
        return self._response(state, prepared, outcome, attempts)

    # -- tool calls -------------------------------------------------------------------------
    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if not self.tool_errors:
            return handler(request)
        return record_tool_errors(request, handler, default_mode=self._default_mode)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if not self.tool_errors:
            return await handler(request)
        return await arecord_tool_errors(request, handler, default_mode=self._default_mode)

    @property
    def _default_mode(self) -> str | None:
        return self.pipeline.prompt.mode if self.pipeline.prompt is not None else None
