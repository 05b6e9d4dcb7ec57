"""Relevance to the current request: BM25 over the full text of every message.

The query is the latest user message plus, inside an agent turn, the tool calls the
assistant just made. Every message of the history is split into passages (lines, and
sentences of long lines) and scored with BM25 (`langgraph_ctx.context.search`); a
unit's score is its best passage's. The text scored is the *original* one: a large tool
result counts with its full output, not its preview.

Why passages rather than whole messages: the fact asked about is often one sentence in a
300-line tool output or in a reply about something else. BM25's length normalisation
would bury it inside the whole message; as a passage it ranks where it belongs.

Costs follow new work: each message's passages and term counts are cached by its text,
so a compaction after the history grew only tokenizes the new messages; scoring then
looks up the few query terms per message.

```python
from langchain_core.messages import AIMessage, HumanMessage
from langgraph_ctx import count_tokens
from langgraph_ctx.context.compaction.conversation import Conversation
from langgraph_ctx.context.compaction.relevance import query_of, score_units

conv = Conversation.build(
    [HumanMessage("Plan the demo."), AIMessage("The demo moved to the Lisbon office."),
     HumanMessage("Thanks."), AIMessage("You're welcome."),
     HumanMessage("Where is the demo now?")],
    counter=count_tokens,
)
scores = score_units(conv, query_of(conv))   # {position: UnitRelevance(...)}
```
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langgraph_ctx.context.compaction.conversation import Conversation, Unit, preview_of
from langgraph_ctx.context.compaction.previews import (
    StandInCache,
    is_preview,
    is_tool_result_page,
    message_key,
    preview_message,
    shown_tokens,
    shrink_to,
)
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.search import K1, B, inverse_frequency, query_terms, term_bags

_LONG_LINE = 400  # a line longer than this is scored sentence by sentence
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_LINE_CLIP = 240  # characters of one matching line shown in a preview
_CACHE = 8192  # messages whose passages stay indexed between compactions


class Postings(dict[str, tuple[tuple[int, int], ...]]):
    """term -> ((passage, term frequency), ...) of one message, made for a term when asked.

    Scoring asks for the few query terms only: building every term's list up front cost
    as much as tokenizing the message. `postings[term]` is a plain dict lookup once a
    term was asked for (`()` for a term the message lacks); `get` and `in` answer as a
    dict of every term of the message would.
    """

    __slots__ = ("_bags", "_vocabulary")

    def __init__(self, bags: Sequence[Mapping[str, int]], vocabulary: frozenset[str]) -> None:
        super().__init__()
        self._bags = bags
        self._vocabulary = vocabulary

    def __missing__(self, term: str) -> tuple[tuple[int, int], ...]:
        found: tuple[tuple[int, int], ...] = ()
        if term in self._vocabulary:
            found = tuple([(i, bag[term]) for i, bag in enumerate(self._bags) if term in bag])
        self[term] = found
        return found

    def get(self, term: str, default: Any = None) -> Any:
        return self[term] if term in self._vocabulary else default

    def fill(self, terms: Iterable[str]) -> None:
        """Make the postings of `terms` in one pass over the passages.

        The same lists `__missing__` makes one term at a time (passages in order), for
        a whole query at once: one set intersection per passage instead of one lookup
        per passage and term.
        """
        wanted = {t for t in terms if t in self._vocabulary and not dict.__contains__(self, t)}
        if len(wanted) < 2:
            return
        found: dict[str, list[tuple[int, int]]] = {t: [] for t in wanted}
        for i, bag in enumerate(self._bags):
            for term in wanted.intersection(bag):
                found[term].append((i, bag[term]))
        for term, postings in found.items():
            self[term] = tuple(postings)

    def __contains__(self, term: object) -> bool:
        return term in self._vocabulary


@dataclass(frozen=True)
class MessageIndex:
    """One message's passages and the postings of their terms (cached by text)."""

    passages: tuple[str, ...]
    lines: tuple[int, ...]
    """Line number of each passage in the message text."""
    lengths: tuple[int, ...]
    bags: tuple[Mapping[str, int], ...]
    """Each passage's terms and their frequencies."""
    postings: Postings
    """term -> ((passage, term frequency), ...), in passage order."""
    line_parts: dict[str, tuple[tuple[int, float], ...]] = field(
        default_factory=dict, compare=False
    )
    """term -> ((line, its BM25 part), ...) within this message alone (`line_scores`)."""

    @functools.cached_property
    def passage_norms(self) -> tuple[float, ...]:
        """BM25's length norm of each passage, the message's passages the collection.

        The same for every term (`_line_parts`): computed once per message, not per term.
        """
        norms = _Norms(sum(self.lengths) / (len(self.passages) or 1))
        return tuple(norms[length] for length in self.lengths)


