"""A message list read into the blocks compaction keeps or drops whole.

`Conversation.build` reads any message list once and produces:

- `system`: the leading system messages (the system prompt), always sent first;
- `summaries`: summary-class system messages found later in the history (content starting
  with `SUMMARY` or `CONVERSATION_SUMMARY`), moved up behind the system prompt;
- `running_summary`: the summary message an earlier compaction wrote, if any;
- `units`: the history as user messages, assistant messages and *tool groups* (an
  assistant message with tool calls plus all its tool results), each with its token
  cost and its round (a round starts at a user message);
- `dropped` and `repairs`: what the input got wrong and what was done about it.

Repairs keep every output acceptable to OpenAI and Anthropic: an orphan tool result (no
matching call) is left out, a tool result separated from its call is moved next to it,
tool calls nobody answered are stripped from a copy of the assistant message, historical
system messages are left out, and messages before the first user message are left out.
Nothing is changed in place: stand-ins are copies.

Messages are read by position, never looked up by id: with an `operator.add` messages
reducer two messages can share an id (or be the same message twice), and each is then a
message of its own (`Unit.keys` may repeat an id). Tool results pair with calls by
`tool_call_id` (within a unit those are unique).

It is one module (about 690 lines) because reading the blocks and repairing them are
one pass over the list: each repair decides from the block being built.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_ctx.context.budget import SUMMARY_MARKER
from langgraph_ctx.context.compaction.errors import CompactionError
from langgraph_ctx.context.compaction.previews import (
    StandInCache,
    calls_cut,
    derived_id,
    is_preview,
    is_tool_result_page,
    message_key,
    preview_start,
    preview_stub,
    shortened_message,
    shortened_to_fit,
    shrink_to,
    tool_result_preview,
    tool_result_ref,
)
from langgraph_ctx.context.compaction.record import (
    DroppedMessage,
    OffloadedResult,
    RunningSummary,
    ShortenedMessage,
)
from langgraph_ctx.context.content import content_text, non_text_blocks

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens a list of messages costs (see docs/CONTRACTS.md)."""

SUMMARY_PREFIXES = ("SUMMARY", "CONVERSATION_SUMMARY")
RUNNING_SUMMARY_ID = "langgraph-ctx-running-summary"
UnitKind = Literal["system", "summary", "user", "assistant", "tools"]


def resolve_token_counter(
    token_counter: TokenCounter | Literal["approximate"] | None, model: str
) -> TokenCounter:
    """The counter to use: the given one, `"approximate"`, or `count_tokens` for `model`.

    `count_tokens` is imported here, not at module import, so compaction imports even
    while the token module is being changed.
    """
    if token_counter is None:
        try:
            from langgraph_ctx.context.tokens import count_tokens
        except ImportError as err:
            raise CompactionError(
                "the default token counter (langgraph_ctx.context.tokens.count_tokens) "
                f"is not available ({err}); pass token_counter=... or "
                'token_counter="approximate"'
            ) from err
        return functools.partial(count_tokens, model=model)
    if token_counter == "approximate":
        return count_tokens_approximately
    if not callable(token_counter):
        raise CompactionError(
            f"token_counter must be a callable taking a list of messages, got {token_counter!r}"
        )
    return token_counter


def counter_name(token_counter: Any, model: str) -> str:
    """A short name for the record: the tokenizer model or the counter's name."""
    if token_counter is None:
        return model
    if token_counter == "approximate":
        return "approximate"
    return getattr(token_counter, "__name__", type(token_counter).__name__)


def _role(message: BaseMessage) -> str:
    """`system`, `user`, `assistant`, `tool`, or the type of anything else."""
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return {"human": "user", "ai": "assistant"}.get(message.role, message.role)
    return message.type


def is_summary_class_message(message: BaseMessage) -> bool:
    """True for a summary-class system message: content starts with SUMMARY or CONVERSATION_SUMMARY.

    Historical system messages are dropped by compaction, except these.

    Example:
        ```python
        is_summary_class_message(SystemMessage("CONVERSATION_SUMMARY\\nUser wants ..."))  # True
        is_summary_class_message(SystemMessage("You are a helpful assistant"))  # False
        ```
    """
    if _role(message) != "system":
        return False
    return content_text(message.content).lstrip().startswith(SUMMARY_PREFIXES)


