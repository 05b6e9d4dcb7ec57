"""A serializer of the user's own gets every value, message and metadata field.

With `EncryptedSerializer` (or any `SerializerProtocol` that is not LangGraph's
plain `JsonPlusSerializer`) no state text may reach the file in the clear, and
a faulty serializer must be called (and fail) like in LangGraph's savers.
pycryptodome is not installed here, so the cipher is a small XOR one given to
LangGraph's real `EncryptedSerializer` through its `CipherProtocol`.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.graph import START, MessagesState, StateGraph

from tests.backends import Backend

SECRET = "the launch code is swordfish"


class XorCipher:
    """A stand-in cipher (`CipherProtocol`): XOR with a key, tagged ``xor``."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _xor(self, data: bytes) -> bytes:
        return bytes(b ^ self.key[i % len(self.key)] for i, b in enumerate(data))

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", self._xor(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return self._xor(ciphertext)


def _serde() -> EncryptedSerializer:
    return EncryptedSerializer(XorCipher(b"k3y-for-tests"))


def _graph(saver: Any) -> Any:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"noted: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node(bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


CONFIG = {"configurable": {"thread_id": "t"}, "metadata": {"note": SECRET}}


def test_an_encrypted_serializer_gets_everything(backend: Backend) -> None:
    graph = _graph(backend.saver(serde=_serde()))
    graph.invoke({"messages": [("user", SECRET)]}, CONFIG)
    out = graph.invoke({"messages": [("user", "and again")]}, CONFIG)
    log = backend.log_bytes("t").decode()
    for text in (SECRET, "swordfish", "noted", "and again", '"note"'):
        assert text not in log
    assert '"t":"msg"' not in log.replace(" ", "")  # no message line in the clear
    cold = _graph(backend.saver(serde=_serde())).get_state({"configurable": {"thread_id": "t"}})
    assert [m.content for m in cold.values["messages"]] == [m.content for m in out["messages"]]
    assert cold.values["messages"][0].content == SECRET
    assert cold.metadata["note"] == SECRET
    # the history reads back too, and the thread continues from a fresh process
    history = list(backend.saver(serde=_serde()).list({"configurable": {"thread_id": "t"}}))
    assert len(history) == 6 and all(h.metadata["note"] == SECRET for h in history)
    _graph(backend.saver(serde=_serde())).invoke({"messages": [("user", "3")]}, CONFIG)
    assert "noted: 3" not in backend.log_bytes("t").decode()


class Faulty:
    """A serializer that fails, as in LangGraph's ``test_checkpoint_errors``."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise ValueError("faulty serializer")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        raise ValueError("faulty serializer")


def test_a_faulty_serializer_is_called(backend: Backend) -> None:
    graph = _graph(backend.saver(serde=Faulty()))
    with pytest.raises(ValueError, match="faulty serializer"):
        graph.invoke({"messages": [("user", "hi")]}, CONFIG)


def test_an_encrypted_thread_read_without_its_serializer_says_so(backend: Backend) -> None:
    """Read without the serializer that wrote it (no key), an encrypted thread raised a
    `CorruptLogError` telling to fix or remove the line, or skip it; ``verify`` counted
    every line an error. The line is intact: the error says to open the saver with that
    serializer, and verify warns that it could not check it."""
    from langgraph_ctx.errors import CorruptLogError

    _graph(backend.saver(serde=_serde())).invoke({"messages": [("user", SECRET)]}, CONFIG)
    with pytest.raises(CorruptLogError) as info:
        backend.saver().get_tuple({"configurable": {"thread_id": "t"}})
    message = str(info.value)
    assert "'msgpack+xor'" in message and "open the saver with the serializer" in message
    assert "on_corrupt" not in message and "fix or remove" not in message
    if backend.name == "jsonl":
        from langgraph_ctx.cli.verify import verify_file

        path = backend._path("t")  # type: ignore[union-attr]
        report = verify_file(path)
        assert report.problems and all(p.severity == "warning" for p in report.problems)
        assert not verify_file(path, serde=_serde()).problems


def test_an_encrypted_sqlite_database_imports_encrypted(tmp_path: Any) -> None:
    """`import_sqlite(serde=EncryptedSerializer(...))` decrypted the database and wrote the
    JSONL in the clear; the CLI (no key) failed with a bare NotImplementedError."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from typer.testing import CliRunner

    from langgraph_ctx import JsonlSaver
    from langgraph_ctx.cli.app import app
    from langgraph_ctx.migrate import import_sqlite

    with sqlite3.connect(tmp_path / "enc.db", check_same_thread=False) as conn:
        _graph(SqliteSaver(conn, serde=_serde())).invoke({"messages": [("user", SECRET)]}, CONFIG)
    source = f"sqlite:///{tmp_path / 'enc.db'}"
    import_sqlite(source, tmp_path / "out", serde=_serde())
    log = (tmp_path / "out" / "t.jsonl").read_text()
    assert SECRET not in log and "noted" not in log
    state = _graph(JsonlSaver(tmp_path / "out", serde=_serde())).get_state(CONFIG)
    assert state.values["messages"][0].content == SECRET
    refused = CliRunner().invoke(app, ["--dir", str(tmp_path / "cli"), "import", source])
    assert refused.exit_code == 1
    assert "'msgpack+xor'" in refused.stderr and "serde=" in refused.stderr
    assert not (tmp_path / "cli" / "t.jsonl").exists()


