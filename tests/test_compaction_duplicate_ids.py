"""Compaction of histories where two messages share an id.

`add_messages` merges messages by id, so a graph with the default reducer never holds
two with one id; a graph whose messages reducer is `operator.add` (which LangGraph
allows) appends them. Compaction then works by position, not by id: each message is a
message of its own, kept or dropped (the record names both by the shared id), and the
invariants of `test_compaction_invariants` hold as for any history. What relevance
selection and `search_history` look up goes by tool call id, or by id and text.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_ctx.context.compaction import (
    CompactionRecord,
    RelevanceSelection,
    compact_messages,
    search_messages,
)
from langgraph_ctx.context.content import content_text

from .test_compaction_invariants import check_invariants, strategies

NO_ID_CALL: dict[str, Any] = {"name": "search", "args": {}, "id": None, "type": "tool_call"}


def shared_id_history() -> list[BaseMessage]:
    """The shape the property test found (and lost): `n7` twice, a message between.

    Both `n7` are assistant messages whose only tool call has no id (the repair strips
    the call and sends `n7~repaired`); the old invariant checker looked messages up by
    id, took the second `n7` for the first, and reported the order as broken.
    """
    return [
        HumanMessage("Please look at the failing test in tests/test_api_3.py.", id="u0"),
        AIMessage("trying", tool_calls=[NO_ID_CALL], id="n7"),
        AIMessage("Decided: use PostgreSQL 16.2 for the store.", id="r1"),
        HumanMessage("Can you explain what happened there?", id="u2"),
        AIMessage("trying", tool_calls=[NO_ID_CALL], id="n7"),
        HumanMessage("We must keep the p95 latency under 300 ms.", id="u3"),
    ]


@pytest.mark.parametrize(("label", "make"), strategies(), ids=[s[0] for s in strategies()])
@pytest.mark.parametrize("share", [0.3, 0.6, 1.1])
def test_a_shared_id_keeps_the_invariants_for_every_strategy(
    label: str, make: Any, share: float
) -> None:
    history = shared_id_history()
    max_tokens = max(20, int(count_tokens_approximately(history) * share))
    out, record = compact_messages(
        history, max_tokens=max_tokens, strategy=make(), token_counter="approximate"
    )
    check_invariants(history, out, record, max_tokens)
    # both n7 are accounted for, each once: kept or dropped
    assert Counter([*record.kept, *record.dropped_ids()])["n7"] == 2
    if share > 1:  # everything fits: both are sent, each where it was
        assert [m.id for m in out] == ["u0", "n7~repaired", "r1", "u2", "n7~repaired", "u3"]


def test_the_old_checker_misread_a_shared_id() -> None:
    """What failed before: an order check that maps ids to positions, not messages."""
    history = shared_id_history()
    out, _ = compact_messages(history, max_tokens=10_000, token_counter="approximate")
    by_id = {m.id: i for i, m in enumerate(history)}  # the second n7 wins
    positions = [by_id[(m.id or "").removesuffix("~repaired")] for m in out]
    assert positions != sorted(positions)  # ... so the old check failed
    assert [m.content for m in out] == [m.content for m in history]  # yet nothing moved


def test_repeated_messages_are_each_accounted_for() -> None:
    """`operator.add` given a message again: the same object twice in the history."""
    call = {"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}
    asked = HumanMessage("Find the config.", id="u1")
    caller = AIMessage("", tool_calls=[call], id="a1")
    result = ToolMessage("/srv/app/conf/settings-1.yaml", tool_call_id="c1", id="t1")
    done = AIMessage("Found it.", id="r1")
    # call and result repeated together: each call is answered by the result after it
    twice = [asked, caller, result, caller, result, done, asked]
    # the call repeated alone: the one result answers the first, the second is stripped
    # (and, with no text left, dropped); a result repeated alone is an orphan
    call_again = [asked, caller, result, caller, done, asked]
    result_again = [asked, caller, result, result, done, asked]
    cases = [
        (twice, ["u1", "a1", "t1", "a1", "t1", "r1", "u1"], set()),
        (call_again, ["u1", "a1", "t1", "r1", "u1"], {"only unanswered or malformed tool calls"}),
        (
            result_again,
            ["u1", "a1", "t1", "r1", "u1"],
            {"orphan tool result (no matching tool call)"},
        ),
    ]
    for history, sent, reasons in cases:
        for label, make in strategies():
            out, record = compact_messages(
                history, max_tokens=10_000, strategy=make(), token_counter="approximate"
            )
            check_invariants(history, out, record, 10_000)
            assert [m.id for m in out] == sent, label
            assert {d.reason for d in record.dropped} == reasons, label
            assert len(record.kept) + len(record.dropped) == len(history), label


def big_result(worker: str, note: str) -> str:
    lines = [
        f"2024-05-01 12:00:{i % 60:02d} INFO {worker}-worker processed batch {i} in "
        f"{i * 13 % 900} ms"
        for i in range(200)
    ]
    lines.insert(100, note)
    return "\n".join(lines)


def test_query_previews_find_their_result_when_two_results_share_an_id() -> None:
    """Relevance selection rebuilds a preview from its own original, not the first with its id.

    It looked the result up by message id: with both results named `t`, the second
    result's preview was never rebuilt for the request (and the first could be rebuilt
    with the second's size in its header).
    """
    calls = [
        {"name": "run", "args": {"cmd": "a"}, "id": "c1", "type": "tool_call"},
        {"name": "run", "args": {"cmd": "b"}, "id": "c2", "type": "tool_call"},
    ]
    history: list[BaseMessage] = [
        HumanMessage("Check the two workers.", id="u1"),
        AIMessage("", tool_calls=calls, id="a1"),
        ToolMessage(big_result("alpha", "note: alpha is fine"), tool_call_id="c1", id="t"),
        ToolMessage(
            big_result("beta", "ERROR: zebra quota exceeded on shard 9"),
            tool_call_id="c2",
            id="t",
        ),
        AIMessage("Both ran.", id="r1"),
    ]
    for k in range(12):
        history += [
            HumanMessage(f"Filler question {k} about lunch plans and the weather. " * 3),
            AIMessage(f"Filler answer {k}: sandwiches and sunshine. " * 3),
        ]
    history.append(HumanMessage("What did the zebra quota error say?", id="u2"))

    def previews(out: list[BaseMessage]) -> dict[str, str]:
        return {m.tool_call_id: content_text(m.content) for m in out if isinstance(m, ToolMessage)}

    out, record = compact_messages(
        history, max_tokens=1_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    shown = previews(out)
    assert set(shown) == {"c1", "c2"}, "the relevant tool group is kept"
    assert "zebra quota exceeded" in shown["c2"]
    assert "tokens=3376" in shown["c1"] and "tokens=3331" in shown["c2"]
    by_call = {o.tool_call_id: o for o in record.offloaded}
    assert by_call["c2"].preview_tokens < by_call["c1"].preview_tokens  # c2's was rebuilt
    # the same history with distinct ids sends the same
    renamed = [
        m.model_copy(update={"id": f"t-{m.tool_call_id}"}) if isinstance(m, ToolMessage) else m
        for m in history
    ]
    same, _ = compact_messages(
        renamed, max_tokens=1_000, strategy=RelevanceSelection(), token_counter="approximate"
    )
    assert previews(same) == shown
    check_invariants(history, out, record, 1_000)
    assert CompactionRecord.model_validate_json(record.model_dump_json()) == record


@pytest.mark.parametrize("shared_id", ["a", None], ids=["one-id", "no-ids"])
def test_search_ranks_a_hidden_message_first_though_a_shown_one_has_its_id(
    shared_id: str | None,
) -> None:
    """What the view shows is told by id and text: a shared id (or none) says too little."""
    hidden = AIMessage("The vendor contact for billing is Hana Kim.", id=shared_id)
    shown = AIMessage("Billing vendor contact, billing vendor contact: none yet.", id=shared_id)
    history: list[BaseMessage] = [
        HumanMessage("Who handles billing?", id="u1"),
        hidden,
        HumanMessage("And now?", id="u2"),
        shown,
        HumanMessage("Who is the billing vendor contact?", id="u3"),
    ]
    hits = search_messages(history, "billing vendor contact")
    assert [h.text for h in hits][:2] == [shown.content, hidden.content]  # by score
    view = history[2:]  # compaction left the first round out
    hits = search_messages(history, "billing vendor contact", view=view)
    assert hits[0].text == hidden.content  # what the model cannot see comes first
