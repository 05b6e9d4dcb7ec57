"""The model step: fold dropped messages into the running summary with any chat model.

The summarizer is written as a generator of model-call steps
(`langgraph_ctx.context.model_call`), so one implementation serves both `compact_messages`
(`drive_sync`: `model.invoke`) and `acompact_messages` (`drive_async`: `await
model.ainvoke`). Retries and their back-off are the shared `ModelCallPolicy`'s.

The model is asked for one JSON object (user intent, key entities, decisions made,
pending questions, free text). A reply that is not JSON is kept as free text; an empty
reply or an exception counts as a failure. After the last retry the summarizer gives up
and says why: it never makes a summary up. A failure no retry fixes (a wrong key, model or
request: `langgraph_ctx.context.llm_error.is_configuration_error`) raises at once instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from langgraph_ctx.context.compaction.conversation import Unit, summary_message
from langgraph_ctx.context.compaction.record import RunningSummary, utc_now
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.llm_error import is_configuration_error
from langgraph_ctx.context.model_call import ModelCallPolicy, Step

SUMMARY_INSTRUCTIONS = """\
You maintain the running summary of a conversation between a user and an AI assistant \
that uses tools. You receive the previous summary (JSON, possibly empty) and messages that \
are being removed from the assistant's context. Fold the new messages into the summary.

Reply with ONE JSON object and nothing else:
{{"user_intent": "...", "key_entities": {{"name": "value"}}, "decisions_made": ["..."], \
"pending_questions": ["..."], "text": "..."}}

