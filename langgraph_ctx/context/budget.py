"""Token budgets: allocation per component, usage, degradation levels. Pure functions.

```python
from langgraph_ctx.context.budget import ContextBudget, compute_usage
from langgraph_ctx.context.tokens import MessageTokenCounter

budget = ContextBudget.preset("personalized")          # 8,000 total, 4,000 for history
usage = compute_usage(messages, budget, counter=MessageTokenCounter("gpt-4o"))
print(usage)               # one-line bar; in a notebook the cell shows an HTML bar
usage.level, usage.status  # (0, 'normal')
```

A request is split into components (`COMPONENTS`): the system prompt, bound tools, a
running summary, the history, the current input (what came after the last AI message),
the reply priming (`overhead`) and the output reserve. The usage percent counts the
output reserve as taken: `percent = 100 * (used + reserved_output) / total`.

Degradation levels follow the percent (`DEGRADATION_LEVELS`): 0 below 70 %, 1 from 70 %,
2 from 85 %, 3 above 100 %. The status is `normal` below `warn_at` (70 %), `warning`
from there and `compressing` from `compress_at` (80 %), the point where a compaction
node should act.

One module (about 750 lines, a third of them docstrings) because a budget, its levels and
the usage measured against it are one concept read together: `ContextUsage` is computed
from `ContextBudget` and reports its levels. Context windows (model profiles, the table of
well-known models) live in `langgraph_ctx.context.tokens.models`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, model_validator

from langgraph_ctx.context.tokens import MessageTokenCounter, to_message
from langgraph_ctx.context.tokens.models import context_window
from langgraph_ctx.context.tokens.tally import MARKS
from langgraph_ctx.errors import UnknownContextWindowError

__all__ = [
    "COMPONENTS",
    "DEGRADATION_LEVELS",
    "PRESETS",
    "SUMMARY_MARKER",
    "ContextBudget",
    "ContextUsage",
    "DegradationLevel",
    "Status",
    "compute_usage",
    "context_window",
    "degradation_level",
    "is_summary_message",
    "split_components",
    "usage_status",
]

Status = Literal["normal", "warning", "compressing"]

#: Components of a request, in the order the bar shows them.
COMPONENTS: Final[tuple[str, ...]] = (
    "system",
    "tools",
    "summary",
    "history",
    "current_input",
    "overhead",
    "output_reserve",
)

#: `additional_kwargs` key and value that mark a message as the running summary.
SUMMARY_MARKER: Final[tuple[str, str]] = ("langgraph_ctx", "summary")

# ---------------------------------------------------------------------------
# Degradation levels
# ---------------------------------------------------------------------------


class DegradationLevel(BaseModel):
    """What to give up at one level of budget pressure (see `DEGRADATION_LEVELS`)."""

    model_config = ConfigDict(frozen=True)

    level: int
    from_percent: float
    action: Literal["none", "trim_history", "drop_optional", "summary_and_recent"]
    description: str
    history_keep_ratio: float | None = None
    drop_priorities: tuple[str, ...] = ()
    keep_recent_turns: int | None = None


#: Levels 0-3 and their actions. P2 components are the optional ones (history).
DEGRADATION_LEVELS: Final[tuple[DegradationLevel, ...]] = (
    DegradationLevel(level=0, from_percent=0.0, action="none", description="normal, no trimming"),
    DegradationLevel(
        level=1,
        from_percent=70.0,
        action="trim_history",
        description="reduce history by 30%",
        history_keep_ratio=0.7,
    ),
    DegradationLevel(
        level=2,
        from_percent=85.0,
        action="drop_optional",
        description="drop P2 (optional) components, history reduced by 30%",
        history_keep_ratio=0.7,
        drop_priorities=("P2",),
    ),
    DegradationLevel(
        level=3,
        from_percent=100.0,
        action="summary_and_recent",
        description="keep only the summary and the last 3 turns",
        keep_recent_turns=3,
    ),
)

def degradation_level(
    percent: float, thresholds: tuple[float, float, float] = (70.0, 85.0, 100.0)
) -> int:
    """Level 0-3 for a usage percent: 0 below 70, 1 below 85, 2 up to 100, 3 above.

    Example:
        ```python
        degradation_level(69.9), degradation_level(70), degradation_level(100.0)  # (0, 1, 2)
        degradation_level(100.1)  # 3
        ```
    """
    first, second, third = thresholds
    if percent < first:
        return 0
    if percent < second:
        return 1
    if percent <= third:
        return 2
    return 3


def usage_status(percent: float, *, warn_at: float = 70.0, compress_at: float = 80.0) -> Status:
    """`normal` below `warn_at`, `warning` from it, `compressing` from `compress_at`.

    Example:
        ```python
        usage_status(50), usage_status(75), usage_status(80)  # ('normal', 'warning', 'compressing')
        ```
    """
    if percent >= compress_at:
        return "compressing"
    if percent >= warn_at:
        return "warning"
    return "normal"


# ---------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------

_ALLOCATED: Final[tuple[str, ...]] = (
    "persona",
    "instruction",
    "summary",
    "history",
    "current_input",
    "output_reserve",
)


class ContextBudget(BaseModel):
    """A token budget: a total and an allocation per component.

    An allocation of 0 means "no limit of its own" (only the total applies).
    `output_reserve` is kept free for the reply. Components must not add up to more
    than `total`: building such a budget raises `ValueError` naming them.

    Example:
        ```python
        ContextBudget.preset("fast").history  # 2000
        ContextBudget.for_model("gpt-4o", reserved_output=4096).total  # 128000
        ContextBudget(total=12_000, persona=1_500, history=6_000, output_reserve=2_000)
        ```
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: int = Field(gt=0, description="Tokens the model accepts (context window or preset).")
    persona: int = Field(0, ge=0)
    instruction: int = Field(0, ge=0)
    summary: int = Field(0, ge=0)
    history: int = Field(0, ge=0)
    current_input: int = Field(0, ge=0)
    output_reserve: int = Field(0, ge=0)
    extra: dict[str, int] = Field(
        default_factory=dict, description="More named components (priority P2)."
    )
    warn_at: float = Field(70.0, ge=0, description="Percent from which the status is warning.")
    compress_at: float = Field(80.0, ge=0, description="Percent from which it is compressing.")
    level_thresholds: tuple[float, float, float] = (70.0, 85.0, 100.0)
    name: str | None = None

    @model_validator(mode="after")
    def _fits(self) -> ContextBudget:
        for key, value in self.extra.items():
            if value < 0:
                raise ValueError(f"extra component {key!r} is negative ({value})")
        allocated = self.allocated()
        spent = sum(allocated.values())
        if spent > self.total:
            parts = ", ".join(f"{k}={v:,}" for k, v in allocated.items() if v)
            raise ValueError(
                f"budget components add up to {spent:,} tokens, more than the total of "
                f"{self.total:,} ({parts}); lower some of them or raise total"
            )
        if list(self.level_thresholds) != sorted(self.level_thresholds):
            raise ValueError(f"level_thresholds must increase, got {self.level_thresholds}")
        return self

    def allocated(self) -> dict[str, int]:
        """Allocation per component, `extra` included."""
        return {**{k: getattr(self, k) for k in _ALLOCATED}, **self.extra}

    @property
    def input_capacity(self) -> int:
        """Tokens the request may use: the total minus the output reserve."""
        return self.total - self.output_reserve

    @classmethod
    def preset(cls, name: str) -> ContextBudget:
        """One of `PRESETS`: `fast` (4,000), `personalized` (8,000), `planning` (16,000)."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ValueError(
                f"unknown budget preset {name!r}; choose from {sorted(PRESETS)}"
            ) from None

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        context_window: int | None = None,
        reserved_output: int | None = None,
        **allocation: int,
    ) -> ContextBudget:
        """A budget over a model's whole context window, keeping `reserved_output` free.

        `reserved_output` defaults to 4,096 tokens, or a quarter of the window for windows
        under 16,384 tokens (a small local model keeps room for its messages).

        The window comes from `context_window` or, for well-known models, from the
        package's table (`langgraph_ctx.context.tokens.models.context_window`; a chat
        model's own profile is read by `model_facts`, which `BudgetNode` uses). Other
        components may be given as keywords.

        Raises:
            UnknownContextWindowError: no `context_window` and the name is not in the table.

        Example:
            ```python
            ContextBudget.for_model("claude-sonnet-4-5", reserved_output=8192)
            ContextBudget.for_model("my-local-llm", context_window=32_768)
            ```
        """
        window = context_window or _table_window(model)
        if window is None:
            raise UnknownContextWindowError(model)
        if reserved_output is None:
            reserved_output = min(DEFAULT_RESERVED_OUTPUT, window // 4)
        fields: dict[str, Any] = {"output_reserve": reserved_output, **allocation}
        return cls.model_validate({"total": window, "name": model, **fields})


_table_window = context_window  # for_model's parameter of the same name hides it

DEFAULT_RESERVED_OUTPUT: Final[int] = 4096
"""Tokens `ContextBudget.for_model` keeps for the reply (a quarter of a smaller window)."""


def _scaled_preset(name: str, factor: float) -> ContextBudget:
    # The seed's 8K allocation (persona 1,000, instruction 500, summary 500, history
    # 4,000, current input 500, output 1,400), scaled. Its 100-token "emotional" slot
    # is not a component here; add it with extra={"emotional": 100} if you use one.
    base = {
        "persona": 1000,
        "instruction": 500,
        "summary": 500,
        "history": 4000,
        "current_input": 500,
        "output_reserve": 1400,
    }
    scaled = {k: round(v * factor) for k, v in base.items()}
    return ContextBudget.model_validate({"total": round(8000 * factor), "name": name, **scaled})


#: Budget presets (total / history): fast 4,000 / 2,000, personalized 8,000 / 4,000,
#: planning 16,000 / 8,000.
PRESETS: Final[Mapping[str, ContextBudget]] = {
    "fast": _scaled_preset("fast", 0.5),
    "personalized": _scaled_preset("personalized", 1.0),
    "planning": _scaled_preset("planning", 2.0),
}



# ---------------------------------------------------------------------------
# Usage
# ---------------------------------------------------------------------------

_GLYPHS: Final[Mapping[str, str]] = {
    "system": "S",
    "tools": "T",
    "summary": "M",
    "history": "H",
    "current_input": "I",
    "overhead": "o",
    "output_reserve": "R",
}
_COLORS: Final[Mapping[str, str]] = {
    "system": "#7c3aed",
    "tools": "#0891b2",
    "summary": "#d97706",
    "history": "#2563eb",
    "current_input": "#16a34a",
    "overhead": "#9ca3af",
    "output_reserve": "#e5e7eb",
}
_LABELS: Final[Mapping[str, str]] = {"current_input": "input", "output_reserve": "reserve"}
_STATUS_COLORS: Final[Mapping[str, str]] = {
    "normal": "#16a34a",
    "warning": "#d97706",
    "compressing": "#dc2626",
}


_CELL: Final = "padding:1px 6px 1px 0;vertical-align:middle;line-height:14px"
"""Table cells of the HTML bar: one row height, the swatch centred on the text."""


def _swatch(color: str) -> str:
    """A colour square that shows everywhere: its own block (an empty inline span
    collapses or sits on the baseline in some notebook front ends), a border so the
    light reserve grey stays visible on white, and colours kept when printed."""
    return (
        f'<div style="width:10px;height:10px;background:{color};'
        "border:1px solid rgba(0,0,0,0.35);border-radius:2px;"
        '-webkit-print-color-adjust:exact;print-color-adjust:exact"></div>'
    )


class ContextUsage(BaseModel):
    """What the next request would use of the budget. Written by `BudgetNode`.

    `str(usage)` is a one-line bar for a terminal; in a notebook `usage` shows as an
    HTML bar with each component's share.

    Example:
        ```python
        from langgraph.graph import START, StateGraph

        from langgraph_ctx import BudgetNode, BudgetState

        builder = StateGraph(BudgetState)
        builder.add_node("budget", BudgetNode("fast", model="gpt-4o"))
        builder.add_edge(START, "budget")
        graph = builder.compile()

        inputs = {"messages": [("user", "What should I pack for Lisbon?")]}
        usage = graph.invoke(inputs)["context_usage"]
        print(usage)
        # [I................................RRRRRRR] 17.9% 14/4,000 · normal L0 · gpt-4o · ...
        usage.breakdown["current_input"], usage.remaining  # (11, 3286)
        if usage.status == "compressing": ...
        ```
    """

    used: int = Field(description="Tokens the next request would send.")
    total: int = Field(description="The budget's total (context window or preset).")
    reserved_output: int = Field(description="Tokens kept free for the reply.")
    remaining: int = Field(description="total - reserved_output - used (may be negative).")
    percent: float = Field(description="100 * (used + reserved_output) / total.")
    level: int = Field(description="Degradation level 0-3.")
    status: Status
    breakdown: dict[str, int] = Field(description="Tokens per component (COMPONENTS).")
    model: str
    calibrated: bool = Field(False, description="Provider usage_metadata anchored the count.")
    exact: bool = Field(True, description="Counted with the model's own tokenizer.")
    action: str = Field("none", description="The level's action (DEGRADATION_LEVELS).")
    allocation: dict[str, int] = Field(
        default_factory=dict, description="Budget per breakdown component (0: no own limit)."
    )
    over_allocation: list[str] = Field(
        default_factory=list, description="Components using more than their allocation."
    )
    messages: int = Field(0, description="Number of messages counted.")
    calibration_delta: int = Field(
        0, description="Provider count minus our own for the anchored prefix."
    )
    notes: list[str] = Field(default_factory=list, description="Input that was odd but counted.")

    def __str__(self) -> str:
        approx = "" if self.exact else "~"
        tag = " calibrated" if self.calibrated else ""
        legend = " · ".join(
            f"{_GLYPHS.get(k, '#')} {_LABELS.get(k, k)} {v:,}"
            for k, v in self.breakdown.items()
            if v and k != "overhead"
        )
        return (
            f"[{self.bar()}] {self.percent:.1f}% {approx}{self.used:,}/{self.total:,} "
            f"· {self.status} L{self.level} · {self.model}{tag} · {legend}"
        )

    def bar(self, width: int = 40) -> str:
        """The bar alone: one letter per component (`S`ystem, `T`ools, su`M`mary,
        `H`istory, `I`nput, `R`eserve), `.` for free space."""
        # The reply priming (3 tokens) would only ever show as a rounding artefact.
        segments = [(k, v) for k, v in self._ordered() if v > 0 and k != "overhead"]
        taken = sum(v for _, v in segments)
        scale = max(self.total, taken)
        free = scale - taken
        cells = _apportion([v for _, v in segments] + [free], width)
        out = "".join(_GLYPHS.get(k, "#") * n for (k, _), n in zip(segments, cells, strict=False))
        # Free space sits before the reserve, like the end of the window.
        if segments and segments[-1][0] == "output_reserve":
            reserve = _GLYPHS["output_reserve"] * cells[len(segments) - 1]
            out = out[: len(out) - len(reserve)] + "." * cells[-1] + reserve
        else:
            out += "." * cells[-1]
        return out

    def _ordered(self) -> list[tuple[str, int]]:
        known = [(k, self.breakdown[k]) for k in COMPONENTS if k in self.breakdown]
        others = [(k, v) for k, v in self.breakdown.items() if k not in COMPONENTS]
        reserve = [kv for kv in known if kv[0] == "output_reserve"]
        return [kv for kv in known if kv[0] != "output_reserve"] + others + reserve

    def _repr_html_(self) -> str:
        scale = max(self.total, sum(self.breakdown.values()), 1)
        segments = []
        rows = []
        for key, tokens in self._ordered():
            color = _COLORS.get(key, "#a3a3a3")
            share = 100 * tokens / scale
            label = html.escape(_LABELS.get(key, key))
            if tokens:
                segments.append(
                    f'<div title="{label}: {tokens:,} tokens ({share:.1f}%)" '
                    f'style="width:{share:.3f}%;background:{color}"></div>'
                )
            limit = self.allocation.get(key, 0)
            over = key in self.over_allocation
            rows.append(
                "<tr>"
                f'<td style="{_CELL};width:12px">{_swatch(color)}</td>'
                f'<td style="{_CELL};text-align:left">{label}</td>'
                f'<td style="{_CELL};text-align:right">{tokens:,}</td>'
                f'<td style="{_CELL};text-align:right">{share:.1f}%</td>'
                f'<td style="{_CELL};text-align:right;color:{"#dc2626" if over else "inherit"}">'
                f"{f'{limit:,}' if limit else '-'}</td>"
                "</tr>"
            )
        status_color = _STATUS_COLORS.get(self.status, "inherit")
        approx = "" if self.exact else "~"
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (
            '<div style="font-family:system-ui,sans-serif;font-size:12px;max-width:640px">'
            '<div style="display:flex;justify-content:space-between;margin-bottom:4px">'
            f"<b>{html.escape(self.model)}</b>"
            f"<span>{approx}{self.used:,} + {self.reserved_output:,} reserved / "
            f"{self.total:,} tokens · <b>{self.percent:.1f}%</b> · "
            f'<span style="color:{status_color}">{self.status}</span> '
            f"(level {self.level}: {html.escape(self.action)})"
            f"{' · calibrated' if self.calibrated else ''}</span></div>"
            '<div style="display:flex;height:14px;border:1px solid #d1d5db;border-radius:3px;'
            f'overflow:hidden;background:#f9fafb">{"".join(segments)}</div>'
            '<table style="margin-top:6px;border-collapse:collapse">'
            f'<tr><th style="{_CELL}"></th><th style="{_CELL};text-align:left">component</th>'
            f'<th style="{_CELL};text-align:right">tokens</th>'
            f'<th style="{_CELL};text-align:right">share</th>'
            f'<th style="{_CELL};text-align:right">budget</th></tr>{"".join(rows)}</table>'
            f"{f'<ul>{notes}</ul>' if notes else ''}"
            "</div>"
        )


def _apportion(values: Sequence[int], width: int) -> list[int]:
    """Split `width` cells over `values` by largest remainder; nonzero values get one."""
    total = sum(values)
    if total <= 0:
        return [0] * (len(values) - 1) + [width]
    raw = [width * v / total for v in values]
    cells = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - cells[i], reverse=True):
        if sum(cells) >= width:
            break
        cells[i] += 1
    # Make every nonzero value visible, taking the cell from the largest one.
    for i, v in enumerate(values):
        if v and not cells[i]:
            j = max(range(len(cells)), key=cells.__getitem__)
            if cells[j] > 1:
                cells[j] -= 1
                cells[i] = 1
    return cells


def is_summary_message(message: BaseMessage) -> bool:
    """Whether `message` carries the running summary.

    A compaction node marks it with `additional_kwargs={"langgraph_ctx": "summary"}`.
    """
    key, value = SUMMARY_MARKER
    return message.additional_kwargs.get(key) == value


def split_components(messages: Sequence[BaseMessage]) -> list[str]:
    """The component of each message: `system`, `summary`, `history` or `current_input`.

    The current input is what follows the last AI message (the user's turn, or tool
    results in an agent loop); with no AI message, the last non-system message.

    Example:
        ```python
        split_components([SystemMessage("s"), HumanMessage("a"), AIMessage("b"),
                          HumanMessage("c")])
        # ['system', 'history', 'history', 'current_input']
        ```
    """
    last_ai = None
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            last_ai = i
            break
    if last_ai is None:
        others = [i for i, m in enumerate(messages) if not _is_system(m)]
        current_from = others[-1] if others else len(messages)
    else:
        current_from = last_ai + 1
    key, value = SUMMARY_MARKER
    kinds = []
    for i, message in enumerate(messages):
        extra = message.additional_kwargs
        if extra and extra.get(key) == value:
            kinds.append("summary")
        elif isinstance(message, (SystemMessage, ChatMessage)) and _is_system(message):
            kinds.append("system")
        elif i >= current_from:
            kinds.append("current_input")
        else:
            kinds.append("history")
    return kinds


def _is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) or (
        isinstance(message, ChatMessage) and message.role in ("system", "developer")
    )


_KNOWN_TYPES: Final[frozenset[str]] = frozenset(
    {"human", "ai", "system", "tool", "function", "chat", "remove"}
)

# The groups of `_classify` (low bits) and what `compute_usage` needs to find (marks).
_PLAIN, _SYSTEM, _SUMMARY = 0, 1, 2
_AI, _USAGE, _NOT_SYSTEM, _ODD = (MARKS[k] for k in ("ai", "usage", "not_system", "odd"))


def _classify(message: BaseMessage) -> int:
    """The message's group for the breakdown and the marks `compute_usage` looks for.

    The same rules as `split_components` and the calibration anchor (the last AI message
    whose provider reported its input tokens), one message at a time, so a `Tally`
    computes them once per message.
    """
    key, value = SUMMARY_MARKER
    extra = message.additional_kwargs
    system = _is_system(message)
    if extra and extra.get(key) == value:
        cls = _SUMMARY
    elif system:
        cls = _SYSTEM
    else:
        cls = _PLAIN
    if not system:
        cls |= _NOT_SYSTEM
    if isinstance(message, AIMessage):
        cls |= _AI
        usage = message.usage_metadata
        if usage and isinstance(usage.get("input_tokens"), int) and usage["input_tokens"] > 0:
            cls |= _USAGE
    if message.type not in _KNOWN_TYPES or (
        isinstance(message, ChatMessage) and message.role == "unknown"
    ):
        cls |= _ODD
    return cls


def _component(cls: int, index: int, current_from: int) -> str:
    """The breakdown component of a message of class `cls` at `index`."""
    group = cls & 0xFF
    if group == _SUMMARY:
        return "summary"
    if group == _SYSTEM:
        return "system"
    return "current_input" if index >= current_from else "history"


def compute_usage(
    messages: Sequence[Any],
    budget: ContextBudget,
    *,
    counter: MessageTokenCounter,
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    calibrate: bool = True,
    model: str | None = None,
) -> ContextUsage:
    """Usage of `budget` by the request `system_prompt + tools + messages`.

    Counts come from `counter` (cached per message). With `calibrate`, the last AI
    message whose `usage_metadata` has `input_tokens` anchors the count: the provider's
    number stands for everything before that message (system prompt and tools
    included), the message itself is counted as it will be sent back, and only what
    follows is estimated. The breakdown's components before the anchor are scaled to
    the provider's number, so they still add up to `used`.

    Example:
        ```python
        counter = MessageTokenCounter("gpt-4o")
        usage = compute_usage([("user", "Hi!")], ContextBudget.preset("fast"), counter=counter)
        usage.used, usage.breakdown["current_input"]  # (9, 6)
        ```
    """
    notes: list[str] = []
    msgs: list[BaseMessage]
    if all(issubclass(t, BaseMessage) for t in set(map(type, messages))):
        msgs = list(messages)  # the usual case, checked per class rather than per message
    else:
        msgs = [m if isinstance(m, BaseMessage) else to_message(m) for m in messages]
    tally = counter.tally(msgs, _classify)
    for i in tally.odd:
        original = messages[i]
        kind = getattr(original, "type", None) or type(original).__name__
        notes.append(f"message {i} has unknown type {kind!r}; counted as text")
    n = len(msgs)
    # The current input is what follows the last AI message (`split_components`).
    last_ai = tally.last("ai")
    if last_ai is None:
        last_other = tally.last("not_system")
        current_from = n if last_other is None else last_other
    else:
        current_from = last_ai + 1
    anchor_index = n
    anchor: tuple[int, Mapping[str, Any]] | None = None
    if calibrate and tally.last("usage") is not None:
        anchor_index = tally.last("usage")  # type: ignore[assignment]
        anchor = anchor_index, msgs[anchor_index].usage_metadata  # type: ignore[attr-defined]

    # Tokens per component, split at the calibration anchor: `before` is what the
    # provider's input_tokens covered, `after` what is estimated.
    before = dict.fromkeys(COMPONENTS, 0)
    after = dict.fromkeys(COMPONENTS, 0)
    if system_prompt:
        before["system"] += counter.count_text_as_system(system_prompt)
    tool_tokens, tool_notes = counter.count_tools(tools)
    notes.extend(tool_notes)
    before["tools"] += tool_tokens
    before["overhead"] += counter.reply_priming if counter.token_counter is None else 0
    for part, start, end in ((before, 0, anchor_index), (after, anchor_index, n)):
        part["summary"] += tally.total(_SUMMARY, start, end)
        part["system"] += tally.total(_SYSTEM, start, end)
        split = min(max(current_from, start), end)
        part["history"] += tally.total(_PLAIN, start, split)
        part["current_input"] += tally.total(_PLAIN, split, end)

    calibration_delta = 0
    if anchor is not None:
        usage = anchor[1]
        counted = sum(before.values())
        provider = int(usage["input_tokens"])
        if counted > 0:
            calibration_delta = provider - counted
            keys = list(before)
            before = dict(zip(keys, _apportion_exact(list(before.values()), provider), strict=True))
            if not counter.exact:
                # Approximate tokenizer: the provider's own output count (reasoning tokens
                # are not sent back) plus the message framing is the better number.
                out = usage.get("output_tokens") or 0
                details = usage.get("output_token_details") or {}
                visible = out - int(details.get("reasoning", 0) or 0)
                if visible > 0:
                    framing = counter.family.tokens_per_message + 1
                    kind = _component(tally.class_at(anchor_index), anchor_index, current_from)
                    after[kind] += visible + framing - tally.count_at(anchor_index)
        else:
            anchor = None

    breakdown = {k: before[k] + after[k] for k in COMPONENTS}
    used = sum(breakdown.values())
    breakdown["output_reserve"] = budget.output_reserve

    total = budget.total
    percent = 100.0 * (used + budget.output_reserve) / total
    level = degradation_level(percent, budget.level_thresholds)
    allocation = {
        "system": budget.persona + budget.instruction,
        "tools": 0,
        "summary": budget.summary,
        "history": budget.history,
        "current_input": budget.current_input,
        "overhead": 0,
        "output_reserve": budget.output_reserve,
        **budget.extra,
    }
    over = [k for k, limit in allocation.items() if limit and breakdown.get(k, 0) > limit]

    capacity = max(budget.input_capacity, 1)
    alone = 0.25 * capacity
    for tokens, i in tally.top:
        if tokens <= alone:
            break
        ident = f" id={msgs[i].id!r}" if msgs[i].id else ""
        notes.append(
            f"message {i} ({msgs[i].type}{ident}) alone is {tokens:,} tokens, "
            f"{100 * tokens / capacity:.0f}% of the input budget"
        )

    return ContextUsage(
        used=used,
        total=total,
        reserved_output=budget.output_reserve,
        remaining=total - budget.output_reserve - used,
        percent=round(percent, 2),
        level=level,
        status=usage_status(percent, warn_at=budget.warn_at, compress_at=budget.compress_at),
        breakdown=breakdown,
        model=model or counter.model,
        calibrated=anchor is not None,
        exact=counter.exact,
        action=DEGRADATION_LEVELS[level].action,
        allocation=allocation,
        over_allocation=over,
        messages=len(msgs),
        calibration_delta=calibration_delta,
        notes=notes,
    )


def _apportion_exact(values: Sequence[int], target: int) -> list[int]:
    """Scale `values` to add up to `target` exactly (largest remainder)."""
    total = sum(values)
    raw = [v * target / total for v in values]
    out = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)[
        : target - sum(out)
    ]:
        out[i] += 1
    return out
