"""Thread ids from users and tampered files: nothing escapes root, nothing runs."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import warnings
from decimal import Decimal
from pathlib import Path

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_ctx import CorruptLogError, JsonlSaver
from langgraph_ctx.codec import dumps_line
from langgraph_ctx.storage.thread_ids import decode_thread_id, encode_thread_id

from .test_saver_graphs import chat_graph

HOSTILE_IDS = [
    "../../etc/passwd",
    "/etc/passwd",
    "a/b/c",
    "..",
    ".",
    ".hidden",
    "nul\x00byte",
    "back\\slash",
    "x" * 1000,
    "é" * 300,
    "crème brûlée 🍮",
    "%2F",
    "~abc",
    "",
    "CON",
    " spaced out ",
    "line\nbreak",
    "tab\there",
    "😀/../😀",
    42,
]


def put_one(saver: JsonlSaver, thread_id, text: str = "hello") -> None:
    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": 1}
    cp["channel_values"] = {"messages": [AIMessage(content=text, id="m1")]}
    saver.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        cp,
        {"step": 0},
        {"messages": 1},
    )


def test_any_thread_id_maps_to_one_file_inside_root(tmp_path):
    root = tmp_path / "root"
    saver = JsonlSaver(root)
    for thread_id in HOSTILE_IDS:
        put_one(saver, thread_id, f"for {thread_id!r}")
    # nothing outside root, no subdirectories apart from the lock directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    entries = [p for p in root.iterdir() if p.name != ".locks"]
    assert all(p.is_file() and p.parent == root for p in entries)
    assert len(entries) == len(HOSTILE_IDS)
    assert all(len(p.name.encode()) <= 255 for p in entries)
    # listing gives the original ids back (ints come back as their string)
    assert sorted(saver.list_threads()) == sorted(str(t) for t in HOSTILE_IDS)
    for thread_id in HOSTILE_IDS:
        tup = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert tup.checkpoint["channel_values"]["messages"][0].content == f"for {thread_id!r}"
        assert tup.config["configurable"]["thread_id"] == thread_id


@pytest.mark.parametrize("thread_id", [t for t in HOSTILE_IDS if isinstance(t, str)])
def test_thread_id_encoding_round_trips(thread_id):
    name = encode_thread_id(thread_id)
    assert "/" not in name and "\x00" not in name and name not in (".", "..")
    assert not name.startswith(".")
    if not name.startswith("~"):
        assert decode_thread_id(name) == thread_id


@pytest.mark.parametrize("bad", [None, 1.5, b"bytes", True])
def test_unusable_thread_ids_are_rejected(saver, bad):
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple({"configurable": {"thread_id": bad}})


def test_foreign_files_in_root_are_not_threads(root, saver):
    put_one(saver, "real")
    (root / "notes.jsonl").write_text("{}\n")  # a valid name: it decodes to 'notes'
    (root / "bad%zz.jsonl").write_text("{}\n")  # not a name this package writes
    (root / "README.md").write_text("hi")
    assert sorted(saver.list_threads()) == ["notes", "real"]


# ------------------------------------------------------------ tampering


def tamper_value(saver: JsonlSaver, enc) -> None:
    """Replace the stored messages value of thread 't' with ``enc``."""
    path = Path(saver.path("t"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for obj in lines:
        if obj["t"] == "ckpt":
            obj["values"]["messages"] = [1, enc]
    path.write_bytes(b"".join(dumps_line(o) for o in lines))


def ext(code: int, payload) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(payload))


def test_serialized_payload_cannot_run_code(tmp_path, caplog):
    marker = tmp_path / "pwned"
    saver = JsonlSaver(tmp_path / "root")
    put_one(saver, "t")
    # LangGraph's msgpack "call this constructor" extension, pointed at os.system
    evil = ormsgpack.packb(ext(1, ["os", "system", [f"touch {marker}"]]))
    tamper_value(saver, {"serde": ["msgpack", base64.b64encode(evil).decode()]})
    with caplog.at_level(logging.WARNING):
        tup = JsonlSaver(tmp_path / "root").get_tuple({"configurable": {"thread_id": "t"}})
    assert not marker.exists()
    assert "Blocked deserialization of os.system" in caplog.text
    assert not callable(tup.checkpoint["channel_values"]["messages"])


def test_pickle_payloads_are_refused(tmp_path):
    saver = JsonlSaver(tmp_path)
    put_one(saver, "t")
    tamper_value(saver, {"serde": ["pickle", base64.b64encode(b"cos\nsystem\n").decode()]})
    with pytest.raises(CorruptLogError, match="refusing a pickle payload"):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


def test_models_outside_the_package_are_refused(tmp_path):
    saver = JsonlSaver(tmp_path)
    put_one(saver, "t")
    tamper_value(saver, {"model": ["os", "system"], "json": {"command": "touch x"}})
    with pytest.raises(CorruptLogError, match=r"refusing model os\.system: a class tag rebuilds"):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        ({"type": "os.system", "content": "touch x"}, "unknown message type"),
        ({"type": "ai", "content": 12}, "invalid AIMessage"),
        ({"type": "tool", "content": "x"}, "tool_call_id"),
        ("not an object", "must be a JSON object"),
    ],
)
def test_messages_are_rebuilt_only_as_langchain_messages(tmp_path, msg, reason):
    saver = JsonlSaver(tmp_path)
    put_one(saver, "t")
    path = Path(saver.path("t"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for obj in lines:
        if obj["t"] == "msg":
            obj["msg"] = msg
    path.write_bytes(b"".join(dumps_line(o) for o in lines))
    with pytest.raises(CorruptLogError, match=reason):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


def test_lc_constructor_dicts_in_message_fields_stay_data(tmp_path):
    """LangChain's load() would revive these; the codec never calls it."""
    saver = JsonlSaver(tmp_path)
    evil = {"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {}}
    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": 1}
    cp["channel_values"] = {"messages": [AIMessage(content="x", additional_kwargs={"evil": evil})]}
    saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {"messages": 1})
    tup = JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})
    assert tup.checkpoint["channel_values"]["messages"][0].additional_kwargs["evil"] == evil


