"""System prompts for chat / agent / run: composition, parts from files, the prompt node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import START, StateGraph

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import SUMMARY_MARKER
from langgraph_ctx.context.prompt import (
    DEFAULT_POST_RUN_PROTOCOL,
    DEFAULT_RUN_DIRECTIVE,
    PROMPT_FILES,
    PromptParts,
    RunContext,
    compose_system_prompt,
    is_system_prompt_message,
    model_input,
    prompt_sections,
    system_prompt_message,
)
from langgraph_ctx.errors import PromptPartError
from langgraph_ctx.nodes.prompt import SystemPromptNode
from langgraph_ctx.nodes.state import ContextState
from langgraph_ctx.testing import StreamingScript

PERSONA = "You are Ada, a careful data engineer."
PARTS = PromptParts(persona=PERSONA)
ACTIVE = {
    "workflow_id": "etl",
    "run_id": "run-7",
    "goal": "load the sales data",
    "step": {
        "id": "load",
        "name": "Load CSV",
        "brief": "Load /data/sales.csv into the staging table.",
        "context": {"path": "/data/sales.csv", "rows": 1200},
        "index": 2,
        "total": 4,
    },
}


def banner(mode: str) -> str:
    return (
        f"MODE\n- active: {mode}\n"
        "- note: history may include other modes; follow current instructions."
    )


# -- composition ------------------------------------------------------------------------------


def test_persona_is_absent_in_chat_and_present_in_agent_and_run() -> None:
    assert PERSONA not in compose_system_prompt("chat", PARTS)
    assert PERSONA in compose_system_prompt("agent", PARTS)
    assert PERSONA in compose_system_prompt("run", PARTS, run=ACTIVE)
    assert PERSONA in compose_system_prompt("run", PARTS, run={"status": "completed"})


@pytest.mark.parametrize("mode", ["chat", "agent", "run"])
def test_every_mode_has_base_rules_tool_policy_and_its_banner(mode: str) -> None:
    text = compose_system_prompt(mode, PARTS)  # type: ignore[arg-type]
    assert PARTS.base_rules(mode) in text  # type: ignore[arg-type]
    assert PARTS.tool_policy in text
    assert banner(mode) in text
    for other in {"chat", "agent", "run"} - {mode}:
        assert f"- active: {other}" not in text


def test_sections_come_in_order() -> None:
    names = [s.name for s in prompt_sections("run", PARTS, run=ACTIVE)]
    assert names == [
        "base_rules",
        "tool_policy",
        "persona",
        "mode_banner",
        "run_directive",
        "node_brief",
    ]
    assert [s.name for s in prompt_sections("chat", PARTS)] == [
        "base_rules",
        "tool_policy",
        "mode_banner",
    ]


def test_run_mode_with_an_active_step_has_run_directive_and_node_brief() -> None:
    text = compose_system_prompt("run", PARTS, run=ACTIVE)
    directive = text.split("RUN_DIRECTIVE\n", 1)[1].split("\n\nNODE_BRIEF\n", 1)[0]
    assert "- workflow: etl" in directive and "- run: run-7" in directive
    assert "- status: active" in directive and "- goal: load the sales data" in directive
    assert DEFAULT_RUN_DIRECTIVE in directive
    assert "POST_RUN_PROTOCOL" not in text
    brief = text.split("\n\nNODE_BRIEF\n", 1)[1]
    assert "- step: Load CSV (id load, step 2 of 4)" in brief
    assert "- brief: Load /data/sales.csv into the staging table." in brief
    assert json.loads(brief.split("- step context:\n", 1)[1]) == ACTIVE["step"]["context"]
    # The node brief closes the prompt.
    assert text.endswith(brief)


def test_step_context_may_be_text() -> None:
    run = {"step": {"id": "s", "context": "Use the table from step 1."}}
    text = compose_system_prompt("run", run=run)
    assert text.endswith("- step context:\nUse the table from step 1.")


def test_post_run_profile_has_only_the_run_directive_with_its_protocol() -> None:
    # The step is still set in the state; after completion it must not be shown.
    done = {**ACTIVE, "status": "completed", "result": "1,200 rows loaded"}
    text = compose_system_prompt("run", PARTS, run=done)
    names = [s.name for s in prompt_sections("run", PARTS, run=done)]
    assert names[-1] == "run_directive" and "node_brief" not in names
    directive = text.split("RUN_DIRECTIVE\n", 1)[1]
    assert "- status: completed" in directive and "- result: 1,200 rows loaded" in directive
    assert "POST_RUN_PROTOCOL\n" + DEFAULT_POST_RUN_PROTOCOL in directive
    for step_info in ("NODE_BRIEF", "Load CSV", "id load", "/data/sales.csv", "current step"):
        assert step_info not in directive
    assert DEFAULT_RUN_DIRECTIVE not in text


def test_run_mode_between_steps_has_no_brief_and_no_post_run_protocol() -> None:
    text = compose_system_prompt("run", run={"workflow_id": "etl"})
    assert "RUN_DIRECTIVE" in text
    assert "NODE_BRIEF" not in text and "POST_RUN_PROTOCOL" not in text
    assert "none is active" in text


def test_run_information_appears_only_in_run_mode() -> None:
    for mode in ("chat", "agent"):
        text = compose_system_prompt(mode, PARTS, run=ACTIVE)  # type: ignore[arg-type]
        assert "RUN_DIRECTIVE" not in text and "NODE_BRIEF" not in text


def test_composition_is_deterministic_and_the_message_id_follows_the_text() -> None:
    a = compose_system_prompt("run", PARTS, run=ACTIVE)
    assert a == compose_system_prompt("run", PARTS, run=RunContext.model_validate(ACTIVE))
    b = compose_system_prompt("agent", PARTS)
    assert system_prompt_message(a).id == system_prompt_message(a).id
    assert system_prompt_message(a).id != system_prompt_message(b).id
    assert is_system_prompt_message(system_prompt_message(a))
    assert not is_system_prompt_message(SystemMessage(a))


def test_bad_modes_and_run_contexts_are_clear_errors() -> None:
    with pytest.raises(PromptPartError, match="unknown mode 'debug'"):
        compose_system_prompt("debug")  # type: ignore[arg-type]
    with pytest.raises(PromptPartError, match="invalid run_context"):
        compose_system_prompt("run", run={"status": "paused"})
    with pytest.raises(PromptPartError, match="invalid run_context"):
        compose_system_prompt("run", run={"stpe": {"id": "x"}})  # a typo is not ignored


# -- parts from files -------------------------------------------------------------------------


def test_parts_come_from_markdown_files(tmp_path: Path) -> None:
    (tmp_path / "persona.md").write_text("# Persona\nYou are Bo, a pirate.\n")
    (tmp_path / "system-tool-policy.md").write_text("TOOL POLICY\n- Never call tools.\n")
    (tmp_path / "system-base-rules-run.md").write_text("Run rules from a file.")
    parts = PromptParts.from_directory(tmp_path, chat_rules="Chat rules from a string.")
    assert parts.persona == "# Persona\nYou are Bo, a pirate."
    assert parts.tool_policy == "TOOL POLICY\n- Never call tools."
    assert parts.run_rules == "Run rules from a file."
    assert parts.chat_rules == "Chat rules from a string."
    assert parts.agent_rules == PromptParts().agent_rules  # no file: the default
    text = compose_system_prompt("run", parts)
    assert text.startswith("Run rules from a file.\n\nTOOL POLICY\n- Never call tools.")
    assert "You are Bo, a pirate." in text
    # A Path given directly is read as well; a str is the text itself.
    assert PromptParts(persona=tmp_path / "persona.md").persona == parts.persona
    assert PromptParts(persona="persona.md").persona == "persona.md"
    assert set(PROMPT_FILES) <= set(PromptParts.model_fields)


def test_an_unreadable_part_names_the_part_and_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.md"
    with pytest.raises(PromptPartError, match=r"prompt part 'persona': cannot read .*nope\.md"):
        PromptParts(persona=missing)
    with pytest.raises(PromptPartError, match="does not exist"):
        PromptParts.from_directory(tmp_path / "no-such-dir")


# -- what the model is sent -------------------------------------------------------------------


def test_model_input_puts_the_prompt_then_the_summary_then_the_conversation() -> None:
    own = SystemMessage("You keep answers short.", id="own")
    summary = SystemMessage(
        "CONVERSATION_SUMMARY (covers 8 earlier messages)\nUser intent: plan a garden",
        id="sum",
        additional_kwargs={SUMMARY_MARKER[0]: SUMMARY_MARKER[1]},
    )
    stale = SystemMessage("You are a pirate.", id="stale")  # a historical system message
    old_prompt = system_prompt_message("the previous composed prompt")
    history = [
        old_prompt,
        own,
        HumanMessage("hi", id="h1"),
        AIMessage("hello", id="a1"),
        stale,
        summary,
        HumanMessage("more", id="h2"),
    ]
    snapshot = [m.model_copy(deep=True) for m in history]
    sent = model_input("NEW PROMPT", history)
    assert [m.id for m in sent[1:]] == ["own", "sum", "h1", "a1", "h2"]
    assert sent[0].content == "NEW PROMPT" and is_system_prompt_message(sent[0])
    assert history == snapshot  # nothing changed in place
    assert [m.id for m in model_input(None, history)] == ["own", "sum", "h1", "a1", "h2"]
    # A summary-class message without the mark is recognised by its first word.
    plain = SystemMessage("SUMMARY: the user wants X", id="plain")
    assert [m.id for m in model_input("P", [HumanMessage("q", id="q"), plain])][1:] == [
        "plain",
        "q",
    ]


# -- the node in a graph ----------------------------------------------------------------------


def prompt_graph(saver: JsonlSaver, model: StreamingScript):
    def call_model(state: ContextState) -> dict:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    builder = StateGraph(ContextState)
    builder.add_node("prompt", SystemPromptNode(PARTS))
    builder.add_node("model", call_model)
    builder.add_edge(START, "prompt")
    builder.add_edge("prompt", "model")
    return builder.compile(checkpointer=saver)


def test_mode_switch_changes_only_the_system_prefix_and_keeps_history(saver: JsonlSaver) -> None:
    model = StreamingScript(script=["one", "two", "three", "four"])
    graph = prompt_graph(saver, model)
    config = {"configurable": {"thread_id": "modes"}}
    graph.invoke({"messages": [("user", "a")]}, config)  # default: chat
    graph.invoke({"messages": [("user", "b")], "mode": "agent"}, config)
    graph.invoke({"messages": [("user", "c")], "mode": "run", "run_context": ACTIVE}, config)
    state = graph.invoke({"messages": [("user", "d")], "mode": "chat"}, config)

    expected = ["a", "one", "b", "two", "c", "three", "d", "four"]
    assert [m.content for m in state["messages"]] == expected
    assert not any(isinstance(m, SystemMessage) for m in state["messages"])
    # Each request: the composed prompt of its mode, then the whole history so far.
    for call, mode in zip(model.received, ["chat", "agent", "run", "chat"], strict=True):
        assert banner(mode) in call[0].content
        assert (PERSONA in call[0].content) is (mode != "chat")
        assert ("NODE_BRIEF" in call[0].content) is (mode == "run")
        assert [m.type for m in call].count("system") == 1
        assert [m.content for m in call[1:]] == expected[: len(call) - 1]
    assert state["system_prompt"] == compose_system_prompt("chat", PARTS)

    # The thread file holds every message of the history, and a fresh saver reads them back.
    lines = [json.loads(line) for line in Path(saver.path("modes")).read_text().splitlines()]
    stored = [line["msg"] for line in lines if line["t"] == "msg" and "msg" in line]
    # (background puts may land in either order; the file holds each message once)
    assert sorted(m["content"] for m in stored if m["type"] != "system") == sorted(expected)
    again = prompt_graph(JsonlSaver(saver.storage.root), model).get_state(config)
    assert [m.content for m in again.values["messages"]] == expected
    assert again.values["mode"] == "chat"


async def test_the_node_runs_async_too(saver: JsonlSaver) -> None:
    model = StreamingScript(script=["fine"])
    graph = prompt_graph(saver, model)
    state = await graph.ainvoke(
        {"messages": [("user", "go")], "mode": "run", "run_context": ACTIVE},
        {"configurable": {"thread_id": "async"}},
    )
    assert state["llm_input_messages"][0].content == compose_system_prompt("run", PARTS, run=ACTIVE)
    assert state["messages"][-1].content == "fine"


def test_the_prompt_is_written_to_the_state_only_when_it_changes() -> None:
    node = SystemPromptNode(PARTS, mode="agent")
    first = node.invoke({"messages": [("user", "hi")]})
    assert first["system_prompt"] == compose_system_prompt("agent", PARTS)
    again = node.invoke({"messages": [("user", "hi")], "system_prompt": first["system_prompt"]})
    assert "system_prompt" not in again
    assert again["llm_input_messages"][0].content == first["system_prompt"]
