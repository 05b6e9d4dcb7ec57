"""Property-based tests: the invariants of compaction, for every strategy and many inputs.

The ordering validator (`testing.ordering_problems`) is written from the providers'
documented rules and shares no code with compaction, so it checks the library rather
than agreeing with it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_ctx.context.compaction import (
    RUNNING_SUMMARY_ID,
    CompactionRecord,
    CompactionStrategy,
    HybridSummary,
    KeyMessageExtraction,
    LLMSummary,
    RelevanceSelection,
    SlidingWindow,
    compact_messages,
)
from langgraph_ctx.testing import (
    ExtractiveSummaryModel,
    ScriptedChatModel,
    ordering_problems,
)

SUFFIXES = ("~preview", "~short", "~repaired")


def test_validator_catches_what_providers_reject() -> None:
    call = {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}
    ok = [
        SystemMessage("s"),
        HumanMessage("q"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("r", tool_call_id="c1"),
        AIMessage("a"),
    ]
    assert ordering_problems(ok) == []
    assert ordering_problems([HumanMessage("q"), ToolMessage("r", tool_call_id="c1")])
    assert ordering_problems([HumanMessage("q"), AIMessage("", tool_calls=[call])])
    assert ordering_problems([AIMessage("hi"), HumanMessage("q")])
    assert ordering_problems([HumanMessage("q"), SystemMessage("late"), AIMessage("a")])
    moved = [HumanMessage("q"), AIMessage("", tool_calls=[call]), HumanMessage("x")]
    assert ordering_problems([*moved, ToolMessage("r", tool_call_id="c1")])


# --------------------------------------------------------------------------------------
# Generated conversations
# --------------------------------------------------------------------------------------
SENTENCES = [
    "The config lives at /srv/app/conf/settings-{n}.yaml.",
    "We must keep the p95 latency under {n} ms.",
    "Decided: use PostgreSQL 16.{n} for the store.",
    "Please look at the failing test in tests/test_api_{n}.py.",
    "Thanks, that looks fine.",
    "Can you explain what happened there?",
    "Never touch the prod-db-{n} cluster.",
    "The budget is {n} USD per month.",
]
LOG_LINE = "2024-05-01 12:00:{s:02d} INFO worker-{w} processed batch {n} in {ms} ms"


@st.composite
def texts(draw: st.DrawFn, *, longest: int) -> str:
    count = draw(st.integers(1, longest))
    picks = draw(st.lists(st.sampled_from(SENTENCES), min_size=count, max_size=count))
    n = draw(st.integers(0, 9999))
    text = " ".join(p.format(n=n + i) for i, p in enumerate(picks))
    if draw(st.integers(0, 5)) == 0:
        text += "\n\nDetails:\n" + "\n".join(f"- item {i}: must check {i * 7}" for i in range(9))
    return text


@st.composite
def tool_outputs(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from([1, 3, 20, 120, 400]))
    seed = draw(st.integers(0, 100))
    out = [
        LOG_LINE.format(s=i % 60, w=i % 7, n=seed + i, ms=(i * 13) % 900) for i in range(lines)
    ]
    if lines > 3:
        out.insert(lines // 2, f"ERROR: disk quota exceeded on /var/data/shard-{seed}")
    return "\n".join(out)


@st.composite
def conversations(draw: st.DrawFn, *, messy: bool = False) -> list[BaseMessage]:
    ids = itertools.count()

    def nid(prefix: str) -> str:
        return f"{prefix}{next(ids)}"

    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage("You are a careful coding agent.", id=nid("sys")))
    if messy and draw(st.booleans()):
        messages.append(AIMessage("Hello! How can I help?", id=nid("greet")))
    for _ in range(draw(st.integers(1, 10))):
        messages.append(HumanMessage(draw(texts(longest=draw(st.sampled_from([2, 6, 60])))),
                                     id=nid("u")))
        if draw(st.integers(0, 8)) == 0:
            messages.append(SystemMessage("MODE\n- active: agent", id=nid("mode")))
        if draw(st.integers(0, 10)) == 0:
            messages.append(SystemMessage("SUMMARY of an earlier session: ship v2.", id=nid("s")))
        steps = draw(st.integers(0, 3))
        for _ in range(steps):
            calls = [
                {"name": "search", "args": {"q": f"q{next(ids)}"}, "id": nid("call"),
                 "type": "tool_call"}
                for _ in range(draw(st.integers(1, 3)))
            ]
            messages.append(AIMessage(draw(st.sampled_from(["", "Let me check."])),
                                      tool_calls=calls, id=nid("a")))
            for call in calls:
                messages.append(ToolMessage(draw(tool_outputs()), tool_call_id=call["id"],
                                            name="search", id=nid("t")))
        if steps == 0 or draw(st.booleans()):
            messages.append(AIMessage(draw(texts(longest=4)), id=nid("r")))
    if messy:
        messages = draw(_messed_up(messages))
    return messages


@st.composite
def _messed_up(draw: st.DrawFn, messages: list[BaseMessage]) -> list[BaseMessage]:
    """Orphan tool results, unanswered and id-less calls, results moved away, shared ids.

    Two messages with one id reach compaction when a graph's messages reducer is not
    `add_messages` (`operator.add` appends; `add_messages` would merge them): `twin`
    gives a message another one's id, `repeat` sends a message again (its tool calls
    too). They are frequent here on purpose: by chance (`n{pos}` twice) they were rare.
    """
    messages = list(messages)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(["orphan", "unanswered", "no_id", "moved", "twin", "repeat"])
        )
        pos = draw(st.integers(0, len(messages)))
        tools = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        if kind == "orphan":
            messages.insert(pos, ToolMessage("stray", tool_call_id=f"ghost{pos}", id=f"o{pos}"))
        elif kind == "unanswered" and tools:
            messages.pop(draw(st.sampled_from(tools)))
        elif kind == "no_id":
            call: dict[str, Any] = {"name": "search", "args": {}, "id": None, "type": "tool_call"}
            messages.insert(pos, AIMessage("trying", tool_calls=[call], id=f"n{pos}"))
        elif kind == "moved" and tools:
            moved = messages.pop(draw(st.sampled_from(tools)))
            messages.insert(draw(st.integers(0, len(messages))), moved)
        elif kind == "twin" and len(messages) > 1:
            source, target = draw(
                st.lists(st.integers(0, len(messages) - 1), min_size=2, max_size=2, unique=True)
            )
            messages[target] = messages[target].model_copy(update={"id": messages[source].id})
        elif kind == "repeat" and messages:
            messages.insert(pos, messages[draw(st.integers(0, len(messages) - 1))])
    return messages


# --------------------------------------------------------------------------------------
# The invariants
# --------------------------------------------------------------------------------------
def base_id(message_id: str | None) -> str | None:
    if message_id is None:
        return None
    for suffix in SUFFIXES:
        message_id = message_id.removesuffix(suffix)
    return message_id


def check_invariants(
    history: list[BaseMessage], out: list[BaseMessage], record: CompactionRecord, max_tokens: int
) -> None:
    """The invariants, stated so they hold whether or not two messages share an id.

    Ids are what tie an output message to its input message, and with a custom reducer
    (`operator.add`) two input messages can carry the same id; so a check never looks a
    message up by id alone: it matches in order, or counts.
    """
    assert ordering_problems(out) == [], ordering_problems(out)

    # The latest user message is sent, as the last user message of the request.
    humans = [m for m in history if isinstance(m, HumanMessage)]
    if humans:
        sent = [m for m in out if isinstance(m, HumanMessage)]
        assert sent and base_id(sent[-1].id) == humans[-1].id, "the latest user message was dropped"
        if sent[-1].id == humans[-1].id:
            assert sent[-1].content == humans[-1].content, "another message stood in for it"

    leading = set()
    for message in history:
        if not isinstance(message, SystemMessage):
            break
        leading.add(message.id)
    for message in out:
        if isinstance(message, SystemMessage):
            text = message.content if isinstance(message.content, str) else ""
            assert message.id in leading or text.startswith(("SUMMARY", "CONVERSATION_SUMMARY"))

    # A kept call keeps all its (answered) results, and a kept result its call: every call
    # sent is answered right after it (ordering_problems), by a result from the history.
    answers: dict[str, set[str | None]] = {}
    for m in history:
        if isinstance(m, ToolMessage):
            answers.setdefault(m.tool_call_id, set()).add(m.id)
    for m in out:
        if isinstance(m, ToolMessage):
            assert base_id(m.id) in answers.get(m.tool_call_id, set()), m

    # Order is kept (tool results that were moved by a repair aside): the user and
    # assistant messages sent are a subsequence of the history's, matched by id in order.
    body = [m for m in out if not isinstance(m, (SystemMessage, ToolMessage))]
    ids = iter([m.id for m in history])
    assert all(base_id(m.id) in ids for m in body if base_id(m.id) is not None), "order changed"

    # Every input message is accounted for, kept or dropped with a reason: each id at
    # least as many times as it occurs in the history.
    accounted = Counter([*record.kept, *record.dropped_ids()])
    wanted = Counter(m.id for m in history if m.id is not None)
    assert not wanted - accounted, wanted - accounted
    assert all(d.reason for d in record.dropped)

    assert record.tokens_after == count_tokens_approximately(out)
    assert CompactionRecord.model_validate_json(record.model_dump_json()) == record


def fixed_cost(history: list[BaseMessage]) -> int:
    """Tokens nothing can remove: leading system, summary-class and latest user messages,
    and a newest tool group ending the history (a request must end with it: its call,
    and each result as its smallest preview, about 70 tokens)."""
    humans = [m for m in history if isinstance(m, HumanMessage)]
    fixed: list[BaseMessage] = [
        m
        for m in history
        if isinstance(m, SystemMessage)
        and (m is history[0] or str(m.content).startswith("SUMMARY"))
    ]
    group = 0
    results = list(itertools.takewhile(lambda m: isinstance(m, ToolMessage), reversed(history)))
    if results and len(results) < len(history):
        call = history[-len(results) - 1]
        if isinstance(call, AIMessage) and call.tool_calls:
            group = count_tokens_approximately([call]) + 70 * len(results)
    return count_tokens_approximately([*fixed, *humans[-1:]]) + group


def strategies() -> list[tuple[str, Any]]:
    return [
        ("relevance", lambda: RelevanceSelection()),
        ("extract", lambda: KeyMessageExtraction()),
        ("window", lambda: SlidingWindow()),
        ("window-2-rounds", lambda: SlidingWindow(rounds=2)),
        ("summary", lambda: LLMSummary(ExtractiveSummaryModel(), retry_delay=0)),
        ("hybrid", lambda: HybridSummary(ExtractiveSummaryModel(), retry_delay=0)),
        (
            "summary-model-down",
            lambda: LLMSummary(
                ScriptedChatModel(script=[ConnectionError("down")]), max_retries=1, retry_delay=0
            ),
        ),
    ]


PROPERTY_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize(("label", "make"), strategies(), ids=[s[0] for s in strategies()])
@PROPERTY_SETTINGS
@given(data=st.data())
def test_invariants_hold_for_every_strategy(label: str, make: Any, data: st.DataObject) -> None:
    history = data.draw(conversations(messy=data.draw(st.booleans())))
    snapshot = [m.model_dump() for m in history]
    total = count_tokens_approximately(history)
    share = data.draw(st.sampled_from([0.02, 0.1, 0.25, 0.5, 0.75, 0.95, 1.1]))
    max_tokens = max(20, int(total * share))
    strategy: CompactionStrategy = make()

    out, record = compact_messages(
        history, max_tokens=max_tokens, strategy=strategy, token_counter="approximate"
    )

    assert [m.model_dump() for m in history] == snapshot, "the input was changed"
    check_invariants(history, out, record, max_tokens)
    if max_tokens - fixed_cost(history) >= 150:
        assert record.within_budget, (record.tokens_after, max_tokens, record.ladder)
    if label == "summary-model-down" and record.attempts:
        assert record.error and record.fallback == "extract" and not record.summary_updated
    if record.summary_updated:
        assert sum(m.id == RUNNING_SUMMARY_ID for m in out) == 1


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=conversations(messy=True), fraction=st.floats(0.05, 1.0))
def test_invariants_with_exact_token_counts(history: list[BaseMessage], fraction: float) -> None:
    from langgraph_ctx.context.tokens import count_tokens

    max_tokens = max(20, int(count_tokens(history) * fraction))
    out, record = compact_messages(history, max_tokens=max_tokens, model="gpt-4o")
    assert ordering_problems(out) == []
    assert record.tokens_after == count_tokens(out)
    if max_tokens - count_tokens(history[-1:]) >= 300 and record.ladder == []:
        assert record.within_budget


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=conversations(messy=True))
def test_everything_fits_means_nothing_is_dropped_but_repairs(history: list[BaseMessage]) -> None:
    out, record = compact_messages(
        history, max_tokens=10**7, token_counter="approximate", offload_threshold=None
    )
    assert ordering_problems(out) == []
    assert all(
        d.reason.startswith(("orphan", "historical", "before the first", "only unanswered"))
        for d in record.dropped
    ), record.dropped