@functools.lru_cache(maxsize=_CACHE)
def message_index(text: str) -> MessageIndex:
    """Passages of `text` (lines; long lines split into sentences) with term postings."""
    passages: list[str] = []
    lines: list[int] = []
    for number, line in enumerate(text.split("\n")):
        if not line.strip():
            continue
        pieces = _SENTENCE.split(line) if len(line) > _LONG_LINE else [line]
        for piece in pieces:
            if piece.strip():
                passages.append(piece)
                lines.append(number)
    bags = term_bags(passages)
    vocabulary = frozenset(itertools.chain.from_iterable(bags))
    return MessageIndex(
        tuple(passages),
        tuple(lines),
        tuple(map(sum, map(dict.values, bags))),
        tuple(bags),
        Postings(bags, vocabulary),
    )


def message_text(message: BaseMessage) -> str:
    """The text a message is scored by: its content, and its tool calls' names and arguments."""
    text = content_text(message.content)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "\n".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
        text = f"{text}\n{calls}" if text else calls
    return text


def query_of(conv: Conversation) -> str:
    """The current request: the latest user message, plus the tool calls made after it."""
    latest = conv.latest_user
    if latest is None:
        return ""
    parts = [content_text(conv.units[latest].source[0].content)]
    after = [u for u in conv.units[latest + 1 :] if u.kind == "tools"]
    if after:
        parts.append(message_text(after[-1].source[0]))
    return "\n".join(parts)


def request_query(messages: Sequence[BaseMessage]) -> str:
    """`query_of` on a plain message list: the latest user message, plus the tool calls
    the newest assistant message after it made."""
    latest = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].type == "human"), None
    )
    if latest is None:
        return ""
    parts = [content_text(messages[latest].content)]
    calls = [m for m in messages[latest + 1 :] if isinstance(m, AIMessage) and m.tool_calls]
    if calls:
        parts.append(message_text(calls[-1]))
    return "\n".join(parts)


def requery_previews(
    view: Sequence[BaseMessage],
    messages: Sequence[BaseMessage],
    query: str,
    *,
    counter: Callable[[Sequence[BaseMessage]], int],
    preview_tokens: int,
) -> tuple[list[BaseMessage], int]:
    """The previews in `view` rebuilt for a new request, and what that changed in tokens.

    A compacted view stays until compaction fires again; its previews showed the lines
    of the request they were made for. When a new request comes, each preview in view
    is made again from its original (found in `messages` by tool call id): head, the
    lines the new request matches, tail; the plain preview when no line matches. A new
    preview is used only if it is no larger than the old one or `preview_tokens`, so the
    view never outgrows what compaction measured by more than that. Cached per (result,
    matching query terms): a request that matches the same words costs nothing again.
    """
    base = counter([])

    def count(message: BaseMessage) -> int:
        return max(0, counter([message]) - base)

    wanted = {m.tool_call_id for m in view if isinstance(m, ToolMessage) and is_preview(m)}
    originals: dict[str, ToolMessage] = {}
    for m in reversed(messages):  # the previews are of recent results, mostly
        if len(originals) == len(wanted):
            break
        if (
            isinstance(m, ToolMessage)
            and m.tool_call_id in wanted
            and m.tool_call_id not in originals
            and not is_preview(m)
            and not is_tool_result_page(m)
        ):
            originals[m.tool_call_id] = m
    out = list(view)
    delta = 0
    for i, shown in enumerate(view):
        if not isinstance(shown, ToolMessage) or not is_preview(shown):
            continue
        original = originals.get(shown.tool_call_id)
        if original is None:
            continue
        # the size the preview in view states (an estimate stays one: `TokenEstimate`)
        stated = shown_tokens(shown)
        tokens = stated if stated is not None else count(original)
        old = count(shown)
        room = max(preview_tokens, old)
        made = (
            query_preview(
                original,
                tokens=tokens,
                query=query,
                preview_tokens=room,
                count=count,
                counted_by=(counter, base),
            )
            if query
            else None
        )
        if made is None:  # no line matches: the plain preview
            made = preview_of(
                original,
                tokens=tokens,
                preview_tokens=preview_tokens,
                count=count,
                counted_by=(counter, base),
            )
        preview, cost = made
        if cost >= tokens or cost > room or preview.content == shown.content:
            continue
        out[i] = preview
        delta += cost - old
    return out, delta


