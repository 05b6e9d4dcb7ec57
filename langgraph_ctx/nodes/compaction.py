"""`CompactionNode`: compact what the model sees once the context passes a trigger.

```python
from langgraph.graph import START, StateGraph
from langgraph_ctx.nodes.compaction import CompactionNode, CompactionState

def call_model(state):
    return {"messages": [llm.invoke(state.get("llm_input_messages") or state["messages"])]}

builder = StateGraph(CompactionState)
builder.add_node("compact", CompactionNode(trigger=0.8, target=0.5, max_context_tokens=128_000))
builder.add_node("model", call_model)
builder.add_edge(START, "compact")
builder.add_edge("compact", "model")
```

Past the trigger the node compacts to the target and writes:

- `llm_input_messages`: what the model sees (the `pre_model_hook` convention of
  `create_react_agent`, which calls the model with `llm_input_messages or messages`);
- `running_summary`: the structured running summary (summary strategies), as JSON;
- `compaction_log`: one more `CompactionRecord`, as JSON. Declare the key with the
  `add_compaction_records` reducer, as `CompactionState` does: the state keeps the last 10
  records (`COMPACTION_LOG_SIZE`, a few KB each); every record stays in the checkpoint of
  the step that made it, and `compaction_history(graph.get_state_history(config))`
  collects them all, oldest first.
- `compaction_cursor`: where it stopped reading, and the token counts so far.

`messages` stays whole, so the checkpointer's log keeps every message: compaction marks,
it does not erase. With `rewrite_messages=True` the node instead replaces `messages`
(`RemoveMessage(REMOVE_ALL_MESSAGES)` plus the compacted list, summary included); the
saver's earlier checkpoints still hold everything.

After a compaction, each step appends only its new messages to the compacted view and
counts only them (large new tool results become previews, and are tokenized only until
their count passes `offload_threshold`: the preview states their size as an estimate,
``tokens=~6700``), until the trigger fires again; below the trigger nothing is rescored
or recounted, except that with relevance selection a new user message remakes the
previews in the view for it (only those).

It is one module (about 840 lines) because the node's steps (measure, decide, read,
compact, write) share its cursor over the compacted view.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_ctx.context.compaction.conversation import (
    SUMMARY_PREFIXES,
    Conversation,
    TokenCounter,
    counter_name,
    preview_of,
    resolve_token_counter,
    tool_calls_of,
)
from langgraph_ctx.context.compaction.core import (
    Compaction,
    StrategyLike,
    check_arguments,
    compaction_steps,
    resolve_strategy,
)
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.previews import (
    TokenEstimate,
    is_preview,
    is_tool_result_page,
)
from langgraph_ctx.context.compaction.record import VIEW_KEY, RunningSummary
from langgraph_ctx.context.compaction.relevance import requery_previews, request_query
from langgraph_ctx.context.compaction.tools import OFFLOADED_KEY
from langgraph_ctx.context.model_call import Step, drive_async, drive_sync
from langgraph_ctx.context.tokens import MessageTokenCounter
from langgraph_ctx.errors import DroppedWritesWarning
from langgraph_ctx.nodes.budget import load_tokenizer_off_loop
from langgraph_ctx.nodes.state import (
    CompactionAgentState,
    CompactionState,
    cursor_has_view,
    state_messages,
    state_value,
    thread_key_of,
)

__all__ = ["CompactionAgentState", "CompactionNode", "CompactionState", "Trigger"]

TriggerKind = Literal["fraction", "tokens", "messages", "reserved"]
Trigger = float | int | tuple[TriggerKind, float]
"""`0.8` (a fraction of the window), `12_000` (tokens), or `("fraction" | "tokens" |
"messages" | "reserved", value)`; `("reserved", R)` fires when `used + R >= window`."""

PERCENT_LIKE: Final[int] = 100
"""A bare int `trigger` or `target` up to this is refused as a percent typed by mistake
(`trigger=80` meant `0.8`): as tokens it is below what any request sends (the reply
priming, a message, and the system prompt: the default one alone is over 200), so
compaction would run at every step. A token count that small is still possible, said
explicitly: `("tokens", 80)`."""


@dataclass(frozen=True)
class _Rule:
    kind: TriggerKind
    value: float

    @classmethod
    def parse(cls, spec: Any, *, label: str, kinds: tuple[str, ...]) -> _Rule:
        if isinstance(spec, tuple) and len(spec) == 2 and spec[0] in kinds:
            kind, value = spec
        elif isinstance(spec, float) and "fraction" in kinds:
            kind, value = "fraction", spec
        elif isinstance(spec, int) and not isinstance(spec, bool):
            kind, value = "tokens", spec
            if 0 < spec <= PERCENT_LIKE:
                effect = (
                    "compaction would run at every step"
                    if label == "trigger"
                    else "compaction would leave next to nothing"
                )
                raise CompactionError(
                    f"{label}={spec} is a count of tokens, fewer than a request with a "
                    f"system prompt sends (the default one alone is over 200), so {effect}; "
                    f"for {spec} % of the window write {label}={spec / 100!r}, for {spec} "
                    f"tokens write {label}=('tokens', {spec})"
                )
        else:
            raise CompactionError(
                f"{label}={spec!r}: use a fraction (0.8), a token count (12_000) or a tuple "
                f"with one of {kinds}"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise CompactionError(f"{label}={spec!r}: the value must be a positive number")
        if kind == "fraction" and value > 1:
            raise CompactionError(f"{label}={spec!r}: a fraction must be in (0, 1]")
        return cls(kind, float(value))


@dataclass(frozen=True)
class _Cursor:
    """Where the node stopped reading `messages`, and the token counts at that point."""

    last_id: str | None = None
    seen: int = 0
    messages_tokens: int | None = None
    """Tokens of `messages` (None until first counted: BudgetNode counts them meanwhile)."""
    view_tokens: int | None = None
    """Tokens of `llm_input_messages` while a compacted view is active, else None."""
    estimated: bool = False
    """`messages_tokens` holds estimates of large tool results (`CompactionNode._measure`)."""

    @classmethod
    def read(cls, value: Any) -> _Cursor:
        if not isinstance(value, Mapping):
            return cls()
        return cls(
            last_id=value.get("last_id"),
            seen=int(value.get("seen") or 0),
            messages_tokens=value.get("messages_tokens"),
            view_tokens=value.get("view_tokens"),
            estimated=bool(value.get("estimated")),
        )

    def start(self, messages: Sequence[BaseMessage]) -> int | None:
        """Index of the first message not seen yet, or None if the history changed under us.

        The last message seen must still be where it was. A new message may carry its
        id: with an `operator.add` messages reducer two messages can share one (with
        `add_messages` they cannot), and that is an append, not an edit.
        """
        if self.seen == 0:
            return 0 if self.last_id is None else None
        if self.seen > len(messages):
            return None
        if self.last_id is None or messages[self.seen - 1].id == self.last_id:
            return self.seen
        return None

    @classmethod
    def at(
        cls,
        messages: Sequence[BaseMessage],
        *,
        messages_tokens: int | None,
        view_tokens: int | None = None,
        estimated: bool = False,
    ) -> _Cursor:
        """A cursor after the last of `messages`."""
        last_id = messages[-1].id if messages else None
        return cls(last_id, len(messages), messages_tokens, view_tokens, estimated)

    def dump(self) -> dict[str, Any]:
        dumped = {
            "last_id": self.last_id,
            "seen": self.seen,
            "messages_tokens": self.messages_tokens,
            "view_tokens": self.view_tokens,
        }
        if self.estimated:
            dumped["estimated"] = True
        return dumped


@dataclass
class _Step:
    """One step's reading of the state: what the next request would send."""

    messages: list[BaseMessage]
    messages_tokens: int | None
    view: list[BaseMessage] | None = None
    """The compacted view plus this step's new messages, while a view is active."""
    view_tokens: int | None = None
    overhead: int = 0
    """Tokens the request sends besides the messages (system prompt, tools), per BudgetNode."""
    used: int = 0
    size: int = 0
    new_request: bool = False
    """A user message arrived since the last step (relevance strategies recompact)."""
    estimated: bool = False
    """`messages_tokens` holds estimates of large tool results (see `_Cursor`)."""
    broken: str | None = None
    """How the new messages break tool-call pairing (`broken_pairing`), if they do."""

    def overhead_from(self, usage: Any) -> int:
        if usage is None or self.messages_tokens is None:
            return 0
        return max(0, int(_usage(usage, "used")) - self.messages_tokens)

    def cursor(self) -> dict[str, Any]:
        return _Cursor.at(
            self.messages,
            messages_tokens=self.messages_tokens,
            view_tokens=self.view_tokens,
            estimated=self.estimated and self.messages_tokens is not None,
        ).dump()


