"""`search_history`: the model searches what compaction moved out of its view.

Compaction leaves messages out of the request and shows large tool results as previews;
the thread's `messages` (and its log) keep everything. `read_tool_result` opens one
result the model knows the reference of; `search_history` finds the passages that
answer a question, anywhere in the history, ranked by BM25 (the same scoring as
relevance selection), each with a reference the model can open:

```text
3 passages match "vendor contact billing invoice":
1. tool-result/call_7 line 148 (run_shell): the vendor contact for billing is Hana Kim
   open: read_tool_result(ref="tool-result/call_7", offset=10422)
2. message r4 (assistant): The vendor contact for the search invoice is Omar Haddad.
```

```python
from langgraph_ctx.context.compaction import read_tool_result, search_history

tools = [*my_tools, read_tool_result, search_history]   # ToolNode(tools), bind_tools(tools)
```
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState

from langgraph_ctx.context.compaction.previews import (
    HISTORY_SEARCH_ANSWER,
    READ_TOOL_RESULT,
    SEARCH_HISTORY,
    TOOL_RESULT_PAGE,
    is_preview,
    tool_result_ref,
)
from langgraph_ctx.context.compaction.record import VIEW_KEY
from langgraph_ctx.context.compaction.relevance import message_index, message_text
from langgraph_ctx.context.compaction.tools import OFFLOADED_KEY, page_chars, require_state
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.search import inverse_frequency, query_terms, term_score

_SNIPPET = 300  # characters of one passage shown


@dataclass(frozen=True)
class HistoryHit:
    """One matching passage: where it is, how to open it, and its text."""

    ref: str
    """`tool-result/<tool_call_id>` for a tool result, else `message <id or #index>`."""
    role: str
    line: int
    offset: int
    """Character offset of the passage's line (for `read_tool_result(offset=...)`)."""
    score: float
    text: str
    tool: str | None = None
    message_id: str | None = None
    """Id of the message the passage is in."""


def _full_text(message: BaseMessage) -> str:
    """The message's full text: a preview's offloaded content when it carries one."""
    if is_preview(message):
        artifact: Any = getattr(message, "artifact", None)
        if isinstance(artifact, dict) and OFFLOADED_KEY in artifact:
            return content_text(artifact[OFFLOADED_KEY])
        return ""  # the original is elsewhere in the history
    return message_text(message)


def search_messages(
    messages: Sequence[BaseMessage],
    query: str,
    *,
    limit: int = 8,
    view: Sequence[BaseMessage] | None = None,
) -> list[HistoryHit]:
    """The passages of `messages` that best match `query`, best first (BM25 over passages).

    The current round (the latest user message and what follows it) is in view and is not
    searched, except a tool result of it the view shows only as a preview; nor are the
    answers of `read_tool_result` and `search_history` (they repeat what they found).

    `view`: what the model is sent (compaction's `llm_input_messages`). Then the hits
    the model cannot see come first: messages compaction left out and the full text of
    results it only shows as previews, best first; after them, the hits in messages
    the view shows whole, best first. The whole history is searched either way (what
    is in view may be what the model overlooked); without a view, hits are ranked by
    score alone.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage
        hits = search_messages(
            [HumanMessage("hi", id="u1"), AIMessage("The demo moved to Lisbon.", id="a1"),
             HumanMessage("where is the demo?", id="u2")],
            "where is the demo",
        )
        (hits[0].ref, hits[0].text)   # ('message a1', 'The demo moved to Lisbon.')
        ```
    """
    words = query_terms(query)
    if not words:
        return []
    docs = []
    current = max((i for i, m in enumerate(messages) if m.type == "human"), default=len(messages))
    # What the view shows whole, by id and text: an id alone does not name one message
    # (with an `operator.add` reducer two can share one, and tool results have none).
    shown = {(m.id, m.type, message_text(m)) for m in view or () if not is_preview(m)}
    previewed = {m.tool_call_id for m in view or () if isinstance(m, ToolMessage) and is_preview(m)}
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage) and message.name in (READ_TOOL_RESULT, SEARCH_HISTORY):
            continue
        text = _full_text(message)
        if not text:
            continue
        if i >= current and not (
            isinstance(message, ToolMessage) and message.tool_call_id in previewed
        ):
            continue  # the current round is in view, but for a result shown as a preview
        docs.append((i, message, text, message_index(text)))
    n_docs = sum(len(ix.passages) for *_, ix in docs) or 1
    average = sum(sum(ix.lengths) for *_, ix in docs) / n_docs
    df: Counter[str] = Counter()
    for *_, ix in docs:
        for term in words:
            df[term] += len(ix.postings[term])
    idf = {t: inverse_frequency(n_docs, n) for t, n in df.items() if n}
    hits: list[tuple[bool, HistoryHit]] = []
    for i, message, text, ix in docs:
        in_view = not is_preview(message) and (message.id, message.type, text) in shown
        scores: dict[int, float] = {}
        for term in idf:
            for passage, tf in ix.postings[term]:
                scores[passage] = scores.get(passage, 0.0) + term_score(
                    idf[term], tf, ix.lengths[passage], average
                )
        if not scores:
            continue
        starts = _line_starts(text)
        for passage, score in scores.items():
            line = ix.lines[passage]
            if isinstance(message, ToolMessage):
                ref, tool_name = tool_result_ref(message.tool_call_id), message.name
            else:
                ref, tool_name = f"message {message.id or f'#{i}'}", None
            snippet = ix.passages[passage].strip()
            if len(snippet) > _SNIPPET:
                snippet = snippet[: _SNIPPET - 1] + "…"
            hit = HistoryHit(
                ref=ref,
                role=message.type,
                line=line,
                offset=starts[line],
                score=round(score, 3),
                text=snippet,
                tool=tool_name,
                message_id=message.id,
            )
            hits.append((in_view, hit))
    # without a view nothing is shown: the order is the score's
    hits.sort(key=lambda pair: (pair[0], -pair[1].score))
    return [hit for _, hit in hits[: max(1, limit)]]


