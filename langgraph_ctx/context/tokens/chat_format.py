"""OpenAI's chat format: what a message, its tool calls and the bound tools cost.

Every message costs the family's overhead plus its role and content, a ``name`` costs
one more; tool schemas follow the OpenAI cookbook's ``num_tokens_for_tools`` formula and
tool calls an empirical rule (both close, not byte-exact; see ``docs/budget.md``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import regex
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from langgraph_ctx.context.tokens.bpe import load_encoding
from langgraph_ctx.context.tokens.families import ModelFamily
from langgraph_ctx.context.tokens.images import (
    MEDIA_BLOCK_TOKENS,
    MEDIA_BLOCK_TYPES,
    block_image_tokens,
    strip_binary,
)

__all__ = [
    "message_role",
    "to_message",
]

_ROLE_BY_TYPE: Final[Mapping[str, str]] = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
}


def to_message(value: Any) -> BaseMessage:
    """Turn anything found in a message list into a `BaseMessage`, never raising.

    Accepts messages, OpenAI-style dicts, `(role, content)` tuples and strings (as
    LangChain does). Anything else becomes a `ChatMessage` with role `"unknown"`
    holding its text, so it is still counted.
    """
    if isinstance(value, BaseMessage):
        return value
    try:
        return convert_to_messages([value])[0]
    except Exception:
        pass
    if isinstance(value, Mapping):
        role = value.get("role") or value.get("type") or "unknown"
        content = value.get("content")
        return ChatMessage(role=str(role), content=_as_content(content))
    return ChatMessage(role="unknown", content="" if value is None else str(value))


def _as_content(content: Any) -> str | list[Any]:
    """Content a `ChatMessage` takes: a string, or a list of strings and dicts (any other
    item, a number or None in a list, counted as its text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [
            item if isinstance(item, (str, dict)) else json.dumps(item, default=str)
            for item in content
        ]
    return json.dumps(content, default=str, ensure_ascii=False)


def message_role(message: BaseMessage) -> str:
    """The role a message is sent with in OpenAI's chat format."""
    if isinstance(message, ChatMessage):
        return str(message.role)
    if isinstance(message, SystemMessage):
        return str(message.additional_kwargs.get("__openai_role__") or "system")
    return _ROLE_BY_TYPE.get(message.type, str(message.type))


_SHORT_TEXT = 64
"""Texts up to this many characters are counted once and remembered (`Encoder.text`)."""
_SHORT_TEXTS = 8192
"""How many short texts an encoder remembers (then it starts over: a bound, not an LRU)."""
_GIL_TEXT = 4096
"""Texts up to this many characters are counted without releasing the GIL (`Encoder.bpe`),
inside `keeping_gil` (a counter counting a step's few new messages).

tiktoken's encoder releases the GIL on every call. Another thread waiting for it (a
checkpoint LangGraph writes in the background while the next node runs) then takes it
and keeps it until it blocks: CPython gives the thread that let go no priority to take
it back before its switch interval (5 ms). For a text of a few hundred characters, the
encoding itself takes microseconds; the wait, a millisecond or more. So short texts are
split in Python (the encoding's own pattern, `regex` told not to release the GIL) and
their pieces counted by `encode_single_piece`, which holds it: the same tokens
(`tests/test_gil_tokens.py` compares the two on random text), and a node that counts its new
messages keeps the GIL. Longer texts go to `encode_ordinary` (there, letting other
threads run is worth the wait), and so do texts counted outside `keeping_gil`: the
Python split costs about twice tiktoken's whole encoding, paid on a few new messages,
not on a history counted from scratch."""
_PIECES = 65536
"""How many pieces' counts an encoder remembers (then it starts over)."""
_KEEP_GIL: ContextVar[bool] = ContextVar("langgraph_ctx_keep_gil", default=False)
_PAST_CHARS_PER_TOKEN = 5
"""`Encoder.text_past` first counts this many characters per token of its limit (prose
and logs hold about 4; a prefix that falls short grows at the rate it showed)."""


# What each Unicode class the encodings' patterns use matches among ASCII characters
# (`regex`'s `\s` is the White_Space property: not U+001C..U+001F, which `re`'s is).
_ASCII_CLASSES: Final[dict[str, str]] = {
    r"\p{L}": "A-Za-z",
    r"\p{Lu}": "A-Z",
    r"\p{Ll}": "a-z",
    r"\p{Lt}": "",
    r"\p{Lm}": "",
    r"\p{Lo}": "",
    r"\p{M}": "",
    r"\p{N}": "0-9",
    r"\s": "\\t\\n\\x0b\\x0c\\r ",
}
_ELLIPSIS: Final = "\u2026"
"""The one non-ASCII character of the previews' own notes (``[… 40 lines omitted …]``):
punctuation (not a letter, number, mark or space), which every class of an encoding's
pattern treats as `ascii_pattern`'s translation does, so a text that is ASCII besides it
splits the same with `re` (`tests/test_gil_tokens.py`)."""
_CLASS_ESCAPE = re.compile(r"\\p\{\w+\}|\\[sS]")


def ascii_pattern(pattern: str) -> str | None:
    r"""`pattern` (an encoding's `regex` pattern) for ASCII text only, in `re`'s syntax.

    Why: `Encoder.bpe` splits texts in Python to keep the GIL (see `_GIL_TEXT`), and
    `re` splits ASCII text about twice as fast as `regex` with its Unicode classes
    (`\p{L}` and the like are looked up per character). Among ASCII characters each
    class is a fixed set of ranges, so the translated pattern finds the same pieces in
    an ASCII text (`tests/test_gil_tokens.py` compares both on random ASCII text).
    None when the pattern uses a class not in `_ASCII_CLASSES` (then `regex` splits).

    Example:
        ```python
        ascii_pattern(r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+")
        # '[0-9]{1,3}| ?[^\\t\\n\\x0b\\x0c\\r A-Za-z0-9]+'
        ```
    """
    out: list[str] = []
    at = 0
    inside = False  # within [...]: the patterns nest no brackets
    for m in _CLASS_ESCAPE.finditer(pattern):
        before = pattern[at : m.start()]
        for i, ch in enumerate(before):
            if ch == "[" and (i == 0 or before[i - 1] != "\\"):
                inside = True
            elif ch == "]" and (i == 0 or before[i - 1] != "\\"):
                inside = False
        out.append(before)
        name = m.group()
        if name == r"\S":
            chars = _ASCII_CLASSES[r"\s"]
            if inside:
                return None  # a negated class inside a set: not used by the encodings
            out.append(f"[^{chars}]")
        else:
            chars = _ASCII_CLASSES.get(name)  # type: ignore[assignment]
            if chars is None:
                return None
            if inside:
                out.append(chars)
            elif chars:
                out.append(f"[{chars}]")
            else:
                return None  # an empty class outside a set: not used by the encodings
        at = m.end()
    out.append(pattern[at:])
    converted = "".join(out)
    if "[]" in converted or "[^]" in converted:
        return None
    try:
        re.compile(converted)
    except re.error:
        return None
    return converted


@contextmanager
def keeping_gil() -> Iterator[None]:
    """Count short texts without releasing the GIL in this block (see `_GIL_TEXT`)."""
    token = _KEEP_GIL.set(True)
    try:
        yield
    finally:
        _KEEP_GIL.reset(token)


def _safe_cut(text: str, at: int) -> int:
    """The first space at or after `at` between two non-space characters (-1: none).

    A piece of every tiktoken pattern starts there (`Encoder.text_past`). `str.isspace`
    holds for every character the patterns' ``\\s`` matches (and a few more), so a cut
    it allows is one the patterns allow.
    """
    find = text.find
    end = len(text) - 1
    at = max(at, 1)
    while True:
        i = find(" ", at, end)
        if i < 0:
            return -1
        if not text[i - 1].isspace() and not text[i + 1].isspace():
            return i
        at = i + 1


class Encoder:
    """Counts text of one family: exact BPE tokens, before the family's multiplier.

    Short texts (roles, names, tool names, small arguments) come back in every message:
    their counts are remembered, so a message costs one tokenizer call for its content
    rather than one per part (each call also lets other threads take the GIL).
    """

    __slots__ = ("_piece", "_pieces", "_short", "_split", "_split_ascii", "enc", "family")

    def __init__(self, family: ModelFamily) -> None:
        self.family = family
        self.enc = load_encoding(family.encoding)
        self._short: dict[str, int] = {}
        self._pieces: dict[str, int] = {}
        self._split = regex.compile(self.enc._pat_str).findall
        ascii_only = ascii_pattern(self.enc._pat_str)
        self._split_ascii = re.compile(ascii_only).findall if ascii_only else None
        self._piece = self.enc._core_bpe.encode_single_piece

    def text(self, text: Any) -> int:
        if not text:
            return 0
        if not isinstance(text, str):
            text = str(text)
        if len(text) > _SHORT_TEXT:
            return self.bpe(text)
        tokens = self._short.get(text)
        if tokens is None:
            if len(self._short) >= _SHORT_TEXTS:
                self._short = {}
            tokens = self._short[text] = self.bpe(text)
        return tokens

    def bpe(self, text: str) -> int:
        """``len(encode_ordinary(text))``; in `keeping_gil`, holding the GIL for texts up
        to `_GIL_TEXT` characters."""
        if len(text) > _GIL_TEXT or not _KEEP_GIL.get():
            return len(self.enc.encode_ordinary(text))
        pieces = self._pieces
        if len(pieces) >= _PIECES:
            pieces = self._pieces = {}
        if self._split_ascii is not None and (
            text.isascii() or (_ELLIPSIS in text and text.replace(_ELLIPSIS, "").isascii())
        ):
            split = self._split_ascii(text)  # `re` holds the GIL, and is faster on ASCII
        else:
            split = self._split(text, concurrent=False)
        counts = list(map(pieces.get, split))  # most pieces are known words: in C
        if None in counts:
            try:
                for i, n in enumerate(counts):
                    if n is None:
                        piece = split[i]
                        counts[i] = pieces[piece] = len(self._piece(piece.encode("utf-8")))
            except UnicodeEncodeError:  # a lone surrogate: tiktoken's own repair applies
                return len(self.enc.encode_ordinary(text))
        return sum(counts)  # type: ignore[arg-type]

    def text_past(self, text: str, limit: int) -> tuple[int, int]:
        """Tokens of a prefix of `text` once they pass `limit`: (tokens, characters counted).

        The prefix ends at a space between two non-space characters: a piece of every
        tiktoken pattern that holds such a space starts at it (only whitespace pieces
        hold whitespace past their first character), so the tokens of the prefix plus
        those of the rest are the tokens of the whole text. A prefix past `limit` is
        thus a lower bound for the whole; when no prefix passes, the whole text is
        counted, exactly (then the characters counted are ``len(text)``).
        `tests/test_tokens.py` compares both with tiktoken on random text.
        """
        size = len(text)
        tokens = done = 0
        at = _PAST_CHARS_PER_TOKEN * (limit + 1)
        while at < size:
            cut = _safe_cut(text, at)
            if cut < 0:
                break
            tokens += self.bpe(text[done:cut])
            done = cut
            if tokens > limit:
                return tokens, done
            # too few tokens for those characters: the next part at the rate seen so far
            rate = done / max(tokens, 1)
            at = done + int(rate * (limit + 1 - tokens) * 1.25) + 1
        return tokens + self.bpe(text[done:]), size

    def scaled(self, raw: int) -> int:
        if self.family.multiplier == 1.0:
            return raw
        return math.ceil(raw * self.family.multiplier)

    # -- one message -------------------------------------------------------
    def message(self, message: BaseMessage) -> int:
        if message.type == "remove":  # RemoveMessage is an instruction, not content
            return 0
        fam = self.family
        n = fam.tokens_per_message + self.text(message_role(message))
        ai = isinstance(message, AIMessage)
        calls = tool_calls_as_sent(message) if ai else []
        n += self.content(message.content, skip_tool_blocks=bool(calls))
        name = message.name or message.additional_kwargs.get("name")
        if name and not isinstance(message, ToolMessage):  # tool results are sent without it
            n += self.text(name) + fam.tokens_per_name
        legacy_call = message.additional_kwargs.get("function_call")
        if isinstance(legacy_call, Mapping) and not calls:
            calls = [(str(legacy_call.get("name", "")), str(legacy_call.get("arguments", "")))]
        n += self.tool_calls(calls)
        return self.scaled(n)

    def message_past(self, message: BaseMessage, limit: int) -> tuple[int, bool, int]:
        """`message`'s tokens, or a lower bound once they pass `limit`: (tokens, exact,
        estimate).

        Exact (``exact=True``, the estimate the count itself) unless the message is a
        tool result with text content whose count passes `limit` on a prefix
        (`text_past`): then `tokens` is that prefix's count with the message's frame,
        more than `limit` and at most the whole count, and `estimate` scales the
        prefix's tokens to the whole text by characters. The rest of the text is not
        tokenized.
        """
        content = message.content
        if (
            not isinstance(message, ToolMessage)
            or not isinstance(content, str)
            or "function_call" in message.additional_kwargs
            or self.family.multiplier < 1.0
        ):
            tokens = self.message(message)
            return tokens, True, tokens
        frame = self.family.tokens_per_message + self.text(message_role(message))
        counted, chars = self.text_past(content, max(0, limit - frame))
        if chars == len(content):
            tokens = self.scaled(frame + counted)
            return tokens, True, tokens
        estimate = self.scaled(frame + round(counted * len(content) / chars))
        return self.scaled(frame + counted), False, estimate

    def tool_calls(self, calls: Sequence[tuple[str, str]]) -> int:
        # Empirical (OpenAI does not publish it): one call costs its name, its JSON
        # arguments and 5 tokens (`to=functions.<name>` framing); parallel calls are
        # wrapped in `multi_tool_use.parallel`: 15 per message and 7 per call.
        if not calls:
            return 0
        if len(calls) == 1:
            name, arguments = calls[0]
            return 5 + self.text(name) + self.text(arguments)
        return 15 + sum(7 + self.text(name) + self.text(args) for name, args in calls)

    # -- content -----------------------------------------------------------
    def content(self, content: Any, *, skip_tool_blocks: bool = False) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, Mapping):
            return self.block(content, skip_tool_blocks)
        if isinstance(content, (list, tuple)):
            return sum(self.block(block, skip_tool_blocks) for block in content)
        return self.text(str(content))

    def block(self, block: Any, skip_tool_blocks: bool) -> int:
        if isinstance(block, str):
            return self.text(block)
        if not isinstance(block, Mapping):
            return self.text(str(block))
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            return self.text(block.get("text"))
        if kind in ("image_url", "image", "input_image"):
            return block_image_tokens(block, self.family)
        if kind in ("tool_use", "tool_call", "function_call", "server_tool_use"):
            if skip_tool_blocks:  # the same calls are counted from `tool_calls`
                return 0
            args = block.get("input", block.get("args", block.get("arguments")))
            if not isinstance(args, str):
                args = _arguments_json(args)
            return self.text(block.get("name")) + self.text(args)
        if kind == "tool_result":
            return self.content(block.get("content"))
        if kind in ("thinking", "reasoning", "redacted_thinking"):
            text = block.get("thinking") or block.get("reasoning") or block.get("text") or ""
            summary = block.get("summary")
            if isinstance(summary, list):
                text += "".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
            return self.text(text)
        if kind in ("file", "document", "input_file") and isinstance(block.get("text"), str):
            return self.text(block["text"])
        if kind in MEDIA_BLOCK_TYPES:
            return MEDIA_BLOCK_TOKENS
        stripped, had_binary = strip_binary(block)
        return self.text(json.dumps(stripped, default=str, ensure_ascii=False)) + (
            MEDIA_BLOCK_TOKENS if had_binary else 0
        )

    # -- tools -------------------------------------------------------------
    def tools(self, tools: Iterable[Any]) -> tuple[int, list[str]]:
        notes: list[str] = []
        total = 0
        any_function = False
        for tool in tools:
            schema, note = _tool_schema(tool)
            if note:
                notes.append(note)
            if schema.get("type") != "function" or not isinstance(schema.get("function"), Mapping):
                # Provider built-in tools ({"type": "web_search"}, ...): their JSON.
                total += self.text(json.dumps(schema, default=str, ensure_ascii=False))
                continue
            any_function = True
            function = schema["function"]
            total += self.family.tool_func_init
            description = str(function.get("description") or "")
            total += self.text(f"{function.get('name', '')}:{_drop_period(description)}")
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            if isinstance(properties, Mapping) and properties:
                total += 3 + self.properties(properties)  # prop_init
        if any_function:
            total += 12  # func_end
        return self.scaled(total), notes

    def properties(self, properties: Mapping[str, Any]) -> int:
        total = 0
        for key, schema in properties.items():
            total += 3  # prop_key
            if not isinstance(schema, Mapping):
                total += self.text(f"{key}::")
                continue
            enum = schema.get("enum")
            if isinstance(enum, list):
                total += -3 + sum(3 + self.text(str(item)) for item in enum)
            description = _drop_period(str(schema.get("description") or ""))
            total += self.text(f"{key}:{_schema_type(schema)}:{description}")
            # Nested objects are not in the cookbook formula; counted the same way.
            nested = schema.get("properties")
            items = schema.get("items")
            if not isinstance(nested, Mapping) and isinstance(items, Mapping):
                nested = items.get("properties")
            if isinstance(nested, Mapping) and nested:
                total += 3 + self.properties(nested)
        return total


