"""Benchmark: how many planted facts each compaction strategy keeps at the same budget.

    .venv/bin/python benchmarks/compaction.py            # ~30 s, prints a Markdown table
    .venv/bin/python benchmarks/compaction.py --quick    # fewer transcripts
    .venv/bin/python benchmarks/compaction.py --workload relevance   # one workload only

Generates long agent transcripts (a user asking, tool calls with log output, assistant
answers) with facts planted in user messages, tool output and assistant decisions: file
paths, numbers, constraints, decisions. Each transcript is compacted once to the same
token budget by every strategy and by `trim_messages(strategy="last")`; a fact is kept
when its identifier still appears in what the model would see (summary included).

The summary strategies use `ExtractiveSummaryModel`, a deterministic offline stand-in
that copies fact-bearing sentences: it is NOT a real LLM, so their rows measure the
plumbing (what gets dropped, folded and clipped), not summary quality.
Token counts are exact (`count_tokens`, gpt-4o), cached per message as BudgetNode does.

The relevance workload (`relevance_workload.py`) asks about one early plain-prose fact
among look-alikes, in transcripts where paths, numbers and "must" are everywhere; it
prints the share of transcripts whose answer the model would be sent, at 15% of the
transcript's tokens. Times are wall clock, and for the first compaction also the CPU time
of the thread (on a shared, busy machine the wall time holds other processes' time too).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from relevance_workload import relevance_case  # benchmarks/, next to this script

from langgraph_ctx.context.compaction import (
    CompactionStrategy,
    HybridSummary,
    KeyMessageExtraction,
    LLMSummary,
    RelevanceSelection,
    SlidingWindow,
    compact_messages,
)
from langgraph_ctx.context.compaction.core import resolve_strategy
from langgraph_ctx.context.compaction.previews import preview_text
from langgraph_ctx.context.compaction.relevance import message_index
from langgraph_ctx.context.content import content_text
from langgraph_ctx.context.tokens import MessageTokenCounter
from langgraph_ctx.testing import ExtractiveSummaryModel, ordering_problems

DEFAULT_NAME = resolve_strategy((compact_messages.__kwdefaults__ or {})["strategy"]).name
RELEVANCE_SHARE = 0.15  # the relevance workload's budget: this share of a transcript's tokens

FILLER = [
    "I looked at the module and the tests again.",
    "It should be fine after that change.",
    "There were 12 warnings, nothing new.",
    "Line 88 in the helper looks odd to me.",
    "Can you take another look at the output?",
    "The previous run took about 40 seconds.",
    "Let's keep going with the next part.",
    "I am not sure the cache is used here.",
    "The docs say the flag is optional.",
    "We talked about this in the morning standup.",
]
WORDS = ["orion", "lynx", "delta", "maple", "cobalt", "ember", "quartz", "tundra", "vega", "zephyr"]
PACKAGES = ["numpy", "pydantic", "httpx", "sqlalchemy", "fastapi", "ruff"]


@dataclass(frozen=True)
class Fact:
    key: str
    kind: str  # path / number / constraint / decision
    where: str  # user / tool / assistant


@dataclass
class Transcript:
    messages: list[BaseMessage]
    facts: list[Fact] = field(default_factory=list)


def plant(rng: random.Random, where: str) -> tuple[str, Fact]:
    kind = rng.choice(["path", "number", "constraint", "decision"])
    word, n = rng.choice(WORDS), rng.randint(100, 999)
    if kind == "path":
        key = f"{word}-{n}"
        text = f"The config for this lives at /srv/proj/{key}/settings.yaml."
    elif kind == "number":
        key = str(rng.randint(100_000, 999_999))
        text = f"The monthly limit is {key} requests."
    elif kind == "constraint":
        key = f"{word}-cluster-{n}"
        text = f"We must never restart the {key} during business hours."
    else:
        key = f"{rng.randint(1, 9)}.{rng.randint(10, 99)}.{n}"
        text = f"Decided: pin {rng.choice(PACKAGES)} to {key}."
    if where == "tool":
        text = ("NOTE: " if kind != "path" else "INFO: ") + text
    return text, Fact(key, kind, where)


def log_lines(rng: random.Random, count: int) -> list[str]:
    return [
        f"2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{rng.randint(1, 8)} "
        f"processed batch {rng.randint(1, 9999)} in {rng.randint(1, 900)} ms"
        for i in range(count)
    ]


def transcript(seed: int, rounds: int) -> Transcript:
    rng = random.Random(seed)
    messages: list[BaseMessage] = [
        SystemMessage("You are a coding agent working in a large monorepo.", id="system")
    ]
    facts: list[Fact] = []
    calls = 0
    for r in range(rounds):
        sentences = [f"Round {r}.", *rng.choices(FILLER, k=rng.randint(3, 10))]
        if rng.random() < 0.4:
            text, fact = plant(rng, "user")
            sentences.insert(rng.randint(1, len(sentences)), text)
            facts.append(fact)
        messages.append(HumanMessage(" ".join(sentences), id=f"u{r}"))
        for step in range(rng.choice([0, 1, 1, 2])):
            ids = [f"call{calls + k}" for k in range(rng.choice([1, 1, 2]))]
            calls += len(ids)
            messages.append(
                AIMessage(
                    "Let me check.",
                    tool_calls=[
                        {"name": "run_shell", "args": {"cmd": f"grep -r x{k}"}, "id": i}
                        for k, i in enumerate(ids)
                    ],
                    id=f"a{r}.{step}",
                )
            )
            for i in ids:
                lines = log_lines(rng, rng.choice([5, 20, 60, 200]))
                if rng.random() < 0.3:
                    text, fact = plant(rng, "tool")
                    lines.insert(rng.randint(0, len(lines)), text)
                    facts.append(fact)
                messages.append(
                    ToolMessage("\n".join(lines), tool_call_id=i, name="run_shell", id=f"t{i}")
                )
        answer = " ".join(rng.choices(FILLER, k=rng.randint(1, 4)))
        if rng.random() < 0.2:
            text, fact = plant(rng, "assistant")
            answer = f"{text} {answer}"
            facts.append(fact)
        messages.append(AIMessage(answer, id=f"r{r}"))
    messages.append(HumanMessage("Please summarise where we are and continue.", id="last"))
    return Transcript(messages, facts)


def cached_counter() -> Callable[[Sequence[BaseMessage]], int]:
    cache = MessageTokenCounter("gpt-4o")

    def count(messages: Sequence[BaseMessage]) -> int:
        return sum(cache.count(m) for m in messages) + cache.reply_priming

    return count


Method = Callable[
    [list[BaseMessage], int, Callable[[Sequence[BaseMessage]], int]], list[BaseMessage]
]


def with_strategy(make: Callable[[], CompactionStrategy]) -> Method:
    def run(messages: list[BaseMessage], budget: int, counter: Callable) -> list[BaseMessage]:
        out, _ = compact_messages(
            messages, max_tokens=budget, strategy=make(), token_counter=counter
        )
        return out

    return run


def no_offload(make: Callable[[], CompactionStrategy]) -> Method:
    """The strategy without tool-result previews, to show what offloading alone adds."""

    def run(messages: list[BaseMessage], budget: int, counter: Callable) -> list[BaseMessage]:
        out, _ = compact_messages(
            messages,
            max_tokens=budget,
            strategy=make(),
            token_counter=counter,
            offload_threshold=None,
        )
        return out

    return run


def trim_last(messages: list[BaseMessage], budget: int, counter: Callable) -> list[BaseMessage]:
    return trim_messages(
        messages,
        max_tokens=budget,
        token_counter=counter,
        strategy="last",
        start_on="human",
        include_system=True,
    )


METHODS: list[tuple[str, Method]] = [
    ('trim_messages(strategy="last")', trim_last),
    ("SlidingWindow(), offloading off", no_offload(SlidingWindow)),
    ("SlidingWindow()", with_strategy(SlidingWindow)),
    ("KeyMessageExtraction()", with_strategy(KeyMessageExtraction)),
    ("RelevanceSelection()", with_strategy(RelevanceSelection)),
    (
        "LLMSummary(fake extractive model)*",
        with_strategy(lambda: LLMSummary(ExtractiveSummaryModel(), retry_delay=0)),
    ),
    (
        "HybridSummary(fake extractive model)*",
        with_strategy(lambda: HybridSummary(ExtractiveSummaryModel(), retry_delay=0)),
    ),
]


def kept(facts: Sequence[Fact], messages: Sequence[BaseMessage]) -> list[Fact]:
    text = "\n".join(content_text(m.content) for m in messages)
    return [f for f in facts if f.key in text]


def summarization_middleware(
    messages: list[BaseMessage], budget: int, counter: Callable
) -> list[BaseMessage]:
    """LangChain's `SummarizationMiddleware` (fake extractive summarizer), as the model sees it."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    middleware = SummarizationMiddleware(
        model=ExtractiveSummaryModel(),
        trigger=("tokens", budget),
        keep=("tokens", budget // 2),
        token_counter=counter,
    )
    system, rest = messages[:1], messages[1:]
    update = middleware.before_model({"messages": list(rest)}, None)  # type: ignore[arg-type]
    if update is None:
        return messages
    kept = [m for m in update["messages"] if getattr(m, "id", None) != REMOVE_ALL_MESSAGES]
    return [*system, *kept]


