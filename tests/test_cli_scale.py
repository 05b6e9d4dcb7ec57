"""The command line at the scale deployments reach: a fast ``--help``, long ids at 80
columns, ``--dir`` anywhere, one-line errors that name the accepted values, an import
that survives Ctrl-C and resumes with ``--skip-existing``, context archives hidden."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.browse import usage_series
from langgraph_ctx.cli.app import app
from langgraph_ctx.cli.plot import usage_figure, usage_headline
from langgraph_ctx.context.archive import ContextArchive, is_archive_thread
from langgraph_ctx.context.budget import _COLORS, ContextBudget, compute_usage
from langgraph_ctx.context.tokens import MessageTokenCounter
from langgraph_ctx.migrate import compare_with_sqlite
from langgraph_ctx.nodes.budget import BudgetNode, BudgetState

from .cli_scenarios import build_directory, chat_graph, config

runner = CliRunner()
LONG_IDS = [
    "context-switch-archive-demo-alpha",
    "context-switch-archive-demo-bravo",
    "context-switch-archive-demo-charlie",
]


# ---------------------------------------------------------------------------- --help

HEAVY = ["langgraph", "langchain_core", "langsmith", "tiktoken", "matplotlib", "pydantic"]
"""Top-level packages ``--help`` must not import. A command's own ``--help`` may import
pydantic: typer 0.29 validates a command's parameters with it (`typer._adapters`)."""
RICH_HEAVY = ["rich.markdown", "rich.syntax", "rich.traceback", "rich.progress", "rich.table"]


