"""Offline chat models for tests, examples and benchmarks: no API key, same answers every run.

One family of fakes, all `BaseChatModel`s (so `bind_tools`, `invoke`, `stream` and
LangGraph's model nodes work on them as on a provider's model):

- `ScriptedChatModel`: replies from a script, in order; an item may be an exception to
  raise or a function of the received messages, so retries and fallbacks can be tested.
- `StreamingScript`: the same script, streamed word by word like a provider, with
  ``usage_metadata`` (input counted exactly for gpt-4o); a `Cut` item cuts a reply off
  (stall and/or raise) to test timeouts and broken streams.
- `OfflineChatModel`: a rule-based conversational model for demos: it answers the last
  user message, calls a bound tool the user names, and streams with usage like
  `StreamingScript`. `chat_model` returns it unless ``OPENAI_API_KEY`` is set.
- `ExtractiveSummaryModel`: a deterministic stand-in for a summarising LLM (it copies
  fact sentences into the summarizer's JSON; it is *not* an LLM).
- `ordering_problems`: a validator of OpenAI's and Anthropic's message ordering rules.

It is one module (about 630 lines) because it is one import for a user's tests: the
fakes share their streaming, usage and tool-call helpers, and `langgraph_ctx.testing` is
the public name examples and docs give.

>>> from langgraph_ctx.context.compaction import LLMSummary
>>> flaky = ScriptedChatModel(script=[TimeoutError("slow"), '{"user_intent": "ship v2"}'])
>>> strategy = LLMSummary(flaky, retry_delay=0)  # the first call times out, the retry works
>>> model = StreamingScript(script=["Hello there, traveller."])
>>> [chunk.content for chunk in model.stream("hi")]
['Hello ', 'there, ', 'traveller.']
>>> model.received[0][0].content
'hi'
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    UsageMetadata,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langgraph_ctx.context.compaction.signals import DECISION, PATH, text_signals
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.tokens import count_tokens

__all__ = [
    "Cut",
    "ExtractiveSummaryModel",
    "OfflineChatModel",
    "ScriptedChatModel",
    "StreamingScript",
    "chat_model",
    "ordering_problems",
]


# ------------------------------------------------------- what the streaming fakes share


def _tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    return [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]


def _usage(
    messages: list[BaseMessage], tools: list[dict[str, Any]], output_tokens: int
) -> UsageMetadata:
    """What a provider reports: the input counted exactly for gpt-4o, tools included."""
    sent = count_tokens(messages, model="gpt-4o", tools=tools or None)
    # A plain dict: langchain-core 1.8 declares the token details as required keys of
    # the TypedDict, 1.7 does not, and providers leave them out.
    total = sent + output_tokens
    usage = {"input_tokens": sent, "output_tokens": output_tokens, "total_tokens": total}
    return cast(UsageMetadata, usage)


def _tool_calls_chunk(message: AIMessage, usage: UsageMetadata) -> ChatGenerationChunk:
    """A reply with tool calls, sent as one final chunk (arguments as JSON text)."""
    chunks = [
        tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
        for i, c in enumerate(message.tool_calls)
    ]
    return ChatGenerationChunk(
        message=AIMessageChunk(
            content=message.content,
            tool_call_chunks=chunks,
            usage_metadata=usage,
            chunk_position="last",
        )
    )


def _word_chunks(
    text: str,
    usage: UsageMetadata,
    *,
    cut_at: int | None = None,
    cut: Callable[[], Iterator[ChatGenerationChunk]] | None = None,
) -> Iterator[ChatGenerationChunk]:
    """``text`` word by word; the usage rides on the last chunk, as providers send it.

    Before word ``cut_at``, ``cut()`` runs: it may yield chunks, stall, or raise.
    """
    words = text.split(" ")
    for i, word in enumerate(words):
        if i == cut_at and cut is not None:
            yield from cut()
        last = i == len(words) - 1
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=word if last else word + " ",
                usage_metadata=usage if last else None,
                chunk_position="last" if last else None,
            )
        )


# ------------------------------------------------------------------ scripted replies


@dataclass
class Cut:
    """A reply cut off after `after` words: stall `stall` seconds, then raise `error`.

    >>> model = StreamingScript(script=[Cut("one two three four", after=2,
    ...                                     error=ConnectionError("reset"))])
    >>> seen = []
    >>> try:
    ...     for chunk in model.stream("hi"):
    ...         seen.append(chunk.content)
    ... except ConnectionError as err:
    ...     print(seen, err)
    ['one ', 'two '] reset
    """

    text: str
    after: int
    error: BaseException | None = None
    stall: float = 0.0
    tool_call: dict[str, Any] | None = None
    """A tool call whose arguments are cut off halfway (streamed after the words)."""


class ScriptedChatModel(BaseChatModel):
    """Replies from `script` in order (the last item repeats). An exception item is raised.

    Items may be strings, `AIMessage`s (tool calls included), exceptions, or callables
    taking the received messages and returning one of those. Every call's messages are
    kept in `received`; tools given to `bind_tools` in `tools`.

    >>> model = ScriptedChatModel(script=["first", ValueError("down"), "last"])
    >>> model.invoke("a").content
    'first'
    >>> model.invoke("b")
    Traceback (most recent call last):
    ...
    ValueError: down
    >>> model.invoke("c").content, model.invoke("d").content, len(model.received)
    ('last', 'last', 4)
    """

    script: list[Any]
    received: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    model_name: str | None = None
    """The model this script stands in for, read like `ChatOpenAI.model_name` (None: none)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.tools = _tool_specs(tools)
        return self

    def _next(self, messages: list[BaseMessage]) -> Any:
        """The script's next item for ``messages`` (recorded); raises an exception item."""
        item = self.script[min(len(self.received), len(self.script) - 1)]
        self.received.append(list(messages))
        if isinstance(item, type) and issubclass(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, type):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        return item

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        item = self._next(messages)
        message = item if isinstance(item, AIMessage) else AIMessage(str(item))
        return ChatResult(generations=[ChatGeneration(message=message)])