def clear_caches() -> None:
    """Forget the per-text caches of relevance scoring and previews (a cold start)."""
    message_index.cache_clear()
    preview_text.cache_clear()


def default_strategy(
    messages: list[BaseMessage], budget: int, counter: Callable
) -> list[BaseMessage]:
    out, _ = compact_messages(messages, max_tokens=budget, token_counter=counter)
    return out


def relevance_table(count: int, rounds: int) -> None:
    """The relevance workload: is the answer to the last question in what the model sees?"""
    cases = [relevance_case(seed, rounds) for seed in range(count)]
    sizes = [cached_counter()(c.messages) for c in cases]
    print(
        f"\nRelevance workload: {count} transcripts x {rounds} rounds, "
        f"{statistics.mean(len(c.messages) for c in cases):.0f} messages and "
        f"{statistics.mean(sizes):,.0f} tokens on average; the last user message asks about "
        f"one of 5 look-alike facts planted early (in replies and inside large tool results); "
        f"budget {RELEVANCE_SHARE:.0%} of each transcript's tokens\n"
    )
    methods: list[tuple[str, Method]] = [
        (f"compact_messages() default ({DEFAULT_NAME})", default_strategy),
        *[(n, m) for n, m in METHODS if "offloading off" not in n],
        ("SummarizationMiddleware(fake extractive model)*", summarization_middleware),
    ]
    print(
        "| strategy | answer kept | in a reply | in tool output | ms, first compaction "
        "| CPU ms, first compaction | ms, history grew by a step | tool pairs valid "
        "| latest user kept | within budget |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, method in methods:
        got = {"assistant": [0, 0], "tool": [0, 0]}
        times, cpu, grown, valid, latest, within = [], [], [], 0, 0, 0
        for case, size in zip(cases, sizes, strict=True):
            budget = int(size * RELEVANCE_SHARE)
            # the previous request (inside the last agent turn), then this one: caches of
            # token counts and of the relevance index are warm, as in a running thread
            clear_caches()
            counter = cached_counter()
            method(case.messages[:-2], budget, counter)
            start = time.perf_counter()
            method(case.messages, budget, counter)
            grown.append((time.perf_counter() - start) * 1000)
            clear_caches()  # and the first compaction of a thread: nothing cached
            counter = cached_counter()
            start, start_cpu = time.perf_counter(), time.thread_time()
            out = method(case.messages, budget, counter)
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.thread_time() - start_cpu) * 1000)
            text = "\n".join(content_text(m.content) for m in out)
            got[case.where][0] += case.answer in text
            got[case.where][1] += 1
            valid += not ordering_problems(out)
            latest += any(m.id == "last" and m.content == case.messages[-1].content for m in out)
            within += counter(out) <= budget
        hits = sum(g[0] for g in got.values())

        def pct(bucket: str, got: dict[str, list[int]] = got) -> str:
            return f"{100 * got[bucket][0] / max(got[bucket][1], 1):.0f}%"

        n = len(cases)
        print(
            f"| {name} | {100 * hits / n:.0f}% ({hits}/{n}) | {pct('assistant')} | {pct('tool')} "
            f"| {statistics.median(times):.1f} | {statistics.median(cpu):.1f} "
            f"| {statistics.median(grown):.1f} "
            f"| {valid}/{n} | {latest}/{n} | {within}/{n} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 transcripts instead of 24")
    parser.add_argument("--rounds", type=int, default=60, help="rounds per transcript")
    parser.add_argument("--budgets", default="4000,16000", help="token budgets, comma-separated")
    parser.add_argument(
        "--workload", choices=["facts", "relevance", "all"], default="all", help="which workload"
    )
    parser.add_argument(
        "--relevance-rounds",
        type=int,
        default=44,
        help="rounds per relevance transcript (44: about 265 messages; 33: about 200)",
    )
    args = parser.parse_args()
    if args.workload != "facts":
        relevance_table(12 if args.quick else 40, args.relevance_rounds)
        print()
    if args.workload == "relevance":
        return
    transcripts = [transcript(seed, args.rounds) for seed in range(8 if args.quick else 24)]
    sizes = [cached_counter()(t.messages) for t in transcripts]
    n_facts = sum(len(t.facts) for t in transcripts)
    print(
        f"{len(transcripts)} transcripts x {args.rounds} rounds: "
        f"{statistics.mean(len(t.messages) for t in transcripts):.0f} messages and "
        f"{statistics.mean(sizes):,.0f} tokens on average (gpt-4o, exact); "
        f"{n_facts} planted facts"
    )
    for budget in (int(b) for b in args.budgets.split(",")):
        rows = []
        for name, method in METHODS:
            hits: dict[str, list[int]] = {
                "all": [0, 0],
                "user": [0, 0],
                "tool": [0, 0],
                "assistant": [0, 0],
            }
            times, valid, within = [], 0, 0
            for t in transcripts:
                counter = cached_counter()  # fresh cache: counting is part of the cost
                start = time.perf_counter()
                out = method(t.messages, budget, counter)
                times.append((time.perf_counter() - start) * 1000)
                found = set(kept(t.facts, out))
                for f in t.facts:
                    for bucket in ("all", f.where):
                        hits[bucket][0] += f in found
                        hits[bucket][1] += 1
                valid += not ordering_problems(out)
                within += counter(out) <= budget
            rows.append((name, hits, statistics.median(times), valid, within))
        base = rows[0][1]["all"][0] / max(rows[0][1]["all"][1], 1)
        print(f"\nBudget {budget:,} tokens per request\n")
        print(
            "| strategy | facts kept | vs trim last | in user msgs | in tool output "
            "| in assistant msgs | ms / compaction (median) | valid order | within budget |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for name, hits, ms, valid, within in rows:
            share = hits["all"][0] / max(hits["all"][1], 1)

            def pct(bucket: str, hits: dict[str, list[int]] = hits) -> str:
                got, total = hits[bucket]
                return f"{100 * got / max(total, 1):.0f}%"

            ratio = f"{share / base:.2f}x" if base else "n/a"
            print(
                f"| {name} | {100 * share:.1f}% | {ratio} | {pct('user')} | {pct('tool')} "
                f"| {pct('assistant')} | {ms:.1f} | {valid}/{len(transcripts)} "
                f"| {within}/{len(transcripts)} |"
            )
    print(
        "\n* ExtractiveSummaryModel is a deterministic, offline fake that copies fact-bearing "
        "sentences; it is not an LLM. Real summaries will differ."
    )


if __name__ == "__main__":
    main()
