"""`langgraph-ctx import`: a real SqliteSaver database, made by running real graphs,
becomes JSONL threads that answer get_state and get_state_history as the database did."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typer.testing import CliRunner

from langgraph_ctx import JsonlSaver, browse
from langgraph_ctx.cli.app import app
from langgraph_ctx.migrate import (
    SqliteSourceError,
    compare_with_sqlite,
    import_sqlite,
    sqlite_path,
)

from .cli_scenarios import chat_graph, subgraph_with_interrupt, travel_agent
from .conftest import history_view, snapshot_view
from .test_saver_graphs import delta_graph, send_graph

runner = CliRunner()


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _graphs(saver: Any) -> dict[str, Any]:
    return {
        "chat": chat_graph(saver),
        "trip": travel_agent(saver),
        "nested": subgraph_with_interrupt().compile(checkpointer=saver),
        "send": send_graph().compile(checkpointer=saver),
        "delta": delta_graph().compile(checkpointer=saver),
    }


def build_database(path: Path) -> dict[str, Any]:
    """Run real graphs on a SqliteSaver; returns the graphs (compiled on that saver)."""
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    graphs = _graphs(saver)
    chat = graphs["chat"]
    for text in ["hi", "plan a trip", "make it cheaper"]:
        chat.invoke({"messages": [("user", text)]}, cfg("chat"))
    # time travel: edit an old state, then replay from an older checkpoint (two branches)
    history = list(chat.get_state_history(cfg("chat")))
    chat.update_state(history[4].config, {"messages": [AIMessage("edited")]}, as_node="chatbot")
    chat.invoke(None, history[6].config)
    for city in ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao"]:
        graphs["trip"].invoke({"messages": [("user", f"weather in {city}?")]}, cfg("trip"))
    graphs["nested"].invoke({"x": 1, "log": []}, cfg("nested"))  # waits inside the subgraph
    graphs["nested"].invoke({"x": 10, "log": []}, cfg("nested-done"))
    graphs["nested"].invoke(Command(resume="5"), cfg("nested-done"))
    graphs["send"].invoke({"topics": ["a", "b", "c"], "results": []}, cfg("send"))
    for i in range(5):
        graphs["delta"].invoke(
            {"messages": [HumanMessage(content=f"u{i}", id=f"h-{i}")]},
            {**cfg("delta"), "metadata": {"run_id": str(uuid.uuid4())}},
        )
    graphs["_conn"] = conn
    graphs["_saver"] = saver
    return graphs


THREADS = ["chat", "delta", "nested", "nested-done", "send", "trip"]


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "checkpoints.db"
    graphs = build_database(path)
    graphs["_conn"].close()
    return path


def _views(graph: Any, thread_id: str) -> tuple[Any, Any, Any]:
    config = cfg(thread_id)
    state = graph.get_state(config, subgraphs=True)
    sub = [
        snapshot_view(t.state) if t.state is not None and not isinstance(t.state, dict) else None
        for t in state.tasks
    ]
    return snapshot_view(state), history_view(graph, config), sub


def test_import_gives_the_same_state_and_history(database: Path, tmp_path: Path) -> None:
    root = tmp_path / "chats"
    result = runner.invoke(app, ["--dir", str(root), "import", f"sqlite:///{database}"])
    assert result.exit_code == 0, result.output
    assert "imported 6 thread(s)" in result.stdout
    assert sorted(JsonlSaver(root).list_threads()) == THREADS

    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, check_same_thread=False) as conn:
        source_graphs = _graphs(SqliteSaver(conn))
        target_graphs = _graphs(JsonlSaver(root))
        for thread_id in THREADS:
            graph_name = "nested" if thread_id.startswith("nested") else thread_id
            expected = _views(source_graphs[graph_name], thread_id)
            assert _views(target_graphs[graph_name], thread_id) == expected, thread_id
            assert compare_with_sqlite(database, root, thread_id) == []

    saver = JsonlSaver(root)
    namespaces = {i.checkpoint_ns for i in saver.checkpoint_infos("nested")}
    assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)
    # the interrupted run resumes from the JSONL directory
    graph = subgraph_with_interrupt().compile(checkpointer=saver)
    assert graph.invoke(Command(resume="41"), cfg("nested"))["x"] == 42
    # the command line rebuilds the DeltaChannel's messages at every checkpoint, as the graph
    delta = delta_graph().compile(checkpointer=saver)
    for info in saver.checkpoint_infos("delta"):
        expected = delta.get_state(info.config).values.get("messages", [])
        got = browse.state_values(saver, info).get("messages", [])
        assert [(m.type, m.content) for m in got] == [(m.type, m.content) for m in expected]
    shown = json.loads(runner.invoke(app, ["-d", str(root), "show", "delta", "--json"]).stdout)
    assert [m["content"] for m in shown["messages"]][-2:] == ["u4", "echo 9"]
    # the DeltaChannel thread goes on, its history rebuilt from the migrated writes
    delta = delta_graph().compile(checkpointer=saver)
    delta.invoke({"messages": [HumanMessage(content="more", id="h-more")]}, cfg("delta"))
    contents = [m.content for m in delta.get_state(cfg("delta")).values["messages"]]
    assert contents[-2:] == ["more", "echo 11"]
    # the migrated directory is sound, line by line and decoded
    verified = runner.invoke(app, ["--dir", str(root), "verify"])
    assert verified.exit_code == 0, verified.output


def test_import_keeps_task_paths_and_writes(database: Path, tmp_path: Path) -> None:
    root = tmp_path / "chats"
    report = import_sqlite(database, root, threads=["send"])
    assert [t.thread_id for t in report.threads] == ["send"]
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    expected = sorted(
        conn.execute("SELECT task_id, task_path FROM writes WHERE thread_id='send'").fetchall()
    )
    conn.close()
    lines = [json.loads(x) for x in Path(JsonlSaver(root).path("send")).read_text().splitlines()]
    stored = sorted(
        (line["task"], line.get("path", ""))
        for line in lines
        if line["t"] == "writes"
        for _ in line["w"]
    )
    assert stored == expected
    assert any(path.startswith("~__pregel_push") for _, path in stored)  # the Send tasks


def test_import_refuses_existing_threads_unless_forced(database: Path, tmp_path: Path) -> None:
    root = tmp_path / "chats"
    assert (
        runner.invoke(app, ["-d", str(root), "import", str(database), "-t", "chat"]).exit_code == 0
    )
    before = Path(JsonlSaver(root).path("chat")).read_bytes()

    again = runner.invoke(app, ["-d", str(root), "import", f"sqlite:///{database}"])
    assert again.exit_code == 1
    assert "1 thread(s) already exist" in again.stderr and "--force" in again.stderr
    assert sorted(JsonlSaver(root).list_threads()) == ["chat"]  # nothing else was written

    forced = runner.invoke(
        app, ["-d", str(root), "import", f"sqlite:///{database}", "--force", "--check", "--json"]
    )
    assert forced.exit_code == 0, forced.output
    out = json.loads(forced.stdout)
    assert out["check"] == {"ok": True, "problems": []}
    assert {t["thread_id"]: t["replaced"] for t in out["threads"]}["chat"] is True
    saver = JsonlSaver(root)
    assert Path(saver.storage.backups("chat")[0]).read_bytes() == before
    assert not list(root.glob(".import-*"))  # the staging directory is gone


def test_import_errors(database: Path, tmp_path: Path) -> None:
    root = tmp_path / "chats"
    missing = runner.invoke(app, ["-d", str(root), "import", "sqlite:///nope.db"])
    assert missing.exit_code == 1 and "no such database file: nope.db" in missing.stderr
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 10)
    bad = runner.invoke(app, ["-d", str(root), "import", str(junk)])
    assert bad.exit_code == 1 and "not a SQLite database" in bad.stderr
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    other = runner.invoke(app, ["-d", str(root), "import", f"sqlite:///{empty}"])
    assert other.exit_code == 1 and "not a SqliteSaver database" in other.stderr
    unknown = runner.invoke(app, ["-d", str(root), "import", str(database), "-t", "ghost"])
    assert unknown.exit_code == 1 and "thread 'ghost' does not exist" in unknown.stderr
    assert f"in the database {database}" in unknown.stderr  # not the directory's threads
    folder = runner.invoke(app, ["-d", str(root), "import", str(tmp_path)])
    assert folder.exit_code == 1
    assert f"{tmp_path} is a directory, not a SqliteSaver database file" in folder.stderr
    verify_file = runner.invoke(app, ["-d", str(junk), "verify"])  # --dir names a file
    assert verify_file.exit_code == 1 and f"not a directory: {junk}" in verify_file.stderr
    scheme = runner.invoke(app, ["-d", str(root), "import", "postgres://x/y"])
    assert scheme.exit_code == 1 and "not a SQLite URL" in scheme.stderr
    with pytest.raises(SqliteSourceError):
        sqlite_path("sqlite:///:memory:")
    assert sqlite_path("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert sqlite_path("sqlite:///rel/x.db") == Path("rel/x.db")


def test_import_reads_the_database_without_changing_it(database: Path, tmp_path: Path) -> None:
    before = database.read_bytes()
    database.chmod(0o444)
    try:
        report = import_sqlite(f"sqlite:///{database}", tmp_path / "chats", threads=["trip"])
    finally:
        database.chmod(0o644)
    assert report.checkpoints > 0
    assert database.read_bytes() == before


def _types_database(path: Path) -> None:
    """A SqliteSaver thread whose state holds the app's own classes (tests/user_types.py)."""
    from . import user_types

    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = user_types.build().compile(checkpointer=SqliteSaver(conn))
        user_types.run(graph, cfg("types"))


