"""`ContextMiddleware`: the context pipeline as LangChain agent middleware (`create_agent`).

Needs the `agents` extra: `pip install 'langgraph-ctx[agents]'` (langchain >= 1.2.9).

```python
from langchain.agents import create_agent
from langgraph_ctx import JsonlSaver, context_pipeline

pipeline = context_pipeline("personalized", model="gpt-4o", prompt=parts, mode="agent")
agent = create_agent(llm, tools, middleware=[pipeline.middleware(timeout=60)],
                     checkpointer=JsonlSaver("./chats"))
run = {"workflow_id": "etl", "status": "active", "step": {"id": "load", "brief": "Load the CSV."}}
agent.invoke({"messages": [("user", "hi")], "mode": "run", "run_context": run}, config)
```

Around every model call (`wrap_model_call`) it runs the pipeline on the agent state, with
the tools the request really sends. The agent's own `system_prompt` stays: the request's
system message becomes that prompt, verbatim, followed by the mode's sections (one system
message; with `prompt=False`, the agent's prompt alone), counted in the budget.
Compaction replaces the messages the model sees, and `context_usage`, the compaction
record and the running summary are written to the agent state (`ExtendedModelResponse`).
The state's `messages` keep the whole history.

The model call itself runs under a `ModelCallPolicy`. A failure "continue" can fix (a
timeout, a connection error, a rate limit or server error after the retries, a stream cut
mid-way) becomes an assistant message with the partial reply and an `LLM_ERROR` block (the
agent run ends with it; "continue" resumes from it), recorded in `error_notebook`.
Anything else raises, as it would without the middleware: a failure no retry fixes (a
wrong key, model or request: 400/401/403/404/422), a bug, an exception of the app's own
(a later middleware's, a structured-output error the agent's `response_format` raises);
`recoverable_errors=` changes the split. LangChain's `ModelRetryMiddleware` or
`ModelFallbackMiddleware` listed before the pipeline (wrapping it) gets every failure
instead, as without the pipeline; listed after it, it retries or falls back first.

With compaction on, the middleware offers the model the pipeline's tools
(`read_tool_result` to open a preview, `search_history` to search what compaction moved
out of view): `create_agent` binds them and runs them in its tool node.

Tools keep the agent's own error handling (`tool_errors=False`, default): a tool that
raises fails the run as it would without the middleware, and error results the tool node
made are recorded in `error_notebook`. `tool_errors=True` turns tools that raise into
error results for the model, recorded too.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Annotated, Any, cast

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        PrivateStateAttr,
    )
    from langchain.agents.structured_output import (
        AutoStrategy,
        OutputToolBinding,
        ProviderStrategy,
        ToolStrategy,
    )
except ImportError as err:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ContextMiddleware needs LangChain's agent middleware (langchain >= 1.2.9): "
        "pip install 'langgraph-ctx[agents]'"
    ) from err

from langchain.agents import middleware as _lc_middleware

try:  # how create_agent picks a raw schema's strategy (private: guarded)
    from langchain.agents.factory import _supports_provider_strategy
except ImportError:  # pragma: no cover - a LangChain that moved it

    def _supports_provider_strategy(model: Any, tools: Any = None) -> bool:  # type: ignore[misc]
        return False  # counted as the tool create_agent would otherwise bind


from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command
from typing_extensions import NotRequired

from langgraph_ctx.context.active_context import ActiveContext, replace_active_context
from langgraph_ctx.context.budget import ContextUsage
from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.llm_error import is_recoverable_error, llm_error_message
from langgraph_ctx.context.model_call import (
    Attempt,
    ModelCallPolicy,
    drive_async,
    drive_sync,
    not_new_to_streams,
)
from langgraph_ctx.context.notebook import ErrorRecord, add_errors, llm_error_record
from langgraph_ctx.context.prompt import Mode, RunContext
from langgraph_ctx.nodes.errors import (
    arecord_tool_errors,
    record_tool_errors,
    reply_tags,
    tag_reply,
)
from langgraph_ctx.nodes.pipeline import ContextPipeline, PreparedRequest
from langgraph_ctx.nodes.state import StateKeys, add_compaction_records, cursor_has_view, graph_step

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
    compaction_log: NotRequired[Annotated[list[dict[str, Any]], add_compaction_records]]
    compaction_cursor: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]
    error_notebook: NotRequired[Annotated[list[ErrorRecord], add_errors]]
    active_context: NotRequired[Annotated[ActiveContext | None, replace_active_context]]


def _classes(*names: str) -> tuple[type, ...]:
    """LangChain's middleware classes of these names that the installed version has."""
    return tuple(c for n in names if isinstance(c := getattr(_lc_middleware, n, None), type))


