"""`context_pipeline`: budget, compaction and system prompt as one unit before the model.

```python
from langgraph_ctx import context_pipeline
from langgraph_ctx.context.prompt import PromptParts

pipeline = context_pipeline("personalized", model="gpt-4o", tools=tools,
                            prompt=PromptParts(persona="You are Ada."))

# 1. in your StateGraph (state: ContextState or a subclass)
pipeline.add_to(builder, before="model")          # adds the node "context" -> "model"
builder.add_edge(START, "context")
builder.add_edge("tools", "context")              # every model call goes through it

# 2. in create_react_agent
agent = create_react_agent(llm, tools, pre_model_hook=pipeline, state_schema=ContextAgentState)

# 3. in langchain's create_agent (extra: pip install 'langgraph-ctx[agents]')
agent = create_agent(llm, tools, middleware=[pipeline.middleware()])
```

Each model call, in one step:

1. **prompt**: compose the system prompt of the state's `mode` (`SystemPromptNode`);
2. **budget**: count the request (that prompt, the tool schemas, the messages) against the
   budget (`BudgetNode`'s counter and budget);
3. **compaction**: past the trigger, compact what the model sees (`CompactionNode`);
4. **request**: the prompt, then the running summary, then the conversation, written to
   `llm_input_messages`, and its `context_usage` (what is actually sent);
5. **notebook**: failures new since the last model call (LLM_ERROR messages, tool results
   with `status="error"`) go to `error_notebook`.

`messages` is never changed (unless you ask compaction for `rewrite_messages=True`): the
checkpointer keeps every message, and switching `mode` changes only the system prefix.
When the state has an `active_context` (written by the context tools,
`langgraph_ctx.tools.context_tools`), steps 2-4 work on the active context instead of the
whole history: the conversation starts where the context started, behind a loaded
archive if there is one (`langgraph_ctx.context.active_context.active_messages`).
Writing the prompt and counting it happen in the same step, so the budget always counts
the prompt that is sent, also right after a mode switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel

from langgraph_ctx.context.active_context import active_messages
from langgraph_ctx.context.budget import ContextBudget, ContextUsage, compute_usage
from langgraph_ctx.context.compaction.core import StrategyLike, run_async, run_sync
from langgraph_ctx.context.compaction.summarizer import ModelCall, ModelReply
from langgraph_ctx.context.llm_error import is_llm_error
from langgraph_ctx.context.notebook import errors_in
from langgraph_ctx.context.prompt import (
    Mode,
    PromptParts,
    is_system_prompt_message,
    model_input,
    read_run_context,
)
from langgraph_ctx.context.tokens import TokenCounter, encoding_loaded, load_encoding
from langgraph_ctx.errors import PromptPartError
from langgraph_ctx.nodes.budget import BudgetNode
from langgraph_ctx.nodes.compaction import CompactionNode, Trigger
from langgraph_ctx.nodes.prompt import SystemPromptNode

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

    from langgraph_ctx.nodes.middleware import ContextMiddleware

__all__ = [
    "PIPELINE_KEYS",
    "ContextPipeline",
    "PreparedRequest",
    "context_pipeline",
    "graph_step",
    "run_labels",
    "stands_for",
]

#: State keys the pipeline writes; a graph state must declare them (see `ContextState`).
PIPELINE_KEYS: tuple[str, ...] = (
    "llm_input_messages",
    "context_usage",
    "system_prompt",
    "running_summary",
    "compaction_log",
    "compaction_cursor",
    "error_notebook",
)


@dataclass
class PreparedRequest:
    """What the pipeline decided for one model call."""

    update: dict[str, Any]
    """The state writes (what the node returns)."""
    messages: list[BaseMessage]
    """What the model is sent: the system prompt (if composed), the summary, the conversation."""
    usage: ContextUsage
    """`context_usage` of that request (system prompt, tools and messages)."""
    system_prompt: str | None = None
    """The composed system prompt (None when the pipeline does not compose one)."""
    compacted: bool = False
    """Whether compaction ran in this step."""

    @property
    def conversation(self) -> list[BaseMessage]:
        """`messages` without the composed system prompt (for hosts that take it apart)."""
        return [m for m in self.messages if not is_system_prompt_message(m)]


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def _as_dict(state: Any) -> dict[str, Any]:
    if isinstance(state, Mapping):
        return dict(state)
    if isinstance(state, BaseModel):
        return dict(state)
    return dict(vars(state))


def stands_for(view_message: BaseMessage, message: BaseMessage) -> bool:
    """Whether a view message is `message` or compaction's stand-in for it (`<id>~...`)."""
    a, b = view_message.id, message.id
    return a is not None and b is not None and (a == b or a.startswith(f"{b}~"))