def _cli(args: list[str], tmp_path: Path, *, in_app_folder: bool) -> Any:
    """The CLI in a fresh interpreter, as a user runs it: the ``langgraph-ctx`` console
    script from elsewhere (the app's types module, `tests.user_types`, not importable),
    or ``python -m langgraph_ctx.cli`` from the app's folder (the repository's root)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    package_only = tmp_path / "package-only"  # this tree's package, not its tests
    if not package_only.exists():
        package_only.mkdir()
        (package_only / "langgraph_ctx").symlink_to(root / "langgraph_ctx")
    env = {**os.environ, "PYTHONPATH": str(package_only)}
    if in_app_folder:
        command, cwd = [sys.executable, "-m", "langgraph_ctx.cli"], root
    else:
        command, cwd = [str(Path(sys.executable).parent / "langgraph-ctx")], tmp_path
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_import_refuses_values_whose_classes_this_process_cannot_make(tmp_path: Path) -> None:
    """`langgraph-ctx import` (a console script: the app's folder is not on its path) read
    the app's objects as their fields, stored them as dicts for good, and ``--check`` said
    every checkpoint matched (both sides read the same way). Now the import refuses, says
    which classes and how to run it, and writes nothing; with ``--module`` naming the app's
    module, run where it imports, the threads hold the app's objects and ``--check`` passes."""
    from . import user_types

    _types_database(tmp_path / "app.db")
    source = f"sqlite:///{tmp_path / 'app.db'}"
    out = tmp_path / "out"
    refused = _cli(["--dir", str(out), "import", source, "--check"], tmp_path, in_app_folder=False)
    assert refused.returncode == 1, refused.stderr
    assert "tests.user_types." in refused.stderr  # the first class it met
    assert "--module" in refused.stderr
    assert not (out / "types.jsonl").exists()
    plain = tmp_path / "plain"  # a class gone for good: its fields, when asked
    args = ["--dir", str(plain), "import", source, "--plain-data"]
    forced = _cli(args, tmp_path, in_app_folder=False)
    assert forced.returncode == 0, forced.stderr
    values = JsonlSaver(plain).get_tuple(cfg("types")).checkpoint["channel_values"]
    assert type(values["order"]) is dict
    args = ["--dir", str(out), "import", source, "--check", "--module", "tests.user_types"]
    done = _cli(args, tmp_path, in_app_folder=True)
    assert done.returncode == 0, done.stderr
    assert "every checkpoint matches" in done.stdout
    with sqlite3.connect(tmp_path / "app.db") as conn:
        graph = user_types.build().compile(checkpointer=SqliteSaver(conn))
        expected = user_types.canonical(graph.get_state(cfg("types")).values)
    graph = user_types.build().compile(checkpointer=JsonlSaver(out))
    assert user_types.canonical(graph.get_state(cfg("types")).values) == expected


def test_import_check_compares_with_what_the_import_read(tmp_path: Path) -> None:
    """``import --check`` read the database again after the import: an application still
    writing made it report its new checkpoints as missing and exit 1. The check now runs
    in the import's own read transaction (`import_sqlite(check=True)`)."""
    path = tmp_path / "live.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    app_graph = chat_graph(SqliteSaver(conn))
    for text in ["hi", "plan a trip"]:
        app_graph.invoke({"messages": [("user", text)]}, cfg("chat"))
    wrote: list[int] = []

    def the_app_writes_meanwhile(n: int) -> None:
        if not wrote:  # mid-import, on its own connection, committed
            app_graph.invoke({"messages": [("user", "and more")]}, cfg("chat"))
            wrote.append(n)

    report = import_sqlite(
        f"sqlite:///{path}", tmp_path / "out", check=True, progress=the_app_writes_meanwhile
    )
    assert wrote and report.problems == []
    later = compare_with_sqlite(f"sqlite:///{path}", tmp_path / "out", "chat")
    assert later and all(p.endswith(": missing") for p in later)  # what it wrote since
    conn.close()


def _one_value_database(path: Path, value: Any, serde: Any = None) -> Any:
    """A SqliteSaver thread ``t`` whose state's ``v`` is ``value``; what it reads back."""
    from typing_extensions import TypedDict

    class S(TypedDict):
        v: Any

    builder = StateGraph(S)
    builder.add_node("n", lambda s: {"v": s["v"]})
    builder.add_edge(START, "n")
    with sqlite3.connect(path, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn, serde=serde))
        graph.invoke({"v": value}, cfg("t"))
        return graph.get_state(cfg("t")).values["v"]