- Keep facts verbatim: file paths, numbers, names, constraints (must / should / never), \
decisions and their outcomes, errors.
- Keep earlier facts that still matter; drop questions that have been answered.
- Use only what the previous summary and the messages say. Never invent anything.
- Stay under about {words} words."""

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_MESSAGE_CLIP = 12_000  # characters of one message shown to the summarizer
CONDENSE_NOTE = (
    "(the previous summary above is longer than its budget. Rewrite it shorter, "
    "merging and condensing items; keep every fact that may still be asked about, the "
    "oldest as well as the newest.)"
)
# Summaries are not part of the conversation: keep them out of `stream_mode="messages"`.
_MODEL_CONFIG: RunnableConfig = {"tags": [TAG_NOSTREAM], "run_name": "compaction_summary"}


@dataclass(frozen=True)
class SummaryOutcome:
    summary: RunningSummary | None
    attempts: int
    error: str | None


@dataclass(frozen=True)
class Summarizer:
    """Folds messages into a `RunningSummary` with a chat model, retrying failures.

    Args:
        model: any chat model (or runnable taking messages and returning a message).
        max_retries: extra attempts after the first failure.
        retry_delay: seconds before the first retry; doubles for each further retry.
        input_tokens: about how many tokens of messages one call receives; more are
            folded in several calls, each on top of the previous result.
        instructions: the system prompt; `{words}` is replaced by a length target.
    """

    model: Runnable[Any, Any]
    max_retries: int = 2
    retry_delay: float = 0.5
    input_tokens: int = 8_000
    instructions: str = SUMMARY_INSTRUCTIONS
    condense_calls: int = 0
    """Extra calls that rewrite a new summary still over its budget (0: the next
    compaction's fold call rewrites it; this request shows it clipped)."""

    def run(
        self,
        previous: RunningSummary | None,
        units: Sequence[Unit],
        *,
        budget: int,
        count: Callable[[BaseMessage], int] | None = None,
    ) -> Generator[Step, Any, SummaryOutcome]:
        """Fold `units` into `previous`; yields model-call steps, returns the outcome.

        The model reads the original messages (`Unit.source`: full tool outputs, not
        their previews), a long one in parts over several calls. With `count`, a previous
        summary whose message costs more than `budget` tokens is rewritten shorter in the
        same call that folds the new messages, and a new summary still over it is given
        back to the model `condense_calls` more times: the summary stays within its share
        by re-summarising itself, not by losing its oldest part.
        """
        summary = previous or RunningSummary()
        policy = ModelCallPolicy(
            max_retries=self.max_retries,
            retry_delay=self.retry_delay,
            partial_output=False,
            # A wrong key, model or request raises at once, as for the model node: no retry
            # or fallback to extraction fixes it, and falling back every turn would hide it.
            # Anything else falls back (a summary is an extra: its failure must not stop
            # the turn), where a model node keeps only failures known to pass.
            recoverable=lambda error: not is_configuration_error(error),
        )
        attempts = 0
        words = max(30, int(budget * 0.6))
        # the previous summary over its budget: the first call also rewrites it shorter
        over = (
            count is not None and count(summary_message(summary, render_summary(summary))) > budget
        )
        for chunk in self._chunks(self._pieces(units)):
            lines = [line for line, _ in chunk]
            if over:
                lines, over = [CONDENSE_NOTE, *lines], False
            prompt = self._prompt(summary, lines, words=words)
            parsed, count_, error = yield from self._call(policy, prompt, summary)
            attempts += count_
            if parsed is None:
                return SummaryOutcome(None, attempts, error)
            done = [unit for _, unit in chunk if unit is not None]
            summary = parsed.model_copy(
                update={
                    "covered_messages": summary.covered_messages
                    + sum(len(unit.messages) for unit in done),
                    "covered_until": done[-1].keys[-1] if done else summary.covered_until,
                }
            )
        for _ in range(self.condense_calls if count is not None else 0):
            assert count is not None
            if count(summary_message(summary, render_summary(summary))) <= budget:
                break
            prompt = self._prompt(summary, [CONDENSE_NOTE], words=words)
            parsed, count_, _error = yield from self._call(policy, prompt, summary)
            attempts += count_
            if parsed is None:
                break  # the longer summary stays; the message is clipped for this request
            summary = parsed.model_copy(
                update={
                    "covered_messages": summary.covered_messages,
                    "covered_until": summary.covered_until,
                }
            )
        summary = summary.model_copy(
            update={"updates": (previous.updates if previous else 0) + 1, "updated_at": utc_now()}
        )
        return SummaryOutcome(summary, attempts, None)

    def _call(
        self, policy: ModelCallPolicy, prompt: list[BaseMessage], base: RunningSummary
    ) -> Generator[Step, Any, tuple[RunningSummary | None, int, str | None]]:
        """One summarizer call with retries: the parsed summary, attempts, or the error."""

        def check(reply: Any) -> str | None:
            if parse_summary(reply, base) is None:
                return "the model returned an empty summary"
            return None

        outcome, count = yield from policy.attempts(
            partial(self.model.invoke, prompt, _MODEL_CONFIG),
            partial(self.model.ainvoke, prompt, _MODEL_CONFIG),
            check=check,
        )
        if outcome.error is not None:
            return None, count, f"{type(outcome.error).__name__}: {outcome.error}"
        parsed = parse_summary(outcome.result, base)
        return parsed, count, None if parsed is not None else outcome.rejected

    def prompt(
        self, summary: RunningSummary, units: Sequence[Unit], *, words: int
    ) -> list[BaseMessage]:
        """The messages one summarizer call sends for `units` (their original messages)."""
        return self._prompt(summary, [line for line, _ in self._pieces(units)], words=words)

    def _prompt(
        self, summary: RunningSummary, lines: Sequence[str], *, words: int
    ) -> list[BaseMessage]:
        previous = summary.model_dump(
            include={"user_intent", "key_entities", "decisions_made", "pending_questions", "text"}
        )
        transcript = "\n".join(lines)
        return [
            SystemMessage(self.instructions.format(words=words)),
            HumanMessage(
                "PREVIOUS SUMMARY (JSON):\n"
                f"{json.dumps(previous, ensure_ascii=False)}\n\n"
                f"MESSAGES TO FOLD IN:\n{transcript}"
            ),
        ]

    def _pieces(self, units: Sequence[Unit]) -> list[tuple[str, Unit | None]]:
        """Transcript lines of the units' original messages; a long message in parts.

        Each unit's last line carries the unit (it is folded in once that line is).
        """
        part = min(_MESSAGE_CLIP, max(2_000, self.input_tokens * 3))  # characters per part
        pieces: list[tuple[str, Unit | None]] = []
        for unit in units:
            lines = [line for m in unit.source for line in _transcript_lines(m, part)]
            pieces += [(line, None) for line in lines[:-1]]
            if lines:
                pieces.append((lines[-1], unit))
        return pieces

    def _chunks(
        self, pieces: Sequence[tuple[str, Unit | None]]
    ) -> list[list[tuple[str, Unit | None]]]:
        chunks: list[list[tuple[str, Unit | None]]] = [[]]
        size = 0
        for line, unit in pieces:
            tokens = len(line) // 4 + 1  # an estimate: the split only needs to be close
            if chunks[-1] and size + tokens > self.input_tokens:
                chunks.append([])
                size = 0
            chunks[-1].append((line, unit))
            size += tokens
        return [chunk for chunk in chunks if chunk]


def _transcript_lines(message: BaseMessage, part: int) -> list[str]:
    """The transcript line of `message`, or several (`part 1/3`, ...) when it is long."""
    text = content_text(message.content)
    if len(text) <= part:
        return [_transcript_line(message)]
    parts = [text[i : i + part] for i in range(0, len(text), part)]
    label = "tool result" if isinstance(message, ToolMessage) else message.type
    name = f" {message.name}" if isinstance(message, ToolMessage) and message.name else ""
    return [f"[{label}{name}, part {n}/{len(parts)}] {p}" for n, p in enumerate(parts, 1)]


def _transcript_line(message: BaseMessage) -> str:
    text = content_text(message.content)
    if len(text) > _MESSAGE_CLIP:
        text = text[:_MESSAGE_CLIP] + f" […{len(text) - _MESSAGE_CLIP} more characters]"
    if isinstance(message, ToolMessage):
        return f"[tool result {message.name or ''} {message.status}] {text}"
    if isinstance(message, AIMessage):
        calls = "".join(
            f"\n[assistant calls {call['name']}] {json.dumps(call['args'], ensure_ascii=False)}"
            for call in message.tool_calls
        )
        return f"[assistant] {text}{calls}"
    role = "user" if isinstance(message, HumanMessage) else message.type
    return f"[{role}] {text}"


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value).strip()] if str(value).strip() else []


