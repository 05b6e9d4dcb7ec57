"""``langgraph-ctx copy``: threads from a JSONL directory to Redis and back, and
between directories, line for line."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver
from langgraph_ctx.cli.app import app

from .cli_scenarios import build_directory, chat_graph, config
from .conftest import history_view, snapshot_view

runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("copy") / "chats"
    build_directory(root, turns=3)
    return root


def test_copy_to_redis_and_back(built: Path, tmp_path: Path, redis_server) -> None:
    from langgraph_ctx.saver.redis import RedisLogSaver

    prefix = f"cli{uuid.uuid4().hex[:8]}"
    to = runner.invoke(
        app,
        [
            "--dir",
            str(built),
            "copy",
            "chat",
            "trip",
            "--to",
            redis_server.url,
            "--prefix",
            prefix,
        ],
    )
    assert to.exit_code == 0, to.output
    assert to.stdout.splitlines()[0].startswith("copied chat -> ")
    with RedisLogSaver.from_url(redis_server.url, prefix=prefix) as redis_saver:
        assert sorted(redis_saver.list_threads()) == ["chat", "trip"]
        graph = chat_graph(redis_saver)
        source = chat_graph(JsonlSaver(built))
        assert snapshot_view(graph.get_state(config("chat"))) == snapshot_view(
            source.get_state(config("chat"))
        )
        assert history_view(graph, config("chat")) == history_view(source, config("chat"))

    back = tmp_path / "back"
    result = runner.invoke(
        app,
        [
            "--dir",
            str(back),
            "copy",
            "chat",
            "--from",
            redis_server.url,
            "--prefix",
            prefix,
            "--as",
            "chat-again",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    copied = json.loads(result.stdout)
    assert copied[0]["thread_id"] == "chat" and copied[0]["target_id"] == "chat-again"
    original = Path(JsonlSaver(built).path("chat")).read_bytes().splitlines()
    again = Path(JsonlSaver(back).path("chat-again")).read_bytes().splitlines()
    assert again[1:] == original[1:]  # every line but the header, verbatim
    assert json.loads(again[0])["copied_from"] == {"thread_id": "chat"}
    assert runner.invoke(app, ["--dir", str(back), "verify"]).exit_code == 0

    exists = runner.invoke(
        app, ["--dir", str(built), "copy", "chat", "--to", redis_server.url, "--prefix", prefix]
    )
    assert exists.exit_code == 1
    assert exists.stderr.startswith("error: thread 'chat' already exists")
    missing = runner.invoke(
        app, ["--dir", str(back), "copy", "ghost", "--from", redis_server.url, "--prefix", prefix]
    )
    assert missing.exit_code == 1
    assert missing.stderr.strip() == f"error: thread 'ghost' does not exist in {redis_server.url}"


def test_copy_between_directories(built: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    result = runner.invoke(app, ["--dir", str(built), "copy", "--all", "--to", str(other)])
    assert result.exit_code == 0, result.output
    assert sorted(JsonlSaver(other).list_threads()) == sorted(JsonlSaver(built).list_threads())
    for thread_id in JsonlSaver(built).list_threads():
        assert (
            Path(JsonlSaver(other).path(thread_id)).read_bytes()
            == Path(JsonlSaver(built).path(thread_id)).read_bytes()
        )


def test_copy_all_from_an_empty_store_says_so(tmp_path: Path) -> None:
    """``copy --all`` with nothing to copy (an empty directory, a wrong database) prints
    a line saying so, rather than nothing at all."""
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    result = runner.invoke(app, ["--dir", str(empty), "copy", "--all", "--to", str(other)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"no threads to copy in {empty}\n"


def test_copy_all_from_an_empty_redis_database_names_the_server(
    tmp_path: Path, redis_server
) -> None:
    """From Redis the line names the server as the saver's messages do, never the URL as
    typed (which may hold a password)."""
    empty = redis_server.url.rsplit("/", 1)[0] + "/7"
    result = runner.invoke(
        app, ["--dir", str(tmp_path / "x"), "copy", "--all", "--from", empty]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no threads to copy in redis://127.0.0.1:")
    assert result.stdout.rstrip().endswith("/7")


def test_copy_arguments(built: Path, tmp_path: Path) -> None:
    def fails(*args: str) -> str:
        result = runner.invoke(app, ["--dir", str(built), "copy", *args])
        assert result.exit_code == 2, result.output
        return result.stderr

    assert "give exactly one of --to and --from" in fails("chat")
    assert "give exactly one of --to and --from" in fails("chat", "--to", "x", "--from", "y")
    assert "--as needs exactly one thread" in fails("chat", "trip", "--to", "x", "--as", "z")
    assert "name threads to copy, or pass --all" in fails("--to", str(tmp_path))
    assert "--prefix applies to Redis only" in fails("chat", "--to", str(tmp_path), "--prefix", "p")
    args = ["--dir", str(built), "copy", "chat", "--from", str(tmp_path / "x")]
    nowhere = runner.invoke(app, args)
    assert nowhere.exit_code == 1
    assert nowhere.stderr.strip() == f"error: no such directory: {tmp_path / 'x'}"
    (tmp_path / "f").write_text("")
    a_file = runner.invoke(app, ["--dir", str(built), "copy", "chat", "--to", str(tmp_path / "f")])
    assert a_file.exit_code == 1
    assert a_file.stderr.strip() == f"error: not a directory: {tmp_path / 'f'}"


def test_copy_to_a_new_directory_makes_it(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--to DIR`` refused a directory not made yet, where ``--from`` makes ``--dir``; a
    mistyped store URL is not taken for a new directory's name."""
    new = tmp_path / "new" / "chats"
    result = runner.invoke(app, ["--dir", str(built), "copy", "chat", "--to", str(new)])
    assert result.exit_code == 0, result.output
    assert JsonlSaver(new).list_threads() == ["chat"]
    monkeypatch.chdir(tmp_path)
    typos = ("redis:/localhost:6379/0", "localhost:6379", "redis:localhost:6379/0",
             "redis//localhost:6379/0", "[::1]:6379", "user:pw@localhost:6379/0")
    for typo in typos:
        result = runner.invoke(app, ["--dir", str(built), "copy", "chat", "--to", typo])
        assert result.exit_code == 1 and "not a store URL" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]
    timed = runner.invoke(app, ["--dir", str(built), "copy", "chat", "--to", "backups/08:30"])
    assert timed.exit_code == 0, timed.output  # a directory's name may hold a ':'
    assert JsonlSaver(tmp_path / "backups" / "08:30").list_threads() == ["chat"]


