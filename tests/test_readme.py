"""Every ```python block of README.md runs as it is, offline, in a fresh directory.

How blocks are grouped and run:

* each block is a standalone script, run in its own namespace;
* a block whose introducing prose (the text since the previous ```python block) says
  "continuing" runs in the namespace of the previous python block, after it;
* a block right after a `<!-- skip-test: <reason> -->` comment is not run (the reason is
  required, and the test lists the skipped blocks); keep those to what cannot run
  offline at all;
* a block that reads `REDIS_URL` gets the URL of the test suite's own redis-server (its
  keys under the README's prefix, `travel`, removed first); after the Redis example the
  test checks that its graph switched context on Redis.

Any exception fails the test of that block's group, with a traceback pointing at the
README's line; so does a `PersonaDroppedWarning` (the README shows the intended use,
which never trips the warning that flags a misconfiguration).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!--\s*skip-test:\s*(.*?)\s*-->\s*$", re.S)
_CONTINUING = re.compile(r"\bcontinuing\b", re.I)


@dataclass
class Block:
    line: int
    """1-based line of the block's first code line in README.md."""
    code: str
    skip: str | None = None
    """Why the block is not run (from its skip-test comment), or None."""


@dataclass
class Group:
    """Blocks run one after another in one namespace."""

    blocks: list[Block] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"README.md:{self.blocks[0].line}"


def python_blocks(text: str) -> list[tuple[Block, str]]:
    """The python blocks of `text`, each with the prose since the previous python block."""
    found: list[tuple[Block, str]] = []
    end = 0
    for match in _FENCE.finditer(text):
        prose = text[end : match.start()]
        line = text.count("\n", 0, match.start(1)) + 1
        skip = _SKIP.search(prose)
        reason = skip.group(1) if skip else None
        if skip is not None and not reason:
            raise AssertionError(f"README.md:{line}: a skip-test comment needs a reason")
        found.append((Block(line, match.group(1), reason), prose))
        end = match.end()
    return found


def groups(text: str) -> list[Group]:
    result: list[Group] = []
    for block, prose in python_blocks(text):
        if result and _CONTINUING.search(prose):
            result[-1].blocks.append(block)
        else:
            result.append(Group([block]))
    return result


GROUPS = groups(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks_and_few_skips() -> None:
    blocks = [b for g in GROUPS for b in g.blocks]
    assert len(blocks) >= 8, "the README's python blocks were not found"
    skipped = [f"README.md:{b.line} ({b.skip})" for b in blocks if b.skip]
    assert len(skipped) <= 3, f"keep the blocks that cannot run offline few: {skipped}"


def test_grouping_follows_the_prose() -> None:
    text = (
        "intro\n```python\na = 1\n```\nContinuing the example:\n```python\nb = a + 1\n```\n"
        "Another one.\n<!-- skip-test: needs an API key -->\n```python\nimport nope\n```\n"
    )
    first, second = groups(text)
    assert [b.code for b in first.blocks] == ["a = 1\n", "b = a + 1\n"]
    assert second.blocks[0].skip == "needs an API key"
    with pytest.raises(AssertionError, match="needs a reason"):
        groups("<!-- skip-test: -->\n```python\nx = 1\n```\n")


@pytest.mark.filterwarnings("error::langgraph_ctx.errors.PersonaDroppedWarning")
@pytest.mark.parametrize("group", GROUPS, ids=[g.name for g in GROUPS])
def test_a_readme_example_runs(
    group: Group,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # always offline
    runnable = [b for b in group.blocks if b.skip is None]
    if not runnable:
        pytest.skip(f"{group.name}: {group.blocks[0].skip}")
    on_redis = any("REDIS_URL" in b.code for b in runnable)
    if on_redis:
        url = request.getfixturevalue("redis_server").url
        _forget_prefix(url, "travel")
        monkeypatch.setenv("REDIS_URL", url)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in runnable:
        # Blank lines first, so line numbers in a traceback are the README's own.
        source = "\n" * (block.line - 1) + block.code
        exec(compile(source, str(README), "exec"), namespace)
    capsys.readouterr()  # what the blocks printed is for people; running without error counts
    if on_redis:
        _assert_the_context_switch_happened_on_redis(namespace)


def _forget_prefix(url: str, prefix: str) -> None:
    """Remove the keys of `prefix` from the session's server (a run starts empty)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"ctx:{prefix}:*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _assert_the_context_switch_happened_on_redis(namespace: dict[str, Any]) -> None:
    """The README's Redis example built its graph with the context tools bound to the
    Redis saver: `chat_context_new` archived the context in Redis and the next model call
    was a fresh start. (Tools bound to the earlier `JsonlSaver` answer the model with a
    `ContextArchiveError` instead, and the model is sent the whole conversation.)"""
    from langgraph_ctx import RedisLogSaver
    from langgraph_ctx.context.archive import ContextArchive

    saver, sent = namespace["saver"], namespace["model"].received[-1]
    assert isinstance(saver, RedisLogSaver)
    assert namespace["graph"].checkpointer is saver
    assert [m.type for m in sent] == ["system", "human", "ai", "tool"], sent
    assert sent[-1].content.startswith("Archived the previous context"), sent[-1].content
    (entry,) = ContextArchive(saver).entries("trip")
    assert saver.get_tuple({"configurable": {"thread_id": entry.archive_thread_id}})


def _comparable(line: dict[str, Any]) -> dict[str, Any]:
    """A log line without what differs from run to run: ids, times, checksums."""
    return {k: v for k, v in line.items() if k not in ("created", "id", "ts", "task", "c")}


def test_the_file_format_example_is_what_the_saver_writes(tmp_path: Path) -> None:
    """README's "The file format" shows a whole file: it reads back and verifies, and the
    same graph run today writes the same lines (ids, times and checksums aside)."""
    import json

    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from langgraph_ctx import JsonlSaver
    from langgraph_ctx.cli.verify import verify_directory

    shown = re.search(r"^```jsonl\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
    assert shown is not None, "README.md has no ```jsonl block"
    (tmp_path / "shown").mkdir()
    (tmp_path / "shown" / "task-001.jsonl").write_text(shown.group(1), encoding="utf-8")
    report = verify_directory(tmp_path / "shown")
    assert report.ok and report.files[0].checkpoints == 3, report.to_dict()
    assert JsonlSaver(tmp_path / "shown").get_tuple({"configurable": {"thread_id": "task-001"}})

    def chatbot(state: MessagesState) -> dict[str, Any]:
        call = {"name": "weather", "args": {"city": "Paris"}, "id": "c1"}
        return {"messages": [AIMessage("", tool_calls=[call], id="a1")]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    saver = JsonlSaver(tmp_path / "now")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "task-001"}}
    # sync: the checkpoint's line before its writes, as in the README (the default
    # durability saves checkpoints in the background, so the order may differ)
    graph.invoke({"messages": [HumanMessage("weather in Paris?", id="h1")]}, config,
                 durability="sync")  # fmt: skip
    written = Path(saver.path("task-001")).read_text(encoding="utf-8").splitlines()

    def lines(raw: list[str]) -> list[str]:
        # In any order, line references aside: LangGraph saves a step's writes in the
        # background even with durability="sync", so a writes line may come before or
        # after the next checkpoint's (the README says so), which renumbers the lines.
        out = []
        for line in map(json.loads, raw):
            kept = _comparable(line)
            kept.pop("parent", None)
            if isinstance(kept.get("ckpt"), int):
                kept.pop("ckpt")
            out.append(json.dumps(kept, sort_keys=True))
        return sorted(out)

    assert lines(written) == lines(shown.group(1).splitlines())
