"""A tampered log builds no class outside the codec's rule and runs nothing (issue 12).

Canary classes below are loaded (as an application's would be) and write a file
when their code runs: ``__init__``, ``__new__``, ``model_post_init``,
``_missing_``. Every tag that could name them is planted in every kind of
line (channel values, writes, metadata, checkpoint extras, message bodies), on
both backends; reading must never write the canary file, and must end in a
`CorruptLogError` or in plain data with a warning.

The tamper helper rewrites the stored lines as an attacker with write access to
the store would (a per-line checksum is no signature: such an attacker
recomputes it too).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import BaseModel, field_validator

from langgraph_ctx.codec.lines import dumps_line
from langgraph_ctx.errors import CorruptLogError

from .backends import Backend

CANARY: list[Path] = []
"""Where the canaries write when their code runs (set per test)."""


def fire(who: str) -> None:
    for path in CANARY:
        path.write_text(who)


class CanaryModel(BaseModel):
    x: int = 0

    def __init__(self, **data: Any) -> None:
        fire("CanaryModel.__init__")
        super().__init__(**data)


class CanaryPostInit(BaseModel):
    x: int = 0

    def model_post_init(self, context: Any) -> None:
        fire("CanaryPostInit.model_post_init")


class CanaryValidated(BaseModel):
    """A plain data class (rule b) whose validator would fire: rebuilt without validation."""

    x: int = 0

    @field_validator("x")
    @classmethod
    def check(cls, value: int) -> int:
        fire("CanaryValidated.check")
        return value


@dataclasses.dataclass
class CanaryData:
    x: int = 0

    def __init__(self, x: int = 0) -> None:
        fire("CanaryData.__init__")
        self.x = x


class _Pair(NamedTuple):
    x: int


class CanaryTuple(_Pair):
    def __new__(cls, *args: Any, **kwargs: Any) -> CanaryTuple:
        fire("CanaryTuple.__new__")
        return super().__new__(cls, *args, **kwargs)


class CanaryEnum(enum.Enum):
    A = "a"

    @classmethod
    def _missing_(cls, value: object) -> Any:
        fire("CanaryEnum._missing_")
        return cls.A


class _CanaryMeta(enum.EnumMeta):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        fire("_CanaryMeta.__call__")
        return super().__call__(*args, **kwargs)


class CanaryMetaEnum(enum.Enum, metaclass=_CanaryMeta):
    """An enum whose class call (how LangGraph's decoder makes a member) runs its code."""

    A = "a"


class CanaryBase(enum.Enum):
    """A member-less enum: a call with a name and members makes a new enum class, running
    these hooks."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last: list[Any]) -> Any:
        fire("CanaryBase._generate_next_value_")
        return name

    def __init_subclass__(cls, **kwargs: Any) -> None:
        fire("CanaryBase.__init_subclass__")
        super().__init_subclass__(**kwargs)


class CanaryStatus(enum.Enum):
    """A plain enum with members and a classmethod a decoder could be made to call."""

    OPEN = "open"

    @classmethod
    def model_construct(cls, **kwargs: Any) -> Any:
        fire("CanaryStatus.model_construct")
        return cls.OPEN

    @classmethod
    def construct(cls, **kwargs: Any) -> Any:
        fire("CanaryStatus.construct")
        return cls.OPEN


class _CanaryLookupMeta(enum.EnumMeta):
    def __getattribute__(cls, name: str) -> Any:
        if name == "_value2member_map_":
            fire("_CanaryLookupMeta.__getattribute__")
        return super().__getattribute__(name)


class CanaryLookupEnum(enum.Enum, metaclass=_CanaryLookupMeta):
    """The standard metaclass call, a metaclass of its own that runs on every lookup."""

    A = "a"


MOD = __name__
class _CanaryEqMeta(type):
    def __eq__(cls, other: object) -> bool:
        fire("_CanaryEqMeta.__eq__")
        return type.__eq__(cls, other)  # type: ignore[no-any-return]

    __hash__ = type.__hash__


class CanaryEq(metaclass=_CanaryEqMeta):
    """A class whose metaclass compares with code of its own: looking for a base in its
    MRO with ``in`` ran it (review 21)."""


CANARIES = (CanaryModel, CanaryPostInit, CanaryData, CanaryTuple, CanaryEnum)


@pytest.fixture
def canary(tmp_path: Path):
    path = tmp_path / "canary-fired"
    CANARY[:] = [path]
    yield path
    CANARY.clear()


# ------------------------------------------------------------------ payloads


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def ext(code: int, payload: Any) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(payload))


def msgpack(code: int, payload: Any) -> list[str]:
    """A ``serde`` payload as LangGraph's serializer writes one of its ext types."""
    return ["msgpack", b64(ormsgpack.packb(ext(code, payload)))]


def lc_json(lc: int, name: str) -> list[str]:
    """A ``serde`` json payload with LangChain's constructor envelope."""
    envelope = {"lc": lc, "type": "constructor", "id": [*MOD.split("."), name], "kwargs": {"x": 1}}
    return ["json", b64(json.dumps(envelope).encode())]


def msgpack_many(*exts: tuple[int, Any]) -> list[str]:
    """A ``serde`` payload holding several of LangGraph's ext values in a list."""
    return ["msgpack", b64(ormsgpack.packb([ext(code, payload) for code, payload in exts]))]


SERDE_PAYLOADS = {
    "json-lc1-model": lc_json(1, "CanaryModel"),
    "json-lc2-model": lc_json(2, "CanaryModel"),
    "json-lc2-data": lc_json(2, "CanaryData"),
    "msgpack-pydantic-v2": msgpack(5, [MOD, "CanaryModel", {"x": 1}, "model_validate_json"]),
    "msgpack-pydantic-v1": msgpack(4, [MOD, "CanaryModel", {"x": 1}]),
    "msgpack-post-init": msgpack(5, [MOD, "CanaryPostInit", {"x": 1}, "model_validate_json"]),
    "msgpack-kwargs": msgpack(2, [MOD, "CanaryData", {"x": 1}]),
    "msgpack-args": msgpack(1, [MOD, "CanaryTuple", [1]]),
    "msgpack-one-arg": msgpack(0, [MOD, "CanaryEnum", "nope"]),
    "msgpack-one-arg-known": msgpack(0, [MOD, "CanaryEnum", "a"]),
    "msgpack-one-arg-meta": msgpack(0, [MOD, "CanaryMetaEnum", "a"]),
    "msgpack-one-arg-model": msgpack(0, [MOD, "CanaryModel", 1]),
    "msgpack-one-arg-lookup-meta": msgpack(0, [MOD, "CanaryLookupEnum", "a"]),
    # a member once (code 0), then the same enum called to make a class (code 1)
    "msgpack-enum-made-anew": msgpack_many(
        (0, [MOD, "CanaryBase", "x"]), (1, [MOD, "CanaryBase", ["Evil", ["A", "B"]]])
    ),
    # a member (code 0) admits it; then its name hidden in nested exts (a blocked class's
    # argument is a string), a model call of it: no class call but one-argument lookups
    "msgpack-enum-name-hidden": msgpack_many(
        (0, [MOD, "CanaryStatus", "open"]),
        (5, [ext(0, ["no_such_module", "X", MOD]), ext(0, ["no_such_module", "X",
             "CanaryStatus"]), {"x": 1}, None]),
    ),
    "msgpack-enum-base-made-anew": msgpack_many(
        (0, ["enum", "Enum", "x"]), (1, ["enum", "Enum", ["Evil", ["A", "B"]]])
    ),
    "msgpack-method": msgpack(3, [MOD, "CanaryModel", '{"x": 1}', "model_validate_json"]),
    "msgpack-pydantic-v2-meta-eq": msgpack(
        5, [MOD, "CanaryEq", {"type": "human", "content": "hi"}, "model_validate_json"]
    ),
    "msgpack-one-arg-meta-eq": msgpack(0, [MOD, "CanaryEq", "a"]),
}

VALUE_TAGS = {
    "model": {"model": [MOD, "CanaryModel"], "json": {"x": 1}},
    "model-fields": {"model": [MOD, "CanaryModel"], "fields": {"x": 1}},
    "model-post-init": {"model": [MOD, "CanaryPostInit"], "json": {"x": 1}},
    "dataclass": {"dataclass": [MOD, "CanaryData"], "json": {"x": 1}},
    "namedtuple": {"namedtuple": [MOD, "CanaryTuple"], "json": {"x": 1}},
    "enum-missing": {"enum": [MOD, "CanaryEnum"], "value": "nope"},
    "kind-mismatch": {"dataclass": [MOD, "CanaryModel"], "json": {"x": 1}},
    "nested": {"list": [{"dict": {"a": {"model": [MOD, "CanaryModel"], "json": {}}}}]},
    "model-meta-eq": {"model": [MOD, "CanaryEq"], "json": {}},
    "enum-meta-eq": {"enum": [MOD, "CanaryEq"], "value": "a"},
    **{f"serde-{k}": {"serde": v} for k, v in SERDE_PAYLOADS.items()},
}


# -------------------------------------------------------------- the thread


CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def seed(backend: Backend) -> None:
    """One checkpoint (a message and a value), metadata, and one write."""
    saver = backend.saver()
    cp = empty_checkpoint()
    cp["channel_versions"] = {"messages": 1, "v": 1}
    cp["channel_values"] = {"messages": [HumanMessage("hi", id="m1")], "v": "value"}
    config = saver.put(CONFIG, cp, {"source": "input", "step": -1}, {"messages": 1, "v": 1})
    saver.put_writes(config, [("v", "write")], "task-1")


def tamper(backend: Backend, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to every stored line (JSON objects) of thread ``t``.

    Each edited line gets a valid checksum (`dumps_line`), as an attacker with write
    access would give it: the checksum catches accidents, so these tests reach the
    decoder with hostile content."""
    if backend.name == "jsonl":
        path = backend._path("t")  # type: ignore[union-attr]
        objs = [json.loads(line) for line in path.read_text().splitlines()]
        for obj in objs:
            edit(obj)
        path.write_bytes(b"".join(dumps_line(o) for o in objs))
        return
    key = backend._key("t")  # type: ignore[union-attr]
    for i, raw in enumerate(backend.client.lrange(key, 0, -1)):  # type: ignore[union-attr]
        obj = json.loads(raw)
        edit(obj)
        backend.client.lset(key, i, dumps_line(obj).rstrip(b"\n"))  # type: ignore[union-attr]


def plant(place: str, enc: Any) -> Callable[[dict[str, Any]], None]:
    def edit(obj: dict[str, Any]) -> None:
        if place == "value" and obj["t"] == "ckpt":
            obj["values"]["v"] = [1, enc]
        elif place == "write" and obj["t"] == "writes":
            obj["w"][0][2] = enc
        elif place == "metadata" and obj["t"] == "ckpt":
            for key in ("meta", "meta_delta"):
                obj.pop(key, None)
            obj["meta_serde"] = enc["serde"]
        elif place == "extra" and obj["t"] == "ckpt":
            obj["extra_serde"] = enc["serde"]
        elif place == "message" and obj["t"] == "msg":
            obj.pop("msg", None)
            obj.update({"type": "human", "id": "m1", "serde": enc["serde"]})

    return edit


def read(backend: Backend) -> Any:
    """Everything a graph reads of the thread: values, metadata, writes, history."""
    saver = backend.saver()
    tup = saver.get_tuple(CONFIG)
    list(saver.list(CONFIG))
    return tup


def assert_inert(backend: Backend, canary: Path, caplog: pytest.LogCaptureFixture) -> Any:
    """Read the tampered thread: a clear error or plain data, and the canary silent."""
    with caplog.at_level(logging.WARNING):
        try:
            tup = read(backend)
        except CorruptLogError as exc:
            assert "line" in str(exc)
            tup = None
    assert not canary.exists(), f"class code ran: {canary.read_text()}"
    if tup is not None:
        found = [
            tup.checkpoint["channel_values"].get("v"),
            tup.metadata,
            tup.checkpoint.get("extra"),
            *[w[2] for w in tup.pending_writes],
        ]
        assert not any(isinstance(v, CANARIES) for v in _leaves(found))
        assert not any(isinstance(v, type) for v in _leaves(found))  # a class made anew
    return tup


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, (list, tuple)) and not isinstance(value, CANARIES):
        return [x for v in value for x in _leaves(v)]
    return [value]


@pytest.mark.parametrize("name", sorted(VALUE_TAGS))
@pytest.mark.parametrize("place", ["value", "write"])
def test_value_tags_never_run_class_code(backend, canary, caplog, place, name):
    seed(backend)
    tamper(backend, plant(place, VALUE_TAGS[name]))
    assert_inert(backend, canary, caplog)


@pytest.mark.parametrize("name", sorted(SERDE_PAYLOADS))
@pytest.mark.parametrize("place", ["metadata", "extra", "message"])
def test_serde_payloads_never_run_class_code(backend, canary, caplog, place, name):
    seed(backend)
    tamper(backend, plant(place, {"serde": SERDE_PAYLOADS[name]}))
    tup = assert_inert(backend, canary, caplog)
    if place == "message":  # a message body decodes to a LangChain message, or is refused
        if name != "msgpack-pydantic-v2-meta-eq":
            assert tup is None
        else:  # a blocked class's fields, with a message type: LangChain's class
            assert tup is not None
            sent = tup.checkpoint["channel_values"]["messages"]
            assert [type(m) for m in sent] == [HumanMessage]


def test_a_plain_model_comes_back_without_running_its_validators(backend, canary, caplog):
    seed(backend)
    tamper(backend, plant("value", {"model": [MOD, "CanaryValidated"], "json": {"x": 7}}))
    value = assert_inert(backend, canary, caplog).checkpoint["channel_values"]["v"]
    assert type(value) is CanaryValidated and value.x == 7


def test_classes_with_their_own_code_come_back_as_plain_data_with_the_fix(
    backend, canary, caplog, monkeypatch
):
    from langgraph_ctx.codec import classes

    monkeypatch.setattr(classes, "_warned", set())  # one warning per class and process
    seed(backend)
    tamper(backend, plant("value", VALUE_TAGS["model"]))
    value = assert_inert(backend, canary, caplog).checkpoint["channel_values"]["v"]
    assert value == {"x": 1}
    assert f"{MOD}.CanaryModel comes back as plain data" in caplog.text
    assert "allowed_types=[CanaryModel]" in caplog.text


def test_a_json_payload_is_plain_data(backend, canary, caplog):
    """LangChain's reviver would build the object; the codec reads JSON as data."""
    seed(backend)
    tamper(backend, plant("value", {"serde": SERDE_PAYLOADS["json-lc2-model"]}))
    value = assert_inert(backend, canary, caplog).checkpoint["channel_values"]["v"]
    assert value["lc"] == 2 and value["id"][-1] == "CanaryModel"


@pytest.mark.parametrize(
    "name",
    [
        ["langchain_core.messages.ai", "AIMessage"],
        ["langchain_core.tools.structured", "StructuredTool"],
        ["langchain_core.language_models.chat_models", "BaseChatModel"],
        ["langchain_core.prompts.prompt", "PromptTemplate"],
        ["os", "system"],
        ["builtins", "eval"],
        ["subprocess", "Popen"],
        ["langgraph_ctx.saver.log", "LogSaver"],
    ],
)
def test_framework_classes_and_functions_are_refused(backend, canary, caplog, name):
    # loaded, as in a LangChain app: the refusal must not rest on "not imported"
    import langchain_core.language_models.chat_models
    import langchain_core.prompts.prompt
    import langchain_core.tools.structured  # noqa: F401

    seed(backend)
    tamper(backend, plant("value", {"model": name, "json": {"content": "x", "template": "x"}}))
    with pytest.raises(CorruptLogError, match="refusing model"):
        read(backend)
    assert not canary.exists()


def test_allowlisted_by_name_still_never_rebuilds_a_message_from_a_class_tag(backend):
    saver_kwargs = {"allowed_types": [("langchain_core.messages.ai", "AIMessage")]}
    seed(backend)
    tamper(backend, plant("value", {"model": ["langchain_core.messages.ai", "AIMessage"],
                                    "json": {"content": "x"}}))  # fmt: skip
    with pytest.raises(CorruptLogError, match="refusing model"):
        backend.saver(**saver_kwargs).get_tuple(CONFIG)


def test_a_module_that_is_not_loaded_is_not_imported(backend, caplog, monkeypatch):
    from langgraph_ctx.codec import classes

    monkeypatch.setattr(classes, "_warned", set())
    seed(backend)
    tamper(backend, plant("value", {"model": ["json.tool", "Main"], "json": {}}))
    assert "json.tool" not in sys.modules
    with caplog.at_level(logging.WARNING):
        value = backend.saver().get_tuple(CONFIG).checkpoint["channel_values"]["v"]
    assert value == {} and "json.tool" not in sys.modules
    assert "not loaded" in caplog.text


def test_the_command_line_main_never_runs_under_asyncio(backend):
    """`{"model": ["langgraph_ctx.cli.__main__", "X"]}` once ran `main()` inside
    `aget_state`; its `SystemExit` ended the host process with code 0."""
    seed(backend)
    tamper(backend, plant("value", {"model": ["langgraph_ctx.cli.__main__", "X"], "json": {}}))
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from typing import Any
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph_ctx.errors import CorruptLogError
        class State(MessagesState):
            v: Any
        saver = {backend.saver_code()}
        builder = StateGraph(State)
        builder.add_node("n", lambda s: {{}})
        builder.add_edge(START, "n")
        graph = builder.compile(checkpointer=saver)
        async def main():
            config = {{"configurable": {{"thread_id": "t"}}}}
            try:
                state = await graph.aget_state(config)
                print("READ", state.values.get("v"))
            except CorruptLogError as exc:
                print("CORRUPT", exc)
        asyncio.run(main())
        print("STILL ALIVE", "langgraph_ctx.cli.__main__" in sys.modules)
        sys.exit(3)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr
    assert "STILL ALIVE False" in proc.stdout
    assert "READ {}" in proc.stdout or "CORRUPT" in proc.stdout


def test_system_exit_raised_while_decoding_becomes_corrupt_log_error(backend, monkeypatch):
    """Whatever a decoder raises, even a BaseException, surfaces as CorruptLogError."""
    from langgraph_ctx.codec import classes

    seed(backend)
    tamper(backend, plant("value", {"model": [MOD, "CanaryValidated"], "json": {"x": 1}}))

    def hostile(*args: Any) -> Any:
        raise SystemExit(0)

    monkeypatch.setattr(classes, "_bare_model", hostile)
    with pytest.raises(CorruptLogError, match="SystemExit"):
        backend.saver().get_tuple(CONFIG)


def test_pickle_payloads_are_refused_everywhere(backend, canary, caplog):
    pickled = {"serde": ["pickle", b64(b"cos\nsystem\n(S'true'\ntR.")]}
    for place in ("value", "write", "metadata", "message"):
        seed(backend)
        tamper(backend, plant(place, pickled))
        with pytest.raises(CorruptLogError, match="refusing a pickle payload"):
            read(backend)
        backend.saver().delete_thread("t")
    assert not canary.exists()
