"""examples/notebook.ipynb runs top to bottom on a headless kernel and shows what it says."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture
def executed(tmp_path: Path) -> nbformat.NotebookNode:
    # Run a copy next to the examples (as a reader would), writing into tmp_path.
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("chats", "__pycache__"))
    notebook = nbformat.read(work / "notebook.ipynb", as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()
    return notebook


def outputs(cell: nbformat.NotebookNode) -> tuple[str, dict]:
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    data: dict = {}
    for o in cell.outputs:
        if o.output_type in ("execute_result", "display_data"):
            data.update(o.data)
    return text, data


def test_notebook_runs_and_shows_usage_compaction_fork_revert_and_the_plot(executed):
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]

    def cell(prefix: str) -> tuple[str, dict]:
        (match,) = [c for c in code if c.source.startswith(prefix)]
        return outputs(match)

    # the context usage renders as an HTML bar in the notebook, and as a text bar
    _, usage = cell("hello = ")
    assert "text/html" in usage and "%" in usage["text/html"]
    text, _ = cell('print(state["context_usage"])')
    assert "/1,200" in text

    # what the model was sent: the composed system prompt, then the conversation
    text, _ = cell('for message in state["llm_input_messages"]')
    assert text.startswith("--- system\n") and "--- human\nHi! I'm Sam;" in text

    # compaction happened, and the file still holds every message
    text, _ = cell('records = state["compaction_log"]')
    assert "1 compaction(s)" in text or "2 compaction(s)" in text
    text, _ = cell("# The request after compaction")
    sent, kept = (int(n) for n in re.findall(r"(\d+) messages sent, (\d+) in the state", text)[0])
    assert sent < kept and "  system: " in text
    text, _ = cell('path = Path(saver.path("garden"))')
    in_state = int(text.split(" messages in the state")[0].rsplit(" ", 1)[1])
    in_file = int(text.split(" message bodies in the file")[0].rsplit(" ", 1)[1])
    assert in_file == in_state + 1  # + the composed system prompt the model was sent

    # fork and revert
    text, _ = cell("# Revert the original thread")
    assert "backups: ['garden.jsonl.1']" in text
    assert "threads: ['garden-balcony', 'garden']" in text

    # the plot, inline, as a PNG
    _, image = cell("from IPython.display import Image")
    png = image["image/png"]
    assert isinstance(png, str) and len(png) > 10_000  # base64 of a real chart


def test_the_plot_charts_the_whole_conversation_after_the_revert_cell_runs_again(
    tmp_path: Path,
) -> None:
    """Re-running the revert cell (as notebook users do) made the newest backup the
    already-reverted thread, and the plot cell charted that. It charts the oldest."""
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("chats", "__pycache__"))
    notebook = nbformat.read(work / "notebook.ipynb", as_version=4)
    (at,) = [i for i, c in enumerate(notebook.cells) if c.source.startswith("# Revert the")]
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(notebook.cells[at].source))
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    ).execute()
    root = work / "chats" / "notebook"  # the notebook's ROOT
    charted = (root / "before-revert" / "garden.jsonl").read_bytes()
    assert sorted(p.name for p in root.glob("garden.jsonl.*")) == [
        "garden.jsonl.1", "garden.jsonl.2"  # the revert ran twice
    ]
    assert charted == (root / "garden.jsonl.2").read_bytes()  # the thread before both