class StreamingScript(ScriptedChatModel):
    """A `ScriptedChatModel` that streams its replies word by word, as a provider does.

    Each reply reports ``usage_metadata`` with the input counted exactly for gpt-4o (tool
    schemas included). An `AIMessage` item is sent as one chunk; a `Cut` item cuts its
    reply off. See the module's examples.
    """

    @property
    def _llm_type(self) -> str:
        return "streaming-script"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        item = self._next(messages)
        usage = _usage(messages, self.tools, 5)
        if isinstance(item, AIMessage):
            yield _tool_calls_chunk(item, usage)
            return
        if not isinstance(item, Cut):
            yield from _word_chunks(str(item), usage)
            return
        cut = item

        def cut_off() -> Iterator[ChatGenerationChunk]:
            if cut.tool_call is not None:
                args = json.dumps(cut.tool_call["args"])
                half = tool_call_chunk(name=cut.tool_call["name"], args=args[: len(args) // 2],
                                       id=cut.tool_call["id"], index=0)  # fmt: skip
                yield ChatGenerationChunk(
                    message=AIMessageChunk(content="", tool_call_chunks=[half])
                )
            if cut.stall:
                time.sleep(cut.stall)
            if cut.error is not None:
                raise cut.error

        yield from _word_chunks(cut.text, usage, cut_at=cut.after, cut=cut_off)


# ------------------------------------------------------------ the demo conversation

_TOOL_ECHO = 240  # characters of a tool result repeated in the offline answer


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


class OfflineChatModel(BaseChatModel):
    """Deterministic offline chat model for demos and tests.

    * Without tools it answers from the last user message.
    * With tools bound, a user message that names a tool gets a call to it, with
      arguments its schema accepts: the words after the tool name go to the first
      parameter that takes them (a number parameter only a number), a required text
      parameter left empty gets the whole message, the others keep their defaults.
      Once the tool answered, the model reports the result (its first characters).
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

    >>> OfflineChatModel().invoke("Plan a trip to Lisbon").content
    "(offline model, turn 1) Noted: 'Plan a trip to Lisbon'. Tell me more about Lisbon."
    >>> from langchain_core.tools import tool
    >>> @tool(description="The saved trips, newest first.")
    ... def list_trips(limit: int | None = None, region: str | None = None) -> str:
    ...     return "Lisbon, Porto"
    >>> model = OfflineChatModel().bind_tools([list_trips])
    >>> [model.invoke(text).tool_calls[0]["args"] for text in
    ...  ["list_trips", "list_trips 2", "list_trips in Portugal"]]
    [{}, {'limit': 2}, {'region': 'in Portugal'}]
    """

    tools: list[dict[str, Any]] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    """Every request, as the model received it (system prompt included), in order."""
    model_name: str = "gpt-4o"
    """The model whose tokenizer its `usage_metadata` counts with (read by `BudgetNode`)."""
    interrupt_on: str | None = None
    interrupt: Literal["stall", "error"] = "stall"
    stall_seconds: float = 5.0

    @property
    def _llm_type(self) -> str:
        return "offline-demo"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        return self.model_copy(update={"tools": _tool_specs(tools)})

    # -- LangChain's two entry points ---------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
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
        self.received.append(list(messages))
        reply = self._reply(messages)
        usage = self._usage(messages, reply)
        if reply.tool_calls:
            yield _tool_calls_chunk(reply, usage)
            return
        text = _text(reply)
        cut_at = len(text.split(" ")) // 2 if self._interrupted(messages) else None

        def cut_off() -> Iterator[ChatGenerationChunk]:
            if self.interrupt == "error":
                raise ConnectionError("connection reset by peer (simulated)")
            time.sleep(self.stall_seconds)
            yield from ()

        yield from _word_chunks(text, usage, cut_at=cut_at, cut=cut_off)

    # -- behaviour ----------------------------------------------------------------------
    def _interrupted(self, messages: list[BaseMessage]) -> bool:
        users = [m for m in messages if isinstance(m, HumanMessage)]
        return bool(self.interrupt_on and users and self.interrupt_on in _text(users[-1]))

    def _usage(self, messages: list[BaseMessage], reply: AIMessage) -> UsageMetadata:
        return _usage(messages, self.tools, count_tokens([reply], model="gpt-4o") - 3)

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
                rest = text.split(name, 1)[1].strip(" :?.!")
                args = _call_args(spec["function"].get("parameters") or {}, rest, text)
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


def _call_args(parameters: dict[str, Any], rest: str, text: str) -> dict[str, Any]:
    """Arguments of a call the user asked for by the tool's name, valid for its schema.

    The words after the name (`rest`) go to the first parameter that takes them: any
    text parameter, an integer or number parameter only when they are one, an enum only
    when they are one of its values. A required text parameter still empty gets the
    whole message `text`; every other parameter is left to its default.
    """
    properties: dict[str, Any] = parameters.get("properties") or {}
    args: dict[str, Any] = {}
    if rest:
        for param, schema in properties.items():
            value = _fit(schema, rest)
            if value is not None:
                args[param] = value
                break
    for param in parameters.get("required") or []:
        if param not in args and "string" in _schema_types(properties.get(param) or {}):
            args[param] = text
    return args


def _schema_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a parameter's schema allows (``anyOf`` / ``oneOf`` included); a
    schema that names none takes any value, read here as text."""
    found: set[str] = set()
    for part in (schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())):
        declared = part.get("type")
        found |= {declared} if isinstance(declared, str) else set(declared or ())
    return found or {"string"}


def _fit(schema: dict[str, Any], words: str) -> Any:
    """`words` as a value of the parameter `schema`, or None if it does not take them."""
    if "enum" in schema:
        return words if words in schema["enum"] else None
    types = _schema_types(schema)
    if "string" in types:
        return words
    if types & {"integer", "number"} and re.fullmatch(r"-?\d+", words):
        return int(words)
    if "number" in types and re.fullmatch(r"-?\d+\.\d*|-?\.\d+", words):
        return float(words)
    return None


def _mode(messages: list[BaseMessage]) -> str | None:
    """The active mode named in the system prompt's MODE banner, if any."""
    for message in messages:
        if isinstance(message, SystemMessage) and "MODE\n- active: " in _text(message):
            return _text(message).split("MODE\n- active: ", 1)[1].split()[0]
    return None


def chat_model(**kwargs: Any) -> BaseChatModel:
    """``ChatOpenAI`` with ``OPENAI_API_KEY`` set, else `OfflineChatModel` (with ``kwargs``).

    What the examples and the notebook use: real answers when you have a key, the same
    offline answers on every run when you do not (``OPENAI_MODEL`` picks the model).
    """
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            print("OPENAI_API_KEY is set but langchain-openai is not installed; staying offline")
        else:
            model: BaseChatModel = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
            return model
    return OfflineChatModel(**kwargs)


# ------------------------------------------------------------------ the summariser

_PREVIOUS = re.compile(r"PREVIOUS SUMMARY \(JSON\):\n(.*?)\n\nMESSAGES TO FOLD IN:\n", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_LABEL = re.compile(r"^\[(?P<label>[^\]]*)\]\s*")


class ExtractiveSummaryModel(BaseChatModel):
    """A deterministic, offline stand-in for a summarising LLM (not a real model).

    It reads the summarizer prompt, keeps the previous summary, and adds every sentence
    of the new messages that carries a fact signal, newest last, up to `max_facts`. The
    benchmark uses it for the summary strategies, and says so.

    >>> from langgraph_ctx.context.compaction import HybridSummary
    >>> strategy = HybridSummary(ExtractiveSummaryModel())  # an offline summary strategy
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


# ------------------------------------------------------------------ message ordering


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

    >>> ordering_problems([AIMessage("hi"), HumanMessage("q")])
    ['the first non-system message is not a user message']
    >>> ordering_problems([HumanMessage("q"), AIMessage("a")])
    []
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
            while j < len(body) and isinstance(reply := body[j], ToolMessage):
                answered.append(reply.tool_call_id)
                j += 1
            if sorted(answered) != sorted(set(ids)) or len(answered) != len(set(answered)):  # type: ignore[type-var]
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