def test_import_takes_what_sqlite_saver_itself_reads_as_plain_data(tmp_path: Path) -> None:
    """A nested enum, which LangGraph's serializer names by its bare name and cannot find
    again, and a `datetime` subclass, whose ``fromisoformat`` it refuses to call, are
    plain data to `SqliteSaver` in the app itself: the import refused them even run from
    the app. Only a class whose module this process lacks is refused."""
    from . import user_types

    for name, value in (("n", user_types.Outer.Inner.X), ("s", user_types.Stamp(2026, 1, 2))):
        seen = _one_value_database(tmp_path / f"{name}.db", value)
        assert type(seen) is str  # SqliteSaver's own reading, in the app
        import_sqlite(f"sqlite:///{tmp_path / f'{name}.db'}", tmp_path / name)
        values = JsonlSaver(tmp_path / name).get_tuple(cfg("t")).checkpoint["channel_values"]
        assert values["v"] == seen


def test_an_encrypted_import_refuses_classes_this_process_cannot_make(tmp_path: Path) -> None:
    """With ``serde=EncryptedSerializer(...)`` the payloads' classes were not looked at
    (their type is ``msgpack+<cipher>``): the app's dataclass, its module not importable
    here, was imported as a dict, silently."""
    import os
    import subprocess
    import sys
    import textwrap

    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    from . import user_types

    cipher = textwrap.dedent(
        """
        class Xor:
            def encrypt(self, p): return "xor", bytes(b ^ 0x5A for b in p)
            def decrypt(self, n, c): return bytes(b ^ 0x5A for b in c)
        """
    )
    namespace: dict[str, Any] = {}
    exec(cipher, namespace)
    serde = EncryptedSerializer(namespace["Xor"]())
    _one_value_database(tmp_path / "e.db", user_types.Point(1.0, 2.0), serde)
    script = cipher + textwrap.dedent(
        f"""
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
        from langgraph_ctx.errors import ClassUnavailableError
        from langgraph_ctx.migrate import import_sqlite
        try:
            import_sqlite({f"sqlite:///{tmp_path / 'e.db'}"!r}, {str(tmp_path / "out")!r},
                          serde=EncryptedSerializer(Xor()))
        except ClassUnavailableError as exc:
            print("refused:", exc.classes)
        """
    )
    package_only = tmp_path / "package-only"
    package_only.mkdir()
    (package_only / "langgraph_ctx").symlink_to(Path(__file__).parent.parent / "langgraph_ctx")
    env = {**os.environ, "PYTHONPATH": str(package_only)}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "refused: ['tests.user_types.Point']" in proc.stdout
    assert not (tmp_path / "out" / "t.jsonl").exists()