@dataclass(frozen=True)
class UnitRelevance:
    """How well a unit matches the request: its best passage's BM25 score."""

    score: float
    message: int
    """Index in the unit's messages of the best passage."""
    passage: str
    terms: tuple[str, ...]


def score_units(
    conv: Conversation, query: str, *, units: Sequence[Unit] | None = None
) -> dict[int, UnitRelevance]:
    """BM25 relevance of each unit to `query` (positions with a positive score only).

    All passages of all units are the collection (idf and average length), so a word
    found everywhere (a service name in every log line) counts for little.
    """
    words = query_terms(query)
    units = conv.units if units is None else units
    if not words or not units:
        return {}
    indexes = [[message_index(message_text(m)) for m in unit.source] for unit in units]
    n_docs = sum(len(ix.passages) for per in indexes for ix in per) or 1
    average = sum(sum(ix.lengths) for per in indexes for ix in per) / n_docs
    df: Counter[str] = Counter()
    for per in indexes:
        for ix in per:
            ix.postings.fill(words)
            for term in words:
                df[term] += len(ix.postings[term])
    idf = {t: inverse_frequency(n_docs, n) for t, n in df.items() if n}
    norms = _Norms(average)
    result: dict[int, UnitRelevance] = {}
    for unit, per in zip(units, indexes, strict=True):
        best_score: float | None = None  # rounded, as UnitRelevance keeps it
        best: tuple[int, int] = (0, 0)  # message, passage
        for m, ix in enumerate(per):
            scores = _passage_scores(ix, idf, norms)
            for passage, score in scores.items():
                if best_score is None or score > best_score:
                    best_score, best = round(score, 3), (m, passage)
        if best_score is not None:
            m, passage = best
            ix = per[m]
            bag = ix.bags[passage]
            found = tuple(words[t] for t in idf if t in bag)
            result[unit.position] = UnitRelevance(best_score, m, ix.passages[passage], found)
    return result


_K1_PLUS_1 = K1 + 1


class _Norms(dict[int, float]):
    """BM25's length normalisation per passage length, for one collection average.

    `term_score(idf, tf, length, average)` is `idf * tf * (K1 + 1) / (tf + norm)`; the
    norm depends on the length only, so it is computed once per length, and the score
    inline with the same operations in the same order (the same floats).
    """

    def __init__(self, average: float) -> None:
        super().__init__()
        self.average = average or 1.0

    def __missing__(self, length: int) -> float:
        norm = self[length] = K1 * (1 - B + B * length / self.average)
        return norm


def _passage_scores(ix: MessageIndex, idf: Mapping[str, float], norms: _Norms) -> dict[int, float]:
    """BM25 score of each passage of `ix` that has a term of `idf` (terms in `idf` order)."""
    scores: dict[int, float] = {}
    lengths = ix.lengths
    get = scores.get
    index = ix.postings
    for term, weight in idf.items():
        postings = index[term]
        if not postings:
            continue
        for passage, tf in postings:
            scores[passage] = get(passage, 0.0) + weight * tf * _K1_PLUS_1 / (
                tf + norms[lengths[passage]]
            )
    return scores