@pytest.mark.parametrize(
    "enc",
    [
        {"msgs": [0], "keep": 1, "base": 999},  # forward / missing base line
        {"msgs": ["zero"]},
        {"msg": 12345},
        {"dict": []},
        {"mystery": 1},
    ],
)
def test_bad_references_are_reported(tmp_path, enc):
    saver = JsonlSaver(tmp_path)
    put_one(saver, "t")
    tamper_value(saver, enc)
    with pytest.raises(CorruptLogError):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})


def test_a_line_nested_too_deep_is_a_corrupt_line(tmp_path):
    """A line (checksum intact) nested deeper than orjson reads fell back to ``json``,
    whose `RecursionError` escaped: not `on_corrupt="skip"`, nor `verify`, read past it."""
    from langgraph_ctx.codec.lines import seal_line

    saver = JsonlSaver(tmp_path)
    put_one(saver, "t")
    put_one(saver, "t", "again")
    log = Path(saver.path("t"))
    lines = log.read_bytes().splitlines()
    deep = b'{"v":2,"t":"writes","x":' + b"[" * 3000 + b"]" * 3000 + b"}"
    log.write_bytes(b"\n".join([*lines, seal_line(deep)]) + b"\n")
    with pytest.raises(CorruptLogError, match="nested too deep"):
        JsonlSaver(tmp_path).get_tuple({"configurable": {"thread_id": "t"}})
    skipping = JsonlSaver(tmp_path, on_corrupt="skip")
    with pytest.warns(UserWarning, match="nested too deep"):
        head = skipping.get_tuple({"configurable": {"thread_id": "t"}})
    assert head is not None


@dataclasses.dataclass
class Point:
    """Not a plain data class (it runs code when made): rebuilt only when allowed."""

    x: int
    y: int

    def __post_init__(self) -> None:
        self.y = int(self.y)


@dataclasses.dataclass
class PlainPoint:
    x: int
    y: int