def _line_starts(text: str) -> list[int]:
    starts, at = [], 0
    for line in text.split("\n"):
        starts.append(at)
        at += len(line) + 1
    return starts


def format_hits(query: str, hits: Sequence[HistoryHit]) -> str:
    """The tool's answer: one numbered line per hit, with how to open tool results."""
    if not hits:
        return (
            f"Nothing in the conversation history matches {query!r}. Try other words "
            "(names, identifiers, the subject)."
        )
    lines = [f"{len(hits)} passage(s) match {query!r}, best first:"]
    for n, hit in enumerate(hits, 1):
        where = f"{hit.ref} line {hit.line + 1}" + (f" ({hit.tool})" if hit.tool else "")
        if not hit.tool:
            where = f"{hit.ref} ({hit.role})"
        lines.append(f"{n}. {where}: {hit.text}")
        if hit.ref.startswith("tool-result/"):
            lines.append(f'   open: {READ_TOOL_RESULT}(ref="{hit.ref}", offset={hit.offset})')
    return "\n".join(lines)


@tool(SEARCH_HISTORY, response_format="content_and_artifact")
def search_history(
    query: str,
    state: Annotated[Any, InjectedState] = None,
    limit: int = 8,
) -> tuple[str, dict[str, Any]]:
    """Search the whole conversation history, including earlier messages and full tool
    outputs no longer shown to you, for passages matching `query`. Passages you cannot
    see come first.

    Use it when the request refers to something said or found earlier that you do not
    see. Returns ranked passages; open a tool result with read_tool_result(ref, offset).

    Args:
        query: words the passage should contain (names, subjects, identifiers).
        limit: most passages to return.
    """
    state = require_state(
        state,
        SEARCH_HISTORY,
        "the graph state (its messages and llm_input_messages)",
        f'{SEARCH_HISTORY}.invoke({{"query": "invoice", "state": {{"messages": '
        'state["messages"]}})',
    )
    messages = _state_list(state, "messages") or []
    view = _state_list(state, VIEW_KEY)
    hits = search_messages(messages, query, limit=limit, view=view)
    answer = format_hits(query, hits)
    # Never previewed (`is_tool_result_page`, by the mark): sized to the room left in the
    # request instead, as a `read_tool_result` page is (the best passages kept).
    room = page_chars(answer, state)
    while len(hits) > 1 and len(answer) > room:
        hits = hits[:-1]
        answer = format_hits(query, hits)
    key, _ = TOOL_RESULT_PAGE
    return answer, {key: HISTORY_SEARCH_ANSWER}


def _state_list(state: Any, key: str) -> list[BaseMessage] | None:
    """A message list from the injected graph state (a dict or an object), if it has one."""
    value = state.get(key) if isinstance(state, dict) else getattr(state, key, None)
    return list(value) if isinstance(value, (list, tuple)) and value else None
