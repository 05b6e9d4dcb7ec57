"""The public counting functions and `MessageTokenCounter`, the per-message cache."""

from __future__ import annotations

import contextlib
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    SystemMessage,
)

from langgraph_ctx.context.tokens.chat_format import (
    Encoder,
    keeping_gil,
    to_message,
    tool_calls_as_sent,
)
from langgraph_ctx.context.tokens.families import ModelFamily, model_family, resolve_family
from langgraph_ctx.context.tokens.tally import Tally

__all__ = [
    "MessageTokenCounter",
    "PartialCount",
    "TokenCounter",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "message_fingerprint",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Any function that counts a list of messages, e.g. `functools.partial(count_tokens, model=m)`."""


_encoders: dict[ModelFamily, Encoder] = {}


def _encoder(model: str) -> Encoder:
    return _encoder_for(model_family(model))


def _encoder_for(family: ModelFamily) -> Encoder:
    enc = _encoders.get(family)
    if enc is None:
        enc = _encoders[family] = Encoder(family)
    return enc


def _as_message_list(messages: Any) -> list[BaseMessage]:
    if messages is None:
        return []
    if isinstance(messages, (str, BaseMessage, Mapping)):
        messages = [messages]
    return [to_message(m) for m in messages]


def count_tokens(
    messages: Sequence[BaseMessage | dict | tuple | str],
    model: str = "gpt-4o",
    tools: Sequence | None = None,
) -> int:
    """Count the prompt tokens of a chat request to `model`, as the provider does.

    Counts every message (OpenAI chat format: 3 tokens per message, its role, content
    and name, tool calls as sent), the bound `tools` when given, and the 3 tokens that
    prime the reply. Messages may be LangChain messages, OpenAI-style dicts,
    `(role, content)` tuples or strings; nothing raises on odd input.

    Example:
        ```python
        from langchain_core.messages import HumanMessage, SystemMessage

        count_tokens([SystemMessage("Be brief."), HumanMessage("Hi!")])  # -> 16
        count_tokens([("user", "Hi!")], model="claude-sonnet-4-5")  # approximate
        ```
    """
    enc = _encoder(model)
    total = sum(enc.message(m) for m in _as_message_list(messages))
    if tools:
        total += enc.tools(tools)[0]
    return total + enc.family.reply_priming


def count_message_tokens(message: BaseMessage | dict | tuple | str, model: str = "gpt-4o") -> int:
    """Tokens one message adds to a request (its per-message overhead included).

    Example:
        ```python
        count_message_tokens(("user", "Hi!"))  # -> 6: 3 overhead + "user" + "Hi" + "!"
        ```
    """
    return _encoder(model).message(to_message(message))


def count_tool_tokens(tools: Sequence[Any], model: str = "gpt-4o") -> int:
    """Tokens that binding `tools` adds to every request (OpenAI cookbook formula).

    Accepts LangChain tools, functions, pydantic models and tool dicts; a tool
    without a schema is counted by its name and description.
    """
    return _encoder(model).tools(tools)[0] if tools else 0


def message_fingerprint(message: BaseMessage) -> int:
    """A hash of everything in `message` that changes its token count.

    Tool call arguments enter by their `repr`: an object of the application's own class
    among them whose `repr` hides a change that its `str` (what is sent) shows would keep
    its old count; tool calls a model made hold JSON values only.
    """
    content = message.content
    if not isinstance(content, str):
        content = _stable_json(content)
    extra: tuple[Any, ...] = ()
    if isinstance(message, AIMessage):
        if message.tool_calls or message.invalid_tool_calls:
            # Their repr (C, a few times faster than the JSON they are sent as): for the
            # JSON-like values tool calls hold it changes whenever that JSON does.
            try:
                extra = (repr(message.tool_calls), repr(message.invalid_tool_calls))
            except Exception:
                extra = tuple(tool_calls_as_sent(message))
    elif isinstance(message, ChatMessage):
        extra = (message.role,)
    kwargs = message.additional_kwargs
    if kwargs and ("__openai_role__" in kwargs or "name" in kwargs or "function_call" in kwargs):
        extra += tuple(
            (key, _stable_json(kwargs.get(key)))
            for key in ("__openai_role__", "name", "function_call")
        )
    return hash((message.type, content, message.name, extra))


_RECENT_LISTS = 4
"""How many recent lists `MessageTokenCounter.tally` compares a new list with."""
_FEW_NEW = 16
"""New messages a counter counts holding the GIL at most (`keeping_gil`)."""

_fields = operator.attrgetter("__dict__")


_stable_encoder = json.JSONEncoder(sort_keys=True, default=repr, ensure_ascii=False).encode


def _stable_json(value: Any) -> str:
    try:
        return _stable_encoder(value)
    except (TypeError, ValueError):
        return repr(value)


class PartialCount(NamedTuple):
    """A message's count, or a lower bound for it (`MessageTokenCounter.count_past`)."""

    tokens: int
    """The count when `exact`, else a lower bound past the limit asked about."""
    exact: bool
    estimate: int
    """The count when `exact`, else an estimate of it (the counted share scaled up)."""


class MessageTokenCounter:
    """Per-message token counts with a bounded cache, so a step costs only new messages.

    Entries are keyed by message id (or, for messages without one, by content) and
    remember a fingerprint of the content: editing a message under the same id
    replaces its entry. At most `max_entries` are kept (least recently used go first).
    Thread-safe.

    Example:
        ```python
        counter = MessageTokenCounter("gpt-4o")
        counter.count(HumanMessage("Hi!", id="m1"))  # counted: 6
        counter.count(HumanMessage("Hi!", id="m1"))  # cached: 6
        ```

    Args:
        model: Model whose counting rules apply (see `model_family`).
        token_counter: Count each message with this function instead
            (`token_counter([message])`); tools still use `model`'s rules.
        max_entries: Cache size bound.
    """

    def __init__(
        self,
        model: str = "gpt-4o",
        *,
        token_counter: TokenCounter | None = None,
        max_entries: int = 50_000,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.model = model
        # With a custom counter the family only shapes tool counts: no unknown-name warning.
        self.family = resolve_family(model, warn=token_counter is None)
        self.token_counter = token_counter
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Any, tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._tools_key: tuple[int, ...] | None = None
        self._tools_value: tuple[int, list[str]] = (0, [])
        self._tools_ref: tuple[Any, ...] = ()
        # The last few lists `tally` counted, newest first: a pipeline step counts
        # the history and then the request it sends, so one slot would thrash.
        self._recent: list[Tally] = []
        self._system_text: tuple[str, int] | None = None  # count_text_as_system's last

    @property
    def exact(self) -> bool:
        """Whether counts come from the model's own tokenizer (no custom counter)."""
        return self.family.exact and self.token_counter is None

    @property
    def reply_priming(self) -> int:
        return self.family.reply_priming

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._recent = []
            self._system_text = None
            self.hits = self.misses = 0

    def count(self, message: BaseMessage) -> int:
        """Tokens of one message, from the cache when its id and content are known."""
        return self._count_all([message])[0]

    def count_many(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Counts of a whole message list, reusing the previous call's unchanged prefix.

        See `tally`, which this is the counts of.
        """
        return list(self.tally(messages).counts)

    def tally(
        self,
        messages: Sequence[BaseMessage],
        classify: Callable[[BaseMessage], int] = lambda m: 0,
    ) -> Tally:
        """Counts of a whole message list and sums over them, reusing a counted prefix.

        From step to step a thread's list only grows: the longest prefix that is as it
        was in one of the last few lists (`_RECENT_LISTS`; the same objects or fresh
        copies a checkpointer made, edits in place included: see `Tally.prefix`) is
        taken as is; the rest goes through the id + fingerprint cache. So a step costs
        its new messages plus a few C-level comparisons per message of the history,
        whichever objects the state holds.
        """
        messages = list(messages)
        types = list(map(type, messages))
        fields = list(map(_fields, messages))
        with self._lock:
            recent = [slot for slot in self._recent if slot.classify is classify]
        best: Tally | None = None
        k = 0
        for slot in recent:  # newest first
            n = slot.prefix(types, fields)
            if n > k:
                best, k = slot, n
            if n and n == len(slot):  # continues it whole: the newest such
                break
        base = best if best is not None else Tally(classify)
        if k == len(messages) == len(base) and base.current(fields):
            result = base  # the very list counted before, unedited
        else:
            counts = self._count_all(messages[k:])
            result = base.extended(k, types, fields, messages, counts, self._lock)
        with self._lock:
            # The slot this list continues gives way to it; else the oldest goes.
            kept = [r for r in self._recent if r is not best]
            self._recent = [result, *kept][:_RECENT_LISTS]
        return result

    def _count_all(self, messages: Sequence[BaseMessage]) -> list[int]:
        fingerprints = [message_fingerprint(m) for m in messages]
        keys = [m.id or ("content", fp) for m, fp in zip(messages, fingerprints, strict=True)]
        counts: list[int | None] = []
        with self._lock:  # one lock round for all lookups
            entries = self._entries
            for key, fp in zip(keys, fingerprints, strict=True):
                entry = entries.get(key)
                if entry is not None and entry[0] == fp:
                    entries.move_to_end(key)
                    counts.append(entry[1])
                else:
                    counts.append(None)
        missing = [i for i, n in enumerate(counts) if n is None]
        # A step's few new messages are counted holding the GIL (`keeping_gil`): a
        # background checkpoint write would otherwise take it at the first tokenizer
        # call and keep it until its put ends. A whole history is left to tiktoken.
        with keeping_gil() if len(missing) <= _FEW_NEW else contextlib.nullcontext():
            for i in missing:  # counted outside the lock
                counts[i] = self._count_uncached(messages[i])
        with self._lock:
            self.hits += len(messages) - len(missing)
            self.misses += len(missing)
            self._put([(keys[i], fingerprints[i], counts[i]) for i in missing])
        return counts  # type: ignore[return-value]

    def _put(self, counted: Sequence[tuple[Any, int, Any]]) -> None:
        """Keep ``(key, fingerprint, count)`` entries, newest last, the oldest dropped past
        `max_entries`. The caller holds ``self._lock``."""
        entries = self._entries
        for key, fp, count in counted:
            entries[key] = (fp, count)
            entries.move_to_end(key)
        while len(entries) > self.max_entries:
            entries.popitem(last=False)

    def count_request(self, messages: Sequence[Any]) -> int:
        """Tokens of a request sending `messages` (no tools), each message from the cache.

        The same number as `count_tokens(messages, model=self.model)` (with a custom
        `token_counter`: `token_counter(messages)`, uncached), so it can stand in for it
        as a `TokenCounter` where the same messages are counted again and again.

        Example:
            ```python
            counter = MessageTokenCounter("gpt-4o")
            counter.count_request([HumanMessage("Hi!")])  # 9, as count_tokens says
            ```
        """
        if self.token_counter is not None:
            return int(self.token_counter(list(messages)))
        return sum(self._count_all(_as_message_list(messages))) + self.family.reply_priming

    def count_past(self, message: BaseMessage, limit: int) -> PartialCount:
        """Tokens of one message, or a lower bound once they pass `limit` (`PartialCount`).

        For deciding whether a large tool result is over a threshold without
        tokenizing all of it: only a prefix is counted once it passes `limit`
        (`Encoder.message_past`; exact counts otherwise, and those are cached). The
        answer depends on the message alone, never on what the cache holds, so a cold
        process decides as a warm one. With a custom `token_counter` the count is
        that counter's, exact.

        Example:
            ```python
            from langchain_core.messages import ToolMessage

            counter = MessageTokenCounter("gpt-4o")
            big = ToolMessage("word " * 5_000, tool_call_id="c1")
            counter.count_past(big, 500).exact  # False: more than 500, not all counted
            ```
        """
        if self.token_counter is not None:
            tokens = self.count(message)
            return PartialCount(tokens, True, tokens)
        with keeping_gil():
            tokens, exact, estimate = _encoder_for(self.family).message_past(message, limit)
        if exact:
            fp = message_fingerprint(message)
            with self._lock:
                self._put([(message.id or ("content", fp), fp, tokens)])
        return PartialCount(tokens, exact, estimate)

    def count_text_as_system(self, text: str) -> int:
        """Tokens of `text` sent as a system message (cached like a message).

        The last text is remembered as well: the pipeline sends the same composed prompt
        call after call, and this spares building and fingerprinting a message for it.
        """
        if not text:
            return 0
        last = self._system_text
        if last is not None and (last[0] is text or last[0] == text):
            with self._lock:
                self.hits += 1
            return last[1]
        tokens = self.count(SystemMessage(text))
        self._system_text = (text, tokens)
        return tokens

    def count_tools(self, tools: Sequence[Any] | None) -> tuple[int, list[str]]:
        """Tokens of the bound tools and notes about tools without schemas.

        Cached while the same tool objects are passed again.
        """
        if not tools:
            return 0, []
        key = tuple(id(t) for t in tools)
        with self._lock:
            if key == self._tools_key:
                return self._tools_value
        value = _encoder_for(self.family).tools(tools)
        with self._lock:
            self._tools_key, self._tools_value, self._tools_ref = key, value, tuple(tools)
        return value

    def _count_uncached(self, message: BaseMessage) -> int:
        if self.token_counter is not None:
            return int(self.token_counter([message]))
        return _encoder_for(self.family).message(message)
