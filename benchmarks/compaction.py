"""Benchmark: how many planted facts each compaction strategy keeps at the same budget.

    .venv/bin/python benchmarks/compaction.py            # ~30 s, prints a Markdown table
    .venv/bin/python benchmarks/compaction.py --quick    # fewer transcripts

Generates long agent transcripts (a user asking, tool calls with log output, assistant
answers) with facts planted in user messages, tool output and assistant decisions: file
paths, numbers, constraints, decisions. Each transcript is compacted once to the same
token budget by every strategy and by `trim_messages(strategy="last")`; a fact is kept
when its identifier still appears in what the model would see (summary included).

The summary strategies use `ExtractiveSummaryModel`, a deterministic offline stand-in
that copies fact-bearing sentences: it is NOT a real LLM, so their rows measure the
plumbing (what gets dropped, folded and clipped), not summary quality.
Token counts are exact (`count_tokens`, gpt-4o), cached per message as BudgetNode does.
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

from langgraph_ctx.context.compaction import (
    CompactionStrategy,
    HybridSummary,
    KeyMessageExtraction,
    LLMSummary,
    SlidingWindow,
    compact_messages,
)
from langgraph_ctx.context.compaction.signals import content_text
from langgraph_ctx.context.tokens import MessageTokenCounter
from langgraph_ctx.testing import ExtractiveSummaryModel, ordering_problems

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 transcripts instead of 24")
    parser.add_argument("--rounds", type=int, default=60, help="rounds per transcript")
    parser.add_argument("--budgets", default="4000,16000", help="token budgets, comma-separated")
    args = parser.parse_args()
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