def line_scores(text: str, query: str) -> dict[int, float]:
    """BM25 score of each line of `text` that matches `query` (idf within `text`)."""
    return _line_scores(message_index(text), _terms_of(query))


@functools.lru_cache(maxsize=256)
def _terms_of(query: str) -> tuple[str, ...]:
    """`query_terms(query)`'s terms, in order (a preview asks for them again and again)."""
    return tuple(query_terms(query))


def _line_scores(ix: MessageIndex, terms: Sequence[str]) -> dict[int, float]:
    """BM25 of each line of one message, the message's passages the collection.

    A term's part of a line's score depends on that message and term alone, so it is
    kept in the index (`MessageIndex.line_parts`): a preview made again for a request
    that shares terms with an earlier one only adds them up. A term new to the message
    gets its postings one term at a time (a dict lookup per passage): for the dozen
    terms of a request that is cheaper than `Postings.fill`'s set intersection per
    passage (about 0.06 ms less per preview of a 20 KB result).
    """
    scores: dict[int, float] = {}
    get = scores.get
    parts = ix.line_parts
    for term in terms:
        made = parts.get(term)
        if made is None:
            made = parts[term] = _line_parts(ix, term)
        for line, part in made:
            scores[line] = get(line, 0.0) + part
    return scores


def _line_parts(ix: MessageIndex, term: str) -> tuple[tuple[int, float], ...]:
    """(line, `term`'s BM25 part of that line's score), for each passage with `term`."""
    postings = ix.postings[term]  # made now if new: one scan of the passages
    if not postings:
        return ()
    weight = inverse_frequency(len(ix.passages) or 1, len(postings))
    lines, norms = ix.lines, ix.passage_norms
    return tuple(
        [(lines[p], weight * tf * _K1_PLUS_1 / (tf + norms[p])) for p, tf in postings]
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def query_preview_text(text: str, query: str, chars: int) -> str | None:
    """Head, the lines most relevant to `query`, and tail of `text`, within about `chars`.

    None when no line in the middle matches the query (the plain preview is as good).
    """
    return _preview_text(text.split("\n"), line_scores(text, query), chars)


def _ranked_lines(lines: list[str], scores: dict[int, float]) -> list[tuple[int, int]]:
    """The matching lines between head and tail, best first: (line, its cost in chars)."""
    head_n = min(2, len(lines))
    tail_n = 1 if len(lines) > head_n else 0
    middle = {i: s for i, s in scores.items() if head_n <= i < len(lines) - tail_n}
    # best score first, ties in line order: a stable sort by score, reversed (Python's
    # `reverse=True` keeps equal keys in their order), of the lines in order
    return [
        (i, min(len(lines[i].strip()), _LINE_CLIP) + 1)
        for i in sorted(sorted(middle), key=middle.__getitem__, reverse=True)
    ]


def _preview_text(
    lines: list[str],
    scores: dict[int, float],
    chars: int,
    ranked: list[tuple[int, int]] | None = None,
) -> str | None:
    """Head, the best matching lines that fit `chars`, and tail (`ranked`: precomputed)."""
    if ranked is None:
        ranked = _ranked_lines(lines, scores)
    if not ranked:
        return None
    head_n = min(2, len(lines))
    tail_n = 1 if len(lines) > head_n else 0
    head = [_clip(line, chars // 5) for line in lines[:head_n]]
    tail = [_clip(line, chars // 8) for line in lines[len(lines) - tail_n :]]
    room = chars - sum(len(line) + 1 for line in head + tail) - 60
    chosen: list[int] = []
    for i, cost in ranked:
        if room < 2:  # a matching line costs at least 2 (a word and its newline)
            break
        if cost > room:
            continue
        chosen.append(i)
        room -= cost
    if not chosen:
        return None
    omitted = len(lines) - head_n - tail_n
    body = [
        *head,
        f"[… {omitted} lines omitted; lines matching the request follow …]",
        *(_clip(lines[i].strip(), _LINE_CLIP) for i in sorted(chosen)),
        "[…]",
        *tail,
    ]
    return "\n".join(body)


def with_query_previews(conv: Conversation, unit: Unit, query: str) -> Unit:
    """`unit` with its previews rebuilt from the originals to show the lines `query` matches.

    Only previews of a size offload are rebuilt (budget previews are as small as they get
    anyway); a preview stays as it is when no line matches or the new one costs more.
    """
    if not unit.offloads or not query:
        return unit
    messages = list(unit.messages)
    sizes = list(unit.sizes)
    offloads = list(unit.offloads)
    changed = False
    # A result is found by its tool call id, unique in a unit (`Conversation` pairs each
    # call with one result); two messages may share a message id (`operator.add`).
    at = {m.tool_call_id: i for i, m in enumerate(unit.source) if isinstance(m, ToolMessage)}
    for n, offload in enumerate(offloads):
        i = at.get(offload.tool_call_id, -1)
        if i < 0 or messages[i] is unit.source[i]:
            continue
        original = unit.source[i]
        assert isinstance(original, ToolMessage)
        made = query_preview(
            original,
            tokens=offload.tokens,
            query=query,
            preview_tokens=max(conv.preview_tokens, offload.preview_tokens),
            count=conv.count,
            counted_by=(conv.counter, conv.base_tokens),
        )
        if made is None or made[1] >= offload.tokens:
            continue
        messages[i], sizes[i] = made
        offloads[n] = offload.model_copy(update={"preview_tokens": made[1]})
        changed = True
    if not changed:
        return unit
    return replace(
        unit,
        messages=tuple(messages),
        sizes=tuple(sizes),
        tokens=sum(sizes),
        offloads=tuple(offloads),
    )


def query_preview(
    message: ToolMessage,
    *,
    tokens: int,
    query: str,
    preview_tokens: int,
    count: Callable[[BaseMessage], int],
    counted_by: Any = None,
) -> tuple[ToolMessage, int] | None:
    """A preview of a tool result that shows the lines matching the request, and its cost.

    Same header and reference as `tool_result_preview`, so `read_tool_result` and the
    search tool open it the same way. None when no line matches. `counted_by`: what
    makes `count` deterministic (see `preview_of`); with it the preview is reused while
    the query terms the result contains stay the same.
    """
    text = content_text(message.content)
    ix = message_index(text)
    # only the query terms the text has change the preview
    terms = tuple(t for t in _terms_of(query) if t in ix.postings)
    key = None
    if counted_by is not None:
        key = (message_key(message, text), terms, tokens, type(tokens), preview_tokens, counted_by)
        cached = _QUERY_PREVIEWS.get(key)
        if cached is not None:
            return cached[0]  # type: ignore[no-any-return]
    made = _query_preview(message, text, _line_scores(ix, terms), tokens, preview_tokens, count)
    if key is not None:
        _QUERY_PREVIEWS.put(key, (made,))
    return made


_QUERY_PREVIEWS = StandInCache(4096)


def _query_preview(
    message: ToolMessage,
    text: str,
    scores: dict[int, float],
    tokens: int,
    preview_tokens: int,
    count: Callable[[BaseMessage], int],
) -> tuple[ToolMessage, int] | None:
    chars_per_token = max(1.0, len(text) / max(tokens, 1))
    lines = text.split("\n")
    ranked = _ranked_lines(lines, scores)
    # This body leaves room for its notes and clips head and tail (`_preview_text`): at
    # the full size the first attempt often fits already. (Leaving room for the header
    # as well, as `preview_start` does for the plain preview, saves the second count
    # where it does not, but drops the matching line a request needs too often: a
    # relevance benchmark kept the answer in 82% of transcripts instead of 95%.)
    start = int(preview_tokens * chars_per_token)
    first = _preview_text(lines, scores, start, ranked)
    if first is None:
        return None

    def build(chars: int) -> ToolMessage:
        body = first if chars == start else _preview_text(lines, scores, chars, ranked) or ""
        return preview_message(message, tokens=tokens, body=body)

    preview, cost = shrink_to(build, chars=start, budget=preview_tokens, count=count)
    assert isinstance(preview, ToolMessage)
    return preview, cost