def _newest_ai_has_usage(messages: Sequence[BaseMessage]) -> bool:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            usage = message.usage_metadata or {}
            return isinstance(usage.get("input_tokens"), int) and usage["input_tokens"] > 0
    return False


def _measured_prefix(state: Any, conversation: Sequence[BaseMessage]) -> bool:
    """Whether the previous request (`llm_input_messages`) is where `conversation` starts.

    The provider's usage on the newest AI message measured that request; it calibrates
    this one only if this one continues it. Switching the active context breaks that.
    """
    sent = _get(state, "llm_input_messages") or []
    previous = [m for m in sent if not is_system_prompt_message(m)]
    if not previous:
        return False
    now = model_input(None, conversation)
    return len(now) > len(previous) and all(
        a.id is not None and a.id == b.id for a, b in zip(now, previous, strict=False)
    )


def _thread_id(config: RunnableConfig | None) -> str | None:
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(thread_id) if thread_id is not None else None


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
    mode = _get(state, "mode") or default_mode
    try:
        run = read_run_context(_get(state, "run_context"))
    except PromptPartError:
        run = None
    return {"mode": mode, "run_id": run.run_id if run is not None else None}


class ContextPipeline(Runnable[Any, dict[str, Any]]):
    """Budget, compaction and system prompt before the model node, in one step.

    Build it with `context_pipeline(...)`. It is a `Runnable`: add it as a node, pass it
    as `create_react_agent(pre_model_hook=...)`, or wrap it with `.middleware()` for
    `langchain.agents.create_agent`.

    Args:
        budget: counts the request (its budget, tokenizer, tools and system prompt).
        compaction: compacts what the model sees past its trigger; None: never.
        prompt: composes the system prompt of the current mode; None: the host adds its
            own prompt (count it with `BudgetNode(system_prompt=...)`).
        record_errors: record failures found in new messages in `error_notebook`.
        name: the node name `add_to` uses.

    Example:
        ```python
        pipeline = ContextPipeline(
            BudgetNode("fast", model="gpt-4o"),
            compaction=CompactionNode(trigger=0.8, target=0.5),
            prompt=SystemPromptNode(PromptParts(persona="You are Ada.")),
        )
        update = pipeline.invoke({"messages": [("user", "hi")], "mode": "agent"})
        update["llm_input_messages"][0].type, update["context_usage"].used  # ('system', ...)
        ```
    """

    def __init__(
        self,
        budget: BudgetNode,
        *,
        compaction: CompactionNode | None = None,
        prompt: SystemPromptNode | None = None,
        record_errors: bool = True,
        name: str = "context",
    ) -> None:
        self.budget = budget
        self.compaction = compaction
        self.prompt = prompt
        self.record_errors = record_errors
        self.name = name

    # -- the one implementation ---------------------------------------------------
    def steps(
        self,
        state: Any,
        config: RunnableConfig | None = None,
        *,
        tools: Sequence[Any] | None = None,
    ) -> Generator[ModelCall, ModelReply, PreparedRequest]:
        """The pipeline as a generator of model calls (only summaries call a model).

        `tools`: the tool schemas the request sends, when the host knows them better than
        the budget does (the middleware passes the request's tools).
        """
        messages = convert_to_messages(_get(state, "messages") or [])
        # What the model works with: the whole history, or the active context of the
        # context tools (its start, behind a loaded archive). `messages` stays whole.
        tracked = "active_context" in state if isinstance(state, Mapping) else False
        conversation = active_messages(messages, _get(state, "active_context"))
        composed = self.prompt.compose(state) if self.prompt is not None else None
        host_prompt = _get(state, "system_prompt") if composed is None else None
        counted_prompt = composed or (
            host_prompt if isinstance(host_prompt, str) else self.budget.system_prompt
        )
        if tools is None:
            state_tools = _get(state, "tools")
            tools = state_tools if isinstance(state_tools, Sequence) else self.budget.tools
        tools = list(tools or [])
        # Provider usage anchors counts only when the request it measured is a prefix of
        # this one: it must be on the newest AI message (the reply to the previous step,
        # whose prompt is the state's `system_prompt`), the prompt unchanged since, and
        # no compaction in between.
        same_prefix = composed is None or composed == _get(state, "system_prompt")
        cursor = _get(state, "compaction_cursor")
        view_active = isinstance(cursor, Mapping) and cursor.get("view_tokens") is not None
        calibrate = self.budget.calibrate and same_prefix and _newest_ai_has_usage(conversation)
        if calibrate and (tracked or conversation is not messages):
            calibrate = _measured_prefix(state, conversation)
        before = self._usage(conversation, counted_prompt, tools, calibrate and not view_active)

        update: dict[str, Any] = {}
        if composed is not None and composed != _get(state, "system_prompt"):
            update["system_prompt"] = composed  # only when it changed: a write is stored
        if self.prompt is not None and not _get(state, "mode"):
            update["mode"] = self.prompt.mode  # the state says which mode is active
        view: list[BaseMessage] = conversation
        compacted = False
        if self.compaction is not None:
            previous = _get(state, "llm_input_messages") or []
            overlay = {
                **_as_dict(state),
                "messages": conversation,
                "context_usage": before,
                # The compacted view without the prompt this pipeline put in front of it.
                "llm_input_messages": [m for m in previous if not is_system_prompt_message(m)],
            }
            written = yield from self.compaction.steps(overlay, _thread_id(config))
            compacted = bool(written.get("compaction_log"))
            update.update(written)
            if "messages" in written:  # rewrite_messages=True
                view = [m for m in written["messages"] if not isinstance(m, RemoveMessage)]
            elif written.get("llm_input_messages") is not None:
                view = list(written["llm_input_messages"])
                view = self._keep_llm_error(conversation, view, update)

        final = model_input(composed, view)
        unchanged = view is conversation and len(final) == len(conversation) + (
            composed is not None
        )
        if unchanged and not view_active:
            usage = before
        else:
            in_request = None if composed is not None else counted_prompt
            usage = self._usage(final, in_request, tools, calibrate and not compacted)
        update["llm_input_messages"] = final
        update["context_usage"] = usage

        if self.record_errors:
            default_mode = self.prompt.mode if self.prompt is not None else None
            records = errors_in(
                messages, step=graph_step(config), **run_labels(state, default_mode)
            )
            if records:
                update["error_notebook"] = records
        return PreparedRequest(
            update=update,
            messages=final,
            usage=usage,
            system_prompt=composed,
            compacted=compacted,
        )

    def _keep_llm_error(
        self,
        messages: Sequence[BaseMessage],
        view: list[BaseMessage],
        update: dict[str, Any],
    ) -> list[BaseMessage]:
        """Put the newest reply back into the view when it is an LLM_ERROR compaction dropped.

        "continue" resumes from that message, so the model must see it. It goes back where
        it was, before the messages that followed it, and the compaction cursor's count of
        the view grows by its tokens.
        """
        at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].type == "ai"), None)
        if at is None or not is_llm_error(messages[at]):
            return view
        failed = messages[at]
        if any(stands_for(m, failed) for m in view):
            return view
        later = messages[at + 1 :]
        where = next(
            (i for i, m in enumerate(view) if any(stands_for(m, x) for x in later)), len(view)
        )
        cursor = update.get("compaction_cursor")
        if isinstance(cursor, Mapping) and cursor.get("view_tokens") is not None:
            tokens = self.budget.counter.count(failed)
            update["compaction_cursor"] = {**cursor, "view_tokens": cursor["view_tokens"] + tokens}
        return [*view[:where], failed, *view[where:]]

    def _usage(
        self,
        messages: Sequence[BaseMessage],
        system_prompt: str | None,
        tools: Sequence[Any],
        calibrate: bool,
    ) -> ContextUsage:
        return compute_usage(
            messages,
            self.budget.budget,
            counter=self.budget.counter,
            system_prompt=system_prompt,
            tools=tools,
            calibrate=calibrate,
            model=self.budget.model,
        )

    # -- Runnable doors: sync and async share `steps` -------------------------------
    def prepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedRequest:
        """Run the pipeline (sync) and return everything it decided."""
        return run_sync(self.steps(state, config))

    async def aprepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedRequest:
        """Run the pipeline (async) and return everything it decided."""
        await self.load_tokenizer()
        return await run_async(self.steps(state, config))

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the pipeline as a node: returns the state update."""
        return self.prepare(input, config).update

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the pipeline as a node (async): returns the state update."""
        return (await self.aprepare(input, config)).update

    async def load_tokenizer(self) -> None:
        """Load the BPE data off the event loop the first time (about 0.5 s)."""
        encoding = self.budget.counter.family.encoding
        if self.budget.counter.token_counter is None and not encoding_loaded(encoding):
            await asyncio.to_thread(load_encoding, encoding)

    # -- hosts ------------------------------------------------------------------------
    def add_to(self, builder: StateGraph, *, before: str, name: str | None = None) -> str:
        """Add the pipeline to `builder` as one node with an edge to `before`; returns its name.

        Route every way into the model node through the returned node instead
        (`START` and the tools node). The graph state must declare `PIPELINE_KEYS`
        (`ContextState` does), or LangGraph would drop the pipeline's writes.

        Example:
            ```python
            builder = StateGraph(ContextState)
            builder.add_node("model", ModelNode(llm, tools=tools))
            builder.add_node("tools", ToolNode(tools))
            entry = pipeline.add_to(builder, before="model")      # "context"
            builder.add_edge(START, entry)
            builder.add_conditional_edges("model", tools_condition)
            builder.add_edge("tools", entry)
            ```

        Raises:
            ValueError: the state lacks keys the pipeline writes.
        """
        channels = getattr(builder, "channels", None) or {}
        wanted = [k for k in PIPELINE_KEYS if k != "error_notebook" or self.record_errors]
        missing = [key for key in wanted if key not in channels]
        if missing:
            raise ValueError(
                f"the graph state lacks {missing}, which the context pipeline writes "
                "(LangGraph would drop them); build the graph on ContextState "
                "(langgraph_ctx.nodes.state) or a subclass of it"
            )
        node = name or self.name
        builder.add_node(node, self)
        builder.add_edge(node, before)
        return node

    def middleware(self, **kwargs: Any) -> ContextMiddleware:
        """This pipeline as a LangChain `AgentMiddleware` for `create_agent`.

        Needs the `agents` extra (`pip install 'langgraph-ctx[agents]'`). Keyword
        arguments go to `ContextMiddleware` (timeouts, retries of the model call).
        """
        from langgraph_ctx.nodes.middleware import ContextMiddleware

        return ContextMiddleware(self, **kwargs)

    def __repr__(self) -> str:
        parts = [repr(self.budget)]
        if self.compaction is not None:
            parts.append(repr(self.compaction))
        if self.prompt is not None:
            parts.append(repr(self.prompt))
        return f"ContextPipeline({', '.join(parts)})"