def is_running_summary(message: BaseMessage) -> bool:
    """True for the summary message compaction itself writes."""
    key, value = SUMMARY_MARKER
    return (
        message.id == RUNNING_SUMMARY_ID
        or (message.additional_kwargs or {}).get(key) == value
        or "running_summary" in (message.response_metadata or {})
    )


@dataclass(frozen=True)
class Unit:
    """Messages kept or dropped together, as they would be sent (after offloading)."""

    kind: UnitKind
    messages: tuple[BaseMessage, ...]
    keys: tuple[str, ...]
    """Record ids of the original messages (their ids, or `#<input index>`)."""
    tokens: int
    round: int
    """0 before the first user message, then 1, 2, ... (a round starts at a user message)."""
    position: int
    """Index in `Conversation.units` (order of the conversation)."""
    sizes: tuple[int, ...] = ()
    """Tokens of each message (they add up to `tokens`)."""
    offloads: tuple[OffloadedResult, ...] = ()
    shortened: tuple[ShortenedMessage, ...] = ()
    originals: tuple[BaseMessage, ...] = ()
    """The messages before previews or shortening (empty when `messages` are the originals)."""

    @property
    def source(self) -> tuple[BaseMessage, ...]:
        """The original messages: what relevance scoring and summaries read."""
        return self.originals or self.messages

    @property
    def role(self) -> str:
        return {"tools": "assistant", "summary": "system"}.get(self.kind, self.kind)

    @property
    def text(self) -> str:
        """All text the unit would send: content, tool call names and arguments."""
        parts: list[str] = []
        for message in self.messages:
            parts.append(content_text(message.content))
            if isinstance(message, AIMessage):
                parts.extend(f"{call['name']}({call['args']})" for call in message.tool_calls)
        return "\n".join(part for part in parts if part)