# The host's middleware that handles a failed call: listed before the pipeline (wrapping
# it), it gets the failure, as it would without the pipeline (`ContextMiddleware._find_place`).
_MODEL_ERROR_HANDLERS = _classes("ModelRetryMiddleware", "ModelFallbackMiddleware")
_TOOL_ERROR_HANDLERS = _classes("ToolRetryMiddleware", "ToolErrorMiddleware")
_FACTORY = os.path.join("langchain", "agents", "factory.py")


def _current_config() -> RunnableConfig | None:
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return None


class ContextMiddleware(AgentMiddleware[ContextMiddlewareState]):
    """The context pipeline around each model call of a `create_agent` agent.

    Build it with `pipeline.middleware(...)`.

    Args:
        pipeline: the `ContextPipeline` to run before each model call.
        timeout / chunk_timeout / max_retries / retry_delay / raise_on: the model call's
            `ModelCallPolicy` (see `langgraph_ctx.context.model_call`).
        recoverable_errors: `error -> bool`: True keeps a failed model call as an
            LLM_ERROR reply, False raises it. Default `is_recoverable_error` (timeouts,
            connection errors, 408/409/425/429/5xx keep; other 4xx, the providers'
            `AuthenticationError`, `BadRequestError`, ... and every other exception raise).
            `lambda e: True`: keep all.
        tool_errors: False (default): the agent's own tool error handling; error results
            are recorded in the notebook. True: tools that raise become error results for
            the model (the run goes on), recorded.
        offer_tools: with compaction on, give the agent the pipeline's tools
            (`ContextPipeline.tools`: `read_tool_result`, `search_history`), so the model
            can open a preview and search what compaction moved out of view (default).
            Tools of the same name the agent has already stay as they are.

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
        recoverable_errors: Callable[[BaseException], bool] | None = None,
        tool_errors: bool = False,
        offer_tools: bool = True,
    ) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.policy = ModelCallPolicy(
            timeout=timeout,
            chunk_timeout=chunk_timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            raise_on=tuple(raise_on),
            recoverable=recoverable_errors or is_recoverable_error,
        )
        # Under a host's retry or fallback: every failure goes to it.
        self._passing_policy = dataclasses.replace(self.policy, raise_on=(Exception,))
        self._host_retries_models = self._host_retries_tools = False
        self._agents = 0  # agents built with this instance (`_placed`)
        self.tool_errors = tool_errors
        # create_agent gives the model, and runs in its tool node, the middleware's tools.
        self._tools = list(pipeline.tools) if offer_tools else []
        self.keys: StateKeys = pipeline.keys
        if self.keys.renamed:  # create_agent merges this schema into the agent's state
            # the renamed schema is built at runtime, so mypy sees a plain `type`
            self.state_schema = self.keys.schema(  # type: ignore[assignment]
                AgentState, source=ContextMiddlewareState, name="ContextMiddlewareStateRenamed"
            )

    @property
    def tools(self) -> Sequence[BaseTool]:
        """The pipeline's tools the agent gets (see ``offer_tools``).

        `create_agent` reads them while it builds the agent from its ``middleware`` list:
        the middleware then learns which of the host's listed before it (wrapping it)
        handle a failed call (`_find_place`).
        """
        self._find_place()
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[BaseTool]) -> None:
        self._tools = list(tools)

    def _find_place(self) -> None:
        """Note whether `create_agent`, if it is building an agent with this middleware
        now, lists a `ModelRetryMiddleware` / `ModelFallbackMiddleware` (a
        `ToolRetryMiddleware` / `ToolErrorMiddleware`) before it. Those wrap the
        pipeline: a failure goes to them, as it would without the pipeline, and the
        pipeline keeps none as a reply. (A middleware only sees its neighbours this way:
        an async call runs each in a task of its own. One instance in several agents:
        `_placed`.)"""
        frame: FrameType | None = sys._getframe(2)
        for _ in range(8):
            if frame is None:
                return
            code = frame.f_code
            if code.co_name == "create_agent" and code.co_filename.endswith(_FACTORY):
                listed = frame.f_locals.get("middleware")
                if isinstance(listed, (list, tuple)):
                    place = next((i for i, m in enumerate(listed) if m is self), None)
                    if place is not None:
                        self._placed(listed[:place])
                return
            frame = frame.f_back

    def _placed(self, outer: Sequence[Any]) -> None:
        """Take note of the middleware listed before this one in an agent being built."""
        models = any(isinstance(m, _MODEL_ERROR_HANDLERS) for m in outer)
        tools = any(isinstance(m, _TOOL_ERROR_HANDLERS) for m in outer)
        # (the tool middleware decides nothing unless the pipeline catches tool errors)
        differs = models != self._host_retries_models or (
            self.tool_errors and tools != self._host_retries_tools
        )
        if self._agents and differs:
            # pointed at the app's create_agent call, past this module and LangChain's
            level, frame = 1, cast("FrameType | None", sys._getframe(1))
            while frame is not None and (
                frame.f_code.co_filename == __file__ or frame.f_code.co_filename.endswith(_FACTORY)
            ):
                level, frame = level + 1, frame.f_back
            warnings.warn(
                "this ContextMiddleware is listed in agents with and without a host's retry, "
                "fallback or error middleware before it: failures now go to the host's "
                "middleware where there is one, and are raised where there is none (as "
                "without the pipeline). Give each agent its own pipeline.middleware() to keep "
                "them as LLM_ERROR replies where there is none",
                stacklevel=level + 1,
            )
        self._agents += 1
        # One instance serves every agent it is in: where one has the host's middleware
        # around it, failures go to that middleware in all (raised in the others).
        self._host_retries_models = self._host_retries_models or models
        self._host_retries_tools = self._host_retries_tools or tools

    # -- shared by both doors ---------------------------------------------------------
    def _state(self, request: ModelRequest) -> dict[str, Any]:
        """The agent state with the pipeline's own key names, and the request's messages."""
        state = self.keys.read(dict(request.state or {}))
        return {**state, "messages": list(request.messages)}

    def _steps(self, request: ModelRequest, state: dict[str, Any]) -> Any:
        host = request.system_message.text if request.system_message is not None else None
        return self.pipeline.canonical_steps(
            state, _current_config(), tools=_sent_tools(request), host_prompt=host or None
        )

    def _request(self, request: ModelRequest, prepared: PreparedRequest) -> ModelRequest:
        if prepared.system_prompt is None:
            return request.override(messages=prepared.conversation)  # type: ignore[arg-type]
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
        # view, while one is active, for the next step. LangGraph's `stream_mode="messages"`
        # would send the app its stand-ins and summary as new messages of the model node:
        # its handlers are told they are not new (`not_new_to_streams`). Only those: the
        # conversation's own messages stream as without the pipeline (a parent graph of
        # this agent has not seen them, and sends them as the agent node's output).
        update.pop(VIEW_KEY, None)
        if cursor_has_view(update.get("compaction_cursor")):
            update[VIEW_KEY] = prepared.conversation
            own = {m.id for m in state["messages"]}
            not_new_to_streams([m for m in prepared.conversation if m.id not in own])
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
        update = self.keys.write(update)
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    # -- the model call: sync and async doors over the same steps -----------------------
    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ExtendedModelResponse:
        state = self._state(request)
        prepared = drive_sync(self._steps(request, state))
        ready = self._request(request, prepared)
        policy = self._model_policy()
        try:
            outcome, attempts = drive_sync(policy.attempts(call=lambda: handler(ready)))
        except BaseException:
            self.pipeline.discard_step(_current_config())
            raise
        return self._response(state, prepared, outcome, attempts)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ExtendedModelResponse:
        state = self._state(request)
        await self.pipeline.load_tokenizer()
        prepared = await drive_async(self._steps(request, state))
        ready = self._request(request, prepared)
        policy = self._model_policy()
        try:
            outcome, attempts = await drive_async(policy.attempts(acall=lambda: handler(ready)))
        except BaseException:
            self.pipeline.discard_step(_current_config())
            raise
        return self._response(state, prepared, outcome, attempts)

    def _model_policy(self) -> ModelCallPolicy:
        """The policy of this call: under a host's `ModelRetryMiddleware` or
        `ModelFallbackMiddleware` (listed before the pipeline), one that raises every
        failure for it to retry or fall back on, as without the pipeline."""
        return self._passing_policy if self._host_retries_models else self.policy

    # -- tool calls -------------------------------------------------------------------------
    def _catch_tool_errors(self) -> bool:
        """``tool_errors``, unless a host's `ToolRetryMiddleware` or `ToolErrorMiddleware`
        (listed before the pipeline) is there to handle a tool's failure."""
        return self.tool_errors and not self._host_retries_tools

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return record_tool_errors(
            request,
            handler,
            default_mode=self._default_mode,
            catch=self._catch_tool_errors(),
            keys=self.keys,
        )

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await arecord_tool_errors(
            request,
            handler,
            default_mode=self._default_mode,
            catch=self._catch_tool_errors(),
            keys=self.keys,
        )

    @property
    def _default_mode(self) -> str | None:
        return self.pipeline.prompt.mode if self.pipeline.prompt is not None else None