def _entities(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    return {str(i + 1): item for i, item in enumerate(_strings(value))}


def parse_summary(message: BaseMessage | None, previous: RunningSummary) -> RunningSummary | None:
    """The summary in a model reply: its JSON object, or its text when it is not JSON.

    Returns None for an empty reply (a failure: nothing is made up in its place).

    Example:
        ```python
        parse_summary(AIMessage('{"user_intent": "ship v2", "decisions_made": ["use uv"]}'),
                      RunningSummary())
        # RunningSummary(user_intent='ship v2', decisions_made=['use uv'], ...)
        ```
    """
    text = content_text(message.content).strip() if message is not None else ""
    if not text:
        return None
    body = _FENCE.sub("", text).strip()
    start, end = body.find("{"), body.rfind("}")
    data: Any = None
    if 0 <= start < end:
        try:
            data = json.loads(body[start : end + 1])
        except ValueError:
            data = None
    if not isinstance(data, dict):
        return previous.model_copy(update={"text": text})
    # A field the reply leaves out keeps its previous value; a field it sends replaces it.
    readers: dict[str, Any] = {
        "user_intent": lambda v: str(v or "").strip(),
        "key_entities": _entities,
        "decisions_made": _strings,
        "pending_questions": _strings,
        "text": lambda v: str(v or "").strip(),
    }
    update = {name: read(data[name]) for name, read in readers.items() if name in data}
    if not any(update.values()):
        return None
    return previous.model_copy(update=update)


def render_summary(summary: RunningSummary) -> str:
    """The text of the summary message the model sees (starts with CONVERSATION_SUMMARY)."""
    lines = [
        f"CONVERSATION_SUMMARY (covers {summary.covered_messages} earlier messages that are no "
        "longer shown; the full history is kept)"
    ]
    if summary.user_intent:
        lines.append(f"User intent: {summary.user_intent}")
    if summary.key_entities:
        lines.append("Key entities:")
        lines += [f"- {name}: {value}" for name, value in summary.key_entities.items()]
    for title, items in (
        ("Decisions made:", summary.decisions_made),
        ("Pending questions:", summary.pending_questions),
    ):
        if items:
            lines.append(title)
            lines += [f"- {item}" for item in items]
    if summary.text:
        lines += ["Notes:", summary.text]
    return "\n".join(lines)


def summary_message_within(
    summary: RunningSummary, budget: int, count: Any
) -> tuple[SystemMessage, int, bool]:
    """The summary message, clipped until it costs at most `budget` tokens.

    Clipping halves the free text first, then drops the oldest list items and entities.
    The message carries the whole summary in `response_metadata` either way, and the
    state keeps it whole: clipping only changes what this request shows.
    Returns the message, its cost and whether it was clipped.
    """
    shown = summary
    message = summary_message(summary, render_summary(shown))
    tokens = count(message)
    clipped = False
    for _ in range(64):
        if tokens <= budget:
            break
        clipped = True
        if len(shown.text) > 40:
            shown = shown.model_copy(update={"text": shown.text[: len(shown.text) // 2] + "…"})
        elif shown.text:
            shown = shown.model_copy(update={"text": ""})
        elif shown.key_entities or shown.decisions_made or shown.pending_questions:
            longest = max(
                ("key_entities", "decisions_made", "pending_questions"),
                key=lambda f: len(getattr(shown, f)),
            )
            items = getattr(shown, longest)
            trimmed = dict(list(items.items())[1:]) if isinstance(items, dict) else items[1:]
            shown = shown.model_copy(update={longest: trimmed})
        elif len(shown.user_intent) > 40:
            shown = shown.model_copy(update={"user_intent": shown.user_intent[:40] + "…"})
        else:
            break
        message = summary_message(summary, render_summary(shown))
        tokens = count(message)
    return message, tokens, clipped
