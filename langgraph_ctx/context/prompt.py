"""System prompts for chat, agent and run modes. Pure functions, no I/O after loading.

```python
from pathlib import Path
from langgraph_ctx.context.prompt import PromptParts, RunContext, compose_system_prompt

parts = PromptParts(persona="You are Ada, a careful data engineer.")
compose_system_prompt("chat", parts)        # base rules + tool policy + MODE banner, no persona
compose_system_prompt("agent", parts)       # ... + persona
compose_system_prompt("run", parts, run={"workflow_id": "etl", "status": "active",
                                         "step": {"id": "load", "brief": "Load the CSV."}})
# ... + RUN_DIRECTIVE + NODE_BRIEF; once {"status": "completed"}: RUN_DIRECTIVE with the
# post-run protocol only, no step or node information

PromptParts.from_directory(Path("prompts"))  # system-base-rules-chat.md, persona.md, ...
```

Every model call is sent the prompt composed for the *current* mode; the prompt is never
written into the conversation, so switching modes changes only the system prefix of the
next request, never the history. The sections, in order (`prompt_sections`):

1. `base_rules`: the rules of the mode (`chat_rules`, `agent_rules`, `run_rules`);
2. `tool_policy`: how to use tools;
3. `persona`: who the assistant is (agent and run modes only, never chat);
4. `mode_banner`: `MODE`, the active mode, and a note that the history may include other
   modes and the current instructions win;
5. run mode only: `run_directive` (`RUN_DIRECTIVE`) and, while a workflow step is active,
   `node_brief` (`NODE_BRIEF`, with the optional step context). Once the workflow is
   completed: only `RUN_DIRECTIVE`, carrying the post-run protocol.

The composed text is deterministic (no timestamps), so a provider's prompt cache keeps
hitting while the mode and the run step stay the same.

The running summary of compaction is not part of this text: it stays a summary-class
system message (content starting with `CONVERSATION_SUMMARY`) placed right after the
composed prompt, at the start of the conversation (`model_input`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, get_args

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from langgraph_ctx.context.active_context import is_loaded_context_message
from langgraph_ctx.context.budget import is_summary_message
from langgraph_ctx.context.compaction.conversation import is_summary_class_message
from langgraph_ctx.errors import PromptPartError

__all__ = [
    "DEFAULT_AGENT_RULES",
    "DEFAULT_CHAT_RULES",
    "DEFAULT_POST_RUN_PROTOCOL",
    "DEFAULT_RUN_DIRECTIVE",
    "DEFAULT_RUN_RULES",
    "DEFAULT_TOOL_POLICY",
    "MODES",
    "PROMPT_FILES",
    "SYSTEM_PROMPT_MARKER",
    "Mode",
    "PromptParts",
    "PromptSection",
    "RunContext",
    "WorkflowStep",
    "compose_system_prompt",
    "host_system_prompts",
    "is_system_prompt_message",
    "model_input",
    "prompt_sections",
    "read_mode",
    "read_run_context",
    "run_profile",
    "system_prompt_message",
]

Mode = Literal["chat", "agent", "run"]
MODES: Final[tuple[str, ...]] = get_args(Mode)

#: `additional_kwargs` key and value that mark the composed system prompt message.
SYSTEM_PROMPT_MARKER: Final[tuple[str, str]] = ("langgraph_ctx", "system_prompt")

# ---------------------------------------------------------------------------
# Default texts
# ---------------------------------------------------------------------------

DEFAULT_CHAT_RULES: Final[str] = """\
You are a helpful assistant in a conversation with a user.
- Answer the latest user message; use the earlier conversation as context.
- Be accurate and concise. Say so when you are unsure or do not know.
- Never invent facts, file contents, tool results or earlier messages.
- An assistant message that ends with an LLM_ERROR block was cut off by a failure. When the \
user says "continue", carry on from where that reply stops, without repeating it."""

DEFAULT_AGENT_RULES: Final[str] = """\
You are an agent working on the user's task with the tools you are given.
- Work out what the user wants, then act: use tools to get facts instead of guessing.
- After each tool result, decide the next step. Stop when the task is done and report the \
outcome, including what you could not do.
- Ask the user only when you cannot proceed without their answer.
- Never invent facts, file contents, tool results or earlier messages.
- An assistant message that ends with an LLM_ERROR block was cut off by a failure. When the \
user says "continue", carry on from where that reply stops, without repeating it."""

DEFAULT_RUN_RULES: Final[str] = """\
You are executing a workflow run, step by step, with the tools you are given.
- Follow RUN_DIRECTIVE below; it says whether a step is active and what to do.
- Keep to the current step: produce its output, then stop and report.
- Never invent facts, file contents, tool results or earlier messages.
- An assistant message that ends with an LLM_ERROR block was cut off by a failure. When told \
to "continue", carry on from where that reply stops, without repeating it."""

DEFAULT_TOOL_POLICY: Final[str] = """\
TOOL POLICY
- Use only the tools offered in this request, with the arguments their schemas describe. \
Never invent a tool or a tool result.
- Call a tool when you need facts or an action it provides; answer directly when you can.
- A tool result shown as TOOL_RESULT_PREVIEW is shortened: call \
read_tool_result(ref=...) when you need the full output.
- When a tool fails (an error result), read the error, fix the arguments or take another \
route; do not repeat the same failing call.
- When no tools are offered, answer without them."""

DEFAULT_RUN_DIRECTIVE: Final[str] = """\
- Work only on the current step described in NODE_BRIEF; do not start later steps on your own.
- Use the conversation (including messages from other modes) as context; where it differs \
from this directive, this directive wins.
- When the step's goal is met, say so plainly and give the step's output. If it cannot be \
met, say what blocks it."""

DEFAULT_POST_RUN_PROTOCOL: Final[str] = """\
- The workflow run is complete: no step is active. Do not resume, repeat or continue any \
workflow step unless the user explicitly starts a new run.
- Answer questions about the run from the conversation: its steps' outputs, tool results \
and errors.
- When the user asks for changes, say what a new run would do instead of acting as if a \
step were still active."""

DEFAULT_BANNER_NOTE: Final[str] = "history may include other modes; follow current instructions."

#: Standard file names read by `PromptParts.from_directory`, by field.
PROMPT_FILES: Final[Mapping[str, str]] = {
    "chat_rules": "system-base-rules-chat.md",
    "agent_rules": "system-base-rules-agent.md",
    "run_rules": "system-base-rules-run.md",
    "tool_policy": "system-tool-policy.md",
    "persona": "persona.md",
    "run_directive": "run-directive.md",
    "post_run_protocol": "post-run-protocol.md",
}


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


def _read_part(field: str, value: Any) -> Any:
    """A path becomes the text of that (Markdown) file; anything else is left as it is."""
    if not isinstance(value, os.PathLike):
        return value
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise PromptPartError(
            f"prompt part {field!r}: cannot read {str(path)!r} ({err.__class__.__name__}: "
            f"{err}); pass the text itself or a path to a readable UTF-8 file"
        ) from err
    return text.strip()


class PromptParts(BaseModel):
    """The texts a system prompt is composed from. Each is a string or a `Path` to a file.

    A `Path` (any `os.PathLike`) is read once, when the parts are built; a plain `str` is
    the text itself. Unset parts keep the defaults (`DEFAULT_*`); `persona` defaults to
    none.

    Example:
        ```python
        parts = PromptParts(
            persona=Path("prompts/persona.md"),         # read from a Markdown file
            tool_policy="TOOL POLICY\\n- Prefer the search tool.",
        )
        parts = PromptParts.from_directory("prompts", persona="You are Ada.")
        ```

    Raises:
        PromptPartError: a file cannot be read, or a field is not a text.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    chat_rules: str = DEFAULT_CHAT_RULES
    """Base rules of chat mode (`system-base-rules-chat.md`)."""
    agent_rules: str = DEFAULT_AGENT_RULES
    """Base rules of agent mode (`system-base-rules-agent.md`)."""
    run_rules: str = DEFAULT_RUN_RULES
    """Base rules of run mode (`system-base-rules-run.md`)."""
    tool_policy: str = DEFAULT_TOOL_POLICY
    """How to use tools, in every mode (`system-tool-policy.md`)."""
    persona: str | None = None
    """Who the assistant is; agent and run modes only (`persona.md`)."""
    run_directive: str = DEFAULT_RUN_DIRECTIVE
    """Instructions of RUN_DIRECTIVE while a workflow step is active (`run-directive.md`)."""
    post_run_protocol: str = DEFAULT_POST_RUN_PROTOCOL
    """Instructions of RUN_DIRECTIVE once the workflow is completed (`post-run-protocol.md`)."""
    banner_note: str = DEFAULT_BANNER_NOTE
    """The note of the MODE banner."""

    def __init__(self, **data: Any) -> None:
        # Files are read here, so that an unreadable one raises PromptPartError itself
        # rather than a pydantic ValidationError around it.
        super().__init__(**{field: _read_part(field, value) for field, value in data.items()})

    @field_validator("*", mode="before")
    @classmethod
    def _files(cls, value: Any, info: Any) -> Any:
        return _read_part(info.field_name, value)  # model_validate({... Path ...})

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str], **overrides: Any) -> PromptParts:
        """Parts from the standard file names in `directory` (see `PROMPT_FILES`).

        Files that do not exist keep the defaults; `overrides` (strings or paths) win.

        Example:
            ```python
            # prompts/persona.md, prompts/system-tool-policy.md, ...
            parts = PromptParts.from_directory("prompts")
            ```
        """
        root = Path(directory)
        if not root.is_dir():
            raise PromptPartError(f"prompt directory {str(root)!r} does not exist")
        found: dict[str, Any] = {
            field: root / name for field, name in PROMPT_FILES.items() if (root / name).is_file()
        }
        return cls(**{**found, **overrides})

    def base_rules(self, mode: Mode) -> str:
        """The base rules of `mode`."""
        return {"chat": self.chat_rules, "agent": self.agent_rules, "run": self.run_rules}[mode]


