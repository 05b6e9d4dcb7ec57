"""The example scripts run offline, quickly, and show what they promise.

They run with the package's `PersonaDroppedWarning` turned into an error: an example
shows the intended use, so it must not trip the warning that flags a misconfiguration.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))

STRICT = """
import runpy, sys, warnings
from langgraph_ctx.errors import PersonaDroppedWarning
warnings.simplefilter("error", PersonaDroppedWarning)
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, str(__import__("pathlib").Path(script).resolve().parent))
runpy.run_path(script, run_name="__main__")
"""
"""Runs the script named by its first argument as ``python script`` would, with
`PersonaDroppedWarning` raised as an error (``-W`` would ignore a category it cannot
import, silently)."""


def run_strict(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # always offline
    return subprocess.run(
        [sys.executable, "-c", STRICT, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@functools.cache
def run(name: str) -> str:
    """Run an example once per test session; its output."""
    done = run_strict(EXAMPLES / name, EXAMPLES.parent)
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


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_example_runs_without_the_persona_warning(script: str) -> None:
    assert "Traceback" not in run(script)  # run() fails on a non-zero exit (the warning)


def test_the_notebooks_code_runs_without_the_persona_warning(tmp_path: Path) -> None:
    """The notebook's code cells, in order, as one script (tests/test_notebook.py runs
    the notebook itself on a kernel, where a warning is only an output)."""
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("chats", "__pycache__"))
    cells = json.loads((work / "notebook.ipynb").read_text(encoding="utf-8"))["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    (work / "notebook_cells.py").write_text(code, encoding="utf-8")
    done = run_strict(work / "notebook_cells.py", work)
    assert done.returncode == 0, done.stderr
