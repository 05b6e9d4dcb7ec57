"""The example scripts run offline, quickly, and show what they promise."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@functools.cache
def run(name: str) -> str:
    """Run an example once per test session; its output."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # always offline
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "chat_assistant.py",
            [
                "model: offline (deterministic)",
                "context  [",  # the usage bar of every request
                "compaction: ",
                "LLM_ERROR",
                "- kind: timeout",
                "(resuming after the error) …",
                "error notebook (1 of at most 50)",
                "the file holds every one of them",
            ],
        ),
        (
            "tool_agent.py",
            [
                "context  [",
                "offloaded 1 tool result(s) as previews",
                "the model sees the big result as: TOOL_RESULT_PREVIEW",
                "tool book_courier (error): Error: RuntimeError",
                "tool_error book_courier: RuntimeError",
                "the file holds every one of them",
            ],
        ),
        (
            "run_workflow.py",
            [
                "context  [",
                "compaction: ",
                "RUN_DIRECTIVE | NODE_BRIEF",
                "reply tagged: {'mode': 'run', 'run_id': 'run-0042', 'step_id': 'collect'}",
                "RUN_DIRECTIVE | POST_RUN_PROTOCOL",
                "then 'CONVERSATION_SUMMARY",
                "the file holds every one of them",
            ],
        ),
    ],
)
def test_example_runs_offline_and_shows_its_point(script: str, expected: list[str]) -> None:
    out = run(script)
    for text in expected:
        assert text in out, f"{script}: {text!r} missing from its output:\n{out}"


def test_the_chat_example_reports_compaction_before_the_failed_turn_is_resumed() -> None:
    out = run("chat_assistant.py")
    timeout_turn = out.index("[timeout]")
    assert out.index("LLM_ERROR", timeout_turn) < out.index("[continue]")
    assert "(resuming after the error)" in out[out.index("[continue]") :]
