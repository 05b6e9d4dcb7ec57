"""The pipeline hook's shortcuts send what the full computation sends (issue 13's timing).

While compaction only appends to its view, the pipeline counts the request without its
messages (system prompt and tools, kept between calls) instead of tallying the whole
history: `ContextPipeline._count`. These tests run a `create_agent` tool agent (large
tool results, the "fast" preset, compaction firing again and again) once with the
shortcuts and once with every call counted in full, and compare what the model received,
call by call; a changed prompt, changed tools, an edited history and a cold reopen of the
thread must all give the request the full computation gives.
"""

from __future__ import annotations

import random
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
from langchain_core.tools import tool

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.compaction import conversation as conversation_module
from langgraph_ctx.context.compaction import previews, relevance, signals
from langgraph_ctx.context.compaction.relevance import message_index
from langgraph_ctx.nodes.compaction import CompactionNode
from langgraph_ctx.nodes.pipeline import ContextPipeline, context_pipeline
from langgraph_ctx.testing import ScriptedChatModel

VOCABULARY = [
    "museum",
    "train",
    "hotel",
    "dinner",
    "budget",
    "error",
    "deploy",
    "schema",
    "migration",
    "invoice",
    "weather",
    "replica",
    "release",
    "report",
    "tag",
    "path",
    "value",
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
]


def text_of(seed: int, size: int) -> str:
    """Seeded lines of words, a number and now and then a path: about `size` characters."""
    rng = random.Random(seed)
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < size:
        words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(6, 30)))
        extra = f" /srv/data/{rng.randint(1, 99)}.csv" if rng.random() < 0.2 else ""
        lines.append(f"{words} {rng.randint(1, 99999)}{extra}")
    return "\n".join(lines)


@tool
def fetch(query: str, kb: int) -> str:
    """Fetch what is known about `query` (about `kb` kilobytes)."""
    return text_of(zlib.crc32(query.encode()) % 1000 + kb, kb * 1000)


@tool
def note(text: str) -> str:
    """Write a note."""
    return "noted"


def planned(steps: list[Any], offset: int = 0) -> ScriptedChatModel:
    """A model that calls `fetch` with each step's size (``"answer"``: it answers), its
    call ``i`` numbered from `offset` (a thread continued by a new agent); it records
    what it receives."""
    replies = []
    for i, step in enumerate(steps, offset):
        if step == "answer":
            replies.append(AIMessage(f"Answer {i}: " + text_of(i, 600), id=f"ai-{i}"))
        else:
            call = {"name": "fetch", "args": {"query": f"q{i}", "kb": step}, "id": f"call_{i}"}
            replies.append(AIMessage("", tool_calls=[{**call, "type": "tool_call"}], id=f"ai-{i}"))
    return ScriptedChatModel(script=replies)


TURNS = [[3, "answer"], [12, 2, "answer"], [25, "answer"], [6, 9, 4, "answer"]] * 3


def sent(received: list[list[BaseMessage]]) -> list[list[dict[str, Any]]]:
    """What the model received, without the ids the host makes up (uuids)."""
    out = []
    for messages in received:
        dumped = messages_to_dict(messages)
        for d in dumped:
            d["data"].pop("id", None)
        out.append(dumped)
    return out


def run(
    root: Path,
    turns: list[list[Any]],
    *,
    full: bool,
    monkeypatch: pytest.MonkeyPatch,
    inputs: dict[int, dict[str, Any]] | None = None,
    tools: Sequence[Any] = (fetch,),
    thread: str = "t",
    start: int = 0,
    offset: int = 0,
) -> tuple[ScriptedChatModel, list[Any]]:
    """Run `turns` through a fresh agent; `full`: count every call in full."""
    from langchain.agents import create_agent

    with monkeypatch.context() as patch:
        if full:
            patch.setattr(ContextPipeline, "_continues_view", lambda self, state, request: False)
        model = planned([s for turn in turns for s in turn], offset)
        pipeline = context_pipeline("fast", model="gpt-4o", tools=list(tools), mode="agent")
        agent = create_agent(
            model, list(tools), middleware=[pipeline.middleware()], checkpointer=JsonlSaver(root)
        )
        config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 50}
        usages = []
        for t, _ in enumerate(turns, start):
            extra = (inputs or {}).get(t, {})
            state = agent.invoke(
                {"messages": [HumanMessage(f"Turn {t}: {text_of(t, 200)}")], **extra}, config
            )
            usages.append(state["context_usage"])
        return model, usages


def test_the_shortcut_sends_what_a_full_count_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[int] = []
    overhead = ContextPipeline._count_overhead

    def spy(self: ContextPipeline, request: Any) -> Any:
        result = overhead(self, request)
        taken.append(result[1])
        return result

    monkeypatch.setattr(ContextPipeline, "_count_overhead", spy)
    fast, fast_usage = run(tmp_path / "fast", TURNS, full=False, monkeypatch=monkeypatch)
    assert len(taken) > len(fast.received) // 2  # the shortcut is the usual case
    full, full_usage = run(tmp_path / "full", TURNS, full=True, monkeypatch=monkeypatch)
    assert sent(fast.received) == sent(full.received)
    assert fast_usage == full_usage