def test_rewrites_keep_an_encrypted_threads_values(backend: Backend) -> None:
    """A rewrite keeps what the process cannot make as stored; with a serializer of the
    user's own that handed a kept-as-stored value to it: `prune` raised `TypeError`, and a
    `revert` that carries a kept checkpoint's late writes lost them after the cut."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver = backend.saver(serde=_serde())
    checkpoint: Any = {**empty_checkpoint(), "channel_values": {"v": 1}}
    checkpoint["channel_versions"] = {"v": 1}
    parent = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"v": 1})
    child = saver.put(parent, {**checkpoint, "id": str(uuid6())}, {"source": "loop", "step": 0}, {})
    saver.put_writes(parent, [("v", 2), ("note", SECRET)], "late-task")  # after the child
    backend.saver(serde=_serde()).revert("t", child["configurable"]["checkpoint_id"])
    writes = backend.saver(serde=_serde()).get_tuple(parent).pending_writes
    assert [(w[1], w[2]) for w in writes] == [("v", 2), ("note", SECRET)]
    backend.saver(serde=_serde()).prune(["t"], strategy="keep_latest")
    head = backend.saver(serde=_serde()).get_tuple({"configurable": {"thread_id": "t"}})
    assert head.checkpoint["channel_values"] == {"v": 1}
    assert SECRET not in backend.log_bytes("t").decode()


def _without_the_app(backend: Backend, call: str) -> None:
    """Run ``call`` (``saver`` bound, with the encrypting serializer) in a fresh interpreter
    that never imports the app's types module, as a maintenance job would."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\nfrom tests.test_custom_serde import _serde\n"
        f"saver = {backend.saver_code()[:-1]}, serde=_serde())\n{call}\n"
        "assert 'tests.user_types' not in sys.modules\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root
    )
    assert proc.returncode == 0, proc.stderr


def test_a_rewrite_where_the_apps_types_are_not_loaded_keeps_an_encrypted_threads_values(
    backend: Backend,
) -> None:
    """With a serializer of the user's own, a rewrite (`prune`, a `revert` carrying late
    writes) decoded and encoded every value again: run where the app's module does not
    import (a maintenance script), its objects were stored as dicts for good, encrypted."""

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    from . import user_types

    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver = backend.saver(serde=_serde())
    order = user_types.Order(id=1, color=user_types.Color.RED)
    checkpoint: Any = {**empty_checkpoint(), "channel_values": {"v": order}}
    checkpoint["channel_versions"] = {"v": 1}
    parent = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"v": 1})
    child = saver.put(parent, {**checkpoint, "id": str(uuid6())}, {"source": "loop", "step": 0}, {})
    saver.put_writes(parent, [("v", order)], "late-task")  # saved after the child
    _without_the_app(backend, f"saver.revert('t', {child['configurable']['checkpoint_id']!r})")
    assert backend.saver(serde=_serde()).get_tuple(parent).pending_writes[0][2] == order
    _without_the_app(backend, "saver.prune(['t'], strategy='keep_latest')")
    head = backend.saver(serde=_serde()).get_tuple({"configurable": {"thread_id": "t"}})
    assert len(list(backend.saver(serde=_serde()).list(config))) == 1
    assert head.checkpoint["channel_values"] == {"v": order}


