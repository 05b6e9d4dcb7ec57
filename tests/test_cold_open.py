"""Cold opens: what a fresh process reads, built cheaply and exactly (issue #16, item 2)."""

from __future__ import annotations

import orjson
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx.codec.messages import (
    MESSAGE_CLASSES,
    _constructible,
    message_from_json,
    message_to_json,
)
from langgraph_ctx.errors import CodecError

MESSAGES: list[BaseMessage] = [
    HumanMessage("hi"),
    HumanMessage("hi", id="a1", name="bob"),
    HumanMessage([{"type": "text", "text": "x"}, "y"]),
    SystemMessage("sys", additional_kwargs={"k": {"z": [1, 2]}}),
    AIMessage("", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}], id="x"),
    AIMessage(
        "ok",
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        response_metadata={"model": "m", "finish_reason": "stop"},
    ),
    AIMessage(
        "ok",
        usage_metadata={
            "input_tokens": 1,
            "output_tokens": 2,
            "total_tokens": 3,
            "input_token_details": {"cache_read": 1},
        },
    ),
    AIMessage(
        "x",
        additional_kwargs={
            "tool_calls": [
                {"id": "1", "function": {"name": "f", "arguments": "{}"}, "type": "function"}
            ]
        },
    ),
    AIMessage(
        "x",
        invalid_tool_calls=[
            {"name": "f", "args": "{", "id": "1", "error": None, "type": "invalid_tool_call"}
        ],
    ),
    ToolMessage("res", tool_call_id="c1", name="f"),
    ToolMessage("res", tool_call_id="c1", status="error"),
    ToolMessage("res", tool_call_id="c1", artifact={"a": 1}),
    ChatMessage("x", role="r"),
    FunctionMessage("x", name="f"),
    AIMessageChunk("x", id="1"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_built_messages_equal_validated_ones(message: BaseMessage) -> None:
    """The unvalidated construction returns exactly what validation would: same class,
    fields (in the same order: fingerprints compare them in order), fields set, extras."""
    data = orjson.loads(orjson.dumps(message_to_json(message)))
    cls = MESSAGE_CLASSES[data["type"]]
    validated = cls.model_validate(dict(data))
    built = message_from_json(dict(data))
    assert type(built) is type(validated)
    assert list(built.__dict__.items()) == list(validated.__dict__.items())
    assert built.__pydantic_fields_set__ == validated.__pydantic_fields_set__
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built == validated == message


def test_plain_messages_take_the_cheap_path() -> None:
    """The common shapes (a chat turn, a tool call and its result) are not validated."""
    for message in (
        HumanMessage("hi", id="1"),
        AIMessage("", id="2", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        ToolMessage("r", tool_call_id="c", name="f", id="3"),
    ):
        data = orjson.loads(orjson.dumps(message_to_json(message)))
        assert _constructible(MESSAGE_CLASSES[data["type"]], data) is not None


def test_built_message_shares_nothing_with_the_parsed_line() -> None:
    data = {"type": "human", "content": [{"type": "text", "text": "x"}], "additional_kwargs": {}}
    data["additional_kwargs"] = {"k": [1]}
    before = orjson.loads(orjson.dumps(data))
    built = message_from_json(data)
    built.content[0]["text"] = "changed"  # type: ignore[index]
    built.additional_kwargs["k"].append(2)
    assert data == before


@pytest.mark.parametrize(
    "data",
    [
        {"type": "human", "content": 5},
        {"type": "human", "content": "x", "id": 7},
        {"type": "ai", "content": "x", "tool_calls": [{"name": 1, "args": {}}]},
        {"type": "tool", "content": "x"},
    ],
)
def test_unusual_bodies_are_still_validated(data: dict) -> None:
    """A tampered body is not built blindly: it goes through validation, which refuses
    it with a `CodecError` (or coerces it exactly as validation always did)."""
    cls = MESSAGE_CLASSES[data["type"]]
    assert _constructible(cls, dict(data)) is None
    try:
        validated = cls.model_validate(dict(data))
    except Exception:
        with pytest.raises(CodecError):
            message_from_json(dict(data))
    else:
        assert message_from_json(dict(data)) == validated