def context_pipeline(
    budget: ContextBudget | str | None = None,
    *,
    model: str | Runnable[Any, Any] = "gpt-4o",
    tools: Sequence[Any] | None = None,
    prompt: PromptParts | Literal[False] | None = None,
    mode: Mode = "chat",
    system_prompt: str | None = None,
    compaction: CompactionNode | Literal[False] | None = None,
    strategy: StrategyLike = "extract",
    trigger: Trigger = 0.8,
    target: float | int = 0.5,
    offload_threshold: int | None = 500,
    token_counter: TokenCounter | None = None,
    record_errors: bool = True,
    name: str = "context",
) -> ContextPipeline:
    """Budget, compaction and system prompt, ready to put before the model node.

    Args:
        budget: a `ContextBudget`, a preset (`"fast"`, `"personalized"`, `"planning"`), or
            None for the model's whole context window.
        model: the model name, or the chat model (its name and bound tools are read).
        tools: the tools the model is given (their schemas count in the budget).
        prompt: the prompt parts (`PromptParts`; default texts if None). `False`: do not
            compose a prompt, the host adds its own (pass it as `system_prompt` to count it).
        mode: the mode when the state has no `mode`.
        system_prompt: a host's own system prompt, counted when `prompt=False`.
        compaction: a configured `CompactionNode`; None builds one from `strategy`,
            `trigger`, `target` and `offload_threshold`; `False`: never compact.
        strategy: `"extract"`, `"window"` or a strategy object (`LLMSummary(llm)`, ...).
        trigger: when to compact (`0.8` of the window, a token count, ...; see
            `CompactionNode`).
        target: what compaction leaves (`0.5` of the window, or a token count).
        offload_threshold: tool results over this many tokens are shown as previews.
        token_counter: count with this function (one message at a time) instead of the
            built-in tokenizer rules.
        record_errors: record failures in `error_notebook`.
        name: the node name `add_to` uses.

    Example:
        ```python
        pipeline = context_pipeline("fast", model="gpt-4o", tools=[search],
                                    prompt=PromptParts(persona="You are Ada."), mode="agent")
        pipeline.invoke({"messages": [("user", "hi")]})["context_usage"].percent
        ```
    """
    budget_node = BudgetNode(
        budget, model=model, tools=tools, system_prompt=system_prompt, token_counter=token_counter
    )
    if compaction is None:
        compaction = CompactionNode(
            strategy,
            trigger=trigger,
            target=target,
            offload_threshold=offload_threshold,
            token_counter=token_counter,
        )
    prompt_node = None if prompt is False else SystemPromptNode(prompt, mode=mode)
    return ContextPipeline(
        budget_node,
        compaction=compaction or None,
        prompt=prompt_node,
        record_errors=record_errors,
        name=name,
    )
