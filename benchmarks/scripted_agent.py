"""The tool-calling agent the benchmarks share: a scripted chat model and a seeded tool.

Not a benchmark itself (``storage.py`` and ``pipeline.py`` import it). Everything is
offline and deterministic:

* `ScriptedToolModel` is a real ``BaseChatModel`` (it accepts ``bind_tools``) that, when
  the newest message is a user message, calls the tool once; when the newest message is
  a tool result, answers with text. Every request is recorded in ``received``, exactly as
  the host sent it, so a benchmark can measure what the model was given.
* `tool_output` is the tool's result: varied text of a given size, the same for the same
  seed and query.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "at",
    "from",
    "or",
    "an",
    "have",
    "not",
    "but",
    "which",
    "trip",
    "plan",
    "packing",
    "budget",
    "hotel",
    "train",
    "museum",
    "dinner",
    "weather",
    "invoice",
    "deploy",
    "cluster",
    "latency",
    "replica",
    "shard",
    "index",
    "query",
    "cache",
    "region",
    "quota",
    "error",
    "retry",
    "timeout",
    "request",
    "response",
    "header",
    "payload",
    "schema",
    "migration",
    "rollback",
    "release",
    "tag",
)


def words(rng: random.Random, n: int) -> str:
    """About `n` characters of words, numbers and punctuation drawn from `rng`."""
    out: list[str] = []
    size = 0
    while size < n:
        roll = rng.random()
        if roll < 0.08:
            word = f"{rng.randint(0, 99999)}"
        elif roll < 0.12:
            word = f"{rng.choice(WORDS)}_{rng.randint(0, 999)}:"
        elif roll < 0.15:
            word = rng.choice(WORDS) + ".\n"
        else:
            word = rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n]


def tool_output(seed: int, query: str, size: int) -> str:
    """The tool's result for `query`: `size` characters of seeded, varied text."""
    rng = random.Random(f"{seed}:{query}")
    return f"RESULTS for {query}\n" + words(rng, max(0, size - len(query) - 13))


def user_text(seed: int, turn: int, n: int = 200) -> str:
    """The user's message of turn `turn`."""
    return f"Turn {turn}: please look up " + words(random.Random(f"user:{seed}:{turn}"), n)


class ScriptedToolModel(BaseChatModel):
    """Calls `tool_name` once per user message, then answers once the result is back.

    The tool call's id and query name the turn (the number of user messages so far), so
    the same conversation gives the same calls on every run and every host.
    """

    tool_name: str = "lookup"
    answer_chars: int = 300
    seed: int = 0
    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        turn = sum(1 for m in messages if isinstance(m, HumanMessage))
        last = messages[-1] if messages else None
        if isinstance(last, ToolMessage):
            rng = random.Random(f"answer:{self.seed}:{turn}")
            reply = AIMessage(content=f"Answer {turn}: " + words(rng, self.answer_chars))
        else:
            calls = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
            reply = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": self.tool_name,
                        "args": {"query": f"topic-{turn}"},
                        "id": f"call_{turn}_{calls}",
                        "type": "tool_call",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def raw_message_bytes(messages: Sequence[BaseMessage]) -> int:
    """Bytes of message text: each content, plus the JSON of each tool call's arguments."""
    total = 0
    for m in messages:
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        total += len(content.encode())
        for call in getattr(m, "tool_calls", None) or []:
            total += len(json.dumps(call["args"]).encode())
    return total