class WorkflowStep(BaseModel):
    """The active step of a workflow run: what NODE_BRIEF tells the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The step's (node's) id in the workflow."""
    name: str | None = None
    """A readable name."""
    brief: str | None = None
    """What the step must achieve."""
    context: str | dict[str, Any] | list[Any] | None = None
    """Optional step context: inputs, earlier outputs, constraints (text or JSON)."""
    index: int | None = Field(None, ge=1)
    """Position of the step in the workflow, from 1."""
    total: int | None = Field(None, ge=1)
    """Number of steps in the workflow."""


class RunContext(BaseModel):
    """The workflow run that run mode is executing. Put it in the state as `run_context`.

    `status="active"` with a `step`: the model works on that step (RUN_DIRECTIVE and
    NODE_BRIEF). `status="completed"`: the post-completion profile (RUN_DIRECTIVE with
    the post-run protocol; the step, if still set, is not shown).

    Example:
        ```python
        graph.invoke({"messages": [("user", "go")], "mode": "run",
                      "run_context": {"workflow_id": "etl", "run_id": "r-7",
                                      "step": {"id": "load", "brief": "Load the CSV."}}},
                     config)
        ```
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    workflow_id: str | None = None
    run_id: str | None = None
    status: Literal["active", "completed"] = "active"
    goal: str | None = None
    """What the whole workflow is for."""
    step: WorkflowStep | None = None
    """The active step (ignored once the run is completed)."""
    result: str | None = None
    """What the completed run produced (shown in the post-completion profile)."""


def read_mode(value: Any, default: Mode = "chat") -> Mode:
    """The mode in `value` (a state's `mode`), `default` when it is None or empty.

    Raises:
        PromptPartError: an unknown mode.
    """
    if value is None or value == "":
        return default
    if value not in MODES:
        raise PromptPartError(f"unknown mode {value!r}; use one of {', '.join(MODES)}")
    return value  # type: ignore[no-any-return]


def read_run_context(value: Any) -> RunContext | None:
    """A `RunContext` from the state's `run_context` (a model, a dict, or None).

    Raises:
        PromptPartError: the value is not a valid run context (the message says which field).
    """
    if value is None or isinstance(value, RunContext):
        return value
    if isinstance(value, Mapping):
        try:
            return RunContext.model_validate(dict(value))
        except ValidationError as err:
            raise PromptPartError(f"invalid run_context: {err}") from err
    raise PromptPartError(f"run_context must be a RunContext or a dict, got {type(value).__name__}")


def run_profile(run: RunContext | None) -> Literal["step", "between_steps", "completed"]:
    """Which run-mode profile applies: a step is active, none is, or the run is completed."""
    if run is not None and run.status == "completed":
        return "completed"
    if run is not None and run.step is not None:
        return "step"
    return "between_steps"


# ---------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------


class PromptSection(NamedTuple):
    """One section of a composed system prompt."""

    name: Literal["base_rules", "tool_policy", "persona", "mode_banner", "run_directive",
                  "node_brief"]  # fmt: skip
    text: str


def _line(label: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    return f"- {label}: {value}"


def _step_label(step: WorkflowStep) -> str:
    where = f"{step.index} of {step.total}" if step.index and step.total else step.index
    details = ", ".join(str(x) for x in (f"id {step.id}", where and f"step {where}") if x)
    return f"{step.name} ({details})" if step.name else details


def _context_text(context: Any) -> str:
    if isinstance(context, str):
        return context.strip()
    return json.dumps(context, ensure_ascii=False, indent=2, sort_keys=True)


def _run_directive(parts: PromptParts, run: RunContext | None, profile: str) -> str:
    lines = ["RUN_DIRECTIVE"]
    if run is not None:
        lines += filter(
            None,
            [
                _line("workflow", run.workflow_id),
                _line("run", run.run_id),
                _line("status", run.status),
                _line("goal", run.goal),
            ],
        )
    if profile == "completed":
        lines += filter(None, [_line("result", run.result if run else None)])
        lines += ["", "POST_RUN_PROTOCOL", parts.post_run_protocol]
    elif profile == "step" and run is not None and run.step is not None:
        lines += [f"- current step: {_step_label(run.step)} (see NODE_BRIEF)", parts.run_directive]
    else:
        lines += ["- current step: none is active; wait for the next step or the user."]
    return "\n".join(lines)


def _node_brief(step: WorkflowStep) -> str:
    lines = ["NODE_BRIEF", f"- step: {_step_label(step)}"]
    if step.brief:
        lines.append(f"- brief: {step.brief.strip()}")
    if step.context is not None and step.context != "":
        lines += ["- step context:", _context_text(step.context)]
    return "\n".join(lines)


def prompt_sections(
    mode: Mode = "chat",
    parts: PromptParts | None = None,
    *,
    run: RunContext | Mapping[str, Any] | None = None,
) -> list[PromptSection]:
    """The sections of the system prompt for `mode`, in order (see the module docstring).

    Example:
        ```python
        [s.name for s in prompt_sections("chat")]
        # ['base_rules', 'tool_policy', 'mode_banner']
        [s.name for s in prompt_sections("run", PromptParts(persona="You are Ada."),
                                         run={"step": {"id": "load"}})]
        # ['base_rules', 'tool_policy', 'persona', 'mode_banner', 'run_directive', 'node_brief']
        ```

    Raises:
        PromptPartError: an unknown mode or an invalid run context.
    """
    mode = read_mode(mode)
    parts = parts or PromptParts()
    sections = [
        PromptSection("base_rules", parts.base_rules(mode).strip()),
        PromptSection("tool_policy", parts.tool_policy.strip()),
    ]
    if mode != "chat" and parts.persona and parts.persona.strip():
        sections.append(PromptSection("persona", parts.persona.strip()))
    banner = f"MODE\n- active: {mode}\n- note: {parts.banner_note.strip()}"
    sections.append(PromptSection("mode_banner", banner))
    if mode == "run":
        context = read_run_context(run)
        profile = run_profile(context)
        sections.append(PromptSection("run_directive", _run_directive(parts, context, profile)))
        if profile == "step" and context is not None and context.step is not None:
            sections.append(PromptSection("node_brief", _node_brief(context.step)))
    return [s for s in sections if s.text]


def compose_system_prompt(
    mode: Mode = "chat",
    parts: PromptParts | None = None,
    *,
    run: RunContext | Mapping[str, Any] | None = None,
) -> str:
    """The system prompt for `mode`: its sections joined by blank lines.

    Args:
        mode: `"chat"`, `"agent"` or `"run"`.
        parts: the texts to compose from (defaults: `PromptParts()`).
        run: the workflow run, in run mode (`RunContext` or its dict); ignored otherwise.

    Example:
        ```python
        text = compose_system_prompt("agent", PromptParts(persona="You are Ada."))
        "You are Ada." in text, "MODE\\n- active: agent" in text   # (True, True)
        "You are Ada." in compose_system_prompt("chat", PromptParts(persona="You are Ada."))
        # False: chat mode never carries the persona
        ```

    Raises:
        PromptPartError: an unknown mode or an invalid run context.
    """
    return "\n\n".join(s.text for s in prompt_sections(mode, parts, run=run))


# ---------------------------------------------------------------------------
# The request: composed prompt + summary + history
# ---------------------------------------------------------------------------


def system_prompt_message(text: str) -> SystemMessage:
    """The composed prompt as the system message the model is sent.

    Its id is derived from the text, so an unchanged prompt is the same message on every
    step (a checkpointer stores it once) and a new one is told apart. It carries
    `SYSTEM_PROMPT_MARKER` in `additional_kwargs` (providers do not send that field).
    """
    key, value = SYSTEM_PROMPT_MARKER
    return SystemMessage(content=text, id=_system_prompt_id(text), additional_kwargs={key: value})


@functools.lru_cache(maxsize=64)  # the same prompt is sent call after call
def _system_prompt_id(text: str) -> str:
    return f"langgraph-ctx-system-prompt-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def is_system_prompt_message(message: BaseMessage) -> bool:
    """True for a message made by `system_prompt_message` (a composed prompt)."""
    key, value = SYSTEM_PROMPT_MARKER
    return (message.additional_kwargs or {}).get(key) == value


def _is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage) or (
        isinstance(message, ChatMessage) and message.role in ("system", "developer")
    )


def model_input(
    system_prompt: str | None,
    messages: Sequence[BaseMessage],
) -> list[BaseMessage]:
    """What the model is sent: the composed prompt, then the conversation's messages.

    - An earlier composed prompt in `messages` is left out (it is replaced).
    - The leading system messages of `messages` (a system prompt you keep in the history
      yourself) and summary-class system messages (`CONVERSATION_SUMMARY ...`, the running
      summary of compaction) follow the composed prompt, in that order.
    - Other system messages later in the history are left out, as compaction does: the
      current instructions win.
    The request thus starts with consecutive system messages. For a provider that takes
    exactly one, join them in your model node with `langchain_core.messages.merge_message_runs`.
    `messages` itself is never changed.

    Example:
        ```python
        model_input("Be brief.", [HumanMessage("hi"), SystemMessage("CONVERSATION_SUMMARY x")])
        # [SystemMessage("Be brief."), SystemMessage("CONVERSATION_SUMMARY x"), HumanMessage("hi")]
        ```
    """
    leading: list[BaseMessage] = []
    summaries: list[BaseMessage] = []
    rest: list[BaseMessage] = []
    at_start = True
    for message in messages:
        if is_system_prompt_message(message):
            continue
        if _is_system(message):
            if is_summary_message(message) or is_summary_class_message(message):
                summaries.append(message)
            elif at_start:
                leading.append(message)
            continue
        at_start = False
        rest.append(message)
    head: list[BaseMessage] = [system_prompt_message(system_prompt)] if system_prompt else []
    return [*head, *leading, *summaries, *rest]


def host_system_prompts(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The host's own system messages opening `messages`, and the messages without them.

    The pipeline sends their text first in its one system message (before the mode's
    sections) instead of as further system messages. The composed prompt, the running
    summary and a loaded archive are not the host's: they stay in the messages. Only the
    opening run of system messages is read, so the cost does not grow with the history.

    Example:
        ```python
        host_system_prompts([SystemMessage("Be brief."), HumanMessage("hi")])
        # ([SystemMessage('Be brief.')], [HumanMessage('hi')])
        ```
    """
    host: list[BaseMessage] = []
    ours: list[BaseMessage] = []
    end = 0
    while end < len(messages) and _is_system(messages[end]):
        message = messages[end]
        if (
            is_system_prompt_message(message)
            or is_summary_message(message)
            or is_summary_class_message(message)
            or is_loaded_context_message(message)
        ):
            ours.append(message)
        else:
            host.append(message)
        end += 1
    if not host:
        return [], list(messages)
    return host, [*ours, *messages[end:]]
