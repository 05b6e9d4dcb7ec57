"""What a compaction leaves behind: the running summary and the compaction record.

Both are pydantic models so they validate and print well; in graph state they are stored
as plain JSON (`model_dump(mode="json")`), which every checkpointer can hold, and read
back with `model_validate`:

```python
from langchain_core.messages import AIMessage, HumanMessage

from langgraph_ctx import CompactionNode, context_pipeline
from langgraph_ctx.context.compaction import CompactionRecord

history = []
for day in (1, 2, 3):
    history += [
        HumanMessage(f"Day {day} in Lisbon: what should we visit?", id=f"u{day}"),
        AIMessage(f"Day {day}: Alfama and the castle, then tram 28 to Estrela.", id=f"a{day}"),
    ]
history.append(HumanMessage("And on the last day?", id="u4"))
compaction = CompactionNode("window", trigger=("messages", 4), target=300)  # from 4 messages
state = context_pipeline("fast", compaction=compaction).invoke({"messages": history})

last = CompactionRecord.model_validate(state["compaction_log"][-1])
print(last.tokens_before, "->", last.tokens_after, last.dropped_ids())
# 124 -> 50 ['u1', 'a1', 'u2', 'a2']
```
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VIEW_KEY = "llm_input_messages"
"""Where compaction keeps what the model is sent of the conversation (the
``pre_model_hook`` convention): a list of messages."""


def utc_now() -> str:
    """The current time as an ISO-8601 string in UTC (what records store)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class RunningSummary(BaseModel):
    """A structured summary of everything compaction took out of the model's view.

    It is *running*: each compaction folds only the messages it drops into the previous
    summary, so `covered_messages` grows and no message is summarised twice.
    """

    model_config = ConfigDict(extra="ignore")

    user_intent: str = ""
    """What the user is trying to achieve, in one or two sentences."""
    key_entities: dict[str, str] = Field(default_factory=dict)
    """Names, paths, numbers and other facts worth keeping verbatim (name -> value)."""
    decisions_made: list[str] = Field(default_factory=list)
    """What has been decided or done."""
    pending_questions: list[str] = Field(default_factory=list)
    """What is still open."""
    text: str = ""
    """Free-text summary of what happened."""
    covered_messages: int = 0
    """How many messages all summaries so far have folded in."""
    covered_until: str | None = None
    """Id of the last message folded in."""
    updates: int = 0
    """How many compactions have updated this summary."""
    updated_at: str | None = None



class DroppedMessage(BaseModel):
    """A message left out of the model's view (it stays in `messages` and the log)."""

    id: str
    role: str
    tokens: int
    reason: str


class OffloadedResult(BaseModel):
    """A tool result shown as a preview plus a reference for `read_tool_result`."""

    ref: str
    id: str
    tool_call_id: str
    tool: str | None = None
    tokens: int
    preview_tokens: int
    cause: Literal["size", "budget"]
    """`size`: over the offload threshold; `budget`: the fallback ladder previewed it."""


class ShortenedMessage(BaseModel):
    """A long user or assistant text cut to its first paragraph and key lines."""

    id: str
    role: str
    tokens: int
    tokens_after: int


class ScoredMessage(BaseModel):
    """One extraction score with the parts it is made of (the explanation)."""

    id: str
    score: float
    parts: dict[str, float]
    kept: bool


class CompactionRecord(BaseModel):
    """What one compaction did: kept, dropped, summarised and offloaded, with token counts.

    Message ids are the messages' own ids; a message without an id is named by its
    position in the input (`"#12"`). Two messages that share an id (possible with an
    `operator.add` messages reducer) are each named by it: once per message, in `kept`,
    `dropped` or both.
    """

    model_config = ConfigDict(extra="ignore")

    strategy: str
    reason: str
    """Why compaction ran (or why it did not need to)."""
    compacted: bool
    """False when everything already fit and nothing was dropped."""
    max_tokens: int
    """The hard budget: the most tokens the messages may cost."""
    target_tokens: int | None = None
    """The goal the strategy compacted to, when it was below `max_tokens` (else None)."""
    tokens_before: int
    tokens_after: int
    within_budget: bool
    """`tokens_after <= max_tokens`."""
    messages_before: int
    messages_after: int
    kept: list[str] = Field(default_factory=list)
    dropped: list[DroppedMessage] = Field(default_factory=list)
    summarized: list[str] = Field(default_factory=list)
    offloaded: list[OffloadedResult] = Field(default_factory=list)
    shortened: list[ShortenedMessage] = Field(default_factory=list)
    ladder: list[str] = Field(default_factory=list)
    """Fallback steps taken, in order (`tool_previews`, `shorten_texts`, `recent_rounds:4`...)."""
    repairs: list[str] = Field(default_factory=list)
    """Problems in the input and what was done about them (orphan tool results...)."""
    scores: list[ScoredMessage] = Field(default_factory=list)
    summary: RunningSummary | None = None
    """The running summary after this compaction (None if there never was one)."""
    summary_updated: bool = False
    error: str | None = None
    """The model error when a summary could not be made."""
    attempts: int = 0
    """Model calls made for the summary (retries included)."""
    fallback: str | None = None
    """The strategy used instead when the planned one failed."""
    tokenizer: str | None = None
    duration_ms: float = 0.0
    created_at: str = Field(default_factory=utc_now)

    def dropped_ids(self) -> list[str]:
        """Ids of the messages the model no longer sees."""
        return [d.id for d in self.dropped]