@pytest.mark.parametrize("args", [["--help"], ["threads", "--help"], ["prune", "--help"]])
def test_help_imports_no_heavy_module(args: list[str]) -> None:
    """``--help`` loads typer and the command table only: no LangGraph, no tokenizer, no
    plotting, none of rich's help formatter (checked on ``sys.modules``, not by timing)."""
    code = (
        "import sys\n"
        "from langgraph_ctx.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print('\\n' + ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "Usage: langgraph-ctx" in done.stdout
    loaded = set(done.stderr.strip().splitlines()[-1].split())
    banned = HEAVY if args == ["--help"] else [h for h in HEAVY if h != "pydantic"]
    heavy = sorted(m for m in loaded if m.split(".")[0] in banned or m in RICH_HEAVY)
    assert heavy == []


# ----------------------------------------------------------------------- 80 columns


@pytest.fixture(scope="module")
def long_ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "chats"
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    for tid in LONG_IDS:
        for text in ["hi", "plan a trip", "somewhere warm"]:
            graph.invoke({"messages": [("user", text)]}, config(tid))
    saver.fork(LONG_IDS[0], LONG_IDS[0] + "-retry")
    values = graph.get_state(config(LONG_IDS[1])).values
    outcome = ContextArchive(saver).archive(
        LONG_IDS[1], values["messages"], None, title="the first plan"
    )
    assert outcome.entry is not None
    return root


def at_80(root: Path, *args: str) -> list[str]:
    result = runner.invoke(app, ["--dir", str(root), *args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    return lines


def test_threads_at_80_columns_keeps_ids_whole(long_ids: Path) -> None:
    lines = at_80(long_ids, "threads")
    firsts = [line.split()[0] for line in lines[1:] if line.strip()]
    for tid in [*LONG_IDS, LONG_IDS[0] + "-retry"]:
        assert tid in firsts  # whole, on one line, first in its row
    assert not any("…" in line for line in lines)
    notes = [line for line in lines if line.startswith(LONG_IDS[0] + "-retry:")]
    assert notes and "fork of" in notes[0]  # the notes moved under the table


def test_history_at_80_columns_keeps_ids_and_nodes_whole(long_ids: Path) -> None:
    saver = JsonlSaver(long_ids)
    infos = saver.checkpoint_infos(LONG_IDS[2])
    lines = at_80(long_ids, "history", LONG_IDS[2])
    assert lines[0].split()[:3] == ["checkpoint", "step", "source"]
    rows = lines[1:]
    assert [row.split()[0] for row in rows] == [i.checkpoint_id for i in infos]
    assert all("chatbot" in row or "__start__" in row or "(input)" in row for row in rows)
    assert rows[-1].endswith("head")
    wide = runner.invoke(app, ["-d", str(long_ids), "history", LONG_IDS[2]], env={"COLUMNS": "140"})
    assert "changed" in wide.stdout.splitlines()[0]  # wide enough: every column, full dates
    assert infos[-1].ts[:10] in wide.stdout


# ------------------------------------------------------------------ --dir and errors


def test_dir_after_the_command(long_ids: Path, tmp_path: Path) -> None:
    after = runner.invoke(app, ["threads", "--dir", str(long_ids), "--json"])
    assert after.exit_code == 0, after.output
    assert {t["thread_id"] for t in json.loads(after.stdout)} >= set(LONG_IDS)
    # the one after the command wins
    both = runner.invoke(app, ["--dir", str(tmp_path), "history", "-d", str(long_ids), LONG_IDS[0]])
    assert both.exit_code == 0, both.output
    assert "-d, --dir" in runner.invoke(app, ["show", "--help"]).stdout


def one_error(args: list[str], code: int) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_errors_are_one_line_and_name_the_accepted_values(long_ids: Path) -> None:
    d = ["-d", str(long_ids)]
    fmt = one_error([*d, "export", LONG_IDS[0], "--format", "xml"], 2)
    assert "'xml' is not one of 'openai', 'jsonl'" in fmt and "Value error" not in fmt
    strategy = one_error([*d, "prune", "x", "--strategy", "all"], 2)
    assert "'all' is not one of 'keep_latest', 'delete'" in strategy
    ftp = one_error([*d, "copy", "--all", "--to", "ftp://x"], 1)
    assert ftp == (
        "error: unsupported store ftp:// in 'ftp://x': use redis://, rediss://, unix://, "
        "redis+cluster:// (a Redis Cluster) or a directory path"
    )
    window = one_error([*d, "usage", LONG_IDS[0], "-m", "gpt-4o", "--window", "lots"], 2)
    assert "--window" in window and "integer" in window


# ------------------------------------------------------------ context archive threads


def test_archive_threads_are_hidden_unless_asked(long_ids: Path) -> None:
    listed = json.loads(runner.invoke(app, ["threads", "-d", str(long_ids), "--json"]).stdout)
    assert not any(is_archive_thread(t["thread_id"]) for t in listed)
    owner = next(t for t in listed if t["thread_id"] == LONG_IDS[1])
    assert owner["archives"] == 1
    assert "1 context archive" in "\n".join(at_80(long_ids, "threads"))
    shown = runner.invoke(app, ["threads", "-d", str(long_ids), "--archives", "--json"])
    archives = [t for t in json.loads(shown.stdout) if is_archive_thread(t["thread_id"])]
    assert len(archives) == 1 and archives[0]["archive_of"] == LONG_IDS[1]


# --------------------------------------------------------- import: Ctrl-C, then resume


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("db") / "checkpoints.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    graph = chat_graph(SqliteSaver(conn))
    for n in range(5):
        for text in ["hi", "plan a trip"]:
            graph.invoke({"messages": [("user", text)]}, config(f"thread-{n}"))
    conn.close()
    return path


def _interrupt_in(monkeypatch: pytest.MonkeyPatch, thread_id: str, how: str) -> None:
    """Ctrl-C while a stored value of `thread_id` is decoded, the way a user's Ctrl-C
    lands mid-thread: a real SIGINT (which inside ormsgpack's ``ext_hook`` used to come
    out as ``ValueError: ext_hook failed``), or a bare KeyboardInterrupt."""
    import langgraph_ctx.migrate as migrate

    original_load, original_loads = migrate._load_tuple, JsonPlusSerializer.loads_typed
    state = {"in_thread": False, "fired": False}

    def load_tuple(conn: Any, serde: Any, writes_sql: Any, tid: str, *rest: Any) -> Any:
        state["in_thread"] = tid == thread_id
        return original_load(conn, serde, writes_sql, tid, *rest)

    def loads_typed(self: Any, data: Any) -> Any:
        if state["in_thread"] and not state["fired"]:
            state["fired"] = True
            if how == "signal":  # delivered while ormsgpack runs an ext_hook, as in the field
                packed = ormsgpack.packb(ormsgpack.Ext(5, b"x"))
                ormsgpack.unpackb(packed, ext_hook=lambda *_: signal.raise_signal(signal.SIGINT))
            else:
                raise KeyboardInterrupt
        return original_loads(self, data)

    monkeypatch.setattr(migrate, "_load_tuple", load_tuple)
    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", loads_typed)


@pytest.mark.parametrize("how", ["signal", "exception"])
def test_import_interrupted_then_resumed(
    database: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    root = tmp_path / "chats"
    _interrupt_in(monkeypatch, "thread-2", how)  # in the middle of the third thread
    result = runner.invoke(app, ["-d", str(root), "import", str(database)])
    assert result.exit_code == 130, result.output
    assert result.stderr.splitlines() == [
        "interrupted: 2 of 5 thread(s) imported, complete; run the same command with "
        "--skip-existing to import the rest"
    ]
    done = sorted(p.name for p in root.glob("*.jsonl"))
    assert done == ["thread-0.jsonl", "thread-1.jsonl"]
    assert not list(root.glob(".import-*"))  # no half-written thread anywhere
    for tid in ["thread-0", "thread-1"]:
        assert compare_with_sqlite(database, root, tid) == []
    monkeypatch.undo()

    again = runner.invoke(app, ["-d", str(root), "import", str(database)])
    assert again.exit_code == 1 and "--skip-existing" in again.stderr
    resumed = runner.invoke(app, ["-d", str(root), "import", str(database), "--skip-existing"])
    assert resumed.exit_code == 0, resumed.output
    assert "skipped 2 existing thread(s)" in resumed.stdout
    assert "imported 3 thread(s)" in resumed.stdout
    for n in range(5):
        assert compare_with_sqlite(database, root, f"thread-{n}") == []
    both = runner.invoke(
        app, ["-d", str(root), "import", str(database), "--force", "--skip-existing"]
    )
    assert both.exit_code == 2 and "not both" in both.stderr


# ----------------------------------------------------------- plots and the notebook bar


@pytest.fixture(scope="module")
def trip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trip") / "chats"
    build_directory(root)
    return root


def test_usage_headlines_what_was_sent(trip: Path, tmp_path: Path) -> None:
    series = usage_series(JsonlSaver(trip), "trip", model="gpt-4o")
    last = series[-1]
    assert last.view_used is not None and last.view_used < last.used  # compacted
    assert usage_headline(series) == (
        f"last turn: {last.view_used:,} of {last.total:,} tokens sent to the model "
        f"(compacted from {last.used:,})"
    )
    fig = usage_figure(series, title="trip", model="gpt-4o")
    assert usage_headline(series) in fig.axes[0].get_title(loc="left")
    plain = usage_series(JsonlSaver(trip), "chat", model="gpt-4o")
    assert usage_headline(plain).startswith(f"last turn: {plain[-1].used:,} of 128,000 tokens sent")

    out = runner.invoke(app, ["-d", str(trip), "usage", "trip", "-m", "gpt-4o"])
    assert out.exit_code == 0, out.output
    data = json.loads(
        runner.invoke(app, ["-d", str(trip), "usage", "trip", "-m", "gpt-4o", "--json"]).stdout
    )
    sent, history = data["sent"]["used"], data["usage"]["used"]
    assert sent < history
    lines = out.stdout.splitlines()
    headline = f"sent to the model: {sent:,} of 128,000 tokens (compacted from {history:,}):"
    assert headline in lines and lines[lines.index(headline) + 1].startswith("[")


def test_plot_ticks_are_whole_numbers(trip: Path) -> None:
    series = usage_series(JsonlSaver(trip), "trip", model="gpt-4o")
    many = [
        replace(series[0], turn=n, used=n % 3, breakdown={"history": n % 3}) for n in range(1, 45)
    ]
    for data in (series, series[:1], many):
        ax = usage_figure(data).axes[0]
        for ticks in (ax.get_xticks(), ax.get_yticks()):
            assert len(ticks) and all(float(t).is_integer() for t in ticks), ticks


def test_plot_counts_the_tools_the_budget_node_saw(tmp_path: Path) -> None:
    """Tool schemas are not in the state; the BudgetNode's recorded usage has them."""

    @tool
    def weather(city: str, days: int = 3) -> str:
        """The forecast for a city, day by day, with wind and rain."""
        return f"{city}: sunny"

    def bot(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply {len(state['messages'])}")]}

    builder = StateGraph(BudgetState)
    builder.add_node("budget", BudgetNode(model="gpt-4o", tools=[weather]))
    builder.add_node("bot", bot)
    builder.add_edge(START, "budget")
    builder.add_edge("budget", "bot")
    saver = JsonlSaver(tmp_path / "chats")
    graph = builder.compile(checkpointer=saver)
    for text in ["hi", "and tomorrow?"]:
        graph.invoke({"messages": [("user", text)]}, config("t"))
    recorded = graph.get_state(config("t")).values["context_usage"].breakdown["tools"]
    assert recorded > 20
    series = usage_series(saver, "t", model="gpt-4o")
    assert [t.breakdown["tools"] for t in series] == [recorded, recorded]
    assert all(
        t.used == sum(v for k, v in t.breakdown.items() if k != "output_reserve") for t in series
    )
    fig = usage_figure(series)
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "tools" in labels


def test_html_bar_swatches_are_aligned_and_visible() -> None:
    usage = compute_usage(
        [HumanMessage("plan a trip to Lisbon"), AIMessage("sure")],
        ContextBudget.preset("fast"),
        counter=MessageTokenCounter("gpt-4o"),
        system_prompt="Be brief.",
    )
    page = usage._repr_html_()
    table = page[page.index("<table") : page.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    header, body = rows[0], rows[1:]
    assert len(body) == len(usage.breakdown)
    assert all(r.count("<td") == header.count("<th") == 5 for r in body)  # one column each
    for row, key in zip(body, [k for k, _ in usage._ordered()], strict=True):
        swatch = re.match(r'<td style="([^"]*)"><div style="([^"]*)"></div></td>', row)
        assert swatch, row
        cell, square = swatch.groups()
        assert "vertical-align:middle" in cell
        assert "width:10px" in square and "height:10px" in square
        assert f"background:{_COLORS[key]}" in square and "border:1px solid" in square
    assert re.search(r'<th style="[^"]*text-align:right">tokens</th>', header)
