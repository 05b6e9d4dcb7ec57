"""The public counting functions and `MessageTokenCounter`, the per-message cache."""

from __future__ import annotations

import heapq
import json
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    SystemMessage,
)

from langgraph_ctx.context.tokens.chat_format import Encoder, to_message, tool_calls_as_sent
from langgraph_ctx.context.tokens.families import ModelFamily, model_family, resolve_family

__all__ = [
    "MessageTokenCounter",
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
    """A hash of everything in `message` that changes its token count."""
    content = message.content
    if not isinstance(content, str):
        content = _stable_json(content)
    extra: tuple[Any, ...] = ()
    if isinstance(message, AIMessage):
        if message.tool_calls or message.invalid_tool_calls:
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


def _reused_prefix(states: list[dict[str, Any]], known: list[dict[str, Any]]) -> int:
    """How many leading messages are as they were when `known` was snapshotted.

    `states` are the messages' `__dict__`s, `known` shallow copies taken when they were
    counted: equal means same type, id, content, tool calls, name, ... whether the objects
    are the very same (one graph run) or fresh copies (a checkpointer's), and an edit in
    place (`message.content = ...`) shows as a difference. Whole-list comparison runs in
    C; a value that cannot be compared ends the prefix there.
    """
    n = min(len(states), len(known))
    try:
        if states[:n] == known[:n]:
            return n
        for i in range(n):
            if states[i] != known[i]:
                return i
    except Exception:  # e.g. an artifact whose == does not return a bool
        for i in range(n):
            try:
                if states[i] != known[i]:
                    return i
            except Exception:
                return i
    return n


_RECENT_LISTS = 4
"""How many recent lists `MessageTokenCounter.tally` compares a new list with."""


class Tally:
    """The counts of one message list, and sums over them that take O(1) to read.

    Built by `MessageTokenCounter.tally`; a list that continues one counted before reuses
    its prefix, so extending it costs only the new messages. `classes` come from the
    caller's `classify(message) -> int`: a group in the low bits (`sums[g][i]` is the
    tokens of the messages before index `i` in group `g`) and `MARKS` in the high ones.
    """

    __slots__ = (
        "classes",
        "classify",
        "contents",
        "counts",
        "last_of",
        "odd",
        "refs",
        "states",
        "sums",
        "top",
    )

    def __init__(self, classify: Callable[[BaseMessage], int]) -> None:
        self.classify = classify
        self.refs: list[weakref.ref[BaseMessage]] = []
        """The messages, weakly: the same objects next step are recognised at once (and
        the host's messages are not kept alive by this cache)."""
        self.contents: list[Any] = []
        """Each message's `content` when counted: an edit in place rebinds it."""
        self.states: list[dict[str, Any]] = []
        """Shallow copies of each message's fields when it was first counted."""
        self.counts: list[int] = []
        self.classes: list[int] = []
        self.sums: dict[int, list[int]] = {}
        self.top: list[tuple[int, int]] = []
        """The three largest (tokens, index), largest first (ties: later index first)."""
        self.last_of: dict[str, int] = {}
        """Index of the last message with each mark `classify` sets in its high bits."""
        self.odd: list[int] = []
        """Indexes of the messages marked `odd`."""

    def __len__(self) -> int:
        return len(self.counts)

    def total(self, group: int, start: int, end: int) -> int:
        """Tokens of the messages of `group` (a class's low bits) in `[start, end)`."""
        sums = self.sums.get(group)
        return 0 if sums is None else sums[end] - sums[start]

    def last(self, mark: str) -> int | None:
        """Index of the last message with `mark` (see `MARKS`), or None."""
        return self.last_of.get(mark)

    def same_objects(self, messages: list[BaseMessage], contents: list[Any]) -> int:
        """Length of the prefix of `messages` that is this tally's very objects, unedited.

        Within one graph run the state holds the same objects from step to step: an
        identity check and a comparison of the contents (identical strings), both in C.
        0 when the objects are others (a checkpointer's fresh copies).
        """
        n = min(len(messages), len(self.refs))
        if not n or self.refs[0]() is not messages[0]:
            return 0
        alive = [ref() for ref in self.refs[:n]]
        if all(map(operator.is_, messages[:n], alive)):
            try:
                if contents[:n] == self.contents[:n]:
                    return n
            except Exception:
                pass
        for i in range(n):
            a, b = contents[i], self.contents[i]
            try:
                if messages[i] is not alive[i] or (a is not b and a != b):
                    return i
            except Exception:
                return i
        return n

    def extended(
        self,
        k: int,
        messages: list[BaseMessage],
        contents: list[Any],
        counts: list[int],
        *,
        same: bool,
    ) -> Tally:
        """A new tally: this one's first `k` messages, then `messages[k:]` with `counts`.

        `same`: the first `k` are this tally's objects (else fresh copies of them: the
        new tally refers to these).
        """
        out = Tally(self.classify)
        if same:
            out.refs = self.refs[:k] + _weak(messages[k:])
        else:
            out.refs = _weak(messages)
        out.contents = contents
        out.states = self.states[:k] + [dict(m.__dict__) for m in messages[k:]]
        out.counts = self.counts[:k] + counts
        new_classes = [self.classify(m) for m in messages[k:]]
        out.classes = self.classes[:k] + new_classes
        groups = [c & _GROUP for c in new_classes]
        for group, sums in self.sums.items():
            out.sums[group] = sums[: k + 1]
        for group in set(groups):
            if group not in out.sums:
                out.sums[group] = [0] * (k + 1)
        for group, sums in out.sums.items():
            running = sums[-1]
            for g, tokens in zip(groups, counts, strict=True):
                if g == group:
                    running += tokens
                sums.append(running)
        if k == len(self.counts):
            out.top = list(self.top)
            out.last_of = dict(self.last_of)
        else:  # a shorter prefix: recompute what it summarizes
            out.top = heapq.nlargest(3, zip(out.counts[:k], range(k), strict=True))
            out.last_of = {}
            for i in range(k - 1, -1, -1):
                for mark, bit in MARKS.items():
                    if mark not in out.last_of and out.classes[i] & bit:
                        out.last_of[mark] = i
        if counts:
            out.top = heapq.nlargest(
                3, [*out.top, *zip(counts, range(k, k + len(counts)), strict=True)]
            )
        for i in range(k, len(out.counts)):
            for mark, bit in MARKS.items():
                if out.classes[i] & bit:
                    out.last_of[mark] = i
        odd = MARKS["odd"]
        out.odd = [i for i in self.odd if i < k] + [
            k + j for j, c in enumerate(new_classes) if c & odd
        ]
        return out


def _weak(messages: Sequence[BaseMessage]) -> list[weakref.ref[BaseMessage]]:
    """Weak references to `messages` (one that cannot have any never matches)."""
    try:
        return list(map(weakref.ref, messages))
    except TypeError:
        return [_ref_or_none(m) for m in messages]


def _ref_or_none(message: BaseMessage) -> weakref.ref[BaseMessage]:
    try:
        return weakref.ref(message)
    except TypeError:
        return _DEAD


class _Nothing:
    """Something to hold a dead weak reference to."""


_DEAD: weakref.ref[Any] = weakref.ref(_Nothing())


_GROUP = 0xFF
"""The low bits of a class: the group `Tally.total` sums by."""
MARKS: dict[str, int] = {"ai": 1 << 8, "usage": 1 << 9, "not_system": 1 << 10, "odd": 1 << 11}
"""High bits `classify` may set to have `Tally.last(mark)` find the last such message."""


def _stable_json(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


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
        was in one of the last few lists (`_RECENT_LISTS`; the same objects, or fresh
        copies a checkpointer made, compared by value in C) is taken as is; the rest goes
        through the id + fingerprint cache. So a step costs its new messages plus one
        comparison of the list, whichever objects the state holds.
        """
        messages = list(messages)
        contents = [m.content for m in messages]
        with self._lock:
            recent = [slot for slot in self._recent if slot.classify is classify]
        best: Tally | None = None
        k = 0
        for slot in recent:  # the same objects (one graph run)?
            n = slot.same_objects(messages, contents)
            if n > k:
                best, k = slot, n
        same = best is not None
        if best is None or (k < len(best) and k < len(messages)):
            # Fresh copies (a checkpointer's), or an edit: compare the fields by value
            # with shallow copies taken when each message was counted. Equal values are
            # the same type, content, tool calls, name, ...; a field set since
            # (`message.content = ...`) shows as a difference.
            states = [m.__dict__ for m in messages]
            for slot in recent:
                n = _reused_prefix(states, slot.states)
                if n > k:
                    best, k, same = slot, n, False
                if n and n == len(slot.states):  # continues it whole: the newest such
                    break
        base = best if best is not None else Tally(classify)
        if same and k == len(messages) == len(base):
            result = base  # the same objects, nothing new
        else:
            counts = self._count_all(messages[k:])
            result = base.extended(k, messages, contents, counts, same=same)
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
        for i in missing:  # counted outside the lock
            counts[i] = self._count_uncached(messages[i])
        with self._lock:
            self.hits += len(messages) - len(missing)
            self.misses += len(missing)
            for i in missing:
                self._entries[keys[i]] = (fingerprints[i], counts[i])  # type: ignore[assignment]
                self._entries.move_to_end(keys[i])
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return counts  # type: ignore[return-value]

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
