"""The chat model the examples use: a real one if you have a key, else offline.

``chat_model()`` returns ``ChatOpenAI`` when ``OPENAI_API_KEY`` is set and
``langchain-openai`` is installed, and otherwise `OfflineChatModel`, a
deterministic `BaseChatModel` that needs no network: the same conversation
gives the same answers on every run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langgraph_ctx.context.tokens import count_tokens

_TOOL_ECHO = 240  # characters of a tool result repeated in the offline answer


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


class OfflineChatModel(BaseChatModel):
    """Deterministic offline chat model for demos and tests.

    * Without tools it answers from the last user message.
    * With tools bound, a user message that names a tool gets a call to it
      (arguments taken from the words after the tool name); once the tool
      answered, the model reports the result (its first characters).
    * It streams its answer word by word, and reports ``usage_metadata`` like a
      provider would (input tokens counted exactly for gpt-4o, system prompt and
      tool schemas included).
    * ``interrupt_on="essay"``: a request containing that word is cut off halfway
      through the streamed answer: the stream stalls for ``stall_seconds``
      (``interrupt="stall"``, for a model node's timeout to catch) or raises a
      ``ConnectionError`` (``interrupt="error"``).
    * After such a cut, "continue" gets the rest of the interrupted answer: the
      model reads the partial reply in front of the ``LLM_ERROR`` block and
      carries on from there.
    """

    tools: list[dict[str, Any]] = Field(default_factory=list)
    interrupt_on: str | None = None
    interrupt: Literal["stall", "error"] = "stall"
    stall_seconds: float = 5.0

    @property
    def _llm_type(self) -> str:
        return "offline-demo"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:  # type: ignore[override]
        specs = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self.model_copy(update={"tools": specs})

    # -- LangChain's two entry points ---------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._reply(messages)
        reply.usage_metadata = self._usage(messages, reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        usage = self._usage(messages, reply)
        if reply.tool_calls:
            chunks = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(reply.tool_calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content="", tool_call_chunks=chunks, usage_metadata=usage, chunk_position="last"
                )
            )
            return
        words = _text(reply).split(" ")
        cut = len(words) // 2 if self._interrupted(messages) else None
        for i, word in enumerate(words):
            if i == cut:
                if self.interrupt == "error":
                    raise ConnectionError("connection reset by peer (simulated)")
                time.sleep(self.stall_seconds)
            last = i == len(words) - 1
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word if last else word + " ",
                    usage_metadata=usage if last else None,
                    chunk_position="last" if last else None,
                )
            )

    # -- behaviour ----------------------------------------------------------------------
    def _interrupted(self, messages: list[BaseMessage]) -> bool:
        users = [m for m in messages if isinstance(m, HumanMessage)]
        return bool(self.interrupt_on and users and self.interrupt_on in _text(users[-1]))

    def _usage(self, messages: list[BaseMessage], reply: AIMessage) -> dict[str, int]:
        sent = count_tokens(messages, model="gpt-4o", tools=self.tools or None)
        out = count_tokens([reply], model="gpt-4o") - 3
        return {"input_tokens": sent, "output_tokens": out, "total_tokens": sent + out}

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else HumanMessage(content="")
        if isinstance(last, ToolMessage):
            said = " ".join(_text(last).split())
            if len(said) > _TOOL_ECHO:
                said = said[:_TOOL_ECHO] + "…"
            return AIMessage(content=f"The {last.name or 'tool'} tool says: {said}")
        users = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        text = _text(messages[users[-1]]) if users else ""
        resumed = self._resume(messages, users)
        if resumed is not None:
            return AIMessage(content=resumed)
        for spec in self.tools:
            name = spec["function"]["name"]
            if name in text:
                params = list(spec["function"].get("parameters", {}).get("properties", {}))
                rest = text.split(name, 1)[1].strip(" :?.!") or text
                args = {params[0]: rest} if params else {}
                call = {"name": name, "args": args, "id": f"call_{len(messages)}"}
                return AIMessage(content="", tool_calls=[call])
        topic = text.rstrip("?!. ").split()[-1] if text.split() else "that"
        answer = f"(offline model, turn {len(users)}) Noted: {text!r}. Tell me more about {topic}."
        if self.interrupt_on and self.interrupt_on in text:
            answer += (
                " Here is a longer answer, written out word by word: first the context, "
                "then the main argument, then the examples that support it, and finally "
                "a short conclusion that ties the pieces together."
            )
        mode = _mode(messages)
        return AIMessage(content=f"[{mode}] {answer}" if mode else answer)

    def _resume(self, messages: list[BaseMessage], users: list[int]) -> str | None:
        """After an LLM_ERROR reply, "continue" gets the rest of the interrupted answer."""
        if not users or _text(messages[users[-1]]).strip().lower() != "continue":
            return None
        before = messages[: users[-1]]
        broken = next((m for m in reversed(before) if isinstance(m, AIMessage)), None)
        if broken is None or "LLM_ERROR" not in _text(broken):
            return None
        partial = _text(broken).split("LLM_ERROR", 1)[0].strip()
        asked = max((i for i in users if i < before.index(broken)), default=None)
        if asked is None:
            return None
        full = _text(self._reply(before[: asked + 1]))
        rest = full[len(partial) :].strip() if full.startswith(partial) else full
        return f"(resuming after the error) … {rest}"


def _mode(messages: list[BaseMessage]) -> str | None:
    """The active mode named in the system prompt's MODE banner, if any."""
    for message in messages:
        if isinstance(message, SystemMessage) and "MODE\n- active: " in _text(message):
            return _text(message).split("MODE\n- active: ", 1)[1].split()[0]
    return None


def chat_model(**kwargs: Any) -> BaseChatModel:
    """``ChatOpenAI`` with ``OPENAI_API_KEY`` set, else `OfflineChatModel` (with ``kwargs``)."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            print("OPENAI_API_KEY is set but langchain-openai is not installed; staying offline")
        else:
            return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return OfflineChatModel(**kwargs)


__all__ = ["OfflineChatModel", "chat_model"]
