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

Each model call, in one step, calling each node's own functions:

1. **read**: the conversation (the active context), the system prompt of the state's
   `mode` (`SystemPromptNode.compose`) and the tool schemas the request sends;
2. **budget**: count that request against the budget (`BudgetNode.measure`); while
   compaction's view is active and the step only appends to it, only the request
   without its messages (system prompt, tools: kept while they stay the same), since
   compaction counts the new messages itself and the rest of the history is not sent;
3. **compaction**: past the trigger, compact what the model sees
   (`CompactionNode.compact`, given that count);
4. **prompt**: the prompt, then the running summary, then the conversation
   (`SystemPromptNode.request`), written to `llm_input_messages`, and its
   `context_usage` (what is actually sent; recounted only if it changed);
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

One module (over 600 lines) because the algorithm (one private method a step) and its
doors into the three hosts (`add_to`, `create_react_agent`, `middleware`, `state_schema`)
change together: each door decides which host prompt, tools and key names the steps get.
"""

from __future__ import annotations

import copy
import operator
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    convert_to_messages,
)
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_ctx.context.active_context import active_messages
from langgraph_ctx.context.budget import ContextBudget, ContextUsage
from langgraph_ctx.context.compaction.core import StrategyLike
from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.llm_error import is_llm_error
from langgraph_ctx.context.model_call import Step, drive_async, drive_sync
from langgraph_ctx.context.notebook import errors_in
from langgraph_ctx.context.prompt import (
    Mode,
    PromptParts,
    host_system_prompts,
    is_system_prompt_message,
    model_input,
)
from langgraph_ctx.context.tokens import TokenCounter
from langgraph_ctx.errors import DroppedWritesWarning, StateKeyConflictError
from langgraph_ctx.nodes.budget import BudgetNode
from langgraph_ctx.nodes.compaction import CompactionNode, Trigger
from langgraph_ctx.nodes.prompt import SystemPromptNode
from langgraph_ctx.nodes.state import (
    PIPELINE_KEYS,
    StateKeys,
    cursor_has_view,
    graph_step,
    run_labels,
    schema_hints,
    stands_for,
    state_messages,
    state_value,
    thread_key_of,
    undeclared_keys,
    view_active,
)

if TYPE_CHECKING:
    from langgraph.graph import StateGraph

    from langgraph_ctx.nodes.middleware import ContextMiddleware

__all__ = [
    "PIPELINE_KEYS",  # defined in langgraph_ctx.nodes.state, exported here too
    "ContextPipeline",
    "PreparedRequest",
    "context_pipeline",
]


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


@dataclass
class _Request:
    """One step's reading of the state: what this model call would send, before compaction."""

    messages: list[BaseMessage]
    """The whole history (`messages`)."""
    conversation: list[BaseMessage]
    """What the model works with: the history, or the active context of the context tools."""
    composed: str | None
    """The system prompt the pipeline composed (None: the host adds its own)."""
    counted_prompt: str | None
    """The system prompt counted in the budget (the composed one, else the host's)."""
    tools: list[Any]
    calibrate: bool
    """Whether provider usage may anchor the count (the measured request is a prefix)."""
    view_active: bool
    """Whether compaction's view was active when the step began."""
    host_messages: list[BaseMessage]
    """The host's system messages that opened the conversation (sent in the prompt)."""


def _as_messages(values: Sequence[Any]) -> list[BaseMessage]:
    """`convert_to_messages`, without a call per message when all are messages already
    (the usual case: checked once per class, not once per message of the history)."""
    if all(issubclass(t, BaseMessage) for t in set(map(type, values))):
        return list(values)
    return convert_to_messages(values)


def _newest_ai_has_usage(messages: Sequence[BaseMessage]) -> bool:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            usage: Mapping[str, Any] = message.usage_metadata or {}
            return isinstance(usage.get("input_tokens"), int) and usage["input_tokens"] > 0
    return False


def _measured_prefix(state: Any, conversation: Sequence[BaseMessage]) -> bool:
    """Whether the previous request (`llm_input_messages`) is where `conversation` starts.

    The provider's usage on the newest AI message measured that request; it calibrates
    this one only if this one continues it. Switching the active context breaks that.
    """
    sent = state_value(state, VIEW_KEY) or []
    previous = [m for m in sent if not is_system_prompt_message(m)]
    if not previous:
        return False
    now = model_input(None, conversation)
    return len(now) > len(previous) and all(
        a.id is not None and a.id == b.id for a, b in zip(now, previous, strict=False)
    )