def _drop_period(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _schema_type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " | ".join(
            str(o.get("type", "object")) if isinstance(o, Mapping) else str(o) for o in options
        )
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return ""


_arguments_json = json.JSONEncoder(default=str).encode
"""`json.dumps(value, default=str)`, without building an encoder per call (most of its cost
for a small argument dict; `message_fingerprint` runs it on every tool call it sees)."""


def tool_calls_as_sent(message: BaseMessage) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for call in getattr(message, "tool_calls", None) or []:
        calls.append((str(call.get("name") or ""), _arguments_json(call.get("args"))))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        calls.append((str(call.get("name") or ""), str(call.get("args") or "")))
    return calls


def _tool_schema(tool: Any) -> tuple[dict[str, Any], str | None]:
    """OpenAI tool schema of `tool`, or a name-only stand-in and a note saying why."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        schema = convert_to_openai_tool(tool)
    except Exception as err:
        name = _tool_name(tool)
        description = getattr(tool, "description", None)
        if isinstance(tool, Mapping):
            description = tool.get("description")
        stand_in = {
            "type": "function",
            "function": {"name": name, "description": description or ""},
        }
        return (
            stand_in,
            f"tool {name!r} has no usable schema ({type(err).__name__}); "
            "counted its name and description only",
        )
    function = schema.get("function")
    if (
        schema.get("type") == "function"
        and isinstance(function, Mapping)
        and "parameters" not in function
    ):
        return (
            schema,
            f"tool {function.get('name')!r} has no parameter schema; "
            "counted its name and description only",
        )
    return schema, None


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        return str(tool.get("name") or tool.get("type") or "unnamed")
    return str(
        getattr(tool, "name", None) or getattr(tool, "__name__", None) or type(tool).__name__
    )
