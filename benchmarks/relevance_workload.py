"""The relevance workload of `benchmarks/compaction.py`: facts surface cues cannot find.

Seeded agent transcripts where every tool output and reply is full of paths, numbers and
"must", so scoring by those cues keeps everything alike. Plain-prose facts about several
look-alike subjects ("the vendor contact for the billing invoice is Hana Kim", and the
same for four other invoices) are planted in the first rounds, in assistant replies and
inside large tool results; the last user message asks about one of them. The answer
counts as kept when its value (the name, the city, ...) is in what the model would be
sent; the look-alike facts carry other values, so keeping the wrong one does not count.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

SUBJECTS = ["billing", "search", "identity", "media", "reporting", "payments", "catalog"]
# (attribute, how a fact says it, how the user asks about it, the values)
ATTRIBUTES = [
    (
        "vendor contact",
        "the vendor contact for the {s} invoice is {v}",
        "Who was the vendor contact for the {s} invoice again?",
        [
            "Hana Kim",
            "Omar Haddad",
            "Lena Petrova",
            "Raj Malhotra",
            "Chloe Martin",
            "Diego Alvarez",
            "Yuki Tanaka",
            "Nora Lindqvist",
        ],
    ),
    (
        "demo location",
        "the {s} team demo moved to the {v} office",
        "Where is the {s} team demo now?",
        ["Lisbon", "Tallinn", "Porto", "Krakow", "Ghent", "Bergen", "Valencia", "Utrecht"],
    ),
    (
        "release codename",
        "the next {s} release will be called {v}",
        "What did we say the next {s} release is called?",
        ["Bluebird", "Sandpiper", "Kestrel", "Heron", "Magpie", "Plover", "Starling", "Wren"],
    ),
]
NOISE_REPLY = [
    "The build must pass before we merge; I checked /srv/app/{s}/config.yaml and it has 42 keys.",
    "We should pin the version to 3.{n}.1 and the tests must run under 120 s.",
    "I edited src/{s}/handlers.py line {n}; the 17 failing cases must be fixed next.",
    "Timeout was 30 s, now 45 s; the {s} job must never exceed 2048 MB.",
    "Decided: keep retries at {n} and log to /var/log/{s}/worker.log.",
]
NOISE_LOG = [
    "2024-05-01 12:{m:02d}:{sec:02d} INFO {s}-worker-{k} processed batch {n} in {t} ms",
    "2024-05-01 12:{m:02d}:{sec:02d} WARN {s}: config /etc/{s}/limits.toml must be reloaded",
    "2024-05-01 12:{m:02d}:{sec:02d} ERROR {s}-worker-{k} timeout after {t} ms on /srv/{s}/q{n}",
    "2024-05-01 12:{m:02d}:{sec:02d} INFO request {n} took {t} ms, limit must stay under 500 ms",
]
ASKS = [
    "Now run the {s} tests again and fix what fails; the suite must pass.",
    "Check the logs under /var/log/{s}/ for errors from the last 24 hours.",
    "Bump the {s} timeout to {n} s and rerun the job.",
    "Look at src/{s}/handlers.py and tell me why the retries are at {n}.",
]


@dataclass(frozen=True)
class RelevanceCase:
    messages: list[BaseMessage]
    answer: str
    """The value the last user message asks for."""
    where: str  # "assistant" or "tool"


def _log(rng: random.Random, lines: int) -> list[str]:
    out = []
    for i in range(lines):
        out.append(
            rng.choice(NOISE_LOG).format(
                m=i // 60 % 60,
                sec=i % 60,
                s=rng.choice(SUBJECTS),
                k=rng.randint(1, 9),
                n=rng.randint(10, 9999),
                t=rng.randint(1, 900),
            )
        )
    return out


def relevance_case(seed: int, rounds: int = 44) -> RelevanceCase:
    """One transcript: `rounds` agent rounds, look-alike facts early, a question at the end."""
    rng = random.Random(seed)
    _, says, asks, values = rng.choice(ATTRIBUTES)
    subjects = rng.sample(SUBJECTS, 5)
    picked = rng.sample(values, len(subjects))
    facts = [says.format(s=s, v=v) for s, v in zip(subjects, picked, strict=True)]
    target = rng.randrange(len(subjects))
    # where each fact goes: the first rounds, half in replies, half inside large tool output
    places = {r: i for i, r in enumerate(rng.sample(range(1, max(7, rounds // 4)), len(facts)))}
    where = {i: rng.choice(["assistant", "tool"]) for i in range(len(facts))}
    where[target] = ("assistant", "tool")[seed % 2]  # as many answers in replies as in tools
    messages: list[BaseMessage] = [
        SystemMessage("You are an operations agent for a large service fleet.", id="system")
    ]
    calls = 0
    for r in range(rounds):
        s = rng.choice(SUBJECTS)
        messages.append(
            HumanMessage(rng.choice(ASKS).format(s=s, n=rng.randint(2, 99)), id=f"u{r}")
        )
        fact = places.get(r)
        for step in range(rng.choice([1, 2, 2, 3])):
            call = f"call{calls}"
            calls += 1
            messages.append(
                AIMessage(
                    "Let me check; the config must be read first.",
                    tool_calls=[
                        {
                            "name": "run_shell",
                            "args": {"cmd": f"tail -n 300 /var/log/{s}/app.log"},
                            "id": call,
                        }
                    ],
                    id=f"a{r}.{step}",
                )
            )
            planting = fact is not None and where[fact] == "tool" and step == 0
            lines = _log(rng, rng.choice([120, 300] if planting else [6, 10, 16, 30, 120]))
            if planting:
                sentence = f"ops note: {facts[fact]}, per the thread with finance."
                lines.insert(rng.randint(len(lines) // 4, 3 * len(lines) // 4), sentence)
            messages.append(
                ToolMessage("\n".join(lines), tool_call_id=call, name="run_shell", id=f"t{call}")
            )
        reply = " ".join(
            rng.choice(NOISE_REPLY).format(s=rng.choice(SUBJECTS), n=rng.randint(2, 999))
            for _ in range(rng.randint(4, 9))
        )
        if fact is not None and where[fact] == "assistant":
            text = facts[fact]
            reply = f"{reply} Also, from the email you forwarded: {text[0].upper()}{text[1:]}."
        messages.append(AIMessage(reply, id=f"r{r}"))
    question = asks.format(s=subjects[target])
    messages.append(HumanMessage(question, id="last"))
    return RelevanceCase(messages, picked[target], where[target])