def test_an_encrypted_delta_thread_keeps_its_history_through_a_prune(backend: Backend) -> None:
    """Under a serializer of the user's own the metadata is serialized, so the index saw no
    `DeltaChannel` needing history: ``keep_latest`` kept no ancestors and folded nothing,
    and the head's channel read as empty (``delete_for_runs`` likewise)."""
    from .test_retention import _AsTheServerSeesIt, _delta_node, _DeltaState

    builder = StateGraph(_DeltaState)
    builder.add_node("node", _delta_node)
    builder.add_edge(START, "node")
    saver = backend.saver(serde=_serde())
    cfg: Any = {"configurable": {"thread_id": "t"}}
    for i in range(5):
        builder.compile(checkpointer=saver).invoke({"messages": [("user", f"t{i}")]}, cfg)
    before = len(list(saver.list(cfg)))
    saver.prune(["t"], strategy="keep_latest")
    assert len(list(saver.list(cfg))) < before
    expected = [f"t{i}" for i in range(5)]
    fresh = backend.saver(serde=_serde())
    for reader in (saver, fresh, _AsTheServerSeesIt(fresh)):
        assert builder.compile(checkpointer=reader).get_state(cfg).values["items"] == expected


@pytest.mark.parametrize("where", ["app", "elsewhere"])
def test_a_thread_begun_unencrypted_keeps_its_values_through_a_prune(
    backend: Backend, where: str
) -> None:
    """An app that turns an `EncryptedSerializer` on keeps its threads: the saver reads the
    lines written before. A rewrite (`prune`, sweeps, `delete_for_runs`) then wrote a value
    of those lines that holds what the process cannot make: an app's model, where its module
    does not import, as its class name in place of a payload (the thread no longer read,
    no backup); bytes inside a dict, or a dict of models, raised `TypeError` (msgpack cannot
    encode the kept value), in the app's own process too. Such a value is written back as
    it was stored."""

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.types import Interrupt

    from . import user_types

    order = user_types.Order(id=1, color=user_types.Color.RED)
    values = {
        "nested_bytes": {"blob": b"\x00raw", "n": 1},
        "model": order,
        "dict_of_models": {"o": order, "p": user_types.Point(1.0, 2.0)},
        "bytes_in_a_dataclass": user_types.Point(b"\x00raw", 2.0),  # type: ignore[arg-type]
        "bytes_in_extra_fields": user_types.Loose(name="x", blob=b"\x00raw"),
        "bytes_in_a_v1_model": user_types.LegacyProfile.construct(name=b"\x00raw", visits=1),
    }
    plain, encrypting = backend.saver(), backend.saver(serde=_serde())  # the app, then with it
    for tid, value in values.items():
        config: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        checkpoint: Any = {**empty_checkpoint(), "channel_values": {"a": value, "b": 0}}
        checkpoint["channel_versions"] = {"a": 1, "b": 1}
        parent = plain.put(config, checkpoint, {"source": "input", "step": -1}, {"a": 1, "b": 1})
        later = {**checkpoint, "id": str(uuid6()), "channel_values": {"a": value, "b": 1}}
        later["channel_versions"] = {"a": 1, "b": 2}
        head = encrypting.put(parent, later, {"source": "loop", "step": 0}, {"b": 2})
        asked = [Interrupt(value=value, id="i1")]  # a pending interrupt, written unencrypted
        backend.saver().put_writes(head, [("__interrupt__", asked)], "asking")

    if where == "app":
        encrypting.prune(sorted(values), strategy="keep_latest")
    else:  # a maintenance job, where the app's module does not import
        _without_the_app(backend, f"saver.prune({sorted(values)!r}, strategy='keep_latest')")
    reader = backend.saver(serde=_serde())
    for tid, value in values.items():
        head = reader.get_tuple({"configurable": {"thread_id": tid}})
        assert head is not None and head.checkpoint["channel_values"] == {"a": value, "b": 1}
        assert len(list(reader.list({"configurable": {"thread_id": tid}}))) == 1
        assert [w[1:] for w in head.pending_writes] == [
            ("__interrupt__", [Interrupt(value=value, id="i1")])
        ]