def _sent_tools(request: ModelRequest) -> list[Any]:
    """The tools the request binds to the model: its own, and its `response_format`'s,
    which `create_agent` binds after the middleware: a `ToolStrategy`'s tools (one a
    schema); a `ProviderStrategy`'s schema, counted as one tool of that schema (the
    provider sends it along, and says not how it counts it); a raw schema
    (`AutoStrategy`) as whichever of the two `create_agent` picks for the model.

    >>> from langchain.agents.structured_output import ToolStrategy
    >>> from langgraph_ctx.testing import ScriptedChatModel
    >>> def answer(city: str) -> dict: ...
    >>> request = ModelRequest(model=ScriptedChatModel(script=[], model_name="local"),
    ...     messages=[], tools=[], response_format={"title": "Answer", "type": "object",
    ...     "properties": {"city": {"type": "string"}}})
    >>> [t.name for t in _sent_tools(request)]
    ['Answer']
    """
    tools = list(request.tools)
    response_format = request.response_format
    if response_format is None:
        return tools
    if not isinstance(response_format, (ToolStrategy, ProviderStrategy, AutoStrategy)):
        response_format = AutoStrategy(schema=response_format)
    if isinstance(response_format, AutoStrategy):
        provider = _supports_provider_strategy(request.model, tools=request.tools)
        strategy = ProviderStrategy if provider else ToolStrategy
        response_format = strategy(schema=response_format.schema)
    if isinstance(response_format, ToolStrategy):
        tools += [OutputToolBinding.from_schema_spec(s).tool for s in response_format.schema_specs]
    else:
        spec = response_format.schema_spec
        schema = {"name": spec.name, "description": spec.description}
        tools.append({"type": "function", "function": {**schema, "parameters": spec.json_schema}})
    return tools