def test_copy_takes_a_threads_archived_contexts_and_their_index(
    tmp_path: Path, redis_server
) -> None:
    """``copy`` moved a thread's archive threads (with ``--all``) but not its index of them
    (``<thread>.contexts.json``, a Redis key): on the target the model's context tools
    listed no archive. A thread now goes with its archives and their index, to a
    directory and to Redis."""
    from langgraph_ctx import RedisLogSaver
    from langgraph_ctx.context.archive import ContextArchive

    root = tmp_path / "chats"
    saver = JsonlSaver(root)
    graph = chat_graph(saver)
    for text in ["hi", "plan a trip"]:
        graph.invoke({"messages": [("user", text)]}, config("chat"))
    messages = graph.get_state(config("chat")).values["messages"]
    assert ContextArchive(saver).archive("chat", messages, None, title="the plan").entry
    expected = [(e.context_id, e.title) for e in ContextArchive(saver).entries("chat")]
    prefix = f"arch-{uuid.uuid4().hex[:8]}"
    for to, reader in (
        (str(tmp_path / "other"), lambda: JsonlSaver(tmp_path / "other")),
        (redis_server.url, lambda: RedisLogSaver.from_url(redis_server.url, prefix=prefix)),
    ):
        args = ["--dir", str(root), "copy", "chat", "--to", to]
        result = runner.invoke(app, args + (["--prefix", prefix] if "redis" in to else []))
        assert result.exit_code == 0, result.output
        target = reader()
        entries = ContextArchive(target).entries("chat")
        assert [(e.context_id, e.title) for e in entries] == expected
        archived = target.get_tuple(config(entries[0].thread_id))
        assert archived is not None  # the archive thread came along


def test_copy_as_a_new_id_names_it_in_the_checkpoints_metadata(tmp_path: Path) -> None:
    """``copy --as NEW`` kept the source's ``thread_id`` in every checkpoint's metadata (the
    LangGraph server puts it there): ``list(filter={"thread_id": NEW})`` found none of
    them. It reads the new id, as after `fork` (and the server's ``threads.copy``)."""
    from langgraph.checkpoint.base import empty_checkpoint

    root, other = tmp_path / "chats", tmp_path / "other"
    source = JsonlSaver(root)
    head: Any = config("chat")
    for step in range(3):  # metadata as the LangGraph server's runs save it
        checkpoint = {**empty_checkpoint(), "channel_versions": {"n": step + 1}}
        checkpoint["channel_values"] = {"n": step}
        meta = {"source": "loop", "step": step, "thread_id": "chat"}
        head = source.put(head, checkpoint, meta, {"n": step + 1})  # type: ignore[arg-type]
    args = ["--dir", str(root), "copy", "chat", "--to", str(other), "--as", "chat-2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    saver = JsonlSaver(other)
    tuples = list(saver.list(config("chat-2")))
    assert tuples and {t.metadata["thread_id"] for t in tuples} == {"chat-2"}
    assert len(list(saver.list(None, filter={"thread_id": "chat-2"}))) == len(tuples)
