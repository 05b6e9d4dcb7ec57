"""Offline chat models for testing compaction (and graphs that use it) without an API key.

- `ExtractiveSummaryModel`: a deterministic summariser. It is *not* an LLM: it answers the
  summarizer's prompt by copying sentences that carry facts (paths, numbers, constraints,
  decisions, errors) into the JSON summary. The benchmark uses it for the summary
  strategies, and says so.
- `ScriptedChatModel`: replies from a script, where an item may also be an exception to
  raise, so retries and fallbacks can be tested. It accepts `bind_tools`, so it can drive
  `create_react_agent`.
- `ordering_problems`: a validator of OpenAI's and Anthropic's message ordering rules.

```python
from langgraph_ctx.context.compaction import LLMSummary, compact_messages
from langgraph_ctx.context.compaction.testing import ScriptedChatModel

flaky = ScriptedChatModel(script=[TimeoutError("slow"), '{"user_intent": "ship v2"}'])
messages, record = compact_messages(history, max_tokens=2_000,
                                    strategy=LLMSummary(flaky, retry_delay=0))
record.attempts  # 2
```
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field

from langgraph_ctx.context.compaction.signals import DECISION, PATH, content_text, text_signals

_PREVIOUS = re.compile(r"PREVIOUS SUMMARY \(JSON\):\n(.*?)\n\nMESSAGES TO FOLD IN:\n", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_LABEL = re.compile(r"^\[(?P<label>[^\]]*)\]\s*")


class ExtractiveSummaryModel(BaseChatModel):
    """A deterministic, offline stand-in for a summarising LLM (not a real model).

    It reads the summarizer prompt, keeps the previous summary, and adds every sentence
    of the new messages that carries a fact signal, newest last, up to `max_facts`.
    """

    max_facts: int = 60
    """Most fact sentences kept in the summary's free text (oldest go first)."""
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "extractive-summary (deterministic, not an LLM)"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        prompt = content_text(messages[-1].content)
        match = _PREVIOUS.search(prompt)
        previous: dict[str, Any] = {}
        if match:
            try:
                previous = json.loads(match.group(1))
            except ValueError:
                previous = {}
        transcript = prompt[match.end() :] if match else prompt
        facts = [f for f in (previous.get("text") or "").split("\n") if f]
        decisions = list(previous.get("decisions_made") or [])
        entities = dict(previous.get("key_entities") or {})
        intent = previous.get("user_intent") or ""
        for line in transcript.splitlines():
            label_match = _LABEL.match(line)
            label = label_match.group("label") if label_match else ""
            body = line[label_match.end() :] if label_match else line
            for sentence in (s.strip() for s in _SENTENCE.split(body)):
                if not sentence:
                    continue
                if not intent and label == "user":
                    intent = sentence[:200]
                if not text_signals(sentence):
                    continue
                if sentence not in facts:
                    facts.append(sentence[:300])
                if DECISION.search(sentence) and sentence not in decisions:
                    decisions.append(sentence[:300])
                for path in PATH.findall(sentence):
                    entities.setdefault(f"path {len(entities) + 1}", path)
        summary = {
            "user_intent": intent,
            "key_entities": dict(list(entities.items())[-20:]),
            "decisions_made": decisions[-20:],
            "pending_questions": [],
            "text": "\n".join(facts[-self.max_facts :]),
        }
        message = AIMessage(json.dumps(summary, ensure_ascii=False))
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedChatModel(BaseChatModel):
    """Replies from `script` in order (the last item repeats). An exception item is raised.

    Items may be strings, `AIMessage`s (tool calls included), exceptions, or callables
    taking the received messages and returning one of those. Every call's messages are
    kept in `received`.
    """

    script: list[Any]
    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        index = min(len(self.received), len(self.script) - 1)
        self.received.append(list(messages))
        item = self.script[index]
        if callable(item):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        message = item if isinstance(item, AIMessage) else AIMessage(str(item))
        return ChatResult(generations=[ChatGeneration(message=message)])


def ordering_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Every way `messages` breaks OpenAI's or Anthropic's chat ordering rules ([] if none).

    OpenAI: an assistant message with `tool_calls` must be followed by tool messages
    answering every `tool_call_id`; a tool message must answer a call of the assistant
    message right before its block of tool messages.
    Anthropic: system content only at the start; the first non-system message is a user
    message; after merging consecutive same-role messages (tool results are user turns)
    the roles alternate; every tool_use has its tool_result in the next turn; no empty
    text messages.

    Written from the providers' documented rules, independently of compaction, so tests
    can check compaction's output with it.

    Example:
        ```python
        ordering_problems([AIMessage("hi"), HumanMessage("q")])
        # ['the first non-system message is not a user message']
        ```
    """
    problems: list[str] = []
    body_started = False
    for i, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            if body_started:
                problems.append(f"[{i}] system message after the start")
        else:
            body_started = True
    body = [m for m in messages if not isinstance(m, SystemMessage)]
    i = 0
    while i < len(body):
        message = body[i]
        if isinstance(message, ToolMessage):
            problems.append(f"tool message {message.tool_call_id!r} does not follow its call")
            i += 1
            continue
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            ids = [c.get("id") for c in [*message.tool_calls, *message.invalid_tool_calls]]
            if not all(ids):
                problems.append(f"assistant {message.id} has a tool call without an id")
            if len(set(ids)) != len(ids):
                problems.append(f"assistant {message.id} repeats a tool call id")
            j = i + 1
            answered: list[str] = []
            while j < len(body) and isinstance(body[j], ToolMessage):
                answered.append(body[j].tool_call_id)
                j += 1
            if sorted(answered) != sorted(set(ids)) or len(answered) != len(set(answered)):
                problems.append(f"assistant {message.id} calls {ids}, answered {answered}")
            i = j
            continue
        i += 1
    roles = ["assistant" if isinstance(m, AIMessage) else "user" for m in body]
    if roles and roles[0] != "user":
        problems.append("the first non-system message is not a user message")
    merged = [r for k, r in enumerate(roles) if k == 0 or roles[k - 1] != r]
    if any(a == b for a, b in itertools.pairwise(merged)):
        problems.append("roles do not alternate")
    for message in body:
        content = message.content
        empty = not content or (isinstance(content, str) and not content.strip())
        if empty and not (isinstance(message, AIMessage) and message.tool_calls):
            problems.append(f"message {message.id} has empty content")
    return problems