def test_allowed_types_extend_the_safe_list(tmp_path):
    cp = empty_checkpoint()
    cp["channel_versions"] = {"a": 1, "b": 1, "c": 1}
    cp["channel_values"] = {"a": Point(1, 2), "b": Decimal("1.5"), "c": PlainPoint(3, 4)}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    JsonlSaver(tmp_path).put(config, cp, {}, {"a": 1, "b": 1, "c": 1})
    strict = JsonlSaver(tmp_path).get_tuple(config).checkpoint["channel_values"]
    assert strict["b"] == Decimal("1.5")  # on LangGraph's safe list
    assert strict["a"] == {"x": 1, "y": 2}  # not allowed: left as plain data
    assert strict["c"] == PlainPoint(3, 4)  # a plain data class the app loaded
    allowed = JsonlSaver(tmp_path, allowed_types=[Point]).get_tuple(config)
    assert allowed.checkpoint["channel_values"]["a"] == Point(1, 2)


def test_graph_run_on_hostile_thread_id(tmp_path):
    saver = JsonlSaver(tmp_path / "root")
    graph = chat_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "../../../tmp/evil"}}
    graph.invoke({"messages": [("user", "hi")]}, config)
    assert (
        saver.fork("../../../tmp/evil", "../sibling")["configurable"]["thread_id"] == "../sibling"
    )
    assert sorted(saver.list_threads()) == ["../../../tmp/evil", "../sibling"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_the_package_models_are_on_the_default_allowlist():
    """Every pydantic model of langgraph_ctx (the CLI aside) can be read back by default,
    even nested inside a value that goes through LangGraph's serializer."""
    import importlib
    import pkgutil

    from pydantic import BaseModel

    import langgraph_ctx
    from langgraph_ctx.codec.values import PACKAGE_MODELS

    found = set()
    for info in pkgutil.walk_packages(langgraph_ctx.__path__, "langgraph_ctx."):
        if info.name.startswith("langgraph_ctx.cli") or info.name.endswith(
            ("middleware", "testing")
        ):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == info.name
            ):
                found.add((value.__module__, value.__qualname__))
    assert found == set(PACKAGE_MODELS)


def test_a_package_model_nested_in_a_serialized_value_comes_back(tmp_path):
    from langgraph_ctx import ContextBudget

    budget = ContextBudget.preset("fast")
    cp = empty_checkpoint()
    cp["channel_versions"] = {"odd": 1}
    cp["channel_values"] = {"odd": {1: budget}}  # int keys: not JSON, so the serializer
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    JsonlSaver(tmp_path).put(config, cp, {}, {"odd": 1})
    got = JsonlSaver(tmp_path).get_tuple(config).checkpoint["channel_values"]["odd"]
    assert got == {1: budget}


def _chat_thread_with_an_object_version(tmp_path: Path, where: str) -> tuple[int, int]:
    """A three-turn chat whose checkpoint line (the parent of one that appends to its
    ``messages``) has an object where a version belongs, in its ``versions`` or in a
    node's ``seen``, re-sealed: (that line, the line of the first checkpoint).
    """
    saver = JsonlSaver(tmp_path)
    graph = chat_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(content=f"hi {i}")]}, config)
    log = Path(saver.path("t"))
    lines = log.read_bytes().splitlines()
    objs = [json.loads(raw) for raw in lines]
    child = next(
        i for i, o in enumerate(objs)
        if i > len(objs) // 2 and o["t"] == "ckpt"
        and "append" in json.dumps(o.get("values", {}).get("messages", []))
    )  # fmt: skip
    parent = objs[child]["parent"] - 1
    obj = dict(objs[parent])
    obj.pop("c")
    if where == "versions":
        obj["versions"] = {"messages": {"not": "a version"}}
    else:
        obj["seen"] = {"chatbot": {"messages": {"not": "a version"}}}
    lines[parent] = dumps_line(obj).rstrip(b"\n")
    log.write_bytes(b"\n".join(lines) + b"\n")
    first = next(i for i, o in enumerate(objs) if o["t"] == "ckpt")
    return parent + 1, first + 1