def _usage(usage: Any, field: str) -> Any:
    """A field of `context_usage`, whether it is a ContextUsage or its JSON."""
    return state_value(usage, field) if usage is not None else None


class CompactionNode(Runnable[Any, dict[str, Any]]):
    """Compacts what the model sees once the context passes `trigger`, down to `target`.

    Args:
        strategy: `"relevance"` (default), `"extract"`, `"window"`, or a strategy object
            (`RelevanceSelection`, `KeyMessageExtraction`, `SlidingWindow`, `LLMSummary`,
            `HybridSummary`).
        trigger: when to compact, measured on what the next request would send:
            `0.8` fires at 80 % of the window (reserved output counted as used, like
            `context_usage.percent`); `12_000` (or `("tokens", 12_000)`) at that many
            tokens; `("messages", 200)` at that many messages; `("reserved", 50_000)`
            when `used + 50_000 >= window`. A bare int up to 100 (`trigger=80`) is
            refused as a percent typed by mistake (`PERCENT_LIKE`); a token count that
            small is written `("tokens", 80)`.
        target: what a compaction leaves: `0.5` (half the window, reserved output
            included) or a token count (the same rule for a bare int up to 100).
        max_context_tokens: the window; default `context_usage.total` from a BudgetNode.
        reserved_output: tokens kept for the reply; default `context_usage.reserved_output`,
            else 0.
        model: tokenizer model for counting; default `context_usage.model`, else "gpt-4o".
        token_counter: count with this instead (`"approximate"` works too).
        offload_threshold: tool results over this many tokens are shown as previews with
            a `read_tool_result` reference (None: only when over budget).
        preview_tokens: size of a preview.
        rewrite_messages: replace `messages` itself (with a summary message) instead of
            writing `llm_input_messages`.
        name: the node name in the graph.

    Example:
        ```python
        from langgraph.prebuilt import create_react_agent
        from langgraph_ctx.nodes.compaction import CompactionAgentState, CompactionNode

        agent = create_react_agent(
            llm, tools=[*tools, read_tool_result],
            pre_model_hook=CompactionNode(HybridSummary(summary_llm),
                                          max_context_tokens=128_000),
            state_schema=CompactionAgentState,
        )
        ```
    """

    def __init__(
        self,
        strategy: StrategyLike = "relevance",
        *,
        trigger: Trigger = 0.8,
        target: float | int | tuple[Literal["fraction", "tokens"], float] = 0.5,
        max_context_tokens: int | None = None,
        reserved_output: int | None = None,
        model: str | None = None,
        token_counter: TokenCounter | Literal["approximate"] | None = None,
        offload_threshold: int | None = 500,
        preview_tokens: int = 160,
        rewrite_messages: bool = False,
        name: str = "compaction",
    ) -> None:
        self.strategy = resolve_strategy(strategy)
        self.trigger = _Rule.parse(
            trigger, label="trigger", kinds=("fraction", "tokens", "messages", "reserved")
        )
        self.target = _Rule.parse(target, label="target", kinds=("fraction", "tokens"))
        if self.trigger.kind == self.target.kind and self.target.value >= self.trigger.value:
            raise CompactionError(
                f"target {self.target.value:g} must be below trigger {self.trigger.value:g}, "
                "or every step would compact again"
            )
        for label, value in (
            ("max_context_tokens", max_context_tokens),
            ("reserved_output", reserved_output),
        ):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise CompactionError(f"{label} must be a non-negative int, got {value!r}")
        check_arguments(1, offload_threshold, preview_tokens)
        self.max_context_tokens = max_context_tokens
        self.reserved_output = reserved_output
        self.model = model
        self.token_counter = token_counter
        self.offload_threshold = offload_threshold
        self.preview_tokens = preview_tokens
        self.rewrite_messages = rewrite_messages
        self.name = name
        self._warned = False
        # threads this node wrote a cursor to: how many messages the state held then
        self._threads: dict[str, int] = {}
        self._counters: dict[str, MessageTokenCounter] = {}  # per tokenizer model

    def check_reducer(self, reducer: Any) -> None:
        """Raise `CompactionError` when `rewrite_messages` is on and `reducer` cannot remove.

        A rewrite replaces `messages` with `RemoveMessage(REMOVE_ALL_MESSAGES)` plus the
        compacted list, which `add_messages` applies; `operator.add` (which LangGraph
        allows) would append it all instead: the history would double at each compaction,
        every kept message under its id twice. `ContextPipeline.add_to` calls this with
        the reducer of the graph's `messages` channel (`None`: nothing to check).
        """
        if not self.rewrite_messages or not callable(reducer):
            return
        probe = SystemMessage("probe", id="langgraph-ctx-reducer-probe")
        try:
            result = reducer([probe], [RemoveMessage(id=REMOVE_ALL_MESSAGES)])
        except Exception:  # (a reducer that refuses the probe: nothing to tell)
            return
        if any(isinstance(m, RemoveMessage) or getattr(m, "id", None) == probe.id for m in result):
            raise CompactionError(
                "CompactionNode(rewrite_messages=True) needs a messages reducer that applies "
                "RemoveMessage (add_messages, as MessagesState declares it); this graph's "
                "appends it, so each compaction would add the compacted history to the whole "
                "one. Declare messages with add_messages, or leave rewrite_messages off "
                "(the node then writes llm_input_messages)"
            )

    # -- the one implementation -------------------------------------------------
    def steps(
        self, state: Any, thread_id: str | None = None
    ) -> Generator[Step, Any, dict[str, Any]]:
        """The node's work on `state` as a generator of model calls (see `compact`)."""
        return self.compact(
            list(state_messages(state)),
            usage=state_value(state, "context_usage"),
            cursor=state_value(state, "compaction_cursor"),
            view=state_value(state, VIEW_KEY),
            summary=state_value(state, "running_summary"),
            thread_id=thread_id,
        )

    def compact(
        self,
        messages: Sequence[BaseMessage],
        *,
        usage: Any,
        cursor: Any,
        view: Sequence[BaseMessage] | None,
        summary: Any,
        thread_id: str | None = None,
        message_counter: MessageTokenCounter | None = None,
        overhead: int | None = None,
    ) -> Generator[Step, Any, dict[str, Any]]:
        """Count, decide, compact (a summary may call a model) and return the state writes.

        The inputs are the state's keys: `messages`, `context_usage` (a BudgetNode's count
        of the request), `compaction_cursor`, `llm_input_messages` (the compacted view,
        without a composed prompt) and `running_summary`. `ContextPipeline` calls it with
        the active context and its own count; `steps` with the node's state.
        `message_counter`: a BudgetNode's per-message cache, shared when it counts as
        this node would (the pipeline passes its own, so a message is tokenized once).
        `overhead`: the tokens the request sends besides the messages (system prompt and
        tools), when the caller counted them apart: while the step `continues_view`,
        `usage` then need not count the whole history (the pipeline passes the count of
        an empty request, plus this); else it comes from `usage` minus the messages.
        """
        self._check_keys(cursor, view, thread_id, messages)
        self._remember(thread_id, len(messages))  # every step writes compaction_cursor
        model = self._tokenizer(usage)
        counter = self._counter(model, message_counter)
        past = self._message_counter(model, message_counter)
        now = self._measure(messages, cursor, view, usage, counter, overhead, past)
        window, reserved = self._window(usage)
        fires, why = self._fires(now.used, now.size, window, reserved)
        reselect = getattr(self.strategy, "reselect_each_request", False) and self._full_history
        if not fires and reselect and now.view is not None and now.new_request:
            # what is relevant depends on the request: a new one reselects, below the trigger
            fires, why = True, "the request changed: relevance selection runs again"
        if not fires and now.broken:
            # sent as it is, the request would be refused: compaction repairs it
            fires, why = True, f"repair: {now.broken}"
        if not fires:
            if now.view is not None and now.new_request and self._full_history:
                self._requery(now, counter)
            return self._carry_on(now)
        conv, target, limit = self._read(now, usage, counter, summary, window, reserved)
        compaction = yield from compaction_steps(
            conv,
            self.strategy,
            max_tokens=limit,
            target_tokens=target,
            tokenizer=counter_name(self.token_counter, self._tokenizer(usage)),
            reason=why,
        )
        return self._writes(compaction, now, counter)

    def continues_view(
        self, messages: Sequence[BaseMessage], cursor: Any, view: Sequence[BaseMessage] | None
    ) -> bool:
        """Whether a step on `messages` appends to the compacted view `view` (see `compact`).

        Then what the request sends is the view plus the new messages, and only those
        are counted: a caller that measures the request before `compact` (the pipeline)
        needs no count of the whole history, only the `overhead` besides the messages.
        False when no view is active, with `rewrite_messages`, or when the history
        changed under the cursor (the step starts over and counts everything).
        """
        if self.rewrite_messages or not view:
            return False
        state = _Cursor.read(cursor)
        if state.view_tokens is None or state.messages_tokens is None:
            return False
        return state.start(messages) is not None

    # -- its steps -------------------------------------------------------------------
    @property
    def _full_history(self) -> bool:
        return bool(getattr(self.strategy, "full_history", False)) and not self.rewrite_messages

    def _tokenizer(self, usage: Any) -> str:
        return self.model or _usage(usage, "model") or "gpt-4o"

    def _counter(self, model: str, shared: MessageTokenCounter | None) -> TokenCounter:
        """The counter for `model`: `count_tokens`' numbers, each message counted once.

        Compaction counts the same messages step after step (and every preview it sizes);
        with the default tokenizer the counts come from a per-message cache: `shared`
        when it counts for `model` with the built-in rules, else this node's own.
        """
        if self.token_counter is not None:
            return resolve_token_counter(self.token_counter, model)
        counter = self._message_counter(model, shared)
        assert counter is not None
        return counter.count_request

    def _message_counter(
        self, model: str, shared: MessageTokenCounter | None
    ) -> MessageTokenCounter | None:
        """The per-message counter `_counter` counts with (None with a `token_counter`)."""
        if self.token_counter is not None:
            return None
        if shared is not None and shared.model == model and shared.token_counter is None:
            return shared
        cached = self._counters.get(model)
        if cached is None:
            if len(self._counters) >= 8:  # a bound, not a registry
                self._counters.clear()
            cached = self._counters[model] = MessageTokenCounter(model)
        return cached

    def _window(self, usage: Any) -> tuple[int | None, int]:
        """The context window and the tokens reserved for the reply."""
        window = self.max_context_tokens or _usage(usage, "total")
        reserved = self.reserved_output
        if reserved is None:
            reserved = int(_usage(usage, "reserved_output") or 0)
        return window, reserved

    def _requery(self, now: _Step, counter: TokenCounter) -> None:
        """A new request below the trigger: the previews in view follow it.

        Relevance selection shows, in a preview, the lines the request matches; the
        view stays until compaction fires again, so at each new user message the
        previews in view are made again for it (`requery_previews`: only those, and
        cached per matching words). What the rest of the view holds changes when
        compaction fires (or at each request with `reselect_each_request=True`).
        """
        assert now.view is not None and now.view_tokens is not None
        view, delta = requery_previews(
            now.view,
            now.messages,
            request_query(now.messages),
            counter=counter,
            preview_tokens=self.preview_tokens,
        )
        if any(new is not old for new, old in zip(view, now.view, strict=True)):
            now.view, now.view_tokens = view, now.view_tokens + delta
            now.used += delta

    def _carry_on(self, now: _Step) -> dict[str, Any]:
        """Below the trigger: move the cursor, keep the view (plus this step's messages)."""
        update: dict[str, Any] = {"compaction_cursor": now.cursor()}
        if now.view is not None:
            update["llm_input_messages"] = now.view
        return update

    def _read(
        self,
        now: _Step,
        usage: Any,
        counter: TokenCounter,
        summary: Any,
        window: int | None,
        reserved: int,
    ) -> tuple[Conversation, int, int]:
        """What to compact (the view, else the messages), the target and the hard budget.

        The target is a goal; the hard budget (the window minus the reply's reserve and
        what the request sends besides the messages) bounds the current round, which the
        model needs whole unless even the hard budget cannot hold it. A strategy with
        `full_history` (relevance selection) always reads the messages: what an earlier
        compaction left out may be what the new request needs.
        """
        source = now.view if now.view is not None and not self._full_history else now.messages
        conv = Conversation.build(
            source,
            counter=counter,
            offload_threshold=self.offload_threshold,
            preview_tokens=self.preview_tokens,
            summary=RunningSummary.model_validate(summary) if summary else None,
        )
        if now.view is None:  # now counted: what the request sends besides the messages
            now.messages_tokens = conv.tokens_before
            now.overhead = now.overhead_from(usage)
        elif source is now.messages:  # counted in full: estimates give way to counts
            now.messages_tokens, now.estimated = conv.tokens_before, False
        marker = self._marker_room(conv)  # room for the compaction marker
        max_tokens = self._target_tokens(window, reserved) - now.overhead - marker
        hard = int(window) - reserved - now.overhead - marker if window else None
        if max_tokens < 1:
            if hard is None or hard < 1:
                raise CompactionError(
                    f"target {self.target.value:g} leaves no room for messages: the system "
                    f"prompt and tools alone take {now.overhead} tokens; raise target or the "
                    "context window (a larger budget preset, or max_context_tokens)"
                )
            # The target is a goal: with the system prompt and tools over it, the messages
            # get what the window leaves them (each compaction then takes them to that).
            max_tokens = hard
        limit = max_tokens if hard is None else max(max_tokens, hard)
        return conv, max_tokens, limit

    def _marker_room(self, conv: Conversation) -> int:
        """Room the `rewrite_messages` marker takes when there is no summary yet."""
        if self.rewrite_messages and conv.previous_summary is None:
            return conv.count(_marker(0, 0)) + 4
        return 0

    def _writes(self, compaction: Compaction, now: _Step, counter: TokenCounter) -> dict[str, Any]:
        """The state writes of a compaction: record, summary, and the view (or messages)."""
        record = compaction.record
        update: dict[str, Any] = {"compaction_log": [record.model_dump(mode="json")]}
        if record.summary is not None:
            update["running_summary"] = record.summary.model_dump(mode="json")
        if self.rewrite_messages:
            source = now.view if now.view is not None else now.messages
            kept = self._for_rewrite(compaction.messages, source, record)
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]
            update["compaction_cursor"] = _Cursor.at(kept, messages_tokens=counter(kept)).dump()
        else:
            update["llm_input_messages"] = compaction.messages
            now.view_tokens = record.tokens_after
            update["compaction_cursor"] = now.cursor()
        return update

    def _measure(
        self,
        messages: Sequence[BaseMessage],
        cursor_value: Any,
        view: Sequence[BaseMessage] | None,
        usage: Any,
        counter: TokenCounter,
        overhead: int | None = None,
        past: MessageTokenCounter | None = None,
    ) -> _Step:
        """What the next request would send, counting only the messages new since last step.

        While a view is active, a large new tool result is counted only until its count
        passes `offload_threshold` (`past`: `MessageTokenCounter.count_past`): its
        preview is what is sent, counted exactly, and its header states the size by an
        estimate (`TokenEstimate`). When the caller gives the `overhead` (the pipeline),
        `messages_tokens` then adds that estimate (the cursor says so: `estimated`);
        without it, the overhead is `usage` minus `messages_tokens`, which must be
        exact: the new messages are counted in full (a BudgetNode that measured the
        request counted them already), and an estimated total is counted again.
        """
        messages = list(messages)
        base = counter([])

        def count(items: Sequence[BaseMessage]) -> int:
            return sum(max(0, counter([m]) - base) for m in items)

        cursor = _Cursor.read(cursor_value)
        start = cursor.start(messages)
        if start is None:  # the history was edited, reverted or replaced: start over
            cursor, start = _Cursor(), 0
        new = messages[start:]
        now = _Step(messages=messages, messages_tokens=cursor.messages_tokens)
        now.new_request = any(m.type == "human" for m in new)
        now.broken = broken_pairing(messages, start)

        def count_new() -> None:  # the new messages counted in full
            if now.messages_tokens is not None:
                now.messages_tokens += count(new)
            elif usage is None:
                now.messages_tokens = counter(messages)

        if not self.rewrite_messages and cursor.view_tokens is not None and view:
            shown = [self._offloaded(m, counter, base, past) for m in new]
            appended = [m for m, _, _ in shown]
            now.view = [*view, *appended]
            now.view_tokens = cursor.view_tokens + count(appended)
            if overhead is not None and now.messages_tokens is not None:
                now.messages_tokens += sum(
                    count([m]) if tokens is None else tokens  # (counted: cached)
                    for m, tokens, _ in shown
                )
                now.estimated = cursor.estimated or not all(exact for _, _, exact in shown)
            elif cursor.estimated:  # the overhead comes from it: count it exactly
                now.messages_tokens = counter(messages)
            else:
                count_new()
            now.overhead = overhead if overhead is not None else now.overhead_from(usage)
            now.used, now.size = now.view_tokens + now.overhead, len(now.view)
        else:
            count_new()
            now.used = int(_usage(usage, "used")) if usage is not None else now.messages_tokens or 0
            now.size = len(messages)
        return now

    # -- Runnable doors: sync and async share `steps` ---------------------------
    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the node (sync): summaries use `model.invoke`."""
        return drive_sync(self.steps(input, thread_key_of(config)))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Run the node (async): summaries use `await model.ainvoke`."""
        await load_tokenizer_off_loop(self.model or "gpt-4o", self.token_counter)
        return await drive_async(self.steps(input, thread_key_of(config)))

    def __call__(self, state: Any) -> dict[str, Any]:
        return self.invoke(state)

    def __repr__(self) -> str:
        return (
            f"CompactionNode(strategy={self.strategy.name!r}, trigger={self.trigger.kind}:"
            f"{self.trigger.value:g}, target={self.target.kind}:{self.target.value:g})"
        )

    # -- pieces ------------------------------------------------------------------
    def _fires(self, used: int, size: int, window: int | None, reserved: int) -> tuple[bool, str]:
        kind, value = self.trigger.kind, self.trigger.value
        if kind == "messages":
            return size >= value, f"trigger: {size} messages >= {value:g}"
        if kind == "tokens":
            return used >= value, f"trigger: {used} tokens >= {value:g}"
        window = self._need_window(window, "trigger")
        if kind == "reserved":
            return used + value >= window, (
                f"trigger: {used} used + {value:g} reserved >= {window} window"
            )
        return (used + reserved) / window >= value, (
            f"trigger: ({used} used + {reserved} reserved) / {window} >= {value:.0%}"
        )

    def _target_tokens(self, window: int | None, reserved: int) -> int:
        if self.target.kind == "tokens":
            return int(self.target.value)
        return int(self.target.value * self._need_window(window, "target")) - reserved

    def _need_window(self, window: int | None, what: str) -> int:
        if not window:
            raise CompactionError(
                f"CompactionNode's {what} is a fraction of the context window, which is "
                "unknown: pass max_context_tokens=..., or run a BudgetNode before it"
            )
        return int(window)

    def _offloaded(
        self,
        message: BaseMessage,
        counter: TokenCounter,
        base: int,
        past: MessageTokenCounter | None = None,
    ) -> tuple[BaseMessage, int | None, bool]:
        """A new message as the compacted view shows it (large tool results as previews),
        and the message's own tokens: exact (True), or an estimate (False); None when
        it was not counted here (not a tool result to offload).

        With `past`, a tool result is counted only until it passes `offload_threshold`
        (`count_past`); the preview's header then states an estimate of its size. Whether
        a result is estimated depends on the result alone (never on what a cache holds),
        so a cold process sends what a warm one sends.
        """
        threshold = self.offload_threshold
        if (
            threshold is None
            or not isinstance(message, ToolMessage)
            or is_tool_result_page(message)
            or is_preview(message)
        ):
            return message, None, True
        if past is not None:
            size, exact, estimate = past.count_past(message, threshold)
        else:
            size = estimate = counter([message]) - base
            exact = True
        if size <= threshold:  # (a lower bound is always past the threshold)
            return message, size, True
        preview, cost = preview_of(
            message,
            tokens=size if exact else TokenEstimate.of(estimate),
            preview_tokens=self.preview_tokens,
            count=lambda m: counter([m]) - base,
            counted_by=(counter, base),
        )
        if cost < size:  # less than the result (or than a lower bound of it)
            return preview, size if exact else estimate, exact
        whole = counter([message]) - base
        return (preview if cost < whole else message), whole, True

    def _for_rewrite(
        self, compacted: list[BaseMessage], source: Sequence[BaseMessage], record: Any
    ) -> list[BaseMessage]:
        """The compacted list as new `messages`: previews carry the full text in `artifact`.

        Without a running summary, a factual marker says what was compacted.
        """
        originals = {
            m.tool_call_id: m for m in source if isinstance(m, ToolMessage) and not is_preview(m)
        }
        result: list[BaseMessage] = []
        for message in compacted:
            original = originals.get(getattr(message, "tool_call_id", None) or "")
            if is_preview(message) and original is not None:
                message = message.model_copy(
                    update={
                        "artifact": {
                            OFFLOADED_KEY: original.content,
                            "artifact": original.artifact,
                        }
                    }
                )
            result.append(message)
        if record.summary is None and record.dropped:
            dropped_tokens = sum(d.tokens for d in record.dropped)
            at = next((i for i, m in enumerate(result) if m.type != "system"), len(result))
            result.insert(at, _marker(len(record.dropped), dropped_tokens))
        return result

    def _check_keys(
        self,
        cursor: Any,
        view: Sequence[BaseMessage] | None,
        thread_id: str | None,
        messages: Sequence[BaseMessage],
    ) -> None:
        """Warn once when the graph state drops the keys this node writes.

        LangGraph silently ignores writes to keys the state schema lacks; without
        `compaction_cursor` and `llm_input_messages` the model would keep seeing the
        whole history, so a thread this node wrote to must show them once the step it
        wrote in was saved: the model's reply to that request follows what the node saw
        then. (A step that failed saved nothing: a retry of its model call, by the host's
        retry middleware or a new run, finds no cursor, and that is no sign of a dropped key.)
        """
        if thread_id is None or self._warned:
            return
        missing = []
        seen = self._threads.get(thread_id)
        if (
            cursor is None
            and seen is not None
            and len(messages) > seen
            and isinstance(messages[seen], AIMessage)
        ):
            missing.append("compaction_cursor")
        if cursor_has_view(cursor) and not self.rewrite_messages and not view:
            missing.append("llm_input_messages")
        if missing:
            self._warned = True
            warnings.warn(
                f"CompactionNode's writes to {missing} did not reach the state: declare "
                "llm_input_messages, compaction_cursor, running_summary and compaction_log "
                "in the graph state (see CompactionState), or the model keeps seeing the "
                "whole history",
                DroppedWritesWarning,
                stacklevel=4,
            )

    def _remember(self, thread_id: str | None, seen: int) -> None:
        if thread_id is not None and not self._warned:
            if len(self._threads) >= 10_000:  # a bound, not a registry: forget and go on
                self._threads.clear()
            self._threads[thread_id] = seen

    def discard_writes(self, thread_id: str | None) -> None:
        """The step this node last wrote for on ``thread_id`` failed after it (the model
        call raised, maybe for the host's retry middleware, which may then save a reply of
        its own): nothing it wrote was saved, so its next step expects no cursor."""
        if thread_id is not None:
            self._threads.pop(thread_id, None)