@dataclass
class Conversation:
    """A message list read into units, with token costs. Build it with `Conversation.build`."""

    counter: TokenCounter
    base_tokens: int
    system: list[Unit]
    summaries: list[Unit]
    running_summary: Unit | None
    previous_summary: RunningSummary | None
    units: list[Unit]
    dropped: list[DroppedMessage] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    tokens_before: int = 0
    messages_before: int = 0
    offload_threshold: int | None = 500
    preview_tokens: int = 160
    headroom: int = 0
    """Tokens the mandatory messages (the latest user message and the rest of its round)
    may take beyond the strategy's budget: the hard budget minus the target. The target
    is a goal; only what the hard budget cannot hold is cut (`fit_current_round`)."""

    # -- costs -----------------------------------------------------------------
    def count(self, message: BaseMessage) -> int:
        """What one more message costs in a request (its tokens without the request overhead)."""
        return max(0, self.counter([message]) - self.base_tokens)

    def cost(self, units: Iterable[Unit]) -> int:
        """Tokens of these units (plus nothing: add `fixed_tokens` for a whole request)."""
        return sum(unit.tokens for unit in units)

    def fixed_tokens(self, *, with_running_summary: bool = True) -> int:
        """Tokens that are always sent: request overhead, system prompt, summary messages."""
        fixed = self.base_tokens + self.cost(self.system) + self.cost(self.summaries)
        if with_running_summary and self.running_summary is not None:
            fixed += self.running_summary.tokens
        return fixed

    @property
    def shorten_tokens(self) -> int:
        """How long a text the fallback ladder leaves after shortening it."""
        return 2 * self.preview_tokens

    @property
    def latest_user(self) -> int | None:
        """Position of the latest user message in `units`, if there is one."""
        for unit in reversed(self.units):
            if unit.kind == "user":
                return unit.position
        return None

    @property
    def rounds(self) -> int:
        """The number of the last round (0 when there is no user message)."""
        return self.units[-1].round if self.units else 0

    # -- stand-ins ---------------------------------------------------------------
    def previewed(
        self,
        unit: Unit,
        *,
        threshold: int,
        cause: Literal["size", "budget"],
        preview_tokens: int | None = None,
    ) -> Unit:
        """`unit` with every tool result over `threshold` tokens replaced by a preview
        (of about `preview_tokens`, default the conversation's).

        A `read_tool_result` answer is never previewed (`is_tool_result_page`): the model
        asked for the full text, and a preview would point back at it in a loop. The
        tool pages what is too large for the budget instead.
        """
        if unit.kind != "tools":
            return unit
        messages = list(unit.messages)
        sizes = list(unit.sizes)
        offloads = list(unit.offloads)
        changed = False
        for i, message in enumerate(messages):
            if not isinstance(message, ToolMessage):
                continue
            original: ToolMessage = message
            if is_preview(message):
                # Previewed already: again, smaller, only when asked for a smaller preview
                # (the newest tool group of a round that does not fit, `fit_current_round`),
                # from the full text when at hand, else cut to its frame.
                if preview_tokens is None or sizes[i] <= preview_tokens:
                    continue
                source = unit.originals[i] if unit.originals else None
                if not isinstance(source, ToolMessage) or is_preview(source):
                    stub = preview_stub(message)
                    cost = self.count(stub)
                    if cost < sizes[i]:
                        messages[i], sizes[i], changed = stub, cost, True
                    continue
                original = source
                full = self.count(original)
            else:
                full = sizes[i]
            if is_tool_result_page(original):
                continue
            if full <= threshold:
                continue
            preview, cost = preview_of(
                original,
                tokens=full,
                preview_tokens=self.preview_tokens if preview_tokens is None else preview_tokens,
                count=self.count,
                counted_by=(self.counter, self.base_tokens),
            )
            if cost >= sizes[i]:
                continue
            messages[i] = preview
            sizes[i] = cost
            changed = True
            record = OffloadedResult(
                ref=tool_result_ref(original.tool_call_id),
                id=unit.keys[i],
                tool_call_id=original.tool_call_id,
                tool=original.name,
                tokens=full,
                preview_tokens=cost,
                cause=cause,
            )
            offloads = [o for o in offloads if o.tool_call_id != original.tool_call_id]
            offloads.append(record)
        if not changed:
            return unit
        return replace(
            unit,
            messages=tuple(messages),
            sizes=tuple(sizes),
            tokens=sum(sizes),
            offloads=tuple(offloads),
            originals=unit.source,
        )

    def shortened(self, unit: Unit, *, budget: int) -> Unit:
        """`unit` (a user or assistant message) cut to its first paragraph and key lines.

        Returns `unit` itself when it is not a single text message or is short already.
        """
        if unit.kind not in ("user", "assistant") or unit.tokens <= budget:
            return unit
        (message,) = unit.messages
        return self._shrunk(
            unit,
            lambda chars: shortened_message(message, tokens=unit.tokens, chars=chars),
            budget=budget,
            originals=unit.source,
        )

    def calls_shortened(self, unit: Unit, *, budget: int) -> Unit:
        """A tool round (`unit` of kind ``tools``) with its assistant message's tool-call
        arguments cut (`calls_cut`) so that the round costs at most `budget` tokens, as
        far as cutting them can go; `unit` itself when it fits or that saves nothing."""
        if unit.kind != "tools" or unit.tokens <= budget:
            return unit
        call, *results = unit.messages
        if not isinstance(call, AIMessage) or not (call.tool_calls or call.invalid_tool_calls):
            return unit
        rest = sum(unit.sizes[1:])
        # characters a token of the arguments holds (the text content of a call is empty)
        shown = len(json.dumps([c.get("args") for c in call.tool_calls], default=str))
        per_token = max(1.0, shown / max(unit.sizes[0], 1))
        short, cost = shrink_to(
            lambda chars: calls_cut(call, chars=chars),
            chars=int(max(budget - rest, 1) * per_token),
            budget=max(budget - rest, 1),
            count=self.count,
        )
        if cost >= unit.sizes[0]:
            return unit
        record = ShortenedMessage(
            id=unit.keys[0], role="assistant", tokens=unit.sizes[0], tokens_after=cost
        )
        return replace(
            unit,
            messages=(short, *results),
            sizes=(cost, *unit.sizes[1:]),
            tokens=cost + rest,
            shortened=(*unit.shortened, record),
            originals=unit.source,
        )

    def shortened_to_fit(self, unit: Unit, *, budget: int) -> Unit:
        """The latest user message cut to `budget` tokens: its start and end, with a note.

        Returns `unit` itself when it fits already or is not a single text message.
        """
        if unit.kind != "user" or unit.tokens <= budget:
            return unit
        (message,) = unit.messages
        for keep_blocks in (True, False):  # its images too, when the shortest text leaves room

            def shorten(chars: int, keep: bool = keep_blocks) -> BaseMessage:
                return shortened_to_fit(
                    message, tokens=unit.tokens, chars=chars, room=budget, keep_blocks=keep
                )

            short = self._shrunk(unit, shorten, budget=budget, originals=unit.originals)
            if short.tokens <= budget or not non_text_blocks(message.content):
                return short
        return short

    def _shrunk(
        self,
        unit: Unit,
        shorten: Callable[[int], BaseMessage],
        *,
        budget: int,
        originals: tuple[BaseMessage, ...],
    ) -> Unit:
        """`unit`'s single message as ``shorten`` makes it at the largest size within
        ``budget`` (`shrink_to`), recorded in ``shortened``; `unit` itself when that
        saves nothing."""
        (message,) = unit.messages
        short, cost = shrink_to(
            shorten,
            chars=int(budget * _chars_per_token(message, unit.tokens)),
            budget=budget,
            count=self.count,
        )
        if cost >= unit.tokens:
            return unit
        record = ShortenedMessage(
            id=unit.keys[0], role=unit.role, tokens=unit.tokens, tokens_after=cost
        )
        return replace(
            unit,
            messages=(short,),
            sizes=(cost,),
            tokens=cost,
            shortened=(*unit.shortened, record),
            originals=originals,
        )

    # -- building ----------------------------------------------------------------
    @classmethod
    def build(
        cls,
        messages: Sequence[Any],
        *,
        counter: TokenCounter,
        offload_threshold: int | None = 500,
        preview_tokens: int = 160,
        summary: RunningSummary | None = None,
    ) -> Conversation:
        """Read `messages` (messages, dicts, tuples or strings) into a `Conversation`.

        Raises:
            CompactionError: `messages` is not a list of messages, or one of them cannot
                be read (the error names its index).

        Example:
            ```python
            conv = Conversation.build(
                [("system", "be brief"), ("user", "hi"), ("ai", "hello")],
                counter=count_tokens_approximately,
            )
            [u.kind for u in conv.units]  # ['user', 'assistant']
            ```
        """
        if isinstance(messages, (str, bytes, BaseMessage, dict)) or not isinstance(
            messages, Iterable
        ):
            raise CompactionError(
                f"messages must be a list of messages, got {type(messages).__name__}"
            )
        parsed: list[BaseMessage] = []
        for i, raw in enumerate(messages):
            try:
                parsed.extend(convert_to_messages([raw]))
            except (ValueError, TypeError, NotImplementedError, KeyError) as err:
                raise CompactionError(f"messages[{i}] cannot be read as a message: {err}") from err
        try:
            base = counter([])
            tokens_before = counter(parsed)
        except Exception as err:
            raise CompactionError(f"the token counter failed: {err!r}") from err
        conv = cls(
            counter=counter,
            base_tokens=base,
            system=[],
            summaries=[],
            running_summary=None,
            previous_summary=summary,
            units=[],
            tokens_before=tokens_before,
            messages_before=len(parsed),
            offload_threshold=offload_threshold,
            preview_tokens=preview_tokens,
        )
        conv._read(parsed)
        if conv.previous_summary is None and conv.running_summary is not None:
            conv.previous_summary = _summary_from_message(conv.running_summary.messages[0])
        return conv

    def _drop(self, key: str, message: BaseMessage, reason: str) -> None:
        self.dropped.append(
            DroppedMessage(id=key, role=_role(message), tokens=self.count(message), reason=reason)
        )

    def _read(self, messages: list[BaseMessage]) -> None:
        keys = [m.id or f"#{i}" for i, m in enumerate(messages)]
        start = 0
        while start < len(messages) and _role(messages[start]) == "system":
            message = messages[start]
            if is_running_summary(message):
                self._set_running_summary(keys[start], message)
            else:
                self.system.append(self._unit("system", [message], [keys[start]], 0))
            start += 1

        # Pass 1: sort the rest into user / assistant / tool groups, answering calls by id.
        blocks: list[dict[str, Any]] = []
        pending: dict[str, dict[str, Any]] = {}
        open_group: dict[str, Any] | None = None
        for i in range(start, len(messages)):
            message, key = messages[i], keys[i]
            role = _role(message)
            if isinstance(message, ToolMessage):
                group = pending.pop(message.tool_call_id, None)
                if group is None:
                    self._drop(key, message, "orphan tool result (no matching tool call)")
                    self.repairs.append(
                        f"left out orphan tool result {key} "
                        f"(tool_call_id={message.tool_call_id!r} answers no tool call)"
                    )
                    continue
                if group is not open_group:
                    self.repairs.append(
                        f"moved tool result {key} next to the assistant message that called it"
                    )
                group["results"].append((message, key))
                continue
            open_group = None
            if isinstance(message, RemoveMessage):
                self.repairs.append(f"ignored RemoveMessage {key} in the input")
                continue
            if role == "system":
                if is_running_summary(message):
                    self._set_running_summary(key, message)
                elif is_summary_class_message(message):
                    self.summaries.append(self._unit("summary", [message], [key], 0))
                else:
                    self._drop(key, message, "historical system message")
                continue
            if role == "user":
                blocks.append({"kind": "user", "message": message, "key": key})
            elif role == "assistant":
                calls, malformed = self._call_ids(message, key)
                block: dict[str, Any] = {
                    "kind": "assistant",
                    "message": message,
                    "key": key,
                    "results": [],
                    "calls": calls,
                    "malformed": malformed,
                }
                for call_id in calls:
                    pending[call_id] = block
                blocks.append(block)
                open_group = block if calls else None
            else:
                self._drop(key, message, f"unsupported message type {message.type!r}")
                self.repairs.append(f"left out {message.type} message {key} (unsupported)")

        # Pass 2: strip unanswered calls, number the rounds, make units.
        has_user = any(b["kind"] == "user" for b in blocks)
        if blocks and not has_user:
            self.repairs.append(
                "the history has no user message; Anthropic will not accept it as it is"
            )
        round_no = 0
        for block in blocks:
            message, key = block["message"], block["key"]
            if block["kind"] == "user":
                round_no += 1
                self.units.append(self._unit("user", [message], [key], round_no))
                continue
            answered = {m.tool_call_id for m, _ in block["results"]}
            missing = [c for c in block["calls"] if c not in answered]
            if missing or block["malformed"]:
                message = _without_calls(message, keep=answered)
                if missing:
                    self.repairs.append(
                        f"stripped unanswered tool call(s) {missing} from assistant message {key}"
                    )
                if not content_text(message.content).strip() and not getattr(
                    message, "tool_calls", None
                ):
                    self._drop(key, block["message"], "only unanswered or malformed tool calls")
                    continue
            if has_user and round_no == 0:
                self._drop(key, message, "before the first user message")
                for result, result_key in block["results"]:
                    self._drop(result_key, result, "before the first user message")
                self.repairs.append(
                    f"left out {key} (a conversation must start with a user message)"
                )
                continue
            results = block["results"]
            kind: UnitKind = "tools" if results else "assistant"
            unit = self._unit(
                kind, [message, *(m for m, _ in results)], [key, *(k for _, k in results)], round_no
            )
            if self.offload_threshold is not None:
                unit = self.previewed(unit, threshold=self.offload_threshold, cause="size")
            self.units.append(unit)

    def _call_ids(self, message: BaseMessage, key: str) -> tuple[list[str], bool]:
        """Ids of the tool calls an assistant message makes, and whether some are malformed.

        A call without an id, or repeating an id, can never be answered: it is stripped.
        """
        calls = tool_calls_of(message)
        if not calls:
            return [], False
        ids: list[str] = []
        for call in calls:
            call_id = call.get("id")
            if isinstance(call_id, str) and call_id and call_id not in ids:
                ids.append(call_id)
        malformed = len(ids) < len(calls)
        if malformed:
            self.repairs.append(
                f"stripped tool call(s) without a unique id from assistant message {key}"
            )
        return ids, malformed

    def _set_running_summary(self, key: str, message: BaseMessage) -> None:
        if self.running_summary is not None:
            old = self.running_summary
            self._drop(old.keys[0], old.messages[0], "superseded running summary")
        self.running_summary = self._unit("summary", [message], [key], 0)

    def _unit(
        self, kind: UnitKind, messages: list[BaseMessage], keys: list[str], round_no: int
    ) -> Unit:
        position = len(self.units) if kind in ("user", "assistant", "tools") else -1
        sizes = tuple(self.count(m) for m in messages)
        return Unit(kind, tuple(messages), tuple(keys), sum(sizes), round_no, position, sizes)