@pytest.mark.parametrize("where", ["versions", "seen"])
def test_an_object_for_a_version_is_a_corrupt_line(tmp_path, where):
    """A line holding an object where a version belongs was taken; the index failed
    only when it looked that version up for a later line, with a `CorruptLogError` it
    did not record: ``on_corrupt="skip"`` raised instead of skipping, and a second call
    on the same saver used the index built up to there (review 39)."""
    bad, _ = _chat_thread_with_an_object_version(tmp_path, where)
    config = {"configurable": {"thread_id": "t"}}
    saver = JsonlSaver(tmp_path)
    for _ in range(2):  # and again: the error is the index's, not half an index
        with pytest.raises(CorruptLogError, match="a version must be a string or a number") as info:
            saver.get_tuple(config)
        assert info.value.line == bad
    with pytest.raises(CorruptLogError) as info:
        list(saver.list(config))
    assert info.value.line == bad
    skipping = JsonlSaver(tmp_path, on_corrupt="skip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head = skipping.get_tuple(config)  # the lines after it, on it, are skipped too
    assert f":{bad}: " in str(caught[0].message), [str(w.message) for w in caught]
    # The checkpoints before the bad line, as a saver reads them when the log ends there.
    log = Path(skipping.path("t"))
    kept = log.read_bytes().splitlines()[: bad - 1]
    short = tmp_path / "short"
    short.mkdir()
    (short / log.name).write_bytes(b"\n".join(kept) + b"\n")
    expected = JsonlSaver(short).get_tuple(config)
    assert head is not None and expected is not None
    assert head.checkpoint["id"] == expected.checkpoint["id"]
    assert head.checkpoint["channel_values"] == expected.checkpoint["channel_values"]


@pytest.mark.parametrize("mode", ["raise", "skip"])
def test_a_corrupt_log_error_met_while_a_line_is_indexed_is_that_lines(
    tmp_path, monkeypatch, mode
):
    """Whatever check deeper down raises `CorruptLogError` while a line is indexed, the
    line is corrupt as if its own parse had failed: recorded on the index (every later
    call raises it), or skipped with a warning; never half an index kept."""
    from langgraph_ctx.saver import _index

    saver = JsonlSaver(tmp_path)
    graph = chat_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        graph.invoke({"messages": [HumanMessage(content=f"hi {i}")]}, config)
    resolve = _index._Index.resolve
    calls = []

    def failing(self, ns, channel, version, at):
        calls.append(at)
        if len(calls) == 2:
            raise self.corrupt(None, "a check deeper down failed")
        return resolve(self, ns, channel, version, at)

    monkeypatch.setattr(_index._Index, "resolve", failing)
    reader = JsonlSaver(tmp_path, on_corrupt=mode)
    if mode == "raise":
        for _ in range(2):
            with pytest.raises(CorruptLogError, match="a check deeper down failed") as info:
                reader.get_tuple(config)
            assert info.value.line is not None
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head = reader.get_tuple(config)
    assert "a check deeper down failed" in str(caught[0].message)
    assert head is not None
    assert reader.get_tuple(config).checkpoint["id"] == head.checkpoint["id"]


@pytest.mark.parametrize(
    ("versions", "seen", "match"),
    [
        ({"a": {"v": 1}}, {}, r"channel_versions\['a'\]: a channel version must be"),
        ({"a": 2}, {"n": None}, r"versions_seen\['n'\] must map channels to versions"),
        ({"a": 2}, {"n": {"a": [1]}}, r"versions_seen\['n'\]\['a'\]: a channel version"),
    ],
)
def test_a_put_of_what_no_reader_takes_is_refused_before_it_is_written(
    tmp_path, versions, seen, match
):
    """An object where a version belongs, or a node's ``versions_seen`` that is not an
    object, raised only once the line was in the log (or not at all): every later read
    of the thread failed, its good checkpoints too. `InMemorySaver` refuses an
    unhashable version with `TypeError` and stores nothing; so does the saver now."""
    saver = JsonlSaver(tmp_path)
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    good = empty_checkpoint()
    good["channel_versions"] = {"a": 1}
    good["channel_values"] = {"a": "v1"}
    saver.put(config, good, {"step": 0}, {"a": 1})
    log = Path(saver.path("t"))
    before = log.read_bytes()
    bad = empty_checkpoint()
    bad["channel_versions"] = versions
    bad["versions_seen"] = seen
    bad["channel_values"] = {"a": "v2"}
    with pytest.raises(TypeError, match=match):
        saver.put(config, bad, {"step": 1}, {"a": versions["a"]})
    assert log.read_bytes() == before
    for reader in (saver, JsonlSaver(tmp_path)):
        head = reader.get_tuple({"configurable": {"thread_id": "t"}})
        assert head is not None and head.checkpoint["id"] == good["id"]
