"""`BudgetNode`: measure the next model request against a token budget.

```python
from langgraph.graph import START, StateGraph
from langgraph_ctx.nodes.budget import BudgetNode, BudgetState

builder = StateGraph(BudgetState)
builder.add_node("budget", BudgetNode("personalized", model="gpt-4o"))
builder.add_node("model", call_model)
builder.add_edge(START, "budget")
builder.add_edge("budget", "model")
graph = builder.compile()
graph.invoke({"messages": [("user", "Hi!")]})["context_usage"]
```

The node reads `messages` (and `system_prompt` and `tools` when the state has them)
and writes `{"context_usage": ContextUsage}`; it never changes the messages. As a
`create_react_agent(pre_model_hook=...)` it returns only `context_usage`: in
langgraph 1.2 the agent then calls the model with `llm_input_messages` or `messages`
from the state, so nothing else is needed. Give the agent a `state_schema` with a
`context_usage` key (`BudgetAgentState`) to keep the value; without one, langgraph
drops the key and the agent runs unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_ctx.context.budget import ContextBudget, ContextUsage, compute_usage
from langgraph_ctx.context.tokens import (
    MessageTokenCounter,
    TokenCounter,
    encoding_loaded,
    load_encoding,
    model_facts,
    model_family,
)
from langgraph_ctx.nodes.state import (
    BudgetAgentState,
    BudgetState,
    state_messages,
    state_value,
)

__all__ = ["BudgetAgentState", "BudgetNode", "BudgetState", "load_tokenizer_off_loop"]


async def load_tokenizer_off_loop(model: str, token_counter: Any = None) -> None:
    """Load `model`'s BPE data in a thread the first time (about 0.5 s), off the event loop.

    Every async door that counts tokens awaits this first (`BudgetNode`, `CompactionNode`,
    the pipeline and the middleware). Nothing to load with a custom `token_counter`.
    """
    if token_counter is not None:
        return
    encoding = model_family(model).encoding
    if encoding and not encoding_loaded(encoding):
        await asyncio.to_thread(load_encoding, encoding)


class BudgetNode(Runnable[Any, dict[str, Any]]):
    """Writes `context_usage`: what the next model request uses of a token budget.

    Counts are exact for OpenAI models and approximate for others (see
    `langgraph_ctx.context.tokens`); provider `usage_metadata` on the last AI message
    anchors them when present. Each message is counted once and cached by id and
    content, so a step costs only the messages it adds.

    Example:
        ```python
        node = BudgetNode("fast", model="gpt-4o")           # preset name or ContextBudget
        node({"messages": [("user", "Hi!")]})["context_usage"].used  # 9

        agent = create_react_agent(
            llm, tools,
            pre_model_hook=BudgetNode(model=llm.bind_tools(tools), system_prompt=prompt),
            state_schema=BudgetAgentState,
        )
        ```

    Args:
        budget: A `ContextBudget`, a preset name (`"fast"`, `"personalized"`,
            `"planning"`), or None for the model's whole context window
            (`ContextBudget.for_model`).
        model: Model name, or the chat model itself (its name, bound tools and LangChain
            profile are read: `model.profile["max_input_tokens"]` is its window).
        context_window: The model's context window in tokens, for `budget=None` when the
            model has no profile and its name is not a well-known one
            (`my-local-llama`). A profile's window wins over it.
        tools: Tools bound to the model; a `tools` key in the state takes precedence.
        system_prompt: System prompt the model node adds (e.g. the agent's `prompt`);
            a `system_prompt` key in the state takes precedence.
        token_counter: Count each message with this function instead of the built-in
            rules (called with one message at a time, results cached).
        messages_key: State key to count (e.g. `"llm_input_messages"` after compaction).
        output_key: State key the usage is written to.
        calibrate: Anchor counts on provider `usage_metadata` when available.
        cache_size: Bound of the per-message count cache.
    """

    def __init__(
        self,
        budget: ContextBudget | str | None = None,
        *,
        model: str | Runnable[Any, Any] = "gpt-4o",
        context_window: int | None = None,
        tools: Sequence[Any] | None = None,
        system_prompt: str | None = None,
        token_counter: TokenCounter | None = None,
        messages_key: str = "messages",
        output_key: str = "context_usage",
        calibrate: bool = True,
        cache_size: int = 50_000,
    ) -> None:
        facts = model_facts(model, context_window=context_window)
        if budget is not None and context_window is not None:
            raise ValueError(
                "context_window applies to budget=None (the model's whole window); "
                f"budget={budget!r} already says how many tokens to use"
            )
        if isinstance(budget, str):
            budget = ContextBudget.preset(budget)
        elif budget is None:
            budget = ContextBudget.for_model(facts.name, context_window=facts.context_window)
        elif not isinstance(budget, ContextBudget):
            # A number failed on the first call, far from its cause: refused here.
            raise TypeError(
                "budget must be a preset name, a ContextBudget or None (the model's window); "
                f"got {budget!r}: for a window of N tokens, pass context_window=N, or "
                "ContextBudget(total=N, output_reserve=...)"
            )
        self.budget: ContextBudget = budget
        self.model = facts.name
        self.tools = list(tools) if tools is not None else facts.tools
        self.system_prompt = system_prompt
        self.messages_key = messages_key
        self.output_key = output_key
        self.calibrate = calibrate
        self.counter = MessageTokenCounter(
            facts.name, token_counter=token_counter, max_entries=cache_size
        )

    # -- the one implementation ---------------------------------------------
    def usage(self, state: Any) -> ContextUsage:
        """The `ContextUsage` for `state` (a dict or an object with attributes)."""
        messages = state_messages(state, self.messages_key)
        return self.measure(
            messages,
            system_prompt=self.system_prompt_of(state),
            tools=self.tools_of(state),
        )

    def measure(
        self,
        messages: Sequence[Any],
        *,
        system_prompt: str | None,
        tools: Sequence[Any] | None,
        calibrate: bool | None = None,
    ) -> ContextUsage:
        """The `ContextUsage` of a request: these messages, system prompt and tools.

        `calibrate`: anchor on provider usage (default: the node's `calibrate`); the
        pipeline turns it off when the measured request is not a prefix of this one.
        """
        return compute_usage(
            messages,
            self.budget,
            counter=self.counter,
            system_prompt=system_prompt,
            tools=tools,
            calibrate=self.calibrate if calibrate is None else calibrate,
            model=self.model,
        )

    def count(self, message: BaseMessage) -> int:
        """Tokens of one message (cached), as `measure` counts it."""
        return self.counter.count(message)

    def system_prompt_of(self, state: Any) -> str | None:
        """The system prompt a request of `state` sends: the state's, else the node's."""
        system_prompt = state_value(state, "system_prompt")
        return system_prompt if isinstance(system_prompt, str) else self.system_prompt

    def tools_of(self, state: Any) -> Sequence[Any] | None:
        """The tools a request of `state` sends: the state's `tools`, else the node's."""
        tools = state_value(state, "tools")
        if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
            return self.tools
        return tools

    def __call__(self, state: Any) -> dict[str, Any]:
        return {self.output_key: self.usage(state)}

    # -- Runnable doors: sync and async share `usage` -------------------------
    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self(input)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        await self.load_tokenizer()
        return self(input)

    async def load_tokenizer(self) -> None:
        """Load this node's tokenizer off the event loop (see `load_tokenizer_off_loop`)."""
        await load_tokenizer_off_loop(self.model, self.counter.token_counter)

    def __repr__(self) -> str:
        return f"BudgetNode(budget={self.budget.name or self.budget.total!r}, model={self.model!r})"