@pytest.mark.parametrize(
    ("named", "why"),
    [
        (["os", "system"], "not a class"),
        (["subprocess", "Popen"], "not a data class"),
        (["antigravity", "X"], "cannot make"),
        (["langchain_core.utils", "guard_import"], "cannot make"),
        (["rich.style", "loads"], ""),  # pickle.loads, which rich re-exports
        (["enum", "Enum"], "otherwise than to look a member up"),
    ],
)
def test_import_never_calls_what_a_tampered_database_names(
    tmp_path: Path, named: list[str], why: str
) -> None:
    """`import` read the database with LangGraph's permissive serializer, which imports the
    module a value names and calls the name in it: a row holding ``os.system`` and a command
    ran the command; a library's re-export of ``pickle.loads`` or ``subprocess`` too. A
    value naming anything but a safe type or a data class of a loaded module is refused,
    before it is read, and nothing is imported."""
    import ormsgpack
    from langgraph.checkpoint.base import empty_checkpoint

    canary = tmp_path / "ran"
    db = tmp_path / "c.db"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        checkpoint: Any = {**empty_checkpoint(), "channel_values": {"x": 1}}
        checkpoint["channel_versions"] = {"x": 1}
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint,
                  {"source": "input", "step": -1}, {"x": 1})
    call = ormsgpack.Ext(1, ormsgpack.packb([*named, [f"touch {canary}"]]))
    evil = ormsgpack.packb({**empty_checkpoint(), "channel_values": {"x": call}})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE checkpoints SET type='msgpack', checkpoint=?", (evil,))
    result = runner.invoke(app, ["--dir", str(tmp_path / "out"), "import", f"sqlite:///{db}"])
    assert result.exit_code == 1 and why in result.stderr
    assert not canary.exists() and not (tmp_path / "out" / "t.jsonl").exists()


