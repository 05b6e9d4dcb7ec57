"""Python blocks of docs/*.md run as a reader pastes them, offline, in a fresh directory.

Not every block of the guides is a whole program (many show one call in the middle of
an app). The ones below are: each chain is the blocks the text says to run in order
("continuing the quick start ..."), named by a line each block contains, run in one
namespace. None may show langgraph's deprecation warning of `create_react_agent` (the
blocks that use it say so and silence it), and `PersonaDroppedWarning` comes only where
the text says it does. A `prelude` stands in for what the text assumes the reader
already has (a chat model, tools), and is not in the docs.
"""

from __future__ import annotations

import re
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph.warnings import LangGraphDeprecatedSinceV10

from langgraph_ctx.errors import PersonaDroppedWarning

DOCS = Path(__file__).resolve().parent.parent / "docs"

_FENCE = re.compile(r"^( *)```python[ \t]*\n(.*?)^\1```[ \t]*$", re.S | re.M)

COMPACTION_PRELUDE = '''
from langchain_core.tools import tool

from langgraph_ctx.context.compaction import HybridSummary, read_tool_result
from langgraph_ctx.nodes.compaction import CompactionNode
from langgraph_ctx.testing import ExtractiveSummaryModel, OfflineChatModel


@tool
def grep_logs(query: str) -> str:
    """Search the logs."""
    return "\\n".join(f"12:00:{i:02d} INFO worker processed batch {i} {query}" for i in range(400))


tools, llm, small_llm = [grep_logs], OfflineChatModel(), ExtractiveSummaryModel()
'''


@dataclass
class Chain:
    name: str
    doc: str
    blocks: list[str]
    """A line of each block, in the order they run."""
    prelude: str = ""
    persona_warnings: int = 0
    """How many `PersonaDroppedWarning`s the text says the blocks give."""

    def code(self) -> list[tuple[int, str]]:
        """(first line in the doc, dedented code) of each block."""
        text = (DOCS / self.doc).read_text(encoding="utf-8")
        found = [
            (text.count("\n", 0, m.start(2)) + 1, textwrap.dedent(m.group(2)))
            for m in _FENCE.finditer(text)
        ]
        picked = []
        for marker in self.blocks:
            matches = [(line, code) for line, code in found if marker in code]
            assert len(matches) == 1, f"{self.doc}: {len(matches)} blocks contain {marker!r}"
            picked.append(matches[0])
        return picked


CHAINS = [
    Chain("budget-quick-start", "budget.md", ['BudgetNode("personalized", model="gpt-4o")']),
    Chain(
        "budget-counting-then-budgets",
        "budget.md",
        ["assert count_tool_tokens([search]) == 34", 'ContextBudget.preset("fast")'],
    ),
    Chain("budget-react-hook", "budget.md", ["class TwoStepModel(BaseChatModel)"]),
    Chain(
        "pipeline-quick-start-and-hosts",
        "pipeline.md",
        [
            "llm = OfflineChatModel()   # offline stand-in",
            "run = RunContext(",
            "def frost_dates(city: str) -> str:",
            "from langgraph_ctx import ContextAgentState",
            "middleware=[pipeline.middleware(timeout=60)]",
            'agent = create_agent(llm, tools, system_prompt="ALWAYS ANSWER IN FRENCH.",',
            "async def print_reply(graph, inputs, config):",
        ],
        persona_warnings=1,  # the quick start's chat turn: "no persona (warns once)"
    ),
    Chain("pipeline-renamed-keys", "pipeline.md", ["class AppAgentState(AgentState):"]),
    Chain(
        "compaction-react-hook",
        "compaction.md",
        ["from langgraph_ctx.nodes.compaction import CompactionAgentState"],
        prelude=COMPACTION_PRELUDE,
    ),
]


@pytest.mark.parametrize("chain", CHAINS, ids=[c.name for c in CHAINS])
def test_a_docs_example_runs(
    chain: Chain,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # always offline
    namespace: dict[str, object] = {"__name__": "__main__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if chain.prelude:
            exec(compile(chain.prelude, f"<{chain.name} prelude>", "exec"), namespace)
        for line, code in chain.code():
            # Blank lines first, so line numbers in a traceback are the doc's own;
            # dont_inherit: run as pasted, without this file's `from __future__` import.
            source = "\n" * (line - 1) + code
            exec(compile(source, str(DOCS / chain.doc), "exec", dont_inherit=True), namespace)
    capsys.readouterr()  # what the blocks printed is for people; running without error counts
    kinds = [w.category for w in caught]
    assert LangGraphDeprecatedSinceV10 not in kinds, [str(w.message) for w in caught]
    assert kinds.count(PersonaDroppedWarning) == chain.persona_warnings