class ContextPipeline(Runnable[Any, dict[str, Any]]):
    """Budget, compaction and system prompt before the model node, in one step.

    Build it with `context_pipeline(...)`. It is a `Runnable`: add it as a node, pass it
    as `create_react_agent(pre_model_hook=...)`, or wrap it with `.middleware()` for
    `langchain.agents.create_agent`.

    Args:
        budget: counts the request (its budget, tokenizer, tools and system prompt).
        compaction: compacts what the model sees past its trigger; None: never.
        prompt: composes the system prompt of the current mode, after the host's own
            (`SystemPromptNode(system_prompt=...)`, or the agent's, via the middleware);
            None: the host sends its own prompt alone (count it with
            `BudgetNode(system_prompt=...)`).
        record_errors: record failures found in new messages in `error_notebook`.
        name: the node name `add_to` uses.
        keys: the names of the pipeline's state keys in the host's state (`StateKeys`, or
            a dict such as `{"mode": "ctx_mode"}`).
        recoverable_errors: the middleware's split of model failures (see
            `ContextMiddleware`); None: `is_recoverable_error`.

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
        keys: StateKeys | Mapping[str, str] | None = None,
        recoverable_errors: Callable[[BaseException], bool] | None = None,
    ) -> None:
        self.budget = budget
        self.compaction = compaction
        self.prompt = prompt
        self.record_errors = record_errors
        self.name = name
        self.keys = StateKeys.of(keys)
        self.recoverable_errors = recoverable_errors
        # (prompt, tools, count, overhead) of the last request counted without messages
        self._overhead: tuple[str | None, tuple[Any, ...], ContextUsage, int, Any] | None = None
        self._wiring_checked: set[str] = set()  # threads whose graph declares our keys

    # -- the one implementation ---------------------------------------------------
    def steps(
        self,
        state: Any,
        config: RunnableConfig | None = None,
        *,
        tools: Sequence[Any] | None = None,
        host_prompt: str | None = None,
    ) -> Generator[Step, Any, PreparedRequest]:
        """The pipeline as a generator of model calls (only summaries call a model).

        Reads `state` and writes its update under the host's key names (`keys`); the
        work is `canonical_steps`.
        """
        prepared = yield from self.canonical_steps(
            self.keys.read(state), config, tools=tools, host_prompt=host_prompt
        )
        prepared.update = self.keys.write(prepared.update)
        return prepared

    def discard_step(self, config: RunnableConfig | None) -> None:
        """The step prepared for ``config``'s thread failed before its writes were saved
        (the middleware's model call raised): see `CompactionNode.discard_writes`."""
        if self.compaction is not None:
            self.compaction.discard_writes(thread_key_of(config))

    def canonical_steps(
        self,
        state: Any,
        config: RunnableConfig | None = None,
        *,
        tools: Sequence[Any] | None = None,
        host_prompt: str | None = None,
    ) -> Generator[Step, Any, PreparedRequest]:
        """`steps` on a state with the pipeline's own key names (`StateKeys.read`).

        budget → compaction → prompt, each by its node's own function.
        `tools`: the tool schemas the request sends, when the host knows them better than
        the budget does (the middleware passes the request's tools).
        `host_prompt`: the system prompt the host's agent was built with (the middleware
        passes the request's): sent first, in the same system message, and counted.

        Raises:
            StateKeyConflictError: a pipeline key holds a value the pipeline cannot read
                (the app uses the name for its own data; rename the pipeline's: `keys`).
        """
        self.keys.check_values(state)
        request = self._read(state, tools, host_prompt)
        before, overhead = self._count(state, request)
        update = self._prompt_writes(state, request)
        view, compacted = yield from self._compact(
            state, config, request, before, update, overhead
        )
        final = self._compose(request, view)
        usage = self._recount(request, view, final, before, compacted)
        update["llm_input_messages"] = final
        update["context_usage"] = usage
        if self.record_errors:
            update.update(self._notebook(state, config, request.messages))
        return PreparedRequest(
            update=update,
            messages=final,
            usage=usage,
            system_prompt=request.composed,
            compacted=compacted,
        )

    # -- its steps ------------------------------------------------------------------
    def _read(
        self, state: Any, tools: Sequence[Any] | None, host_prompt: str | None = None
    ) -> _Request:
        """What this model call would send: conversation, system prompt, tools."""
        messages = _as_messages(state_messages(state))
        # What the model works with: the whole history, or the active context of the
        # context tools (its start, behind a loaded archive). `messages` stays whole.
        tracked = "active_context" in state if isinstance(state, Mapping) else False
        conversation = active_messages(messages, state_value(state, "active_context"))
        host_messages: list[BaseMessage] = []
        if self.prompt is not None:
            # The host's own system messages at the start go first in the one system
            # message the pipeline sends, not as further system messages after it.
            host_messages, rest = host_system_prompts(conversation)
            if host_messages:
                conversation = rest
                texts = [m.text for m in host_messages if m.text.strip()]
                host_prompt = "\n\n".join([*([host_prompt] if host_prompt else []), *texts])
        composed = self.prompt.compose(state, host=host_prompt) if self.prompt else None
        written = state_value(state, "system_prompt")
        if (
            composed is not None
            and host_prompt
            and composed != host_prompt
            and isinstance(written, str)
            and written
            and written in host_prompt
        ):
            # The app's prompt is read from the key the composed prompt is written to
            # (an app's own `system_prompt` key, a dynamic prompt reading it, maybe adding
            # to it): each turn would send the last composition again, inside the next.
            raise StateKeyConflictError(
                self.keys.name("system_prompt"),
                "the app's system prompt is read from this key, where the context pipeline "
                "writes the prompt it composes (fed back in, it would grow every turn)",
                canonical="system_prompt",
            )
        counted = composed if composed is not None else host_prompt
        if counted is None:
            counted = self.budget.system_prompt_of(state)
        if tools is None:
            tools = self.budget.tools_of(state)
        # Provider usage anchors counts only when the request it measured is a prefix of
        # this one: it must be on the newest AI message (the reply to the previous step,
        # whose prompt is the state's `system_prompt`), the prompt unchanged since, and
        # no compaction in between.
        same_prefix = composed is None or composed == state_value(state, "system_prompt")
        calibrate = self.budget.calibrate and same_prefix and _newest_ai_has_usage(conversation)
        if calibrate and (tracked or conversation is not messages):
            calibrate = _measured_prefix(state, conversation)
        return _Request(
            messages=messages,
            conversation=conversation,
            composed=composed,
            counted_prompt=counted,
            tools=list(tools or []),
            calibrate=calibrate,
            view_active=view_active(state),
            host_messages=host_messages,
        )

    def _count(self, state: Any, request: _Request) -> tuple[ContextUsage, int | None]:
        """The budget's count of the request before compaction (`BudgetNode.measure`).

        While the step only appends to compaction's view (`CompactionNode.continues_view`),
        what is sent is that view plus the new messages, which compaction counts itself:
        then the count is of the request without its messages (system prompt, tools), and
        its tokens besides the priming are returned as the overhead compaction adds to the
        view. This is the number compaction would read from a count of the whole history
        (that count minus the history's own), without tallying the whole history.
        """
        if self._continues_view(state, request):
            return self._count_overhead(request)
        usage = self.budget.measure(
            request.conversation,
            system_prompt=request.counted_prompt,
            tools=request.tools,
            # While a compacted view is active, provider usage measured the view, not this.
            calibrate=request.calibrate and not request.view_active,
        )
        return usage, None

    def _count_overhead(self, request: _Request) -> tuple[ContextUsage, int]:
        """The count of the request without messages, and its tokens besides the priming.

        The same prompt and tools come back call after call: the last count is kept while
        the prompt text is equal and the tools are the same objects.
        """
        prompt, tools = request.counted_prompt, request.tools
        last = self._overhead
        if (
            last is not None
            and last[4] is self.budget
            and last[0] == prompt
            and len(last[1]) == len(tools)
            and all(map(operator.is_, last[1], tools))
        ):
            return last[2], last[3]
        empty = self.budget.measure([], system_prompt=prompt, tools=tools, calibrate=False)
        overhead = empty.used - self.budget.counter.reply_priming
        self._overhead = (prompt, tuple(tools), empty, overhead, self.budget)
        return empty, overhead

    def _continues_view(self, state: Any, request: _Request) -> bool:
        """Whether compaction only appends to its view this step, counting with the
        budget's own per-message counter (so its counts and the budget's agree)."""
        compaction = self.compaction
        counter = self.budget.counter
        if compaction is None or not request.view_active:
            return False
        if compaction.token_counter is not None or counter.token_counter is not None:
            return False
        if (compaction.model or self.budget.model) != counter.model:
            return False
        previous = state_value(state, VIEW_KEY) or []
        view = [m for m in previous if not is_system_prompt_message(m)]
        return compaction.continues_view(
            request.conversation, state_value(state, "compaction_cursor"), view
        )

    def _prompt_writes(self, state: Any, request: _Request) -> dict[str, Any]:
        """The prompt's state writes: `system_prompt` when it changed, `mode` when unset."""
        if self.prompt is None or request.composed is None:
            return {}
        update = self.prompt.writes(state, request.composed)
        if not state_value(state, "mode"):
            update["mode"] = self.prompt.mode  # the state says which mode is active
        return update

    def _compact(
        self,
        state: Any,
        config: RunnableConfig | None,
        request: _Request,
        before: ContextUsage,
        update: dict[str, Any],
        overhead: int | None = None,
    ) -> Generator[Step, Any, tuple[list[BaseMessage], bool]]:
        """Compaction of the conversation (given the budget's count); writes into `update`.

        Returns what the model should see of the conversation, and whether it compacted.
        `overhead`: see `_count`.
        """
        if self.compaction is None:
            return request.conversation, False
        previous = state_value(state, VIEW_KEY) or []
        written = yield from self.compaction.compact(
            request.conversation,
            usage=before,
            cursor=state_value(state, "compaction_cursor"),
            # The compacted view without the prompt this pipeline put in front of it.
            view=[m for m in previous if not is_system_prompt_message(m)],
            summary=state_value(state, "running_summary"),
            thread_id=thread_key_of(config),
            message_counter=self.budget.counter,
            overhead=overhead,
        )
        update.update(written)
        view = request.conversation
        if "messages" in written:  # rewrite_messages=True
            view = [m for m in written["messages"] if not isinstance(m, RemoveMessage)]
            if request.host_messages:  # the history keeps the host's own prompt
                removed = [m for m in written["messages"] if isinstance(m, RemoveMessage)]
                update["messages"] = [*removed, *request.host_messages, *view]
        elif written.get("llm_input_messages") is not None:
            view = list(written["llm_input_messages"])
            view = self._keep_llm_error(request.conversation, view, update)
        return view, bool(written.get("compaction_log"))

    def _compose(self, request: _Request, view: list[BaseMessage]) -> list[BaseMessage]:
        """What the model is sent: the composed prompt (if any), then the conversation."""
        if self.prompt is None:
            return model_input(None, view)
        return self.prompt.request(request.composed, view)

    def _recount(
        self,
        request: _Request,
        view: list[BaseMessage],
        final: list[BaseMessage],
        before: ContextUsage,
        compacted: bool,
    ) -> ContextUsage:
        """`context_usage` of what is sent: the first count, unless compaction changed it."""
        unchanged = view is request.conversation and len(final) == len(request.conversation) + (
            request.composed is not None
        )
        if unchanged and not request.view_active:
            return before
        return self.budget.measure(
            final,
            system_prompt=None if request.composed is not None else request.counted_prompt,
            tools=request.tools,
            calibrate=request.calibrate and not compacted,
        )

    def _notebook(
        self, state: Any, config: RunnableConfig | None, messages: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """Failures new since the last model call, for `error_notebook`."""
        default_mode = self.prompt.mode if self.prompt is not None else None
        records = errors_in(messages, step=graph_step(config), **run_labels(state, default_mode))
        return {"error_notebook": records} if records else {}

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
        if cursor_has_view(cursor):
            tokens = self.budget.count(failed)
            update["compaction_cursor"] = {**cursor, "view_tokens": cursor["view_tokens"] + tokens}
        return [*view[:where], failed, *view[where:]]

    # -- Runnable doors: sync and async share `steps` -------------------------------
    def prepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedRequest:
        """Run the pipeline (sync) and return everything it decided."""
        return drive_sync(self.steps(state, config))

    async def aprepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedRequest:
        """Run the pipeline (async) and return everything it decided."""
        await self.load_tokenizer()
        return await drive_async(self.steps(state, config))

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the pipeline as a node: returns the state update.

        Warns (`DroppedWritesWarning`) when the graph's state lacks keys it writes.
        """
        update = self.prepare(input, config).update
        self._check_wiring(config, update)
        return update

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the pipeline as a node (async): returns the state update."""
        update = (await self.aprepare(input, config)).update
        self._check_wiring(config, update)
        return update

    def _check_wiring(self, config: RunnableConfig | None, update: Mapping[str, Any]) -> None:
        """Warn when the graph running this node drops its writes (its state lacks the keys).

        `add_to` refuses such a state; `builder.add_node(name, pipeline)` on a
        `MessagesState` graph, or `create_react_agent(pre_model_hook=pipeline)` without a
        `state_schema`, get here: LangGraph drops every write, and the model is sent the
        whole history as if the pipeline were not there. Checked at the first step in a
        thread (at every step outside one); the middleware never runs this door.
        """
        thread = thread_key_of(config)
        if thread is not None and thread in self._wiring_checked:
            return
        written = [self.keys.name(key) for key in PIPELINE_KEYS]
        if not undeclared_keys(config, ["__previous__"]):  # the functional API (an
            return  # @entrypoint calling the pipeline): no state its writes could miss
        missing = undeclared_keys(config, [k for k in written if k in update])
        if thread is not None:
            if len(self._wiring_checked) >= 10_000:  # a bound, not a registry
                self._wiring_checked.clear()
            self._wiring_checked.add(thread)
        if not missing:
            return
        if self.compaction is not None:  # one cause, one warning: not its own again
            self.compaction._warned = True
        lost = (
            "the model is sent the messages as they are, without the pipeline's prompt or "
            "compaction"
            if self.keys.name("llm_input_messages") in missing
            else "what the pipeline keeps from one step to the next is lost"
        )
        warnings.warn(
            f"the context pipeline {self.name!r} runs in a graph whose state does not "
            f"declare {missing}: as a node, LangGraph drops its writes to them, so {lost}. "
            "Build the graph on ContextState (a subclass of it, or "
            'pipeline.state_schema(YourState)) and add the pipeline with pipeline.add_to('
            'builder, before="model"); for create_react_agent pass '
            "state_schema=ContextAgentState, or build the agent with "
            "pipeline.create_react_agent(...). (Calling the pipeline inside a node of your "
            "own and using its update there drops nothing: filter DroppedWritesWarning.)",
            DroppedWritesWarning,
            stacklevel=2,
        )

    async def load_tokenizer(self) -> None:
        """Load the BPE data off the event loop the first time (about 0.5 s)."""
        await self.budget.load_tokenizer()

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
            StateKeyConflictError: the state declares one of the pipeline's keys with
                another type (the app's own key): rename the pipeline's (`keys=`).
            ValueError: the state lacks keys the pipeline writes.
            CompactionError: compaction rewrites `messages` but their reducer cannot
                remove messages (`operator.add`; see `CompactionNode.check_reducer`).
        """
        schema = getattr(builder, "state_schema", None)
        if schema is not None:
            self.check_schema(schema)
        channels = getattr(builder, "channels", None) or {}
        wanted = [
            self.keys.name(k) for k in PIPELINE_KEYS if k != "error_notebook" or self.record_errors
        ]
        missing = [key for key in wanted if key not in channels]
        if missing:
            raise ValueError(
                f"the graph state lacks {missing}, which the context pipeline writes "
                "(LangGraph would drop them); build the graph on ContextState "
                "(langgraph_ctx.nodes.state), a subclass of it, or "
                "pipeline.state_schema(YourState)"
            )
        if self.compaction is not None:
            self.compaction.check_reducer(getattr(channels.get("messages"), "operator", None))
        node = name or self.name or "context"
        builder.add_node(node, self)
        builder.add_edge(node, before)
        return node

    @property
    def tools(self) -> list[Any]:
        """The tools this pipeline offers the model: with compaction on, `read_tool_result`
        (open a preview's full output) and `search_history` (find what compaction moved
        out of view). `.middleware()` offers them to a `create_agent` agent itself; in a
        `StateGraph` or `create_react_agent`, add them to the tools you bind and to your
        `ToolNode`: `[*tools, *pipeline.tools]`.
        """
        if self.compaction is None:
            return []
        from langgraph_ctx.context.compaction import read_tool_result, search_history

        return [read_tool_result, search_history]

    def check_schema(self, schema: Any) -> None:
        """Raise `StateKeyConflictError` if `schema` declares a pipeline key otherwise.

        `add_to` calls it; call it yourself for the `state_schema` of
        `create_react_agent` or `create_agent`, whose hooks cannot see it.
        """
        self.keys.check_schema(schema_hints(schema), where=f"state schema {schema.__name__}")

    def state_schema(self, base: type | None = None) -> type:
        """A state schema with the pipeline's keys under this pipeline's names.

        `base`: your state (`MessagesState`, `AgentState` or your own subclass);
        default `MessagesState`. Without renamed keys and base: `ContextState`.

        Example:
            ```python
            pipeline = context_pipeline("fast", keys={"mode": "ctx_mode"})
            builder = StateGraph(pipeline.state_schema(AppState))
            ```
        """
        if base is None and not self.keys.renamed:
            from langgraph_ctx.nodes.state import ContextState

            return ContextState
        if base is None:
            from langgraph.graph import MessagesState

            base = MessagesState
        return self.keys.schema(base)

    def with_system_prompt(self, text: str | None) -> ContextPipeline:
        """A copy of this pipeline whose host prompt is `text` (sent first, counted).

        With `prompt=False` the copy only counts `text`: the host sends it.
        """
        pipeline = copy.copy(self)
        if self.prompt is not None:
            pipeline.prompt = copy.copy(self.prompt)
            pipeline.prompt.system_prompt = text or None
        else:
            pipeline.budget = copy.copy(self.budget)
            pipeline.budget.system_prompt = text or None
        return pipeline

    def create_react_agent(
        self,
        model: Any,
        tools: Sequence[Any] | Any,
        *,
        prompt: str | SystemMessage | None = None,
        state_schema: type | None = None,
        **kwargs: Any,
    ) -> Any:
        """`langgraph.prebuilt.create_react_agent` with this pipeline as its `pre_model_hook`.

        LangGraph applies `create_react_agent(prompt=...)` after the hook, as a second
        system message the pipeline cannot see or count. Here `prompt` goes into the
        pipeline instead: the model gets one system message, your prompt first
        (verbatim), then the mode's sections, all counted. `state_schema` defaults to
        `ContextAgentState` (with renamed keys: `AgentState` plus the renamed keys) and is
        checked for keys the app uses otherwise; with `response_format=`, the default is
        LangGraph's `AgentStateWithStructuredResponse` plus the pipeline's keys (LangGraph's
        call for the structured response is sent the agent's whole `messages`, past the
        pipeline: its design). Other arguments go to `create_react_agent`.

        Example:
            ```python
            agent = pipeline.create_react_agent(llm, tools, prompt="ALWAYS ANSWER IN FRENCH.",
                                                checkpointer=JsonlSaver("./chats"))
            ```

        Raises:
            StateKeyConflictError: `state_schema` declares a pipeline key otherwise.
        """
        from langgraph.prebuilt import create_react_agent
        from langgraph.prebuilt.chat_agent_executor import (
            AgentState,
            AgentStateWithStructuredResponse,
        )

        from langgraph_ctx.nodes.state import ContextAgentState

        if state_schema is None and kwargs.get("response_format") is not None:
            # LangGraph's agent then needs `structured_response` in its state, as its own
            # default schema has it (without, `create_react_agent` raises ValueError).
            state_schema = self.keys.schema(AgentStateWithStructuredResponse)
        elif state_schema is None:
            state_schema = self.keys.schema(AgentState) if self.keys.renamed else ContextAgentState
        self.check_schema(state_schema)
        text = prompt.text if isinstance(prompt, SystemMessage) else prompt
        if prompt is not None and not isinstance(text, str):
            raise TypeError("prompt: a str or a SystemMessage (the pipeline composes it)")
        pipeline = self.with_system_prompt(text) if text else self
        host_sends = pipeline.prompt is None  # prompt=False: the agent sends the prompt itself
        return create_react_agent(
            model,
            tools,
            prompt=prompt if host_sends else None,
            pre_model_hook=pipeline,
            state_schema=state_schema,
            **kwargs,
        )

    def middleware(self, **kwargs: Any) -> ContextMiddleware:
        """This pipeline as a LangChain `AgentMiddleware` for `create_agent`.

        Needs the `agents` extra (`pip install 'langgraph-ctx[agents]'`). Keyword
        arguments go to `ContextMiddleware` (timeouts, retries of the model call, which
        failures raise, tool errors).
        """
        from langgraph_ctx.nodes.middleware import ContextMiddleware

        if self.recoverable_errors is not None:
            kwargs.setdefault("recoverable_errors", self.recoverable_errors)
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
    context_window: int | None = None,
    tools: Sequence[Any] | None = None,
    prompt: PromptParts | Literal[False] | None = None,
    mode: Mode = "chat",
    system_prompt: str | None = None,
    compaction: CompactionNode | Literal[False] | None = None,
    strategy: StrategyLike = "relevance",
    trigger: Trigger = 0.8,
    target: float | int = 0.5,
    offload_threshold: int | None = 500,
    token_counter: TokenCounter | None = None,
    record_errors: bool = True,
    name: str = "context",
    keys: StateKeys | Mapping[str, str] | None = None,
    recoverable_errors: Callable[[BaseException], bool] | None = None,
) -> ContextPipeline:
    """Budget, compaction and system prompt, ready to put before the model node.

    Args:
        budget: a `ContextBudget`, a preset (`"fast"`, `"personalized"`, `"planning"`), or
            None for the model's whole context window.
        model: the model name, or the chat model (its name, bound tools and LangChain
            profile are read; `model.profile["max_input_tokens"]` is its window).
            Names resolve through tiktoken's model map first, so a fine-tune
            (`ft:gpt-4o-mini:acme::abc123`) counts as its base model.
        context_window: the window in tokens when `budget` is None and neither the
            model's profile nor the package's table knows it (`model="my-local-llama"`).
        tools: the tools the model is given (their schemas count in the budget).
        prompt: the prompt parts (`PromptParts`; default texts if None). `False`: send no
            mode sections; the host's prompt alone (the agent's, or the one the host sends
            itself: pass it as `system_prompt` to count it).
        mode: the mode when the state has no `mode`.
        system_prompt: the host's own system prompt. Sent first, verbatim, then the
            mode's sections, as one system message, and counted in the budget. With
            `prompt=False` it is only counted (the host sends it).
        compaction: a configured `CompactionNode`; None builds one from `strategy`,
            `trigger`, `target` and `offload_threshold`; `False`: never compact.
        strategy: `"relevance"` (default), `"extract"`, `"window"` or a strategy object
            (`LLMSummary(llm)`, ...).
        trigger: when to compact (`0.8` of the window, a token count, ...; see
            `CompactionNode`). A bare int up to 100 is refused as a percent typed by
            mistake: `trigger=80` raises `CompactionError` (write `0.8`, or
            `("tokens", 80)` if you mean tokens).
        target: what compaction leaves (`0.5` of the window, or a token count).
        offload_threshold: tool results over this many tokens are shown as previews.
        token_counter: count with this function (one message at a time) instead of the
            built-in tokenizer rules.
        record_errors: record failures in `error_notebook`.
        name: the node name `add_to` uses.
        keys: rename the pipeline's state keys when the app already uses a name
            (`{"mode": "ctx_mode"}` or `StateKeys(mode="ctx_mode")`).
        recoverable_errors: for `.middleware()`: which model failures become LLM_ERROR
            replies (`error -> bool`); the others raise. Default `is_recoverable_error`.

    Example:
        ```python
        pipeline = context_pipeline("fast", model="gpt-4o", tools=[search],
                                    prompt=PromptParts(persona="You are Ada."), mode="agent")
        pipeline.invoke({"messages": [("user", "hi")]})["context_usage"].percent
        ```
    """
    budget_node = BudgetNode(
        budget,
        model=model,
        context_window=context_window,
        tools=tools,
        system_prompt=system_prompt,
        token_counter=token_counter,
    )
    if compaction is None:
        compaction = CompactionNode(
            strategy,
            trigger=trigger,
            target=target,
            offload_threshold=offload_threshold,
            token_counter=token_counter,
        )
    prompt_node = None
    if prompt is not False:
        prompt_node = SystemPromptNode(prompt, mode=mode, system_prompt=system_prompt)
    return ContextPipeline(
        budget_node,
        compaction=compaction or None,
        prompt=prompt_node,
        record_errors=record_errors,
        name=name,
        keys=keys,
        recoverable_errors=recoverable_errors,
    )