def _without_calls(message: BaseMessage, keep: set[str]) -> BaseMessage:
    """A copy of an assistant message with only the tool calls in `keep` (first of each id).

    Content blocks for the other calls (`tool_use`, `function_call`) go too, so no
    provider sees a call without its result.
    """
    assert isinstance(message, AIMessage)
    seen: set[str] = set()

    def kept(call: Any) -> bool:
        call_id = call.get("id")
        if call_id not in keep or call_id in seen:
            return False
        seen.add(call_id)
        return True

    tool_calls = [c for c in message.tool_calls if kept(c)]
    invalid = [c for c in message.invalid_tool_calls if kept(c)]
    content = message.content
    if isinstance(content, list):
        content = [
            block
            for block in content
            if not (
                isinstance(block, dict)
                and block.get("type") in ("tool_use", "function_call", "tool_call")
                and (block.get("id") or block.get("call_id")) not in seen
            )
        ]
    return message.model_copy(
        update={
            "content": content,
            "tool_calls": tool_calls,
            "invalid_tool_calls": invalid,
            "id": derived_id(message.id, "repaired"),
        }
    )


_PREVIEWS = StandInCache(4096)


def tool_calls_of(message: BaseMessage) -> list[Any]:
    """The tool calls an assistant message makes, the invalid ones too (a call the model
    wrote with unparsable arguments): a host answers those with an error result
    (`create_agent` does), which providers accept as a pair. Empty for other messages.
    """
    if not isinstance(message, AIMessage):
        return []
    return [*message.tool_calls, *message.invalid_tool_calls]