def broken_pairing(messages: Sequence[BaseMessage], start: int = 0) -> str | None:
    """How the messages from `start` on break tool-call pairing, or None if they do not.

    Every tool call must be answered by the tool results right after its assistant
    message, and every tool result must answer a call of that message (OpenAI and
    Anthropic refuse anything else). With an `operator.add` messages reducer a history
    can repeat a call or a result (the same message appended again; `add_messages`
    would merge it), and the view only appends new messages: this finds it, reading the
    new messages and the tool block they continue (what came before was read at
    earlier steps). An assistant message at the end whose calls are not answered yet
    is not a break (its tools have not run).

    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    >>> result = ToolMessage("done", tool_call_id="c1")
    >>> broken_pairing([HumanMessage("go"), call, result, HumanMessage("again")]) is None
    True
    >>> broken_pairing([HumanMessage("go"), call, result, result, HumanMessage("again")])
    "tool result 'c1' answers no call of the assistant message before it"
    """
    j = max(0, min(start, len(messages)))
    while j > 0 and isinstance(messages[j - 1], ToolMessage):
        j -= 1
    if j > 0 and tool_calls_of(messages[j - 1]):
        j -= 1
    pending: set[str] | None = None  # calls of the assistant message being answered
    for message in messages[j:]:
        if isinstance(message, ToolMessage):
            if pending is None or message.tool_call_id not in pending:
                return (
                    f"tool result {message.tool_call_id!r} answers no call of the assistant "
                    "message before it"
                )
            pending.discard(message.tool_call_id)
            continue
        if isinstance(message, RemoveMessage):
            continue
        if pending:
            return f"tool call(s) {sorted(pending)} are not answered"
        calls = tool_calls_of(message)
        ids = {c.get("id") for c in calls}
        if None in ids or "" in ids or len(ids) < len(calls):
            return "an assistant message has a tool call without a unique id"
        pending = ids if calls else None
    return None


def _marker(count: int, tokens: int) -> BaseMessage:
    """The summary message of `rewrite_messages` mode when no model summary exists."""
    return SystemMessage(
        f"{SUMMARY_PREFIXES[1]}\n{count} earlier messages ({tokens} tokens) were compacted "
        "without a model summary; they remain in the conversation log.",
        id="langgraph-ctx-compaction-marker",
    )
