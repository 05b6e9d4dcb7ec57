"""Shorter stand-ins for long messages: tool result previews and shortened texts.

A stand-in is a *copy* sent to the model instead of the original; the original stays in
`messages` (and the thread log). Copies get a derived id (`<id>~preview`, `<id>~short`)
so nothing that stores messages by id can mistake one for the other.

A tool result preview keeps the tool name, its status, the first and last lines, the key
lines in between, and a reference the model can pass to `read_tool_result`:

```text
TOOL_RESULT_PREVIEW tool=search status=success tokens=2481 ref=tool-result/call_1
first lines ...
[... 312 lines omitted; key lines follow ...]
ERROR: disk quota exceeded on /var/data/shard-17
[...]
last lines ...
Full output: read_tool_result(ref="tool-result/call_1")
```
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.context.compaction.signals import key_lines, line_weights
from langgraph_ctx.context.content import content_text, is_text_block, non_text_blocks

PREVIEW_HEADER = "TOOL_RESULT_PREVIEW"
READ_TOOL_RESULT = "read_tool_result"
SEARCH_HISTORY = "search_history"
TOOL_RESULT_PAGE = ("langgraph_ctx", "tool_result_page")
"""`artifact` key and value that mark a `read_tool_result` answer (a page of a result)."""
HISTORY_SEARCH_ANSWER = "history_search"
"""The mark (under `TOOL_RESULT_PAGE`'s key) of a `search_history` answer's artifact."""
REF_PREFIX = "tool-result/"
_LINE_CLIP = 240  # longest key line shown in a preview, in characters
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def tool_result_ref(tool_call_id: str) -> str:
    """The reference a preview shows for the result of `tool_call_id`.

    Example:
        ```python
        tool_result_ref("call_1")  # "tool-result/call_1"
        ```
    """
    return f"{REF_PREFIX}{tool_call_id}"


def tool_call_id_from_ref(ref: str) -> str:
    """The tool call id inside a reference (a bare tool call id is accepted as well)."""
    ref = ref.strip().strip("\"'")
    return ref[len(REF_PREFIX) :] if ref.startswith(REF_PREFIX) else ref


def is_preview(message: BaseMessage) -> bool:
    """True for a tool result that compaction already replaced by a preview."""
    return isinstance(message, ToolMessage) and content_text(message.content).startswith(
        PREVIEW_HEADER
    )


def is_tool_result_page(message: BaseMessage) -> bool:
    """True for an answer of `read_tool_result` or `search_history`: compaction never
    previews it again.

    The model asked for that text in full; a preview of it would point back at the
    answer itself and the model would ask again (r1 -> r2 -> ...). A search answer (by
    its artifact's mark: an app's own tool of that name is previewed as any other) is
    sized to the room by the tool, and a preview of it kept neither the passages nor,
    cut mid-line, the references to open.
    """
    if not isinstance(message, ToolMessage):
        return False
    key, value = TOOL_RESULT_PAGE
    artifact = message.artifact
    return message.name == READ_TOOL_RESULT or (
        isinstance(artifact, dict) and artifact.get(key) in (value, HISTORY_SEARCH_ANSWER)
    )


STAND_IN_SUFFIXES = frozenset({"preview", "short", "args", "repaired"})
"""The suffixes `derived_id` gives stand-ins (a preview, a shortened text, a call with its
arguments cut, a repaired message)."""


def derived_id(message_id: str | None, suffix: str) -> str | None:
    """The id of a stand-in: the original id plus a suffix (`None` stays `None`)."""
    if message_id is None:
        return None
    return message_id if message_id.endswith(f"~{suffix}") else f"{message_id}~{suffix}"


def original_id(message_id: Any) -> Any:
    """The id a stand-in's id was derived from (`derived_id`, however many times); any
    other id as it is.

    >>> original_id("t1~preview~short"), original_id("t1"), original_id("a~b")
    ('t1', 't1', 'a~b')
    """
    while isinstance(message_id, str):
        base, sep, suffix = message_id.rpartition("~")
        if not (sep and base and suffix in STAND_IN_SUFFIXES):
            break
        message_id = base
    return message_id


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def _head(lines: list[str], chars: int) -> int:
    """How many leading lines fit in `chars` (at least one, clipped later if needed)."""
    used = 0
    for i, line in enumerate(lines):
        used += len(line) + 1
        if used > chars:
            return max(i, 1)
    return len(lines)


def _tail(lines: list[str], chars: int, start: int) -> int:
    """Index where the trailing lines that fit in `chars` begin (never before `start`).

    At least the last line is kept (clipped later if needed) when there is one after `start`.
    """
    used = 0
    for i in range(len(lines) - 1, start - 1, -1):
        used += len(lines[i]) + 1
        if used > chars:
            return min(i + 1, len(lines) - 1)
    return start


def _pick(lines: list[str], weights: tuple[float, ...], budget: int) -> list[str]:
    """The weightiest lines that fit in `budget` characters, in their original order."""
    chosen: list[int] = []
    for i in sorted(key_lines(lines, limit=12, weights=weights), key=lambda i: -weights[i]):
        cost = min(len(lines[i].strip()), _LINE_CLIP) + 1
        if cost <= budget:
            chosen.append(i)
            budget -= cost
    return [_clip(lines[i].strip(), _LINE_CLIP) for i in sorted(chosen)]


@functools.lru_cache(maxsize=1024)  # every compaction previews the same large results again
def preview_text(text: str, chars: int) -> tuple[str, int]:
    """Head, key lines and tail of `text` within about `chars` characters.

    Returns the preview body and how many lines it left out.
    """
    if len(text) <= chars:
        return text, 0
    lines = text.split("\n")
    head_end = _head(lines, (chars * 2) // 5)
    tail_start = _tail(lines, chars // 5, head_end)
    middle = lines[head_end:tail_start]
    head = [_clip(line, (chars * 2) // 5) for line in lines[:head_end]]
    tail = [_clip(line, max(chars // 5, 40)) for line in lines[tail_start:]]
    key_budget = chars - sum(len(line) + 1 for line in head + tail)
    chosen = _pick(middle, line_weights(text)[head_end:tail_start], key_budget)
    omitted = len(middle) - len(chosen)
    parts = head
    if middle:
        note = "; key lines follow" if chosen else ""
        parts = [*parts, f"[… {len(middle)} lines omitted{note} …]", *chosen]
        if chosen:
            parts.append("[…]")
    return "\n".join([*parts, *tail]), omitted


def tool_result_preview(message: ToolMessage, *, tokens: int, chars: int) -> ToolMessage:
    """A preview of a tool result: header, head/key lines/tail, and the reference.

    `tokens` is the size of the full result (shown in the header); `chars` bounds the
    body. The preview has no artifact: the full result stays on the original message.

    Example:
        ```python
        from langchain_core.messages import ToolMessage

        full = ToolMessage("\\n".join(f"line {i}" for i in range(500)), tool_call_id="c1")
        preview = tool_result_preview(full, tokens=2000, chars=300)
        preview.content.splitlines()[0]
        # 'TOOL_RESULT_PREVIEW tool=? status=success tokens=2000 ref=tool-result/c1'
        ```
    """
    body, _ = preview_text(content_text(message.content), chars)
    return preview_message(message, tokens=tokens, body=body)


class TokenEstimate(int):
    """A tool result's size known as an estimate only: a preview's header shows ``~6700``.

    The hook step that receives a large tool result counts it only until its count
    passes the offload threshold (`MessageTokenCounter.count_past`): the preview made
    then says how large the whole result is by an estimate (the counted share scaled up
    by characters, two significant digits), marked with ``~``. What is sent is counted
    exactly (the preview); a compaction that reads the result later counts it in full.

    Example:
        ```python
        f"tokens={TokenEstimate.of(6_706)}"  # 'tokens=~6700'
        ```
    """

    @classmethod
    def of(cls, tokens: int) -> TokenEstimate:
        """`tokens` rounded to two significant digits, as an estimate."""
        digits = len(str(abs(int(tokens))))
        return cls(round(int(tokens), -(digits - 2)) if digits > 2 else int(tokens))

    def __str__(self) -> str:
        return f"~{int(self)}"

    def __repr__(self) -> str:
        return f"TokenEstimate({int(self)})"

    def __format__(self, spec: str) -> str:
        return f"~{format(int(self), spec)}"


_SHOWN_TOKENS = re.compile(r" tokens=(~?)(\d+) ")


def shown_tokens(preview: BaseMessage) -> int | None:
    """The size of the full result a preview's header states (a `TokenEstimate` when
    marked ``~``), or None when the header states none."""
    text = content_text(preview.content)
    if not text.startswith(PREVIEW_HEADER):
        return None
    found = _SHOWN_TOKENS.search(text, 0, text.find("\n") if "\n" in text else len(text))
    if found is None:
        return None
    tokens = int(found.group(2))
    return TokenEstimate(tokens) if found.group(1) else tokens


def preview_frame(message: ToolMessage, *, tokens: int) -> tuple[str, str]:
    """The header and the reference line every preview of `message` has around its body."""
    ref = tool_result_ref(message.tool_call_id)
    header = (
        f"{PREVIEW_HEADER} tool={message.name or '?'} status={message.status} "
        f"tokens={tokens} ref={ref}"
    )
    return header, f'Full output: read_tool_result(ref="{ref}")'


def preview_message(message: ToolMessage, *, tokens: int, body: str) -> ToolMessage:
    """The preview of `message` showing `body`: header, body, reference (no artifact)."""
    header, footer = preview_frame(message, tokens=tokens)
    lines = [header, body]
    extra = non_text_blocks(message.content)
    if extra:
        lines.append(f"[{extra} non-text content block(s) not shown]")
    lines.append(footer)
    return ToolMessage(
        content="\n".join(lines),
        tool_call_id=message.tool_call_id,
        name=message.name,
        status=message.status,
        id=derived_id(message.id, "preview"),
    )


def preview_stub(preview: ToolMessage) -> ToolMessage:
    """A preview cut to its frame: the header and the reference line, a note between.

    For the newest tool group of a round with no room for its previews, when the full
    text is not at hand (compaction reads a view whose result is a preview already):
    the model still sees what the result was and how to open it.
    """
    lines = content_text(preview.content).split("\n")
    if len(lines) < 3:  # (a one-line body, minified JSON, is replaced by the note too)
        return preview
    note = "[… no room left in this request for more of the preview …]"
    return preview.model_copy(update={"content": "\n".join([lines[0], note, lines[-1]])})


_FRAME_CHARS_PER_TOKEN = 3  # header, reference and notes: short words, "=", "/", digits
_FRAME_NOTES = 48  # the "[… N lines omitted …]" and "[…]" lines of a body, in characters


def preview_start(message: ToolMessage, *, tokens: int, budget: int, chars_per_token: float) -> int:
    """The body size (characters) a preview of `message` is first built at (`shrink_to`).

    The budget minus what the frame (header, reference, omission notes) takes, at the
    full text's characters per token: the first attempt then usually fits, and a
    preview costs one count instead of two or three (each a tokenizer call). For
    `tool_result_preview`, whose body fills the characters it is given.
    """
    header, footer = preview_frame(message, tokens=tokens)
    frame = (len(header) + len(footer) + _FRAME_NOTES) // _FRAME_CHARS_PER_TOKEN
    return max(16, int((budget - frame) * chars_per_token))


def shortened_text(text: str, chars: int) -> str:
    """The first paragraph of `text` plus its key lines, within about `chars` characters."""
    paragraphs = _PARAGRAPH.split(text.strip(), maxsplit=1)
    first = _clip(paragraphs[0].strip(), max(40, (chars * 3) // 5))
    rest = paragraphs[1].split("\n") if len(paragraphs) > 1 else []
    weights = line_weights("\n".join(rest)) if rest else ()
    return "\n".join([first, *_pick(rest, weights, chars - len(first))])


def shortened_message(message: BaseMessage, *, tokens: int, chars: int) -> BaseMessage:
    """A copy of a user or assistant message cut to its first paragraph and key lines.

    Tool calls on an assistant message are kept as they are; only the text is cut.
    """
    text = content_text(message.content)
    body = shortened_text(text, chars)
    extra = non_text_blocks(message.content)
    note = f"{extra} non-text block(s) and " if extra else ""
    marker = (
        f"[… shortened by compaction: {note}the rest of a {tokens}-token message omitted; "
        "the full message stays in the conversation history]"
    )
    update: dict[str, Any] = {"content": f"{body}\n{marker}", "id": derived_id(message.id, "short")}
    return message.model_copy(update=update)


def calls_cut(message: AIMessage, *, chars: int) -> AIMessage:
    """A copy of an assistant message whose tool calls' arguments hold texts cut to
    ``chars`` characters each, with a note (the call ids and names as they are, so
    every result still answers its call). The call was made and answered already: the
    model sees what it asked for; the history keeps it whole (in ``rewrite_messages``
    mode, the checkpoints before the compaction do).

    For a call whose arguments alone outgrow the budget (a 30 KB report saved through
    a tool): without it, the request could not end with the round the model is in.
    The same texts are cut wherever a provider's raw form repeats them, which is what
    an integration may send instead of ``tool_calls``: ``content`` blocks (Anthropic's
    ``tool_use`` ``input``, OpenAI Responses' ``function_call`` ``arguments``, a
    ``tool_call`` block's ``args``), and ``invalid_tool_calls``;
    ``additional_kwargs["tool_calls"]``, which LangChain's integrations send only for a
    message without ``tool_calls``, is left out.
    """

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > chars:
            return f"{value[:chars]}… [cut by compaction: {len(value) - chars} more characters]"
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    def cut_json(text: Any) -> Any:
        """A JSON text of arguments, its texts cut (a text that does not parse: cut)."""
        if not isinstance(text, str) or len(text) <= chars:
            return text
        try:
            parsed = json.loads(text)
        except ValueError:
            return cut(text)
        return json.dumps(cut(parsed), ensure_ascii=False)

    def block(item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        kind = item.get("type")
        if kind in ("tool_use", "server_tool_use"):
            item = {**item, "input": cut(item.get("input"))}
            if "partial_json" in item:
                item["partial_json"] = cut_json(item["partial_json"])
        elif kind == "function_call" and "arguments" in item:
            item = {**item, "arguments": cut_json(item["arguments"])}
        elif kind == "tool_call":
            item = {**item, "args": cut(item.get("args"))}
            extras = item.get("extras")
            if isinstance(extras, dict) and "arguments" in extras:
                item["extras"] = {**extras, "arguments": cut_json(extras["arguments"])}
        return item

    content: Any = message.content
    if isinstance(content, list):
        content = [block(item) for item in content]
    update: dict[str, Any] = {
        "content": content,
        "tool_calls": [{**call, "args": cut(call["args"])} for call in message.tool_calls],
        "invalid_tool_calls": [
            {**call, "args": cut(call.get("args"))} for call in message.invalid_tool_calls
        ],
        "additional_kwargs": {
            k: v
            for k, v in message.additional_kwargs.items()
            if k not in ("tool_calls", "function_call")
        },
        "id": derived_id(message.id, "args"),
    }
    return message.model_copy(update=update)


def head_and_tail_text(text: str, chars: int) -> str:
    """The start and the end of `text` within about `chars` characters, key lines between.

    For a pasted log or traceback the end is where the error is, so the end gets as much
    room as the start; cuts fall on line breaks when one is near. A single long line
    keeps its first and last characters.

    Example:
        ```python
        log = "\\n".join(f"step {i} ok" for i in range(400)) + "\\nValueError: bad row 17"
        short = head_and_tail_text(log, 300)
        short.startswith("step 0 ok") and short.endswith("ValueError: bad row 17")  # True
        ```
    """
    if len(text) <= chars:
        return text
    side = max(20, (chars * 2) // 5)
    head = text[:side]
    cut = head.rfind("\n")
    if cut > side // 2:
        head = head[:cut]
    tail = text[len(text) - side :]
    cut = tail.find("\n")
    if 0 <= cut < side // 2:
        tail = tail[cut + 1 :]
    middle = text[len(head) : len(text) - len(tail)].strip("\n")
    lines = middle.split("\n")
    chosen = _pick(lines, line_weights(middle), chars - len(head) - len(tail))
    omitted = len(middle) - sum(len(line) for line in chosen)
    note = "; key lines follow" if chosen else ""
    parts = [head, f"[… {omitted} characters omitted{note} …]", *chosen]
    if chosen:
        parts.append("[…]")
    return "\n".join([*parts, tail])


def shortened_to_fit(
    message: BaseMessage, *, tokens: int, chars: int, room: int, keep_blocks: bool = True
) -> BaseMessage:
    """A copy of the latest user message cut to fit `room` tokens, saying so at its top.

    Only for a message the hard budget cannot hold (the ladder's `shorten_latest_user`):
    it keeps the start and the end of its text (`head_and_tail_text`), and a note after
    them tells the model that the middle is missing, so it can ask for it instead of
    guessing. Its images and other non-text blocks stay (``keep_blocks``; the caller leaves
    them out when even the shortest text with them does not fit): those before its first
    text block before the shortened text, the others after it.
    """
    text = content_text(message.content)
    extra = non_text_blocks(message.content)
    blocks = f" and {extra} non-text block(s)" if extra and not keep_blocks else ""
    note = (
        f"[… shortened by compaction: this {tokens}-token message is larger than the "
        f"{room} tokens this request has room for, so only its start and its end are "
        f"shown, with key lines from the middle; the rest{blocks} is left out. The full "
        "message stays in the conversation history.]"
    )
    body = f"{head_and_tail_text(text, chars)}\n{note}"
    content: Any = body
    if extra and keep_blocks:
        # Blocks before the first text stay before it (an image ahead of its question);
        # the others follow the shortened text, in their order.
        parts: list[Any] = list(message.content)
        first_text = next((i for i, b in enumerate(parts) if is_text_block(b)), len(parts))
        before = [b for b in parts[:first_text] if not is_text_block(b)]
        after = [b for b in parts[first_text:] if not is_text_block(b)]
        content = [*before, {"type": "text", "text": body}, *after]
    update: dict[str, Any] = {"content": content, "id": derived_id(message.id, "short")}
    return message.model_copy(update=update)


def shrink_to(
    build: Callable[[int], BaseMessage],
    *,
    chars: int,
    budget: int,
    count: Callable[[BaseMessage], int],
) -> tuple[BaseMessage, int]:
    """Build a stand-in with `build(chars)` and shrink `chars` until it costs <= `budget`.

    Returns the smallest attempt when even that stays over (the caller records it).
    """
    message = build(chars)
    tokens = count(message)
    for _ in range(8):
        if tokens <= budget or chars <= 16:
            break
        chars = max(16, int(chars * budget / tokens * 0.85))
        message = build(chars)
        tokens = count(message)
    return message, tokens


class StandInCache:
    """Stand-ins already built, by what they are built from (a bounded LRU map).

    Compaction runs again and again over a history that mostly stays the same: the
    preview of a 30 KB tool result is the same each time, but building and counting it
    is not free (the node's whole-history strategies rebuild every preview at every
    compaction). A key names everything the stand-in depends on: the message (its ids
    and a hash of its text, as `MessageTokenCounter` checks a cached count), the sizes,
    and the counter with its base (a stand-in's cost depends on who counts it). A key
    that cannot be hashed (a counter object without `__hash__`) is simply not cached.
    Thread-safe.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The stand-in stored under `key`, or None."""
        try:
            with self._lock:
                value = self._entries.get(key)
                if value is not None:
                    self._entries.move_to_end(key)
                return value
        except TypeError:  # unhashable counter: not cached
            return None

    def clear(self) -> None:
        """Forget every stand-in (as a new process would start)."""
        with self._lock:
            self._entries.clear()

    def put(self, key: Any, value: Any) -> None:
        try:
            with self._lock:
                self._entries[key] = value
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
        except TypeError:
            pass


def message_key(message: ToolMessage, text: str) -> tuple[Any, ...]:
    """What a tool result's stand-in depends on besides sizes: ids, name, status, text."""
    extra = non_text_blocks(message.content)
    return (message.id, message.tool_call_id, message.name, message.status, hash(text), extra)