def preview_of(
    message: ToolMessage,
    *,
    tokens: int,
    preview_tokens: int,
    count: Callable[[BaseMessage], int],
    counted_by: Any = None,
) -> tuple[ToolMessage, int]:
    """A preview of a `tokens`-token tool result, about `preview_tokens` long, and its cost.

    `counted_by`: what makes `count` deterministic (e.g. the conversation's counter and
    base); with it, the preview is built once and reused by later compactions.
    """
    key = None
    if counted_by is not None:
        text = content_text(message.content)
        # (an estimate of the size shows another header than the same exact number)
        key = (message_key(message, text), tokens, type(tokens), preview_tokens, counted_by)
        cached = _PREVIEWS.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
    preview, cost = shrink_to(
        lambda chars: tool_result_preview(message, tokens=tokens, chars=chars),
        chars=preview_start(
            message,
            tokens=tokens,
            budget=preview_tokens,
            chars_per_token=_chars_per_token(message, tokens),
        ),
        budget=preview_tokens,
        count=count,
    )
    assert isinstance(preview, ToolMessage)
    if key is not None:
        _PREVIEWS.put(key, (preview, cost))
    return preview, cost


def _chars_per_token(message: BaseMessage, tokens: int) -> float:
    return max(1.0, len(content_text(message.content)) / max(tokens, 1))


def _summary_from_message(message: BaseMessage) -> RunningSummary:
    """The running summary a summary message carries (or its text, when it carries none)."""
    stored = (message.response_metadata or {}).get("running_summary")
    if isinstance(stored, dict):
        try:
            return RunningSummary.model_validate(stored)
        except ValueError:
            pass
    text = content_text(message.content)
    for prefix in SUMMARY_PREFIXES[::-1]:
        if text.lstrip().startswith(prefix):
            text = text.lstrip()[len(prefix) :]
            break
    return RunningSummary(text=text.strip())


def summary_message(summary: RunningSummary, text: str) -> SystemMessage:
    """The system message that shows `summary` to the model (rendered as `text`).

    It carries `SUMMARY_MARKER` (so BudgetNode counts it as the summary component) and the
    whole structured summary in `response_metadata` (neither is sent to the provider).
    """
    key, value = SUMMARY_MARKER
    return SystemMessage(
        content=text,
        id=RUNNING_SUMMARY_ID,
        additional_kwargs={key: value},
        response_metadata={"running_summary": summary.model_dump(mode="json")},
    )
