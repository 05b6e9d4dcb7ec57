"""The chat model the examples use: a real one if you have a key, else offline.

``chat_model()`` returns ``ChatOpenAI`` when ``OPENAI_API_KEY`` is set and
``langchain-openai`` is installed, and otherwise `OfflineChatModel`, a
deterministic `BaseChatModel` that needs no network: the same conversation
gives the same answers on every run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class OfflineChatModel(BaseChatModel):
    """Deterministic offline chat model for demos and tests.

    * Without tools it answers from the last user message.
    * With tools bound, a user message that names a tool gets a call to it
      (arguments taken from the words after the tool name); once the tool
      answered, the model reports the result.
    * It reports ``usage_metadata`` like a provider would (whitespace words).
    """

    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "offline-demo"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:  # type: ignore[override]
        specs = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self.model_copy(update={"tools": specs})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._reply(messages)
        words = sum(len(str(m.content).split()) for m in messages)
        reply.usage_metadata = {
            "input_tokens": words,
            "output_tokens": len(str(reply.content).split()),
            "total_tokens": words + len(str(reply.content).split()),
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else HumanMessage(content="")
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"The {last.name or 'tool'} tool says: {last.content}")
        users = [m for m in messages if isinstance(m, HumanMessage)]
        text = str(users[-1].content) if users else ""
        for spec in self.tools:
            name = spec["function"]["name"]
            if name in text:
                params = list(spec["function"].get("parameters", {}).get("properties", {}))
                rest = text.split(name, 1)[1].strip(" :?.!") or text
                args = {params[0]: rest} if params else {}
                call = {"name": name, "args": args, "id": f"call_{len(messages)}"}
                return AIMessage(content="", tool_calls=[call])
        topic = text.rstrip("?!. ").split()[-1] if text.split() else "that"
        return AIMessage(
            content=f"(offline model, turn {len(users)}) Noted: {text!r}. "
            f"Tell me more about {topic}."
        )


def chat_model(**kwargs: Any) -> BaseChatModel:
    """``ChatOpenAI`` with ``OPENAI_API_KEY`` set, else `OfflineChatModel`."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            print("OPENAI_API_KEY is set but langchain-openai is not installed; staying offline")
        else:
            return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), **kwargs)
    return OfflineChatModel()


__all__ = ["OfflineChatModel", "chat_model"]