@pytest.mark.parametrize(
    "inputs",
    [
        {5: {"mode": "chat"}, 8: {"mode": "agent"}},  # the composed prompt changes
        {
            6: {
                "mode": "run",
                "run_context": {
                    "workflow_id": "w",
                    "run_id": "r",
                    "step": {"id": "s", "brief": "Sum it up."},
                },
            }
        },
    ],
)
def test_a_changed_prompt_is_counted_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inputs: dict[int, dict[str, Any]]
) -> None:
    fast, fast_usage = run(
        tmp_path / "fast", TURNS, full=False, monkeypatch=monkeypatch, inputs=inputs
    )
    full, full_usage = run(
        tmp_path / "full", TURNS, full=True, monkeypatch=monkeypatch, inputs=inputs
    )
    assert sent(fast.received) == sent(full.received)
    assert fast_usage == full_usage
    prompts = {m[0].content for m in fast.received}
    assert len(prompts) >= 2  # the prompt did change


def clear_module_caches() -> None:
    """What a new process starts without: the stand-ins, indexes and weights built so far."""
    previews.preview_text.cache_clear()
    signals.line_weights.cache_clear()
    relevance.message_index.cache_clear()
    relevance._QUERY_PREVIEWS.clear()
    conversation_module._PREVIEWS.clear()


def test_a_cold_reopen_sends_what_the_warm_hook_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, rest = TURNS[:7], TURNS[7:]
    calls = sum(len(turn) for turn in first)
    run(tmp_path / "warm", first, full=False, monkeypatch=monkeypatch)
    shutil.copytree(tmp_path / "warm", tmp_path / "cold")
    # warm: the same process goes on (its pipeline is new, the module caches are not)
    warm, warm_usage = run(
        tmp_path / "warm", rest, full=False, monkeypatch=monkeypatch, start=7, offset=calls
    )
    clear_module_caches()
    cold, cold_usage = run(
        tmp_path / "cold", rest, full=False, monkeypatch=monkeypatch, start=7, offset=calls
    )
    assert sent(warm.received) == sent(cold.received)
    assert warm_usage == cold_usage
    # and both are what counting everything in full sends
    full, _ = run(tmp_path / "full", TURNS, full=True, monkeypatch=monkeypatch)
    assert sent(cold.received) == sent(full.received[calls:])


