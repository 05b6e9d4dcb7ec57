"""`SystemPromptNode`: compose the system prompt of the current mode into the model's input.

```python
from langgraph.graph import START, StateGraph
from langgraph_ctx.context.prompt import PromptParts
from langgraph_ctx.nodes.prompt import SystemPromptNode
from langgraph_ctx.nodes.state import ContextState

def call_model(state):
    return {"messages": [llm.invoke(state["llm_input_messages"])]}

builder = StateGraph(ContextState)
builder.add_node("prompt", SystemPromptNode(PromptParts(persona="You are Ada.")))
builder.add_node("model", call_model)
builder.add_edge(START, "prompt")
builder.add_edge("prompt", "model")
graph = builder.compile()
graph.invoke({"messages": [("user", "hi")], "mode": "agent"})
```

The node reads `mode` and `run_context` from the state and writes:

- `system_prompt`: the composed text (what `BudgetNode` counts as the system component),
  written when it changes;
- `llm_input_messages`: the composed prompt as a system message, then the conversation
  (`model_input`: your own leading system messages and the running summary first, other
  historical system messages left out).

The host's own prompt (`system_prompt=`, or the one an agent was built with, which the
middleware passes on) comes first, verbatim, then the mode's sections: the model gets one
system message. A persona that the current mode leaves out (chat mode never carries it)
is not silently absent: the node warns once (`PersonaDroppedWarning`).

It never writes `messages`: the prompt is not part of the history, so switching `mode`
changes only the system prefix of the next request. When `CompactionNode` runs before it,
the conversation is compaction's view (`llm_input_messages`); otherwise `messages`.

`context_pipeline` (langgraph_ctx.nodes.pipeline) runs this node together with budget
and compaction, counting the prompt in the budget of the same step.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableConfig

from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.prompt import (
    Mode,
    PromptParts,
    compose_system_prompt,
    is_system_prompt_message,
    model_input,
    read_mode,
    read_run_context,
)
from langgraph_ctx.errors import PersonaDroppedWarning
from langgraph_ctx.nodes.state import state_messages, state_value, view_active

__all__ = ["SystemPromptNode", "conversation_view"]


def conversation_view(state: Any) -> list[BaseMessage]:
    """The conversation the model should see now, without any composed system prompt.

    Compaction's view (`llm_input_messages`) while one is active, else `messages`.
    A view is active exactly when `CompactionNode` counted it in `compaction_cursor`
    (`view_tokens`); without that, `llm_input_messages` is the previous step's request
    and would be stale.
    """
    view = state_value(state, VIEW_KEY)
    if view_active(state) and view:
        return [m for m in view if not is_system_prompt_message(m)]
    return list(state_messages(state))


class SystemPromptNode(Runnable[Any, dict[str, Any]]):
    """Writes the system prompt of the current mode into what the model is sent.

    Args:
        parts: the texts to compose from (`PromptParts`: base rules per mode, tool policy,
            persona, run directive, post-run protocol; strings or Markdown files).
        mode: the mode when the state has none (`"chat"`, `"agent"`, `"run"`).
        output_key: where the model input goes (`llm_input_messages`, the convention of
            `create_react_agent(pre_model_hook=...)`).
        system_prompt: the host's own prompt: sent first, verbatim, in the same system
            message as the mode's sections.

    Example:
        ```python
        node = SystemPromptNode(PromptParts(persona="You are Ada."), mode="agent")
        update = node.invoke({"messages": [("user", "hi")]})
        update["llm_input_messages"][0].content.startswith("You are an agent")  # True
        node.compose({"mode": "chat"})  # the chat prompt: no persona (warns once)
        SystemPromptNode(system_prompt="ALWAYS ANSWER IN FRENCH.").compose({})
        # 'ALWAYS ANSWER IN FRENCH.\\n\\nYou are a helpful assistant ...'
        ```
    """

    def __init__(
        self,
        parts: PromptParts | None = None,
        *,
        mode: Mode = "chat",
        output_key: str = "llm_input_messages",
        system_prompt: str | None = None,
    ) -> None:
        self.parts = parts or PromptParts()
        self.mode: Mode = read_mode(mode)
        self.output_key = output_key
        self.system_prompt = system_prompt or None
        self._persona_warned = False

    def compose(self, state: Any, *, host: str | None = None) -> str:
        """The system prompt for `state` (its `mode` and `run_context`).

        `host`: the prompt the host's agent was built with (the middleware passes the
        request's); it goes first, then this node's `system_prompt` (unless the same),
        then the mode's sections, each separated by a blank line.
        """
        mode = read_mode(state_value(state, "mode"), self.mode)
        if mode == "chat" and self.parts.persona and not self._persona_warned:
            self._persona_warned = True
            warnings.warn(
                "PromptParts.persona is set, but the prompt of mode 'chat' leaves it out "
                "(chat mode never carries the persona): the model gets no persona until "
                "the state's mode is 'agent' or 'run'. Use mode='agent', or put the persona "
                "in system_prompt= to send it in every mode.",
                PersonaDroppedWarning,
                stacklevel=2,
            )
        own = compose_system_prompt(
            mode, self.parts, run=read_run_context(state_value(state, "run_context"))
        )
        hosts = [host] if host else []
        if self.system_prompt and self.system_prompt != host:
            hosts.append(self.system_prompt)
        return "\n\n".join([*hosts, own])

    def request(self, text: str | None, conversation: Sequence[Any]) -> list[BaseMessage]:
        """What the model is sent: the prompt `text`, then the conversation (`model_input`)."""
        return model_input(text, convert_to_messages(conversation))

    def writes(self, state: Any, text: str) -> dict[str, Any]:
        """The state writes of composing `text`: `system_prompt`, only when it changed
        (every write is stored by the checkpointer)."""
        return {"system_prompt": text} if text != state_value(state, "system_prompt") else {}

    def __call__(self, state: Any) -> dict[str, Any]:
        text = self.compose(state)
        request = self.request(text, conversation_view(state))
        return {self.output_key: request, **self.writes(state, text)}

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self(input)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self(input)

    def __repr__(self) -> str:
        persona = "with persona" if self.parts.persona else "no persona"
        return f"SystemPromptNode(mode={self.mode!r}, {persona})"
