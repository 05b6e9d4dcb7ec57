"""The fast paths and caches of relevance scoring and previews give what the slow ones give.

Relevance selection tokenizes every line of the history and previews every large tool
result; the fast paths (ASCII text through `str.translate`, a shared word -> term table,
line weights from the whole text at once) and the caches must not change a result: each
test compares them with the plain definition on varied, seeded input.
"""

from __future__ import annotations

import random
import string
from collections import Counter

import pytest

from langgraph_ctx.context import search
from langgraph_ctx.context.compaction import signals
from langgraph_ctx.context.search import term_bags, tokenize, tokenize_many

WORDS = [
    "The", "museums", "cities", "of", "PARIS", "a_b", "x1", "can't", "don't", "classes", "bus",
    "修复跨轮", "café", "Straße", "must", "/srv/app/x.py", "12ms", "we'll", "'quoted'", "do",
    "not", "going", "with", "ERROR", "C:\\tmp\\f.log", "3.14", "```",
]  # fmt: skip


def texts(rng: random.Random, *, ascii_only: bool = False) -> list[str]:
    pool = string.printable if ascii_only else string.printable + "éü修复跨轮\u3000"
    out = []
    for _ in range(rng.randint(0, 6)):
        parts = [rng.choice(WORDS) for _ in range(rng.randint(0, 8))]
        parts += ["".join(rng.choice(pool) for _ in range(rng.randint(0, 10)))]
        rng.shuffle(parts)
        text = " ".join(parts)
        out.append(text.encode("ascii", "ignore").decode() if ascii_only else text)
    return out


@pytest.mark.parametrize("ascii_only", [True, False])
def test_term_bags_and_tokenize_many_are_tokenize(ascii_only: bool) -> None:
    rng = random.Random(7)
    for _ in range(1500):
        batch = texts(rng, ascii_only=ascii_only)
        assert tokenize_many(batch) == [tokenize(t) for t in batch], batch
        assert term_bags(batch) == [dict(Counter(tokenize(t))) for t in batch], batch