def test_other_tools_are_counted_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept count of the prompt and tools belongs to the tool objects it counted."""
    pipeline = context_pipeline("fast", model="gpt-4o", mode="agent")
    state: dict[str, Any] = {"messages": [HumanMessage("hi", id="h1")]}
    request = pipeline._read(pipeline.keys.read(state), [fetch], None)
    one = pipeline._count_overhead(request)
    assert pipeline._count_overhead(request) == one
    request.tools = [fetch, note]
    two = pipeline._count_overhead(request)
    assert two[1] > one[1]
    assert (
        two[0].breakdown["tools"]
        == pipeline.budget.measure([], system_prompt=None, tools=[fetch, note]).breakdown["tools"]
    )
    request.counted_prompt = (request.counted_prompt or "") + " And be brief."
    assert pipeline._count_overhead(request)[1] > two[1]


def test_continues_view_only_while_the_cursor_holds() -> None:
    node = CompactionNode(trigger=0.8, target=0.5)
    messages = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]
    cursor = {"last_id": "2", "seen": 2, "messages_tokens": 20, "view_tokens": 12}
    view = [AIMessage("b", id="2")]
    assert node.continues_view(messages, cursor, view)
    assert not node.continues_view(messages, cursor, [])  # no view
    assert not node.continues_view(messages, {**cursor, "view_tokens": None}, view)
    assert not node.continues_view(messages, {**cursor, "messages_tokens": None}, view)
    edited = [HumanMessage("a", id="1"), AIMessage("B", id="2x"), HumanMessage("c", id="3")]
    assert not node.continues_view(edited, cursor, view)  # the history changed under it
    assert not node.continues_view(messages[:1], cursor, view)  # reverted
    assert not CompactionNode(rewrite_messages=True).continues_view(messages, cursor, view)


def test_postings_filled_at_once_are_the_postings_made_one_by_one() -> None:
    for seed in range(5):
        text = text_of(seed, 3000)
        terms = ["museum", "train", "error", "nothing", "pari", "migrat", "hotel"]
        one = message_index.__wrapped__(text).postings
        alone = {t: one[t] for t in terms}
        many = message_index.__wrapped__(text).postings
        many.fill(terms)
        assert {t: dict.get(many, t, many[t]) for t in terms} == alone
        assert [t in many for t in terms] == [t in one for t in terms]


def reference_weight(line: str, words: list[str]) -> float:
    """`signals._weight` as it read before its shortcut (a set of the words every line)."""
    import itertools

    vocabulary = set(words)
    if not vocabulary.isdisjoint(signals._PAIR_STARTS):
        vocabulary.update(
            f"{a}_{b}" for a, b in itertools.pairwise(words) if a in signals._PAIR_STARTS
        )
    weight = sum(
        value for listed, value in signals._WORD_WEIGHTS if not vocabulary.isdisjoint(listed)
    )
    if signals._has_path(line):
        weight += signals._PATH_WEIGHT
    if "```" in line:
        weight += signals._CODE_WEIGHT
    if signals._NUMBER_START.search(line):
        weight += signals._NUMBER_WEIGHT
    return weight


def test_line_weights_shortcut_weighs_every_line_as_before() -> None:
    rng = random.Random(7)
    vocabulary = [
        *VOCABULARY,
        "must",
        "do",
        "not",
        "we",
        "will",
        "we'll",
        "going",
        "with",
        "'must",
        "failed",
        "decided",
        "don't",
        "can't",
        "```",
        "/etc/app.yaml",
        "x.py",
    ]
    for _ in range(300):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 12))]
        line = " ".join(words) + rng.choice(["", " 42", " 3 ms", " v1.2"])
        lowered = line.lower().translate(signals._LETTERS)
        listed = [w for w in (w.lstrip("'") for w in lowered.split()) if w]
        assert signals._weight(line, listed) == reference_weight(line, listed), line


def test_a_large_new_result_is_counted_only_past_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the view is active, a new tool result is tokenized only until its count
    passes the offload threshold: its preview states an estimate (``tokens=~N``, near
    the real count), what is sent is counted exactly, and no text of the size of a
    large result reaches the tokenizer in those steps."""
    from langgraph_ctx import count_tokens
    from langgraph_ctx.context.tokens.chat_format import Encoder

    counted: list[int] = []
    bpe = Encoder.bpe

    def spy(self: Encoder, text: str) -> int:
        counted.append(len(text))
        return bpe(self, text)

    originals = {}
    estimated = 0
    model, _ = run(tmp_path / "t", TURNS, full=False, monkeypatch=monkeypatch)
    for request in model.received:
        for m in request:
            if m.type == "ai":
                for call in m.tool_calls:
                    originals[call["id"]] = fetch.invoke(call["args"])
            header = str(m.content).split("\n", 1)[0]
            if m.type == "tool" and " tokens=~" in header:
                estimated += 1
                stated = int(header.split(" tokens=~", 1)[1].split(" ", 1)[0])
                whole = count_tokens([("tool", originals[m.tool_call_id])]) - count_tokens([])
                assert abs(stated - whole) <= 0.15 * whole, (stated, whole)
    assert estimated >= 5
    # (what is sent is counted exactly: `test_the_shortcut_sends_what_a_full_count_sends`)
    # a further turn with a 25 KB result: only about a threshold's worth is tokenized
    monkeypatch.setattr(Encoder, "bpe", spy)
    run(tmp_path / "t", [[25, "answer"]], full=False, monkeypatch=monkeypatch, start=12,
        offset=len(model.received))
    assert counted and max(counted) < 10_000, max(counted)


def test_an_estimated_cursor_is_counted_again_when_the_overhead_comes_from_it() -> None:
    """A step without the caller's overhead reads it as `context_usage` minus the
    cursor's count of the messages: an estimated count is then made exact."""
    from langchain_core.messages import ToolMessage

    from langgraph_ctx import count_tokens

    node = CompactionNode(trigger=("tokens", 100_000), target=("tokens", 50_000))
    messages: list[BaseMessage] = [
        HumanMessage("find it", id="h1"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "c1"}], id="a1"),
    ]
    view = list(messages)
    exact = count_tokens(messages)
    cursor = {"last_id": "a1", "seen": 2, "messages_tokens": exact, "view_tokens": exact}
    messages.append(ToolMessage(text_of(1, 20_000), tool_call_id="c1", id="t1"))
    usage = {"used": 10, "total": 200_000, "reserved_output": 0, "model": "gpt-4o"}
    first = drive(node.compact(messages, usage=usage, cursor=cursor, view=view, summary=None,
                               overhead=50))
    written = first["compaction_cursor"]
    assert written.get("estimated") is True
    assert written["messages_tokens"] != count_tokens(messages)
    assert "tokens=~" in str(first["llm_input_messages"][-1].content)
    # the next step has no overhead of its own: the count is made again, exactly
    messages.append(AIMessage("done", id="a2"))
    second = drive(node.compact(messages, usage=usage, cursor=written,
                                view=first["llm_input_messages"], summary=None))
    assert second["compaction_cursor"]["messages_tokens"] == count_tokens(messages)
    assert "estimated" not in second["compaction_cursor"]


def drive(steps: Any) -> Any:
    from langgraph_ctx.context.model_call import drive_sync

    return drive_sync(steps)