_APP_SERDES = """
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

class Xor:
    def encrypt(self, p): return "xor", bytes(b ^ 0x5A for b in p)
    def decrypt(self, n, c): return bytes(b ^ 0x5A for b in c)

class AppSerde(JsonPlusSerializer):  # an application's serializer: LangGraph's, subclassed
    pass

SERDES = {"encrypted": lambda: EncryptedSerializer(Xor()), "subclass": AppSerde}
"""


@pytest.mark.parametrize("plain_data", [False, True])
@pytest.mark.parametrize("kind", ["encrypted", "subclass"])
def test_import_with_the_apps_serializer_never_calls_what_a_tampered_database_names(
    tmp_path: Path, kind: str, plain_data: bool
) -> None:
    """`import_sqlite(serde=EncryptedSerializer(...))` read a row without a cipher (one the
    app wrote before it turned encryption on) with that serializer's inner, permissive one,
    and a subclass of LangGraph's serializer was not narrowed to what the vet let through:
    a value calling ``os.__setattr__`` (which the vet took for a name ``os`` lacks), or with
    ``plain_data`` ``timeit.timeit`` (a module not loaded), ran a shell command."""
    import subprocess
    import sys
    import textwrap

    import ormsgpack
    from langgraph.checkpoint.base import empty_checkpoint

    canary = tmp_path / "ran"
    if plain_data:
        kwargs = {"stmt": f"import os; os.system('touch {canary}')", "number": 1}
        evil: Any = ormsgpack.Ext(2, ormsgpack.packb(["timeit", "timeit", kwargs]))
    else:
        system = ormsgpack.Ext(0, ormsgpack.packb(["os", "__getattribute__", "system"]))
        evil = [
            ormsgpack.Ext(1, ormsgpack.packb(["os", "__setattr__", ["zz", system]])),
            ormsgpack.Ext(0, ormsgpack.packb(["os", "zz", f"touch {canary}"])),
        ]
    blob = ormsgpack.packb({**empty_checkpoint(), "channel_values": {"v": evil}})
    script = _APP_SERDES + textwrap.dedent(
        f"""
        import os, sqlite3, sys
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph_ctx.errors import SqliteSourceError
        from langgraph_ctx.migrate import import_sqlite
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from tests.test_cli_migrate import _one_value_database

        serde = SERDES[{kind!r}]()
        _one_value_database({str(tmp_path / "c.db")!r}, 1, serde)
        with sqlite3.connect({str(tmp_path / "c.db")!r}) as conn:
            conn.execute("UPDATE checkpoints SET type='msgpack', checkpoint=?", ({blob!r},))
        try:
            import_sqlite({str(tmp_path / "c.db")!r}, {str(tmp_path / "out")!r}, serde=serde,
                          plain_data={plain_data!r})
            print("imported")
        except SqliteSourceError as exc:
            print("refused:", exc)
        print("os.zz:", getattr(os, "zz", None), "timeit loaded:", "timeit" in sys.modules)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    assert "os.zz: None timeit loaded: False" in proc.stdout
    if plain_data:  # read as its fields, nothing imported
        assert "imported" in proc.stdout
    else:
        assert "refused:" in proc.stdout and ": a value names os.__" in proc.stdout


def test_import_refuses_pickled_values_and_serializers_it_cannot_vet(tmp_path: Path) -> None:
    """A serializer with ``pickle_fallback`` was swapped for one without, and the pickled
    value then refused with "pass the application's serializer" (which was passed);
    a serializer of the user's own was used as it is, unvetted."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from langgraph_ctx.errors import SqliteSourceError

    pickling = JsonPlusSerializer(pickle_fallback=True)
    _one_value_database(tmp_path / "p.db", 1 + 2j, pickling)
    with pytest.raises(SqliteSourceError, match="stored with pickle, which the import does not"):
        import_sqlite(f"sqlite:///{tmp_path / 'p.db'}", tmp_path / "out", serde=pickling)

    class Own:
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return JsonPlusSerializer().dumps_typed(obj)

        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return JsonPlusSerializer().loads_typed(data)

    _one_value_database(tmp_path / "o.db", 1, Own())
    with pytest.raises(SqliteSourceError, match="Own decodes by rules of its own"):
        import_sqlite(f"sqlite:///{tmp_path / 'o.db'}", tmp_path / "out", serde=Own())
    assert not (tmp_path / "out" / "t.jsonl").exists()