def test_the_shared_word_table_starts_over_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full table is replaced (never emptied under a reader), and results stay the same."""
    monkeypatch.setattr(search, "_TERMS_KEPT", 30)
    monkeypatch.setattr(search, "_TERM_OF", {})
    rng = random.Random(3)
    for _ in range(300):
        batch = [
            " ".join(rng.choice(["museums", "The", f"w{rng.randint(0, 90)}"]) for _ in range(9))
            for _ in range(3)
        ]
        before = search._TERM_OF
        assert term_bags(batch) == [dict(Counter(tokenize(t))) for t in batch]
        assert len(search._TERM_OF) <= 30 or search._TERM_OF is not before


def test_line_weights_of_a_whole_text_are_the_weights_of_its_lines() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))) for _ in range(4)]
        lines.append("".join(rng.choice(string.printable) for _ in range(rng.randint(0, 30))))
        text = "\n".join(lines)
        expected = tuple(
            signals.line_weight(line) if line.strip() else 0.0 for line in text.split("\n")
        )
        assert signals.line_weights.__wrapped__(text) == expected, text


@pytest.mark.parametrize("kind", ["log", "prose"])
def test_a_preview_is_sized_with_one_count(kind: str) -> None:
    """The first attempt leaves room for the header and the reference: one tokenizer call."""
    from langchain_core.messages import ToolMessage

    from langgraph_ctx import count_tokens
    from langgraph_ctx.context.compaction.conversation import preview_of

    rng = random.Random(5)
    if kind == "log":
        lines = [
            f"2024-05-01 12:{i % 60:02d} INFO worker-{rng.randint(1, 9)} batch "
            f"{rng.randint(10, 9999)} at /srv/app/q{i} in {rng.randint(1, 900)} ms"
            for i in range(300)
        ]
    else:
        lines = [" ".join(rng.choice(WORDS[:12]) for _ in range(30)) + "." for _ in range(60)]
    result = ToolMessage("\n".join(lines), tool_call_id="call_1", name="fetch", id="t1")
    base = count_tokens([])
    calls: list[int] = []

    def count(message: object) -> int:
        calls.append(1)
        return count_tokens([message]) - base  # type: ignore[list-item]

    tokens = count(result)
    preview, cost = preview_of(result, tokens=tokens, preview_tokens=160, count=count)
    assert len(calls) == 2  # the result itself, then the preview once
    assert cost == count_tokens([preview]) - base <= 160
    assert preview.content.startswith("TOOL_RESULT_PREVIEW") and lines[0][:20] in preview.content


def _cold() -> None:
    """Forget every per-text cache relevance and previews keep (a new process)."""
    from langgraph_ctx.context.compaction import conversation, previews, relevance

    relevance.message_index.cache_clear()
    relevance._terms_of.cache_clear()
    previews.preview_text.cache_clear()
    signals.line_weights.cache_clear()
    search._TERM_OF = {}
    for cache in (conversation._PREVIEWS, relevance._QUERY_PREVIEWS):
        cache._entries.clear()


def test_a_cold_compaction_and_a_warm_one_send_the_same_messages() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    from langgraph_ctx.context.compaction import RelevanceSelection, compact_messages
    from langgraph_ctx.context.tokens import MessageTokenCounter
    from tests.test_compaction_relevance import history

    messages = history(fact_in="tool", rounds=20)
    counter = MessageTokenCounter("gpt-4o")

    def compact(msgs: list) -> list:  # type: ignore[type-arg]
        out, _ = compact_messages(
            msgs,
            max_tokens=2_500,
            strategy=RelevanceSelection(),
            token_counter=counter.count_request,
        )
        return [(m.id, m.content) for m in out]  # type: ignore[misc]

    _cold()
    cold = compact(messages)
    assert any("Hana Kim" in str(content) for _, content in cold)
    assert compact(messages) == cold  # warm: every cache hit
    # a new request: the previews follow it, warm or cold
    question = HumanMessage("Who was the vendor contact for the media invoice?", id="q2")
    asked = [*messages[:-1], question]
    warm_new = compact(asked)
    _cold()
    assert compact(asked) == warm_new
    assert any("Raj Malhotra" in str(content) for _, content in warm_new)
    # a tool result edited in place (same id): its preview shows the new text, not a cached one
    edited = list(asked)
    at = next(i for i, m in enumerate(edited) if m.id == "t3")
    old = edited[at]
    edited[at] = ToolMessage(
        str(old.content).replace("Raj Malhotra", "Ada Byron"),
        tool_call_id=old.tool_call_id,  # type: ignore[attr-defined]
        name=old.name,
        id=old.id,
    )
    again = compact(edited)
    text = "\n".join(str(content) for _, content in again)
    assert "Ada Byron" in text and "Raj Malhotra" not in text


def test_line_scores_from_kept_term_parts_are_the_scores_made_afresh() -> None:
    """A preview's line scores add up parts kept per term: a later request that shares
    some terms gets the scores a cold index gives it."""
    from langgraph_ctx.context.compaction import relevance

    rng = random.Random(2)
    text = "\n".join(
        " ".join(rng.choice(WORDS[:14]) for _ in range(rng.randint(1, 12))) for _ in range(80)
    )
    queries = ["museums in PARIS", "the cities of paris museum", "bus classes x1 cities"]
    warm = [relevance.line_scores(text, q) for q in queries]
    for query, scores in zip(queries, warm, strict=True):
        relevance.message_index.cache_clear()
        assert relevance.line_scores(text, query) == scores
    assert warm[0] and warm[2]


def test_line_parts_are_bm25_term_scores_within_the_message() -> None:
    """A term's part of a line's score, with the passages' norms kept per message, is
    `search.term_score` on that passage (the message's passages the collection)."""
    from langgraph_ctx.context.compaction import relevance

    rng = random.Random(8)
    for _ in range(20):
        text = "\n".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 90)))
            for _ in range(rng.randint(1, 30))
        )
        ix = relevance.message_index(text)
        n_docs = len(ix.passages) or 1
        average = sum(ix.lengths) / n_docs
        for term in search.query_terms(" ".join(WORDS)):
            postings = ix.postings[term]
            idf = search.inverse_frequency(n_docs, len(postings))
            expected = tuple(
                (ix.lines[p], search.term_score(idf, tf, ix.lengths[p], average))
                for p, tf in postings
            )
            got = relevance._line_parts(ix, term)
            assert [line for line, _ in got] == [line for line, _ in expected]
            assert [p for _, p in got] == pytest.approx([p for _, p in expected], rel=1e-12)
